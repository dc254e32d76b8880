"""The randomizer catalog against the mechanisms' definitions.

Every finite mechanism is rebuilt here from its definition as an explicit input x output
probability matrix (numpy, independent of the formula code); p, beta and q are read off
the matrix (largest probability ratio, largest total variation, largest victim/blanket
ratio) and compared with the catalog to ~1e-12. Continuous mechanisms are checked by
numerical integration (scipy, mpmath).
"""
from __future__ import annotations

import inspect
import itertools
import math
import re

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
import scipy.integrate as integrate
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jaxshuffle import randomizers as R

TOL = 1e-12


# --------------------------------------------------------------------------------------
# Reference: parameters read off an explicit probability matrix
# --------------------------------------------------------------------------------------

def _ratios(num, den):
    """num[..., y] / den[..., y], inf where den = 0 < num, 1 where both are 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = num / den
    r = np.where((den == 0) & (num > 0), np.inf, r)
    return np.where((den == 0) & (num == 0), 1.0, r)


def vr_from_rows(M, blanket=None):
    """(p, beta, q) of the rows M[x, y] (each a distribution); q against ``blanket`` if given."""
    M = np.asarray(M, dtype=np.float64)
    assert np.allclose(M.sum(axis=1), 1.0, atol=1e-13), "rows must be distributions"
    p = _ratios(M[:, None, :], M[None, :, :]).max()
    beta = (0.5 * np.abs(M[:, None, :] - M[None, :, :]).sum(axis=-1)).max()
    if blanket is None:
        q = p
    else:
        assert abs(np.sum(blanket) - 1.0) < 1e-13
        q = _ratios(M, np.asarray(blanket)[None, :]).max()
    return p, beta, q


def lower_from_rows(M, i0, i1):
    """Theorem 5.1 quantities for inputs i0, i1: p0, beta, and q0(x), q1(x) for every x."""
    M = np.asarray(M, dtype=np.float64)
    y0 = M[i0] > M[i1] * (1 + 1e-12)
    y1 = M[i1] > M[i0] * (1 + 1e-12)
    r0y0, r1y1 = M[i0, y0].sum(), M[i1, y1].sum()
    assert abs(r0y0 - r1y1) < 1e-13, "the Theorem 5.1 pair assumes R(x0)(Y0) = R(x1)(Y1)"
    p0 = r1y1 / M[i0, y1].sum()
    beta = r0y0 - M[i1, y0].sum()
    return p0, beta, r0y0 / M[:, y0].sum(axis=1), r1y1 / M[:, y1].sum(axis=1)


def assert_vr(params, ref, tol=TOL):
    p, beta, q = (float(x) for x in (params.p, params.beta, params.q))
    rp, rbeta, rq = ref
    for name, got, want in (("p", p, rp), ("beta", beta, rbeta), ("q", q, rq)):
        if math.isinf(want):
            assert math.isinf(got), (name, got, want)
        else:
            assert got == pytest.approx(want, rel=tol, abs=tol), (name, got, want)


# --------------------------------------------------------------------------------------
# Mechanisms from their definitions
# --------------------------------------------------------------------------------------

def rows_grr(eps, k):
    e = math.exp(eps)
    M = np.ones((k, k))
    np.fill_diagonal(M, e)
    return M / (e + k - 1)


def _brr(eps, d, x):
    """Binary RR (eps/2 per bit) of the 0/1 vector x: distribution over {0,1}^d."""
    a = math.exp(eps / 2) / (math.exp(eps / 2) + 1)
    ys = np.array(list(itertools.product([0, 1], repeat=d)))
    return np.prod(np.where(ys == np.asarray(x)[None, :], a, 1 - a), axis=1)


def rows_binary_rr(eps, d):
    return np.array([_brr(eps, d, np.eye(d)[i]) for i in range(d)])


def rows_set_exponential(eps, d, k, s):
    """k-subset exponential on s-sets (s = 1: subset selection)."""
    e = math.exp(eps)
    outs = list(itertools.combinations(range(d), k))
    rows = []
    for X in itertools.combinations(range(d), s):
        w = np.array([e if set(S) & set(X) else 1.0 for S in outs])
        rows.append(w / w.sum())
    return np.array(rows)


def rows_local_hash(eps, d, l, family):
    e = math.exp(eps)
    if family == "all":
        funcs = list(itertools.product(range(l), repeat=d))
    else:  # injective
        funcs = list(itertools.permutations(range(l), d))
    rows = np.zeros((d, len(funcs) * l))
    for x in range(d):
        for h, H in enumerate(funcs):
            for y in range(l):
                rows[x, h * l + y] = (e if y == H[x] else 1.0) / (e + l - 1) / len(funcs)
    return rows


def _sylvester(n):
    H = np.array([[1]])
    while H.shape[0] < n:
        H = np.block([[H, H], [H, -H]])
    return H


def rows_hadamard(eps, K, B):
    """HR: B blocks of size b = K/B; inputs are rows 1..b-1 of the b x b Hadamard matrix."""
    e = math.exp(eps)
    b = K // B
    H = _sylvester(b)
    s = b // 2
    rows = []
    for blk in range(B):
        for r in range(1, b):
            w = np.ones(K)
            w[blk * b + np.flatnonzero(H[r] == 1)] = e
            rows.append(w / (s * e + K - s))
    return np.array(rows), s


def rows_sampling_rappor(eps, d, s):
    return np.array([np.mean([_brr(eps, d, np.eye(d)[i]) for i in X], axis=0)
                     for X in itertools.combinations(range(d), s)])


def rows_wheel(eps, d, s, cells_per_arc, extra_cells):
    """Wheel discretized: item i covers its own arc of cells (non-overlapping arcs)."""
    e = math.exp(eps)
    total = d * cells_per_arc + extra_cells
    rows = []
    for X in itertools.combinations(range(d), s):
        w = np.ones(total)
        for i in X:
            w[i * cells_per_arc:(i + 1) * cells_per_arc] = e
        rows.append(w / w.sum())
    return np.array(rows), cells_per_arc / total


def rows_collision(eps, s, l):
    """(d, s)-Collision, worst-case hash: every s-subset C of [l] is some input's image."""
    e = math.exp(eps)
    rows = []
    for C in itertools.combinations(range(l), s):
        w = np.ones(l)
        w[list(C)] = e
        rows.append(w / w.sum())
    return np.array(rows)


def rows_pckv_grr(eps1, eps2, d):
    e1, e2 = math.exp(eps1), math.exp(eps2)
    a, b = e1 / (e1 + d - 1), e2 / (e2 + 1)
    c = (1 - a) / (2 * (d - 1))
    pairs = [(k, v) for k in range(d) for v in (1, -1)]
    M = np.array([[a * b if (k2 == k and v2 == v) else a * (1 - b) if k2 == k else c
                   for (k2, v2) in pairs] for (k, v) in pairs])
    return M


def rows_duchi(eps, dim):
    e = math.exp(eps)
    zs = np.array(list(itertools.product([-1, 1], repeat=dim)))
    rows = []
    for x in zs:  # vertex inputs: v = x
        plus = (zs @ x) > 0
        rows.append(np.where(plus, e / (e + 1) / plus.sum(), 1 / (e + 1) / (~plus).sum()))
    return np.array(rows)


def rows_harmony(eps, dim):
    e = math.exp(eps)
    rows = []
    for x in itertools.product([-1, 1], repeat=dim):
        pp = [(1 + xj * (e - 1) / (e + 1)) / 2 for xj in x]
        rows.append(np.array([[pj, 1 - pj] for pj in pp]).ravel() / dim)
    return np.array(rows)


def rows_privkv(eps1, eps2, d, s):
    e1, e2 = math.exp(eps1), math.exp(eps2)
    a, b = e1 / (e1 + 1), e2 / (e2 + 1)
    kvp = {1: [a * b, a * (1 - b), 1 - a], -1: [a * (1 - b), a * b, 1 - a],
           0: [(1 - a) / 2, (1 - a) / 2, a]}
    rows = []
    for state in itertools.product([0, 1, -1], repeat=d):
        if sum(v != 0 for v in state) <= s:
            rows.append(np.concatenate([kvp[v] for v in state]) / d)
    return np.array(rows)


# --------------------------------------------------------------------------------------
# Finite eps0-LDP mechanisms
# --------------------------------------------------------------------------------------

EPS = [0.0, 0.3, 1.0, 2.5]


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("k", [2, 3, 5])
def test_grr(eps, k):
    assert_vr(R.grr(eps, k), vr_from_rows(rows_grr(eps, k)))


@pytest.mark.parametrize("eps", EPS)
def test_general_is_binary_randomized_response(eps):
    ref = vr_from_rows(rows_grr(eps, 2))
    for fn in (R.general, R.duchi, R.harmony):
        assert_vr(fn(eps), ref)


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("d", [2, 3, 4])
def test_binary_rr_and_rappor(eps, d):
    ref = vr_from_rows(rows_binary_rr(eps, d))
    assert_vr(R.binary_rr(eps, d), ref)
    assert_vr(R.rappor(eps, d), ref)


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("d,k", [(2, 1), (4, 1), (4, 2), (5, 2), (5, 4), (6, 3)])
def test_subset_selection(eps, d, k):
    M = rows_set_exponential(eps, d, k, 1)
    assert_vr(R.subset_selection(eps, d, k), vr_from_rows(M))
    # the table's binomial form
    e = math.exp(eps)
    table = (e - 1) * (math.comb(d - 1, k - 1) - (math.comb(d - 2, k - 2) if k >= 2 else 0)) / (
        e * math.comb(d - 1, k - 1) + math.comb(d - 1, k))
    assert float(R.subset_selection(eps, d, k).beta) == pytest.approx(table, rel=TOL)


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("d,l,family", [(3, 2, "all"), (3, 3, "all"), (4, 3, "all"), (3, 3, "injective"),
                                        (3, 4, "injective"), (2, 2, "injective")])
def test_local_hash(eps, d, l, family):
    collision = 1.0 / l if family == "all" else 0.0
    assert_vr(R.local_hash(eps, l, collision), vr_from_rows(rows_local_hash(eps, d, l, family)))


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("K,B", [(4, 1), (8, 1), (16, 1), (8, 2), (16, 2), (12, 3), (16, 4)])
def test_hadamard_response(eps, K, B):
    M, s = rows_hadamard(eps, K, B)
    assert_vr(R.hadamard_response(eps, K, s, B), vr_from_rows(M))


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("d,s", [(2, 1), (3, 1), (4, 2), (5, 2), (5, 3), (6, 3), (6, 4)])
def test_sampling_rappor(eps, d, s):
    assert_vr(R.sampling_rappor(eps, d, s), vr_from_rows(rows_sampling_rappor(eps, d, s)))


def test_sampling_rappor_large_sets_against_direct_sum():
    """The O(j) recurrence against the direct double sum over two binomials."""
    from scipy.stats import binom
    for eps, d, s in [(1.0, 200, 50), (4.0, 1000, 300), (0.1, 60, 40)]:
        t = math.exp(eps / 2)
        j = min(s, d - s)
        pmf = binom.pmf(np.arange(j + 1), j, 1 / (1 + t))
        gap = np.abs(np.subtract.outer(np.arange(j + 1), np.arange(j + 1)))
        e_abs = np.sum(pmf[:, None] * pmf[None, :] * gap)
        want = (t - 1 / t) / (2 * s) * e_abs
        assert float(R.sampling_rappor(eps, d, s).beta) == pytest.approx(want, rel=1e-11)


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("d,s,cells,extra", [(3, 1, 2, 1), (4, 2, 3, 2), (5, 2, 1, 0), (3, 2, 2, 3)])
def test_wheel(eps, d, s, cells, extra):
    M, arc = rows_wheel(eps, d, s, cells, extra)
    assert_vr(R.wheel(eps, d, s, arc), vr_from_rows(M))


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("s,l", [(1, 2), (1, 5), (2, 3), (2, 4), (2, 7), (3, 5), (4, 6)])
def test_collision(eps, s, l):
    assert_vr(R.collision(eps, s, l), vr_from_rows(rows_collision(eps, s, l)))


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("d,k,s", [(4, 1, 1), (5, 2, 1), (5, 2, 2), (6, 2, 2), (6, 3, 2), (5, 1, 3),
                                   (6, 2, 4)])
def test_k_subset_exponential(eps, d, k, s):
    assert_vr(R.k_subset_exponential(eps, d, k, s), vr_from_rows(rows_set_exponential(eps, d, k, s)))


def test_k_subset_exponential_large_domain():
    from fractions import Fraction
    for eps, d, k, s in [(1.0, 1000, 30, 20), (3.0, 300, 100, 10), (0.5, 50, 5, 25)]:
        e = Fraction(math.exp(eps))
        u = min(2 * s, d)
        om = e * (math.comb(d, k) - math.comb(d - s, k)) + math.comb(d - s, k)
        want = float((e - 1) * (math.comb(d - s, k) - math.comb(d - u, k)) / om)
        assert float(R.k_subset_exponential(eps, d, k, s).beta) == pytest.approx(want, rel=1e-10)
    for eps, d, k in [(1.0, 7, 3), (2.0, 40, 9)]:
        assert float(R.k_subset_exponential(eps, d, k, 1).beta) == pytest.approx(
            float(R.subset_selection(eps, d, k).beta), rel=1e-12)


@pytest.mark.parametrize("eps1,eps2", [(0.0, 1.0), (1.0, 0.0), (0.5, 0.5), (1.0, 2.0), (2.5, 0.3)])
@pytest.mark.parametrize("d", [2, 3, 5])
def test_pckv_grr(eps1, eps2, d):
    assert_vr(R.pckv_grr(eps1, eps2, d), vr_from_rows(rows_pckv_grr(eps1, eps2, d)))


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("dim", [1, 3, 5])
def test_duchi_odd_dimension(eps, dim):
    assert_vr(R.duchi(eps), vr_from_rows(rows_duchi(eps, dim)))


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("dim", [1, 2, 3])
def test_harmony(eps, dim):
    assert_vr(R.harmony(eps), vr_from_rows(rows_harmony(eps, dim)))


@pytest.mark.parametrize("eps1,eps2", [(0.0, 1.0), (1.0, 0.0), (0.5, 0.5), (1.0, 2.0), (2.5, 0.3),
                                       (0.2, 3.0)])
@pytest.mark.parametrize("d,s", [(2, 1), (2, 2), (3, 1), (3, 2), (4, 2), (4, 3)])
def test_privkv(eps1, eps2, d, s):
    assert_vr(R.privkv(eps1, eps2, d, s), vr_from_rows(rows_privkv(eps1, eps2, d, s)))


# --------------------------------------------------------------------------------------
# Multi-message protocols: victim rows against the blanket distribution
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("coin", [0.1, 0.5, 0.8])
def test_balcer_cheu(coin):
    params = R.balcer_cheu(coin, 3)
    assert_vr(params, vr_from_rows(np.eye(2), blanket=[1 - coin, coin]))
    assert float(params.blanket_per_user) == 3.0
    assert_vr(R.balcer_uniform(2), vr_from_rows(np.eye(2), blanket=[0.5, 0.5]))


@pytest.mark.parametrize("f", [0.05, 0.2, 0.5])
@pytest.mark.parametrize("dim", [2, 3])
def test_cheu_zhilyaev(f, dim):
    def rr(x):  # flip every bit w.p. f
        ys = np.array(list(itertools.product([0, 1], repeat=dim)))
        return np.prod(np.where(ys == np.asarray(x)[None, :], 1 - f, f), axis=1)
    M = np.array([rr(np.eye(dim)[i]) for i in range(dim)])
    assert_vr(R.cheu_zhilyaev(f, 4), vr_from_rows(M, blanket=rr(np.zeros(dim))))


@pytest.mark.parametrize("d,s", [(4, 1), (6, 2), (6, 3), (5, 3), (5, 4)])
def test_balls_into_bins(d, s):
    M = np.array([np.isin(np.arange(d), X) / s for X in itertools.combinations(range(d), s)])
    assert_vr(R.balls_into_bins(d, s, 1), vr_from_rows(M, blanket=np.full(d, 1 / d)))


@pytest.mark.parametrize("d", [2, 3, 7])
def test_dump(d):
    assert_vr(R.pure_dump(d, 5), vr_from_rows(np.eye(d), blanket=np.full(d, 1 / d)))
    for f in [0.1, 0.5, (d - 1) / d]:
        M = np.full((d, d), f / (d - 1))
        np.fill_diagonal(M, 1 - f)
        assert_vr(R.mix_dump(f, d, 5), vr_from_rows(M, blanket=np.full(d, 1 / d)))


def test_n_blanket():
    assert float(R.grr(1.0, 3).n_blanket(100)) == 99.0
    assert float(R.cheu_zhilyaev(0.2, 4).n_blanket(100)) == 400.0


# --------------------------------------------------------------------------------------
# Continuous mechanisms: numerical integration
# --------------------------------------------------------------------------------------

def _lap_tv(shift, scale=1.0):
    f = lambda y: 0.5 * abs(math.exp(-abs(y) / scale) - math.exp(-abs(y - shift) / scale)) / (2 * scale)
    return sum(integrate.quad(f, a, b, epsabs=1e-15, epsrel=1e-13)[0]
               for a, b in [(-np.inf, 0.0), (0.0, shift), (shift, np.inf)])


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_laplace(eps):
    params = R.laplace(eps)
    assert float(params.beta) == pytest.approx(_lap_tv(1.0, 1.0 / eps), rel=1e-10)
    ys = np.linspace(-5, 6, 2001)
    xs = np.linspace(0, 1, 11)
    dens = np.exp(-eps * np.abs(ys[None, :] - xs[:, None]))
    assert float(params.p) == pytest.approx((dens[:, None, :] / dens[None, :, :]).max(), rel=1e-12)
    assert float(params.q) == float(params.p)


@pytest.mark.parametrize("d01,dmax", [(0.2, 0.2), (1.0, 2.5), (3.0, 4.0)])
def test_metric_laplace(d01, dmax):
    params = R.metric_laplace(d01, dmax)
    assert float(params.beta) == pytest.approx(_lap_tv(d01), rel=1e-10)
    assert float(params.p) == pytest.approx(math.exp(d01), rel=1e-14)
    # q: other inputs within distance dmax of the victim's; the ratio peaks at exp(dmax)
    ys = np.linspace(-10, 10, 4001)
    ratio = np.exp(-np.abs(ys)) / np.exp(-np.abs(ys - dmax))
    assert float(params.q) == pytest.approx(ratio.max(), rel=1e-12)
    assert_vr(R.metric_general(d01, dmax),
              (math.exp(d01), math.tanh(d01 / 2), math.exp(dmax)))


@pytest.mark.slow
def test_planar_laplace_against_mpmath():
    """beta = (2/pi)(int_0^h K0 - h K0(h)), h = d01/2; int_0^h K0 by the Struve closed form."""
    mpmath.mp.dps = 30

    def ref(d01, by_quad=False):
        h = mpmath.mpf(d01) / 2
        if by_quad:
            int_k0 = mpmath.quad(lambda t: mpmath.besselk(0, t), [0, h])
        else:
            int_k0 = mpmath.pi * h / 2 * (mpmath.besselk(0, h) * mpmath.struvel(-1, h)
                                          + mpmath.besselk(1, h) * mpmath.struvel(0, h))
        return float(2 / mpmath.pi * (int_k0 - h * mpmath.besselk(0, h)))

    d01s = np.array([1e-9, 1e-6, 0.01, 0.3, 1.0, 2.0, 7.0, 30.0, 95.0])
    got = np.asarray(R.planar_laplace(d01s, d01s + 1.0).beta)
    np.testing.assert_allclose(got, [ref(d) for d in d01s], rtol=1e-13, atol=0)
    assert float(R.planar_laplace(1.0, 1.0).beta) == pytest.approx(ref(1.0, by_quad=True), rel=1e-14)
    # the table's double integral, as printed
    d01 = 1.3
    val = integrate.dblquad(lambda y, x: math.exp(-math.hypot(x - d01 / 2, y)), 0, d01 / 2,
                            -math.inf, math.inf, epsabs=1e-14, epsrel=1e-12)[0]
    assert float(R.planar_laplace(d01, 2.0).beta) == pytest.approx(2 * val / (2 * math.pi), rel=1e-10)
    params = R.planar_laplace(np.array([0.0, 1.0]), np.array([0.5, 3.0]))
    np.testing.assert_allclose(params.p, np.exp([0.0, 1.0]), rtol=1e-15)
    np.testing.assert_allclose(params.q, np.exp([0.5, 3.0]), rtol=1e-15)
    assert float(params.beta[0]) == 0.0


def _privunit_tv(eps, c, theta):
    """TV between PrivUnit outputs (sphere in R^3) for inputs at angle theta, by quadrature.

    t = <z, x0> is uniform on [-1, 1]; for fixed t the azimuth decides <z, x1>.
    """
    e = math.exp(eps)
    pi_c = c * e / (c * e + 1 - c)
    hi, lo = pi_c / c, (1 - pi_c) / (1 - c)
    gamma = 1 - 2 * c  # cap {<z,x> >= gamma} has normalized area c in R^3

    def inner(t):
        f0 = hi if t >= gamma else lo
        st = math.sqrt(max(0.0, 1 - t * t)) * math.sin(theta)
        base = t * math.cos(theta)
        if st < 1e-15:
            frac1 = 1.0 if base >= gamma else 0.0
        else:
            frac1 = math.acos(min(1.0, max(-1.0, (gamma - base) / st))) / math.pi
        return frac1 * abs(f0 - hi) + (1 - frac1) * abs(f0 - lo)

    pts = sorted({gamma, -gamma, 0.0})
    val = integrate.quad(inner, -1, 1, points=pts, limit=200, epsabs=1e-14, epsrel=1e-12)[0]
    return 0.5 * 0.5 * val


@pytest.mark.parametrize("c", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_privunit(c):
    eps = 1.5
    params = R.privunit(eps, c)
    assert float(params.beta) == pytest.approx(_privunit_tv(eps, c, math.pi), rel=1e-9)
    for theta in [0.3, 1.0, 2.0, 2.8]:
        assert _privunit_tv(eps, c, theta) <= float(params.beta) * (1 + 1e-9)
    e = math.exp(eps)
    table = c * (e - 1) / (c * e + 1 - c)
    if c <= 0.5:
        assert float(params.beta) == pytest.approx(table, rel=1e-14)
    else:  # discrepancy: the table's value is the wrong branch for c > 1/2
        assert table > float(params.beta) * 1.01


# --------------------------------------------------------------------------------------
# Lower-bound parameters (Theorem 5.1)
# --------------------------------------------------------------------------------------

def assert_lower(lower, M, i0, i1):
    p0, beta, q0s, q1s = lower_from_rows(M, i0, i1)
    assert float(lower.p0) == pytest.approx(p0, rel=TOL)
    assert float(lower.beta) == pytest.approx(beta, rel=TOL, abs=TOL)
    best = np.minimum(q0s, q1s).max()
    got = (float(lower.q0), float(lower.q1))
    assert min(got) == pytest.approx(best, rel=TOL)  # x* maximizes min(q0, q1)
    assert np.any((np.abs(q0s - got[0]) <= 1e-12 * got[0]) & (np.abs(q1s - got[1]) <= 1e-12 * got[1]))


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
def test_lower_params(eps):
    for k in (2, 3, 5):
        assert_lower(R.grr_lower(eps, k), rows_grr(eps, k), 0, 1)
    for d in (2, 3, 4):
        assert_lower(R.binary_rr_lower(eps, d), rows_binary_rr(eps, d), 0, 1)
    for d, k in [(2, 1), (4, 1), (4, 2), (5, 3), (6, 2)]:
        assert_lower(R.subset_selection_lower(eps, d, k), rows_set_exponential(eps, d, k, 1), 0, 1)
    for d, l, family in [(3, 3, "all"), (4, 2, "all"), (3, 3, "injective"), (3, 5, "injective")]:
        collision = 1.0 / l if family == "all" else 0.0
        assert_lower(R.local_hash_lower(eps, l, collision), rows_local_hash(eps, d, l, family), 0, 1)
    for K, B in [(4, 1), (8, 1), (8, 2), (16, 2), (12, 3), (16, 4)]:
        M, s = rows_hadamard(eps, K, B)
        per_block = K // B - 1
        i1 = 1 if B == 1 else per_block  # B = 1: rows 1 and 2; B > 1: first rows of blocks 0, 1
        assert_lower(R.hadamard_response_lower(eps, K, s, B), M, 0, i1)


@pytest.mark.parametrize("eps", [0.2, 1.0, 4.0])
def test_laplace_lower(eps):
    from scipy.stats import laplace as lap
    sc = 1.0 / eps
    low = R.laplace_lower(eps)
    r1y1 = lap.sf(0.5, loc=1.0, scale=sc)
    r0y1 = lap.sf(0.5, loc=0.0, scale=sc)
    assert float(low.p0) == pytest.approx(r1y1 / r0y1, rel=1e-12)
    assert float(low.beta) == pytest.approx(r1y1 - r0y1, rel=1e-12)
    xs = np.linspace(0, 1, 101)
    q1 = r1y1 / lap.sf(0.5, loc=xs, scale=sc)
    q0 = lap.cdf(0.5, loc=0.0, scale=sc) / lap.cdf(0.5, loc=xs, scale=sc)
    assert float(low.q1) == pytest.approx(np.minimum(q0, q1).max(), rel=1e-12)
    assert float(low.q0) == float(low.q1)
    # x* = 1/2 puts mass 1/2 on each differing set: r0 = r1 = 1/2, accepted despite rounding
    eps_grid = np.linspace(0.0, 20.0, 401)
    pair = R.laplace_lower(eps_grid).pair()
    np.testing.assert_allclose(pair.r0[1:], 0.5, rtol=1e-14)
    assert float(jnp.max(pair.r0 + pair.r1)) <= 1.0
    pair2 = R.grr_lower(eps_grid, 2).pair()
    assert float(jnp.max(pair2.r0 + pair2.r1)) <= 1.0


def test_lower_params_unadjusted_and_q_at_least_one():
    """LowerParams carry the formula values (no ulp bumps; vr_pair clips r0 + r1 rounding),
    and q >= 1 survives rounding where it is exactly 1 (subset selection with k = d - 1)."""
    eps_grid = np.linspace(0.0, 20.0, 401)
    low = R.laplace_lower(eps_grid)
    hh = np.exp(-0.5 * eps_grid)  # a row computes plain values in numpy (Inputs.xp)
    np.testing.assert_array_equal(np.asarray(low.q0), 2.0 - hh)
    np.testing.assert_array_equal(np.asarray(R.grr_lower(eps_grid, 2).q0), 1.0)
    low = R.subset_selection_lower(1.03125, 6, 5)
    assert float(low.q0) == float(low.q1) == 1.0
    low.pair()  # accepted by vr_pair (q0, q1 >= 1)


# --------------------------------------------------------------------------------------
# Discrepancies with the printed tables (documented in the docstrings)
# --------------------------------------------------------------------------------------

def test_table_discrepancies():
    eps = 1.0
    e, t = math.exp(eps), math.exp(eps / 2)
    # sampling RAPPOR: the table's s(t-1)/(d(t+1)) is below the true TV (s = 1 is binary RR)
    for d, s in [(4, 1), (6, 2)]:
        true_beta = vr_from_rows(rows_sampling_rappor(eps, d, s))[1]
        assert s * (t - 1) / (d * (t + 1)) < 0.5 * true_beta
    # PrivKV: the table's beta is a loose upper bound and its p = e^{eps1+eps2} is not attained
    e1, e2, d, s = math.exp(0.7), math.exp(1.2), 4, 2
    table = 2 * s * max(e1 * (e2 - 1) / (e2 + 1), e1 - 1 + (e2 - 1) / (2 * (e2 + 1))) / (d * (e1 + 1))
    p, beta, _ = vr_from_rows(rows_privkv(0.7, 1.2, d, s))
    assert table > beta * 1.05 and p < e1 * e2
    # local hash: for uniformly random hash functions the TV is (1 - 1/l) times the table's
    l = 3
    table_lh = (e - 1) / (e + l - 1)
    true_lh = vr_from_rows(rows_local_hash(eps, 3, l, "all"))[1]
    assert true_lh == pytest.approx((1 - 1 / l) * table_lh, rel=1e-12)


# --------------------------------------------------------------------------------------
# Arrays, tracing, errors
# --------------------------------------------------------------------------------------

def test_broadcasting_matches_scalar_calls():
    eps = np.array([[0.5], [1.0], [2.0]])
    k = np.array([2, 3, 7])
    params = R.grr(eps, k)
    assert params.p.shape == params.beta.shape == params.q.shape == (3, 3)
    for i in range(3):
        for j in range(3):
            assert float(params.beta[i, j]) == float(R.grr(float(eps[i, 0]), int(k[j])).beta)
    sr = R.sampling_rappor(np.array([0.5, 1.0]), np.array([[6], [9]]), np.array([1, 2]))
    assert sr.beta.shape == (2, 2)
    assert float(sr.beta[1, 1]) == pytest.approx(float(R.sampling_rappor(1.0, 9, 2).beta), rel=1e-15)
    with pytest.raises(ValueError, match="do not broadcast"):
        R.grr(np.ones(3), np.full(2, 3))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(R.CATALOG))
def test_every_entry_broadcasts_jits_and_is_a_pytree(name):
    entry = R.CATALOG[name]
    first = entry.args[0].name
    kwargs = dict(entry.example)
    base = entry.fn(**kwargs)
    kwargs[first] = np.full((2, 1), kwargs[first])
    batch = entry.fn(**kwargs)
    assert batch.p.shape == (2, 1)
    np.testing.assert_array_equal(np.asarray(batch.beta)[0, 0], np.asarray(base.beta))
    jitted = jax.jit(lambda kw: entry.fn(**kw))(dict(entry.example))
    for a, b in zip(jax.tree_util.tree_leaves(jitted), jax.tree_util.tree_leaves(base)):
        assert float(a) == pytest.approx(float(b), rel=1e-14)
    assert (base.blanket_per_user is not None) == entry.multi_message
    if entry.lower is not None:
        assert float(entry.lower(**entry.example).beta) == pytest.approx(float(base.beta), rel=1e-14)


@pytest.mark.slow
def test_traced_invalid_points_are_nan_and_vmap():
    out = jax.jit(R.grr)(jnp.array([1.0, -1.0, 1.0]), jnp.array([3.0, 3.0, 1.0]))
    assert bool(jnp.isfinite(out.beta[0])) and bool(jnp.isnan(out.beta[1])) and bool(jnp.isnan(out.p[2]))
    eps = jnp.linspace(0.1, 3.0, 5)
    v = jax.vmap(lambda e: R.sampling_rappor(e, 8.0, 3.0).beta)(eps)
    np.testing.assert_allclose(v, R.sampling_rappor(eps, 8, 3).beta, rtol=1e-14)
    g = jax.grad(lambda e: R.subset_selection(e, 10.0, 3.0).beta)(1.0)
    assert bool(jnp.isfinite(g)) and float(g) > 0
    f = lambda e: R.sampling_rappor(e, 10.0, 3.0).beta
    assert float(jax.jacfwd(f)(1.0)) == pytest.approx(float(f(1.0 + 1e-6) - f(1.0 - 1e-6)) / 2e-6, rel=1e-6)


def _invalid_values(arg: R.Arg):
    bad = [math.nan]
    bad.append(arg.low if arg.low_open else arg.low - (1.0 if arg.kind == "int" else 0.5))
    if arg.kind == "int":
        bad.append(arg.low + 0.5)
    if arg.high != math.inf:
        bad.append(arg.high if arg.high_open else arg.high + 0.5)
    else:
        bad.append(math.inf)
    return bad


@pytest.mark.parametrize("name", sorted(R.CATALOG))
def test_invalid_options_name_the_parameter(name):
    entry = R.CATALOG[name]
    for arg in entry.args:
        for bad in _invalid_values(arg):
            kwargs = dict(entry.example, **{arg.name: bad})
            with pytest.raises(ValueError, match=rf"^{arg.name}: must be {re.escape(arg.range_text())}"):
                entry.fn(**kwargs)



@pytest.mark.parametrize("call,pattern", [
    (lambda: R.subset_selection(1.0, 4, 4), r"^k: must be <= d - 1"),
    (lambda: R.hadamard_response(1.0, 8, 4, 4), r"^s: must satisfy s <= K/B"),
    (lambda: R.hadamard_response(1.0, 8, 8, 1), r"^s: must satisfy"),
    (lambda: R.hadamard_response_lower(1.0, 8, 1, 4), r"^K: must be >= 4 B"),
    (lambda: R.wheel(1.0, 10, 3, 0.5), r"^arc: must satisfy s \* arc <= 1"),
    (lambda: R.sampling_rappor(1.0, 4, 4), r"^s: must be <= d - 1"),
    (lambda: R.k_subset_exponential(1.0, 6, 4, 3), r"^k: must be <= d - s"),
    (lambda: R.privkv(1.0, 1.0, 3, 4), r"^s: must be <= d"),
    (lambda: R.metric_laplace(2.0, 1.0), r"^dmax: must be >= d01"),
    (lambda: R.mix_dump(0.95, 10, 1), r"^f: must be <= \(d-1\)/d"),
    (lambda: R.balls_into_bins(4, 4, 1), r"^s: must be <= d - 1"),
    (lambda: R.grr(np.array([1.0, 2.0]), np.array([3, 1])), r"^k: .*first bad index \(1,\)"),
])
def test_cross_constraints(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_catalog_metadata():
    for name, entry in R.CATALOG.items():
        assert re.fullmatch(r"[a-z0-9-]+", name)
        assert entry.description and entry.source and entry.fn.__doc__
        assert [a.name for a in entry.args] == list(entry.example)
        params = inspect.signature(entry.fn).parameters
        assert list(params) == [a.name for a in entry.args]
        for a in entry.args:  # the Arg's default is the function's default
            default = params[a.name].default
            assert (a.default is None) == (default is inspect.Parameter.empty)
            assert a.default is None or a.default == default
        doc = entry.fn.__doc__
        assert ("Table" in doc or "seed tables" in doc) and ("p = " in doc or "p`` " in doc or "``p" in doc)


# --------------------------------------------------------------------------------------
# Properties over random valid options (hypothesis)
# --------------------------------------------------------------------------------------

def _strategy(arg: R.Arg):
    if arg.kind == "int":
        return st.integers(int(arg.low), int(min(arg.high, arg.low + 40)))
    hi = min(arg.high, 12.0)
    return st.floats(arg.low, hi, exclude_min=arg.low_open, exclude_max=arg.high_open or arg.high == math.inf,
                     allow_nan=False)


@pytest.mark.slow
def test_admit_beta_never_leaves_beta_short():
    """admit_beta raises p (never lowers it) until (p-1)/(p+1) >= beta in float, for every beta scale and
    p a few ulps below (1+beta)/(1-beta): callers rely on it and no longer cap beta afterwards."""
    from jaxshuffle.pair import worst_case_beta
    from jaxshuffle.randomizers.params import admit_beta
    rng = np.random.default_rng(0)
    for scale in (1e-17, 1e-16, 1e-15, 1e-12, 1e-8, 1e-3, 0.1, 0.5, 0.9, 0.999, 1 - 1e-9, 1 - 1e-14):
        beta = scale * rng.uniform(0.5, 2.0, 20_000)
        beta = beta[beta < 1]
        low = rng.integers(0, 8, beta.size) * 2.2e-16, rng.integers(0, 4, beta.size) * 2.2e-16
        p = (1 + beta) / (1 - beta) * (1 - low[0]) - low[1]  # up to 11 ulps low
        p = np.maximum(p, 1.0)
        for xp in (np, jnp):
            raised = np.asarray(admit_beta(xp.asarray(p), xp.asarray(beta), xp))
            assert np.all(raised >= p)
            assert np.all(beta <= worst_case_beta(raised, np))


@pytest.mark.parametrize("traced", [False, True])
def test_rounding_of_p_never_lowers_beta(traced):
    """Where ``p = e^eps0`` rounds low enough that ``(p-1)/(p+1) < beta`` (Laplace at eps0 ~ 1e-16,
    found by a Hypothesis draw on a GPU machine: beta 1.15e-16 was capped to 1.11e-16, below the
    mechanism's and below the lower bound's), the upper parameters raise ``p`` instead: beta is the
    row's own value, ``p`` admits it and is at least the exact ``e^eps0`` (mpmath), and the lower
    bound's beta does not exceed it. Eager rows compute in numpy, traced ones in jnp: both are checked."""
    eps0 = np.array([1e-16, 2.3e-16, 3e-16, 7.7e-16, 1e-15, 1e-12, 0.5])
    row = jax.jit(R.laplace) if traced else R.laplace
    up, low = row(eps0), R.laplace_lower(eps0)
    p, beta = np.asarray(up.p), np.asarray(up.beta)
    np.testing.assert_array_equal(beta, -np.expm1(-0.5 * eps0))
    assert np.all(beta <= (p - 1.0) / (p + 1.0))
    assert all(mpmath.mpf(float(pi)) >= mpmath.exp(mpmath.mpf(float(e))) for pi, e in zip(p, eps0))
    assert np.all(np.asarray(low.beta) <= beta)
    assert p[-1] == np.exp(0.5)  # nothing moves where the bound already admits beta
    # and the gradient in eps0 is p's own
    assert float(jax.grad(lambda e: R.laplace(e).p)(jnp.float64(0.5))) == pytest.approx(np.exp(0.5), rel=1e-15)


@pytest.mark.parametrize("name", sorted(R.CATALOG))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_properties_over_valid_options(name, data):
    entry = R.CATALOG[name]
    kwargs = {a.name: data.draw(_strategy(a), label=a.name) for a in entry.args}
    try:
        params = entry.fn(**kwargs)
    except ValueError:
        assume(False)  # a cross-constraint (k <= d - 1, ...) excluded these options
    p, beta, q = (float(x) for x in (params.p, params.beta, params.q))
    assert p >= 1.0 and q >= 1.0
    worst = 1.0 if math.isinf(p) else (p - 1.0) / (p + 1.0)
    assert -1e-15 <= beta <= worst * (1 + 1e-12) + 1e-300
    pair = params.pair()  # the Theorem 4.7 pair accepts the parameters (r0 + r1 <= 1)
    assert math.isfinite(float(pair.r0))
    if entry.lower is not None:
        try:
            low = entry.lower(**kwargs)
        except ValueError:  # the lower-bound construction needs more inputs (hadamard: K >= 4B)
            return
        p0, lb, q0, q1 = (float(x) for x in (low.p0, low.beta, low.q0, low.q1))
        assert q0 >= 1.0 and q1 >= 1.0 and 1.0 <= p0 <= p * (1 + 1e-12)
        assert q0 <= p0 * q1 * (1 + 1e-12) and q1 <= p0 * q0 * (1 + 1e-12)  # Appendix I: q0/q1 in [1/p0, p0]
        # Equal up to the catalog's cap beta <= (p0-1)/(p0+1), whose float evaluation is off by
        # ~ulp/(p0-1) relative (p0 -> 1 as eps0 -> 0); the cap only ever lowers the lower pair's beta.
        cap_rounding = 8 * 2.3e-16 / max(p0 - 1.0, 1e-300)
        assert beta * (1 - max(cap_rounding, 1e-14)) <= lb <= beta * (1 + 1e-14) + 1e-300
        pair = low.pair()  # accepted by vr_pair: r0 + r1 <= 1 (= 1 for GRR k = 2 and Laplace)
        assert float(pair.r0) + float(pair.r1) <= 1.0


def test_rows_that_moved_out_of_ldp_warn_and_still_resolve():
    """The key-value and set-valued rows live in their own modules; the old path jaxshuffle.randomizers.ldp
    still gives them, with a DeprecationWarning naming the new module."""
    import importlib

    ldp = importlib.import_module("jaxshuffle.randomizers.ldp")
    for name, home in (("privkv", "key_value"), ("wheel", "set_valued"), ("S_SET", "set_valued")):
        with pytest.warns(DeprecationWarning, match=rf"ldp\.{name} moved: import it from "
                                                    rf"jaxshuffle\.randomizers\.{home} \(or jaxshuffle\.randomizers\)"):
            assert getattr(ldp, name) is getattr(importlib.import_module(f"jaxshuffle.randomizers.{home}"), name)
    with pytest.raises(AttributeError, match="module 'jaxshuffle.randomizers.ldp' has no attribute 'nope'"):
        _ = ldp.nope
