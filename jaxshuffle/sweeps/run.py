"""The sweep driver: :func:`sweep` (resumable, sharded, multi-host with ``shard=(i, N)``).

A run goes through phases, each a function of its own: the settings, fingerprint and platform
(:func:`_plan`), the output directory (:func:`_open_store`), the finished jobs restored and the
progressive CSV (:class:`_SweepRun`), the chunks (:func:`_run_chunks`) and the final metadata
and files (:func:`_finish`). The user's options travel as one :class:`RunSettings`.

Stopping on a signal and the output directory's lock are in :mod:`jaxshuffle.sweeps.stops`;
:class:`SweepInterrupted` and :class:`SweepLocked` are re-exported here. The progress bar is in
:mod:`jaxshuffle.sweeps.progress`.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxshuffle._config import VERSION, require_x64
from jaxshuffle.sweeps.grid import build_spec
from jaxshuffle.sweeps.jobs import MechanismPlan, RoundsPlan, make_grid
from jaxshuffle.sweeps.progress import _Progress
from jaxshuffle.sweeps.schedule import Runner, chunk_layout, plan_jobs
from jaxshuffle.sweeps.stops import SweepInterrupted, _DeferSignals, _lock_out
from jaxshuffle.sweeps.stops import SweepLocked as SweepLocked  # re-exported (the CLI and tests import it here)
from jaxshuffle.sweeps.store import (
    COLUMNS,
    MAX_ITER,
    METHODS,
    RESUMABLE_SCHEMAS,
    STORE_SCHEMA,
    SweepResult,
    SweepStoreError,
    atomic_write,
    checksum_bytes,
    checksum_path,
    chunk_dir_of,
    clear_store,
    csv_is_torn,
    csv_text,
    environment,
    holds_other_files,
    load_chunks,
    npz_bytes,
    read_manifest,
    utc_now,
    write_error,
    write_results,
)

#: How a sweep's manifest says its chunk files carry checksum sidecars (see :mod:`jaxshuffle.sweeps.store`).
CHUNK_CHECKSUM = "sha256"


# ----------------------------------------------------------------------------------------
# The sweep


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
    devices: object
    chunk_size: int | None
    memory: float | None
    quiet: bool
    overwrite: bool
    wait: bool
    executor: object
    rounds_settings: dict | None


def _devices(devices):
    import jax

    local = jax.local_devices()
    if devices is None:
        return local
    if isinstance(devices, int):
        if not 1 <= devices <= len(local):
            raise ValueError(f"devices: must be between 1 and {len(local)} (local devices)")
        return local[:devices]
    return list(devices)


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


def parse_shard(shard) -> tuple[int, int]:
    if shard is None:
        return 0, 1
    if isinstance(shard, str):
        try:
            i, n = (int(x) for x in shard.split("/"))
        except ValueError:
            raise ValueError(f"shard: {shard!r} is not of the form i/N (e.g. 0/4)") from None
    else:
        i, n = shard
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"shard: need 0 <= i < N, got {i}/{n}")
    return int(i), int(n)


def _fingerprint(spec: dict, settings: dict) -> str:
    text = json.dumps({"spec": spec, "settings": settings, "version": VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def sweep(randomizer="general", *, n=None, delta=None, out=None, rtol: float = 1e-6, lower: bool = True,
          scaled_variant: bool = False, upper_from: str = "best", merge_buckets: bool = True, shard=None, devices=None,
          chunk_size: int | None = None, memory: float | None = None, quiet: bool = False, overwrite: bool = False,
          wait: bool = False, executor=None, rounds=None, blanket_points: int | None = None,
          discretization: float | None = None, sample_rate=None, **options) -> SweepResult:
    """Certified amplification over the cartesian product of parameter axes.

    It has this many keywords because they are the user's options, each documented here; they are
    gathered at once into one :class:`RunSettings` that the driver's phases share.

    Args:
      randomizer: catalog name (``jaxshuffle.randomizers.CATALOG``), a comma list or a list of
        names; every option axis applies to the randomizers that have that option.
      n: number of users: grid string (``"1e3..1e6:7"``), number or sequence (rounded to integers).
      delta: number, rule in ``n`` (``"0.01/n"``), callable ``f(n)``, grid string, or a list.
      **options: randomizer options (``eps0="0.5:4:8"``, ``k=[3, 10]``); omitted options with a
        catalog default take it.
      rounds: numbers of rounds ``T`` on the same users, a grid axis (``"1..1000:20"``, ``[1, 10, 100]``;
        rounded to integers >= 1). Each point then holds the certified epsilon of its ``T`` rounds at
        its (total) ``delta``: :func:`jaxshuffle.accountant.rounds.composed_epsilon`'s ``upper`` and its
        source, with the candidates ``pld``, ``blanket_pld``, ``basic``, ``advanced`` (and ``pld_lower``,
        ``discretization``) as columns, instead of the single-round columns. One round PLD is built per
        ``(randomizer options, n)`` and composed for all its ``T`` and ``delta`` at once (one chunk).
        Needs ``upper_from="best"`` and no ``scaled_variant``; ``lower`` and ``rtol`` are not used.
        ``None`` (default): no rounds axis, a single-round sweep.
      sample_rate: the probability ``g`` in (0, 1] that each user takes part in a round (Poisson client
        sampling), a grid axis (``"0.01,0.1,1"``). Each point is then
        ``amplify(..., sample_rate=g)``'s report (docs/math.md 13.11: the sampled round's certified
        bounds where ``g < 1``, no two-count pair, ``worst_case`` inf, ``paper`` NaN), evaluated a few
        points per :func:`~jaxshuffle.accountant.amplify` call (:mod:`jaxshuffle.sweeps.sampled`);
        with ``rounds`` too, ``composed_epsilon(..., sample_rate=g)``'s. Single-message randomizers
        only where ``g < 1``; ``upper_from="worst-case"`` is refused there. ``None`` (default): no such axis.
      blanket_points, discretization: with ``rounds``, passed to ``composed_epsilon`` (profile points of
        the k-RR blanket pair's PLD, 0 skips it; the loss grid spacing); ``None``: its defaults.
      out: directory for the files (``None``: in memory only, nothing written, no resume).
      rtol: relative width of every epsilon bracket (``search.epsilon``'s rtol).
      lower: compute the Theorem 5.1 lower bound where the catalog has its parameters.
      scaled_variant: also use the (u+v)-scaled pair in ``upper`` (opt-in, as in
        :func:`~jaxshuffle.accountant.amplify`: proven when every pair of inputs has total
        variation exactly beta, e.g. k-ary randomized response).
      upper_from: as :func:`~jaxshuffle.accountant.amplify`: ``"best"`` (default) the smallest
        certified value over the sound sources (for k-ary RR also the blanket pair, whose value is
        the ``blanket`` column, and the exact datasets' lower bound; ``upper_source`` says which);
        ``"worst-case"`` the two-count rules only; ``"blanket"`` the blanket pair only (every
        randomizer must carry its mechanism).
      merge_buckets: merge small window buckets into larger ones when that is cheaper than a
        compile (still certified; ``False`` gives exactly ``amplify``'s windows).
      shard: ``"i/N"`` or ``(i, N)``: run only every N-th chunk starting at i (multi-host).
      devices: ``None`` (all local devices), a count, or a list of devices; more than one shards
        each chunk over a 1-D mesh.
      chunk_size: jobs per chunk (default: from ``memory`` and a time target, power of two).
      memory: bytes of working memory per device for a chunk (default 1 GiB on CPU, a quarter of
        the device memory on accelerators).
      quiet: no progress on stderr (the progress bar shows only when stderr is a terminal).
      overwrite: discard an existing sweep of a *different* grid in ``out`` (same grid: resume).
      wait: when another process is writing a sweep into ``out`` (the lock ``out/chunks/sweep.lock``,
        per shard with ``shard``), wait for it instead of raising.
      executor: ``None`` (run the chunks here, on ``devices``), a ``dask.distributed.Client`` or any
        ``concurrent.futures.Executor`` (``client.get_executor()``, a ``ProcessPoolExecutor`` with the
        ``spawn`` start method): each chunk runs on a worker over the worker's own local devices
        (:mod:`jaxshuffle.sweeps.distributed`) and this process alone writes ``out``, so resume,
        the fingerprint and the values are those of a local run (bit-identical). Chunks are
        planned as with ``shard`` (CPU cost model, one device per chunk), at most a bounded window
        is in flight, a chunk whose task failed or whose worker was lost is retried once, and a
        chunk that fails twice is left out: a warning names its grid points, they are missing
        from ``results.csv`` (``complete`` is False, the sidecar's ``executor.failed`` lists
        them) and running the same call again computes just them. An executor that takes no more
        work (a ``ProcessPoolExecutor`` whose process died is broken for good) stops the sweep with
        RuntimeError, the finished chunks saved. ``devices`` is then not used.

    Returns:
      :class:`SweepResult` with one row per grid point (``complete`` False for a shard).

    Raises:
      ValueError naming the parameter for a bad grid, randomizer or option value;
        :class:`SweepLocked` (a ValueError) when another sweep is writing into ``out`` and not ``wait``.
      SweepInterrupted (a KeyboardInterrupt) on Ctrl-C (or SIGTERM where a handler raises it): the
        finished chunks (and their rows in ``results.csv``) are saved; the same call resumes.
    """
    spec = build_spec(randomizer, n, delta, options, rounds=rounds, sample_rate=sample_rate)
    rounds_settings = _rounds_settings(spec, blanket_points, discretization, upper_from, scaled_variant)
    _check_run(rtol, executor)
    shard_i, shard_n = parse_shard(shard)
    settings = RunSettings(rtol=rtol, lower=lower, scaled_variant=scaled_variant, upper_from=upper_from,
                           merge_buckets=merge_buckets, shard_i=shard_i, shard_n=shard_n, devices=devices,
                           chunk_size=chunk_size, memory=memory, quiet=quiet, overwrite=overwrite, wait=wait,
                           executor=executor, rounds_settings=rounds_settings)
    return _run(spec, out, settings)


def _rounds_settings(spec, blanket_points, discretization, upper_from, scaled_variant) -> dict | None:
    """The settings of a rounds axis (None without one); ValueError naming the parameter for a bad value."""
    if "rounds" not in spec:
        for name, value in (("blanket_points", blanket_points), ("discretization", discretization)):
            if value is not None:
                raise ValueError(f"{name}: applies to a sweep with a rounds axis only (give rounds=, --rounds)")
        return None
    if upper_from != "best":
        raise ValueError(f"upper_from: a sweep with a rounds axis reports the smallest certified composed bound "
                         f"(composed_epsilon); upper_from must be 'best', got {upper_from!r}")
    if scaled_variant:
        raise ValueError("scaled_variant: not used by the composition over rounds; leave it off with a rounds axis")
    from jaxshuffle.accountant.rounds import checked_blanket_points

    blanket_points = checked_blanket_points(blanket_points)
    if discretization is not None:
        discretization = float(discretization)
        if not (math.isfinite(discretization) and discretization > 0):
            raise ValueError(f"discretization: must be a finite number > 0, got {discretization!r}")
    return {"blanket_points": blanket_points, "discretization": discretization}


def _check_run(rtol, executor) -> None:
    """Refuse a run that cannot start (no float64, ``rtol`` outside (0, 1), an unusable executor) before any work."""
    require_x64()
    if not 0 < rtol < 1:
        raise ValueError("rtol: must lie in (0, 1)")
    if executor is not None:
        from jaxshuffle.sweeps.distributed import check_executor

        check_executor(executor)


def _run(spec, out, settings: RunSettings) -> SweepResult:
    """Run the sweep of ``spec`` into ``out`` with signals deferred during writes and the locks released at the end.

    A failed write into ``out`` becomes one :class:`SweepStoreError` line that says how to resume.
    """
    locks: list = []
    try:
        with _DeferSignals() as guard:
            return _run_locked(spec, out, settings, guard, locks)
    except OSError as exc:  # a write into out failed (disk full, read-only): one line, finished chunks kept
        if out is None or not exc.filename or not _inside(Path(exc.filename), Path(out)):
            raise
        raise SweepStoreError("out: " + write_error(exc, "call the same sweep again to resume (every finished "
                                                          "chunk is kept)"), exc.filename, resumable=True) from None
    finally:
        for lock in locks:
            lock.release()


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except (ValueError, OSError):
        return False


def _writable(folder: Path) -> bool:
    """Whether this process may create files in ``folder`` (False on a read-only mount, also for root)."""
    try:
        return os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids)
    except (NotImplementedError, OSError):  # pragma: no cover
        return os.access(folder, os.W_OK | os.X_OK)


def _old_manifest(out) -> dict | None:
    """The manifest in ``out`` for the platform check before the lock (None when absent or unreadable)."""
    try:
        return read_manifest(Path(out) / "sweep.json")
    except SweepStoreError:
        return None


def _run_locked(spec, out, s: RunSettings, guard, locks: list) -> SweepResult:
    """The phases of one run, inside ``_run``'s signal guard; the locks taken are appended to ``locks``."""
    plan = _plan(spec, out, s)
    store = _open_store(out, s, plan, guard, locks)
    run = _SweepRun(spec, s, plan, store, guard)
    if store.read_only and run.todo:
        raise SweepStoreError(f"out: {store.out_dir} is not writable and its sweep is not finished "
                              f"({len(run.mine) - len(run.todo)} of {len(run.mine)} chunks done): make it writable, "
                              "or copy it to a writable directory and run the same sweep there to resume",
                              store.out_dir)
    run.start_csv()
    workers = _start_workers(run)
    _announce(run)
    elapsed, failed = _run_chunks(run, workers)
    return _finish(run, workers, elapsed, failed)


# ----------------------------------------------------------------------------------------
# Settings, fingerprint and platform


class _Plan(NamedTuple):
    """What the grid, the options and the platform decide before the output directory is read."""

    spec: dict
    devs: list  # the local devices (those the environment record names)
    remote: bool  # the chunks run on an executor's workers
    platform: str  # the platform the buckets and the chunk layout are planned for
    settings: dict  # the settings in the fingerprint
    fingerprint: str
    grid: object
    buckets: list  # [(plan, job ids, c_lo)]
    layout_settings: dict  # what the chunk layout of a new sweep comes from
    t_plan: float  # when planning started (perf_counter)


def _plan(spec, out, s: RunSettings) -> _Plan:
    """Choose the platform and the fingerprinted settings, build the grid, its buckets and the layout settings."""
    devs = _devices(s.devices)
    # With --shard every host must derive the same buckets and chunk layout from the grid alone:
    # plan for a CPU-like cost model and 1 GiB chunks (or the given chunk_size) whatever the local devices.
    # So with an executor: the workers' devices are not known here.
    remote = s.executor is not None
    platform_name = devs[0].platform if s.shard_n == 1 and not remote else "cpu"
    settings, fingerprint, platform_name = _settings(spec, out, s, platform_name)
    t_plan = time.perf_counter()
    grid = make_grid(spec, settings)
    buckets = (plan_jobs(grid.jobs, s.merge_buckets, platform_name) if len(grid.jobs) else []) + grid.mechanism_buckets
    memory = s.memory
    if memory is None:
        memory = 2.0 ** 30
        if platform_name != "cpu":
            try:
                memory = 0.25 * float(devs[0].memory_stats()["bytes_limit"])
            except Exception:  # pragma: no cover - backends without memory_stats
                memory = 2.0 ** 32
    layout_settings = {"ndev": len(devs) if s.shard_n == 1 and not remote else 1, "memory": float(memory),
                       "chunk_size": s.chunk_size, "platform": platform_name}
    return _Plan(spec, devs, remote, platform_name, settings, fingerprint, grid, buckets, layout_settings, t_plan)


def _settings(spec, out, s: RunSettings, platform_name: str) -> tuple[dict, str, str]:
    """The fingerprinted settings, the fingerprint and the platform to plan for.

    Resuming on another platform keeps the bucket merging (hence the values) of the original run:
    the platform of the manifest in ``out`` when that gives its fingerprint.
    """
    settings = {"rtol": float(s.rtol), "lower": bool(s.lower), "scaled_variant": bool(s.scaled_variant),
                "upper_from": s.upper_from,
                "merge_buckets": bool(s.merge_buckets),
                "platform": platform_name if s.merge_buckets else "any"}
    if s.rounds_settings is not None:  # only then: a sweep without a rounds axis keeps its fingerprint
        settings["rounds"] = dict(s.rounds_settings)
    fingerprint = _fingerprint(spec, settings)
    first = _old_manifest(out) if out is not None and (Path(out) / "sweep.json").is_file() else None
    if first is not None and s.merge_buckets:
        old_platform = (first.get("settings") or {}).get("platform")
        if old_platform and old_platform != settings["platform"]:
            alt = {**settings, "platform": old_platform}
            if _fingerprint(spec, alt) == first["fingerprint"]:
                settings, fingerprint, platform_name = alt, _fingerprint(spec, alt), old_platform
    return settings, fingerprint, platform_name


# ----------------------------------------------------------------------------------------
# The output directory


class _Store(NamedTuple):
    """The output directory as opened for this run (``out_dir`` None: in memory only)."""

    out_dir: Path | None
    read_only: bool  # a finished sweep in a directory this process cannot write: read, write nothing
    manifest: dict | None
    chunks: list  # the chunk layout (a resumed sweep's own)
    done_chunks: dict  # chunk index -> the arrays of its chunk file
    torn_line: int | None  # the torn last row of results.csv, repaired from the chunk files
    plan_s: float  # planning time, the wait for the lock left out


def _open_store(out, s: RunSettings, plan: _Plan, guard, locks: list) -> _Store:
    """Claim ``out`` (lock), compare or write its manifest, lay out the chunks and load the finished ones."""
    out_dir = Path(out) if out is not None else None
    manifest, layout_settings, torn_line = None, plan.layout_settings, None
    lock_s, read_only, done_chunks = 0.0, False, {}
    if out_dir is not None:
        chunk_dir = chunk_dir_of(out_dir)
        read_only, lock_s = _claim(out_dir, chunk_dir, s, locks)
        manifest, torn_line = _old_sweep(out_dir, s, plan.fingerprint, read_only, guard)
        if manifest is not None:
            layout_settings = manifest["layout_settings"]
    chunks = chunk_layout(plan.buckets, int(layout_settings["ndev"]), layout_settings.get("platform", plan.platform),
                          float(layout_settings["memory"]), layout_settings["chunk_size"])
    if out_dir is not None:
        if manifest is None:
            manifest = {"schema": STORE_SCHEMA, "fingerprint": plan.fingerprint, "spec": plan.spec,
                        "settings": plan.settings, "layout_settings": layout_settings, "chunks": len(chunks),
                        "points": plan.grid.size, "jobs": int(plan.grid.n_jobs), "chunk_checksum": CHUNK_CHECKSUM,
                        "created": utc_now()}
            with guard.writing():
                atomic_write(out_dir / "sweep.json", json.dumps(manifest, indent=1).encode())
        with guard.writing():
            done_chunks = load_chunks(chunk_dir, len(chunks), plan.fingerprint,
                                      checksums=manifest.get("chunk_checksum") == CHUNK_CHECKSUM,
                                      repair=not read_only)
    plan_s = time.perf_counter() - plan.t_plan - lock_s
    return _Store(out_dir, read_only, manifest, chunks, done_chunks, torn_line, plan_s)


def _claim(out_dir: Path, chunk_dir: Path, s: RunSettings, locks: list) -> tuple[bool, float]:
    """Check that ``out_dir`` holds no one else's files and take its lock; returns (read only, seconds waited)."""
    mpath = out_dir / "sweep.json"
    if not mpath.exists() and not mpath.is_symlink() and not s.overwrite:
        other = holds_other_files(out_dir)
        if other:
            raise ValueError(f"out: {out_dir} is not empty and holds no sweep (no sweep.json; it has "
                             f"{', '.join(str(x.relative_to(out_dir)) for x in other[:3])}"
                             f"{', ...' if len(other) > 3 else ''}): use a new or empty directory, or --overwrite "
                             "to write the sweep's files there (other files are left alone)")
    read_only = out_dir.is_dir() and not (_writable(out_dir) and (not chunk_dir.is_dir() or _writable(chunk_dir)))
    lock_s = 0.0
    if not read_only:
        chunk_dir.mkdir(parents=True, exist_ok=True)
        # One writer per directory (per shard): the lock is taken before the manifest is read.
        t_lock = time.perf_counter()
        try:
            locks.append(_lock_out(chunk_dir, out_dir, "sweep.lock" if s.shard_n == 1 else
                                   f"shard-{s.shard_i}-of-{s.shard_n}.lock", s.wait, s.quiet))
        except PermissionError:  # no lock file can be made here (e.g. a read-only mount): read only
            read_only = True
        except OSError as exc:
            if exc.errno != errno.EROFS:
                raise
            read_only = True
        lock_s = time.perf_counter() - t_lock
    return read_only, lock_s


def _old_sweep(out_dir: Path, s: RunSettings, fingerprint: str, read_only: bool,
               guard) -> tuple[dict | None, int | None]:
    """The manifest of the sweep to resume in ``out_dir`` and the torn line of its CSV, or (None, None).

    Another sweep there is refused, or cleared with ``overwrite``; so is a store schema this version cannot resume.
    """
    mpath = out_dir / "sweep.json"
    if read_only and not mpath.is_file():
        raise SweepStoreError(f"out: {out_dir} is not writable and holds no sweep (no sweep.json): use a "
                              "writable --out", out_dir)
    if mpath.is_symlink():
        raise SweepStoreError(f"out: {mpath} is a symbolic link; a sweep reads and writes only inside {out_dir}: "
                              "remove the link or use another --out", mpath)
    if not mpath.exists():
        return None, None
    try:
        old = read_manifest(mpath)
    except SweepStoreError:
        if not s.overwrite or read_only:
            raise
        old = {"fingerprint": None, "schema": STORE_SCHEMA}  # damaged: recomputed with --overwrite
    if read_only and old.get("fingerprint") != fingerprint:
        raise SweepStoreError(f"out: {out_dir} is not writable and holds a different sweep (fingerprint "
                              f"{old.get('fingerprint')} != {fingerprint}): use a writable --out", out_dir)
    if old.get("schema", 1) not in RESUMABLE_SCHEMAS and not s.overwrite:
        raise ValueError(f"out: {out_dir} holds a sweep in store schema {old.get('schema', 1)} (this "
                         f"jaxshuffle writes schema {STORE_SCHEMA} and resumes schemas "
                         f"{', '.join(map(str, RESUMABLE_SCHEMAS))}: 2 added the blanket bound and "
                         "upper_from, 3 the rounds axis); it cannot be resumed: use another --out, or "
                         "--overwrite to recompute it there (its results.csv still loads with "
                         "jaxshuffle.sweeps.load)")
    # overwrite recomputes an old-schema directory even when its fingerprint matches (its chunk files
    # are not this schema's)
    if old.get("fingerprint") != fingerprint or old.get("schema", 1) not in RESUMABLE_SCHEMAS:
        if not s.overwrite:
            raise ValueError(f"out: {out_dir} holds a different sweep (fingerprint {old.get('fingerprint')} "
                             f"!= {fingerprint}); use another --out or --overwrite")
        with guard.writing():
            clear_store(out_dir)
        return None, None
    return old, (csv_is_torn(out_dir / "results.csv") if s.shard_n == 1 else None)


# ----------------------------------------------------------------------------------------
# The run's state: finished jobs and points, the progressive CSV


class _SweepRun:
    """The mutable state of one run: the per-job result arrays, which jobs and points are done, the CSV.

    :meth:`record` stores a finished chunk (arrays, chunk file, CSV rows), :meth:`advance` moves the
    progress on, :meth:`stopped` says what a signal leaves saved.
    """

    def __init__(self, spec, s: RunSettings, plan: _Plan, store: _Store, guard):
        self.spec, self.s, self.plan, self.store, self.guard = spec, s, plan, store, guard
        self.grid = grid = plan.grid
        J = grid.n_jobs
        self.lower, self.upper = np.zeros(J), np.full(J, np.inf)
        self.status, self.iterations = np.full(J, 5, np.int8), np.zeros(J, np.int32)
        self.extra = np.full((J, grid.extra_width), np.nan) if grid.extra_width else None
        self.job_done = np.zeros(J, dtype=bool)
        self._restore(store.done_chunks)
        self.mine = [ci for ci in range(len(store.chunks)) if ci % s.shard_n == s.shard_i]
        self.todo = [ci for ci in self.mine if not self.job_done[self.chunk_ids(ci)].all()]  # by coverage, not name
        self.chunks_done = len(self.mine) - len(self.todo)
        # Points finished so far (for the progressive CSV): every job of the point done.
        self.pending = grid.pending(self.job_done)
        self.csv_cols = ["index", *grid.table.keys(), *grid.result_order]
        self.csv_path: Path | None = None
        self.csv_file = None
        self.progress: _Progress | None = None
        self.is_compiled = None  # (plan, chunk size) -> whether its program is compiled already
        self.work_left = 0.0
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

    def chunk_jobs(self, ci: int) -> tuple:
        """Chunk ``ci``'s plan, job ids, ``c_lo`` and (padded) size."""
        ch = self.store.chunks[ci]
        plan, ids_all, clo_all = self.plan.buckets[ch["bucket"]]
        return plan, ids_all[ch["start"]:ch["stop"]], clo_all[ch["start"]:ch["stop"]], ch["size"]

    def work(self, ci: int) -> float:
        """Chunk ``ci``'s work for the ETA: its size times its bucket's window."""
        ch = self.store.chunks[ci]
        return ch["size"] * self.plan.buckets[ch["bucket"]][0].window

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
            ch = self.store.chunks[ci]
            kk = (self.plan.buckets[ch["bucket"]][0], ch["size"])
            self.remaining[kk] = self.remaining.get(kk, 0) + 1
        return sum(1 for kk in self.remaining if not self.is_compiled(*kk))

    def record(self, ci, ids, lo, up, st, it, extra=None) -> np.ndarray:
        """Store one finished chunk (arrays, chunk file, CSV rows); returns the points it finished.

        ``extra``: a rounds chunk's composed-epsilon columns (stored in its chunk file too)."""
        out_dir = self.store.out_dir
        with self.guard.writing():  # a signal here waits until the chunk and its CSV rows are on disk
            self.lower[ids], self.upper[ids], self.status[ids], self.iterations[ids] = lo, up, st, it
            more = {}
            if extra is not None:
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
                self._append_csv(fin)
            self.chunks_done += 1
        return fin

    def _append_csv(self, points: np.ndarray) -> None:
        """Append the rows of ``points`` to ``results.csv``, on disk before this returns."""
        try:
            self.csv_file.write(csv_text(self.columns(points), self.csv_cols, False))
            self.csv_file.flush()
            os.fsync(self.csv_file.fileno())
        except OSError as exc:  # name the file (a torn row is repaired on resume)
            if not exc.filename:
                exc.filename = str(self.csv_path)
            raise

    def advance(self, ci: int, fin_points: int, dt: float, compiled: bool) -> None:
        """Move the progress on by chunk ``ci``, which finished ``fin_points`` points in ``dt`` seconds."""
        plan, _, _, size = self.chunk_jobs(ci)
        self.work_left -= self.work(ci)
        self.remaining[(plan, size)] -= 1
        programs_left = sum(1 for kk, cnt in self.remaining.items() if cnt > 0 and not self.is_compiled(*kk))
        self.progress.update(int(fin_points), self.work(ci), dt, compiled, self.work_left, programs_left)

    def stopped(self, exc: KeyboardInterrupt) -> SweepInterrupted:
        """The :class:`SweepInterrupted` for ``exc``, saying what is saved."""
        out_dir, s = self.store.out_dir, self.s
        if self.csv_path is not None:
            saved = f"{int((self.pending == 0).sum())} of {self.grid.size} points saved in {self.csv_path}"
        elif out_dir is not None:
            saved = (f"{self.chunks_done} of {len(self.mine)} chunks of shard {s.shard_i}/{s.shard_n} saved in "
                     f"{out_dir / 'chunks'}")
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


class _Workers(NamedTuple):
    """Where the chunks run: here (``runner``) or on an executor's workers (``pool``)."""

    env: dict  # the environment record of the metadata
    runner: Runner | None
    pool: object  # a ChunkPool with an executor, else None
    programs: int  # programs this run compiles


def _start_workers(run: _SweepRun) -> _Workers:
    """The local runner or the executor's chunk pool, and the work and programs left."""
    s, plan = run.s, run.plan
    env = environment(plan.devs)
    runner = Runner(s.rtol, plan.devs) if not plan.remote else None
    pool = None
    if plan.remote:
        from jaxshuffle.sweeps.distributed import ChunkPool

        pool = ChunkPool(s.executor, s.rtol)
        run.is_compiled = lambda plan, size: bool(pool.plan_workers.get((plan, size)))
    else:
        run.is_compiled = runner.is_compiled
    programs = run.count_work()
    return _Workers(env, runner, pool, programs)


def _announce(run: _SweepRun) -> None:
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


def _run_chunks(run: _SweepRun, workers: _Workers) -> tuple[float, list[dict]]:
    """Run the chunks still to do; returns the seconds taken and the chunks that failed twice (executor only).

    A Ctrl-C (or a SIGTERM through a handler that raises, the CLI's) becomes :class:`SweepInterrupted`.
    """
    sleep = float(os.environ.get("JAXSHUFFLE_SWEEP_CHUNK_SLEEP", "0") or 0)  # test aid: slow chunks down
    t0 = time.perf_counter()
    failed: list[dict] = []
    try:
        if run.csv_path is not None:
            run.csv_file = open(run.csv_path, "a", newline="")
        run.progress = _Progress(run.s.quiet, run.grid.size, int((run.pending == 0).sum()), workers.programs)
        if not run.plan.remote:
            _local_chunks(run, workers.runner, sleep)
        else:
            _remote_chunks(run, workers.pool, sleep, failed)
    except KeyboardInterrupt as exc:
        raise run.stopped(exc) from None
    finally:
        run.close()
    return time.perf_counter() - t0, failed


def _local_chunks(run: _SweepRun, runner: Runner, sleep: float) -> None:
    """Run the chunks here, one after the other."""
    for ci in run.todo:
        plan, ids, clo, size = run.chunk_jobs(ci)
        compiled = not runner.is_compiled(plan, size)
        run.progress.start_chunk(compiled)
        t = time.perf_counter()
        arrays = runner.run(plan, run.grid.job_rows(plan, ids), clo, size)
        dt = time.perf_counter() - t
        fin = run.record(ci, ids, *arrays)
        run.advance(ci, fin.size, dt, compiled)
        if sleep:
            time.sleep(sleep)


def _remote_chunks(run: _SweepRun, pool, sleep: float, failed: list[dict]) -> None:
    """Run the chunks on the executor's workers; a chunk that failed twice is warned about and added to ``failed``."""
    from jaxshuffle.sweeps.distributed import Task

    def tasks():  # made as the window of futures in flight advances (memory bounded)
        for ci in run.todo:
            plan, ids, clo, size = run.chunk_jobs(ci)
            yield Task(ci, plan, run.grid.job_rows(plan, ids), clo, size)

    slots = max(1, pool.window // pool.cap)
    try:
        for task, arrays, info in pool.results(tasks()):
            _, ids, _, _ = run.chunk_jobs(task.ci)
            if arrays is None:  # failed twice: reported, its points stay missing
                pts = np.unique(run.grid.points_of_jobs(ids))
                failed.append({"chunk": int(task.ci), "points": pts.tolist(), "error": info})
                # stacklevel: the warning names the caller of sweep() (above it: _run_chunks, _run_locked, _run, sweep)
                warnings.warn(f"sweep: chunk {task.ci} failed twice ({info}); its {pts.size} grid points "
                              f"(index {_ranges(pts)}) are missing from the results; run the same sweep "
                              "again to compute them", RuntimeWarning, stacklevel=6)
                run.work_left -= run.work(task.ci)
                run.remaining[(task.plan, task.size)] -= 1
                continue
            fin = run.record(task.ci, ids, *arrays)
            # progress rates: a worker's evaluation time shared by the workers running at once
            run.advance(task.ci, fin.size, info["seconds"] / slots, bool(info["compiled"]))
            if sleep:
                time.sleep(sleep)
    finally:
        pool.close()


# ----------------------------------------------------------------------------------------
# The metadata and the results


def _finish(run: _SweepRun, workers: _Workers, elapsed: float, failed: list[dict]) -> SweepResult:
    """The metadata, the shard file (with ``shard``) and the results (files too when the sweep is whole)."""
    s, out_dir, read_only = run.s, run.store.out_dir, run.store.read_only
    try:  # a signal during the final writes (deferred until they end) still reports what is saved
        all_done = bool(run.job_done.all())
        meta = _meta(run, workers, elapsed, failed, all_done)
        if out_dir is not None and s.shard_n > 1 and not read_only:
            _write_shard(run)
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


def _meta(run: _SweepRun, workers: _Workers, elapsed: float, failed: list[dict], all_done: bool) -> dict:
    """The result's metadata (``sweep.json``'s run record): environment, settings, buckets, timing, executor."""
    from jaxshuffle.plan import TRUNC_FRACTION

    s, plan, grid, runner, pool = run.s, run.plan, run.grid, workers.runner, workers.pool
    meta = {**workers.env, "methods": METHODS, "columns": COLUMNS, "fingerprint": plan.fingerprint, "grid": run.spec,
            "settings": plan.settings,
            "tolerances": {"rtol": float(s.rtol), "max_iter": MAX_ITER,
                           "window_truncation": f"{TRUNC_FRACTION:g} * delta of binomial mass (Chernoff bound, "
                                                "added to the certified divergence band)"},
            "buckets": [({"mechanism": pl.randomizer} if isinstance(pl, MechanismPlan) else
                         {"rounds": pl.randomizer} if isinstance(pl, RoundsPlan) else
                         {"sampled": pl.randomizer} if not hasattr(pl, "max_step") else
                         {"window": pl.window, "max_step": pl.max_step, "symmetric": pl.symmetric})
                        | {"searches": int(len(ids))} for pl, ids, _ in plan.buckets],
            "points": grid.size, "searches": grid.n_jobs, "chunks": len(run.store.chunks),
            "shard": [s.shard_i, s.shard_n], "complete": all_done,
            "timing": {"plan_s": run.store.plan_s, "run_s": elapsed, "chunks_run": len(run.todo),
                       "programs_compiled": (len(runner.compiled) if runner is not None
                                             else sum(pool.programs.values()))},
            "written": utc_now()}
    if plan.remote and not s.quiet and pool.programs:
        per = ", ".join(f"{w}: {pool.programs[w]} ({pool.chunks_per_worker.get(w, 0)} chunks)"
                        for w in sorted(pool.programs))
        print(f"[sweep] programs compiled per worker: {per}", file=sys.stderr, flush=True)
    if plan.remote:
        from jaxshuffle.sweeps.distributed import describe

        meta["executor"] = {"kind": describe(s.executor)[0],
                            "workers": {w: {"programs_compiled": pool.programs[w],
                                            "chunks": pool.chunks_per_worker.get(w, 0),
                                            "eval_s": pool.seconds_per_worker.get(w, 0.0)} for w in pool.programs},
                            "driver_busy_s": max(elapsed - pool.wait_s, 0.0),
                            "failed": failed}
    return meta


def _write_shard(run: _SweepRun) -> None:
    """Write this shard's jobs (and the manifest) to ``shard-i-of-N.npz`` for ``sweep merge``."""
    s, out_dir = run.s, run.store.out_dir
    mine_ids = np.concatenate([run.chunk_ids(ci) for ci in run.mine]) if run.mine else np.zeros(0, np.int64)
    more = {"extra": run.extra[mine_ids]} if run.extra is not None else {}
    with run.guard.writing():
        atomic_write(out_dir / f"shard-{s.shard_i}-of-{s.shard_n}.npz",
                     npz_bytes(jobs=mine_ids, lower=run.lower[mine_ids], upper=run.upper[mine_ids],
                               status=run.status[mine_ids], iterations=run.iterations[mine_ids], **more,
                               manifest=np.asarray(json.dumps(run.store.manifest))))
    if not s.quiet:
        print(f"[sweep] shard {s.shard_i}/{s.shard_n} done -> {out_dir / f'shard-{s.shard_i}-of-{s.shard_n}.npz'}; "
              f"join the shards with: jaxshuffle sweep merge DIR_OR_SHARD... --out DIR", file=sys.stderr)
