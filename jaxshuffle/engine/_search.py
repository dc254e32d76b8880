"""The certified search every engine runs: one bracketing loop, one implicit-gradient wrapper, and the steps.

Each engine's search keeps, per point, a bracket ``[lo, hi]`` with ``D(lo) > delta >= D(hi)`` certified
(``D`` the hockey-stick divergence of its pair at ``t = e^eps``, evaluated with a certified band
``[D_lower, D_upper]``). This module holds that search once (docs/math.md section 5, "One core for every
engine"):

* :func:`certified_search` is THE loop: it evaluates the engine's band at the probe ``x``, moves ``hi``
  to ``x`` only where ``D_upper(x) <= delta`` and ``lo`` only where ``D_lower(x) > delta``, lets the engine
  tighten the ends by certificates of its own (never loosen them: the loop keeps ``max``/``min``), and asks
  the engine's strategy for the next probe and whether the point is done;
* :func:`implicit_upper` is THE implicit-gradient wrapper: ``upper`` differentiable through
  ``jax.lax.custom_root`` on the engine's root equation, the search itself run without gradients;
* :func:`tangent_lower`: ``D`` is convex in ``t`` (a supremum of functions affine in ``t``), so the
  certified tangent of one evaluation stays above ``delta`` up to where it crosses it;
* :func:`band_probe`: where ``x`` falls inside the band (``D_lower <= delta < D_upper``), the next probe
  steps by the band's width in ``eps``, so that the band, not ``rtol``, limits the bracket.

Where the probes go (Newton, bisection, ITP) is each engine's strategy and never affects soundness:
the two-count search (:mod:`jaxshuffle.engine.two_count.search`) chooses between Newton on ``log D`` and on
``D``, the blanket search (:mod:`jaxshuffle.engine.blanket.search`) uses :func:`linear_newton`, the matrix
engine (:mod:`jaxshuffle.engine.matrix.search`, one-sided forms without tangents) ITP steps.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

#: relative nudge of a tangent's or chord's crossing to the safe side: far more than the few roundings
#: between the computed and the exact crossing
CROSSING_NUDGE = 1e-14


class Status(enum.IntEnum):
    """Per-point outcome of a certified search (an int8 array in the result)."""

    CONVERGED = 0  #: ``upper - lower <= rtol * upper``
    ZERO = 1  #: ``eps = 0`` already satisfies delta (``lower = upper = 0``)
    INFINITE = 2  #: delta is below the mass of outcomes impossible under the other hypothesis
    MAX_ITER = 3  #: iteration cap reached; the bracket is still certified, only wider
    ERROR_LIMITED = 4  #: the certified error band, not rtol, limits the bracket (still certified)
    INVALID = 5  #: invalid input under jit: ``lower = 0, upper = inf``
    UNBOUNDED = 6  #: no finite eps <= 700 certified: ``upper = inf``

    @property
    def label(self) -> str:
        """Lower-case name with dashes (``"max-iter"``), as the CLI and the sweep files write it."""
        return self.name.lower().replace("_", "-")


class EpsilonBracket(NamedTuple):
    """A certified search's result: ``lower <= eps <= upper``, certified, per point.

    Attributes:
      lower: certified lower bound on the pair's epsilon (errs low); ``0`` where the search makes no
        claim (status ``INVALID``).
      upper: certified upper bound on the pair's epsilon (errs high); ``inf`` where no finite bound is
        certified (status ``INFINITE``, ``UNBOUNDED`` or ``INVALID``).
      status: the :class:`Status` code of each point (int8 array).
      iterations: search iterations each point took (int array).
    """

    lower: jax.Array
    upper: jax.Array
    status: jax.Array
    iterations: jax.Array


def lane_constant(like, value, dtype=None):
    """``value`` as a per-lane array under ``vmap`` (batched like ``like``), for a loop's starting carry.

    A ``while_loop`` whose predicate is batched carries every value batched; the batching rule finds
    which by tracing the body again each time a constant carry turns batched. Starting each carry
    as a select on a batched ``like`` (``where(like, value, value)``, which XLA folds away) settles it in
    one pass: a first call of the two-count search traced in 0.55 s instead of 0.93 s. Without
    ``dtype`` the value keeps a Python scalar's weak type, as ``jnp.asarray(value)`` would.
    """
    if dtype is None:
        return jnp.where(like, value, value)
    return jnp.where(like, jnp.asarray(value, dtype), jnp.asarray(value, dtype))


def tangent_lower(x, tangent_value, tangent_slope, delta, lo, hi):
    """A certified lower end from the tangent at ``x``: ``(lo_tan, usable)``.

    The evaluation at ``t = e^x`` certifies ``D(t') >= tangent_value + (t - t') tangent_slope`` for
    ``t' <= t`` (convexity in ``t``), which exceeds ``delta`` for every
    ``t' < t - (delta - tangent_value) / tangent_slope``; that crossing, nudged down by
    :data:`CROSSING_NUDGE` relative in ``t`` and again in ``eps``, is below the true epsilon. ``usable``
    where the tangent gives a point inside ``(lo, hi)`` (a slope > 0, a tangent value below ``delta``).
    """
    t = jnp.exp(x)
    s = tangent_slope
    t_cross = (t - (delta - tangent_value) / jnp.where(s > 0, s, 1.0)) * (1.0 - CROSSING_NUDGE)
    lo_tan = jnp.log(jnp.maximum(t_cross, 1.0)) * (1.0 - CROSSING_NUDGE)
    usable = (s > 0) & (tangent_value < delta) & (t_cross > 1.0) & (lo_tan > lo) & (lo_tan < hi)
    return lo_tan, usable


def linear_newton(t, value, q_mass, delta):
    """Newton's step on ``D(t) - delta`` in ``t`` (``dD/dt = -q_mass``), as an ``eps``: for a convex
    decreasing ``D`` it approaches the root from below. Steers probes only."""
    t_new = t + (value - delta) / jnp.maximum(q_mass, 1e-300)
    return jnp.log(jnp.maximum(t_new, 1e-300))


def band_probe(x, lo, hi, margin, d_upper, d_lower, t, q_mass):
    """The next probe from an ``x`` inside the certified band: a step of the band's width in ``eps``
    (``(D_upper - D_lower) / |dD/deps|``, at least ``margin``) above ``x`` while the bracket has room,
    else below it (not below the bracket's midpoint with ``lo``). Steers probes only."""
    step = jnp.maximum(margin, 2.0 * (d_upper - d_lower) / jnp.maximum(t * q_mass, 1e-300))
    return jnp.where(hi - x > 1.5 * step, x + step, jnp.maximum(x - step, 0.5 * (lo + x)))


class SearchState(NamedTuple):
    """The carry of :func:`certified_search`, per point (lane).

    Attributes:
      it: evaluations so far.
      lo: certified lower end (``D(lo) > delta``, or the a-priori end the engine started from).
      hi: certified upper end (``D(hi) <= delta``, or the a-priori end).
      x: the next probe.
      status: the :class:`Status` the point ends with (``MAX_ITER`` while it runs).
      done: the point has stopped; its ends, probe and status are frozen.
      extra: the engine's strategy state (any pytree of per-lane arrays).
    """

    it: jax.Array
    lo: jax.Array
    hi: jax.Array
    x: jax.Array
    status: jax.Array
    done: jax.Array
    extra: Any


class Move(NamedTuple):
    """An engine's answer to one evaluation (the ``advance`` of :func:`certified_search`).

    Attributes:
      lo: a lower end certified by the engine's own argument (a tangent), or the ``lo`` it was given;
        the loop keeps the larger of the two, so a move can only tighten.
      hi: an upper end certified likewise (a chord), or the ``hi`` it was given; the loop keeps the smaller.
      x: the next probe (steers only: soundness never depends on it).
      status: the point's :class:`Status` if it stops now.
      stop: the point stops here.
      extra: the engine's next strategy state.
    """

    lo: jax.Array
    hi: jax.Array
    x: jax.Array
    status: jax.Array
    stop: jax.Array
    extra: Any


def certified_search(evaluate: Callable[[jax.Array], Any], advance: Callable[..., Move], start: SearchState,
                     delta, *, max_iter: int) -> SearchState:
    """THE certified bracketing loop of every engine, for one point (vmap it over lanes).

    Each iteration evaluates ``band = evaluate(x)`` (any object with certified ``band.lower <= D(x) <=
    band.upper``), then moves the ends by that evaluation alone::

        lo <- max(lo, x)  where band.lower > delta      (eps > x: certified)
        hi <- min(hi, x)  where band.upper <= delta     (eps <= x: certified)

    and then calls ``advance(state, band, lo, hi)`` for the engine's own certified moves and its
    next probe (:class:`Move`). The loop runs until every point is ``done`` or ``max_iter`` evaluations.
    A one-sided engine (the matrix forms: one side of each lane certified) passes ``lower = upper``; then
    only the certified side of its bracket is claimed (its docstring says which).

    Returns:
      The final :class:`SearchState`: ``lo``/``hi`` the bracket, ``status``, ``it`` evaluations.
    """

    def body(st: SearchState) -> SearchState:
        band = evaluate(st.x)
        lo = jnp.where(band.lower > delta, jnp.maximum(st.lo, st.x), st.lo)
        hi = jnp.where(band.upper <= delta, jnp.minimum(st.hi, st.x), st.hi)
        move = advance(st, band, lo, hi)
        lo, hi = jnp.maximum(lo, move.lo), jnp.minimum(hi, move.hi)
        keep = st.done
        return SearchState(st.it + 1, jnp.where(keep, st.lo, lo), jnp.where(keep, st.hi, hi),
                           jnp.where(keep, st.x, move.x), jnp.where(keep, st.status, move.status),
                           keep | move.stop, move.extra)

    return jax.lax.while_loop(lambda s: (s.it < max_iter) & ~s.done, body, start)


def differentiable(status) -> jax.Array:
    """Points whose ``upper`` is a root of the search's equation (converged, capped or band-limited), the
    ones :func:`implicit_upper` differentiates; the others (``ZERO``, ``INFINITE``, ...) have no root."""
    return ((status == jnp.int8(Status.CONVERGED)) | (status == jnp.int8(Status.MAX_ITER))
            | (status == jnp.int8(Status.ERROR_LIMITED)))


def implicit_upper(root_eq: Callable[[jax.Array], jax.Array], upper, status) -> jax.Array:
    """THE implicit-gradient wrapper: ``upper`` with gradients from ``root_eq(upper) = 0``.

    The search ran without gradients (its inputs stopped); ``jax.lax.custom_root`` then attaches, by
    the implicit function theorem, ``d upper = -(d root_eq / d params) / (d root_eq / d eps)`` where
    ``root_eq`` (over all lanes, elementwise) closes over the differentiable parameters, typically
    ``log D(eps) - log delta``. Values are unchanged; points that are not :func:`differentiable` keep
    their ``upper`` with zero gradient.
    """
    diff = differentiable(status)
    root = jax.lax.custom_root(
        lambda e: jnp.where(diff, root_eq(e), 0.0),
        jnp.where(diff, upper, 1.0),
        solve=lambda _, x: x,  # the search already found it
        tangent_solve=lambda g, y: y / jnp.where(diff, g(jnp.ones_like(y)), 1.0),
    )
    return jnp.where(diff, root, upper)
