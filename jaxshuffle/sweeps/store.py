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

Only our files (:mod:`jaxshuffle.sweeps.ownership`): deleting or replacing is limited to the names the
package gives its files, regular files only, in a directory that is a sweep this package wrote (its
manifest reads as one, or, damaged, a chunk verifies against its checksum sidecar); a symbolic link is
never followed, read through or deleted, and a user's files (``chunks/MY_NOTES.txt``, a ``results.csv``
of their own) are left alone. Every delete goes through :func:`~jaxshuffle.sweeps.ownership.remove_ours`.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
import os
import platform
import warnings
from collections.abc import KeysView, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from jaxshuffle._config import VERSION
from jaxshuffle.sweeps.checksums import (  # noqa: F401
    arrays_digest,
    checksum_bytes,
    checksum_path,
    checksum_problem,
    read_job_arrays,
    recorded_digest,
)

# the columns, the file primitives, the checksums and what the package owns have homes of their own;
# their names stay importable here
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
from jaxshuffle.sweeps.ownership import (  # noqa: F401
    CHUNK_FILE,
    TMP_NAME,
    chunk_dir_of,
    clear_store,
    holds_other_files,
    is_ours,
    read_manifest,
    remove_ours,
    store_is_ours,
    would_replace,
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
        if TMP_NAME.fullmatch(p.name):  # temporary file of an interrupted atomic write
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
