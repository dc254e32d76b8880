"""Exact epsilon of a shuffled finite mechanism by enumeration of the output histogram: the ground truth.

See :mod:`jaxshuffle.exact` for the method and which side each result is on.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple, overload

import numpy as np
from numpy.typing import ArrayLike

from jaxshuffle._bisect import bisect_numpy
from jaxshuffle._config import check
from jaxshuffle.engine.two_count.pair import worst_case_beta

# Bisection stops when the bracket [lo, hi] is at most this wide (absolute, in epsilon).
EPS_TOL = 1e-11
# Rows must sum to 1 within this absolute slack.
_ROW_SUM_TOL = 1e-9
# Columns whose normalized profiles on the involved rows differ by at most this are lumped.
_LUMP_TOL = 1e-13
# Refuse dense histogram grids larger than this many cells (memory ~ 8 bytes * 5 per cell).
_MAX_GRID_CELLS = 5e7
UNIT_ROUNDOFF = 2.0 ** -53  # unit roundoff of float64


# ----------------------------------------------------------------------------- validation


def validate_matrix(matrix: ArrayLike) -> np.ndarray:
    """``matrix`` as a float64 row-stochastic ``K x Y`` array, checked; the one validator of raw matrices.

    Checks, in order: real numeric dtype (integers or floats; complex, boolean, object and string
    arrays are refused rather than cast, so no imaginary part is dropped), 2-D with at least one row
    and one column, finite entries, entries ``>= 0``, every row summing to 1 within ``1e-9``
    (absolute). Callers add their own limits (the matrix engine: 2 to ``MAX_INPUTS`` rows).

    Args:
      matrix: array-like ``R[x, y] = P(R(x) = y)``.

    Returns:
      The matrix as a float64 numpy array.

    Raises:
      ValueError: one line naming ``matrix``, the property it breaks and the allowed range.
    """
    try:
        raw = np.asarray(matrix)
    except (ValueError, TypeError) as err:  # ragged nested lists
        raise ValueError(f"matrix: must be a 2-D array of real numbers, got {type(matrix).__name__} ({err})") from None
    check(np.array(raw.dtype.kind in "iuf"), "matrix",
          f"must hold real numbers (integer or float dtype), got dtype {raw.dtype}")
    m = raw.astype(np.float64)
    check(m.ndim == 2 and m.shape[0] >= 1 and m.shape[1] >= 1, "matrix",
          f"must be a 2-D K x Y array, got shape {m.shape}")
    check(np.isfinite(m), "matrix", "entries must be finite", value=m)
    check(m >= 0, "matrix", "entries must be >= 0", value=m)
    check(np.abs(m.sum(axis=1) - 1.0) <= _ROW_SUM_TOL, "matrix",
          f"rows must sum to 1 within {_ROW_SUM_TOL:g} (row-stochastic; the row's sum)", value=m.sum(axis=1))
    return m


def validate_input(x: ArrayLike, k: int, name: str) -> int:
    xv = np.asarray(x, dtype=np.float64)
    check(xv.ndim == 0 and np.isfinite(xv) and xv == np.round(xv) and 0 <= xv < k, name,
          f"must be an integer input index in [0, {k})")
    return int(xv)


def _validate_others(others: Sequence[int] | np.ndarray, k: int) -> np.ndarray:
    o = np.asarray(list(others) if not isinstance(others, np.ndarray) else others, dtype=np.float64)
    o = o.reshape(-1) if o.size == 0 else o
    check(o.ndim == 1, "others", "must be a 1-D sequence of input indices")
    check(np.isfinite(o) & (o == np.round(o)) & (o >= 0) & (o < k), "others",
          f"entries must be integer input indices in [0, {k})")
    return o.astype(np.int64)


def validate_delta(delta: ArrayLike) -> float:
    d = np.asarray(delta, dtype=np.float64)
    check(d.ndim == 0 and (d > 0) & (d < 1), "delta", "must be a scalar in (0, 1)", value=d)
    return float(d)


# ----------------------------------------------------------------------------- lumping


def lump_outputs(matrix: ArrayLike, rows: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Merge outputs whose columns are proportional on ``rows`` (see the module docstring).

    Returns ``(lumped, label)``: ``lumped`` is ``K x L`` with ``lumped[:, g]`` the sum of
    the columns in group ``g`` (only the rows in ``rows`` are meaningful for the shuffle
    model), ``label[y]`` the group of output ``y`` (``-1`` for outputs of probability 0
    on every row in ``rows``, which are dropped). Profiles equal up to ``_LUMP_TOL`` count
    as equal. The histogram of lumped outputs is a sufficient statistic, so every
    divergence (and epsilon) is unchanged.
    """
    m = np.asarray(matrix, dtype=np.float64)
    row_ix = np.unique(np.asarray(rows, dtype=np.int64))
    sub = m[row_ix]
    mass = sub.sum(axis=0)
    label = np.full(m.shape[1], -1, dtype=np.int64)
    reps: list[np.ndarray] = []
    for y in np.flatnonzero(mass > 0):
        prof = sub[:, y] / mass[y]
        for g, rep in enumerate(reps):
            if np.max(np.abs(prof - rep)) <= _LUMP_TOL:
                label[y] = g
                break
        else:
            label[y] = len(reps)
            reps.append(prof)
    lumped = np.zeros((m.shape[0], len(reps)))
    for g in range(len(reps)):
        lumped[:, g] = m[:, label == g].sum(axis=1)
    return lumped, label


# ----------------------------------------------------------------------------- enumeration


@overload
def safe_log(x: np.ndarray) -> np.ndarray: ...
@overload
def safe_log(x: np.floating) -> np.floating: ...
def safe_log(x: np.ndarray | np.floating) -> np.ndarray | np.floating:
    with np.errstate(divide="ignore"):
        return np.log(x)


def log_factorials(n: int) -> np.ndarray:
    return np.array([math.lgamma(k + 1.0) for k in range(n + 2)])


def _axis_table(logp: float, size: int, lf: np.ndarray) -> np.ndarray:
    """``k log p - log k!`` for ``k = 0..size-1`` (``0 log 0 = 0``)."""
    k = np.arange(size)
    if logp == -np.inf:
        return np.where(k == 0, 0.0, -np.inf)
    return k * logp - lf[:size]


def _multinomial_grid(m: int, logpi: np.ndarray, size: int, lf: np.ndarray) -> np.ndarray:
    """log Mult(h; m, pi) on the dense grid of the first L-1 counts (each 0..size-1)."""
    d = len(logpi) - 1
    grid = np.full((1,) * d, lf[m])
    total = np.zeros((1,) * d, dtype=np.int64)
    for z in range(d):
        shape = [1] * d
        shape[z] = size
        grid = grid + _axis_table(logpi[z], size, lf).reshape(shape)
        total = total + np.arange(size).reshape(shape)
    last = m - total
    tail = _axis_table(logpi[d], m + 1, lf)
    return np.where(last >= 0, grid + tail[np.clip(last, 0, m)], -np.inf)


def _linear_grid(coef: np.ndarray, n: int) -> np.ndarray:
    """``sum_y coef_y h_y`` (``coef >= 0``: no cancellation) on the dense grid: first L-1
    counts 0..n, last ``n - their sum`` (taken as 0 where negative; those cells are invalid)."""
    d = len(coef) - 1
    grid = np.zeros((1,) * d)
    total = np.zeros((1,) * d, dtype=np.int64)
    for z in range(d):
        shape = [1] * d
        shape[z] = n + 1
        grid = grid + (coef[z] * np.arange(n + 1)).reshape(shape)
        total = total + np.arange(n + 1).reshape(shape)
    return grid + coef[d] * np.maximum(n - total, 0)


def _add_user(log_o: np.ndarray, logpi: np.ndarray) -> np.ndarray:
    """One log-space convolution step: add a user with lumped output log-probabilities ``logpi``."""
    d = log_o.ndim
    out = log_o + logpi[d]  # output L: the implicit last count grows, the grid is unshifted
    for z in range(d):
        if logpi[z] == -np.inf:
            continue
        shifted = np.full_like(log_o, -np.inf)
        dst = [slice(None)] * d
        src = [slice(None)] * d
        dst[z], src[z] = slice(1, None), slice(None, -1)
        shifted[tuple(dst)] = log_o[tuple(src)] + logpi[z]
        out = np.logaddexp(out, shifted)
    return out


def histogram_log_pmfs(matrix: ArrayLike, x0: int, x1: int, others: Sequence[int] | np.ndarray, *,
                       lump: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Log-probabilities of every reachable (lumped) output histogram under both datasets.

    Returns 1-D float64 arrays ``(log P, log Q)`` over the histograms with positive
    probability under either dataset (order unspecified but shared), where ``P`` is the
    law for ``(x0, *others)`` and ``Q`` for ``(x1, *others)``. ``lump=False`` enumerates
    the raw outputs (only for tests: the grid has ``(n+1)^(Y-1)`` cells).
    """
    m = validate_matrix(matrix)
    k = m.shape[0]
    x0 = validate_input(x0, k, "x0")
    x1 = validate_input(x1, k, "x1")
    others = _validate_others(others, k)
    n = len(others) + 1
    rows = [x0, x1, *np.unique(others).tolist()]
    if lump:
        lm, _ = lump_outputs(m, rows)
    else:
        lm = m[:, m[rows].sum(axis=0) > 0]
    n_out = lm.shape[1]
    check((n + 1.0) ** (n_out - 1) <= _MAX_GRID_CELLS, "others",
          f"too many histograms: (n+1)^(L-1) = {(n + 1.0) ** (n_out - 1):.3g} grid cells "
          f"(n = {n}, L = {n_out} lumped outputs); limit {_MAX_GRID_CELLS:.0e}")
    loglm = safe_log(lm)
    lf = log_factorials(n)
    values, counts = np.unique(others, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    if len(values) == 1 and np.all(lm[values[0]] > 0):
        # One group, no zero: Mult(h - e_y; n-1, pi) = Mult(h; n, pi) h_y / (n pi_y), so
        # P(h) = Mult(h; n, pi) * sum_y (alpha_y / pi_y) h_y / n (a sum of non-negative terms).
        pi = lm[values[0]]
        log_mult = _multinomial_grid(n, loglm[values[0]], n + 1, lf).reshape(-1)
        valid = log_mult > -np.inf
        with np.errstate(divide="ignore", invalid="ignore"):
            log_p = np.where(valid, log_mult + np.log(_linear_grid(lm[x0] / pi, n).reshape(-1) / n), -np.inf)
            log_q = np.where(valid, log_mult + np.log(_linear_grid(lm[x1] / pi, n).reshape(-1) / n), -np.inf)
        keep = np.isfinite(log_p) | np.isfinite(log_q)
        return log_p[keep], log_q[keep]
    if len(values):
        first = values[order[0]]
        log_o = _multinomial_grid(int(counts[order[0]]), loglm[first], n + 1, lf)
        for g in order[1:]:
            for _ in range(int(counts[g])):
                log_o = _add_user(log_o, loglm[values[g]])
    else:
        log_o = _multinomial_grid(0, loglm[x0], n + 1, lf)  # point mass at the empty histogram
    log_p = _add_user(log_o, loglm[x0]).reshape(-1)
    log_q = _add_user(log_o, loglm[x1]).reshape(-1)
    keep = np.isfinite(log_p) | np.isfinite(log_q)
    return log_p[keep], log_q[keep]


# ----------------------------------------------------------------------------- divergences / search


class _Pmfs:
    """Histogram laws prepared for repeated hockey-stick evaluations."""

    def __init__(self, log_p: np.ndarray, log_q: np.ndarray):
        with np.errstate(invalid="ignore"):
            self.p, self.q = np.exp(log_p), np.exp(log_q)
            self.lr = log_q - log_p  # +-inf where exactly one side is structurally zero
        both = np.isfinite(log_p) & np.isfinite(log_q)
        self.max_log_ratio = float(np.max(np.abs(self.lr[both]), initial=0.0))
        # Mass no finite t can cancel: cells where the other law is exactly 0.
        self.inf_pq = float(self.p[~np.isfinite(log_q)].sum())
        self.inf_qp = float(self.q[~np.isfinite(log_p)].sum())
        self.dropped = 0.0

    def without_negligible(self, tau: float) -> _Pmfs:
        """A copy without the lightest cells, of total P- and Q-mass at most ``tau`` each.

        Dropping a cell lowers each divergence by at most its mass: the copy's divergences
        lie in ``[D - tau, D]``; ``dropped`` records ``tau``.
        """
        order = np.argsort(self.p + self.q, kind="stable")
        cut = int(np.searchsorted(np.maximum(np.cumsum(self.p[order]), np.cumsum(self.q[order])),
                                  tau, side="right"))
        out = object.__new__(_Pmfs)
        out.__dict__.update(self.__dict__)
        keep = order[cut:]
        out.p, out.q, out.lr, out.dropped = self.p[keep], self.q[keep], self.lr[keep], tau
        return out

    def divergences(self, eps: float) -> tuple[float, float]:
        """``(D_{e^eps}(P||Q), D_{e^eps}(Q||P))``, each a sum of non-negative terms."""
        if eps == np.inf:
            return self.inf_pq, self.inf_qp
        with np.errstate(invalid="ignore", over="ignore"):
            a = np.maximum(0.0, -np.expm1(self.lr + eps))  # 1 - t Q/P, clipped
            b = np.maximum(0.0, -np.expm1(eps - self.lr))  # 1 - t P/Q, clipped
        a = np.where(self.p > 0, a, 0.0)
        b = np.where(self.q > 0, b, 0.0)
        return float(np.sum(self.p * a)), float(np.sum(self.q * b))


def bisect_scalar(f: Callable[[float], float], delta: float, lo: float, hi: float,
                  tol: float = EPS_TOL) -> tuple[float, float]:
    """Shrink ``[lo, hi]`` with ``f(lo) > delta >= f(hi)`` to width ``<= tol``
    (:func:`jaxshuffle._bisect.bisect_numpy`)."""
    lo_a, hi_a = bisect_numpy(lambda mid, _: np.array([f(float(mid[0])) <= delta]), np.array([lo]), np.array([hi]),
                              steps=200, done=lambda lo, hi: (hi - lo <= tol) | (0.5 * (lo + hi) <= lo))
    return float(lo_a[0]), float(hi_a[0])


def _epsilon_of(pm: _Pmfs, delta: float, side: str) -> float:
    """Bisection for ``min{eps : max(D(P||Q), D(Q||P)) <= delta}`` (see :func:`epsilon`)."""
    if max(pm.divergences(0.0)) <= delta:
        return 0.0
    if max(pm.inf_pq, pm.inf_qp) > delta:
        return np.inf
    # Cells of total mass <= 1e-13 delta cannot move the answer: drop them, and count
    # their mass against the upper side (the lower side only needs D_reduced <= D).
    red = pm.without_negligible(1e-13 * delta)
    slack = red.dropped if side == "upper" else 0.0

    def f(e: float) -> float:
        return max(red.divergences(e)) + slack

    # Beyond the largest finite likelihood ratio only the infinite-ratio mass (<= delta)
    # remains; nudge past rounding at that ratio.
    hi = pm.max_log_ratio
    for _ in range(60):
        if f(hi) <= delta:
            break
        hi = hi * (1 + 1e-9) + 1e-9
    else:  # infinite-ratio mass + dropped slack exceed delta: no finite certified eps
        return np.inf if side == "upper" else hi
    lo, hi = bisect_scalar(f, delta, 0.0, hi)
    return hi if side == "upper" else lo


def delta_of_eps(matrix: ArrayLike, x0: int, x1: int, others: Sequence[int] | np.ndarray, eps: float, *,
                 lump: bool = True) -> float:
    """``max(D_{e^eps}(P||Q), D_{e^eps}(Q||P))`` of the shuffled histograms.

    ``P`` is the law of the shuffled outputs for ``(x0, *others)``, ``Q`` for
    ``(x1, *others)``; ``others`` lists the other ``n - 1`` users' inputs. Exact up to
    float64 rounding (each divergence is a sum of non-negative terms
    ``P(h) max(0, 1 - e^eps Q(h)/P(h))``, relative error ~1e-12).
    """
    e = np.asarray(eps, dtype=np.float64)
    check(e.ndim == 0 and e >= 0, "eps", "must be a scalar >= 0 (inf allowed)")
    pm = _Pmfs(*histogram_log_pmfs(matrix, x0, x1, others, lump=lump))
    return max(pm.divergences(float(e)))


def epsilon(matrix: ArrayLike, x0: int, x1: int, others: Sequence[int] | np.ndarray, delta: float, *,
            lump: bool = True, side: str = "upper") -> float:
    """Exact epsilon of the shuffled outputs of a finite randomizer.

    ``epsilon = min{eps >= 0 : max(D_{e^eps}(P||Q), D_{e^eps}(Q||P)) <= delta}`` for the
    histogram laws ``P`` (inputs ``(x0, *others)``) and ``Q`` (``(x1, *others)``), where
    ``matrix[x, y] = P[R(x) = y]`` (``K x Y``, row-stochastic) and ``others`` lists the
    other ``n - 1`` users' inputs (empty for ``n = 1``: plain local DP).

    Bisection on eps (the divergence is non-increasing in eps) down to a bracket of width
    ``EPS_TOL = 1e-11``. ``side="upper"`` (default) returns the upper end, where the
    computed divergence is ``<= delta``: the value errs high by at most ``1e-11`` plus the
    effect of float64 rounding in the divergence (relative ~1e-12, not budgeted).
    ``side="lower"`` returns the lower end (computed divergence ``> delta``), erring low.
    Histograms of total probability ``<= 1e-13 delta`` under both laws are left out of the
    search; their mass is added to the divergence on the upper side (it cannot exceed it).
    Returns ``inf`` if outputs impossible under one dataset carry more than ``delta``.

    Cost: a dense grid of ``(n+1)^(L-1)`` cells, ``L`` the number of lumped outputs
    (3 for k-ary RR with all others holding x0 or x1, so n = 1000 takes well under a
    second); each further distinct input value among ``others`` beyond the most common
    one costs one grid pass per user.
    """
    check(side in ("upper", "lower"), "side", "must be 'upper' or 'lower'", value=side)
    delta = validate_delta(delta)
    pm = _Pmfs(*histogram_log_pmfs(matrix, x0, x1, others, lump=lump))
    return _epsilon_of(pm, delta, side)


class WorstCase(NamedTuple):
    """Result of :func:`worst_case_epsilon`: the epsilon and the others' inputs achieving it."""

    epsilon: float
    others: tuple[int, ...]


def worst_case_epsilon(matrix: ArrayLike, x0: int, x1: int, n: int, delta: float,
                       candidates: str = "all-equal") -> WorstCase:
    """Largest exact epsilon over candidate datasets of the other ``n - 1`` users.

    ``candidates="all-equal"``: every ``others = (v,) * (n-1)``; ``"mixtures"``: also every
    two-value mixture ``(v,) * m + (w,) * (n-1-m)``, ``v < w``, ``1 <= m <= n-2``.
    Returns ``WorstCase(epsilon, others)`` for the worst candidate (first one on ties).
    Only candidates are searched, so this is a LOWER bound on the worst case over all
    datasets (each candidate's epsilon is the upper bracket end of :func:`epsilon`).
    Cost: ``K`` enumerations for ``"all-equal"``; ``"mixtures"`` adds ``K(K-1)/2 (n-2)``,
    each with one grid pass per user of the smaller group -- meant for small ``n``.
    """
    m = validate_matrix(matrix)
    k = m.shape[0]
    nv = np.asarray(n, dtype=np.float64)
    check(nv.ndim == 0 and np.isfinite(nv) and nv == np.round(nv) and nv >= 1, "n",
          "must be an integer >= 1", value=nv)
    check(candidates in ("all-equal", "mixtures"), "candidates", "must be 'all-equal' or 'mixtures'", value=candidates)
    n = int(nv)
    delta = validate_delta(delta)
    cands: list[tuple[int, ...]] = [(v,) * (n - 1) for v in range(k)]
    if candidates == "mixtures":
        for v, w in itertools.combinations(range(k), 2):
            cands += [(v,) * c + (w,) * (n - 1 - c) for c in range(1, n - 1)]
    best = WorstCase(-1.0, ())
    for others in dict.fromkeys(cands):
        e = epsilon(m, x0, x1, others, delta)
        if e > best.epsilon:
            best = WorstCase(e, others)
    return best


def lower_bound_parameters(matrix: ArrayLike, x0: int, x1: int,
                           x_star: int | None = None) -> tuple[float, float, float, float]:
    """``(p0, beta, q0, q1)`` of the variation-ratio paper's Theorem 5.1 for ``R = matrix``.

    With ``P0 = R(x0)``, ``P1 = R(x1)``, ``R* = R(x_star)`` and the output sets
    ``Y0 = {P0 > P1}``, ``Y1 = {P1 > P0}`` (the markers (1,0) and (0,1) of Appendix B)::

        p0   = P1(Y1) / P0(Y1)          (inf if P0(Y1) = 0)
        beta = P1(Y1) - P0(Y1) = TV(P0, P1)  (the paper's D_{e^0}, total variation)
        q0   = P0(Y0) / R*(Y0),   q1 = P1(Y1) / R*(Y1)

    so that ``alpha = beta/(p0-1) = P0(Y1)``, ``u = p0 alpha = P1(Y1)``, ``r0 = alpha p0/q0
    = R*(Y0)`` and ``r1 = alpha p0/q1 = R*(Y1)``: ``vr_pair(p0, beta, q0=q0, q1=q1)`` is the
    law of the two marker counts of the shuffled outputs (others all ``x_star``), a
    post-processing of them, hence a lower bound -- provided ``P0(Y0) = P1(Y1)`` (the
    pair gives the victim's markers the swapped probabilities ``(u, v)``/``(v, u)``).
    That symmetry is required here (ValueError otherwise): without it the pair is not the
    marker law and its epsilon can exceed the exact one.

    ``x_star=None`` takes the paper's choice ``argmax_x min(q0(x), q1(x))``. Entries of the
    two rows equal to 1e-12 (relative) count as ties, and ``beta`` is capped at
    ``(p0-1)/(p0+1)``: both absorb rounding in a matrix built in floating point.
    """
    m = validate_matrix(matrix)
    k = m.shape[0]
    x0 = validate_input(x0, k, "x0")
    x1 = validate_input(x1, k, "x1")
    p0_row, p1_row = m[x0], m[x1]
    # Outputs whose probabilities agree to rounding (1e-12 relative) are ties, in neither set:
    # a matrix built in floating point rarely reproduces mathematically equal entries exactly.
    tie = np.abs(p0_row - p1_row) <= 1e-12 * np.maximum(p0_row, p1_row)
    y0, y1 = (p0_row > p1_row) & ~tie, (p1_row > p0_row) & ~tie
    check(y1.any(), "x1", "R(x0) and R(x1) must differ (no output is likelier under x1)")
    a0, a1 = p0_row[y0].sum(), p1_row[y1].sum()  # P0(Y0), P1(Y1)
    check(abs(a0 - a1) <= 1e-12 * max(a0, a1), "matrix",
          f"Theorem 5.1 needs P[R(x0) in Y0] == P[R(x1) in Y1] (got {a0!r} vs {a1!r})")
    with np.errstate(divide="ignore"):
        q0_all = np.where(m[:, y0].sum(axis=1) > 0, a0 / m[:, y0].sum(axis=1), np.inf)
        q1_all = np.where(m[:, y1].sum(axis=1) > 0, a1 / m[:, y1].sum(axis=1), np.inf)
    if x_star is None:
        x_star = int(np.argmax(np.minimum(q0_all, q1_all)))
    x_star = validate_input(x_star, k, "x_star")
    v = p0_row[y1].sum()
    p0 = a1 / v if v > 0 else np.inf
    beta = a1 - v
    if np.isfinite(p0):  # rounding can put beta a hair above (p0-1)/(p0+1), where w = 1-(p0+1)alpha < 0
        beta = min(beta, float(worst_case_beta(p0, np)))
    return float(p0), float(beta), float(q0_all[x_star]), float(q1_all[x_star])
