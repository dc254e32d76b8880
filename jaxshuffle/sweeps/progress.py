"""The sweep's progress display on stderr: a tqdm bar whose rate and ETA count evaluation time only.

:mod:`jaxshuffle.sweeps.execution` drives it.
"""

from __future__ import annotations

import datetime
import math
import sys

import numpy as np


def _is_tty(stream) -> bool:
    """Whether ``stream`` is a terminal (False for streams that cannot say)."""
    try:
        return bool(stream.isatty())
    except Exception:
        return False


class Progress:
    """A tqdm progress bar on stderr, only when stderr is a terminal (and not ``quiet``).

    While a chunk compiles its program the description says so ("compiling program 2/3"). The
    rate and the ETA show from the first finished chunk on (before it: ``? points/s, ETA ?``) and
    count evaluation time. Each kind of chunk (two-count searches, mechanism searches, rounds,
    sampled points: ``kind``) has a cost per unit of work of its own (a mechanism search costs
    far more per unit than a two-count window count), taken, best first, from its chunks whose
    program was already compiled, from its chunks that compiled (their time then includes the
    compile), or, for a kind not run yet, from every chunk so far. Once a chunk ran on a compiled
    program, each program still to compile adds the mean time of the chunks that compiled.
    :meth:`rate_eta` gives the values from chunks on compiled programs only (None before one),
    ``guess=True`` the fallbacks too: the bar shows those, an ETA that needed one marked ``~``.
    """

    def __init__(self, quiet: bool, total_points: int, done_points: int, programs: int, file=None):
        self.file = sys.stderr if file is None else file
        self.programs = programs  # programs this run compiles
        self.compiling = 0
        self.steady_s = 0.0  # evaluation time: chunks whose program was already compiled
        self.steady_work = 0.0
        self.steady_points = 0
        self.first_s: list[float] = []  # chunks that compiled their program
        self.first_points = 0
        self.kinds: dict = {}  # kind -> [steady s, steady work, compiling s, compiling work]
        self.total_points, self.done_points = int(total_points), int(done_points)
        self.bar = None
        if not quiet and _is_tty(self.file):
            from tqdm import tqdm

            self.bar = tqdm(total=total_points, initial=done_points, file=self.file, desc="sweep", unit="pt",
                            dynamic_ncols=True, leave=True,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} points{postfix}")
            self.bar.set_postfix_str("? points/s, ETA ?", refresh=False)  # nothing measured yet

    def start_chunk(self, compiling: bool) -> None:
        """A chunk starts; ``compiling``: its program is compiled first (the description says so)."""
        if compiling:
            self.compiling += 1
        if self.bar is not None:
            desc = f"compiling program {self.compiling}/{max(self.programs, self.compiling)}" if compiling else "sweep"
            self.bar.set_description_str(desc, refresh=compiling)

    def _per_work(self, kind, guess: bool) -> float | None:
        """Seconds per unit of work of ``kind`` (see the class); None when nothing says."""
        steady_s, steady_work, first_s, first_work = self.kinds.get(kind, (0.0, 0.0, 0.0, 0.0))
        if steady_work > 0:
            return steady_s / steady_work
        if not guess:
            return None
        if first_work > 0:
            return first_s / first_work
        if self.steady_work > 0:  # a kind not run yet: every kind's measured cost
            return self.steady_s / self.steady_work
        work = sum(k[3] for k in self.kinds.values())
        return sum(self.first_s) / work if work > 0 else None

    def rate_eta(self, work_left, programs_left: int, guess: bool = False) -> tuple[float | None, float | None]:
        """Points per second and the ETA in seconds.

        ``work_left``: the work still to run, a number (one kind) or ``{kind: work}``. Without ``guess`` both
        come from chunks that ran on a compiled program only (None before one); with it, from the fallbacks
        of the class docstring as well (None only before the first chunk finished)."""
        rate = self.steady_points / self.steady_s if self.steady_s > 0 and self.steady_points else None
        left = work_left if isinstance(work_left, dict) else {None: float(work_left)}
        eta = 0.0
        for kind, work in left.items():
            if work <= 0:
                continue
            per_work = self._per_work(kind if isinstance(work_left, dict) else self._only_kind(), guess)
            if per_work is None:
                return rate if not guess else self._rate_guess(None), None
            eta += work * per_work
        if self.steady_work > 0:  # the compiling chunks' time is not in the per-work costs: one per program
            eta += programs_left * (float(np.mean(self.first_s)) if self.first_s else 0.0)
        finite = eta if math.isfinite(eta) else None
        return (rate if not guess else self._rate_guess(finite)), finite

    def _only_kind(self):
        """The kind a plain number of work left refers to: the one kind run so far (None before any)."""
        return next(iter(self.kinds)) if len(self.kinds) == 1 else None

    def _rate_guess(self, eta: float | None) -> float | None:
        """Points per second shown: measured on compiled programs, else over every chunk so far, else (no
        point finished yet, e.g. a k-RR sweep's two-count chunks before its mechanism chunks) the points
        left over the ETA."""
        if self.steady_s > 0 and self.steady_points:
            return self.steady_points / self.steady_s
        spent = self.steady_s + sum(self.first_s)
        points = self.steady_points + self.first_points
        if spent > 0 and points:
            return points / spent
        left = self.total_points - self.done_points
        return left / eta if eta is not None and eta > 0 and left > 0 else None

    def update(self, new_points: int, work: float, dt: float, compiled: bool, work_left,
               programs_left: int, kind=None) -> None:
        """A chunk of ``kind`` finished ``new_points`` points in ``dt`` seconds; ``compiled``: that time includes
        a compile. ``work_left``: a number, or ``{kind: work}`` (see :meth:`rate_eta`)."""
        stats = self.kinds.setdefault(kind, [0.0, 0.0, 0.0, 0.0])
        if compiled:
            self.first_s.append(dt)
            self.first_points += new_points
            stats[2] += dt
            stats[3] += work
        else:
            self.steady_s += dt
            self.steady_work += work
            self.steady_points += new_points
            stats[0] += dt
            stats[1] += work
        self.done_points += new_points
        if self.bar is None:
            return
        rate, eta = self.rate_eta(work_left, programs_left, guess=True)
        rough = eta is not None and self.rate_eta(work_left, programs_left)[1] is None
        self.bar.set_postfix_str(f"{_rate_text(rate)}, ETA {'~' if rough else ''}{_eta_text(eta)}", refresh=False)
        self.bar.set_description_str("sweep", refresh=False)
        self.bar.n += new_points  # one refresh per chunk (tqdm's own rate is not shown)
        self.bar.refresh()

    def close(self) -> None:
        """Close the bar (once; later calls do nothing)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _rate_text(rate: float | None) -> str:
    if rate is None:
        return "? points/s"
    return f"{rate:.1f} points/s" if rate >= 1 else f"{rate:.2g} points/s"


def _eta_text(eta: float | None) -> str:
    return str(datetime.timedelta(seconds=int(round(eta)))) if eta is not None else "?"
