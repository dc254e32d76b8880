"""Blanket (three-count) bound for k-RR vs the stronger clone, the exact-dataset lower bound and
the paper's Theorem 4.7 value, with seconds per point cold and warm (issue 16).

    python benchmarks/blanket.py [--ns 1e4,1e6,1e8] [--ks 3,10,100] [--eps0s 0.5,1,2,4] [--batch 100]
                                 [--big-ks 10] [--big-eps0s 1] [--full] [--matrix-ns 1e4,1e6] [--subset 5,2]
                                 [--subset-ns 1e4] [--rows-ns 1e4] [--rows-eps0s 0.5,1,2] [--lattice-ns 1e4]
                                 [--grid-table] [--no-cache]

[1] Columns: stronger clone (certified for every eps0-LDP randomizer), blanket upper (certified for
k-RR), lower (max of the exact all-z / all-x0 datasets, certified low), paper (Theorem 4.7, not an
upper bound in general: docs/math.md section 3; for k-RR a valid lower bound), the blanket
search's cold seconds (first call at this point with its plan: compiles where the plan's shapes
are new to this process; the persistent cache may hold programs from an earlier run, --no-cache
for a true cold start), warm seconds (the same program at a new point, delta * 1.01) and the lower
bound's seconds (one call). At n >= 1e7 only --big-ks x --big-eps0s run unless --full (the whole
3 x 3 x 4 table).
[1b] With --grid-table, the same table from one batched call per n over all k x eps0 (one merged plan): the
seconds columns are the batch's seconds divided by its points (cold: the first call, compiling; warm: the same
program at delta x 1.01; lower: one call), which is how a sweep pays for them. Rows at n >= 1e7 are all run.
[2] One batched call of --batch points at n = 1e6 (warm) against single calls (warm, mean of 10).
[3] The general-matrix engine (jaxshuffle.blanket_matrix.matrix_bounds, which amplify uses for a
randomizer carrying a matrix, randomizers.with_matrix) on k-RR's matrix (k = 10) next to the
k-RR kernel (krr_bounds) at the same point (cold; warm at delta x 1.01), and on a subset-selection matrix (2-subsets of
5 by default) via amplify, one call per n, and its blanket forms alone (matrix_bounds(..., lower=False),
cold and warm): the exact datasets' forms need hundreds of lines, the blanket forms a few dozen.
[4] Catalog rows that attach their matrix themselves (subset selection, Hadamard response; docs/math.md
11.6) through amplify's default source: one call over --rows-eps0s at each --rows-ns (cold), again at
delta x 1.01 (warm), seconds per point, and the worst-case pair beside the certified upper.
[5] With --lattice-ns: mechanisms whose blanket forms have more than four categories (2-subsets of 5,
Hadamard response K = 8), the coarsened search's upper against the lattice + FFT refinement's
(docs/math.md 11.8), the certified lower bound and the worst-case pair (stronger clone) beside them,
and the seconds of each part (the search includes its compilation on first use).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if "--no-cache" in sys.argv:
    os.environ["JAXSHUFFLE_CACHE"] = "off"

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxshuffle as js  # noqa: E402
from jaxshuffle import blanket as bl  # noqa: E402
from jaxshuffle import randomizers as R  # noqa: E402
from jaxshuffle.blanket_matrix import matrix_bounds  # noqa: E402
from jaxshuffle.exact.soundness import grr_matrix  # noqa: E402
from jaxshuffle.randomizers import grr  # noqa: E402

BIG_N = 1e7


def _floats(s):
    return [float(x) for x in s.split(",") if x]


def timed(f):
    t = time.perf_counter()
    out = jax.block_until_ready(f())
    return out, time.perf_counter() - t


def _header():
    print(f"{'n':>6} {'k':>4} {'eps0':>5} {'clone':>11} {'blanket':>11} {'lower':>11} {'paper':>11} "
          f"{'clone/bl':>8} {'cold s':>7} {'warm s':>7} {'lower s':>7} status", flush=True)


def _row(n, k, e0, clone, upper, lower, paper, cold, warm, lower_s, status):
    print(f"{n:6.0e} {k:4.0f} {e0:5.2f} {clone:11.7f} {upper:11.7f} {lower:11.7f} {paper:11.7f} "
          f"{clone / upper:8.3f} {cold:7.2f} {warm:7.2f} {lower_s:7.2f} {js.Status(status).name}", flush=True)


def table(a, delta):
    print(f"[1] k-RR points; device: {jax.devices()[0]}; delta = {delta:g}")
    _header()
    for n in _floats(a.ns):
        for k in _floats(a.ks):
            for e0 in _floats(a.eps0s):
                if n >= BIG_N and not a.full and (k not in _floats(a.big_ks) or e0 not in _floats(a.big_eps0s)):
                    continue
                clone = float(js.epsilon(js.stronger_clone_pair(e0), n, delta).upper)
                p = grr(e0, k)
                paper = float(js.epsilon(js.vr_pair(p.p, p.beta, p.q), n, delta).upper)
                plan = bl.plan_blanket(e0, k, n, delta)
                _, cold = timed(lambda: bl.blanket_epsilon(e0, k, n, delta, plan=plan))
                _, warm = timed(lambda: bl.blanket_epsilon(e0, k, n, delta * 1.01, plan=plan))  # same program
                r = bl.blanket_epsilon(e0, k, n, delta, plan=plan)
                if a.no_lower:
                    lo, lo_s = np.nan, np.nan
                else:
                    lo, lo_s = timed(lambda: bl.blanket_lower_epsilon(e0, k, n, delta).lower)
                _row(n, k, e0, clone, float(r.upper), float(lo), paper, cold, warm, lo_s, int(r.status))
    if not a.full and any(n >= BIG_N for n in _floats(a.ns)):
        print(f"n >= 1e7: only k in {a.big_ks}, eps0 in {a.big_eps0s} run (--full: the whole table)")


def grid_table(a, delta):
    print(f"[1b] k-RR grid, one batched call per n; device: {jax.devices()[0]}; delta = {delta:g}; seconds per "
          "point = batch seconds / points")
    _header()
    kk, ee = np.meshgrid(_floats(a.ks), _floats(a.eps0s), indexing="ij")
    k, e0 = kk.ravel(), ee.ravel()
    for n in _floats(a.ns):
        nn = np.full(k.size, n)
        clone = np.asarray(js.epsilon(js.stronger_clone_pair(e0), nn, delta).upper)
        p = grr(e0, k)
        paper = np.asarray(js.epsilon(js.vr_pair(p.p, p.beta, p.q), nn, delta).upper)
        plan = bl.plan_blanket(e0, k, nn, delta)
        r, cold = timed(lambda: bl.blanket_epsilon(e0, k, nn, delta, plan=plan))
        _, warm = timed(lambda: bl.blanket_epsilon(e0, k, nn, delta * 1.01, plan=plan))
        if a.no_lower:
            lo, lo_s = np.full(k.size, np.nan), np.nan
        else:
            lo, lo_s = timed(lambda: bl.blanket_lower_epsilon(e0, k, nn, delta).lower)
        up, status = np.asarray(r.upper), np.asarray(r.status)
        for i in range(k.size):
            _row(n, k[i], e0[i], clone[i], up[i], float(lo[i]), paper[i], cold / k.size, warm / k.size,
                 lo_s / k.size, int(status[i]))
        print(f"  n = {n:.0e}: {k.size} points in one call: blanket {cold:.2f} s cold, {warm:.2f} s warm; "
              f"lower {lo_s:.2f} s", flush=True)


def batch(a, delta):
    rng = np.random.default_rng(0)
    e0 = rng.uniform(0.5, 2.0, a.batch)
    k = rng.choice([3.0, 10.0], a.batch)
    n = np.full(a.batch, 1e6)
    plan = bl.plan_blanket(e0, k, n, delta)
    _, compile_s = timed(lambda: bl.blanket_epsilon(e0, k, n, delta, plan=plan))
    _, batched = timed(lambda: bl.blanket_epsilon(e0, k, n, delta * 1.01, plan=plan))
    timed(lambda: bl.blanket_epsilon(e0[:1], k[:1], n[:1], delta, plan=plan))  # compile the single-point program
    m = min(a.batch, 10)
    singles = sum(timed(lambda: bl.blanket_epsilon(e0[i:i + 1], k[i:i + 1], n[i:i + 1], delta, plan=plan))[1]
                  for i in range(m))
    print(f"\n[2] batch of {a.batch} k-RR points at n = 1e6 (eps0 in [0.5, 2], k in {{3, 10}}, one plan): "
          f"{batched:.2f} s warm ({batched / a.batch:.3f} s/point; first call {compile_s:.1f} s); single calls "
          f"{singles / m:.3f} s/point warm (mean of {m}), x{a.batch} = {singles / m * a.batch:.1f} s "
          f"({singles / m * a.batch / batched:.1f}x the batch)", flush=True)


def matrices(a, delta):
    print("\n[3] general-matrix engine (blanket_matrix.matrix_bounds) vs the k-RR kernel (krr_bounds), eps0 = 1")
    print(f"{'n':>6} {'mechanism':>22} {'engine':>8} {'lower':>11} {'upper':>11} {'cold s':>7} {'warm s':>7}  note",
          flush=True)
    e0, k = 1.0, 10
    for n in _floats(a.matrix_ns):
        # warm: a new point (delta x 1.01); the same inputs again would time the kernel's result store
        kr, kr_cold = timed(lambda: js.krr_bounds(e0, k, n, delta))
        _, kr_warm = timed(lambda: js.krr_bounds(e0, k, n, delta * 1.01))
        mb, mb_cold = timed(lambda: matrix_bounds(grr_matrix(k, e0), n, delta))
        _, mb_warm = timed(lambda: matrix_bounds(grr_matrix(k, e0), n, delta * 1.01))
        ku, kl = float(kr.upper), float(kr.lower)
        agree = max(kl, mb.lower) <= min(ku, mb.upper)
        print(f"{n:6.0e} {'k-RR k=10':>22} {'kernel':>8} {kl:11.7f} {ku:11.7f} {kr_cold:7.2f} {kr_warm:7.2f}",
              flush=True)
        print(f"{n:6.0e} {'k-RR k=10 (matrix)':>22} {'matrix':>8} {mb.lower:11.7f} {mb.upper:11.7f} {mb_cold:7.2f} "
              f"{mb_warm:7.2f}  brackets {'overlap' if agree else 'DISAGREE'}; uppers differ by "
              f"{abs(mb.upper / ku - 1):.1e} relative; exact kernel: {mb.exact_kernel}", flush=True)
    d, s = (int(x) for x in a.subset.split(","))
    M = R.subset_selection_matrix(e0, d, s)
    params = R.with_matrix(R.subset_selection(e0, d, s), M)
    for n in _floats(a.subset_ns):
        rep, am_cold = timed(lambda: js.amplify(params, n, delta))  # one call: it costs minutes
        src = js.UpperSource.NAMES[int(rep.upper_source)]
        print(f"{n:6.0e} {f'{s}-subset of {d} ({M.shape[1]} msgs)':>22} {'amplify':>8} {float(rep.lower):11.7f} "
              f"{float(rep.upper):11.7f} {am_cold:7.2f} {'-':>7}  one call (amplify(with_matrix(...))); upper from "
              f"{src}; worst-case pair {float(rep.worst_case):.7f} (ratio {float(rep.worst_case / rep.upper):.2f})",
              flush=True)
        up, up_cold = timed(lambda: matrix_bounds(M, n, delta, lower=False))
        up, up_warm = timed(lambda: matrix_bounds(M, n, delta * 1.01, lower=False))  # same plan, a new point
        print(f"{n:6.0e} {'(upper forms alone)':>22} {'matrix':>8} {'-':>11} {up.upper:11.7f} {up_cold:7.2f} "
              f"{up_warm:7.2f}  matrix_bounds(..., lower=False), warm at delta x 1.01; ratio to the worst-case "
              f"pair {float(rep.worst_case) / up.upper:.2f}", flush=True)


def rows(a, delta):
    print("\n[4] catalog rows that carry their matrix (amplify's default source, one batched call per row and n)")
    print(f"{'n':>6} {'row':>28} {'eps0':>5} {'worst-case':>11} {'upper':>11} {'ratio':>6} {'source':>10} "
          f"{'cold s/pt':>9} {'warm s/pt':>9}", flush=True)
    e0 = np.array(_floats(a.rows_eps0s))
    for name, params in (("subset-selection d=10 k=3", R.subset_selection(e0, 10, 3)),
                         ("hadamard-response K=16 s=8", R.hadamard_response(e0, 16, 8, 1)),
                         ("binary-rr d=8", R.binary_rr(e0, 8))):
        for n in _floats(a.rows_ns):
            rep, cold = timed(lambda: js.amplify(params, n, delta, with_paper=False))
            _, warm = timed(lambda: js.amplify(params, n, delta * 1.01, with_paper=False))  # new points
            for i, e in enumerate(e0):
                wc, up = float(rep.worst_case[i]), float(rep.upper[i])
                print(f"{n:6.0e} {name:>28} {e:5.2f} {wc:11.7f} {up:11.7f} {wc / up:6.2f} "
                      f"{js.UpperSource.NAMES[int(rep.upper_source[i])]:>10} {cold / e0.size:9.2f} "
                      f"{warm / e0.size:9.2f}", flush=True)


def lattice(a, delta):
    """[5] coarsened vs lattice-refined blanket upper (docs/math.md 11.8), one search per point."""
    from jaxshuffle import blanket_lattice as bla
    from jaxshuffle import blanket_matrix as bm

    print(f"\n[5] more than four categories: coarsened (11.3) vs lattice + FFT (11.8) blanket upper, eps0 = 1, "
          f"up to {bla.LATTICE_BINS} bins; lower = the exact datasets' certified lower bound")
    print(f"{'n':>6} {'mechanism':>22} {'lower':>10} {'coarsened':>10} {'lattice':>10} {'coarse/lat':>10} "
          f"{'clone':>10} {'bins':>8} {'search s':>8} {'lattice s':>9}", flush=True)
    for name, M in (("2-subsets of 5", R.subset_selection_matrix(1.0, 5, 2)),
                    ("Hadamard K = 8", R.hadamard_response_matrix(1.0, 8))):
        for n in _floats(a.lattice_ns):
            planned = bm.plan_matrix(M, n, delta)
            (ups, lows), search_s = timed(lambda: bm.form_epsilons(planned))
            low = float(np.max(lows, initial=0.0))
            coarse = np.sum(planned.up_forms.w > 0, axis=1) > bm.KERNEL_CATEGORIES
            fine, lat_s = timed(lambda: bm.refine_upper(planned.up_forms, ups, coarse, n, delta, low))
            clone = float(js.epsilon(js.stronger_clone_pair(1.0), n, delta).upper)
            cu, fu = float(np.max(ups)), float(np.max(fine))
            print(f"{n:6.0e} {name:>22} {low:10.6f} {cu:10.6f} {fu:10.6f} {cu / fu:10.3f} {clone:10.6f} "
                  f"{bla.default_bins(n):8d} {search_s:8.1f} {lat_s:9.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="1e4,1e6,1e8")
    ap.add_argument("--ks", default="3,10,100")
    ap.add_argument("--eps0s", default="0.5,1,2,4")
    ap.add_argument("--big-ks", default="10", help="k run at n >= 1e7 (unless --full)")
    ap.add_argument("--big-eps0s", default="1", help="eps0 run at n >= 1e7 (unless --full)")
    ap.add_argument("--full", action="store_true", help="the whole table at n >= 1e7 too")
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--batch", type=int, default=100, help="points of the batched call at n = 1e6 (0: skip)")
    ap.add_argument("--matrix-ns", default="1e4,1e6", help="n of the general-matrix engine part ('' skips)")
    ap.add_argument("--subset", default="5,2", help="d,k of the subset-selection matrix in [3]")
    ap.add_argument("--subset-ns", default="1e4", help="n of the subset-selection matrix ('' skips; minutes per n)")
    ap.add_argument("--rows-ns", default="1e4", help="n of the catalog rows' part [4] ('' skips)")
    ap.add_argument("--rows-eps0s", default="0.5,1,2", help="eps0 of the catalog rows' part [4]")
    ap.add_argument("--lattice-ns", default="", help="n of part [5], coarsened vs lattice upper ('' skips; "
                    "e.g. 1e3,1e4,1e5,1e6, minutes per n)")
    ap.add_argument("--grid-table", action="store_true",
                    help="[1b] instead of [1]: one batched call per n over all k x eps0")
    ap.add_argument("--no-lower", action="store_true", help="skip the lower bound (three more searches)")
    ap.add_argument("--no-cache", action="store_true")
    a = ap.parse_args()
    print(f"started {time.strftime('%H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}; jaxshuffle from {os.path.dirname(js.__file__)}", flush=True)
    if a.ns:
        (grid_table if a.grid_table else table)(a, a.delta)
    if a.batch:
        batch(a, a.delta)
    if a.matrix_ns or a.subset_ns:
        matrices(a, a.delta)
    if a.rows_ns:
        rows(a, a.delta)
    if a.lattice_ns:
        lattice(a, a.delta)
    print(f"finished {time.strftime('%H:%M UTC', time.gmtime())}; load average {os.getloadavg()[1]:.1f} "
          f"(5 min) on {os.cpu_count()} cores: timings on a shared CPU are upper bounds.")


if __name__ == "__main__":
    main()
