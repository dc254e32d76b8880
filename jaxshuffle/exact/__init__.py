"""Ground truth for the shuffle model: exact epsilon by enumerating output histograms.

Setting. A finite local randomizer is a ``K x Y`` row-stochastic matrix ``M``
(``M[x, y] = P[R(x) = y]``). ``n`` users hold ``(x0, x_2, ..., x_n)`` or
``(x1, x_2, ..., x_n)``; each applies ``R`` independently and the shuffler releases
the multiset of the ``n`` outputs, i.e. the histogram ``h`` (``h_y`` = number of
outputs equal to ``y``, ``sum h = n``). With ``P``, ``Q`` the histogram laws under
the two datasets, ``D_t(P||Q) = sum_h max(0, P(h) - t Q(h))`` and

    epsilon = min{eps >= 0 : max(D_{e^eps}(P||Q), D_{e^eps}(Q||P)) <= delta}.

Lumping (why a few outputs suffice). Let ``R`` be the rows involved (``x0``, ``x1``
and the others' inputs) and ``G`` a set of outputs whose columns are proportional on
those rows: ``M[r, y] = lam_y * c_r`` for ``r in R, y in G`` (identical columns are
the special case ``lam_y = 1/|G|``). For every user, given that the output lies in
``G`` it equals ``y`` with probability ``lam_y / sum_G lam``, whatever the input.
So, given the lumped histogram ``z`` (counts per group), the split of each group
count is a fixed multinomial ``K(h | z)`` that is the same under both datasets:
``P(h) = P_lumped(z) K(h|z)`` and ``Q(h) = Q_lumped(z) K(h|z)``. Hence
``sum_h max(0, P(h) - t Q(h)) = sum_z max(0, P_lumped(z) - t Q_lumped(z))``: the
lumped histogram is a sufficient statistic and every divergence is unchanged.
Columns that are zero on every involved row are dropped (they never occur).
k-ary randomized response with all others equal lumps to 3 or 4 outputs for any k.

Enumeration. Everything lives on a dense grid of the first ``L - 1`` lumped counts (the
last is ``n`` minus their sum), in float64 log space, with no Python loop over
histograms. If the others all hold one value ``v`` (row ``pi > 0``), the identity
``Mult(h - e_y; n-1, pi) = Mult(h; n, pi) h_y / (n pi_y)`` gives the closed form

    P(h) = sum_y alpha_y Mult(h - e_y; n-1, pi) = Mult(h; n, pi) * sum_y (alpha_y/pi_y) h_y / n

(``alpha`` the victim's row). Otherwise the others' law (a convolution of multinomials,
one per input value) is built from the largest group in closed form and one log-space
convolution step per further user; the victim is one more step.

PEM and the half-space reduction (``pem_lower``). With the others all holding ``c``
(row ``pi``) and the victim row ``alpha`` (``beta`` under the neighbour), the identity
above gives

    P(h) - t Q(h) = Mult(h; n, pi) / n * S(h),   S(h) = sum_y c_y h_y,   c_y = (alpha_y - t beta_y) / pi_y,

so ``P/Q`` is linear-fractional in the counts, ``{P > tQ} = {S > 0}`` is a half-space,
and ``D_t(P||Q) = E[max(0, S(H))] / n`` with ``H ~ Mult(n, pi)``. Fixing the fibre
``(H_a, H_b) = (i, j)`` leaves ``K = H_c ~ Bin(m, rho)``, ``m = n - i - j``,
``rho = pi_c / (pi_c + pi_bot)``, and ``S`` is linear in ``K``: the half-space meets the
fibre in a binomial tail ``R``, and per output category (``E[K 1_R] = m rho
P[Bin(m-1, rho) in R - 1]``, ``E[(m-K) 1_R] = m (1-rho) P[Bin(m-1, rho) in R]``)

    E[S 1_R] = (c_a i + c_b j) P[K in R] + c_c m rho P[K' in R - 1] + c_bot m (1-rho) P[K' in R].

With all binomial tails tabulated once (``O(n^2)``), one divergence costs ``O(n^2)``
(far fewer after dropping negligible fibres) instead of the ``O(n^3)`` loop of the
supplement's Algorithm 2.

Sides. ``epsilon`` returns the upper end of a bisection bracket of width 1e-11 (the
computed divergence is ``<= delta`` there) by default, ``side="lower"`` the lower end;
rounding in the divergence (relative ~1e-12) is not budgeted, so both are the exact value
to about 1e-10. ``pem_lower`` errs low, as a lower bound must: an imperfect boundary
only lowers ``E[S 1_R] <= E[max(0, S)]``, dropped fibres only lower a sum of
non-negative terms, float64 rounding is subtracted as an explicit allowance, and the
result is the lower end of its bisection bracket.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple, Sequence

import numpy as np

from jaxshuffle._config import broadcast_shapes_or_raise, check

# Bisection stops when the bracket [lo, hi] is at most this wide (absolute, in epsilon).
EPS_TOL = 1e-11
# Rows must sum to 1 within this absolute slack.
_ROW_SUM_TOL = 1e-9
# Columns whose normalized profiles on the involved rows differ by at most this are lumped.
_LUMP_TOL = 1e-13
# Refuse dense histogram grids larger than this many cells (memory ~ 8 bytes * 5 per cell).
_MAX_GRID_CELLS = 5e7
_U = 2.0 ** -53  # unit roundoff of float64
# PEM fibres whose mass under both hypotheses is below e^this are dropped (lowers D only).
_LOG_PRUNE = -92.0
# PEM distances must lie in (0, _MAX_DISTANCE]: beyond, e^-d leaves the normal float range.
_MAX_DISTANCE = 200.0


# ----------------------------------------------------------------------------- validation


def _validate_matrix(matrix) -> np.ndarray:
    m = np.asarray(matrix, dtype=np.float64)
    check(m.ndim == 2 and m.shape[0] >= 1 and m.shape[1] >= 1, "matrix",
          f"must be a 2-D K x Y array, got shape {m.shape}")
    check(np.isfinite(m), "matrix", "entries must be finite (NaN is not)")
    check(m >= 0, "matrix", "entries must be >= 0")
    check(np.abs(m.sum(axis=1) - 1.0) <= _ROW_SUM_TOL, "matrix",
          f"rows must sum to 1 (row-stochastic, tolerance {_ROW_SUM_TOL})")
    return m


def _validate_input(x, k: int, name: str) -> int:
    xv = np.asarray(x, dtype=np.float64)
    check(xv.ndim == 0 and np.isfinite(xv) and xv == np.round(xv) and 0 <= xv < k, name,
          f"must be an integer input index in [0, {k})")
    return int(xv)


def _validate_others(others, k: int) -> np.ndarray:
    o = np.asarray(list(others) if not isinstance(others, np.ndarray) else others, dtype=np.float64)
    o = o.reshape(-1) if o.size == 0 else o
    check(o.ndim == 1, "others", "must be a 1-D sequence of input indices")
    check(np.isfinite(o) & (o == np.round(o)) & (o >= 0) & (o < k), "others",
          f"entries must be integer input indices in [0, {k})")
    return o.astype(np.int64)


def _validate_delta(delta) -> float:
    d = np.asarray(delta, dtype=np.float64)
    check(d.ndim == 0 and (d > 0) & (d < 1), "delta", "must be a scalar in (0, 1) (NaN is not)")
    return float(d)


# ----------------------------------------------------------------------------- lumping


def lump_outputs(matrix, rows: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Merge outputs whose columns are proportional on ``rows`` (see the module docstring).

    Returns ``(lumped, label)``: ``lumped`` is ``K x L`` with ``lumped[:, g]`` the sum of
    the columns in group ``g`` (only the rows in ``rows`` are meaningful for the shuffle
    model), ``label[y]`` the group of output ``y`` (``-1`` for outputs of probability 0
    on every row in ``rows``, which are dropped). Profiles equal up to ``_LUMP_TOL`` count
    as equal. The histogram of lumped outputs is a sufficient statistic, so every
    divergence (and epsilon) is unchanged.
    """
    m = np.asarray(matrix, dtype=np.float64)
    rows = np.unique(np.asarray(rows, dtype=np.int64))
    sub = m[rows]
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


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def _log_factorials(n: int) -> np.ndarray:
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


def histogram_log_pmfs(matrix, x0, x1, others, *, lump: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Log-probabilities of every reachable (lumped) output histogram under both datasets.

    Returns 1-D float64 arrays ``(log P, log Q)`` over the histograms with positive
    probability under either dataset (order unspecified but shared), where ``P`` is the
    law for ``(x0, *others)`` and ``Q`` for ``(x1, *others)``. ``lump=False`` enumerates
    the raw outputs (only for tests: the grid has ``(n+1)^(Y-1)`` cells).
    """
    m = _validate_matrix(matrix)
    k = m.shape[0]
    x0 = _validate_input(x0, k, "x0")
    x1 = _validate_input(x1, k, "x1")
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
    loglm = _log(lm)
    lf = _log_factorials(n)
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

    def without_negligible(self, tau: float) -> "_Pmfs":
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


def _bisect(f, delta: float, lo: float, hi: float, tol: float = EPS_TOL) -> tuple[float, float]:
    """Shrink ``[lo, hi]`` with ``f(lo) > delta >= f(hi)`` to width ``<= tol``."""
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if f(mid) > delta:
            lo = mid
        else:
            hi = mid
    return lo, hi


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

    def f(e):
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
    lo, hi = _bisect(f, delta, 0.0, hi)
    return hi if side == "upper" else lo


def delta_of_eps(matrix, x0, x1, others, eps, *, lump: bool = True) -> float:
    """``max(D_{e^eps}(P||Q), D_{e^eps}(Q||P))`` of the shuffled histograms.

    ``P`` is the law of the shuffled outputs for ``(x0, *others)``, ``Q`` for
    ``(x1, *others)``; ``others`` lists the other ``n - 1`` users' inputs. Exact up to
    float64 rounding (each divergence is a sum of non-negative terms
    ``P(h) max(0, 1 - e^eps Q(h)/P(h))``, relative error ~1e-12).
    """
    e = np.asarray(eps, dtype=np.float64)
    check(e.ndim == 0 and e >= 0, "eps", "must be a scalar >= 0 (inf allowed, NaN is not)")
    pm = _Pmfs(*histogram_log_pmfs(matrix, x0, x1, others, lump=lump))
    return max(pm.divergences(float(e)))


def epsilon(matrix, x0, x1, others, delta, *, lump: bool = True, side: str = "upper") -> float:
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
    check(side in ("upper", "lower"), "side", "must be 'upper' or 'lower'")
    delta = _validate_delta(delta)
    pm = _Pmfs(*histogram_log_pmfs(matrix, x0, x1, others, lump=lump))
    return _epsilon_of(pm, delta, side)


class WorstCase(NamedTuple):
    """Result of :func:`worst_case_epsilon`: the epsilon and the others' inputs achieving it."""

    epsilon: float
    others: tuple[int, ...]


def worst_case_epsilon(matrix, x0, x1, n, delta, candidates: str = "all-equal") -> WorstCase:
    """Largest exact epsilon over candidate datasets of the other ``n - 1`` users.

    ``candidates="all-equal"``: every ``others = (v,) * (n-1)``; ``"mixtures"``: also every
    two-value mixture ``(v,) * m + (w,) * (n-1-m)``, ``v < w``, ``1 <= m <= n-2``.
    Returns ``WorstCase(epsilon, others)`` for the worst candidate (first one on ties).
    Only candidates are searched, so this is a LOWER bound on the worst case over all
    datasets (each candidate's epsilon is the upper bracket end of :func:`epsilon`).
    Cost: ``K`` enumerations for ``"all-equal"``; ``"mixtures"`` adds ``K(K-1)/2 (n-2)``,
    each with one grid pass per user of the smaller group -- meant for small ``n``.
    """
    m = _validate_matrix(matrix)
    k = m.shape[0]
    nv = np.asarray(n, dtype=np.float64)
    check(nv.ndim == 0 and np.isfinite(nv) and nv == np.round(nv) and nv >= 1, "n",
          "must be an integer >= 1")
    check(candidates in ("all-equal", "mixtures"), "candidates", "must be 'all-equal' or 'mixtures'")
    n = int(nv)
    delta = _validate_delta(delta)
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


def lower_bound_parameters(matrix, x0, x1, x_star=None) -> tuple[float, float, float, float]:
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
    m = _validate_matrix(matrix)
    k = m.shape[0]
    x0 = _validate_input(x0, k, "x0")
    x1 = _validate_input(x1, k, "x1")
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
    x_star = _validate_input(x_star, k, "x_star")
    v = p0_row[y1].sum()
    p0 = a1 / v if v > 0 else np.inf
    beta = a1 - v
    if np.isfinite(p0):  # rounding can put beta a hair above (p0-1)/(p0+1), where w = 1-(p0+1)alpha < 0
        beta = min(beta, (p0 - 1) / (p0 + 1))
    return float(p0), float(beta), float(q0_all[x_star]), float(q1_all[x_star])


# ----------------------------------------------------------------------------- PEM


def _pem_rows(d_ab: float, d_ac: float, d_bc: float) -> np.ndarray:
    """Table I of the metric-DP supplement, with the bottom column free of cancellation.

    With ``s_x = S_x - 1`` (e.g. ``s_a = e^-ab + e^-ac``) each pair ``k = (x, z)`` gives
    ``N_k - 1 = s_top + |s_x - s_z| / expm1(d_xz)`` (``top`` the larger of ``s_x, s_z``),
    and ``N - S_x = max_k (s_top_k - s_x + extra_k)``: differences ``s_x - s_z`` are formed
    as ``e^-u - e^-v = e^-v expm1(v - u)``, so tiny bottom entries (large distances) keep
    their relative accuracy and the float matrix keeps every ratio within ``e^D``.
    Raises ValueError if it does not (to 1e-9 relative).
    """
    dist = {(0, 1): d_ab, (0, 2): d_ac, (1, 2): d_bc}
    ex = {k: math.exp(-v) for k, v in dist.items()}
    s = [ex[(0, 1)] + ex[(0, 2)], ex[(0, 1)] + ex[(1, 2)], ex[(0, 2)] + ex[(1, 2)]]
    diff = np.zeros((3, 3))  # diff[x, z] = s_x - s_z = e^-d(x,w) - e^-d(z,w), w the third input
    for (x, z) in dist:
        w = 3 - x - z
        u, v = dist[tuple(sorted((x, w)))], dist[tuple(sorted((z, w)))]
        diff[x, z] = math.exp(-v) * math.expm1(v - u)
        diff[z, x] = -diff[x, z]
    cands = []
    for (x, z), d in dist.items():
        top = x if diff[x, z] >= 0 else z
        cands.append((top, abs(diff[x, z]) / math.expm1(d)))
    n_abc = 1.0 + max(s[top] + extra for top, extra in cands)
    bottom = [max(0.0, max(diff[top, x] + extra for top, extra in cands)) for x in range(3)]
    core = np.array([[1.0, ex[(0, 1)], ex[(0, 2)]], [ex[(0, 1)], 1.0, ex[(1, 2)]],
                     [ex[(0, 2)], ex[(1, 2)], 1.0]])
    rows = np.concatenate([core, np.array(bottom)[:, None]], axis=1) / n_abc
    for (x, z), d in dist.items():
        bound = math.exp(d) * (1 + 1e-9)
        ok = (rows[x] <= bound * rows[z]) & (rows[z] <= bound * rows[x])
        check(ok, "d_ab, d_ac, d_bc",
              f"PEM is not representable in float64 at ({d_ab}, {d_ac}, {d_bc}): a ratio exceeds e^D")
    return rows


def _validate_distances(d_ab, d_ac, d_bc):
    d = {k: np.asarray(v, dtype=np.float64) for k, v in (("d_ab", d_ab), ("d_ac", d_ac), ("d_bc", d_bc))}
    for name, v in d.items():
        check((v > 0) & (v <= _MAX_DISTANCE), name, f"must lie in (0, {_MAX_DISTANCE:g}] (NaN is not)")
    ab, ac, bc = d["d_ab"], d["d_ac"], d["d_bc"]
    slack = 1e-12 * (ab + ac + bc)
    check(ab <= ac + bc + slack, "d_ab", "violates the triangle inequality d_ab <= d_ac + d_bc")
    check(ac <= ab + bc + slack, "d_ac", "violates the triangle inequality d_ac <= d_ab + d_bc")
    check(bc <= ab + ac + slack, "d_bc", "violates the triangle inequality d_bc <= d_ab + d_ac")
    return ab, ac, bc


def pem_matrix(d_ab, d_ac, d_bc) -> np.ndarray:
    """The padded exponential mechanism (supplement Table I) as a row-stochastic matrix.

    Rows are the inputs ``(a, b, c)``, columns the outputs ``(a, b, c, bot)``::

        a: (1, e^-ab, e^-ac, N - S_a) / N     S_a = 1 + e^-ab + e^-ac
        b: (e^-ab, 1, e^-bc, N - S_b) / N     S_b = 1 + e^-ab + e^-bc
        c: (e^-ac, e^-bc, 1, N - S_c) / N     S_c = 1 + e^-ac + e^-bc

    ``N = max over pairs (x,z) of (e^{d_xz} max(S_x,S_z) - min(S_x,S_z)) / (e^{d_xz} - 1)``,
    the least ``N`` keeping every likelihood ratio within ``e^{D}`` (the triangle
    inequality handles the other columns). Distances broadcast; the result has shape
    ``batch + (3, 4)``. Requires ``0 < d <= 200`` and the triangle inequality.
    """
    ab, ac, bc = _validate_distances(d_ab, d_ac, d_bc)
    shape = broadcast_shapes_or_raise(d_ab=ab, d_ac=ac, d_bc=bc)
    ab, ac, bc = (np.broadcast_to(v, shape).reshape(-1) for v in (ab, ac, bc))
    out = np.stack([_pem_rows(*t) for t in zip(ab, ac, bc)]) if ab.size else np.zeros((0, 3, 4))
    return out.reshape(shape + (3, 4))


def _binomial_tail_tables(n: int, rho: float, one_minus_rho: float, lf: np.ndarray):
    """``SF[m, k] = P[Bin(m, rho) >= k]`` (k = 0..n+1) and ``CDF[m, k+1] = P[Bin(m, rho) <= k]``
    (k = -1..n), for m = 0..n, by cumulative sums of the pmf (all terms non-negative)."""
    m = np.arange(n + 1)[:, None]
    k = np.arange(n + 1)[None, :]
    valid = k <= m
    with np.errstate(invalid="ignore"):
        logpmf = (lf[m] - lf[k] - lf[np.clip(m - k, 0, n)]
                  + np.where(k > 0, k * _log(np.float64(rho)), 0.0)
                  + np.where(m - k > 0, (m - k) * _log(np.float64(one_minus_rho)), 0.0))
    pmf = np.where(valid, np.exp(np.where(valid, logpmf, -np.inf)), 0.0)
    sf = np.zeros((n + 1, n + 2))
    sf[:, : n + 1] = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1]
    cdf = np.zeros((n + 1, n + 2))
    cdf[:, 1:] = np.cumsum(pmf, axis=1)
    return np.minimum(sf, 1.0), np.minimum(cdf, 1.0)


class _PemEngine:
    """``O(n^2)`` hockey-stick divergences of PEM, others all holding ``c``.

    Why the result can only err low: for ANY half-line ``R'`` of ``k``, ``E[S 1_{R'}] <=
    E[max(0, S)]`` pointwise, so locating the boundary of ``{S > 0}`` imperfectly only
    lowers a fibre's value; dropping fibres (a sum of non-negative terms) only lowers the
    total; and the remaining float64 rounding is subtracted as an explicit allowance.
    """

    def __init__(self, n: int, rows: np.ndarray):
        self.n = n
        self.alpha, self.beta, pi = rows[0], rows[1], rows[2]
        self.pi = pi
        lf = _log_factorials(n)
        i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        i, j = i[i + j <= n], j[i + j <= n]
        m = n - i - j
        rest = pi[2] + pi[3]
        logt = (lf[n] - lf[i] - lf[j] - lf[m] + i * math.log(pi[0]) + j * math.log(pi[1])
                + m * math.log(rest))
        # A fibre's mass under either hypothesis is at most T max_y(row_y / pi_y): drop the
        # fibres where that is below e^-92 ~ 1e-40 (this lowers the divergence by less).
        safe_pi = np.where(pi > 0, pi, 1.0)
        ratio = max(float(np.max(np.where(pi > 0, np.maximum(self.alpha, self.beta) / safe_pi, 0.0))), 1.0)
        keep = logt + math.log(ratio) > _LOG_PRUNE
        self.t = np.exp(logt[keep])  # law of (H_a, H_b) under Mult(n, pi)
        self.i, self.j = i[keep].astype(np.float64), j[keep].astype(np.float64)
        self.m = m[keep]
        self.mf = self.m.astype(np.float64)
        self.m1 = np.maximum(self.m - 1, 0)
        self.bot_absent = pi[3] == 0.0  # equilateral: bot never emitted (alpha, beta bot = 0 too)
        rho, rho_c = pi[2] / rest, pi[3] / rest
        self.sf, self.cdf = _binomial_tail_tables(n, rho, rho_c, lf)
        self.m_rho = self.mf * rho  # E[K 1{K in R}] = m rho P[Bin(m-1, rho) in R - 1]
        self.m_rho_c = self.mf * rho_c  # E[(m-K) 1{K in R}] = m (1-rho) P[Bin(m-1, rho) in R]
        # Relative rounding error of each term (T, binomial tails, coefficients):
        # log-factorials of size ~ n log n from math.lgamma, exp, cumulative sums of <= n+1
        # non-negative terms; about 20 u n (log n + 1), u = 2^-53, taken 3x wider.
        self.rel = _U * (64.0 * (n + 2) * (math.log(n + 2) + 1.0) + 256.0)
        # Underflowed table entries (<= (n+1) 1e-323 each) times the largest |S| <= n sum |c|.
        self.tiny = len(self.t) * (n + 1) * 1e-323 * n

    def divergence(self, a: np.ndarray, b: np.ndarray, t: float) -> tuple[float, float]:
        """``(D, allowance)`` with ``D - allowance <= D_t(P_a || P_b)``; ``P_a`` has victim
        row ``a``. (``D`` itself is the divergence to float64 accuracy whenever the boundary
        search below lands on the true half-line, as it does in the tests.)

        ``D = sum_ij T_ij E[max(0, S)] / n``, ``S = sum_y c_y H_y``; on a fibre
        ``S(k) = c_a i + c_b j + c_c k + c_bot (m - k)`` with ``k = H_c ~ Bin(m, rho)`` is
        linear in ``k``, so ``R = {S > 0}`` is a half-line; per output category,
        ``E[S 1_R] = (c_a i + c_b j) P[K in R] + c_c m rho P[K' in R - 1]
        + c_bot m (1-rho) P[K' in R]``, ``K' ~ Bin(m-1, rho)``.
        The boundary of ``R`` is located from the root ``-A/B`` and re-tested with ``S``
        summed per category (no cancellation between ``c_c k`` and ``c_bot (m - k)``).
        The allowance is ``rel`` times the magnitude of those terms (``<= P(R) + t Q(R)``).
        """
        pis = np.where(self.pi > 0, self.pi, 1.0)
        c, cabs = (a - t * b) / pis, (a + t * b) / pis
        if self.bot_absent:
            c[3] = cabs[3] = 0.0
        i, j, m, mf, m1 = self.i, self.j, self.m, self.mf, self.m1
        base = c[0] * i + c[1] * j

        def s_at(k):  # S(k), summed per category
            kf = np.clip(k, 0, m).astype(np.float64)
            return base + c[2] * kf + c[3] * (mf - kf)

        bb = c[2] - c[3]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x = -(base + c[3] * mf) / bb if bb != 0 else None
        if bb > 0:  # R = {k >= k0}
            k = np.clip(np.nan_to_num(np.floor(x) + 1.0), 0, mf + 1).astype(np.int64)
            for _ in range(3):
                k = np.where((k >= 1) & (s_at(k - 1) > 0), k - 1, k)
            for _ in range(3):
                k = np.where((k <= m) & (s_at(k) <= 0), k + 1, k)
            p1, p2, p3 = self.sf[m, k], self.sf[m1, np.maximum(k - 1, 0)], self.sf[m1, k]
        elif bb < 0:  # R = {k <= k1}
            k = np.clip(np.nan_to_num(np.ceil(x) - 1.0), -1, mf).astype(np.int64)
            for _ in range(3):
                k = np.where((k <= m - 1) & (s_at(k + 1) > 0), k + 1, k)
            for _ in range(3):
                k = np.where((k >= 0) & (s_at(k) <= 0), k - 1, k)
            p1, p2, p3 = self.cdf[m, k + 1], self.cdf[m1, np.maximum(k, 0)], self.cdf[m1, k + 1]
        else:  # S constant along the fibre
            p1 = p2 = p3 = (s_at(np.zeros_like(m)) > 0).astype(np.float64)
        val = base * p1 + c[2] * self.m_rho * p2 + c[3] * self.m_rho_c * p3
        mag = ((cabs[0] * i + cabs[1] * j) * p1 + cabs[2] * self.m_rho * p2
               + cabs[3] * self.m_rho_c * p3)
        d = float(np.sum(self.t * np.maximum(0.0, val))) / self.n
        err = (self.rel * float(np.sum(self.t * mag)) + self.tiny * float(np.sum(cabs))) / self.n
        return d, err + 1e-300

    def lower_divergence(self, eps: float) -> float:
        """``max`` over both directions of (computed divergence - rounding allowance)."""
        t = math.exp(eps)
        d1, e1 = self.divergence(self.alpha, self.beta, t)
        d2, e2 = self.divergence(self.beta, self.alpha, t)
        return max(d1 - e1, d2 - e2)


def _pem_lower_one(n: int, d_ab: float, d_ac: float, d_bc: float, delta: float) -> float:
    eng = _PemEngine(n, _pem_rows(d_ab, d_ac, d_bc))
    f = eng.lower_divergence
    if f(0.0) <= delta:
        return 0.0
    # At eps = d_ab every likelihood ratio is within e^eps: the true divergence is 0.
    lo, _ = _bisect(f, delta, 0.0, d_ab)
    return lo


def pem_lower(n, d_ab, d_ac, d_bc, delta) -> np.ndarray:
    """Exhaustive lower bound on the shuffled metric-DP epsilon (supplement Algorithm 2, corrected).

    The exact epsilon of the shuffled PEM (:func:`pem_matrix`) on ``S = [a, c, ..., c]``
    vs ``S' = [b, c, ..., c]`` (``n`` users): ``min{eps : max(D_{e^eps}(P||Q),
    D_{e^eps}(Q||P)) <= delta}`` over the histograms ``(#a, #b, #c, #bot)``, all
    ``A, B, C >= 0`` with ``A + B + C <= n`` (``#bot = n - A - B - C``), with multinomial
    ``(n-1)!/(A! B! C! (n-1-A-B-C)!)`` weights for the others. Since PEM is ``D``-private,
    this is a LOWER bound on the worst-case shuffled epsilon of any ``D``-private mechanism
    for the pair ``(a, b)``.

    Errs low, as a lower bound must: each divergence is computed in ``O(n^2)`` (half-space
    reduction, module docstring) and reduced by a rounding allowance, and the result is the
    lower end of a bisection bracket of width ``<= 1e-11`` on which the reduced divergence
    still exceeds ``delta``. Per parameter point: ``O(n^2)`` tables (about ``4 (n+1)^2``
    floats, so n = 5000 needs ~1 GB) and ``O(n^2)`` work per bisection step, far less after
    dropping fibres of negligible mass; n = 1000 takes about 0.3 s.

    Corrections to the printed Algorithm 2 (MATH.md section 4): the others' counts are
    multinomial, not a product of binomials, and the loop must include ``A + B + C = n``
    (no padding symbol), which ``A in [n], B in [n-1-A], C in [n-1-A-B]`` leaves out.

    All arguments broadcast (``n`` integer >= 1, distances in ``(0, 200]`` satisfying the
    triangle inequality, ``delta`` in ``(0, 1)``); returns a float64 array of the
    broadcast shape.
    """
    nv = np.asarray(n, dtype=np.float64)
    check(np.isfinite(nv) & (nv == np.round(nv)) & (nv >= 1), "n", "must be an integer >= 1")
    dv = np.asarray(delta, dtype=np.float64)
    check((dv > 0) & (dv < 1), "delta", "must lie in (0, 1) (NaN is not)")
    ab, ac, bc = _validate_distances(d_ab, d_ac, d_bc)
    shape = broadcast_shapes_or_raise(n=nv, d_ab=ab, d_ac=ac, d_bc=bc, delta=dv)
    args = [np.broadcast_to(v, shape).reshape(-1) for v in (nv, ab, ac, bc, dv)]
    out = np.array([_pem_lower_one(int(a), float(b), float(c), float(d), float(e))
                    for a, b, c, d, e in zip(*args)], dtype=np.float64)
    return out.reshape(shape)
