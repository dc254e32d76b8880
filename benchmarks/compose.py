"""Composition over rounds (issue 17): seconds (cold and warm) to a certified composed epsilon, against
dp_accounting and Koskela et al.'s method on the same cases, in the same run.

1. jaxshuffle, stronger clone (eps0 = 1), for each n and T: build the round PLD for T rounds (both
   discretisations), compose T rounds, read eps at delta. Cold = first call in this process
   (compilation included; the persistent cache may hold programs from an earlier run: --no-cache for
   a true cold start), warm = the same call again. dp_accounting composes the exported pessimistic
   PLD (``self_compose(T)``, ``get_epsilon_for_delta``) on the same grid. n >= 1e7 runs in a
   subprocess killed after --cap seconds, built and composed once (cold only), for --big-rounds.
2. Koskela et al. (DPBayes/numerical-shuffler-experiments; benchmarks/peers/koskela.py re-implements
   it): the stronger clone's PLD on their grid (nx = 1e7 on [-20, 20]), built once per n (their
   script rebuilds it for every T), composed by one FFT per T, eps by bisection. The build stops
   after --cap seconds ("> cap", with the share of cells done). Their per-cell Python loop as written
   is timed at --literal-n.
3. k-RR (k = 10, eps0 = 1): the blanket pair's PLD (accountant.blanket_pld.blanket_round) next to
   the worst-case pair's (shuffled_round), build and compose seconds and composed eps at T = --blanket-T.
4. Targets (warm): T = 1000 at n = 1e6 within 2 s; a 100-point (eps0, T) grid within 60 s.
5. The two constructions of the worst-case pair's round (round_pld's method), paired in one process:
   cells against the connected profile at --route-n, T = 1000 (build and compose, warm, and the composed
   eps); and the profile alone at n = 1e8 (cells: 5.7e9), one and ten rounds, against the two-count
   engine's certified bracket (T = 1) and dp_accounting composing the exported PLD (T = 10).
6. The tight pair at production n (--krr-question runs this section alone): 365 rounds of 50-ary RR at
   eps0 = 2, n = 1e6, delta = 1e-6 (`jaxshuffle compose --randomizer grr --k 50 --eps0 2 --n 1e6
   --rounds 365`), by composed_epsilon's default rule (the blanket pair's PLD from 128 profile points
   above n = 1e5) beside the worst-case pair alone (blanket_points = 0) and 512 profile points: seconds
   cold (first call in this process) and warm (the same call again), the blanket round's build alone
   warm, and the composed eps.

Usage: python3 benchmarks/compose.py [--n 1e4,1e6,1e8] [--rounds 10,100,1000] [--big-rounds 100]
         [--cap 300] [--grid-points 100] [--blanket-n 1e4,1e5] [--literal-n 1e4] [--no-koskela] [--full]
--full runs every T at n >= 1e7 too (three capped subprocesses instead of one).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

if "--no-cache" in sys.argv:
    os.environ["JAXSHUFFLE_CACHE"] = "off"

import numpy as np  # noqa: E402

import jaxshuffle as js  # noqa: E402
from jaxshuffle.accountant import compose, round_pld, shuffled_round, to_dp_accounting  # noqa: E402
from jaxshuffle.accountant.blanket_pld import blanket_round  # noqa: E402
from jaxshuffle.accountant.pld import _plan_cells, default_discretization  # noqa: E402
from jaxshuffle.randomizers import grr  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import koskela  # noqa: E402

BIG_N = 1e7  # from here on a case runs in a capped subprocess


def timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def planned(n: float, T: int):
    pair = js.stronger_clone_pair(1.0)
    grid = default_discretization(pair, n, T)
    _, _, cells, _ = _plan_cells(tuple(float(x) for x in (pair.u, pair.v, pair.r0, pair.r1)), n, grid, 1e-16)
    return grid, cells.window * (cells.row + 1), cells.bins


def one_case(n: float, T: int, delta: float, warm: bool = True, emit=None) -> dict:
    """jaxshuffle (and dp_accounting) on one (n, T); ``emit`` gets the partial record after each step."""
    emit = emit or (lambda rec: None)
    pair = js.stronger_clone_pair(1.0)
    rec = dict(n=n, T=T)
    r, rec["pld_cold"] = timed(lambda: round_pld(pair, n, rounds=T))
    rec["bins"] = len(r.upper_forward.probs)
    rec["route"] = "cells" if r.lower_forward is not None else "profile"
    emit(rec)
    if warm:
        r, rec["pld_warm"] = timed(lambda: round_pld(pair, n, rounds=T))
    c, rec["comp_cold"] = timed(lambda: compose([(r, T)], delta))
    rec["upper"], rec["lower"] = float(c.upper), float(c.lower)
    emit(rec)
    if warm:
        c, rec["comp_warm"] = timed(lambda: compose([(r, T)], delta))
    try:
        exported = to_dp_accounting(r, neighboring_relation="replace_one")
        rec["dp_eps"], rec["dp_s"] = timed(lambda: exported.self_compose(T).get_epsilon_for_delta(delta))
    except ImportError:
        pass
    emit(rec)
    return rec


def child(spec: str) -> None:
    n, T, delta = spec.split(",")
    one_case(float(n), int(T), float(delta), warm=False, emit=lambda rec: print(json.dumps(rec), flush=True))


def capped_case(n: float, T: int, delta: float, cap: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", f"{n},{T},{delta}"]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=cap).stdout
        killed = False
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        killed = True
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    rec = json.loads(lines[-1]) if lines else dict(n=n, T=T)
    rec["killed"], rec["wall"] = killed, time.perf_counter() - t0
    return rec


def f(rec, key, fmt, width):
    return format(rec[key], fmt).rjust(width) if key in rec else "-".rjust(width)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="1e4,1e6,1e8")
    ap.add_argument("--rounds", default="10,100,1000")
    ap.add_argument("--big-rounds", default="100", help="T run at n >= 1e7 (each a capped subprocess)")
    ap.add_argument("--full", action="store_true", help="every T of --rounds at n >= 1e7 too")
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--cap", type=float, default=300.0, help="seconds per capped case / Koskela build")
    ap.add_argument("--grid-points", type=int, default=100, help="points of the (eps0, T) grid timing (0: skip)")
    ap.add_argument("--blanket-n", default="1e4,1e5", help="n of the k-RR blanket-pair PLD timing ('' skips)")
    ap.add_argument("--blanket-T", type=int, default=100)
    ap.add_argument("--blanket-points", type=int, default=512)
    ap.add_argument("--literal-n", default="1e4", help="n at which Koskela's per-cell loop is timed as written")
    ap.add_argument("--no-koskela", action="store_true")
    ap.add_argument("--route-n", default="1e6", help="n of the cells-against-profile pairing ('' skips section 5)")
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--krr-question", action="store_true", help="run section 6 alone")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child)
    if args.krr_question:
        return krr_question(args.delta)
    ns = [float(x) for x in args.n.split(",")]
    Ts = [int(x) for x in args.rounds.split(",")]
    big_Ts = Ts if args.full else [int(x) for x in args.big_rounds.split(",") if x]
    delta = args.delta
    print(f"stronger clone, eps0 = 1, delta = {delta:g}; jax {js._config.jax.__version__}, "
          f"device {js._config.jax.devices()[0].platform}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"started {time.strftime('%H:%M UTC', time.gmtime())}; jaxshuffle from {os.path.dirname(js.__file__)}",
          flush=True)
    print("\n[1] jaxshuffle (cold = first call in this process, warm = again) and dp_accounting on the exported PLD")
    print(f"{'n':>6} {'T':>5} {'grid':>8} {'cells':>8} {'bins':>7} {'PLD cold':>8} {'PLD warm':>8} {'comp cold':>9} "
          f"{'comp warm':>9} {'eps upper':>9} {'eps lower':>9} {'dp_acc eps':>10} {'dp_acc s':>8} {'route':>7}",
          flush=True)
    results = {}
    for n in ns:
        for T in Ts:
            grid, cells, bins = planned(n, T)
            head = f"{n:6.0e} {T:5d} {grid:8.2e} {cells:8.1e}"
            if n >= BIG_N:
                if T not in big_Ts:
                    print(f"{head}  not run: {cells:.1e} cells per round, planned {bins} bins; only T in {big_Ts} "
                          f"is run at this n (--full runs all)", flush=True)
                    continue
                rec = capped_case(n, T, delta, args.cap)
            else:
                rec = one_case(n, T, delta)
            results[(n, T)] = rec
            note = ""
            if n >= BIG_N:
                note = f"  one capped subprocess ({rec['wall']:.0f} s wall{', KILLED at cap' if rec['killed'] else ''})"
            print(f"{head} {f(rec, 'bins', 'd', 7)} {f(rec, 'pld_cold', '.2f', 8)} {f(rec, 'pld_warm', '.2f', 8)} "
                  f"{f(rec, 'comp_cold', '.2f', 9)} {f(rec, 'comp_warm', '.2f', 9)} {f(rec, 'upper', '.6f', 9)} "
                  f"{f(rec, 'lower', '.6f', 9)} {f(rec, 'dp_eps', '.6f', 10)} {f(rec, 'dp_s', '.2f', 8)} "
                  f"{rec.get('route', '-'):>7}{note}",
                  flush=True)

    if not args.no_koskela:
        print(f"\n[2] Koskela et al. (benchmarks/peers/koskela.py), stronger clone PLD on nx = {koskela.NX:.0e} bins "
              f"of [-{koskela.L_RANGE:g}, {koskela.L_RANGE:g}], build capped at {args.cap:.0f} s")
        print(f"{'n':>6} {'cells':>8} {'build s':>8} {'T':>5} {'FFT+bisect s':>12} {'eps':>9} {'err term':>8} "
              f"{'jaxshuffle [lower, upper]':>25}", flush=True)
        for n in ns:
            pld = koskela.stronger_clone_pld(int(n), 1.0, cap=args.cap)
            if not pld.complete:
                est = pld.seconds * pld.cells / max(pld.done, 1)
                print(f"{n:6.0e} {pld.cells:8.1e} {'> cap':>8}  stopped after {pld.seconds:.0f} s with "
                      f"{100 * pld.done / pld.cells:.1f} % of the cells (est. {est:.0f} s for all); not composed",
                      flush=True)
                continue
            for T in Ts:
                eps, s = timed(lambda: koskela.compose_epsilon(pld, T, delta))
                ours = results.get((n, T), {})
                ref = (f"[{ours['lower']:.6f}, {ours['upper']:.6f}]" if "lower" in ours else "-")
                print(f"{n:6.0e} {pld.cells:8.1e} {pld.seconds:8.2f} {T:5d} {s:12.2f} {eps:9.6f} "
                      f"{pld.error_term(T):8.1e} {ref:>25}", flush=True)
        for n in (float(x) for x in args.literal_n.split(",") if x):
            sec, done, cells, omega = koskela.literal_loop_seconds(int(n), 1.0, cap=args.cap)
            if omega is None:
                print(f"their per-cell Python loop as written, n = {n:.0e}: > cap ({done:.1e} of {cells:.1e} cells in "
                      f"{sec:.0f} s; est. {sec * cells / max(done, 1):.0f} s)", flush=True)
            else:
                vec = koskela.stronger_clone_pld(int(n), 1.0)
                diff = float(np.max(np.abs(omega - vec.omega)))
                print(f"their per-cell Python loop as written, n = {n:.0e}: {sec:.1f} s for {cells:.1e} cells "
                      f"({sec / cells * 1e6:.1f} us/cell; the row-vectorised build above: {vec.seconds:.2f} s, "
                      f"same histogram to {diff:.1e})", flush=True)
                est = ", ".join(f"n = {m:.0e}: {koskela.cell_count(int(m), 1.0) * sec / cells:.0f} s"
                                for m in ns if m > n)
                if est:
                    print(f"  at that rate their loop would take {est} (not run)", flush=True)

    if args.blanket_n:
        T = args.blanket_T
        print(f"\n[3] k-RR k = 10, eps0 = 1, T = {T}, delta = {delta:g}: worst-case pair (shuffled_round) vs blanket "
              f"pair (blanket_round, {args.blanket_points} profile points), same grid")
        print(f"{'n':>6} {'pair':>10} {'bins':>6} {'PLD cold':>8} {'PLD warm':>8} {'comp cold':>9} {'comp warm':>9} "
              f"{'eps upper':>9}", flush=True)
        for n in (float(x) for x in args.blanket_n.split(",")):
            for name, build in (("worst-case", lambda: shuffled_round(grr(1.0, 10), n, rounds=T)),
                                ("blanket", lambda: blanket_round(1.0, 10, n, rounds=T, points=args.blanket_points))):
                r, b_cold = timed(build)
                r, b_warm = timed(build)
                c, c_cold = timed(lambda: compose([(r, T)], delta))
                c, c_warm = timed(lambda: compose([(r, T)], delta))
                print(f"{n:6.0e} {name:>10} {len(r.upper_forward.probs):6d} {b_cold:8.2f} {b_warm:8.2f} "
                      f"{c_cold:9.2f} {c_warm:9.2f} {float(c.upper):9.6f}", flush=True)

    print("\n[4] targets (issue 17), warm")
    rec = results.get((1e6, 1000))
    if rec and "pld_warm" in rec:
        tot = rec["pld_warm"] + rec["comp_warm"]
        print(f"T = 1000 at n = 1e6: {rec['pld_warm']:.2f} s PLD + {rec['comp_warm']:.2f} s compose = {tot:.2f} s "
              f"(target 2 s: {'met' if tot <= 2 else 'MISSED'})", flush=True)
    else:
        print("T = 1000 at n = 1e6: not run (needs --n with 1e6 and --rounds with 1000)")
    if args.grid_points:
        side = int(round(math.sqrt(args.grid_points)))
        eps0s, Tg = np.linspace(0.5, 2.0, side), np.unique(np.geomspace(1, 100, side).round().astype(int))
        n = 1e4

        def grid_run():
            out = []
            for e in eps0s:
                r = round_pld(js.stronger_clone_pair(float(e)), n, rounds=int(Tg.max()))
                out.append(js.accountant.epsilon_over_rounds(r, Tg, delta).upper)
            return np.array(out)

        _, cold = timed(grid_run)
        vals, warm = timed(grid_run)
        print(f"(eps0, T) grid at n = 1e4 (eps0 in [0.5, 2], T in [1, 100]): {len(eps0s)} x {len(Tg)} = {vals.size} "
              f"points, cold {cold:.1f} s, warm {warm:.1f} s (target 60 s: {'met' if warm <= 60 else 'MISSED'})",
              flush=True)
    if args.route_n:
        routes(args.route_n, delta)
    print(f"finished {time.strftime('%H:%M UTC', time.gmtime())}; load average {os.getloadavg()[1]:.1f} "
          f"(5 min) on {os.cpu_count()} cores: timings on a shared CPU are upper bounds.")


def routes(route_n: str, delta: float) -> None:
    """Section 5: round_pld's two constructions paired, and the profile at n = 1e8."""
    print("\n[5] the worst-case pair's round: cells against the connected profile (warm: second call; stronger clone, "
          "eps0 = 1)")
    print(f"{'n':>6} {'T':>5} {'method':>8} {'bins':>8} {'PLD warm':>8} {'comp warm':>9} {'eps upper':>10}", flush=True)
    pair = js.stronger_clone_pair(1.0)
    for n in (float(x) for x in route_n.split(",") if x):
        T = 1000
        for method in ("cells", "profile"):
            build = lambda: round_pld(pair, n, rounds=T, method=method)  # noqa: E731, B023
            build()
            r, b = timed(build)
            compose([(r, T)], delta)
            c, s = timed(lambda: compose([(r, T)], delta))  # noqa: B023
            print(f"{n:6.0e} {T:5d} {method:>8} {len(r.upper_forward.probs):8d} {b:8.2f} {s:9.2f} "
                  f"{float(c.upper):10.6f}", flush=True)
    n = 1e8
    engine = js.epsilon(pair, n, delta)
    for T in (1, 10):
        r, cold = timed(lambda: round_pld(pair, n, rounds=T))  # noqa: B023
        r, warm = timed(lambda: round_pld(pair, n, rounds=T))  # noqa: B023
        c, s = timed(lambda: compose([(r, T)], delta))  # noqa: B023
        line = (f"n = 1e8, T = {T:2d}: profile PLD cold {cold:.2f} s, warm {warm:.2f} s, compose {s:.2f} s, "
                f"eps upper {float(c.upper):.6f}")
        if T == 1:
            line += f"; the engine's certified bracket [{float(engine.lower):.6f}, {float(engine.upper):.6f}]"
        else:
            try:
                theirs = to_dp_accounting(r, neighboring_relation="replace_one").self_compose(T)
                line += f"; dp_accounting on the exported PLD {theirs.get_epsilon_for_delta(delta):.6f}"
            except ImportError:
                pass
        print(line, flush=True)


def krr_question(delta: float, n: float = 1e6, T: int = 365) -> None:
    """Section 6: the blanket pair by default at n = 1e6, against the worst-case pair and 512 points."""
    from jaxshuffle.accountant.rounds import composed_epsilon
    from jaxshuffle.pld.blanket import default_blanket_points

    print(f"\n[6] 365 rounds of 50-ary RR, eps0 = 2, n = {n:.0e}, delta = {delta:g} "
          f"(default rule: {int(default_blanket_points(n))} blanket profile points); jax {js._config.jax.__version__}, "
          f"{os.cpu_count()} CPUs", flush=True)
    print(f"{'pair (blanket_points)':>28} {'cold s':>7} {'warm s':>7} {'round warm s':>12} {'eps upper':>10} "
          f"{'from':>12}")
    rand = grr(2.0, 50)
    worst = None
    for label, points in (("worst-case only (0)", 0), ("default rule", None), ("blanket (512)", 512)):
        run = lambda: composed_epsilon(rand, n, T, delta, blanket_points=points)  # noqa: E731, B023
        _, cold = timed(run)
        c, warm = timed(run)
        build = "-"
        if points != 0:
            grid = float(c.discretization)
            m = int(default_blanket_points(n)) if points is None else points
            _, b = timed(lambda: blanket_round(2.0, 50, n, discretization=grid, rounds=T, points=m))  # noqa: B023
            build = f"{b:.2f}"
        eps = float(np.ravel(c.upper)[0])
        worst = eps if points == 0 else worst
        print(f"{label:>28} {cold:7.2f} {warm:7.2f} {build:>12} {eps:10.6f} {str(np.ravel(c.upper_source)[0]):>12}"
              + ("" if points == 0 else f"  ({worst / eps:.2f}x tighter)"), flush=True)


if __name__ == "__main__":
    main()
