"""The matrix engine's certified search: each sum form's epsilon, the mechanism's bracket (docs/math.md section 11).

:func:`matrix_bounds` (certified ``[lower, upper]`` on the shuffled mechanism's epsilon) is
:func:`plan_matrix` (forms and their shared static plan, whose cost a caller reads first) then
:func:`search_matrix` (every form a lane of one program: :func:`_brackets`; the coarsened blanket
forms then lowered by the lattice, :func:`refine_upper`). The forms and their certified values at one
``t`` are :mod:`jaxshuffle.engine.matrix.forms`, whose public names this module re-exports (the old
import path ``jaxshuffle.blanket_matrix`` is this module).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._bisect import KAPPA1, bisect_fixed, itp_step
from jaxshuffle._config import check
from jaxshuffle._numerics import ULP as _ULP
from jaxshuffle.engine import blanket as bl
from jaxshuffle.engine._search import Move, SearchState, Status, certified_search, lane_constant
from jaxshuffle.engine.blanket.plan import choose_walk, form_spread
from jaxshuffle.engine.matrix import lattice as la
from jaxshuffle.engine.matrix.forms import (  # re-exported: one import path for the matrix engine
    KERNEL_CATEGORIES,
    MAX_INPUTS,
    MAX_OUTPUTS,
    SNAP_REL,
    PairForms,
    coarsen,
    coarsen_batch,
    coefficient_values,
    form_divergence,
    lattice_divergence,
    pair_forms,
    validate_matrix,
    victim_term,
)
from jaxshuffle.randomizers.params import MatrixMechanism

__all__ = [  # this module's own public names, then the forms' (re-exported) and the pytree VRParams carries
    "LATTICE_AUTO_MAX_N", "MATRIX_AUTO_MAX_CELLS", "SEARCH_MAX_ITER", "SEARCH_RTOL", "MatrixBounds", "MatrixPlan",
    "form_epsilons", "matrix_bounds", "matrix_cells", "plan_forms", "plan_matrix", "refine_upper", "search_forms",
    "search_matrix", "step_factor",
    "KERNEL_CATEGORIES", "MAX_INPUTS", "MAX_OUTPUTS", "SNAP_REL", "PairForms", "coarsen", "coarsen_batch",
    "coefficient_values", "form_divergence", "lattice_divergence", "pair_forms", "validate_matrix", "victim_term",
    "MatrixMechanism",
]

#: Largest cost (:func:`matrix_cells`) of one point for which ``amplify``'s automatic source runs the
#: matrix engine: about 5 s per point on a 2-core CPU (about 5 microseconds per cell, warm). The
#: engine runs point by point, so this is smaller than k-RR's batched :data:`jaxshuffle.blanket.
#: AUTO_MAX_CELLS`; costlier points keep the two-count bound (``upper_from="blanket"`` runs them).
#: The exact datasets' forms run beside the blanket forms only where both together fit it.
MATRIX_AUTO_MAX_CELLS = 1 << 20
#: Largest ``n`` at which :func:`search_matrix` refines coarsened forms with the lattice by default
#: (docs/math.md 11.8; ``benchmarks/blanket.py --lattice-ns``): 2-subsets of 5 gain 9 % at n = 1e4 and
#: at 1e5, nothing at 1e6, where the lattice's slack (``2 SDS n / LATTICE_BINS`` standard deviations of
#: the sum) outgrows what coarsening costs; 0.5-5 s per point (benchmarks/results/blanket_lattice_cpu.txt)
LATTICE_AUTO_MAX_N = 1e5


# ----------------------------------------------------------------------------------------
# Planning (eager numpy) and the search.


def _gaussian_eps(forms: PairForms, n, delta, hi) -> np.ndarray:
    """Root of the Gaussian model of each form's divergence on ``[0, hi]`` (heuristic: planning only)."""
    from scipy.special import ndtr

    def meets(eps):
        t = np.exp(eps)[:, None]
        c = forms.a0 + forms.a1 * t
        mu = np.sum(forms.w * c, axis=1)
        sd = np.sqrt(np.maximum(np.sum(forms.w * c * c, axis=1) - mu * mu, 1e-300))
        z = np.sqrt(n) * mu / sd
        gd = mu * ndtr(z) + sd / np.sqrt(n) * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
        return ~(gd + victim_term(forms.v0, forms.v1, t, True) > delta)

    return bisect_fixed(meets, np.zeros(len(forms.w)), hi, steps=60)[1]


def plan_forms(forms: PairForms, n: float, delta: float, block: int = 64, chunk: int = 8):
    """One :class:`jaxshuffle.blanket.BlanketPlan` covering every form up to the eps the search visits,
    and the per-form top of that range ``eps_top`` (numpy). Never affects soundness (docs/math.md 11.5)."""
    from jaxshuffle.engine.two_count.plan import plan_windows
    n = float(n)
    b = bl.power_of_two(min(block, max(8, bl.power_of_two(n + 1) // 4)))
    g = _gaussian_eps(forms, n, delta, forms.eps_max)
    eps_top = np.minimum(forms.eps_max, (1.3 + 20.0 / np.sqrt(n)) * g + 1e-4)
    L, lines, step, spread = 2 * b, 4.0, 3.0, 0.0
    live = forms.w > 0
    for frac in np.linspace(0.0, 1.0, 17):
        t = np.exp(frac * eps_top)[:, None]
        for up in (True, False):
            c = coefficient_values(forms.a0, forms.a1, t, up)
            f = bl.SumForm._make(np.asarray(x) for x in coarsen_batch(jnp.asarray(forms.w), jnp.asarray(c), up))
            mixed = (np.max(np.where(live, c, -np.inf), axis=1) > 0) & (np.min(np.where(live, c, np.inf), axis=1) < 0)
            if not mixed.any():
                continue
            f = bl.SumForm(*(x[mixed] for x in f))
            gmax = np.maximum(np.max(np.abs(c[mixed]), axis=1), 1e-300)
            Li, _ = plan_windows(np.full(mixed.sum(), n + 1.0), np.asarray(f.pS),
                                 np.maximum(1e-6 * delta / gmax, 1e-300))
            ln, st = bl.plan_geometry(f, n, t[mixed, 0], b)
            L, lines, step = max(L, int(np.max(Li))), max(lines, float(np.max(ln))), max(step, float(np.max(st)))
            spread = max(spread, float(np.max(form_spread(f, n, bl.power_of_two(np.max(Li))))))
    window = max(bl.power_of_two(L), 2 * b)
    max_step = bl.power_of_two(min(step, n + 3.0))
    plan = bl.BlanketPlan(window=window, block=b, lines=bl.power_of_two(max(4.0, np.ceil(lines))),
                          max_step=max_step, chunk=int(max(1, min(chunk, window // (2 * b)))),
                          walk=choose_walk(max_step, spread))
    return bl.fit_memory(plan, n), eps_top



def refine_upper(forms: PairForms, ups: np.ndarray, refine: np.ndarray, n, delta, floor: float, *,
                 bins: int | None = None) -> np.ndarray:
    """Blanket forms' certified epsilons (``ups``, from the coarsened search), lowered by
    :func:`jaxshuffle.blanket_lattice.tighten_upper` on :func:`lattice_divergence` where ``refine``
    (the coarsened forms). Only the maximum matters, so the forms go from the largest ``ups`` down,
    none below ``floor`` (a lower bound on the mechanism's epsilon) or below the forms already
    settled; forms with identical rows share one search."""
    ups = np.array(ups, np.float64)
    settled = float(np.max(np.where(refine, floor, ups), initial=floor))
    done: dict = {}
    for f in np.argsort(-ups, kind="stable"):
        if not refine[f] or not np.isfinite(ups[f]) or ups[f] <= settled:
            continue
        live = forms.w[f] > 0
        cats = sorted(zip(forms.w[f][live], forms.a0[f][live], forms.a1[f][live]))
        key = (tuple(cats), tuple(sorted(zip(forms.v0[f], forms.v1[f]))))
        if key not in done:
            w_f, a0_f, a1_f, v0_f, v1_f = (np.asarray(x[f])
                                           for x in (forms.w, forms.a0, forms.a1, forms.v0, forms.v1))
            row = (w_f, a0_f, a1_f, v0_f, v1_f)

            def value(e, row=row):
                w_r, a0_r, a1_r, v0_r, v1_r = row
                return lattice_divergence(w_r, a0_r, a1_r, v0_r, v1_r, n, e, bins=bins)

            done[key] = la.tighten_upper(value, delta, max(floor, settled), float(ups[f]))
        ups[f] = min(ups[f], done[key])
        settled = max(settled, ups[f])
    return ups


#: relative width ``(hi - lo) / hi`` at which a lane's search stops (about what the 32 bisection steps it
#: replaced gave)
SEARCH_RTOL = 1e-9
#: search steps per lane at most (a lane that has not converged keeps its certified end all the same)
SEARCH_MAX_ITER = 64


class _Band(NamedTuple):
    """A one-sided form's certified value as the band :func:`certified_search` compares: ``lower = upper = v``,
    of which only the lane's side is certified (the other end of the lane's bracket only steers)."""

    lower: jax.Array
    upper: jax.Array


class _Itp(NamedTuple):
    g_lo: jax.Array  # log(v / delta) at lo and hi (NaN: not probed): ITP's interpolation, steers probes only
    g_hi: jax.Array
    tol: jax.Array  # ITP's tolerance, budget and truncation constant, set from the bracket of the first probe
    n_max: jax.Array
    kappa: jax.Array


@functools.partial(jax.jit, static_argnames=("plan", "rtol", "max_iter"))
def _brackets(w, a0, a1, v0, v1, eps_max, eps_top, upper, n, delta, *, plan,
              rtol: float = SEARCH_RTOL, max_iter: int = SEARCH_MAX_ITER):
    """Per form (lane): a bracket ``[lo, hi]`` in eps on the certified value of the lane's side.

    ``upper`` lanes: ``hi`` only moves to probes whose certified upper value is ``<= delta`` (at
    ``eps_max`` a blanket form is exactly ``v_inf``, which the caller compares with delta), so ``hi``
    is a certified upper bound on the form's epsilon. Otherwise ``lo`` only moves to probes whose
    certified lower value exceeds ``delta``: a certified lower bound. Where the probes go never
    affects soundness, only the number of steps: the first probe at ``eps_top`` (the plan's range)
    gives ``[0, eps_top]`` or ``[eps_top, eps_max]``; the second is ``0`` in the first case; then ITP
    steps (:func:`jaxshuffle._bisect.itp_step`: regula falsi on ``log(v / delta)`` with bisection's
    worst case) until ``hi - lo <= rtol * hi`` or ``max_iter`` probes, in the engines' one loop
    (:func:`jaxshuffle.engine._search.certified_search`), which holds the only copy of the kernel (three
    copies compiled three times as long). Returns ``(lo, hi, probes)`` per lane
    (docs/math.md 11.5).

    Size: the eight per-lane arrays (the form's fields, its eps range, its side) are positional because the body
    vmaps them lane by lane and the caller slices each into batches; ``n`` and ``delta`` are shared scalars,
    ``plan``, ``rtol`` and ``max_iter`` static.
    """

    def lane(w, a0, a1, v0, v1, emax, etop, upper):
        def evaluate(x):
            v = form_divergence(w, a0, a1, v0, v1, n, x, plan, upper)
            return _Band(v, v)

        def advance(st: SearchState, band: _Band, lo, hi) -> Move:
            v, itp = band.upper, st.extra
            first = st.it == 0
            good = jnp.where(upper, v <= delta, ~(v > delta))  # lower lanes: False only where v > delta is certified
            g = jnp.log(jnp.clip(v, 1e-300, 1e300)) - jnp.log(delta)
            g_lo, g_hi = jnp.where(good, itp.g_lo, g), jnp.where(good, g, itp.g_hi)
            # ITP's budget from the first probe's bracket ([0, eps_top] or [eps_top, eps_max]): tolerance
            # rtol/2 of a scale below the root, n0 = 1, counted from the first ITP step (probe 2 after a probe
            # at 0, else probe 1)
            span0 = hi - lo
            tol = jnp.where(first, 0.5 * rtol * jnp.maximum(lo, 0.5 * hi), itp.tol)
            itp_budget = jnp.ceil(jnp.log2(jnp.maximum(span0 / (2.0 * tol), 1.0))) + 1.0
            n_max = jnp.where(first, itp_budget + jnp.where(good, 2.0, 1.0), itp.n_max)
            kappa = jnp.where(first, KAPPA1 / jnp.where(span0 > 0, span0, 1.0), itp.kappa)
            nxt = itp_step(lo, hi, g_lo, g_hi, tol, n_max - (st.it + 1), kappa)
            nxt = jnp.where(first & (lo == 0), 0.0, nxt)  # the second probe at 0 where the first gave [0, eps_top]
            stop = ~(hi - lo > rtol * hi)
            status = jnp.where(stop, Status.CONVERGED, Status.MAX_ITER).astype(jnp.int8)
            return Move(lo, hi, nxt, status, stop, _Itp(g_lo, g_hi, tol, n_max, kappa))

        zero = lane_constant(emax > 0, 0.0, jnp.float64)  # per-lane starting carries (lane_constant)
        nan = lane_constant(emax > 0, jnp.nan, jnp.float64)
        running = lane_constant(emax > 0, Status.MAX_ITER, jnp.int8)
        start = SearchState(lane_constant(emax > 0, 0), zero, emax, etop, running, lane_constant(emax > 0, False, bool),
                            _Itp(nan, nan, zero, zero, zero))
        st = certified_search(evaluate, advance, start, delta, max_iter=max_iter)
        return st.lo, st.hi, st.it

    return jax.vmap(lane)(w, a0, a1, v0, v1, eps_max, eps_top, upper)


class MatrixBounds(NamedTuple):
    """Result of :func:`matrix_bounds` (Python floats and the forms behind them).

    upper: certified upper bound on the shuffled mechanism's epsilon at ``delta`` (every dataset of
      the others): the largest certified epsilon over the ordered pairs' blanket forms.
    lower: certified lower bound: the largest certified lower epsilon over the exact datasets
      "every other user holds x*" (every ordered pair, every ``x*``).
    exact_kernel: True when every blanket form had at most four categories (no coarsening).
    worst_pair: ``(x0, x1)`` of the form giving ``upper``.
    lattice: True when the coarsened forms went through the lattice and FFT refinement (docs/math.md
      11.8), which keeps a form's coarsened epsilon wherever it certifies no smaller one.
    status: :class:`~jaxshuffle.search.Status` of the search behind ``upper``: ``CONVERGED`` where the
      form's bracket met its relative width, ``MAX_ITER`` where the iteration cap stopped it (still
      certified, only wider), ``ERROR_LIMITED`` where the lattice refinement gave ``upper`` (its step
      limits the tightness), ``ZERO``, or ``UNBOUNDED`` (``upper = inf``).
    status_lower: the same for the search behind ``lower`` (``ZERO`` where there is none).
    """

    upper: float
    lower: float
    exact_kernel: bool
    worst_pair: tuple
    lattice: bool = False
    status: int = int(Status.CONVERGED)
    status_lower: int = int(Status.ZERO)


def _pad(x: np.ndarray, width: int) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, width - x.shape[1])))


def _lanes(up_forms: PairForms, low_forms: PairForms) -> PairForms:
    """Both sides' forms as one batch of lanes, categories and victim-only columns padded to powers of two."""
    C = bl.power_of_two(max(up_forms.w.shape[1], low_forms.w.shape[1], KERNEL_CATEGORIES))
    V = bl.power_of_two(max(up_forms.v0.shape[1], low_forms.v0.shape[1], 2))  # 1 and 2 columns share a program
    width = dict(w=C, a0=C, a1=C, v0=V, v1=V)
    return PairForms(*(np.concatenate([_pad(a, width[k]), _pad(b, width[k])]) if k in width else np.concatenate([a, b])
                       for k, a, b in zip(PairForms._fields, up_forms, low_forms)))


class MatrixPlan(NamedTuple):
    """One point's planned search of a matrix (:func:`plan_matrix`): its forms and the plan they share.

    up_forms / low_forms: the blanket forms (11.1) and the exact datasets' forms (11.4; none when
      planned with ``lower=False``), run as lanes of one program.
    n, delta: the point (validated).
    plan, eps_top: :func:`plan_forms` of all those lanes.
    """

    up_forms: PairForms
    low_forms: PairForms
    n: float
    delta: float
    plan: bl.BlanketPlan
    eps_top: np.ndarray

    @property
    def cells(self) -> float:
        """The search's cost in cells (:func:`matrix_cells`)."""
        batch = bl.lanes_per_batch(self.plan)
        lanes = -(-(len(self.up_forms.w) + len(self.low_forms.w)) // batch) * batch
        return float(lanes * self.plan.window * (self.plan.lines + 1) * step_factor(self.plan.max_step))


def step_factor(max_step: int) -> float:
    """Cost of a cell relative to a short-step plan's: ``max(1 + max_step / 1024, max_step / 16)``.

    k-RR's kernel pays about a thousandth of a cell per step (:func:`jaxshuffle.blanket.point_cells`);
    the matrix engine's coarsened forms pay far more. Timed warm with an ad hoc script on the 2-core
    CPU, Hadamard response K = 16 at n = 1e3, delta = 1e-6 with the exact datasets' forms: eps0 = 2
    plans max step 1024 and took 180 s for 2.6e5 window x line cells, eps0 = 0.5 max step 8 and 5.8 s
    for 5.3e5 (62x per cell, this factor says 64).
    """
    return max(1.0 + max_step / 1024.0, max_step / 16.0)


def plan_matrix(matrix, n, delta, *, lower: bool = True) -> MatrixPlan:
    """Validate ``(matrix, n, delta)``, build the forms (with the exact datasets' unless ``lower=False``)
    and plan their search: the first half of :func:`matrix_bounds`, whose cost a caller can read
    (``.cells``) before running the second (:func:`search_matrix`). Bad input: ValueError naming the
    parameter; a plan whose single lane exceeds the memory budget:
    :class:`~jaxshuffle.blanket.BlanketMemoryError`."""
    R = validate_matrix(matrix)
    n_np, d_np = np.asarray(n, np.float64), np.asarray(delta, np.float64)
    check((n_np >= 1) & (n_np == np.floor(n_np)) & (n_np <= 1e12), "n", "must be an integer in [1, 1e12]", value=n_np)
    check((d_np > 0) & (d_np < 1), "delta", "must lie in (0, 1)", value=d_np)
    n, delta = float(n_np), float(d_np)
    up = pair_forms(R, "blanket")
    low = pair_forms(R, "datasets") if lower else _no_forms(up)
    plan, eps_top = plan_forms(_lanes(up, low), n, delta)
    return MatrixPlan(up, low, n, delta, plan, eps_top)


def matrix_cells(matrix, n, delta, *, lower: bool = True) -> float:
    """Cost of :func:`matrix_bounds` at one point in cells (numpy; the model behind amplify's cost cap
    :data:`MATRIX_AUTO_MAX_CELLS`): lanes (forms, padded to whole batches) x window counts x
    boundary lines x :func:`step_factor` ``(max_step)`` of the plan. Measured warm on a 2-core CPU
    (``benchmarks/blanket.py`` [3], ``benchmarks/results/blanket_matrix_cpu.txt``): k-RR's 10 x 10
    matrix at n = 1e6, 1.1e6 cells, 5.1 s, about 5 microseconds per cell with 8-15 probes per lane
    (22 s with the 32 bisection steps before). ``lower=False``: the cost of the upper bound alone
    (``matrix_bounds(..., lower=False)``), whose own plan can need far fewer lines than the exact
    datasets' coarsened forms (3-subsets of 10 at n = 1e6: 17 lines against 2049)."""
    return plan_matrix(matrix, n, delta, lower=lower).cells


def _no_forms(forms: PairForms) -> PairForms:
    return PairForms(*(np.asarray(x)[:0] for x in forms))


def form_epsilons(planned: MatrixPlan, plan: bl.BlanketPlan | None = None):
    """Certified epsilons of every form: ``(upper ends of up_forms, lower ends of low_forms)`` (numpy).

    Both sides run as lanes of one program, called on batches of :func:`~jaxshuffle.blanket.lanes_per_batch`
    lanes: the memory budget bounds what one call holds (a vmap over every lane asked XLA for
    31.5 GB for a 6-input subset-selection matrix at n = 1e4), and the program's shape does not
    depend on how many forms a mechanism has. Categories and victim-only columns are padded to
    powers of two, so that similar mechanisms share the program. ``plan`` (default: the planned
    one, :func:`plan_forms`) never affects soundness, only tightness.
    """
    ups, lows, _, _ = _form_search(planned, plan)
    return ups, lows


def _lane_status(value, lo, hi, infinite: int) -> np.ndarray:
    """Status of each lane's search from its bracket (the loop's own stopping rule, ``SEARCH_RTOL``)."""
    done = (hi - lo) <= SEARCH_RTOL * hi * (1.0 + 1e-12)
    st = np.where(done, Status.CONVERGED, Status.MAX_ITER)
    st = np.where(value == 0.0, Status.ZERO, st)
    return np.where(np.isinf(value), infinite, st).astype(np.int8)


def _form_search(planned: MatrixPlan, plan: bl.BlanketPlan | None = None):
    """:func:`form_epsilons` and each form's search status (``(ups, lows, up_status, low_status)``)."""
    up_forms, low_forms, n, delta = planned.up_forms, planned.low_forms, planned.n, planned.delta
    both = _lanes(up_forms, low_forms)
    F, total = len(up_forms.w), len(both.w)
    side = np.arange(total) < F
    plan = plan or planned.plan
    batch = bl.lanes_per_batch(plan)
    fill = np.arange(-(-total // batch) * batch) % total  # padding lanes repeat real ones (results not read)
    args = [np.asarray(x)[fill] for x in (both.w, both.a0, both.a1, both.v0, both.v1, both.eps_max, planned.eps_top,
                                          side)]
    parts = [_brackets(*(jnp.asarray(a[s:s + batch]) for a in args), jnp.float64(n), jnp.float64(delta), plan=plan)
             for s in range(0, fill.size, batch)]
    lo, hi = (np.concatenate([np.asarray(p[i]) for p in parts])[:total] for i in (0, 1))
    # v_inf > delta: the divergence never drops to delta, eps = inf (a blanket form: at most; a dataset: at least)
    ups = np.where(up_forms.v_inf > delta * (1.0 - 8 * _ULP), np.inf, hi[:F])
    lows = np.where(low_forms.v_inf > delta * (1.0 + 8 * _ULP), np.inf, lo[F:])
    up_status = _lane_status(ups, lo[:F], hi[:F], Status.UNBOUNDED)
    low_status = _lane_status(lows, lo[F:], hi[F:], Status.INFINITE)
    return ups, lows, up_status, low_status


def search_matrix(planned: MatrixPlan, *, plan: bl.BlanketPlan | None = None,
                  lattice: bool | None = None) -> MatrixBounds:
    """The second half of :func:`matrix_bounds`: run a :func:`plan_matrix` search (same sides, same values).

    ``lattice``: lower the coarsened blanket forms' epsilons with the lattice and FFT evaluation
    (:func:`refine_upper`, docs/math.md 11.8); None (default) does so where
    some form was coarsened and ``n <= LATTICE_AUTO_MAX_N``.
    """
    ups, lows, up_status, low_status = _form_search(planned, plan)
    up_forms = planned.up_forms
    lower = float(np.max(lows, initial=0.0))
    status_lower = int(low_status[int(np.argmax(lows))]) if lows.size and lower > 0 else int(Status.ZERO)
    coarse = np.sum(up_forms.w > 0, axis=1) > KERNEL_CATEGORIES
    refined = bool(coarse.any() and (planned.n <= LATTICE_AUTO_MAX_N if lattice is None else lattice))
    if refined:
        searched = ups
        ups = refine_upper(up_forms, ups, coarse, planned.n, planned.delta, lower)
        up_status = np.where(ups < searched, np.int8(Status.ERROR_LIMITED), up_status).astype(np.int8)
    i = int(np.argmax(ups))
    return MatrixBounds(float(ups[i]), lower, not coarse.any(), tuple(int(x) for x in up_forms.pair[i]), refined,
                        int(up_status[i]), status_lower)


def search_forms(forms: PairForms, n, delta) -> MatrixBounds:
    """Certified upper epsilon of the largest of the given blanket forms (11.1) at ``(n, delta)``, each a
    dominating bound built elsewhere (the three-count pair of a round with clients sampled,
    :func:`jaxshuffle.accountant.subsampling.three_count_forms`): planned and searched as
    :func:`search_matrix` does a matrix's blanket forms; no lower bound (``lower = 0``)."""
    n, delta = float(n), float(delta)
    plan, eps_top = plan_forms(forms, n, delta)
    return search_matrix(MatrixPlan(forms, _no_forms(forms), n, delta, plan, eps_top))


def matrix_bounds(matrix, n, delta, *, plan: bl.BlanketPlan | None = None, lower: bool = True) -> MatrixBounds:
    """Certified ``[lower, upper]`` on the epsilon of the shuffled mechanism ``matrix`` (docs/math.md 11).

    ``upper`` errs high: every ordered pair's blanket form (11.1) evaluated with coefficients rounded
    up, coarsened up when a form has more than four categories, and the kernel's certified band
    (upper end); the bisection keeps only probes whose certified value is ``<= delta``. ``lower``
    errs low: the exact datasets (every other user holding ``x*``), rounded down, the band's lower
    end, probes whose certified value exceeds ``delta``. ``lower=False``: the blanket forms alone, under
    their own plan, and ``lower = 0`` (no claim). Bad input: ValueError naming the parameter.
    ``search_matrix(plan_matrix(matrix, n, delta, lower=lower), plan=plan)``.
    """
    return search_matrix(plan_matrix(matrix, n, delta, lower=lower), plan=plan)
