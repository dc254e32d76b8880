"""Privacy-loss distribution of shuffled k-ary RR's blanket pair, from its certified privacy profile.

The blanket (three-count) pair ``(P, Q)`` of docs/math.md section 7 dominates shuffled k-RR at
every eps, in both orders of the neighbouring datasets (it is symmetric: swapping the counts of
``x0`` and ``x1`` maps ``P`` to ``Q``). Its profile ``h(t) = H_t(P || Q)``, ``t = e^eps``, is
convex and non-increasing, ``h(0) = 1``, and :func:`jaxshuffle.blanket.point_divergence` certifies
an upper value ``u_i >= h(t_i)`` at given ``eps_i >= 0``. The round's PLD is built by connecting
those dots (docs/math.md section 13.9):

1. ``eps_i = j_i Delta`` on the composition grid (evaluated a few ulps lower, so that
   ``u_i >= h(e^{j_i Delta})``), up to ``ceil(eps0/Delta) Delta`` where ``h = 0``; ``u`` capped at
   1 and replaced by its running minimum (``h`` is non-increasing);
2. the value at ``t = 1`` may be lowered to ``v* = min_b 1 - 2 (1 - u_b)/(1 + t_b)`` (the chord
   of ``h`` between ``1/t_b`` and ``t_b``, by the symmetry ``h(t) = 1 - t + t h(1/t)``);
3. the lower convex hull of ``(1, v*), (t_i, u_i)`` gives vertices with slope jumps ``q_v`` (Q-mass
   at loss ``eps_v``); the PLD has P-mass ``t_v q_v`` at ``+eps_v``, ``q_v`` at ``-eps_v``,
   ``p_0 = 1 - v* + 2 s_1`` at 0 (``s_1`` the first slope) and ``u_last`` at ``+inf``.

Every float step rounds the masses up (relative slope error at most ``KAPPA``); negative jumps
are clamped to 0. Section 13.9 proves that the result dominates, mass by mass, a valid PLD whose
profile is >= ``h`` at every eps, so its composition is a certified upper bound.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import check
from jaxshuffle._numerics import UNIT_ROUNDOFF as _U
from jaxshuffle.accountant.pld import MIN_DISCRETIZATION, DiscretePLD, RoundPLD, default_discretization
from jaxshuffle.engine.blanket import (
    blanket_epsilon,
    krr_sum_form,
    plan_blanket,
    point_divergence,
    power_of_two,
    quarter_octave,
    shared_plan,
    window_start,
)

KAPPA = 256 * _U  # relative error of a computed hull slope (exp, expm1, one subtraction, one division)
DEFAULT_POINTS = 512  # profile evaluations between eps = 0 and the tail point
TAIL_DELTA = 1e-12  # profile value at the end of the evenly spaced points
TAIL_REACH = 8  # then points/8 points up to TAIL_REACH times as far (or eps0, where h = 0)
EVAL_BATCH = 16  # profile points evaluated together (memory: each holds window x lines arrays, about 30 MB at n = 1e4)
MAX_INDEX = 1 << 21  # largest |loss| / discretization of a round (the dense array has 2 MAX_INDEX + 1 bins)


def _profile_upper(eps0: float, k: float, n: float, eps: np.ndarray, plan) -> np.ndarray:
    """Certified upper values of the blanket pair's ``H_{e^eps}(P||Q)`` at each ``eps >= 0``."""
    f = krr_sum_form(eps0, k, "blanket")
    # the s window centred on the mean of Bin(n, pS); any start is sound (the mass outside is charged)
    s_lo = window_start(jnp.float64(n), f.pS, plan.window)
    return np.asarray(_profile_program(f, jnp.float64(n), s_lo, jnp.asarray(eps), plan=plan))


@functools.partial(jax.jit, static_argnames=("plan",))
def _profile_program(f, n, s_lo, eps, *, plan):
    return jax.lax.map(lambda e: point_divergence(f, n, e, s_lo, plan).upper, eps, batch_size=EVAL_BATCH)


@jax.jit
def _lower_hull(x, y):
    """Mask of the lower convex hull's vertices of points with increasing ``x`` (monotone chain).
    Float decisions only affect tightness: any vertex set gives a valid bound (section 13.9)."""
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
    (docs/math.md section 13.9). The pair must be symmetric (``H_t(P||Q) = H_t(Q||P)``).
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


def _to_discrete(j: np.ndarray, positive, negative, zero, infinity, discretization: float) -> DiscretePLD:
    top = int(j[-1])
    probs = np.zeros(2 * top + 1)
    probs[top + j[1:]] = np.asarray(positive)[1:]
    probs[top - j[1:]] = np.asarray(negative)[1:]
    probs[top] += float(zero)
    nz = np.flatnonzero(probs)
    lo, hi = (nz[0], nz[-1]) if nz.size else (top, top)
    return DiscretePLD(np.ascontiguousarray(probs[lo:hi + 1]), int(lo - top), float(discretization),
                       min(float(infinity), 1.0), True)


def blanket_round(eps0, k, n, *, discretization: float | None = None, rounds: int = 1,
                  points: int = DEFAULT_POINTS, sample_rate: float = 1.0) -> RoundPLD:
    """Certified round PLD of ``n`` users' shuffled k-ary randomized response, from its blanket pair.

    Args:
      eps0: local budget, in (0, 50]. k: number of values, an integer >= 2.
      n: number of users, an integer in [2, 1e12].
      discretization: loss grid spacing; default that of the worst-case pair
        (:func:`~jaxshuffle.accountant.pld.default_discretization`) for ``rounds`` rounds, so both
        pairs share one grid.
      points: profile evaluations spread evenly over ``[0, eps_tail]`` (``eps_tail``: the blanket
        epsilon at ``TAIL_DELTA``), and ``points/8`` more up to ``min(eps0, TAIL_REACH eps_tail)``.
      sample_rate: the probability ``g`` in (0, 1] that a user takes part in the round (Poisson
        client sampling): the blanket pair is then k-RR's at the real ``k'`` of
        :func:`~jaxshuffle.accountant.subsampling.subsampled_krr_k` (docs/math.md 13.11), a
        dominating pair of the subsampled round. ``n`` counts every user, taking part or not.

    Returns a symmetric :class:`RoundPLD` (pessimistic only: ``lower_*`` are None). Composing it
    gives certified upper bounds (docs/math.md section 13.9); it never mixes with another pair's
    profile (compose each pair and keep the smaller final bound).
    """
    from jaxshuffle.engine.two_count.pair import vr_pair, worst_case_beta
    from jaxshuffle.randomizers import grr

    for name, value in (("eps0", eps0), ("k", k), ("n", n)):
        if np.ndim(value) != 0:
            raise ValueError(f"{name}: blanket_round takes a scalar, got shape {np.shape(value)}")
    eps0, k, n = (np.float64(x) for x in (eps0, k, n))
    check(np.isfinite(eps0) & (eps0 > 0) & (eps0 <= 50), "eps0", "must lie in (0, 50]", value=eps0)
    check((k >= 2) & (k == np.floor(k)) & (k < 1e12), "k", "must be an integer >= 2", value=k)
    check((n >= 2) & (n == np.floor(n)) & (n <= 1e12), "n", "must be an integer in [2, 1e12]", value=n)
    check((np.float64(points) >= 2) & (np.float64(points) <= 1 << 16), "points", "must lie in [2, 65536]",
          value=np.float64(points))
    from jaxshuffle.accountant.subsampling import scalar_sample_rate, subsampled_krr_k

    g = scalar_sample_rate(sample_rate, "blanket_round")
    k_form = np.float64(subsampled_krr_k(eps0, k, g))  # k itself at g = 1
    if discretization is None:
        vr = grr(float(eps0), float(k))
        pair = vr_pair(vr.p, worst_case_beta(vr.p), vr.q)
        discretization = default_discretization(pair, n, int(rounds))
    check(np.float64(discretization) >= MIN_DISCRETIZATION, "discretization",
          f"must be at least {MIN_DISCRETIZATION}", value=np.float64(discretization))
    delta_ = float(discretization)
    # nearby eps0 and n (a calibration's probes, a sweep's axes) share programs: a program costs
    # tens of seconds to compile, a doubled plan seconds to run
    plan = shared_plan(plan_blanket(eps0, k_form, n, TAIL_DELTA), n, power_of_two)
    tail = blanket_epsilon(eps0, k_form, n, TAIL_DELTA, plan=plan, real_k=g < 1)
    eps_tail = float(tail.upper) if float(tail.upper) < eps0 else float(tail.lower)  # only places the grid
    j, padded = _profile_grid(float(eps0), eps_tail, delta_, int(points))
    upper = _profile_upper(float(eps0), float(k_form), float(n), padded, plan)[:j.size]
    source = "blanket pair (k-ary RR)" if g == 1 else f"blanket pair (k-ary RR, clients sampled at {g:g})"
    return _round_from_profile(j, upper, delta_, float(eps0), source)


def _profile_grid(eps_end: float, eps_tail: float, discretization: float, points: int):
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


def _round_from_profile(j: np.ndarray, upper: np.ndarray, discretization: float, eps_end: float,
                        source: str) -> RoundPLD:
    """The certified round PLD of a symmetric pair from upper profile values at ``j Delta`` (connect the dots)."""
    pos, neg, zero, inf = connect_the_dots(jnp.asarray(j, jnp.float64), jnp.float64(discretization),
                                           jnp.asarray(upper))
    pld = _to_discrete(j, pos, neg, zero, inf, discretization)
    # max_loss bounds the finite losses for rdp(); with mass at +inf the RDP bound is infinite
    max_loss = eps_end if pld.infinity_mass == 0 else math.inf
    return RoundPLD(pld, pld, None, None, certified=True, source=source, max_loss=max_loss)


@functools.partial(jax.jit, static_argnames=("plan",))
def _form_profile_program(w, a0, a1, v0, v1, n, eps, *, plan):
    from jaxshuffle.engine.matrix.search import form_divergence

    return jax.lax.map(lambda e: form_divergence(w, a0, a1, v0, v1, n, e, plan, True), eps, batch_size=EVAL_BATCH)


def three_count_round(p: float, r: float, g: float, n, *, discretization: float,
                      points: int = DEFAULT_POINTS) -> RoundPLD:
    """Certified round PLD of a round with clients sampled at rate ``g``, from its three-count pair.

    The three-count pair (:func:`~jaxshuffle.accountant.subsampling.three_count_forms`, docs/math.md
    13.11) dominates the sampled round of every single-message randomizer with ratio ``p`` and clone
    constant ``r`` (``r`` already rounded down). It is symmetric, so its PLD is built from its certified
    profile exactly as :func:`blanket_round` builds k-RR's (docs/math.md 13.9): upper profile values at
    points below ``j Delta`` from the matrix engine's certified form divergence, connected. ``h = 0`` from
    ``eps = log p`` on. Pessimistic only; composing it gives certified upper bounds.
    """
    from jaxshuffle.accountant.subsampling import three_count_forms
    from jaxshuffle.engine.matrix.search import plan_forms, search_forms

    n = float(n)
    delta_ = float(discretization)
    check(np.float64(delta_) >= MIN_DISCRETIZATION, "discretization", f"must be at least {MIN_DISCRETIZATION}",
          value=np.float64(delta_))
    forms = three_count_forms(float(p), float(r), float(g))
    eps_end = float(forms.eps_max[0])
    tail = search_forms(forms, n, TAIL_DELTA)
    eps_tail = float(tail.upper) if float(tail.upper) < eps_end else eps_end  # only places the grid
    j, padded = _profile_grid(eps_end, eps_tail, delta_, int(points))
    # one plan for every profile point (a point beyond its reach is inf, the safe side: the running minimum
    # of the profile then keeps the value before it)
    plan, _ = plan_forms(forms, n, TAIL_DELTA)
    rows = [jnp.asarray(x[0]) for x in (forms.w, forms.a0, forms.a1, forms.v0, forms.v1)]
    upper = np.asarray(_form_profile_program(*rows, jnp.float64(n), jnp.asarray(padded), plan=plan))[:j.size]
    return _round_from_profile(j, upper, delta_, eps_end, f"three-count pair (clients sampled at {g:g})")
