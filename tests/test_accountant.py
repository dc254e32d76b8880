"""The certified accountant against exact enumeration, composition, and inverse calibration.

Soundness is tested, not assumed: for explicit finite mechanisms (k-ary RR, binary RR, local
hashing, subset selection) the exact epsilon of the shuffled histogram (``jaxshuffle.exact``,
worst case over the others' candidate datasets) must satisfy lower <= exact <= upper.
Compile cost: every distinct (window, batch) shape compiles a program (~5-10 s here), so the
exact comparisons run as ONE batched ``amplify`` call (module fixture).
"""
from __future__ import annotations

import itertools
import math

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_randomizers import rows_binary_rr, rows_grr, rows_local_hash

from jaxshuffle import exact
from jaxshuffle import randomizers as R
from jaxshuffle._programs import optimised_programs
from jaxshuffle.accountant import (
    JOB_ROLES,
    AmplificationReport,
    CalibrationStatus,
    UpperSource,
    amplification_jobs,
    amplify,
    calibrate_eps0,
    calibrate_n,
    combine_amplification,
)
from jaxshuffle.accountant.parallel import (
    basic_parallel_params,
    hierarchical_betas,
    hierarchical_range_query,
    parallel_amplify,
    parallel_params,
)
from jaxshuffle.pair import TwoCountPair
from jaxshuffle.search import Status, epsilon

# --------------------------------------------------------------------------------------
# Mechanisms from their definitions (independent of the catalog formulas): the builders of
# tests/test_randomizers.py (checked there against the catalog), plus subset selection.
# --------------------------------------------------------------------------------------


def rows_subset(eps, d, k):
    e = math.exp(eps)
    outs = list(itertools.combinations(range(d), k))
    rows = [np.array([e if x in S else 1.0 for S in outs]) for x in range(d)]
    return np.array([r / r.sum() for r in rows])


def _cases():
    """(label, VRParams, LowerParams, matrix) for symmetric finite mechanisms (pair x0=0, x1=1)."""
    out = []
    for eps in (0.5, 1.0, 2.5):
        for k in (2, 3, 4):
            out.append((f"grr eps0={eps} k={k}", R.grr(eps, k), R.grr_lower(eps, k), rows_grr(eps, k)))
    for eps in (1.0, 2.5):
        for d in (2, 3):
            out.append((f"brr eps0={eps} d={d}", R.binary_rr(eps, d), R.binary_rr_lower(eps, d),
                        rows_binary_rr(eps, d)))
    for eps, d, k in ((1.0, 4, 2), (2.5, 4, 1)):
        out.append((f"subset eps0={eps} d={d} k={k}", R.subset_selection(eps, d, k),
                    R.subset_selection_lower(eps, d, k), rows_subset(eps, d, k)))
    for eps, d, l, fam, coll in ((1.0, 3, 2, "all", 0.5), (2.5, 3, 3, "injective", 0.0)):
        out.append((f"local-hash eps0={eps} l={l} {fam}", R.local_hash(eps, l, coll),
                    R.local_hash_lower(eps, l, coll), rows_local_hash(eps, d, l, fam)))
    return out


def _random_mechanisms(count: int, seed: int = 2024):
    """Random 3-4-input mechanisms whose input pairs have different total variations.

    Parameters read off the matrix: p = largest ratio, beta = largest TV (over all pairs),
    q = p. No Theorem 5.1 parameters (no symmetry): lower is the trivial pair (0).
    """
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        K, Y = int(rng.integers(3, 5)), int(rng.integers(3, 6))
        L = rng.uniform(0, 1, (K, Y)) * rng.uniform(0.5, 3.0)
        M = np.exp(L * (rng.uniform(0, 1, (K, Y)) < 0.5))
        M /= M.sum(axis=1, keepdims=True)
        p = float((M[:, None, :] / M[None, :, :]).max())
        tv = 0.5 * np.abs(M[:, None, :] - M[None, :, :]).sum(axis=-1)
        if p <= 1 + 1e-6:
            continue
        out.append((f"random #{len(out)}", R.VRParams(p, min(float(tv.max()), (p - 1) / (p + 1)), p), None, M))
    return out


N_VALUES = (2, 3, 5, 9, 16)  # one window size (16): two compiled programs
DELTAS = (0.01, 1e-3)
NO_LOWER = R.LowerParams(1.0, 0.0, 1.0, 1.0)  # alpha = 0: a pair with eps = 0 (trivially a lower bound)


def _exact(c, nn, d):
    M = c[3]
    if c[2] is None:  # asymmetric: every ordered pair of inputs
        cand = "mixtures" if nn <= 3 else "all-equal"
        return max(exact.worst_case_epsilon(M, x0, x1, nn, d, cand).epsilon
                   for x0 in range(len(M)) for x1 in range(len(M)) if x0 != x1)
    cand = "mixtures" if nn <= (3 if c[0].startswith("subset") else 5) else "all-equal"
    return exact.worst_case_epsilon(M, 0, 1, nn, d, cand).epsilon


@pytest.fixture(scope="module")
def batch():
    """One batched amplify over every (mechanism, n, delta); exact values alongside."""
    grid = [(c, nn, d) for c in _cases() for nn in N_VALUES for d in DELTAS
            if not (nn > 9 and ("d=3" in c[0] or "local-hash" in c[0]))]  # enumeration takes seconds
    grid += [(c, nn, 0.05) for c in _random_mechanisms(20) for nn in (2, 3)]
    rows, ex = [], []
    for c, nn, d in grid:
        ex.append(_exact(c, nn, d))
        rows.append((c, nn, d))
    stack = lambda f: np.array([float(f(c)) for c, _, _ in rows])  # noqa: E731
    params = R.VRParams(stack(lambda c: c[1].p), stack(lambda c: c[1].beta), stack(lambda c: c[1].q))
    low = lambda c: NO_LOWER if c[2] is None else c[2]  # noqa: E731
    lower = R.LowerParams(stack(lambda c: low(c).p0), stack(lambda c: low(c).beta), stack(lambda c: low(c).q0),
                          stack(lambda c: low(c).q1))
    n = np.array([n for _, n, _ in rows], dtype=float)
    delta = np.array([d for _, _, d in rows])
    # The opt-in (u+v)-scaled variant is included: this batch is its empirical soundness check.
    rep = amplify(params, n, delta, lower_params=lower, scaled_variant=True)
    return rows, rep, np.array(ex)


@pytest.mark.slow
def test_lower_le_exact_le_upper(batch):
    rows, rep, ex = batch
    upper, lower, paper = (np.asarray(x) for x in (rep.upper, rep.lower, rep.paper))
    # bare parameters carry no mechanism, so the opt-in scaled pair is not proven for them: certified
    # everywhere except where it gives ``upper`` (this batch is its empirical soundness check)
    scaled = np.asarray(rep.upper_source) == UpperSource.SCALED
    np.testing.assert_array_equal(np.asarray(rep.certified), ~scaled)
    assert np.asarray(rep.has_lower).all()
    assert set(np.asarray(rep.status).tolist()) <= {Status.CONVERGED, Status.ZERO}
    bad_up = [(rows[i][0][0], rows[i][1], rows[i][2], ex[i], upper[i]) for i in range(len(rows))
              if not ex[i] <= upper[i] + 1e-9]
    bad_lo = [(rows[i][0][0], rows[i][1], rows[i][2], lower[i], ex[i]) for i in range(len(rows))
              if not lower[i] <= ex[i] + 1e-9]
    assert not bad_up, bad_up
    assert not bad_lo, bad_lo
    # random mechanisms (pairs with TV < beta): the (u+v)-scaled pair gives upper somewhere
    rand = np.array([c[2] is None for c, _, _ in rows])
    assert (np.asarray(rep.upper_source)[rand] == UpperSource.SCALED).sum() >= 5
    assert (upper <= np.asarray(rep.worst_case) + 1e-15).all()
    # The paper's Thm 4.7 value falls below the exact epsilon somewhere in this batch (w > 0).
    below = (paper < ex - 1e-6) & ~np.asarray(rep.paper_certified) & ~rand
    assert below.sum() >= 5
    # The Thm 5.1 pair with x* = x0 (added by amplify) is exact for GRR at n = 2 (one other user).
    grr2 = np.array([c[0].startswith("grr") and n == 2 for c, n, _ in rows])
    np.testing.assert_allclose(lower[grr2], ex[grr2], rtol=2e-6, atol=1e-9)
    assert (lower[~rand] >= 0.5 * ex[~rand]).all()


@pytest.mark.slow
def test_counterexample_math_md_section5():
    """n = 2, 3-ary RR, eps0 = 1, delta = 0.01: exact 0.969408; the paper's 4.7 value 0.914553 is below it."""
    M = rows_grr(1.0, 3)
    ex = exact.epsilon(M, 0, 1, (0,), 0.01)
    assert ex == pytest.approx(0.969408, abs=1e-6)
    rep = amplify(R.grr(1.0, 3), 2, 0.01, lower_params=R.grr_lower(1.0, 3))
    assert isinstance(rep, AmplificationReport)
    assert float(rep.upper) >= 0.969408 and float(rep.upper) >= ex
    assert float(rep.paper) == pytest.approx(0.914553, abs=1e-6)
    assert not bool(rep.paper_certified) and bool(rep.certified)
    assert float(rep.lower) <= ex + 1e-9 and float(rep.lower) == pytest.approx(ex, abs=1e-6)
    # k-ary RR carries its mechanism: upper is the blanket pair's value, which meets exact here
    # (MATH.md section 10 cross-check 0.9694082); the worst-case pair gives 0.981112.
    assert int(rep.upper_source) == UpperSource.BLANKET
    assert float(rep.upper) == pytest.approx(ex, abs=2e-6) and float(rep.blanket) == float(rep.upper)
    assert float(rep.worst_case) == pytest.approx(0.981112, abs=1e-6)
    # The two-count rules alone: the worst-case pair (proven); the opt-in scaled pair gives 0.977728.
    two = amplify(R.grr(1.0, 3), 2, 0.01, upper_from="worst-case")
    assert int(two.upper_source) == UpperSource.WORST_CASE
    assert float(two.upper) == pytest.approx(0.981112, abs=1e-6)
    scaled = amplify(R.grr(1.0, 3), 2, 0.01, scaled_variant=True, upper_from="worst-case")
    assert int(scaled.upper_source) == UpperSource.SCALED
    assert float(scaled.upper) == pytest.approx(0.977728, abs=1e-6) and float(scaled.upper) >= ex
    only = amplify(R.grr(1.0, 3), 2, 0.01, upper_from="blanket")
    assert float(only.upper) == float(rep.upper) and int(only.upper_source) == UpperSource.BLANKET


@pytest.mark.slow
def test_krr_amplify_blanket_between_exact_bounds():
    """k-ary RR through amplify (the blanket pair and exact datasets folded in): on every tried
    (eps0, k, n, delta), lower <= exact (worst case over the others' datasets, enumerated) <= upper,
    upper never above the worst-case pair, and the blanket is the source wherever it is smaller."""
    cases = [(e, k, nn, d) for e in (0.5, 2.0) for k in (3, 5) for nn in (2, 3, 5) for d in (0.01, 0.1)]
    e, k, nn, d = (np.array([c[i] for c in cases], dtype=float) for i in range(4))
    rep = amplify(R.grr(e, k), nn, d)
    ex = np.array([exact.worst_case_epsilon(rows_grr(c[0], c[1]), 0, 1, c[2], c[3], "mixtures").epsilon
                   for c in cases])
    upper, lower = np.asarray(rep.upper), np.asarray(rep.lower)
    assert (ex <= upper + 1e-9).all(), [(c, x, u) for c, x, u in zip(cases, ex, upper) if x > u + 1e-9]
    assert (lower <= ex + 1e-9).all(), [(c, lo, x) for c, lo, x in zip(cases, lower, ex) if lo > x + 1e-9]
    assert (upper <= np.asarray(rep.worst_case)).all() and np.asarray(rep.has_lower).all()
    src = np.asarray(rep.upper_source)
    smaller = np.asarray(rep.blanket) < np.asarray(rep.worst_case)
    assert smaller.sum() >= len(cases) // 2  # the blanket is tighter on most of this grid
    assert (src[smaller & (src != UpperSource.TV)] == UpperSource.BLANKET).all()


@pytest.mark.slow
def test_upper_from_rejects_bad_values():
    with pytest.raises(ValueError, match=r"^upper_from: must be one of"):
        amplify(R.grr(1.0, 3), 10, 0.01, upper_from="clone")
    with pytest.raises(ValueError, match=r"^upper_from: 'blanket' needs a randomizer that carries"):
        amplify(R.general(1.0), 10, 0.01, upper_from="blanket")


@pytest.mark.slow
def test_multi_message_blanket_count():
    """Balcer et al. (uniform blanket bits): the pair is exact; n users send n*m blanket bits."""
    m, n, delta = 2, 3, 0.05
    rep = amplify(R.balcer_uniform(m), n, delta)
    # rows: input-dependent message of x = 0 / 1 (deterministic), blanket bit (uniform)
    M = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    ex = exact.epsilon(M, 0, 1, (2,) * (n * m), delta)
    assert ex <= float(rep.upper) + 1e-9
    assert float(rep.upper) == pytest.approx(ex, rel=1e-5)
    assert bool(rep.paper_certified) and float(rep.paper) == pytest.approx(float(rep.upper), rel=1e-12)


def test_input_validation():
    with pytest.raises(ValueError, match=r"^n: must be a finite integer >= 1, got 2.5"):
        amplify(R.grr(1.0, 3), 2.5, 0.01)
    with pytest.raises(ValueError, match=r"^delta: must lie in \(0, 1\)"):
        amplify(R.grr(1.0, 3), 10, 1.0)
    with pytest.raises(ValueError, match=r"^beta: must lie in"):
        amplify(R.VRParams(2.0, 0.9, 2.0), 10, 0.01)
    with pytest.raises(ValueError, match=r"^lower_params\[0\]: single-message"):
        amplify(R.balcer_uniform(2), 10, 0.01, lower_params=R.grr_lower(1.0, 3))
    with pytest.raises(ValueError, match=r"^randomizer: must be a VRParams"):
        amplify((2.0, 0.1, 2.0), 10, 0.01)
    with pytest.raises(ValueError, match=r"shapes do not broadcast"):
        amplify(R.grr(np.ones(3), 3), np.array([2, 3]), 0.01)


@pytest.mark.slow
def test_trivial_and_zero_beta():
    """delta >= beta gives eps = 0 (D_1 of the shuffle <= TV of the victim's message)."""
    rep = amplify(R.VRParams(np.array([1.0, 3.0]), np.array([0.0, 0.01]), np.array([1.0, 3.0])), 5, 0.05)
    np.testing.assert_array_equal(np.asarray(rep.upper), [0.0, 0.0])
    assert (np.asarray(rep.upper_source) == UpperSource.TV).all()


@pytest.mark.slow
def test_amplify_is_jobs_then_combine():
    """amplify = amplification_jobs -> one batched search -> combine_amplification (numpy gives the same).

    These two halves are what jaxshuffle.sweeps runs with its own (deduplicated) searches; a
    job's result is read only where the job is ``needed`` (fillers elsewhere change nothing).
    """
    e, k = np.array([0.5, 1.0, 3.0]), np.array([2.0, 3.0, 3.0])
    params, lp = R.grr(e, k), R.grr_lower(e, k)
    n, delta = 12, np.array([0.2, 0.01, 1e-3])
    # the two-count rules only: the k-RR blanket pair is folded in after combine (with_mechanism_bounds).
    # Both halves by the optimised programs: a process's first small call may run the quickly compiled
    # one, a few ulps apart (jaxshuffle._programs), and this compares the two paths bit for bit.
    with optimised_programs():
        rep = amplify(params, n, delta, lower_params=lp, scaled_variant=True, upper_from="worst-case")
        info, jobs = amplification_jobs(params, n, delta, lp, scaled_variant=True)
        roles = [j.role for j in jobs]
        assert roles == ["worst_case", "scaled", "paper", "lower", "lower_x0"] and set(roles) <= set(JOB_ROLES)
        assert np.asarray(jobs[1].needed).tolist() == [False, True, True]  # binary RR (w = 0): no scaled pair
        stacked = TwoCountPair(*(np.stack([np.broadcast_to(np.asarray(getattr(j.pair, f)), (3,)) for j in jobs])
                                 for f in ("u", "v", "w", "r0", "r1")))
        res = epsilon(stacked, np.broadcast_to(np.asarray(info.n_engine), (5, 3)), np.stack([j.delta for j in jobs]))
        needed = np.stack([np.broadcast_to(np.asarray(j.needed), (3,)) for j in jobs])
        lower = np.where(needed, np.asarray(res.lower), 0.0)
        upper = np.where(needed, np.asarray(res.upper), np.inf)
        status = np.where(needed, np.asarray(res.status), Status.INVALID).astype(np.int8)
    got = combine_amplification(info, roles, lower, upper, status, xp=np)
    for key, want in rep._asdict().items():
        np.testing.assert_array_equal(np.asarray(getattr(got, key)), np.asarray(want), err_msg=key)
        assert np.asarray(getattr(got, key)).dtype == np.asarray(want).dtype, key
    # without the paper's pair and lower bounds (what the calibrations evaluate)
    info2, jobs2 = amplification_jobs(params, n, delta, scaled_variant=True, with_paper=False)
    assert [j.role for j in jobs2] == ["worst_case", "scaled"]
    got2 = combine_amplification(info2, ["worst_case", "scaled"], lower[:2], upper[:2], status[:2], xp=np)
    np.testing.assert_array_equal(got2.upper, np.asarray(rep.upper))
    assert np.isnan(got2.paper).all() and (got2.status_paper == Status.INVALID).all()
    assert not np.asarray(got2.has_lower).any() and (got2.lower == 0).all() and (got2.status_lower == Status.ZERO).all()
    with pytest.raises(ValueError, match=r"^lower_params\[0\]: single-message"):
        amplification_jobs(R.balcer_uniform(2), 10, 0.01, R.grr_lower(1.0, 3))


# --------------------------------------------------------------------------------------
# (u+v)-scaled variant: the shape property its use for smaller-TV input pairs relies on
# --------------------------------------------------------------------------------------


def test_scaled_bound_unimodal_in_alpha():
    """g(a) = (p+1) a D_t(clone p, r = p a/q) is not monotone in a but unimodal on (0, 1/(p+1)].

    That is what makes min(worst-case, g(alpha)) valid for every input pair with TV <= beta
    (module docstring of jaxshuffle.accountant). Checked with scipy's binomial tails.
    """
    from reference import hockey_stick_window_scipy

    worst_non_monotone = 0
    for eps0, n, eps in itertools.product((0.5, 1.0, 3.0, 5.0), (10, 100, 1000), (0.05, 0.2, 0.6)):
        p = math.exp(eps0)
        if eps >= eps0:
            continue
        a = np.linspace(0.01, 1.0, 60) / (p + 1)
        g = np.array([(p + 1) * ai * hockey_stick_window_scipy(p / (p + 1), 1 / (p + 1), 0.0, ai, n, eps)
                      for ai in a])
        peak = int(np.argmax(g))
        tol = 1e-12 * g.max()
        assert (np.diff(g[: peak + 1]) >= -tol).all() and (np.diff(g[peak:]) <= tol).all(), (eps0, n, eps)
        worst_non_monotone += peak < len(a) - 1
    assert worst_non_monotone > 10  # the naive monotonicity in beta is false


# --------------------------------------------------------------------------------------
# Parallel composition (Theorem 6.1) and the Section 7.3 range-query example
# --------------------------------------------------------------------------------------


def test_parallel_params_and_basic():
    comps = R.grr(2.0, np.array([2.0, 4.0, 8.0]))
    w = np.array([0.2, 0.3, 0.5])
    adv = parallel_params(comps, w)
    basic = basic_parallel_params(comps)
    p = math.exp(2.0)
    assert float(adv.p) == pytest.approx(p) and float(adv.q) == pytest.approx(p)
    assert float(adv.beta) == pytest.approx(sum(wi * (p - 1) / (p + k - 1) for wi, k in zip(w, (2, 4, 8))), rel=1e-14)
    assert float(basic.beta) == pytest.approx((p - 1) / (p + 1), rel=1e-14)
    with pytest.raises(ValueError, match=r"^weights: must sum to 1"):
        parallel_params(comps, np.array([0.2, 0.3, 0.4]))


def test_parallel_params_raise_p_rather_than_lower_the_mixed_beta():
    """Two components at the rounding edge (Laplace's eps0 = 2.3e-16 values with p = e^eps0 as it rounds):
    the weighted beta 1.15e-16 exceeds (p-1)/(p+1) = 1.11e-16 of the rounded p. The mixture keeps
    beta and raises p (docs/math.md section 8, "Rounding against the range"); p was capped before."""
    beta = -math.expm1(-0.5 * 2.3e-16)
    comps = R.VRParams(jnp.full(2, math.exp(2.3e-16)), jnp.full(2, beta), jnp.full(2, math.exp(2.3e-16)))
    adv = parallel_params(comps, np.array([0.5, 0.5]))
    assert float(adv.beta) == beta
    assert float(adv.p) > math.exp(2.3e-16) and float(adv.beta) <= (float(adv.p) - 1) / (float(adv.p) + 1)


def test_parallel_amplify_matches_mixture_exact():
    """Algorithm 2 with GRR on 2 and 4 values (weights 1/2): exact shuffled epsilon <= upper <= basic."""
    eps0, n, delta = 1.0, 3, 0.01
    comps = R.grr(eps0, np.array([2.0, 4.0]))
    rep = parallel_amplify(comps, np.array([0.5, 0.5]), n, delta)
    # explicit parallel randomizer on inputs {0,..,3}: query 1 reports x mod 2 by binary GRR, query 2 x by 4-GRR
    M2, M4 = rows_grr(eps0, 2), rows_grr(eps0, 4)
    M = np.hstack([0.5 * M2[np.arange(4) % 2], 0.5 * M4])
    ex = max(exact.worst_case_epsilon(M, x0, x1, n, delta, "mixtures").epsilon for x0, x1 in ((0, 1), (0, 2)))
    assert ex <= float(rep.upper) + 1e-9 <= float(rep.basic) + 2e-9
    assert not bool(rep.paper_certified)


@pytest.mark.slow
def test_hierarchical_range_query():
    H = 4
    betas = np.asarray(hierarchical_betas(3.0, H))
    p = math.exp(3.0)
    np.testing.assert_allclose(betas, [(p - 1) / (p + 2 ** (H - h) - 1) for h in range(H)], rtol=1e-14)
    assert betas[-1] == pytest.approx((p - 1) / (p + 1))
    rep = hierarchical_range_query(np.array([1.0, 3.0]), H, 16, 0.05)
    upper, basic, paper, sep = (np.asarray(x) for x in (rep.upper, rep.basic, rep.paper, rep.separate))
    assert (upper <= basic + 1e-12).all() and (basic < sep).all()  # n users together beat n/H per level
    assert (paper <= upper + 1e-12).all()  # Theorem 6.1's value (not certified) is the smallest
    np.testing.assert_allclose(np.asarray(rep.beta_bar),
                               [np.mean(np.asarray(hierarchical_betas(e, H))) for e in (1.0, 3.0)])
    with pytest.raises(ValueError, match=r"^n: must be an integer >= H"):
        hierarchical_range_query(1.0, H, 3, 1e-5)


# --------------------------------------------------------------------------------------
# Inverse calibration
# --------------------------------------------------------------------------------------

CAL_RTOL = 1e-4


@pytest.mark.usefixtures("release_programs_after")
@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # ~15 s each (CI budget)
@given(target=st.floats(0.05, 2.0), n=st.sampled_from([2, 5, 12]), k=st.sampled_from([2, 3, 10]))
def test_calibrate_eps0_never_overshoots(target, n, k):
    cal = calibrate_eps0("grr", target, n, 0.01, k=k, rtol=CAL_RTOL)
    value, over, up = (float(x) for x in (cal.value, cal.over, cal.upper))
    assert int(cal.status) == CalibrationStatus.CONVERGED
    assert 0 < over - value <= CAL_RTOL * over
    # independent re-evaluation of both ends, each alone as the calibration evaluates it: a
    # batch's compiled program (bucket_plans: largest threshold step of its points) depends on
    # the other points, and may round differently (seen: [value, over] together moved upper by 6e-13)
    re_up = np.array([float(amplify(R.grr(np.array([e]), k), n, 0.01).upper[0]) for e in (value, over)])
    assert re_up[0] <= target and up == re_up[0]  # never above the target
    assert re_up[1] > target  # so value is within rtol of the largest feasible eps0


@pytest.mark.slow
def test_calibrate_n_smallest():
    # the two-count rules: the k-RR blanket's plans change with every probed n (a cold blanket
    # calibrate_n compiles ~13 programs, ~110 s on 2 cores); the search logic is the same
    target = np.array([1.5, 1.3])
    cal = calibrate_n("grr", target, 0.2, eps0=2.0, k=3, upper_from="worst-case")
    n = np.asarray(cal.value)
    assert (np.asarray(cal.status) == CalibrationStatus.CONVERGED).all()
    assert np.all(n >= 2) and np.all(n == np.round(n))
    assert (np.asarray(cal.over) == n - 1).all()
    assert (np.asarray(cal.upper) <= target).all()  # certified at n
    # the bound is exactly 0 from the limit (~5e8) down to n ~ 30 (delta = 0.2): no slope to predict from,
    # so the search halves log n (at most log2(log2(5e8)) < 5 probes) instead of dividing n by 4 (13 probes);
    # then at most 5 integer steps within [1, 32), the limit's probe and the answer's re-certification
    assert cal.probes <= 1 + 5 + 5 + 1
    rep = amplify(R.grr(2.0, 3), n - 1, 0.2, upper_from="worst-case")  # n - 1 users do not reach the target
    assert (np.asarray(rep.upper) > target).all()


def test_calibration_errors():
    with pytest.raises(ValueError, match=r"^randomizer: unknown name"):
        calibrate_eps0("nope", 0.5, 100, 1e-6)
    with pytest.raises(ValueError, match=r"^randomizer: 'metric-laplace' has no eps0 option"):
        calibrate_eps0("metric-laplace", 0.5, 100, 1e-6, dmax=2.0)
    with pytest.raises(ValueError, match=r"^k: required option"):
        calibrate_eps0("grr", 0.5, 100, 1e-6)
    with pytest.raises(ValueError, match=r"^k: must be an integer >= 2"):
        calibrate_eps0("grr", 0.5, 100, 1e-6, k=1)
    with pytest.raises(ValueError, match=r"^target_eps: must be a finite number > 0"):
        calibrate_eps0("grr", -1.0, 100, 1e-6, k=3)
    with pytest.raises(ValueError, match=r"^zz: not an option of randomizer 'grr'"):
        calibrate_n("grr", 0.5, 1e-6, eps0=1.0, k=3, zz=1)


@pytest.mark.slow
def test_calibrate_with_callable():
    cal = calibrate_eps0(lambda e: R.grr(e, 3), np.array([0.3, 0.6]), 2, 0.01, rtol=1e-3)
    assert (np.asarray(cal.upper) <= [0.3, 0.6]).all()
    assert (np.asarray(cal.status) == CalibrationStatus.CONVERGED).all()


@pytest.mark.slow
def test_calibrate_n_unattainable_answers_at_once_with_the_best_reachable_value():
    """Issue reproducer: the target is unattainable below the cost cap; one probe, not minutes."""
    cal = calibrate_n("general", 1e-4, 1e-10, eps0=5.0)
    assert int(cal.status) == CalibrationStatus.UNATTAINABLE and cal.probes == 1
    assert np.isinf(float(cal.value)) and float(cal.upper) > 1e-4
    # the best reachable value is the certified bound at the limit probed
    direct = amplify(R.general(5.0), float(cal.over), 1e-10, with_paper=False).upper
    assert float(cal.upper) == float(direct)


@pytest.mark.slow
def test_eager_amplify_compiles_only_its_searches():
    """amplify on plain values computes its jobs and their combination in numpy: a first call of a
    new shape compiles the searches (``call``) and JAX's copies to the device (``stage``), and none
    of the ~25 small programs that each eager jnp operation compiled. Under tracing the same rules
    run in jnp: the jobs' ``u + v`` and its derivative in p, ``(p+1)/(p+3)`` and ``2/(p+3)^2`` for
    ``beta = (p-1)/(p+3)``."""
    import jax
    from conftest import compiled_programs
    e = np.linspace(0.5, 3.0, 23)  # a shape no other test uses
    p = np.exp(e)
    vr = R.VRParams(p, (p - 1) / (p + 3), p)
    lp = R.LowerParams(p, (p - 1) / (p + 3), p + 0.5, p)
    with compiled_programs() as names:
        rep = amplify(vr, 1e4, 1e-6, lower_params=lp)
    assert names and set(names) <= {"call", "stage"}, names
    assert all(isinstance(x, jax.Array) for x in rep)
    assert np.all(np.asarray(rep.lower) <= np.asarray(rep.upper))

    def uv(q):
        info, _ = amplification_jobs(R.VRParams(q, (q - 1) / (q + 3), q), 1e4, 1e-6, lower_params=lp)
        return info.uv

    eager = np.asarray(uv(p))
    value, slope = jax.jvp(uv, (jnp.asarray(p),), (jnp.ones_like(jnp.asarray(p)),))
    np.testing.assert_allclose(eager, (p + 1) / (p + 3), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(value), eager, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(slope), 2 / (p + 3) ** 2, rtol=1e-12)
