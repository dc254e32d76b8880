"""Ground-truth enumeration (jaxshuffle.exact) against independent references.

References used here, independent of the module's histogram grids:
* mpmath, enumerating every output *tuple* (|Y|^n of them) and adding its probability to
  the multiset it shuffles to;
* closed forms for randomized response at n = 1 and binary RR at n = 2;
* a direct enumeration of the two-count pair of docs/math.md section 1.
"""
from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest

from jaxshuffle import exact
from jaxshuffle.pair import vr_pair

# ----------------------------------------------------------------------------- references


def rr(k: int, eps0: float) -> np.ndarray:
    """k-ary randomized response: e^eps0/(e^eps0+k-1) on the diagonal."""
    p = math.exp(eps0)
    m = np.full((k, k), 1.0)
    np.fill_diagonal(m, p)
    return m / (p + k - 1)


def mp_laws(matrix, x0, x1, others):
    """Multiset laws by enumerating every output tuple (user 0 is the victim), in mpmath."""
    mat = [[mp.mpf(float(v)) for v in row] for row in np.asarray(matrix)]
    n, ny = len(others) + 1, len(mat[0])
    P, Q = {}, {}
    for tup in itertools.product(range(ny), repeat=n):
        rest = mp.mpf(1)
        for user, y in zip(others, tup[1:]):
            rest *= mat[user][y]
        key = tuple(sorted(tup))
        P[key] = P.get(key, mp.mpf(0)) + mat[x0][tup[0]] * rest
        Q[key] = Q.get(key, mp.mpf(0)) + mat[x1][tup[0]] * rest
    return P, Q


def mp_delta(P, Q, eps):
    t = mp.e ** mp.mpf(eps)
    d1 = sum(max(mp.mpf(0), P[k] - t * Q[k]) for k in P)
    d2 = sum(max(mp.mpf(0), Q[k] - t * P[k]) for k in P)
    return max(d1, d2)


def mp_epsilon(P, Q, delta):
    delta = mp.mpf(delta)
    if mp_delta(P, Q, 0) <= delta:
        return 0.0
    ratios = [abs(mp.log(P[k] / Q[k])) for k in P if P[k] > 0 and Q[k] > 0]
    hi = (max(ratios) if ratios else mp.mpf(0)) + 1
    if mp_delta(P, Q, hi) > delta:
        return math.inf
    lo = mp.mpf(0)
    for _ in range(80):
        mid = (lo + hi) / 2
        if mp_delta(P, Q, mid) > delta:
            lo = mid
        else:
            hi = mid
    return float(hi)


def pair_epsilon(pair, n: int, delta: float) -> float:
    """Epsilon of a two-count pair by enumerating (a, b) (docs/math.md section 1), in float64."""
    u, v, w, r0, r1 = (float(x) for x in (pair.u, pair.v, pair.w, pair.r0, pair.r1))

    def M(a, b):
        c = n - 1 - a - b
        if a < 0 or b < 0 or c < 0:
            return 0.0
        return (math.exp(math.lgamma(n) - math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(c + 1))
                * r0 ** a * r1 ** b * (1 - r0 - r1) ** c)

    cells = [(a, b) for a in range(n + 1) for b in range(n + 1 - a)]
    P = np.array([u * M(a - 1, b) + v * M(a, b - 1) + w * M(a, b) for a, b in cells])
    Q = np.array([v * M(a - 1, b) + u * M(a, b - 1) + w * M(a, b) for a, b in cells])

    def f(eps):
        t = math.exp(eps)
        return max(np.maximum(0, P - t * Q).sum(), np.maximum(0, Q - t * P).sum())

    lo, hi = 0.0, 50.0
    if f(0.0) <= delta:
        return 0.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) > delta else (lo, mid)
    return hi


def random_triangle(rng, scale):
    while True:
        d = rng.uniform(0.05, 1.0, 3) * scale
        if d[0] <= d[1] + d[2] and d[1] <= d[0] + d[2] and d[2] <= d[0] + d[1]:
            return tuple(float(x) for x in d)


# ----------------------------------------------------------------------------- exact enumeration


def _random_cases():
    rng = np.random.default_rng(20240605)
    cases = []
    for idx in range(12):
        k, y = int(rng.integers(2, 4)), int(rng.integers(2, 4))
        m = rng.dirichlet(np.ones(y), size=k)
        if idx % 4 == 0:  # some structural zeros (infinite likelihood ratios)
            m[0, 0] = 0.0
            m[0] /= m[0].sum()
        n = int(rng.integers(1, 5))
        others = tuple(int(v) for v in rng.integers(0, k, n - 1))
        delta = float(10 ** rng.uniform(-3, -0.5))
        cases.append((m, 0, 1, others, delta))
    return cases


@pytest.mark.parametrize("case", _random_cases())
def test_matches_mpmath_per_tuple_enumeration(case):
    m, x0, x1, others, delta = case
    P, Q = mp_laws(m, x0, x1, others)
    ref = mp_epsilon(P, Q, delta)
    for lump in (True, False):
        hi = exact.epsilon(m, x0, x1, others, delta, lump=lump)
        lo = exact.epsilon(m, x0, x1, others, delta, lump=lump, side="lower")
        if math.isinf(ref):
            assert math.isinf(hi)
            continue
        assert lo - 1e-12 <= ref <= hi + 1e-12  # the bracket holds the truth
        assert hi - lo <= 1e-10 and abs(hi - ref) <= 1e-9
        for eps in (0.0, 0.3, 1.1):
            got = exact.delta_of_eps(m, x0, x1, others, eps, lump=lump)
            assert got == pytest.approx(float(mp_delta(P, Q, eps)), rel=1e-11, abs=1e-15)


def test_lumping_changes_nothing():
    rng = np.random.default_rng(7)
    base = rng.dirichlet(np.ones(3), size=3)
    # Output 3 duplicates output 0, output 4 is proportional to output 1 on every row.
    m = np.concatenate([base[:, :1] * 0.5, base[:, 1:2] * 0.7, base[:, 2:],
                        base[:, :1] * 0.5, base[:, 1:2] * 0.3], axis=1)
    lumped, label = exact.lump_outputs(m, [0, 1, 2])
    assert lumped.shape == (3, 3) and label.tolist() == [0, 1, 2, 0, 1]
    np.testing.assert_allclose(lumped, base, rtol=1e-15)
    for others in [(2, 2, 2, 2), (0, 2, 1, 2, 2), ()]:
        for eps in (0.1, 0.7):
            a = exact.delta_of_eps(m, 0, 1, others, eps, lump=True)
            b = exact.delta_of_eps(m, 0, 1, others, eps, lump=False)
            assert a == pytest.approx(b, rel=1e-11, abs=1e-16)
        assert exact.epsilon(m, 0, 1, others, 0.01) == pytest.approx(
            exact.epsilon(m, 0, 1, others, 0.01, lump=False), abs=1e-10)
    # k-ary RR lumps to x0, x1, (x_star,) and "the rest", whatever k.
    assert exact.lump_outputs(rr(10, 1.0), [0, 1])[0].shape[1] == 3
    assert exact.lump_outputs(rr(10, 1.0), [0, 1, 2])[0].shape[1] == 4


def test_closed_form_agrees_with_convolution_path():
    # Input 3 is a copy of input 2: others (2,...,2,3) have the same law as (2,...,2) but
    # go through the log-space convolution steps instead of the one-group closed form.
    m = np.vstack([rr(3, 1.3), rr(3, 1.3)[2]])
    for n in (2, 9, 30):
        one = exact.delta_of_eps(m, 0, 1, [2] * (n - 1), 0.2)
        conv = exact.delta_of_eps(m, 0, 1, [2] * (n - 2) + [3], 0.2)
        assert one == pytest.approx(conv, rel=1e-11)


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("eps0", [0.5, 1.0, 3.0])
def test_rr_single_user_closed_form(k, eps0):
    # n = 1: D_t = p - t q for t < p/q, so eps = log((p - delta)/q).
    p, q = math.exp(eps0) / (math.exp(eps0) + k - 1), 1 / (math.exp(eps0) + k - 1)
    for delta in (1e-6, 1e-2, 0.5 * (p - q)):
        assert exact.epsilon(rr(k, eps0), 0, 1, [], delta) == pytest.approx(
            math.log((p - delta) / q), abs=1e-10)
    assert exact.epsilon(rr(k, eps0), 0, 1, [], (p - q) * (1 + 1e-9)) == 0.0  # D_1 = TV = p - q


@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.0])
def test_binary_rr_two_users_closed_form(eps0):
    # Other user holds x0. Histograms by #zeros: P = (q^2, 2pq, p^2), Q = (pq, p^2+q^2, pq);
    # the binding term is P(2) - t Q(2) = p^2 - t p q, so eps = log((p^2 - delta)/(p q)).
    p, q = math.exp(eps0) / (math.exp(eps0) + 1), 1 / (math.exp(eps0) + 1)
    for delta in (1e-5, 1e-2):
        assert exact.epsilon(rr(2, eps0), 0, 1, [0], delta) == pytest.approx(
            math.log((p * p - delta) / (p * q)), abs=1e-10)


def test_math_md_counterexample():
    # docs/math.md section 3: 3-ary RR, eps0 = 1, n = 2, delta = 0.01, other user holds x0.
    m = rr(3, 1.0)
    got = exact.epsilon(m, 0, 1, [0], 0.01)
    assert got == pytest.approx(0.969408, abs=1e-6)
    assert got == pytest.approx(mp_epsilon(*mp_laws(m, 0, 1, [0]), 0.01), abs=1e-10)
    # With the other user holding a third value the shuffled histogram is exactly the
    # Theorem 4.7 pair with beta = (e-1)/(e+2), q = p: its 0.914553 is the paper's "bound".
    assert exact.epsilon(m, 0, 1, [2], 0.01) == pytest.approx(0.914553, abs=1e-6)


def test_math_md_large_n():
    # docs/math.md section 3: 3-ary RR, eps0 = 5, n = 1000, delta = 0.01/n: exact 4.601.
    assert exact.epsilon(rr(3, 5.0), 0, 1, [0] * 999, 1e-5) == pytest.approx(4.601, abs=5e-4)
    # 10-ary RR, others all holding a third value: 4 lumped outputs, n = 200.
    e = exact.epsilon(rr(10, 1.0), 0, 1, [2] * 199, 1e-4)
    assert 0.0 < e < 1.0


# ----------------------------------------------------------------------------- Theorem 5.1


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.5])
def test_lower_bound_parameters_rr(k, eps0):
    m = rr(k, eps0)
    e = math.exp(eps0)
    p0, beta, q0, q1 = exact.lower_bound_parameters(m, 0, 1, x_star=0)
    assert p0 == pytest.approx(e, rel=1e-14)
    assert beta == pytest.approx((e - 1) / (e + k - 1), rel=1e-14)
    assert q0 == pytest.approx(1.0, rel=1e-14) and q1 == pytest.approx(e, rel=1e-14)
    pair = vr_pair(p0, beta, q0=q0, q1=q1)
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    np.testing.assert_allclose([pair.u, pair.v, pair.w, pair.r0, pair.r1],
                               [p, q, (k - 2) * q, p, q], rtol=1e-12, atol=1e-15)
    # docs/math.md section 3: all others holding x0 is exactly this lower-bound pair.
    n, delta = 25, 1e-3
    assert exact.epsilon(m, 0, 1, [0] * (n - 1), delta) == pytest.approx(
        pair_epsilon(pair, n, delta), abs=1e-9)


def test_lower_bound_parameters_absorb_rounding():
    # Binary RR on 3 outputs (e^1 on the input, 1 elsewhere), with the third output's entries
    # made unequal by one rounding step: still a tie, so P0(Y0) = P1(Y1) holds. The pair is at
    # the worst case (w = 0 mathematically); beta must not exceed (p0-1)/(p0+1).
    e = math.e
    m = np.array([[e, 1.0, 1.0], [1.0, e, 1.0]]) / (e + 2.0)
    m[1, 2] = np.nextafter(m[1, 2], 1.0)
    p0, beta, q0, q1 = exact.lower_bound_parameters(m, 0, 1, x_star=0)
    assert p0 == pytest.approx(e, rel=1e-14)
    assert beta == pytest.approx((e - 1) / (e + 2), rel=1e-14)
    two = np.array([[e, 1.0], [1.0, e]]) / (e + 1.0)  # worst-case beta exactly
    p0, beta, _, _ = exact.lower_bound_parameters(two, 0, 1, x_star=0)
    assert beta <= (p0 - 1) / (p0 + 1)
    assert vr_pair(p0, beta, q0=1.0, q1=p0).w >= 0


def test_paper_choice_of_x_star_is_not_the_worst_dataset():
    # Theorem 5.1 picks x* = argmax min(q0, q1): a third value for 3-ary RR (q0 = q1 = p),
    # but others holding x0 give a larger exact epsilon (0.9694 > 0.9146 at n = 2).
    m = rr(3, 1.0)
    p0, beta, q0, q1 = exact.lower_bound_parameters(m, 0, 1)
    assert q0 == pytest.approx(math.e) and q1 == pytest.approx(math.e)
    assert exact.epsilon(m, 0, 1, [0], 0.01) > exact.epsilon(m, 0, 1, [2], 0.01) + 0.05
    worst = exact.worst_case_epsilon(m, 0, 1, 2, 0.01)
    assert worst.others in ((0,), (1,)) and worst.epsilon == pytest.approx(0.969408, abs=1e-6)


def test_theorem_5_1_needs_symmetry():
    # P0(Y0) = 0.5 + 0.4 != P1(Y1) = 0.7: the paper's pair is not the marker law. Its
    # epsilon (1.829 here) exceeds the exact one (1.143), so it is no lower bound; we refuse.
    m = np.array([[0.5, 0.1, 0.4], [0.2, 0.7, 0.1], [0.3, 0.4, 0.3]])
    with pytest.raises(ValueError, match="matrix"):
        exact.lower_bound_parameters(m, 0, 1, x_star=2)
    y0, y1 = m[0] > m[1], m[1] > m[0]
    u, v = m[1][y1].sum(), m[0][y1].sum()
    pair = type("Pair", (), dict(u=u, v=v, w=1 - u - v, r0=m[2][y0].sum(), r1=m[2][y1].sum()))
    n, delta = 5, 0.01
    assert pair_epsilon(pair, n, delta) > exact.epsilon(m, 0, 1, [2] * (n - 1), delta) + 0.5


def test_worst_case_search():
    m = rr(3, 1.0)
    n, delta = 6, 0.01
    eq = exact.worst_case_epsilon(m, 0, 1, n, delta)
    mix = exact.worst_case_epsilon(m, 0, 1, n, delta, candidates="mixtures")
    assert len(eq.others) == n - 1 and len(set(eq.others)) == 1
    assert mix.epsilon >= eq.epsilon
    for w in (eq, mix):
        assert w.epsilon == exact.epsilon(m, 0, 1, w.others, delta)
    # every all-equal dataset is at most the reported worst
    assert all(exact.epsilon(m, 0, 1, [v] * (n - 1), delta) <= eq.epsilon for v in range(3))


# ----------------------------------------------------------------------------- PEM


def test_pem_matrix():
    m = exact.pem_matrix(1.0, 3.0, 2.0)
    assert m.shape == (3, 4) and (m >= 0).all()
    np.testing.assert_allclose(m.sum(axis=1), 1.0, atol=1e-15)
    d = {(0, 1): 1.0, (0, 2): 3.0, (1, 2): 2.0}
    for (x, z), dist in d.items():
        assert (m[x] <= math.exp(dist) * m[z] * (1 + 1e-12)).all()
        assert (m[z] <= math.exp(dist) * m[x] * (1 + 1e-12)).all()
    # Table I by the supplement's formula: N = max of the three normalisers.
    ea = 1 + math.exp(-1) + math.exp(-3)
    eb = 1 + math.exp(-1) + math.exp(-2)
    ec = 1 + math.exp(-3) + math.exp(-2)

    def term(dd, s1, s2):
        return (math.exp(dd) * max(s1, s2) - min(s1, s2)) / (math.exp(dd) - 1)

    big_n = max(term(1.0, ea, eb), term(3.0, ea, ec), term(2.0, eb, ec))
    np.testing.assert_allclose(m[:, 0], [1 / big_n, math.exp(-1) / big_n, math.exp(-3) / big_n], rtol=1e-14)
    np.testing.assert_allclose(m[:, 3], [(big_n - ea) / big_n, (big_n - eb) / big_n, (big_n - ec) / big_n],
                               rtol=1e-12)
    assert np.all(exact.pem_matrix(0.7, 0.7, 0.7)[:, 3] == 0.0)  # equilateral: no padding
    assert exact.pem_matrix(np.ones((2, 1)), np.full(3, 1.5), 1.5).shape == (2, 3, 3, 4)


@pytest.mark.parametrize("seed", range(6))
def test_pem_lower_equals_enumeration(seed):
    rng = np.random.default_rng(seed)
    d = random_triangle(rng, [0.5, 2.0, 6.0][seed % 3])
    if seed == 5:
        d = (d[0], d[0], d[0])  # equilateral (bottom column zero)
    m = exact.pem_matrix(*d)
    for n in (1, 2, 3, 7, 12):
        for delta in (0.01 / n, 0.2):
            low = float(exact.pem_lower(n, *d, delta))
            ref = exact.epsilon(m, 0, 1, [2] * (n - 1), delta)
            assert low <= ref + 1e-12  # errs low
            assert ref - low <= 1e-8


def test_pem_lower_moderate_n_and_mpmath():
    for d in [(1.0, 3.0, 2.0), (0.3, 1.0, 1.2)]:
        n, delta = 60, 1e-4
        assert float(exact.pem_lower(n, *d, delta)) == pytest.approx(
            exact.epsilon(exact.pem_matrix(*d), 0, 1, [2] * (n - 1), delta), abs=1e-8)
    # per-tuple mpmath at n = 3 (4^3 tuples)
    d = (0.8, 1.5, 1.1)
    ref = mp_epsilon(*mp_laws(exact.pem_matrix(*d), 0, 1, (2, 2)), 0.01)
    assert float(exact.pem_lower(3, *d, 0.01)) == pytest.approx(ref, abs=1e-9)


def test_pem_lower_monotone_in_delta():
    deltas = np.logspace(-8, -0.5, 12)
    vals = exact.pem_lower(200, 1.0, 2.5, 2.0, deltas)
    assert vals.shape == (12,) and vals.dtype == np.float64
    assert np.all(np.diff(vals) <= 1e-12) and vals[0] > vals[-1]


def test_pem_lower_broadcasts():
    n = np.array([[3], [10]])
    d_ab = np.array([0.5, 1.0, 1.5])
    out = exact.pem_lower(n, d_ab, 2.0, 2.0, 0.01)
    assert out.shape == (2, 3) and out.dtype == np.float64
    for r in range(2):
        for c in range(3):
            assert out[r, c] == float(exact.pem_lower(int(n[r, 0]), d_ab[c], 2.0, 2.0, 0.01))
    assert exact.pem_lower(5, 1.0, 2.0, 2.0, np.zeros((0,)) + 0.1).shape == (0,)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, float("nan"), 2.0])
def test_bad_delta(delta):
    with pytest.raises(ValueError, match="delta"):
        exact.epsilon(rr(3, 1.0), 0, 1, [0], delta)
    with pytest.raises(ValueError, match="delta"):
        exact.pem_lower(5, 1.0, 2.0, 2.0, delta)
    with pytest.raises(ValueError, match="delta"):
        exact.worst_case_epsilon(rr(3, 1.0), 0, 1, 3, delta)


def test_bad_inputs_name_the_parameter():
    good = rr(3, 1.0)
    for bad in (good * 1.1, np.array([[0.5, 0.6], [0.5, 0.5]]), np.array([[1.5, -0.5], [0.5, 0.5]]),
                np.array([[np.nan, 1.0], [0.5, 0.5]]), np.ones(3) / 3):
        with pytest.raises(ValueError, match="matrix"):
            exact.epsilon(bad, 0, 1, [0], 0.01)
    with pytest.raises(ValueError, match="x0"):
        exact.epsilon(good, 3, 1, [0], 0.01)
    with pytest.raises(ValueError, match="x1"):
        exact.delta_of_eps(good, 0, 1.5, [0], 0.3)
    with pytest.raises(ValueError, match="others"):
        exact.epsilon(good, 0, 1, [0, 7], 0.01)
    with pytest.raises(ValueError, match="eps"):
        exact.delta_of_eps(good, 0, 1, [0], float("nan"))
    for n in (0, -3, 2.5, float("nan")):
        with pytest.raises(ValueError, match="n"):
            exact.pem_lower(n, 1.0, 2.0, 2.0, 0.01)
        with pytest.raises(ValueError, match="n"):
            exact.worst_case_epsilon(good, 0, 1, n, 0.01)
    with pytest.raises(ValueError, match="d_ab"):
        exact.pem_lower(5, float("nan"), 2.0, 2.0, 0.01)
    with pytest.raises(ValueError, match="d_ac"):
        exact.pem_matrix(1.0, -2.0, 2.0)
    with pytest.raises(ValueError, match="d_ab"):
        exact.pem_matrix(5.0, 1.0, 1.0)  # triangle inequality
    with pytest.raises(ValueError, match="candidates"):
        exact.worst_case_epsilon(good, 0, 1, 3, 0.01, candidates="all")
    with pytest.raises(ValueError, match="side"):
        exact.epsilon(good, 0, 1, [0], 0.01, side="middle")
