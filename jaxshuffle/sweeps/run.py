"""The sweep driver: :func:`sweep` (resumable, sharded, multi-host with ``shard=(i, N)``).

A run goes through phases, each a function of its own: the settings, fingerprint and platform
(:func:`_plan`) and the output directory (:func:`_open_store`) here; the finished jobs restored and the
progressive CSV (:class:`~jaxshuffle.sweeps.execution.SweepRun`), the chunks
(:func:`~jaxshuffle.sweeps.execution.run_chunks`) and the final metadata and files
(:func:`~jaxshuffle.sweeps.execution.finish`) in :mod:`jaxshuffle.sweeps.execution`. The user's
options travel as one :class:`~jaxshuffle.sweeps.execution.RunSettings`.

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
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from jaxshuffle._config import VERSION, require_x64
from jaxshuffle.sweeps.execution import (
    OpenStore,
    RunPlan,
    RunSettings,
    SweepRun,
    announce,
    finish,
    run_chunks,
    start_workers,
)
from jaxshuffle.sweeps.grid import build_spec
from jaxshuffle.sweeps.grids import make_grid
from jaxshuffle.sweeps.schedule import chunk_layout, plan_jobs
from jaxshuffle.sweeps.stops import DeferSignals, lock_out
from jaxshuffle.sweeps.stops import SweepInterrupted as SweepInterrupted  # re-exported: a sweep's own exceptions
from jaxshuffle.sweeps.stops import SweepLocked as SweepLocked  # re-exported (the CLI and tests import it here)
from jaxshuffle.sweeps.store import (
    RESUMABLE_SCHEMAS,
    STORE_SCHEMA,
    SweepResult,
    SweepStoreError,
    atomic_write,
    chunk_dir_of,
    clear_store,
    csv_is_torn,
    holds_other_files,
    load_chunks,
    read_manifest,
    store_is_ours,
    utc_now,
    would_replace,
    write_error,
)

if TYPE_CHECKING:
    from concurrent.futures import Executor

    import jax
    from distributed import Client
    from numpy.typing import ArrayLike

    from jaxshuffle.sweeps.grid import DeltaAxis

#: How a sweep's manifest says its chunk files carry checksum sidecars (see :mod:`jaxshuffle.sweeps.store`).
CHUNK_CHECKSUM = "sha256"


# ----------------------------------------------------------------------------------------
# The sweep


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


def parse_shard(shard: str | tuple[int, int] | None) -> tuple[int, int]:
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


def sweep(randomizer: str | Sequence[str] = "general", *, n: str | ArrayLike | None = None,
          delta: DeltaAxis | None = None, out: str | os.PathLike[str] | None = None, rtol: float = 1e-6,
          lower: bool = True, scaled_variant: bool = False, upper_from: str = "best", merge_buckets: bool = True,
          shard: str | tuple[int, int] | None = None, devices: int | Sequence[jax.Device] | None = None,
          chunk_size: int | None = None, memory: float | None = None, quiet: bool = False, overwrite: bool = False,
          wait: bool = False, executor: Executor | Client | None = None, rounds: str | ArrayLike | None = None,
          blanket_points: int | None = None, discretization: float | None = None,
          sample_rate: str | ArrayLike | None = None, **options: str | ArrayLike | None) -> SweepResult:
    """Certified amplification over the cartesian product of parameter axes.

    Size: a public entry point whose keywords are the user's options, each documented here: the grid axes
    (``randomizer``, ``n``, ``delta``, ``rounds``, ``sample_rate``, ``**options``), what each point computes
    (``rtol``, ``lower``, ``scaled_variant``, ``upper_from``, ``blanket_points``, ``discretization``) and how the
    chunks run (``out``, ``shard``, ``devices``, ``chunk_size``, ``memory``, ``merge_buckets``, ``executor``,
    ``overwrite``, ``wait``, ``quiet``); they are gathered at once into one :class:`RunSettings`.

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
        ``amplify(..., sample_rate=g)``'s report (docs/math.md 12.10: the sampled round's certified
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
        with DeferSignals() as guard:
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
    run = SweepRun(spec, s, plan, store, guard)
    if store.read_only and run.todo:
        raise SweepStoreError(f"out: {store.out_dir} is not writable and its sweep is not finished "
                              f"({len(run.mine) - len(run.todo)} of {len(run.mine)} chunks done): make it writable, "
                              "or copy it to a writable directory and run the same sweep there to resume",
                              store.out_dir)
    try:  # a stop before the chunks start still says what the earlier runs saved
        run.start_csv()
        workers = start_workers(run)
        announce(run)
    except KeyboardInterrupt as exc:
        raise run.stopped(exc) from None
    elapsed, failed = run_chunks(run, workers)
    return finish(run, workers, elapsed, failed)


# ----------------------------------------------------------------------------------------
# Settings, fingerprint and platform


def _plan(spec, out, s: RunSettings) -> RunPlan:
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
    return RunPlan(spec, devs, remote, platform_name, settings, fingerprint, grid, buckets, layout_settings, t_plan)


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


def _open_store(out, s: RunSettings, plan: RunPlan, guard, locks: list) -> OpenStore:
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
    return OpenStore(out_dir, read_only, manifest, chunks, done_chunks, torn_line, plan_s)


def _claim(out_dir: Path, chunk_dir: Path, s: RunSettings, locks: list) -> tuple[bool, float]:
    """Check that ``out_dir`` holds no one else's files and take its lock; returns (read only, seconds waited).

    A directory without a manifest is not a sweep of ours: a file there with a name the sweep writes (the user's
    own ``results.csv``) is refused, ``overwrite`` or not; other files are refused unless ``overwrite``. So is
    a ``sweep.json`` that is not a manifest where no chunk file verifies (:func:`store_is_ours`).
    """
    mpath = out_dir / "sweep.json"
    if not mpath.exists() and not mpath.is_symlink():
        other = holds_other_files(out_dir)
        has = (f"out: {out_dir} is not empty and holds no sweep (no sweep.json; it has "
               f"{', '.join(str(x.relative_to(out_dir)) for x in other[:3])}{', ...' if len(other) > 3 else ''})")
        clash = would_replace(out_dir, other)
        if clash:  # the user's own results.csv: never replaced, not even with --overwrite
            names = ", ".join(str(x.relative_to(out_dir)) for x in clash[:3]) + (", ..." if len(clash) > 3 else "")
            raise SweepStoreError(f"{has}: the sweep would replace {names}, which jaxshuffle did not write; "
                                  f"nothing was changed: move {'them' if len(clash) > 1 else 'it'} away or use "
                                  "another --out (--overwrite replaces only a sweep's own files)", clash[0])
        if other and not s.overwrite:
            raise ValueError(f"{has}: use a new or empty directory, or --overwrite to write the sweep's files there "
                             "(other files are left alone)")
    elif mpath.is_file() and not mpath.is_symlink() and not store_is_ours(out_dir):
        read_manifest(mpath)  # not a manifest, no chunk verifies: its one line, before the lock creates anything
    read_only = out_dir.is_dir() and not (_writable(out_dir) and (not chunk_dir.is_dir() or _writable(chunk_dir)))
    lock_s = 0.0
    if not read_only:
        chunk_dir.mkdir(parents=True, exist_ok=True)
        # One writer per directory (per shard): the lock is taken before the manifest is read.
        t_lock = time.perf_counter()
        try:
            locks.append(lock_out(chunk_dir, out_dir, "sweep.lock" if s.shard_n == 1 else
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
        # damaged: recomputed with --overwrite only where a verified chunk shows the directory is ours
        if not s.overwrite or read_only or not store_is_ours(out_dir):
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
