"""The search behind :func:`~jaxshuffle.accountant.calibrate.calibrate_n`: the smallest count of users on
tiers of certified bounds, cheapest first.

Each tier's bound is at least the next one's (a looser certified bound), so a count a looser tier
accepts, the rule accepts too; each tier searches from the last one's answer, and only the last (the
calibrated rule itself) decides. Steps on ``log n``: the crossing predicted from the probes' slope,
regula falsi once bracketed, bisection where that stalls. Why the answer never overshoots the target:
docs/math.md section 15.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle import _programs
from jaxshuffle.accountant.amplify import amplification_jobs, amplify
from jaxshuffle.accountant.mechanism import expects_blanket
from jaxshuffle.accountant.rounds import composed_upper, krr_epsilon_floor, two_count_rules_upper
from jaxshuffle.engine.blanket import plan_cells
from jaxshuffle.engine.two_count.plan import R_FLOOR, TRUNC_FRACTION, plan_windows
from jaxshuffle.pld.blanket import default_blanket_points
from jaxshuffle.randomizers import VRParams


def blanket_upper(eps0, k, n, delta, plan, rtol: float) -> np.ndarray:
    """Certified upper end of the blanket pair's epsilon bracket at every point (flat lanes of
    :func:`jaxshuffle.blanket.eager_brackets`, an exported program: a later process skips tracing it)."""
    from jaxshuffle.engine.blanket import KINDS, eager_brackets

    shape = np.shape(eps0)
    e, kk, nn, d = (np.broadcast_to(np.asarray(a, np.float64), shape).ravel() for a in (eps0, k, n, delta))
    code = np.full(e.size, KINDS.index("blanket"), np.int32)
    return np.asarray(eager_brackets(e, kk, nn, d, code, plan=plan, rtol=rtol).upper).reshape(shape)


#: Profile points of the k-RR blanket pair's PLD in :func:`calibrate_n`'s T-round rule when the caller
#: leaves ``blanket_points`` unset (composed_epsilon's default, 512 + 64, costs 17-23 s per probe at
#: n ~ 6600 on a 2-core CPU, 64 about 2.5 s; grr(1, 10), T = 10, delta = 1e-6 at n = 6642: 0.10007
#: against 0.099996, 0.07 % looser). Stated in the result (``Calibration.blanket_points``).
CALIBRATION_BLANKET_POINTS = 64
#: Relative width at which a search on a looser tier stops: its answer only brackets the next tier's.
TIER_RTOL = 0.02
#: T rounds: the rule without the blanket PLD is first probed at the looser tier's answer over this.
ENTRY_FRACTION = 4.0
#: How far past the predicted crossing a one-sided step aims (relative), to land on the other side.
STEP_MARGIN = 0.02
#: Inside :func:`quick_probes`, the two-count search runs its quickly compiled program where a call's
#: window counts x lanes are at most this (measured on a CPU: 1 s less compilation per program, and
#: 6-8x slower evaluation, 0.14 s against 0.02 s at window 131072 and one lane).
QUICK_SEARCH_COUNTS = 2**17
#: Inside :func:`quick_probes`, the blanket kernel runs its quickly compiled program where a call's
#: cells (lanes x :func:`jaxshuffle.engine.blanket.plan_cells`, the model of ``point_cells``)
#: are at most this (measured on a CPU: 2-3 s to compile against 7-11 s, and 2-4x slower evaluation,
#: 0.54 s against 0.24 s at 0.2 M cells).
QUICK_BLANKET_CELLS = 2**18


def _cheap_program(name: str, static, arrays: list) -> bool:
    """Whether a call of an engine program is cheap enough to evaluate for its quick program (static:
    ``(plan, rtol, max_iter)``): :data:`QUICK_SEARCH_COUNTS`, :data:`QUICK_BLANKET_CELLS`."""
    plan, lanes = static[0], int(np.size(arrays[0]))
    if name == "epsilon-search":
        return plan.window * lanes <= QUICK_SEARCH_COUNTS
    if name == "blanket-lanes":
        return lanes * plan_cells(plan) <= QUICK_BLANKET_CELLS
    return False


def quick_probes():
    """The block in which :func:`calibrate_n` and ``calibrate_eps0`` search: their probes plan a window
    per count (per eps0), so a cold
    call meets a dozen engine programs, each run a few times, and their compilation (3-11 s each on a
    CPU, the blanket kernel's the longest) dominates. Inside, each cheap call
    (:func:`_cheap_program`) runs the quickly compiled program
    (:func:`jaxshuffle._programs.quick_while`): the same computation up to the order of float
    operations (a few ulps, which the certificate's budgets absorb); the answer is still the rule's
    certified value."""
    return _programs.quick_while(_cheap_program)


class NLanes(NamedTuple):
    """The points of a :func:`calibrate_n` call, flattened: ``params`` (VRParams of shape ``(P,)``),
    ``delta`` and ``target`` (numpy ``(P,)``)."""

    params: VRParams
    delta: np.ndarray
    target: np.ndarray

    def point(self, i) -> VRParams:
        return jax.tree_util.tree_map(lambda a: a[i], self.params)

    def twice(self) -> VRParams:
        return jax.tree_util.tree_map(lambda a: jnp.concatenate([a, a]), self.params)


# A tier: ``make(hi)`` gives the probe function ``(n, active) -> certified upper`` (numpy, per lane;
# values of inactive lanes are ignored) for counts up to ``hi``. Every tier but the last is at least the
# next one (so its feasible counts are feasible under the calibrated rule); it only brackets the search.
_Tier = Callable[[np.ndarray], Callable[[np.ndarray, np.ndarray], np.ndarray]]


def one_round_tiers(lanes: NLanes, upper_from: str, g: float, rtol: float, scaled_variant: bool):
    """One round: amplify's ``upper`` is the rule (probed as such). For k-ary RR under ``"best"``
    (clients not sampled) two tiers: the two-count rules (amplify's ``"worst-case"``, never below its
    ``"best"``), then the rule with the blanket pair under one plan for every count up to the first
    tier's answer (:func:`_krr_n_upper`); the answer is then re-certified by amplify itself."""

    def amplified(source):
        def at(x, active=None):
            return np.asarray(amplify(lanes.params, jnp.asarray(x), lanes.delta, rtol=rtol,
                                      scaled_variant=scaled_variant, with_paper=False, upper_from=source,
                                      sample_rate=g).upper)
        return at

    rule = amplified(upper_from)
    if g < 1.0 or upper_from != "best" or lanes.params.krr() is None:
        return [lambda hi: rule], rule, None

    def verify(v, below):  # the rule at two counts per point, one batched call, by the optimised programs
        with _programs.optimised_programs():
            up = np.asarray(amplify(lanes.twice(), jnp.asarray(np.concatenate([v, below])),
                                    np.concatenate([lanes.delta, lanes.delta]), rtol=rtol,
                                    scaled_variant=scaled_variant, with_paper=False, upper_from=upper_from).upper)
        return up[:v.size], up[v.size:]

    return [lambda hi: amplified("worst-case"),
            lambda hi: _krr_n_upper(lanes, hi, rtol=rtol, scaled_variant=scaled_variant)], rule, verify


def _krr_n_upper(lanes: NLanes, n_hi: np.ndarray, *, rtol: float, scaled_variant: bool):
    """Probe function of a k-RR calibration of n: amplify's ``"best"`` rule (the two-count rules,
    and the blanket pair where amplify's cost rules run it: blanket messages expected, a lane within
    :data:`~jaxshuffle.blanket.AUTO_MAX_CELLS`; ``0`` where ``delta >= beta``), with the blanket pair
    evaluated under **one** plan covering every lane at its ``n_hi`` (a plan covering larger ``n``
    covers smaller, at some cost: never a soundness question, :func:`jaxshuffle.blanket.plan_blanket`),
    so that every probe runs one compiled program; lanes over the memory budget keep the two-count
    rules."""
    from jaxshuffle.accountant.amplify import UpperSource
    from jaxshuffle.engine.blanket import AUTO_MAX_CELLS, BlanketMemoryError, plan_blanket, point_cells, shared_plan

    mech = lanes.params.krr()
    assert mech is not None  # one_round_tiers' condition
    eps0, k = (np.broadcast_to(np.asarray(a, np.float64), lanes.delta.shape) for a in (mech.eps0, mech.k))
    n_hi = np.asarray(n_hi, np.float64)
    runs = (eps0 <= 50.0) & (k < 1e12) & (n_hi <= 1e12) & expects_blanket(eps0, k, n_hi)
    if runs.any():
        runs[runs] = point_cells(eps0[runs], k[runs], n_hi[runs], lanes.delta[runs]) <= AUTO_MAX_CELLS
    plan = None
    if runs.any():
        sel = (eps0[runs], k[runs], n_hi[runs], lanes.delta[runs])
        try:
            plan = shared_plan(plan_blanket(*sel), sel[2])
        except BlanketMemoryError:
            plan = None

    def upper_at(x, active=None):
        x = np.asarray(x, np.float64)
        rep = amplify(lanes.params, jnp.asarray(x), lanes.delta, rtol=rtol, scaled_variant=scaled_variant,
                      with_paper=False, upper_from="worst-case")
        two = np.asarray(rep.upper)
        if plan is None:
            return two
        useful = runs & expects_blanket(eps0, k, x)
        useful[runs] &= point_cells(eps0[runs], k[runs], x[runs], lanes.delta[runs]) <= AUTO_MAX_CELLS
        if not useful.any():
            return two
        blanket = np.full(two.shape, np.inf)
        # every planned lane runs (one program shape for every probe); only the useful ones are read
        blanket[runs] = blanket_upper(eps0[runs], k[runs], x[runs], lanes.delta[runs], plan, rtol)
        trivial = np.asarray(rep.upper_source) == UpperSource.TV
        return np.where(trivial | ~useful, two, np.minimum(two, blanket))

    return upper_at


def krr_floor(lanes: NLanes, rtol: float):
    """Where the lanes are k-ary RR (clients not sampled): ``(n, active) -> a certified lower bound``
    on the shuffled mechanism's epsilon at ``n`` users (numpy, per lane): the lower end of the
    certified epsilon bracket of the Theorem 5.1 pair of :func:`~jaxshuffle.randomizers.grr_lower`
    (one two-count search, one program: as cheap as a probe of the cheapest tier); 0 (no claim)
    where those parameters are not defined. Else None.

    The mechanism's epsilon is nonincreasing in ``n`` (a user whose input is the same in both
    datasets adds a message that is a post-processing), every certified upper bound is at least it,
    and over ``T`` rounds on the same users the composition's epsilon is at least one round's (a
    round is a post-processing of all of them). So a value above the target at the search's limit
    proves that no count up to the limit meets it, under any certified rule: :func:`search_n`
    refuses there without the rule's probe (minutes at the limit where the blanket pair runs)."""
    if lanes.params.krr() is None:
        return None

    def at(x, active):  # every lane (one batched search: at the limit all share one window)
        floor = krr_epsilon_floor(lanes.params, np.asarray(x, np.float64), lanes.delta, rtol)
        assert floor is not None  # k-ary RR, checked above
        return floor

    return at


def effective_points(params: VRParams, n, blanket_points: int | None, g: float) -> np.ndarray:
    """The blanket-pair PLD's profile points of :func:`calibrate_n`'s T-round rule at counts ``n``:
    the caller's ``blanket_points``; unset, :data:`CALIBRATION_BLANKET_POINTS` where
    ``composed_epsilon``'s default builds that PLD (k-ary RR up to its n cap; a round with clients
    sampled at every n), else 0; 0 where there is no such pair (no k-RR, clients not sampled)."""
    n = np.asarray(n, np.float64)
    if params.krr() is None and g == 1.0:
        return np.zeros(n.shape, np.int64)
    if blanket_points is not None:
        return np.full(n.shape, blanket_points, np.int64)
    return default_blanket_points(n, g, CALIBRATION_BLANKET_POINTS)


def round_tiers(lanes: NLanes, rounds: int, discretization, blanket_points: int | None, g: float, rtol: float):
    """T rounds: the rule is :func:`~jaxshuffle.accountant.rounds.composed_upper` (composed_epsilon's
    ``upper``) with the blanket pair's PLD at :func:`effective_points`. Tiers, cheapest first: basic
    and advanced composition of the two-count rules' one-round bound (clients not sampled: every lane
    in one batched amplify call; never below the rule's basic and advanced composition, whose
    one-round bound is amplify's smaller ``upper``); where a blanket PLD may be built, the worst-case
    pair's bounds without any blanket work (clients not sampled:
    :func:`~jaxshuffle.accountant.rounds.two_count_rules_upper`, basic and advanced composition from
    the two-count rules' one-round bound, so no blanket engine search at counts the rule never
    probes; sampled: ``below=inf``, the sampled round's basic and advanced composition); the rule."""
    from jaxshuffle.accountant.rounds import advanced_composition, basic_composition

    T = float(rounds)

    def per_lane(bound):
        """``(n, active) -> bound(point, n, delta)`` lane by lane (each lane's PLD is its own)."""
        def at(x, active):
            out = np.full(np.shape(x), np.nan)
            for i in np.flatnonzero(active):
                point = lanes.point(i)
                if float(np.asarray(point.n_blanket(x[i]))) < 1:
                    out[i] = np.inf  # one user and no blanket: no shuffle, no round PLD; inf is an upper bound
                    continue
                out[i] = bound(point, float(x[i]), float(lanes.delta[i]))
            return out
        return at

    def composed(below):
        def bound(point, n, delta):
            pts = int(effective_points(point, n, blanket_points, g))
            return composed_upper(point, n, rounds, delta, discretization=discretization, blanket_points=pts,
                                  sample_rate=g, below=below)
        return bound

    def two_count_pld(point, n, delta):
        return two_count_rules_upper(point, n, rounds, delta, discretization=discretization)

    def two_count(x, active):
        d = lanes.delta
        e = np.asarray(amplify(lanes.twice(), jnp.asarray(np.concatenate([x, x])),
                               np.concatenate([d / T, d / (2 * T)]), rtol=rtol, with_paper=False,
                               upper_from="worst-case").upper)
        basic = basic_composition(e[:d.size], T)
        return np.minimum(basic, advanced_composition(e[d.size:], T, d))

    rule = per_lane(composed(None))
    middle = per_lane(composed(np.inf) if g < 1.0 else two_count_pld)
    tiers: list[_Tier] = [] if g < 1.0 else [lambda hi: two_count]
    if (lanes.params.krr() is not None or g < 1.0) and blanket_points != 0:
        tiers.append(lambda hi: middle)
    tiers.append(lambda hi: rule)
    return tiers, rule, None


class _FoundN(NamedTuple):
    value: np.ndarray
    over: np.ndarray
    upper: np.ndarray
    done: np.ndarray
    unattainable: np.ndarray
    probes: int


def search_n(tiers: list[_Tier], rule, lanes: NLanes, limit: float, max_probes: int, *,
              verify=None, rounds: int = 1, floor=None) -> _FoundN:
    """The smallest count ``n <= limit`` whose certified bound meets each lane's target.

    One probe at ``limit`` with the cheapest tier first: feasible there, the search runs from it;
    else, where ``floor`` (``(n, active) -> certified lower bound`` on the mechanism's epsilon,
    :func:`krr_floor`) is above the target at the limit, the target is unattainable at once (no
    count up to the limit meets it under any certified rule; ``upper``: the cheapest tier's value
    there, the rule is not run); else the rule itself decides there (no tier above it: one probe),
    and a target missed there is unattainable (``upper``: the rule's value at the limit). Then each
    tier in turn from the last tier's answer (feasible under every tighter tier); looser tiers stop
    within :data:`TIER_RTOL`.
    The last tier's feasible end is the answer: the rule's own probe (T rounds, amplify alone), or,
    with ``verify`` (k-RR's one round), re-certified by amplify from scratch, with ``over``, by
    :func:`_finish_n`."""
    finish = verify is not None
    target = lanes.target
    P = target.size
    every = np.ones(P, bool)
    at_limit = np.full(P, float(limit))
    up0 = np.asarray(tiers[0](at_limit)(at_limit, every), np.float64)
    probes = 1
    reach = up0 <= target
    start = np.zeros(P, np.int64)
    up_hi = np.where(reach, up0, np.nan)
    reported = up0
    ask = ~reach if len(tiers) > 1 else np.zeros(P, bool)
    if floor is not None and ask.any():
        low = np.asarray(floor(at_limit, ask), np.float64)
        probes += 1
        ask &= ~(low > target)  # the mechanism's epsilon is above the target at every count up to the limit
    if ask.any():
        up_rule = np.asarray(rule(at_limit, ask), np.float64)
        probes += 1
        now = ask & (up_rule <= target)
        start[now] = len(tiers) - 1
        up_hi = np.where(now, up_rule, up_hi)
        reported = np.where(ask, up_rule, up0)
        reach |= now
    unattainable = ~reach
    lo, hi = np.zeros(P), np.where(reach, at_limit, 1.0)  # (unattainable lanes: 1, a valid count never read)
    done = unattainable.copy()
    slope = np.full(P, -0.5)
    x0 = np.full(P, np.nan)
    for j, make in enumerate(tiers):
        last = j == len(tiers) - 1
        act = reach & (start <= j)
        if not act.any():
            continue
        if j > 0:
            entering = act & (start < j)
            up_hi = np.where(entering, np.nan, up_hi)  # a looser tier's value says nothing of this one's
            lo = np.where(entering, 0.0, lo)
            if rounds > 1 and last and len(tiers) > 2:  # the blanket PLD's gain, guessed (placement only)
                x0 = np.where(entering, _guess_from_one_round(lanes, rounds, hi, slope, entering), np.nan)
            elif rounds > 1:
                # a round's PLD costs about n (its cells): start below the looser tier's answer, where
                # the worst-case pair's PLD composition usually crosses (advanced composition needs
                # several times the users); placement only
                x0 = np.where(entering, np.floor(hi / ENTRY_FRACTION), np.nan)
        probe = make(np.where(act, hi, 1.0))
        (lo, hi, up_hi, slope), ok, more = _integer_root(
            probe, target, _Bracket(lo, hi, up_hi, slope), x0, act, max_probes=max(max_probes - probes, 0),
            rtol=0.0 if last else TIER_RTOL)
        probes += more
        x0 = np.full(P, np.nan)
        done = np.where(act, ok, done)
    value, over, upper = hi.copy(), lo.copy(), up_hi.copy()
    if finish and reach.any():
        value, over, upper, done, more = _finish_n(verify, target, value, over, done, reach)
        probes += more
    elif reach.any():  # the rule at the answer, where the search ends on a count it did not probe
        need = reach & ~np.isfinite(upper)
        if need.any():
            upper = np.where(need, rule(value, need), upper)
            probes += 1
        bad = reach & ~(upper <= target)  # cannot happen (a tier is never below the rule): nothing claimed
        value, upper, done = np.where(bad, np.inf, value), np.where(bad, np.inf, upper), done & ~bad
    value = np.where(unattainable, np.inf, value)
    over = np.where(unattainable, float(limit), over)
    upper = np.where(unattainable, reported, upper)
    return _FoundN(value, over, upper, done, unattainable, probes)


def _guess_from_one_round(lanes: NLanes, rounds: int, n, slope, sel) -> np.ndarray:
    """Where the T-round rule with the blanket pair's PLD likely crosses the target, from the count
    ``n`` where the rule without it does: ``n rho^(-1/slope)`` with ``rho`` amplify's one-round
    ``upper`` over the two-count rules' at ``n`` (the blanket pair's gain in one round; the same
    calls as the rule's basic composition, so its engine results are reused). Placement only."""
    out = np.full(n.shape, np.nan)
    for i in np.flatnonzero(sel):
        point = lanes.point(i)
        d = float(lanes.delta[i])
        targets = np.array([d / rounds, d / (2 * rounds)])  # as the rule's basic and advanced composition
        best = float(np.asarray(amplify(point, float(n[i]), targets, with_paper=False, with_lower=False).upper)[0])
        wc = float(np.asarray(amplify(point, float(n[i]), targets, with_paper=False,
                                      upper_from="worst-case").upper)[0])
        if 0 < best < wc:
            out[i] = np.floor(n[i] * (best / wc) ** (-1.0 / slope[i]))
    return out


class _Bracket(NamedTuple):
    """Per lane, where :func:`_integer_root` stands on one tier: ``lo`` a probed infeasible count (or 0),
    ``hi`` a feasible one, ``up_hi`` the tier's value at ``hi`` (NaN where this tier has not probed it),
    ``slope`` the last measured ``d log(upper) / d log n``."""

    lo: np.ndarray
    hi: np.ndarray
    up_hi: np.ndarray
    slope: np.ndarray


def _integer_root(probe, target, start: _Bracket, x0, act, *, max_probes: int, rtol: float):
    """Per lane: the smallest count in ``(lo, hi]`` of ``start`` whose ``probe`` value is ``<= target``
    (``hi`` known feasible, ``lo`` infeasible or 0), until ``hi - lo <= max(1, rtol hi)``.

    Steps on ``log n`` against ``g = log(upper / target)`` (epsilon falls about as ``n^-1/2``): from
    one side only, the crossing predicted through the last two probes' slope (first ``slope``),
    aimed :data:`STEP_MARGIN` past it; with both sides, regula falsi with the Illinois modification,
    rounded to an integer and kept inside the bracket; a bisection step (geometric while the bracket
    is wide) wherever an upper is not a finite positive number or the bracket (in ``log n``) has not
    halved in three probes. Only where probes land depends on this: ``hi`` is always a probed feasible count (or the
    given one) and ``lo`` a probed infeasible one. ``x0``: the first probe (NaN: from ``up_hi``'s
    prediction, else ``hi`` itself). Returns ``(bracket, done, probes)``, the bracket a :class:`_Bracket`."""
    lo, hi, up_hi, slope = (np.array(a, np.float64) for a in start)
    log_t = np.log(target)
    with np.errstate(divide="ignore", invalid="ignore"):
        g_hi = np.log(up_hi) - log_t
    g_lo = np.full(lo.shape, np.nan)
    side = np.zeros(lo.shape)  # +1: hi moved last, -1: lo moved last (Illinois)
    ref = _log_width(lo, hi)  # bracket width (log) when it last halved
    stall = np.zeros(lo.shape)
    prev_x, prev_g = np.full(lo.shape, np.nan), np.full(lo.shape, np.nan)

    def finished(lo, hi):
        return (hi <= 1) | (hi - lo <= np.maximum(1.0, rtol * hi))

    done = ~act | finished(lo, hi)
    # the first probe: x0, else the crossing predicted from hi's value, else hi itself
    x = np.where(np.isfinite(x0), x0, np.where(np.isfinite(g_hi), _next_count(lo, hi, g_lo, g_hi, slope, stall), hi))
    x = np.clip(x, np.maximum(lo + 1, 1), hi)
    probes = 0
    while not done.all() and probes < max_probes:
        live = ~done
        up = np.asarray(probe(np.where(live, x, hi), live), np.float64)
        probes += 1
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.where(np.isnan(up), np.inf, np.log(up) - log_t)
        ok = live & (up <= target)
        bad = live & ~(up <= target)
        # Illinois: an end kept twice in a row has its value halved (regula falsi's stall)
        g_lo = np.where(ok & (side == 1), 0.5 * g_lo, g_lo)
        g_hi = np.where(bad & (side == -1), 0.5 * g_hi, g_hi)
        side = np.where(ok, 1.0, np.where(bad, -1.0, side))
        hi, g_hi, up_hi = np.where(ok, x, hi), np.where(ok, g, g_hi), np.where(ok, up, up_hi)
        lo, g_lo = np.where(bad, x, lo), np.where(bad, g, g_lo)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = (g - prev_g) / (np.log(x) - np.log(prev_x))
        slope = np.where(live & np.isfinite(s) & (s < 0), np.clip(s, -4.0, -0.05), slope)
        prev_x, prev_g = np.where(live & np.isfinite(g), x, prev_x), np.where(live & np.isfinite(g), g, prev_g)
        width = _log_width(lo, hi)
        halved = width <= 0.5 * ref
        ref, stall = np.where(halved, width, ref), np.where(halved, 0.0, stall + live)
        done = done | (live & finished(lo, hi))
        x = np.where(done, hi, _next_count(lo, hi, g_lo, g_hi, slope, stall))
    return _Bracket(lo, hi, up_hi, slope), done, probes


def _log_width(lo, hi) -> np.ndarray:
    return np.log(hi) - np.log(np.maximum(lo, 0.5))


def _next_count(lo, hi, g_lo, g_hi, slope, stall) -> np.ndarray:
    """The next count :func:`_integer_root` probes in ``(lo, hi)`` (see there)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        llo, lhi = np.log(np.maximum(lo, 1.0)), np.log(hi)
        fin_lo, fin_hi = np.isfinite(g_lo) & (lo >= 1), np.isfinite(g_hi)
        both = fin_lo & fin_hi & (g_lo > g_hi)
        falsi = np.ceil(np.exp(llo + g_lo * (lhi - llo) / (g_lo - g_hi)))
        down = np.floor(np.exp(lhi - g_hi / slope) * (1.0 - STEP_MARGIN))  # from hi alone: just below the crossing
        up = np.ceil(np.exp(llo - g_lo / slope) * (1.0 + STEP_MARGIN))  # from lo alone: just above it
        guess = np.where(both, falsi, np.where(fin_hi & ~fin_lo, down, np.where(fin_lo & ~fin_hi, up, np.nan)))
        wide = (lo >= 1) & (hi > 2.0 * lo + 2.0)
        # geometric while wide, from 1 where nothing infeasible is known yet: a bound of exactly 0 at hi
        # (delta past the pair's largest divergence) predicts nothing, and halving log n finds the
        # crossing in about log2(log2(hi)) probes
        split = np.where(wide | (lo < 1), np.floor(np.sqrt(np.maximum(lo, 1.0) * hi)), np.floor(0.5 * (lo + hi)))
        x = np.where(np.isfinite(guess) & (stall < 3), guess, split)
    return np.clip(x, lo + 1, np.maximum(hi - 1, lo + 1))


def _finish_n(verify, target, value, over, done, reach, tries: int = 4):
    """The search's answer re-certified from scratch by amplify (``verify(v, v - 1)``: both counts in
    one batched call; the search's last tier evaluated the blanket pair under its own plan, which may
    differ in the last digits). Where amplify finds ``value`` infeasible the count moves up (1, 2, 4,
    ... users), where it finds ``value - 1`` feasible, down; after ``tries`` calls the smallest count
    amplify verified feasible is the answer (none: nothing is claimed, ``value = inf``), ``over`` the
    largest count it verified infeasible below that (else the search's), and the point is converged
    where they are adjacent. Returns ``(value, over, upper, done, calls)``."""
    P = target.size
    best, best_up, worst = np.full(P, np.inf), np.full(P, np.inf), np.zeros(P)
    v = np.where(reach, value, 1.0)
    open_ = reach.copy()
    calls = 0
    for j in range(tries):
        if not open_.any():
            break
        b = np.maximum(v - 1.0, 1.0)
        up_v, up_b = (np.asarray(u, np.float64) for u in verify(v, b))
        calls += 1
        feas_v, feas_b = up_v <= target, (v > 1) & (up_b <= target)
        for count, up, feas in ((v, up_v, feas_v), (b, up_b, feas_b)):
            better = open_ & feas & (count < best)
            best, best_up = np.where(better, count, best), np.where(better, up, best_up)
        worst = np.where(open_ & ~feas_v & (v > worst), v, worst)
        worst = np.where(open_ & (v > 1) & ~feas_b & (b > worst), b, worst)
        worst = np.where(worst < best, worst, 0.0)  # below the answer only
        open_ &= ~(np.isfinite(best) & ((best <= 1) | (best - worst <= 1)))
        v = np.where(~feas_v, v + 2.0 ** j, np.where(feas_b, b - 1.0, v))
        v = np.maximum(v, 1.0)
    claimed = reach & np.isfinite(best)
    value = np.where(reach, best, value)
    upper = np.where(claimed, best_up, np.inf)
    over = np.where(claimed & (worst > 0), worst, np.where(claimed, np.minimum(over, value - 1.0), over))
    done = np.where(reach, claimed & ((value <= 1) | ((worst > 0) & (value - worst <= 1))), done)
    return value, over, upper, done, calls


def largest_window(params: VRParams, n: float, delta, scaled_variant: bool) -> int:
    """Largest window (counts) that amplify's searches would plan at ``n`` (eager, no compilation)."""
    info, jobs = amplification_jobs(params, jnp.full(jnp.shape(delta), n), delta, scaled_variant=scaled_variant,
                                    with_paper=False)
    n_engine = np.ravel(np.asarray(info.n_engine))
    widest = 0
    for job in jobs:
        need = np.ravel(np.asarray(job.needed))
        if not need.any():
            continue
        fields = [np.ravel(np.asarray(x))[need] for x in job.pair.broadcast().arrays()]
        r_sum = np.maximum(fields[3], R_FLOOR) + np.maximum(fields[4], R_FLOOR)
        try:
            L, _ = plan_windows(n_engine[need], r_sum, TRUNC_FRACTION * np.ravel(np.asarray(job.delta))[need])
        except ValueError:  # beyond what the engine holds at all
            return 1 << 62
        widest = max(widest, int(L.max()))
    return widest
