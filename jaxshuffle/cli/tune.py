"""``jaxshuffle tune``: split one certified composed (eps, delta) budget across shuffled queries.

    jaxshuffle tune --query grr:k=2 --query grr:k=10 --query grr:k=100 --n 1e5 --target 1 --delta 1e-6

Each ``--query FAMILY[:opt=value,...]`` is a catalog randomizer with an ``eps0`` option; the
reserved options ``n=``, ``count=`` and ``sample_rate=`` set that query's users, repeats and
client sampling rate (default ``--n``, 1 and ``--sample-rate``, itself 1 by default). A rate below 1
(each user takes part in a round with that probability; k-ary RR only so far) is certified by the
sampled round's own PLD. Prints the allocation, the certified composed bound and the gain over
equal split (``--json``: one object; each query carries its ``sample_rate``). The utility is each
family's ready error (:func:`jaxshuffle.accountant.tune.default_utility`).
Ctrl-C (exit 130) and SIGTERM (exit 143) stop it within a fraction of a second with one line on stderr, as
``jaxshuffle sweep`` (the tuning runs in a worker thread while the main thread waits:
:func:`jaxshuffle.sweeps.stops.run_interruptible`); it keeps no partial results.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from jaxshuffle.cli._common import add_sample_rate, int_type, num
from jaxshuffle.sweeps.stops import run_interruptible

#: Largest ``--steps``: 500 times the default; each step is one optimiser update, and the history keeps one
#: value per step.
MAX_STEPS = 100_000

#: which queries take --sample-rate (or sample_rate=) below 1
SAMPLED_SCOPE = "k-ary RR queries (grr) only; a query's own sample_rate= overrides it"


def _parse_query(text: str):
    family, _, rest = text.partition(":")
    family = family.strip()
    if not family:
        raise ValueError(f"query: expected FAMILY[:opt=value,...], got {text!r}")
    opts = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"query: expected opt=value in {text!r}, got {item!r}")
        try:
            opts[key.strip()] = float(value)
        except ValueError:
            raise ValueError(f"query: {key.strip()} must be a number in {text!r}, got {value!r}") from None
    return family, opts


def add_tune_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Add ``tune`` to an argparse subparsers object (handler stored as ``func``)."""
    p = subparsers.add_parser(
        "tune", help="per-query eps0 minimising total error under one certified composed budget",
        description="Budget tuning (docs/math.md, Budget tuning): optax on a smooth surrogate of the composed "
                    "epsilon, then a certified bisection on a common scale so that the certified composed "
                    "epsilon (PLD + FFT) is <= --target.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--query", action="append", required=True, metavar="FAMILY[:opt=v,...]",
                   help="a query, e.g. grr:k=10 (repeat the flag; n=..., count=... and sample_rate=... override "
                        "--n, 1 and --sample-rate)")
    p.add_argument("--n", type=float, default=None, help="users per query (integer >= 2)")
    p.add_argument("--target", type=float, required=True, help="composed epsilon, > 0")
    p.add_argument("--delta", type=float, required=True, help="composed delta in (0, 1)")
    p.add_argument("--steps", type=int_type("steps", 0, MAX_STEPS), default=200,
                   help=f"optimiser steps, 0 to {MAX_STEPS} (default 200; 0: no optimiser step, the equal split "
                        "scaled to the target)")
    add_sample_rate(p, SAMPLED_SCOPE)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_tune)
    return p


def _bracket(lower: float, upper: float, source: str = "PLD") -> str:
    """``[lower, upper]`` where ``upper`` is the worst-case pairs' composition, whose bracket ``lower`` closes;
    ``<= upper`` where there is no lower value (a sampled round) or another of the rule's bounds gave it."""
    if math.isfinite(lower) and source == "PLD":
        return f"[{lower:.4f}, {upper:.4f}]"
    return f"<= {upper:.4f}" + ("" if source == "PLD" else f" ({source})")


def run_tune(args: argparse.Namespace) -> int:
    from jaxshuffle.accountant.subsampling import check_sample_rate
    from jaxshuffle.accountant.tune import query, tune

    if not (math.isfinite(args.target) and args.target > 0):
        raise ValueError(f"target: must be a finite number > 0, got {args.target:g}")
    if not 0 < args.delta < 1:
        raise ValueError(f"delta: must lie in (0, 1), got {args.delta:g}")
    if args.steps < 0:
        raise ValueError(f"steps: must be an integer >= 0, got {args.steps}")
    check_sample_rate(args.sample_rate)  # "sample_rate: ..." (named --sample-rate by the CLI's error path)
    queries = []
    for i, text in enumerate(args.query):
        family, opts = _parse_query(text)
        n = opts.pop("n", args.n)
        if n is None:
            raise ValueError(f"n: give --n or n= in query {i} ({text!r})")
        count = opts.pop("count", 1.0)
        if count != int(count) or count < 1:
            raise ValueError(f"count: must be an integer >= 1 in query {i} ({text!r}), got {count:g}")
        rate = opts.pop("sample_rate", None)
        if rate is not None and not 0 < rate <= 1:
            # "sample_rate= in query i": not renamed --sample-rate by the CLI's error path when that flag is given too
            raise ValueError(f"sample_rate= in query {i} ({text!r}): must lie in (0, 1] (the probability that a user "
                             f"takes part in a round), got {rate:g}")
        queries.append(query(family, n=n, count=int(count), sample_rate=args.sample_rate if rate is None else rate,
                             **opts))
    r = run_interruptible(tune, queries, None, args.target, args.delta, steps=args.steps)
    names = list(args.query)
    if args.json:
        out = {"queries": [{"query": q, "n": qq.n, "count": qq.count, "sample_rate": qq.sample_rate, "eps0": float(e),
                            "equal_split_eps0": float(b)}
                           for q, qq, e, b in zip(names, queries, r.eps0, r.baseline_eps0)],
               # lower: null where a sampled round has none (its PLD is pessimistic only)
               "target": r.target, "delta": r.delta, "upper": r.upper, "upper_source": r.upper_source,
               "worst_case_upper": num(r.worst_case_upper), "lower": num(r.lower),
               "utility": r.utility, "equal_split_upper": r.baseline_upper, "equal_split_lower": num(r.baseline_lower),
               "equal_split_utility": r.baseline_utility, "gain": r.gain, "surrogate": r.surrogate,
               "discretization": r.discretization, "certified": bool(r.upper <= r.target)}
        print(json.dumps(out, indent=1, allow_nan=False))
        return 0
    width = max(len(x) for x in names + ["query"])
    print(f"Budget tuning: {len(queries)} queries through a shuffler, composed; target ({r.target:g}, {r.delta:g})-DP.")
    print("  utility: total MSE of each query's estimator (lower is better)")
    sampled = any(q.sample_rate < 1 for q in queries)
    rate_head = f" {'sample rate':>11}" if sampled else ""
    print(f"  {'query':<{width}} {'n':>10} {'count':>5}{rate_head} {'tuned eps0':>11} {'equal eps0':>11}")
    for name, q, e, b in zip(names, queries, r.eps0, r.baseline_eps0):
        rate = f" {q.sample_rate:>11.4g}" if sampled else ""
        print(f"  {name:<{width}} {q.n:>10.4g} {q.count:>5d}{rate} {e:>11.4f} {b:>11.4f}")
    print(f"  certified composed eps: tuned {_bracket(r.lower, r.upper, r.upper_source)}, equal split "
          f"{_bracket(r.baseline_lower, r.baseline_upper, r.baseline_upper_source)} (upper certified, <= {r.target:g})")
    print(f"  total MSE: tuned {r.utility:.4g}, equal split {r.baseline_utility:.4g}; "
          f"gain {r.gain:.3f}x ({100 * (1 - 1 / r.gain):.1f} % lower error)")
    return 0
