"""Certification campaign: jaxshuffle's certified brackets for shuffled k-ary RR against ground truth.

Ground truth is tests/reference/krr_exact.py (exact enumeration of every histogram and every dataset
of the other users; imports nothing from jaxshuffle). Every check is ``lower <= exact <= upper``
and ``lower <= upper``, with no tolerance beyond ``SLACK`` (1e-12 absolute: the reference's
bisection width is 1e-13 and its arithmetic is good to ~1e-15).

Fast tier: the reference's sanity checks and five regression points (exact values hard-coded).
Slow tier: the campaign over k = 2..6, n <= 12, six eps0 and six delta (``krr_bounds`` on every point
in one batched call, ``amplify`` on a random sample), the hard-coded values recomputed, and the
matrix engine (``matrix_bounds``) on the k-RR matrix at a few points, random matrices with zeros and
near-equal columns through the matrix engine and its lattice refinement against ``jaxshuffle.exact``'s
enumeration, and composed rounds against exact composition.
"""
import itertools
import math
import time

import numpy as np
import pytest
from reference.krr_exact import (
    compositions,
    count_datasets,
    datasets,
    delta_mp,
    exact_epsilon,
    mp,
    pmf_batch,
    pmf_mp,
    worst_exact_epsilon,
)

import jaxshuffle
from jaxshuffle.randomizers import grr

SLACK = 1e-12
DELTA_REG = 1e-8

# Worst-case exact epsilon (every dataset of the others) at delta = 1e-8, from
# tests/reference/krr_exact.py (worst_exact_epsilon; the mpmath exact_epsilon of its argmax dataset
# agrees to 1e-16); recomputed by test_regression_constants_recompute (slow tier).
REGRESSION = {
    (0.2, 4, 5): 0.1999950683694806,
    (0.2, 5, 5): 0.19998572274917026,
    (0.2, 6, 5): 0.19996571102128652,
    (1.5, 5, 7): 1.4999991304700586,
    (1.5, 6, 7): 1.4999981028209675,
}


def _bracket_violations(label, lower, upper, exact):
    """The ways ``lower <= exact <= upper`` and ``lower <= upper`` fail (strings; empty when none)."""
    out = []
    if not lower <= exact + SLACK:
        out.append(f"{label}: lower {lower!r} > exact {exact!r} (by {lower - exact:.3e})")
    if not exact <= upper + SLACK:
        out.append(f"{label}: exact {exact!r} > upper {upper!r} (by {exact - upper:.3e})")
    if not lower <= upper:
        out.append(f"{label}: lower {lower!r} > upper {upper!r}")
    return out


# ----------------------------------------------------------------------------------------------
# fast tier: the reference itself
# ----------------------------------------------------------------------------------------------

def test_reference_known_value():
    # n = 2, k = 3, eps0 = 1, delta = 0.01, the other user holds x0: 0.969408 (known value)
    assert exact_epsilon(1.0, 3, 2, [0], 0.01) == pytest.approx(0.969408, abs=5e-7)
    eps, _ = worst_exact_epsilon(1.0, 3, 2, 0.01)
    assert eps >= exact_epsilon(1.0, 3, 2, [0], 0.01) - SLACK


def test_reference_pmf_sums_to_one():
    values = (0, 1, 1, 0, 1)
    with mp.workdps(40):
        P = pmf_mp(0.7, 2, values)
        assert abs(mp.fsum(P.values()) - 1) < mp.mpf(10) ** -35
        assert len(P) == len(compositions(5, 2)) == 6
    batch = pmf_batch(0.7, 2, [values])
    assert abs(float(batch.sum(dtype=np.longdouble)) - 1.0) < 1e-15
    # the two implementations agree entry by entry
    for h, p in zip(compositions(5, 2), batch[0]):
        assert abs(float(P[h]) - float(p)) <= 1e-17


def test_reference_definitions():
    # n = 2, k = 2, eps0 = 1, the other user holds 0: both pmfs written out by hand
    E = math.e
    s = (E + 1) ** 2
    P = {(2, 0): E * E / s, (1, 1): 2 * E / s, (0, 2): 1 / s}
    Q = {(2, 0): E / s, (1, 1): (E * E + 1) / s, (0, 2): E / s}
    eps = 0.3
    t = math.exp(eps)
    want = max(sum(max(0.0, P[h] - t * Q[h]) for h in P), sum(max(0.0, Q[h] - t * P[h]) for h in P))
    assert float(delta_mp(1.0, 2, 2, [0], eps)) == pytest.approx(want, rel=1e-13)


def test_reference_symmetry_reduction_and_paths_agree():
    for eps0, k, n, delta in ((0.5, 4, 4, 1e-3), (1.0, 5, 3, 0.05), (math.log(2), 3, 5, 1e-6)):
        full, arg_full = worst_exact_epsilon(eps0, k, n, delta, symmetry=False)
        red, arg = worst_exact_epsilon(eps0, k, n, delta)
        assert abs(full - red) <= 2e-13
        assert abs(exact_epsilon(eps0, k, n, arg, delta) - red) <= 2e-13
        assert count_datasets(k, n, symmetry=False) == math.comb(n - 1 + k - 1, k - 1)
    assert len(datasets(6, 12)) < count_datasets(6, 12, symmetry=False)


# ----------------------------------------------------------------------------------------------
# fast tier: five regression points (jaxshuffle)
# ----------------------------------------------------------------------------------------------

def _regression_arrays():
    pts = list(REGRESSION)
    return (np.array([p[0] for p in pts]), np.array([p[1] for p in pts]), np.array([p[2] for p in pts]),
            [REGRESSION[p] for p in pts], pts)


@pytest.mark.slow
def test_regression_points_krr_bounds():
    e, k, n, exact, pts = _regression_arrays()
    res = jaxshuffle.krr_bounds(e, k, n, DELTA_REG)
    bad = []
    for i, p in enumerate(pts):
        bad += _bracket_violations(f"krr_bounds{p}", float(res.lower[i]), float(res.upper[i]), exact[i])
    assert not bad, "\n".join(bad)


@pytest.mark.slow
def test_regression_points_amplify():
    e, k, n, exact, pts = _regression_arrays()
    res = jaxshuffle.amplify(grr(e, k), n, DELTA_REG)
    bad = []
    for i, p in enumerate(pts):
        bad += _bracket_violations(f"amplify{p}", float(res.lower[i]), float(res.upper[i]), exact[i])
    assert not bad, "\n".join(bad)


# ----------------------------------------------------------------------------------------------
# slow tier
# ----------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_regression_constants_recompute():
    for (eps0, k, n), want in REGRESSION.items():
        got, arg = worst_exact_epsilon(eps0, k, n, DELTA_REG)
        print(f"exact{(eps0, k, n)} = {got!r}  (argmax others {arg})")
        assert abs(got - want) <= 1e-12
        assert abs(exact_epsilon(eps0, k, n, arg, DELTA_REG) - want) <= 1e-12


CAMPAIGN_K = (2, 3, 4, 5, 6)
# n up to 12, except k = 6: n <= 10 there. k = 6, n = 12 (C(17, 5) = 6188 histograms, 448 datasets up
# to permutations of the values 2..5, 4368 multisets in all) alone costs ~60 s in the reference; n = 10
# (3003 histograms, 235 datasets) ~10 s. The number of points is kept near 900 because krr_bounds
# costs ~0.06 s per point on 2 cores (plus its compile, ~1 min).
CAMPAIGN_N = {2: (2, 3, 5, 8, 12), 3: (2, 3, 5, 8, 12), 4: (2, 3, 5, 8, 12), 5: (2, 3, 5, 8, 12),
              6: (2, 3, 5, 8, 10)}
CAMPAIGN_EPS0 = (0.2, 0.5, math.log(2), 1.0, 1.5, 3.0)  # log 2: e^eps0 = 2, coefficients cancel
CAMPAIGN_DELTA = (0.2, 1e-2, 1e-4, 1e-6, 1e-8, 1e-10)
AMPLIFY_SAMPLE = 40


@pytest.fixture(scope="module")
def campaign():
    """Every campaign point with its worst-case exact epsilon (the reference), as flat arrays."""
    t0 = time.perf_counter()
    rows = []
    for k in CAMPAIGN_K:
        for n in CAMPAIGN_N[k]:
            for eps0 in CAMPAIGN_EPS0:
                for delta in CAMPAIGN_DELTA:
                    eps, arg = worst_exact_epsilon(eps0, k, n, delta)
                    rows.append((eps0, k, n, delta, eps, arg))
    n_datasets = sum(count_datasets(k, n) for k in CAMPAIGN_K for n in CAMPAIGN_N[k]) * len(CAMPAIGN_EPS0)
    n_multisets = sum(math.comb(n - 1 + k - 1, k - 1) for k in CAMPAIGN_K for n in CAMPAIGN_N[k]) * len(CAMPAIGN_EPS0)
    print(f"\nreference: {len(rows)} points, {n_datasets} datasets enumerated ({n_multisets} multisets "
          f"before the symmetry of values 2..k-1), {time.perf_counter() - t0:.1f} s")
    return dict(eps0=np.array([r[0] for r in rows]), k=np.array([r[1] for r in rows]),
                n=np.array([r[2] for r in rows]), delta=np.array([r[3] for r in rows]),
                exact=np.array([r[4] for r in rows]), argmax=[r[5] for r in rows])


def _check_campaign(name, c, idx, lower, upper):
    """Violations of the brackets at the points ``idx``; prints the largest gaps (relative ones over
    the points with exact >= 0.01, where a relative gap means something)."""
    bad, gaps = [], {key: (-math.inf, None) for key in ("rel_up", "rel_low", "abs_up", "abs_low")}

    def record(key, value, p):
        if value > gaps[key][0]:
            gaps[key] = (value, p)

    for j, i in enumerate(idx):
        p = (float(c["eps0"][i]), int(c["k"][i]), int(c["n"][i]), float(c["delta"][i]))
        ex, lo, up = float(c["exact"][i]), float(lower[j]), float(upper[j])
        bad += _bracket_violations(f"{name}{p} (argmax others {c['argmax'][i]})", lo, up, ex)
        record("abs_up", up - ex, p)
        record("abs_low", ex - lo, p)
        if ex >= 0.01:
            record("rel_up", (up - ex) / ex, p)
            record("rel_low", (ex - lo) / ex, p)
    print(f"{name}: {len(idx)} points, {len(bad)} violations; largest gaps (exact >= 0.01): "
          f"(upper - exact)/exact = {gaps['rel_up'][0]:.3e} at {gaps['rel_up'][1]}, "
          f"(exact - lower)/exact = {gaps['rel_low'][0]:.3e} at {gaps['rel_low'][1]}; absolute (all points): "
          f"upper - exact = {gaps['abs_up'][0]:.3e} at {gaps['abs_up'][1]}, "
          f"exact - lower = {gaps['abs_low'][0]:.3e} at {gaps['abs_low'][1]}")
    return bad


@pytest.mark.slow
def test_campaign_krr_bounds(campaign):
    c = campaign
    t0 = time.perf_counter()
    res = jaxshuffle.krr_bounds(c["eps0"], c["k"], c["n"], c["delta"])  # one batched call
    lower, upper = np.asarray(res.lower), np.asarray(res.upper)
    print(f"krr_bounds: {lower.size} points in {time.perf_counter() - t0:.1f} s")
    bad = _check_campaign("krr_bounds", c, range(lower.size), lower, upper)
    assert not bad, f"{len(bad)} violations:\n" + "\n".join(bad[:30])


@pytest.mark.slow
def test_campaign_amplify_sample(campaign):
    c = campaign
    idx = np.sort(np.random.default_rng(20240611).choice(c["exact"].size, AMPLIFY_SAMPLE, replace=False))
    t0 = time.perf_counter()
    res = jaxshuffle.amplify(grr(c["eps0"][idx], c["k"][idx]), c["n"][idx], c["delta"][idx])  # one batched call
    lower, upper = np.asarray(res.lower), np.asarray(res.upper)
    print(f"amplify: {idx.size} points in {time.perf_counter() - t0:.1f} s")
    bad = _check_campaign("amplify", c, idx, lower, upper)
    assert not bad, f"{len(bad)} violations:\n" + "\n".join(bad[:30])


MATRIX_POINTS = (  # (eps0, k, n, delta), n <= 6; k >= 5 has more than four categories (coarsened forms)
    (0.2, 2, 4, 1e-2), (1.0, 2, 6, 1e-6), (3.0, 2, 5, 1e-4),
    (math.log(2), 3, 5, 1e-8), (1.0, 4, 4, 1e-4), (0.2, 4, 6, 1e-8),
    (3.0, 5, 4, 1e-6), (0.5, 5, 5, 1e-10),
    (1.5, 6, 3, 1e-8), (math.log(2), 6, 6, 1e-6), (0.2, 6, 5, 1e-8),
)


@pytest.mark.slow
def test_matrix_engine_krr():
    from jaxshuffle.blanket_matrix import matrix_bounds
    from jaxshuffle.exact.soundness import grr_matrix
    bad, t0 = [], time.perf_counter()
    for eps0, k, n, delta in MATRIX_POINTS:
        exact, arg = worst_exact_epsilon(eps0, k, n, delta)
        b = matrix_bounds(grr_matrix(k, eps0), n, delta)
        bad += _bracket_violations(f"matrix_bounds{(eps0, k, n, delta)} (argmax others {arg})",
                                   float(b.lower), float(b.upper), exact)
    print(f"matrix_bounds: {len(MATRIX_POINTS)} points in {time.perf_counter() - t0:.1f} s, {len(bad)} violations")
    assert not bad, "\n".join(bad)


def _composed_exact_epsilon(P, Q, T: int, delta: float) -> float:
    """Exact epsilon of T independent rounds of (P, Q) (every T-tuple of histograms, both directions;
    numpy float64 on products of probabilities, bisection to 1e-12)."""
    P, Q = np.asarray(P, np.float64), np.asarray(Q, np.float64)
    PT, QT = P, Q
    for _ in range(T - 1):
        PT, QT = np.outer(PT, P).ravel(), np.outer(QT, Q).ravel()

    def dlt(eps):
        t = math.exp(eps)
        return max(np.maximum(PT - t * QT, 0).sum(), np.maximum(QT - t * PT, 0).sum())

    lo, hi = 0.0, 1.0
    while dlt(hi) > delta:
        hi *= 2
    while hi - lo > 1e-12:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if dlt(mid) > delta else (lo, mid)
    return hi


@pytest.mark.slow
def test_composed_rounds_at_small_n_stay_above_exact_composition():
    """composed_epsilon's certified upper for T = 2, 3 rounds of k-RR (n = 3, 4) is above the exact
    composition of every dataset of the others (the worst one found), with a rounding margin of 1e-9."""
    from reference.krr_exact import _pq_mp

    from jaxshuffle.accountant import composed_epsilon
    checked = 0
    for eps0, k, n in [(1.0, 3, 3), (0.5, 4, 4), (2.0, 2, 3)]:
        comp = composed_epsilon(grr(eps0, k), n, [2, 3], [1e-3, 1e-2])  # one call: every (T, delta) cell
        for (i, T), (j, delta) in [((0, 2), (0, 1e-3)), ((1, 3), (1, 1e-2))]:
            assert comp.rounds[i] == T and comp.delta[j] == delta
            upper = float(comp.upper[i, j])
            worst = 0.0
            for others in itertools.combinations_with_replacement(range(k), n - 1):
                P, Q = _pq_mp(float(eps0), int(k), int(n), tuple(others))
                worst = max(worst, _composed_exact_epsilon([float(x) for x in P], [float(x) for x in Q], T, delta))
                checked += 1
            assert worst <= upper + 1e-9, (eps0, k, n, T, delta, worst, upper)
    assert checked > 20


def _adversarial_matrix(rng, K, Kp):
    """A random K x Kp row-stochastic matrix with zero entries and two columns equal up to 1e-12 relative
    (their pair forms' coefficients nearly cancel)."""
    M = rng.exponential(size=(K, Kp)) * (rng.random((K, Kp)) > 0.25)
    M[:, 1] = M[:, 0] * (1 + 1e-12)
    M[:, 2] += 1e-3  # no empty row, and column 2 nowhere zero
    return M / M.sum(axis=1, keepdims=True)


@pytest.mark.slow
def test_random_matrices_through_the_matrix_engine_and_lattice_at_tiny_delta():
    """Random 4 x 5 and 5 x 6 matrices (zeros, near-equal columns), n = 2, 3, delta down to 1e-10: the
    matrix engine's bracket (the blanket forms, and the lattice refinement of its upper, 11.8) holds every
    dataset of the others (every multiset, every ordered pair of inputs, exact enumeration of the shuffled
    histogram by ``jaxshuffle.exact``): each dataset's exact eps <= upper, and lower <= the worst one."""
    from jaxshuffle import blanket_matrix as bm
    from jaxshuffle.exact import enumerate as exact

    rng = np.random.default_rng(38)
    checked = {"mechanisms": 0, "datasets": 0}
    for K, Kp, n, delta in [(4, 5, 3, 1e-10), (5, 6, 2, 1e-10), (5, 6, 3, 1e-6), (4, 5, 2, 1e-3)]:
        M = _adversarial_matrix(rng, K, Kp)
        pl = bm.plan_matrix(M, n, delta)
        # every dataset's exact eps, enumerated once and held against both searches
        exacts = [(x0, x1, others, exact.epsilon(M, x0, x1, list(others), delta))
                  for x0, x1 in itertools.combinations(range(K), 2)  # exact.epsilon takes both directions
                  for others in itertools.combinations_with_replacement(range(K), n - 1)]
        worst = max(ex for *_, ex in exacts)
        for lattice in (False, True):
            b = bm.search_matrix(pl, lattice=lattice)
            for x0, x1, others, ex in exacts:
                assert ex <= b.upper + SLACK, (K, Kp, n, delta, lattice, x0, x1, others, ex, b)
                checked["datasets"] += 1
            assert b.lower <= worst + SLACK and b.lower <= b.upper, (K, Kp, n, delta, lattice, b, worst)
            checked["mechanisms"] += 1
    print("random matrices:", checked)
    assert checked["mechanisms"] == 8
