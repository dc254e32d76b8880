"""Scheduling: window buckets over the whole grid (merged when a compile costs more), chunks, and the runner.

A chunk is one bucket's plan and a job range; :class:`Runner` turns it into arrays with one compiled
program per bucket, sharded over a 1-D mesh of local devices (results identical to one device).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from jaxshuffle.sweeps.store import MAX_ITER

if TYPE_CHECKING:
    import jax

    from jaxshuffle.sweeps.grids import Bucket, ChunkPlan

# ----------------------------------------------------------------------------------------
# Planning: window buckets over the whole grid, merged when a compile costs more, and chunks

# Rough cost model: one search costs about 2e-7 s per window count on one CPU device
# (benchmarks/sweep.py: ~2 divergence evaluations of ~0.1 us per count; GPU/TPU figures are
# guesses, no accelerator measured yet); one program compiles in ~5 s.
_COST_PER_COUNT = {"cpu": 2e-7, "gpu": 2e-8, "tpu": 2e-8}
_COMPILE_S = 5.0
_CHUNK_TARGET_S = 20.0  # a chunk should finish within this (durability, progress)
_MAX_CHUNK = 4096
_MIN_CHUNK = 32


def plan_jobs(jobs: np.ndarray, merge: bool, platform_name: str) -> list:
    """Window plan per job (search.plan_epsilon, as search.epsilon plans it), bucketed.

    Returns ``[(Plan, job ids, c_lo)]``, symmetric buckets first, by window.
    """
    from jaxshuffle.engine.two_count.plan import R_FLOOR, bucket_plans, plan_epsilon

    u, v, w, r0, r1, n, d = jobs.T
    L, c_lo, M = plan_epsilon(u, v, w, r0, r1, n, d)
    sym = r0 == r1
    if merge:
        L = _merge_windows(L, sym, _COST_PER_COUNT.get(platform_name, 1e-6))
        # Recentre each window of a merged job (plan_windows' rule for the larger length).
        N = n - 1.0
        pi = np.clip(np.maximum(r0, R_FLOOR) + np.maximum(r1, R_FLOOR), 2 * R_FLOOR, 1.0)
        c_lo = np.clip(np.floor(N * pi) - L // 2, 0, np.maximum(n - L, 0))
    buckets = bucket_plans(L, M, r0, r1, n)
    order = sorted(buckets, key=lambda pl: (not pl.symmetric, pl.window))
    return [(pl, buckets[pl], c_lo[buckets[pl]]) for pl in order]


def _merge_windows(L: np.ndarray, sym: np.ndarray, cost: float) -> np.ndarray:
    """Group window sizes (per symmetry) to minimise compiles + compute; each group takes its largest window.

    Model: one compile costs ``_COMPILE_S``; a search over a window of length L costs ``cost * L``.
    Optimal contiguous partition of the sorted sizes by dynamic programming.
    """
    L = L.copy()
    for s in (True, False):
        sel = sym == s
        if not sel.any():
            continue
        sizes, counts = np.unique(L[sel], return_counts=True)
        S = len(sizes)
        best = np.full(S + 1, np.inf)
        best[0] = 0.0
        cut = np.zeros(S + 1, dtype=np.int64)
        for j in range(1, S + 1):  # groups sizes[i:j] use window sizes[j-1]
            for i in range(j):
                c = best[i] + _COMPILE_S + cost * counts[i:j].sum() * sizes[j - 1]
                if c < best[j]:
                    best[j], cut[j] = c, i
        j = S
        while j > 0:
            i = cut[j]
            L[sel & np.isin(L, sizes[i:j])] = sizes[j - 1]
            j = i
    return L


def _chunk_size(plan, n_jobs: int, ndev: int, platform_name: str, memory: float, fixed: int | None) -> int:
    from jaxshuffle.sweeps.jobs import MECHANISM_CHUNK, MechanismPlan, RoundsPlan
    from jaxshuffle.sweeps.sampled import SampledPlan

    if isinstance(plan, RoundsPlan):  # the whole bucket: one composed_epsilon call (its grid depends on max T)
        return max(int(n_jobs), 1)
    if isinstance(plan, (MechanismPlan, SampledPlan)):  # one device, a fixed count (the engine plans its own window)
        return int(fixed or min(MECHANISM_CHUNK, 2 ** math.ceil(math.log2(max(n_jobs, 1)))))
    if fixed:
        size = int(fixed)
    else:
        per_job = 8.0 * plan.window * (2 * plan.max_step + 16) * 12 * (1 if plan.symmetric else 2)
        by_mem = memory * ndev / per_job
        by_time = _CHUNK_TARGET_S * ndev / (plan.window * _COST_PER_COUNT.get(platform_name, 1e-6))
        size = int(2 ** math.floor(math.log2(max(min(by_mem, by_time, _MAX_CHUNK), 1.0))))
        # Small buckets are padded to at least _MIN_CHUNK lanes (cheap for the small windows where it
        # applies) so that successive small sweeps in one process reuse the same compiled shapes.
        size = min(size, max(int(2 ** math.ceil(math.log2(max(n_jobs, 1)))), _MIN_CHUNK))
    size = max(size, ndev)
    return int(math.ceil(size / ndev) * ndev)


def chunk_layout(buckets: Sequence[Bucket], ndev: int, platform_name: str, memory: float,
                 fixed: int | None) -> list[dict]:
    """Global chunk list: each entry {bucket, jobs (ids), size}."""
    chunks = []
    for bi, (plan, ids, _) in enumerate(buckets):
        size = _chunk_size(plan, len(ids), ndev, platform_name, memory, fixed)
        for s in range(0, len(ids), size):
            chunks.append({"bucket": bi, "start": s, "stop": min(s + size, len(ids)), "size": size})
    return chunks


# ----------------------------------------------------------------------------------------
# Running chunks (one compiled program per bucket; sharded over a 1-D device mesh)


_SHARDED_KERNELS: dict = {}  # (plan, rtol, device ids) -> jitted shard_map program (reused across sweeps)
_PROGRAMS_RUN: set = set()  # (plan, chunk size, rtol, device ids) run in this process (the first run compiles)


def _single_device_kernel(plan, rtol):
    from jaxshuffle.engine.two_count.search import epsilon_with_plan

    def run(u, v, w, r0, r1, n, delta, c_lo):  # epsilon_with_plan is jitted: one program per (plan, shape)
        res = epsilon_with_plan((u, v, w, r0, r1), n, delta, c_lo, plan, rtol=rtol, max_iter=MAX_ITER)
        return res.lower, res.upper, res.status, res.iterations

    return run


def _sharded_kernel(plan, rtol, mesh):
    import jax

    key = (plan, rtol, tuple(d.id for d in mesh.devices.flat))
    if key not in _SHARDED_KERNELS:
        spec = jax.sharding.PartitionSpec("points")
        f = _single_device_kernel(plan, rtol)
        _SHARDED_KERNELS[key] = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=(spec,) * 8, out_specs=(spec,) * 4,
                                                      check_vma=False))
    return _SHARDED_KERNELS[key]


class Runner:
    """Runs one chunk of searches: jitted per (plan, chunk size); sharded over a 1-D mesh when ndev > 1."""

    def __init__(self, rtol: float, devices: Sequence[jax.Device]):
        import jax

        self.rtol = rtol
        self.devices = devices
        self.mesh = jax.sharding.Mesh(np.asarray(devices), ("points",)) if len(devices) > 1 else None
        self.compiled: set = set()  # (plan, size) compiled by this runner
        self._ids = tuple(d.id for d in devices)

    def is_compiled(self, plan: ChunkPlan, size: int) -> bool:
        return (plan, size, self.rtol, self._ids) in _PROGRAMS_RUN

    def run(self, plan: ChunkPlan, jobs: np.ndarray, c_lo: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
        """``(lower, upper, status, iterations)`` of a chunk; for a mechanism bucket
        (:func:`~jaxshuffle.sweeps.jobs.evaluate_mechanisms`, first device) the fourth array is
        the status of its lower bound; a rounds bucket (:func:`~jaxshuffle.sweeps.jobs.evaluate_rounds`,
        first device) adds a fifth, its composed-epsilon columns, and a sampled bucket
        (:func:`~jaxshuffle.sweeps.sampled.evaluate_sampled`, first device) its report columns."""
        import jax

        from jaxshuffle.sweeps.jobs import MechanismPlan, RoundsPlan, evaluate_mechanisms, evaluate_rounds
        from jaxshuffle.sweeps.sampled import SampledPlan, evaluate_sampled

        if isinstance(plan, RoundsPlan):
            # on the default device no context: a jax.default_device context is part of jit's cache key, so
            # the programs compiled here then serve a direct composed_epsilon call too (and the other way round)
            first = self.devices[0]
            with contextlib.nullcontext() if first == jax.devices()[0] else jax.default_device(first):
                out = evaluate_rounds(plan, jobs, size)
            self.compiled.add((plan, size))
            _PROGRAMS_RUN.add((plan, size, self.rtol, self._ids))
            return out
        if isinstance(plan, (MechanismPlan, SampledPlan)):
            evaluate: Callable = evaluate_mechanisms if isinstance(plan, MechanismPlan) else evaluate_sampled
            with jax.default_device(self.devices[0]):
                out = evaluate(plan, jobs, size, self.rtol)
            self.compiled.add((plan, size))
            _PROGRAMS_RUN.add((plan, size, self.rtol, self._ids))
            return out
        m = len(jobs)
        nd = len(self.devices)
        size = -(-size // nd) * nd  # a resumed layout may come from another device count
        pad = np.concatenate([np.arange(m), np.zeros(size - m, dtype=np.int64)])
        cols = [jobs[pad, i] for i in range(7)] + [c_lo[pad]]
        if self.mesh is not None:
            sh = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec("points"))
            cols = [jax.device_put(c, sh) for c in cols]
            kernel = _sharded_kernel(plan, self.rtol, self.mesh)
        else:
            cols = [jax.device_put(c, self.devices[0]) for c in cols]
            kernel = _single_device_kernel(plan, self.rtol)
        out = jax.block_until_ready(kernel(*cols))
        lower, upper, status, iters = (np.asarray(x)[:m] for x in out)
        if not self.is_compiled(plan, size):
            self.compiled.add((plan, size))
            _PROGRAMS_RUN.add((plan, size, self.rtol, self._ids))
        return lower, upper, status.astype(np.int8), iters.astype(np.int32)
