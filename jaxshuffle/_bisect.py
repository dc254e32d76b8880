"""One masked bisection for every monotone boundary in jaxshuffle (jit twin and numpy twin).

Both twins look for the boundary of a monotone predicate ``ok`` between ``lo`` and ``hi``,
elementwise over a batch, and keep the *verified* side: ``hi`` only ever moves to a point
where ``ok`` held, ``lo`` only to a point where it failed. Whatever the step count, the
returned ``hi`` is therefore a point the caller has checked (or the initial ``hi``), which is
what a certified search needs (docs/math.md section 5).

``geometric=True`` halves in log space (``sqrt(lo * hi)``) while ``lo > 0`` and the bracket spans
more than a factor 8, then arithmetically: the right split for quantities spread over decades
(eps0, n).

* :func:`bisect_jax`: ``ok`` is a traced function; a fixed number of steps in one
  ``lax.fori_loop`` (static shapes, vmappable). :func:`bisect_fixed` is its numpy twin (the same
  step, eagerly, on whole arrays): the planners' first guesses.
* :func:`bracket_monotone`: the calibrations' variant, for a boundary whose far side is not
  known yet (expand with ``grow`` until it is found, then split with ``mid`` or take ITP
  steps, :func:`itp_step`), probing every open lane in one batched call.
* :func:`golden_section`: the minimum of a unimodal function (the same bracket, golden split).
* :func:`bisect_numpy`: ``ok`` is an eager, batched call (say one batched ``amplify``);
  stops after ``steps`` or when every lane satisfies ``done(lo, hi)``, and evaluates only the
  lanes still open (``ok`` receives their midpoints and a boolean index of the lanes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


def _midpoint(lo, hi, geometric: bool, xp):
    mid = 0.5 * (lo + hi)
    if not geometric:
        return mid
    spread = (lo > 0) & (hi > 8.0 * lo)
    return xp.where(spread, xp.sqrt(xp.where(spread, lo * hi, 1.0)), mid)


def _halve(ok, lo, hi, geometric: bool, xp):
    """One step of both fixed-step twins: split at the midpoint, keep the side ``ok`` says."""
    mid = _midpoint(lo, hi, geometric, xp)
    good = ok(mid)
    return xp.where(good, lo, mid), xp.where(good, mid, hi)


def bisect_jax(ok: Callable[[jax.Array], jax.Array], lo: jax.Array, hi: jax.Array, *, steps: int,
               geometric: bool = False) -> tuple[jax.Array, jax.Array]:
    """``steps`` halvings of ``[lo, hi]`` keeping ``ok(hi)`` and ``not ok(lo)`` (jit/vmap-safe).

    One ``lax.fori_loop``, not ``steps`` unrolled copies of ``ok`` (an unrolled first-guess
    bisection was a large share of a search program's compile time).
    """
    return jax.lax.fori_loop(0, steps, lambda _, b: _halve(ok, b[0], b[1], geometric, jnp), (lo, hi))


def bisect_fixed(ok: Callable[[np.ndarray], np.ndarray], lo, hi, *, steps: int,
                 geometric: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Numpy twin of :func:`bisect_jax`: exactly ``steps`` halvings, ``ok`` on whole arrays.

    For cheap eager predicates (a planner's Gaussian first guess) where every lane takes every
    step; the arrays keep their shape (``ok(mid)`` gets the midpoints of all lanes, unlike
    :func:`bisect_numpy`, which passes only the open lanes, flattened).
    """
    lo, hi = np.array(lo, np.float64, copy=True), np.array(hi, np.float64, copy=True)
    for _ in range(steps):
        lo, hi = _halve(ok, lo, hi, geometric, np)
    return lo, hi


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


#: relative overshoot of :func:`bracket_monotone`'s secant expansion step past the predicted crossing
EXPAND_MARGIN = 1.02
#: ITP truncation constant times the initial bracket width (kappa_1 (b0 - a0); the paper suggests 0.2,
#: smaller follows the secant more closely: fewer probes on the smooth calibration curves)
KAPPA1 = 0.05


class BracketSettings(NamedTuple):
    """How :func:`bracket_monotone` brackets one kind of boundary: the settings a calibration fixes once
    and passes to each of its searches (only the probe budget and the first secant slope change between
    them)."""

    #: feasible values lie below infeasible ones (eps0: True) or above them (n: False)
    feasible_below: bool
    #: the largest value probed: a probe at ``x >= limit`` on the ``lo`` side stops its point (``at_limit``)
    limit: float
    #: the upper reported at the feasible end of a point that has none
    up_init: float
    #: the next probe while ``hi`` is infinite (the expansion)
    grow: Callable[[np.ndarray], np.ndarray]
    #: the next probe in a finite bracket ``(lo, hi)`` (without ``log_width``, or where ITP cannot step)
    mid: Callable[[np.ndarray, np.ndarray], np.ndarray]
    #: where a point's bracket ``(lo, hi)`` is narrow enough to stop
    narrow: Callable[[np.ndarray, np.ndarray], np.ndarray]
    #: optional, ``feasible_below`` only: steer probes on ``log x`` (secant expansion, then ITP steps
    #: towards ``log(hi / lo) <= log_width``)
    log_width: float | None = None


def bracket_monotone(upper_at: Callable[[np.ndarray], np.ndarray], target: np.ndarray, x0: np.ndarray,
                     settings: BracketSettings, *, max_probes: int, slope0=1.0):
    """Vectorised bracketing of the feasibility boundary ``upper_at(x) <= target`` (the calibrations' loop).

    ``settings`` (:class:`BracketSettings`) holds ``feasible_below``, ``limit``, ``up_init``, ``grow``,
    ``mid``, ``narrow`` and ``log_width``; ``max_probes`` bounds the batched ``upper_at`` calls.
    Every point keeps a bracket ``lo < hi`` of *probed* values (``lo = 0``, ``hi = inf`` until
    probed): the feasible side is ``lo`` when ``feasible_below`` (feasible values lie below
    infeasible ones: eps0), else ``hi`` (n). One batched ``upper_at`` call per probe; while
    ``hi`` is infinite the next probe is ``grow(x)``, then ``mid(lo, hi)``. A point stops when
    ``narrow(lo, hi)`` or when a probe at ``x >= limit`` lands on the ``lo`` side (``at_limit``:
    no boundary below the limit). Returns ``(lo, hi, upper at the feasible end (up_init where
    none), at_limit, done, probes)``; the feasible end is always a verified probe, so it never
    overshoots the target whatever the monotonicity.

    ``log_width`` (optional, for ``upper`` increasing in ``x``: ``feasible_below``): probes are
    steered on ``log x`` against ``log upper - log target``. While expanding, the step is the
    secant prediction of the crossing through the last two probes (``d log upper / d log x =
    slope0`` after the first),
    overshot by ``EXPAND_MARGIN`` and capped by ``grow(x)``, so the far side is usually found at
    the first try and close to the boundary; after each expansion that fell short the step is at
    least a larger power of ``grow``'s (after two, ``grow`` itself). Once the bracket is finite with ``lo > 0``, probes
    are ITP steps (:func:`itp_step`) instead of ``mid``: regula falsi where the curve is smooth
    (superlinear), projected so that the bracket reaches ``log(hi / lo) <= log_width`` within one
    probe more than bisection would need (the caller's ``narrow`` should hold there). Where an
    upper is not a positive finite number the step falls back to ``grow`` / the log-midpoint.
    Only where probes land changes: ``lo`` and ``hi`` are still probed points.
    """
    feasible_below, limit, up_init, grow, mid, narrow, log_width = settings
    shape = np.shape(x0)
    lo, hi = np.zeros(shape), np.full(shape, np.inf)
    up_feasible, up_infeasible = np.full(shape, up_init, dtype=np.float64), np.full(shape, np.nan)
    at_limit, done = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
    itp_on, itp_j, itp_n, itp_k = np.zeros(shape, dtype=bool), np.zeros(shape), np.zeros(shape), np.zeros(shape)
    if log_width is not None and not feasible_below:
        raise ValueError("log_width: the log-secant steps assume upper increasing in x (feasible_below=True)")
    x_prev, up_prev = np.zeros(shape), np.zeros(shape)  # the probe before the last (expansion's secant)
    short, guessed = np.zeros(shape), np.zeros(shape, dtype=bool)  # secant expansions that fell short
    x = x0
    probes = 0
    with np.errstate(invalid="ignore", divide="ignore"):
        log_t = np.log(target)
    while not done.all() and probes < max_probes:
        up = upper_at(x)
        probes += 1
        ok = up <= target
        act = ~done
        to_lo = ok if feasible_below else ~ok
        lo = np.where(act & to_lo, x, lo)
        hi = np.where(act & ~to_lo, x, hi)
        up_feasible = np.where(act & ok, up, up_feasible)
        up_infeasible = np.where(act & ~ok, up, up_infeasible)
        at_limit = at_limit | (act & to_lo & (x >= limit))
        done = done | at_limit | narrow(lo, hi)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            x_next = np.where(np.isinf(hi), grow(x), mid(lo, hi))
            if log_width is not None:
                slope = np.log(up / up_prev) / np.log(x / x_prev)
                slope = np.where((up_prev > 0) & (x > x_prev) & np.isfinite(slope) & (slope > 0), slope, slope0)
                predicted = x * np.exp((log_t - np.log(up)) / slope) * EXPAND_MARGIN
                cap = grow(x)
                short = short + (act & np.isinf(hi) & guessed)  # the last secant expansion fell short
                # each one moves the floor towards grow's step (after two misses: grow)
                floor = np.maximum(x * EXPAND_MARGIN, x * (cap / x) ** np.minimum(1.0, 0.5 * short))
                guessed = (up > 0) & np.isfinite(predicted) & (predicted < cap)
                guess = np.where(guessed, np.maximum(predicted, floor), cap)
                x_next = np.where(np.isinf(hi), np.minimum(guess, cap), x_next)
                x_prev, up_prev = np.where(act, x, x_prev), np.where(act, up, up_prev)
                finite = ~done & (lo > 0) & np.isfinite(hi)
                start = finite & ~itp_on  # the bracket just closed: ITP's budget counts from here
                span0 = np.log(hi / lo)
                itp_n = np.where(start, np.maximum(np.ceil(np.log2(span0 / log_width)), 0.0) + 1.0, itp_n)
                itp_k = np.where(start, KAPPA1 / span0, itp_k)
                itp_j = np.where(start, 0.0, itp_j + itp_on)
                itp_on = itp_on | start
                y_lo, y_hi = (np.log(up_feasible) - log_t, np.log(up_infeasible) - log_t)
                if not feasible_below:
                    y_lo, y_hi = y_hi, y_lo
                step = np.exp(itp_step(np.log(lo), np.log(hi), y_lo, y_hi, 0.5 * log_width, itp_n - itp_j, itp_k))
                inside = finite & (step > lo) & (step < hi)
                x_next = np.where(inside, step, x_next)
            x = np.where(done, x, x_next)
    return lo, hi, up_feasible, at_limit, done, probes


def itp_step(a, b, y_a, y_b, eps: float | jax.Array, steps_left, kappa1):
    """One ITP step (Oliveira & Takahashi, ACM TOMS 47(1), 2021) for the root of a monotone ``y`` in ``[a, b]``.

    ``y_a``, ``y_b``: the function at the ends (opposite signs; NaN or infinite: no
    interpolation, the midpoint). ``steps_left = n_max - j`` with ``n_max =
    ceil(log2((b0 - a0) / (2 eps))) + n0`` of the initial bracket; ``kappa1`` the truncation
    constant (``kappa2 = 2``). The regula-falsi point is moved ``kappa1 (b - a)^2`` towards the
    midpoint and projected into ``|x - mid| <= eps 2^steps_left - (b - a) / 2``, which bounds the
    number of steps to reach ``b - a <= 2 eps`` by ``n_max`` (elementwise; numpy, or jnp for JAX arrays). A point closer
    than ``1.8 eps`` to an end moves inwards to that distance, so an accurate interpolation
    closes the bracket in one probe instead of creeping up on the root from one side.
    """
    xp = jnp if any(isinstance(v, jax.Array) for v in (a, b, y_a, y_b, steps_left)) else np
    half = 0.5 * (a + b)
    width = b - a
    r = xp.maximum(eps * xp.exp2(steps_left) - 0.5 * width, 0.0)
    delta = kappa1 * width ** 2
    denom = y_b - y_a
    usable = xp.isfinite(y_a) & xp.isfinite(y_b) & (denom != 0)
    x_f = xp.where(usable, (y_b * a - y_a * b) / xp.where(usable, denom, 1.0), half)
    sigma = xp.sign(half - x_f)
    x_t = xp.where(delta <= xp.abs(half - x_f), x_f + sigma * delta, half)
    x = xp.where(xp.abs(x_t - half) <= r, x_t, half - sigma * r)
    # a point within 0.9 (2 eps) of an end moves inwards to that distance (towards the midpoint,
    # so the projection's bound still holds): if the root lies beyond it, the bracket closes now
    nudge = 1.8 * eps
    wide = width > 2.0 * nudge
    x = xp.where(wide & (b - x < nudge), b - nudge, x)
    return xp.where(wide & (x - a < nudge), a + nudge, x)


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
