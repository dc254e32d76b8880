"""A k-RR privacy surface with the tight source beside the worst-case pair's, cold, in one run.

Runs ``jaxshuffle sweep --randomizer grr`` twice over the same grid, each in a fresh process with an
empty cache folder (``JAXSHUFFLE_CACHE``: no exported program, no XLA compilation cache), as a first-time
user would: once with the default (tight) source, k-RR's blanket pair and exact-dataset lower bounds,
and once with ``--upper-from worst-case``. Prints the seconds of each, their ratio, and per point the
certified upper of each source and their ratio (how much the tight source buys). With ``--baseline DIR``
(another checkout of the package, e.g. a ``git worktree`` of an earlier commit) the tight sweep also
runs on that code, in the same run, as the before-and-after figure.

Usage: python3 benchmarks/krr_surface.py [--eps0 0.5..8:4] [--n 1e3..1e7:3] [--k 10] [--delta 1e-6]
                                         [--baseline DIR] [--out benchmarks/results/krr_surface_cpu.txt]
(the default grid is 12 points; ``--eps0 0.5..8:16 --n 1e3..1e7:9`` is the 144-point surface)
"""
from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import tempfile
import time

CLI = "import sys; from jaxshuffle.cli import main; sys.exit(main())"  # the `jaxshuffle` command, this Python


def run_sweep(args, source: str | None, folder: str, code: str | None = None) -> tuple[float, list[dict]]:
    out = os.path.join(folder, "out")
    cmd = [sys.executable, "-c", CLI, "sweep", "--randomizer", "grr", "--k", args.k, "--eps0", args.eps0,
           "--n", args.n, "--delta", args.delta, "--out", out, "--no-plot"]
    if source:
        cmd += ["--upper-from", source]
    env = dict(os.environ, JAXSHUFFLE_CACHE=os.path.join(folder, "cache"))
    if code:
        env["PYTHONPATH"] = code
    t = time.perf_counter()
    # run from the temporary folder: `python -c` puts the working directory first on sys.path, where a
    # checkout's own package would shadow the baseline's
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, cwd=folder)
    seconds = time.perf_counter() - t
    with open(os.path.join(out, "results.csv")) as fh:
        return seconds, list(csv.DictReader(fh))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--eps0", default="0.5..8:4")
    ap.add_argument("--n", default="1e3..1e7:3")
    ap.add_argument("--k", default="10")
    ap.add_argument("--delta", default="1e-6")
    ap.add_argument("--baseline", default=None, help="a checkout whose tight sweep runs beside this one's")
    ap.add_argument("--out", default=None, help="also write the report here")
    args = ap.parse_args()
    lines = [f"k-RR surface, tight vs worst-case source, cold (fresh process, empty cache each), {platform.machine()}, "
             f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the start",
             f"python3 benchmarks/krr_surface.py --eps0 {args.eps0} --n {args.n} --k {args.k} --delta {args.delta}"]
    print(*lines, sep="\n", flush=True)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        t_tight, tight = run_sweep(args, None, a)
        t_worst, worst = run_sweep(args, "worst-case", b)
    lines.append(f"{len(tight)} points: tight (default) {t_tight:.1f} s, --upper-from worst-case {t_worst:.1f} s: "
                 f"{t_tight / t_worst:.1f}x the time; load {os.getloadavg()[0]:.1f} at the end")
    if args.baseline:
        with tempfile.TemporaryDirectory() as c:
            t_base, base = run_sweep(args, None, c, args.baseline)
        moved = max(abs(float(p["upper"]) / float(q["upper"]) - 1.0) for p, q in zip(tight, base)
                    if float(q["upper"]) > 0)
        lines.append(f"baseline {args.baseline}: tight {t_base:.1f} s ({t_base / t_worst:.1f}x the worst-case sweep, "
                     f"{t_base / t_tight:.2f}x this code's); uppers differ by at most {moved:.1e} relative; load "
                     f"{os.getloadavg()[0]:.1f} at the end")
    lines.append(f"{'eps0':>8} {'n':>8} {'tight upper':>12} {'lower':>10} {'worst-case':>11} {'ratio':>6}  source")
    for p, w in zip(tight, worst):
        up, wc = float(p["upper"]), float(w["upper"])
        lines.append(f"{float(p['eps0']):8.3f} {float(p['n']):8.0e} {up:12.6g} {float(p['lower']):10.6g} {wc:11.6g} "
                     f"{wc / up if up > 0 else float('nan'):6.2f}  {p['upper_source']}")
    print(*lines[2:], sep="\n", flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("# " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()) + "\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
