"""Clients sampled per round: certified epsilon of one round of k-RR at each sample rate, the factor gained
over full participation, and the seconds taken (cold: the first call in this process compiles).

k = 10, eps0 = 1, delta = 1e-6, n in --n (default 1e4 and 1e6), g in --rates (default 0.01, 0.1, 1).
``jaxshuffle.accountant.subsampled_epsilon`` (k-RR's blanket pair at a real k; at g = 1 today's
blanket bound).

Usage: python3 benchmarks/sampling.py [--n 1e4,1e6] [--rates 0.01,0.1,1] [--out benchmarks/results/sampling_cpu.txt]
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import jaxshuffle.randomizers as R
from jaxshuffle.accountant.subsampling import subsampled_epsilon


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1e4,1e6")
    ap.add_argument("--rates", default="0.01,0.1,1")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rates = np.array([float(x) for x in args.rates.split(",")])
    lines = [f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores; "
             f"k-RR k = 10, eps0 = 1, delta = 1e-6"]
    for n in (float(x) for x in args.n.split(",")):
        t = time.perf_counter()
        res = subsampled_epsilon(R.grr(1.0, 10), n, 1e-6, sample_rate=rates)
        seconds = time.perf_counter() - t
        full = float(res.upper[rates == 1.0][0]) if np.any(rates == 1.0) else float("nan")
        cells = ", ".join(f"g = {g:g}: {u:.6f} ({full / u:.1f}x)" for g, u in zip(rates, res.upper))
        lines.append(f"n = {n:.0e}: {cells}; {seconds:.1f} s for the {rates.size} rates")
    print("\n".join(lines))
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"# {time.strftime('%Y-%m-%d')}: --n {args.n} --rates {args.rates}\n" + "\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
