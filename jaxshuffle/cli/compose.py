"""``jaxshuffle compose``: certified epsilon of T shuffled rounds on the same users.

    jaxshuffle compose --randomizer grr --k 10 --eps0 1 --n 1e4 --rounds 1..1000:20 --delta 1e-6

Per (T, delta): the smallest certified bound on the T rounds and its source
(:func:`jaxshuffle.accountant.rounds.composed_epsilon`, docs/math.md section 13), next to each
candidate. ``--json``: one object per (T, delta); ``--plot``: composed eps against T; ``--curve``: the
privacy curve (certified delta at a grid of eps, per T) as CSV, drawn beside it as PNG.
Ctrl-C (exit 130) and SIGTERM (exit 143) stop it within a fraction of a second with one line on stderr, as
``jaxshuffle sweep`` (the computation runs in a worker thread while the main thread waits:
:func:`jaxshuffle.sweeps.stops.run_interruptible`); it keeps no partial results.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from jaxshuffle.cli._common import (
    UsageError,
    add_entry_options,
    add_sample_rate,
    assumptions,
    catalog_entry,
    check_output_path,
    entry_options,
    file_is_ours,
    fmt,
    grid_type,
    num,
)
from jaxshuffle.randomizers.catalog import Entry
from jaxshuffle.sweeps.stops import run_interruptible

#: Columns of the CSV that ``--curve`` writes; its first line is exactly these, comma-separated: a file that
#: starts with that line is one ``--curve`` wrote, and only such a file is replaced.
CURVE_COLUMNS = ("n", "rounds", "eps", "delta", "source")
#: The ``Software`` text of the PNG that ``--curve`` draws: only a PNG carrying it is replaced.
CURVE_FIGURE_MARK = "jaxshuffle compose --curve"
#: eps points per (n, T) of ``--curve`` by default (each requested delta's certified eps is added to them).
DEFAULT_CURVE_POINTS = 64


def _curve_points(text: str) -> int:
    """``--curve-points``: an integer in [2, 10000] (a one-line UsageError otherwise, past argparse)."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not (2 <= v <= 10_000 and v == int(v)):
        raise UsageError(f"curve-points: must be an integer in [2, 10000], got {text!r}")
    return int(v)


def add_compose_parser(subparsers: argparse._SubParsersAction[Any], entry: Entry | None) -> argparse.ArgumentParser:
    """Add ``compose`` to an argparse subparsers object (handler stored as ``func``); ``entry`` is the
    catalog entry named by ``--randomizer`` (its options become flags), or None."""
    p = subparsers.add_parser(
        "compose", help="certified epsilon of T shuffled rounds, composed (PLD + FFT)",
        description="Composed (eps, delta) of T rounds of n users' shuffled messages: the certified pairs' "
                    "privacy-loss distributions (worst-case pair; for k-RR also the blanket pair), composed by FFT "
                    "with every error on the safe side (docs/math.md section 12), next to basic and advanced "
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
                   help="profile points of the k-RR blanket pair's PLD (0 skips it; default 512 up to n = 1e5, "
                        "128 up to n = 1e6 and 0 above, where each profile point costs more)")
    add_sample_rate(p, "single-message randomizers: the PLD of k-ary RR's blanket pair or of the others' "
                       "three-count pair, or basic and advanced composition of the sampled round's bound")
    p.add_argument("--json", action="store_true", help="print a JSON list, one object per (T, delta)")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="also draw composed eps against T next to basic and advanced composition (needs matplotlib)")
    p.add_argument("--curve", default=None, metavar="CSV",
                   help="also write the privacy curve of each T: the certified delta at eps from 0 to a bit above "
                        "the largest eps at the smallest delta (and at each delta's certified eps), columns n, "
                        "rounds, eps, delta, source (the pair composed: for k-RR the blanket pair where its PLD is "
                        "built, else the worst-case pair), and draw it beside the CSV (its name with .png; log "
                        "delta; skipped without matplotlib). Replaces only a CSV and PNG that --curve wrote")
    p.add_argument("--curve-points", type=_curve_points, default=None, metavar="M",
                   help=f"eps points of --curve per T (an integer in [2, 10000]; default {DEFAULT_CURVE_POINTS})")
    p.set_defaults(func=run_compose)
    return p


def run_compose(args: argparse.Namespace) -> int:
    from jaxshuffle.accountant.rounds import composed_epsilon
    from jaxshuffle.pld.distribution import MAX_DEFAULT_ROUNDS

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
    curve_paths = _curve_paths(args)
    c = run_interruptible(composed_epsilon, params, n, rounds, delta, discretization=args.discretization,
                          blanket_points=args.blanket_points, sample_rate=args.sample_rate)
    rows = []
    for i, T in enumerate(c.rounds):
        for j, d in enumerate(c.delta):
            rows.append({"randomizer": args.randomizer, "options": {k: float(v[0]) for k, v in opts.items()},
                         "n": float(n), "sample_rate": float(args.sample_rate), "rounds": int(T), "delta": float(d),
                         "upper": num(c.upper[i, j]), "upper_source": str(c.upper_source[i, j]),
                         "pld": num(c.pld[i, j]), "blanket_pld": num(c.blanket_pld[i, j]),
                         "lower": num(c.lower[i, j]),
                         "basic": num(c.basic[i, j]), "advanced": num(c.advanced[i, j]),
                         "discretization": num(c.discretization), "clone_proof": c.clone_proof})
    written: list[str] = []  # files written so far (a stop's message names them)
    try:
        if args.plot is not None:
            from jaxshuffle import plot as jplot

            jplot.composition_curve(rows, args.plot)
            written.append(str(args.plot))
        curve_note = None
        if curve_paths is not None:
            curve_note = _write_curve(args, params, n, c.rounds, c.delta, *curve_paths, written=written)
    except KeyboardInterrupt as exc:
        exc.written = written  # type: ignore[attr-defined]
        raise
    if args.json:
        print(json.dumps(rows, indent=1, allow_nan=False))
        return 0

    def inf(x):
        return float("inf") if x is None else x

    def none(x):  # no value (a round without a worst-case pair's PLD): a dash
        return "-" if x is None else fmt(x)

    print(assumptions(entry, args.randomizer) + " The same users take part in every round.")
    print(f"  worst-case pair: the {c.clone_proof} clone (docs/math.md 3.1).")
    print("  certified eps: the smallest certified bound on the T rounds: the PLD composition of the worst-case "
          "pair and, for k-RR, of the blanket pair (each composed on its own), and basic and advanced composition "
          "of the one-round bound (for k-RR the blanket pair's).")
    print(f"  {'T':>7} {'delta':>9} {'certified eps':>14} {'from':>11} {'PLD':>10} {'(pair, from below)':>19} "
          f"{'blanket PLD':>11} {'basic':>10} {'advanced':>10}")
    for row in rows:
        print(f"  {row['rounds']:>7d} {row['delta']:>9.3g} {fmt(inf(row['upper'])):>14} {row['upper_source']:>11} "
              f"{fmt(inf(row['pld'])):>10} {none(row['lower']):>19} {fmt(inf(row['blanket_pld'])):>11} "
              f"{fmt(inf(row['basic'])):>10} {fmt(inf(row['advanced'])):>10}")
    if curve_note is not None:
        print(f"  privacy curve: {curve_note}")
    return 0


def _refuse_foreign(table: Path, figure: Path) -> None:
    """UsageError where the CSV or the PNG beside it exists and ``--curve`` did not write it."""
    header = (",".join(CURVE_COLUMNS) + "\n").encode()
    for path, what, start, mark in ((table, "", header, b""),
                                    (figure, "the figure beside it, ", b"\x89PNG", CURVE_FIGURE_MARK.encode())):
        if (path.exists() or path.is_symlink()) and not file_is_ours(path, start, mark):
            raise UsageError(f"curve: {what}{path} exists and jaxshuffle did not write it; give another file name "
                             "(only files that --curve wrote are replaced)")


def _curve_paths(args) -> tuple[Path, Path] | None:
    """(CSV, PNG beside it) of ``--curve``, checked before any computation; None without ``--curve``.
    UsageError where a file there exists that ``--curve`` did not write (the package replaces only its own)."""
    if args.curve is None:
        if args.curve_points is not None:
            raise UsageError("curve-points: needs --curve CSV")
        return None
    check_output_path("curve", args.curve, example="curve.csv", matplotlib=False)
    table = Path(args.curve)
    if table.suffix.lower() == ".png":
        raise UsageError(f"curve: {args.curve} names a figure; give a CSV file name such as "
                         f"{table.with_suffix('.csv')} (the figure is drawn beside it, as .png)")
    figure = table.with_suffix(".png")
    _refuse_foreign(table, figure)
    if args.plot is not None and Path(args.plot).resolve() in (table.resolve(), figure.resolve()):
        raise UsageError(f"plot: {args.plot} is where --curve writes; give another file")
    return table, figure


def _write_curve(args, params, n, rounds, delta, table: Path, figure: Path, written: list[str]) -> str:
    """Write the privacy curve of each T (CSV, atomically) and draw it (PNG beside it, atomically); a line
    saying what was written (each file written is appended to ``written``). The curve is the one pair's
    composition that ``composed_epsilon`` reports (:func:`~jaxshuffle.accountant.rounds.curve_round`):
    ``compose_delta`` at the eps grid, which holds ``compose(...).upper`` at each delta, so the curve's delta
    there is at most that delta. Computed in a worker thread (a stop acts at once), written here."""
    from jaxshuffle.sweeps.files import atomic_write

    points = DEFAULT_CURVE_POINTS if args.curve_points is None else args.curve_points
    pair, rows, marks = run_interruptible(_curve_rows, args, params, n, rounds, delta, points)
    text = io.StringIO()
    out = csv.writer(text, lineterminator="\n")
    out.writerow(CURVE_COLUMNS)
    out.writerows([r["n"], r["rounds"], repr(r["eps"]), repr(r["delta"]), r["source"]] for r in rows)
    _refuse_foreign(table, figure)  # again: a file may have appeared there while the curve was computed
    try:
        atomic_write(table, text.getvalue().encode())
    except OSError as exc:
        raise UsageError(f"curve: cannot write {exc.filename}: {exc.strerror}") from None
    written.append(str(table))
    try:
        from jaxshuffle import plot as jplot
        from jaxshuffle.plot.common import png_bytes

        ax = jplot.privacy_curve(rows, marks=marks)
    except ImportError as exc:
        return f"wrote {table} (pair: {pair.source}; no figure: {exc})"
    png = png_bytes(ax, CURVE_FIGURE_MARK)  # privacy_curve drew on a new pyplot Figure of its own
    try:
        atomic_write(figure, png)
    except OSError as exc:
        raise UsageError(f"curve: cannot write {exc.filename}: {exc.strerror}") from None
    written.append(str(figure))
    return f"wrote {table} (certified delta at {points}+ eps per T; pair: {pair.source}) and {figure}"


def _curve_rows(args, params, n, rounds, delta, points: int) -> tuple:
    """The curve's pair, its rows (certified delta at ``points``+ eps per T) and the marks (each delta's
    certified eps), for :func:`_write_curve`."""
    from jaxshuffle.accountant.rounds import curve_round
    from jaxshuffle.pld.composition import compose, compose_delta

    pair = curve_round(params, n, rounds, discretization=args.discretization, blanket_points=args.blanket_points,
                       sample_rate=args.sample_rate)
    at_delta = {int(T): np.asarray(compose([(pair, int(T))], delta).upper, np.float64) for T in rounds}
    finite = np.concatenate([e[np.isfinite(e)] for e in at_delta.values()])
    rows, marks = [], []
    for T, e in at_delta.items():
        ok = e[np.isfinite(e)]
        top = ok.max() if ok.size else finite.max() if finite.size else 0.0
        top = top if top > 0 else 1.0
        eps = np.unique(np.concatenate([np.linspace(0.0, 1.25 * top, points), ok]))
        d = compose_delta([(pair, T)], eps)
        rows += [{"n": int(n), "rounds": T, "eps": float(x), "delta": float(y), "source": pair.source}
                 for x, y in zip(eps, d)]
        marks += [(x, y) for x, y in zip(e, delta)]
    return pair, rows, marks
