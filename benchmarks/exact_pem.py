"""Wall time of the ground-truth routines in jaxshuffle.exact (a script, not a test).

    python benchmarks/exact_pem.py

Each case is called once to warm up, then timed on a second call. delta = 0.01 / n.
* pem_lower: PEM with D(a,b) = 1, D(b,c) = 2, D(a,c) = 3 (D_max = D(a,c) = D(a,b) + D(b,c),
  the setting of the supplement's Fig. 13).
* epsilon: k-ary randomized response, victim x0 vs x1, all others holding x0 (3 lumped
  outputs), and 10-ary RR with all others holding a third value (4 lumped outputs).
"""
from __future__ import annotations

import time

import numpy as np

from jaxshuffle import exact


def rr(k: int, eps0: float) -> np.ndarray:
    p = np.exp(eps0)
    m = np.full((k, k), 1.0)
    np.fill_diagonal(m, p)
    return m / (p + k - 1)


def timed(fn):
    fn()  # warm-up
    t0 = time.perf_counter()
    value = fn()
    return float(value), time.perf_counter() - t0


def main() -> None:
    print("pem_lower(n, d_ab=1, d_ac=3, d_bc=2, delta=0.01/n)")
    for n in (100, 300, 1000):
        v, s = timed(lambda: exact.pem_lower(n, 1.0, 3.0, 2.0, 0.01 / n))
        print(f"  n={n:5d}  eps_lower={v:.10f}  wall={s:7.3f} s")
    for k, eps0, star in ((3, 1.0, 0), (3, 5.0, 0), (10, 1.0, 2)):
        print(f"epsilon: {k}-ary RR, eps0={eps0}, others all x{star}, delta=0.01/n")
        for n in ((100, 300, 1000) if k == 3 else (100, 200)):
            others = [star] * (n - 1)
            v, s = timed(lambda: exact.epsilon(rr(k, eps0), 0, 1, others, 0.01 / n))
            print(f"  n={n:5d}  eps_exact={v:.10f}  wall={s:7.3f} s")


if __name__ == "__main__":
    main()
