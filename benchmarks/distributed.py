"""Sweeps on a Dask cluster (issue 20): points/s for 1, 2 and 4 workers, overhead per chunk, programs per worker.

On this machine: a ``distributed.LocalCluster`` of W worker processes (one thread each, loopback
only) runs ``jaxshuffle.sweep(..., executor=client)``; W > cores oversubscribes the CPU, so the
points/s there show the cost of contention, not of Dask.

1. Throughput: the general randomizer over ``--points`` log-spaced eps0 at n = ``--n``,
   delta = 0.01/n, ``--chunk-size`` searches per chunk, stored in a fresh directory (the driver
   writes chunk files and CSV rows as a real run does). A first run per cluster compiles (and
   counts the programs each worker compiled); the timed run is the second one. The local run
   (``executor=None``, one device) is the baseline.
2. Overhead per chunk: the same sweep at n = 12 (a chunk evaluates in well under a millisecond)
   with ``--tiny-chunks`` chunks of 4 searches on 1 worker: (wall - worker evaluation) / chunks is
   what a chunk costs beyond its evaluation (serialisation, scheduler round trip, the driver's
   store); the driver's own part (``driver_busy_s``: its loop minus the time it waited on futures)
   is the serial cost that no number of workers removes.
3. Simulated scaling to 100 workers and beyond (:func:`simulate`, a discrete-event model of the
   driver and its window of futures): each worker does one chunk per (evaluation + overhead)
   seconds, the driver handles one per ``driver`` seconds, so throughput approaches
   ``min(W / (eval + overhead), 1 / driver)`` chunks/s, and the driver becomes the bottleneck at
   ``W* = (eval + overhead) / driver`` workers.

Usage: python benchmarks/distributed.py [--n 1e6] [--points 256] [--chunk-size 16] [--workers 1,2,4]
       [--tiny-chunks 128] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

# This file's name would shadow the `distributed` package when run as a script: drop its folder from the path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import numpy as np  # noqa: E402

import jaxshuffle as js  # noqa: E402


def simulate(workers: int, cycle_s: float, driver_s: float, chunks: int = 5000, per_worker: int = 2) -> float:
    """Discrete-event simulation of a sweep on ``workers`` workers; returns chunks per second.

    Each worker runs its chunks one after another (``cycle_s`` each: evaluation + overhead) and
    holds at most ``per_worker`` (ChunkPool's window); the driver handles completions one at a
    time in finishing order (``driver_s`` each: store the chunk, submit the next one to that worker).
    """
    import heapq

    free = [0.0] * workers  # when each worker's queue runs dry
    finish = []  # (finish time, worker)
    submitted = 0
    for w in range(workers):
        for _ in range(per_worker):
            if submitted < chunks:
                free[w] += cycle_s
                heapq.heappush(finish, (free[w], w))
                submitted += 1
    driver_free = 0.0
    while finish:
        t, w = heapq.heappop(finish)
        driver_free = max(driver_free, t) + driver_s
        if submitted < chunks:
            free[w] = max(free[w], driver_free) + cycle_s
            heapq.heappush(finish, (free[w], w))
            submitted += 1
    return chunks / driver_free


def timed_sweep(out: Path, **kw):
    t = time.perf_counter()
    res = js.sweep("general", out=out, quiet=True, overwrite=True, **kw)
    return res, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--points", type=int, default=256)
    ap.add_argument("--chunk-size", type=int, default=16)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--tiny-chunks", type=int, default=128)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    cores = os.cpu_count()
    grid = dict(eps0=np.geomspace(0.5, 5.0, args.points), n=args.n, delta="0.01/n", chunk_size=args.chunk_size)
    tiny = dict(eps0=np.geomspace(0.5, 5.0, 4 * args.tiny_chunks), n=12, delta="1e-3", chunk_size=4)
    chunks = -(-args.points // args.chunk_size)
    print(f"machine: {platform.processor() or platform.machine()}, {cores} cores; grid: {args.points} points of "
          f"'general' at n = {args.n:g}, {chunks} chunks of {args.chunk_size}")
    report: dict = {"cores": cores, "n": args.n, "points": args.points, "chunk_size": args.chunk_size, "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        timed_sweep(tmp / "local", devices=1, **grid)  # compiles
        _, t_local = timed_sweep(tmp / "local2", devices=1, **grid)  # a fresh directory: every chunk runs
        eval_per_chunk = t_local / chunks
        print(f"local (executor=None, 1 device): {args.points / t_local:8.1f} points/s ({eval_per_chunk * 1e3:.1f} ms "
              "per chunk)")
        report["local_points_per_s"] = args.points / t_local
        for w in [int(x) for x in args.workers.split(",")]:
            with LocalCluster(n_workers=w, threads_per_worker=1, processes=True, host="127.0.0.1",
                              dashboard_address=None) as cluster, Client(cluster) as client:
                cold, t_cold = timed_sweep(tmp / f"w{w}-cold", executor=client, **grid)
                res, t = timed_sweep(tmp / f"w{w}", executor=client, **grid)
                assert (tmp / f"w{w}" / "results.csv").read_bytes() == (tmp / "local2" / "results.csv").read_bytes()
                progs = sorted(v["programs_compiled"] for v in cold.meta["executor"]["workers"].values())
                row = {"workers": w, "points_per_s": args.points / t, "cold_s": t_cold, "warm_s": t,
                       "programs_per_worker": progs,
                       "chunks_per_worker": sorted(v["chunks"] for v in res.meta["executor"]["workers"].values())}
                report["runs"].append(row)
                print(f"{w} worker(s): {row['points_per_s']:8.1f} points/s (warm; cold run {t_cold:.1f} s), programs "
                      f"compiled per worker {progs}, chunks per worker {row['chunks_per_worker']}")
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster) as client:
            timed_sweep(tmp / "tiny-cold", executor=client, **tiny)
            res, t = timed_sweep(tmp / "tiny", executor=client, **tiny)
            ev = sum(v["eval_s"] for v in res.meta["executor"]["workers"].values())
            overhead = (t - ev) / args.tiny_chunks
            driver = res.meta["executor"]["driver_busy_s"] / args.tiny_chunks
        print(f"overhead per chunk (1 worker, n = 12, {args.tiny_chunks} chunks): {overhead * 1e3:.1f} ms beyond "
              f"evaluation, of which the driver's own work {driver * 1e3:.1f} ms")
        report.update(overhead_per_chunk_s=overhead, driver_per_chunk_s=driver)

    cycle = eval_per_chunk + overhead
    w_star = cycle / driver
    print(f"simulated scaling (chunk of {args.chunk_size} at n = {args.n:g}: {eval_per_chunk * 1e3:.1f} ms evaluation "
          f"+ {overhead * 1e3:.1f} ms overhead per worker, driver {driver * 1e3:.1f} ms per chunk):")
    sim = []
    for w in (1, 2, 4, 8, 16, 32, 64, 100, 128, 200):
        rate = simulate(w, cycle, driver) * args.chunk_size
        bound = min(w / cycle, 1.0 / driver) * args.chunk_size
        sim.append({"workers": w, "points_per_s": rate, "model_points_per_s": bound})
        print(f"  {w:4d} workers: {rate:9.1f} points/s simulated, {bound:9.1f} by min(W / cycle, 1 / driver)"
              + ("  (driver-bound)" if w > w_star else ""))
    print(f"the driver becomes the bottleneck at about {w_star:.0f} workers with chunks of {args.chunk_size}; "
          f"chunks of 1024 searches would move it to about {w_star * 1024 / args.chunk_size:.0f} workers "
          "(if the driver's cost per chunk stays about the same)")
    report.update(simulated=sim, driver_bottleneck_workers=w_star)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
