"""``jaxshuffle compose``: certified epsilon of T shuffled rounds on the same users.

    jaxshuffle compose --randomizer grr --k 10 --eps0 1 --n 1e4 --rounds 1..1000:20 --delta 1e-6

Per (T, delta): the smallest certified bound on the T rounds and its source
(:func:`jaxshuffle.accountant.rounds.composed_epsilon`, docs/math.md section 13.8), next to each
candidate. ``--json``: one object per (T, delta); ``--plot``: composed eps against T.
Ctrl-C (exit 130) and SIGTERM (exit 143) stop it with one line on stderr, as ``jaxshuffle sweep``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from jaxshuffle.cli._common import (
    UsageError,
    add_entry_options,
    assumptions,
    catalog_entry,
    check_output_path,
    entry_options,
    fmt,
    grid_type,
    num,
)


def add_compose_parser(subparsers, entry) -> argparse.ArgumentParser:
    """Add ``compose`` to an argparse subparsers object (handler stored as ``func``); ``entry`` is the
    catalog entry named by ``--randomizer`` (its options become flags), or None."""
    p = subparsers.add_parser(
        "compose", help="certified epsilon of T shuffled rounds, composed (PLD + FFT)",
        description="Composed (eps, delta) of T rounds of n users' shuffled messages: the certified pairs' "
                    "privacy-loss distributions (worst-case pair; for k-RR also the blanket pair), composed by FFT "
                    "with every error on the safe side (docs/math.md section 13), next to basic and advanced "
                    "composition of the one-round bound.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--randomizer", required=True, help="catalog name (see `jaxshuffle randomizers`)")
    add_entry_options(p, entry)
    p.add_argument("--n", type=grid_type("n"), required=True, metavar="N",
                   help="number of users (integer >= 2; rounded as in a sweep)")
    p.add_argument("--rounds", type=grid_type("rounds", integer=True), required=True, metavar="T[,T...]",
                   help="numbers of rounds (integers >= 1; a grid such as 1..1000:20 is rounded to integers)")
    p.add_argument("--delta", type=grid_type("delta"), required=True, metavar="D[,D...]", help="total delta in (0, 1)")
    p.add_argument("--discretization", type=float, default=None,
                   help="loss grid spacing (default: about 1e-3 relative accuracy at the largest T)")
    p.add_argument("--blanket-points", type=int, default=None, metavar="M",
                   help="profile points of the k-RR blanket pair's PLD (0 skips it; default 512 up to n = 1e5 and "
                        "0 above, where each profile point costs more)")
    p.add_argument("--json", action="store_true", help="print a JSON list, one object per (T, delta)")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="also draw composed eps against T next to basic and advanced composition (needs matplotlib)")
    p.set_defaults(func=run_compose)
    return p


def run_compose(args) -> int:
    from jaxshuffle.accountant.pld import MAX_DEFAULT_ROUNDS
    from jaxshuffle.accountant.rounds import composed_epsilon

    entry = catalog_entry(args.randomizer)
    opts = entry_options(args, entry)
    for k, v in opts.items():
        if len(v) != 1:
            raise UsageError(f"{k}: compose takes one value per randomizer option, got {len(v)}")
    if len(args.n) != 1:
        raise UsageError(f"n: compose takes one number of users, got {len(args.n)}")
    n = args.n[0]
    params = entry.fn(**{k: v[0] for k, v in opts.items()})
    rounds = np.asarray(args.rounds, np.float64)
    if not np.all(np.isfinite(rounds) & (rounds >= 1)):
        raise UsageError("rounds: must be integers >= 1")
    if args.discretization is None and rounds.max() > MAX_DEFAULT_ROUNDS:
        raise UsageError(f"rounds: {rounds.max():.6g} is above {MAX_DEFAULT_ROUNDS}, the most rounds composed at the "
                         "default discretization; pass a coarser --discretization (a looser bound) or fewer rounds")
    if rounds.max() > 2.0 ** 53:
        raise UsageError(f"rounds: {rounds.max():.6g} is above 2^53, the largest integer count supported")
    rounds = np.unique(np.round(rounds)).astype(np.int64)
    delta = np.asarray(args.delta, np.float64)
    if not np.all((delta > 0) & (delta < 1)):
        raise UsageError("delta: must lie in (0, 1)")
    if args.plot is not None:
        check_output_path("plot", args.plot)
    if args.blanket_points is not None and args.blanket_points < 0:
        raise UsageError(f"blanket-points: must be an integer >= 0, got {args.blanket_points}")
    c = composed_epsilon(params, n, rounds, delta, discretization=args.discretization,
                         blanket_points=args.blanket_points)
    rows = []
    for i, T in enumerate(c.rounds):
        for j, d in enumerate(c.delta):
            rows.append({"randomizer": args.randomizer, "options": {k: float(v[0]) for k, v in opts.items()},
                         "n": float(n), "rounds": int(T), "delta": float(d),
                         "upper": num(c.upper[i, j]), "upper_source": str(c.upper_source[i, j]),
                         "pld": num(c.pld[i, j]), "blanket_pld": num(c.blanket_pld[i, j]),
                         "lower": num(c.lower[i, j]),
                         "basic": num(c.basic[i, j]), "advanced": num(c.advanced[i, j]),
                         "discretization": c.discretization, "clone_proof": c.clone_proof})
    if args.plot is not None:
        from jaxshuffle import plot as jplot

        jplot.composition_curve(rows, args.plot)
    if args.json:
        print(json.dumps(rows, indent=1, allow_nan=False))
        return 0

    def inf(x):
        return float("inf") if x is None else x

    print(assumptions(entry, args.randomizer) + " The same users take part in every round.")
    print(f"  worst-case pair: the {c.clone_proof} clone (docs/math.md 5.4).")
    print("  certified eps: the smallest certified bound on the T rounds: the PLD composition of the worst-case "
          "pair and, for k-RR, of the blanket pair (each composed on its own), and basic and advanced composition "
          "of the one-round bound (for k-RR the blanket pair's).")
    print(f"  {'T':>7} {'delta':>9} {'certified eps':>14} {'from':>11} {'PLD':>10} {'(pair, from below)':>19} "
          f"{'blanket PLD':>11} {'basic':>10} {'advanced':>10}")
    for row in rows:
        print(f"  {row['rounds']:>7d} {row['delta']:>9.3g} {fmt(inf(row['upper'])):>14} {row['upper_source']:>11} "
              f"{fmt(inf(row['pld'])):>10} {fmt(row['lower']):>19} {fmt(inf(row['blanket_pld'])):>11} "
              f"{fmt(inf(row['basic'])):>10} {fmt(inf(row['advanced'])):>10}")
    return 0
