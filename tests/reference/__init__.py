"""Slow, obviously-right references for the two-count pair (used only by tests).

Everything here enumerates the (a, b) pmf of docs/math.md section 1 directly, in log space,
with numpy/scipy (float64) or mpmath; no code is shared with the package.
"""
import math

import mpmath as mp
import numpy as np
from scipy.special import gammaln, logsumexp


def log_pmfs(u, v, w, r0, r1, n):
    """log P(a,b), log Q(a,b) on the grid 0 <= a, b <= n (entries outside the support -inf)."""
    N = n - 1
    a = np.arange(n + 2)[:, None] - 1  # index shift so that M(a-1, b) is a slice
    b = np.arange(n + 2)[None, :] - 1
    s = 1.0 - r0 - r1
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = (a >= 0) & (b >= 0) & (a + b <= N)
        la, lb = np.where(ok, a, 0), np.where(ok, b, 0)
        logM = gammaln(N + 1) - gammaln(la + 1) - gammaln(lb + 1) - gammaln(N - la - lb + 1)
        logM = logM + np.where(la > 0, la * np.log(r0), 0.0) + np.where(lb > 0, lb * np.log(r1), 0.0)
        logM = logM + np.where(N - la - lb > 0, (N - la - lb) * np.log(s), 0.0)
        logM = np.where(ok, logM, -np.inf)
        lu, lv, lw = (np.log(x) if x > 0 else -np.inf for x in (u, v, w))
        # grid index i corresponds to count i-1; the output counts are 0..n -> indices 1..n+1
        Mab = logM[1:, 1:]
        Mam1 = logM[:-1, 1:]
        Mbm1 = logM[1:, :-1]
        P = np.logaddexp(np.logaddexp(lu + Mam1, lv + Mbm1), lw + Mab)
        Q = np.logaddexp(np.logaddexp(lv + Mam1, lu + Mbm1), lw + Mab)
    return P, Q


def hockey_stick_enum(u, v, w, r0, r1, n, eps):
    """max(D_t(P||Q), D_t(Q||P)) by enumerating every cell (float64, log space)."""
    P, Q = log_pmfs(u, v, w, r0, r1, n)
    out = []
    for X, Y in ((P, Q), (Q, P)):
        with np.errstate(invalid="ignore"):
            pos = X > Y + eps
            diff = np.where(pos, X + np.log1p(-np.exp(np.where(pos, Y + eps - X, -1.0))), -np.inf)
        out.append(math.exp(logsumexp(diff)) if np.isfinite(diff).any() else 0.0)
    return max(out)


def hockey_stick_mpmath(u, v, w, r0, r1, n, eps, dps=40):
    """The same sum in mpmath with exact rational-ish arithmetic, for tiny n."""
    return float(hockey_stick_mpf(u, v, w, r0, r1, n, eps, dps))


def hockey_stick_mpf(u, v, w, r0, r1, n, eps, dps=40):
    """:func:`hockey_stick_mpmath` as an mpf (for comparisons that must not round the reference)."""
    with mp.workdps(dps):
        u, v, w, r0, r1 = (mp.mpf(x) for x in (u, v, w, r0, r1))
        t = mp.e ** mp.mpf(eps)
        N = n - 1

        def M(a, b):
            if a < 0 or b < 0 or a + b > N:
                return mp.mpf(0)
            multinomial = mp.factorial(N) / (mp.factorial(a) * mp.factorial(b) * mp.factorial(N - a - b))
            return multinomial * r0**a * r1**b * (1 - r0 - r1) ** (N - a - b)

        d1 = d2 = mp.mpf(0)
        for a in range(n + 1):
            for b in range(n + 1 - a):
                P = u * M(a - 1, b) + v * M(a, b - 1) + w * M(a, b)
                Q = v * M(a - 1, b) + u * M(a, b - 1) + w * M(a, b)
                d1 += max(P - t * Q, 0)
                d2 += max(Q - t * P, 0)
        return max(d1, d2)


def epsilon_enum(u, v, w, r0, r1, n, delta, hi=None, iters=200):
    """Smallest eps >= 0 with hockey_stick_enum <= delta, by bisection (returns the upper end)."""
    if hockey_stick_enum(u, v, w, r0, r1, n, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, hi if hi is not None else (math.log(max(u, v) / min(u, v)) if min(u, v) > 0 else 60.0)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if hockey_stick_enum(u, v, w, r0, r1, n, mid) <= delta:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-13 * max(hi, 1e-300):
            break
    return hi


def hockey_stick_window_scipy(u, v, w, r, n, eps):
    """Symmetric pair (r0 = r1 = r), one direction, O(n) sum with scipy's binomial tails.

    Independent of the package: thresholds straight from docs/math.md section 2's ``low_c``
    (floating ceil, no boundary re-test), tails from scipy (Boost), every count with
    weight above 1e-40.
    """
    from scipy import stats

    t = math.exp(eps)
    N = n - 1
    pi = 2 * r
    mean, sd = N * pi, math.sqrt(max(N * pi * (1 - pi), 1.0))
    c = np.arange(max(0, int(mean - 40 * sd)), min(N, int(mean + 40 * sd)) + 1).astype(float)
    W = stats.binom.pmf(c, N, pi)
    keep = W > 1e-40
    c, W = c[keep], W[keep]

    def k_of(cp):  # region {a : P > tQ} = {a >= k}, r0 = r1 so kappa = (u - v)(1 + t)/r > 0
        g = w * (n - cp) / (1 - 2 * r)
        low = ((t * u - v) * cp / r + (t - 1) * g) / ((u - v) * (1 + t) / r)
        return np.clip(np.floor(low) + 1, 0, cp + 1)

    kc, kn = k_of(c), k_of(c + 1)
    beta = stats.binom.pmf(kn - 1, c, 0.5)
    U = stats.binom.sf(kn - 1, c, 0.5)
    T = stats.binom.sf(kc - 1, c, 0.5)
    return float(np.sum(W * ((u - t * v) * beta + (1 - t) * (u + v) * U + (1 - t) * w * T)))


def epsilon_window_scipy(u, v, w, r, n, delta, iters=100):
    """Bisection on :func:`hockey_stick_window_scipy` (relative resolution 1e-12)."""
    lo, hi = 0.0, math.log(u / v)
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if hockey_stick_window_scipy(u, v, w, r, n, mid) <= delta:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-12 * hi:
            break
    return 0.5 * (lo + hi)
