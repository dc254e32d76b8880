"""Merge the shards of a multi-host sweep (``--shard i/N``) or partial sweep directories into one result."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxshuffle.sweeps.grids import Grid, make_grid
from jaxshuffle.sweeps.store import (
    COLUMNS,
    MAX_ITER,
    METHODS,
    RESUMABLE_SCHEMAS,
    STORE_SCHEMA,
    SweepResult,
    SweepStoreError,
    checksum_problem,
    chunk_dir_of,
    environment,
    load_chunks,
    read_job_arrays,
    read_manifest,
    utc_now,
    write_error,
    write_results,
)

#: what a merge writes into ``out`` (and the CLI's figure): a later merge may replace these, nothing else
MERGE_OUTPUTS = frozenset({"results.csv", "results.npz", "results.json", "sweep.png"})


def _earlier_merge(out: Path) -> bool:
    """Whether ``out`` holds an earlier merge's sidecar: ``results.json`` (a regular file, not a link) that reads
    as the JSON object merge writes (``library`` jaxshuffle, a ``fingerprint`` and ``merged_from``)."""
    side = out / "results.json"
    if side.is_symlink() or not side.is_file():
        return False
    try:
        meta = json.loads(side.read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(meta, dict) and meta.get("library") == "jaxshuffle" and "fingerprint" in meta
            and isinstance(meta.get("merged_from"), list))


def _check_out_is_ours(out: Path) -> None:
    """ValueError naming ``out`` unless it is missing, empty, or holds only an earlier merge's files
    (:data:`MERGE_OUTPUTS`): merge writes only where it replaces nothing it did not write. The names are not
    proof: a ``results.csv`` is an earlier merge's only beside that merge's ``results.json`` (:func:`_earlier_merge`);
    elsewhere it is the user's and ``out`` is refused."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ValueError(f"out: {out} is a file, not a directory: give a new or empty directory")
    entries = sorted(out.iterdir())
    foreign = [p.name for p in entries if p.name not in MERGE_OUTPUTS]
    written = [p.name for p in entries if p.name in MERGE_OUTPUTS - {"sweep.png"}]  # merge never writes sweep.png
    if written and not _earlier_merge(out):
        foreign = sorted(foreign + written)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ValueError(f"out: {out} holds files merge did not write ({shown}); merge writes only into a new, "
                         "empty or earlier merge's directory: give another --out")


def merge(inputs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *, allow_partial: bool = False,
          quiet: bool = False) -> SweepResult:
    """Join shard files / sweep directories of ONE sweep into ``out/results.{csv,npz,json}``.

    Each input is a sweep directory (its finished chunks are used, each verified against its
    checksum) or a ``shard-i-of-N.npz``. Merge only reads its inputs: ``out`` may not be an input
    directory, lie inside one, be a sweep directory (its results would be replaced) or hold files
    other than an earlier merge's (:data:`MERGE_OUTPUTS`).
    Raises ValueError if the inputs belong to different sweeps, disagree on a value, or (unless
    ``allow_partial``) do not cover every point; SweepStoreError (a ValueError) naming the file for
    a chunk that fails its checksum (rerun that sweep to recompute it) or a damaged manifest.
    """
    if not inputs:
        raise ValueError("inputs: give at least one shard file or sweep directory")
    _check_out(inputs, out)
    manifest, parts = _read_inputs(inputs)
    spec, settings = manifest["spec"], manifest["settings"]
    grid = _rebuild_grid(manifest)
    joined = _join(grid, parts)
    pending = grid.pending(joined.seen)
    points = np.nonzero(pending == 0)[0]
    if points.size < grid.size and not allow_partial:
        raise ValueError(f"inputs: {grid.size - points.size} of {grid.size} points are missing "
                         "(run the remaining shards, or pass --allow-partial)")
    import jax

    order = ["index", *grid.table.keys(), *grid.result_order]
    cols = grid.combine(joined.lower, joined.upper, joined.status, joined.iterations, points, joined.extra)
    meta = {**environment(jax.local_devices()), "methods": METHODS, "columns": COLUMNS,
            "fingerprint": manifest["fingerprint"], "grid": spec, "settings": settings,
            "tolerances": {"rtol": settings["rtol"], "max_iter": MAX_ITER},
            "points": grid.size, "searches": grid.n_jobs, "complete": bool(points.size == grid.size),
            "merged_from": [str(x) for x in inputs], "written": utc_now()}
    result = SweepResult({k: cols[k] for k in order}, meta, Path(out))
    _write(Path(out), result, order)
    if not quiet:
        print(f"[sweep merge] {points.size}/{grid.size} points -> {Path(out) / 'results.csv'}", file=sys.stderr)
    return result


def _check_out(inputs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str]) -> None:
    """ValueError naming ``out`` when it is (inside) an input directory, a sweep directory, or holds files an
    earlier merge did not write: merge only reads its inputs."""
    out_real = Path(out).resolve()
    for inp in inputs:
        p = Path(inp).resolve()
        if Path(inp).is_dir() and (out_real == p or p in out_real.parents):
            raise ValueError(f"out: {out} is (inside) the input {inp}; merge never writes into its inputs: give "
                             "another --out")
    if (Path(out) / "sweep.json").exists():
        raise ValueError(f"out: {out} is a sweep directory (it has sweep.json); merge never writes into a sweep's "
                         "directory: give another --out")
    _check_out_is_ours(Path(out))


def _read_inputs(inputs: Sequence[str | os.PathLike[str]]) -> tuple[dict, list[dict]]:
    """``(manifest, parts)``: the first input's manifest and every input's job arrays (a sweep directory's
    verified chunks and the shard files beside them, or one shard file); ValueError naming an input that is
    neither, or that belongs to another sweep (a different fingerprint)."""
    manifest: dict | None = None
    parts: list[dict] = []
    for inp in inputs:
        p = Path(inp)
        if p.is_dir():
            m = _read_directory(p, parts)
        elif p.suffix == ".npz":
            m, data = read_shard(p)
            parts.append(data)
        else:
            raise ValueError(f"inputs: {p} is neither a sweep directory nor a shard .npz")
        if manifest is None:
            manifest = m
        elif m["fingerprint"] != manifest["fingerprint"]:
            raise ValueError(f"inputs: {p} belongs to a different sweep (fingerprint {m['fingerprint']} "
                             f"!= {manifest['fingerprint']})")
    if manifest is None:  # not reached: inputs is not empty
        raise ValueError("inputs: give at least one shard file or sweep directory")
    return manifest, parts


def _read_directory(p: Path, parts: list[dict]) -> dict:
    """The manifest of the sweep directory ``p``, appending its finished chunks (each verified against its
    checksum) and its shard files (not links) to ``parts``."""
    if not (p / "sweep.json").exists():
        raise ValueError(f"inputs: {p} is not a sweep directory (no sweep.json)")
    try:
        m = read_manifest(p / "sweep.json")
    except SweepStoreError as exc:
        raise SweepStoreError(f"inputs: {p / 'sweep.json'} is not a readable sweep manifest: restore it, or "
                              f"rerun the sweep in {p} with --overwrite; nothing was merged",
                              exc.path) from None
    parts.extend(load_chunks(chunk_dir_of(p), int(m["chunks"]), m["fingerprint"],
                             checksums=m.get("chunk_checksum") == "sha256", repair=False,
                             strict=True).values())
    for sh in sorted(p.glob("shard-*-of-*.npz")):
        if not sh.is_symlink():
            parts.append(read_shard(sh)[1])
    return m


def _rebuild_grid(manifest: dict) -> Grid:
    """The sweep's grid rebuilt from its manifest; ValueError when the manifest's store schema is not one
    this version reads or the grid does not rebuild to the recorded number of searches."""
    if manifest.get("schema", 1) not in RESUMABLE_SCHEMAS:
        raise ValueError(f"inputs: written in sweep store schema {manifest.get('schema', 1)}, this jaxshuffle reads "
                         f"schemas {', '.join(map(str, RESUMABLE_SCHEMAS))} (writes {STORE_SCHEMA}; 2: the blanket "
                         "bound and upper_from, 3: the rounds axis): rerun the shards with this version")
    grid = make_grid(manifest["spec"], manifest["settings"])
    if grid.n_jobs != manifest["jobs"]:
        raise ValueError("inputs: the grid does not rebuild to the recorded number of searches "
                         "(different jaxshuffle version?)")
    return grid


class _Joined(NamedTuple):
    """Every search's joined result (indexed by job id) and which searches some input held."""

    lower: np.ndarray
    upper: np.ndarray
    status: np.ndarray
    iterations: np.ndarray
    extra: np.ndarray | None
    seen: np.ndarray


def _join(grid: Grid, parts: list[dict]) -> _Joined:
    """The parts' job arrays joined by job id; ValueError when a part of a rounds sweep lacks its
    composed-epsilon columns or two parts disagree on a value of the same search."""
    J = grid.n_jobs
    lower_j, upper_j = np.zeros(J), np.full(J, np.inf)
    status_j, aux_j = np.full(J, 5, np.int8), np.zeros(J, np.int32)
    extra_j = np.full((J, grid.extra_width), np.nan) if grid.extra_width else None
    seen = np.zeros(J, dtype=bool)
    for data in parts:
        ids = data["jobs"]
        if extra_j is not None and np.asarray(data.get("extra")).shape != (len(ids), grid.extra_width):
            raise ValueError("inputs: a chunk or shard of this rounds sweep has no composed-epsilon columns "
                             "(damaged, or written by another jaxshuffle): rerun that shard")
        again = seen[ids]
        if again.any():
            same = (np.array_equal(lower_j[ids[again]], data["lower"][again])
                    and np.array_equal(upper_j[ids[again]], data["upper"][again])
                    and np.array_equal(status_j[ids[again]], data["status"][again])
                    and np.array_equal(aux_j[ids[again]], data["iterations"][again])
                    and (extra_j is None or np.array_equal(extra_j[ids[again]], data["extra"][again],
                                                           equal_nan=True)))
            if not same:
                raise ValueError("inputs: two shards disagree on a value of the same search")
        lower_j[ids], upper_j[ids], status_j[ids] = data["lower"], data["upper"], data["status"]
        aux_j[ids] = data["iterations"]
        if extra_j is not None:
            extra_j[ids] = data["extra"]
        seen[ids] = True
    return _Joined(lower_j, upper_j, status_j, aux_j, extra_j, seen)


def _write(out: Path, result: SweepResult, order: list[str]) -> None:
    """Write ``result`` into ``out`` (made if missing); SweepStoreError naming the file a write failed on."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not result.complete:
            _drop_stale_npz(out)
        write_results(out, result, order, sidecar_first=True)  # the sidecar marks out as a merge's, first
    except OSError as exc:
        if not exc.filename:
            raise
        raise SweepStoreError("out: " + write_error(exc, "merge again"), exc.filename, resumable=True) from None


def _drop_stale_npz(out: Path) -> None:
    """Remove an earlier merge's ``results.npz`` before a partial merge writes into ``out``: a partial merge writes
    no npz and :func:`~jaxshuffle.sweeps.store.load` reads the npz first, so the earlier merge's rows would be
    read under the new sidecar. Only an earlier merge's (:func:`_earlier_merge`), a regular file, not a link."""
    npz = out / "results.npz"
    if _earlier_merge(out) and npz.is_file() and not npz.is_symlink():
        npz.unlink()


def read_shard(path: Path) -> tuple[dict, dict]:
    """``(manifest, arrays)`` of a ``shard-i-of-N.npz``, verified against its checksum sidecar
    (``shard-i-of-N.sha256``, written before it) when its sweep writes checksums; ValueError naming the
    file when it is unreadable, its sidecar is missing, or its arrays changed after they were written."""
    try:
        stored, data = read_job_arrays(path)
        manifest = json.loads(str(stored["manifest"]))
    except Exception as exc:
        raise ValueError(f"inputs: {path} is not a readable shard file ({exc})") from None
    why = checksum_problem(path, stored, required=manifest.get("chunk_checksum") == "sha256")
    if why is not None:
        raise ValueError(f"inputs: {path}: {why}; rerun that shard, then merge")
    return manifest, data
