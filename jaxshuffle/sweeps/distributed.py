"""Running a sweep's chunks on an executor: a Dask ``Client`` or any ``concurrent.futures.Executor``.

The unit of work is the local sweep's chunk (one bucket's plan and a job range). A worker runs
:func:`run_chunk`: it imports jaxshuffle (float64 checked), keeps one :class:`Runner` over its own
local devices per process (its compiled programs stay between tasks, and jaxshuffle's persistent
compilation cache is on as in every process that imports it) and returns the four result arrays.
The driver (:func:`jaxshuffle.sweeps.run.sweep`) alone writes the store, so resume and the
fingerprint work as for a local run, and the values are bit-identical to it (the same program on
the same inputs; padding lanes are dropped).

:class:`ChunkPool` submits the chunks with a bounded window of futures in flight, retries a chunk
whose task failed or whose worker was lost once, and reports a chunk that failed twice to the
driver (which leaves its points out of ``results.csv`` and warns; a later run retries them). With a
Dask ``Client`` it places each chunk on a worker that already holds the chunk's program where one
has room (``workers=[addr]`` with ``allow_other_workers=True``, so a lost worker's task still runs
elsewhere), so every worker compiles few programs.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard, cast

import numpy as np

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

    from distributed import Client
    from distributed import Future as DaskFuture

    from jaxshuffle.sweeps.grids import ChunkPlan

_RUNNERS: dict = {}  # rtol -> Runner over this worker process's local devices (its programs stay compiled)
# Driver side: (scheduler address, plan, size, rtol) -> Dask workers known to hold that program
# (kept across sweeps in this process, so a second sweep on the same cluster reuses the placement).
_HOLDERS: dict = {}
_MALLOC = {"tuned": False}


def _undo_small_trim_threshold() -> None:
    """Give glibc's allocator back large thresholds when the process started with a small ``MALLOC_TRIM_THRESHOLD_``.

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (to hand memory back to the
    OS sooner); that fixes glibc's mmap threshold too, so every large XLA buffer is mmap'd and
    unmapped again: the engine ran 23% slower in a Dask worker (51 against 67 points/s at n = 1e8
    on 2 cores, benchmarks/distributed.py). Sets the mmap threshold to 32 MiB (glibc's dynamic
    maximum) and the trim threshold to 64 MiB; memory is still returned above that. Linux/glibc
    only; elsewhere, or when the variable is not set, nothing changes.
    """
    if _MALLOC["tuned"]:
        return
    _MALLOC["tuned"] = True
    try:
        value = os.environ.get("MALLOC_TRIM_THRESHOLD_")
        if value is None or int(value) >= 32 * 2**20:
            return
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 * 2**20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 64 * 2**20)  # M_TRIM_THRESHOLD
    except (OSError, ValueError, AttributeError):  # not glibc, or a malformed value: leave it
        pass


def run_chunk(plan: ChunkPlan, jobs: np.ndarray, c_lo: np.ndarray, size: int,
              rtol: float) -> tuple[np.ndarray | dict[str, Any], ...]:
    """Worker side: evaluate one chunk; returns ``(lower, upper, status, iterations, info)`` (a rounds chunk:
    ``(lower, upper, status, iterations, extra, info)``).

    ``info`` names the worker (Dask address, else ``host:pid``), whether this task compiled the
    program (first run of ``(plan, size)`` in this process), the evaluation seconds and the
    programs this process has compiled so far. Raises RuntimeError when the worker's JAX runs
    in 32-bit mode (jaxshuffle computes only in float64).
    """
    import jax

    import jaxshuffle  # noqa: F401  (enables float64 and the compilation cache unless switched off)
    from jaxshuffle._config import require_x64
    from jaxshuffle.sweeps.schedule import Runner

    require_x64()
    _undo_small_trim_threshold()
    runner = _RUNNERS.get(rtol)
    if runner is None:
        runner = _RUNNERS[rtol] = Runner(rtol, jax.local_devices())
    compiled = not runner.is_compiled(plan, size)
    t = time.perf_counter()
    arrays = runner.run(plan, jobs, c_lo, size)
    dt = time.perf_counter() - t
    sleep = float(os.environ.get("JAXSHUFFLE_SWEEP_WORKER_SLEEP", "0") or 0)  # test aid: slow tasks down
    if sleep:
        time.sleep(sleep)
    return (*arrays, {"worker": _worker_name(), "compiled": compiled, "seconds": dt,
                      "programs": len(runner.compiled), "devices": len(runner.devices)})


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except Exception:  # not on a Dask worker (a process pool, a thread) or distributed not installed
        return f"{socket.gethostname()}:{os.getpid()}"


def is_dask_client(executor: object) -> TypeGuard[Client]:
    """True for a ``dask.distributed.Client`` (not its ``get_executor()`` wrapper)."""
    return type(executor).__name__ == "Client" and type(executor).__module__.startswith("distributed")


def check_executor(executor: object) -> None:
    """Raise ValueError naming ``executor`` unless it is a Dask Client or a concurrent.futures.Executor."""
    import concurrent.futures as cf

    if not (is_dask_client(executor) or isinstance(executor, cf.Executor)):
        raise ValueError("executor: must be a dask.distributed.Client or a concurrent.futures.Executor "
                         f"(e.g. ProcessPoolExecutor), got {type(executor).__name__}")


def describe(executor: Executor | Client) -> tuple[str, str | None]:
    """A one-line description of the executor and its dashboard link (None when it has none)."""
    if is_dask_client(executor):
        info = _scheduler_info(executor)
        workers = info.get("workers", {})
        threads = sum(int(w.get("nthreads", 1)) for w in workers.values())
        try:
            link = executor.dashboard_link
        except Exception:  # no dashboard (bokeh not installed, dashboard_address=None)
            link = None
        return f"Dask scheduler {info.get('address', '?')} ({len(workers)} workers, {threads} threads)", link
    slots = getattr(executor, "_max_workers", None)
    client = getattr(executor, "_client", None)
    if client is not None and is_dask_client(client):
        return f"{type(executor).__name__} of {describe(client)[0]}", describe(client)[1]
    return f"{type(executor).__name__}" + (f" ({slots} workers)" if slots else ""), None


def _scheduler_info(client) -> dict:
    """The scheduler's identity with every worker (some Dask versions list only 5 by default)."""
    try:
        return client.scheduler_info(n_workers=-1)
    except TypeError:  # older Dask: no n_workers argument, all workers listed
        return client.scheduler_info()


@dataclass
class Task:
    """One chunk to run: its index, plan, jobs, window starts and padded size."""
    ci: int
    plan: ChunkPlan
    jobs: np.ndarray
    c_lo: np.ndarray
    size: int
    attempts: int = 0
    errors: list = field(default_factory=list)


#: What :meth:`ChunkPool.results` yields: ``(task, arrays, info)`` for a chunk that succeeded, ``(task, None,
#: error_text)`` for one that failed twice.
ChunkOutcome: TypeAlias = "tuple[Task, tuple[np.ndarray, ...], dict[str, Any]] | tuple[Task, None, str]"


class ChunkPool:
    """Submits chunks to an executor with at most ``window`` in flight; yields results as they complete.

    ``results(tasks)`` yields ``(task, arrays, info)`` for every chunk that succeeded and
    ``(task, None, error_text)`` for a chunk that failed twice (a raised task or a lost worker
    each count once; Dask itself reschedules a task whose worker died, which does not count).
    ``close()`` cancels what is still in flight (on Ctrl-C). ``programs`` maps each worker to the
    programs it reported compiled.
    """

    ATTEMPTS = 2

    def __init__(self, executor: Executor | Client, rtol: float, window: int | None = None):
        self.executor, self.rtol = executor, rtol
        self.dask = is_dask_client(executor)
        self.in_flight: dict = {}  # future -> (task, worker address or None)
        self.programs: dict[str, int] = {}
        self.chunks_per_worker: dict[str, int] = {}
        self.seconds_per_worker: dict[str, float] = {}  # evaluation seconds the workers reported
        self.wait_s = 0.0  # time the driver spent waiting for futures (the rest of its loop is its own work)
        self.plan_workers: dict = {}  # (plan, size) -> worker addresses that hold (or were sent) the program
        if self.dask:
            address = getattr(getattr(executor, "scheduler", None), "address", None)
            self.plan_workers = _HOLDERS.setdefault((address, rtol), {})
        self.load: dict[str, int] = {}
        self._known: tuple[float, dict] = (-1.0, {})  # (time, {worker address: threads}), refreshed each second
        slots = self._slots()
        self.cap = 2  # tasks in flight per worker thread (one running, one queued)
        self.window = int(window) if window else max(2, self.cap * slots)

    def _slots(self) -> int:
        if self.dask:
            return max(1, sum(self._workers().values()))
        client = getattr(self.executor, "_client", None)  # Dask's client.get_executor(): the cluster's threads
        if client is not None and is_dask_client(client):
            workers = _scheduler_info(client).get("workers", {})
            return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))
        return max(1, int(getattr(self.executor, "_max_workers", None) or os.cpu_count() or 1))

    def _workers(self) -> dict[str, int]:
        t, known = self._known
        if time.monotonic() - t > 1.0:
            known = {a: int(w.get("nthreads", 1)) for a, w in _scheduler_info(self.executor).get("workers", {}).items()}
            self._known = (time.monotonic(), known)
        return known

    def _pick(self, key) -> str | None:
        """A worker for a chunk of program ``key``: one holding it with room, else the least loaded one."""
        workers = self._workers()
        if not workers:
            return None
        load = lambda a: self.load.get(a, 0) / workers[a]  # noqa: E731
        holders = [a for a in self.plan_workers.get(key, ()) if a in workers and
                   self.load.get(a, 0) < self.cap * workers[a]]
        addr = min(holders, key=load) if holders else min(workers, key=load)
        self.plan_workers.setdefault(key, set()).add(addr)
        return addr

    def _submit(self, task: Task) -> None:
        """Submit one chunk; RuntimeError when the executor takes no more work (a broken pool, a closed client)."""
        try:
            self._submit_one(task)
        except Exception as exc:
            raise RuntimeError(f"executor: takes no more chunks ({type(exc).__name__}: {exc}); the finished chunks "
                               "are saved: run the same sweep again with a working executor to resume") from exc

    def _submit_one(self, task: Task) -> None:
        task.attempts += 1
        args = (task.plan, task.jobs, task.c_lo, task.size, self.rtol)
        addr = None
        if self.dask:
            client = cast("Client", self.executor)  # self.dask: the executor is a Dask Client
            addr = self._pick((task.plan, task.size))
            kw: dict[str, Any] = {"workers": [addr], "allow_other_workers": True} if addr else {}
            fut: Future | DaskFuture = client.submit(run_chunk, *args, pure=False, **kw)
            if addr:
                self.load[addr] = self.load.get(addr, 0) + 1
        else:
            fut = self.executor.submit(run_chunk, *args)
        self.in_flight[fut] = (task, addr)

    def _wait(self) -> list:
        t = time.perf_counter()
        try:
            return self._wait_some()
        finally:
            self.wait_s += time.perf_counter() - t

    def _wait_some(self) -> list:
        futs = list(self.in_flight)
        if self.dask:
            from distributed import wait

            client = cast("Client", self.executor)  # self.dask: the executor is a Dask Client
            try:
                with client.as_current():  # wait() uses the current client: this one, even if not the default
                    wait(futs, timeout=0.5, return_when="FIRST_COMPLETED")
            except TimeoutError:
                pass
            return [f for f in futs if f.status in ("finished", "error", "cancelled")]
        import concurrent.futures as cf

        done, _ = cf.wait(futs, timeout=0.5, return_when=cf.FIRST_COMPLETED)
        return list(done)

    def results(self, tasks: Iterable[Task]) -> Iterator[ChunkOutcome]:
        """Yield ``(task, arrays, info)`` / ``(task, None, errors)`` as chunks complete (``tasks`` is read lazily)."""
        tasks = iter(tasks)
        retry: list[Task] = []
        exhausted = False
        while retry or self.in_flight or not exhausted:
            while len(self.in_flight) < self.window:
                if retry:
                    self._submit(retry.pop())
                    continue
                task = None if exhausted else next(tasks, None)
                if task is None:
                    exhausted = True
                    break
                self._submit(task)
            if not self.in_flight:
                continue
            for fut in self._wait():
                task, addr = self.in_flight.pop(fut)
                if addr:
                    self.load[addr] -= 1
                try:
                    *arrays, info = fut.result()
                except Exception as exc:  # the task raised, or its worker (or process pool) was lost
                    if "jaxshuffle needs float64" in str(exc):  # a worker set up wrongly: no retry helps
                        raise RuntimeError(f"executor: a worker cannot run jaxshuffle: {exc}") from None
                    task.errors.append(f"{type(exc).__name__}: {exc}".strip())
                    if task.attempts < self.ATTEMPTS:
                        retry.append(task)
                    else:
                        yield task, None, "; ".join(task.errors)
                    continue
                w = info["worker"]
                self.programs[w] = max(self.programs.get(w, 0), int(info["programs"]))
                self.chunks_per_worker[w] = self.chunks_per_worker.get(w, 0) + 1
                self.seconds_per_worker[w] = self.seconds_per_worker.get(w, 0.0) + float(info["seconds"])
                self.plan_workers.setdefault((task.plan, task.size), set()).add(w)
                yield task, tuple(arrays), info

    def close(self) -> None:
        futs = list(self.in_flight)
        self.in_flight.clear()
        if self.dask and futs:
            try:
                cast("Client", self.executor).cancel(futs)
            except Exception:  # pragma: no cover - the client may already be closing
                pass
        else:
            for f in futs:
                f.cancel()
