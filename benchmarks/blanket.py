"""Blanket (three-count) bound for k-RR vs the stronger clone, the exact-dataset lower bound and
the paper's Theorem 4.7 value, with seconds per point cold and warm.

    python benchmarks/blanket.py [--ns 1e4,1e6,1e8] [--ks 3,10,100] [--eps0s 0.5,1,2,4] [--batch 100]

Columns: stronger clone (certified for every eps0-LDP randomizer), blanket upper (certified for
k-RR), lower (max of the exact all-z / all-x0 datasets, certified low), paper (Theorem 4.7, not an
upper bound: docs/math.md section 5), and the blanket's cold (compile + run) and warm seconds.
The last part times one batched call of ``--batch`` points at n = 1e6 against single calls.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import jaxshuffle as js
from jaxshuffle import blanket as bl
from jaxshuffle.randomizers import grr


def _floats(s):
    return [float(x) for x in s.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="1e4,1e6,1e8")
    ap.add_argument("--ks", default="3,10,100")
    ap.add_argument("--eps0s", default="0.5,1,2,4")
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--no-lower", action="store_true", help="skip the lower bound (three more searches)")
    a = ap.parse_args()
    delta = a.delta
    print(f"device: {jax.devices()[0]}; delta = {delta:g}")
    print(f"{'n':>8} {'k':>4} {'eps0':>5} {'clone':>11} {'blanket':>11} {'lower':>11} {'paper':>11} "
          f"{'clone/bl':>8} {'cold s':>7} {'warm s':>7} status")
    for n in _floats(a.ns):
        for k in _floats(a.ks):
            for e0 in _floats(a.eps0s):
                clone = float(js.epsilon(js.stronger_clone_pair(e0), n, delta).upper)
                p = grr(e0, k)
                paper = float(js.epsilon(js.vr_pair(p.p, p.beta, p.q), n, delta).upper)
                plan = bl.plan_blanket(e0, k, n, delta)
                t0 = time.perf_counter()
                r = bl.blanket_epsilon(e0, k, n, delta, plan=plan)
                jax.block_until_ready(r)
                cold = time.perf_counter() - t0
                t0 = time.perf_counter()
                r = bl.blanket_epsilon(e0, k, n, delta * 1.01, plan=plan)  # same program, new point
                jax.block_until_ready(r)
                warm = time.perf_counter() - t0
                r = bl.blanket_epsilon(e0, k, n, delta, plan=plan)
                lo = np.nan if a.no_lower else float(bl.blanket_lower_epsilon(e0, k, n, delta).lower)
                print(f"{n:8.0e} {k:4.0f} {e0:5.2f} {clone:11.7f} {float(r.upper):11.7f} {lo:11.7f} {paper:11.7f} "
                      f"{clone / float(r.upper):8.3f} {cold:7.2f} {warm:7.2f} {js.Status(int(r.status)).name}",
                      flush=True)
    if a.batch:
        rng = np.random.default_rng(0)
        e0 = rng.uniform(0.5, 2.0, a.batch)
        k = rng.choice([3.0, 10.0], a.batch)
        n = np.full(a.batch, 1e6)
        plan = bl.plan_blanket(e0, k, n, delta)
        r = bl.blanket_epsilon(e0, k, n, delta, plan=plan)  # compile
        jax.block_until_ready(r)
        t0 = time.perf_counter()
        jax.block_until_ready(bl.blanket_epsilon(e0, k, n, delta * 1.01, plan=plan))
        batched = time.perf_counter() - t0
        singles = 0.0
        m = min(a.batch, 10)
        for i in range(m):
            t0 = time.perf_counter()
            jax.block_until_ready(bl.blanket_epsilon(e0[i:i + 1], k[i:i + 1], n[i:i + 1], delta, plan=plan))
            singles += time.perf_counter() - t0
        print(f"batch of {a.batch} at n = 1e6: {batched:.2f} s ({batched / a.batch:.3f} s/point); "
              f"single calls: {singles / m:.3f} s/point (mean of {m}), x{a.batch} = {singles / m * a.batch:.1f} s")


if __name__ == "__main__":
    main()
