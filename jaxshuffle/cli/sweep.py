"""`jaxshuffle sweep`, `jaxshuffle sweep merge` and `jaxshuffle plot`: argument parsing and the commands."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from jaxshuffle.cli._common import check_output_dir, check_output_path, file_is_ours, int_type, sigterm_raises
from jaxshuffle.sweeps.grid import (
    catalog_rows,
    default_grid,
    option_kinds,
    parse_option,
    parse_rounds,
    parse_sample_rate,
)
from jaxshuffle.sweeps.merge import MERGE_OUTPUTS, merge
from jaxshuffle.sweeps.run import SweepLocked, parse_shard, sweep
from jaxshuffle.sweeps.store import load

#: Largest ``--chunk-size``: a chunk is padded to its size (one compiled shape), so its arrays are allocated
#: at that size whatever the grid; the automatic size is at most 4096 searches (``sweeps.schedule``).
MAX_CHUNK_SIZE = 1 << 20
#: Largest ``--dpi`` of ``plot``: there one 6.6 x 4.9 inch panel is 7920 x 5880 pixels (190 MB of RGBA), a
#: figure several panels wide or high a multiple of that, and Agg refuses 2^16 pixels a side.
MAX_DPI = 1200

#: The name this module's callers (and tests) know the SIGTERM handler by; it lives in _common, shared
#: with compose and tune.
_sigterm_raises = sigterm_raises

# ----------------------------------------------------------------------------------------
# Command line: `jaxshuffle sweep`, `jaxshuffle sweep merge`, `jaxshuffle plot`

_SWEEP_EPILOG = """\
grid values:  1,2,5 (list) | 0.5:4:8 (8 linear) | 1e3..1e6:7 (7 log-spaced) | mixes: 0.1,1:5:5
delta rules:  0.01/n, 1/n**1.1, min(1e-6, 1/n) (also in lists: 1e-6,0.01/n)
option rules: an option may be a formula in the other options, e.g. --k 'max(1, round(d/(exp(eps0)+1)))'
              (functions of one argument: log log10 exp sqrt round floor ceil; of two: min max;
              no keywords; integer options are rounded)
examples:
  jaxshuffle sweep                                   # default grid -> jaxshuffle-sweep/results.csv + sweep.png
  jaxshuffle sweep --randomizer general --eps0 1,2 --n 1e3,1e4 --delta 1e-6 --out DIR
  jaxshuffle sweep --randomizer grr --k 3,10 --eps0 0.5..8:16 --n 1e3..1e6:7 --delta 0.01/n --out DIR
  jaxshuffle sweep --randomizer general --eps0 1 --n 1e3 --rounds 1..1000:20 --delta 1e-6 --out DIR
                                                     # composed eps over T rounds (+ DIR/sweep.png: eps against T)
resume:       rerun the same command: finished chunks are skipped (a killed sweep loses nothing done).
stop:         Ctrl-C (exit 130) or SIGTERM (exit 143) keeps every finished chunk and its rows in results.csv.
concurrency:  one sweep writes to an --out directory at a time (lock file OUT/chunks/sweep.lock); a second
              one stops with an error, or waits with --wait.
multi-host:   host i runs the same command with --shard i/N --out run-i; then
              jaxshuffle sweep merge run-0 ... run-(N-1) --out merged
cluster:      --scheduler tcp://host:8786 (or --scheduler-file FILE) runs the chunks on a Dask cluster;
              this process alone writes --out (resume as above); needs pip install 'jaxshuffle[distributed]'
"""


class _MergeSubcommand(argparse._SubParsersAction):
    """The optional ``merge`` subcommand; a stray word is reported as such, not as a bad subcommand."""

    class _Names(dict):
        def __contains__(self, key) -> bool:  # argparse's choice check passes; __call__ reports strays
            return True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.choices = self._Names()  # argparse checks choices before calling the action

    def __call__(self, parser, namespace, values, option_string=None):
        if values and values[0] not in self._name_parser_map:
            raise argparse.ArgumentError(None, f"unrecognized arguments: {' '.join(values)} (options start with --; "
                                               "the only subcommand is `sweep merge`)")
        super().__call__(parser, namespace, values, option_string)


def add_sweep_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Add ``sweep`` (with its ``merge`` subcommand) to an argparse subparsers object.

    The handler is stored as ``func`` (``args.func(args)`` returns the exit status).
    """
    p = subparsers.add_parser(
        "sweep", help="certified amplification over a parameter grid (CSV/npz/JSON, resumable, sharded)",
        description="Certified amplification over the cartesian grid of randomizer options, n and delta,\n"
                    "evaluated in chunks with one compiled program per window bucket. Writes\n"
                    "OUT/results.csv (one row per point: parameters, lower, upper, paper, certified,\n"
                    "status), results.npz, results.json (versions, methods, tolerances, device) and, with\n"
                    "matplotlib installed, OUT/sweep.png. With no axes it runs the embedded default grid\n"
                    "(general randomizer, eps0 0.2..8, n 1e2..1e5, delta 1e-6; under a minute on 2 cores).",
        epilog=_SWEEP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--randomizer", default=None, metavar="NAME[,NAME]",
                   help="catalog name(s) (see `jaxshuffle randomizers`; default general)")
    kinds = option_kinds()
    users: dict[str, list[str]] = {}
    helps: dict[str, set] = {}
    for rname, e in catalog_rows().items():
        for a in e.args:
            users.setdefault(a.name, []).append(rname)
            helps.setdefault(a.name, set()).add(a.help)
    for name in sorted(kinds, key=lambda s: (s != "eps0", s.lower())):
        flags = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
        who = users[name] if len(users[name]) <= 4 else users[name][:4] + ["..."]
        text = ("local budget eps0 (p = e^eps0)" if name == "eps0" else next(iter(helps[name]))
                if len(helps[name]) == 1 else f"option {name}, meaning per randomizer (`jaxshuffle randomizers`)")
        p.add_argument(*flags, dest=f"opt_{name}", default=None, metavar="GRID",
                       help=f"{text} [{', '.join(who)}]" if name != "eps0" else f"{text}")
    p.add_argument("--n", default=None, metavar="GRID", help="number of users (grid; rounded to integers)")
    p.add_argument("--delta", default=None, metavar="GRID|RULE", help="delta: numbers and/or rules in n (0.01/n)")
    p.add_argument("--rounds", default=None, metavar="GRID",
                   help="numbers of rounds T on the same users (integers >= 1; a grid such as 1..1000:20 is rounded): "
                        "each point is then the certified eps of its T rounds at total delta (as jaxshuffle compose), "
                        "with its source and basic/advanced composition")
    p.add_argument("--sample-rate", default=None, metavar="GRID",
                   help="probabilities g in (0, 1] that each user takes part in a round (Poisson client sampling), "
                        "a grid such as 0.01,0.1,1: each point is then the sampled round's certified bound (as "
                        "jaxshuffle epsilon --sample-rate; with --rounds, as jaxshuffle compose --sample-rate)")
    p.add_argument("--blanket-points", type=int, default=None, metavar="M",
                   help="with --rounds: profile points of the k-RR blanket pair's PLD (0 skips it; default as "
                        "jaxshuffle compose)")
    p.add_argument("--discretization", type=float, default=None, metavar="D",
                   help="with --rounds: loss grid spacing of the PLD composition (default as jaxshuffle compose)")
    p.add_argument("--out", default=None, metavar="DIR", help="output directory (default jaxshuffle-sweep)")
    p.add_argument("--rtol", type=float, default=1e-6, help="relative width of every epsilon bracket (default 1e-6)")
    p.add_argument("--no-lower", action="store_true", help="skip the Theorem 5.1 lower bounds")
    p.add_argument("--scaled", action="store_true",
                   help="also use the (u+v)-scaled pair for the upper bound (proven only when every pair of "
                        "inputs has total variation exactly beta, e.g. k-ary RR; see jaxshuffle.accountant)")
    p.add_argument("--upper-from", choices=("best", "worst-case", "blanket"), default="best",
                   help="which certified source gives upper (as amplify): best (default) the smallest, for k-ary RR "
                        "also the blanket pair; worst-case the two-count rules only; blanket the blanket pair only")
    p.add_argument("--no-merge-buckets", action="store_true",
                   help="one program per natural window size (exactly amplify's windows; more compiles)")
    p.add_argument("--shard", default=None, metavar="i/N", help="run only shard i of N (multi-host); merge later")
    p.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="run the chunks on the Dask scheduler at ADDR (tcp://host:8786); --out stays on this host")
    p.add_argument("--scheduler-file", default=None, metavar="FILE",
                   help="run the chunks on the Dask scheduler described by FILE (dask scheduler --scheduler-file)")
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                   help="seconds to reach the scheduler before giving up (default 10)")
    p.add_argument("--devices", type=int, default=None, metavar="K", help="use the first K local devices (default all)")
    p.add_argument("--chunk-size", type=int_type("chunk-size", 1, MAX_CHUNK_SIZE, "a chunk is padded to its size"),
                   default=None, metavar="C",
                   help=f"searches per chunk, at most {MAX_CHUNK_SIZE} (default: automatic, at most 4096)")
    p.add_argument("--memory", type=float, default=None, metavar="BYTES", help="working memory per device for a chunk")
    p.add_argument("--plot", default=None, metavar="PNG", help="figure path (default OUT/sweep.png)")
    p.add_argument("--no-plot", action="store_true", help="do not draw the figure")
    p.add_argument("--overwrite", action="store_true", help="replace a different sweep found in --out")
    p.add_argument("--wait", action="store_true",
                   help="if another sweep is writing to --out, wait for it to finish (default: stop with an error)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (the progress bar shows only when stderr is a terminal)")
    p.set_defaults(func=_cmd_sweep, sweep_command=None)
    sub = p.add_subparsers(dest="sweep_command", metavar="{merge}", action=_MergeSubcommand)
    pm = sub.add_parser("merge", help="join shard files / sweep directories of one sweep",
                        description="Join the shards of one sweep (directories or shard-i-of-N.npz files) into "
                                    "OUT/results.csv, results.npz, results.json.", allow_abbrev=False)
    pm.add_argument("inputs", nargs="+", metavar="DIR_OR_SHARD")
    pm.add_argument("--out", required=True, metavar="DIR")
    pm.add_argument("--allow-partial", action="store_true", help="write the finished points even if some are missing")
    pm.add_argument("--quiet", action="store_true")
    pm.set_defaults(func=_cmd_merge)
    return p


def _cmd_sweep(args) -> int:
    rounds = args.rounds
    for value, parse in ((rounds, parse_rounds), (args.sample_rate, parse_sample_rate)):
        if value is not None:
            try:
                parse(value)
            except ValueError as exc:  # name the flag
                raise ValueError(f"--{exc}".replace("--sample_rate", "--sample-rate", 1)) from None
    for flag, value in (("--blanket-points", args.blanket_points), ("--discretization", args.discretization)):
        if value is not None and rounds is None:
            raise ValueError(f"{flag}: applies with --rounds only (composition over rounds)")
    kinds = option_kinds()
    opts = {k: getattr(args, f"opt_{k}") for k in kinds if getattr(args, f"opt_{k}", None) is not None}
    default = args.randomizer is None and not opts and args.n is None and args.delta is None \
        and args.rounds is None and args.sample_rate is None
    if default:
        g = default_grid()
        name, n, delta = g.pop("randomizer"), g.pop("n"), g.pop("delta")
        opts = g
    else:
        name, n, delta = args.randomizer or "general", args.n, args.delta
        if n is None:
            raise ValueError("n: required (e.g. --n 1e3,1e4 or --n 1e3..1e6:7)")
        if delta is None:
            raise ValueError("delta: required (e.g. --delta 1e-6 or --delta 0.01/n)")
    out = args.out or "jaxshuffle-sweep"
    if args.plot and not args.no_plot and _shard_n(args.shard) == 1:  # drawn: checked before computing
        check_output_path("plot", args.plot, example="sweep.png")
    client = _connect(args)
    with sigterm_raises(), (client if client is not None else contextlib.nullcontext()):
        try:
            res = sweep(name, n=n, delta=delta, out=out, rtol=args.rtol, lower=not args.no_lower,
                        scaled_variant=args.scaled, upper_from=args.upper_from,
                        merge_buckets=not args.no_merge_buckets, shard=args.shard,
                        devices=args.devices, chunk_size=args.chunk_size, memory=args.memory, quiet=args.quiet,
                        overwrite=args.overwrite, wait=args.wait, executor=client, rounds=rounds,
                        sample_rate=args.sample_rate,
                        blanket_points=args.blanket_points, discretization=args.discretization, **opts)
        except SweepLocked as exc:
            raise ValueError(f"--out {exc.out}: another sweep is writing there (lock file {exc.lock_path}); "
                             "wait for it or pass --wait") from None
        return _finish_sweep(args, res, out)


def _connect(args):
    """A ``distributed.Client`` for ``--scheduler`` / ``--scheduler-file`` (None without either).

    Raises ValueError (one line from the CLI) when both are given, dask.distributed is not
    installed, the scheduler file is missing or the scheduler cannot be reached within
    ``--connect-timeout`` seconds.
    """
    if args.scheduler is None and args.scheduler_file is None:
        return None
    if args.scheduler is not None and args.scheduler_file is not None:
        raise ValueError("scheduler: give --scheduler or --scheduler-file, not both")
    if not args.connect_timeout > 0:
        raise ValueError(f"connect-timeout: must be > 0 seconds, got {args.connect_timeout:g}")
    flag = f"--scheduler {args.scheduler}" if args.scheduler else f"--scheduler-file {args.scheduler_file}"
    try:
        from distributed import Client
    except ImportError:
        raise ValueError(f"{flag}: needs dask.distributed (pip install 'jaxshuffle[distributed]')") from None
    address = args.scheduler
    if args.scheduler_file is not None:
        address = _scheduler_file_address(Path(args.scheduler_file), flag)
    # a malformed or unknown address: say so before a Client is made (a Client that fails half-way
    # prints a traceback from its destructor later)
    from distributed.comm import resolve_address

    try:
        resolve_address(address)
    except Exception as exc:
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"{flag}: not a reachable scheduler address, e.g. tcp://host:8786 ({why})") from None
    kw = {"address": args.scheduler} if args.scheduler else {"scheduler_file": args.scheduler_file}
    try:
        return Client(**kw, timeout=f"{args.connect_timeout}s", set_as_default=False)
    except Exception as exc:  # OSError / TimeoutError / a malformed address
        why = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"{flag}: cannot reach the Dask scheduler within {args.connect_timeout:g} s ({why})") from None


def _scheduler_file_address(path: Path, flag: str) -> str:
    """The ``address`` of a scheduler file as ``dask scheduler --scheduler-file`` writes it (a JSON
    object); ValueError naming the option and the file when it is missing, too large or malformed."""
    if not path.is_file():
        raise ValueError(f"{flag}: no such file")
    if path.stat().st_size > 1 << 20:
        raise ValueError(f"{flag}: {path.stat().st_size} bytes is not a scheduler file "
                         "(dask writes a small JSON object)")
    try:
        info = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{flag}: not a scheduler file written by 'dask scheduler --scheduler-file' "
                         f"({type(exc).__name__}: {' '.join(str(exc).split())})") from None
    if not isinstance(info, dict) or not isinstance(info.get("address"), str):
        raise ValueError(f"{flag}: not a scheduler file written by 'dask scheduler --scheduler-file' "
                         "(a JSON object with an 'address' string)")
    return info["address"]


#: the PNG metadata (Software) of the figure a sweep draws: the default OUT/sweep.png is replaced only
#: where it holds this (a sweep wrote it), never a user's file of that name
SWEEP_FIGURE_MARK = "jaxshuffle sweep"


def _draw_summary(res, png: Path, explicit: bool) -> bool:
    """Draw the sweep's figure to ``png`` (atomically, marked); False where the default path holds a
    file no sweep wrote (left as it is). ``explicit``: the user named the path (``--plot``)."""
    from jaxshuffle import plot as jplot
    from jaxshuffle.plot.common import png_bytes
    from jaxshuffle.sweeps.files import atomic_write

    if not explicit and (png.exists() or png.is_symlink()) and not file_is_ours(png, b"\x89PNG",
                                                                                 SWEEP_FIGURE_MARK.encode()):
        return False
    atomic_write(png, png_bytes(jplot.summary_figure(res), SWEEP_FIGURE_MARK))
    return True


def _finish_sweep(args, res, out) -> int:
    msg = f"{len(res)} points -> {Path(out) / 'results.csv'}"
    if res.complete and not args.no_plot and _shard_n(args.shard) == 1:
        png = Path(args.plot) if args.plot else Path(out) / "sweep.png"
        try:
            if _draw_summary(res, png, explicit=bool(args.plot)):
                msg += f", {png}"
            else:
                print(f"[sweep] no figure: {png} exists and jaxshuffle did not write it (left as it is; "
                      "name another file with --plot)", file=sys.stderr)
        except ImportError as exc:
            if args.plot:
                raise ValueError(f"plot: {exc}") from None
            print(f"[sweep] no figure: {exc}", file=sys.stderr)
        except OSError as exc:  # e.g. a finished sweep re-read from a read-only directory
            if args.plot:
                raise ValueError(f"plot: cannot write {png}: {exc.strerror or exc}") from None
            print(f"[sweep] no figure: cannot write {png} ({exc.strerror or exc})", file=sys.stderr)
    print(msg)
    failed = (res.meta.get("executor") or {}).get("failed") or []
    if failed:  # chunks that failed twice on the cluster (each already warned about with its points)
        points = sum(len(f["points"]) for f in failed)
        print(f"jaxshuffle: {len(failed)} chunk(s) failed twice; their {points} points are missing from "
              f"{Path(out) / 'results.csv'}: rerun the same command to compute them", file=sys.stderr)
        return 1
    return 0


def _shard_n(shard) -> int:
    return parse_shard(shard)[1]


def _cmd_merge(args) -> int:
    for inp in args.inputs:  # a sweep directory keeps its finished chunks in chunks/ (made when it started)
        p = Path(inp)
        if p.is_dir() and (p / "sweep.json").exists() and not (p / "chunks").is_dir() \
                and not any(p.glob("shard-*-of-*.npz")):
            raise ValueError(f"inputs: {inp} has no chunks/ folder (a sweep directory keeps its finished chunks "
                             "there) and no shard file: give a whole sweep directory or its shard-i-of-N.npz files")
    check_output_dir("out", args.out, files=tuple(sorted(MERGE_OUTPUTS)))  # before reading the inputs
    res = merge(args.inputs, args.out, allow_partial=args.allow_partial, quiet=args.quiet)
    print(f"{len(res)} points -> {Path(args.out) / 'results.csv'}")
    return 0


def add_plot_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Add ``plot`` (``jaxshuffle plot RESULTS.csv -o out.png``) to an argparse subparsers object."""
    p = subparsers.add_parser(
        "plot", help="plot sweep results (amplification ratio, privacy-utility surface)",
        description="Draw a figure from a sweep's results (results.csv, results.npz or the sweep directory). "
                    "kind auto: a row of panels per randomizer, delta rule and option value (e.g. k); a heat map "
                    "and the amplification ratio for a grid with at least 3 n and 3 eps0, else the ratio, or eps "
                    "against n. A sweep with a rounds axis: composed eps against T, one panel per (randomizer "
                    "options, n), next to basic and advanced composition. Needs matplotlib (pip install "
                    "'jaxshuffle[plot]').", allow_abbrev=False)
    p.add_argument("results", metavar="RESULTS", help="results.csv / results.npz / sweep directory")
    p.add_argument("-o", "--output", required=True, metavar="PNG", help="output image (png, pdf, svg)")
    p.add_argument("--kind", choices=("auto", "ratio", "surface", "both"), default="auto")
    p.add_argument("--n", type=float, default=None, help="ratio plot: this n only (default: one line per n)")
    p.add_argument("--delta-rule", default=None, help="use the points with this delta_rule (default: the first)")
    p.add_argument("--randomizer", default=None, help="use the points of this randomizer (default: the first)")
    p.add_argument("--targets", default="0.1,0.3,1", metavar="EPS[,EPS]", help="contour levels of amplified eps")
    p.add_argument("--utility-k", type=float, default=None, metavar="K",
                   help="overlay the std of the k-ary RR frequency estimator (default: the panel's k on grr "
                        "panels, none elsewhere; an explicit K is drawn on grr panels with that k and on "
                        "general; 0: none)")
    p.add_argument("--dpi", type=int_type("dpi", 1, MAX_DPI), default=150,
                   help=f"resolution in dots per inch, 1 to {MAX_DPI} (default 150)")
    p.set_defaults(func=_cmd_plot)
    return p


#: At most this many problem lines of ``jaxshuffle plot`` (then a count of the rest).
MAX_PROBLEM_LINES = 20


def _cmd_plot(args) -> int:
    """``jaxshuffle plot``: check the output path and the data, then draw.

    Results holding impossible values (:func:`jaxshuffle.plot.check_results`: NaN bounds, eps0 <= 0,
    a one-round upper above eps0, lower above upper) are refused and nothing is drawn: one line per
    problem (at most :data:`MAX_PROBLEM_LINES`) on stderr, the last as the ValueError (exit 2 from
    the CLI). ``-o`` naming a directory, or a file in a missing or read-only folder, is refused
    before the results are read.
    """
    try:
        from jaxshuffle import plot as jplot

        jplot.require_matplotlib()
    except ImportError as exc:
        raise ValueError(f"plot: {exc}") from None
    check_output_path("-o/--output", args.output, example="sweep.png")  # before reading anything
    with warnings.catch_warnings(record=True) as caught:  # a torn last row: one line on stderr
        warnings.simplefilter("always", RuntimeWarning)
        res = load(args.results)
    for w in caught:
        print(f"jaxshuffle: warning: {w.message}", file=sys.stderr)
    problems = jplot.check_results(res)
    if problems:  # one line per problem; the last one is the error itself (exit 2 from the CLI)
        shown = problems[:MAX_PROBLEM_LINES]
        for line in shown[:-1]:
            print(f"jaxshuffle: error: {line}", file=sys.stderr)
        more = "" if len(problems) == 1 else \
            f"; {len(problems)} impossible values in all" + (f", the first {len(shown)} listed"
                                                            if len(problems) > len(shown) else "")
        raise ValueError(f"{shown[-1]} (nothing drawn{more})")
    targets = [float(x) for x in parse_option("targets", args.targets)]
    jplot.summary_figure(res, args.output, kind=args.kind, n=args.n, delta_rule=args.delta_rule,
                         randomizer=args.randomizer, targets=targets, utility_k=args.utility_k, dpi=args.dpi)
    print(args.output)
    return 0
