"""Inverse calibration: the largest eps0, or the smallest n, whose certified amplified epsilon meets a target.

Safety contract (as dp_accounting's ``calibrate_dp_mechanism``): the returned value is a
*verified probe*, never past the target, whatever the monotonicity of the bound
(docs/math.md section 15). :func:`calibrate_eps0` runs the bracketing loop of
:func:`jaxshuffle._bisect.bracket_monotone`, one batched :func:`~jaxshuffle.accountant.amplify`
call per probe; :func:`calibrate_n` searches integers on tiers of certified bounds, cheapest first
(:func:`search_n`), and probes the calibrated rule itself only near the answer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle import _programs
from jaxshuffle._bisect import BracketSettings, bracket_monotone
from jaxshuffle._config import broadcast_shapes_or_raise, check, f64
from jaxshuffle.accountant.amplify import amplify, check_upper_from
from jaxshuffle.accountant.count_search import (  # noqa: F401  (CALIBRATION_BLANKET_POINTS: named in calibrate_n's docs)
    CALIBRATION_BLANKET_POINTS,
    NLanes,
    blanket_upper,
    effective_points,
    largest_window,
    one_round_tiers,
    quick_probes,
    round_tiers,
    search_n,
)
from jaxshuffle.accountant.mechanism import expects_blanket
from jaxshuffle.accountant.rounds import checked_blanket_points, composed_upper
from jaxshuffle.accountant.subsampling import scalar_sample_rate
from jaxshuffle.randomizers import VRParams, check_options
from jaxshuffle.randomizers import entry as catalog_entry
from jaxshuffle.randomizers.clone import CloneProof, certified_clone
from jaxshuffle.randomizers.params import MatrixMechanism, RowMatrix

__all__ = ["Calibration", "CalibrationStatus", "calibrate_eps0", "calibrate_n"]


class CalibrationStatus(enum.IntEnum):
    """Per-point outcome of :func:`calibrate_eps0` / :func:`calibrate_n` (int8 array)."""

    CONVERGED = 0  #: ``value`` feasible, ``over`` infeasible, both verified, and they are adjacent
    CAPPED = 1  #: still feasible at ``eps0_max`` (calibrate_eps0): ``value = eps0_max``, ``over = inf``
    UNATTAINABLE = 2  #: infeasible at ``n_max`` (calibrate_n): ``value = inf``, ``over = n_max``
    MAX_ITER = 3  #: probe limit reached; ``value`` is still feasible, only the bracket is wider

    @property
    def label(self) -> str:
        return self.name.lower().replace("_", "-")


class Calibration(NamedTuple):
    """Result of a calibration: float64 arrays of the broadcast shape.

    Attributes:
      value: the answer -- the largest eps0 (:func:`calibrate_eps0`) or smallest n
        (:func:`calibrate_n`) found whose certified amplified epsilon is ``<= target``.
      over: the verified infeasible neighbour (certified upper ``> target``): an eps0 with
        ``over - value <= rtol * over`` (:func:`calibrate_eps0`), or ``value - 1``
        (:func:`calibrate_n`).
      upper: the certified amplified epsilon at ``value`` (``<= target``); where the target is
        ``UNATTAINABLE``, the best value reachable (the certified bound at ``n_max``); where
        :func:`calibrate_n` refused because a certified *lower* bound on the mechanism's epsilon at
        ``n_max`` is already above the target, its cheapest tier's certified bound there (the rule is
        not run).
      status: :class:`CalibrationStatus` (int8).
      probes: number of batched :func:`amplify` evaluations used (an int).
      clone_proof: :class:`~jaxshuffle.randomizers.clone.CloneProof` code (int8) of the clone pair
        proven for the randomizer at ``value`` (docs/math.md 3.1); for k-ary RR ``upper`` may come
        from the blanket pair instead (docs/math.md 10), as :func:`amplify`'s ``upper_source`` says.
      blanket_points: :func:`calibrate_n` with ``rounds > 1``: the profile points of the blanket pair's
        PLD in the T-round rule that certified ``upper`` (int64; 0: no blanket PLD), so that
        ``composed_epsilon(..., blanket_points=blanket_points).upper == upper``; unset, a calibration
        uses :data:`CALIBRATION_BLANKET_POINTS` (a cost cap: a slightly looser certified bound than
        ``composed_epsilon``'s default, stated here). None otherwise.
    """

    value: jax.Array
    over: jax.Array
    upper: jax.Array
    status: jax.Array
    probes: int
    clone_proof: jax.Array | None = None
    blanket_points: jax.Array | None = None


def _eps0_family(randomizer, options: Mapping) -> Callable[[jax.Array], VRParams]:
    if isinstance(randomizer, str):
        if "eps0" not in [a.name for a in catalog_entry(randomizer).args]:
            raise ValueError(f"randomizer: {randomizer!r} has no eps0 option; pass a callable eps0 -> VRParams")
        entry = check_options(randomizer, {k: v for k, v in options.items() if k != "eps0"}, skip=("eps0",))
        if "eps0" in options:
            raise ValueError("eps0: calibrate_eps0 solves for eps0; do not pass it as an option")
        return lambda e: entry.fn(eps0=e, **options)
    if callable(randomizer):
        if options:
            raise ValueError(f"{next(iter(options))}: options are only accepted with a catalog name")
        return randomizer
    raise ValueError("randomizer: must be a catalog name or a callable eps0 -> VRParams")


def _check_target(target) -> None:
    t = np.asarray(target)
    check((t > 0) & np.isfinite(t), "target_eps", "must be a finite number > 0", value=t)


def _check_scaled_variant(params: VRParams, scaled_variant: bool) -> None:
    """Calibration returns only certified values: ``scaled_variant`` only for a randomizer the scaled
    pair is proven for (:func:`~jaxshuffle.randomizers.clone.scaled_pair_proven`)."""
    from jaxshuffle.randomizers.clone import scaled_pair_proven

    if scaled_variant and not scaled_pair_proven(params, np.shape(params.p)).all():
        raise ValueError("scaled_variant: the (u+v)-scaled pair is proven only where every pair of inputs has total "
                         "variation beta (k-ary RR, binary RR on two options, a matrix with equal pairwise total "
                         "variations; docs/math.md 3); calibration returns only certified values, so leave it False "
                         "for this randomizer")


def calibrate_eps0(randomizer: str | Callable[[jax.Array], VRParams], target_eps, n, delta, *,
                   rtol: float = 1e-6, eps0_max: float = 30.0, scaled_variant: bool = False,
                   engine_rtol: float = 1e-6, max_probes: int = 200, upper_from: str = "best",
                   rounds: int = 1, discretization: float | None = None, blanket_points: int | None = None,
                   sample_rate: float = 1.0, **options) -> Calibration:
    """Largest local eps0 whose *certified* amplified epsilon is ``<= target_eps`` at ``(n, delta)``.

    With ``rounds = T > 1``: the largest common eps0 whose **T-fold composition** is certified
    ``<= target_eps`` at ``delta`` (the same users in every round) by the one T-round rule,
    :func:`~jaxshuffle.accountant.rounds.composed_epsilon`'s ``upper``: the smallest of the
    worst-case pair's PLD composition, basic and advanced composition and, for k-ary RR, the
    blanket pair's PLD composition (docs/math.md 13; grid ``discretization``, default
    :func:`~jaxshuffle.pld.distribution.default_discretization` for ``T`` rounds; ``blanket_points``
    as there). So ``composed_epsilon`` at ``value`` is ``<= target_eps``, and at ``over`` it is
    not. ``upper_from`` and ``scaled_variant`` do not apply. Points are probed one by one (numpy +
    FFT), so keep the batch small; a k-ary RR probe above the worst-case pair's answer builds the
    blanket pair's PLD (about a minute at ``n = 1e4`` with the default ``blanket_points``).
    ``upper`` is then ``composed_epsilon(...).upper`` at ``value``, recomputed from scratch.

    Vectorised bisection: every probe is one batched :func:`amplify` call (upper side only)
    over all points; the bracket is found by doubling from ``target_eps`` (amplification
    never raises epsilon above eps0) and narrowed by geometric bisection. Why the answer never
    overshoots: docs/math.md section 15.

    Size: a public entry point whose keywords are the user's options: the target (``target_eps``, ``n``,
    ``delta``), the search (``rtol``, ``eps0_max``, ``max_probes``, ``engine_rtol``), the bound (``upper_from``,
    ``scaled_variant``), the rounds (``rounds``, ``discretization``, ``blanket_points``), ``sample_rate`` and the
    randomizer's options.

    Args:
      randomizer: a catalog name with an ``eps0`` option (other options as keyword
        arguments, e.g. ``calibrate_eps0("grr", 0.5, 10_000, 1e-6, k=10)``) or a callable
        ``eps0 -> VRParams`` (array in, array out).
      target_eps: the target amplified epsilon, finite and > 0; broadcast with ``n``, ``delta``
        (and with array-valued options).
      n: number of users (an integer >= 1), broadcast with ``target_eps`` and ``delta``.
      delta: target delta in (0, 1), broadcast with ``target_eps`` and ``n``.
      rtol: relative width of the returned bracket ``[value, over]``, in (0, 1).
      eps0_max: search limit (``CAPPED`` where still feasible there).
      scaled_variant: also use the (u+v)-scaled pair (:func:`amplify`'s option); accepted only for a
        randomizer it is proven for (every pair of inputs at total variation beta: k-ary RR, binary RR
        on two options), since calibration returns only certified values.
      engine_rtol: relative width of every epsilon bracket of the probes (:func:`amplify`'s ``rtol``).
      max_probes: probe limit (``MAX_ITER`` where it is reached; ``value`` is still feasible).
      upper_from: which certified upper bound is calibrated (:func:`amplify`'s ``upper_from``;
        default the smallest, e.g. the blanket pair for k-ary RR). For a row that carries a finite
        matrix (subset selection, Hadamard response, binary RR), whose matrix engine costs seconds per point
        and probe, ``"best"`` calibrates the two-count bound: ``value`` is then feasible for
        ``amplify``'s ``upper`` too (which is never larger), but not the largest eps0 its blanket
        bound allows; ``"blanket"`` is for k-ary RR only (ValueError otherwise).
      sample_rate: the probability ``g`` in (0, 1] that each user takes part (a scalar; Poisson
        client sampling, docs/math.md 12.10): every probe and the final certificate are then
        ``amplify(..., sample_rate=g)``'s upper (one round; k-ary RR or a randomizer carrying its
        matrix, whose engine runs at every probe) or, with ``rounds``, ``composed_epsilon(...,
        sample_rate=g)``'s (k-ary RR). ``clone_proof`` is then ``CloneProof.NONE``.
      rounds: number of rounds ``T`` on the same users, an integer >= 1 (above; default 1).
      discretization: with ``rounds > 1``, the PLD loss grid spacing (default
        :func:`~jaxshuffle.pld.distribution.default_discretization` for ``T`` rounds).
      blanket_points: with ``rounds > 1``, profile points of the k-RR blanket pair's PLD, as in
        :func:`~jaxshuffle.accountant.rounds.composed_epsilon` (0 skips it).
      **options: the catalog randomizer's other options (e.g. ``k=10``); not with a callable.

    Returns:
      The answer, a :class:`Calibration`: ``value`` is a probed eps0 with certified
        ``amplify(...).upper <= target_eps`` (never overshoots: errs low, on the safe side), ``over`` a probed
        eps0 with certified upper ``> target_eps`` and ``over - value <= rtol * over``. So ``value`` is within
        ``rtol`` of the largest feasible eps0 when the certified bound is nondecreasing in eps0 (it is for the
        worst-case pair; the search never relies on it for the target guarantee).

    Raises:
      ValueError: naming the parameter, for a randomizer without an ``eps0`` option, ``eps0`` given as
        an option, bad options, ``rtol`` outside (0, 1), a ``target_eps`` not finite and > 0, a bad
        ``n``, ``delta``, ``rounds``, ``upper_from`` or ``sample_rate``, or ``scaled_variant`` for a
        randomizer it is not proven for.
    """
    family = _eps0_family(randomizer, options)
    if not 0 < rtol < 1:
        raise ValueError("rtol: must lie in (0, 1)")
    target, n, delta = f64(target_eps), f64(n), f64(delta)
    _check_target(target)
    shape0 = broadcast_shapes_or_raise(target_eps=target, n=n, delta=delta)
    probe0 = family(jnp.ones(shape0))  # validates the options (ValueError naming them)
    g = scalar_sample_rate(sample_rate, "a calibration")
    upper_from = _probed_source(probe0, upper_from) if g == 1.0 else check_upper_from(upper_from, sampled=True)
    _check_scaled_variant(probe0, scaled_variant)
    shape = broadcast_shapes_or_raise(target_eps=target, n=n, delta=delta, options=np.empty(np.shape(probe0.p)))
    target_np = np.broadcast_to(np.asarray(target), shape)
    n_b, d_b = jnp.broadcast_to(n, shape), jnp.broadcast_to(delta, shape)

    rounds = _check_rounds(rounds)

    log_width = -np.log1p(-rtol)  # log(over / value) <= log_width  implies  over - value <= rtol * over

    def mid(lo, hi):
        return np.where(lo == 0, 0.5 * hi, np.where(hi > 2.0 * lo, np.sqrt(lo * hi), 0.5 * (lo + hi)))

    bracket = BracketSettings(
        feasible_below=True, limit=eps0_max, up_init=0.0,
        grow=lambda x: np.minimum(2.0 * np.maximum(x, 1e-3), eps0_max), mid=mid,
        narrow=lambda lo, hi: ((lo == 0) & (hi <= 1e-300)) | (np.isfinite(hi) & (hi - lo <= rtol * hi)),
        log_width=log_width)

    def search(upper_at, x0, budget, slope0=1.0):
        return bracket_monotone(upper_at, target_np, x0, bracket, max_probes=budget, slope0=slope0)

    def amplified_upper(x, source=upper_from):
        return np.asarray(amplify(family(jnp.asarray(x)), n_b, d_b, rtol=engine_rtol, scaled_variant=scaled_variant,
                                  with_paper=False, upper_from=source, sample_rate=g).upper)

    # many programs (a plan per probed eps0), each run a few times: compilation dominates a cold call
    with quick_probes():
        x0 = np.minimum(target_np, eps0_max)
        probes = 0
        blanket = rounds == 1 and upper_from != "worst-case" and _blanket_applies(probe0, eps0_max, np.asarray(n_b))
        blanket_points = checked_blanket_points(blanket_points)
        if rounds > 1:
            def upper_at(x, target=target_np):
                return _composed_upper(family(jnp.asarray(x)), np.asarray(n_b), np.asarray(d_b), rounds, discretization,
                                       blanket_points, target, g)
        elif blanket and g == 1.0:  # with clients sampled the blanket pair at k' is the only bound: one stage
            # Two stages. The two-count (worst-case) calibration is cheap, and its answer is where the
            # blanket search starts (feasible for "best", which is <= the worst-case bound; still probed).
            lo_wc, *_, probes = search(lambda x: amplified_upper(x, "worst-case"), x0, max(max_probes // 2, 1))
            x0 = np.where(lo_wc > 0, lo_wc, x0)
            # amplify's automatic source skips points above the cost cap; so does its calibration, judged
            # where the blanket probes start (the stage-one answer and the first expansion, 2 x0)
            x1 = np.minimum(2 * x0, eps0_max)
            blanket = upper_from == "blanket" or (_blanket_affordable(family, x0, n_b, d_b)
                                                  and _blanket_affordable(family, x1, n_b, d_b))
        if blanket:
            upper_at = _krr_upper(family, n_b, d_b, x0, eps0_max, only=upper_from == "blanket", rtol=engine_rtol,
                                  scaled_variant=scaled_variant, sample_rate=g)
        elif rounds == 1:
            upper_at = amplified_upper

        # d log eps / d log eps0 is about 1 at small eps0 and eps0 / 2 at large (eps ~ e^(eps0/2) / sqrt(n)):
        # the first expansion's guess, which keeps the blanket search inside its first plan
        lo, hi, up_lo, capped, done, more = search(upper_at, x0, max_probes - probes, np.maximum(1.0, 0.5 * x0))
        probes += more
    # the answer re-certified from scratch, by the optimised programs (the probes may have run quickly
    # compiled ones, a few ulps apart): by amplify itself (its own blanket plan), or by the T-round rule's
    # full value (a probe may have stopped at the cheaper bounds); so the reported upper is what any later
    # call of amplify or composed_epsilon at that eps0 returns
    recertify = (lambda x: upper_at(x, None)) if rounds > 1 else amplified_upper
    with _programs.optimised_programs():
        lo, hi, up_lo, capped, more = _recertify(recertify, lo, hi, up_lo, capped, target_np, rtol)
    probes += more
    done = done & ~(hi - lo > rtol * hi)
    status = np.where(capped, CalibrationStatus.CAPPED,
                      np.where(done, CalibrationStatus.CONVERGED, CalibrationStatus.MAX_ITER)).astype(np.int8)
    _, proof = certified_clone(family(jnp.asarray(np.where(lo > 0, lo, 1.0))))
    proof = CloneProof.NONE if g < 1.0 else proof
    return Calibration(jnp.asarray(lo), jnp.asarray(np.where(capped, np.inf, hi)), jnp.asarray(up_lo),
                       jnp.asarray(status), probes, jnp.broadcast_to(jnp.asarray(proof, jnp.int8), np.shape(lo)))


def _recertify(certified_upper, lo, hi, up_lo, capped, target, rtol: float, tries: int = 6):
    """``value = lo`` re-evaluated from scratch by ``certified_upper``, the calibrated rule: :func:`amplify`
    (which plans its own blanket window) for one round, the T-round rule's full value over several.

    Where that certified value exceeds the target (the probes' shared plan and amplify's differ in
    the last digits, or a probe stopped at a cheaper bound), ``lo`` becomes ``over`` (now verified
    infeasible by the rule) and the value steps down by ``rtol``, ``4 rtol``, ... until the rule
    certifies it; after ``tries`` steps nothing is claimed (``value = 0``). Returns
    ``(lo, hi, upper, capped, calls)``.
    """
    probed = lo > 0
    up = np.where(probed, certified_upper(np.where(probed, lo, target)), up_lo)
    capped = capped & (up <= target)
    calls = 1
    for j in range(tries):
        bad = up > target
        if not bad.any():
            break
        hi = np.where(bad, lo, hi)
        lo = np.where(bad, lo * (1.0 - rtol * 4.0 ** j), lo)
        up = np.where(bad, certified_upper(lo), up)
        calls += 1
    bad = up > target
    return np.where(bad, 0.0, lo), hi, np.where(bad, 0.0, up), capped, calls


def _probed_source(params: VRParams, upper_from: str) -> str:
    """The ``upper_from`` a calibration probes with: a finite-matrix mechanism's engine runs point by
    point for seconds, so its ``"best"`` probes the two-count rules (``"worst-case"``: never below
    amplify's ``upper``, so the answer stays feasible), and ``"blanket"`` is refused."""
    check_upper_from(upper_from)
    if not isinstance(params.mechanism, (MatrixMechanism, RowMatrix)):
        return upper_from
    if upper_from == "blanket":
        raise ValueError("upper_from: 'blanket' calibration covers k-ary RR (grr) only; a finite-matrix "
                         "row's engine costs seconds per probe: use 'best' (calibrates the two-count bound) "
                         "or 'worst-case'")
    return "worst-case"


def _blanket_applies(params: VRParams, eps0_max: float, n: np.ndarray) -> bool:
    """Whether amplify's upper for these points comes with the k-RR blanket pair (its coverage:
    :func:`~jaxshuffle.accountant.amplify.with_mechanism_bounds`) at every eps0 up to ``eps0_max``."""
    mech = params.krr()
    if mech is None:
        return False
    return eps0_max <= 50.0 and bool(np.all(n <= 1e12)) and bool(np.all(np.asarray(mech.k) < 1e12))


def _blanket_affordable(family, eps0, n, delta) -> bool:
    """Whether every point's blanket evaluation at ``eps0`` is within amplify's automatic cost cap
    (:data:`jaxshuffle.blanket.AUTO_MAX_CELLS`)."""
    from jaxshuffle.engine.blanket import AUTO_MAX_CELLS, point_cells

    mech = family(jnp.asarray(np.maximum(eps0, 1e-9))).mechanism
    shape = np.broadcast_shapes(np.shape(eps0), np.shape(n), np.shape(delta), np.shape(mech.k))
    e, k, nn, d = (np.broadcast_to(np.asarray(a, np.float64), shape) for a in (mech.eps0, mech.k, n, delta))
    return bool(np.all(point_cells(e, k, nn, d) <= AUTO_MAX_CELLS))


def _krr_upper(family, n, delta, x0, eps0_max, *, only: bool, rtol: float, scaled_variant: bool,
               sample_rate: float = 1.0):
    """Probe function of a k-RR calibration: amplify's certified ``upper`` rule with the blanket
    pair evaluated under **one** plan for every probe.

    ``upper = min(worst-case pair, blanket pair)`` (``only``: the blanket pair), ``0`` where
    ``delta >= beta``, as :func:`~jaxshuffle.accountant.amplify.with_mechanism_bounds` combines
    them, minus its lower-bound lanes (a calibration reads ``upper`` only). The blanket pair runs
    under a plan covering eps0 over each point's planned range, first ``[x0, 1.1 x0]`` (the
    stage-one answer and, usually, the first expansion), widened (a new plan) only when a probe
    leaves it.
    A plan never affects soundness (:func:`jaxshuffle.blanket.plan_blanket`): every value is a
    certified upper bound; sharing one plan means every probe runs one compiled program.
    With clients sampled (``sample_rate < 1``) the blanket pair at the real ``k'`` is the only bound
    (docs/math.md 12.10), planned and evaluated at ``k'``.
    """
    from jaxshuffle.accountant.amplify import UpperSource
    from jaxshuffle.accountant.subsampling import subsampled_krr_k

    span = [np.asarray(x0, np.float64), np.minimum(1.1 * np.asarray(x0, np.float64), eps0_max)]
    plan: list = []  # the one BlanketPlan in use, replaced when a probe leaves its span

    def upper_at(x):
        params = family(jnp.asarray(x))
        # amplify's cost rule: no blanket lane where no blanket message is expected (none at all: no plan)
        useful = (sample_rate < 1.0) | only | expects_blanket(params.mechanism.eps0, params.mechanism.k, np.asarray(n))
        if not np.any(useful):
            return np.asarray(amplify(params, n, delta, rtol=rtol, scaled_variant=scaled_variant, with_paper=False,
                                      upper_from="worst-case").upper)
        if not plan or (x < span[0]).any() or (x > span[1]).any():
            span[0], span[1] = np.minimum(span[0], x), np.maximum(span[1], x)
            plan[:] = [_span_plan(family, span[0], span[1], n, delta, sample_rate)]
        shape = np.broadcast_shapes(np.shape(params.p), np.shape(n), np.shape(delta))
        eps0, k = (np.broadcast_to(np.asarray(a, np.float64), shape) for a in (params.mechanism.eps0,
                                                                                 params.mechanism.k))
        blanket = blanket_upper(eps0, subsampled_krr_k(eps0, k, sample_rate), np.asarray(n), np.asarray(delta),
                                 plan[0], rtol)
        if sample_rate < 1.0:
            return blanket
        rep = amplify(params, n, delta, rtol=rtol, scaled_variant=scaled_variant, with_paper=False,
                      upper_from="worst-case")
        two_count = np.asarray(rep.upper)
        trivial = np.asarray(rep.upper_source) == UpperSource.TV
        best = np.where(useful, np.minimum(two_count, blanket), two_count)
        return np.where(trivial, two_count, blanket if only else best)

    return upper_at


def _span_plan(family, lo, hi, n, delta, sample_rate: float = 1.0, points: int = 5):
    """One blanket plan for eps0 on a geometric grid of ``points`` values over each ``[lo, hi]``,
    with ``lines`` and ``max_step`` rounded up to quarter octaves (nearby calibrations share it);
    at the real ``k'`` of clients sampled at ``sample_rate``."""
    from jaxshuffle.accountant.subsampling import subsampled_krr_k
    from jaxshuffle.engine.blanket import plan_blanket, shared_plan

    frac = np.linspace(0.0, 1.0, points).reshape((points,) + (1,) * np.ndim(lo))
    grid = np.exp(np.log(lo) + frac * (np.log(hi) - np.log(lo)))
    mech = family(jnp.asarray(grid)).mechanism
    shape = np.shape(grid)
    eps0, k, n_, delta_ = (np.broadcast_to(np.asarray(a, np.float64), shape) for a in (mech.eps0, mech.k, n, delta))
    p = plan_blanket(eps0, subsampled_krr_k(eps0, k, sample_rate), n_, delta_)
    return shared_plan(p, n)


def _composed_upper(params: VRParams, n, delta, rounds: int, discretization, blanket_points, target,
                    sample_rate: float = 1.0) -> np.ndarray:
    """Certified epsilon of ``rounds`` rounds at each point by THE T-round rule
    (:func:`~jaxshuffle.accountant.rounds.composed_upper`, the smallest of the certified bounds of
    :func:`~jaxshuffle.accountant.rounds.composed_epsilon`; upper side).

    Where the cheaper bounds already meet the point's ``target`` the blanket pair's PLD is not
    built: the value is then an upper bound on the rule's (so the probe is feasible under the rule
    too), and it is the rule's own value wherever it exceeds the target. ``inf`` for a single user
    without blanket messages (nothing is shuffled).
    """
    out = np.full(np.shape(n), np.inf)
    for idx in np.ndindex(out.shape):
        point = jax.tree_util.tree_map(lambda a, idx=idx: jnp.asarray(a)[idx] if jnp.ndim(a) else a, params)
        if float(np.asarray(point.n_blanket(n[idx]))) < 1:
            continue  # one user and no blanket: no shuffle, no round PLD; inf is an upper bound
        out[idx] = composed_upper(point, float(n[idx]), rounds, float(delta[idx]), discretization=discretization,
                                  blanket_points=blanket_points, sample_rate=sample_rate,
                                  below=None if target is None else float(np.broadcast_to(target, out.shape)[idx]))
    return out


def _check_rounds(rounds) -> int:
    if isinstance(rounds, bool) or not float(rounds) == int(rounds) or int(rounds) < 1:
        raise ValueError(f"rounds: must be an integer >= 1, got {rounds!r}")
    return int(rounds)


def calibrate_n(randomizer: str | VRParams, target_eps, delta, *, n_max: float = 1e12,
                max_window: int = 1 << 18, scaled_variant: bool = False, engine_rtol: float = 1e-6,
                max_probes: int = 200, upper_from: str = "best", rounds: int = 1,
                discretization: float | None = None, blanket_points: int | None = None, sample_rate: float = 1.0,
                **options) -> Calibration:
    """Smallest number of users ``n`` whose *certified* amplified epsilon is ``<= target_eps``.

    With ``rounds = T > 1``: the smallest ``n`` whose **T-fold composition** is certified
    ``<= target_eps`` at ``delta`` (the same ``n`` users in every round) by the one T-round rule,
    :func:`~jaxshuffle.accountant.rounds.composed_epsilon`'s ``upper``, as in
    :func:`calibrate_eps0` with ``rounds`` (``upper_from`` and ``scaled_variant`` do not apply;
    points are probed one by one), with the blanket pair's PLD at ``blanket_points`` profile points
    (unset: :data:`CALIBRATION_BLANKET_POINTS`, stated in the result). ``upper`` is then that rule's
    value at ``value``.

    Search: one probe at the limit with the cheapest certified bound; where it misses the target,
    k-ary RR (clients not sampled) first asks a certified lower bound on the mechanism's epsilon
    there (the certified bracket's lower end of the Theorem 5.1 pair of
    :func:`~jaxshuffle.randomizers.grr_lower`, one two-count search, as cheap as that probe):
    above the target, no count up to the limit meets it under any certified rule (the mechanism's
    epsilon is nonincreasing in ``n``; over ``T`` rounds at least one round's), and the point is
    ``UNATTAINABLE`` without the rule's probe there. Then tiers of certified bounds,
    each at least the next, cheapest first, each from the last one's answer: the two-count rules
    (amplify's ``"worst-case"``; over T rounds their basic and advanced composition, then the
    worst-case pair's PLD composition), then the rule (k-RR: with the blanket pair under one plan for
    every probe; over T rounds with the blanket pair's PLD). Steps on ``log n``: the crossing
    predicted from the probes' slope, regula falsi once bracketed, bisection where that stalls
    (:func:`_integer_root`). Every answer is the rule's own verdict: a probe of the T-round rule, or
    (one round, k-RR) re-certified with ``value - 1`` by :func:`amplify` from scratch (one batched
    call). Why the answer never overshoots: docs/math.md section 15.

    Size: a public entry point whose keywords are the user's options: the target (``target_eps``, ``delta``),
    the search (``n_max``, ``max_window``, ``max_probes``, ``engine_rtol``), the bound (``upper_from``,
    ``scaled_variant``), the rounds (``rounds``, ``discretization``, ``blanket_points``), ``sample_rate`` and the
    randomizer's options.

    Args:
      randomizer: :class:`VRParams` (e.g. ``randomizers.grr(2.0, 10)``) or a catalog name with
        its options as keyword arguments (``calibrate_n("grr", 0.5, 1e-6, eps0=2.0, k=10)``).
      target_eps: the target amplified epsilon, finite and > 0; broadcast with ``delta`` and the
        randomizer's batch shape.
      delta: target delta in (0, 1), broadcast with ``target_eps`` and the randomizer's batch shape.
      n_max: search limit, an integer >= 1 (``UNATTAINABLE`` where still infeasible there).
      max_window: cost cap: ``n_max`` is lowered by factors of 8 until every search at it plans
        a window of at most this many counts (the default, 2^18, is what n ~ 1e8-1e9 needs at
        typical parameters; a probe then takes about a second on a CPU). Where the target is
        unattainable below that limit, ``over`` reports the limit probed.
      scaled_variant: as in :func:`calibrate_eps0` (only for a randomizer the scaled pair is proven for).
      engine_rtol: relative width of every epsilon bracket of the probes (:func:`amplify`'s ``rtol``).
      max_probes: probe limit (``MAX_ITER`` where it is reached; ``value`` is still feasible).
      upper_from: which certified upper bound is calibrated (:func:`amplify`'s ``upper_from``;
        finite-matrix rows as in :func:`calibrate_eps0`: ``"best"`` calibrates the two-count bound).
      rounds: number of rounds ``T`` on the same users, an integer >= 1 (above; default 1).
      discretization: with ``rounds > 1``, the PLD loss grid spacing, as in :func:`calibrate_eps0`.
      blanket_points: with ``rounds > 1``, profile points of the k-RR blanket pair's PLD (or, with
        clients sampled, of the three-count pair's), as in :func:`calibrate_eps0` (0 skips it). Unset:
        :data:`CALIBRATION_BLANKET_POINTS` wherever ``composed_epsilon``'s default builds that PLD, a cost
        cap (its default costs seconds more per probe; 0.07 % looser at the issue's point), stated in the
        result's ``blanket_points``: ``composed_epsilon(..., blanket_points=that)`` is the rule certified.
      sample_rate: as in :func:`calibrate_eps0` (``n`` counts every user, taking part or not).
      **options: the catalog randomizer's options (e.g. ``eps0=2.0, k=10``); not with a :class:`VRParams`.

    Returns:
      The answer, a :class:`Calibration` with ``value = n`` (integer-valued float64) verified feasible and
        ``over = n - 1`` verified infeasible (``0`` when ``n = 1``). The certified bound is nonincreasing in
        ``n`` up to the engine's bracket width (adding a user is a post-processing of the two-count pair), so
        ``n`` is the smallest feasible count (never overshoots the target: ``upper <= target_eps`` at
        ``value``). With ``rounds > 1``, ``blanket_points`` holds the profile points of the rule certified.

    Raises:
      ValueError: naming the parameter, for a randomizer that is neither a catalog name nor a
        :class:`VRParams`, bad options, a ``target_eps`` not finite and > 0, a bad ``delta``,
        ``n_max``, ``rounds``, ``upper_from`` or ``sample_rate``, or ``scaled_variant`` for a randomizer
        it is not proven for.
    """
    if isinstance(randomizer, str):
        params = check_options(randomizer, options).fn(**options)
    elif isinstance(randomizer, VRParams):
        if options:
            raise ValueError(f"{next(iter(options))}: options are only accepted with a catalog name")
        params = randomizer
    else:
        raise ValueError("randomizer: must be a catalog name or a VRParams")
    target, delta = f64(target_eps), f64(delta)
    _check_target(target)
    rounds = _check_rounds(rounds)
    nm = float(n_max)
    if not (nm >= 1 and nm == np.floor(nm) and np.isfinite(nm)):
        raise ValueError("n_max: must be an integer >= 1")
    shape = broadcast_shapes_or_raise(target_eps=target, delta=delta, randomizer=np.empty(np.shape(params.p)))
    target_np = np.broadcast_to(np.asarray(target), shape)
    d_b = jnp.broadcast_to(delta, shape)
    params = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, shape), params)
    g = scalar_sample_rate(sample_rate, "a calibration")
    upper_from = _probed_source(params, upper_from) if g == 1.0 else check_upper_from(upper_from, sampled=True)
    _check_scaled_variant(params, scaled_variant)

    blanket_points = checked_blanket_points(blanket_points)
    # Cost model: a probe at n costs about its window (the engine's largest planned window over the
    # searches amplify runs). n_max comes down by factors of 8 until that window fits ``max_window``;
    # each check is eager planning, no compilation.
    limit = nm
    while limit > 1 and largest_window(params, limit, d_b, scaled_variant) > max_window:
        limit = max(np.floor(limit / 8.0), 1.0)
    lanes = NLanes(jax.tree_util.tree_map(jnp.ravel, params), np.ravel(np.asarray(d_b, np.float64)),
                    np.ravel(np.asarray(target_np, np.float64)))
    if rounds > 1:
        tiers, rule, verify = round_tiers(lanes, rounds, discretization, blanket_points, g, engine_rtol)
    else:
        tiers, rule, verify = one_round_tiers(lanes, upper_from, g, engine_rtol, scaled_variant)
    from jaxshuffle.accountant.count_search import krr_floor

    # a certified lower bound above the target at the limit refuses without the rule's probe there
    floor = krr_floor(lanes, engine_rtol) if g == 1.0 else None
    with quick_probes():  # many programs, each run a few times: compilation dominates a cold call
        found = search_n(tiers, rule, lanes, limit, max_probes, verify=verify, rounds=rounds, floor=floor)
    status = np.where(found.unattainable, CalibrationStatus.UNATTAINABLE,
                      np.where(found.done, CalibrationStatus.CONVERGED, CalibrationStatus.MAX_ITER)).astype(np.int8)
    value, over, upper = (jnp.asarray(x.reshape(shape)) for x in (found.value, found.over, found.upper))
    _, proof = certified_clone(params)
    proof = CloneProof.NONE if g < 1.0 else proof
    points = None
    if rounds > 1:
        used = effective_points(lanes.params, found.value, blanket_points, g)
        points = jnp.asarray(np.where(np.isfinite(found.value), used, 0).reshape(shape))
    return Calibration(value, over, upper, jnp.asarray(status.reshape(shape)), found.probes,
                       jnp.broadcast_to(jnp.asarray(proof, jnp.int8), shape), points)
