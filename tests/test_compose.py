"""Composition over rounds (docs/math.md section 12): round PLDs, FFT composition, interop.

References, each independent of the code under test:
* the two-count pair's cells enumerated from its definition (pair.py's formula, lgamma), composed
  by brute-force sums over every tuple of cells;
* the shuffled k-RR mechanism's exact output histograms (``exact.histogram_log_pmfs``), composed
  the same way: the certified composition must never be below it;
* dp_accounting, composing the exported PLD with its own FFT;
* direct convolution (numpy) for the FFT's float and wrap-around errors.
"""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxshuffle as js
from jaxshuffle import exact
from jaxshuffle import randomizers as R
from jaxshuffle.accountant.compose import compose, compose_discrete, epsilon_over_rounds
from jaxshuffle.accountant.interop import from_dp_accounting, to_dp_accounting
from jaxshuffle.accountant.pld import DiscretePLD, rdp, round_pld, shuffled_round


def pair_cells(u, v, w, r0, r1, n):
    """(P, Q) over every count (a, b) of the two-count pair, from its definition (pair.py)."""
    N = n - 1
    lf = [math.lgamma(i + 1) for i in range(N + 2)]

    def M(a, b):
        if a < 0 or b < 0 or a + b > N:
            return 0.0
        rest = 1 - r0 - r1
        log = lf[N] - lf[a] - lf[b] - lf[N - a - b]
        for x, k in ((r0, a), (r1, b), (rest, N - a - b)):
            if k:
                if x == 0:
                    return 0.0
                log += k * math.log(x)
        return math.exp(log)

    P, Q = [], []
    for a in range(n + 1):
        for b in range(n + 1 - a):
            P.append(u * M(a - 1, b) + v * M(a, b - 1) + w * M(a, b))
            Q.append(v * M(a - 1, b) + u * M(a, b - 1) + w * M(a, b))
    return np.array(P), np.array(Q)


def composed_delta(P, Q, T, eps):
    """Exact delta(P^T || Q^T) at each eps, by summing over every T-tuple of outcomes."""
    keep = P > 0
    p, q = P[keep], Q[keep]
    with np.errstate(divide="ignore"):
        loss = np.log(p) - np.log(q)
    mass, total = np.ones(1), np.zeros(1)
    for _ in range(T):
        mass = (mass[:, None] * p[None, :]).ravel()
        total = (total[:, None] + loss[None, :]).ravel()
    out = []
    for e in np.atleast_1d(eps):
        with np.errstate(over="ignore", invalid="ignore"):
            g = np.where(np.isinf(total), 1.0, -np.expm1(np.minimum(e - total, 0.0)))
        out.append(float(np.sum(mass * g)))
    return np.array(out)


def krr(eps0, k):
    e = math.exp(eps0)
    return (np.full((k, k), 1.0) + (e - 1) * np.eye(k)) / (e + k - 1)


@pytest.mark.parametrize("fields,n,T", [
    ((0.75, 0.25, 0.0, 0.25, 0.25), 9, 2),      # stronger clone at eps0 = log 3
    ((0.7, 0.3, 0.0, 0.2, 0.35), 8, 2),         # asymmetric r0 != r1: both directions differ
    ((0.6, 0.4, 0.0, 0.3, 0.3), 6, 3),
])
def test_round_pld_brackets_the_pairs_exact_composition(fields, n, T):
    u, v, w, r0, r1 = fields
    pair = js.two_count_pair(*fields)
    r = round_pld(pair, n, discretization=1e-3)
    P, Q = pair_cells(u, v, w, r0, r1, n)
    eps = np.linspace(0.0, 1.5, 31)
    for up, lo, (A, B) in ((r.upper_forward, r.lower_forward, (P, Q)), (r.upper_backward, r.lower_backward, (Q, P))):
        ref = composed_delta(A, B, T, eps)
        hi = compose_discrete([(up, T)]).delta(eps)
        low = compose_discrete([(lo, T)]).delta(eps)
        assert np.all(low <= ref * (1 + 1e-9) + 1e-15), (low - ref).max()
        assert np.all(ref <= hi * (1 + 1e-9) + 1e-15), (ref - hi).max()
        # and close: the discretisation moves each loss by at most one grid step per round
        assert np.all(hi <= composed_delta(A, B, T, eps - T * 1e-3 * 1.01) + 1e-12)
    if r0 != r1:
        assert r.upper_backward is not r.upper_forward


@pytest.mark.parametrize("fields", [(0.75, 0.25, 0.0, 0.25, 0.25), (0.7, 0.3, 0.0, 0.2, 0.35)])
def test_round_pld_on_the_size_ladder_brackets_the_pairs_exact_round(fields):
    """The cells are planned on the programs' size ladder (others' counts and each row's window rounded up
    to quarter octaves of their units): at n = 230 the ladder widens the rows' window from the 144 counts
    they need to 160, past the row's last count for most rows, and the PLD still brackets the exact delta."""
    from jaxshuffle._numerics import quarter_octave
    from jaxshuffle.pld import two_count as tc

    u, v, w, r0, r1 = fields
    n = 230
    need = tc._cell_windows(r0, r1, n, tc.CELL_TAIL)
    window, _, row = tc._cell_windows(r0, r1, n, tc.CELL_TAIL, ladder=True)
    assert (need[0], need[2]) == (512, 144) and (window, row) == (512, 16 * quarter_octave(144 // 16)) == (512, 160)
    r = round_pld(js.two_count_pair(*fields), n, discretization=1e-3)
    P, Q = pair_cells(u, v, w, r0, r1, n)
    eps = np.linspace(0.0, 1.0, 21)
    for up, lo, (A, B) in ((r.upper_forward, r.lower_forward, (P, Q)), (r.upper_backward, r.lower_backward, (Q, P))):
        ref = composed_delta(A, B, 1, eps)
        assert np.all(compose_discrete([(lo, 1)]).delta(eps) <= ref * (1 + 1e-9) + 1e-15)
        assert np.all(ref <= compose_discrete([(up, 1)]).delta(eps) * (1 + 1e-9) + 1e-15)


def test_nearby_rounds_share_one_histogram_program():
    """Rounds at nearby eps0 (a tuning's probes) build their cells with one compiled program per laddered
    shape: the histogram program compiles once per distinct (window, row, bins) of the ladder, fewer than
    the shapes the rounds need unladdered. The shape counts come from the planner, not from a measurement."""
    from jaxshuffle.pld import two_count as tc
    from jaxshuffle.randomizers.clone import certified_worst_case_pair

    n, disc = 10_000, 2e-3
    eps0 = np.linspace(2.80, 2.95, 6)
    laddered, needed = set(), set()
    for e in eps0:
        u, v, _, r0, r1 = (float(x) for x in certified_worst_case_pair(R.grr(float(e), 2))[0].arrays())
        plan, _, cells, _ = tc._plan_cells(tc._Probabilities(u, v, r0, r1), n, disc, tc.CELL_TAIL)
        laddered.add((plan, cells))
        needed.add(tc._cell_windows(r0, r1, n, tc.CELL_TAIL)[::2])
    assert len(laddered) < len(needed)
    before = tc._histograms._cache_size()
    for e in eps0:
        shuffled_round(R.grr(float(e), 2), n, discretization=disc)
    assert tc._histograms._cache_size() - before == len(laddered)


@pytest.mark.slow
def test_single_round_reproduces_the_engines_bracket():
    pair = js.stronger_clone_pair(1.0)
    b = js.epsilon(pair, 10_000, 1e-6)
    r = round_pld(pair, 10_000, discretization=1e-6)
    c = compose([(r, 1)], 1e-6)
    assert c.lower <= b.lower + 1e-12 and b.upper <= c.upper + 1e-12
    assert c.upper - c.lower <= 3e-6  # within the grid (one step each way, plus error terms)


@pytest.mark.parametrize("others,T", [((0, 0, 0), 2), ((2, 2, 1, 0), 2), ((1, 2), 3), ((0, 0, 0, 0, 0, 0, 0), 2)])
def test_certified_composition_is_above_the_exact_shuffled_mechanism(others, T):
    """k-RR (k = 3, eps0 = 1) through a shuffler, n <= 8: exact histograms, composed T times."""
    eps0, k = 1.0, 3
    n = len(others) + 1
    log_p, log_q = exact.histogram_log_pmfs(krr(eps0, k), 0, 1, list(others))
    P, Q = np.exp(log_p), np.exp(log_q)
    r = shuffled_round(R.grr(eps0, k), n, discretization=1e-3)
    eps = np.linspace(0.0, 2.0, 41)
    hi = compose_discrete([(r.upper_forward, T)]).delta(eps)
    for A, B in ((P, Q), (Q, P)):
        assert np.all(composed_delta(A, B, T, eps) <= hi * (1 + 1e-9) + 1e-15)


@pytest.mark.slow
def test_must_show_t100_against_dp_accounting():
    """eps0 = 1, n = 1e4, delta = 1e-6, T = 100: dp_accounting on the same pair's PLD (~0.508)."""
    pytest.importorskip("dp_accounting")
    r = round_pld(js.stronger_clone_pair(1.0), 10_000, rounds=100)
    ours = compose([(r, 100)], 1e-6)
    theirs = to_dp_accounting(r, neighboring_relation="replace_one").self_compose(100).get_epsilon_for_delta(1e-6)
    assert 0.50 < theirs < 0.52
    assert ours.lower <= theirs <= ours.upper
    assert ours.upper <= theirs * 1.001  # certified upper within 0.1 %


@pytest.mark.slow
def test_dp_accounting_from_the_pairs_exact_pmfs():
    """Independent of our cells: dp_accounting discretises the pair's exact (a, b) pmfs itself."""
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pldm

    fields, n, T = (0.7, 0.3, 0.0, 0.3, 0.3), 300, 10
    P, Q = pair_cells(*fields, n)
    keep = (P > 0) & (Q > 0)
    assert P[~keep].sum() == 0 and Q[~keep].sum() == 0
    # dp_accounting takes log pmfs, mu_lower (= Q) first; loss = log(mu_upper / mu_lower)
    theirs = pldm.from_two_probability_mass_functions(
        dict(enumerate(np.log(Q[keep]))), dict(enumerate(np.log(P[keep]))), value_discretization_interval=1e-4)
    e_theirs = theirs.self_compose(T).get_epsilon_for_delta(1e-5)
    ours = compose([(round_pld(js.two_count_pair(*fields), n, discretization=1e-5), T)], 1e-5)
    assert ours.lower <= e_theirs + T * 1e-4 and e_theirs <= ours.upper + T * 1e-4
    assert abs(e_theirs - ours.upper) <= T * 2e-4


@pytest.mark.slow
def test_homogeneous_equals_heterogeneous_and_one_by_one():
    r = round_pld(js.stronger_clone_pair(1.0), 2_000, rounds=8)
    deltas = np.array([1e-4, 1e-6, 1e-8])
    same = compose([(r, 8)], deltas)
    split = compose([(r, 3), (r, 5)], deltas)
    singles = compose([(r, 1)] * 8, deltas)
    step = r.upper_forward.discretization
    for other in (split, singles):
        np.testing.assert_allclose(other.upper, same.upper, atol=2 * step)
        np.testing.assert_allclose(other.lower, same.lower, atol=2 * step)


@pytest.mark.slow
def test_heterogeneous_rounds_and_a_gaussian_round():
    pytest.importorskip("dp_accounting")
    from dp_accounting import NeighboringRelation
    from dp_accounting.pld import privacy_loss_distribution as pldm

    one = NeighboringRelation.REPLACE_ONE
    grid = 2e-5
    a = shuffled_round(R.grr(1.0, 10), 5_000, discretization=grid)
    b = shuffled_round(R.grr(2.0, 4), 20_000, discretization=grid)
    gauss_up = pldm.from_gaussian_mechanism(20.0, value_discretization_interval=grid, neighboring_relation=one)
    gauss_lo = pldm.from_gaussian_mechanism(20.0, value_discretization_interval=grid, pessimistic_estimate=False,
                                            neighboring_relation=one)
    g = from_dp_accounting(gauss_up, grid, optimistic=gauss_lo, source="gaussian", neighboring_relation=one)
    ours = compose([(a, 5), (b, 3), (g, 2)], 1e-6)
    ref = (to_dp_accounting(a, neighboring_relation=one).self_compose(5)
           .compose(to_dp_accounting(b, neighboring_relation=one).self_compose(3))
           .compose(gauss_up.self_compose(2)).get_epsilon_for_delta(1e-6))
    assert ours.lower <= ref + 1e-9 and abs(ref - ours.upper) <= 1e-4 * ref
    with pytest.raises(ValueError, match="discretization"):
        from_dp_accounting(gauss_up, 1e-4, neighboring_relation=one)


def test_fft_error_and_wraparound_against_direct_convolution():
    """The stated float-error bound holds (and is not vacuous); the window loses at most `tail`."""
    r = round_pld(js.stronger_clone_pair(0.5), 400, discretization=2e-4)
    p = r.upper_forward
    T = 6
    direct = p.probs.copy()
    for _ in range(T - 1):
        direct = np.convolve(direct, p.probs)
    c = compose_discrete([(p, T)], tail=1e-12)
    start = c.lower_index - T * p.lower_index
    assert start >= 0 and c.tail == 1e-12
    window = direct[start:start + len(c.probs)]
    outside = direct.sum() - window.sum()
    assert outside <= 2 * c.tail
    err = np.linalg.norm(np.asarray(c.probs)[:len(window)] - window)
    assert err <= c.fft_error + 2 * c.tail
    assert c.fft_error < 1e-11


def test_rdp_upper_bound_against_exact_renyi():
    fields, n = (0.7, 0.3, 0.0, 0.2, 0.35), 10
    P, Q = pair_cells(*fields, n)
    keep = (P > 0) | (Q > 0)
    P, Q = P[keep], Q[keep]
    orders = np.array([1.5, 2.0, 4.0, 16.0])
    exact_rdp = [max(np.log(np.sum(A ** a * B ** (1 - a))) / (a - 1) for A, B in ((P, Q), (Q, P))) for a in orders]
    bound = rdp(round_pld(js.two_count_pair(*fields), n, discretization=1e-4), orders)
    assert np.all(np.array(exact_rdp) <= bound)
    assert np.all(bound <= np.array(exact_rdp) + orders * 1e-4 + 1e-9)


@pytest.mark.slow
def test_epsilon_over_rounds_shape_and_monotone():
    r = round_pld(js.stronger_clone_pair(1.0), 10_000, rounds=50)
    out = epsilon_over_rounds(r, [1, 10, 50], [1e-5, 1e-7])
    assert out.upper.shape == (3, 2)
    assert np.all(np.diff(out.upper, axis=0) > 0) and np.all(out.upper[:, 1] > out.upper[:, 0])
    basic = 50 * float(js.epsilon(js.stronger_clone_pair(1.0), 10_000, 1e-5 / 50).upper)
    assert out.upper[2, 0] < basic / 3  # far below basic composition


@pytest.mark.slow
@settings(max_examples=8)
@given(st.floats(0.2, 3.0), st.integers(3, 9), st.integers(2, 3))
def test_property_clone_composition_brackets_enumeration(eps0, n, T):
    pair = js.stronger_clone_pair(eps0)
    u, v, w, r0, r1 = (float(x) for x in pair.arrays())
    P, Q = pair_cells(u, v, w, r0, r1, n)
    r = round_pld(pair, n, discretization=5e-4)
    eps = np.linspace(0, eps0 * T, 17)
    ref = composed_delta(P, Q, T, eps)
    assert np.all(compose_discrete([(r.lower_forward, T)]).delta(eps) <= ref * (1 + 1e-9) + 1e-15)
    assert np.all(ref <= compose_discrete([(r.upper_forward, T)]).delta(eps) * (1 + 1e-9) + 1e-15)


@pytest.mark.parametrize("call,pattern", [
    (lambda: round_pld(js.vr_pair(3.0, 0.2, 3.0), 100), "w must be 0"),
    (lambda: round_pld(js.stronger_clone_pair(1.0), 1), "n: must be a finite integer >= 2"),
    (lambda: round_pld(js.stronger_clone_pair(1.0), 100, discretization=1e-12), "discretization"),
    (lambda: round_pld(js.stronger_clone_pair([1.0, 2.0]), 100), "scalar"),
    (lambda: compose([], 1e-6), "rounds"),
    (lambda: compose([(round_pld(js.stronger_clone_pair(1.0), 100, discretization=1e-3), 0)], 1e-6), "count"),
    (lambda: compose([(round_pld(js.stronger_clone_pair(1.0), 100, discretization=1e-3), 2)], 1.5), "delta"),
    (lambda: compose([(round_pld(js.stronger_clone_pair(1.0), 100, discretization=1e-3), 1),
                      (round_pld(js.stronger_clone_pair(1.0), 100, discretization=2e-3), 1)], 1e-6), "discretization"),
    (lambda: shuffled_round("grr", 100), "randomizer"),
])
def test_bad_input_names_the_parameter(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_lower_pair_is_not_composed_as_certified():
    r = round_pld(js.two_count_pair(0.7, 0.3, 0.0, 0.2, 0.2, bound="lower"), 50, discretization=1e-3)
    assert not r.certified
    with pytest.raises(ValueError, match="not certified"):
        compose([(r, 2)], 1e-6)
    with pytest.raises(ValueError, match="not certified"):
        to_dp_accounting(r, neighboring_relation="replace_one")


def test_itertools_reference_agrees_with_vectorised_reference():
    """The brute-force reference itself, against a literal loop over tuples (T = 2)."""
    P, Q = pair_cells(0.7, 0.3, 0.0, 0.25, 0.25, 5)
    eps = 0.3
    loop = sum(P[i] * P[j] * max(0.0, 1 - math.exp(eps) * Q[i] * Q[j] / (P[i] * P[j]))
               for i, j in itertools.product(range(len(P)), repeat=2) if P[i] * P[j] > 0)
    assert composed_delta(P, Q, 2, eps)[0] == pytest.approx(loop, rel=1e-12)


def test_discrete_pld_fields():
    r = round_pld(js.stronger_clone_pair(1.0), 200, discretization=1e-3)
    assert isinstance(r.upper_forward, DiscretePLD) and r.upper_forward.pessimistic
    assert not r.lower_forward.pessimistic and r.lower_forward.infinity_mass == 0.0
    assert r.certified and r.max_loss == pytest.approx(1.0)


@pytest.mark.slow
def test_composed_epsilon_is_the_smallest_certified_bound():
    """docs/math.md 13: basic, advanced (DRV 2010 Thm III.3) and the PLD, each recomputed here."""
    from jaxshuffle.accountant import composed_epsilon

    rand, n = R.general(1.0), 5_000  # no blanket engine: keeps the test fast
    c = composed_epsilon(rand, n, [1, 30], [1e-5, 1e-7])
    assert c.upper.shape == c.upper_source.shape == (2, 2)
    Ts, ds = np.array([1, 30, 1, 30]), np.array([1e-5, 1e-5, 1e-7, 1e-7])
    one = np.asarray(js.amplify(rand, n, np.concatenate([ds / Ts, ds / (2 * Ts)])).upper)
    for i, T in enumerate((1, 30)):
        for j, d in enumerate((1e-5, 1e-7)):
            basic = T * one[2 * j + i]
            e = one[4 + 2 * j + i]
            advanced = min(math.sqrt(2 * T * math.log(2 / d)) * e + T * e * math.expm1(e), basic)
            assert c.basic[i, j] == pytest.approx(basic, rel=1e-12)
            assert c.advanced[i, j] == pytest.approx(advanced, rel=1e-12)
            values = {"basic": basic, "advanced": advanced, "PLD": c.pld[i, j]}
            assert c.upper[i, j] == pytest.approx(min(values.values()), rel=1e-12)
            assert values[str(c.upper_source[i, j])] == pytest.approx(c.upper[i, j], rel=1e-12)
    assert c.upper_source[1, 0] == "PLD" and c.lower[1, 0] <= c.pld[1, 0]
    with pytest.raises(ValueError, match="rounds: must be integers >= 1"):
        composed_epsilon(rand, n, [0], 1e-6)
    with pytest.raises(ValueError, match="delta: must lie in"):
        composed_epsilon(rand, n, [2], 1.0)


# --- the blanket pair's PLD (docs/math.md section 12.8) ----------------------------------------------

def symmetric_pair(rng, m):
    """A random symmetric pair: P = (a, b), Q = (b, a) over 2m outcomes (swapping halves maps P to Q)."""
    a, b = rng.random(m) ** 3, rng.random(m) ** 3
    total = a.sum() + b.sum()
    return np.concatenate([a, b]) / total, np.concatenate([b, a]) / total


def hockey_stick(P, Q, eps):
    return np.array([np.sum(np.maximum(P - math.exp(e) * Q, 0.0)) for e in np.atleast_1d(eps)])


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 6), st.sampled_from([1e-3, 7e-3, 2e-2]), st.integers(2, 3))
def test_property_connect_the_dots_dominates_the_profile_and_its_composition(seed, m, grid, T):
    """Upper profile values (exact, inflated at random) on a grid -> a PLD whose one-round and T-round
    deltas are >= the pair's exact ones at every eps (off-grid and negative included), mass ~ 1."""
    from jaxshuffle.accountant.profile_pld import connect_the_dots, to_discrete

    rng = np.random.default_rng(seed)
    P, Q = symmetric_pair(rng, m)
    loss_max = float(np.max(np.abs(np.log(P / Q))))
    j = np.unique(np.concatenate([[0], np.sort(rng.choice(np.arange(1, 400), 40, replace=False)),
                                  [math.ceil(loss_max / grid) + 1]])).astype(np.int64)
    exact_u = hockey_stick(P, Q, j * grid)
    noisy = exact_u * (1 + rng.random(j.size) * rng.choice([0, 1e-3, 0.1])) + rng.choice([0, 1e-9])
    pld = to_discrete(j, *connect_the_dots(np.asarray(j, np.float64), grid, noisy), grid)
    assert 1.0 <= pld.probs.sum() + pld.infinity_mass <= 1.0 + 1e-9 + 2 * j.size * noisy.max() * 0.1
    eps = np.linspace(-loss_max - 0.1, loss_max + 0.1, 301)
    one = np.array([pld.delta(e) for e in eps])
    assert np.all(hockey_stick(P, Q, eps) <= one * (1 + 1e-12) + 1e-15)
    composed = compose_discrete([(pld, T)]).delta(eps)
    assert np.all(composed_delta(P, Q, T, eps) <= composed * (1 + 1e-9) + 1e-15)


def test_connect_the_dots_of_exact_values_is_tight_on_its_grid():
    """With the exact profile at every grid point the PLD's delta equals it there (the hull keeps them)."""
    from jaxshuffle.accountant.profile_pld import connect_the_dots, to_discrete

    P, Q = symmetric_pair(np.random.default_rng(3), 4)
    grid = 1e-3
    j = np.arange(0, math.ceil(np.max(np.log(P / Q)) / grid) + 2)
    exact_u = hockey_stick(P, Q, j * grid)
    pld = to_discrete(j, *connect_the_dots(np.asarray(j, np.float64), grid, exact_u), grid)
    on_grid = np.array([pld.delta(e) for e in j * grid])
    np.testing.assert_allclose(on_grid, exact_u, rtol=1e-9, atol=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 8])
def test_blanket_composition_is_above_the_exact_shuffled_mechanism(n):
    """k-RR (k = 3, eps0 = 1) through a shuffler: exact histograms of several datasets of the others,
    composed 2 and 3 times, both orders, never above the blanket PLD's composition."""
    from jaxshuffle.accountant.blanket_pld import blanket_round

    eps0, k = 1.0, 3
    r = blanket_round(eps0, k, n, discretization=1e-3, points=256)
    assert r.upper_backward is r.upper_forward and r.lower_forward is None
    eps = np.linspace(0.0, 2.0, 41)
    worst = shuffled_round(R.grr(eps0, k), n, discretization=1e-3).upper_forward
    rng = np.random.default_rng(n)
    datasets = [(0,) * (n - 1), (2,) * (n - 1), tuple(rng.integers(0, k, n - 1))]
    for T in (2, 3) if n == 5 else (2,):
        hi = compose_discrete([(r.upper_forward, T)]).delta(eps)
        for others in datasets:
            log_p, log_q = exact.histogram_log_pmfs(krr(eps0, k), 0, 1, list(others))
            P, Q = np.exp(log_p), np.exp(log_q)
            for A, B in ((P, Q), (Q, P)):
                assert np.all(composed_delta(A, B, T, eps) <= hi * (1 + 1e-9) + 1e-15), (others, T)
        # tighter than the worst-case pair's composition (within the profile grid)
        assert np.all(hi <= compose_discrete([(worst, T)]).delta(eps) + 1e-3)


@pytest.mark.slow
def test_blanket_round_reproduces_blanket_epsilon_and_dp_accounting():
    """One round: within the profile grid of the blanket engine's certified bracket; ten rounds: the
    exported PLD composed by dp_accounting agrees within the loss grid."""
    from jaxshuffle.accountant.blanket_pld import TAIL_DELTA, blanket_round
    from jaxshuffle.blanket import blanket_epsilon

    eps0, k, n, points = 1.0, 10, 2_000, 256
    r = blanket_round(eps0, k, n, rounds=10, points=points)
    grid = r.upper_forward.discretization
    b = blanket_epsilon(eps0, k, n, 1e-6)
    spacing = (float(blanket_epsilon(eps0, k, n, TAIL_DELTA).upper) / points + grid) * 1.01
    one = compose([(r, 1)], 1e-6)
    assert float(b.lower) <= one.upper <= float(b.upper) + spacing and np.isnan(one.lower)
    ten = compose([(r, 10)], 1e-6).upper
    assert ten < 0.9 * compose([(shuffled_round(R.grr(eps0, k), n, rounds=10), 10)], 1e-6).upper
    pytest.importorskip("dp_accounting")
    theirs = to_dp_accounting(r, neighboring_relation="replace_one").self_compose(10).get_epsilon_for_delta(1e-6)
    assert theirs - grid <= ten <= theirs + 2 * grid


@pytest.mark.slow
def test_blanket_pld_is_skipped_by_default_above_its_n_cap(monkeypatch):
    """composed_epsilon builds the k-RR blanket pair's PLD by default only up to BLANKET_PLD_MAX_N
    (its cost grows with n); above, that candidate is absent (inf). An explicit count builds it at any n
    (test_cli's compose test and the blanket_round tests)."""
    from jaxshuffle.accountant import blanket_pld
    from jaxshuffle.accountant import rounds as rounds_mod

    monkeypatch.setattr(blanket_pld, "BLANKET_PLD_MAX_N", 50.0)
    c = rounds_mod.composed_epsilon(R.grr(1.0, 10), 100, [5], [1e-6])
    assert np.isinf(c.blanket_pld).all() and "blanket PLD" not in c.upper_source.tolist()
    assert np.isfinite(c.upper).all()


def test_compositions_on_one_window_size_share_one_program():
    """Rounds of different widths whose compositions land on the same FFT window (1024 bins) run one
    compiled program: the rounds are padded to the window before the FFT (which pads them anyway), so
    the program depends on the window's size alone; the composed masses are the direct convolution's."""
    from jaxshuffle._fft import power_convolve

    rng = np.random.default_rng(7)
    rounds = []
    for width, count in ((100, 10), (150, 6)):  # 990 and 894 composed bins: a 1024-bin window each
        probs = rng.random(width)
        rounds.append((DiscretePLD(probs / probs.sum(), -width // 2, 1e-2, 0.0, True), count))
    sizes = []
    for pld, count in rounds:
        composed = compose_discrete([(pld, count)])
        assert len(composed.probs) == 1024
        direct = pld.probs
        for _ in range(count - 1):
            direct = np.convolve(direct, pld.probs)
        np.testing.assert_allclose(np.asarray(composed.probs)[:direct.size], direct, rtol=0, atol=1e-15)
        sizes.append(power_convolve._cache_size())
    assert sizes[1] == sizes[0]
