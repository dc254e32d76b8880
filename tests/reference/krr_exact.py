"""Exact enumeration of the shuffled k-ary randomized response (tests only; slow, obviously right).

Model: n users; user 1 (the victim) holds ``x0 = 0`` (hypothesis P) or ``x1 = 1`` (hypothesis Q);
the other n - 1 users hold a fixed multiset ``others`` of values in {0..k-1}. Every user applies
k-RR with parameter eps0 (own value w.p. e^eps0/(e^eps0+k-1), each other value w.p.
1/(e^eps0+k-1)); the shuffler releases the histogram of the n outputs. The pmf of the histogram
is the convolution of the n users' categorical distributions, computed by a dynamic program
over users on the compositions of (number of users so far) into k parts.

``delta(eps) = max(D_t(P||Q), D_t(Q||P))``, ``D_t(P||Q) = sum_h max(0, P(h) - t Q(h))``, t = e^eps.

Two implementations, no code shared with the package (imports numpy and mpmath only):

* mpmath (``mp.dps = 40``): :func:`pmf_mp`, :func:`delta_mp`, :func:`exact_epsilon` -- one dataset,
  a dict-based DP over users; the definition written out.
* numpy ``longdouble`` (x86-64: 64-bit mantissa, eps = 1.1e-19), vectorized over every dataset of
  the others: :func:`worst_exact_epsilon`. Every pmf entry is a sum of products of positive
  numbers, so its relative error is at most about 2 n k 2^-64 < 1e-16 for n <= 12, k <= 6; the
  epsilon it returns agrees with the mpmath path to ~1e-15 (checked by the tests at a few points).

Worst case over datasets: ``delta_max(eps) = max_D delta_D(eps)`` is nonincreasing, and the smallest
eps with ``delta_max(eps) <= delta`` equals ``max_D eps_D`` -- one bisection on ``delta_max``.
By default the datasets are enumerated up to permutations of the values {2..k-1} (a symmetry of
k-RR that fixes x0 and x1: it permutes the histogram's coordinates, leaving both hockey-stick
divergences unchanged); ``symmetry=False`` enumerates every multiset (the tests check the two agree).
"""
from __future__ import annotations

import functools
import itertools

import mpmath as mp
import numpy as np

DPS = 40
EPS_TOL = 1e-13  # absolute bisection tolerance on epsilon; the returned value is the upper end


# ----------------------------------------------------------------------------------------------
# mpmath, one dataset: the definition
# ----------------------------------------------------------------------------------------------

def _krr_probs_mp(eps0, k):
    """(own, other) probabilities of k-RR as mpf."""
    E0 = mp.e ** mp.mpf(eps0)
    den = E0 + (k - 1)
    return E0 / den, 1 / den


def pmf_mp(eps0, k, values):
    """Exact pmf of the histogram of the k-RR outputs of users holding ``values`` (mpmath, dict)."""
    own, other = _krr_probs_mp(eps0, k)
    dist = {(0,) * k: mp.mpf(1)}
    for v in values:
        new = {}
        for h, p in dist.items():
            for y in range(k):
                h2 = h[:y] + (h[y] + 1,) + h[y + 1:]
                new[h2] = new.get(h2, mp.mpf(0)) + p * (own if y == v else other)
        dist = new
    return dist


def _check_dataset(k, n, others):
    others = tuple(int(x) for x in others)
    if len(others) != n - 1:
        raise ValueError(f"others must hold n - 1 = {n - 1} values, got {len(others)}")
    if any(not 0 <= x < k for x in others):
        raise ValueError(f"others must lie in 0..{k - 1}")
    return others


@functools.lru_cache(maxsize=64)
def _pq_mp(eps0, k, n, others):
    with mp.workdps(DPS):
        P = pmf_mp(eps0, k, (0,) + others)
        Q = pmf_mp(eps0, k, (1,) + others)
        keys = sorted(set(P) | set(Q))
        return [P.get(h, mp.mpf(0)) for h in keys], [Q.get(h, mp.mpf(0)) for h in keys]


def delta_mp(eps0, k, n, others, eps):
    """max(D_t(P||Q), D_t(Q||P)) at t = e^eps for one dataset (mpmath, as an mpf)."""
    others = _check_dataset(k, n, others)
    P, Q = _pq_mp(float(eps0), int(k), int(n), others)
    with mp.workdps(DPS):
        t = mp.e ** mp.mpf(eps)
        d1 = mp.fsum(max(mp.mpf(0), p - t * q) for p, q in zip(P, Q))
        d2 = mp.fsum(max(mp.mpf(0), q - t * p) for p, q in zip(P, Q))
        return max(d1, d2)


def exact_epsilon(eps0, k, n, others, delta):
    """Smallest eps >= 0 with delta(eps) <= delta for the dataset ``others`` (mpmath bisection).

    Returns the upper end of a bracket of width <= 1e-13 (0.0 when delta(0) <= delta).
    """
    others = _check_dataset(k, n, others)
    with mp.workdps(DPS):
        d = mp.mpf(delta)
        if delta_mp(eps0, k, n, others, 0) <= d:
            return 0.0
        lo, hi = mp.mpf(0), mp.mpf(eps0)  # P/Q <= e^eps0 pointwise (post-processing), so delta(eps0) = 0
        assert delta_mp(eps0, k, n, others, hi) <= d
        while hi - lo > EPS_TOL:
            mid = (lo + hi) / 2
            if delta_mp(eps0, k, n, others, mid) <= d:
                hi = mid
            else:
                lo = mid
        return float(hi)


# ----------------------------------------------------------------------------------------------
# numpy longdouble, every dataset at once
# ----------------------------------------------------------------------------------------------

@functools.cache
def compositions(n, k):
    """All histograms of n outputs over k values (tuples, lexicographic order)."""
    if k == 1:
        return ((n,),)
    return tuple((a,) + rest for a in range(n + 1) for rest in compositions(n - a, k - 1))


@functools.cache
def _step_index(u, k):
    """idx[y, j] = index in compositions(u, k) of compositions(u + 1, k)[j] - e_y, or len(...) if none."""
    prev = {h: i for i, h in enumerate(compositions(u, k))}
    nxt = compositions(u + 1, k)
    none = len(prev)
    idx = np.full((k, len(nxt)), none, dtype=np.int64)
    for j, h in enumerate(nxt):
        for y in range(k):
            if h[y] > 0:
                idx[y, j] = prev[h[:y] + (h[y] - 1,) + h[y + 1:]]
    return idx


def datasets(k, n, symmetry=True):
    """Every multiset of the n - 1 others' values (sorted tuples); with ``symmetry``, one per orbit
    of the permutations of the values {2..k-1}: counts of 2..k-1 nonincreasing."""
    out = []
    for ms in itertools.combinations_with_replacement(range(k), n - 1):
        if symmetry:
            counts = [ms.count(v) for v in range(2, k)]
            if counts != sorted(counts, reverse=True):
                continue
        out.append(ms)
    return out


def pmf_batch(eps0, k, rows):
    """pmf of the histogram for every row of user values (rows: int array (R, n)), longdouble (R, H)."""
    rows = np.asarray(rows, dtype=np.int64)
    R, n = rows.shape
    E0 = np.exp(np.longdouble(eps0))
    den = E0 + np.longdouble(k - 1)
    own, other = E0 / den, np.longdouble(1) / den
    dist = np.ones((R, 1), dtype=np.longdouble)  # compositions(0, k) = ((0,)*k,)
    for u in range(n):
        idx = _step_index(u, k)
        pad = np.concatenate([dist, np.zeros((R, 1), dtype=np.longdouble)], axis=1)
        new = np.zeros((R, idx.shape[1]), dtype=np.longdouble)
        for y in range(k):
            p = np.where(rows[:, u] == y, own, other)[:, None]
            new += p * pad[:, idx[y]]
        dist = new
    return dist


@functools.lru_cache(maxsize=4)
def _dataset_pmfs(eps0, k, n, symmetry):
    """(datasets, X, Y): rows X[i] vs Y[i] are the ordered pairs (P,Q) and (Q,P) of every dataset."""
    ds = datasets(k, n, symmetry)
    others = np.array(ds, dtype=np.int64).reshape(len(ds), n - 1)
    P = pmf_batch(eps0, k, np.concatenate([np.zeros((len(ds), 1), np.int64), others], axis=1))
    Q = pmf_batch(eps0, k, np.concatenate([np.ones((len(ds), 1), np.int64), others], axis=1))
    return ds, np.concatenate([P, Q]), np.concatenate([Q, P])


def _hockey(X, Y, eps):
    t = np.exp(np.longdouble(eps))
    return np.sum(np.maximum(X - t * Y, np.longdouble(0)), axis=1)


@functools.cache
def worst_exact_epsilon(eps0, k, n, delta, symmetry=True):
    """max over every dataset of the others of the exact epsilon; returns ``(eps, others_argmax)``.

    One bisection (width <= 1e-13, upper end returned) on delta_max(eps) = max_D delta_D(eps);
    datasets with delta_D(lo) <= delta (so eps_D <= lo < the worst) are dropped as it goes.
    """
    eps0, k, n, delta = float(eps0), int(k), int(n), float(delta)
    if n < 2:
        raise ValueError("n >= 2")
    ds, X, Y = _dataset_pmfs(eps0, k, n, symmetry)
    D = len(ds)
    dl = np.longdouble(delta)
    d0 = _hockey(X, Y, 0.0)
    if d0.max() <= dl:
        return 0.0, ds[int(np.argmax(d0)) % D]
    alive = np.nonzero(d0 > dl)[0]
    lo, hi = 0.0, eps0
    assert _hockey(X, Y, hi).max() <= dl * (1 + 1e-15) + 1e-300  # P <= e^eps0 Q pointwise
    while hi - lo > EPS_TOL:
        mid = 0.5 * (lo + hi)
        d = _hockey(X[alive], Y[alive], mid)
        if d.max() <= dl:
            hi = mid
        else:
            lo = mid
            alive = alive[d > dl]
    # the argmax: the last survivor with the largest divergence at lo
    d = _hockey(X[alive], Y[alive], lo)
    return hi, ds[int(alive[int(np.argmax(d))]) % D]


def count_datasets(k, n, symmetry=True):
    """Number of datasets :func:`worst_exact_epsilon` enumerates at (k, n)."""
    return len(datasets(k, n, symmetry))
