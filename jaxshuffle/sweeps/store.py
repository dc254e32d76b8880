"""Storage of a sweep: manifest, atomic chunk files, the long-format CSV, the npz and JSON sidecar; load and merge.

Every file is written to a temporary name, fsync'd and renamed, so a file is either complete or
absent, except ``results.csv``, to which finished rows are appended while a sweep runs: :func:`load`
and :func:`read_csv` warn about a torn last row (naming the file and the line) and skip it, and a
resumed sweep rewrites the file from the chunk files.

Verified chunks. Each chunk file ``chunks/cNNNNNN.npz`` has a sidecar ``chunks/cNNNNNN.sha256``
holding the SHA-256 of the chunk's arrays (:func:`arrays_digest`: every array's name, dtype, shape
and bytes, in sorted key order), written atomically *before* the chunk file. A per-chunk sidecar
rather than a list in ``sweep.json``: each write is O(1) (the manifest would be rewritten after
every chunk), shards writing into one directory never race on a shared file, and a kill at any
moment leaves a consistent pair: killed before the sidecar's rename, neither file is new; between
the two renames, a sidecar without its chunk (the chunk is simply computed again; a stale chunk
from an earlier run then fails its check and is recomputed too); after both, a verified chunk.
A chunk whose arrays do not match its sidecar (edited or damaged after it was written), or that
has no sidecar in a directory whose manifest says checksums are kept (``"chunk_checksum"``), is
recomputed with a warning naming the file on resume, and refused by merge (which never writes into
its inputs). Directories written before checksums existed (no ``"chunk_checksum"`` in the
manifest) are resumed as before, their chunks unverified.

Only our files. Deleting or replacing is limited to names this module owns (:func:`is_ours`:
``sweep.json``, ``results.{csv,npz,json}``, ``shard-I-of-N.{npz,sha256}``, ``chunks/cNNNNNN.{npz,sha256}``
and the temporary names of their atomic writes), regular files only: a symbolic link is never
followed, read through or deleted, and a ``chunks`` that is a symbolic link is refused. Anything
else in the directory (a user's ``chunks/MY_NOTES.txt``) is left alone. A name is not proof: those
files are ours only in a directory that is a sweep this package wrote (:func:`store_is_ours`: its
manifest reads as one, or, where the manifest is damaged, a chunk file verifies against its
checksum sidecar). Elsewhere a ``results.csv`` is the user's: :func:`would_replace` names it and the
sweep refuses the directory, ``--overwrite`` or not. Every delete goes through :func:`remove_ours`.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import io
import json
import math
import os
import platform
import re
import warnings
from collections.abc import KeysView, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from jaxshuffle._config import VERSION

# the columns and the file primitives have homes of their own; their names stay importable here
from jaxshuffle.sweeps.columns import (  # noqa: F401
    BOOL_COLUMNS,
    CLONE_PROOF_NAMES,
    COLUMNS,
    MAX_ITER,
    RESULT_ORDER,
    ROUNDS_EXTRA,
    ROUNDS_RESULT_ORDER,
    SOURCE_NAMES,
    STATUS_NAMES,
    STRING_COLUMNS,
)
from jaxshuffle.sweeps.files import (  # noqa: F401
    SweepStoreError,
    atomic_write,
    fsync_dir,
    tmp_name,
    write_error,
)

if TYPE_CHECKING:
    import jax
    import pandas as pd
    import xarray as xr

#: Version of the files' layout and meaning. 2: mechanism searches (blanket column, upper_from setting).
#: 3: the rounds axis (composed-epsilon columns; its chunk files carry an ``extra`` array). A sweep
#: without a rounds axis has schema 2's layout and meaning, so a schema-2 directory is resumed
#: (:data:`RESUMABLE_SCHEMAS`); a directory written under any other schema is not (a clear error),
#: and its results still load.
STORE_SCHEMA = 3
RESUMABLE_SCHEMAS = (2, 3)
# ----------------------------------------------------------------------------------------
# Storage: manifest, atomic chunk files, CSV


# ----------------------------------------------------------------------------------------
# What the package owns in a sweep directory


_TOP_NAMES = re.compile(r"(sweep\.json|results\.csv|results\.npz|results\.json|shard-\d+-of-\d+\.(npz|sha256))")
_CHUNK_NAMES = re.compile(r"c\d{6,}\.(npz|sha256)")
_LOCK_NAMES = re.compile(r"(sweep|shard-\d+-of-\d+)\.lock")
_TMP = re.compile(r"\.(.+)\.tmp-\d+")
CHUNK_FILE = re.compile(r"c(\d{6,})\.npz")


def _named_ours(name: str, *, in_chunks: bool, locks: bool = False) -> bool:
    """Whether ``name`` is one this package gives its files (see :func:`is_ours`), whatever the entry is."""
    m = _TMP.fullmatch(name)
    if m:
        name = m.group(1)
    pats: tuple[re.Pattern[str], ...] = (_CHUNK_NAMES,) if in_chunks else (_TOP_NAMES,)
    if in_chunks and locks:
        pats += (_LOCK_NAMES,)
    return any(p.fullmatch(name) for p in pats)


def is_ours(path: Path, *, in_chunks: bool, locks: bool = False) -> bool:
    """Whether ``path`` is a regular file (not a symbolic link) whose name this package owns.

    ``in_chunks``: ``path`` is in ``chunks/`` (chunk files, sidecars, locks) or else at the top of
    the sweep directory; the temporary name of an atomic write of one of those names is ours too.
    Lock files count only with ``locks`` (they are never deleted). The name alone: a file is the
    package's only in a directory :func:`store_is_ours` accepts (:func:`remove_ours` checks both).
    """
    if not _named_ours(path.name, in_chunks=in_chunks, locks=locks):
        return False
    return path.is_file() and not path.is_symlink()


def _parse_manifest(path: Path) -> dict:
    """The manifest at ``path``; OSError where unreadable, ValueError where it is not a sweep manifest."""
    m = json.loads(path.read_text())
    if not isinstance(m, dict) or "fingerprint" not in m or "chunks" not in m:
        raise ValueError("not a sweep manifest: no fingerprint and chunks")
    return m


def _has_verified_chunk(out_dir: Path) -> bool:
    """Whether ``out_dir/chunks`` (not a link) holds a chunk file (not a link) whose arrays match its checksum
    sidecar: both are written by a sweep only, so the directory is one this package wrote."""
    chunk_dir = out_dir / "chunks"
    if chunk_dir.is_symlink() or not chunk_dir.is_dir():
        return False
    for p in sorted(chunk_dir.iterdir()):
        if CHUNK_FILE.fullmatch(p.name) is None or p.is_symlink() or not p.is_file():
            continue
        try:
            stored, _ = read_job_arrays(p)
        except Exception:  # unreadable: no proof, try the next one
            continue
        if recorded_digest(p) and checksum_problem(p, stored, required=True) is None:
            return True
    return False


def store_is_ours(out_dir: Path) -> bool:
    """Whether ``out_dir`` is a sweep directory this package wrote, the condition for deleting or replacing
    any file in it: its manifest ``sweep.json`` (a regular file, not a link) reads as a sweep manifest, or,
    where that manifest is damaged, a chunk file verifies against its checksum sidecar.

    A directory without either (a user's folder holding a ``results.csv`` of its own) is not: the names
    the package gives its files (:func:`is_ours`) are then the user's files.
    """
    out_dir = Path(out_dir)
    mpath = out_dir / "sweep.json"
    if mpath.is_symlink() or not mpath.is_file():
        return False
    try:
        _parse_manifest(mpath)
    except (OSError, ValueError):
        return _has_verified_chunk(out_dir)
    return True


def _owned(path: Path, out_dir: Path) -> bool:
    """The ownership predicate of a file in the sweep directory ``out_dir`` (which :func:`store_is_ours`
    accepted): directly in ``out_dir`` or its ``chunks/``, a regular file with a name of ours, not a lock."""
    if path.parent == out_dir:
        return is_ours(path, in_chunks=False)
    return path.parent == out_dir / "chunks" and is_ours(path, in_chunks=True)


def remove_ours(paths: Sequence[Path], out_dir: Path) -> int:
    """Delete those of ``paths`` that are the package's files of the sweep directory ``out_dir``; every delete
    in :mod:`jaxshuffle.sweeps` goes through here. Returns how many were removed.

    ``out_dir`` must be a sweep this package wrote (:func:`store_is_ours`, checked once, before anything is
    removed), else SweepStoreError naming it and nothing is removed; of ``paths``, only regular files (not
    links) with a name of ours directly in ``out_dir`` or ``out_dir/chunks`` are removed (lock files never),
    the others are left alone.
    """
    out_dir = Path(out_dir)
    paths = [Path(p) for p in paths]
    if not paths:
        return 0
    if not store_is_ours(out_dir):
        raise SweepStoreError(f"out: {out_dir} is not a sweep directory jaxshuffle wrote (no readable sweep.json, "
                              "no verified chunk file); nothing was removed", out_dir)
    removed = 0
    for p in paths:
        if _owned(p, out_dir):
            p.unlink(missing_ok=True)
            removed += 1
    return removed


def chunk_dir_of(out_dir: Path) -> Path:
    """``out_dir/chunks``; SweepStoreError if it is a symbolic link (the sweep keeps its files inside ``out_dir``)."""
    chunk_dir = Path(out_dir) / "chunks"
    if chunk_dir.is_symlink():
        raise SweepStoreError(f"out: {chunk_dir} is a symbolic link (to {os.readlink(chunk_dir)}); a sweep reads and "
                              f"writes only inside {out_dir}: remove the link or use another --out", chunk_dir)
    return chunk_dir


def holds_other_files(out_dir: Path) -> list[Path]:
    """Entries of ``out_dir`` that are not the sweep's own (a ``chunks`` folder counts by its contents).

    Files with the package's names are its own only where ``out_dir`` is a sweep it wrote
    (:func:`store_is_ours`); elsewhere only lock files and a killed first write of ``sweep.json``
    (``.sweep.json.tmp-PID``) are, and a ``results.csv`` is the user's.
    """
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    owned = store_is_ours(out_dir)
    other = []
    for p in sorted(out_dir.iterdir()):
        if p.name == "chunks" and p.is_dir() and not p.is_symlink():
            other += [q for q in sorted(p.iterdir()) if not (is_ours(q, in_chunks=True, locks=True) and (
                owned or _LOCK_NAMES.fullmatch(q.name)))]
        elif not (is_ours(p, in_chunks=False) and (owned or _TMP.fullmatch(p.name) and p.name.startswith(
                ".sweep.json."))):
            other.append(p)
    return other


def would_replace(out_dir: Path, entries: Sequence[Path]) -> list[Path]:
    """Those of ``entries`` (:func:`holds_other_files`' answer for ``out_dir``) that bear a name a sweep writes
    or removes (``results.csv``, ``chunks/c000000.npz``, ...; not lock files), files or not: in a directory that
    is not a sweep this package wrote they are the user's, and a sweep there would replace them."""
    out_dir = Path(out_dir)
    return [p for p in entries if (p.parent == out_dir and _named_ours(p.name, in_chunks=False)
                                   and not (_TMP.fullmatch(p.name) and p.name.startswith(".sweep.json.")))
            or (p.parent == out_dir / "chunks" and _named_ours(p.name, in_chunks=True))]


def read_manifest(path: Path) -> dict:
    """The manifest ``sweep.json``; SweepStoreError naming the file for an unreadable or garbage one.

    For a garbage one the message says what to do: where a chunk file beside it verifies (the directory is a
    sweep this package wrote, :func:`store_is_ours`), restore it or recompute with ``--overwrite``; else
    restore it or use another ``--out`` (``--overwrite`` does not replace files the package cannot show it
    wrote).
    """
    path = Path(path)
    try:
        m = _parse_manifest(path)
    except OSError as exc:
        raise SweepStoreError(f"out: cannot read {path} ({exc.strerror or exc})", path) from None
    except ValueError as exc:  # JSON errors included
        why = " ".join(str(exc).split())
        if _has_verified_chunk(path.parent):
            todo = (f"rerun with --overwrite to recompute the sweep in {path.parent} (only the sweep's own files "
                    "are replaced)")
        else:
            todo = (f"use another --out (no chunk file in {path.parent} verifies, so nothing shows that jaxshuffle "
                    "wrote it: --overwrite leaves it alone)")
        raise SweepStoreError(f"out: {path} is damaged ({why}); nothing was changed: restore it from a copy, or "
                              f"{todo}", path) from None
    return m


def arrays_digest(arrays: dict) -> str:
    """SHA-256 over the arrays' names, dtypes, shapes and bytes, in sorted key order."""
    h = hashlib.sha256()
    for key in sorted(arrays):
        a = np.ascontiguousarray(np.asarray(arrays[key]))
        h.update(json.dumps([key, a.dtype.str, list(a.shape)]).encode() + b"\0")
        h.update(a.tobytes())
        h.update(b"\0")
    return h.hexdigest()


def checksum_path(chunk_path: Path) -> Path:
    return chunk_path.with_suffix(".sha256")


def checksum_bytes(chunk_path: Path, arrays: dict) -> bytes:
    """The sidecar of a chunk file: its name, the keys and :func:`arrays_digest`."""
    return json.dumps({"chunk": chunk_path.name, "keys": sorted(arrays), "sha256": arrays_digest(arrays)}).encode()


def read_job_arrays(path: Path) -> tuple[dict, dict]:
    """``(every array stored, the job arrays)`` of a chunk or shard file (``jobs, lower, upper, status,
    iterations`` and ``extra`` where stored); numpy's error where the file is unreadable."""
    with np.load(path, allow_pickle=False) as z:
        stored = {k: z[k] for k in z.files}
    data = {k: stored[k] for k in ("jobs", "lower", "upper", "status", "iterations")}
    if "extra" in stored:
        data["extra"] = stored["extra"]
    return stored, data


def checksum_problem(path: Path, stored: dict, *, required: bool) -> str | None:
    """Why the arrays ``stored`` from ``path`` fail their checksum sidecar, or None where they pass (no
    sidecar passes unless ``required``: a file written before checksums existed)."""
    recorded = recorded_digest(path)
    if recorded is None:
        return f"its checksum file {checksum_path(path).name} is missing" if required else None
    if recorded != arrays_digest(stored):
        return (f"its arrays do not match the checksum in {checksum_path(path).name} (the file changed after it was "
                "written)")
    return None


def recorded_digest(chunk_path: Path) -> str | None:
    side = checksum_path(chunk_path)
    if side.is_symlink() or not side.is_file():
        return None
    try:
        rec = json.loads(side.read_text())
        return str(rec["sha256"]) if rec.get("chunk") == chunk_path.name else ""
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ""


def npz_bytes(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub lets a ** mapping fill allow_pickle
    return buf.getvalue()


def format_cell(key: str, x: np.generic) -> str:
    if key in BOOL_COLUMNS:
        return "true" if x else "false"
    if isinstance(x, (str, np.str_)):
        return str(x)
    v = float(x)
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if key in ("index", "n", "rounds") and v == int(v):
        return str(int(v))
    return repr(v)


def csv_text(columns: dict[str, np.ndarray], order: Sequence[str], header: bool) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if header:
        w.writerow(order)
    cols = [columns[k] for k in order]
    for i in range(len(cols[0]) if cols else 0):
        w.writerow([format_cell(k, c[i]) for k, c in zip(order, cols)])
    return buf.getvalue()


def _not_a_csv(path, why: str) -> ValueError:
    return ValueError(f"results: {path} is not a results CSV ({why})")


def read_csv(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Columns of a results CSV (floats, strings and booleans restored; empty cells are NaN).

    A torn last row (the file does not end with a newline, or the row has fewer fields than the
    header: a sweep killed while appending it) is skipped with a :class:`RuntimeWarning` naming the
    file and the line; rerunning the sweep repairs the file. Raises ValueError naming the file for
    an empty, binary or malformed file.
    """
    return _read_csv(path, stacklevel=3)


def _read_csv(path, stacklevel: int) -> dict[str, np.ndarray]:
    try:
        raw = Path(path).read_bytes()
    except IsADirectoryError:
        raise ValueError(f"results: {path} is a directory, not a CSV file") from None
    except FileNotFoundError:
        raise ValueError(f"results: {path} does not exist") from None
    if b"\x00" in raw:
        raise _not_a_csv(path, "binary content")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _not_a_csv(path, "binary content, not UTF-8 text") from None
    if not text.strip():
        raise _not_a_csv(path, "empty file")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise _not_a_csv(path, f"unreadable CSV: {exc}") from None
    header, body = rows[0], rows[1:]
    if len(set(header)) != len(header) or not all(header):
        raise _not_a_csv(path, f"line 1 is not a header of distinct column names: {','.join(header)[:80]!r}")
    torn_last = bool(body) and (not text.endswith(("\n", "\r")) or len(body[-1]) < len(header))
    for i, r in enumerate(body[:-1] if torn_last else body):
        if len(r) != len(header):
            raise ValueError(f"results: {path}, line {i + 2}: {len(r)} fields, the header has {len(header)} "
                             "(the file is damaged; a sweep directory can be rebuilt by rerunning the sweep)")
    if torn_last:
        warnings.warn(f"{path}: line {len(body) + 1} (the last row) is torn and was skipped: a sweep was stopped "
                      "while writing it; rerun the same sweep to repair the file", RuntimeWarning,
                      stacklevel=stacklevel)
        body = body[:-1]
    out: dict[str, np.ndarray] = {}
    for j, key in enumerate(header):
        vals = [r[j] for r in body]
        if key in STRING_COLUMNS:
            out[key] = np.asarray(vals, dtype=str)
        elif key in BOOL_COLUMNS:
            out[key] = np.asarray([v == "true" for v in vals], dtype=bool)
        else:
            try:
                out[key] = np.asarray([float(v) if v else math.nan for v in vals], dtype=np.float64)
            except ValueError as exc:
                raise _not_a_csv(path, f"column {key!r}: {exc}") from None
    if "index" in out:
        out["index"] = out["index"].astype(np.int64)
    return out


def csv_is_torn(path: Path) -> int | None:
    """Line number of a torn last row of ``path`` (no final newline), or None (also for a missing file)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return None
            f.seek(-1, os.SEEK_END)
            if f.read(1) in (b"\n", b"\r"):
                return None
            f.seek(0)
            return f.read().count(b"\n") + 1
    except OSError:
        return None


class SweepResult:
    """Long-format results: ``columns`` (name -> numpy array, one entry per grid point) and ``meta``.

    ``result["upper"]`` gives a column; ``len(result)`` the number of points; ``select(n=1e4)``
    filters rows; ``complete`` is False for a partial view (interrupted sweep, partial merge).
    """

    def __init__(self, columns: dict[str, np.ndarray], meta: dict | None = None, path: Path | None = None):
        self.columns = dict(columns)
        self.meta = dict(meta or {})
        self.path = path

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def __getitem__(self, key: str) -> np.ndarray:
        return self.columns[key]

    def __contains__(self, key: str) -> bool:
        return key in self.columns

    def keys(self) -> KeysView[str]:
        return self.columns.keys()

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete", True))

    def select(self, **conditions: float | str) -> SweepResult:
        """Rows where each named column equals the value (floats compared with a 1e-9 relative tolerance)."""
        keep = np.ones(len(self), dtype=bool)
        for k, v in conditions.items():
            col = self.columns[k]
            if col.dtype.kind in "fc":
                keep &= np.isclose(col, float(v), rtol=1e-9, atol=0.0)
            else:
                keep &= col == v
        return SweepResult({k: c[keep] for k, c in self.columns.items()}, self.meta, self.path)

    def unique(self, key: str) -> np.ndarray:
        col = self.columns[key]
        _, first = np.unique(col, return_index=True)
        return col[np.sort(first)]

    def to_csv(self, path: str | os.PathLike[str]) -> None:
        atomic_write(Path(path), csv_text(self.columns, list(self.columns), True).encode())

    def __repr__(self) -> str:
        return f"SweepResult({len(self)} points, columns={list(self.columns)}, complete={self.complete})"

    def to_pandas(self) -> pd.DataFrame:
        """A pandas DataFrame, one row per point (:func:`jaxshuffle.sweeps.frames.to_pandas`)."""
        from jaxshuffle.sweeps import frames

        return frames.to_pandas(self)

    def to_xarray(self, *, missing: str = "raise", dims: Sequence[str] | None = None) -> xr.Dataset:
        """An xarray Dataset over the grid axes (:func:`jaxshuffle.sweeps.frames.to_xarray`)."""
        from jaxshuffle.sweeps import frames

        return frames.to_xarray(self, missing=missing, dims=dims)

    def to_parquet(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write one Parquet file atomically (:func:`jaxshuffle.sweeps.frames.to_parquet`)."""
        from jaxshuffle.sweeps import frames

        return frames.to_parquet(self, path, overwrite=overwrite)


def load(path: str | os.PathLike[str]) -> SweepResult:
    """Load sweep results from a directory (``results.npz`` or ``results.csv``), a ``.npz`` or a ``.csv``.

    A torn last CSV row is skipped with a RuntimeWarning (see :func:`read_csv`). Raises ValueError
    naming the file for a missing, empty, binary or header-only file, or one without an ``upper`` column.
    """
    path = Path(path)
    meta: dict = {}
    if path.is_dir():
        side = path / "results.json"
        if side.exists():
            meta = json.loads(side.read_text())
        path = path / "results.npz" if (path / "results.npz").exists() else path / "results.csv"
    elif path.with_suffix(".json").exists():
        meta = json.loads(path.with_suffix(".json").read_text())
    if not path.exists():
        raise ValueError(f"results: {path} does not exist")
    if path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as z:
                cols = {k: z[k] for k in z.files}
        except Exception as exc:
            raise ValueError(f"results: {path} is not a results .npz file ({type(exc).__name__}: {exc})") from None
    else:
        cols = _read_csv(path, stacklevel=3)
    if "upper" not in cols:
        raise ValueError(f"results: {path} is not a sweep's results (no 'upper' column; columns: "
                         f"{', '.join(list(cols)[:12])})")
    if len(cols["upper"]) == 0:
        raise ValueError(f"results: {path} has a header but no result rows (a sweep that has not finished any "
                         "point yet?)")
    return SweepResult(cols, meta, path)


def environment(devices: Sequence[jax.Device]) -> dict:
    import jax

    from jaxshuffle.engine.two_count.divergence import REL_ERR, REL_TAIL

    return {
        "library": "jaxshuffle", "version": VERSION, "jax": jax.__version__,
        "jaxlib": getattr(jax.lib, "__version__", jax.__version__) if hasattr(jax, "lib") else jax.__version__,
        "numpy": np.__version__, "python": platform.python_version(), "machine": platform.machine(),
        "float64": bool(jax.config.read("jax_enable_x64")),
        "devices": [{"platform": d.platform, "kind": d.device_kind, "id": d.id} for d in devices],
        "process_count": jax.process_count(),
        "engine": {"pmf_rel_err_budget": REL_ERR, "tail_rel_err_budget": REL_TAIL},
    }


METHODS = {
    "upper": "certified: eps(clone pair with the constant proven for the randomizer, jaxshuffle.randomizers.clone: "
             "1/(2q) by default, 1/(p+1) for k-ary RR, r* of a matrix) at delta; 0 where delta >= beta; "
             "with scaled_variant also min with eps(clone pair with the paper pair's r) at delta/(u+v) where w > 0 "
             "(jaxshuffle.accountant.amplify; docs/math.md section 3); with upper_from best (default) also min with "
             "the blanket value below (upper_source says which), with blanket that value alone",
    "lower": "lower end of the certified bracket of the Theorem 5.1 pair(s) (catalog lower parameters and x* = x0); "
             "unless upper_from is worst-case, the larger with the exact all-z / all-x0 datasets' certified lower "
             "bound for k-ary RR and the rows that carry a matrix (jaxshuffle.accountant.with_mechanism_bounds)",
    "blanket": "certified: blanket (three-count) pair of the concrete mechanism, jaxshuffle.accountant."
               "with_mechanism_bounds (k-ary RR: jaxshuffle.blanket.krr_bounds, docs/math.md section 10; subset "
               "selection, Hadamard response, binary RR: jaxshuffle.blanket_matrix, section 11), one search per "
               "distinct point",
    "paper": "upper end of the bracket of the paper's Theorem 4.7 pair vr_pair(p, beta, q): not a guarantee when w > 0",
    "engine": "jaxshuffle.search.epsilon_with_plan: safeguarded Newton bracketing on the certified hockey-stick "
              "divergence band (jaxshuffle.divergence), float64",
}


def write_results(out_dir: Path, result: SweepResult, order: Sequence[str], *, sidecar_first: bool = False) -> None:
    """Write ``results.csv``, ``results.npz`` (complete results only) and the sidecar ``results.json``, each
    atomically; ``sidecar_first``: the sidecar before the others (merge's: it shows the folder is a merge's
    output, so a merge stopped by a failed write may write there again)."""
    cols = result.columns
    side = json.dumps(result.meta, indent=1, default=_json_default).encode()
    if sidecar_first:
        atomic_write(out_dir / "results.json", side)
    atomic_write(out_dir / "results.csv", csv_text(cols, order, True).encode())
    if result.complete:
        atomic_write(out_dir / "results.npz", npz_bytes(**cols))
    if not sidecar_first:
        atomic_write(out_dir / "results.json", side)


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(type(x))


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def clear_store(out_dir: Path) -> None:
    """Remove the sweep's own files from ``out_dir`` (:func:`remove_ours`), nothing else.

    The writers' lock files (held by the caller) stay; symbolic links and files of other names
    (a user's notes) are left alone. SweepStoreError naming ``out_dir``, nothing removed, where it is not
    a sweep this package wrote (:func:`store_is_ours`).
    """
    out_dir = Path(out_dir)
    chunk_dir = chunk_dir_of(out_dir)
    doomed = sorted(out_dir.iterdir()) + (sorted(chunk_dir.iterdir()) if chunk_dir.is_dir() else [])
    remove_ours(doomed, out_dir)  # all at once: the manifest that shows the directory is ours goes too


def load_chunks(chunk_dir: Path, n_chunks: int, fingerprint: str | None = None, *, checksums: bool = False,
                repair: bool = True, strict: bool = False) -> dict[int, dict]:
    """Finished chunks, each verified against its checksum sidecar (see the module docstring).

    ``checksums``: the manifest says every chunk has a sidecar (then a chunk without one is not
    trusted); otherwise a chunk without a sidecar is taken unverified (a directory written before
    checksums existed) and one with a sidecar is still checked. A chunk that fails (checksum,
    unreadable, another sweep's) is left out with a RuntimeWarning naming the file, so it is
    computed again; with ``repair`` it is removed, with leftovers of a killed write (temporary
    files of our names); with ``strict`` (merge, which never writes into its inputs) it raises
    SweepStoreError instead. Symbolic links are never read. A chunk of a rounds bucket also
    carries ``extra`` (one row per job: :data:`ROUNDS_EXTRA`).
    """
    done: dict[int, dict] = {}
    if not chunk_dir.is_dir():
        return done
    doomed: list[Path] = []  # removed at the end with repair, through the ownership check (remove_ours)
    for p in sorted(chunk_dir.iterdir()):
        if _TMP.fullmatch(p.name):  # temporary file of an interrupted atomic write
            doomed.append(p)
            continue
        m = CHUNK_FILE.fullmatch(p.name)
        if m is None or p.is_symlink() or not p.is_file():
            continue
        ci = int(m.group(1))
        why = None
        try:
            stored, data = read_job_arrays(p)
        except Exception as exc:  # truncated or corrupt: recompute this chunk
            why = f"unreadable ({type(exc).__name__})"
        else:
            why = checksum_problem(p, stored, required=checksums)
            if why is None and fingerprint is not None and str(stored.get("fingerprint")) != fingerprint:
                why = "it belongs to another sweep (fingerprint)"
            if why is None and not (0 <= ci < n_chunks and len({len(v) for v in data.values()}) == 1):
                why = "it does not fit this sweep's chunk layout"
        if why is None:
            done[ci] = data
            continue
        if strict:
            raise SweepStoreError(f"inputs: chunk file {p}: {why}; rerun the sweep in {chunk_dir.parent} to "
                                  "recompute it, then merge again", p)
        warnings.warn(f"sweep: chunk file {p}: {why}; it is computed again", RuntimeWarning, stacklevel=3)
        doomed += [p, checksum_path(p)]
    if repair:
        remove_ours(doomed, chunk_dir.parent)
    return done
