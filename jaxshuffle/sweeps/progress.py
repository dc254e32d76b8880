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


class _Progress:
    """A tqdm progress bar on stderr, only when stderr is a terminal (and not ``quiet``).

    While a chunk compiles its program the description says so ("compiling program 2/3"); the
    rate and the ETA come from evaluation time only: chunks whose program was already compiled
    give the time per unit of work (searches x window), chunks that compiled give the compile
    time charged to each program still to compile.
    """

    def __init__(self, quiet: bool, total_points: int, done_points: int, programs: int, file=None):
        self.file = sys.stderr if file is None else file
        self.programs = programs  # programs this run compiles
        self.compiling = 0
        self.steady_s = 0.0  # evaluation time: chunks whose program was already compiled
        self.steady_work = 0.0
        self.steady_points = 0
        self.first_s: list[float] = []  # chunks that compiled their program
        self.bar = None
        if not quiet and _is_tty(self.file):
            from tqdm import tqdm

            self.bar = tqdm(total=total_points, initial=done_points, file=self.file, desc="sweep", unit="pt",
                            dynamic_ncols=True, leave=True,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} points{postfix}")

    def start_chunk(self, compiling: bool) -> None:
        """A chunk starts; ``compiling``: its program is compiled first (the description says so)."""
        if compiling:
            self.compiling += 1
        if self.bar is not None:
            desc = f"compiling program {self.compiling}/{max(self.programs, self.compiling)}" if compiling else "sweep"
            self.bar.set_description_str(desc, refresh=compiling)

    def rate_eta(self, work_left: float, programs_left: int) -> tuple[float | None, float | None]:
        """Points per second of evaluation (None before a chunk ran on a compiled program) and the ETA in seconds."""
        rate = self.steady_points / self.steady_s if self.steady_s > 0 and self.steady_points else None
        if self.steady_work <= 0:  # only chunks that compiled so far: no evaluation time to go by
            return rate, None
        per_work = self.steady_s / self.steady_work
        compile_s = float(np.mean(self.first_s)) if self.first_s else 0.0
        eta = work_left * per_work + programs_left * compile_s
        return rate, (eta if math.isfinite(eta) else None)

    def update(self, new_points: int, work: float, dt: float, compiled: bool, work_left: float,
               programs_left: int) -> None:
        """A chunk finished ``new_points`` points in ``dt`` seconds; ``compiled``: that time includes a compile."""
        if compiled:
            self.first_s.append(dt)
        else:
            self.steady_s += dt
            self.steady_work += work
            self.steady_points += new_points
        if self.bar is None:
            return
        rate, eta = self.rate_eta(work_left, programs_left)
        rate_s = f"{rate:.1f} points/s" if rate is not None else "? points/s"
        eta_s = str(datetime.timedelta(seconds=int(eta))) if eta is not None else "?"
        self.bar.set_postfix_str(f"{rate_s}, ETA {eta_s}", refresh=False)
        self.bar.set_description_str("sweep", refresh=False)
        self.bar.n += new_points  # one refresh per chunk (tqdm's own rate is not shown)
        self.bar.refresh()

    def close(self) -> None:
        """Close the bar (once; later calls do nothing)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
