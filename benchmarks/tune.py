"""Budget tuning: seconds (cold and warm) of ``tune`` for 3 and 20 k-RR queries under one composed budget.

Queries: k-RR with k = 2, 10, 100 (3 queries) and k = geomspace(2, 200, 20) rounded (20 queries),
n = 1e5 users each, composed target (1, 1e-6), 200 optimiser steps, default refine pass. Cold =
first call in this process (includes compilation; the persistent cache may hold programs from an
earlier run: pass --no-cache for a true cold start), warm = the same call again (the round-PLD
cache is cleared in between, so warm still builds every certified round). Prints the certified
upper, the gain over equal split and the time split (optimiser vs certification is not separated:
the total is what a user waits).

Usage: python3 benchmarks/tune.py [--sizes 3,20] [--no-cache]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

if "--no-cache" in sys.argv:
    os.environ["JAXSHUFFLE_CACHE"] = "off"

import importlib  # noqa: E402

import numpy as np  # noqa: E402

import jaxshuffle as js  # noqa: E402

tune_mod = importlib.import_module("jaxshuffle.accountant.tune")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="3,20")
    ap.add_argument("--no-cache", action="store_true")
    args = ap.parse_args()
    print(f"jaxshuffle {js.__version__}, {os.cpu_count()} CPUs; n = 1e5, target (1, 1e-6), 200 steps")
    for m in (int(x) for x in args.sizes.split(",")):
        ks = [2, 10, 100] if m == 3 else sorted(set(np.round(np.geomspace(2, 200, m)).astype(int).tolist()))
        while len(ks) < m:  # geomspace rounding can repeat small k: pad with larger ones
            ks.append(ks[-1] + 1)
        queries = [js.query("grr", n=1e5, k=k) for k in ks[:m]]
        for label in ("cold", "warm"):
            tune_mod._round.cache_clear()
            t = time.perf_counter()
            r = js.tune(queries, None, 1.0, 1e-6, steps=200)
            dt = time.perf_counter() - t
            print(f"  {m:>2} queries {label}: {dt:7.1f} s   certified upper {r.upper:.4f} (lower {r.lower:.4f}), "
                  f"gain over equal split {r.gain:.3f}x, scale {r.scale:.4f}", flush=True)


if __name__ == "__main__":
    main()
