"""Stopping, resuming and locking a sweep: what :func:`jaxshuffle.sweeps.run.sweep` does on a signal and
when another process writes into the same directory.

:class:`SweepInterrupted` (a KeyboardInterrupt: a sweep stopped by SIGINT or SIGTERM, every finished
chunk saved, the same call resumes), :class:`SweepLocked` (a ValueError: another sweep holds the
output directory's lock), ``DeferSignals`` (SIGINT and SIGTERM wait while files are written, so a
chunk and its CSV rows land whole), :func:`run_interruptible` (a long computation in a worker thread
while the main thread waits, so a signal acts within a fraction of a second) and ``lock_out`` (one
writer per sweep directory, per shard, with a file lock). The driver in :mod:`jaxshuffle.sweeps.run`
uses them and re-exports the two exceptions (``from jaxshuffle.sweeps.run import SweepInterrupted,
SweepLocked`` keeps working).

Why a worker thread: Python runs signal handlers in the main thread only, between bytecodes, so a
handler waits for a running XLA computation (one call of a chunk's program can take minutes) to
return. :func:`run_interruptible` runs the computation in a daemon thread and has the main thread
wait in short steps, so Ctrl-C (KeyboardInterrupt) and the command line's SIGTERM handler raise at
once. The computation is then abandoned: it runs on in its thread until its XLA call returns, and
its result is dropped (it writes nothing: every file is written by the main thread).
:func:`abandoned` counts those still running; the command line ends the process at once
(``os._exit``) after its message, and a library caller's interpreter waits for them at exit
(JAX's own exit handler would otherwise tear the backend down under them and abort the process).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

_T = TypeVar("_T")

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


class DeferSignals:
    """While files are written (``with guard.writing():``), SIGINT and SIGTERM wait for the write to end.

    Wraps the Python-level handlers found when the sweep starts (Python's KeyboardInterrupt
    handler, the CLI's SIGTERM handler, a caller's own); default and ignored dispositions are
    left alone. Only in the main thread (the only one that can set handlers); elsewhere a no-op.

    It also remembers the exception a handler raised (``raised``): a handler that ran inside a
    callback whose exceptions Python ignores (a gc callback such as JAX's, a ``__del__``) lost its
    KeyboardInterrupt, and :meth:`check` raises it again from ordinary code (the waits of
    :func:`run_interruptible` call it every step).
    """

    def __init__(self):
        self.old: dict = {}
        self.busy = False
        self.pending: tuple | None = None
        self.raised: BaseException | None = None

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
        self._deliver(signum, frame)

    def _deliver(self, signum, frame):
        try:
            self.old[signum](signum, frame)
        except BaseException as exc:  # remembered: check() raises it again where a callback swallowed it
            self.raised = exc
            raise

    def check(self) -> None:
        """Raise again a stop whose exception a handler raised but something swallowed (see the class)."""
        if self.raised is not None and not self.busy:
            raise self.raised

    @contextlib.contextmanager
    def writing(self):
        self.busy = True
        try:
            yield
        finally:
            self.busy = False
            if self.pending is not None:
                (signum, frame), self.pending = self.pending, None
                self._deliver(signum, frame)


# ----------------------------------------------------------------------------------------
# Long computations in a worker thread, the main thread waiting (a signal acts at once)

#: Seconds between the main thread's checks while it waits for a computation (a signal that lands
#: in the wait itself acts at once; this bounds the delay of one delivered to another thread).
POLL_S = 0.1

_ABANDONED: set[threading.Thread] = set()  # computations a stop left running (daemon threads)
_ABANDONED_LOCK = threading.Lock()
_waiting = 0  # run_interruptible waits in progress (main thread only)
_exit_hook_registered = False


def abandoned() -> int:
    """The computations a stop abandoned that are still running (see :func:`run_interruptible`)."""
    with _ABANDONED_LOCK:
        return sum(1 for t in _ABANDONED if t.is_alive())


def waiting() -> bool:
    """Whether the main thread is in :func:`run_interruptible`'s wait (which raises a swallowed stop again)."""
    return _waiting > 0


def _jax_thread_state() -> list:
    """This thread's own JAX settings (``with jax.enable_x64(True):``, ``jax.default_device``, ...): JAX keeps
    them per thread, and a worker thread starts from the global ones. ``[(state, value)]``."""
    try:
        from jax._src import config as jax_config

        unset = jax_config.config_ext.unset
        return [(st, st.get_local()) for st in jax_config.config_states.values() if st.get_local() is not unset]
    except Exception:  # pragma: no cover - another JAX layout: the public settings that change numbers
        import jax

        out = []
        for name, ctx in (("jax_enable_x64", jax.enable_x64), ("jax_default_device", jax.default_device)):
            value = getattr(jax.config, name, None)
            if name == "jax_enable_x64" or value is not None:
                out.append((ctx, value))
        return out


@contextlib.contextmanager
def _jax_thread_state_applied(state: list):
    """Set ``state`` (from :func:`_jax_thread_state`) in this thread for the block."""
    with contextlib.ExitStack() as stack:
        for st, value in state:
            stack.enter_context(st(value))
        yield


def _wait_for_abandoned_at_exit() -> None:
    """At interpreter exit: wait for abandoned computations (JAX's exit handler, run after this one, would
    tear the backend down under a running XLA call and abort the process); a second Ctrl-C exits at once."""
    with _ABANDONED_LOCK:
        live = [t for t in _ABANDONED if t.is_alive()]
    if not live:
        return
    print("jaxshuffle: waiting for the stopped computation to end before exiting (Ctrl-C to exit at once)",
          file=sys.stderr, flush=True)
    try:
        for t in live:
            while t.is_alive():
                t.join(POLL_S)
    except KeyboardInterrupt:
        exit_at_once(130)


def exit_at_once(status: int) -> None:
    """End the process now with ``status``, output flushed, without the interpreter's shutdown (which would
    wait for, or tear the backend down under, an abandoned computation)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream: nothing more to say
            stream.flush()
    os._exit(status)


def _abandon(thread: threading.Thread) -> None:
    global _exit_hook_registered
    with _ABANDONED_LOCK:
        _ABANDONED.difference_update([t for t in _ABANDONED if not t.is_alive()])
        _ABANDONED.add(thread)
        if not _exit_hook_registered:  # registered after JAX's own exit handler, so it runs before it
            atexit.register(_wait_for_abandoned_at_exit)
            _exit_hook_registered = True


def run_interruptible(fn: Callable[..., _T], *args: Any, guard: DeferSignals | None = None, **kwargs: Any) -> _T:
    """``fn(*args, **kwargs)``, computed in a worker thread while the main thread waits in steps of
    :data:`POLL_S` seconds: a signal handler that raises (Ctrl-C's KeyboardInterrupt, the CLI's SIGTERM
    handler) stops the wait at once, where it would otherwise wait for a running XLA call to return.

    The worker starts with the caller's JAX thread-local settings (``jax.enable_x64``, ``jax.default_device``)
    and context variables. Its exception, if any, is raised here. On a stop the computation is abandoned: it
    runs on in its daemon thread until it returns, its result is dropped (it must write nothing itself) and
    :func:`abandoned` counts it. ``guard``: the sweep's :class:`DeferSignals`, whose :meth:`~DeferSignals.check`
    raises a stop that a callback swallowed (without one, a guard of its own is set for the wait). Outside
    the main thread (where no signal handler runs) ``fn`` is simply called.
    """
    global _waiting
    if threading.current_thread() is not threading.main_thread():
        return fn(*args, **kwargs)
    if guard is None:
        with DeferSignals() as own:
            return run_interruptible(fn, *args, guard=own, **kwargs)
    state, context = _jax_thread_state(), contextvars.copy_context()
    box: dict = {}
    done = threading.Event()

    def work():
        try:
            with _jax_thread_state_applied(state):
                box["value"] = context.run(fn, *args, **kwargs)
        except BaseException as exc:  # raised in the main thread (or dropped, once abandoned)
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=work, name=f"jaxshuffle-{getattr(fn, '__name__', 'compute')}", daemon=True)
    _waiting += 1
    try:
        thread.start()
        while not done.wait(POLL_S):
            guard.check()
        guard.check()  # a stop swallowed just before the computation ended
    except BaseException:
        if not done.is_set():
            _abandon(thread)
        raise
    finally:
        _waiting -= 1
    if "error" in box:
        error = box.pop("error")
        try:
            raise error
        finally:
            del error
    return box.pop("value")


def lock_out(chunk_dir: Path, out_dir: Path, name: str, wait: bool, quiet: bool):
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
