"""Static shapes and the memory model of the blanket programs.

:class:`BlanketPlan` is the static shape of one compiled blanket program (window, block, lines,
max step, chunk); :func:`plan_blanket` plans it eagerly for k-RR points from the kernel's
geometry (:func:`plan_geometry`, also used by :mod:`jaxshuffle.blanket_matrix`), and
:func:`fit_memory` / :func:`lanes_per_batch` keep it within the memory budget
(:data:`BYTES_PER_CELL`, :func:`lane_bytes`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from jax.typing import ArrayLike

from jaxshuffle._bisect import bisect_fixed
from jaxshuffle._config import array_digest, check, remember, require_x64
from jaxshuffle._numerics import quarter_octave, quarter_octaves
from jaxshuffle.engine.blanket.kernel import KINDS, BlanketPlan, SumForm, coefficients, gaussian_delta, krr_sum_form
from jaxshuffle.engine.two_count.plan import memory_budget, plan_windows

#: lanes (point x sum form) searched at once; more lanes run one batch after another (bounded memory)
LANES_PER_BATCH = 8
#: blocks evaluated together by default (fewer where the window has fewer, or memory asks: fit_memory)
DEFAULT_CHUNK = 8


#: Bytes one lane (one point and sum form) of a compiled blanket search holds per cell of a chunk
#: (``2 * block`` counts times ``lines + 1`` boundary lines, ``chunk`` blocks at once): XLA's own
#: memory analysis of the k-RR and matrix searches on CPU, rounded up
#: (tests/test_blanket.py::test_lane_memory_model_bounds_xla checks that it stays above).
BYTES_PER_CELL = 2400


class BlanketMemoryError(ValueError):
    """A point needs more memory per lane than the budget allows, even one block at a time."""


def lane_bytes(plan: BlanketPlan) -> int:
    """Estimated peak bytes of one lane of a blanket search with ``plan`` (upper estimate)."""
    return BYTES_PER_CELL * plan.chunk * 2 * plan.block * (plan.lines + 1) + 64 * plan.window


def fit_memory(plan: BlanketPlan, n, memory: float | None = None) -> BlanketPlan:
    """``plan`` with ``chunk`` halved until :data:`LANES_PER_BATCH` lanes fit the memory budget (default
    :data:`jaxshuffle.plan.DEFAULT_MEMORY_BYTES`); a smaller chunk costs little time, only memory.

    Raises :class:`BlanketMemoryError` (a ValueError naming ``n``) when one lane alone, one block
    at a time, exceeds the budget: asked of XLA, such a plan would end in an out-of-memory abort.
    """
    budget = memory_budget(memory)
    while plan.chunk > 1 and LANES_PER_BATCH * lane_bytes(plan) > budget:
        plan = plan._replace(chunk=plan.chunk // 2)
    if lane_bytes(plan) > budget:
        n_max = float(np.max(n))
        raise BlanketMemoryError(
            f"n: the blanket bound at n = {n_max:g} needs about {lane_bytes(plan) / 2**30:.1f} GiB per point "
            f"({plan.lines} lines x {2 * plan.block} counts per block, window {plan.window}), over the memory "
            f"budget of {budget / 2**30:.1f} GiB; use a smaller n, or the worst-case pair's bound")
    return plan


def shared_plan(plan: BlanketPlan, n, ladder: Callable[[int], int] = quarter_octave) -> BlanketPlan:
    """``plan`` with ``lines``, ``max_step`` and ``walk`` (where set) rounded up to the next size of ``ladder``
    (default :func:`quarter_octave`; ``power_of_two`` for fewer programs at up to twice the work), memory refit.

    Evaluations at nearby parameters (a calibration's probes, a sweep's eps0 axis) then share one
    compiled program instead of one each. A plan never affects soundness, only cost and tightness
    (more lines and longer steps cover at least what the smaller plan covered).
    """
    return fit_memory(plan._replace(lines=ladder(plan.lines), max_step=ladder(plan.max_step),
                                    walk=ladder(plan.walk) if plan.walk else 0), n)


def lanes_per_batch(plan: BlanketPlan, memory: float | None = None) -> int:
    """Lanes searched at once (a power of two, at most :data:`LANES_PER_BATCH`) within the budget."""
    lanes, budget = LANES_PER_BATCH, memory_budget(memory)
    while lanes > 1 and lanes * lane_bytes(plan) > budget:
        lanes //= 2
    return lanes


# ----------------------------------------------------------------------------------------
# Planning (eager numpy).


def plan_geometry(f: SumForm, n, t, block: int):
    """Lines and largest line move per step that the kernel needs for sum form ``f`` at ``t`` (numpy).

    ``f`` holds numpy arrays; used by every planner of :func:`point_divergence` (k-RR here, general
    matrices in :mod:`jaxshuffle.blanket_matrix`). Returns ``(lines, max_step)`` arrays.
    """
    cA, cB, cC, cD = (np.asarray(x) for x in coefficients(f, t))
    g = np.maximum(cA - cB, 1e-300)
    hc = np.abs(cC - cD) / g
    swap = (cC - cD) > 0
    pC = np.where(swap, f.qC, f.pC)
    cDs = np.where(swap, cC, cD)
    hs = -(cB - cDs) / g
    with np.errstate(divide="ignore", invalid="ignore"):
        de = np.where(hc > 0, np.abs(1.0 - 2.0 * hs) / np.where(hc > 0, hc, 1.0), 0.0)
    half = 9.0 * np.sqrt(n * np.clip(pC * (1 - pC), 0.0, None)) + 10.0
    need = hc * (2.0 * half + 2.0 + (block - 1.0) * (de + 2.0)) + 4.0
    lines = np.minimum(need, hc * (n + 2.0 + (block - 1.0) * (de + 2.0)) + 4.0)
    step = np.maximum(np.ceil(de) + 3.0, np.ceil(2.0 * np.abs(hs)) + 3.0)
    return lines, step


#: Planned numbers kept per process for batches of at most PLAN_MEMO_MAX_POINTS points (a pure function
#: of its inputs; one calibration plans the same seven batches 29 times, 18 ms each).
PLAN_MEMO_SIZE = 64
PLAN_MEMO_MAX_POINTS = 1024
_PLAN_MEMO: dict = {}


def _plan_numbers(eps0, k, n, delta, kind: str,
                  block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per point: s-window length, lines and max step needed up to the planned eps, the Gaussian
    model's root and the walks' binomial spread (:func:`form_spread`) (numpy, read-only arrays;
    remembered for small batches)."""
    args = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (eps0, k, n, delta)))
    if args[0].size > PLAN_MEMO_MAX_POINTS:
        return _plan_numbers_uncached(args[0], args[1], args[2], args[3], kind, block)

    def read_only():
        out = tuple(np.asarray(x, np.float64)
                    for x in _plan_numbers_uncached(args[0], args[1], args[2], args[3], kind, block))
        for x in out:
            x.setflags(write=False)
        return out

    return remember(_PLAN_MEMO, array_digest((kind, block), args), read_only, PLAN_MEMO_SIZE)


def _plan_numbers_uncached(eps0, k, n, delta, kind: str, block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                              np.ndarray, np.ndarray]:
    f = krr_sum_form(np.asarray(eps0, np.float64), np.asarray(k, np.float64), kind)
    f = SumForm._make(np.asarray(x) for x in f)  # numpy fields: planning runs no XLA program
    E0 = np.exp(eps0)
    # The Gaussian model's root, bisected on [0, eps0]: where the search will look.
    _, hi = bisect_fixed(lambda e: ~(gaussian_delta(f, n, np.exp(e)) > delta), np.zeros_like(eps0), eps0, steps=60)
    eps_hi = np.minimum(eps0, (1.3 + 20.0 / np.sqrt(n)) * hi + 1e-4)  # the model is good to a few % at large n
    tol = np.maximum(1e-6 * delta / np.maximum(E0, 1.0), 1e-300)
    L, _ = plan_windows(n + 1.0, np.asarray(f.pS), tol, ladder=lambda width: window_ladder(width, block))
    lines = np.zeros(np.shape(n))
    step = np.zeros(np.shape(n))
    for frac in np.linspace(0.0, 1.0, 17):
        ln, st = plan_geometry(f, n, np.exp(frac * eps_hi), block)
        lines, step = np.maximum(lines, ln), np.maximum(step, st)
    return L, np.ceil(lines), np.minimum(step, n + 3.0), hi, form_spread(f, n, L)


def form_spread(f: SumForm, n, window) -> np.ndarray:
    """Largest standard deviation of the binomial levels the kernel's walks sum over (numpy): ``C | s ~
    Bin(N, pC)`` with ``N <= n`` and ``A | s ~ Bin(s, pA)`` with ``s`` at most the window's top
    (``n pS + window``, or ``n``); :func:`walk_steps` covers each side of the mode by a multiple of it."""
    s_top = np.minimum(n, n * f.pS + window)
    return np.sqrt(np.maximum(n * f.pC * f.qC, s_top * f.pA * f.qA))


#: An outward walk (``BlanketPlan.walk``) sums this many standard deviations of its binomial on each
#: side of the mode, plus :data:`WALK_EXTRA` terms: the first term it leaves out is below ``e^-50`` of
#: the mode's (computed for standard deviations 1 to 500, Poisson-like levels included), far inside
#: the pmfs' own relative budget ``REL_ERR``; a walk too short for a point only widens its band (the
#: rest is charged), never its soundness.
WALK_SPREADS = 10.0
WALK_EXTRA = 32


def walk_steps(spread) -> np.ndarray:
    """Per point, the steps an outward walk needs each way (numpy; :data:`WALK_SPREADS`)."""
    return np.ceil(WALK_SPREADS * np.asarray(spread, np.float64)) + WALK_EXTRA


def choose_walk(max_step: int, spread) -> int:
    """``BlanketPlan.walk`` for a plan of ``max_step`` over points of binomial ``spread`` (numpy):
    the outward walk's steps (:func:`walk_steps`, the largest over the points, rounded up by
    :func:`quarter_octave`) where they are fewer than ``max_step``, else 0 (the log-ratio walk of
    ``max_step`` terms). Measured (``benchmarks/kernel_cells.py`` [4], five plans): an outward step
    (four terms, no log or exp) cost 1.5-2.3 ns per cell, a log-ratio step (two terms with a log and an
    exp) 3.4-6.9 ns; the rule compares step counts only, leaving that factor unused. At k-RR's eps0 = 8
    plans it chose 224 outward steps for 2985 log ratios (n = 1e5) and 1792 for 2985 (n = 1e7): 13.4x
    and 4.1x less time per cell."""
    return int(_walks(np.float64(max_step), np.max(np.asarray(spread, np.float64), initial=0.0)))


def _walks(max_step, spread) -> np.ndarray:
    """:func:`choose_walk` per point (numpy arrays, 0 where the log-ratio walk is kept)."""
    steps = quarter_octaves(walk_steps(spread))
    return np.where(steps < max_step, steps, 0.0)


#: Largest evaluation cost (:func:`point_cells`) for which ``amplify``'s automatic blanket source
#: runs. At eps0 = 1, delta = 1e-6 the point n = 1e8 costs 0.2 (k = 10) to 0.5 (k = 3) of it and
#: n = 1e9 about 1 (k = 100: 0.3). One evaluation costs about 2 microseconds per cell on a 2-core
#: CPU and k-RR's bounds take about ten, so points above the cap would take minutes each; they keep
#: the worst-case pair's bound (``upper_from="blanket"`` runs them).
AUTO_MAX_CELLS = 2**22


#: The sum forms of k-RR's exact lower bound (:func:`jaxshuffle.blanket.krr_bounds`), searched as
#: lanes beside the blanket pair's; all_z stands for all_x0 where k = 2 (it needs k >= 3).
LOWER_KINDS = ("all_x0", "all_x0_mirror", "all_z")


def point_cells(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, block: int = 64, *,
                kinds: tuple[str, ...] = ("blanket",)) -> np.ndarray:
    """Per point, the cost of one lane's evaluation in cells (numpy; the model behind
    :data:`AUTO_MAX_CELLS`): window counts x boundary lines of the plan for that point alone,
    times ``1 + steps / 1024`` (each cell walks ``steps`` pmf ratios: the outward walk's length where
    :func:`choose_walk` picks it, else up to ``max_step``; about a
    thousandth of a cell's cost each; measured: 1.6 s per evaluation at 0.9 M cells and max step 7,
    6 s at 0.15 M cells and max step 29412, eps0 = 10.3, n = 1e10).

    ``kinds``: the sum forms the plan covers. One kind: :func:`plan_blanket`'s plan. Several:
    :func:`jaxshuffle.blanket.krr_bounds`' merged plan, where every lane runs with the largest
    window, lines and max step of the forms, lines and max step snapped up to powers of two. That
    product can be far above any one form's cost (eps0 = 10.24, k = 10, n = 1e10, delta = 1e-8: the
    blanket lane alone 4.2e6 cells, the four merged 9.7e6 per lane, because all_x0's window is twice
    the blanket's and all_z's max step is 28007).
    """
    eps0, k, n, delta = check_points(eps0, k, n, delta, "blanket", integer_k=False)  # a plan only sets cost
    return _shape_cells(*_point_shapes(eps0, k, n, delta, block, kinds))


def _cells(window, lines, step):
    return window * (lines + 1) * (1.0 + step / 1024.0)


def plan_cells(plan: BlanketPlan) -> float:
    """The cost of one lane's evaluation under ``plan``, in cells: :func:`point_cells`' model at the
    plan's own window, lines and walk length (``walk`` where set, else ``max_step``)."""
    return float(_cells(plan.window, plan.lines, plan.walk or plan.max_step))


def _point_shapes(eps0, k, n, delta, block: int, kinds: tuple[str, ...]):
    """Per point (validated numpy arrays), the shape of its own plan for the sum forms ``kinds``:
    ``(window, lines, max_step, spread)`` as :func:`plan_blanket` (one kind) or ``krr_bounds``' merged
    plan (several) would make it for that point alone (the spread decides its walk: :func:`_shape_cells`)."""
    window = lines = step = spread = 0.0
    for kind in kinds:
        z = kind == "all_z"
        numbers = _plan_numbers(eps0, np.maximum(k, 3) if z else k, n, delta, kind, block)
        shape = _shapes(*numbers[:3], block) + (numbers[4],)
        if z and np.any(k < 3):  # k = 2: the lane repeats all_x0
            x0 = _plan_numbers(eps0, k, n, delta, "all_x0", block)
            x0_shape = _shapes(*x0[:3], block) + (x0[4],)
            shape = tuple(np.where(k < 3, a0, a) for a0, a in zip(x0_shape, shape))
        window, lines, step, spread = (np.maximum(a, b) for a, b in zip((window, lines, step, spread), shape))
    if len(kinds) > 1:  # as _merged_plan
        lines, step = (2.0 ** np.ceil(np.log2(np.maximum(x, 1.0))) for x in (lines, step))
    return window, lines, step, spread


def _shape_cells(window, lines, step, spread):
    """:func:`_cells` of a plan shape ``(window, lines, max_step, spread)``: the walk's length per cell
    is the outward walk's where :func:`choose_walk` would pick it for that max step and spread."""
    walk = _walks(step, spread)
    return _cells(window, lines, np.where(walk > 0, walk, step))


#: How much more work than its points' own plans one shared plan may cost (:func:`plan_groups`).
GROUP_SLACK = 2.0
#: Below this many cells in all (lanes x plan), a group never splits: a program costs about 5 s to
#: compile on a 2-core CPU, about what 5e5 cells cost over a search's evaluations (1-4 us per cell,
#: a few evaluations), so cheaper batches keep one program.
GROUP_FREE_CELLS = 2.0 ** 19


def plan_groups(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, *,
                kinds: tuple[str, ...] = ("blanket",), block: int = 64) -> list[np.ndarray]:
    """Split points (flattened) into groups that each share one plan at a bounded cost.

    One plan over a whole batch takes the largest window, lines and max step of its points, so a
    grid mixing large ``n`` (wide windows) and large eps0 (long steps) pays the product of the
    maxima on every lane: eps0 in {0.5, ..., 8} x n in {1e4, 1e6, 1e8} at k = 10, delta = 1e-6
    costs 140 times the sum of its points' own plans (8.5e7 cells per lane against 8.9e6 in all).
    Points sorted by their own plan's shape are added to the current group while the group's
    shared plan, times its points, costs at most :data:`GROUP_SLACK` times their own plans or at
    most :data:`GROUP_FREE_CELLS`; each group is one program (compiled once per shape). Returns
    index arrays into ``ravel()``, each in ascending order (a batch that stays one group is planned
    on the same arrays as here, so the planner's memo serves it).
    """
    eps0, k, n, delta = check_points(eps0, k, n, delta, "blanket", integer_k=False)  # a plan only sets cost
    shapes = tuple(np.ravel(x) for x in _point_shapes(eps0, k, n, delta, block, kinds))
    own = _shape_cells(*shapes)
    window, lines, step, _ = shapes
    groups: list = []
    current: list = []
    top, total = None, 0.0
    for i in np.lexsort((lines, step, window)):
        point = tuple(x[i] for x in shapes)
        shape = point if top is None else tuple(max(a, b) for a, b in zip(top, point))
        if current and (len(current) + 1) * _shape_cells(*shape) > max(GROUP_SLACK * (total + own[i]),
                                                                         GROUP_FREE_CELLS):
            groups.append(np.sort(current))
            current, shape, total = [], point, 0.0
        current.append(i)
        top, total = shape, total + own[i]
    if current:
        groups.append(np.sort(current))
    return groups


#: The least program shape, in blocks of the window, lines and max step: :func:`bucket_plan` raises a
#: cheap automatic plan to at least this, so that the small plans of nearby points (a tuning's or a
#: calibration's probes, the one-round bounds beside a composition, small n in a sweep) share one program.
BUCKET_BLOCKS, BUCKET_LINES, BUCKET_STEP = 8, 32, 32
#: A group's plan is raised to the least shape only where its lanes cost at most this many cells there
#: (:func:`plan_cells`): half of what one compilation costs (:data:`GROUP_FREE_CELLS`), so a raised plan
#: costs less time than a program it saves.
BUCKET_FREE_CELLS = 2.0**18


def bucket_plan(plan: BlanketPlan, n, lanes: int) -> BlanketPlan:
    """``plan`` on the programs' ladder: lines, max step and walk rounded up to powers of two, and, where
    ``lanes`` lanes at the least shape (:data:`BUCKET_BLOCKS`, :data:`BUCKET_LINES`, :data:`BUCKET_STEP`)
    cost at most :data:`BUCKET_FREE_CELLS`, raised to at least that shape; chunk refit (memory).

    A plan never affects soundness: a wider window, more lines and longer walks cover at least what the
    smaller plan covered, and the outward walk is sound at any length (docs/math.md section 10). So the
    values move only within their certified bands, and nearby points compile one program, not one each.
    """
    laddered = shared_plan(plan, n, power_of_two)
    least = laddered._replace(window=max(plan.window, 2 * BUCKET_BLOCKS * plan.block),
                              lines=max(laddered.lines, BUCKET_LINES), max_step=max(laddered.max_step, BUCKET_STEP),
                              walk=max(laddered.walk, BUCKET_STEP) if laddered.walk else 0)
    shaped = least if lanes * plan_cells(least) <= BUCKET_FREE_CELLS else laddered
    # the chunk follows from the window alone (the memory refit may halve it), not from the plans merged
    return fit_memory(shaped._replace(chunk=min(DEFAULT_CHUNK, shaped.window // (2 * shaped.block))), n)


def _shapes(L, lines, step, block: int):
    """Per point, :func:`plan_blanket`'s rounding of the planned numbers: window (:func:`window_ladder`),
    lines (a multiple of 4, at least 4) and max step (numpy arrays)."""
    return window_ladder(L, block), np.maximum(4, 4 * np.ceil(lines / 4)), step


#: Windows of at least this many blocks take the quarter-octave ladder (:func:`window_ladder`).
FINE_WINDOW_BLOCKS = 32


def window_ladder(width, block: int) -> np.ndarray:
    """The blanket window for ``width`` counts (numpy): whole blocks of ``2 block`` counts, their number
    the next power of two below :data:`FINE_WINDOW_BLOCKS` blocks and the next quarter octave
    (:func:`quarter_octave`) from there on. A window's cost is its cells, and a power of two wastes up
    to half of them (k-RR at n = 1e7: 18,772 counts needed, 32,768 as a power of two, 20,480 here);
    at 32 blocks and more a quarter octave is a multiple of 8 blocks, so every chunk (a power of two up
    to 8) divides it, and small windows, whose programs cost more to compile than to run, keep the
    coarser ladder (fewer programs)."""
    blocks = np.maximum(np.ceil(np.asarray(width, np.float64) / (2 * block)), 1.0)
    pow2 = 2.0 ** np.ceil(np.log2(blocks))
    return 2.0 * block * np.where(blocks < FINE_WINDOW_BLOCKS, pow2, quarter_octaves(blocks))


def power_of_two(x) -> int:
    """Smallest power of two ``>= x`` (at least 1): the blanket programs' size ladder."""
    return int(2 ** int(np.ceil(np.log2(max(float(x), 1.0)))))


def plan_blanket(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, *, kind: str = "blanket",
                 block: int = 64, chunk: int = DEFAULT_CHUNK) -> BlanketPlan:
    """One :class:`BlanketPlan` covering every point of ``(eps0, k, n, delta)`` (eager, concrete values).

    A plan never affects soundness: a point it does not cover (a larger eps, n or k) gets
    a wider band (the c-mass outside the tracked lines is charged) or no claim (a line moving
    more than ``max_step``). Pass it to the ``*_with_plan`` functions inside ``jit``.
    The plan's window, lines and steps: docs/math.md section 10 ("The blanket engine").

    Args:
      eps0: local budget of k-ary randomized response, finite, in [0, 50].
      k: number of values, a real number >= 2 (>= 3 for ``kind="all_z"``), below 1e12.
      n: number of users, an integer in [1, 1e12].
      delta: target delta in (0, 1).
      kind: the sum form to plan for: ``"blanket"`` (default), ``"all_z"``, ``"all_x0"``, ``"all_x0_mirror"``.
      block: steps ``s -> s+2`` per anchor (rounded up to a power of two; smaller for small ``n``).
      chunk: blocks evaluated together (memory), at most ``window / (2 block)``.

    Returns:
      The plan, a :class:`BlanketPlan`: static shapes for one compiled program; a plan, not a bound (it only
        sets cost).

    Raises:
      ValueError: naming the parameter (``eps0``, ``k``, ``n``, ``delta``, ``kind``) for bad input.
    """
    return plan_with_spread(eps0, k, n, delta, kind=kind, block=block, chunk=chunk)[0]


def plan_with_spread(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, *, kind: str = "blanket",
                     block: int = 64, chunk: int = DEFAULT_CHUNK) -> tuple[BlanketPlan, float]:
    """:func:`plan_blanket` and the largest binomial spread (:func:`form_spread`) over the points, from one
    planning pass: a plan merged over several sum forms (``krr_bounds``') chooses its walk from all
    their spreads (:func:`choose_walk`)."""
    eps0, k, n, delta = check_points(eps0, k, n, delta, kind, integer_k=False)  # a plan only sets cost
    b = power_of_two(min(block, max(8, power_of_two(np.max(n) + 1) // 4)))
    numbers = _plan_numbers(eps0, k, n, delta, kind, b)
    window, lines, step = (int(np.max(x)) for x in _shapes(*numbers[:3], b))
    plan = fit_memory(BlanketPlan(window=window, block=b, lines=lines, max_step=step,
                                  chunk=int(max(1, min(chunk, window // (2 * b)))),
                                  walk=choose_walk(step, numbers[4])), n)
    return plan, float(np.max(numbers[4], initial=0.0))


def check_points(eps0, k, n, delta, kind, integer_k: bool = True):
    require_x64()
    if kind not in KINDS:
        raise ValueError(f"kind: must be one of {KINDS}, got {kind!r}")
    eps0, k, n, delta = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (eps0, k, n, delta)))
    check(np.isfinite(eps0) & (eps0 >= 0) & (eps0 <= 50), "eps0", "must be finite, >= 0 and <= 50", value=eps0)
    kmin = 3 if kind == "all_z" else 2
    if integer_k:
        check((k >= kmin) & (k == np.floor(k)) & (k < 1e12), "k", f"must be an integer >= {kmin}", value=k)
    else:
        check((k >= kmin) & (k < 1e12), "k", f"must be a real number in [{kmin}, 1e12)", value=k)
    check((n >= 1) & (n == np.floor(n)) & (n <= 1e12), "n", "must be an integer in [1, 1e12]", value=n)
    check((delta > 0) & (delta < 1), "delta", "must lie in (0, 1)", value=delta)
    return eps0, k, n, delta
