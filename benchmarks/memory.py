"""Peak memory of large batches: each call in a fresh process, its peak RSS from the kernel.

Every scenario runs as its own ``python -c`` process and reports ``ru_maxrss`` (the kernel's peak
resident set size of that process, import and compilation included) and the wall time. The
batch entry points chunk their points to a memory budget (``memory=`` bytes per call, default
:data:`jaxshuffle.plan.DEFAULT_MEMORY_BYTES`); the comparison row runs the same points in one
chunk (``memory=1e12``), which is what a call without chunking allocates.

Scenarios:

* ``js.epsilon`` on 100,000 points at n = 1e6 (eps0 log-spaced in [0.1, 5], delta = 1e-6),
  default budget (target of the issue: peak below 2 GiB);
* the same with ``memory=256 MiB``;
* 2,000 of those points in one chunk (``memory=1e12``), and its RSS per point;
* ``js.epsilon`` at n = 1e15 and n = 1e20: the clear message and the time to it (target < 10 s).

Usage: python benchmarks/memory.py [--points 100000]
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

PEAK = ("import resource, sys; "
        "print('PEAK_KIB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")


def batch(points: int, memory: str) -> str:
    return ("import numpy as np, jaxshuffle as js; "
            f"e = np.geomspace(0.1, 5.0, {points}); "
            f"r = js.epsilon(js.stronger_clone_pair(e), 1e6, 1e-6, memory={memory}); "
            "s = np.asarray(r.status); print('converged', int((s == js.Status.CONVERGED).sum()), 'of', s.size); "
            + PEAK)


def too_large(n: str) -> str:
    return ("import jaxshuffle as js\n"
            "try:\n"
            f"    js.epsilon(js.stronger_clone_pair(1.0), {n}, 1e-6)\n"
            "except ValueError as err:\n"
            "    print('message:', str(err)[:160])\n"
            + PEAK.replace("; ", "\n"))


def run(code: str) -> tuple[float, float, str]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if res.returncode:
        raise SystemExit(res.stderr[-2000:])
    kib = [int(line.split()[1]) for line in res.stderr.splitlines() if line.startswith("PEAK_KIB")][0]
    return wall, kib / 2 ** 20, res.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100_000)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'scenario':<48} {'wall s':>8} {'peak GiB':>9}  output")
    n1 = min(2000, args.points)
    rows = [
        (f"epsilon, {args.points:,} points, n=1e6, default budget", batch(args.points, "None")),
        (f"epsilon, {args.points:,} points, n=1e6, memory=256 MiB", batch(args.points, "2**28")),
        (f"epsilon, {n1:,} points, n=1e6, one chunk (unchunked)", batch(n1, "1e12")),
        ("epsilon, n=1e15", too_large("1e15")),
        ("epsilon, n=1e20", too_large("1e20")),
        ("import jaxshuffle only", "import jaxshuffle; " + PEAK),
    ]
    peaks = {}
    for name, code in rows:
        wall, gib, out = run(code)
        peaks[name] = gib
        print(f"{name:<48} {wall:8.1f} {gib:9.2f}  {out}")
    base = peaks["import jaxshuffle only"]
    one = peaks[rows[2][0]]
    print(f"unchunked: about {(one - base) * 2 ** 30 / n1 / 1e6:.2f} MB per point above the import; "
          f"{args.points:,} points unchunked would need about {(one - base) * args.points / n1:.1f} GiB")
    print(f"target: peak below 2 GiB for {args.points:,} points -> "
          f"{'met' if peaks[rows[0][0]] < 2 else 'NOT met'} ({peaks[rows[0][0]]:.2f} GiB)")


if __name__ == "__main__":
    main()
