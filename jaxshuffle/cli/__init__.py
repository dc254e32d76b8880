"""Command line interface ``jaxshuffle`` (console script ``jaxshuffle = jaxshuffle.cli:main``).

Subcommands::

    jaxshuffle epsilon --randomizer grr --k 3 --eps0 1 --n 2 --delta 0.01 [--json]
    jaxshuffle calibrate --randomizer grr --k 10 --target 0.5 --n 1e6 --delta 1e-8   # largest eps0
    jaxshuffle calibrate --randomizer grr --k 10 --eps0 2 --target 0.5 --delta 1e-8  # smallest n
    jaxshuffle randomizers [--json]
    jaxshuffle tune --query grr:k=2 --query grr:k=100 --n 1e5 --target 1 --delta 1e-6  # budget split

Numbers accept comma-separated grids (``--n 1e4,1e6,1e8 --eps0 1,2``): every combination
(cartesian grid) is evaluated in one batched call. Every command reads a grid as ``jaxshuffle sweep``
does (:mod:`jaxshuffle.sweeps.grid`): ``--n 1e3..1e4:3`` is 1000, 3162, 10000 (``n`` and integer
options such as ``--k`` rounded, duplicates dropped), and a bad grid gets the sweep's message.
``--json`` prints a list with one object per grid point (keys include ``lower``, ``upper``,
``paper``, ``certified``; infinite values are ``null``). Plain output is a privacy statement:
assumptions, certified upper bound, lower bound, and the paper's Theorem 4.7 value where it
differs (labelled NOT certified).

User errors (unknown randomizer, invalid option or value) print one line
``jaxshuffle: error: <parameter>: <valid range>`` and exit with status 2; a parameter spelled
differently as an option (``upper_from``) is named as the option given (``--upper-from``).
Ctrl-C (exit 130) and SIGTERM (exit 143) stop every command with one line on stderr, within a fraction
of a second: the computations run in a worker thread while the main thread waits.

JAX's persistent compilation cache is enabled (``$JAXSHUFFLE_CACHE`` or
``~/.cache/jaxshuffle/xla``) because each engine program takes seconds to compile.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from jaxshuffle._config import enable_compilation_cache, use_every_cpu_core
from jaxshuffle.accountant import CalibrationStatus, UpperSource
from jaxshuffle.cli._common import (
    SAMPLED_SCOPE,
    UsageError,
    add_entry_options,
    add_sample_rate,
    add_upper_from,
    assumptions,
    catalog_entry,
    entry_options,
    fmt,
    grid_type,
    int_type,
    num,
    sigterm_raises,
)
from jaxshuffle.cli.compare import add_compare_parser
from jaxshuffle.cli.compose import add_compose_parser
from jaxshuffle.cli.sweep import add_plot_parser, add_sweep_parser
from jaxshuffle.cli.tune import add_tune_parser
from jaxshuffle.engine.matrix.forms import MAX_INPUTS
from jaxshuffle.engine.two_count.search import Status
from jaxshuffle.randomizers.clone import CloneProof
from jaxshuffle.sweeps.grid import MAX_GRID_POINTS, eval_rule, parse_delta
from jaxshuffle.sweeps.stops import run_interruptible


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


def _delta_items(text: str) -> list:
    """Delta values and rules in n (``1e-6``, ``0.01/n``), as :func:`jaxshuffle.sweeps.grid.parse_delta` reads them
    (its message names delta already; argparse's wrapping would add ``argument --delta:`` and differ from sweep's)."""
    try:
        return parse_delta(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _randomizer_name(argv: Sequence[str]) -> str | None:
    for i, a in enumerate(argv):
        if a == "--randomizer" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--randomizer="):
            return a.split("=", 1)[1]
    return None


def _build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The command line's parser; the randomizer's own options appear once ``argv`` names a command taking them.

    Size: an argparse builder that declares the subcommands without a module of their own (epsilon, calibrate,
    info, cache, randomizers, sandwich) and all their options in one place.
    """
    takes_options = argv and argv[0] in ("epsilon", "calibrate", "compare", "compose")
    entry = catalog_entry(_randomizer_name(argv)) if takes_options else None
    parser = _Parser(prog="jaxshuffle", description="Certified privacy amplification by shuffling (float64, JAX).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    common: dict[str, Any] = dict(formatter_class=argparse.RawDescriptionHelpFormatter)
    pe = sub.add_parser("epsilon", help="amplified epsilon of a shuffled randomizer (certified upper, lower, paper)",
                        description="Amplified (eps, delta) of n users' shuffled messages. Options of the chosen "
                                    "randomizer appear in --help once --randomizer is given.", **common)
    pe.add_argument("--randomizer", required=True, help="catalog name (see `jaxshuffle randomizers`)")
    add_entry_options(pe, entry)
    pe.add_argument("--n", type=grid_type("n"), required=True, metavar="N[,N...]",
                    help="number of users (integer >= 1)")
    pe.add_argument("--delta", type=_delta_items, required=True, metavar="D[,D...]",
                    help="delta in (0, 1), or a rule in n such as 0.01/n")
    pe.add_argument("--rtol", type=float, default=1e-6, help="relative width of each epsilon bracket")
    pe.add_argument("--scaled", action="store_true",
                    help="also use the (u+v)-scaled pair for the upper bound (proven only when every pair of "
                         "inputs has total variation exactly beta, e.g. k-ary RR)")
    add_upper_from(pe)
    add_sample_rate(pe, SAMPLED_SCOPE)
    pe.add_argument("--json", action="store_true", help="print a JSON list, one object per grid point")

    add_compose_parser(sub, entry)

    pc = sub.add_parser("calibrate", help="largest eps0 (given --n) or smallest n (given --eps0) meeting a target",
                        description="Certified inverse calibration: with --n, the largest eps0 whose certified "
                                    "amplified epsilon is <= --target; without --n (all options, eps0 included, "
                                    "given), the smallest n.", **common)
    pc.add_argument("--randomizer", required=True, help="catalog name (see `jaxshuffle randomizers`)")
    add_entry_options(pc, entry)
    pc.add_argument("--target", type=grid_type("target"), required=True, metavar="EPS[,EPS...]",
                    help="target amplified epsilon > 0")
    pc.add_argument("--n", type=grid_type("n"), default=None, metavar="N[,N...]",
                    help="number of users: calibrate eps0")
    pc.add_argument("--delta", type=_delta_items, required=True, metavar="D[,D...]",
                    help="delta in (0, 1), or a rule in n such as 0.01/n (with --n)")
    pc.add_argument("--rtol", type=float, default=1e-6, help="relative width of the eps0 bracket")
    add_upper_from(pc)
    add_sample_rate(pc, SAMPLED_SCOPE)
    pc.add_argument("--json", action="store_true", help="print a JSON list, one object per grid point")

    add_sweep_parser(sub)
    add_plot_parser(sub)

    add_tune_parser(sub)

    pi = sub.add_parser("info", help="versions, devices, float64 and the compilation cache (where, how big)")
    pi.add_argument("--json", action="store_true", help="print JSON")
    pk = sub.add_parser("cache", help="manage the compilation cache")
    pk.add_argument("action", choices=("clear", "info"), help="clear: delete the cached programs; info: show them")

    pr = sub.add_parser("randomizers", help="list the catalog with options and sources")
    pr.add_argument("--json", action="store_true", help="print JSON")

    ps = sub.add_parser("sandwich", help="lower <= exact <= certified upper for a finite mechanism at small n",
                        description="Exact epsilon of the shuffled outputs of a finite mechanism (worst over "
                                    "candidate datasets of the other users) between the Thm 5.1 lower bound and "
                                    "the certified upper bound, with the paper's Thm 4.7 value. Exits 1 if a "
                                    "certified bound is on the wrong side.", **common)
    src = ps.add_mutually_exclusive_group(required=True)
    src.add_argument("--matrix", help="rows separated by ';', entries by ',' (row x = P[R(x) = .])")
    src.add_argument("--grr", type=int_type("grr", 2, MAX_INPUTS, "the most inputs of a matrix"),
                     metavar="K", help=f"k-ary randomized response with --eps0 (K in [2, {MAX_INPUTS}])")
    ps.add_argument("--eps0", type=float, help="eps0 of --grr")
    ps.add_argument("--x0", type=int, default=0, help="victim input under P (default 0)")
    ps.add_argument("--x1", type=int, default=1, help="victim input under Q (default 1)")
    ps.add_argument("--n", type=grid_type("n"), required=True, metavar="N[,N...]",
                    help="number of users (small: exact enumeration)")
    ps.add_argument("--delta", type=float, required=True, help="delta in (0, 1)")
    ps.add_argument("--candidates", choices=("all-equal", "mixtures"), default="all-equal",
                    help="datasets of the other users to search for the worst case")
    ps.add_argument("--json", action="store_true", help="print a JSON list, one object per n")

    add_compare_parser(sub, entry if argv and argv[0] == "compare" else None)
    return parser


def _cartesian(named: dict[str, list]) -> tuple[list[str], dict[str, np.ndarray]]:
    """Every combination of the named axes; a ``delta`` axis may hold rules in ``n`` (evaluated per point)."""
    names = list(named)
    total = math.prod(len(named[k]) for k in names)
    if total > MAX_GRID_POINTS:  # refused before the combinations are built (the sweep's limit)
        sizes = " x ".join(f"{len(named[k])} ({k})" for k in names if len(named[k]) > 1)
        raise UsageError(f"grid: {sizes} = {total} points exceed the limit of {MAX_GRID_POINTS:.0f}; use jaxshuffle "
                         "sweep for large grids (resumable, written to disk), or set JAXSHUFFLE_MAX_GRID to lift it")
    combos = list(itertools.product(*(named[k] for k in names)))
    cols = {k: np.asarray([c[i] for c in combos], dtype=object if k == "delta" else np.float64)
            for i, k in enumerate(names)}
    if "delta" in cols:
        n = cols.get("n")
        delta = np.empty(len(combos))
        for i, d in enumerate(cols["delta"]):
            if isinstance(d, str):
                if n is None:
                    raise UsageError(f"delta: the rule {d!r} is a function of n; give --n or a number")
                delta[i] = float(eval_rule(d, np.asarray(n[i]), what="delta"))
            else:
                delta[i] = float(d)
        cols["delta"] = delta
    return names, cols


def _lower_params(entry, opts: dict[str, np.ndarray]):
    if entry.lower is None:
        return None
    try:
        return entry.lower(**opts)
    except ValueError:  # the lower-bound construction needs more inputs (e.g. Hadamard K >= 4B)
        return None


def _cmd_epsilon(args) -> int:
    from jaxshuffle.accountant import amplify

    entry = catalog_entry(args.randomizer)
    grid = entry_options(args, entry)
    grid.update(n=args.n, delta=args.delta)
    names, cols = _cartesian(grid)
    opts = {k: cols[k] for k in names if k not in ("n", "delta")}
    params = entry.fn(**opts)
    report = run_interruptible(amplify, params, cols["n"], cols["delta"], lower_params=_lower_params(entry, opts),
                               rtol=args.rtol, scaled_variant=args.scaled, upper_from=args.upper_from,
                               sample_rate=args.sample_rate)
    sampled = args.sample_rate < 1.0
    rep = {k: np.asarray(v) for k, v in report._asdict().items()}
    p, beta, q = (np.broadcast_to(np.asarray(x), cols["n"].shape) for x in (params.p, params.beta, params.q))
    rows = []
    for i in range(cols["n"].size):
        rows.append({
            "randomizer": args.randomizer,
            "options": {k: float(opts[k][i]) for k in opts},
            "n": float(cols["n"][i]),
            "sample_rate": float(args.sample_rate),
            "delta": float(cols["delta"][i]),
            "messages": "multi" if entry.multi_message else "single",
            "p": num(p[i]), "beta": num(beta[i]), "q": num(q[i]),
            "upper": num(rep["upper"][i]),
            "lower": num(rep["lower"][i]),
            "paper": num(rep["paper"][i]),
            "certified": bool(rep["certified"][i]),
            "paper_certified": bool(rep["paper_certified"][i]),
            "has_lower": bool(rep["has_lower"][i]),
            "worst_case": num(rep["worst_case"][i]),
            "blanket": num(rep["blanket"][i]),
            "upper_source": UpperSource.DESCRIPTIONS[int(rep["upper_source"][i])],
            "clone_proof": CloneProof(int(rep["clone_proof"][i])).description,
            "status": Status(int(rep["status"][i])).label,
        })
    if args.json:
        print(json.dumps(rows, indent=1, allow_nan=False))
        return 0
    print(assumptions(entry, args.randomizer))
    for r in rows:
        head = ", ".join([f"{k}={v:g}" for k, v in r["options"].items()] + [f"n={r['n']:g}", f"delta={r['delta']:g}"]
                         + ([f"sample rate={args.sample_rate:g}"] if sampled else []))
        up = r["upper"]
        print(f"  {head}:")
        if up is None:
            print("    certified upper bound: none finite (eps = inf)")
        else:
            print(f"    certified upper bound: eps <= {fmt(up)}  -- the shuffled messages are "
                  f"({fmt(up)}, {r['delta']:g})-DP [{r['upper_source']}]")
            if sampled:
                print("    worst-case pair:       none (clients sampled: no two-count pair is an upper bound)")
            else:
                print(f"    worst-case pair:       eps <= {fmt(r['worst_case'])}  [{r['clone_proof']}]"
                      if r["worst_case"] is not None else "    worst-case pair:       none finite")
        if r["has_lower"]:
            lo = r["lower"]
            print(f"    lower bound:           eps >= {fmt(lo if lo is not None else math.inf)}  "
                  "-- some dataset of the others needs at least this")
        else:
            print("    lower bound:           none for this randomizer (0)")
        pap = r["paper"]
        pap_f = math.inf if pap is None else pap
        differs = up is None or abs(pap_f - up) > 2 * args.rtol * max(abs(up), 1e-300)
        if differs and not sampled:  # the paper's pair has no version with clients sampled
            label = "certified" if r["paper_certified"] else \
                "NOT certified: Theorem 4.7 is not a valid upper bound when w = 1-(p+1)alpha > 0"
            print(f"    paper (Thm 4.7):       eps = {fmt(pap_f)}  -- {label}")
    return 0


def _cmd_calibrate(args) -> int:
    from jaxshuffle.accountant import amplify, calibrate_eps0, calibrate_n

    entry = catalog_entry(args.randomizer)
    solve_eps0 = args.n is not None
    if solve_eps0:
        if "eps0" not in [a.name for a in entry.args]:
            raise UsageError(f"randomizer: {args.randomizer!r} has no eps0 option; give all its options and "
                             "omit --n to calibrate n instead")
        if getattr(args, "opt_eps0", None) is not None:
            raise UsageError("eps0: give either --n (calibrate eps0) or --eps0 (calibrate n), not both")
        grid = entry_options(args, entry, skip=("eps0",))
        grid.update(target=args.target, n=args.n, delta=args.delta)
    else:
        grid = entry_options(args, entry)
        grid.update(target=args.target, delta=args.delta)
    names, cols = _cartesian(grid)
    fixed = ("target", "n", "delta")
    # the randomizer's option arrays, passed on as keywords (Any: mypy would match them against every keyword
    # parameter of calibrate_eps0 and calibrate_n, and none of them is an option name)
    opts: dict[str, Any] = {k: cols[k] for k in names if k not in fixed}
    if solve_eps0:
        cal = run_interruptible(calibrate_eps0, args.randomizer, cols["target"], cols["n"], cols["delta"],
                                rtol=args.rtol, upper_from=args.upper_from, sample_rate=args.sample_rate, **opts)
        eps0 = np.asarray(cal.value)
        full = dict(opts, eps0=eps0)
        n = cols["n"]
    else:
        cal = run_interruptible(calibrate_n, args.randomizer, cols["target"], cols["delta"],
                                upper_from=args.upper_from, sample_rate=args.sample_rate, **opts)
        full = opts
        n = np.asarray(cal.value)
    status = np.asarray(cal.status)
    ok = np.isfinite(n)
    rep: dict[str, np.ndarray] = {}  # the reports of the points calibrated (ok), in order
    if ok.any():
        sel = {k: v[ok] for k, v in full.items()}
        report = run_interruptible(amplify, entry.fn(**sel), n[ok], cols["delta"][ok],
                                   lower_params=_lower_params(entry, sel), upper_from=args.upper_from,
                                   sample_rate=args.sample_rate)
        rep = {k: np.asarray(v) for k, v in report._asdict().items()}
    rows, j = [], 0
    for i in range(cols["target"].size):
        row = {"randomizer": args.randomizer, "options": {k: float(full[k][i]) for k in full},
               "target": float(cols["target"][i]), "n": num(n[i]), "sample_rate": float(args.sample_rate),
               "delta": float(cols["delta"][i]),
               "solved_for": "eps0" if solve_eps0 else "n",
               "value": num(np.asarray(cal.value)[i]), "over": num(np.asarray(cal.over)[i]),
               "calibration_status": CalibrationStatus(int(status[i])).label}
        if ok[i]:
            row.update(upper=num(rep["upper"][j]), lower=num(rep["lower"][j]), paper=num(rep["paper"][j]),
                       certified=bool(rep["certified"][j]), paper_certified=bool(rep["paper_certified"][j]),
                       has_lower=bool(rep["has_lower"][j]))
            j += 1
        else:
            row.update(upper=None, lower=None, paper=None, certified=False, paper_certified=False, has_lower=False)
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1, allow_nan=False))
        return 0
    print(assumptions(entry, args.randomizer))
    for r in rows:
        others = ", ".join([f"{k}={v:g}" for k, v in r["options"].items() if k != "eps0" or not solve_eps0]
                           + ([f"sample rate={args.sample_rate:g}"] if args.sample_rate < 1.0 else []))
        if solve_eps0:
            where = f"n={r['n']:g}, delta={r['delta']:g}" + (f", {others}" if others else "")
            if r["calibration_status"] == "capped":
                print(f"  {where}: every eps0 <= {r['value']:g} meets target {r['target']:g} (search limit)")
            else:
                print(f"  {where}: largest eps0 = {fmt(r['value'])} with certified eps <= {fmt(r['upper'])} "
                      f"<= target {r['target']:g} (eps0 = {fmt(r['over'])} exceeds it)")
        else:
            where = f"{others}, delta={r['delta']:g}"
            if r["n"] is None:
                print(f"  {where}: target {r['target']:g} not reached with n <= 1e12 users")
            else:
                print(f"  {where}: smallest n = {r['n']:.0f} with certified eps <= {fmt(r['upper'])} "
                      f"<= target {r['target']:g}")
    return 0


def _info() -> dict:
    import platform

    import jax

    from jaxshuffle._config import VERSION, cache_info

    cache = cache_info()
    return {"jaxshuffle": VERSION, "jax": jax.__version__, "python": platform.python_version(),
            "devices": [str(d) for d in jax.devices()], "float64": bool(jax.config.read("jax_enable_x64")),
            "cache_dir": cache["dir"], "cache_files": cache["files"], "cache_bytes": cache["bytes"]}


def _cmd_info(args) -> int:
    info = _info()
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    for key, value in info.items():
        print(f"{key:12s} {value if not isinstance(value, list) else ', '.join(value)}")
    return 0


def _cmd_cache(args) -> int:
    from jaxshuffle._config import cache_info, clear_cache_report, foreign_compilation_cache

    if args.action == "clear":
        report = clear_cache_report()  # only files jaxshuffle or JAX wrote, in folders jaxshuffle made
        print(f"removed {report.removed} cached program files from {cache_info()['dir']}")
        for line in report.left:
            print(f"kept {line}")
        foreign = foreign_compilation_cache()
        if foreign is not None:
            print(f"left JAX's compilation cache at {foreign} alone (set outside jaxshuffle; clear it yourself)")
        return 0
    info = cache_info()
    print(f"{info['dir']}: {info['files']} files, {info['bytes'] / 2**20:.1f} MiB")
    return 0


def _cmd_randomizers(args) -> int:
    from jaxshuffle.randomizers import CATALOG

    if args.json:
        out = []
        for name, e in CATALOG.items():
            out.append({"name": name, "description": e.description, "source": e.source,
                        "multi_message": e.multi_message, "lower_bound": e.lower is not None,
                        "constraints": e.constraints,
                        "options": [{"name": a.name, "kind": a.kind, "range": a.range_text(), "help": a.help,
                                     "default": a.default} for a in e.args]})
        print(json.dumps(out, indent=1))
        return 0
    for name, e in CATALOG.items():
        opts = " ".join(f"--{a.name}" + ("" if a.default is None else f"[={a.default:g}]") for a in e.args)
        extra = f"; {e.constraints}" if e.constraints else ""
        low = "; lower bound" if e.lower is not None else ""
        print(f"{name:22s} {e.description}\n{'':22s}   options: {opts}{extra}{low}\n{'':22s}   source: {e.source}")
    return 0


def _parse_matrix(text: str) -> np.ndarray:
    try:
        rows = [[float(v) for v in row.split(",")] for row in text.strip().split(";") if row.strip()]
        return np.asarray(rows, dtype=np.float64)
    except ValueError:
        raise UsageError("matrix: rows separated by ';', numbers by ',' (e.g. '0.6,0.4;0.4,0.6')") from None


def _cmd_sandwich(args) -> int:
    from jaxshuffle.exact import OrderViolation, grr_matrix, sandwich

    if args.grr is not None:
        if args.eps0 is None:
            raise UsageError("eps0: required with --grr (eps0 >= 0)")
        if args.grr < 2 or not args.eps0 >= 0:
            raise UsageError("grr: k must be an integer >= 2 and eps0 >= 0")
        matrix = grr_matrix(args.grr, args.eps0)
    else:
        matrix = _parse_matrix(args.matrix)
    reports = []
    try:
        for n in args.n:  # integers >= 1: grid_type("n") rounds and checks as a sweep does
            reports.append(run_interruptible(sandwich, matrix, args.x0, args.x1, int(n), args.delta,
                                             candidates=args.candidates))
    except OrderViolation as exc:
        print(f"jaxshuffle: ORDER VIOLATED (a certified bound is wrong; please report): {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([r._asdict() | {"exact_others": list(r.exact_others)} for r in reports], indent=1))
    else:
        print("Shuffle model, replace-one neighbouring datasets, single message; exact = worst over the "
              f"{args.candidates} datasets of the other users.")
        for r in reports:
            print("\n".join(r.lines()))
    return 0


def _user_facing(msg: str, argv: Sequence[str]) -> str:
    """An error that names an API parameter (``upper_from: ...``) names the option the user gave
    (``--upper-from: ...``) where the two are spelled differently."""
    name, sep, rest = msg.partition(": ")
    if sep and "_" in name and name.isidentifier():
        option = "--" + name.replace("_", "-")
        if any(a == option or a.startswith(option + "=") for a in argv):
            return f"{option}: {rest}"
    return msg


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 user error, 128 + signal when stopped).

    Ctrl-C (130) and SIGTERM (143) stop every command with one line on stderr (``sweep`` sets its own SIGTERM
    handler, saving its finished chunks); the commands that compute (epsilon, calibrate, compose, tune, sandwich,
    compare, sweep) run their long XLA calls in a worker thread while the main thread waits
    (:func:`jaxshuffle.sweeps.stops.run_interruptible`), so the stop acts within a fraction of a second.
    Called without ``argv`` (the console script, ``python -m jaxshuffle.cli``), a stop that left a computation
    running in its worker thread (:func:`jaxshuffle.sweeps.stops.run_interruptible`) ends the process at once
    after the message, with the exit status: every file is written and closed by then, and waiting for the
    abandoned XLA call to return could take minutes."""
    whole_process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    # the command line is a whole process of its own: it computes in float64 whatever
    # JAXSHUFFLE_ENABLE_X64 says (that switch is for library users who share the process)
    jax.config.update("jax_enable_x64", True)
    try:
        if argv and argv[0] in ("epsilon", "calibrate", "compose", "sandwich", "compare", "sweep", "plot", "info",
                                "cache", "tune"):
            enable_compilation_cache()  # before anything compiles: JAX decides once per process
        if argv and argv[0] == "sweep":
            use_every_cpu_core()  # before JAX starts its backends; sweeps shard over every device
        parser = _build_parser(argv)
        args = parser.parse_args(argv)
        commands = {"epsilon": _cmd_epsilon, "calibrate": _cmd_calibrate,
                    "randomizers": _cmd_randomizers,
                    "sandwich": _cmd_sandwich, "info": _cmd_info, "cache": _cmd_cache}
        command = getattr(args, "func", None) or commands[args.command]
        if args.command == "sweep" and args.sweep_command is None:
            return command(args)  # sets its own SIGTERM handler, around the sweep (after reaching a scheduler)
        with sigterm_raises():  # every other command: SIGTERM stops it as Ctrl-C does (one line, 143)
            return command(args)
    except (UsageError, ValueError) as exc:
        msg = _user_facing(re.sub(r" \(first bad index \([0-9, ]*\)\)", "", " ".join(str(exc).split())), argv)
        if getattr(exc, "resumable", False):  # a sweep's write failed (disk full ...): its chunks are kept
            import shlex

            msg = msg.replace("call the same sweep again to resume", "rerun the same command to resume")
            msg += f": jaxshuffle {shlex.join(argv)}"
        print(f"jaxshuffle: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C and SIGTERM: one line, 128 + signal
        return _interrupted(exc, argv, whole_process)


#: The commands that print or write their output only once everything is computed: a stop's line says
#: that nothing was saved (or which files were written before it) and that the same command must run again.
KEEPS_NO_PARTIAL_RESULTS = ("epsilon", "calibrate", "compose", "tune", "sandwich", "compare")


def _interrupted(exc: KeyboardInterrupt, argv: list[str], whole_process: bool) -> int:
    """Print the one line of a stop (what is saved) and return its exit status, 128 + the signal; in a
    ``whole_process`` with an abandoned computation still running, end the process at once instead."""
    import shlex

    from jaxshuffle.sweeps.stops import abandoned, exit_at_once

    status = int(getattr(exc, "exit_status", 130))
    line = f"jaxshuffle: interrupted ({getattr(exc, 'signal_name', 'SIGINT')})"
    saved = getattr(exc, "saved", "")
    if saved:
        line += f": {saved}; rerun the same command to resume: jaxshuffle {shlex.join(argv)}"
    elif argv and argv[0] in KEEPS_NO_PARTIAL_RESULTS:  # they write their output only once computed
        written = getattr(exc, "written", None)
        line += (f": wrote {', '.join(written)} before the stop, nothing else saved" if written else
                 ": nothing saved") + f" ({argv[0]} keeps no partial results; rerun the same command)"
    print(line, file=sys.stderr, flush=True)
    if whole_process and abandoned():
        # the stopped computation runs on in its thread until its XLA call returns (JAX's exit handler would
        # abort under it): the files are written and closed; end here, at once
        exit_at_once(status)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
