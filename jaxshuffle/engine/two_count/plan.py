"""Static shapes of the engine's programs, planned eagerly from concrete values (numpy).

XLA compiles one program per static shape, so every engine call is split in two:

1. *Planning* (here, eager numpy): which others' counts carry the binomial mass (the window,
   a power of two, and its first count ``c_lo``), how far the threshold ``k_c`` can step from one
   count to the next over every ``eps`` the search can visit (``max_step``), and whether the
   linear-space pmf ratios are safe. Points sharing a :class:`Plan` share one compiled program.
2. *Evaluation* (:mod:`jaxshuffle.divergence`, :mod:`jaxshuffle.search`), jitted, with the plan
   static and everything else traced.

A plan never affects soundness, only tightness and speed: the kernel recomputes the dropped
binomial mass outside the window from the actual point (``c_lo`` and the window length) and adds
it to the band, and a threshold step larger than ``max_step`` makes the point claim nothing
(band ``[0, inf]``). So a plan made for one set of points may be reused inside ``jit`` for nearby
points (:func:`plan_for`), as a tuning loop does (docs/math.md section 4).

Memory: :func:`run_buckets` evaluates each plan's points in chunks whose size comes from a
memory budget (:data:`DEFAULT_MEMORY_BYTES`, or the ``memory`` argument), so peak memory does
not grow with the batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._bisect import bisect_numpy
from jaxshuffle._config import broadcast_shapes_or_raise, check, concrete, f64, require_x64
from jaxshuffle._numerics import window_start as _window_start
from jaxshuffle.engine.two_count.pair import TwoCountPair, check_fields

R_FLOOR = 1e-150  # r0, r1 are raised to this in the kernel; the change in D is bounded and added
INV_S_MAX = 1e200  # stands for 1/(1-r0-r1) when that is 0 (only ever multiplies 0 or dominates)
MIN_BLOCK = 512  # chain block length (one continued-fraction tail anchors each block)
# Shortest window of the search programs: smaller windows cost microseconds per evaluation,
# but every distinct window is another program to trace and compile (~3.5 s on 2 cores), so
# the windows of small n share one.
MIN_SEARCH_WINDOW = 1024
EPS_CAP = 700.0  # t = e^eps stays finite in float64
# The window leaves out at most this fraction of delta of binomial mass; it only widens the band.
TRUNC_FRACTION = 1e-6
# Bytes of device memory one lane of a compiled search holds per window count (measured on
# CPU: ~0.8 MB per point at n = 1e6, window 8192), and the default budget per call.
BYTES_PER_COUNT = 100
DEFAULT_MEMORY_BYTES = 1 << 30
# Largest window a point may need: beyond it, planning refuses with a clear message (the
# largest n it supports is stated there) rather than asking XLA for tens of GB.
MAX_WINDOW = 1 << 22


class Plan(NamedTuple):
    """Static shape of one compiled divergence program.

    The divergence it computes: docs/math.md section 2.

    Attributes:
      window: number of others' counts ``c`` summed (a power of two).
      block: chain block length; one continued-fraction tail anchors each block.
      max_step: largest ``|k_{c+1} - k_c|`` the chain handles (larger is flagged).
      symmetric: all points have ``r0 == r1``, so one direction gives both.
      linear: pmfs along the window by exact ratios in linear space (fast), made for points
        where :func:`linear_safe` holds (:func:`bucket_plans` checks); elsewhere the band
        widens or, where a ratio leaves float range, becomes ``[0, inf]``: still sound.
        Default: log space (any point).
    """

    window: int
    block: int
    max_step: int
    symmetric: bool
    linear: bool = False


# ----------------------------------------------------------------------------------------
# Windows: which counts c carry the binomial mass.


def _kl(a, pi):
    """Bernoulli KL(a || pi), elementwise, numpy; 0 log 0 = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = np.where(a > 0, a * np.log(a / pi), 0.0)
        t2 = np.where(a < 1, (1 - a) * np.log((1 - a) / (1 - pi)), 0.0)
    return t1 + t2


def needed_halfwidth(N, pi, tol):
    """Smallest h with Chernoff bounds on P[C >= mu+h] and P[C <= mu-h] each <= tol/2."""
    N, pi, tol = np.broadcast_arrays(np.asarray(N, np.float64), np.asarray(pi, np.float64), np.asarray(tol, np.float64))
    mu = N * pi
    target = np.log(tol / 2)

    def both_tails_small(h, lanes):
        n_, p_, m_ = N[lanes], pi[lanes], mu[lanes]
        up, dn = np.minimum(m_ + h, n_), np.maximum(m_ - h, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lu = np.where(up >= n_, -np.inf, -n_ * _kl(up / n_, p_))
            ld = np.where(dn <= 0, -np.inf, -n_ * _kl(dn / n_, p_))
        return (lu <= target[lanes]) & (ld <= target[lanes])

    _, hi = bisect_numpy(both_tails_small, np.zeros_like(mu), np.maximum(N, 1.0), steps=64)
    return np.ceil(hi) + 2


def window_start(n, r_sum, window, xp=np):
    """First count ``c_lo`` of a window of length ``window`` centred on the mean of ``Binom(n-1, r_sum)``.

    Works on numpy (planning) and traced jax arrays (inside ``jit`` with a fixed plan):
    :func:`jaxshuffle._numerics.window_start` with ``trials = n - 1`` and ``r_sum`` floored as in the kernel.
    """
    pi = xp.clip(r_sum, 2 * R_FLOOR, 1.0)
    return _window_start(n - 1.0, pi, window, xp)


def plan_windows(n: np.ndarray, r_sum: np.ndarray, tol: np.ndarray | float,
                 ladder: Callable[[np.ndarray], np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Window length (power of two, or ``ladder(width)``) and first count ``c_lo`` for each point.

    The window ``[c_lo, c_lo + L)`` of ``C ~ Binom(n-1, r_sum)`` leaves out at most
    ``tol`` probability (Chernoff), or covers ``0..n-1`` entirely. Raises ValueError naming ``n``
    when a point needs more than :data:`MAX_WINDOW` counts (before anything is allocated).
    ``ladder`` maps the counts needed to the window's length (at least as many; default: the next
    power of two, at least 16).
    """
    N = n - 1.0
    pi = np.clip(r_sum, 2 * R_FLOOR, 1.0)
    width = 2 * needed_halfwidth(N, np.minimum(pi, 1 - 1e-16), np.broadcast_to(tol, N.shape))
    width = np.minimum(width, n)
    L = (np.maximum(16, 2 ** np.ceil(np.log2(np.maximum(width, 1.0)))) if ladder is None
         else ladder(width)).astype(np.int64)
    if L.size and L.max() > MAX_WINDOW:
        i = int(np.argmax(L))
        raise ValueError(
            f"n: {float(np.ravel(n)[i]):.6g} needs a window of {int(L.max())} counts, more than the "
            f"{MAX_WINDOW} this engine holds in memory; the largest supported n at these parameters is about "
            f"{_largest_n(float(np.ravel(pi)[i])):.3g}")
    return L, window_start(n, r_sum, L)


def _largest_n(pi: float) -> float:
    """Largest n whose window fits :data:`MAX_WINDOW` (the window grows like sqrt(n pi (1-pi)))."""
    # a window of L counts covers about +-L/2 = 8 standard deviations at tol ~ 1e-12
    sd = MAX_WINDOW / 16.0
    return sd * sd / max(pi * (1.0 - pi), 1e-300)


# ----------------------------------------------------------------------------------------
# Threshold steps and the linear-space check.


def max_step_estimate(u, v, w, r0, r1, t_lo, t_hi, n=None) -> np.ndarray:
    """Eager estimate of max ``|k_{c'+1} - k_{c'}|`` over ``t`` in ``[t_lo, t_hi]`` (both directions).

    A threshold never moves by more than ``n + 1`` counts (it stays in ``[0, c'+1]``), so the
    estimate is capped there when ``n`` is given. An estimate that is too small is safe: the
    kernel flags the step and the point claims nothing.
    """
    ts = np.exp(np.linspace(np.log(t_lo), np.log(np.minimum(t_hi, 1e300)), 33))  # (33, B)
    r0 = np.maximum(r0, R_FLOOR)
    r1 = np.maximum(r1, R_FLOOR)
    s = 1 - r0 - r1
    inv_s = np.where(s > 0, 1 / np.where(s > 0, s, 1.0), INV_S_MAX)
    worst = np.zeros(np.shape(u))
    for a0, a1 in ((r0, r1), (r1, r0)):
        A = (u - ts * v) * a1 - (v - ts * u) * a0
        num = (ts * u - v) * a0 + (1 - ts) * w * a0 * a1 * inv_s
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.abs(np.where(A != 0, num / np.where(A != 0, A, 1.0), 0.0))
        worst = np.maximum(worst, np.nanmax(np.minimum(slope, 1e6), axis=0))
    steps = np.ceil(worst).astype(np.int64) + 1
    if n is not None:
        steps = np.minimum(steps, np.asarray(n, np.float64).astype(np.int64) + 1)
    return steps


def log_reach(n, abs_lrr, max_step: int, xp=np):
    """``log R^(max_step+1)``, ``R = (n+1) max(rho/rho_c, rho_c/rho)``: what ``max_step + 1`` ratios can multiply."""
    return (max_step + 1) * (xp.log(n + 1.0) + abs_lrr)


def linear_safe(n, r0, r1, max_step: int):
    """Where the linear-space neighbour ratios lose nothing that matters (numpy, elementwise).

    A neighbour pmf is reached from ``b_c(k_c)`` by at most ``max_step + 1`` ratios, each at
    most ``R = (n+1) max(r0/r1, r1/r0)``; a start that underflows (``< e^-708``) hides
    neighbours below ``e^-708 R^(max_step+1)``. Safe means that is below ``e^-408``.
    """
    lrr = np.abs(np.log(np.maximum(r0, R_FLOOR)) - np.log(np.maximum(r1, R_FLOOR)))
    return log_reach(np.asarray(n, np.float64), lrr, max_step, np) <= 300.0


# ----------------------------------------------------------------------------------------
# Search plans, buckets, chunked evaluation.


def plan_epsilon(u, v, w, r0, r1, n, delta) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Static plan inputs of a search, eagerly, for flat numpy arrays of valid points.

    Returns ``(window, c_lo, max_step)`` per point: the window (a power of two, at least
    :data:`MIN_SEARCH_WINDOW`) and its first count leave out at most ``TRUNC_FRACTION * delta``
    of the others' binomial mass (Chernoff), and ``max_step`` bounds the threshold step
    ``|k_{c'+1} - k_{c'}|`` over every ``eps`` in ``[0, log max(u/v, v/u)]`` the search can visit. Group points into
    programs with :func:`bucket_plans`; :func:`jaxshuffle.search.epsilon` does.
    """
    u, v, w, r0, r1, n, delta = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (u, v, w, r0, r1, n, delta)))
    r_sum = np.maximum(r0, R_FLOOR) + np.maximum(r1, R_FLOOR)
    L, _ = plan_windows(n, r_sum, TRUNC_FRACTION * delta)
    L = np.maximum(L, MIN_SEARCH_WINDOW)
    c_lo = window_start(n, r_sum, L)
    M = np.zeros(L.shape, dtype=np.int64)
    flat = [x.ravel() for x in (u, v, w, r0, r1, n)]
    for s in range(0, M.size, 65536):  # bounds the (33, block) temporaries of the estimate
        u_, v_, w_, r0_, r1_, n_ = (x[s:s + 65536] for x in flat)
        lo, hi = np.minimum(u_, v_), np.maximum(u_, v_)
        with np.errstate(divide="ignore", invalid="ignore"):
            t_max = np.where(lo > 0, hi / np.where(lo > 0, lo, 1.0), np.exp(EPS_CAP))
        M.ravel()[s:s + 65536] = max_step_estimate(u_, v_, w_, r0_, r1_, np.ones_like(t_max),
                                                    np.maximum(t_max, 1.0), n_)
    return L, c_lo, M


def bucket_plans(L: np.ndarray, M: np.ndarray, r0: np.ndarray, r1: np.ndarray, n: np.ndarray) -> dict[Plan, np.ndarray]:
    """Group flat point indices by their static :class:`Plan`.

    Points sharing a window length and symmetry (``r0 == r1``) share one program, with the
    largest max_step among them (rounded up to a power of two): few compiles, little
    waste; points where :func:`linear_safe` fails for that max_step (extreme ``r0/r1``)
    get a log-space program of their own.
    """
    groups: dict[tuple[int, bool], list[int]] = {}
    for i, key in enumerate(zip(L.tolist(), (r0 == r1).tolist())):
        groups.setdefault(key, []).append(i)
    plans = {}
    for (l, s), members in groups.items():
        ix = np.asarray(members)
        m = int(2 ** np.ceil(np.log2(max(int(M[ix].max()), 1))))
        lin = linear_safe(n[ix], r0[ix], r1[ix], m)
        for flag in (True, False):
            if (lin == flag).any():
                plans[Plan(l, min(l, MIN_BLOCK), m, bool(s), flag)] = ix[lin == flag]
    return plans


def plan_for(pair: TwoCountPair, n, delta) -> Plan:
    """One :class:`Plan` covering every point of ``(pair, n, delta)``: for ``epsilon(..., plan=plan)`` inside ``jit``.

    Plan once from concrete values (say the range a tuning loop will visit, as a batch), then
    call :func:`jaxshuffle.epsilon` with ``plan=`` inside ``jit``/``grad``. Points that move
    outside what the plan covers stay certified: the window's dropped mass is recomputed from
    the actual point and a larger threshold step makes the point claim nothing.

    Args:
      pair: the :class:`~jaxshuffle.pair.TwoCountPair` (any batch shape, concrete values).
      n: number of users, a finite integer >= 1, broadcast against the pair and ``delta``.
      delta: target delta in (0, 1).

    Returns:
      The plan, a :class:`Plan`: static shapes (window, block, threshold step, symmetry, linear or log space)
        for ``epsilon(pair, n, delta, plan=plan)``; a plan, not a bound.

    Raises:
      ValueError: naming the parameter (``n``, ``delta``, a pair field) for invalid input, or ``n``
        for a window beyond what the engine holds (with the largest supported ``n``).
      TypeError: naming ``pair``, for anything but a :class:`~jaxshuffle.pair.TwoCountPair`.
    """
    flat, values, _ = prepare_batch(pair, n, delta, "delta", "plan_for")
    u, v, w, r0, r1, n_, d_ = values
    check_batch((u, v, w, r0, r1), n_, {"delta": (d_, lambda d: (d > 0) & (d < 1), "must lie in (0, 1)")})
    L, _, M = plan_epsilon(u, v, w, r0, r1, n_, d_)
    window = int(L.max())
    m = int(2 ** np.ceil(np.log2(max(int(M.max()), 1))))
    linear = bool(linear_safe(n_, r0, r1, m).all())
    return Plan(window, min(window, MIN_BLOCK), m, bool(np.all(r0 == r1)), linear)


def memory_budget(memory: float | None = None) -> float:
    """Bytes a batched call may hold: ``memory``, or :data:`DEFAULT_MEMORY_BYTES` (read at call time)."""
    return float(DEFAULT_MEMORY_BYTES if memory is None else memory)


def chunk_lanes(plan: Plan, memory: float | None = None) -> int:
    """Largest power-of-two batch of one plan's program that fits the memory budget."""
    lanes = memory_budget(memory) / (plan.window * BYTES_PER_COUNT * (1 if plan.symmetric else 2))
    return int(2 ** max(0, math.floor(math.log2(max(lanes, 1.0)))))


# A chunk of a bucket is padded to at least this many window counts (lanes x window): a few
# lanes of a small window cost microseconds, and one padded shape serves 1, 2, 4, ... points. 2^14:
# windows up to 4096 get at least 4 lanes, so the two-count rules' 1 to 4 searches of a calibration
# probe share one program (calibrate_n's ten rounds at n ~ 1e5 compiled two at window 4096); wider
# windows keep fewer lanes (4 lanes of window 131072 evaluate 3x longer than one).
MIN_CHUNK_COUNTS = 16384


def padded_lanes(plan: Plan, points: int, memory: float | None = None) -> int:
    """Lanes of the program that evaluates ``points`` points of one chunk: a power of two, at least
    ``MIN_CHUNK_COUNTS / window`` (within :func:`chunk_lanes`)."""
    floor = min(max(1, MIN_CHUNK_COUNTS // plan.window), chunk_lanes(plan, memory))
    return max(int(2 ** np.ceil(np.log2(max(points, 1)))), floor)


def run_buckets(kernel, buckets: dict[Plan, np.ndarray], flat_args: list, shape: tuple[int, ...], *,
                memory: float | None = None):
    """Run ``kernel(plan, *args_subset)`` per bucket; its NamedTuple comes back with arrays of ``shape``.

    Each bucket is evaluated in chunks of at most :func:`chunk_lanes` points, each padded to
    :func:`padded_lanes` (repeating its first point), so a few compiled programs serve every call
    and memory stays bounded. When an argument is traced (``grad``/``jvp`` of an eager call), jnp
    gathers and scatters keep the gradients flowing; otherwise numpy does them, so that a call
    compiles no program besides the kernel's.
    """
    traced = any(isinstance(a, jax.core.Tracer) for a in flat_args)
    flat_args = [jnp.asarray(a) if traced else np.asarray(a) for a in flat_args]
    size = math.prod(shape)
    out: dict[str, Any] | None = None
    for plan, ix in buckets.items():
        step = chunk_lanes(plan, memory)
        for s in range(0, ix.size, step):
            part = ix[s:s + step]
            padded = padded_lanes(plan, part.size, memory)
            take = np.concatenate([part, np.repeat(part[:1], padded - part.size)])
            res = kernel(plan, *(a[jnp.asarray(take) if traced else take] for a in flat_args))
            if out is None:
                out = {k: (jnp if traced else np).zeros((size,), np.dtype(v.dtype)) for k, v in res._asdict().items()}
            for k, val in res._asdict().items():
                if traced:
                    out[k] = out[k].at[jnp.asarray(part)].set(val[: part.size])
                else:
                    out[k][part] = np.asarray(val)[: part.size]
    filled = cast(dict[str, Any], out)  # set by the first chunk (an empty ``buckets`` has no ``res`` either)
    return type(res)(**{k: v.reshape(shape) if traced else jnp.asarray(v.reshape(shape)) for k, v in filled.items()})


def prepare_batch(pair: TwoCountPair, n, other, other_name: str, what: str):
    """Broadcast pair, n and ``other`` (eps or delta); return flat jnp arrays, their numpy values, shape."""
    require_x64()
    if not isinstance(pair, TwoCountPair):
        raise TypeError(f"pair: must be a TwoCountPair (from jaxshuffle.stronger_clone_pair, vr_pair, ...), "
                        f"got {type(pair).__name__}")
    n, other = f64(n), f64(other)
    shape = broadcast_shapes_or_raise(pair=np.empty(pair.shape), n=n, **{other_name: other})
    values = [np.broadcast_to(concrete(x, what), shape).ravel() for x in (*pair.arrays(), n, other)]
    if not any(isinstance(x, jax.core.Tracer) for x in (*pair.arrays(), n, other)):
        return values, values, shape  # no eager jnp programs for concrete input
    flat = [jnp.broadcast_to(x, shape).ravel() for x in (*pair.arrays(), n, other)]
    return flat, values, shape


def check_batch(pair_np, n_np, extra: dict) -> None:
    """Eager validation of flat pair fields, ``n`` and extra named arrays (ValueError naming the first bad one)."""
    check_fields(*pair_np)
    check((n_np >= 1) & (n_np == np.floor(n_np)) & np.isfinite(n_np), "n", "must be a finite integer >= 1",
          value=n_np)
    for name, (x, cond, msg) in extra.items():
        check(cond(x), name, msg, value=x)
