"""n-fold circular convolution by FFT, with a bound on its float error (docs/math.md 12.5).

One home for what the composition of rounds (:mod:`jaxshuffle.pld.composition`) and the lattice
evaluation of a blanket sum form (:mod:`jaxshuffle.blanket_lattice`) share:

* :func:`power_convolve`: ``IFFT(prod_r FFT(p_r)^{T_r})`` on ``size`` bins, rolled, clamped at 0, and
  the 2-norm of the powers' own rounding (``e_pow``);
* :func:`fft_error`: ``||p^ - p||_2 <= C u log2(N) (sum_r T_r ||p_r||_2 + 1) + e_pow / sqrt(N)``
  (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Thm 24.2, ``C = 8``), the bound
  on the 2-norm of the computed convolution's error; a weighted sum ``sum_j g_j p^_j`` is then off by
  at most ``fft_error * ||g||_2`` over the bins it counts.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from jaxshuffle._numerics import UNIT_ROUNDOFF as U  # unit roundoff of float64 (re-exported)

#: largest composed grid, in bins (1 GB of complex128); a composition needing more is refused with a
#: message naming ``discretization``
MAX_FFT = 1 << 26
FFT_CONSTANT = 8.0  # Higham Thm 24.2's (log2 N) eta with eta <= 8u, rounded up


@functools.partial(jax.jit, static_argnames=("size",))
def power_convolve(padded: jax.Array, counts: jax.Array, shift: jax.Array, *, size: int):
    """``IFFT(prod_r FFT(p_r)^{T_r})`` rolled so that index 0 is the circular index ``shift``, clamped at
    0 (``|max(p^, 0) - p| <= |p^ - p|`` since ``p >= 0``), and the 2-norm of the powers' rounding error
    bound (elementwise ``|Phi| u sum_r T_r (|log|phi_r|| + |arg phi_r| + 4)``).

    padded: ``(R, size)`` pmfs on the circle; counts: ``(R,)`` their powers ``T_r`` (float64).
    """
    spectra = jnp.fft.rfft(padded, n=size, axis=1)  # (R, size//2 + 1)
    absval = jnp.abs(spectra)
    log_abs = jnp.log(jnp.maximum(absval, 1e-300))
    angle = jnp.angle(spectra)
    log_mod = jnp.sum(counts[:, None] * log_abs, axis=0)
    phase = jnp.sum(counts[:, None] * angle, axis=0)
    modulus = jnp.where(jnp.any(absval == 0.0, axis=0), 0.0, jnp.exp(log_mod))
    prod = jax.lax.complex(modulus * jnp.cos(phase), modulus * jnp.sin(phase))
    rounding = modulus * U * jnp.sum(counts[:, None] * (jnp.abs(log_abs) + 4.0 + jnp.abs(angle)), axis=0)
    # rfft holds half the spectrum: the full 2-norm counts the others twice
    e_pow = jnp.sqrt(2.0 * jnp.sum(rounding ** 2))
    composed = jnp.fft.irfft(prod, n=size)
    composed = jnp.roll(composed, -shift)
    return jnp.maximum(composed, 0.0), e_pow


def fft_error(size: int, norms: float, e_pow: float) -> float:
    """Bound on ``||p^ - p||_2`` of :func:`power_convolve`'s output: ``norms = sum_r T_r ||p_r||_2``."""
    return FFT_CONSTANT * U * math.log2(size) * (norms + 1.0) + float(e_pow) / math.sqrt(size)
