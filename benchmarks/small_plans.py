"""Small blanket plans, cold: compiled programs and seconds of three workloads that meet many of them.

Each workload runs in a fresh process with an empty cache folder (``JAXSHUFFLE_CACHE``: no exported
program, no XLA compilation cache), as a first-time user would:

- ``tune-rule``: ``tune`` of one k-RR query (k = 10, n = 2000, 20 rounds, target (1, 1e-6), no optimiser
  steps, blanket_points=16): the T-round rule probed at a few eps0, each probe a one-round blanket bound;
- ``tune-3``: ``tune`` of k-RR with k = 2, 10, 100 at n = 1e4 (target (1, 1e-6), 40 optimiser steps), the
  small size of notebook 07;
- ``epsilon-loop``: ``js.amplify`` of k-RR (k = 10, n = 1e4, delta = 1e-6) at eight eps0 from 0.5 to 4, one
  call each, as a user's loop;
- ``front``: ``pareto_front`` of ``tune-3``'s queries at targets 0.5 and 2 (40 steps each), notebook 07's
  second half: many worst-case round PLDs at nearby eps0 beside the blanket bounds.

Prints per workload the seconds, the number of engine programs the process ran (exported programs it
built or loaded), the round-PLD histogram programs it compiled ("hist.") and the answers. With
``--baseline DIR`` (another checkout, e.g. a ``git worktree`` of an
earlier commit) every workload also runs on that code in the same run, and the answers of both are
printed side by side (a plan moves a value only within its certified band).

Usage: python3 benchmarks/small_plans.py [--baseline DIR] [--only NAME ...]
       [--out benchmarks/results/small_plans_cpu.txt]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

WORKLOADS = {
    "tune-rule": """
r = tune([query("grr", n=2000, k=10, count=20)], None, 1.0, 1e-6, steps=0, rtol=2e-3, blanket_points=16)
answer = [float(r.eps0[0]), float(r.upper)]
""",
    "tune-3": """
r = js.tune([js.query("grr", n=10_000, k=k) for k in (2, 10, 100)], None, target_eps=1.0, delta=1e-6, steps=40)
answer = [float(x) for x in r.eps0] + [float(r.upper)]
""",
    "epsilon-loop": """
answer = [float(js.amplify(js.randomizers.grr(e, 10), 10_000, 1e-6).upper) for e in np.geomspace(0.5, 4.0, 8)]
""",
    "front": """
from jaxshuffle.accountant import pareto_front
f = pareto_front([js.query("grr", n=10_000, k=k) for k in (2, 10, 100)], None, [0.5, 2.0], 1e-6, steps=40)
answer = [float(x) for x in f.upper] + [float(x) for x in f.utility]
""",
}

CHILD = """
import json, sys, time
import numpy as np
t = time.perf_counter()
import jaxshuffle as js
from jaxshuffle import _programs
from jaxshuffle.accountant.tune import query, tune
{body}
from jaxshuffle.pld import two_count
print(json.dumps(dict(seconds=time.perf_counter() - t, programs=len(_programs._LOADED),
                      histograms=two_count._histograms._cache_size(), answer=answer)))
"""


def commit(folder: str) -> str:
    """The checkout's commit (with ``+changes`` where its tracked files differ from it), or ``?``."""
    git = ["git", "-C", folder]
    head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode:
        return "?"
    dirty = subprocess.run(git + ["diff", "--quiet", "HEAD"]).returncode
    return head.stdout.strip() + ("+changes" if dirty else "")


def run(name: str, code: str | None) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, JAXSHUFFLE_CACHE=os.path.join(folder, "cache"))
        if code:
            env["PYTHONPATH"] = code
        # from the temporary folder: `python -c` puts the working directory first on sys.path, where a
        # checkout's own package would shadow the baseline's
        out = subprocess.run([sys.executable, "-c", CHILD.format(body=WORKLOADS[name])], env=env, check=True,
                             capture_output=True, text=True, cwd=folder)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cost(result: dict) -> str:
    return f"{result['seconds']:6.1f} s, {result['programs']:3d} programs, {result['histograms']:3d} hist."


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default=None, help="a checkout whose workloads run beside this one's")
    ap.add_argument("--only", default=None, nargs="+", choices=sorted(WORKLOADS), help="these workloads")
    ap.add_argument("--out", default=None, help="also write the report here")
    args = ap.parse_args()
    lines = [f"small blanket plans, cold (fresh process, empty cache each), {platform.machine()}, {os.cpu_count()} "
             f"cores, load {os.getloadavg()[0]:.1f} at the start", "python3 benchmarks/small_plans.py"
             + (" --baseline <checkout>" if args.baseline else "")
             + (" --only " + " ".join(args.only) if args.only else ""),
             f"this code: {commit(os.path.dirname(os.path.abspath(__file__)))}"
             + (f"; baseline: {commit(args.baseline)}" if args.baseline else "")]
    print(*lines, sep="\n", flush=True)
    for name in args.only or list(WORKLOADS):
        now = run(name, None)
        line = f"{name:13s} this code: {_cost(now)}"
        if args.baseline:
            base = run(name, args.baseline)
            line += f" | baseline: {_cost(base)} | {base['seconds'] / now['seconds']:.2f}x faster"
        lines.append(line)
        lines.append(f"{'':13s} answers: {', '.join(f'{x:.6g}' for x in now['answer'])}")
        if args.baseline:
            lines.append(f"{'':13s} baseline: {', '.join(f'{x:.6g}' for x in base['answer'])}")
        print(*lines[-(3 if args.baseline else 2):], sep="\n", flush=True)
    lines.append(f"load {os.getloadavg()[0]:.1f} at the end")
    print(lines[-1])
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("# " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()) + "\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
