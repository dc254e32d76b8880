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
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


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
