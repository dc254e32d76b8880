"""Tests of jaxshuffle.closed_forms and jaxshuffle.metric.

Three kinds of check:

1. Each closed form equals an independent mpmath transcription of its formula.
2. Soundness: each closed form is >= the epsilon of its own pair (or, for bounds on
   every eps0-LDP randomizer, of exactly computed shuffled k-RR), wherever its valid
   mask is True, over a seeded random parameter campaign. The pair epsilon comes from
   the slow reference below: brute-force enumeration of the pair's (a, b) pmf in log
   space (numpy/scipy) and bisection on eps.
3. Conventions: invalid -> (+inf, False) and never NaN, broadcasting, jit, eager
   ValueError naming the parameter; the blanket bounds against a direct evaluation of
   their defining inequalities (and those inequalities against an exact L).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from scipy.special import gammaln, logsumexp, xlog1py, xlogy
from scipy.stats import multinomial

import jaxshuffle.closed_forms as cf
import jaxshuffle.metric as mt

mp.mp.dps = 40

# =============================================================================== reference
# Slow, obviously-right epsilon of a two-count pair (docs/math.md section 1).
# P(a,b) = u M(a-1,b) + v M(a,b-1) + w M(a,b), Q: u <-> v, M trinomial over n-1 others.
# D_t over all cells from cells sorted by log(P/Q); eps = min{eps >= 0: max(D_t) <= delta}.


_DROP = -200.0


def _log_trinomial(n_others, r0, r1, a, b):
    ok = (a >= 0) & (b >= 0) & (a + b <= n_others)
    a_s, b_s = np.where(ok, a, 0), np.where(ok, b, 0)
    c_s = n_others - a_s - b_s
    with np.errstate(divide="ignore", invalid="ignore"):
        val = (gammaln(n_others + 1) - gammaln(a_s + 1) - gammaln(b_s + 1) - gammaln(c_s + 1)
               + xlogy(a_s, r0) + xlogy(b_s, r1) + xlog1py(c_s, -(r0 + r1)))
    return np.where(ok, val, -np.inf)


def _window(n_others, r):
    """Index range holding all but ~e^-200 of Bin(n_others, r), widened by one."""
    mu, sd = n_others * r, np.sqrt(n_others * r * (1 - r))
    lo = max(0, int(np.floor(mu - 20 * sd - 20)))
    hi = min(n_others + 1, int(np.ceil(mu + 20 * sd + 20)))
    return lo, hi


def pair_log_pmfs(n, u, v, w, r0, r1):
    """(a, b, log P, log Q) over the cells a + b <= n that carry mass (numpy float64).

    Cells outside a window of +-(20 sd + 20) around each marginal mean are skipped (their
    total mass is below ~e^-100 at the sizes used here).
    """
    n = int(n)
    if r0 + r1 >= 1.0:  # every other user emits a marker: only a + b in {n-1, n} has mass
        a = np.concatenate([np.arange(n), np.arange(n + 1)]).astype(np.float64)
        b = np.concatenate([n - 1 - np.arange(n), n - np.arange(n + 1)]).astype(np.float64)
        m10 = _log_trinomial(n - 1, r0, r1, a - 1, b)
        m01 = _log_trinomial(n - 1, r0, r1, a, b - 1)
        m00 = _log_trinomial(n - 1, r0, r1, a, b)
        with np.errstate(divide="ignore"):
            lu, lv, lw = np.log(u), np.log(v), np.log(w)
        lp = logsumexp(np.stack([lu + m10, lv + m01, lw + m00]), axis=0)
        lq = logsumexp(np.stack([lv + m10, lu + m01, lw + m00]), axis=0)
        return a, b, lp, lq
    a_lo, a_hi = _window(n - 1, r0)
    b_lo, b_hi = _window(n - 1, r1)
    A = np.arange(a_lo - 1, a_hi + 1, dtype=np.float64)[:, None]
    B = np.arange(b_lo - 1, b_hi + 1, dtype=np.float64)[None, :]
    lm = _log_trinomial(n - 1, r0, r1, A, B)
    m10, m01, m00 = lm[:-1, 1:], lm[1:, :-1], lm[1:, 1:]
    a = np.broadcast_to(A[1:], m00.shape)
    b = np.broadcast_to(B[:, 1:], m00.shape)
    keep = a + b <= n
    with np.errstate(divide="ignore"):
        lu, lv, lw = np.log(u), np.log(v), np.log(w)
    lp = logsumexp(np.stack([lu + m10, lv + m01, lw + m00]), axis=0)
    lq = logsumexp(np.stack([lv + m10, lu + m01, lw + m00]), axis=0)
    return a[keep], b[keep], lp[keep], lq[keep]


class PairDivergence:
    """Hockey-stick divergences of a pair for any t, from sorted cells."""

    def __init__(self, n, u, v, w, r0, r1):
        _, _, lp, lq = pair_log_pmfs(n, u, v, w, r0, r1)
        keep = (lp > _DROP) | (lq > _DROP)
        self.lp, self.lq = lp[keep], lq[keep]
        self._dirs = [self._prep(self.lp, self.lq), self._prep(self.lq, self.lp)]

    @staticmethod
    def _prep(lx, ly):
        with np.errstate(invalid="ignore"):
            lr = lx - ly  # +inf where y = 0 < x
        lr = np.where(np.isnan(lr), -np.inf, lr)
        order = np.argsort(-lr, kind="stable")
        lr = lr[order]
        x, y = np.exp(lx[order]), np.exp(ly[order])
        return lr, np.concatenate([[0.0], np.cumsum(x)]), np.concatenate([[0.0], np.cumsum(y)])

    def divergence(self, eps):
        """max(D_{e^eps}(P||Q), D_{e^eps}(Q||P))."""
        out = 0.0
        for lr, cx, cy in self._dirs:
            k = int(np.searchsorted(-lr, -eps, side="left"))  # number of cells with lr > eps
            out = max(out, cx[k] - np.exp(eps) * cy[k])
        return out

    def max_log_ratio(self):
        return max(float(lr[0]) for lr, _, _ in self._dirs)

    def epsilon(self, delta, iters=200):
        """min{eps >= 0 : divergence(eps) <= delta} (inf if the infinite-loss mass > delta)."""
        if self.divergence(0.0) <= delta:
            return 0.0
        hi = self.max_log_ratio()
        if not np.isfinite(hi):
            # cells with infinite loss: eps is finite only if their mass is <= delta
            hi = 1.0
            while self.divergence(hi) > delta:
                hi *= 2
                if hi > 1e4:
                    return np.inf
        lo = 0.0
        for _ in range(iters):
            mid = 0.5 * (lo + hi)
            if self.divergence(mid) <= delta:
                hi = mid
            else:
                lo = mid
        return hi


def pair_epsilon(n, u, v, w, r0, r1, delta):
    return PairDivergence(n, u, v, w, r0, r1).epsilon(delta)


# --- the pairs used by the tests (written out here, independent of jaxshuffle.pair) ---


def vr_pair_fields(p, beta, q):
    alpha = beta / (p - 1)
    return p * alpha, alpha, max(0.0, 1 - (p + 1) * alpha), alpha * p / q, alpha * p / q


def stronger_clone_fields(eps0):
    p = np.exp(eps0)
    return p / (p + 1), 1 / (p + 1), 0.0, 1 / (p + 1), 1 / (p + 1)


def standard_clone_fields(eps0):
    p = np.exp(eps0)
    return p / (p + 1), 1 / (p + 1), 0.0, 0.5 / p, 0.5 / p


def metric_pair_fields(d_ab, r_max):
    e = np.exp(d_ab)
    return e / (e + 1), 1 / (e + 1), 0.0, 1 / r_max, 1 / r_max


def krr_fields(eps0, k):
    """Exact shuffled k-RR, victim x0 vs x1, all others holding x0: counts of (x0, x1).

    For k = 2 the observation is the count of x0 (a + b = n always).
    """
    p = np.exp(eps0)
    z = p + k - 1
    return p / z, 1 / z, (k - 2) / z, p / z, 1 / z


def _np(x):
    return np.asarray(x)


def _assert_convention(value, valid):
    value, valid = _np(value), _np(valid)
    assert value.dtype == np.float64 and valid.dtype == np.bool_
    assert not np.isnan(value).any()
    assert np.all(np.isinf(value[~valid])) and np.all(value[~valid] > 0)
    assert np.all(np.isfinite(value[valid]))


# ========================================================================= mpmath formulas
# Written straight from the formulas (docs/math.md section 7 and the cited theorems),
# independently of jaxshuffle. Each returns the value, or None where the stated
# conditions fail.


def mp_vr42(n, delta, p, beta, q):
    n, delta, p, beta, q = (mp.mpf(float(x)) for x in (n, delta, p, beta, q))
    alpha = beta / (p - 1)
    r = alpha * p / q
    w = 1 - (p + 1) * alpha
    if w < mp.mpf("1e-15"):
        w = mp.mpf(0)
    K = w * r / (1 - 2 * r)
    L = mp.log(4 / delta)
    m = mp.sqrt(L / 2)
    omega = 2 * r * (n - 1) - mp.sqrt(min(6 * r, mp.mpf(1) / 2) * (n - 1) * L)
    if not (omega > 0 and beta > 0):
        return None
    s = mp.sqrt(omega * L / 2)
    A = (p + 1) * alpha / 2 - K
    den = alpha * omega + beta * (omega / 2 - s) + K * (n - 1 - omega)
    if not (A >= 0 and 2 * m * A * omega + 2 * A * mp.sqrt(omega) > 2 * m * K * (n - 1) + beta * m
            and den > 0):
        return None
    return mp.log(1 + beta * (2 * s + 1) / den)


def mp_vr43(n, delta, p, beta, q):
    n, delta, p, beta, q = (mp.mpf(float(x)) for x in (n, delta, p, beta, q))
    r = p * beta / ((p - 1) * q)
    if not (beta > 0 and r < mp.mpf(1) / 2 and n >= 8 * mp.log(2 / delta) / r):
        return None
    X = beta * (1 + p) / (p - 1)
    c_r = max(mp.mpf(0), 4 * (1 - 3 * r) / (9 * (1 - 2 * r)))
    return mp.log(1 + beta / (X + (1 - X) * c_r)
                  * (mp.sqrt(32 * mp.log(4 / delta) / (r * (n - 1))) + 4 / (r * n)))


def mp_efmrtt(n, eps0, delta):
    n, eps0, delta = (mp.mpf(float(x)) for x in (n, eps0, delta))
    if not (eps0 <= mp.mpf(1) / 2 and n >= 1000 and delta <= mp.mpf(1) / 100):
        return None
    return 12 * eps0 * mp.sqrt(mp.log(1 / delta) / n)


def mp_fmt21(n, eps0, delta):
    n, eps0, delta = (mp.mpf(float(x)) for x in (n, eps0, delta))
    if not eps0 <= mp.log(n / (16 * mp.log(2 / delta))):
        return None
    e = mp.e ** eps0
    return mp.log(1 + (e - 1) / (e + 1) * (8 * mp.sqrt(e * mp.log(4 / delta) / n) + 8 * e / n))


def mp_fmt23(n, eps0, delta):
    n, eps0, delta = (mp.mpf(float(x)) for x in (n, eps0, delta))
    ratio = n / (8 * mp.log(2 / delta))
    if not (ratio > 1 and eps0 <= mp.log(ratio - 1)):
        return None
    e = mp.e ** eps0
    return mp.log(1 + (e - 1) * (4 * mp.sqrt(2 * mp.log(4 / delta) / ((e + 1) * n)) + 4 / n))


def mp_metric1(n, d, R, delta):
    n, d, R, delta = (mp.mpf(float(x)) for x in (n, d, R, delta))
    L = mp.log(4 / delta)
    pc = 2 / R
    omega = (n - 1) * pc - mp.sqrt(3 * (n - 1) * pc * L)
    if not (omega > 2 * L and (n - 1) * pc >= 3 * L):
        return None
    s = mp.sqrt(omega * L / 2)
    e_prime_m1 = (2 * s + 1) / (omega / 2 - s)
    eta = (mp.e ** d - 1) / (mp.e ** d + 1)
    return min(d, mp.log(1 + eta * e_prime_m1))


def mp_metric2(n, d, R, delta):
    n, d, R, delta = (mp.mpf(float(x)) for x in (n, d, R, delta))
    L = mp.log(4 / delta)
    if not n - 1 >= 8 * L * R:
        return None
    eta = (mp.e ** d - 1) / (mp.e ** d + 1)
    return min(d, mp.log(1 + 8 * eta * (mp.sqrt(R * L / (2 * (n - 1))) + R / (2 * (n - 1)))))


def _compare(jax_out, mp_vals, rtol=1e-11):
    value, valid = (_np(x).ravel() for x in jax_out)
    mp_valid = np.array([v is not None for v in mp_vals])
    np.testing.assert_array_equal(valid, mp_valid)
    for got, want in zip(value[valid], [v for v in mp_vals if v is not None]):
        assert abs(got - float(want)) <= rtol * abs(float(want)) + 1e-300, (got, want)
    return int(mp_valid.sum())


def _log_uniform(rng, lo, hi, size):
    return 10 ** rng.uniform(np.log10(lo), np.log10(hi), size)


def test_mpmath_vr_theorems():
    rng = np.random.default_rng(11)
    N = 400
    p = np.exp(rng.uniform(0.2, 6, N))
    worst = (p - 1) / (p + 1)
    beta = worst * np.where(rng.random(N) < 0.4, 1.0, rng.uniform(0.3, 1, N))
    q = np.maximum(p * rng.uniform(0.3, 3, N), np.maximum(1.0, 2.0001 * beta * p / (p - 1)))
    delta = _log_uniform(rng, 1e-10, 1e-2, N)
    n = np.round(_log_uniform(rng, 10, 1e8, N))
    got = cf.vr_theorem42(n, delta, p, beta, q)
    _assert_convention(*got)
    assert _compare(got, [mp_vr42(*a) for a in zip(n, delta, p, beta, q)]) > 50
    got = cf.vr_theorem43(n, delta, p, beta, q)
    _assert_convention(*got)
    assert _compare(got, [mp_vr43(*a) for a in zip(n, delta, p, beta, q)]) > 50


def test_mpmath_ldp_closed_forms():
    rng = np.random.default_rng(12)
    N = 300
    eps0 = rng.uniform(0, 8, N)
    delta = _log_uniform(rng, 1e-12, 0.5, N)
    n = np.round(_log_uniform(rng, 2, 1e9, N))
    for fn, ref in [(cf.fmt21_closed_form, mp_fmt21), (cf.fmt23_closed_form, mp_fmt23)]:
        got = fn(n, eps0, delta)
        _assert_convention(*got)
        assert _compare(got, [ref(*a) for a in zip(n, eps0, delta)]) > 50
    eps0 = rng.uniform(0, 0.7, N)
    delta = _log_uniform(rng, 1e-12, 0.05, N)
    n = np.round(_log_uniform(rng, 100, 1e9, N))
    got = cf.efmrtt19(n, eps0, delta)
    _assert_convention(*got)
    assert _compare(got, [mp_efmrtt(*a) for a in zip(n, eps0, delta)]) > 50


def test_mpmath_metric_closed_forms():
    rng = np.random.default_rng(13)
    N = 300
    d = rng.uniform(0, 6, N)
    R = (1 + np.exp(d)) * rng.uniform(1, 50, N)
    dmax = d + rng.uniform(0, 3, N)
    delta = _log_uniform(rng, 1e-12, 0.5, N)
    n = np.round(_log_uniform(rng, 2, 1e9, N))
    got = cf.metric_theorem1(n, d, R, delta)
    _assert_convention(*got)
    assert _compare(got, [mp_metric1(*a) for a in zip(n, d, R, delta)]) > 50
    got = cf.metric_corollary1(n, d, dmax, delta)
    _assert_convention(*got)
    assert _compare(got, [mp_metric1(a, b, 2 * np.exp(c), e) for a, b, c, e in zip(n, d, dmax, delta)]) > 50
    got = cf.metric_corollary2(n, d, R, delta)
    _assert_convention(*got)
    assert _compare(got, [mp_metric2(*a) for a in zip(n, d, R, delta)]) > 50


def test_vr_infinite_p_is_the_limit():
    # p = inf (multi-message rows): alpha = 0, alpha p = beta. Compare with p = 1e12.
    n, delta, beta, q = 20000.0, 1e-6, np.array([0.3, 0.7, 1.0]), 3.0
    for fn in (cf.vr_theorem42, cf.vr_theorem43):
        v_inf, ok_inf = fn(n, delta, np.inf, beta, q)
        v_big, ok_big = fn(n, delta, 1e12, beta * (1e12 - 1) / (1e12 + 1), q)
        np.testing.assert_array_equal(ok_inf, ok_big)
        assert _np(ok_inf).any()
        np.testing.assert_allclose(_np(v_inf)[_np(ok_inf)], _np(v_big)[_np(ok_big)], rtol=1e-9)


# ================================================================= reference sanity checks


def test_reference_engine_known_values():
    # docs/math.md section 3, checkable by hand.
    assert abs(pair_epsilon(2, *krr_fields(1.0, 3), 0.01) - 0.969408) < 1e-6
    e = np.e
    assert abs(pair_epsilon(2, *vr_pair_fields(e, (e - 1) / (e + 2), e), 0.01) - 0.914553) < 1e-6
    assert abs(pair_epsilon(1000, *krr_fields(5.0, 3), 1e-5) - 4.601) < 1e-3
    # trinomial against scipy.stats.multinomial on a small pair
    u, v, w, r0, r1 = 0.3, 0.2, 0.5, 0.25, 0.15
    a, b, lp, lq = pair_log_pmfs(7, u, v, w, r0, r1)

    def M(x, y):
        if x < 0 or y < 0 or x + y > 6:
            return 0.0
        return multinomial.pmf([x, y, 6 - x - y], 6, [r0, r1, 1 - r0 - r1])

    P = np.array([u * M(x - 1, y) + v * M(x, y - 1) + w * M(x, y) for x, y in zip(a.astype(int), b.astype(int))])
    Q = np.array([v * M(x - 1, y) + u * M(x, y - 1) + w * M(x, y) for x, y in zip(a.astype(int), b.astype(int))])
    np.testing.assert_allclose(np.exp(lp), P, atol=1e-15)
    np.testing.assert_allclose(np.exp(lq), Q, atol=1e-15)
    assert abs(np.exp(lp).sum() - 1) < 1e-12 and abs(np.exp(lq).sum() - 1) < 1e-12


# ============================================================================ soundness
# closed form >= numerical epsilon of its pair, wherever valid (seeded random campaign).

_N_GRID = np.unique(np.round(np.geomspace(2, 2500, 160))).astype(np.float64)
_SLACK = 1e-9  # reference bisection accuracy is ~1e-15; float64 formula rounding ~1e-15


def _pick_valid_n(valid_row, rng, nmax=2500):
    ns = _N_GRID[valid_row & (_N_GRID <= nmax)]
    if ns.size == 0:
        return []
    return sorted({ns[0], ns[rng.integers(ns.size)]})


def _vr_fields_any_p(p, beta, q):
    if np.isinf(p):
        return beta, 0.0, 1 - beta, beta / q, beta / q
    return vr_pair_fields(p, beta, q)


@pytest.mark.slow
@pytest.mark.parametrize("fn", [cf.vr_theorem42, cf.vr_theorem43], ids=["thm4.2", "thm4.3"])
def test_vr_closed_forms_dominate_their_pair(fn):
    rng = np.random.default_rng(21 if fn is cf.vr_theorem42 else 22)
    C = 40
    eps0 = rng.uniform(0.2, 6, C)
    p = np.exp(eps0)
    p[:4] = np.inf  # multi-message rows
    p_fin = np.where(np.isinf(p), 2.0, p)
    worst = np.where(np.isinf(p), 1.0, (p_fin - 1) / (p_fin + 1))
    beta = worst * np.where(rng.random(C) < 0.5, 1.0, rng.uniform(0.4, 1, C))
    alpha_p = np.where(np.isinf(p), beta, beta * p_fin / (p_fin - 1))
    q = np.where(rng.random(C) < 0.5, np.where(np.isinf(p), 2.0, p), rng.uniform(1, 4, C))
    q = np.maximum(q, np.maximum(1.0, 2.0001 * alpha_p))
    delta = _log_uniform(rng, 1e-8, 1e-2, C)
    value, valid = fn(_N_GRID[None, :], delta[:, None], p[:, None], beta[:, None], q[:, None])
    _assert_convention(value, valid)
    value, valid = _np(value), _np(valid)
    checked, margins = 0, []
    for i in range(C):
        for n in _pick_valid_n(valid[i], rng):
            j = int(np.searchsorted(_N_GRID, n))
            ref = pair_epsilon(int(n), *_vr_fields_any_p(p[i], beta[i], q[i]), delta[i])
            assert value[i, j] >= ref - _SLACK, (n, delta[i], p[i], beta[i], q[i], value[i, j], ref)
            margins.append(value[i, j] - ref)
            checked += 1
    assert checked >= 30
    assert min(margins) < 0.5  # the campaign reaches tight cases, not only vacuous ones


@pytest.mark.slow
def test_ldp_closed_forms_dominate_clone_pairs_and_krr():
    """FMT21 >= standard clone pair; FMT23 >= stronger clone pair; every eps0-LDP bound
    (EFMRTT, FMT21, FMT23, blanket generic) >= exact shuffled binary and 3-ary RR."""
    rng = np.random.default_rng(23)
    C = 14
    eps0 = rng.uniform(0.05, 3.5, C)
    delta = _log_uniform(rng, 1e-8, 1e-2, C)
    n = np.round(_log_uniform(rng, 300, 1500, C))
    checked = 0
    for fn, pairs in [
        (cf.fmt21_closed_form, ["std", "rr2", "rr3"]),
        (cf.fmt23_closed_form, ["sc", "rr2", "rr3"]),
        (cf.blanket_hoeffding, ["rr2", "rr3"]),
        (cf.blanket_bennett, ["rr2", "rr3"]),
    ]:
        value, valid = (_np(x) for x in fn(n, eps0, delta))
        for i in np.flatnonzero(valid)[:3]:
            for key in pairs:
                fields = {"std": standard_clone_fields, "sc": stronger_clone_fields,
                          "rr2": lambda e: krr_fields(e, 2), "rr3": lambda e: krr_fields(e, 3)}[key](eps0[i])
                ref = pair_epsilon(int(n[i]), *fields, delta[i])
                assert value[i] >= ref - _SLACK, (fn.__name__, key, n[i], eps0[i], delta[i], value[i], ref)
                checked += 1
    # EFMRTT regime: eps0 <= 1/2, n >= 1000, delta <= 1/100
    e0 = rng.uniform(0.02, 0.5, 4)
    d0 = _log_uniform(rng, 1e-8, 1e-2, 4)
    n0 = np.round(rng.uniform(1000, 1600, 4))
    value, valid = (_np(x) for x in cf.efmrtt19(n0, e0, d0))
    assert valid.all()
    for i in range(4):
        for fields in (krr_fields(e0[i], 2), krr_fields(e0[i], 3), stronger_clone_fields(e0[i])):
            assert value[i] >= pair_epsilon(int(n0[i]), *fields, d0[i]) - _SLACK
            checked += 1
    assert checked >= 25


def test_blanket_specific_dominates_exact_krr():
    rng = np.random.default_rng(24)
    C = 10
    eps0 = rng.uniform(0.1, 3, C)
    k = rng.integers(2, 8, C)
    gamma = k / (np.exp(eps0) + k - 1)
    delta = _log_uniform(rng, 1e-8, 1e-2, C)
    n = np.round(_log_uniform(rng, 200, 2500, C))
    checked = 0
    for fn in (cf.blanket_hoeffding, cf.blanket_bennett):
        value, valid = (_np(x) for x in fn(n, eps0, delta, gamma=gamma))
        _assert_convention(value, valid)
        for i in np.flatnonzero(valid):
            ref = pair_epsilon(int(n[i]), *krr_fields(eps0[i], int(k[i])), delta[i])
            assert value[i] >= ref - _SLACK, (fn.__name__, n[i], eps0[i], k[i], delta[i], value[i], ref)
            checked += 1
    assert checked >= 10


@pytest.mark.slow
def test_metric_closed_forms_dominate_their_pair():
    rng = np.random.default_rng(25)
    C = 30
    d = rng.uniform(0.02, 4, C)
    R = (1 + np.exp(d)) * rng.uniform(1, 3, C)
    dmax = d + rng.uniform(0, 1.5, C)
    delta = _log_uniform(rng, 1e-8, 1e-2, C)
    checked = 0
    for fn, second, pair_r in [
        (cf.metric_theorem1, R, R),
        (cf.metric_corollary2, R, R),
        (cf.metric_corollary1, dmax, 2 * np.exp(dmax)),
    ]:
        value, valid = (_np(x) for x in fn(_N_GRID[None, :], d[:, None], second[:, None], delta[:, None]))
        _assert_convention(value, valid)
        for i in range(C)[:12]:
            for n in _pick_valid_n(valid[i], rng):
                j = int(np.searchsorted(_N_GRID, n))
                ref = pair_epsilon(int(n), *metric_pair_fields(d[i], pair_r[i]), delta[i])
                assert value[i, j] >= ref - _SLACK, (fn.__name__, n, d[i], second[i], delta[i], value[i, j], ref)
                checked += 1
    assert checked >= 25


def test_theorem42_needs_positive_denominator():
    """The two conditions of the earlier reference hold here, yet the denominator is negative (log of a
    negative number): the added Den > 0 condition marks it invalid."""
    p = np.exp(3.0)
    beta, q, delta = (p - 1) / (p + 1), p, 1e-4
    for n in (400, 600):
        alpha = beta / (p - 1)
        L = np.log(4 / delta)
        m = np.sqrt(L / 2)
        r = alpha * p / q
        omega = 2 * r * (n - 1) - np.sqrt(min(6 * r, 0.5) * (n - 1) * L)
        A, K = (p + 1) * alpha / 2, 0.0  # worst case: w = 0
        assert omega > 0 and A >= 0
        assert 2 * m * A * omega + 2 * A * np.sqrt(omega) > 2 * m * K * (n - 1) + beta * m
        den = alpha * omega + beta * (omega / 2 - np.sqrt(omega * L / 2))
        assert den < 0
        value, valid = cf.vr_theorem42(n, delta, p, beta, q)
        assert not bool(valid) and np.isinf(float(value))
        assert pair_epsilon(n, *vr_pair_fields(p, beta, q), delta) > 0.7


# ======================================================================= privacy blanket


def _krr_matrix(eps0, k):
    p = np.exp(eps0)
    return (np.ones((k, k)) + (p - 1) * np.eye(k)) / (p + k - 1)


def _random_ldp_matrix(rng, eps0, n_in, n_out):
    """Rows mu_x over outputs with mu_x(y) / mu_x'(y) <= e^eps0."""
    t = np.exp(rng.uniform(0, eps0 / 2, (n_in, n_out))) * rng.uniform(0.2, 1, n_out)[None, :]
    return t / t.sum(axis=1, keepdims=True)


def _l_values(mu, omega, x, xp, eps):
    """Support values and omega-probabilities of L = (mu_x - e^eps mu_x')/omega."""
    keep = omega > 0
    return (mu[x, keep] - np.exp(eps) * mu[xp, keep]) / omega[keep], omega[keep]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blanket_l_bounds_hold_for_exact_randomizers(seed):
    rng = np.random.default_rng(seed)
    eps0 = rng.uniform(0.2, 4)
    mats = [_krr_matrix(eps0, int(rng.integers(2, 7))), _random_ldp_matrix(rng, eps0, 4, 9)]
    for mu in mats:
        assert np.max(np.log(mu[:, None, :] / mu[None, :, :])) <= eps0 + 1e-12
        gamma = mu.min(axis=0).sum()
        for eps in rng.uniform(0, eps0, 4):
            # specific: omega = normalised pointwise minimum, exact gamma
            blankets = [("specific", gamma, mu.min(axis=0) / gamma)]
            # generic: omega = mu_{x0}, mixture weight e^-eps0
            blankets += [("generic", None, mu[x0]) for x0 in range(mu.shape[0])]
            for kind, g, omega in blankets:
                g_, b_plus, b, c = (float(x) for x in cf.blanket_l_bounds(eps, eps0, g))
                assert np.all(mu >= g_ * omega[None, :] * (1 - 1e-12))  # valid mixture weight
                for x in range(mu.shape[0]):
                    for xp in range(mu.shape[0]):
                        if x == xp:
                            continue
                        vals, pr = _l_values(mu, omega, x, xp, eps)
                        assert abs(pr @ vals + np.expm1(eps)) < 1e-12  # E L = -(e^eps - 1)
                        assert vals.max() <= b_plus + 1e-12, kind
                        assert vals.max() - vals.min() <= b + 1e-12, kind
                        assert pr @ vals ** 2 <= c + 1e-12, kind


def _exact_positive_part(vals, pr, M):
    """E[(sum of M iid copies of L)_+] for an L with 3 support points (exact enumeration)."""
    i, j = np.meshgrid(np.arange(M + 1), np.arange(M + 1), indexing="ij")
    keep = i + j <= M
    i, j = i[keep], j[keep]
    s = i * vals[0] + j * vals[1] + (M - i - j) * vals[2]
    pm = multinomial.pmf(np.stack([i, j, M - i - j], axis=1), M, pr)
    return float(pm @ np.maximum(s, 0.0))


def test_blanket_tail_bounds_hold_for_exact_l():
    """The per-M inequalities behind delta_H and delta_B, for the exact L of 3-RR."""
    eps0, k, eps = 1.0, 3, 0.05
    mu = _krr_matrix(eps0, k)
    gamma = mu.min(axis=0).sum()
    omega = mu.min(axis=0) / gamma
    vals, pr = _l_values(mu, omega, 0, 1, eps)
    _, b_plus, b, c = (float(x) for x in cf.blanket_l_bounds(eps, eps0, gamma))
    a = np.expm1(eps)
    beta = a * b_plus / c
    h = (1 + beta) * np.log1p(beta) - beta
    for M in (1, 10, 100, 1000):
        exact = _exact_positive_part(vals, pr, M)
        hoeffding = b * b / (4 * a) * np.exp(-2 * M * a * a / (b * b))
        bennett = np.exp(-M * c / b_plus ** 2 * h) * b_plus / np.log1p(beta)
        assert exact <= hoeffding and exact <= bennett, (M, exact, hoeffding, bennett)
    # The constant in Balle et al.'s released Bennett code, 1/(M eta log(1+beta)) with
    # eta = a/b_plus, is NOT an upper bound here (documented discrepancy):
    M = 1000
    published = np.exp(-M * c / b_plus ** 2 * h) / (M * (a / b_plus) * np.log1p(beta))
    assert published < _exact_positive_part(vals, pr, M)


def mp_blanket_delta(kind, eps, n, eps0, gamma):
    """Direct sum over M ~ Bin(n, g) of the per-M bound (no closed-form summation)."""
    eps, eps0 = mp.mpf(float(eps)), mp.mpf(float(eps0))
    if gamma is None:
        g = mp.e ** (-eps0)
        lo, hi = g, mp.e ** eps0
    else:
        g = mp.mpf(float(gamma))
        lo, hi = g, g * mp.e ** eps0
    t = mp.e ** eps
    a = t - 1
    b_plus, b = hi - t * lo, (hi - lo) * (1 + t)
    c = (1 + t * t) * (lo + hi - lo * hi) - 2 * t * (2 * lo - lo * lo)
    total = mp.mpf(0)
    n = int(n)
    for M in range(0, n + 1):
        w = mp.binomial(n, M) * g ** M * (1 - g) ** (n - M)
        if kind == "hoeffding":
            total += w * b * b / (4 * a) * mp.e ** (-2 * M * a * a / (b * b))
        elif M >= 1:
            beta = a * b_plus / c
            h = (1 + beta) * mp.log(1 + beta) - beta
            total += w * mp.e ** (-M * c / b_plus ** 2 * h) * b_plus / mp.log(1 + beta)
    return total / (g * n)


def test_blanket_delta_matches_direct_sum():
    rng = np.random.default_rng(31)
    for _ in range(6):
        eps0 = rng.uniform(0.3, 3)
        n = int(rng.integers(50, 400))
        eps = rng.uniform(0.05, 0.9) * eps0
        k = int(rng.integers(2, 6))
        for gamma in (None, k / (np.exp(eps0) + k - 1)):
            for kind, fn in (("hoeffding", cf.blanket_delta_hoeffding), ("bennett", cf.blanket_delta_bennett)):
                want = min(mp_blanket_delta(kind, eps, n, eps0, gamma), 1)
                got = float(fn(eps, n, eps0, gamma))
                assert abs(got - float(want)) <= 1e-10 * float(want), (kind, gamma, got, want)


def test_blanket_eps_satisfies_its_defining_inequality():
    rng = np.random.default_rng(32)
    checked = 0
    for _ in range(4):
        eps0 = rng.uniform(0.3, 3)
        n = int(rng.integers(150, 350))
        delta = 10 ** rng.uniform(-6, -2)
        k = int(rng.integers(2, 6))
        for gamma in (None, k / (np.exp(eps0) + k - 1)):
            for kind, fn in (("hoeffding", cf.blanket_hoeffding), ("bennett", cf.blanket_bennett)):
                eps, ok = (float(x) for x in fn(n, eps0, delta, gamma=gamma))
                if not ok:
                    assert float(mp_blanket_delta(kind, eps0 * (1 - 1e-9), n, eps0, gamma)) > delta
                    continue
                assert 0 < eps < eps0
                assert float(mp_blanket_delta(kind, eps, n, eps0, gamma)) <= delta * (1 + 1e-9)
                assert float(mp_blanket_delta(kind, eps * (1 - 1e-6), n, eps0, gamma)) > delta
                checked += 1
    assert checked >= 10


# =========================================================================== conventions

_GOOD = {
    cf.vr_theorem42: dict(n=1e5, delta=1e-6, p=np.exp(2.0), beta=np.tanh(1.0), q=np.exp(2.0)),
    cf.vr_theorem43: dict(n=1e5, delta=1e-6, p=np.exp(2.0), beta=0.3, q=np.exp(2.0)),
    cf.efmrtt19: dict(n=1e5, eps0=0.4, delta=1e-6),
    cf.fmt21_closed_form: dict(n=1e5, eps0=1.0, delta=1e-6),
    cf.fmt23_closed_form: dict(n=1e5, eps0=1.0, delta=1e-6),
    cf.blanket_hoeffding: dict(n=1e5, eps0=1.0, delta=1e-6),
    cf.blanket_bennett: dict(n=1e5, eps0=1.0, delta=1e-6, gamma=0.5),
    cf.metric_theorem1: dict(n=1e5, d_ab=1.0, r_max=10.0, delta=1e-6),
    cf.metric_corollary1: dict(n=1e5, d_ab=1.0, d_max=2.0, delta=1e-6),
    cf.metric_corollary2: dict(n=1e5, d_ab=1.0, r_max=10.0, delta=1e-6),
}

# in the domain, outside the stated conditions -> (+inf, False)
_OUTSIDE = [
    (cf.vr_theorem42, dict(n=50.0)),  # Omega <= 0
    (cf.vr_theorem42, dict(beta=0.05)),  # F(C) not decreasing (A small vs K)
    (cf.vr_theorem42, dict(beta=0.0)),
    (cf.vr_theorem43, dict(n=500.0)),  # n < 8 log(2/delta)/r
    (cf.vr_theorem43, dict(p=1.0, beta=0.0)),
    (cf.efmrtt19, dict(eps0=0.6)),
    (cf.efmrtt19, dict(n=999.0)),
    (cf.efmrtt19, dict(delta=0.02)),
    (cf.fmt21_closed_form, dict(eps0=7.0)),
    (cf.fmt23_closed_form, dict(eps0=8.0)),
    (cf.fmt23_closed_form, dict(n=100.0)),
    (cf.blanket_hoeffding, dict(n=20.0)),  # no eps < eps0 satisfies the inequality
    (cf.blanket_bennett, dict(n=5.0)),
    (cf.metric_theorem1, dict(n=300.0)),
    (cf.metric_corollary1, dict(d_max=9.0)),
    (cf.metric_corollary2, dict(r_max=1e4)),
]


@pytest.mark.parametrize("fn,change", _OUTSIDE, ids=[f"{f.__name__}-{list(c)}" for f, c in _OUTSIDE])
def test_outside_conditions_is_inf_and_invalid(fn, change):
    value, valid = fn(**{**_GOOD[fn], **change})
    assert not bool(valid) and float(value) == np.inf
    value, valid = fn(**_GOOD[fn])
    assert bool(valid) and np.isfinite(float(value))


_BAD = [
    (cf.vr_theorem42, "delta", 0.0), (cf.vr_theorem42, "delta", 1.0), (cf.vr_theorem42, "p", 0.5),
    (cf.vr_theorem42, "beta", 0.9), (cf.vr_theorem42, "beta", -0.1), (cf.vr_theorem42, "q", 0.5),
    (cf.vr_theorem42, "n", 1.5), (cf.vr_theorem42, "n", 1.0), (cf.vr_theorem43, "q", np.nan),
    (cf.vr_theorem43, "n", np.inf), (cf.efmrtt19, "eps0", -1.0), (cf.efmrtt19, "delta", np.nan),
    (cf.fmt21_closed_form, "eps0", np.inf), (cf.fmt23_closed_form, "n", 0.0),
    (cf.blanket_hoeffding, "eps0", -0.5), (cf.blanket_bennett, "gamma", 1.5),
    (cf.blanket_bennett, "gamma", 0.1),  # below e^-eps0: impossible for an eps0-LDP randomizer
    (cf.metric_theorem1, "r_max", 3.0),  # < 1 + e^{d_ab}
    (cf.metric_theorem1, "d_ab", -1.0), (cf.metric_corollary1, "d_max", 0.5),
    (cf.metric_corollary2, "delta", 2.0),
]


@pytest.mark.parametrize("fn,name,bad", _BAD, ids=[f"{f.__name__}-{n}={b}" for f, n, b in _BAD])
def test_bad_input_raises_naming_parameter(fn, name, bad):
    with pytest.raises(ValueError, match=f"^{name}"):
        fn(**{**_GOOD[fn], name: bad})


def test_vr_q_too_small_raises():
    with pytest.raises(ValueError, match="^q"):
        cf.vr_theorem42(1e5, 1e-6, np.exp(2.0), np.tanh(1.0), 1.0)  # 2 alpha p / q > 1


@pytest.mark.parametrize("fn", list(_GOOD), ids=[f.__name__ for f in _GOOD])
def test_jit_matches_eager_and_bad_traced_input_is_no_claim(fn):
    kw = _GOOD[fn]
    names = list(kw)
    jitted = jax.jit(lambda *xs: fn(**dict(zip(names, xs))))
    args = [jnp.asarray([kw[k], kw[k]], dtype=jnp.float64) for k in names]
    # second lane: a bad value of the first domain-checked parameter ('delta' or 'n')
    bad_name = "delta" if "delta" in names else names[0]
    i = names.index(bad_name)
    args[i] = args[i].at[1].set(2.0 if bad_name == "delta" else -3.0)
    value, valid = jitted(*args)
    _assert_convention(value, valid)
    eager_value, eager_valid = fn(**kw)
    assert bool(_np(valid)[0]) == bool(eager_valid)
    np.testing.assert_allclose(_np(value)[0], float(eager_value), rtol=1e-13)
    assert not _np(valid)[1] and _np(value)[1] == np.inf


@pytest.mark.parametrize("fn", list(_GOOD), ids=[f.__name__ for f in _GOOD])
def test_broadcasting(fn):
    kw = _GOOD[fn]
    names = list(kw)
    a, b = names[0], names[-1]  # n against the last parameter
    col = np.array([kw[a] / 10, kw[a], kw[a] * 10])[:, None]
    row = np.array([kw[b] / 3, kw[b] / 2, kw[b]])[None, :] if b != "gamma" else np.array([0.45, 0.5, 0.8])[None, :]
    if b == "delta":
        row = np.array([1e-8, 1e-6, 1e-3])[None, :]
    value, valid = fn(**{**kw, a: col, b: row})
    assert _np(value).shape == (3, 3) and _np(valid).shape == (3, 3)
    _assert_convention(value, valid)
    for i, j in ((0, 0), (1, 2), (2, 1)):
        v, ok = fn(**{**kw, a: col[i, 0], b: row[0, j]})
        assert bool(ok) == bool(_np(valid)[i, j])
        assert float(v) == pytest.approx(float(_np(value)[i, j]), rel=1e-12)
    with pytest.raises(ValueError, match="broadcast"):
        fn(**{**kw, a: np.ones(2) * kw[a], b: np.ones(3) * kw[b]})


# ====================================================================== metric solvers


def _np_amplified(v, m, n, delta, corollary):
    """Independent numpy evaluation of the corollary's amplified distance (module doc)."""
    L = np.log(4 / delta)
    eta = np.tanh(v / 2)
    if corollary == 2:
        R = 2 * np.exp(m)
        if not n - 1 >= 8 * L * R:
            return v
        return np.minimum(v, np.log1p(8 * eta * (np.sqrt(R * L / (2 * (n - 1))) + R / (2 * (n - 1)))))
    mu = (n - 1) * np.exp(-m)
    omega = mu - np.sqrt(3 * mu * L)
    if not (omega > 2 * L and mu >= 3 * L):
        return v
    s = np.sqrt(omega * L / 2)
    return np.minimum(v, np.log1p(eta * (2 * s + 1) / (omega / 2 - s)))


def _target_matrix(rng, k):
    pts = np.sort(rng.uniform(0, 3, k))
    return np.abs(pts[:, None] - pts[None, :]) * rng.uniform(0.5, 2)


@pytest.mark.parametrize("corollary", [1, 2])
@pytest.mark.parametrize("n", [100.0, 300.0, 5e3, 1e6])
def test_local_metric_candidates_are_feasible_and_pareto(corollary, n):
    rng = np.random.default_rng(int(n) + corollary)
    target = _target_matrix(rng, 5)
    delta = 1e-6
    out = mt.local_metric_candidates(target, n, delta, corollary, num=12)
    m, local, amp, pareto = (_np(x) for x in (out.m, out.local, out.amplified, out.pareto))
    assert m.shape == (12,) and local.shape == (12, 5, 5) and pareto.shape == (12,)
    assert np.all(np.diff(m) >= 0) and pareto.any()
    off = ~np.eye(5, dtype=bool)
    for c in range(12):
        D = local[c]
        # semi-metric: zero diagonal, symmetric, at least the target, capped by the diameter
        assert np.all(np.diag(D) == 0) and np.array_equal(D, D.T)
        assert np.all(D[off] >= np.minimum(target[off], m[c]) - 1e-12)
        diam = D.max()
        # feasible: amplified distance <= target on every edge (independent evaluation)
        amp_ref = _np_amplified(D, diam, n, delta, corollary)
        assert np.all(amp_ref <= target + 1e-12)
        np.testing.assert_allclose(amp[c], amp_ref, rtol=1e-12, atol=1e-15)
        # tight (Theorem 6): uncapped edges that were enlarged amplify exactly to the target
        enlarged = off & (D > target + 1e-9) & (D < m[c] - 1e-9)
        np.testing.assert_allclose(amp_ref[enlarged], target[enlarged], rtol=1e-9)
    # Pareto mask: kept candidates are not dominated; dropped ones are (or duplicate one)
    flat = local.reshape(12, -1)
    for i in range(12):
        dominated = [j for j in range(12) if j != i and np.all(flat[j] >= flat[i])
                     and (np.any(flat[j] > flat[i]) or j < i)]
        assert pareto[i] == (len(dominated) == 0)
    if float(mt.amplification_diameter_limit(n, delta, corollary)) < target[off].min():
        # too few users to amplify at any diameter >= D#_min: the target itself
        assert np.array_equal(local, np.broadcast_to(target, local.shape))
    else:
        assert np.any(local[pareto] > target[None] + 1e-9)  # amplification buys local budget
    front = out.front()
    assert len(front) == int(pareto.sum())


@pytest.mark.slow
def test_local_metric_solver_jit_and_vector_input():
    target = np.array([0.5, 1.0, 2.0, 0.0])
    for corollary in (1, 2):
        eager = mt.local_metric_candidates(target, 1e5, 1e-6, corollary, num=6)
        jitted = jax.jit(lambda d, n, dl, c=corollary: mt.local_metric_candidates(d, n, dl, c, num=6))(
            jnp.asarray(target), jnp.float64(1e5), jnp.float64(1e-6))
        np.testing.assert_allclose(_np(jitted.local), _np(eager.local), rtol=1e-13)
        np.testing.assert_array_equal(_np(jitted.pareto), _np(eager.pareto))
        assert np.all(_np(eager.local)[:, 3] == 0)
        bad = jax.jit(lambda d, c=corollary: mt.local_metric_candidates(d, 1e5, 1e-6, c, num=6))(
            jnp.asarray([-1.0, 1.0]))
        assert np.isnan(_np(bad.local)).all() and not _np(bad.pareto).any()
    for kw, name in [(dict(d_target=[-1.0, 1.0]), "d_target"), (dict(d_target=[0.0, 0.0]), "d_target"),
                     (dict(n=1.0), "n"), (dict(delta=0.0), "delta")]:
        args = {**dict(d_target=target, n=1e5, delta=1e-6), **kw}
        with pytest.raises(ValueError, match=f"^{name}"):
            mt.local_metric_candidates(args["d_target"], args["n"], args["delta"], 1)
    with pytest.raises(ValueError, match="^corollary"):
        mt.local_metric_candidates(target, 1e5, 1e-6, 3)


def test_solve_local_distance_inverts_the_amplification():
    v = np.linspace(0.01, 5, 50)
    for corollary in (1, 2):
        m = 6.0
        amp = _np(mt.amplified_distance(v, m, 1e7, 1e-6, corollary))
        back = _np(mt.solve_local_distance(amp, m, 1e7, 1e-6, corollary))
        moved = amp < v - 1e-9  # amplified edges: solving returns the original distance
        assert moved.any()
        np.testing.assert_allclose(back[moved], v[moved], rtol=1e-9)
        assert np.all(back <= m)


def test_metric_corollary2_dominates_theorem1():
    """Corollary 2 follows from Theorem 1 wherever it is valid (e^eps'-1 is >= 1.13x
    Theorem 1's there), even though the supplement's Step-4 chain only yields the
    sqrt-term with an extra factor sqrt(2)."""
    rng = np.random.default_rng(41)
    N = 2000
    d = rng.uniform(0, 6, N)
    R = (1 + np.exp(d)) * _log_uniform(rng, 1, 1e3, N)
    delta = _log_uniform(rng, 1e-15, 0.5, N)
    n = np.round(8 * np.log(4 / delta) * R * _log_uniform(rng, 0.5, 1e4, N)) + 1
    v2, ok2 = (_np(x) for x in cf.metric_corollary2(n, d, R, delta))
    v1, ok1 = (_np(x) for x in cf.metric_theorem1(n, d, R, delta))
    assert ok2.sum() > 500 and np.all(ok1[ok2])
    assert np.all(v2[ok2] >= v1[ok2] * (1 - 1e-12))
