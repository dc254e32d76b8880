"""Composition over rounds: seconds (cold and warm) to a certified composed epsilon, and dp_accounting on the same PLD.

For each n and T: build the stronger clone's round PLD (eps0 = 1, grid for T rounds), compose T
rounds (both discretisations), read eps at delta = 1e-6. Cold = first call in this process (includes
compilation; the persistent cache may hold programs from an earlier run: pass --no-cache to measure
a true cold start), warm = the same call again. Then dp_accounting composes the exported pessimistic
PLD (``self_compose(T)``, ``get_epsilon_for_delta``) on the same grid.

Usage: python3 benchmarks/compose.py [--n 1e4,1e6] [--rounds 10,100,1000] [--grid-points 100]

n = 1e8 needs about 5e9 cells per round (a window of ~1e5 others' counts times ~7e4 per row): it
is listed with its planned size and skipped unless asked for with --n 1e8.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

if "--no-cache" in sys.argv:
    os.environ["JAXSHUFFLE_CACHE"] = "off"

import numpy as np  # noqa: E402

import jaxshuffle as js  # noqa: E402
from jaxshuffle.accountant import compose, round_pld, to_dp_accounting  # noqa: E402
from jaxshuffle.accountant.pld import _plan_cells, default_discretization  # noqa: E402


def timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="1e4,1e6")
    ap.add_argument("--rounds", default="10,100,1000")
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--grid-points", type=int, default=100, help="points of the (eps0, T) grid timing (0: skip)")
    ap.add_argument("--no-cache", action="store_true")
    args = ap.parse_args()
    pair = js.stronger_clone_pair(1.0)
    u, v, r0, r1 = (float(x) for x in (pair.u, pair.v, pair.r0, pair.r1))
    print(f"stronger clone, eps0 = 1, delta = {args.delta:g}; jax {js._config.jax.__version__}, "
          f"device {js._config.jax.devices()[0].platform}")
    print(f"{'n':>8} {'T':>5} {'bins/round':>10} {'PLD cold':>9} {'PLD warm':>9} {'compose cold':>12} "
          f"{'compose warm':>12} {'eps upper':>10} {'eps lower':>10} {'dp_acc eps':>10} {'dp_acc s':>9}")
    for n in (float(x) for x in args.n.split(",")):
        for T in (int(x) for x in args.rounds.split(",")):
            grid = default_discretization(pair, n, T)
            _, _, cells, _ = _plan_cells((u, v, r0, r1), n, grid, 1e-16)
            if n > 1e7 and "1e8" not in args.n:
                print(f"{n:8.0e} {T:5d}  skipped: {cells.window * (cells.row + 1):.2e} cells per round")
                continue
            r, pld_cold = timed(lambda: round_pld(pair, n, rounds=T))
            r, pld_warm = timed(lambda: round_pld(pair, n, rounds=T))
            c, comp_cold = timed(lambda: compose([(r, T)], args.delta))
            c, comp_warm = timed(lambda: compose([(r, T)], args.delta))
            try:
                theirs, dp_s = timed(lambda: to_dp_accounting(r).self_compose(T).get_epsilon_for_delta(args.delta))
            except ImportError:
                theirs, dp_s = float("nan"), float("nan")
            print(f"{n:8.0e} {T:5d} {len(r.upper_forward.probs):10d} {pld_cold:9.2f} {pld_warm:9.2f} "
                  f"{comp_cold:12.2f} {comp_warm:12.2f} {float(c.upper):10.6f} {float(c.lower):10.6f} "
                  f"{theirs:10.6f} {dp_s:9.2f}")
    if args.grid_points:
        side = int(round(np.sqrt(args.grid_points)))
        eps0s, Ts = np.linspace(0.5, 2.0, side), np.unique(np.geomspace(1, 100, side).round().astype(int))
        n = 1e4

        def grid_run():
            out = []
            for e in eps0s:
                r = round_pld(js.stronger_clone_pair(float(e)), n, rounds=int(Ts.max()))
                out.append(js.accountant.epsilon_over_rounds(r, Ts, args.delta).upper)
            return np.array(out)

        _, cold = timed(grid_run)
        vals, warm = timed(grid_run)
        print(f"(eps0, T) grid at n = 1e4: {len(eps0s)} x {len(Ts)} = {vals.size} points, "
              f"cold {cold:.1f} s, warm {warm:.1f} s")
    print("Koskela et al.'s scripts (DPBayes/numerical-shuffler-experiments) are not run by this script.")


if __name__ == "__main__":
    main()
