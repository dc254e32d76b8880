"""What the ``jaxshuffle`` subcommands share: the user-error type, grid-valued options, the
randomizer's options as flags, output formatting, output-path checks and SIGTERM handling.

The subcommand modules (:mod:`jaxshuffle.cli`, ``compose``, ``sweep``, ``tune``) import these at
their top; none imports from another's namespace, so the package has no import cycle.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, SupportsFloat, overload

from jaxshuffle.accountant.amplify import UPPER_FROM
from jaxshuffle.sweeps.grid import parse_n, parse_option
from jaxshuffle.sweeps.stops import SweepInterrupted, waiting

if TYPE_CHECKING:
    from jaxshuffle.randomizers.catalog import Entry


class UsageError(Exception):
    """A user error: printed as one line, exit status 2."""


def grid_type(name: str, *, integer: bool = False) -> Callable[[str], list[float]]:
    """The argparse ``type`` of the grid-valued option ``--name``: its values as a list, read by the rules a
    sweep applies to the same axis (:func:`jaxshuffle.sweeps.grid.parse_n` for ``n``, rounded to integers;
    :func:`~jaxshuffle.sweeps.grid.parse_option` otherwise, rounded where ``integer``), so a grid text gives
    the same points, or the same one-line error, in ``sweep`` and in every other command.

    The error is raised as :class:`UsageError`, past argparse: its own wrapping would prefix
    ``argument --n:`` and the message would differ from the sweep's.
    """
    def values(text: str) -> list[float]:
        try:
            return (parse_n(text) if name == "n" else parse_option(name, text, integer=integer)).tolist()
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    values.__name__ = name
    return values


def int_type(name: str, low: int, high: int, why: str = "") -> Callable[[str], int]:
    """The argparse ``type`` of the single-integer option ``--name``: an integer in ``[low, high]``, else a
    one-line UsageError naming the option, the value given and the range (``why``, if given, says where
    ``high`` comes from).

    Read as ``--rounds`` is (:func:`jaxshuffle.sweeps.grid.parse_rounds`): as a float64 first and compared
    there, so ``1e3`` is 1000 and ``1e30`` or ``99999999999999999999999`` is refused as out of range, with
    nothing converted to an integer (or allocated) before the check. Raised as :class:`UsageError`, past
    argparse, as :func:`grid_type` does.
    """
    def value(text: str) -> int:
        try:
            v = float(text)
        except ValueError:
            v = math.nan
        if not (low <= v <= high and v == math.floor(v)):
            raise UsageError(f"--{name}: must be an integer in [{low}, {high}]{f' ({why})' if why else ''}, "
                             f"got {text!r}")
        return int(v)

    value.__name__ = name
    return value


@overload
def catalog_entry(name: str) -> Entry: ...
@overload
def catalog_entry(name: None) -> None: ...
def catalog_entry(name: str | None) -> Entry | None:
    """The catalog entry named ``name`` (None for None); UsageError for an unknown name."""
    from jaxshuffle.randomizers import CATALOG

    if name is None:
        return None
    if name not in CATALOG:
        raise UsageError(f"randomizer: unknown name {name!r}; choose one of {', '.join(sorted(CATALOG))} "
                         "(see `jaxshuffle randomizers`)")
    return CATALOG[name]


def add_entry_options(p: argparse.ArgumentParser, entry: Entry | None, skip: tuple[str, ...] = ()) -> None:
    """One grid-valued flag per option of the catalog ``entry`` (none for None), stored as ``opt_<name>``."""
    if entry is None:
        return
    for a in entry.args:
        if a.name in skip:
            continue
        flags = [f"--{a.name}"] + ([f"--{a.name.replace('_', '-')}"] if "_" in a.name else [])
        default = None if a.default is None else [a.default]
        p.add_argument(*flags, dest=f"opt_{a.name}", type=grid_type(a.name, integer=a.kind == "int"), default=default,
                       metavar="X[,X...]",
                       help=f"{a.help}; {a.range_text()}" + ("" if a.default is None else f" (default {a.default:g})"))


def entry_options(args: argparse.Namespace, entry: Entry, skip: tuple[str, ...] = ()) -> dict[str, list[float]]:
    """The values given for each option of ``entry`` (name -> grid); UsageError names a missing one."""
    out = {}
    for a in entry.args:
        if a.name in skip:
            continue
        val = getattr(args, f"opt_{a.name}", None)
        if val is None:
            raise UsageError(f"{a.name}: required option of randomizer {args.randomizer!r} "
                             f"(--{a.name}: {a.help}; {a.range_text()})")
        out[a.name] = val
    return out


def assumptions(entry: Entry, name: str) -> str:
    """The privacy statement's first line: the model and the randomizer the bounds hold for."""
    if entry.multi_message:
        msg = ("each user sends one input-dependent message plus blanket_per_user input-independent "
               "(blanket) messages")
    else:
        msg = "each user sends a single message"
    return (f"Shuffle model, replace-one neighbouring datasets (one user's input changes), {msg}, "
            f"randomized by {name!r}: {entry.description}.")


def add_sample_rate(p: argparse.ArgumentParser, scope: str) -> None:
    """``--sample-rate G``: the probability that each user takes part (Poisson client sampling)."""
    p.add_argument("--sample-rate", type=float, default=1.0, metavar="G",
                   help="probability in (0, 1] that each user takes part in a round (Poisson client sampling; "
                        f"--n counts every user). Below 1: {scope}")


def num(x: SupportsFloat) -> float | None:
    """``x`` as a float, None where it is not finite (JSON has no inf or NaN)."""
    x = float(x)
    return x if math.isfinite(x) else None


def fmt(x: float) -> str:
    """An epsilon for the plain-text tables: six decimals, six digits below 1e-3, ``inf``."""
    return "inf" if not math.isfinite(x) else f"{x:.6g}" if abs(x) < 1e-3 and x != 0 else f"{x:.6f}"


def check_output_path(param: str, path: str, example: str = "compose.png", *, matplotlib: bool = True) -> None:
    """Refuse an output file that cannot be written, before any computation (and, for a figure, matplotlib
    missing).

    Args:
      param: the option as the messages name it (``plot``, ``-o/--output``).
      path: the output file given.
      example: a file name the message suggests inside ``path`` when ``path`` is a directory.
      matplotlib: also refuse when matplotlib is missing (the file is a figure).

    Raises:
      UsageError: ``path`` is a directory, its folder does not exist or is not writable, or
        matplotlib is missing (with ``matplotlib``).
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise UsageError(f"{param}: {path} is a directory; give a file name such as {target / example}")
    if not parent.is_dir():
        raise UsageError(f"{param}: the folder {parent} of {path} " +
                         ("is a file" if parent.exists() else "does not exist"))
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UsageError(f"{param}: {path} is not writable")
    if not matplotlib:
        return
    try:
        from jaxshuffle import plot as jplot

        jplot.require_matplotlib()
    except ImportError as exc:
        raise UsageError(f"{param}: {exc}") from None


def check_output_dir(param: str, path: str, files: tuple[str, ...] = ()) -> None:
    """Refuse an output folder that cannot be made or written, before any computation (the folder's
    counterpart of :func:`check_output_path`).

    Args:
      param: the option as the messages name it (``out``).
      path: the output folder given; it may not exist yet (it is made, parents included, as ``os.makedirs``
        does), then its nearest existing ancestor must be a writable folder.
      files: the names written inside it: each one that exists must be a writable file.

    Raises:
      UsageError: ``path`` or an ancestor is a file, the folder that would hold it is not writable, or one of
        ``files`` there is a folder or not writable.
    """
    target = Path(path)
    existing = target
    while not (existing.exists() or existing.is_symlink()) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "" if existing == target else f" (in the way of {path})"
        raise UsageError(f"{param}: {existing} is a file, not a folder{where}; give a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{param}: {path} is not writable" if existing == target else
                         f"{param}: {path} cannot be made: the folder {existing} is not writable")
    if existing != target:
        return
    for name in files:
        f = target / name
        if f.is_dir() or (f.exists() and not os.access(f, os.W_OK)):
            why = "a folder where the file is written" if f.is_dir() else "not writable"
            raise UsageError(f"{param}: {f} is {why}; give another folder")


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM raises :class:`SweepInterrupted` (like Ctrl-C's KeyboardInterrupt): files are closed, exit 143."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(signum, frame):
        raise SweepInterrupted(signum)

    def on_alarm(signum, frame):
        raise SweepInterrupted(signal.SIGTERM)

    def on_unraisable(unraisable):
        # the handler ran inside a callback whose exceptions Python ignores (a gc callback such as
        # jax's, a __del__): deliver the stop again a moment later, from ordinary code (while the main
        # thread waits for a computation, the wait raises it again itself: no second delivery)
        if isinstance(unraisable.exc_value, SweepInterrupted):
            if not waiting():
                signal.setitimer(signal.ITIMER_REAL, 0.05)
            return
        old_hook(unraisable)

    old = signal.signal(signal.SIGTERM, on_sigterm)
    old_alarm = signal.signal(signal.SIGALRM, on_alarm)
    old_hook, sys.unraisablehook = sys.unraisablehook, on_unraisable
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.unraisablehook = old_hook
        signal.signal(signal.SIGALRM, old_alarm)
        signal.signal(signal.SIGTERM, old)


def file_is_ours(path: Path, start: bytes, mark: bytes) -> bool:
    """``path`` is a regular file (not a link) whose first bytes begin with ``start`` and hold ``mark``:
    a file a command wrote, so one it may replace (a command replaces only its own files)."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.startswith(start) and mark in head


def add_upper_from(p: argparse.ArgumentParser) -> None:
    """``--upper-from`` (amplify's ``upper_from``) of the one-round commands (epsilon, calibrate, compare)."""
    p.add_argument("--upper-from", dest="upper_from", choices=UPPER_FROM, default="best",
                   help="certified upper bound: the smallest over every sound source (best, default), the "
                        "two-count worst-case pair only (any eps0-LDP randomizer with this p, q), or the "
                        "randomizer's own blanket pair (k-ary RR; the subset-selection, hadamard-response and "
                        "binary-rr rows' matrices, where they build one)")


#: which randomizers take --sample-rate below 1 in one round (epsilon, calibrate, compare)
SAMPLED_SCOPE = ("single-message randomizers: k-ary RR's blanket pair, a row's matrix (subset selection, Hadamard "
                 "response, binary RR), or the three-count pair; no two-count pair applies")
