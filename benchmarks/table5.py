"""Reproduce Table 5 of Wang et al. (VLDB 2024) and time it.

General eps0-LDP randomizer (p = q = e^eps0, beta = (e^eps0-1)/(e^eps0+1): the stronger
clone pair, certified), delta = 0.01/n, eps0 in {1,3,5,7}, n in {1e4,1e6,1e8}, rtol 1e-6.

Prints, per cell: the certified bracket [lower, upper] (jaxshuffle.epsilon), the paper's
Algorithm 1 as printed (jaxshuffle.search.algorithm1) with T = 20 and T = 10 bisection steps next
to the paper's printed values and times, and this cell's warm wall time (its own call, after one
compile). Then the total for all 12 cells in one batched call (warm, best of 3) and that call's
compile time. The printed values sit within one unit of their last digit of Algorithm 1's grid
point (mostly rounded up; the eps0 = 7 rows look truncated), see docs/math.md section 5.
Usage: python benchmarks/table5.py [--no-cells]
"""
from __future__ import annotations

import argparse
import platform
import time

import jax
import numpy as np

import jaxshuffle as js
from jaxshuffle.search import algorithm1

PAPER_T20 = {  # (eps0, n): (amplified eps, seconds) as printed (Algorithm 1, T = 20 bisection steps)
    (1.0, 1e4): (0.0433, 0.45), (1.0, 1e6): (0.00503, 16.7), (1.0, 1e8): (0.000566, 106.2),
    (3.0, 1e4): (0.227, 3.8), (3.0, 1e6): (0.0255, 13.9), (3.0, 1e8): (0.00283, 117.5),
    (5.0, 1e4): (0.743, 2.4), (5.0, 1e6): (0.0778, 9.3), (5.0, 1e8): (0.00853, 44.6),
    (7.0, 1e4): (6.99, 0.24), (7.0, 1e6): (0.224, 2.8), (7.0, 1e8): (0.0242, 17.9),
}
PAPER_T10 = {  # the same with T = 10 steps
    (1.0, 1e4): (0.0440, 2.3), (1.0, 1e6): (0.00586, 4.7), (1.0, 1e8): (0.000977, 0.43),
    (3.0, 1e4): (0.229, 1.5), (3.0, 1e6): (0.0264, 2.8), (3.0, 1e8): (0.00293, 5.2),
    (5.0, 1e4): (0.743, 0.9), (5.0, 1e6): (0.0782, 3.1), (5.0, 1e8): (0.00977, 7.9),
    (7.0, 1e4): (6.99, 0.31), (7.0, 1e6): (0.225, 1.2), (7.0, 1e8): (0.0273, 5.1),
}
EPS0 = np.array([1.0, 3.0, 5.0, 7.0])
NS = np.array([1e4, 1e6, 1e8])


def run(eps0, n):
    res = js.epsilon(js.stronger_clone_pair(eps0), n, 0.01 / n, rtol=1e-6)
    jax.block_until_ready(res)
    return res


def timed(f, repeats=1):
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return out, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-cells", action="store_true", help="skip the per-cell timings")
    args = ap.parse_args()
    print(f"jaxshuffle {js.__version__}, jax {jax.__version__}, device {jax.devices()[0].device_kind}, "
          f"{platform.processor() or platform.machine()}")
    e, n = EPS0[:, None], NS[None, :]
    res, first = timed(lambda: run(e, n))
    res, warm = timed(lambda: run(e, n), repeats=3)
    alg20 = np.asarray(algorithm1(js.stronger_clone_pair(e), n, 0.01 / n, steps=20))
    alg10 = np.asarray(algorithm1(js.stronger_clone_pair(e), n, 0.01 / n, steps=10))
    print(f"\n{'eps0':>4} {'n':>6} {'lower':>12} {'upper':>12} {'Alg1 T=20':>10} {'paper T=20':>10} "
          f"{'Alg1 T=10':>10} {'paper T=10':>10} {'status':>6} {'iters':>5} {'cell s':>8} {'paper s T=20':>12} "
          f"{'paper s T=10':>12}")
    for i, e0 in enumerate(EPS0):
        for j, nn in enumerate(NS):
            cell = ""
            if not args.no_cells:
                run(e0, nn)  # compile this shape
                _, cell_t = timed(lambda: run(e0, nn), repeats=3)
                cell = f"{cell_t:8.3f}"
            pv, pt = PAPER_T20[(e0, nn)]
            pv10, pt10 = PAPER_T10[(e0, nn)]
            lo, up = float(res.lower[i, j]), float(res.upper[i, j])
            print(f"{e0:4.0f} {nn:6.0e} {lo:12.6g} {up:12.6g} {alg20[i, j]:10.6g} {pv:10.6g} {alg10[i, j]:10.6g} "
                  f"{pv10:10.6g} {js.Status(int(res.status[i, j])).name[:6]:>6} {int(res.iterations[i, j]):5d} "
                  f"{cell:>8} {pt:>12} {pt10:>12}")
    print(f"\nall 12 cells, one batched call: warm {warm:.3f} s (best of 3); first call {first:.1f} s "
          f"(compile ~{first - warm:.1f} s)")
    paired_warm_calls(e, n)


def paired_warm_calls(e, n, repeats: int = 7) -> None:
    """Warm calls as a user makes them (the first call of a shape runs the quick program, later ones the
    optimised: jaxshuffle._programs) against the optimised program forced, interleaved in one process."""
    from jaxshuffle import _programs

    def forced():
        before = _programs.QUICK_MAX_POINTS
        _programs.QUICK_MAX_POINTS = 0
        try:
            return run(e, n)
        finally:
            _programs.QUICK_MAX_POINTS = before

    forced()  # compile the optimised program
    default_t, forced_t = [], []
    for _ in range(repeats):
        default_t.append(timed(lambda: run(e, n))[1])
        forced_t.append(timed(forced)[1])
    d, f = np.median(default_t), np.median(forced_t)
    print(f"warm 12-cell call, median of {repeats} interleaved: default {d:.4f} s, optimised program forced "
          f"{f:.4f} s, ratio {d / f:.3f}")


if __name__ == "__main__":
    main()
