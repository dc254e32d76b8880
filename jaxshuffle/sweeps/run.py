"""The sweep driver: :func:`sweep` (resumable, sharded, multi-host with ``shard=(i, N)``) and its progress display.

Stopping on a signal and the output directory's lock are in :mod:`jaxshuffle.sweeps.stops`;
:class:`SweepInterrupted` and :class:`SweepLocked` are re-exported here.
"""

from __future__ import annotations

import datetime
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

import numpy as np

from jaxshuffle._config import VERSION, require_x64
from jaxshuffle.sweeps.grid import build_spec
from jaxshuffle.sweeps.jobs import MechanismPlan, RoundsPlan, make_grid
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


def _is_tty(stream) -> bool:
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
        if self.bar is not None:
            self.bar.close()
            self.bar = None


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
    return _run(spec, out=out, rtol=rtol, lower=lower, scaled_variant=scaled_variant, upper_from=upper_from,
                merge_buckets=merge_buckets, shard=shard,
                devices=devices, chunk_size=chunk_size, memory=memory, quiet=quiet, overwrite=overwrite,
                wait=wait, executor=executor, rounds_settings=rounds_settings)


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


def _run(spec, *, out, rtol, lower, scaled_variant, upper_from, merge_buckets, shard, devices, chunk_size, memory,
         quiet, overwrite, wait=False, executor=None, rounds_settings=None):
    require_x64()
    if not 0 < rtol < 1:
        raise ValueError("rtol: must lie in (0, 1)")
    if executor is not None:
        from jaxshuffle.sweeps.distributed import check_executor

        check_executor(executor)
    shard_i, shard_n = parse_shard(shard)
    locks: list = []
    try:
        with _DeferSignals() as guard:
            return _run_locked(spec, out=out, rtol=rtol, lower=lower, scaled_variant=scaled_variant,
                               upper_from=upper_from,
                               merge_buckets=merge_buckets, shard_i=shard_i, shard_n=shard_n, devices=devices,
                               chunk_size=chunk_size, memory=memory, quiet=quiet, overwrite=overwrite, wait=wait,
                               guard=guard, locks=locks, executor=executor, rounds_settings=rounds_settings)
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


def _run_locked(spec, *, out, rtol, lower, scaled_variant, upper_from, merge_buckets, shard_i, shard_n, devices,
                chunk_size, memory, quiet, overwrite, wait, guard, locks, executor=None, rounds_settings=None):
    devs = _devices(devices)
    # With --shard every host must derive the same buckets and chunk layout from the grid alone:
    # plan for a CPU-like cost model and 1 GiB chunks (or the given chunk_size) whatever the local devices.
    # So with an executor: the workers' devices are not known here.
    remote = executor is not None
    platform_name = devs[0].platform if shard_n == 1 and not remote else "cpu"
    settings = {"rtol": float(rtol), "lower": bool(lower), "scaled_variant": bool(scaled_variant),
                "upper_from": upper_from,
                "merge_buckets": bool(merge_buckets),
                "platform": platform_name if merge_buckets else "any"}
    if rounds_settings is not None:  # only then: a sweep without a rounds axis keeps its fingerprint
        settings["rounds"] = dict(rounds_settings)
    fingerprint = _fingerprint(spec, settings)
    first = _old_manifest(out) if out is not None and (Path(out) / "sweep.json").is_file() else None
    if first is not None and merge_buckets:
        # Resuming on another platform: keep the bucket merging (hence the values) of the original run.
        old_platform = (first.get("settings") or {}).get("platform")
        if old_platform and old_platform != settings["platform"]:
            alt = {**settings, "platform": old_platform}
            if _fingerprint(spec, alt) == first["fingerprint"]:
                settings, fingerprint, platform_name = alt, _fingerprint(spec, alt), old_platform
    t_plan = time.perf_counter()
    grid = make_grid(spec, settings)
    buckets = (plan_jobs(grid.jobs, merge_buckets, platform_name) if len(grid.jobs) else []) + grid.mechanism_buckets
    if memory is None:
        memory = 2.0 ** 30
        if platform_name != "cpu":
            try:
                memory = 0.25 * float(devs[0].memory_stats()["bytes_limit"])
            except Exception:  # pragma: no cover - backends without memory_stats
                memory = 2.0 ** 32
    layout_settings = {"ndev": len(devs) if shard_n == 1 and not remote else 1, "memory": float(memory),
                       "chunk_size": chunk_size, "platform": platform_name}

    out_dir = Path(out) if out is not None else None
    done_chunks: dict[int, dict] = {}
    manifest = None
    torn_line = None
    lock_s = 0.0
    read_only = False  # a finished sweep in a directory this process cannot write: read, write nothing
    if out_dir is not None:
        chunk_dir = chunk_dir_of(out_dir)
        mpath = out_dir / "sweep.json"
        if not mpath.exists() and not mpath.is_symlink() and not overwrite:
            other = holds_other_files(out_dir)
            if other:
                raise ValueError(f"out: {out_dir} is not empty and holds no sweep (no sweep.json; it has "
                                 f"{', '.join(str(x.relative_to(out_dir)) for x in other[:3])}"
                                 f"{', ...' if len(other) > 3 else ''}): use a new or empty directory, or --overwrite "
                                 "to write the sweep's files there (other files are left alone)")
        read_only = out_dir.is_dir() and not (_writable(out_dir) and (not chunk_dir.is_dir() or _writable(chunk_dir)))
        if not read_only:
            chunk_dir.mkdir(parents=True, exist_ok=True)
            # One writer per directory (per shard): the lock is taken before the manifest is read.
            t_lock = time.perf_counter()
            try:
                locks.append(_lock_out(chunk_dir, out_dir, "sweep.lock" if shard_n == 1 else
                                       f"shard-{shard_i}-of-{shard_n}.lock", wait, quiet))
            except PermissionError:  # no lock file can be made here (e.g. a read-only mount): read only
                read_only = True
            except OSError as exc:
                if exc.errno != errno.EROFS:
                    raise
                read_only = True
            lock_s = time.perf_counter() - t_lock
        if read_only and not mpath.is_file():
            raise SweepStoreError(f"out: {out_dir} is not writable and holds no sweep (no sweep.json): use a "
                                  "writable --out", out_dir)
        if mpath.is_symlink():
            raise SweepStoreError(f"out: {mpath} is a symbolic link; a sweep reads and writes only inside {out_dir}: "
                                  "remove the link or use another --out", mpath)
        if mpath.exists():
            try:
                old = read_manifest(mpath)
            except SweepStoreError:
                if not overwrite or read_only:
                    raise
                old = {"fingerprint": None, "schema": STORE_SCHEMA}  # damaged: recomputed with --overwrite
            if read_only and old.get("fingerprint") != fingerprint:
                raise SweepStoreError(f"out: {out_dir} is not writable and holds a different sweep (fingerprint "
                                      f"{old.get('fingerprint')} != {fingerprint}): use a writable --out", out_dir)
            if old.get("schema", 1) not in RESUMABLE_SCHEMAS and not overwrite:
                raise ValueError(f"out: {out_dir} holds a sweep in store schema {old.get('schema', 1)} (this "
                                 f"jaxshuffle writes schema {STORE_SCHEMA} and resumes schemas "
                                 f"{', '.join(map(str, RESUMABLE_SCHEMAS))}: 2 added the blanket bound and "
                                 "upper_from, 3 the rounds axis); it cannot be resumed: use another --out, or "
                                 "--overwrite to recompute it there (its results.csv still loads with "
                                 "jaxshuffle.sweeps.load)")
            # overwrite recomputes an old-schema directory even when its fingerprint matches (its chunk files
            # are not this schema's)
            if old.get("fingerprint") != fingerprint or old.get("schema", 1) not in RESUMABLE_SCHEMAS:
                if not overwrite:
                    raise ValueError(f"out: {out_dir} holds a different sweep (fingerprint {old.get('fingerprint')} "
                                     f"!= {fingerprint}); use another --out or --overwrite")
                with guard.writing():
                    clear_store(out_dir)
            else:
                manifest = old
                layout_settings = old["layout_settings"]
                torn_line = csv_is_torn(out_dir / "results.csv") if shard_n == 1 else None
    chunks = chunk_layout(buckets, int(layout_settings["ndev"]), layout_settings.get("platform", platform_name),
                     float(layout_settings["memory"]), layout_settings["chunk_size"])
    if out_dir is not None:
        if manifest is None:
            manifest = {"schema": STORE_SCHEMA, "fingerprint": fingerprint, "spec": spec, "settings": settings,
                        "layout_settings": layout_settings, "chunks": len(chunks), "points": grid.size,
                        "jobs": int(grid.n_jobs), "chunk_checksum": CHUNK_CHECKSUM, "created": utc_now()}
            with guard.writing():
                atomic_write(out_dir / "sweep.json", json.dumps(manifest, indent=1).encode())
        with guard.writing():
            done_chunks = load_chunks(chunk_dir, len(chunks), fingerprint,
                                      checksums=manifest.get("chunk_checksum") == CHUNK_CHECKSUM,
                                      repair=not read_only)
    plan_s = time.perf_counter() - t_plan - lock_s

    J = grid.n_jobs
    lower_j, upper_j = np.zeros(J), np.full(J, np.inf)
    status_j, iter_j = np.full(J, 5, np.int8), np.zeros(J, np.int32)
    extra_j = np.full((J, grid.extra_width), np.nan) if grid.extra_width else None
    job_done = np.zeros(J, dtype=bool)
    for data in done_chunks.values():
        ids = data["jobs"]
        if extra_j is not None:
            extra = data.get("extra")
            if extra is None or extra.shape != (len(ids), grid.extra_width):
                continue  # a rounds chunk without its columns (damaged): computed again
            extra_j[ids] = extra
        lower_j[ids], upper_j[ids] = data["lower"], data["upper"]
        status_j[ids], iter_j[ids] = data["status"], data["iterations"]
        job_done[ids] = True
    chunk_ids = lambda ci: buckets[chunks[ci]["bucket"]][1][chunks[ci]["start"]:chunks[ci]["stop"]]  # noqa: E731
    mine = [ci for ci in range(len(chunks)) if ci % shard_n == shard_i]
    todo = [ci for ci in mine if not job_done[chunk_ids(ci)].all()]  # by coverage, not by file name
    if read_only and todo:
        raise SweepStoreError(f"out: {out_dir} is not writable and its sweep is not finished ({len(mine) - len(todo)} "
                              f"of {len(mine)} chunks done): make it writable, or copy it to a writable directory "
                              "and run the same sweep there to resume", out_dir)

    # Points finished so far (for the progressive CSV): every job of the point done.
    pending = grid.pending(job_done)
    csv_cols = ["index", *grid.table.keys(), *grid.result_order]
    csv_path = out_dir / "results.csv" if out_dir is not None and shard_n == 1 and not read_only else None
    csv_file = None
    if csv_path is not None:  # rebuilt from the chunk files: this also repairs a torn last row
        done_pts = np.nonzero(pending == 0)[0]
        cols = grid.combine(lower_j, upper_j, status_j, iter_j, done_pts, extra_j)
        with guard.writing():
            atomic_write(csv_path, csv_text(cols, csv_cols, True).encode())
        if torn_line is not None and not quiet:
            print(f"[sweep] {csv_path}: repaired the torn last row (line {torn_line}) from the chunk files",
                  file=sys.stderr, flush=True)

    env = environment(devs)
    runner = Runner(rtol, devs) if not remote else None
    pool = None
    if remote:
        from jaxshuffle.sweeps.distributed import ChunkPool, describe

        pool = ChunkPool(executor, rtol)
        is_compiled = lambda plan, size: bool(pool.plan_workers.get((plan, size)))  # noqa: E731
    else:
        is_compiled = runner.is_compiled
    work = lambda ci: chunks[ci]["size"] * buckets[chunks[ci]["bucket"]][0].window  # noqa: E731
    work_left = float(sum(work(ci) for ci in todo))
    remaining: dict = {}
    for ci in todo:
        kk = (buckets[chunks[ci]["bucket"]][0], chunks[ci]["size"])
        remaining[kk] = remaining.get(kk, 0) + 1
    programs = sum(1 for kk in remaining if not is_compiled(*kk))
    if not quiet:
        where = f"{len(devs)} {devs[0].platform} device(s)"
        if remote:
            where, link = describe(executor)
            if link:
                where += f", dashboard {link}"
        what = (f"{J} distinct (T, delta) cells in {len(buckets)} (options, n) groups (one composed_epsilon each)"
                if grid.extra_width else f"{J} distinct searches in {len(buckets)} window buckets")
        print(f"[sweep] {grid.size} points, {what}, "
              f"{len(chunks)} chunks ({len(mine) - len(todo)} of this {'shard' if shard_n > 1 else 'sweep'}'s "
              f"{len(mine)} already done), {where}", file=sys.stderr, flush=True)
    sleep = float(os.environ.get("JAXSHUFFLE_SWEEP_CHUNK_SLEEP", "0") or 0)  # test aid: slow chunks down
    t0 = time.perf_counter()
    chunks_done = len(mine) - len(todo)
    progress = None
    failed: list[dict] = []

    def stopped(exc: KeyboardInterrupt) -> SweepInterrupted:
        if csv_path is not None:
            saved = f"{int((pending == 0).sum())} of {grid.size} points saved in {csv_path}"
        elif out_dir is not None:
            saved = f"{chunks_done} of {len(mine)} chunks of shard {shard_i}/{shard_n} saved in {out_dir / 'chunks'}"
        else:
            saved = "nothing saved (out=None keeps the results in memory)"
        return SweepInterrupted(getattr(exc, "signum", signal.SIGINT), saved)

    def record(ci, ids, lo, up, st, it, extra=None):
        """Store one finished chunk (arrays, chunk file, CSV rows); returns the points it finished.

        ``extra``: a rounds chunk's composed-epsilon columns (stored in its chunk file too)."""
        nonlocal pending, chunks_done
        with guard.writing():  # a signal here waits until the chunk and its CSV rows are on disk
            lower_j[ids], upper_j[ids], status_j[ids], iter_j[ids] = lo, up, st, it
            more = {}
            if extra is not None:
                extra_j[ids] = extra
                more["extra"] = np.asarray(extra, dtype=np.float64)
            fresh = ids[~job_done[ids]]
            job_done[ids] = True
            if out_dir is not None:  # the checksum sidecar first: a chunk file on disk always has its own
                path = out_dir / "chunks" / f"c{ci:06d}.npz"
                arrays = {k: np.asarray(v) for k, v in dict(jobs=ids, lower=lo, upper=up, status=st, iterations=it,
                                                            **more, fingerprint=np.asarray(fingerprint)).items()}
                atomic_write(checksum_path(path), checksum_bytes(path, arrays))
                atomic_write(path, npz_bytes(**arrays))
            touched = grid.points_of_jobs(fresh)
            pending -= np.bincount(touched, minlength=grid.size)
            touched = np.unique(touched)
            fin = touched[pending[touched] == 0]
            if csv_file is not None and fin.size:
                cols = grid.combine(lower_j, upper_j, status_j, iter_j, fin, extra_j)
                try:
                    csv_file.write(csv_text(cols, csv_cols, False))
                    csv_file.flush()
                    os.fsync(csv_file.fileno())
                except OSError as exc:  # name the file (a torn row is repaired on resume)
                    if not exc.filename:
                        exc.filename = str(csv_path)
                    raise
            chunks_done += 1
        return fin

    def chunk_jobs(ci):
        ch = chunks[ci]
        plan, ids_all, clo_all = buckets[ch["bucket"]]
        return plan, ids_all[ch["start"]:ch["stop"]], clo_all[ch["start"]:ch["stop"]], ch["size"]

    def advance(ci, fin_points, dt, compiled):
        nonlocal work_left
        plan, _, _, size = chunk_jobs(ci)
        work_left -= work(ci)
        remaining[(plan, size)] -= 1
        programs_left = sum(1 for kk, cnt in remaining.items() if cnt > 0 and not is_compiled(*kk))
        progress.update(int(fin_points), work(ci), dt, compiled, work_left, programs_left)

    try:
        if csv_path is not None:
            csv_file = open(csv_path, "a", newline="")
        progress = _Progress(quiet, grid.size, int((pending == 0).sum()), programs)
        if not remote:
            for ci in todo:
                plan, ids, clo, size = chunk_jobs(ci)
                compiled = not runner.is_compiled(plan, size)
                progress.start_chunk(compiled)
                t = time.perf_counter()
                arrays = runner.run(plan, grid.job_rows(plan, ids), clo, size)
                dt = time.perf_counter() - t
                fin = record(ci, ids, *arrays)
                advance(ci, fin.size, dt, compiled)
                if sleep:
                    time.sleep(sleep)
        else:
            from jaxshuffle.sweeps.distributed import Task

            def tasks():  # made as the window of futures in flight advances (memory bounded)
                for ci in todo:
                    plan, ids, clo, size = chunk_jobs(ci)
                    yield Task(ci, plan, grid.job_rows(plan, ids), clo, size)

            slots = max(1, pool.window // pool.cap)
            try:
                for task, arrays, info in pool.results(tasks()):
                    _, ids, _, _ = chunk_jobs(task.ci)
                    if arrays is None:  # failed twice: reported, its points stay missing
                        pts = np.unique(grid.points_of_jobs(ids))
                        failed.append({"chunk": int(task.ci), "points": pts.tolist(), "error": info})
                        warnings.warn(f"sweep: chunk {task.ci} failed twice ({info}); its {pts.size} grid points "
                                      f"(index {_ranges(pts)}) are missing from the results; run the same sweep "
                                      "again to compute them", RuntimeWarning, stacklevel=4)
                        work_left -= work(task.ci)
                        remaining[(task.plan, task.size)] -= 1
                        continue
                    fin = record(task.ci, ids, *arrays)
                    # progress rates: a worker's evaluation time shared by the workers running at once
                    advance(task.ci, fin.size, info["seconds"] / slots, bool(info["compiled"]))
                    if sleep:
                        time.sleep(sleep)
            finally:
                pool.close()
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM through a handler that raises (the CLI's)
        raise stopped(exc) from None
    finally:
        if progress is not None:
            progress.close()
        if csv_file is not None:
            try:
                csv_file.close()
            except OSError:  # the failed append is reported already; resume rebuilds the file
                pass
    elapsed = time.perf_counter() - t0

    try:  # a signal during the final writes (deferred until they end) still reports what is saved
        all_done = bool(job_done.all())
        from jaxshuffle.plan import TRUNC_FRACTION

        meta = {**env, "methods": METHODS, "columns": COLUMNS, "fingerprint": fingerprint, "grid": spec,
                "settings": settings,
                "tolerances": {"rtol": float(rtol), "max_iter": MAX_ITER,
                               "window_truncation": f"{TRUNC_FRACTION:g} * delta of binomial mass (Chernoff bound, "
                                                    "added to the certified divergence band)"},
                "buckets": [({"mechanism": pl.randomizer} if isinstance(pl, MechanismPlan) else
                             {"rounds": pl.randomizer} if isinstance(pl, RoundsPlan) else
                             {"sampled": pl.randomizer} if not hasattr(pl, "max_step") else
                             {"window": pl.window, "max_step": pl.max_step, "symmetric": pl.symmetric})
                            | {"searches": int(len(ids))} for pl, ids, _ in buckets],
                "points": grid.size, "searches": J, "chunks": len(chunks),
                "shard": [shard_i, shard_n], "complete": all_done,
                "timing": {"plan_s": plan_s, "run_s": elapsed, "chunks_run": len(todo),
                           "programs_compiled": (len(runner.compiled) if runner is not None
                                                 else sum(pool.programs.values()))},
                "written": utc_now()}
        if remote and not quiet and pool.programs:
            per = ", ".join(f"{w}: {pool.programs[w]} ({pool.chunks_per_worker.get(w, 0)} chunks)"
                            for w in sorted(pool.programs))
            print(f"[sweep] programs compiled per worker: {per}", file=sys.stderr, flush=True)
        if remote:
            meta["executor"] = {"kind": describe(executor)[0],
                                "workers": {w: {"programs_compiled": pool.programs[w],
                                                "chunks": pool.chunks_per_worker.get(w, 0),
                                                "eval_s": pool.seconds_per_worker.get(w, 0.0)} for w in pool.programs},
                                "driver_busy_s": max(elapsed - pool.wait_s, 0.0),
                                "failed": failed}
        if out_dir is not None and shard_n > 1 and not read_only:
            mine_ids = np.concatenate([buckets[chunks[ci]["bucket"]][1][chunks[ci]["start"]:chunks[ci]["stop"]]
                                       for ci in mine]) if mine else np.zeros(0, np.int64)
            more = {"extra": extra_j[mine_ids]} if extra_j is not None else {}
            with guard.writing():
                atomic_write(out_dir / f"shard-{shard_i}-of-{shard_n}.npz",
                             npz_bytes(jobs=mine_ids, lower=lower_j[mine_ids], upper=upper_j[mine_ids],
                                       status=status_j[mine_ids], iterations=iter_j[mine_ids], **more,
                                       manifest=np.asarray(json.dumps(manifest))))
            if not quiet:
                print(f"[sweep] shard {shard_i}/{shard_n} done -> {out_dir / f'shard-{shard_i}-of-{shard_n}.npz'}; "
                      f"join the shards with: jaxshuffle sweep merge DIR_OR_SHARD... --out DIR", file=sys.stderr)
        if all_done or shard_n == 1:
            points = np.arange(grid.size) if all_done else np.nonzero(pending == 0)[0]
            cols = grid.combine(lower_j, upper_j, status_j, iter_j, points, extra_j)
            result = SweepResult({k: cols[k] for k in csv_cols}, meta, out_dir)
            if out_dir is not None and (all_done or shard_n == 1) and not read_only:
                with guard.writing():
                    write_results(out_dir, result, csv_cols)
            return result
        points = np.nonzero(pending == 0)[0]
        cols = grid.combine(lower_j, upper_j, status_j, iter_j, points, extra_j)
        return SweepResult({k: cols[k] for k in csv_cols}, meta, out_dir)
    except KeyboardInterrupt as exc:
        raise stopped(exc) from None
