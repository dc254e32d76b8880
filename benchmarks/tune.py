"""Budget tuning: seconds (cold and warm) of ``tune`` for 3 and 20 k-RR queries under one composed budget.

Queries: k-RR with k = 2, 10, 100 (3 queries) and k = geomspace(2, 200, 20) rounded (20 queries),
n = 1e5 users each, composed target (1, 1e-6), 200 optimiser steps, default refine pass. Cold =
first call in this process (includes compilation; the persistent cache may hold programs from an
earlier run: pass --no-cache for a true cold start), warm = the same call again (the round-PLD
cache is cleared in between, so warm still builds every certified round). Prints the certified
upper, the gain over equal split and the time split (optimiser vs certification is not separated:
the total is what a user waits).

With --rule: the T-round rule tune scales by. One k-RR query (k = 10, n = 1e4, 100 rounds, target
(1, 1e-6), no optimiser steps) tuned by default (the worst-case pairs' PLD, basic and advanced
composition) and with k-RR's blanket pair (blanket_points=64), side by side: eps0, the certified upper,
which bound gave it, seconds. Then what one blanket-pair round PLD costs at --rule-n (64 profile
points, k = 10) against the worst-case pair's round on the same grid, at the eps0 a tune at that n
reaches: the cost cap behind the default.

Usage: python3 benchmarks/tune.py [--sizes 3,20] [--no-cache] [--rule] [--rule-n 1e5]
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
    ap.add_argument("--rule", action="store_true", help="only the T-round rule's section")
    ap.add_argument("--rule-n", type=float, default=1e5)
    args = ap.parse_args()
    if args.rule:
        rule(args.rule_n)
        return
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


def rule(big_n: float) -> None:
    from jaxshuffle.pld.blanket import blanket_round
    from jaxshuffle.pld.two_count import shuffled_round

    print(f"jaxshuffle {js.__version__}, {os.cpu_count()} CPUs; the T-round rule in tune")
    q = js.query("grr", n=1e4, k=10, count=100)
    for label, points in (("worst-case pairs (default)", None), ("with the blanket pair (64)", 64)):
        t = time.perf_counter()
        r = js.tune([q], None, 1.0, 1e-6, steps=0, blanket_points=points)
        dt = time.perf_counter() - t
        print(f"  k = 10, n = 1e4, 100 rounds, {label}: eps0 {r.eps0[0]:.4f}, certified upper {r.upper:.4f} "
              f"({r.upper_source}), worst-case pairs at that eps0 {r.worst_case_upper:.4f}; {dt:.1f} s", flush=True)
    print(f"  one round PLD at n = {big_n:g}, k = 10, grid 1e-4 (first call of each eps0 includes compilation):")
    for eps0 in (5.0, 6.0, 7.5):
        t = time.perf_counter()
        shuffled_round(js.randomizers.grr(eps0, 10), big_n, discretization=1e-4)
        wc = time.perf_counter() - t
        t = time.perf_counter()
        blanket_round(eps0, 10, big_n, discretization=1e-4, points=64)
        bl = time.perf_counter() - t
        print(f"    eps0 {eps0:>4}: worst-case pair {wc:6.1f} s, blanket pair (64 points) {bl:6.1f} s", flush=True)


if __name__ == "__main__":
    main()
