"""Certified upper bound on a blanket sum form with many categories: a lattice and an FFT.

docs/math.md 11.8. The matrix engine (:mod:`jaxshuffle.blanket_matrix`) evaluates a sum form (11.1)
with the grouped exact kernel, which takes four categories; a form with more is *coarsened* up to
four (11.3), which is sound but loose (about 10 % of epsilon for 2-subsets of 5 at n = 1e4). Here
``(1/n) E[(G_1 + ... + G_n)_+]``, ``P(G = c_j) = w_j``, is bounded from above for any number of
categories, every step on the upper side:

1. **Lattice.** A step ``h > 0`` and integers ``m_j >= c_j / h`` (the computed quotient nudged up by
   its rounding bound before ``ceil``). With
   ``M = m_1 + ... + m_n`` (the draws' lattice values), ``h M >= S``, and ``E[(S)_+]`` is
   nondecreasing in every ``c_j``, so ``(h/n) E[M_+]`` is ``>=`` the form's value.
2. **Window.** ``M`` is placed on a circle of ``N`` bins (a power of two) whose window is
   ``[L, L + N)``, ``L <= 0``, set from the mean and ``sds`` standard deviations of ``S``. The
   ``n``-fold circular convolution gives ``q_i = sum_k P(M = L + i + kN) >= P(M = L + i)``: mass
   outside the window only *adds* to window bins, so ``sum_i (L + i)_+ q_i >= E[M_+; L <= M < L + N]``.
   ``M < L <= 0`` adds nothing to ``E[M_+]``; what is missing is ``E[M; M >= U]``, ``U = L + N``,
   at most ``(U + 1/theta) exp(n K(theta) - theta U)`` for every ``theta > 0`` (``K`` the lattice
   log-MGF; ``x <= (U + 1/theta) e^{theta (x - U)}`` for ``x >= U >= 0``).
3. **FFT error.** ``|sum_i g_i (q^_i - q_i)| <= fft_error * ||g||_2`` with ``g_i = (L + i)_+``
   (:func:`jaxshuffle._fft.fft_error`, docs/math.md 12.5).
4. **Rounding.** The sum of ``N`` non-negative terms is off by at most ``N u`` relative; ``h / n``
   is one rounding; the Chernoff exponent is rounded up.

The lattice moves ``S`` up by less than ``n h``, which is what limits it: ``h`` is about
``2 sds sd(S) / N``, so the slack relative to ``sd(S)`` is about ``2 sds n / N``. It pays where
``N`` is large against ``n`` (with ``N = 2^22``: 8-13 % below the coarsened epsilon at ``n = 1e3``
to ``1e5``, nothing at ``1e6``; docs/math.md 11.8 has the measured values). :func:`tighten_upper`
lowers a certified epsilon with such values; :func:`jaxshuffle.blanket_matrix.refine_upper` applies
both to a matrix's blanket forms.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import check
from jaxshuffle._fft import MAX_FFT, U, fft_error, power_convolve

#: most bins of the circle (a power of two; 2^22 bins: 32 MiB per float64 array, about 0.4 s per
#: evaluation on a 2-core CPU); :func:`default_bins` takes fewer for small ``n``
LATTICE_BINS = 1 << 22
#: fewest bins, and bins per user below :data:`LATTICE_BINS` (the slack is about ``2 SDS n / N``
#: standard deviations of ``S``: 1.6 % with 1024 bins per user)
MIN_BINS = 1 << 12
#: the range of ``bins`` :func:`lattice_value` accepts: powers of two (the FFT error bound is the radix-2
#: one, docs/math.md 12.5) from 16 to :data:`jaxshuffle._fft.MAX_FFT` (2^26: 1 GB of complex128 per array)
SMALLEST_BINS = 16
LARGEST_BINS = MAX_FFT
BINS_PER_USER = 1024
#: standard deviations of ``S`` below its mean (and above, or above 0) that the window spans
SDS = 8.0
#: relative width ``(hi - lo) / hi`` at which :func:`tighten_upper`'s search stops: the lattice value is a
#: step function of eps (the ``m_j`` are integers), with steps of about 0.1 % of eps at 2^22 bins, so a
#: finer search mostly probes plateaus (Hadamard K = 16 and 3-subsets of 10 at n = 1e4, ad hoc: 13 and 11
#: probes for 0.01 %, 9 and 6 for 0.2 %)
LATTICE_RTOL = 2e-3


class LatticeValue(NamedTuple):
    """One form's certified value at one ``t`` (:func:`lattice_value`), and its parts.

    value: ``>= (1/n) E[(S)_+]``; h: the lattice step; window: ``(h/n) sum_i (L + i)_+ q^_i`` (with its
    summation slack); fft: ``(h/n) fft_error ||g||_2``; tail: ``(h/n)`` times the Chernoff bound on
    ``E[M; M >= U]``.
    """

    value: float
    h: float
    window: float
    fft: float
    tail: float


@jax.jit
def _positive_moment(q: jax.Array, first: jax.Array) -> jax.Array:
    """``sum_i (first + i)_+ q_i`` (``first + i`` is exact: integers below 2^53)."""
    i = jnp.arange(q.shape[0], dtype=jnp.float64)
    return jnp.sum(jnp.maximum(first + i, 0.0) * q)


def _chernoff_above(w: np.ndarray, m: np.ndarray, n: int, top: int) -> float:
    """Upper bound on ``E[M; M >= top]`` (``top >= 0``): the least of
    ``(top + 1/theta) exp(n K(theta) - theta top)`` over a grid of ``theta`` around the Gaussian
    optimum, ``K(theta) = log sum_j w_j e^{theta m_j}`` rounded up."""
    mean = float(np.dot(w, m))
    var = float(np.dot(w, (m - mean) ** 2))
    star = max(top - n * mean, 1.0) / max(n * var, 1e-300)
    theta = star * np.geomspace(1.0 / 64.0, 64.0, 49)
    x = np.log(w)[None, :] + theta[:, None] * m[None, :]
    big = np.max(x, axis=1)
    k = big + np.log(np.sum(np.exp(x - big[:, None]), axis=1))
    k = k + np.abs(k) * 1e-12 + 1e-12
    log_bound = np.log(top + 1.0 / theta) + n * k - theta * top
    return float(np.exp(np.min(log_bound) + 1e-9))


def default_bins(n) -> int:
    """Bins for ``n`` users: ``BINS_PER_USER n`` rounded up to a power of two, within
    ``[MIN_BINS, LATTICE_BINS]`` (ValueError naming ``n`` unless it is an integer ``>= 1``)."""
    check_sizes(n, MIN_BINS)
    return int(min(LATTICE_BINS, max(MIN_BINS, 2 ** math.ceil(math.log2(BINS_PER_USER * float(n))))))


def check_sizes(n, bins, sds: float = SDS) -> None:
    """ValueError naming the argument unless ``n`` is an integer ``>= 1``, ``bins`` a power of two in
    ``[SMALLEST_BINS, LARGEST_BINS]`` and ``sds`` a finite number ``> 0`` (before any allocation)."""
    n_, b_, s_ = (np.float64(x) for x in (n, bins, sds))
    check(np.isfinite(n_) & (n_ >= 1) & (n_ == np.floor(n_)), "n", "must be a finite integer >= 1", value=n_)
    with np.errstate(divide="ignore", invalid="ignore"):
        power = np.isfinite(b_) & (b_ >= 1) & (np.exp2(np.round(np.log2(np.maximum(b_, 1.0)))) == b_)
    check(power & (b_ >= SMALLEST_BINS) & (b_ <= LARGEST_BINS), "bins",
          f"must be a power of two from {SMALLEST_BINS} to {LARGEST_BINS} (2^{LARGEST_BINS.bit_length() - 1}, the "
          "largest FFT: 1 GB of complex128 per array)", value=b_)
    check(np.isfinite(s_) & (s_ > 0), "sds", "must be a finite number > 0", value=s_)


def _live(w, c):
    """Categories with positive probability, and the mass ``1 - sum w`` (if any) at ``c = 0``."""
    w, c = np.asarray(w, np.float64), np.asarray(c, np.float64)
    live = w > 0
    w, c = w[live], c[live]
    rest = 1.0 - math.fsum(w)
    if rest > 0:
        w, c = np.append(w, rest), np.append(c, 0.0)
    return w, c


def lattice_value(w, c, n, *, bins: int = LATTICE_BINS, sds: float = SDS) -> LatticeValue:
    """Certified upper bound on ``(1/n) E[(G_1 + ... + G_n)_+]``, ``P(G = c_j) = w_j`` (numpy 1-D; the
    mass ``1 - sum w``, if any, sits at ``c = 0``); see the module docstring. ``n``: an integer
    ``>= 1``. The window spans ``[min(mean - sds sd, 0), max(mean + sds sd, 0)]`` of ``S`` on
    ``bins - 2`` steps ``h``. An infeasible lattice (values beyond 2^52) gives ``inf``, never a
    smaller number. ``bins``: a power of two from :data:`SMALLEST_BINS` to :data:`LARGEST_BINS`,
    checked before anything is allocated (ValueError naming ``bins``, ``n`` or ``sds``)."""
    check_sizes(n, bins, sds)
    w, c = _live(w, c)
    if not np.any(c > 0):
        return LatticeValue(0.0, 0.0, 0.0, 0.0, 0.0)
    mean = float(np.dot(w, c))
    sd = math.sqrt(n * float(np.dot(w, (c - mean) ** 2)))
    lo, hi = min(n * mean - sds * sd, 0.0), max(n * mean + sds * sd, 0.0)
    h = max(hi - lo, 1e-300) / (bins - 2)
    n_int = int(n)
    ratio = c / h
    m = np.ceil(ratio + np.abs(ratio) * (4.0 * U))  # >= the exact c / h, so m h >= c
    if np.max(np.abs(m)) * n > 2.0 ** 52:
        return LatticeValue(math.inf, h, math.inf, 0.0, 0.0)
    first = min(math.floor(lo / h), 0, math.ceil(hi / h) + 2 - bins)  # the window reaches hi whatever lo / h rounds to
    top = first + bins  # U: the first lattice value past the window
    mi = m.astype(np.int64)
    m_min = int(mi.min())
    p = np.zeros(bins)
    np.add.at(p, (mi - m_min) % bins, w)
    shift = (first - n_int * m_min) % bins  # the circle's index of M = first
    q, e_pow = power_convolve(jnp.asarray(p[None, :]), jnp.asarray([float(n_int)]), jnp.asarray(shift), size=bins)
    scale = h / n_int * (1.0 + 4.0 * U)
    window = float(_positive_moment(q, jnp.float64(first))) * (1.0 + 2.0 * bins * U) * scale
    last = top - 1  # largest value counted; sum_{M=1}^{last} M^2
    g_norm = math.sqrt(last * (last + 1.0) * (2.0 * last + 1.0) / 6.0) if last >= 1 else 0.0
    fft = fft_error(bins, n_int * float(np.linalg.norm(p)), float(e_pow)) * g_norm * (1.0 + 1e-12) * scale
    tail = _chernoff_above(w, m, n_int, top) * scale
    return LatticeValue(window + fft + tail, h, window, fft, tail)


def tighten_upper(value_at: Callable[[float], float], delta: float, lo: float, hi: float, *,
                  rtol: float = LATTICE_RTOL, max_probes: int = 24) -> float:
    """Lower a certified upper bound ``hi`` on an epsilon toward ``lo``: returns ``hi`` or a probe ``x``
    whose certified divergence ``value_at(x)`` is ``<= delta``, nothing else.

    Probes: ``hi`` first (where ``value_at`` does not certify ``hi`` it cannot help: ``hi`` is
    returned), then ``lo`` (accepted if it passes), then the Illinois variant of regula falsi on
    ``log(value / delta)``, kept at least 5 % of the bracket from either end, until
    ``hi - lo <= rtol hi`` or ``max_probes``. Where the probes go affects only tightness.
    """
    def probe(x):
        v = value_at(x)
        return v <= delta, math.log(max(v, 1e-300) / delta)

    if lo >= hi:
        return hi
    ok, g_hi = probe(hi)
    if not ok:
        return hi
    ok, g_lo = probe(lo)
    if ok:
        return lo
    side, probes = 0, 2
    while hi - lo > rtol * hi and probes < max_probes:
        width = hi - lo
        x = hi - g_hi * width / (g_hi - g_lo) if g_lo > g_hi else 0.5 * (lo + hi)
        x = min(max(x, lo + 0.05 * width), hi - 0.05 * width)
        ok, g = probe(x)
        probes += 1
        if ok:
            hi, g_hi = x, g
            g_lo = g_lo / 2 if side == 1 else g_lo  # Illinois: the end that stayed twice is halved
            side = 1
        else:
            lo, g_lo = x, g
            g_hi = g_hi / 2 if side == -1 else g_hi
            side = -1
    return hi
