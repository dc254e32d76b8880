"""Stopping, resuming and locking a sweep: what :func:`jaxshuffle.sweeps.run.sweep` does on a signal and
when another process writes into the same directory.

:class:`SweepInterrupted` (a KeyboardInterrupt: a sweep stopped by SIGINT or SIGTERM, every finished
chunk saved, the same call resumes), :class:`SweepLocked` (a ValueError: another sweep holds the
output directory's lock), ``_DeferSignals`` (SIGINT and SIGTERM wait while files are written, so a
chunk and its CSV rows land whole) and ``_lock_out`` (one writer per sweep directory, per shard,
with a file lock). The driver in :mod:`jaxshuffle.sweeps.run` uses them and re-exports the two
exceptions (``from jaxshuffle.sweeps.run import SweepInterrupted, SweepLocked`` keeps working).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from pathlib import Path

# ----------------------------------------------------------------------------------------
# Stops and locks


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by SIGINT (Ctrl-C, KeyboardInterrupt) or SIGTERM; every finished chunk is saved.

    A subclass of KeyboardInterrupt, so ``except KeyboardInterrupt`` catches it. Calling
    :func:`sweep` again with the same arguments resumes. Attributes: ``signum``,
    ``exit_status`` (128 + signum: 130 for SIGINT, 143 for SIGTERM) and ``saved`` (what is
    saved where, e.g. ``"12 of 24 points saved in run/results.csv"``; empty before the sweep
    started computing).
    """

    def __init__(self, signum: int = signal.SIGINT, saved: str = ""):
        self.signum = int(signum)
        self.saved = saved
        super().__init__(f"sweep interrupted ({self.signal_name})"
                         + (f": {saved}; call sweep() again with the same arguments to resume" if saved else ""))

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

    @property
    def signal_name(self) -> str:
        try:
            return signal.Signals(self.signum).name
        except ValueError:  # pragma: no cover
            return f"signal {self.signum}"


class SweepLocked(ValueError):
    """Another process is writing a sweep into the same output directory (see ``wait``)."""

    def __init__(self, out: Path, lock_path: Path):
        self.out, self.lock_path = out, lock_path
        super().__init__(f"out: {out}: another sweep is writing there (lock file {lock_path}); wait for it or "
                         "pass wait=True")


class _DeferSignals:
    """While files are written (``with guard.writing():``), SIGINT and SIGTERM wait for the write to end.

    Wraps the Python-level handlers found when the sweep starts (Python's KeyboardInterrupt
    handler, the CLI's SIGTERM handler, a caller's own); default and ignored dispositions are
    left alone. Only in the main thread (the only one that can set handlers); elsewhere a no-op.
    """

    def __init__(self):
        self.old: dict = {}
        self.busy = False
        self.pending: tuple | None = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                handler = signal.getsignal(sig)
                if callable(handler):
                    self.old[sig] = handler
                    signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc_info):
        for sig, handler in self.old.items():
            signal.signal(sig, handler)
        self.old = {}
        return False

    def _handle(self, signum, frame):
        if self.busy:
            self.pending = self.pending or (signum, frame)
            return
        self.old[signum](signum, frame)

    @contextlib.contextmanager
    def writing(self):
        self.busy = True
        try:
            yield
        finally:
            self.busy = False
            if self.pending is not None:
                (signum, frame), self.pending = self.pending, None
                self.old[signum](signum, frame)


def _lock_out(chunk_dir: Path, out_dir: Path, name: str, wait: bool, quiet: bool):
    """Hold ``chunk_dir/name`` (a filelock): one writer per sweep directory (per shard with ``shard``).

    The lock file lives in ``chunks/`` and is never removed (removing a lock file that others may
    have opened breaks the mutual exclusion); ``load_chunks`` and ``merge`` ignore it.
    """
    from filelock import FileLock, Timeout

    path = chunk_dir / name
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except RuntimeError as exc:  # filelock >= 3.2x: held by another FileLock in this thread (waiting would deadlock)
        raise SweepLocked(out_dir, path) from exc
    except Timeout:
        if not wait:
            raise SweepLocked(out_dir, path) from None
        if not quiet:
            print(f"[sweep] waiting for the other sweep writing to {out_dir} (lock file {path})",
                  file=sys.stderr, flush=True)
        lock.acquire()
    return lock
