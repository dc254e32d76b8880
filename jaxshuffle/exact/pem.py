"""PEM exhaustive lower bound for the shuffle model of metric DP (Algorithm 2 corrected, docs/math.md section 9)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from jaxshuffle._config import broadcast_shapes_or_raise, check
from jaxshuffle.exact.enumerate import UNIT_ROUNDOFF, bisect_scalar, log_factorials, safe_log

# PEM fibres whose mass under both hypotheses is below e^this are dropped (lowers D only).
_LOG_PRUNE = -92.0
# PEM distances must lie in (0, _MAX_DISTANCE]: beyond, e^-d leaves the normal float range.
_MAX_DISTANCE = 200.0


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
        u, v = dist[(min(x, w), max(x, w))], dist[(min(z, w), max(z, w))]
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


def _validate_distances(d_ab: ArrayLike, d_ac: ArrayLike, d_bc: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d = {k: np.asarray(v, dtype=np.float64) for k, v in (("d_ab", d_ab), ("d_ac", d_ac), ("d_bc", d_bc))}
    for name, v in d.items():
        check((v > 0) & (v <= _MAX_DISTANCE), name, f"must lie in (0, {_MAX_DISTANCE:g}]")
    ab, ac, bc = d["d_ab"], d["d_ac"], d["d_bc"]
    slack = 1e-12 * (ab + ac + bc)
    check(ab <= ac + bc + slack, "d_ab", "violates the triangle inequality d_ab <= d_ac + d_bc")
    check(ac <= ab + bc + slack, "d_ac", "violates the triangle inequality d_ac <= d_ab + d_bc")
    check(bc <= ab + ac + slack, "d_bc", "violates the triangle inequality d_bc <= d_ab + d_ac")
    return ab, ac, bc


def pem_matrix(d_ab: ArrayLike, d_ac: ArrayLike, d_bc: ArrayLike) -> np.ndarray:
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


def _binomial_tail_tables(n: int, rho: float, one_minus_rho: float, lf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``SF[m, k] = P[Bin(m, rho) >= k]`` (k = 0..n+1) and ``CDF[m, k+1] = P[Bin(m, rho) <= k]``
    (k = -1..n), for m = 0..n, by cumulative sums of the pmf (all terms non-negative)."""
    m = np.arange(n + 1)[:, None]
    k = np.arange(n + 1)[None, :]
    valid = k <= m
    with np.errstate(invalid="ignore"):
        logpmf = (lf[m] - lf[k] - lf[np.clip(m - k, 0, n)]
                  + np.where(k > 0, k * safe_log(np.float64(rho)), 0.0)
                  + np.where(m - k > 0, (m - k) * safe_log(np.float64(one_minus_rho)), 0.0))
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
        lf = log_factorials(n)
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
        self.rel = UNIT_ROUNDOFF * (64.0 * (n + 2) * (math.log(n + 2) + 1.0) + 256.0)
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

        def s_at(k: np.ndarray) -> np.ndarray:  # S(k), summed per category
            kf = np.clip(k, 0, m).astype(np.float64)
            return base + c[2] * kf + c[3] * (mf - kf)

        bb = c[2] - c[3]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            x = -(base + c[3] * mf) / bb if bb != 0 else None
        if bb > 0:  # R = {k >= k0}
            assert x is not None  # bb != 0
            k = np.clip(np.nan_to_num(np.floor(x) + 1.0), 0, mf + 1).astype(np.int64)
            for _ in range(3):
                k = np.where((k >= 1) & (s_at(k - 1) > 0), k - 1, k)
            for _ in range(3):
                k = np.where((k <= m) & (s_at(k) <= 0), k + 1, k)
            p1, p2, p3 = self.sf[m, k], self.sf[m1, np.maximum(k - 1, 0)], self.sf[m1, k]
        elif bb < 0:  # R = {k <= k1}
            assert x is not None  # bb != 0
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
    lo, _ = bisect_scalar(f, delta, 0.0, d_ab)
    return lo


def pem_lower(n: ArrayLike, d_ab: ArrayLike, d_ac: ArrayLike, d_bc: ArrayLike, delta: ArrayLike) -> np.ndarray:
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

    Corrections to the printed Algorithm 2 (docs/math.md section 9): the others' counts are
    multinomial, not a product of binomials, and the loop must include ``A + B + C = n``
    (no padding symbol), which ``A in [n], B in [n-1-A], C in [n-1-A-B]`` leaves out.

    All arguments broadcast (``n`` integer >= 1, distances in ``(0, 200]`` satisfying the
    triangle inequality, ``delta`` in ``(0, 1)``); returns a float64 array of the
    broadcast shape.
    """
    nv = np.asarray(n, dtype=np.float64)
    check(np.isfinite(nv) & (nv == np.round(nv)) & (nv >= 1), "n", "must be an integer >= 1", value=nv)
    dv = np.asarray(delta, dtype=np.float64)
    check((dv > 0) & (dv < 1), "delta", "must lie in (0, 1)", value=dv)
    ab, ac, bc = _validate_distances(d_ab, d_ac, d_bc)
    shape = broadcast_shapes_or_raise(n=nv, d_ab=ab, d_ac=ac, d_bc=bc, delta=dv)
    args = [np.broadcast_to(v, shape).reshape(-1) for v in (nv, ab, ac, bc, dv)]
    out = np.array([_pem_lower_one(int(a), float(b), float(c), float(d), float(e))
                    for a, b, c, d, e in zip(*args)], dtype=np.float64)
    return out.reshape(shape)
