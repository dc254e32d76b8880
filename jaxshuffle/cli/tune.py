"""``jaxshuffle tune``: split one certified composed (eps, delta) budget across shuffled queries.

    jaxshuffle tune --query grr:k=2 --query grr:k=10 --query grr:k=100 --n 1e5 --target 1 --delta 1e-6

Each ``--query FAMILY[:opt=value,...]`` is a catalog randomizer with an ``eps0`` option; the
reserved options ``n=`` and ``count=`` set that query's users and repeats (default ``--n``, 1).
Prints the allocation, the certified composed bound and the gain over equal split (``--json``:
one object). The utility is each family's ready error (:func:`jaxshuffle.accountant.tune.default_utility`).
Ctrl-C (exit 130) and SIGTERM (exit 143) stop it with one line on stderr, as ``jaxshuffle sweep``.
"""

from __future__ import annotations

import argparse
import json
import math


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


def add_tune_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``tune`` to an argparse subparsers object (handler stored as ``func``)."""
    p = subparsers.add_parser(
        "tune", help="per-query eps0 minimising total error under one certified composed budget",
        description="Budget tuning (docs/math.md, Budget tuning): optax on a smooth surrogate of the composed "
                    "epsilon, then a certified bisection on a common scale so that the certified composed "
                    "epsilon (PLD + FFT) is <= --target.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--query", action="append", required=True, metavar="FAMILY[:opt=v,...]",
                   help="a query, e.g. grr:k=10 (repeat the flag; n=... and count=... override --n and 1)")
    p.add_argument("--n", type=float, default=None, help="users per query (integer >= 2)")
    p.add_argument("--target", type=float, required=True, help="composed epsilon, > 0")
    p.add_argument("--delta", type=float, required=True, help="composed delta in (0, 1)")
    p.add_argument("--steps", type=int, default=200, help="optimiser steps (default 200)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_tune)
    return p


def run_tune(args) -> int:
    from jaxshuffle.accountant.tune import query, tune

    if not (math.isfinite(args.target) and args.target > 0):
        raise ValueError(f"target: must be a finite number > 0, got {args.target:g}")
    if not 0 < args.delta < 1:
        raise ValueError(f"delta: must lie in (0, 1), got {args.delta:g}")
    if args.steps < 0:
        raise ValueError(f"steps: must be an integer >= 0, got {args.steps}")
    queries = []
    for i, text in enumerate(args.query):
        family, opts = _parse_query(text)
        n = opts.pop("n", args.n)
        if n is None:
            raise ValueError(f"n: give --n or n= in query {i} ({text!r})")
        count = opts.pop("count", 1.0)
        if count != int(count) or count < 1:
            raise ValueError(f"count: must be an integer >= 1 in query {i} ({text!r}), got {count:g}")
        queries.append(query(family, n=n, count=int(count), **opts))
    r = tune(queries, None, args.target, args.delta, steps=args.steps)
    names = list(args.query)
    if args.json:
        out = {"queries": [{"query": q, "n": qq.n, "count": qq.count, "eps0": float(e), "equal_split_eps0": float(b)}
                           for q, qq, e, b in zip(names, queries, r.eps0, r.baseline_eps0)],
               "target": r.target, "delta": r.delta, "upper": r.upper, "lower": r.lower,
               "utility": r.utility, "equal_split_upper": r.baseline_upper, "equal_split_lower": r.baseline_lower,
               "equal_split_utility": r.baseline_utility, "gain": r.gain, "surrogate": r.surrogate,
               "discretization": r.discretization, "certified": bool(r.upper <= r.target)}
        print(json.dumps(out, indent=1, allow_nan=False))
        return 0
    width = max(len(x) for x in names + ["query"])
    print(f"Budget tuning: {len(queries)} queries through a shuffler, composed; target ({r.target:g}, {r.delta:g})-DP.")
    print("  utility: total MSE of each query's estimator (lower is better)")
    print(f"  {'query':<{width}} {'n':>10} {'count':>5} {'tuned eps0':>11} {'equal eps0':>11}")
    for name, q, e, b in zip(names, queries, r.eps0, r.baseline_eps0):
        print(f"  {name:<{width}} {q.n:>10.4g} {q.count:>5d} {e:>11.4f} {b:>11.4f}")
    print(f"  certified composed eps: tuned [{r.lower:.4f}, {r.upper:.4f}], equal split "
          f"[{r.baseline_lower:.4f}, {r.baseline_upper:.4f}] (upper certified, <= {r.target:g})")
    print(f"  total MSE: tuned {r.utility:.4g}, equal split {r.baseline_utility:.4g}; "
          f"gain {r.gain:.3f}x ({100 * (1 - 1 / r.gain):.1f} % lower error)")
    return 0
