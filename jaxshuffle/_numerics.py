"""Numerics shared by the certified kernels: values that must be computed once.

:func:`materialize` is the one fusion barrier of the package (docs/math.md, "Floating point under
jit"). Why it exists: XLA fuses a cheap elementwise producer into *every* consumer that reads it,
so under ``jit`` the same expression can be evaluated several times, and the copies need not agree.
LLVM contracts ``a * b + c`` into one fused multiply-add where the two operations end up in one
fusion, and not where the product was stored by another, so copies of ``h0 + hs * s`` can differ in
the last ulp. For a continuous quantity that is harmless (every error budget counts a few ulps). For
a *discrete* decision it is not: a threshold ``j = floor(tau) + 1`` with ``tau`` on an integer can be
``5`` in the fusion that evaluates ``SF(j)`` and ``6`` in the one that evaluates ``pmf(j - 1)``, and
an identity that needs one ``j`` (``E[(A - tau)_+] = (s pA - tau) SF(j) + s pA qA pmf(j-1)``) is then
off by a whole term. ``jax.lax.optimization_barrier`` does not prevent this on the CPU (XLA removes
it before fusion). A ``while_loop`` whose trip count XLA cannot see is never fused or duplicated:
its outputs are stored once and every consumer reads the same bits. The certified kernels pass every
discrete decision (thresholds, stretch boundaries, branch choices) and the scalars they derive from
through it; eager and jitted evaluations then make the same decisions from the same numbers, up to
the continuous rounding the error budgets already cover (tests/test_jit_eager.py).

Beside it, the small formulas several kernels share, spelled once: the rounding constants
(:data:`UNIT_ROUNDOFF`, :data:`ULP`), the binomial window's start (:func:`window_start`), the
Newton margin of the bracketing searches (:func:`newton_margin`) and the ladder of static sizes
the programs are compiled at (:func:`quarter_octave`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np


@jax.custom_jvp
def materialize(x):
    """``x`` itself (a pytree), stored once instead of recomputed inside every consumer.

    A loop is a fusion boundary; this one runs once (twice when the first element is NaN: a trip
    count XLA cannot know) and changes nothing. Identity derivative (``while_loop`` itself has no
    reverse mode). Also a speed-up: a window-sized loop that reads a materialized value does not
    recompute it per element.
    """
    first = jnp.ravel(jax.tree.leaves(x)[0])[0]
    trips = jnp.where(jnp.isnan(first), 2, 1)
    keep = lambda i, y: jnp.where(i < 0, jnp.zeros_like(y), y)  # noqa: E731  (never zero: i >= 0)
    body = lambda s: (s[0] + 1, jax.tree.map(functools.partial(keep, s[0]), s[1]))  # noqa: E731
    return jax.lax.while_loop(lambda s: s[0] < trips, body, (0, x))[1]


@materialize.defjvp
def _materialize_jvp(primals, tangents):
    return materialize(primals[0]), tangents[0]


#: float64 unit roundoff ``u = 2^-53``: the relative error of one correctly rounded operation.
UNIT_ROUNDOFF = 2.0 ** -53

#: ``2u`` rounded up (``2.22e-16 -> 2.3e-16``): the per-operation rounding bound the certified kernels
#: charge (the two-count divergence, the blanket kernel and matrix forms, the round PLDs; docs/math.md
#: section 6). Twice ``u`` covers an operation whose inputs were themselves rounded once (a product of a
#: rounded value, a log of a rounded quotient), and the upward rounding of the constant keeps every
#: error term that multiplies it on the safe side.
ULP = 2.3e-16

#: Below this a float64 term may be flushed to zero (subnormal, or XLA's flush-to-zero): the certified
#: sums charge this much for each term that may have been lost.
FLUSH = 2.3e-308


def window_start(trials, p, window, xp=None):
    """First count of a window of ``window`` counts centred on the mean of ``Bin(trials, p)``.

    ``clip(floor(trials p) - window // 2, 0, max(trials + 1 - window, 0))``: the support is
    ``0..trials``, so the window starts at most at ``trials + 1 - window`` (it ends on ``trials``)
    and at 0 where it covers the whole support. Any start is sound (the kernels charge the mass
    outside their window, docs/math.md sections 2 and 10); centring on the mean keeps that charge
    small. The two-count kernel centres on the others' count ``Bin(n - 1, r0 + r1)``
    (``trials = n - 1``), the blanket kernel on the blanket count ``Bin(n, pS)`` (``trials = n``).

    ``xp``: ``numpy`` (planning) or ``jax.numpy`` (traced, a fixed plan); by default ``jax.numpy``
    where ``trials`` or ``p`` is a JAX array, else ``numpy``. The two give the same numbers
    (tests/test_numerics.py).
    """
    if xp is None:
        xp = jnp if isinstance(trials, jax.Array) or isinstance(p, jax.Array) else np
    return xp.clip(xp.floor(trials * p) - window // 2, 0.0, xp.maximum(trials + 1.0 - window, 0.0))


def newton_margin(rtol, x, lo, hi):
    """How far above the root a Newton step aims, and how far inside ``[lo, hi]`` it is kept.

    ``0.25 rtol min(hi, max(x, lo))``: a quarter of the tolerance, relative to the current point
    ``x`` brought into the bracket (docs/math.md sections 5 and 10). The search aims ``2 margin``
    above the root so that the next evaluation lands on the certified-upper side and its tangent
    certifies the lower end: one evaluation then closes the bracket to about ``2 margin``, which
    must stay within ``rtol hi`` for the search to stop there as CONVERGED.

    Relative to the point and not to ``hi``: before the first certified upper end, ``hi`` is the
    initial end (``eps0``, ``log max(u/v, v/u)`` or infinite), and a margin of ``rtol eps0`` sent a
    first point already within the band of the root thousands of ``rtol`` away (at ``n = 1e8``: 8
    evaluations instead of 3). The ``min`` with ``hi`` is the safe side: the margin is never larger
    than ``0.25 rtol hi``, so a step aimed ``2 margin`` above the root never by itself leaves a
    bracket wider than ``rtol hi``, and the clip into ``[lo + margin, hi - margin]`` never pushes a
    step onto (or past) a certified end. Finite wherever ``x`` is (also with ``hi = inf``). Only where
    the search probes changes: its ends are still certified evaluations.
    """
    return 0.25 * rtol * jnp.minimum(hi, jnp.maximum(x, lo))


def quarter_octave(v: int) -> int:
    """Smallest of 4, 5, 6, 7 times a power of two (or a power of two up to 4) that is ``>= v``: a
    small ladder of sizes, at most 25 % above ``v``, so that nearby evaluations share programs."""
    return int(quarter_octaves(max(int(v), 1)))


def quarter_octaves(v) -> np.ndarray:
    """:func:`quarter_octave` of each entry of ``v`` (numpy, exact for integers below 2^53): a power of two up
    to 4, else ``v`` rounded up to a multiple of ``base``, where ``v`` lies in ``[4 base, 8 base)``."""
    v = np.maximum(np.ceil(np.asarray(v, np.float64)), 1.0)
    bits = np.frexp(v)[1]  # v < 2^bits: Python's int.bit_length
    small = 2.0 ** np.ceil(np.log2(v))
    base = 2.0 ** np.maximum(bits - 3, 0)
    return np.where(v <= 4, small, np.ceil(v / base) * base)
