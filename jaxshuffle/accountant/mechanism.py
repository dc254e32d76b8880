"""A concrete mechanism's tight bounds folded into amplify's report (docs/math.md sections 10 and 11).

:func:`with_mechanism_bounds`: for k-ary RR the blanket pair and the exact datasets
(:mod:`jaxshuffle.engine.blanket`), for a finite matrix or a catalog row's matrix the matrix engine
(:mod:`jaxshuffle.engine.matrix`), each under a cost cap; :func:`fold_mechanism_columns` is the one rule
that folds them into a report's columns (the sweep folds its own columns with it too).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import array_digest, check, remember
from jaxshuffle.accountant.report import AmplificationReport, UpperSource
from jaxshuffle.engine import blanket as bl
from jaxshuffle.engine.matrix import search as bm
from jaxshuffle.engine.two_count.search import Status
from jaxshuffle.randomizers import VRParams
from jaxshuffle.randomizers.matrices import ROW_MATRICES, row_covers, row_matrix
from jaxshuffle.randomizers.params import MatrixMechanism, RowMatrix

__all__ = ["MIN_BLANKET_MESSAGES", "expects_blanket", "fold_mechanism_columns", "matrix_point", "with_mechanism_bounds"]


#: k-ary RR points whose other users are expected to send fewer blanket messages than this
#: (``n k / (e^eps0 + k - 1)``: each sends its uniform "blanket" draw with probability ``k / (e^eps0 + k - 1)``)
#: skip the blanket engine under the automatic source. With no blanket there is no amplification to find
#: (the worst-case pair then gives eps0 up to its band, as the blanket pair does), while near eps0 = 50
#: the blanket plan took half a minute per new point. A cost rule: skipping a bound never affects soundness.
MIN_BLANKET_MESSAGES = 1e-3


def expects_blanket(eps0, k, n) -> np.ndarray:
    """Where the others' expected blanket messages reach :data:`MIN_BLANKET_MESSAGES` (numpy, broadcast)."""
    eps0, k, n = (np.asarray(x, np.float64) for x in (eps0, k, n))
    with np.errstate(over="ignore"):
        return n * k / (np.exp(eps0) + k - 1.0) >= MIN_BLANKET_MESSAGES


def with_mechanism_bounds(rep: AmplificationReport, randomizer: VRParams, n, delta, *, rtol: float = 1e-6,
                          only: bool = False, lower: bool = True) -> AmplificationReport:
    """``rep`` with the concrete mechanism's tight bounds folded in (k-ary RR: docs/math.md section 10).

    ``upper`` becomes ``min(rep.upper, blanket)`` (both certified upper bounds, so their minimum
    is one; ``upper_source`` says which), or the blanket value alone with ``only=True``;
    ``lower`` becomes the larger of ``rep.lower`` and the exact datasets' certified lower bound
    (:func:`jaxshuffle.blanket.krr_bounds`). Points the blanket engine does not cover (eps0 > 50,
    n > 1e12, or a plan whose single lane exceeds the memory budget) keep ``rep``'s values
    (``only=True``: ValueError); so do, unless ``only``, points whose evaluation would cost more
    than :data:`jaxshuffle.blanket.AUTO_MAX_CELLS` (k-RR: n above about 1e9), k-RR points whose other
    users are expected to send fewer than :data:`MIN_BLANKET_MESSAGES` blanket messages (no amplification
    to find: e.g. eps0 = 50 at n = 1e4) or, for a finite matrix,
    :data:`jaxshuffle.blanket_matrix.MATRIX_AUTO_MAX_CELLS` (its
    :func:`~jaxshuffle.blanket_matrix.matrix_cells`; about 5 s per point: 3-subsets of 10 to n = 1e5).
    The exact datasets' lanes run only where their plan is within the cap too (k-RR:
    :func:`~jaxshuffle.blanket.point_cells` with every kind; a matrix: ``matrix_cells``); elsewhere the
    blanket lanes run alone and ``lower`` keeps ``rep``'s. Catalog rows carry their matrix point by
    point (:class:`~jaxshuffle.randomizers.params.RowMatrix`: subset selection, Hadamard response, binary RR);
    points whose matrix the row does not build keep ``rep``'s values. ``lower=False``: the blanket lanes
    alone everywhere (``lower`` keeps ``rep``'s). Eager: concrete values only.
    """
    mech = randomizer.mechanism
    if mech is None or randomizer.blanket_per_user is not None:
        if only:
            raise ValueError("upper_from: 'blanket' needs a randomizer that carries its mechanism (k-ary RR: "
                             "jaxshuffle.randomizers.grr; subset selection, Hadamard response, binary RR; any "
                             "small finite mechanism: randomizers.with_matrix)")
        return rep
    shape = np.shape(rep.upper)
    if isinstance(mech, (MatrixMechanism, RowMatrix)):  # finite mechanism (docs/math.md section 11), by point
        return _fold(rep, *_matrix_columns(mech, shape, n, delta, only, lower), only)
    eps0, k, nn, dd = (np.broadcast_to(np.asarray(x, np.float64), shape).ravel()
                       for x in (mech.eps0, mech.k, n, delta))
    covered = (eps0 <= 50.0) & (nn <= 1e12) & (k < 1e12)
    if only:  # asked for by name, the blanket pair runs wherever it is defined
        check(covered, "upper_from", "'blanket' covers eps0 <= 50 and n <= 1e12", value=np.where(covered, 0, eps0))
    else:
        covered &= expects_blanket(eps0, k, nn)
    # Cost rule (every point, both sources): the exact datasets' lanes run beside the blanket lane only
    # where their merged plan costs at most AUTO_MAX_CELLS per lane; elsewhere the blanket lane runs
    # alone and ``lower`` keeps rep's. The automatic source also skips points whose blanket lane
    # alone is above the cap (minutes each): they keep the worst-case pair's bound.
    both = covered.copy() if lower else np.zeros_like(covered)
    sized = covered & (eps0 >= 0) & (nn >= 1) & (nn == np.floor(nn)) & (k >= 2) & (k == np.floor(k)) \
        & (dd > 0) & (dd < 1)
    if sized.any():
        pts = (eps0[sized], k[sized], nn[sized], dd[sized])
        if lower:
            both[sized] = bl.point_cells(*pts, kinds=("blanket",) + bl.LOWER_KINDS) <= bl.AUTO_MAX_CELLS
        if not only:
            covered[sized] = bl.point_cells(*pts) <= bl.AUTO_MAX_CELLS
    both &= covered
    alone = covered & ~both
    blanket = np.full(eps0.shape, np.inf)
    low = np.zeros(eps0.shape)
    status, status_low = np.full(eps0.shape, Status.INVALID, np.int8), np.full(eps0.shape, Status.ZERO, np.int8)
    for sel, run in ((both, bl.krr_bounds), (alone, bl.blanket_epsilon)):
        b = None
        if sel.any():
            b = _within_memory(lambda run=run, sel=sel: run(eps0[sel], k[sel], nn[sel], dd[sel], rtol=rtol), only)
        if b is None:
            covered &= ~sel
            continue
        blanket[sel], status[sel] = np.asarray(b.upper), np.asarray(b.status)
        if run is bl.krr_bounds:
            low[sel], status_low[sel] = np.asarray(b.lower), np.asarray(b.status_lower)
    columns = tuple(x.reshape(shape) for x in (blanket, low, status, status_low))
    return _fold(rep, columns[0], columns[1], columns[2], columns[3], covered.reshape(shape), only)


#: per-process store of one matrix point's bounds (:func:`matrix_point`); a sweep's padded chunk and a
#: repeated call ask for the same point again
_MATRIX_POINTS: dict = {}


def matrix_point(M: np.ndarray, n: float, delta: float, only: bool, lower: bool = True):
    """``(bounds, with the exact datasets' lower bound)`` of matrix ``M`` at one point, or None: the
    exact datasets' forms run beside the blanket forms where both together cost at most
    :data:`~jaxshuffle.blanket_matrix.MATRIX_AUTO_MAX_CELLS`, else the blanket forms alone where they
    do; above that (or over the memory budget) None (``only``: the blanket forms alone at any cost
    within memory; over memory the BlanketMemoryError propagates). ``lower=False``: the blanket forms
    alone. Remembered per process."""

    def compute():
        for with_datasets in ((True, False) if lower else (False,)):
            try:
                planned = bm.plan_matrix(M, n, delta, lower=with_datasets)
            except bl.BlanketMemoryError:
                if only and not with_datasets:
                    raise
                continue
            if planned.cells <= bm.MATRIX_AUTO_MAX_CELLS or (only and not with_datasets):
                return bm.search_matrix(planned), with_datasets
        return None

    key = array_digest((only, lower, float(n), float(delta), bm.MATRIX_AUTO_MAX_CELLS), [M])  # the cap: tests move it
    return remember(_MATRIX_POINTS, key, compute, 256)


def _matrix_columns(mech, shape, n, delta, only: bool,
                    lower: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Blanket and exact-dataset columns (for :func:`_fold`) of a finite mechanism, point by point: one
    matrix for a :class:`MatrixMechanism`, each point's own for a catalog row's :class:`RowMatrix`
    (points its builder does not cover keep the two-count values; ``only``: ValueError)."""
    nn, dd = (np.broadcast_to(np.asarray(x, np.float64), shape).ravel() for x in (n, delta))
    if isinstance(mech, MatrixMechanism):
        M = np.asarray(mech.matrix)
        res = [matrix_point(M, a, b, only, lower) for a, b in zip(nn, dd)]
    else:
        points = mech.points(shape)
        if only and not all(row_covers(mech.builder, *o) for o in points):
            raise ValueError(f"upper_from: 'blanket' needs the mechanism's matrix at every point; {mech.builder} "
                             f"builds it for {ROW_MATRICES[mech.builder][2]} (eps0 <= 50)")
        # one matrix at a time: a large batch never holds all its points' matrices
        res = [None if (Mo := row_matrix(mech.builder, *o)) is None else matrix_point(Mo, a, b, only, lower)
               for o, a, b in zip(points, nn, dd)]
    covered = np.array([r is not None for r in res], bool).reshape(shape)
    blanket = np.array([np.inf if r is None else r[0].upper for r in res]).reshape(shape)
    low = np.array([0.0 if r is None else r[0].lower for r in res]).reshape(shape)
    # the matrix engine's own search statuses (a capped search is certified but wider, and says so)
    status = np.array([Status.INVALID if r is None else r[0].status for r in res], np.int8).reshape(shape)
    status_low = np.array([Status.ZERO if r is None or not r[1] else r[0].status_lower for r in res],
                          np.int8).reshape(shape)
    return blanket, low, status, status_low, covered


def _within_memory(bounds, only: bool):
    """``bounds()``, or None where its plan exceeds the memory budget (the point then keeps the
    worst-case pair's bound); with ``only`` (blanket bound asked for by name) the error propagates."""
    try:
        return bounds()
    except bl.BlanketMemoryError:
        if only:
            raise
        return None


def _fold(rep: AmplificationReport, blanket, low, status, status_low, covered, only: bool) -> AmplificationReport:
    """``rep`` with a certified blanket upper bound and exact-dataset lower bound folded in."""
    folded = fold_mechanism_columns(rep._asdict(), blanket, low, status, status_low, covered, only)
    return rep._replace(**{k: jnp.asarray(v) for k, v in folded.items()})


def fold_mechanism_columns(cols: Mapping, blanket, low, status, status_low, covered, only: bool) -> dict:
    """The rule that folds a concrete mechanism's bounds into a report's columns (numpy arrays).

    ``upper = min(upper, blanket)`` (both upper bounds, so their minimum is one; ``only``: the
    blanket value alone), except where ``delta >= beta`` gave 0 (``UpperSource.TV``), with
    ``upper_source`` and ``status`` following, and ``certified`` where the blanket value is taken (it
    is certified: an unproven opt-in scaled value it replaces no longer matters); ``lower = max(lower,
    low)`` with ``status_lower`` following; ``has_lower`` where ``covered``. ``cols`` holds ``upper,
    upper_source, status, lower, status_lower, has_lower, certified``; returns those and ``blanket``,
    new arrays.
    """
    trivial = np.asarray(cols["upper_source"]) == UpperSource.TV
    use = ~trivial & (only | (blanket < np.asarray(cols["upper"])))
    better_low = low > np.asarray(cols["lower"])
    return {"upper": np.where(use, blanket, cols["upper"]),
            "blanket": np.asarray(blanket, dtype=np.float64),
            "upper_source": np.where(use, UpperSource.BLANKET, cols["upper_source"]).astype(np.int8),
            "status": np.where(use, status, cols["status"]).astype(np.int8),
            "certified": np.asarray(cols["certified"]) | use,
            "lower": np.where(better_low, low, cols["lower"]),
            "status_lower": np.where(better_low, status_low, cols["status_lower"]).astype(np.int8),
            "has_lower": np.asarray(cols["has_lower"]) | np.asarray(covered)}
