"""k-ary RR edge cases: seconds to an answer or a refusal, cold and warm, each case in a fresh process.

The cases are the calls that once gave no answer within 120 s: k-RR at eps0 = 50 with its lower pair,
calibrations of eps0 to a target far above every certified bound (100) and far below (1e-12), and of n
for target 0.1 in one round and over ten. Each runs in its own interpreter with an empty compilation cache
(cold: tracing and compilation included), then twice more in the same process: the second call compiles
the optimised programs where the first ran quickly compiled ones (jaxshuffle._programs) and repeats
the same question (its engine results memoised in the process), the third is warm: a nearby question
(n + 1, or the target moved by 0.1 %) on compiled programs. Beside each, the
baseline a user would otherwise run: the rule itself at the answer (``amplify``, or ``composed_epsilon``
over ten rounds at the returned n and n - 1), timed in the same process after the warm call; for a
refusal, the certified bound the result states.

Usage: python3 benchmarks/edge_cases.py [--cases 1,2,3,4,5] [--out benchmarks/results/edge_cases_cpu.txt]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

CASES = {
    1: "amplify(R.grr(50.0, 10), 1e4 + o, 1e-6, lower_params=R.grr_lower(50.0, 10))",
    2: 'calibrate_eps0("grr", 100.0 + o, 1e4, 1e-6, k=10)',
    3: 'calibrate_eps0("grr", 1e-12 * (1 + o / 1000), 1e4, 1e-6, k=10)',
    4: 'calibrate_n("grr", 0.1 * (1 + o / 1000), 1e-6, eps0=1.0, k=10)',
    5: 'calibrate_n("grr", 0.1 * (1 + o / 1000), 1e-6, eps0=1.0, k=10, rounds=10)',
}


def shown(case: int) -> str:
    """The case's call as a user writes it (o = 0)."""
    return CASES[case].replace(" * (1 + o / 1000)", "").replace(" + o", "")


def child(case: int) -> None:
    import numpy as np

    import jaxshuffle as js
    from jaxshuffle import randomizers as R
    from jaxshuffle.accountant import amplify, calibrate_eps0, calibrate_n, composed_epsilon

    env = dict(R=R, amplify=amplify, calibrate_eps0=calibrate_eps0, calibrate_n=calibrate_n)
    times, result, first = [], None, None
    for o in (0, 0, 1):  # the third call nearby (o = 1): engine results are memoised per process
        t = time.perf_counter()
        result = eval(CASES[case], dict(env, o=o))  # noqa: S307 (the fixed expressions above)
        times.append(time.perf_counter() - t)
        if o == 0:
            first = result
    result = first
    t = time.perf_counter()
    if case == 1:
        answer = f"upper {float(result.upper):.6g}, lower {float(result.lower):.6g}"
        base = amplify(R.grr(50.0, 10), 1e4, 1e-6)
        baseline = f"amplify without lower_params: upper {float(base.upper):.6g}"
    elif case in (2, 3):
        answer = f"eps0 {float(result.value):.6g}, status {int(result.status)}, upper {float(result.upper):.6g}"
        v = float(result.value)
        base = amplify(R.grr(v, 10), 1e4, 1e-6).upper if np.isfinite(v) and v > 0 else np.nan
        baseline = f"amplify at the answer: upper {float(base):.6g}"
    else:
        n, rounds = float(result.value), 10 if case == 5 else 1
        answer = f"n {n:.0f}, status {int(result.status)}, upper {float(result.upper):.6g}"
        if case == 4:
            at = [float(amplify(R.grr(1.0, 10), m, 1e-6).upper) for m in (n, n - 1)]
        else:
            pts = int(result.blanket_points)
            at = [float(composed_epsilon(R.grr(1.0, 10), m, 10, 1e-6, blanket_points=pts).upper[0, 0])
                  for m in (n, n - 1)]
        baseline = f"the rule at n, n - 1 (rounds {rounds}): {at[0]:.6g}, {at[1]:.6g}"
    base_s = time.perf_counter() - t
    print(json.dumps(dict(case=case, cold=times[0], second=times[1], warm=times[2], answer=answer, baseline=baseline,
                          baseline_s=base_s, version=js.__version__)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="1,2,3,4,5")
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child)
        return
    lines = [f"# python3 benchmarks/edge_cases.py --cases {args.cases}",
             f"k-RR edge cases, {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at start, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; each case: a fresh process, empty cache"]
    print("\n".join(lines), flush=True)
    for case in (int(c) for c in args.cases.split(",")):
        with tempfile.TemporaryDirectory(prefix="jaxshuffle-bench-") as cache:
            env = dict(os.environ, JAXSHUFFLE_CACHE=cache, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
            out = subprocess.run([sys.executable, __file__, "--child", str(case)], env=env,
                                 capture_output=True, text=True, check=False)
        rec = next((json.loads(x) for x in reversed(out.stdout.splitlines()) if x.startswith("{")), None)
        if rec is None:
            line = f"[{case}] {shown(case)}: FAILED\n{out.stderr[-2000:]}"
        else:
            line = (f"[{case}] {shown(case)}\n    cold {rec['cold']:6.1f} s   second {rec['second']:6.1f} s   "
                    f"warm {rec['warm']:6.1f} s   "
                    f"{rec['answer']}\n    baseline ({rec['baseline_s']:.1f} s): {rec['baseline']}")
        print(line, flush=True)
        lines.append(line)
    lines.append(f"finished {time.strftime('%H:%M UTC', time.gmtime())}; load average {os.getloadavg()[1]:.1f} "
                 "over the last 5 minutes")
    print(lines[-1])
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
