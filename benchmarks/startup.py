"""First answers: wall time of fresh processes with an empty and with a warm compilation cache.

Each scenario runs as its own Python process (``python -c ...``), so the time includes the
interpreter, the import, tracing, compilation (or loading from the persistent cache) and the
evaluation, as a user waits for it. For each scenario: a run with an empty cache directory,
then ``--warm`` runs with the cache that run filled (median reported), and the number of XLA
programs the process compiled and loaded from the cache (JAX's compile log).

Scenarios: ``import jaxshuffle``; the README's three-line example; ``jaxshuffle epsilon`` for one
point; ``jaxshuffle calibrate``; ``jaxshuffle compare``; the 12 Table 5 cells in one call; and
``calibrate`` and ``compare`` with ``--upper-from worst-case``, the work the filed code did (it had no
k-RR blanket bound), against the filed code's plain command.

``--baseline REV`` runs the same scenarios, interleaved, with the package as it was at git revision
``REV`` (a temporary worktree on ``PYTHONPATH``; its home and cache folders are fresh temporary ones,
so its own compilation cache starts empty too). Issue 19 asked for half of the empty-cache times it
measured; ``--baseline 9e453ee`` (the code it was filed against) measures both on this machine, in
this run, and prints the ratio. ``--cold N`` takes the median of N empty-cache runs.

Usage: python benchmarks/startup.py [--warm 3] [--cold 1] [--only NAME] [--baseline REV]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CLI = "import sys; from jaxshuffle.cli import main; sys.exit(main(sys.argv[1:]))"
SCENARIOS = {
    "import": ["-c", "import jaxshuffle"],
    "readme example": ["-c", "import jaxshuffle as js; "
                       "print(js.epsilon(js.stronger_clone_pair(eps0=1.0), n=10_000, delta=1e-6).upper)"],
    "cli epsilon (1 point)": ["-c", CLI, "epsilon", "--randomizer", "general", "--eps0", "1", "--n", "1e4",
                              "--delta", "1e-6"],
    "cli calibrate": ["-c", CLI, "calibrate", "--randomizer", "grr", "--k", "10", "--target", "0.1", "--n", "1e5",
                      "--delta", "1e-6"],
    "cli compare": ["-c", CLI, "compare", "--randomizer", "grr", "--k", "10", "--eps0", "1", "--n", "1e4",
                    "--delta", "1e-6"],
    "table 5 (12 cells)": ["-c", "import numpy as np, jaxshuffle as js; e = np.array([1., 3., 5., 7.])[:, None]; "
                           "n = np.array([1e4, 1e6, 1e8])[None, :]; "
                           "print(js.epsilon(js.stronger_clone_pair(e), n, 0.01 / n).upper)"],
}
# The same commands restricted to the work the filed code did (the two-count bounds, no k-RR blanket
# bound: `--upper-from worst-case`); their baseline is the filed code's plain command.
SAME_WORK = {"cli calibrate, worst-case": "cli calibrate", "cli compare, worst-case": "cli compare"}
for _name, _plain in SAME_WORK.items():
    SCENARIOS[_name] = SCENARIOS[_plain] + ["--upper-from", "worst-case"]
# Targets of the issue (2-core CPU, warm cache), seconds.
TARGETS = {"cli epsilon (1 point)": 2.0, "table 5 (12 cells)": 5.0, "cli calibrate": 5.0, "cli compare": 10.0}


def run_once(argv: list[str], cache: str, cwd: str, base: str | None = None) -> tuple[float, int, int, int]:
    env = {**os.environ, "JAXSHUFFLE_CACHE": cache, "JAX_LOG_COMPILES": "1", "JAX_PLATFORMS": "cpu"}
    if base is not None:  # the old code, with its own (empty) home: its cache lived under ~/.cache
        env.update(PYTHONPATH=base, HOME=cache, XDG_CACHE_HOME=cache)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    compiled = sum(line.startswith("Compiling ") for line in res.stderr.splitlines())
    hits = sum(line.startswith("Persistent compilation cache hit") for line in res.stderr.splitlines())
    return wall, compiled, hits, res.returncode


@contextlib.contextmanager
def worktree(rev: str | None):
    """A temporary git worktree of ``rev`` (None: nothing)."""
    if rev is None:
        yield None
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "baseline")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", path, rev], check=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", path], check=False)


def measure(argv: list[str], cold_runs: int, warm_runs: int, base: str | None):
    """(median empty-cache wall, median warm wall, programs compiled cold, cache hits warm, failed)."""
    colds, warms, programs, hits, failed = [], [], 0, 0, False
    for i in range(cold_runs):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as cwd:
            wall, programs, _, rc = run_once(argv, cache, cwd, base)
            colds.append(wall)
            failed |= rc != 0
            if i == 0:
                for _ in range(warm_runs):
                    w = run_once(argv, cache, cwd, base)
                    warms.append(w[0])
                    hits = w[2]
                    failed |= w[3] != 0
    return statistics.median(colds), statistics.median(warms) if warms else float("nan"), programs, hits, failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm", type=int, default=3, help="warm runs per scenario (median reported)")
    ap.add_argument("--cold", type=int, default=1, help="empty-cache runs per scenario (median reported)")
    ap.add_argument("--only", action="append", help="run only these scenarios (by name)")
    ap.add_argument("--baseline", help="git revision to compare with (same scenarios, same machine, this run)")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores")
    head = (f"{'scenario':<26} {'empty cache s':>13} {'warm s (median)':>16} {'programs':>9} {'cache hits':>10} "
            f"{'target warm s':>13}")
    if args.baseline:
        head += f" {'baseline empty s':>16} {'baseline warm s':>15} {'empty/baseline':>14}"
    print(head)
    with worktree(args.baseline) as base:
        for name, argv in SCENARIOS.items():
            if args.only and name not in args.only:
                continue
            cold, warm, programs, hits, failed = measure(argv, args.cold, args.warm, None)
            if failed:
                print(f"{name:<26} failed")
                continue
            target = TARGETS.get(name)
            line = (f"{name:<26} {cold:>13.2f} {warm:>16.2f} {programs:>9d} {hits:>10d} "
                    f"{'' if target is None else f'{target:.0f}':>13}")
            if base is not None:
                b_argv = SCENARIOS[SAME_WORK.get(name, name)]
                b_cold, b_warm, *_, b_failed = measure(b_argv, args.cold, args.warm, base)
                line += (f" {'failed':>16}" if b_failed else
                         f" {b_cold:>16.2f} {b_warm:>15.2f} {cold / b_cold:>14.2f}")
            print(line, flush=True)


if __name__ == "__main__":
    main()
