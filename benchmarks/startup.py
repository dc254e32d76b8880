"""First answers: wall time of fresh processes with an empty and with a warm compilation cache.

Each scenario runs as its own Python process (``python -c ...``), so the time includes the
interpreter, the import, tracing, compilation (or loading from the persistent cache) and the
evaluation, as a user waits for it. For each scenario: a run with an empty cache directory,
then ``--warm`` runs with the cache that run filled (median reported), and the number of XLA
programs the process compiled and loaded from the cache (JAX's compile log).

Scenarios: ``import jaxshuffle``; the README's three-line example; ``jaxshuffle epsilon`` for one
point; ``jaxshuffle calibrate``; ``jaxshuffle compare``; the 12 Table 5 cells in one call.

Usage: python benchmarks/startup.py [--warm 3] [--only NAME]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

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
# Targets of the issue (2-core CPU, warm cache), seconds.
TARGETS = {"cli epsilon (1 point)": 2.0, "table 5 (12 cells)": 5.0, "cli calibrate": 5.0, "cli compare": 10.0}


def run_once(argv: list[str], cache: str, cwd: str) -> tuple[float, int, int, int]:
    env = {**os.environ, "JAXSHUFFLE_CACHE": cache, "JAX_LOG_COMPILES": "1", "JAX_PLATFORMS": "cpu"}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    compiled = sum(line.startswith("Compiling ") for line in res.stderr.splitlines())
    hits = sum(line.startswith("Persistent compilation cache hit") for line in res.stderr.splitlines())
    return wall, compiled, hits, res.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm", type=int, default=3, help="warm runs per scenario (median reported)")
    ap.add_argument("--only", action="append", help="run only these scenarios (by name)")
    args = ap.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores")
    print(f"{'scenario':<24} {'empty cache s':>13} {'warm s (median)':>16} {'programs':>9} {'cache hits':>10} "
          f"{'target warm s':>13}")
    for name, argv in SCENARIOS.items():
        if args.only and name not in args.only:
            continue
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as cwd:
            cold, programs, _, rc = run_once(argv, cache, cwd)
            warm = [run_once(argv, cache, cwd) for _ in range(args.warm)]
        if rc or any(w[3] for w in warm):
            print(f"{name:<24} failed (exit {rc})")
            continue
        med = statistics.median(w[0] for w in warm)
        target = TARGETS.get(name)
        print(f"{name:<24} {cold:>13.2f} {med:>16.2f} {programs:>9d} {warm[0][2]:>10d} "
              f"{'' if target is None else f'{target:.0f}':>13}")


if __name__ == "__main__":
    main()
