"""Certified epsilon of a two-count pair: vectorised bracketing search with implicit gradients.

For each point the search keeps a bracket ``[lower, upper]`` with the invariant

    D(lower) > delta       (so the true eps >= lower)
    D(upper) <= delta      (so the true eps <= upper)

certified from the band of :mod:`jaxshuffle.divergence` (truncation, rounding and
binomial-routine error all on the safe side) in one of two ways: at an evaluated point,
or through the convexity of ``D`` in ``t = e^eps`` (a hockey-stick divergence is a sup of
functions affine in ``t``). Below the root, the certified tangent of any evaluation
(``D(t') >= tangent_value + (t - t') tangent_slope``, ``t' <= t``) is above ``delta`` up to
where it crosses it; above, ``D`` lies under the chord of two evaluations' upper values
(or of one and ``D = 0`` at ``eps_max``). So one evaluation just above the root certifies
both ends. ``upper`` is therefore the certified epsilon of the pair and ``lower`` a
certified lower bound on it. Whether the pair's epsilon bounds the *mechanism* is the
pair's business (``pair.certified``): see :mod:`jaxshuffle.pair`.

The first point solves a Gaussian model of the pair (:func:`_gaussian_model_epsilon`);
then safeguarded Newton steps on ``log D(eps) - log delta`` (``dD/dt = -Q(region)`` comes
free with the divergence), aimed half a tolerance above the root, falling back to
bisection; every lane runs in one masked ``while_loop`` of at most ``max_iter`` iterations.

Differentiation: ``upper`` is differentiable with respect to the continuous pair fields
and ``delta`` through ``jax.lax.custom_root`` (implicit function theorem on
``log D(eps) = log delta``); the count ``n`` is discrete.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle import _programs
from jaxshuffle._bisect import bisect_jax
from jaxshuffle.engine._search import (  # Status, EpsilonBracket, lane_constant: re-exported
    CROSSING_NUDGE,
    EpsilonBracket,
    Move,
    SearchState,
    Status,
    band_probe,
    certified_search,
    implicit_upper,
    lane_constant,
    linear_newton,
    tangent_lower,
)
from jaxshuffle.engine.two_count.divergence import point_divergence, window_weights
from jaxshuffle.engine.two_count.pair import TwoCountPair, fields_valid
from jaxshuffle.engine.two_count.plan import (
    EPS_CAP,
    Plan,
    bucket_plans,
    check_batch,
    plan_epsilon,
    prepare_batch,
    run_buckets,
    window_start,
)


def _infinite_loss_mass(u, v, w, r0, r1, n):
    """Largest P-mass of outcomes with Q = 0 over the two directions (0 unless u or v is 0).

    With v = 0: if w = 0 every cell with b = 0 has Q = 0 (mass u (1-r1)^(n-1)), else only
    (n, 0) does (mass u r0^(n-1)). The other direction swaps r0 and r1.
    """
    N = n - 1.0

    def one(uu, vv, a0, a1):
        m = jnp.where(w == 0, uu * jnp.exp(N * jnp.log1p(-a1)), uu * jnp.exp(N * jnp.log(jnp.maximum(a0, 1e-300))))
        m = jnp.where((w > 0) & (a0 == 0) & (N > 0), 0.0, m)
        return jnp.where(vv == 0, m, 0.0)

    return jnp.maximum(jnp.maximum(one(u, v, r0, r1), one(u, v, r1, r0)),
                       jnp.maximum(one(v, u, r0, r1), one(v, u, r1, r0)))


def _convexity_bracket(lo, hi, x, d, delta, below, above, done):
    """Tighten ``[lo, hi]`` by the convexity of ``D`` in ``t = e^eps`` (no evaluation needed).

    Below: the certified tangent at ``x`` gives ``D(t') > delta`` for every
    ``t' < t - (delta - tangent_value) / tangent_slope``, so ``eps`` exceeds that point.
    Above: on ``[t_a, t_b]`` ``D`` lies under the chord through ``(t_a, up_a)`` and
    ``(t_b, up_b)`` (certified upper values, ``up_a > delta >= up_b``; ``D = 0`` at ``eps_max``),
    so ``D <= delta`` where the chord crosses ``delta``. Both points are nudged by 1e-14 relative to the safe
    side, far more than the few roundings between them and the exact crossings. ``below = (x_a, up_a)`` and
    ``above = (x_b, up_b)``: the evaluated points nearest the root from below and above, with their upper values.
    """
    (x_a, up_a), (x_b, up_b) = below, above
    lo_tan, use_tan = tangent_lower(x, d.tangent_value, d.tangent_slope, delta, lo, hi)
    lo = jnp.where(~done & use_tan, lo_tan, lo)
    t_a, t_b = jnp.exp(x_a), jnp.exp(x_b)
    frac = (up_a - delta) / jnp.where(up_a > up_b, up_a - up_b, 1.0)
    t_chord = (t_a + frac * (t_b - t_a)) * (1.0 + CROSSING_NUDGE)
    hi_chord = jnp.log(jnp.where(jnp.isfinite(t_chord), t_chord, 1.0)) * (1.0 + CROSSING_NUDGE)
    use_chord = (~done & (x_a >= 0) & jnp.isfinite(up_a) & jnp.isfinite(x_b) & (x_a < x_b) & (up_a > delta)
                 & (up_b <= delta) & (hi_chord > lo) & (hi_chord < hi))
    return lo, jnp.where(use_chord, hi_chord, hi)


def _gaussian_model_divergence(u, v, w, shift, eps):
    """``D_{e^eps}`` of the Gaussian model of the pair (heuristic, for the first guess only).

    The others' counts enter the likelihood ratio, to first order, through
    ``Z = X/r0 - Y/r1`` (``X, Y`` their deviations from the mean), ``Z ~ N(0, (n-1)(1/r0 + 1/r1))``;
    the victim moves it by about ``+-h``, ``h = (1/r0 + 1/r1)/2``. In units of its sd: P is
    ``u N(s,1) + v N(-s,1) + w N(0,1)`` and Q swaps ``u, v``; ``P > tQ`` where ``Y = e^{sz}`` exceeds
    the positive root of ``(u - tv) Y^2 + (1-t) w e^{s^2/2} Y + (v - tu) = 0`` (``u >= v``).
    """
    u, v = jnp.maximum(u, v), jnp.minimum(u, v)
    t = jnp.exp(eps)
    a, b, c = u - t * v, (1.0 - t) * w * jnp.exp(jnp.minimum(0.5 * shift**2, 700.0)), v - t * u
    root = (-b + jnp.sqrt(b * b - 4.0 * a * c)) / (2.0 * jnp.where(a > 0, a, 1.0))
    z = jnp.log(jnp.maximum(root, 1e-300)) / shift
    near, far, mid = jax.scipy.special.ndtr(-jnp.stack([z - shift, z + shift, z]))  # one ndtr: less to compile
    p_reg = u * near + v * far + w * mid
    q_reg = v * near + u * far + w * mid
    return jnp.where(a > 0, p_reg - t * q_reg, 0.0)


def _gaussian_model_epsilon(u, v, w, r0, r1, n, delta, eps_max):
    """Root of the Gaussian model's ``D = delta`` by bisection on ``log eps`` (a first guess; NaN if none)."""
    ok = (r0 > 0) & (r1 > 0) & (n > 1) & jnp.isfinite(eps_max)
    r0s, r1s = jnp.where(ok, r0, 0.5), jnp.where(ok, r1, 0.5)
    shift = 0.5 * jnp.sqrt((1.0 / r0s + 1.0 / r1s) / jnp.maximum(n - 1.0, 1.0))
    lo, hi = jnp.log(1e-9), jnp.log(jnp.where(ok, eps_max, 1.0))

    below = lambda x: ~(_gaussian_model_divergence(u, v, w, shift, jnp.exp(x)) > delta)  # noqa: E731
    lo, hi = bisect_jax(below, lo, hi, steps=40)
    return jnp.where(ok, jnp.exp(0.5 * (lo + hi)), jnp.nan)


def _point_search(u, v, w, r0, r1, n, delta, c_lo, *, plan: Plan, rtol: float, max_iter: int):
    """Bracketing search for one point (scalars); vmapped by :func:`epsilon_with_plan`.

    Size: the setup (``eps_max``, ``hi0``, the first guess) and the ``advance`` closure share the loop-carried
    state of one ``certified_search`` (bracket, chord ends, previous point, ambiguity count); the eight
    positional per-lane scalars are what ``jax.vmap`` maps in :func:`_brackets` (``plan``, ``rtol`` and
    ``max_iter`` static, bound by ``functools.partial``).
    """
    valid = (delta > 0) & (delta < 1) & (n >= 1) & (n == jnp.floor(n)) & jnp.isfinite(n) & fields_valid(u, v, w, r0, r1)
    safe = lambda x, d: jnp.where(valid, x, d)  # noqa: E731
    u, v, w, r0, r1 = safe(u, 0.5), safe(v, 0.5), safe(w, 0.0), safe(r0, 0.25), safe(r1, 0.25)
    n, delta = safe(n, 1.0), safe(delta, 0.5)
    W = window_weights(n, r0, r1, c_lo, plan)  # loop-invariant
    div = functools.partial(point_divergence, u, v, w, r0, r1, n, c_lo=c_lo, plan=plan, W=W)

    hi_ratio = jnp.maximum(u, v)
    lo_ratio = jnp.minimum(u, v)
    finite_max = lo_ratio > 0
    eps_max = jnp.where(finite_max, jnp.log(hi_ratio / jnp.where(finite_max, lo_ratio, 1.0)), jnp.inf)
    # D = 0 exactly at t = max(u/v, v/u); step past the rounding of log.
    eps_max = jnp.where(finite_max, eps_max * (1 + 4e-16) + 1e-300, jnp.inf)
    m_inf = _infinite_loss_mass(u, v, w, r0, r1, n)
    infinite = m_inf > delta * (1 + 1e-10)

    lo0 = 0.0  # eps >= 0: always a valid lower end
    hi0 = jnp.where(finite_max, eps_max, jnp.inf)
    # First point: the Gaussian model's root; where it has none, a cruder Gaussian heuristic.
    mu = jnp.maximum((n - 1.0) * (r0 + r1), 1.0)
    gauss = jnp.log1p(2.0 * jnp.abs(u - v) / jnp.maximum(u + v, 1e-300) * jnp.sqrt(2.0 * jnp.log(1.0 / delta) / mu))
    model = _gaussian_model_epsilon(u, v, w, r0, r1, n, delta, eps_max)
    gauss = jnp.where(jnp.isfinite(model), model, gauss)
    x_guess = jnp.where(finite_max, jnp.clip(gauss, 1e-12, 0.9 * eps_max), jnp.maximum(gauss, 1.0))

    status0 = jnp.where(infinite, Status.INFINITE, Status.MAX_ITER).astype(jnp.int8)
    status0 = jnp.where(valid, status0, jnp.int8(Status.INVALID))
    done0 = status0 != Status.MAX_ITER

    def advance(st: SearchState, d, lo, hi) -> Move:
        x, done = st.x, st.done
        n_amb, width1, width2, tried_zero, x_prev, log_d_prev, x_b, up_b, x_a, up_a = st.extra
        is_hi = d.upper <= delta
        is_lo = d.lower > delta
        ambiguous = ~is_hi & ~is_lo
        # The evaluated points nearest the root from above and below, with their upper values, for chords.
        b_new = ~done & is_hi & (x < x_b)
        x_b, up_b = jnp.where(b_new, x, x_b), jnp.where(b_new, d.upper, up_b)
        a_new = ~done & ~is_hi & (x > x_a)
        x_a, up_a = jnp.where(a_new, x, x_a), jnp.where(a_new, d.upper, up_a)
        lo, hi = _convexity_bracket(lo, hi, x, d, delta, (x_a, up_a), (x_b, up_b), done)
        # Newton on f(x) = log D(x) - log delta; f'(x) = -t Q(region)/D.
        t = jnp.exp(x)
        f = jnp.log(jnp.maximum(d.value, 1e-320)) - jnp.log(delta)
        fp = -t * d.q_mass / jnp.maximum(d.value, 1e-320)
        newton = x - f / jnp.where(fp < 0, fp, -1.0)
        finite_hi = jnp.isfinite(hi)
        width = jnp.where(finite_hi, hi - lo, jnp.inf)
        margin = 0.25 * rtol * jnp.where(finite_hi, hi, 1.0)
        usable = (fp < 0) & (d.value > 0) & (newton > lo) & (newton < hi)
        # Where that step leaves the bracket (log D flat: D ~ linear in t near t = max(u/v, v/u)),
        # Newton on D itself in t, which for a convex decreasing D approaches the root from below.
        newton_lin = linear_newton(t, d.value, d.q_mass, delta)
        usable_lin = (d.q_mass > 0) & (newton_lin > lo) & (newton_lin < hi)  # lo >= 0: the step's t is > 0
        # Which model (log D linear in eps, or D linear in t) would have predicted the previous point better?
        log_d = jnp.log(jnp.maximum(d.value, 1e-320))
        miss_log = jnp.abs(log_d + fp * (x_prev - x) - log_d_prev)
        miss_lin = jnp.abs(jnp.log(jnp.maximum(d.value + d.q_mass * (t - jnp.exp(x_prev)), 1e-320)) - log_d_prev)
        prefer_lin = usable_lin & (miss_lin < miss_log)  # False while there is no previous point (NaN)
        newton = jnp.where(usable & ~prefer_lin, newton, newton_lin)
        usable = usable | usable_lin
        # Aim just above the root: once Newton is accurate to better than the margin, that
        # point certifies the upper end and its tangent the lower end (_convexity_bracket).
        newton = newton + 2.0 * margin
        geometric = (lo > 0) & (hi > 8.0 * lo)
        bisect = jnp.where(geometric, jnp.sqrt(lo * hi), 0.5 * (lo + hi))
        bisect = jnp.where(finite_hi, bisect, jnp.minimum(jnp.maximum(2.0 * x, 1.0), EPS_CAP))
        # Newton inside the bracket, kept a margin away from its ends so that both ends get
        # certified in the endgame; outside the bracket, or after two steps that failed to
        # halve it, bisect (guaranteed progress).
        nxt = jnp.clip(newton, lo + margin, hi - margin)
        slow = (lo > 0) & (hi < hi0) & (width > 0.5 * width2)  # only once both ends are established
        nxt = jnp.where(usable & ~slow & (hi - lo > 2.0 * margin), nxt, bisect)
        # x inside the certified band of the root: probe a margin above, then below.
        ambiguous = ambiguous & (x > 0)  # at eps = 0 the lower end 0 needs no certificate
        n_amb = n_amb + ambiguous.astype(jnp.int32)
        nxt = jnp.where(ambiguous, band_probe(x, lo, hi, margin, d.upper, d.lower, t, d.q_mass), nxt)
        # Heading for 0 from a bracket still open at 0: test eps = 0 itself (status ZERO).
        tried_zero = tried_zero | (x == 0)
        to_zero = (lo == 0) & ~tried_zero & ~ambiguous & ((fp >= 0) | (newton <= 0.25 * x))
        nxt = jnp.where(to_zero, 0.0, nxt)
        zero = (x == 0) & is_hi
        converged = finite_hi & (width <= rtol * hi)
        gave_up = ~finite_hi & (x >= EPS_CAP)
        ambiguous = ambiguous & (n_amb >= 4)  # the band, not rtol, limits the bracket
        status = jnp.where(zero, Status.ZERO, jnp.where(converged, Status.CONVERGED,
                           jnp.where(ambiguous, Status.ERROR_LIMITED,
                                     jnp.where(gave_up, Status.UNBOUNDED, Status.MAX_ITER)))).astype(jnp.int8)
        return Move(lo, hi, nxt, status, zero | converged | ambiguous | gave_up,
                    (n_amb, width, width1, tried_zero, x, log_d, x_b, up_b, x_a, up_a))

    lane = functools.partial(lane_constant, valid)  # every carry starts per lane (lane_constant)
    extra0 = (lane(0, jnp.int32), lane(jnp.inf, jnp.float64), lane(jnp.inf, jnp.float64), lane(False, bool),
              lane(jnp.nan, jnp.float64), lane(jnp.nan, jnp.float64), hi0, jnp.where(finite_max, 0.0, jnp.inf),
              lane(-1.0, jnp.float64), lane(jnp.inf, jnp.float64))
    start = SearchState(lane(0, jnp.int32), lane(lo0, jnp.float64), hi0, x_guess, status0, done0, extra0)
    final = certified_search(div, advance, start, delta, max_iter=max_iter)
    it, lo, hi, status = final.it, final.lo, final.hi, final.status
    zero = status == Status.ZERO
    lower = jnp.where(zero, 0.0, jnp.where(infinite, jnp.inf, lo))
    upper = jnp.where(zero, 0.0, jnp.where(infinite, jnp.inf, hi))
    lower = jnp.where(valid, lower, 0.0)
    upper = jnp.where(valid, upper, jnp.inf)
    return lower, upper, status, it


def _log_divergence_root_eq(eps, u, v, w, r0, r1, n, delta, c_lo, plan):
    """``log D(eps) - log delta`` of one lane, the root equation of the implicit gradient.

    Size: a per-lane scalar function that :func:`epsilon_with_plan` vmaps over ``eps`` and the flat arrays
    (``jax.vmap`` maps positional per-lane arguments); ``plan`` is static.
    """
    d = point_divergence(u, v, w, r0, r1, n, eps, c_lo, plan)
    return jnp.log(jnp.maximum(d.value, 1e-320)) - jnp.log(delta)


def _brackets(u, v, w, r0, r1, n, delta, c_lo, *, plan: Plan, rtol: float, max_iter: int):
    """The search over a flat batch, without gradients: ``(lower, upper, status, iterations)``.

    Size: the eight flat per-lane arrays are positional because ``jax.vmap`` maps them into
    :func:`_point_search` and :func:`jaxshuffle._programs.run` calls it on the list of flat arrays; ``plan``,
    ``rtol`` and ``max_iter`` are the program's static keys.
    """
    search = functools.partial(_point_search, plan=plan, rtol=rtol, max_iter=max_iter)
    return jax.vmap(search)(u, v, w, r0, r1, n, delta, c_lo)


@functools.partial(jax.jit, static_argnames=("plan", "rtol", "max_iter"))
def epsilon_with_plan(pair_arrays, n, delta, c_lo, plan: Plan, rtol: float = 1e-6,
                      max_iter: int = 60) -> EpsilonBracket:
    """Jittable core over a flat batch (see :func:`epsilon`); ``plan`` and ``rtol`` static.

    ``pair_arrays = (u, v, w, r0, r1)``, ``n``, ``delta``, ``c_lo``: float64 arrays of shape
    (B,). Invalid points (under tracing nothing raises) come back as ``lower = 0``,
    ``upper = inf``, ``status = INVALID``. ``upper`` carries implicit gradients.
    """
    u, v, w, r0, r1 = pair_arrays
    sg = jax.lax.stop_gradient
    lower, upper, status, it = _brackets(sg(u), sg(v), sg(w), sg(r0), sg(r1), sg(n), sg(delta), c_lo,
                                         plan=plan, rtol=rtol, max_iter=max_iter)

    def root_eq(eps):
        g = functools.partial(_log_divergence_root_eq, plan=plan)
        return jax.vmap(g)(eps, u, v, w, r0, r1, n, delta, c_lo)

    upper = implicit_upper(root_eq, upper, status)
    return EpsilonBracket(lower, upper, status, it)


def epsilon(pair: TwoCountPair, n, delta, *, plan: Plan | None = None, rtol: float = 1e-6,
            max_iter: int = 60, memory: float | None = None) -> EpsilonBracket:
    """Certified epsilon bracket of the pair for ``n`` users at ``delta``.

    Certified: ``hockey_stick(lower) > delta >= hockey_stick(upper)``
    after every float error and truncation is accounted for, so ``lower <= eps <= upper``
    where ``eps = min{e >= 0 : max(D_{e^e}(P||Q), D_{e^e}(Q||P)) <= delta}`` (the search and its
    certificates: docs/math.md section 5). Typically ``upper - lower <= rtol * upper``.

    ``upper`` is differentiable (``jax.grad``/``jvp``) in the pair's continuous
    parameters and ``delta``.

    Without ``plan`` the static shapes are planned here from concrete values, points are
    grouped into a few programs and evaluated in chunks within ``memory`` bytes (default
    :data:`jaxshuffle.plan.DEFAULT_MEMORY_BYTES`); bad input raises ValueError naming the
    parameter. With ``plan`` (from :func:`jaxshuffle.plan_for`) the call is one program and
    works inside ``jit``: nothing raises there, an invalid point gets ``status = INVALID``,
    ``lower = 0``, ``upper = inf``; a point the plan does not cover stays certified (wider
    band, or no claim), see :mod:`jaxshuffle.plan`.

    Args:
      pair: the :class:`~jaxshuffle.pair.TwoCountPair` (any batch shape).
      n: number of users, a finite integer >= 1, broadcast against the pair and ``delta``.
      delta: target delta in (0, 1).
      plan: a :class:`~jaxshuffle.plan.Plan` from :func:`jaxshuffle.plan_for`, for calls inside ``jit``;
        ``None`` (default) plans here from concrete values.
      rtol: relative width of the bracket, in (0, 1).
      max_iter: iteration cap of the search (``status = MAX_ITER`` where it is reached; still certified).
      memory: bytes a batched call may hold (default :data:`jaxshuffle.plan.DEFAULT_MEMORY_BYTES`).

    Returns:
      The bracket, an :class:`EpsilonBracket` with ``lower``, ``upper`` (float64 arrays of the broadcast shape
        of the pair, ``n`` and ``delta``), ``status`` (:class:`Status`) and the iteration count. ``upper`` is
        the pair's certified upper bound (errs high; a bound on the mechanism only where ``pair.certified``);
        ``lower`` is a certified lower bound (errs low).

    Raises:
      ValueError: naming the parameter (``rtol``, ``n``, ``delta``, a pair field) for bad input
        (without ``plan``; under ``jit`` nothing raises).
      TypeError: naming ``pair`` or ``plan``, for an object of the wrong kind.

    Example::

        plan = js.plan_for(js.stronger_clone_pair(jnp.array([0.5, 2.0])), 1e4, 1e-6)
        f = jax.jit(lambda e: js.epsilon(js.stronger_clone_pair(e), 1e4, 1e-6, plan=plan).upper)
        jax.grad(f)(1.0)
    """
    if not 0 < rtol < 1:
        raise ValueError(f"rtol: must lie in (0, 1), got {rtol!r}")
    if plan is not None:
        return _epsilon_planned(pair, n, delta, plan, rtol, max_iter)
    flat, values, shape = prepare_batch(pair, n, delta, "delta", "epsilon")
    u, v, w, r0, r1, n_, d_ = values
    check_batch((u, v, w, r0, r1), n_, {"delta": (d_, lambda d: (d > 0) & (d < 1), "must lie in (0, 1)")})
    if n_.size == 0:
        empty = jnp.zeros(shape)
        return EpsilonBracket(empty, empty, jnp.zeros(shape, jnp.int8), jnp.zeros(shape, jnp.int32))
    L, c_lo, M = plan_epsilon(u, v, w, r0, r1, n_, d_)
    quick = n_.size <= _programs.QUICK_MAX_POINTS  # a call of a few points: the quickly compiled program

    def kernel(plan, *arrays):
        if any(isinstance(a, jax.core.Tracer) for a in arrays):  # under grad/jvp: with the implicit gradients
            return epsilon_with_plan(tuple(arrays[:5]), *arrays[5:], plan, rtol=rtol, max_iter=max_iter)
        # Concrete values: the search alone, an exported program. custom_root's forward value is the
        # search's upper, so the numbers are the same; tracing its root equation (a second copy of the
        # divergence) was a third of a cold call's tracing.
        flat_search = functools.partial(_brackets, plan=plan, rtol=rtol, max_iter=max_iter)
        return EpsilonBracket(*_programs.run("epsilon-search", flat_search, (plan, rtol, max_iter), list(arrays),
                                             quick=quick))

    return run_buckets(kernel, bucket_plans(L, M, r0, r1, n_), [*flat, c_lo], shape, memory=memory)


def _epsilon_planned(pair: TwoCountPair, n, delta, plan: Plan, rtol: float, max_iter: int) -> EpsilonBracket:
    """:func:`epsilon` with a given static plan: traceable, one program for the whole batch."""
    if not isinstance(plan, Plan):
        raise TypeError(f"plan: must be a jaxshuffle.plan.Plan (from jaxshuffle.plan_for), got {type(plan).__name__}")
    if not isinstance(pair, TwoCountPair):
        raise TypeError(f"pair: must be a TwoCountPair, got {type(pair).__name__}")
    n, delta = jnp.asarray(n, jnp.float64), jnp.asarray(delta, jnp.float64)
    shape = jnp.broadcast_shapes(pair.shape, jnp.shape(n), jnp.shape(delta))
    u, v, w, r0, r1, n_, d_ = (jnp.broadcast_to(x, shape).ravel() for x in (*pair.arrays(), n, delta))
    c_lo = window_start(n_, jnp.maximum(r0, 0.0) + jnp.maximum(r1, 0.0), plan.window, jnp)
    c_lo = jnp.where(jnp.isfinite(c_lo), c_lo, 0.0)
    res = epsilon_with_plan((u, v, w, r0, r1), n_, d_, c_lo, plan, rtol=rtol, max_iter=max_iter)
    return EpsilonBracket(*(x.reshape(shape) for x in res))


# ----------------------------------------------------------------------------------------
# The paper's Algorithm 1, as printed: a reproduction mode.


@functools.partial(jax.jit, static_argnames=("plan", "steps"))
def _algorithm1_with_plan(pair_arrays, n, delta, c_lo, plan: Plan, steps: int) -> jax.Array:
    def one(u, v, w, r0, r1, n, delta, c_lo):
        W = window_weights(n, r0, r1, c_lo, plan)
        hi = jnp.log(jnp.maximum(u, v) / jnp.maximum(jnp.minimum(u, v), 1e-300))
        hi = jnp.minimum(hi, EPS_CAP)

        def meets_delta(eps):
            return point_divergence(u, v, w, r0, r1, n, eps, c_lo, plan, W=W).upper <= delta

        return bisect_jax(meets_delta, jnp.zeros_like(hi), hi, steps=steps)[1]

    u, v, w, r0, r1 = pair_arrays
    return jax.vmap(one)(u, v, w, r0, r1, n, delta, c_lo)


def algorithm1(pair: TwoCountPair, n, delta, *, steps: int = 20) -> jax.Array:
    """The variation-ratio paper's Algorithm 1 as printed: ``steps`` halvings of ``[0, log p]``, returning eps_H.

    ``eps_L = 0, eps_H = log max(u/v, v/u)``; each step halves the bracket at its midpoint,
    keeping ``eps_H`` where ``D(eps) <= delta``. The paper's Table 5 prints this with
    ``steps = 20`` and ``10`` (``benchmarks/table5.py`` shows both columns). Here the test
    ``D(eps) <= delta`` uses the certified upper end of the divergence band, so the returned
    ``eps_H`` is a certified upper bound on the pair's epsilon, coarser than :func:`epsilon` by up
    to one grid step ``log(p) / 2^steps`` (the value at ``steps = 10`` sits up to ``log(p)/1024``
    above the true epsilon, which is what the paper's T = 10 column shows). Eager only.
    """
    if not (isinstance(steps, int) and 1 <= steps <= 200):
        raise ValueError(f"steps: must be an integer in [1, 200], got {steps!r}")
    flat, values, shape = prepare_batch(pair, n, delta, "delta", "algorithm1")
    u, v, w, r0, r1, n_, d_ = values
    check_batch((u, v, w, r0, r1), n_, {"delta": (d_, lambda d: (d > 0) & (d < 1), "must lie in (0, 1)")})
    L, c_lo, M = plan_epsilon(u, v, w, r0, r1, n_, d_)
    out = np.zeros(n_.size)
    for plan, ix in bucket_plans(L, M, r0, r1, n_).items():
        args = [jnp.asarray(np.asarray(x)[ix]) for x in (u, v, w, r0, r1)]
        out[ix] = np.asarray(_algorithm1_with_plan(tuple(args), jnp.asarray(n_[ix]), jnp.asarray(d_[ix]),
                                                   jnp.asarray(c_lo[ix]), plan, steps))
    return jnp.asarray(out.reshape(shape))
