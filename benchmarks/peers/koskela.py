"""Koskela et al.'s numerical accountant for the shuffled stronger clone, reimplemented for timing.

Source followed (not vendored): DPBayes/numerical-shuffler-experiments, commit 75068f3
(https://github.com/DPBayes/numerical-shuffler-experiments), the code of
A. Koskela, M. A. Heikkila, A. Honkela, "Numerical accounting in the shuffle model of
differential privacy", TMLR 2023. That repository carries no license file, so none of its code is
copied here: this module re-implements the same algorithm, with the same parameters, in our own
code (see benchmarks/peers/README.md).

* :func:`stronger_clone_pld` follows ``clones_comparison_fig1/delta_shuffler_fa.py``,
  ``get_omega`` / ``get_logP2``: the PLD of the stronger clone pair (Feldman, McMillan, Talwar)
  over the cells ``(i, j)`` (``i`` others' clone messages, ``j`` of them "0"), both cut by
  Hoeffding windows with ``tol_ = 60``, each cell's mass placed at the right end of its bin on
  the grid ``linspace(-L, L - dx, nx)`` (delta up), and their periodisation error term with
  ``lambda = 0.5 L``. As in their code, ``alpha_plus`` is computed with ``-L(x)``, like
  ``alpha_minus``. Their script loops over the cells in Python; here each row ``i`` is one numpy
  expression (the same numbers, summed in a different order), which is what makes n = 1e6 feasible.
* :func:`literal_loop_seconds` times the per-cell Python loop of their script as written (scalar
  ``scipy.special.gammaln`` calls, list appends, then the binning and the two error-term loops), to
  report what their script itself costs.
* :func:`compose_epsilon` follows the composition in ``delta_shuffler_fa.py`` (swap halves, FFT,
  ``ifft(F**T)``, swap back) and the bisection of ``blankets_fig4/compute_epsilon_bin_tight.py``,
  ``get_epsilons`` (epsilon in [0, 100], delta from the right-end grid plus the error term). Two
  changes, both for the comparison only: the bisection runs to ``tol = 1e-9`` (theirs: 1e-5,
  too coarse for 6 digits) and returns the end whose delta is at most the target (theirs returns
  the other end), and the histogram is not renormalised (as in ``delta_shuffler_fa.py``).

Neither side of their method is certified in the sense of jaxshuffle (float error of the cell
masses and of the FFT is not charged); it is an accurate estimate of the same pair's epsilon.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.special

TOL_HOEFFDING = 60.0  # tol_ of delta_shuffler_fa.get_omega
NX = 10_000_000  # nx and L of delta_shuffler_fa.py's main block
L_RANGE = 20.0


def _parameters(eps0: float):
    p_in = 1.0 / (1.0 + math.exp(eps0))
    q = math.exp(eps0) * p_in
    p = 2.0 * p_in  # others send a clone message (0 or 1, equally likely) w.p. p
    p2 = p_in / (1.0 - math.exp(eps0) * p_in)  # = 1 in exact arithmetic for the stronger clone
    return q, p, p2


def _i_range(n: int, p: float):
    lo = int(max(0, math.floor((n - 1) * (p - math.sqrt(TOL_HOEFFDING / (2 * (n - 1)))))))
    hi = int(min(n, math.ceil((n - 1) * (p + math.sqrt(TOL_HOEFFDING / (2 * (n - 1)))))))
    return lo, hi


def _j_range(i: int):
    lo = int(max(0, math.floor(i * (0.5 - math.sqrt(TOL_HOEFFDING / (2 * (i + 1)))))))
    hi = int(min(i, math.ceil(i * (0.5 + math.sqrt(TOL_HOEFFDING / (2 * (i + 1)))))))
    return lo, hi


def cell_count(n: int, eps0: float) -> int:
    """Number of (i, j) cells their get_omega visits."""
    _, p, _ = _parameters(eps0)
    lo, hi = _i_range(n, p)
    i = np.arange(lo, hi, dtype=np.float64)
    jl = np.maximum(0, np.floor(i * (0.5 - np.sqrt(TOL_HOEFFDING / (2 * (i + 1))))))
    jh = np.minimum(i, np.ceil(i * (0.5 + np.sqrt(TOL_HOEFFDING / (2 * (i + 1))))))
    return int(np.sum(np.maximum(jh - jl, 0)))


def _row(n: int, i: int, j: np.ndarray, q: float, p: float, p2: float):
    """log-mass and loss of the cells (i, j) of one row (get_logP2 and the loss of get_omega)."""
    a = j + 1.0
    b = i - j
    blanket = (1 - p2) * (1 - q) * (n - (a + b)) * p / ((1 - 2 * p) * a)
    nom = q + p2 * (1 - q) * (b / a) + blanket
    denom = q * (b / a) + p2 * (1 - q) + blanket
    g = scipy.special.gammaln
    log_mass = (np.log(nom) + g(n) - g(i + 1) - g(n - i) + g(i + 1) - g(j + 1) - g(i - j + 1)
                + i * math.log(p) + (n - 1 - i) * math.log(1 - p) + i * math.log(0.5))
    return log_mass, np.log(nom / denom)


class KoskelaPLD:
    """Result of :func:`stronger_clone_pld`: the binned PLD and what is needed for the error term."""

    def __init__(self, omega, L, nx, log_alpha, cells, done, seconds, outside):
        self.omega, self.L, self.nx = omega, L, nx
        self.log_alpha = log_alpha  # log sum exp(lambda * (-L(x)) + log P(x)), lambda = 0.5 L
        self.cells, self.done, self.seconds, self.outside = cells, done, seconds, outside

    @property
    def complete(self) -> bool:
        return self.done >= self.cells

    def error_term(self, T: int) -> float:
        lam = 0.5 * self.L
        log_t = T * self.log_alpha - lam * self.L  # T1 = T2 = exp(T alpha) in their code
        return 2.0 * math.exp(min(log_t, 700.0)) / (1.0 - math.exp(-2 * lam * self.L))


def stronger_clone_pld(n: int, eps0: float, *, nx: int = NX, L: float = L_RANGE, cap: float = math.inf,
                       flush: int = 1 << 22) -> KoskelaPLD:
    """Their get_omega (delta_shuffler_fa.py), one numpy expression per row ``i``; stops after ``cap`` s."""
    t0 = time.perf_counter()
    n = int(n)
    q, p, p2 = _parameters(eps0)
    dx = 2 * L / nx
    omega = np.zeros(nx)
    lam = 0.5 * L
    log_alpha = -np.inf
    cells, done, outside = cell_count(n, eps0), 0, 0
    buf_m, buf_l = [], []
    pending = 0

    def drain():
        nonlocal log_alpha, outside
        lm, lx = np.concatenate(buf_m), np.concatenate(buf_l)
        buf_m.clear()
        buf_l.clear()
        inside = (lx > -L) & (lx < L)
        outside += int(np.sum(~inside))
        lm, lx = lm[inside], lx[inside]
        if lx.size:
            ii = np.ceil((lx + L) / dx).astype(np.int64)  # right end of the bin: delta up
            lo = int(ii.min())
            acc = np.bincount(ii - lo, weights=np.exp(lm))
            omega[lo:lo + acc.size] += acc[: nx - lo]
            log_alpha = np.logaddexp(log_alpha, scipy.special.logsumexp(lam * (-lx) + lm))

    i_lo, i_hi = _i_range(n, p)
    for i in range(i_lo, i_hi):
        j_lo, j_hi = _j_range(i)
        if j_hi > j_lo:
            lm, lx = _row(n, i, np.arange(j_lo, j_hi, dtype=np.float64), q, p, p2)
            buf_m.append(lm)
            buf_l.append(lx)
            pending += j_hi - j_lo
            done += j_hi - j_lo
        if pending >= flush:
            drain()
            pending = 0
            if time.perf_counter() - t0 > cap:
                break
    if buf_m:
        drain()
    return KoskelaPLD(omega, L, nx, float(log_alpha), cells, done, time.perf_counter() - t0, outside)


def _delta(y, grid_x, L, dx, eps, err):
    s = int(math.ceil((eps + L) / dx))
    return float(np.sum((1 - np.exp(eps - grid_x[s:])) * y[s:])) + err


def compose_epsilon(pld: KoskelaPLD, T: int, delta: float, *, tol: float = 1e-9) -> float:
    """T-fold composition by FFT (delta_shuffler_fa.py) and get_epsilons' bisection for eps at delta."""
    nx, L = pld.nx, pld.L
    dx = 2 * L / nx
    grid_x = np.linspace(-L, L - dx, nx)
    half = nx // 2
    fx = np.concatenate([pld.omega[half:], pld.omega[:half]])
    y = np.fft.ifft(np.fft.fft(fx) ** T)
    y = np.real(np.concatenate([y[half:], y[:half]]))
    err = pld.error_term(T)
    lo, hi = 0.0, 100.0
    d_lo = _delta(y, grid_x, L, dx, lo, err)
    if d_lo <= delta:
        return 0.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if (_delta(y, grid_x, L, dx, mid, err) > delta) == (d_lo > delta):
            lo = mid
        else:
            hi = mid
    return hi


def literal_loop_seconds(n: int, eps0: float, *, nx: int = NX, L: float = L_RANGE, cap: float = math.inf):
    """Seconds of their get_omega run cell by cell in Python, as their script does (capped).

    Returns (seconds, cells done, cells in all, omega or None if stopped by the cap).
    """
    g = scipy.special.gammaln
    t0 = time.perf_counter()
    n = int(n)
    q, p, p2 = _parameters(eps0)
    cells = cell_count(n, eps0)
    P1, Lx = [], []
    i_lo, i_hi = _i_range(n, p)
    for i in range(i_lo, i_hi):
        if time.perf_counter() - t0 > cap:
            return time.perf_counter() - t0, len(Lx), cells, None
        j_lo, j_hi = _j_range(i)
        for j in range(j_lo, j_hi):
            a, b = j + 1, i - j
            blanket = (1 - p2) * (1 - q) * (n - (a + b)) * p / ((1 - 2 * p) * a)
            P1.append(np.log(q + p2 * (1 - q) * (b / a) + blanket) + g(n) - g(i + 1) - g(n - i) + g(i + 1)
                      - g(j + 1) - g(i - j + 1) + i * np.log(p) + (n - 1 - i) * np.log(1 - p) + i * np.log(0.5))
            nom = q + p2 * (1 - q) * (b / a) + blanket
            denom = q * (b / a) + p2 * (1 - q) + blanket
            Lx.append(np.log(nom / denom))
    dx = 2 * L / nx
    omega = np.zeros(nx)
    for m, lx in zip(P1, Lx):
        if -L < lx < L:
            omega[int(np.ceil((lx + L) / dx))] += np.exp(m)
    lam = 0.5 * L
    s_minus = 0.0
    for m, lx in zip(P1, Lx):
        s_minus += np.exp(lam * -lx + m)
    s_plus = 0.0
    for m, lx in zip(P1, Lx):
        s_plus += np.exp(lam * -lx + m)
    return time.perf_counter() - t0, len(Lx), cells, omega
