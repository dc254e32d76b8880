"""Round-by-round accounting: seconds per answer as rounds arrive, against dp_accounting in the same run.

365 daily rounds of 50-ary randomized response at eps0 = 2 among n = 1e6 users, delta = 1e-6.
jaxshuffle: ``RoundAccountant(expected_rounds=365)`` gets one more round each day and is asked
``get_epsilon(1e-6)``; the figure is the median seconds of that step (compose + answer) over the
days measured, warm (after the first answer). Baseline, same grid: dp_accounting's
``PLDAccountant`` keeps a running ``PrivacyLossDistribution``; each day composes the exported round
PLD into it and asks ``get_epsilon_for_delta``. Both report the eps at day 365 (ours certified;
dp_accounting's is its arithmetic on our pessimistic PLD, not certified).

With ``--sample-rate g`` the days sample their clients (each user takes part with probability g):
the sampled round's PLD is k-RR's blanket pair at a real k (built once, timed), the 365 days are
composed and asked once, beside full participation's eps from the first part.

Usage: python3 benchmarks/round_accountant.py [--days 365] [--measure 30] [--sample-rate 0.05]
         [--out benchmarks/results/round_accountant_cpu.txt]
``--measure`` days are timed at the end of the run (the last ones, the largest compositions).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import jaxshuffle as js
from jaxshuffle.accountant import to_dp_accounting


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--measure", type=int, default=30)
    ap.add_argument("--sample-rate", type=float, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    day = js.ShuffledRound("grr", {"eps0": 2.0, "k": 50}, n=1_000_000)
    delta = 1e-6

    acc = js.RoundAccountant(expected_rounds=args.days)
    t0 = time.perf_counter()
    acc.compose(day)
    first_eps = acc.get_epsilon(delta)
    cold = time.perf_counter() - t0
    acc.compose(day, args.days - args.measure - 1)
    acc.get_epsilon(delta)
    ours = []
    for _ in range(args.measure):
        t = time.perf_counter()
        acc.compose(day)
        eps = acc.get_epsilon(delta)
        ours.append(time.perf_counter() - t)

    from dp_accounting.pld import privacy_loss_distribution as pldm

    exported = to_dp_accounting(acc.round_plds()[0][0], neighboring_relation="replace_one")
    running = pldm.identity(value_discretization_interval=acc.discretization).compose(
        exported.self_compose(args.days - args.measure))
    theirs = []
    for _ in range(args.measure):
        t = time.perf_counter()
        running = running.compose(exported)
        their_eps = running.get_epsilon_for_delta(delta)
        theirs.append(time.perf_counter() - t)

    lines = [
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores; "
        f"50-RR, eps0 = 2, n = 1e6, delta = 1e-6, grid {acc.discretization:.4g}, pair: {acc.round_plds()[0][0].source}",
        f"jaxshuffle RoundAccountant: first round (build + answer) {cold:.2f} s, eps {first_eps:.6f}; "
        f"per new round, days {args.days - args.measure + 1}-{args.days}: median {statistics.median(ours):.3f} s, "
        f"max {max(ours):.3f} s; eps at day {args.days}: {eps:.6f} (certified)",
        f"dp_accounting running PLD, same days: median {statistics.median(theirs):.3f} s, max {max(theirs):.3f} s; "
        f"eps at day {args.days}: {their_eps:.6f}",
    ]
    if args.sample_rate is not None:
        sampled_day = day._replace(sample_rate=args.sample_rate)
        sampled = js.RoundAccountant(expected_rounds=args.days)
        t = time.perf_counter()
        sampled.compose(sampled_day)
        sampled.get_epsilon(delta)
        build = time.perf_counter() - t
        sampled.compose(sampled_day, args.days - 1)
        t = time.perf_counter()
        sampled_eps = sampled.get_epsilon(delta)
        answer = time.perf_counter() - t
        lines.append(f"clients sampled at g = {args.sample_rate:g} ({sampled.round_plds()[0][0].source}): first round "
                     f"{build:.1f} s, {args.days} rounds composed and answered in {answer:.2f} s; eps at day "
                     f"{args.days}: {sampled_eps:.6f} (certified), {eps / sampled_eps:.1f}x below full participation")
    print("\n".join(lines))
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"# {time.strftime('%Y-%m-%d')}: --days {args.days} --measure {args.measure} "
                    f"--sample-rate {args.sample_rate}\n")
            f.write("\n".join(lines) + "\n\n")


if __name__ == "__main__":
    main()
