"""``jaxshuffle compare``: every applicable bound for one randomizer side by side over a grid of (eps0, n),
as a table and a figure."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import numpy as np

from jaxshuffle.cli._common import (
    SAMPLED_SCOPE,
    UsageError,
    add_entry_options,
    add_sample_rate,
    add_upper_from,
    catalog_entry,
    check_output_dir,
    entry_options,
    fmt,
    grid_type,
)
from jaxshuffle.randomizers import Entry
from jaxshuffle.sweeps.stops import run_interruptible


def add_compare_parser(sub: argparse._SubParsersAction[Any], entry: Entry | None) -> argparse.ArgumentParser:
    """Add ``compare`` to an argparse subparsers object (handler stored as ``func``); ``entry`` is the catalog
    entry named by ``--randomizer`` (its options but eps0 become flags), or None."""
    pm = sub.add_parser("compare", help="every applicable bound side by side over a grid (table + figure)",
                        description="Certified upper, lower bound, the paper's value, numerical clones, "
                                    "closed forms and earlier bounds for one randomizer over (eps0, n, delta).",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    pm.add_argument("--randomizer", required=True, help="catalog name with an eps0 option")
    add_entry_options(pm, entry, skip=("eps0",))
    pm.add_argument("--eps0", type=grid_type("eps0"), required=True, metavar="GRID",
                    help="local budgets, e.g. 0.1:5:50")
    pm.add_argument("--n", type=grid_type("n"), required=True, metavar="GRID", help="numbers of users")
    pm.add_argument("--delta", type=float, required=True, help="delta in (0, 1)")
    add_upper_from(pm)
    add_sample_rate(pm, SAMPLED_SCOPE)
    pm.add_argument("--out", default="compare-out", help="folder for compare.csv and compare.png")
    pm.add_argument("--json", action="store_true", help="print the table as JSON instead of text")
    pm.set_defaults(func=run_compare)
    return pm


#: The files ``compare`` writes into ``--out``.
COMPARE_FILES = ("compare.csv", "compare.png")


def run_compare(args) -> int:
    from jaxshuffle.comparison import compare

    entry = catalog_entry(args.randomizer)
    opts = entry_options(args, entry, skip=("eps0",))
    for k, v in opts.items():
        if len(v) != 1:
            raise UsageError(f"{k}: compare takes one value per randomizer option")
    check_output_dir("out", args.out, files=COMPARE_FILES)  # before computing, not after
    e0 = np.asarray(args.eps0)[:, None]
    n = np.asarray(args.n)[None, :]
    options: dict[str, Any] = {k: v[0] for k, v in opts.items()}  # Any: as calibrate's (see there)
    table = run_interruptible(compare, args.randomizer, e0, n, args.delta, upper_from=args.upper_from,
                              sample_rate=args.sample_rate, **options)
    csv_path, png_path = (os.path.join(args.out, name) for name in COMPARE_FILES)
    written: list[str] = []  # files written so far (a stop's message names them)
    try:
        try:
            os.makedirs(args.out, exist_ok=True)
            table.to_csv(csv_path)
            written.append(csv_path)
            table.figure(png_path)
            written.append(png_path)
            figure = png_path
        except ImportError as exc:
            figure = f"(no figure: {exc})"
        except OSError as exc:  # changed since the check (or a full disk): one line, no traceback
            raise UsageError(f"out: cannot write {exc.filename or args.out}: {exc.strerror or exc}") from None
    except KeyboardInterrupt as exc:
        exc.written = written  # type: ignore[attr-defined]
        raise
    if args.json:
        print(json.dumps(table.rows()))
        return 0
    sampled = f", clients sampled at rate {args.sample_rate:g}" if args.sample_rate < 1 else ""
    print(f"{args.randomizer} {opts}, delta = {args.delta:g}{sampled}: epsilon by bound "
          "(certified = sound upper bound; paper/reference/pitfall values are not certified)")
    for j, nn in enumerate(args.n):
        print(f"\nn = {nn:g}")
        print(f"  {'bound':36s} {'kind':9s} " + " ".join(f"{f'eps0={e:g}':>10s}" for e in args.eps0[:8])
              + (" ..." if len(args.eps0) > 8 else ""))
        for name, b in table.bounds.items():
            vals = " ".join(f"{fmt(float(b.value[i, j])):>10s}" for i in range(min(8, len(args.eps0))))
            print(f"  {name:36s} {b.kind:9s} {vals}")
    print(f"\nwrote {csv_path} and {figure}")
    return 0
