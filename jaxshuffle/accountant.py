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
           "Calibration", "CalibrationStatus", "calibrate_eps0", "calibrate_n"]


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


def _amplify(randomizer: VRParams, n, delta, lowers: list[LowerParams], rtol: float,
             scaled_variant: bool, with_paper: bool) -> AmplificationReport:
    require_x64()
    if not isinstance(randomizer, VRParams):
        raise ValueError("randomizer: must be a VRParams (e.g. jaxshuffle.randomizers.grr(eps0, k))")
    if not 0 < rtol < 1:
        raise ValueError("rtol: must lie in (0, 1)")
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

    pairs = [wc_pair, scaled_pair]
    deltas = [delta, delta_scaled]
    if with_paper:
        pairs.append(paper_pair)
        deltas.append(delta)
    first_lower = len(pairs)
    for lp in lowers:
        p0, lb = b(f64(lp.p0)), b(f64(lp.beta))
        pairs.append(vr_pair(p0, lb, q0=b(f64(lp.q0)), q1=b(f64(lp.q1))))
        pairs.append(vr_pair(p0, lb, q0=jnp.ones(shape), q1=p0))  # x* = x^0
        deltas += [delta, delta]

    stacked = TwoCountPair(*(jnp.stack([b(getattr(pr, f)) for pr in pairs])
                             for f in ("u", "v", "w", "r0", "r1")))
    k = len(pairs)
    res = epsilon(stacked, jnp.broadcast_to(n_engine, (k, *shape)), jnp.stack(deltas), rtol=rtol)

    eps_wc, eps_sc = res.upper[0], jnp.where(use_scaled, res.upper[1], jnp.inf)
    eps_sc = jnp.where(uv == 0, 0.0, eps_sc)  # identical victim laws: eps = 0
    trivial = delta >= beta  # D_1(shuffled) <= TV(victim) <= beta
    source = jnp.where(trivial, UpperSource.TV, jnp.where(eps_sc < eps_wc, UpperSource.SCALED,
                                                           UpperSource.WORST_CASE)).astype(jnp.int8)
    upper = jnp.where(trivial, 0.0, jnp.minimum(eps_wc, eps_sc))
    status_sc = jnp.where(uv == 0, jnp.int8(Status.ZERO), res.status[1])
    status = jnp.where(source == UpperSource.TV, jnp.int8(Status.ZERO),
                       jnp.where(source == UpperSource.SCALED, status_sc, res.status[0])).astype(jnp.int8)

    if lowers:
        lows = res.lower[first_lower:]
        best = jnp.argmax(lows, axis=0)
        lower = jnp.max(lows, axis=0)
        status_lower = jnp.take_along_axis(res.status[first_lower:], best[None], axis=0)[0]
        has_lower = jnp.ones(shape, dtype=bool)
    else:
        lower = jnp.zeros(shape)
        status_lower = jnp.full(shape, Status.ZERO, dtype=jnp.int8)
        has_lower = jnp.zeros(shape, dtype=bool)
    if with_paper:
        paper, status_paper = res.upper[2], res.status[2]
    else:
        paper, status_paper = jnp.full(shape, jnp.nan), jnp.full(shape, Status.INVALID, dtype=jnp.int8)
    return AmplificationReport(
        upper=upper,
        worst_case=eps_wc,
        lower=lower,
        paper=paper,
        certified=jnp.ones(shape, dtype=bool),
        paper_certified=b(paper_pair.certified),
        has_lower=has_lower,
        upper_source=source,
        status=status,
        status_lower=status_lower,
        status_paper=status_paper,
    )


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

    lo = np.zeros(shape)
    hi = np.full(shape, np.inf)
    up_lo = np.zeros(shape)
    done = np.zeros(shape, dtype=bool)
    capped = np.zeros(shape, dtype=bool)
    x = np.minimum(target_np, eps0_max)
    probes = 0
    while not done.all() and probes < max_probes:
        rep = _amplify(family(jnp.asarray(x)), n_b, d_b, [], engine_rtol, scaled_variant, False)
        probes += 1
        up = np.asarray(rep.upper)
        ok = up <= target_np
        act = ~done
        lo = np.where(act & ok, x, lo)
        up_lo = np.where(act & ok, up, up_lo)
        hi = np.where(act & ~ok, x, hi)
        capped = capped | (act & ok & (x >= eps0_max))
        tiny = (lo == 0) & (hi <= 1e-300)
        done = done | capped | tiny | (np.isfinite(hi) & (hi - lo <= rtol * hi))
        with np.errstate(invalid="ignore", divide="ignore"):
            grow = np.minimum(2.0 * np.maximum(x, 1e-3), eps0_max)
            mid = np.where(lo == 0, 0.5 * hi, np.where(hi > 2.0 * lo, np.sqrt(lo * hi), 0.5 * (lo + hi)))
        x = np.where(done, x, np.where(np.isinf(hi), grow, mid))
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

    lo = np.zeros(shape)  # largest verified-infeasible n (0: none yet; n = 0 is not a dataset)
    hi = np.full(shape, np.inf)  # smallest verified-feasible n
    up_hi = np.full(shape, np.inf)
    unattainable = np.zeros(shape, dtype=bool)
    done = np.zeros(shape, dtype=bool)
    x = np.ones(shape)
    probes = 0
    while not done.all() and probes < max_probes:
        rep = _amplify(params, jnp.asarray(x), d_b, [], engine_rtol, scaled_variant, False)
        probes += 1
        up = np.asarray(rep.upper)
        ok = up <= target_np
        act = ~done
        hi = np.where(act & ok, x, hi)
        up_hi = np.where(act & ok, up, up_hi)
        lo = np.where(act & ~ok, x, lo)
        unattainable = unattainable | (act & ~ok & (x >= nm))
        done = done | unattainable | (hi - lo <= 1)
        mid = np.where(hi > 2.0 * lo + 2.0, np.floor(np.sqrt(np.maximum(lo, 1.0) * hi)), np.floor(0.5 * (lo + hi)))
        mid = np.clip(mid, lo + 1, hi - 1)
        x = np.where(done, x, np.where(np.isinf(hi), np.minimum(8.0 * x, nm), mid))
    status = np.where(unattainable, CalibrationStatus.UNATTAINABLE,
                      np.where(done, CalibrationStatus.CONVERGED, CalibrationStatus.MAX_ITER)).astype(np.int8)
    return Calibration(jnp.asarray(np.where(unattainable, np.inf, hi)), jnp.asarray(lo), jnp.asarray(up_hi),
                       jnp.asarray(status), probes)
