"""The bracketing search of the blanket engine and its public entry points.

:func:`blanket_epsilon` (certified upper bound for shuffled k-RR, or a dataset's bracket with
``kind=``), :func:`blanket_lower_epsilon` (certified lower bound), :func:`krr_bounds` (both, as
lanes of one program), and the jittable :func:`blanket_epsilon_with_plan`. Each point's bracket
comes from bands and tangents of :func:`jaxshuffle.blanket.kernel.point_divergence`.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxshuffle import _programs
from jaxshuffle._bisect import bisect_jax
from jaxshuffle._config import array_digest, check, remember
from jaxshuffle._numerics import newton_margin
from jaxshuffle.engine import _search as core
from jaxshuffle.engine._search import EpsilonBracket, Status
from jaxshuffle.engine.blanket.kernel import KINDS, coded_sum_form, gaussian_delta, point_divergence, window_start
from jaxshuffle.engine.blanket.plan import (
    BUCKET_FREE_CELLS,
    LOWER_KINDS,
    BlanketPlan,
    bucket_plan,
    check_points,
    choose_walk,
    fit_memory,
    lanes_per_batch,
    plan_blanket,
    plan_cells,
    plan_groups,
    plan_with_spread,
    power_of_two,
)


def _point_search(eps0, k, n, delta, code, *, plan: BlanketPlan, rtol: float, max_iter: int):
    """Certified bracket for one point of sum form ``KINDS[code]``: ``D(lower) > delta >= D(upper)``
    from bands and tangents."""
    kmin = jnp.where(code == KINDS.index("all_z"), 3.0, 2.0)
    # every form is defined for a real k >= kmin: at a real k' it is the form of k-RR with clients
    # sampled per round (docs/math.md 12.10), so the integer check of k stays with the eager callers
    valid = ((eps0 >= 0) & jnp.isfinite(eps0) & (k >= kmin) & (n >= 1)
             & (n == jnp.floor(n)) & (delta > 0) & (delta < 1))
    eps0 = jnp.where(valid, eps0, 1.0)
    k, n, delta = jnp.where(valid, k, 3.0), jnp.where(valid, n, 2.0), jnp.where(valid, delta, 0.5)
    trivial = eps0 == 0  # the randomizer ignores its input: delta = 0 at every eps
    eps0s = jnp.where(trivial, 1.0, eps0)
    f = coded_sum_form(eps0s, k, code)
    s_lo = window_start(n, f.pS, plan.window)
    div = functools.partial(point_divergence, f, n, s_lo=s_lo, plan=plan)
    # The Gaussian model's root as first point (a guess: the search certifies whatever it finds).
    meets = lambda e: ~(gaussian_delta(f, n, jnp.exp(e)) > delta)  # noqa: E731
    _, hi_g = bisect_jax(meets, jnp.zeros(()), eps0s, steps=50)
    x0 = jnp.clip(hi_g, 1e-9, eps0s)
    st0 = jnp.where(valid & ~trivial, Status.MAX_ITER, jnp.where(trivial & valid, Status.ZERO, Status.INVALID))

    def advance(st: core.SearchState, d, lo, hi) -> core.Move:
        x = st.x
        n_amb, tried_zero = st.extra
        is_hi, is_lo = d.upper <= delta, d.lower > delta
        # Convexity in t: the certified tangent is above delta up to its crossing.
        lo_tan, use = core.tangent_lower(x, d.tangent_value, d.tangent_slope, delta, lo, hi)
        lo = jnp.where(use, lo_tan, lo)
        t = jnp.exp(x)
        # Newton on D(t) (convex, decreasing), aimed a margin above the root (relative to the point:
        # newton_margin says why)
        margin = newton_margin(rtol, x, lo, hi)
        newton = core.linear_newton(t, d.value, d.q_mass, delta) + 2.0 * margin
        ok = (d.q_mass > 0) & jnp.isfinite(newton) & (newton > lo) & (newton < hi)
        nxt = jnp.where(ok, jnp.clip(newton, lo + margin, hi - margin), 0.5 * (lo + hi))
        amb = ~is_hi & ~is_lo & (x > 0)
        n_amb = n_amb + amb.astype(jnp.int32)
        nxt = jnp.where(amb, core.band_probe(x, lo, hi, margin, d.upper, d.lower, t, d.q_mass), nxt)
        to_zero = (lo == 0) & ~tried_zero & (newton <= 0.25 * x) & ~amb
        nxt = jnp.where(to_zero, 0.0, nxt)
        zero = (x == 0) & is_hi
        conv = hi - lo <= rtol * hi
        limited = n_amb >= 4
        status = jnp.where(zero, Status.ZERO, jnp.where(conv, Status.CONVERGED, jnp.where(
            limited, Status.ERROR_LIMITED, Status.MAX_ITER))).astype(jnp.int8)
        return core.Move(lo, hi, nxt, status, zero | conv | limited, (n_amb, tried_zero | (x == 0)))

    # Per-lane starting values, not constants: under vmap a constant carry makes the loop's batching rule
    # trace the body (the whole kernel) a second time (core.lane_constant).
    start = core.SearchState(core.lane_constant(valid, 0), core.lane_constant(valid, 0.0, jnp.float64), eps0s,
                             x0, st0.astype(jnp.int8), ~valid | trivial,
                             (core.lane_constant(valid, 0), core.lane_constant(valid, False, bool)))
    st = core.certified_search(div, advance, start, delta, max_iter=max_iter)
    zero = st.status == jnp.int8(Status.ZERO)
    lower = jnp.where(valid, jnp.where(zero, 0.0, st.lo), 0.0)
    upper = jnp.where(valid, jnp.where(zero, 0.0, st.hi), jnp.inf)
    return lower, upper, st.status, st.it


@functools.partial(jax.jit, static_argnames=("plan", "rtol", "max_iter", "gradients"))
def coded_brackets(eps0, k, n, delta, code, *, plan: BlanketPlan, rtol: float, max_iter: int,
                    gradients: bool = True):
    """Certified brackets over flat lanes, lane ``i`` of sum form ``KINDS[code[i]]`` (one program for
    every kind). Invalid lanes: status INVALID, ``lower = 0``, ``upper = inf``. With ``gradients``,
    ``upper`` has implicit gradients in ``eps0`` and ``delta`` (``jax.lax.custom_root`` on
    ``log D(eps) = log delta``); without, the same values from a program about half the size (the
    root equation is a second copy of the kernel, traced and linearised on every call).
    """
    search = functools.partial(_point_search, plan=plan, rtol=rtol, max_iter=max_iter)
    sg = jax.lax.stop_gradient
    # lanes run a few at a time (vmapped inside a batch, sequential across batches, as many as the
    # memory budget allows: lanes_per_batch): one vmap over a large batch grew memory with the batch
    # (64 k-RR points: 9 GB)
    lower, upper, status, it = jax.lax.map(lambda a: search(*a), (sg(eps0), sg(k), sg(n), sg(delta), code),
                                           batch_size=lanes_per_batch(plan))
    if not gradients:
        return EpsilonBracket(lower, upper, status, it)

    def root_eq(eps):
        def one(e, a, kk, nn, dd, cc):
            a = jnp.where(a > 0, a, 1.0)
            f = coded_sum_form(a, kk, cc)
            d = point_divergence(f, nn, e, window_start(sg(nn), sg(f.pS), plan.window), plan)
            return jnp.log(jnp.maximum(d.value, 1e-320)) - jnp.log(dd)
        return jax.vmap(one)(eps, eps0, k, n, delta, code)

    upper = core.implicit_upper(root_eq, upper, status)
    return EpsilonBracket(lower, upper, status, it)


def blanket_epsilon_with_plan(eps0, k, n, delta, *, plan: BlanketPlan, kind: str = "blanket",
                              rtol: float = 1e-6, max_iter: int = 40):
    """Jittable certified bracket over flat float64 arrays ``eps0, k, n, delta`` (shape (P,)).

    ``kind="blanket"``: ``upper`` is a certified upper bound on the shuffled k-RR's epsilon.
    Other kinds (exact datasets): ``lower`` is a certified lower bound on that dataset's
    epsilon (and so on the mechanism's). Invalid points: status INVALID, ``lower = 0``,
    ``upper = inf``. ``upper`` has implicit gradients in ``eps0`` and ``delta``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind: must be one of {KINDS}, got {kind!r}")
    code = jnp.full(jnp.shape(eps0), KINDS.index(kind), dtype=jnp.int32)
    return coded_brackets(eps0, k, n, delta, code, plan=plan, rtol=rtol, max_iter=max_iter)


def eager_brackets(eps0, k, n, delta, code, *, plan: BlanketPlan, rtol: float = 1e-6, max_iter: int = 40):
    """:func:`coded_brackets` for eager callers (concrete flat arrays; lane ``i`` of sum form
    ``KINDS[code[i]]``): the same values, from the program without the implicit-gradient root (no
    caller here differentiates), run as an exported program (:mod:`jaxshuffle._programs`), so a
    warm process loads it instead of tracing the search."""

    def lanes(e, kk, nn, d, c):
        return tuple(coded_brackets(e, kk, nn, d, c, plan=plan, rtol=rtol, max_iter=max_iter, gradients=False))

    args = [np.asarray(x, np.float64) for x in (eps0, k, n, delta)] + [np.asarray(code, np.int32)]

    def run():
        lanes_in = args[0].size
        width = whole_batches(lanes_in, lanes_per_batch(plan), plan_cells(plan))
        padded = [np.concatenate([a, np.repeat(a[-1:], width - lanes_in)]) for a in args] if width > lanes_in else args
        out = _programs.run("blanket-lanes", lanes, (plan, rtol, max_iter), padded)
        return EpsilonBracket(*(np.asarray(x)[:lanes_in] for x in out))

    if args[0].size > RECENT_MAX_LANES:
        return run()
    return remember(_RECENT, array_digest((plan, rtol, max_iter), args), run, RECENT_RESULTS)


def whole_batches(lanes: int, batch: int, lane_cells: float = math.inf) -> int:
    """Lanes to run for ``lanes`` lanes in batches of ``batch`` (a power of two), each lane costing
    ``lane_cells``: a whole number of batches above one batch; up to one batch, the next power of two
    from 2 on where those lanes cost at most :data:`~jaxshuffle.blanket.plan.BUCKET_FREE_CELLS` (cheap
    calls of 1 to ``batch`` lanes then share three programs, not one per count: a one-point bound's
    single lane and a composition's two deltas run one program), else ``lanes``. ``lax.map`` traces a
    lane count that is not a multiple of its batch twice (the whole batches and the rest), so padding
    (copies of the last lane, dropped afterwards) halves the program and its compilation for the price
    of evaluating at most ``batch - 1`` more lanes."""
    if lanes > batch:
        return -(-lanes // batch) * batch
    ladder = min(max(2, power_of_two(lanes)), batch)
    return ladder if ladder * lane_cells <= BUCKET_FREE_CELLS else lanes


#: eager brackets kept per process, keyed by a digest of every input (a pure function: a repeated call,
#: such as amplify re-certifying a calibration's answer and the CLI reporting it, costs nothing); only
#: calls of at most RECENT_MAX_LANES lanes, so the store holds at most about 0.5 MB whatever the batches
RECENT_RESULTS = 16
RECENT_MAX_LANES = 1024
_RECENT: dict = {}


def blanket_epsilon(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, *, kind: str = "blanket",
                    rtol: float = 1e-6, plan: BlanketPlan | None = None,
                    max_iter: int = 40, real_k: bool = False):
    """Certified epsilon bracket of the k-RR sum form ``kind`` for ``n`` users at ``delta``.

    ``real_k=True`` accepts a real ``k`` (``>= 2``; ``>= 3`` for ``all_z``): every form at a real
    ``k'`` is the same form of k-RR with clients sampled per round (docs/math.md 12.10,
    :mod:`jaxshuffle.accountant.subsampling`). The blanket pair and its sum forms: docs/math.md section 10.

    Args:
      eps0: local budget of k-ary randomized response, finite, in [0, 50].
      k: number of values, an integer >= 2 (>= 3 for ``kind="all_z"``), below 1e12.
      n: number of users, an integer in [1, 1e12].
      delta: target delta in (0, 1).
      kind: the sum form: ``"blanket"`` (default; the blanket pair, every dataset of the others), or
        one exact dataset of the others: ``"all_z"``, ``"all_x0"``, ``"all_x0_mirror"``.
      rtol: relative width of the bracket.
      plan: a :class:`~jaxshuffle.blanket.BlanketPlan` from :func:`plan_blanket` covering every point;
        ``None`` (default) plans here (a plan only sets cost, never soundness).
      max_iter: iteration cap of the search (``status = MAX_ITER`` where it is reached; still certified).
      real_k: accept a real ``k`` (clients sampled per round, above).

    Returns:
      The bracket, a :class:`jaxshuffle.search.EpsilonBracket` (broadcast shape of the inputs).
        ``kind="blanket"`` (default): ``upper`` is a certified upper bound (errs high) on the epsilon of the
        shuffled k-ary randomized response (every dataset of the others), ``lower`` certifies that the blanket
        bound itself cannot go lower. For an exact dataset's ``kind``, the bracket of that dataset's epsilon:
        its ``lower`` is a certified lower bound (errs low) on the shuffled k-RR's epsilon.

    Raises:
      ValueError: naming the parameter (``eps0``, ``k``, ``n``, ``delta``, ``kind``) for bad input.

    Example::

        >>> import jaxshuffle.blanket as bl
        >>> float(bl.blanket_epsilon(1.0, 3, 2, 0.01).upper)  # doctest: +ELLIPSIS
        0.96940...
    """
    points = check_points(eps0, k, n, delta, kind, integer_k=not real_k)
    res = _grouped_lanes(points, (kind,), plan, lambda *p: plan_blanket(*p, kind=kind), rtol, max_iter)
    return type(res)(*(jnp.asarray(x[0].reshape(points[0].shape)) for x in res))


class KaryRRBounds(NamedTuple):
    """Both sides for shuffled k-ary RR (:func:`krr_bounds`), arrays of the points' shape.

    Attributes:
      upper: certified upper bound on the shuffled k-RR's epsilon (the blanket pair's bracket, upper end).
      lower: certified lower bound: the largest certified lower end over the exact all-z (k >= 3),
        all-x0 and mirrored all-x0 datasets of the others.
      status: search status of ``upper``.
      status_lower: search status of the dataset giving ``lower``.
    """

    upper: jax.Array
    lower: jax.Array
    status: jax.Array
    status_lower: jax.Array


def _merged_plan(e, kk, nn, d, kinds, block: int = 64, chunk: int = 8, has_z=None) -> BlanketPlan:
    """One plan covering the sum forms ``kinds`` of every point (all_z only where ``has_z``, default k >= 3)."""
    has_z = kk >= 3 if has_z is None else has_z
    planned = [plan_with_spread(e[sel], kk[sel], nn[sel], d[sel], kind=kind, block=block, chunk=chunk)
               for kind in kinds for sel in [has_z if kind == "all_z" else np.ones_like(has_z)] if np.any(sel)]
    plans = [plan for plan, _ in planned]
    # lines and max_step snapped up to powers of two: calls at nearby points (a calibration's
    # probes) share one compiled program; a larger plan only costs time, never soundness
    max_step = power_of_two(max(p.max_step for p in plans))
    spread = max(s for _, s in planned)
    return fit_memory(BlanketPlan(window=max(p.window for p in plans), block=plans[0].block,
                                  lines=power_of_two(max(p.lines for p in plans)), max_step=max_step,
                                  chunk=min(p.chunk for p in plans), walk=choose_walk(max_step, spread)), nn)


def _kind_lanes(points, kinds, plan: BlanketPlan, rtol: float, max_iter: int, has_z=None):
    """Brackets of every point (``points``: validated numpy ``eps0, k, n, delta`` of one shape) for each
    sum form of ``kinds``, as one batch: arrays (len(kinds), P).

    all_z needs a third input (``has_z``, default k >= 3): elsewhere its lane repeats all_x0 (same value,
    so never the larger one)."""
    P = points[1].size
    has_z = points[1].ravel() >= 3 if has_z is None else np.ravel(has_z)
    codes = np.concatenate([np.where(has_z, KINDS.index("all_z"), KINDS.index("all_x0")) if kind == "all_z"
                            else np.full(P, KINDS.index(kind)) for kind in kinds])
    e, kk, nn, d = (np.tile(x.ravel(), len(kinds)) for x in points)
    res = eager_brackets(e, kk, nn, d, codes, plan=plan, rtol=rtol, max_iter=max_iter)
    return type(res)(*(x.reshape(len(kinds), P) for x in res))


def _grouped_lanes(points, kinds, plan: BlanketPlan | None, make_plan, rtol: float, max_iter: int, has_z=None):
    """:func:`_kind_lanes` (numpy arrays ``(len(kinds), P)``), the points split by
    :func:`~jaxshuffle.blanket.plan.plan_groups` with a plan each (``make_plan(*group points)``, or
    ``make_plan(*group points, has_z)`` where ``has_z`` is given, put on the programs' ladder by
    :func:`~jaxshuffle.blanket.plan.bucket_plan`), or as one group under ``plan`` when given.
    A plan never affects soundness, only cost."""
    P = points[0].size
    out = EpsilonBracket._make(np.zeros((len(kinds), P), t) for t in (np.float64, np.float64, np.int8, np.int32))
    if P == 0:  # no points, no programs: empty results, as jaxshuffle.epsilon
        return out
    # flat arrays for the grouping and each group's plan alike: a batch that stays one group is planned
    # on the same arrays twice, which the planner's memo answers the second time
    flat = tuple(np.ravel(x) for x in points)
    groups = [np.arange(P)] if plan is not None else plan_groups(*flat, kinds=kinds)
    for ix in groups:
        sub = tuple(x[ix] for x in flat)
        z = None if has_z is None else np.ravel(has_z)[ix]
        own = plan or bucket_plan(make_plan(*sub) if z is None else make_plan(*sub, z), sub[2], ix.size * len(kinds))
        res = _kind_lanes(sub, kinds, own, rtol, max_iter, z)
        for o, r in zip(out, res):
            o[:, ix] = np.asarray(r)
    return out


def plan_krr_bounds(eps0, k, n, delta, *, block: int = 64, chunk: int = 8) -> BlanketPlan:
    """One plan covering the blanket pair and the exact datasets of every point (eager), for
    :func:`krr_bounds`."""
    e, kk, nn, d = check_points(eps0, k, n, delta, "blanket")
    return _merged_plan(e, kk, nn, d, ("blanket",) + LOWER_KINDS, block, chunk)


def krr_bounds(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, *, rtol: float = 1e-6,
               plan: BlanketPlan | None = None, max_iter: int = 40, k_forms: ArrayLike | None = None) -> KaryRRBounds:
    """Certified upper (blanket pair) and lower (exact datasets) bounds for shuffled k-ary RR.

    One compiled program evaluates the four sum forms of every point as lanes of one batch
    (docs/math.md section 10). ``upper`` errs high and ``lower`` errs low, each by at most the
    certified band of its search (``rtol``).

    Args:
      eps0: local budget of k-ary randomized response, finite, in [0, 50].
      k: number of values, an integer >= 2, below 1e12.
      n: number of users, an integer in [1, 1e12].
      delta: target delta in (0, 1).
      rtol: relative width of each search's bracket.
      plan: a :class:`~jaxshuffle.blanket.BlanketPlan` covering the blanket pair and the exact datasets
        of every point (:func:`~jaxshuffle.blanket.plan_krr_bounds`); ``None`` (default) plans here.
      max_iter: iteration cap of each search.
      k_forms: a real ``k' >= k`` at which every sum form is evaluated instead of ``k`` (clients
        sampled per round: :func:`jaxshuffle.accountant.subsampling.subsampled_krr_k`, docs/math.md
        12.10), in ``[k, 1e12)``; the all-z dataset is still used only where the integer ``k >= 3``
        (a third input exists). ``None`` (default): ``k``.

    Returns:
      Both sides, a :class:`KaryRRBounds` (broadcast shape of the inputs): ``upper`` a certified upper bound
        (errs high), ``lower`` a certified lower bound (errs low), and their search statuses.

    Raises:
      ValueError: naming the parameter (``eps0``, ``k``, ``n``, ``delta``, ``k_forms``) for bad input.
    """
    points = check_points(eps0, k, n, delta, "blanket")
    kinds = ("blanket",) + LOWER_KINDS
    has_z = None
    if k_forms is not None:
        has_z = points[1] >= 3
        k_real = np.broadcast_to(np.asarray(k_forms, np.float64), points[1].shape)
        check(np.isfinite(k_real) & (k_real >= points[1]) & (k_real < 1e12), "k_forms",
              "must be a real number in [k, 1e12)", value=k_real)
        points = (points[0], k_real, points[2], points[3])
    shape = points[0].shape
    res = _grouped_lanes(points, kinds, plan, lambda e, kk, nn, d, z=None: _merged_plan(e, kk, nn, d, kinds, has_z=z),
                         rtol, max_iter, has_z)
    lows, st_lows = res.lower[1:], res.status[1:]
    best = np.argmax(lows, axis=0)
    status_lower = np.take_along_axis(st_lows, best[None], axis=0)[0]
    return KaryRRBounds(*(jnp.asarray(x.reshape(shape)) for x in (res.upper[0], np.max(lows, axis=0),
                                                                   res.status[0], status_lower)))


def blanket_lower_epsilon(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, *, rtol: float = 1e-6):
    """Certified *lower* bound on the shuffled k-RR's epsilon: the largest certified lower end of
    the exact all-z (k >= 3) and all-x0 (both directions) datasets' epsilons.

    Lower bounds of the blanket engine: docs/math.md section 10.

    Args:
      eps0, k, n, delta: as in :func:`krr_bounds`.
      rtol: relative width of each dataset's bracket.

    Returns:
      The bracket, a :class:`jaxshuffle.search.EpsilonBracket` whose ``lower`` is the certified value (errs
        low: each dataset's bracket moves its lower end only where its divergence band's lower side exceeds
        delta) and whose ``upper`` is the largest of the datasets' upper ends (an estimate).

    Raises:
      ValueError: naming the parameter (``eps0``, ``k``, ``n``, ``delta``) for bad input.
    """
    points = check_points(eps0, k, n, delta, "blanket")
    shape = points[0].shape
    res = _grouped_lanes(points, LOWER_KINDS, None,
                         lambda e, kk, nn, d: _merged_plan(e, kk, nn, d, LOWER_KINDS), rtol, 40)
    lower, upper, status = (jnp.asarray(np.max(x, axis=0).reshape(shape)) for x in (res.lower, res.upper, res.status))
    return EpsilonBracket(lower, upper, status, jnp.asarray(res.iterations[0].reshape(shape)))
