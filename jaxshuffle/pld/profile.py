"""A round's privacy-loss distribution from a certified privacy profile (connecting the dots).

For a *symmetric* pair ``(P, Q)`` (``H_t(P||Q) = H_t(Q||P)``) that dominates a round, the profile
``h(t) = H_t(P || Q)``, ``t = e^eps``, is convex and non-increasing with ``h(0) = 1``; an engine
certifies an upper value ``u_i >= h(t_i)`` at given ``eps_i >= 0``. The round's PLD is built by
connecting those dots (docs/math.md section 12.8):

1. ``eps_i = j_i Delta`` on the composition grid (evaluated a few ulps lower, so that
   ``u_i >= h(e^{j_i Delta})``), up to the largest loss, where ``h = 0``; ``u`` capped at 1 and
   replaced by its running minimum (``h`` is non-increasing);
2. the value at ``t = 1`` may be lowered to ``v* = min_b 1 - 2 (1 - u_b)/(1 + t_b)`` (the chord
   of ``h`` between ``1/t_b`` and ``t_b``, by the symmetry ``h(t) = 1 - t + t h(1/t)``);
3. the lower convex hull of ``(1, v*), (t_i, u_i)`` gives vertices with slope jumps ``q_v`` (Q-mass
   at loss ``eps_v``); the PLD has P-mass ``t_v q_v`` at ``+eps_v``, ``q_v`` at ``-eps_v``,
   ``p_0 = 1 - v* + 2 s_1`` at 0 (``s_1`` the first slope) and ``u_last`` at ``+inf``.

Every float step rounds the masses up (relative slope error at most ``KAPPA``); negative jumps
are clamped to 0. Section 13.9 proves that the result dominates, mass by mass, a valid PLD whose
profile is >= ``h`` at every eps, so its composition is a certified upper bound. The proof uses only
that the pair is symmetric and dominates the round, not which engine certified the values.

The profiles: k-ary RR's blanket pair (:mod:`jaxshuffle.pld.blanket`), the three-count pair
of a sampled round (same module), and the worst-case two-count pair (:func:`two_count_round`, here),
whose cells grow as ``n`` (5.7e9 at ``n = 1e8``) where its profile costs ``points`` evaluations of
``O(window)`` each.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._numerics import UNIT_ROUNDOFF as _U
from jaxshuffle._numerics import quarter_octave
from jaxshuffle.engine.two_count.pair import TwoCountPair
from jaxshuffle.pld.distribution import DiscretePLD, RoundPLD

KAPPA = 256 * _U  # relative error of a computed hull slope (exp, expm1, one subtraction, one division)
DEFAULT_POINTS = 512  # profile evaluations between eps = 0 and the tail point
TAIL_DELTA = 1e-12  # profile value at the end of the evenly spaced points
TAIL_REACH = 8  # then points/8 points up to TAIL_REACH times as far (or eps0, where h = 0)
EVAL_BATCH = 16  # profile points evaluated together (memory: each holds window x lines arrays, about 30 MB at n = 1e4)
MAX_INDEX = 1 << 21  # largest |loss| / discretization of a round (the dense array has 2 MAX_INDEX + 1 bins)


@jax.jit
def _lower_hull(x, y):
    """Mask of the lower convex hull's vertices of points with increasing ``x`` (monotone chain).
    Float decisions only affect tightness: any vertex set gives a valid bound (section 12.8)."""
    m = x.shape[0]

    def push(carry, i):
        def concave(c):
            stack, top = c
            a, b = stack[jnp.maximum(top - 2, 0)], stack[jnp.maximum(top - 1, 0)]
            cross = (x[b] - x[a]) * (y[i] - y[a]) - (y[b] - y[a]) * (x[i] - x[a])
            return (top >= 2) & (cross <= 0)

        stack, top = jax.lax.while_loop(concave, lambda c: (c[0], c[1] - 1), carry)
        return (stack.at[top].set(i), top + 1), None

    (stack, top), _ = jax.lax.scan(push, (jnp.zeros(m, jnp.int32), jnp.int32(0)), jnp.arange(m, dtype=jnp.int32))
    i = jnp.arange(m, dtype=jnp.int32)
    return jnp.zeros(m, bool).at[jnp.where(i < top, stack, jnp.int32(m))].set(True, mode="drop")


@jax.jit
def connect_the_dots(j, discretization, upper):
    """Pessimistic symmetric PLD from upper profile values ``upper[i] >= H_{e^{j[i] Delta}}(P||Q)``.

    ``j``: increasing grid indices with ``j[0] = 0``; ``upper``: certified upper values there (``inf``
    allowed). Returns ``(positive, negative, zero, infinity)``: P-masses at losses ``+j[i] Delta``
    and ``-j[i] Delta`` (entry 0 unused, 0), at loss 0 and at ``+inf``; each rounded up
    (docs/math.md section 12.8). The pair must be symmetric (``H_t(P||Q) = H_t(Q||P)``).
    """
    eps = j * discretization
    u = jax.lax.cummin(jnp.where(jnp.isnan(upper), 1.0, jnp.minimum(upper, 1.0)))
    x = jnp.expm1(eps)  # t - 1
    v_star = jnp.min(1.0 - 2.0 * (1.0 - u) / (2.0 + x)) + 4 * _U  # >= h(1): rounded up
    y = u.at[0].set(jnp.minimum(v_star, u[0]))
    keep = _lower_hull(x, y)
    m = j.shape[0]
    idx = jnp.arange(m, dtype=jnp.int32)
    prev = jax.lax.cummax(jnp.where(keep, idx, jnp.int32(-1)))
    prev = jnp.concatenate([jnp.full(1, -1, jnp.int32), prev[:-1]])  # last vertex before each point
    nxt = jax.lax.cummin(jnp.where(keep, idx, jnp.int32(m)), reverse=True)
    nxt = jnp.concatenate([nxt[1:], jnp.full(1, m, jnp.int32)])  # first vertex after each point
    last = nxt >= m
    p_, n_ = jnp.maximum(prev, 0), jnp.minimum(nxt, m - 1)

    def slope(a, b):  # (y_b - y_a)/(t_b - t_a), t_b - t_a = e^{eps_a} expm1((j_b - j_a) Delta)
        return (y[b] - y[a]) / (jnp.exp(eps[a]) * jnp.expm1((j[b] - j[a]) * discretization))

    s_left = jnp.where(prev >= 0, slope(p_, idx), 0.0)
    s_right = jnp.where(last, 0.0, slope(idx, n_))
    jump = (s_right - s_left) * (1 + 2 * _U) + KAPPA * (jnp.abs(s_left) + jnp.abs(s_right))
    q = jnp.where(keep & (idx > 0), jnp.maximum(jump, 0.0), 0.0)
    positive = q * jnp.exp(eps) * (1 + KAPPA)
    s1 = s_right[0]
    zero = jnp.maximum((1.0 - y[0] + 2.0 * s1) * (1 + 2 * _U) + 8 * _U + 2 * KAPPA * jnp.abs(s1), 0.0)
    return positive, q, zero, y[-1]


def to_discrete(j: np.ndarray, positive, negative, zero, infinity, discretization: float) -> DiscretePLD:
    top = int(j[-1])
    probs = np.zeros(2 * top + 1)
    probs[top + j[1:]] = np.asarray(positive)[1:]
    probs[top - j[1:]] = np.asarray(negative)[1:]
    probs[top] += float(zero)
    nz = np.flatnonzero(probs)
    lo, hi = (nz[0], nz[-1]) if nz.size else (top, top)
    return DiscretePLD(np.ascontiguousarray(probs[lo:hi + 1]), int(lo - top), float(discretization),
                       min(float(infinity), 1.0), True)


def profile_grid(eps_end: float, eps_tail: float, discretization: float, points: int):
    """Grid indices ``j`` of the profile points (``j[0] = 0``, evenly spaced up to ``eps_tail``, ``points/8``
    more up to ``min(eps_end, TAIL_REACH eps_tail)``; ``h = 0`` from ``eps_end`` on) and the eps to evaluate
    there, a few ulps below ``j Delta`` (so ``u >= h(e^{j Delta})``), padded to a length of a small ladder
    with the last point (rounds at other parameters reuse the profile program)."""
    j_end = math.ceil(eps_end / discretization)  # h = 0 from here on
    j_tail = max(1, min(j_end, math.ceil(eps_tail / discretization)))
    j_cap = min(j_end, TAIL_REACH * j_tail)  # last point: its profile value goes to +inf (0 if at eps_end)
    if j_cap > MAX_INDEX:
        raise ValueError(f"discretization: {discretization:.3g} needs {2 * j_cap + 1} bins for this round, more "
                         f"than {2 * MAX_INDEX + 1}; use at least {j_cap * discretization / MAX_INDEX:.3g}")
    step = max(1, math.ceil(j_tail / points))
    coarse = max(step, math.ceil((j_cap - j_tail) / max(points // 8, 1)))
    j = np.unique(np.concatenate([np.arange(0, j_tail, step), np.arange(j_tail, j_cap, coarse), [j_cap]]))
    j = j.astype(np.int64)
    eps_eval = j * discretization * (1 - 4 * _U) - 4 * _U
    padded = np.full(quarter_octave(j.size), max(float(eps_eval[-1]), 0.0))
    padded[:j.size] = np.maximum(eps_eval, 0.0)
    return j, padded


def round_from_profile(j: np.ndarray, upper: np.ndarray, discretization: float, eps_end: float,
                        source: str) -> RoundPLD:
    """The certified round PLD of a symmetric pair from upper profile values at ``j Delta`` (connect the dots)."""
    pos, neg, zero, inf = connect_the_dots(jnp.asarray(j, jnp.float64), jnp.float64(discretization),
                                           jnp.asarray(upper))
    pld = to_discrete(j, pos, neg, zero, inf, discretization)
    # max_loss bounds the finite losses for rdp(); with mass at +inf the RDP bound is infinite
    max_loss = eps_end if pld.infinity_mass == 0 else math.inf
    return RoundPLD(pld, pld, None, None, certified=True, source=source, max_loss=max_loss)


# ----------------------------------------------------------------------------------------
# The worst-case two-count pair's profile.


@functools.partial(jax.jit, static_argnames=("plan",))
def _two_count_profile_program(u, v, r0, r1, n, c_lo, eps, *, plan):
    from jaxshuffle.engine.two_count.divergence import point_divergence, window_weights

    W = window_weights(n, r0, r1, c_lo, plan)  # the others' count weights, shared by every eps
    zero = jnp.zeros_like(u)
    return jax.lax.map(lambda e: point_divergence(u, v, zero, r0, r1, n, e, c_lo, plan, W).upper, eps,
                       batch_size=EVAL_BATCH)


def two_count_round(pair: TwoCountPair, n: float, discretization: float, *,
                    points: int = DEFAULT_POINTS) -> RoundPLD:
    """Certified round PLD of a symmetric two-count pair (``w = 0``, ``r0 = r1``) from its profile.

    The pair is symmetric (exchanging the two counts maps ``P`` to ``Q``), so its PLD is connected from
    the two-count engine's certified upper divergence (:func:`~jaxshuffle.engine.two_count.divergence.
    point_divergence`, docs/math.md sections 2 and 4) at ``points`` evaluations spread evenly over
    ``[0, eps_tail]`` (``eps_tail``: the pair's certified epsilon at :data:`TAIL_DELTA`) and ``points/8``
    more up to ``min(|log(u/v)|, TAIL_REACH eps_tail)``; ``h = 0`` from ``|log(u/v)|`` on (no loss exceeds
    it). Each evaluation is ``O(window)``, so the cost does not grow with the cells ``window x row`` that
    :func:`~jaxshuffle.pld.two_count.round_pld` enumerates. Pessimistic only (``lower_*`` None): composing it
    gives certified upper bounds (docs/math.md section 12.8).

    Args:
      pair: a scalar :class:`~jaxshuffle.pair.TwoCountPair` with ``w = 0``, ``u, v > 0`` and ``r0 = r1``
        (else ValueError naming ``pair``: the construction holds for symmetric dominating pairs only).
      n: the pair's number of users (the victim and ``n - 1`` others), an integer >= 2.
      discretization: the loss grid spacing.
      points: profile evaluations, in [2, 65536].

    Returns:
      The round, a :class:`RoundPLD` labelled with ``pair.source``.
    """
    from jaxshuffle.engine.two_count.plan import plan_for, window_start
    from jaxshuffle.engine.two_count.search import epsilon

    u, v, w, r, r1 = (float(np.asarray(x)) for x in pair.arrays())
    if w != 0.0 or r != r1 or min(u, v) <= 0.0:  # connecting the dots needs a symmetric dominating pair
        raise ValueError(f"pair: two_count_round needs w = 0, r0 = r1 and u, v > 0, got w = {w:.6g}, r0 = {r:.6g}, "
                         f"r1 = {r1:.6g}, u = {u:.6g}, v = {v:.6g}")
    eps_end = abs(math.log(u / v))
    tail = epsilon(pair, n, TAIL_DELTA)
    eps_tail = float(tail.upper) if float(tail.upper) < eps_end else eps_end  # only places the grid
    j, padded = profile_grid(eps_end, eps_tail, discretization, points)
    # One plan for every profile point, the search's at TAIL_DELTA: its window leaves out a millionth of
    # that (the left-out mass is charged to each upper value, so any window is sound), and its threshold
    # step covers every eps up to the largest loss.
    plan = plan_for(pair, n, TAIL_DELTA)
    c_lo = window_start(np.float64(n), np.float64(2 * r), plan.window)
    f = (jnp.float64(x) for x in (u, v, r, r, n, c_lo))
    upper = np.asarray(_two_count_profile_program(*f, jnp.asarray(padded), plan=plan))[:j.size]
    return round_from_profile(j, upper, discretization, eps_end, pair.source)
