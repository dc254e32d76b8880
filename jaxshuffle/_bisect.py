"""One masked bisection for every monotone boundary in jaxshuffle (jit twin and numpy twin).

Both twins look for the boundary of a monotone predicate ``ok`` between ``lo`` and ``hi``,
elementwise over a batch, and keep the *verified* side: ``hi`` only ever moves to a point
where ``ok`` held, ``lo`` only to a point where it failed. Whatever the step count, the
returned ``hi`` is therefore a point the caller has checked (or the initial ``hi``), which is
what a certified search needs (docs/math.md section 9).

``geometric=True`` halves in log space (``sqrt(lo * hi)``) while ``lo > 0`` and the bracket spans
more than a factor 8, then arithmetically: the right split for quantities spread over decades
(eps0, n).

* :func:`bisect_jax`: ``ok`` is a traced function; a fixed number of steps in one
  ``lax.fori_loop`` (static shapes, vmappable).
* :func:`bracket_monotone`: the calibrations' variant, for a boundary whose far side is not
  known yet (expand with ``grow`` until it is found, then split with ``mid``), probing every
  open lane in one batched call.
* :func:`golden_section`: the minimum of a unimodal function (the same bracket, golden split).
* :func:`bisect_numpy`: ``ok`` is an eager, batched call (say one batched ``amplify``);
  stops after ``steps`` or when every lane satisfies ``done(lo, hi)``, and evaluates only the
  lanes still open (``ok`` receives their midpoints and a boolean index of the lanes).
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np


def _midpoint(lo, hi, geometric: bool, xp):
    mid = 0.5 * (lo + hi)
    if not geometric:
        return mid
    spread = (lo > 0) & (hi > 8.0 * lo)
    return xp.where(spread, xp.sqrt(xp.where(spread, lo * hi, 1.0)), mid)


def bisect_jax(ok: Callable[[jax.Array], jax.Array], lo: jax.Array, hi: jax.Array, *, steps: int,
               geometric: bool = False) -> tuple[jax.Array, jax.Array]:
    """``steps`` halvings of ``[lo, hi]`` keeping ``ok(hi)`` and ``not ok(lo)`` (jit/vmap-safe)."""
    def body(_, bracket):
        lo, hi = bracket
        mid = _midpoint(lo, hi, geometric, jnp)
        good = ok(mid)
        return jnp.where(good, lo, mid), jnp.where(good, mid, hi)

    return jax.lax.fori_loop(0, steps, body, (lo, hi))


def bisect_numpy(ok: Callable[[np.ndarray, np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray, *,
                 steps: int, geometric: bool = False,
                 done: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
                 integer: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Eager twin of :func:`bisect_jax` for expensive batched predicates.

    ``ok(mid, open_lanes)`` gets the midpoints of the lanes still open (a boolean mask over the
    batch) and returns their verdicts. ``integer=True`` rounds midpoints down to integers and
    stops a lane when ``hi - lo <= 1``.
    """
    lo, hi = np.array(lo, np.float64, copy=True), np.array(hi, np.float64, copy=True)
    for _ in range(steps):
        open_ = np.ones(lo.shape, bool) if done is None else ~np.asarray(done(lo, hi), bool)
        if integer:
            open_ &= hi - lo > 1
        if not open_.any():
            break
        mid = _midpoint(lo[open_], hi[open_], geometric, np)
        if integer:
            mid = np.clip(np.floor(mid), lo[open_] + 1, hi[open_] - 1)
        good = np.asarray(ok(mid, open_), bool)
        lo_o, hi_o = lo[open_], hi[open_]
        lo[open_] = np.where(good, lo_o, mid)
        hi[open_] = np.where(good, mid, hi_o)
    return lo, hi


def bracket_monotone(upper_at: Callable[[np.ndarray], np.ndarray], target: np.ndarray, x0: np.ndarray, *,
                     feasible_below: bool, limit: float, up_init: float,
                     grow: Callable[[np.ndarray], np.ndarray], mid: Callable[[np.ndarray, np.ndarray], np.ndarray],
                     narrow: Callable[[np.ndarray, np.ndarray], np.ndarray], max_probes: int):
    """Vectorised bracketing of the feasibility boundary ``upper_at(x) <= target`` (the calibrations' loop: expand, then bisect).

    Every point keeps a bracket ``lo < hi`` of *probed* values (``lo = 0``, ``hi = inf`` until
    probed): the feasible side is ``lo`` when ``feasible_below`` (feasible values lie below
    infeasible ones: eps0), else ``hi`` (n). One batched ``upper_at`` call per probe; while
    ``hi`` is infinite the next probe is ``grow(x)``, then ``mid(lo, hi)``. A point stops when
    ``narrow(lo, hi)`` or when a probe at ``x >= limit`` lands on the ``lo`` side (``at_limit``:
    no boundary below the limit). Returns ``(lo, hi, upper at the feasible end (up_init where
    none), at_limit, done, probes)``; the feasible end is always a verified probe, so it never
    overshoots the target whatever the monotonicity.
    """
    lo = np.zeros(np.shape(x0))
    hi = np.full(np.shape(x0), np.inf)
    up_feasible = np.full(np.shape(x0), up_init)
    at_limit = np.zeros(np.shape(x0), dtype=bool)
    done = np.zeros(np.shape(x0), dtype=bool)
    x = x0
    probes = 0
    while not done.all() and probes < max_probes:
        up = upper_at(x)
        probes += 1
        ok = up <= target
        act = ~done
        to_lo = ok if feasible_below else ~ok
        lo = np.where(act & to_lo, x, lo)
        hi = np.where(act & ~to_lo, x, hi)
        up_feasible = np.where(act & ok, up, up_feasible)
        at_limit = at_limit | (act & to_lo & (x >= limit))
        done = done | at_limit | narrow(lo, hi)
        with np.errstate(invalid="ignore", divide="ignore"):
            x = np.where(done, x, np.where(np.isinf(hi), grow(x), mid(lo, hi)))
    return lo, hi, up_feasible, at_limit, done, probes


_GOLDEN = 0.6180339887498949  # (sqrt(5) - 1) / 2


def golden_section(objective: Callable[[jax.Array], jax.Array], lo: jax.Array, hi: jax.Array, *,
                   steps: int) -> jax.Array:
    """Midpoint of the final bracket of a golden-section search for the minimum of a unimodal ``objective``.

    Elementwise over a batch, ``steps`` iterations in one ``lax.fori_loop`` (jit/vmap-safe); the
    bracket shrinks by 0.618 per step. The caller states why its objective is unimodal.
    """
    def body(_, bracket):
        lo, hi = bracket
        x1 = hi - _GOLDEN * (hi - lo)
        x2 = lo + _GOLDEN * (hi - lo)
        left = objective(x1) <= objective(x2)
        return jnp.where(left, lo, x1), jnp.where(left, x2, hi)

    lo, hi = jax.lax.fori_loop(0, steps, body, (lo, hi))
    return 0.5 * (lo + hi)
