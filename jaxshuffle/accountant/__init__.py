"""Certified privacy accountant for a shuffled local randomizer: :func:`amplify`.

Setting: ``n`` users each apply a local randomizer ``R`` with variation-ratio parameters
``(p, beta, q)`` (:class:`~jaxshuffle.randomizers.VRParams`) and a shuffler releases the
multiset of messages; neighbouring datasets differ in one user's input (replace-one). For a
multi-message protocol (Table 4) each user also sends ``m = blanket_per_user``
input-independent blanket messages.

Which number is on which side
-----------------------------
``upper`` (certified upper bound) comes **only** from sound pairs (``shared/MATH.md`` section 5);
the paper's Theorem 4.7 pair is not a valid upper bound when ``w = 1 - (p+1) alpha > 0``.
With ``alpha = beta/(p-1)``, ``t = e^eps`` and ``D_t`` the hockey-stick divergence of the
two-count pair (MATH.md section 1; ``jaxshuffle.search.epsilon``), ``upper`` is the smallest of

1. the worst-case-beta pair ``vr_pair(p, (p-1)/(p+1), q)`` (``w = 0``; for ``q = p`` the
   stronger clone of Feldman, McMillan, Talwar 2023; for ``p = inf`` the Table 4 pair
   ``u = 1, v = 0, r = 1/q``)::

       delta >= D_t(P_wc || Q_wc),   (u, v, w, r) = (p/(p+1), 1/(p+1), 0, p/((p+1) q));

2. the ``(u+v)``-scaled pair (MATH.md section 5; only where ``w > 0``). Decompose
   ``R(x^0) = p alpha mu_0 + alpha mu_1 + w mu_c``, ``R(x^1) = alpha mu_0 + p alpha mu_1 + w mu_c``
   with ``mu_0, mu_1`` on the disjoint sets ``{R(x^0) > R(x^1)}``, ``{R(x^1) > R(x^0)}``; every
   other message contains ``r = alpha p/q`` of each of ``mu_0, mu_1``. Conditioning on the
   victim's component and joint convexity of ``D_t`` (the ``mu_c`` branch gives identical
   laws) give::

       delta >= (u + v) D_t(clone),  clone: (u, v, w) -> (p/(p+1), 1/(p+1), 0), same r0 = r1 = alpha p/q,

   i.e. the clone's epsilon at ``delta/(u+v)`` (``u + v = (p+1) alpha``; ``= beta`` at
   ``p = inf``);
3. ``0`` where ``delta >= beta``: the shuffled outputs are a post-processing of the victim's
   message, so ``D_1 <= TV(R(x^0), R(x^1)) <= beta``.

Soundness scope. (2) is proved above for a pair of victim inputs at its *own* total
variation ``TV = (p-1) alpha``, and (1) likewise for a pair at the worst-case TV (``w = 0``
exactly); for pairs with smaller TV, (1) rests on the stronger-clone theorem (FMT'23, stated
for ``q = p``). Covering a smaller-TV pair by (2) evaluated at ``beta = max TV`` needs
``g(a) = (p+1) a D_t(clone, r = p a/q)`` not to exceed ``min(g(alpha), D_t(P_wc||Q_wc))`` on
``a < alpha``: ``g`` is *not* monotone in ``a`` (it peaks near ``a ~ q/(n p)``), but it is
unimodal on every grid tested (``tests/test_accountant.py``), and unimodality suffices (if
``g(alpha)`` is below the worst-case value, ``alpha`` lies on ``g``'s increasing branch).
Empirically (exact enumeration, n = 2, 3, 5, random 3-4-input mechanisms): no violation of
``exact <= min(1, 2)`` in 1700 cases with pair TVs below beta and 1488 cases with ``q > p``
(largest exact/bound 0.99998). Because that covering step is tested, not proven, (2) is
**opt-in**: ``scaled_variant=True`` adds it, and the caller takes responsibility for the
mechanism (it is proven when every pair of inputs has total variation exactly ``beta``,
e.g. k-ary randomized response). By default ``upper`` uses (1) and (3) only.

``lower`` (numerical lower bound): the Theorem 5.1 pair ``vr_pair(p0, beta, q0=, q1=)`` of
the given :class:`~jaxshuffle.randomizers.LowerParams` (others all holding ``x*``), and
always also the choice ``x* = x^0`` (``q0 = 1, q1 = p0``, valid for any mechanism with
``P0(Y0) = P1(Y1)``); the lower end of each certified bracket, the largest taken. ``0``
(``has_lower = False``) without lower parameters.

``paper``: the paper's Theorem 4.7 value ``eps(vr_pair(p, beta, q))`` for the randomizer's
own ``beta`` (upper end of its bracket). ``paper_certified`` is True only where ``w = 0``
(then ``paper`` equals the worst-case pair's value); elsewhere it is reported for
comparison, never as a guarantee (counterexample: n = 2, 3-ary RR, eps0 = 1, delta = 0.01:
exact 0.969408 > paper 0.914553).

Messages: the pair engine's "number of users" is ``n_blanket + 1`` with
``n_blanket = VRParams.n_blanket(n)``: ``n - 1`` other users' messages (single message), or
``n m`` blanket messages of all users, the victim included (multi-message).
"""

from __future__ import annotations

import enum
from typing import Callable, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import broadcast_shapes_or_raise, check, f64, require_x64
from jaxshuffle.pair import TwoCountPair, vr_pair
from jaxshuffle.randomizers import CATALOG, LowerParams, VRParams
from jaxshuffle.search import Status, epsilon

__all__ = ["AmplificationReport", "UpperSource", "amplify",
           "Calibration", "CalibrationStatus", "calibrate_eps0", "calibrate_n",
           "JOB_ROLES", "PairJob", "PointInfo", "amplification_jobs", "combine_amplification"]


class UpperSource:
    """Codes of :attr:`AmplificationReport.upper_source` (which sound bound gave ``upper``)."""

    WORST_CASE = 0  #: worst-case-beta pair vr_pair(p, (p-1)/(p+1), q) (w = 0)
    SCALED = 1  #: (u+v)-scaled clone pair at delta/(u+v) (MATH.md section 5)
    TV = 2  #: delta >= beta: eps = 0


class AmplificationReport(NamedTuple):
    """Result of :func:`amplify` (a pytree of arrays, all of the broadcast shape).

    Attributes:
      upper: certified upper bound on the shuffled mechanism's epsilon (float64).
      worst_case: certified epsilon of the worst-case-beta pair alone (``>= upper``): the
        bound for *any* randomizer with this ``p`` and ``q``.
      lower: numerical lower bound (Theorem 5.1 pair; ``0`` where ``has_lower`` is False).
      paper: the paper's Theorem 4.7 value for the randomizer's own beta (NOT a guarantee
        unless ``paper_certified``).
      certified: True where ``upper`` is a sound upper bound (every valid point).
      paper_certified: True where the paper's pair has ``w = 0`` (then it is sound).
      has_lower: True where ``lower`` comes from a Theorem 5.1 pair.
      upper_source: :class:`UpperSource` code (int8).
      status: :class:`~jaxshuffle.search.Status` of the search behind ``upper`` (int8).
      status_lower: status of the best lower-bound search (``ZERO`` where none).
      status_paper: status of the paper-value search.
    """

    upper: jax.Array
    worst_case: jax.Array
    lower: jax.Array
    paper: jax.Array
    certified: jax.Array
    paper_certified: jax.Array
    has_lower: jax.Array
    upper_source: jax.Array
    status: jax.Array
    status_lower: jax.Array
    status_paper: jax.Array


def _worst_beta(p):
    return jnp.where(jnp.isinf(p), 1.0, (p - 1.0) / jnp.where(jnp.isinf(p), 1.0, p + 1.0))


def _clone_fields(p):
    """(u, v) of the w = 0 clone with ratio p: (p/(p+1), 1/(p+1)); (1, 0) at p = inf."""
    inf = jnp.isinf(p)
    return jnp.where(inf, 1.0, p / jnp.where(inf, 1.0, p + 1.0)), jnp.where(inf, 0.0, 1.0 / (p + 1.0))


def _as_lower_list(lower_params) -> list[LowerParams]:
    if lower_params is None:
        return []
    if isinstance(lower_params, LowerParams):
        return [lower_params]
    out = list(lower_params)
    for lp in out:
        if not isinstance(lp, LowerParams):
            raise ValueError("lower_params: must be a LowerParams or a sequence of them")
    return out


def amplify(randomizer: VRParams, n, delta, *,
            lower_params: LowerParams | Sequence[LowerParams] | None = None,
            rtol: float = 1e-6, scaled_variant: bool = False) -> AmplificationReport:
    """Certified amplified epsilon of a shuffled randomizer, with a lower bound and the paper's value.

    Args:
      randomizer: variation-ratio parameters (e.g. ``jaxshuffle.randomizers.grr(1.0, 3)``);
        any batch shape.
      n: number of users (integer >= 1), broadcast against the randomizer and ``delta``.
      delta: target delta in (0, 1).
      lower_params: Theorem 5.1 parameters (``*_lower`` functions of the catalog), or a
        sequence of candidates; single-message randomizers only.
      rtol: relative width of every epsilon bracket.
      scaled_variant: also use the (u+v)-scaled pair in ``upper`` (opt-in: proven only when
        every pair of inputs has total variation exactly beta; see the module docstring).

    Returns:
      :class:`AmplificationReport`. ``upper`` = min(worst-case pair, scaled pair, 0 if
      delta >= beta) -- certified; ``lower`` <= the mechanism's epsilon for the dataset of
      the lower pair; ``paper`` = Theorem 4.7 at the randomizer's beta (labelled by
      ``paper_certified``). Everything is evaluated in one batched engine call (eager only:
      the engine plans static windows from concrete values).

    Raises:
      ValueError naming the parameter for invalid input (n not an integer >= 1, delta
      outside (0, 1), parameters outside their ranges, lower bounds for a multi-message
      randomizer).
    """
    return _amplify(randomizer, n, delta, _as_lower_list(lower_params), rtol, scaled_variant, True)


# --------------------------------------------------------------------------------------
# The rules of amplify, in two halves that a caller may run its own searches between
# (jaxshuffle.sweeps deduplicates the searches of a whole grid and controls their shapes).
# --------------------------------------------------------------------------------------

#: Roles of the epsilon searches behind a report (:attr:`PairJob.role`), see :func:`amplification_jobs`.
JOB_ROLES = ("worst_case", "scaled", "paper", "lower", "lower_x0")


class PairJob(NamedTuple):
    """One epsilon search behind an :class:`AmplificationReport` (from :func:`amplification_jobs`).

    Attributes:
      role: one of :data:`JOB_ROLES`: ``worst_case`` (pair 1 of the module docstring),
        ``scaled`` (pair 2), ``paper`` (Theorem 4.7 pair), ``lower`` / ``lower_x0`` (the
        Theorem 5.1 pair with the given ``x*``, and with ``x* = x^0``; one of each per
        lower-parameter candidate, in that order).
      pair: the two-count pair, broadcast to the points' shape.
      delta: the delta to search it at (``delta/(u+v)`` for the scaled pair where used).
      needed: bool array: :func:`combine_amplification` reads this search's result only where
        True (elsewhere any value will do, so a caller may skip those points).
    """

    role: str
    pair: TwoCountPair
    delta: jax.Array
    needed: jax.Array


class PointInfo(NamedTuple):
    """Per-point quantities of :func:`amplification_jobs` that :func:`combine_amplification` needs.

    Arrays of the broadcast shape: the randomizer's ``p``, ``beta``, ``q``; ``delta``;
    ``n_engine`` (the pair engine's count ``n_blanket + 1``, shared by every job); ``uv``
    (``u + v`` of the paper's pair); ``use_scaled`` (the scaled pair takes part in ``upper``);
    ``paper_certified`` (the paper's pair has ``w = 0``); ``has_lower`` (lower-bound jobs exist).
    """

    p: jax.Array
    beta: jax.Array
    q: jax.Array
    delta: jax.Array
    n_engine: jax.Array
    uv: jax.Array
    use_scaled: jax.Array
    paper_certified: jax.Array
    has_lower: jax.Array


def _check_randomizer(randomizer) -> None:
    require_x64()
    if not isinstance(randomizer, VRParams):
        raise ValueError("randomizer: must be a VRParams (e.g. jaxshuffle.randomizers.grr(eps0, k))")


def amplification_jobs(randomizer: VRParams, n, delta,
                       lower_params: LowerParams | Sequence[LowerParams] | None = None, *,
                       scaled_variant: bool = False, with_paper: bool = True) -> tuple[PointInfo, list[PairJob]]:
    """The epsilon searches (jobs) behind :func:`amplify`, and the per-point quantities to combine them.

    Arguments as :func:`amplify` (``with_paper=False`` leaves out the paper's pair: the report's
    ``paper`` is then NaN with status ``INVALID``). Validates the input (ValueError naming the
    parameter). Returns ``(info, jobs)``: search each ``job.pair`` for ``n = info.n_engine``
    at ``job.delta`` (:func:`jaxshuffle.search.epsilon` or the same engine batched another way,
    at least where ``job.needed``) and pass the results to :func:`combine_amplification`.
    ``amplify(...)`` is exactly ``combine_amplification(info, roles, lower, upper, status)``
    with the brackets of one batched :func:`~jaxshuffle.search.epsilon` call over every job.
    """
    return _jobs(randomizer, n, delta, _as_lower_list(lower_params), scaled_variant, with_paper)


def _jobs(randomizer: VRParams, n, delta, lowers: list[LowerParams], scaled_variant: bool,
          with_paper: bool) -> tuple[PointInfo, list[PairJob]]:
    _check_randomizer(randomizer)
    if lowers and randomizer.blanket_per_user is not None:
        raise ValueError("lower_params: Theorem 5.1 lower bounds are for single-message randomizers only")
    p, beta, q = f64(randomizer.p), f64(randomizer.beta), f64(randomizer.q)
    n, delta = f64(n), f64(delta)
    arrays = dict(p=p, beta=beta, q=q, n=n, delta=delta)
    if randomizer.blanket_per_user is not None:
        arrays["blanket_per_user"] = f64(randomizer.blanket_per_user)
    for i, lp in enumerate(lowers):
        for name in ("p0", "beta", "q0", "q1"):
            arrays[f"lower_params[{i}].{name}"] = f64(getattr(lp, name))
    shape = broadcast_shapes_or_raise(**arrays)
    n_np, d_np = np.asarray(n), np.asarray(delta)
    check((n_np >= 1) & (n_np == np.floor(n_np)) & np.isfinite(n_np), "n", "must be an integer >= 1 (NaN is not)")
    check((d_np > 0) & (d_np < 1), "delta", "must lie in (0, 1) (NaN is not)")
    if randomizer.blanket_per_user is not None:
        m = np.asarray(arrays["blanket_per_user"])
        check((m >= 1) & (m == np.floor(m)) & np.isfinite(m), "blanket_per_user", "must be an integer >= 1")

    b = lambda x: jnp.broadcast_to(x, shape)  # noqa: E731
    p, beta, q, delta = b(p), b(beta), b(q), b(delta)
    n_engine = b(randomizer.n_blanket(n) + 1.0)

    paper_pair = vr_pair(p, beta, q)  # validates p, beta, q (ValueError naming the parameter)
    wc_pair = vr_pair(p, _worst_beta(p), q)
    uv = paper_pair.u + paper_pair.v  # (p+1) alpha; beta at p = inf
    cu, cv = _clone_fields(p)
    scaled_pair = TwoCountPair(cu, cv, jnp.zeros_like(cu), paper_pair.r0, paper_pair.r1)
    safe_uv = jnp.where(uv > 0, uv, 1.0)
    use_scaled = scaled_variant & (paper_pair.w > 0) & (uv > 0) & (delta < uv)
    delta_scaled = jnp.where(use_scaled, delta / safe_uv, delta)

    everywhere = jnp.ones(shape, dtype=bool)
    jobs = [PairJob("worst_case", wc_pair, delta, everywhere), PairJob("scaled", scaled_pair, delta_scaled, use_scaled)]
    if with_paper:
        jobs.append(PairJob("paper", paper_pair, delta, everywhere))
    for lp in lowers:
        p0, lb = b(f64(lp.p0)), b(f64(lp.beta))
        jobs.append(PairJob("lower", vr_pair(p0, lb, q0=b(f64(lp.q0)), q1=b(f64(lp.q1))), delta, everywhere))
        jobs.append(PairJob("lower_x0", vr_pair(p0, lb, q0=jnp.ones(shape), q1=p0), delta, everywhere))  # x* = x^0
    info = PointInfo(p=p, beta=beta, q=q, delta=delta, n_engine=n_engine, uv=uv, use_scaled=use_scaled,
                     paper_certified=b(paper_pair.certified), has_lower=jnp.full(shape, bool(lowers)))
    return info, jobs


def combine_amplification(info: PointInfo, roles: Sequence[str], lower, upper, status, *,
                          xp=jnp) -> AmplificationReport:
    """The :class:`AmplificationReport` from the searches of :func:`amplification_jobs`.

    ``roles`` are the jobs' roles, in order; ``lower``, ``upper``, ``status`` their epsilon
    brackets and statuses (stacked arrays of shape ``(len(roles), *shape)`` or sequences of
    arrays), only read where the job is ``needed``. ``xp`` is the array module of the
    computation (``jax.numpy``, differentiable, as :func:`amplify` uses it; or ``numpy``):
    the combination only selects values, so both give the same numbers.
    """
    roles = list(roles)
    wc, sc = roles.index("worst_case"), roles.index("scaled")
    uv, delta, beta = info.uv, info.delta, info.beta
    shape = xp.shape(uv)
    eps_wc, eps_sc = upper[wc], xp.where(info.use_scaled, upper[sc], xp.inf)
    eps_sc = xp.where(uv == 0, 0.0, eps_sc)  # identical victim laws: eps = 0
    trivial = delta >= beta  # D_1(shuffled) <= TV(victim) <= beta
    source = xp.where(trivial, UpperSource.TV, xp.where(eps_sc < eps_wc, UpperSource.SCALED,
                                                         UpperSource.WORST_CASE)).astype(xp.int8)
    upper_eps = xp.where(trivial, 0.0, xp.minimum(eps_wc, eps_sc))
    status_sc = xp.where(uv == 0, xp.int8(Status.ZERO), status[sc])
    status_up = xp.where(source == UpperSource.TV, xp.int8(Status.ZERO),
                         xp.where(source == UpperSource.SCALED, status_sc, status[wc])).astype(xp.int8)

    low_jobs = [i for i, r in enumerate(roles) if r in ("lower", "lower_x0")]
    if low_jobs:
        lows = xp.stack([lower[i] for i in low_jobs])
        best = xp.argmax(lows, axis=0)
        lower_eps = xp.max(lows, axis=0)
        status_lower = xp.take_along_axis(xp.stack([status[i] for i in low_jobs]), best[None], axis=0)[0]
    else:
        lower_eps = xp.zeros(shape)
        status_lower = xp.full(shape, Status.ZERO, dtype=xp.int8)
    if "paper" in roles:
        paper, status_paper = upper[roles.index("paper")], status[roles.index("paper")]
    else:
        paper, status_paper = xp.full(shape, xp.nan), xp.full(shape, Status.INVALID, dtype=xp.int8)
    return AmplificationReport(
        upper=upper_eps,
        worst_case=eps_wc,
        lower=lower_eps,
        paper=paper,
        certified=xp.ones(shape, dtype=bool),
        paper_certified=info.paper_certified,
        has_lower=info.has_lower,
        upper_source=source,
        status=status_up,
        status_lower=status_lower,
        status_paper=status_paper,
    )


def _amplify(randomizer: VRParams, n, delta, lowers: list[LowerParams], rtol: float,
             scaled_variant: bool, with_paper: bool) -> AmplificationReport:
    _check_randomizer(randomizer)
    if not 0 < rtol < 1:
        raise ValueError("rtol: must lie in (0, 1)")
    info, jobs = _jobs(randomizer, n, delta, lowers, scaled_variant, with_paper)
    shape = jnp.shape(info.uv)
    stacked = TwoCountPair(*(jnp.stack([jnp.broadcast_to(getattr(j.pair, f), shape) for j in jobs])
                             for f in ("u", "v", "w", "r0", "r1")))
    res = epsilon(stacked, jnp.broadcast_to(info.n_engine, (len(jobs), *shape)),
                  jnp.stack([j.delta for j in jobs]), rtol=rtol)
    return combine_amplification(info, [j.role for j in jobs], res.lower, res.upper, res.status)


# --------------------------------------------------------------------------------------
# Inverse calibration (certified: the answer is a verified point, never past the target)
# --------------------------------------------------------------------------------------

class CalibrationStatus(enum.IntEnum):
    """Per-point outcome of :func:`calibrate_eps0` / :func:`calibrate_n` (int8 array)."""

    CONVERGED = 0  #: ``value`` feasible, ``over`` infeasible, both verified, and they are adjacent
    CAPPED = 1  #: still feasible at ``eps0_max`` (calibrate_eps0): ``value = eps0_max``, ``over = inf``
    UNATTAINABLE = 2  #: infeasible at ``n_max`` (calibrate_n): ``value = inf``, ``over = n_max``
    MAX_ITER = 3  #: probe limit reached; ``value`` is still feasible, only the bracket is wider


class Calibration(NamedTuple):
    """Result of a calibration: float64 arrays of the broadcast shape.

    Attributes:
      value: the answer -- the largest eps0 (:func:`calibrate_eps0`) or smallest n
        (:func:`calibrate_n`) found whose certified amplified epsilon is ``<= target``.
      over: the verified infeasible neighbour (certified upper ``> target``): an eps0 with
        ``over - value <= rtol * over`` (:func:`calibrate_eps0`), or ``value - 1``
        (:func:`calibrate_n`).
      upper: the certified amplified epsilon at ``value`` (``<= target``).
      status: :class:`CalibrationStatus` (int8).
      probes: number of batched :func:`amplify` evaluations used (an int).
    """

    value: jax.Array
    over: jax.Array
    upper: jax.Array
    status: jax.Array
    probes: int


def _catalog_entry(name: str):
    if name not in CATALOG:
        raise ValueError(f"randomizer: unknown name {name!r}; choose one of {', '.join(sorted(CATALOG))}")
    return CATALOG[name]


def _check_options(name: str, entry, options: Mapping, skip: tuple[str, ...] = ()) -> None:
    names = [a.name for a in entry.args]
    for key in options:
        if key not in names or key in skip:
            valid = ", ".join(a for a in names if a not in skip) or "none"
            raise ValueError(f"{key}: not an option of randomizer {name!r} (its options: {valid})")
    for a in entry.args:
        if a.name not in skip and a.name not in options and a.default is None:
            raise ValueError(f"{a.name}: required option of randomizer {name!r} ({a.help}; {a.range_text()})")


def _eps0_family(randomizer, options: Mapping) -> Callable[[jax.Array], VRParams]:
    if isinstance(randomizer, str):
        entry = _catalog_entry(randomizer)
        if "eps0" not in [a.name for a in entry.args]:
            raise ValueError(f"randomizer: {randomizer!r} has no eps0 option; pass a callable eps0 -> VRParams")
        if "eps0" in options:
            raise ValueError("eps0: calibrate_eps0 solves for eps0; do not pass it as an option")
        _check_options(randomizer, entry, options, skip=("eps0",))
        return lambda e: entry.fn(eps0=e, **options)
    if callable(randomizer):
        if options:
            raise ValueError(f"{next(iter(options))}: options are only accepted with a catalog name")
        return randomizer
    raise ValueError("randomizer: must be a catalog name or a callable eps0 -> VRParams")


def _check_target(target) -> None:
    t = np.asarray(target)
    check((t > 0) & np.isfinite(t), "target_eps", "must be a finite number > 0 (NaN is not)")


def _bisect_monotone(upper_at: Callable[[np.ndarray], np.ndarray], target: np.ndarray, x0: np.ndarray, *,
                     feasible_below: bool, limit: float, up_init: float,
                     grow: Callable[[np.ndarray], np.ndarray], mid: Callable[[np.ndarray, np.ndarray], np.ndarray],
                     narrow: Callable[[np.ndarray, np.ndarray], np.ndarray], max_probes: int):
    """Vectorised bracketing of the feasibility boundary ``upper_at(x) <= target`` (the calibrations' loop).

    Every point keeps a bracket ``lo < hi`` of *probed* values (``lo = 0``, ``hi = inf`` until
    probed): the feasible side is ``lo`` when ``feasible_below`` (feasible values lie below
    infeasible ones: eps0), else ``hi`` (n). One batched ``upper_at`` call per probe; while
    ``hi`` is infinite the next probe is ``grow(x)``, then ``mid(lo, hi)``. A point stops when
    ``narrow(lo, hi)`` or when a probe at ``x >= limit`` lands on the ``lo`` side (``at_limit``:
    no boundary below the limit). Returns ``(lo, hi, upper at the feasible end (up_init where
    none), at_limit, done, probes)``; the feasible end is always a verified probe, so it never
    overshoots the target whatever the monotonicity.
    """
    lo = np.zeros(np.shape(x0))
    hi = np.full(np.shape(x0), np.inf)
    up_feasible = np.full(np.shape(x0), up_init)
    at_limit = np.zeros(np.shape(x0), dtype=bool)
    done = np.zeros(np.shape(x0), dtype=bool)
    x = x0
    probes = 0
    while not done.all() and probes < max_probes:
        up = upper_at(x)
        probes += 1
        ok = up <= target
        act = ~done
        to_lo = ok if feasible_below else ~ok
        lo = np.where(act & to_lo, x, lo)
        hi = np.where(act & ~to_lo, x, hi)
        up_feasible = np.where(act & ok, up, up_feasible)
        at_limit = at_limit | (act & to_lo & (x >= limit))
        done = done | at_limit | narrow(lo, hi)
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.where(done, x, np.where(np.isinf(hi), grow(x), mid(lo, hi)))
    return lo, hi, up_feasible, at_limit, done, probes


def calibrate_eps0(randomizer: str | Callable[[jax.Array], VRParams], target_eps, n, delta, *,
                   rtol: float = 1e-6, eps0_max: float = 30.0, scaled_variant: bool = False,
                   engine_rtol: float = 1e-6, max_probes: int = 200, **options) -> Calibration:
    """Largest local eps0 whose *certified* amplified epsilon is ``<= target_eps`` at ``(n, delta)``.

    Args:
      randomizer: a catalog name with an ``eps0`` option (other options as keyword
        arguments, e.g. ``calibrate_eps0("grr", 0.5, 10_000, 1e-6, k=10)``) or a callable
        ``eps0 -> VRParams`` (array in, array out).
      target_eps, n, delta: broadcast together (and with array-valued options).
      rtol: relative width of the returned bracket ``[value, over]``.
      eps0_max: search limit (``CAPPED`` where still feasible there).

    Returns :class:`Calibration`: ``value`` is a probed eps0 with certified
    ``amplify(...).upper <= target_eps`` (never overshoots), ``over`` a probed eps0 with
    certified upper ``> target_eps`` and ``over - value <= rtol * over``. So ``value`` is within
    ``rtol`` of the largest feasible eps0 when the certified bound is nondecreasing in eps0 (it
    is for the worst-case pair; the search never relies on it for the target guarantee).

    Vectorised bisection: every probe is one batched :func:`amplify` call (upper side only)
    over all points; the bracket is found by doubling from ``target_eps`` (amplification
    never raises epsilon above eps0) and narrowed by geometric bisection.
    """
    family = _eps0_family(randomizer, options)
    if not 0 < rtol < 1:
        raise ValueError("rtol: must lie in (0, 1)")
    target, n, delta = f64(target_eps), f64(n), f64(delta)
    _check_target(target)
    shape0 = broadcast_shapes_or_raise(target_eps=target, n=n, delta=delta)
    probe0 = family(jnp.ones(shape0))  # validates the options (ValueError naming them)
    shape = broadcast_shapes_or_raise(target_eps=target, n=n, delta=delta, options=np.empty(np.shape(probe0.p)))
    target_np = np.broadcast_to(np.asarray(target), shape)
    n_b, d_b = jnp.broadcast_to(n, shape), jnp.broadcast_to(delta, shape)

    def upper_at(x):
        return np.asarray(_amplify(family(jnp.asarray(x)), n_b, d_b, [], engine_rtol, scaled_variant, False).upper)

    def narrow(lo, hi):
        return ((lo == 0) & (hi <= 1e-300)) | (np.isfinite(hi) & (hi - lo <= rtol * hi))

    def mid(lo, hi):
        return np.where(lo == 0, 0.5 * hi, np.where(hi > 2.0 * lo, np.sqrt(lo * hi), 0.5 * (lo + hi)))

    lo, hi, up_lo, capped, done, probes = _bisect_monotone(
        upper_at, target_np, np.minimum(target_np, eps0_max), feasible_below=True, limit=eps0_max, up_init=0.0,
        grow=lambda x: np.minimum(2.0 * np.maximum(x, 1e-3), eps0_max), mid=mid, narrow=narrow,
        max_probes=max_probes)
    status = np.where(capped, CalibrationStatus.CAPPED,
                      np.where(done, CalibrationStatus.CONVERGED, CalibrationStatus.MAX_ITER)).astype(np.int8)
    return Calibration(jnp.asarray(lo), jnp.asarray(np.where(capped, np.inf, hi)), jnp.asarray(up_lo),
                       jnp.asarray(status), probes)


def calibrate_n(randomizer: str | VRParams, target_eps, delta, *, n_max: float = 1e12,
                scaled_variant: bool = False, engine_rtol: float = 1e-6, max_probes: int = 200,
                **options) -> Calibration:
    """Smallest number of users ``n`` whose *certified* amplified epsilon is ``<= target_eps``.

    Args:
      randomizer: :class:`VRParams` (e.g. ``randomizers.grr(2.0, 10)``) or a catalog name with
        its options as keyword arguments (``calibrate_n("grr", 0.5, 1e-6, eps0=2.0, k=10)``).
      target_eps, delta: broadcast with the randomizer's batch shape.
      n_max: search limit (``UNATTAINABLE`` where still infeasible there).

    Returns :class:`Calibration` with ``value = n`` (integer-valued float64) verified feasible
    and ``over = n - 1`` verified infeasible (``0`` when ``n = 1``). The certified bound is
    nonincreasing in ``n`` up to the engine's bracket width (adding a user is a
    post-processing of the two-count pair), so ``n`` is the smallest feasible count.
    Search: factor-8 expansion from ``n = 1``, then bisection on integers (geometric while
    the bracket spans more than a factor 2); each probe one batched :func:`amplify` call.
    """
    if isinstance(randomizer, str):
        entry = _catalog_entry(randomizer)
        _check_options(randomizer, entry, options)
        params = entry.fn(**options)
    elif isinstance(randomizer, VRParams):
        if options:
            raise ValueError(f"{next(iter(options))}: options are only accepted with a catalog name")
        params = randomizer
    else:
        raise ValueError("randomizer: must be a catalog name or a VRParams")
    target, delta = f64(target_eps), f64(delta)
    _check_target(target)
    nm = float(n_max)
    if not (nm >= 1 and nm == np.floor(nm) and np.isfinite(nm)):
        raise ValueError("n_max: must be an integer >= 1")
    shape = broadcast_shapes_or_raise(target_eps=target, delta=delta, randomizer=np.empty(np.shape(params.p)))
    target_np = np.broadcast_to(np.asarray(target), shape)
    d_b = jnp.broadcast_to(delta, shape)
    params = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, shape), params)

    def upper_at(x):
        return np.asarray(_amplify(params, jnp.asarray(x), d_b, [], engine_rtol, scaled_variant, False).upper)

    def mid(lo, hi):
        m = np.where(hi > 2.0 * lo + 2.0, np.floor(np.sqrt(np.maximum(lo, 1.0) * hi)), np.floor(0.5 * (lo + hi)))
        return np.clip(m, lo + 1, hi - 1)

    # lo: largest verified-infeasible n (0: none yet; n = 0 is not a dataset); hi: smallest verified-feasible n
    lo, hi, up_hi, unattainable, done, probes = _bisect_monotone(
        upper_at, target_np, np.ones(shape), feasible_below=False, limit=nm, up_init=np.inf,
        grow=lambda x: np.minimum(8.0 * x, nm), mid=mid, narrow=lambda lo, hi: hi - lo <= 1, max_probes=max_probes)
    status = np.where(unattainable, CalibrationStatus.UNATTAINABLE,
                      np.where(done, CalibrationStatus.CONVERGED, CalibrationStatus.MAX_ITER)).astype(np.int8)
    return Calibration(jnp.asarray(np.where(unattainable, np.inf, hi)), jnp.asarray(lo), jnp.asarray(up_hi),
                       jnp.asarray(status), probes)
