"""Accurate binomial log-pmf and log-tail in float64 JAX, valid from n = 1 to beyond 1e8.

``jax.scipy.stats.binom.logpmf`` (a naive gammaln sum) loses up to 4e-7 in log pmf at
n = 1e8 and ``jax.scipy.special.betainc`` is off by 60% near the mean there
(docs/math.md section 6), so the engine uses these routines instead:

* :func:`log_pmf` -- Loader's saddle-point form (C. Loader, "Fast and accurate
  computation of binomial probabilities", 2000)::

      log b_n(x) = stirlerr(n) - stirlerr(x) - stirlerr(n-x) - bd0(x, n p) - bd0(n-x, n q)
                   - 0.5 log(2 pi x (n-x)/n)

  with ``bd0(x, m) = x log(x/m) + m - x`` evaluated by its series near ``x = m``,
  and ``n p`` formed as an unevaluated sum (error-free product) so that ``x - n p``
  keeps its digits near the mean.
* :func:`log_sf` -- ``log P[Bin(n, p) >= k]`` from the continued fraction of the
  regularized incomplete beta function, ``P[Bin(n,p) >= k] = I_p(k, n-k+1)``
  (modified Lentz; Numerical Recipes ``betacf``), whose prefactor is exactly
  ``b_n(k) (1-p)``; on the other side of the mean it uses
  ``1 - I_{1-p}(n-k+1, k)`` with prefactor ``b_n(k-1) p``. The loop runs until
  every lane has converged (relative step below 1e-16).

Both take ``p`` and ``q = 1 - p`` separately, so that a caller who knows ``q``
more accurately than ``1 - p`` (``q = r1/(r0+r1)``) loses nothing.
Arguments ``n, x, k`` are float64 arrays holding integers. The test-suite checks
both routines against mpmath (tests/test_binomial.py); the engine's error budget
(``divergence.REL_ERR``) is ten times the worst error measured there.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)

# stirlerr(n) = log(n!) - log(sqrt(2 pi n) (n/e)^n) for n = 1..15 (mpmath, 40 digits).
_STIRLERR_TABLE = np.array([
    0.0,  # n = 0: unused (x = 0 is handled separately)
    0.08106146679532726, 0.0413406959554093, 0.02767792568499834, 0.020790672103765093,
    0.016644691189821193, 0.013876128823070748, 0.01189670994589177, 0.010411265261972096,
    0.009255462182712733, 0.00833056343336287, 0.007573675487951841, 0.00694284010720953,
    0.006408994188004207, 0.0059513701127588475, 0.005554733551962801,
])
# Coefficients of the asymptotic series stirlerr(n) ~ sum_j S_j / n^(2j+1).
_S = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360)


def stirlerr(n: jax.Array) -> jax.Array:
    """``log(n!) - log(sqrt(2 pi n) (n/e)^n)`` for integer-valued ``n >= 1``."""
    table = jnp.asarray(_STIRLERR_TABLE)
    small = n <= 15
    idx = jnp.clip(n, 0, 15).astype(jnp.int32)
    nn = jnp.where(small, 16.0, n)
    inv = 1.0 / nn  # one division per value: the pmf's cost is mostly its divisions and logs
    inv2 = inv * inv
    series: float | jax.Array = _S[5]
    for s in _S[4::-1]:
        series = s + inv2 * series
    return jnp.where(small, table[idx], series * inv)


def _two_prod(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Error-free product: ``a*b == hi + lo`` exactly (Dekker/Veltkamp split)."""
    split = 134217729.0  # 2^27 + 1
    def halves(x):
        c = split * x
        hi = c - (c - x)
        return hi, x - hi
    hi = a * b
    a1, a2 = halves(a)
    b1, b2 = halves(b)
    lo = ((a1 * b1 - hi) + a1 * b2 + a2 * b1) + a2 * b2
    return hi, lo


#: ``1/(2j+1)`` for ``j = 1..11``: the series of :func:`_bd0` in ``v^2``.
_BD0_SERIES = tuple(1.0 / (2 * j + 1) for j in range(1, 12))


def _bd0(x: jax.Array, m_hi: jax.Array, m_lo: jax.Array) -> jax.Array:
    """``bd0(x, m) = x log(x/m) + m - x >= 0`` with ``m = m_hi + m_lo``, for ``x > 0, m > 0``."""
    m = m_hi + m_lo
    diff = (x - m_hi) - m_lo  # x - m without cancellation
    near = jnp.abs(diff) < 0.1 * (x + m)
    # Series: with v = (x-m)/(x+m), bd0 = (x-m) v + 2x sum_{j>=1} v^(2j+1)/(2j+1); |v| < 0.1.
    v = diff / jnp.where(near, x + m, 1.0)
    v2 = v * v
    # Horner in v^2 with the reciprocals 1/(2j+1) as rounded constants: no division per term. The
    # constants and Horner's steps add a few ulps of the tail 2x v^3 poly, itself below diff * v / 15
    # (|v| < 0.1): a few ulps of bd0, as the term-by-term sum had, far inside REL_ERR.
    poly: float | jax.Array = _BD0_SERIES[-1]
    for c in _BD0_SERIES[-2::-1]:  # j = 11 .. 1: v^24 < 1e-24, beyond float64
        poly = c + v2 * poly
    s = diff * v + 2.0 * x * v * v2 * poly
    safe_m = jnp.where(m > 0, m, 1.0)
    far = x * jnp.log(jnp.where(near, 1.0, x / safe_m)) + m - x
    return jnp.where(near, s, far)


def log_pmf(n: jax.Array, x: jax.Array, p: jax.Array, q: jax.Array) -> jax.Array:
    """``log P[Bin(n, p) = x]`` (``-inf`` outside ``0 <= x <= n``); ``q = 1 - p`` given separately."""
    n, x, p, q = jnp.broadcast_arrays(n, x, p, q)
    inside = (x >= 0) & (x <= n)
    interior = inside & (x > 0) & (x < n) & (p > 0) & (q > 0)
    # Interior: Loader's form.
    xs = jnp.where(interior, x, 1.0)
    ns = jnp.where(interior, n, 2.0)
    ps = jnp.where(interior, p, 0.5)
    qs = jnp.where(interior, q, 0.5)
    np_hi, np_lo = _two_prod(ns, ps)
    nq_hi, nq_lo = _two_prod(ns, qs)
    lc = stirlerr(ns) - stirlerr(xs) - stirlerr(ns - xs) - _bd0(xs, np_hi, np_lo) - _bd0(ns - xs, nq_hi, nq_lo)
    lf = 2 * _LOG_SQRT_2PI + jnp.log(xs) + jnp.log(ns - xs) - jnp.log(ns)  # n - x is exact
    interior_val = lc - 0.5 * lf
    # Edges x = 0 (q^n) and x = n (p^n), including p or q equal to 0.
    log_p = jnp.log(jnp.where(p > 0, p, 1.0))
    log_q = jnp.log(jnp.where(q > 0, q, 1.0))
    # log(1-p) from whichever of p, q is small (both are given to full precision by callers).
    log_q = jnp.where(p < 0.5, jnp.log1p(-jnp.where(p < 0.5, p, 0.0)), log_q)
    log_p = jnp.where(q < 0.5, jnp.log1p(-jnp.where(q < 0.5, q, 0.0)), log_p)
    at0 = jnp.where(q > 0, n * log_q, jnp.where(n == 0, 0.0, -jnp.inf))
    atn = jnp.where(p > 0, n * log_p, jnp.where(n == 0, 0.0, -jnp.inf))
    edge = jnp.where(x == 0, at0, jnp.where(x == n, atn, -jnp.inf))
    return jnp.where(interior, interior_val, jnp.where(inside, edge, -jnp.inf))


_CF_EPS = 1e-16
_CF_TINY = 1e-300


def _beta_cf(a: jax.Array, b: jax.Array, x: jax.Array, max_iter: int) -> tuple[jax.Array, jax.Array]:
    """Continued fraction of I_x(a, b) (NR ``betacf``, modified Lentz), all lanes together.

    Returns ``(h, converged)`` with ``I_x(a,b) = x^a (1-x)^b / (a B(a,b)) * h``.
    """
    qab, qap, qam = a + b, a + 1.0, a - 1.0

    def fix(z):
        return jnp.where(jnp.abs(z) < _CF_TINY, _CF_TINY, z)

    d = 1.0 / fix(1.0 - qab * x / qap)
    c = jnp.ones_like(d)
    h = d

    def body(state):
        m, c, d, h, done = state
        m2 = 2.0 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d1 = 1.0 / fix(1.0 + aa * d)
        c1 = fix(1.0 + aa / c)
        h1 = h * d1 * c1
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d2 = 1.0 / fix(1.0 + aa * d1)
        c2 = fix(1.0 + aa / c1)
        step = d2 * c2
        h2 = h1 * step
        keep = done  # converged lanes are frozen
        new_done = done | (jnp.abs(step - 1.0) < _CF_EPS)
        return (m + 1.0, jnp.where(keep, c, c2), jnp.where(keep, d, d2), jnp.where(keep, h, h2), new_done)

    def cond(state):
        m, *_, done = state
        return (m <= max_iter) & ~jnp.all(done)

    done0 = jnp.zeros(jnp.shape(h), dtype=bool)
    _, _, _, h, done = jax.lax.while_loop(cond, body, (jnp.asarray(1.0), c, d, h, done0))
    return h, done


def log_sf_given_pmf(n, k, p, q, log_b_k, log_b_km1, max_iter: int = 100_000) -> jax.Array:
    """``log P[Bin(n, p) >= k]`` given ``log b_n(k)`` and ``log b_n(k-1)`` (callers often have them).

    The continued fraction always runs on the small side of the mean with the
    smaller of ``p, q`` as its argument (``x`` near 1 costs digits): with
    ``Y ~ Bin(n, min(p, q))`` the query is ``G(j) = P[Y >= j]`` (``j = k``) or its
    complement (``p > q``: ``P[X >= k] = 1 - G(n-k+1)``), and ``G`` comes either
    directly (``j`` above the mean, prefactor ``b_Y(j) max(p,q)``) or as
    ``1 - P[Y <= j-1]`` (prefactor ``b_Y(j-1) min(p,q)``); each prefactor is
    ``b_n(k)`` or ``b_n(k-1)`` of ``X``. Not differentiable (it loops).
    """
    n, k, p, q, log_b_k, log_b_km1 = jnp.broadcast_arrays(n, k, p, q, log_b_k, log_b_km1)
    trivial_one = (k <= 0) | ((q == 0) & (k <= n))
    trivial_zero = (k > n) | ((p == 0) & (k > 0))
    live = ~(trivial_one | trivial_zero)
    flip = p > q
    ns = jnp.where(live, n, 2.0)
    small = jnp.where(live, jnp.minimum(p, q), 0.5)
    large = jnp.where(live, jnp.maximum(p, q), 0.5)
    j = jnp.where(live, jnp.where(flip, n - k + 1.0, k), 1.0)  # 1 <= j <= n
    direct = small * (ns + 2.0) < j + 1.0  # G(j) = P[Y >= j] is the small side
    a = jnp.where(direct, j, ns - j + 1.0)
    b = jnp.where(direct, ns - j + 1.0, j)
    x = jnp.where(direct, small, large)
    h, _ = _beta_cf(a, b, x, max_iter)
    # b_Y(j) = b_X(k) unless flip (then b_X(k-1)); b_Y(j-1) = b_X(k-1) unless flip (then b_X(k)).
    use_k = direct != flip
    log_pref = jnp.where(use_k, log_b_k, log_b_km1) + jnp.log(jnp.where(direct, large, small))
    log_t = log_pref + jnp.log(jnp.maximum(h, _CF_TINY))  # log of the small side
    log_comp = jnp.log1p(-jnp.minimum(jnp.exp(log_t), 1.0))  # log of 1 - small side
    val = jnp.where(direct != flip, log_t, log_comp)
    return jnp.where(trivial_one, 0.0, jnp.where(trivial_zero, -jnp.inf, val))


def log_sf(n: jax.Array, k: jax.Array, p: jax.Array, q: jax.Array, max_iter: int = 100_000) -> jax.Array:
    """``log P[Bin(n, p) >= k]`` for integer-valued ``n >= 0`` and any integer ``k`` (see above)."""
    n, k, p, q = jnp.broadcast_arrays(n, k, p, q)
    kk = jnp.stack([k, k - 1.0])
    lb = log_pmf(n[None], kk, p[None], q[None])  # one pmf site for both prefactors
    return log_sf_given_pmf(n, k, p, q, lb[0], lb[1], max_iter)
