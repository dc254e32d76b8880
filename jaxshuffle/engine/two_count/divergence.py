"""Hockey-stick divergence of the two-count pair in O(window) time, with a certificate.

For ``t = e^eps >= 1`` and one direction ``D_t(P||Q) = sum_{a,b} max(0, P - tQ)``
(docs/math.md section 2; the paper's Theorem 4.8 / Proposition I.1,
corrected). For a fixed total ``c' = a + b`` the sign of ``P - tQ`` is the sign of::

    S(a, c') = (u - t v) a r1 + (v - t u) (c' - a) r0 + (1 - t) w (n - c') r0 r1 / (1 - r0 - r1)

(``P/M(a,b)`` scaled by ``r0 r1 (n-c')/(1-r0-r1)``), which is affine in ``a``. When its
slope ``A = (u - tv) r1 - (v - tu) r0`` is negative, relabelling the two markers
(``u <-> v``, ``r0 <-> r1``) makes it positive, so the region is always ``a >= k_{c'}``.
Grouping cells by the others' count ``c ~ Binom(n-1, r0+r1)`` with
``a | c ~ Binom(c, rho)``, ``rho = r0/(r0+r1)``::

    D_t(P||Q) = sum_c W_c [ (u - t v) b_c(k_{c+1} - 1) + (1-t)(u+v) SF_c(k_{c+1}) + (1-t) w SF_c(k_c) ]

and ``D_t(Q||P)`` is the same with ``r0 <-> r1``. ``k_{c'}`` comes from ``S`` and is then
re-tested with ``S`` evaluated cell-wise (at ``a = c'`` it is exact), which keeps the
infinite-loss cell at ``p = inf``.

Tails along the window follow from pmfs: with ``T_c = SF_c(k_c)``::

    T_{c+1} = T_c - sum_{j between k_c and k_{c+1}} b_c(j) + rho b_c(k_{c+1} - 1)

summed within blocks anchored by one continued-fraction tail each (``_binomial.log_sf``).
The pmfs come from one Loader pmf ``b_c(k_c)`` per count (per block, with exact count-to-
count step ratios in between, for :func:`linear_safe` plans) and exact neighbour ratios
``b(j+1)/b(j) = (c-j) rho / ((j+1) rho_c)`` for ``b_c(k_c - 1)``, ``beta`` and the terms
between consecutive thresholds.

Certificate. Every returned divergence comes with ``lower <= D <= upper`` where the
band accounts for (i) the relative errors ``REL_ERR`` of each pmf and ``REL_TAIL`` of each
continued-fraction tail (the tests check the routines are 10x better), (ii) rounding of every sum, (iii) the cells
outside the window: the sum over complete cells inside the window is a lower bound,
and the dropped probability, bounded by Chernoff's ``exp(-N KL(m/N || pi))``, is
added to the upper side, (iv) flushing of subnormal terms, (v) the floor ``R_FLOOR``
on ``r0, r1``, (vi) every exact ratio (``_CHAIN_REL`` each) and the summed step logs
(per block), and for linear plans what an underflowed ``b_c(k_c)`` could hide, (vii) the
weights ``W_c``, one Loader pmf per block and exact ratios between (:func:`window_weights`).
For ``t < 1``, ``D_t = (1-t) + t D_{1/t}`` of the reversed pair.

Tangent. The same sums bound ``Q(E)`` of the region ``E`` of complete window cells, so
every evaluation also certifies the line ``D_{t'} >= P(E) - t'Q(E)`` for ``t' <= t``
(``tangent_value``, ``tangent_slope``): the search's lower end needs no evaluation of its own.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle import _binomial
from jaxshuffle._numerics import FLUSH as _FLUSH
from jaxshuffle._numerics import ULP as _ULP
from jaxshuffle._numerics import materialize
from jaxshuffle.engine.two_count.pair import TwoCountPair, fields_valid
from jaxshuffle.engine.two_count.plan import (
    INV_S_MAX,
    R_FLOOR,
    Plan,
    bucket_plans,
    check_batch,
    log_reach,
    max_step_estimate,
    plan_windows,
    prepare_batch,
    run_buckets,
)

REL_ERR = 1e-10  # budget for the relative error of one pmf value (tests: 10x better)
REL_TAIL = 1e-8  # budget for the relative error of one continued-fraction tail (tests: 10x better)
# Relative error added by one exact neighbour ratio b(j+1)/b(j) taken in log space: the
# quotient (u), its log (u |log|, |log| <= log(1e9) + 2*345 with r floored at R_FLOOR) and
# the running sum (u |log b| <= 746 u before a term flushes), with a 2x margin.
_CHAIN_REL = 2 * _ULP * (2 + 21 + 690 + 746)


class Divergence(NamedTuple):
    """max(D_t(P||Q), D_t(Q||P)) with its certified band ``lower <= D <= upper``.

    Attributes:
      value: central estimate of the divergence, not certified.
      lower: certified lower bound on the divergence (errs low).
      upper: certified upper bound on the divergence (errs high; ``inf`` where the step overflowed).
      q_mass: ``-dD/dt`` of the larger direction (for Newton and implicit gradients).
      step_overflow: True where ``|k_{c+1}-k_c|`` exceeded ``plan.max_step`` (band is ``+inf`` then).
      tangent_value: certified tangent's value at ``t`` (eps >= 0): ``D(t') >= tangent_value +
        (t - t') tangent_slope`` for ``t' <= t``.
      tangent_slope: certified tangent's slope at ``t`` (see ``tangent_value``).
    """

    value: jax.Array
    lower: jax.Array
    upper: jax.Array
    q_mass: jax.Array  # -dD/dt of the larger direction (for Newton and implicit gradients)
    step_overflow: jax.Array  # True where |k_{c+1}-k_c| exceeded plan.max_step (band is +inf then)
    # Certified tangent (eps >= 0): D(t') >= tangent_value + (t - t') tangent_slope for t' <= t.
    tangent_value: jax.Array
    tangent_slope: jax.Array


# ----------------------------------------------------------------------------------------
# The kernel: one point, one direction, t >= 1.


def _ratio_terms(c, j, up):
    """``(num, den)`` of the exact neighbour ratio of ``Binom(c, rho)`` pmfs, without the rho factor.

    Up: ``b(j+1)/b(j) = (c-j)/(j+1) * rho/rho_c``; down: ``b(j-1)/b(j) = j/(c-j+1) * rho_c/rho``.
    ``num = 0`` where the step leaves ``[0, c]``.
    """
    return jnp.where(up, c - j, j), jnp.where(up, j + 1.0, c - j + 1.0)


def _chain_sum(log_start, c, j0, up, lrr, count, M: int):
    """``sum_{o < count} b_c(j_o)`` from ``log b_c(j_0) = log_start`` by exact neighbour ratios (1-D).

    Walks ``j_o = j0 + o`` where ``up`` (else ``j0 - o``) with
    ``b(j+1)/b(j) = (c-j)/(j+1) * rho/rho_c`` and ``lrr = log(rho/rho_c)``; a ratio of 0
    (leaving ``[0, c]``) gives ``-inf``. ``count <= M`` (static). Each step adds at most
    ``_CHAIN_REL`` relative error to the terms after it.
    """
    sign = jnp.where(up, 1.0, -1.0)

    def step(o, carry):
        lb, acc = carry
        acc = acc + jnp.where(o < count, jnp.exp(lb), 0.0)
        num, den = _ratio_terms(c, j0 + sign * o, up)
        ok = (num > 0) & (den > 0)
        lr = jnp.log(jnp.where(ok, num, 1.0) / jnp.where(ok, den, 1.0)) + sign * lrr
        return jnp.where(ok, lb + lr, -jnp.inf), acc

    carry = (log_start, jnp.zeros_like(log_start))
    if M <= 8:  # unrolled: fuses into one pass over the window
        for o in range(M):
            carry = step(o, carry)
        return carry[1]
    return jax.lax.fori_loop(0, M, step, carry)[1]


def _log_base_by_steps(c_all, base, rho, rho_c, M: int, B: int):
    """``log b_c(base_c)`` along the window: Loader at block starts, exact step ratios between.

    ``base_c = clip(k_c, 0, c)`` moves by ``D in [-M, M+1]`` per count, and
    ``b_{c+1}(j+D)/b_c(j) = (c+1)/(c+1-j) rho_c * prod`` of ``|D|`` neighbour ratios at ``c+1``,
    one log per count, summed within each block. For :func:`linear_safe` points each product
    stays within float range. Returns ``(log_base, err, broken)``: ``err`` (per block) bounds
    the absolute error of the summed logs beyond the Loader anchor's: ``M + 3`` roundings per
    step (``4u`` each, with the log) plus ``(B + 2) u sum |step|`` for any summation order;
    ``broken`` says a product left ``[1e-300, 1e300]`` (an unsafe point: no claim).
    """
    L = c_all.shape[0] - 1
    nb = L // B
    c, j = c_all[:L], base[:L]
    delta = base[1:] - j
    count = jnp.abs(delta)
    up = delta > 0
    factor = jnp.where(up, rho / rho_c, rho_c / rho)
    ratio = (c + 1.0) / jnp.maximum(c + 1.0 - j, 1.0) * rho_c  # b_{c+1}(j) / b_c(j), j <= c
    for o in range(M + 1):
        num, den = _ratio_terms(c + 1.0, jnp.where(up, j + o, j - o), up)  # at c + 1
        ratio = ratio * jnp.where(o < count, num / jnp.maximum(den, 1.0) * factor, 1.0)
    step = jnp.log(jnp.clip(ratio, 1e-300, 1e300)).reshape(nb, B)
    anchors = materialize(_binomial.log_pmf(c_all[::B], base[::B], rho, rho_c))
    inside = anchors[:nb, None] + (jnp.cumsum(step, axis=1) - step)
    log_base = jnp.concatenate([inside.reshape(L), anchors[nb:]])
    abs_steps = jnp.sum(jnp.abs(step), axis=1)
    broken = jnp.any(jnp.max(jnp.abs(step), axis=1) >= 690.0)  # clipped (|log 1e300| = 690.8)
    err = B * (M + 3) * 4 * _ULP + (B + 2) * _ULP * abs_steps
    return log_base, err, broken


def _log_b_and_below(log_base, c, k, lrr):
    """``(log b_c(k), log b_c(k-1))`` from ``log_base = log b_c(clip(k, 0, c))``, ``k in [0, c+1]``."""
    beyond = k > c  # k = c + 1: b_c(k) = 0 and b_c(k-1) = b_c(c) is the base itself
    pos = (k >= 1.0) & ~beyond
    down = jnp.log(jnp.where(pos, k, 1.0) / jnp.where(pos, c - k + 1.0, 1.0)) - lrr
    return (jnp.where(beyond, -jnp.inf, log_base),
            jnp.where(beyond, log_base, jnp.where(pos, log_base + down, -jnp.inf)))


def _log_neighbours(log_base, c_all, k_all, m, rho, rho_c, lrr, M: int):
    """``(beta_c, sum of b_c between k_c and k_{c+1})`` over the window, ratios in log space.

    ``beta_c = b_c(k_{c+1} - 1) = b_{c+1}(k_{c+1}) k_{c+1} / ((c+1) rho)``. Any ``r0/r1``.
    """
    L = m.shape[0]
    c, kc, kn = c_all[:L], k_all[:L], k_all[1:]
    log_bk, log_bkm1 = _log_b_and_below(log_base, c_all, k_all, lrr)
    kn_pos = (kn >= 1.0) & (kn <= c + 1.0)
    log_beta = log_bk[1:] + jnp.log(jnp.where(kn_pos, kn, 1.0) / (c + 1.0)) - jnp.log(rho)
    beta = jnp.where(kn_pos, jnp.exp(log_beta), 0.0)
    up = m > 0
    terms = _chain_sum(jnp.where(up, log_bk[:L], log_bkm1[:L]), c, jnp.where(up, kc, kc - 1.0), up, lrr,
                       jnp.abs(m), M)
    return beta, terms


def _linear_neighbours(log_base, c_all, k_all, m, rho, rho_c, lrr, M: int):
    """As :func:`_log_neighbours`, one exp per count and products of exact ratios.

    Every value is a pmf (<= 1), so nothing overflows; a ratio ``(num/den)(rho/rho_c)`` is
    formed before it multiplies. What underflow can hide is bounded by the caller
    (:func:`linear_safe`). Same rounding budget as the log chain (``_CHAIN_REL`` per ratio).
    """
    L = m.shape[0]
    c, kc, kn = c_all[:L], k_all[:L], k_all[1:]
    beyond = k_all > c_all
    p_base = jnp.exp(log_base)
    p_k = jnp.where(beyond, 0.0, p_base)
    pos = (k_all >= 1.0) & ~beyond
    down_ratio = jnp.where(pos, k_all, 0.0) / jnp.where(pos, c_all - k_all + 1.0, 1.0) * (rho_c / rho)
    p_km1 = jnp.where(beyond, p_base, p_k * down_ratio)
    kn_pos = (kn >= 1.0) & (kn <= c + 1.0)
    beta = p_k[1:] * (jnp.where(kn_pos, kn, 0.0) / ((c + 1.0) * rho))
    up = m > 0
    count = jnp.abs(m)
    sign = jnp.where(up, 1.0, -1.0)
    j0 = jnp.where(up, kc, kc - 1.0)
    factor = jnp.where(up, rho / rho_c, rho_c / rho)

    def step(o, carry):
        val, acc = carry
        acc = acc + jnp.where(o < count, val, 0.0)
        num, den = _ratio_terms(c, j0 + sign * o, up)
        return val * (jnp.maximum(num, 0.0) / jnp.maximum(den, 1.0) * factor), acc  # 0: the walk left [0, c]

    carry = (jnp.where(up, p_k[:L], p_km1[:L]), jnp.zeros_like(beta))
    if M <= 8:  # unrolled: fuses into one pass over the window
        for o in range(M):
            carry = step(o, carry)
        return beta, carry[1]
    return beta, jax.lax.fori_loop(0, M, step, carry)[1]


@jax.custom_jvp
def _anchor_sf(c, k, rho, rho_c, log_b_k, log_b_km1):
    """P[Bin(c, rho) >= k] by the continued fraction; derivative d/drho = c b_{c-1}(k-1) = k b_c(k)/rho."""
    return jnp.exp(_binomial.log_sf_given_pmf(c, k, rho, rho_c, log_b_k, log_b_km1))


@_anchor_sf.defjvp
def _anchor_sf_jvp(primals, tangents):
    c, k, rho, rho_c, log_b_k, log_b_km1 = primals
    _, _, drho, drho_c, _, _ = tangents
    val = _anchor_sf(*primals)
    # c b_{c-1}(k-1; rho) = k b_c(k)/rho = (c-k+1) b_c(k-1)/rho_c; pick the form without 0/0.
    dens = jnp.where(rho >= rho_c, k * jnp.exp(log_b_k) / jnp.where(rho > 0, rho, 1.0),
                     (c - k + 1.0) * jnp.exp(log_b_km1) / jnp.where(rho_c > 0, rho_c, 1.0))
    dens = jnp.where((k >= 1) & (k <= c), dens, 0.0)
    return val, dens * 0.5 * (drho - drho_c)  # rho + rho_c = 1: move along that line


#: a boundary cell is counted unless its computed S is below -CELL_MARGIN times its scale: S's rounding
#: (t = e^eps, the products, coefficients such as u - t v that cancel at t = p) is a few ulps of that scale,
#: so no cell of positive exact value is left out; a counted cell of negative exact value costs at most
#: CELL_MARGIN of its P + tQ (the band charges it: docs/math.md 6.1)
CELL_MARGIN = 32.0 * _ULP


def _thresholds(u, v, w, r0, r1, n, t, cprime, inv_s):
    """k_{c'} = min{a in [0, c'] : S(a, c') > 0} (c'+1 if none), for slope A >= 0."""
    A = (u - t * v) * r1 - (v - t * u) * r0
    g = ((1.0 - t) * w) * ((n - cprime) * (r0 * r1)) * inv_s

    def S(a):
        return (u - t * v) * a * r1 + (v - t * u) * (cprime - a) * r0 + g

    g_scale = ((1.0 + t) * w) * ((n - cprime) * (r0 * r1)) * inv_s  # |g|'s scale: 1 - t can cancel near t = 1

    def scale(a):  # S(a)'s magnitudes (times the cell's factor: exactly P + tQ); its float error is a few ulps of it
        return (u + t * v) * a * r1 + (v + t * u) * (cprime - a) * r0 + g_scale

    def counted(a):  # keep every cell whose exact sign may be positive (docs/math.md 6.1)
        return S(a) > -CELL_MARGIN * scale(a)

    s0 = S(jnp.zeros_like(cprime))
    low = jnp.where(A > 0, -s0 / jnp.where(A > 0, A, 1.0), jnp.where(s0 > 0, -1.0, jnp.inf))
    k = jnp.clip(jnp.floor(jnp.clip(low, -1.0, cprime + 1.0)) + 1.0, 0.0, cprime + 1.0)
    for _ in range(2):  # low carries rounding: re-test the sign cell-wise at the boundary
        k = jnp.where((k >= 1.0) & counted(k - 1.0), k - 1.0, k)
        k = jnp.where((k <= cprime) & ~counted(k), k + 1.0, k)
    return k


def _one_direction(u, v, w, r0, r1, n, t, c_lo, W, w_rel, plan: Plan):
    """Window sum for D_t(P||Q), t >= 1.

    Returns ``(value, err, partial_last, q_mass, overflow, tangent_value, tangent_slope)``:
    ``tangent_value <= P(E) - tQ(E)`` and ``0 <= tangent_slope <= Q(E)`` for one region ``E``
    (the complete cells of the window where ``P > tQ``), so for every ``t' <= t``
    ``D_{t'} >= P(E) - t'Q(E) >= tangent_value + (t - t') tangent_slope``.

    Size: one window sum whose value, error bound, Q-mass and tangent all come from the same thresholds
    ``k_all``, neighbour pmfs and block anchors; it takes the point's scalars, the window weights computed once
    for both directions (``W``, ``w_rel``) and the static plan, with ``r0, r1`` positional because
    :func:`point_divergence` vmaps it over them swapped (one lane per direction).
    """
    flip = (u - t * v) * r1 - (v - t * u) * r0 < 0
    u, v = jnp.where(flip, v, u), jnp.where(flip, u, v)
    r0, r1 = jnp.where(flip, r1, r0), jnp.where(flip, r0, r1)
    s = 1.0 - r0 - r1
    inv_s = jnp.where(s > 0, jnp.minimum(1.0 / jnp.where(s > 0, s, 1.0), INV_S_MAX), INV_S_MAX)
    rho = r0 / (r0 + r1)
    rho_c = r1 / (r0 + r1)
    u, v, w, r0, r1, n, t, c_lo, inv_s, rho, rho_c = materialize((u, v, w, r0, r1, n, t, c_lo, inv_s, rho, rho_c))

    L, B, M = plan.window, plan.block, plan.max_step
    nb = L // B
    idx = jnp.arange(L + 1, dtype=jnp.float64)
    c_all = c_lo + idx  # counts c_lo .. c_lo + L (the last one only anchors the last block)
    # Thresholds are integers: no derivative, and none wanted through the guarded logs below.
    k_all = materialize(jax.lax.stop_gradient(_thresholds(u, v, w, r0, r1, n, t, c_all, inv_s)))
    kc, kn = k_all[:L], k_all[1:]
    c = c_all[:L]
    live = c <= n - 1.0
    m = kn - kc
    overflow = jnp.any(live & (jnp.abs(m) > M))
    m = jnp.clip(m, -M, M)

    # b_c(k_c) by Loader (k_c = c + 1 lies outside the support: b = 0), and its neighbours
    # b_c(k_c - 1), beta_c = b_c(k_{c+1} - 1) and those between k_c and k_{c+1} by exact ratios.
    lrr = jnp.log(rho) - jnp.log(rho_c)
    base = jnp.clip(k_all, 0.0, c_all)
    if plan.linear:  # Loader at block starts, exact step ratios between
        log_base, step_err, broken = _log_base_by_steps(c_all, base, rho, rho_c, M, B)
        overflow = overflow | broken  # band [0, inf]
        beta, terms = _linear_neighbours(log_base, c_all, k_all, m, rho, rho_c, lrr, M)
    else:
        log_base, step_err = _binomial.log_pmf(c_all, base, rho, rho_c), jnp.zeros(nb)
        beta, terms = _log_neighbours(log_base, c_all, k_all, m, rho, rho_c, lrr, M)
    log_bk, log_bkm1 = _log_b_and_below(log_base[::B], c_all[::B], k_all[::B], lrr)  # anchors only
    delta_k = jnp.sign(m) * terms  # SF_c(k_c) - SF_c(k_{c+1})
    incr = rho * beta - delta_k  # T_{c+1} - T_c
    incr_abs = rho * beta + terms
    # Loader (or its block anchor and the steps from it), then at most M+1 neighbour ratios.
    pmf_rel_blk = (REL_ERR + (M + 1) * _CHAIN_REL + 2.0 * step_err)[:, None]  # (nb, 1); e^x - 1 <= 2x
    pmf_rel = jnp.broadcast_to(pmf_rel_blk, (nb, B)).reshape(L)

    # Anchors at both ends of every block; per count, the chain with the smaller error bound.
    ca, ka = c_all[::B], k_all[::B]
    anchors = _anchor_sf(ca, ka, rho, rho_c, log_bk, log_bkm1)
    a_start, a_end = anchors[:nb, None], anchors[1:, None]
    blk = lambda x: x.reshape(nb, B)  # noqa: E731
    pre = jnp.cumsum(blk(incr), axis=1) - blk(incr)
    pre_abs = jnp.cumsum(blk(incr_abs), axis=1) - blk(incr_abs)
    # reverse=True rather than flip-cumsum-flip: the flips cost XLA:CPU extra passes over the window.
    suf = jax.lax.cumsum(blk(incr), axis=1, reverse=True)
    suf_abs = jax.lax.cumsum(blk(incr_abs), axis=1, reverse=True)
    fwd, bwd = a_start + pre, a_end - suf
    err_fwd = REL_TAIL * a_start + pmf_rel_blk * pre_abs + B * _ULP * (a_start + pre_abs)
    err_bwd = REL_TAIL * a_end + pmf_rel_blk * suf_abs + B * _ULP * (a_end + suf_abs)
    use_fwd = err_fwd <= err_bwd
    T = jnp.clip(jnp.where(use_fwd, fwd, bwd).reshape(L), 0.0, 1.0)
    err_T = jnp.minimum(err_fwd, err_bwd).reshape(L)
    U = jnp.clip(T - delta_k, 0.0, 1.0)
    err_U = err_T + pmf_rel * terms

    W = jnp.where(live, W, 0.0)
    unmarked_on = jnp.where((idx[:L] == 0) & (c_lo > 0), 0.0, 1.0)  # partial cell c' = c_lo dropped
    marked = W * ((u - t * v) * beta + (1.0 - t) * (u + v) * U)
    unmarked = W * (1.0 - t) * w * T * unmarked_on
    value = jnp.sum(marked + unmarked)
    abs_sum = jnp.sum(W * (jnp.abs(u - t * v) * beta + (t - 1.0) * ((u + v) * U + w * T * unmarked_on)))
    chain_abs = jnp.sum(W * ((u + v) * err_U + w * err_T * unmarked_on))  # enters value (times t-1) and Q
    chain_err = (t - 1.0) * chain_abs
    # Flushed (subnormal) pmfs: at most M + 2 per count, each entering at most B + 1 sums.
    # Rounded coefficients (docs/math.md 6.1): each cell's P - tQ is computed from a rounded t = e^eps with
    # coefficients that may cancel (u - t v at t = p for a clone pair): within 24u of its P + tQ. The region
    # counts every cell whose exact value may be positive (CELL_MARGIN), so the exact divergence is at most
    # the region's exact sum plus the counted cells' negative parts (each within CELL_MARGIN of its P + tQ),
    # and at least that exact sum: both ends move by at most 2 CELL_MARGIN (P(E) + t Q(E)) <= that of
    # (value + 2 t Q(E)).
    q_mass = jnp.sum(W * (v * beta + (u + v) * U + w * T * unmarked_on))  # Q(E)
    coef_err = 2.0 * CELL_MARGIN * (jnp.abs(value) + 2.0 * t * q_mass) * 1.01
    err = ((w_rel + jnp.max(pmf_rel_blk) + (L + 8) * _ULP) * abs_sum + chain_err + (M + 4) * (B + 1) * L * _FLUSH
           + coef_err)
    if plan.linear:  # neighbours of an underflowed b_c(k_c) (see linear_safe), through the same sums
        log_hidden = -708.0 + log_reach(n, jnp.abs(lrr), M, jnp) + jnp.log(2.0 * (M + 2) * (B + 1) * L)
        err = err + jnp.exp(jnp.minimum(log_hidden + jnp.log(t + 1.0), 700.0))
        hidden: jax.Array | float = jnp.exp(jnp.minimum(log_hidden, 700.0))
    else:
        hidden = 0.0
    last_live = live[L - 1] & (c[L - 1] < n - 1.0)  # marked cells at c' = c_hi+1 are partial
    piece = jnp.where(last_live, marked[L - 1], 0.0)
    partial_last = jnp.maximum(piece, 0.0)
    # Q of the complete cells: the same sums with the coefficients (v, u+v, w) <= 1 in place of
    # those of P - tQ, so the same error terms bound them, without the factor t.
    q_err = ((w_rel + jnp.max(pmf_rel_blk) + (L + 8) * _ULP) * q_mass
             + chain_abs + 2.0 * ((M + 4) * (B + 1) * L * _FLUSH + hidden))
    q_piece = jnp.where(last_live, W[L - 1] * (v * beta[L - 1] + (u + v) * U[L - 1]), 0.0)
    tangent_slope = jnp.maximum(q_mass - q_piece - q_err, 0.0)
    return value, err, partial_last, q_mass, overflow, value - piece - err, tangent_slope


def chernoff_outside(n, pi, c_lo, L):
    """Upper bound on P[C <= c_lo - 1 + [c_lo>0]] + P[C >= c_lo + L], C ~ Binom(n-1, pi) (see module doc)."""
    N = n - 1.0
    pi_c = 1.0 - pi

    def log_bound(m):  # log of Chernoff bound on the tail beyond m (toward it from the mean)
        a = jnp.clip(m / jnp.maximum(N, 1.0), 1e-300, 1.0 - 1e-16)
        kl = a * jnp.log(a / pi) + (1.0 - a) * jnp.log1p(-a) - (1.0 - a) * jnp.log(pi_c)
        return -N * kl * (1.0 - 1e-10)

    hi_edge = c_lo + L  # P[C >= c_lo + L]
    up = jnp.where(hi_edge > N, 0.0, jnp.where(hi_edge > N * pi, jnp.exp(log_bound(hi_edge)), 1.0))
    up = jnp.where(hi_edge == N, jnp.exp(N * jnp.log(pi)) * (1 + 1e-10), up)  # exact P[C = N]
    lo_edge = c_lo  # P[C <= c_lo] (cells with 1 <= c' <= c_lo)
    dn = jnp.where(c_lo <= 0, 0.0, jnp.where(lo_edge < N * pi, jnp.exp(log_bound(lo_edge)), 1.0))
    return up + dn


def window_weights(n, r0, r1, c_lo, plan: Plan):
    """``W_c = P[Binom(n-1, pi) = c]`` over the window (``pi = r0 + r1``, r floored as in the
    kernel) and a bound on their relative error: ``(W, w_rel)``.

    One Loader pmf per block, at the count nearest the mode, and exact ratios
    ``W_{c+1}/W_c = (N-c)/(c+1) * pi/(1-pi)`` (``N = n-1``) summed as logs both ways from it.
    ``w_rel`` bounds, over the window, Loader's ``REL_ERR`` plus every step's rounding
    (the quotient, three logs, the sum: ``4u(2 + |log quotient| + |log pi| + |log(1-pi)|)``)
    and the prefix sums' ``(B + 4) u sum |step|``. A zero ratio (``c >= N``) gives exact zeros.
    """
    L, B = plan.window, plan.block
    nb = L // B
    pi = jnp.maximum(r0, R_FLOOR) + jnp.maximum(r1, R_FLOOR)
    N = n - 1.0
    c = (c_lo + jnp.arange(L, dtype=jnp.float64)).reshape(nb, B)
    lp, lq = jnp.log(pi), jnp.log(jnp.maximum(1.0 - pi, 1e-300))  # pi = 1 is set exactly below
    quotient = jnp.maximum(N - c, 0.0) / (c + 1.0)
    log_q = jnp.log(quotient)  # -inf beyond N: the weights after it are exact zeros
    step = log_q + (lp - lq)  # log W_{c+1}/W_c, below +inf
    prefix = jnp.concatenate([jnp.zeros((nb, 1)), jnp.cumsum(step[:, :-1], axis=1)], axis=1)
    mode = jnp.minimum(jnp.floor((N + 1.0) * pi), N)
    a = jnp.clip(mode - c[:, :1], 0.0, B - 1.0)  # the count nearest the mode, within each block
    a_idx = a.astype(jnp.int32)
    anchor = materialize(_binomial.log_pmf(N, c[:, :1] + a, pi, 1.0 - pi))
    prefix_a = jnp.take_along_axis(prefix, a_idx, axis=1)
    W = jnp.exp(anchor + (prefix - prefix_a))
    W = jnp.where(pi < 1.0, W, jnp.where(c == N, 1.0, 0.0)).reshape(L)  # pi = 1: all mass at N, exactly
    finite = jnp.isfinite(step)
    abs_step = jnp.where(finite, jnp.abs(step), 0.0)
    round_err = jnp.where(finite, 4.0 * _ULP * (2.0 + jnp.abs(log_q) + jnp.abs(lp) + jnp.abs(lq)), 0.0)
    log_err = jnp.max(jnp.sum(round_err, axis=1) + (B + 4) * _ULP * jnp.sum(abs_step, axis=1))
    w_rel = jnp.expm1(2.0 * REL_ERR + log_err) + 2.0 * _ULP
    return W, w_rel


def point_divergence(u, v, w, r0, r1, n, eps, c_lo, plan: Plan, W=None):
    """Certified max-direction divergence at one point (scalars). See module docstring.

    ``W = (weights, rel_err)`` (from :func:`window_weights`) may be passed when the same point is evaluated
    at many ``eps``, as in the search.

    Size: a per-lane scalar function: :func:`divergence_with_plan` vmaps it over the eight flat arrays (pair
    fields, ``n``, ``eps``, ``c_lo``) and the searches bind it with ``functools.partial``; ``plan`` is static
    and ``W`` optional.
    """
    valid = fields_valid(u, v, w, r0, r1) & (n >= 1) & ~jnp.isnan(eps)
    safe = lambda x, d: jnp.where(valid, x, d)  # noqa: E731
    u, v, w = safe(u, 0.5), safe(v, 0.5), safe(w, 0.0)
    r0, r1, n, eps = safe(r0, 0.25), safe(r1, 0.25), safe(n, 1.0), safe(eps, 0.0)

    big = eps >= 0
    t = jnp.exp(jnp.abs(eps))  # work at t >= 1; t < 1 maps through D_t = (1-t) + t D_{1/t}
    r0f, r1f = jnp.maximum(r0, R_FLOOR), jnp.maximum(r1, R_FLOOR)
    perturb = (1.0 + t) * (n - 1.0) * ((r0f - r0) + (r1f - r1))
    pi = r0f + r1f
    W, w_rel = window_weights(n, r0, r1, c_lo, plan) if W is None else W

    one = functools.partial(_one_direction, u, v, w, n=n, t=t, c_lo=c_lo, W=W, w_rel=w_rel, plan=plan)
    if plan.symmetric:
        val, err, part, qm, ovf, tan_v, tan_s = one(r0f, r1f)
    else:
        val, err, part, qm, ovf, tan_v, tan_s = jax.vmap(one)(jnp.stack([r0f, r1f]), jnp.stack([r1f, r0f]))
        best = jnp.argmax(val)
        qm, tan_v, tan_s = qm[best], tan_v[best], tan_s[best]  # either direction bounds the max below
        lo_dir = jnp.max(val - err - part)
        hi_dir = jnp.max(val + err)
        val, ovf = jnp.max(val), jnp.any(ovf)
    if plan.symmetric:
        lo_dir, hi_dir = val - err - part, val + err
    outside = chernoff_outside(n, pi, c_lo, plan.window)
    lo_dir = jnp.maximum(lo_dir - perturb, 0.0)
    hi_dir = jnp.minimum(hi_dir + outside + perturb, 1.0)
    hi_dir = jnp.where(ovf, jnp.inf, hi_dir)
    lo_dir = jnp.where(ovf, 0.0, lo_dir)
    # The floor's perturbation grows with t, so the value at t covers every t' <= t.
    tangent_ok = big & ~ovf & valid
    tan_v = jnp.where(tangent_ok, tan_v - perturb, 0.0)
    tan_s = jnp.where(tangent_ok, tan_s, 0.0)
    # Back to t < 1 where eps < 0 (here t is 1/t_original).
    ti = 1.0 / t
    value = jnp.where(big, val, (1.0 - ti) + ti * val)
    lower = jnp.where(big, lo_dir, (1.0 - ti) + ti * lo_dir)
    upper = jnp.where(big, hi_dir, jnp.minimum((1.0 - ti) + ti * hi_dir, 1.0))
    inv = ~valid
    return Divergence(
        value=jnp.where(inv, jnp.inf, value),
        lower=jnp.where(inv, 0.0, lower),
        upper=jnp.where(inv, jnp.inf, upper),
        q_mass=jnp.where(inv, 0.0, qm),
        step_overflow=ovf & valid,
        tangent_value=tan_v,
        tangent_slope=tan_s,
    )


@functools.partial(jax.jit, static_argnames=("plan",))
def divergence_with_plan(pair_arrays, n, eps, c_lo, plan: Plan) -> Divergence:
    """Jittable core over a flat batch: ``pair_arrays = (u, v, w, r0, r1)``, each shape (B,).

    ``n, eps, c_lo`` float64 of shape (B,); ``plan`` static (see :mod:`jaxshuffle.plan`).
    Invalid points give ``value = upper = inf, lower = 0`` (package convention).
    """
    f = functools.partial(point_divergence, plan=plan)
    u, v, w, r0, r1 = pair_arrays
    return jax.vmap(f)(u, v, w, r0, r1, n, eps, c_lo)


# ----------------------------------------------------------------------------------------
# Eager front end: validation, bucketing by plan, reassembly.


def hockey_stick_bounds(pair: TwoCountPair, n, eps, *, trunc_tol: float = 1e-30) -> Divergence:
    """Certified ``max(D_{e^eps}(P||Q), D_{e^eps}(Q||P))`` broadcast over pair, ``n``, ``eps``.

    Works under ``grad``/``jvp``; inside ``jit`` use :func:`divergence_with_plan`. The divergence:
    docs/math.md section 2; its certified band: section 4.

    Args:
      pair: the :class:`~jaxshuffle.pair.TwoCountPair` (any batch shape).
      n: number of users, a finite integer >= 1 (the victim and ``n - 1`` others).
      eps: epsilon at which to evaluate, any real number (``t = e^|eps|``).
      trunc_tol: largest binomial mass the window may leave out (counted in the band).

    Returns:
      The band, a :class:`Divergence` with ``lower <= true divergence <= upper`` (certified: ``lower`` errs
        low, ``upper`` errs high; the band covers truncation to a window leaving out at most ``trunc_tol``
        mass, float rounding and the tested accuracy of the binomial routines) and ``value``, the central
        estimate (not certified).

    Raises:
      ValueError: naming the parameter (``n``, ``eps``, a pair field) for bad input.
      TypeError: naming ``pair``, for anything but a :class:`~jaxshuffle.pair.TwoCountPair`.
    """
    flat, values, shape = prepare_batch(pair, n, eps, "eps", "hockey_stick")
    u, v, w, r0, r1, n_, e_ = values
    check_batch((u, v, w, r0, r1), n_, {"eps": (e_, lambda e: ~np.isnan(e), "must be a number")})
    L, c_lo = plan_windows(n_, np.maximum(r0, R_FLOOR) + np.maximum(r1, R_FLOOR), trunc_tol)
    t = np.exp(np.abs(e_))
    M = max_step_estimate(u, v, w, r0, r1, t, t, n_)

    def kernel(plan, u, v, w, r0, r1, n, eps, c_lo):
        return divergence_with_plan((u, v, w, r0, r1), n, eps, c_lo, plan)

    res = run_buckets(kernel, bucket_plans(L, M, r0, r1, n_), [*flat, c_lo], shape)
    if bool(jnp.any(res.step_overflow)):  # pragma: no cover - the estimate is conservative
        raise RuntimeError("internal: threshold step exceeded the planned bound")
    return res


def hockey_stick(pair: TwoCountPair, n, eps) -> jax.Array:
    """``max(D_{e^eps}(P||Q), D_{e^eps}(Q||P))`` of the pair for ``n`` users (float64 array).

    The central estimate; :func:`hockey_stick_bounds` gives the certified band around it.
    Broadcasts over the pair's batch shape, ``n`` and ``eps`` (any real ``eps``). The divergence:
    docs/math.md section 2.

    Args:
      pair: the :class:`~jaxshuffle.pair.TwoCountPair` (any batch shape).
      n: number of users, a finite integer >= 1.
      eps: epsilon at which to evaluate, any real number.

    Returns:
      The divergence, float64, broadcast shape: an estimate, not certified (the certified band is
        :func:`hockey_stick_bounds`'s ``lower``, ``upper``).

    Raises:
      ValueError: naming the parameter (``n``, ``eps``, a pair field) for bad input.
      TypeError: naming ``pair``, for anything but a :class:`~jaxshuffle.pair.TwoCountPair`.
    """
    return hockey_stick_bounds(pair, n, eps).value
