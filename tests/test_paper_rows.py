"""Rows of the seed paper that a reader looks for: Figures 3-5 (issue 22).

Expected values are derived independently of the code under test: the protocols' own
guarantees are solved with mpmath, the balls-into-bins mechanism is enumerated exactly from its
definition, and the paper's printed claims (Section 7.2, 7.3) are the assertions' targets.
docs/math.md section 19.
"""
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from jaxshuffle.randomizers import multi_message as mm
from jaxshuffle.search import epsilon

# ---------------------------------------------------------------------------------------
# Figures 3 and 4: the protocols' own guarantees
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("eps_prime, n, delta", [(0.5, 1e4, 1e-6), (1.0, 1e4, 1e-6), (0.2, 1e5, 1e-7),
                                                 (1.5, 1e5, 1e-7)])
def test_cheu_zhilyaev_flip_solves_the_fake_users_condition(eps_prime, n, delta):
    # f (1 - f) N = (33/5) ((e^eps' + 1)/(e^eps' - 1))^2 log(4/delta), smaller root, by mpmath.
    mpmath.mp.dps = 40
    e = mpmath.e ** mpmath.mpf(eps_prime)
    c = mpmath.mpf(33) / 5 * ((e + 1) / (e - 1)) ** 2 * mpmath.log(4 / mpmath.mpf(delta))
    f_ref = mpmath.findroot(lambda f: f * (1 - f) * n - c, mpmath.mpf("1e-3"))
    assert 0 < f_ref < 0.5
    f = float(mm.cheu_zhilyaev_flip(eps_prime, n, delta))
    assert f == pytest.approx(float(f_ref), rel=1e-10)
    # the inverse recovers eps'
    assert float(mm.cheu_zhilyaev_guarantee(f, n, delta)) == pytest.approx(eps_prime, rel=1e-9)


def test_cheu_zhilyaev_no_guarantee_below_its_threshold():
    # n = 1e4, delta = 1e-6: the condition needs N > 4 c, i.e. coth^2(eps'/2) < N/(4 (33/5) log(4/delta)),
    # eps' > 2 arcoth(sqrt(1e4 / (26.4 log(4e6)))) = 0.4028...; below it there is no f < 1/2.
    threshold = 2 * math.atanh(math.sqrt(4 * 6.6 * math.log(4e6) / 1e4))
    assert 0.40 < threshold < 0.41
    f = np.asarray(mm.cheu_zhilyaev_flip(np.array([threshold * 0.99, threshold * 1.01]), 1e4, 1e-6))
    assert np.isnan(f[0]) and 0 < f[1] < 0.5
    assert math.isinf(float(mm.cheu_zhilyaev_guarantee(0.5, 100.0, 1e-6)))


def test_balls_into_bins_calibration_is_figure_4_caption():
    # n = 32 log(2/delta) d / (eps'^2 s): delta = 1e-8, d = 100, s = 8, eps' = 1 -> 32 * 19.11383 * 12.5
    n_ref = mpmath.floor(32 * mpmath.log(2 / mpmath.mpf("1e-8")) * 100 / 8)
    assert int(n_ref) == 7645
    assert float(mm.balls_into_bins_messages(1.0, 100, 8, 1e-8)) == 7645.0
    eps = float(mm.balls_into_bins_guarantee(7645.0, 100, 8, 1e-8))
    assert 1.0 < eps < 1.0 + 1e-4  # floor(N) makes eps' a hair larger than asked
    assert float(mm.extra_amplification_ratio(1.0, 0.25)) == 4.0


def _balls_exact_delta(eps, n_blanket, r):
    """Exact hockey-stick divergence of shuffled balls-into-bins, from the definition.

    Disjoint special sets S0, S1 (d >= 2s), ``r = s/d``. The victim's ball lands uniformly in
    S_x; ``n_blanket`` blanket balls are uniform on the d bins. For a histogram h,
    P0(h)/P1(h) = (balls in S0)/(balls in S1) = A/B (removing one ball from bin b of a
    multinomial histogram multiplies its probability by h_b d/N'), so (A, B) is sufficient:
    under x0, (A, B) = (1 + A', B'), under x1, (A', 1 + B'), (A', B') ~ Multinomial(N'; r, r).
    """
    n = n_blanket
    lg = math.lgamma

    def logm(a, b):
        if a < 0 or b < 0 or a + b > n:
            return -math.inf
        rest = 1.0 - 2.0 * r
        return (lg(n + 1) - lg(a + 1) - lg(b + 1) - lg(n - a - b + 1) + (a + b) * math.log(r)
                + (n - a - b) * (math.log(rest) if rest > 0 else (0.0 if n - a - b == 0 else -math.inf)))

    t = math.exp(eps)
    total = 0.0
    for a in range(0, n + 2):
        for b in range(0, n + 2 - a):
            p0, p1 = logm(a - 1, b), logm(a, b - 1)
            if p0 == -math.inf:
                continue
            total += max(0.0, math.exp(p0) - t * (math.exp(p1) if p1 > -math.inf else 0.0))
    return total


@pytest.mark.parametrize("d, s, n_blanket, delta", [(8, 2, 60, 1e-3), (16, 2, 150, 1e-4), (6, 3, 40, 0.01)])
def test_balls_into_bins_certified_bound_is_exact(d, s, n_blanket, delta):
    # Section 5: balls-into-bins is exactly tight (Table 4 pair (inf, 1, d/s), the paper says d >= 3s; the
    # derivation in _balls_exact_delta needs only disjoint special sets, d >= 2s).
    from jaxshuffle.accountant import amplify

    rep = amplify(mm.balls_into_bins(d, s, n_blanket), 1, delta, rtol=1e-9)  # 1 user: n_blanket balls
    up = float(rep.upper)
    r = s / d
    assert _balls_exact_delta(up, n_blanket, r) <= delta * (1 + 1e-7)  # sound
    assert _balls_exact_delta(up * (1 - 1e-6), n_blanket, r) > delta  # and tight (the same number)
    # and the pair search agrees with the enumeration at the exact point
    assert float(epsilon(rep_pair(d, s), n_blanket + 1, delta, rtol=1e-9).upper) == pytest.approx(up, rel=1e-8)


def rep_pair(d, s):
    return mm.balls_into_bins(d, s, 1).pair()


@pytest.mark.slow
def test_figures_3_and_4_reproduce_the_printed_savings():
    """Section 7.2: numerical variation-ratio saves about 75 % against the original works, the
    Theorem 4.2 closed form more than 50 %, and both closed forms are tighter than the originals."""
    from jaxshuffle.comparison import multi_message_figure

    ep = np.array([0.05, 0.2, 0.5, 1.0, 1.5])
    figs = [multi_message_figure("cheu-zhilyaev", ep, 0.01 / n, n=n) for n in (1e4, 1e5)]
    figs += [multi_message_figure("balls-into-bins", ep, 1e-8, d=d, s=s) for d, s in ((16, 1), (128, 8), (100, 8))]
    for fig in figs:
        v = fig.valid
        assert v.sum() >= 2
        ratios = fig.ratios()
        if fig.protocol == "balls-into-bins":
            # "about 75 %": ratio eps'/eps in [3.3, 6] (savings 70-83 %) for the certified bound
            assert np.all((ratios["upper"][v] > 3.3) & (ratios["upper"][v] < 6.0)), (fig.protocol, ratios["upper"])
        else:
            # Cheu-Zhilyaev's row is certified by the standard clone (docs/math.md 3.1; the paper's ~75 %
            # rests on the stronger clone, not proven for it): "more than 50 %", as the paper says of Thm 4.2
            assert np.all(ratios["upper"][v] > 2.0), (fig.protocol, ratios["upper"])
        assert np.all(ratios["paper"][v] >= ratios["upper"][v] * (1 - 1e-9))
        # Theorem 4.2: more than 50 % where it applies; Theorem 4.3: better than the original
        ok42 = v & np.isfinite(fig.thm42)
        assert ok42.sum() >= 2 and np.all(ratios["thm42"][ok42] > 2.0)
        ok43 = v & np.isfinite(fig.thm43)
        assert ok43.sum() >= 2 and np.all(ratios["thm43"][ok43] > 1.0)
    # Figure 3: n = 1e4 has no original guarantee at eps' = 0.05 and 0.2 (threshold 0.40)
    assert list(figs[0].valid) == [False, False, True, True, True]
    # Figure 4 depends on d and s only through d/s
    a = multi_message_figure("balls-into-bins", ep[:2], 1e-8, d=16, s=2)
    b = multi_message_figure("balls-into-bins", ep[:2], 1e-8, d=64, s=8)
    np.testing.assert_allclose(a.upper, b.upper, rtol=1e-12)


# ---------------------------------------------------------------------------------------
# Figure 5: hierarchical range queries (Section 7.3)
# ---------------------------------------------------------------------------------------

def _hierarchy_matrix(eps0, H):
    """The parallel randomizer of Section 7.3 built from its definition: input j in [0, d), level h
    uniform in [0, H), report the bucket j // 2^h among d / 2^h buckets by GRR; output (h, bucket)."""
    d = 2 ** H
    e = math.exp(eps0)
    cols = []
    for h in range(H):
        k = d // 2 ** h
        block = np.full((d, k), 1.0 / (e + k - 1))
        block[np.arange(d), np.arange(d) // 2 ** h] = e / (e + k - 1)
        cols.append(block / H)
    return np.hstack(cols)


@pytest.mark.parametrize("eps0, H", [(1.0, 3), (3.0, 4), (0.5, 5)])
def test_range_query_beta_is_the_printed_average_not_the_scripts(eps0, H):
    from jaxshuffle.accountant.parallel import hierarchical_betas

    M = _hierarchy_matrix(eps0, H)
    np.testing.assert_allclose(M.sum(axis=1), 1.0, rtol=1e-12)
    tvs = [0.5 * np.abs(M[i] - M[j]).sum() for i in range(len(M)) for j in range(i + 1, len(M))]
    tv = max(tvs)
    p, d = math.exp(eps0), 2 ** H
    printed = sum((p - 1) / (p + d / 2 ** h - 1) for h in range(H)) / H
    assert tv == pytest.approx(printed, rel=1e-12)  # attained by j = 0, j' = d - 1 (different at every level)
    assert 0.5 * np.abs(M[0] - M[-1]).sum() == pytest.approx(printed, rel=1e-12)
    assert float(np.mean(np.asarray(hierarchical_betas(eps0, H)))) == pytest.approx(tv, rel=1e-12)
    script = (p - 1) / (p + d - 1) / H  # the authors' script's value: far below the randomizer's TV
    assert script < 0.5 * tv
    # it is the *smallest* pair's TV: inputs 0 and 1 differ only at the finest level
    assert min(tvs) == pytest.approx(script, rel=1e-12)
    assert 0.5 * np.abs(M[0] - M[1]).sum() == pytest.approx(script, rel=1e-12)


@pytest.mark.slow
def test_figure_5_savings_reproduce_only_with_the_scripts_beta():
    """Section 7.3 prints savings of about 75 % (advanced vs basic) and 80-95 % (vs separated) at
    d in {64, 2048}, n in {1e4, 1e5}. With the printed beta (the randomizer's true total variation)
    they do not reproduce at delta = 0.01/n; with the script's beta (finest level's term / H) they do."""
    from jaxshuffle.accountant.parallel import range_query_figure

    fig = range_query_figure(np.array([1.0, 3.0])[:, None, None], np.array([64.0, 2048.0])[None, :, None],
                             np.array([1e4, 1e5])[None, None, :])
    s_basic, s_best, s_worst = (fig.savings(a) for a in ("basic", "separate_best_paper", "separate_worst"))
    # printed formula (Theorem 6.1 as printed): short of the printed ~75 % against the certified basic composition
    assert np.all(s_basic["advanced_paper"] > 0.05) and np.all(s_basic["advanced_paper"] < 0.70)
    assert np.any(s_best["advanced_paper"] < 0)
    # the script's beta: >= 70 % against basic, 80-95 % against "separate, best", >= 80 % against "separate, worst"
    assert np.all(s_basic["advanced_script"] > 0.70)
    assert np.all((s_best["advanced_script"] > 0.80) & (s_best["advanced_script"] < 0.95))
    assert np.all(s_worst["advanced_script"] > 0.80)
    # what is certified: amplify's upper at beta_bar is the basic composition (no certified gain from
    # beta_bar), and the basic composition over all n users saves 60-80 % against the separated protocol
    np.testing.assert_allclose(fig.advanced_upper, fig.basic, rtol=1e-12)
    sep = 1.0 - fig.basic / fig.separate_worst
    assert np.all((sep > 0.60) & (sep < 0.80))
    assert np.all(fig.beta_script < fig.beta_bar)


# ---------------------------------------------------------------------------------------
# Figures 1 and 2: the randomizer-specific privacy blanket (gamma)
# ---------------------------------------------------------------------------------------

def _gamma(M):
    """Total variation similarity sum_y min_x M[x, y] of a probability matrix (rows: inputs)."""
    return float(M.min(axis=0).sum())


@pytest.mark.parametrize("eps0, d, k", [(1.3, 6, 2), (0.4, 5, 1), (3.0, 7, 4), (2.0, 5, 4)])
def test_gamma_subset_selection_by_enumeration(eps0, d, k):
    import itertools

    from jaxshuffle.closed_forms import gamma_subset_selection

    sets = list(itertools.combinations(range(d), k))
    e = math.exp(eps0)
    M = np.array([[e if x in S else 1.0 for S in sets] for x in range(d)])
    M /= M.sum(axis=1, keepdims=True)
    assert float(gamma_subset_selection(eps0, d, k)) == pytest.approx(_gamma(M), rel=1e-12)


@pytest.mark.parametrize("eps0, d, ell", [(1.0, 4, 3), (2.5, 3, 2), (0.3, 4, 4)])
def test_gamma_local_hash_by_enumeration(eps0, d, ell):
    import itertools

    from jaxshuffle.closed_forms import gamma_grr, gamma_local_hash

    # the family of all non-constant hash functions [d] -> [ell], uniform; output (H, y)
    family = [h for h in itertools.product(range(ell), repeat=d) if len(set(h)) > 1]
    e = math.exp(eps0)
    M = np.zeros((d, len(family) * ell))
    for i, h in enumerate(family):
        for x in range(d):
            for y in range(ell):
                M[x, i * ell + y] = (e if h[x] == y else 1.0) / (e + ell - 1) / len(family)
    np.testing.assert_allclose(M.sum(axis=1), 1.0, rtol=1e-12)
    assert float(gamma_local_hash(eps0, ell)) == pytest.approx(_gamma(M), rel=1e-12)
    # k-ary RR is local hashing with the identity hash: gamma = k/(e + k - 1)
    G = np.full((ell, ell), 1.0 / (e + ell - 1)) + np.eye(ell) * (e - 1) / (e + ell - 1)
    assert float(gamma_grr(eps0, ell)) == pytest.approx(_gamma(G), rel=1e-12)


@pytest.mark.slow
def test_compare_has_the_specific_blanket_row():
    from jaxshuffle import closed_forms as cf
    from jaxshuffle.comparison import BLANKET_SPECIFIC, compare

    eps0 = np.array([1.0, 3.0])
    n = np.array([1e4, 1e5])
    d, k = 16, np.array([[4.0], [1.0]])  # max(1, round(d/(e^eps0 + 1)))
    # the closed-form row is this test's subject: the matrix engine (which the row's certified upper would
    # run by default, a minute here) is tested in tests/test_blanket_matrix.py
    c = compare("subset-selection", eps0[:, None], n[None, :], 0.01 / n[None, :], d=d, k=k, upper_from="worst-case")
    row = c.bounds[BLANKET_SPECIFIC]
    assert row.kind == "reference" and row.valid.all() and not row.certified.any()
    e = np.exp(eps0)[:, None]
    gamma = d / (k * e + d - k)  # C(d, k) / (e C(d-1, k-1) + C(d-1, k))
    vh, _ = cf.blanket_hoeffding(n[None, :], eps0[:, None], 0.01 / n[None, :], gamma)
    vb, _ = cf.blanket_bennett(n[None, :], eps0[:, None], 0.01 / n[None, :], gamma)
    np.testing.assert_allclose(row.value, np.minimum(vh, vb), rtol=1e-12)
    # the specific blanket is tighter than the generic one (gamma > e^-eps0)
    generic = np.minimum(c.bounds["blanket Hoeffding (generic)"].value, c.bounds["blanket Bennett (generic)"].value)
    assert np.all(row.value < generic)
    # and it appears in the tidy table with its label
    assert sum(r["bound"] == BLANKET_SPECIFIC for r in c.rows()) == 4


# ---------------------------------------------------------------------------------------
# Theorem 5.1 lower bounds of the multi-message rows (Section 5: exactly tight ones)
# ---------------------------------------------------------------------------------------

def _cheu_exact_eps(f, n_blanket, delta):
    """Exact epsilon of shuffled fake users for the dataset x0 = e1 / x1 = e2, others e3, from the definition.

    Coordinates >= 3 of the victim's message have the same law under both inputs and are independent of
    coordinates (1, 2), so the counts of the patterns 10, 01, 11, 00 on coordinates (1, 2) over all
    messages are sufficient. Blanket messages (fakes, and the others' e3 flipped) show them w.p.
    f(1-f), f(1-f), f^2, (1-f)^2; the victim w.p. (1-f)^2, f^2, f(1-f), f(1-f) under x0 (10 <-> 01 under x1).
    """
    bl = np.array([f * (1 - f), f * (1 - f), f * f, (1 - f) ** 2])
    v0 = np.array([(1 - f) ** 2, f * f, f * (1 - f), f * (1 - f)])
    v1 = v0[[1, 0, 2, 3]]
    N = n_blanket
    c = np.array([(a, b, e, N + 1 - a - b - e) for a in range(N + 2) for b in range(N + 2 - a)
                  for e in range(N + 2 - a - b)], dtype=float)
    lg = np.vectorize(math.lgamma)

    def log_mult(cc):
        ok = (cc >= 0).all(axis=1)
        cs = np.where(cc >= 0, cc, 0)
        val = lg(N + 1) - lg(cs + 1).sum(axis=1) + (cs * np.log(bl)).sum(axis=1)
        return np.where(ok, val, -np.inf)

    P0 = sum(v0[i] * np.exp(log_mult(c - np.eye(4)[i])) for i in range(4))
    P1 = sum(v1[i] * np.exp(log_mult(c - np.eye(4)[i])) for i in range(4))
    assert abs(P0.sum() - 1) < 1e-12 and abs(P1.sum() - 1) < 1e-12

    def dlt(eps):  # symmetric under 10 <-> 01, so one direction suffices
        return np.maximum(P0 - math.exp(eps) * P1, 0.0).sum()

    lo, hi = 0.0, 20.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if dlt(mid) <= delta else (mid, hi)
    return hi


@pytest.mark.parametrize("f, n, m, delta, paper_below_exact", [(0.2, 3, 4, 0.01, True), (0.1, 5, 6, 1e-3, True),
                                                               (0.3, 4, 2, 0.05, False)])
def test_cheu_zhilyaev_lower_below_exact_below_upper(f, n, m, delta, paper_below_exact):
    from jaxshuffle.accountant import amplify
    from jaxshuffle.comparison import multi_message_lower

    n_bl = float(mm.lower_n_blanket("cheu-zhilyaev", n, m))
    assert n_bl == n * m + n - 1
    exact = _cheu_exact_eps(f, int(n_bl), delta)
    low = multi_message_lower("cheu-zhilyaev", n, delta, f=f, blanket_per_user=m, rtol=1e-9)
    up = amplify(mm.cheu_zhilyaev(f, m), n, delta)
    assert float(low.lower) <= exact * (1 + 1e-9)
    assert exact <= float(up.upper) * (1 + 1e-9)
    # the lower pair is the marker law (10, 01 counts): close to the exact value of the full pattern counts
    assert float(low.lower) > 0.5 * exact
    # the paper's Theorem 4.7 value (Table 4 pair, n m blanket messages) is below the exact epsilon of this
    # dataset in the first two cases: not an upper bound for fake users (beta = 1 - 2f < (p-1)/(p+1))
    assert (float(up.paper) < exact) == paper_below_exact


@pytest.mark.parametrize("d, s, m, n, delta", [(9, 3, 2, 100, 1e-3), (12, 2, 1, 100, 1e-3)])
def test_balls_into_bins_and_pure_dump_lower_meet_upper(d, s, m, n, delta):
    from jaxshuffle.accountant import amplify
    from jaxshuffle.comparison import multi_message_lower

    # balls-into-bins, d >= 3s: lower pair = upper pair = the exact law (test above), n m blanket balls
    low = multi_message_lower("balls-into-bins", n, delta, d=d, s=s, blanket_per_user=m, rtol=1e-9)
    up = amplify(mm.balls_into_bins(d, s, m), n, delta, rtol=1e-9)
    assert np.isfinite(float(low.lower))  # (1 - 1/d)^(n m) < delta: an empty marker set is rarer than delta
    exact_delta = _balls_exact_delta(float(low.lower), n * m, s / d)
    assert exact_delta >= delta * (1 - 1e-6)  # lower end of the bracket: not above the exact epsilon
    assert float(up.upper) == pytest.approx(float(low.upper), rel=1e-8)
    # pureDUMP, d >= 3: balls-into-bins with s = 1 and the victim's value itself
    low = multi_message_lower("pure-dump", n, delta, d=d, blanket_per_user=m, rtol=1e-9)
    up = amplify(mm.pure_dump(d, m), n, delta, rtol=1e-9)
    assert _balls_exact_delta(float(low.lower), n * m, 1 / d) >= delta * (1 - 1e-6)
    assert float(up.upper) == pytest.approx(float(low.upper), rel=1e-8)
    with pytest.raises(ValueError, match="^d: must be >= 3 s"):
        mm.balls_into_bins_lower(5, 2, 1)


# ---------------------------------------------------------------------------------------
# Theorem 5.1 lower bounds of single-message rows: PCKV-GRR
# ---------------------------------------------------------------------------------------

def _pckv_rows(eps1, eps2, d):
    """PCKV-GRR on one key-value pair, from its definition: <k, v> kept w.p. a b, value flipped w.p.
    a (1 - b), any other key with either value w.p. (1 - a)/(2(d - 1)) each."""
    e1, e2 = math.exp(eps1), math.exp(eps2)
    a, b = e1 / (e1 + d - 1), e2 / (e2 + 1)
    c = (1 - a) / (2 * (d - 1))
    outs = [(k, v) for k in range(d) for v in (1, -1)]
    return np.array([[a * b if o == x else a * (1 - b) if o[0] == x[0] else c for o in outs] for x in outs])


@pytest.mark.parametrize("eps1, eps2, d", [(1.0, 1.0, 3), (1.0, 1.0, 6), (0.2, 2.0, 3), (0.5, 3.0, 5),
                                           (2.0, 0.3, 4)])
def test_pckv_grr_lower_parameters_from_the_matrix(eps1, eps2, d):
    from jaxshuffle import exact
    from jaxshuffle.randomizers.key_value import pckv_grr_lower

    M = _pckv_rows(eps1, eps2, d)
    # x0 = <k0, +1> (row 0), x1 = <k1, +1> (row 2), others <k2, +1> (row 4)
    p0, beta, q0, q1 = exact.lower_bound_parameters(M, 0, 2, 4)
    low = pckv_grr_lower(eps1, eps2, d)
    for got, want in zip((low.p0, low.beta, low.q0, low.q1), (p0, beta, q0, q1)):
        assert float(got) == pytest.approx(want, rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("eps1, eps2", [(1.0, 1.0), (0.2, 2.0)])
def test_pckv_grr_lower_below_exact(eps1, eps2):
    from jaxshuffle import exact
    from jaxshuffle.accountant import amplify
    from jaxshuffle.randomizers import pckv_grr
    from jaxshuffle.randomizers.key_value import pckv_grr_lower

    d, delta = 3, 0.01
    M = _pckv_rows(eps1, eps2, d)
    for n in (2, 3):
        rep = amplify(pckv_grr(eps1, eps2, d), n, delta, lower_params=pckv_grr_lower(eps1, eps2, d))
        ex = max(exact.worst_case_epsilon(M, 0, x1, n, delta, "mixtures").epsilon for x1 in (1, 2))
        assert float(rep.lower) <= ex * (1 + 1e-9) <= float(rep.upper) * (1 + 2e-9)
        assert float(rep.lower) > 0


def _wheel_rows(eps0, d, s, arc):
    """Wheel with every item's arc disjoint (d arc <= 1), from its definition: inputs are the s-subsets,
    outputs the d arcs and the rest of the circle; density e^eps0/Omega on the input's arcs, 1/Omega elsewhere."""
    import itertools

    e = math.exp(eps0)
    omega = s * arc * e + 1 - s * arc
    sets = list(itertools.combinations(range(d), s))
    M = np.array([[arc * (e if j in X else 1.0) / omega for j in range(d)] + [(1 - d * arc) / omega] for X in sets])
    return M, sets


@pytest.mark.parametrize("eps0, d, s, arc", [(1.0, 3, 1, 0.2), (2.0, 6, 2, 0.1), (0.5, 7, 2, 0.05)])
def test_wheel_lower_parameters_from_the_matrix(eps0, d, s, arc):
    from jaxshuffle import exact
    from jaxshuffle.randomizers import wheel
    from jaxshuffle.randomizers.set_valued import wheel_lower

    M, sets = _wheel_rows(eps0, d, s, arc)
    np.testing.assert_allclose(M.sum(axis=1), 1.0, rtol=1e-12)
    x0, x1, xs = 0, sets.index(tuple(range(s, 2 * s))), sets.index(tuple(range(2 * s, 3 * s)))
    p0, beta, q0, q1 = exact.lower_bound_parameters(M, x0, x1, xs)
    low, up = wheel_lower(eps0, d, s, arc), wheel(eps0, d, s, arc)
    for got, want in zip((low.p0, low.beta, low.q0, low.q1), (p0, beta, q0, q1)):
        assert float(got) == pytest.approx(want, rel=1e-12)
    # exactly tight: the lower parameters are the upper ones
    assert (float(low.p0), float(low.beta), float(low.q0)) == pytest.approx((float(up.p), float(up.beta), float(up.q)))


@pytest.mark.slow
def test_wheel_lower_below_exact():
    from jaxshuffle import exact
    from jaxshuffle.accountant import amplify
    from jaxshuffle.randomizers import wheel
    from jaxshuffle.randomizers.set_valued import wheel_lower

    eps0, d, s, arc, delta = 1.5, 3, 1, 0.25, 0.01
    M, _ = _wheel_rows(eps0, d, s, arc)
    for n in (2, 3, 5):
        rep = amplify(wheel(eps0, d, s, arc), n, delta, lower_params=wheel_lower(eps0, d, s, arc))
        ex = exact.worst_case_epsilon(M, 0, 1, n, delta, "mixtures").epsilon
        assert 0 < float(rep.lower) <= ex * (1 + 1e-9) <= float(rep.upper) * (1 + 2e-9)


# ---------------------------------------------------------------------------------------
# Appendix I's last remark: the (q0, q1) pair as a "precise upper bound" for binary RR
# ---------------------------------------------------------------------------------------

def _rr2_exact_eps(eps0, n, m, delta):
    """Exact epsilon of shuffled randomized response on {0, 1} (keep w.p. a = e^eps0/(e^eps0+1)), victim
    0 vs 1, m of the n - 1 others holding 1: the count of ones is sufficient; both directions."""
    from scipy.stats import binom

    a = math.exp(eps0) / (math.exp(eps0) + 1)
    S = np.convolve(binom.pmf(np.arange(m + 1), m, a), binom.pmf(np.arange(n - m), n - 1 - m, 1 - a))
    return _laws_eps(np.convolve(S, [a, 1 - a]), np.convolve(S, [1 - a, a]), delta)


def _laws_eps(P, Q, delta, hi=30.0):
    """Smallest eps (bisection, upper end) with max(D_{e^eps}(P||Q), D_{e^eps}(Q||P)) <= delta, from the
    definition of the hockey-stick divergence on two enumerated output laws."""
    def d(e):
        t = math.exp(e)
        return max(np.maximum(P - t * Q, 0).sum(), np.maximum(Q - t * P, 0).sum())

    lo = 0.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if d(mid) <= delta else (mid, hi)
    return hi


@pytest.mark.parametrize("eps0, n, delta, m_worse", [(0.5, 10, 0.01, 1), (1.0, 30, 0.01, 1), (0.5, 30, 0.01, 2)])
def test_q0_q1_pair_is_not_an_upper_bound_for_binary_rr(eps0, n, delta, m_worse):
    """Appendix I calls the pair with q0 = 1, q1 = e^eps0 (others all x0) a precise upper bound for randomized
    response on 2 options. It is exact for that dataset, but a dataset with m_worse others holding x1 has a
    larger epsilon: the pair is not an upper bound. The certified bound (stronger clone) stays above."""
    from jaxshuffle.accountant import amplify
    from jaxshuffle.pair import vr_pair
    from jaxshuffle.randomizers import general

    p = math.exp(eps0)
    pair_eps = epsilon(vr_pair(p, (p - 1) / (p + 1), q0=1.0, q1=p), n, delta, rtol=1e-9)
    all_x0 = _rr2_exact_eps(eps0, n, 0, delta)
    assert float(pair_eps.upper) == pytest.approx(all_x0, rel=1e-7)  # the pair is the all-x0 dataset exactly
    worse = _rr2_exact_eps(eps0, n, m_worse, delta)
    assert worse > float(pair_eps.upper) * 1.002  # ... and another dataset is worse
    upper = float(amplify(general(eps0), n, delta).upper)
    assert max(_rr2_exact_eps(eps0, n, m, delta) for m in range(n)) <= upper * (1 + 1e-9)


def _em3_rows(ab, ac, bc):
    """Exponential mechanism for metric LDP on 3 options (McSherry and Talwar): P(y | x) proportional to
    exp(-D(x, y)/2); D-private since each factor changes by at most e^{D(x, x')/2}."""
    D = np.array([[0.0, ab, ac], [ab, 0.0, bc], [ac, bc, 0.0]])
    M = np.exp(-D / 2)
    return M / M.sum(axis=1, keepdims=True)


def _n2_exact_eps(M, x0, x1, other, delta):
    """Exact epsilon of two shuffled messages (victim x0 vs x1, one other user), from the definition:
    the output is the unordered pair of the two messages."""
    k = M.shape[1]

    def law(x):
        out = np.zeros((k, k))
        for y1 in range(k):
            for y2 in range(k):
                out[min(y1, y2), max(y1, y2)] += M[x, y1] * M[other, y2]
        return out.ravel()

    return _laws_eps(law(x0), law(x1), delta)


def test_q0_q1_pair_is_not_an_upper_bound_for_the_3_option_exponential_mechanism():
    """Appendix I's third example: distances D(a,b) = 0.5, D(a,c) = D(b,c) = 2 (symmetric in a, b, so
    Theorem 5.1's P0(Y0) = P1(Y1) holds), n = 2, delta = 0.01. The (q0, q1) pair (x* maximising
    min(q0, q1)) gives 0.1997; the dataset whose other user holds a gives 0.2028."""
    from jaxshuffle import exact
    from jaxshuffle.randomizers import LowerParams

    M = _em3_rows(0.5, 2.0, 2.0)
    p0, beta, q0, q1 = exact.lower_bound_parameters(M, 0, 1)
    pair_eps = float(epsilon(LowerParams(p0, beta, q0, q1).pair(), 2, 0.01, rtol=1e-9).upper)
    worst = max(_n2_exact_eps(M, 0, 1, o, 0.01) for o in range(3))
    assert worst == pytest.approx(_n2_exact_eps(M, 0, 1, 0, 0.01))
    assert worst > pair_eps * 1.01
    # for an asymmetric metric the pair is not even defined: P0(Y0) != P1(Y1)
    with pytest.raises(ValueError, match="P\\[R\\(x0\\) in Y0\\] == P\\[R\\(x1\\) in Y1\\]"):
        exact.lower_bound_parameters(_em3_rows(2.0, 3.0, 1.0), 0, 1)


@pytest.mark.parametrize("name, row, low, opts", [
    ("cheu-zhilyaev", mm.cheu_zhilyaev, mm.cheu_zhilyaev_lower, dict(f=0.2, blanket_per_user=4)),
    ("balls-into-bins", mm.balls_into_bins, mm.balls_into_bins_lower, dict(d=9, s=3, blanket_per_user=2)),
    ("pure-dump", mm.pure_dump, mm.pure_dump_lower, dict(d=12, blanket_per_user=1)),
])
def test_amplify_takes_multi_message_lower_parameters(name, row, low, opts):
    """amplify's lower for a multi-message row is its Theorem 5.1 pair with the row's own blanket count
    (the same search as comparison.multi_message_lower, checked by enumeration above), below upper."""
    from jaxshuffle.accountant import amplify
    from jaxshuffle.comparison import multi_message_lower
    from jaxshuffle.randomizers import LowerParams, grr

    n, delta = np.array([50.0, 200.0]), 1e-3
    rep = amplify(row(**opts), n, delta, lower_params=low(**opts), rtol=1e-9)
    ref = multi_message_lower(name, n, delta, rtol=1e-9, **opts)
    np.testing.assert_array_equal(np.asarray(rep.lower), np.asarray(ref.lower))
    assert np.all(np.asarray(rep.has_lower)) and np.all(np.asarray(rep.lower) <= np.asarray(rep.upper))
    assert float(low(**opts).n_blanket(50.0)) == float(mm.lower_n_blanket(name, 50.0, opts["blanket_per_user"]))
    single = LowerParams(*(np.float64(x) for x in (2.0, 0.1, 2.0, 2.0)))
    with pytest.raises(ValueError, match=r"^lower_params\[0\]: single-message lower parameters"):
        amplify(row(**opts), 50, delta, lower_params=single)
    with pytest.raises(ValueError, match=r"^lower_params\[0\]: multi-message lower parameters"):
        amplify(grr(1.0, 3), 50, delta, lower_params=low(**opts))


def _em3_vr_by_hand(M):
    """(p, beta, q) of the victim pair (0, 1) read off a 3x3 matrix with plain loops."""
    p = max(max(M[0, y] / M[1, y], M[1, y] / M[0, y]) for y in range(3))
    beta = 0.5 * sum(abs(M[0, y] - M[1, y]) for y in range(3))
    q = max(M[v, y] / M[x, y] for v in (0, 1) for x in range(3) for y in range(3))
    return p, beta, q


_EM3_DISTANCES = [(0.5, 2.0, 2.0), (1.0, 0.7, 0.4), (2.0, 3.0, 1.5), (0.1, 0.05, 0.08), (3.0, 1.5, 1.5)]


@pytest.mark.parametrize("d01, d02, d12", _EM3_DISTANCES)
def test_metric_exponential_row_matches_its_matrix(d01, d02, d12):
    """The catalog row's (p, beta, q) are the matrix's (built from the definition in this file), and
    within the metric-DP bounds p <= e^d01, q <= e^max(d) (Table 3's general row is looser)."""
    from jaxshuffle.randomizers import build

    v = build("metric-exponential", d01=d01, d02=d02, d12=d12)
    p, beta, q = _em3_vr_by_hand(_em3_rows(d01, d02, d12))
    assert float(v.p) == pytest.approx(p, rel=1e-13) and float(v.q) == pytest.approx(q, rel=1e-13)
    assert float(v.beta) == pytest.approx(min(beta, (p - 1) / (p + 1)), rel=1e-12, abs=1e-15)
    assert p <= math.exp(d01) * (1 + 1e-14) and q <= math.exp(max(d01, d02, d12)) * (1 + 1e-14)


@pytest.mark.parametrize("d01, d02, d12", _EM3_DISTANCES)
@pytest.mark.parametrize("n, delta", [(2, 0.01), (3, 0.01), (3, 0.1)])
def test_metric_exponential_upper_above_every_dataset(d01, d02, d12, n, delta):
    """Certified upper >= the exact epsilon of every dataset of the other n - 1 <= 2 users (all-equal and
    two-value mixtures are all datasets there), by enumeration."""
    from jaxshuffle import exact
    from jaxshuffle.accountant import amplify
    from jaxshuffle.randomizers import build

    worst = exact.worst_case_epsilon(_em3_rows(d01, d02, d12), 0, 1, n, delta, candidates="mixtures").epsilon
    upper = float(amplify(build("metric-exponential", d01=d01, d02=d02, d12=d12), n, delta).upper)
    assert worst <= upper * (1 + 1e-9)


def test_metric_exponential_rejects_non_metrics():
    from jaxshuffle.randomizers import build

    with pytest.raises(ValueError, match=r"^d12: must be at most the sum of the other two distances.*got 3"):
        build("metric-exponential", d01=1.0, d02=1.0, d12=3.0)
