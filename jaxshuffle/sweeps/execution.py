"""One sweep run once its output directory is open: the run's state, its chunks and its final files.

:class:`SweepRun` holds the per-job result arrays, which jobs and points are done and the progressive
CSV (:meth:`SweepRun.record` stores a finished chunk); :func:`start_workers`, :func:`announce` and
:func:`run_chunks` run the chunks here or on an executor's workers; :func:`finish` writes the
metadata, the shard file and the results. :func:`jaxshuffle.sweeps.run.sweep` drives it, with the
options as one :class:`RunSettings`, the grid as a :class:`RunPlan` and the directory as an
:class:`OpenStore`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

import numpy as np

from jaxshuffle.sweeps.jobs import MechanismPlan, RoundsPlan
from jaxshuffle.sweeps.progress import Progress
from jaxshuffle.sweeps.schedule import Runner
from jaxshuffle.sweeps.stops import DeferSignals, SweepInterrupted, run_interruptible
from jaxshuffle.sweeps.store import (
    COLUMNS,
    MAX_ITER,
    METHODS,
    SweepResult,
    atomic_write,
    checksum_bytes,
    checksum_path,
    csv_text,
    environment,
    npz_bytes,
    utc_now,
    write_results,
)

if TYPE_CHECKING:
    from jaxshuffle.sweeps.distributed import ChunkPool, Task
    from jaxshuffle.sweeps.grids import Bucket, ChunkPlan, Grid


def _ranges(points: np.ndarray) -> str:
    """Sorted integers as ranges: ``0-3, 7, 9-10``."""
    parts, p = [], [int(x) for x in points]
    i = 0
    while i < len(p):
        j = i
        while j + 1 < len(p) and p[j + 1] == p[j] + 1:
            j += 1
        parts.append(f"{p[i]}" if i == j else f"{p[i]}-{p[j]}")
        i = j + 1
    return ", ".join(parts)


class RunSettings(NamedTuple):
    """The options of one sweep run, checked and fixed for the whole run.

    :func:`sweep` builds it once from its keywords (``shard`` parsed into ``shard_i``/``shard_n``);
    every phase of the driver reads it, so no phase takes the options one by one.
    """

    rtol: float
    lower: bool
    scaled_variant: bool
    upper_from: str
    merge_buckets: bool
    shard_i: int
    shard_n: int
    devices: Any  # as sweep's ``devices`` (None: every local device)
    chunk_size: int | None
    memory: float | None
    quiet: bool
    overwrite: bool
    wait: bool
    executor: Any  # None, a dask.distributed.Client or a concurrent.futures.Executor (checked by sweep)
    rounds_settings: dict | None


class RunPlan(NamedTuple):
    """What the grid, the options and the platform decide before the output directory is read."""

    spec: dict
    devs: list  # the local devices (those the environment record names)
    remote: bool  # the chunks run on an executor's workers
    platform: str  # the platform the buckets and the chunk layout are planned for
    settings: dict  # the settings in the fingerprint
    fingerprint: str
    grid: Grid
    buckets: list[Bucket]  # [(plan, job ids, c_lo)]
    layout_settings: dict  # what the chunk layout of a new sweep comes from
    t_plan: float  # when planning started (perf_counter)


class OpenStore(NamedTuple):
    """The output directory as opened for this run (``out_dir`` None: in memory only)."""

    out_dir: Path | None
    read_only: bool  # a finished sweep in a directory this process cannot write: read, write nothing
    manifest: dict | None
    chunks: list  # the chunk layout (a resumed sweep's own)
    done_chunks: dict  # chunk index -> the arrays of its chunk file
    torn_line: int | None  # the torn last row of results.csv, repaired from the chunk files
    plan_s: float  # planning time, the wait for the lock left out


# ----------------------------------------------------------------------------------------
# The run's state: finished jobs and points, the progressive CSV


class SweepRun:
    """The mutable state of one run: the per-job result arrays, which jobs and points are done, the CSV.

    :meth:`record` stores a finished chunk (arrays, chunk file, CSV rows), :meth:`advance` moves the
    progress on, :meth:`stopped` says what a signal leaves saved.
    """

    def __init__(self, spec: dict, s: RunSettings, plan: RunPlan, store: OpenStore, guard: DeferSignals):
        self.spec, self.s, self.plan, self.store, self.guard = spec, s, plan, store, guard
        self.grid = grid = plan.grid
        J = grid.n_jobs
        self.lower, self.upper = np.zeros(J), np.full(J, np.inf)
        self.status, self.iterations = np.full(J, 5, np.int8), np.zeros(J, np.int32)
        self.extra = np.full((J, grid.extra_width), np.nan) if grid.extra_width else None
        self.job_done = np.zeros(J, dtype=bool)
        self.jobs_per_point = grid.pending(self.job_done)  # distinct jobs each point waits for
        self._restore(store.done_chunks)
        self.mine = [ci for ci in range(len(store.chunks)) if ci % s.shard_n == s.shard_i]
        self.todo = [ci for ci in self.mine if not self.job_done[self.chunk_ids(ci)].all()]  # by coverage, not name
        self.chunks_done = len(self.mine) - len(self.todo)
        # Points finished so far (for the progressive CSV): every job of the point done.
        self.pending = grid.pending(self.job_done)
        self.csv_cols = ["index", *grid.table.keys(), *grid.result_order]
        self.csv_path: Path | None = None
        self.csv_file: TextIO | None = None
        self.progress: Progress | None = None
        # (plan, chunk size) -> whether its program is compiled already (start_workers sets it)
        self.is_compiled: Callable[[ChunkPlan, int], bool] | None = None
        self.work_left = 0.0
        self.kind_left: dict = {}  # kind of plan -> work still to run (the ETA prices each kind on its own)
        self.remaining: dict = {}  # (plan, chunk size) -> chunks still to run

    def _restore(self, done_chunks: dict) -> None:
        """Put the finished chunks' values into the arrays and mark their jobs done."""
        for data in done_chunks.values():
            ids = data["jobs"]
            if self.extra is not None:
                extra = data.get("extra")
                if extra is None or extra.shape != (len(ids), self.grid.extra_width):
                    continue  # a rounds chunk without its columns (damaged): computed again
                self.extra[ids] = extra
            self.lower[ids], self.upper[ids] = data["lower"], data["upper"]
            self.status[ids], self.iterations[ids] = data["status"], data["iterations"]
            self.job_done[ids] = True

    def chunk_ids(self, ci: int) -> np.ndarray:
        """The job ids of chunk ``ci``."""
        ch = self.store.chunks[ci]
        return self.plan.buckets[ch["bucket"]][1][ch["start"]:ch["stop"]]

    def _compiled(self, plan: ChunkPlan, size: int) -> bool:
        """Whether the program of ``(plan, size)`` is compiled already (:attr:`is_compiled`, set by start_workers)."""
        if self.is_compiled is None:
            raise RuntimeError("internal: the workers are not started yet (start_workers sets is_compiled)")
        return self.is_compiled(plan, size)

    def chunk_jobs(self, ci: int) -> tuple[ChunkPlan, np.ndarray, np.ndarray, int]:
        """Chunk ``ci``'s plan, job ids, ``c_lo`` and (padded) size."""
        ch = self.store.chunks[ci]
        plan, ids_all, clo_all = self.plan.buckets[ch["bucket"]]
        return plan, ids_all[ch["start"]:ch["stop"]], clo_all[ch["start"]:ch["stop"]], ch["size"]

    def work(self, ci: int) -> float:
        """Chunk ``ci``'s work for the ETA: its size times its bucket's window."""
        ch = self.store.chunks[ci]
        return ch["size"] * self.plan.buckets[ch["bucket"]][0].window

    def kind(self, ci: int) -> str:
        """Chunk ``ci``'s kind for the ETA (its plan's type: two-count, mechanism, rounds, sampled)."""
        return type(self.plan.buckets[self.store.chunks[ci]["bucket"]][0]).__name__

    def chunk_done(self, ci: int) -> None:
        """Take chunk ``ci`` off the work and the chunks still to run (finished, or failed for good)."""
        plan, _, _, size = self.chunk_jobs(ci)
        work, kind = self.work(ci), self.kind(ci)
        self.work_left -= work
        self.kind_left[kind] = self.kind_left.get(kind, 0.0) - work
        self.remaining[(plan, size)] -= 1

    def points_done(self) -> np.ndarray:
        """The grid points whose every job is done."""
        return np.nonzero(self.pending == 0)[0]

    def columns(self, points: np.ndarray) -> dict:
        """The result columns of ``points``."""
        return self.grid.combine(self.lower, self.upper, self.status, self.iterations, points, self.extra)

    def start_csv(self) -> None:
        """Write ``results.csv`` afresh from the finished points (unsharded, writable ``out`` only)."""
        out_dir, s = self.store.out_dir, self.s
        if out_dir is None or s.shard_n != 1 or self.store.read_only:
            return
        self.csv_path = out_dir / "results.csv"
        # rebuilt from the chunk files: this also repairs a torn last row
        cols = self.columns(self.points_done())
        with self.guard.writing():
            atomic_write(self.csv_path, csv_text(cols, self.csv_cols, True).encode())
        if self.store.torn_line is not None and not s.quiet:
            print(f"[sweep] {self.csv_path}: repaired the torn last row (line {self.store.torn_line}) from the chunk "
                  "files", file=sys.stderr, flush=True)

    def count_work(self) -> int:
        """Set the work and the chunks left per program; returns the number of programs still to compile."""
        self.work_left = float(sum(self.work(ci) for ci in self.todo))
        for ci in self.todo:
            self.kind_left[self.kind(ci)] = self.kind_left.get(self.kind(ci), 0.0) + self.work(ci)
            ch = self.store.chunks[ci]
            kk = (self.plan.buckets[ch["bucket"]][0], ch["size"])
            self.remaining[kk] = self.remaining.get(kk, 0) + 1
        return sum(1 for kk in self.remaining if not self._compiled(*kk))

    def record(self, ci: int, ids: np.ndarray, lo: np.ndarray, up: np.ndarray, st: np.ndarray, it: np.ndarray,
               extra: np.ndarray | None = None) -> np.ndarray:
        """Store one finished chunk (arrays, chunk file, CSV rows); returns the points it finished.

        ``extra``: a rounds chunk's composed-epsilon columns (stored in its chunk file too)."""
        out_dir = self.store.out_dir
        with self.guard.writing():  # a signal here waits until the chunk and its CSV rows are on disk
            self.lower[ids], self.upper[ids], self.status[ids], self.iterations[ids] = lo, up, st, it
            more = {}
            if extra is not None:
                if self.extra is None:
                    raise ValueError("internal: a chunk with extra columns for a grid without them")
                self.extra[ids] = extra
                more["extra"] = np.asarray(extra, dtype=np.float64)
            fresh = ids[~self.job_done[ids]]
            self.job_done[ids] = True
            if out_dir is not None:  # the checksum sidecar first: a chunk file on disk always has its own
                path = out_dir / "chunks" / f"c{ci:06d}.npz"
                fields = dict(jobs=ids, lower=lo, upper=up, status=st, iterations=it, **more,
                              fingerprint=np.asarray(self.plan.fingerprint))
                arrays = {k: np.asarray(v) for k, v in fields.items()}
                atomic_write(checksum_path(path), checksum_bytes(path, arrays))
                atomic_write(path, npz_bytes(**arrays))
            touched = self.grid.points_of_jobs(fresh)
            self.pending -= np.bincount(touched, minlength=self.grid.size)
            touched = np.unique(touched)
            fin = touched[self.pending[touched] == 0]
            if self.csv_file is not None and fin.size:
                self._append_csv(self.csv_file, fin)
            self.chunks_done += 1
        return fin

    def _append_csv(self, csv_file: TextIO, points: np.ndarray) -> None:
        """Append the rows of ``points`` to ``results.csv`` (open as ``csv_file``), on disk before this returns."""
        try:
            csv_file.write(csv_text(self.columns(points), self.csv_cols, False))
            csv_file.flush()
            os.fsync(csv_file.fileno())
        except OSError as exc:  # name the file (a torn row is repaired on resume)
            if not exc.filename:
                exc.filename = str(self.csv_path)
            raise

    def advance(self, ci: int, fin_points: int, dt: float, compiled: bool) -> None:
        """Move the progress on by chunk ``ci``, which finished ``fin_points`` points in ``dt`` seconds."""
        self.chunk_done(ci)
        programs_left = sum(1 for kk, cnt in self.remaining.items() if cnt > 0 and not self._compiled(*kk))
        if self.progress is None:
            raise RuntimeError("internal: the progress starts with the chunks (run_chunks)")
        self.progress.update(int(fin_points), self.work(ci), dt, compiled, dict(self.kind_left), programs_left,
                             kind=self.kind(ci))

    def stopped(self, exc: KeyboardInterrupt) -> SweepInterrupted:
        """The :class:`SweepInterrupted` for ``exc``, saying exactly what is saved.

        The counts are those of the chunk files on disk, this run's and the earlier runs' it resumed (the
        in-memory state is updated under the write guard with each chunk file): the points whose every
        search is in a chunk file (their rows are in ``results.csv``), and, where some chunk files hold
        searches of points not finished yet (a k-ary RR grid's two-count chunks run before its mechanism
        chunks), those chunks and searches too.
        """
        out_dir, s = self.store.out_dir, self.s
        mine = np.concatenate([self.chunk_ids(ci) for ci in self.mine]) if self.mine else np.zeros(0, np.int64)
        jobs_kept = int(self.job_done[mine].sum())
        partial = int(((self.pending > 0) & (self.pending < self.jobs_per_point)).sum())
        chunks = (f"{self.chunks_done} of {len(self.mine)} chunks ({jobs_kept} of {mine.size} searches"
                  + (f", part of {partial} more points" if partial else "") + ")")
        if self.csv_path is not None and out_dir is not None:
            saved = f"{int((self.pending == 0).sum())} of {self.grid.size} points saved in {self.csv_path}"
            if partial:  # chunk files whose points are not all finished: say what they hold
                saved += f"; {chunks} kept in {out_dir / 'chunks'}"
        elif out_dir is not None:
            saved = (f"{chunks} of shard {s.shard_i}/{s.shard_n} saved in {out_dir / 'chunks'}"
                     if s.shard_n > 1 else f"{chunks} saved in {out_dir / 'chunks'}")
        else:
            saved = "nothing saved (out=None keeps the results in memory)"
        return SweepInterrupted(getattr(exc, "signum", signal.SIGINT), saved)

    def close(self) -> None:
        """Close the progress bar and the CSV (a failed close is already reported by the failed append)."""
        if self.progress is not None:
            self.progress.close()
        if self.csv_file is not None:
            try:
                self.csv_file.close()
            except OSError:  # the failed append is reported already; resume rebuilds the file
                pass


# ----------------------------------------------------------------------------------------
# The chunks


class Workers(NamedTuple):
    """Where the chunks run: here (``runner``) or on an executor's workers (``pool``)."""

    env: dict  # the environment record of the metadata
    runner: Runner | None
    pool: ChunkPool | None  # a ChunkPool with an executor, else None
    programs: int  # programs this run compiles


def start_workers(run: SweepRun) -> Workers:
    """The local runner or the executor's chunk pool, and the work and programs left."""
    s, plan = run.s, run.plan
    env = environment(plan.devs)
    runner = Runner(s.rtol, plan.devs) if not plan.remote else None
    pool = None
    if runner is None:
        from jaxshuffle.sweeps.distributed import ChunkPool

        chunk_pool = pool = ChunkPool(s.executor, s.rtol)
        run.is_compiled = lambda plan, size: bool(chunk_pool.plan_workers.get((plan, size)))
    else:
        run.is_compiled = runner.is_compiled
    programs = run.count_work()
    return Workers(env, runner, pool, programs)


def announce(run: SweepRun) -> None:
    """One line on stderr (unless quiet): the grid, its chunks, those already done and where they run."""
    s, plan, grid = run.s, run.plan, run.grid
    if s.quiet:
        return
    where = f"{len(plan.devs)} {plan.devs[0].platform} device(s)"
    if plan.remote:
        from jaxshuffle.sweeps.distributed import describe

        where, link = describe(s.executor)
        if link:
            where += f", dashboard {link}"
    what = (f"{grid.n_jobs} distinct (T, delta) cells in {len(plan.buckets)} (options, n) groups "
            "(one composed_epsilon each)"
            if grid.extra_width else f"{grid.n_jobs} distinct searches in {len(plan.buckets)} window buckets")
    print(f"[sweep] {grid.size} points, {what}, "
          f"{len(run.store.chunks)} chunks ({len(run.mine) - len(run.todo)} of this "
          f"{'shard' if s.shard_n > 1 else 'sweep'}'s {len(run.mine)} already done), {where}",
          file=sys.stderr, flush=True)


def run_chunks(run: SweepRun, workers: Workers) -> tuple[float, list[dict]]:
    """Run the chunks still to do; returns the seconds taken and the chunks that failed twice (executor only).

    A Ctrl-C (or a SIGTERM through a handler that raises, the CLI's) becomes :class:`SweepInterrupted` within
    a fraction of a second: a chunk computed here runs in a worker thread while this one waits
    (:func:`~jaxshuffle.sweeps.stops.run_interruptible`), and is abandoned on a stop (its result is never
    written); an executor's chunks are waited for in steps.
    """
    sleep = float(os.environ.get("JAXSHUFFLE_SWEEP_CHUNK_SLEEP", "0") or 0)  # test aid: slow chunks down
    t0 = time.perf_counter()
    failed: list[dict] = []
    try:
        if run.csv_path is not None:
            run.csv_file = open(run.csv_path, "a", newline="")
        run.progress = Progress(run.s.quiet, run.grid.size, int((run.pending == 0).sum()), workers.programs)
        if workers.runner is not None:  # not plan.remote
            _local_chunks(run, workers.runner, sleep)
        elif workers.pool is not None:
            _remote_chunks(run, workers.pool, sleep, failed)
    except KeyboardInterrupt as exc:
        raise run.stopped(exc) from None
    finally:
        run.close()
    return time.perf_counter() - t0, failed


def _local_chunks(run: SweepRun, runner: Runner, sleep: float) -> None:
    """Run the chunks here, one after the other (each computed in a worker thread, this one waiting:
    a signal acts at once; every file is written here, in the main thread)."""
    check = getattr(run.guard, "check", None)
    progress = run.progress
    if progress is None:
        raise RuntimeError("internal: the progress starts with the chunks (run_chunks)")
    for ci in run.todo:
        if check is not None:
            check()  # a stop that a callback swallowed since the last chunk
        plan, ids, clo, size = run.chunk_jobs(ci)
        compiled = not runner.is_compiled(plan, size)
        progress.start_chunk(compiled)
        t = time.perf_counter()
        # a grid's chunks carry only its own buckets' plans, which the union of the grids' job_rows cannot say
        rows = run.grid.job_rows(plan, ids)  # type: ignore[arg-type]
        arrays = run_interruptible(runner.run, plan, rows, clo, size, guard=run.guard)
        dt = time.perf_counter() - t
        fin = run.record(ci, ids, *arrays)
        run.advance(ci, fin.size, dt, compiled)
        if sleep:
            time.sleep(sleep)


def _remote_chunks(run: SweepRun, pool: ChunkPool, sleep: float, failed: list[dict]) -> None:
    """Run the chunks on the executor's workers; a chunk that failed twice is warned about and added to ``failed``."""
    from jaxshuffle.sweeps.distributed import Task

    def tasks() -> Iterator[Task]:  # made as the window of futures in flight advances (memory bounded)
        for ci in run.todo:
            plan, ids, clo, size = run.chunk_jobs(ci)
            yield Task(ci, plan, run.grid.job_rows(plan, ids), clo, size)  # type: ignore[arg-type]  # as in _local_chunks

    slots = max(1, pool.window // pool.cap)
    try:
        for done in pool.results(tasks()):
            _, ids, _, _ = run.chunk_jobs(done[0].ci)
            if done[1] is None:  # failed twice: reported, its points stay missing
                task, _, error = done
                pts = np.unique(run.grid.points_of_jobs(ids))
                failed.append({"chunk": int(task.ci), "points": pts.tolist(), "error": error})
                # stacklevel: the warning names the caller of sweep() (above it: run_chunks, _run_locked, _run, sweep)
                warnings.warn(f"sweep: chunk {task.ci} failed twice ({error}); its {pts.size} grid points "
                              f"(index {_ranges(pts)}) are missing from the results; run the same sweep "
                              "again to compute them", RuntimeWarning, stacklevel=6)
                run.chunk_done(task.ci)
                continue
            task, arrays, info = done
            fin = run.record(task.ci, ids, *arrays)
            # progress rates: a worker's evaluation time shared by the workers running at once
            run.advance(task.ci, fin.size, info["seconds"] / slots, bool(info["compiled"]))
            if sleep:
                time.sleep(sleep)
    finally:
        pool.close()


# ----------------------------------------------------------------------------------------
# The metadata and the results


def finish(run: SweepRun, workers: Workers, elapsed: float, failed: list[dict]) -> SweepResult:
    """The metadata, the shard file (with ``shard``) and the results (files too when the sweep is whole)."""
    s, out_dir, read_only = run.s, run.store.out_dir, run.store.read_only
    try:  # a signal during the final writes (deferred until they end) still reports what is saved
        all_done = bool(run.job_done.all())
        meta = _meta(run, workers, elapsed, failed, all_done)
        if out_dir is not None and s.shard_n > 1 and not read_only:
            _write_shard(run, out_dir)
        if all_done or s.shard_n == 1:
            points = np.arange(run.grid.size) if all_done else run.points_done()
            cols = run.columns(points)
            result = SweepResult({k: cols[k] for k in run.csv_cols}, meta, out_dir)
            if out_dir is not None and (all_done or s.shard_n == 1) and not read_only:
                with run.guard.writing():
                    write_results(out_dir, result, run.csv_cols)
            return result
        cols = run.columns(run.points_done())
        return SweepResult({k: cols[k] for k in run.csv_cols}, meta, out_dir)
    except KeyboardInterrupt as exc:
        raise run.stopped(exc) from None


def _meta(run: SweepRun, workers: Workers, elapsed: float, failed: list[dict], all_done: bool) -> dict:
    """The result's metadata (``sweep.json``'s run record): environment, settings, buckets, timing, executor."""
    from jaxshuffle.engine.two_count.plan import TRUNC_FRACTION
    from jaxshuffle.sweeps.sampled import SampledPlan

    s, plan, grid, runner, pool = run.s, run.plan, run.grid, workers.runner, workers.pool
    if runner is not None:
        programs_compiled = len(runner.compiled)
    elif pool is not None:
        programs_compiled = sum(pool.programs.values())
    else:
        raise RuntimeError("internal: the chunks ran neither here nor on an executor")
    meta = {**workers.env, "methods": METHODS, "columns": COLUMNS, "fingerprint": plan.fingerprint, "grid": run.spec,
            "settings": plan.settings,
            "tolerances": {"rtol": float(s.rtol), "max_iter": MAX_ITER,
                           "window_truncation": f"{TRUNC_FRACTION:g} * delta of binomial mass (Chernoff bound, "
                                                "added to the certified divergence band)"},
            "buckets": [({"mechanism": pl.randomizer} if isinstance(pl, MechanismPlan) else
                         {"rounds": pl.randomizer} if isinstance(pl, RoundsPlan) else
                         {"sampled": pl.randomizer} if isinstance(pl, SampledPlan) else
                         {"window": pl.window, "max_step": pl.max_step, "symmetric": pl.symmetric})
                        | {"searches": int(len(ids))} for pl, ids, _ in plan.buckets],
            "points": grid.size, "searches": grid.n_jobs, "chunks": len(run.store.chunks),
            "shard": [s.shard_i, s.shard_n], "complete": all_done,
            "timing": {"plan_s": run.store.plan_s, "run_s": elapsed, "chunks_run": len(run.todo),
                       "programs_compiled": programs_compiled},
            "written": utc_now()}
    if pool is not None and not s.quiet and pool.programs:  # plan.remote
        per = ", ".join(f"{w}: {pool.programs[w]} ({pool.chunks_per_worker.get(w, 0)} chunks)"
                        for w in sorted(pool.programs))
        print(f"[sweep] programs compiled per worker: {per}", file=sys.stderr, flush=True)
    if pool is not None:  # plan.remote
        from jaxshuffle.sweeps.distributed import describe

        meta["executor"] = {"kind": describe(s.executor)[0],
                            "workers": {w: {"programs_compiled": pool.programs[w],
                                            "chunks": pool.chunks_per_worker.get(w, 0),
                                            "eval_s": pool.seconds_per_worker.get(w, 0.0)} for w in pool.programs},
                            "driver_busy_s": max(elapsed - pool.wait_s, 0.0),
                            "failed": failed}
    return meta


def _write_shard(run: SweepRun, out_dir: Path) -> None:
    """Write this shard's jobs (and the manifest) to ``out_dir/shard-i-of-N.npz`` for ``sweep merge``."""
    s = run.s
    mine_ids = np.concatenate([run.chunk_ids(ci) for ci in run.mine]) if run.mine else np.zeros(0, np.int64)
    more = {"extra": run.extra[mine_ids]} if run.extra is not None else {}
    path = out_dir / f"shard-{s.shard_i}-of-{s.shard_n}.npz"
    arrays = dict(jobs=mine_ids, lower=run.lower[mine_ids], upper=run.upper[mine_ids], status=run.status[mine_ids],
                  iterations=run.iterations[mine_ids], **more, manifest=np.asarray(json.dumps(run.store.manifest)))
    with run.guard.writing():  # the checksum sidecar first, as for chunk files: merge verifies the shard by it
        atomic_write(checksum_path(path), checksum_bytes(path, arrays))
        atomic_write(path, npz_bytes(**arrays))
    if not s.quiet:
        print(f"[sweep] shard {s.shard_i}/{s.shard_n} done -> {out_dir / f'shard-{s.shard_i}-of-{s.shard_n}.npz'}; "
              f"join the shards with: jaxshuffle sweep merge DIR_OR_SHARD... --out DIR", file=sys.stderr)
