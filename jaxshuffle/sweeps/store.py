"""Storage of a sweep: manifest, atomic chunk files, the long-format CSV, the npz and JSON sidecar; load and merge.

Every file is written to a temporary name, fsync'd and renamed, so a file is either complete or
absent, except ``results.csv``, to which finished rows are appended while a sweep runs: :func:`load`
and :func:`read_csv` warn about a torn last row (naming the file and the line) and skip it, and a
resumed sweep rewrites the file from the chunk files.
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
from pathlib import Path
from typing import Sequence

import numpy as np

from jaxshuffle._config import VERSION

from jaxshuffle.accountant.amplify import UpperSource
from jaxshuffle.accountant.rounds import SOURCES as ROUND_SOURCES
from jaxshuffle.randomizers.clone import CloneProof
from jaxshuffle.search import Status



#: Version of the files' layout and meaning. 2: mechanism searches (blanket column, upper_from setting).
#: 3: the rounds axis (composed-epsilon columns; its chunk files carry an ``extra`` array). A sweep
#: without a rounds axis has schema 2's layout and meaning, so a schema-2 directory is resumed
#: (:data:`RESUMABLE_SCHEMAS`); a directory written under any other schema is not (a clear error),
#: and its results still load.
STORE_SCHEMA = 3
RESUMABLE_SCHEMAS = (2, 3)
STATUS_NAMES = tuple(s.label for s in Status)
SOURCE_NAMES = UpperSource.NAMES
CLONE_PROOF_NAMES = tuple(c.name.lower() for c in CloneProof)
MAX_ITER = 60

#: Result columns after the parameter columns, with their meaning (also in the JSON sidecar).
COLUMNS = {
    "index": "grid point number (row order of the cartesian product)",
    "randomizer": "catalog name (jaxshuffle.randomizers.CATALOG)",
    "n": "number of users",
    "delta_rule": "delta as given (a number or a rule in n)",
    "delta": "delta of the (eps, delta) guarantee",
    "lower": "lower bound on the shuffled mechanism's eps (Theorem 5.1 pairs, and for k-ary RR unless upper_from "
             "is worst-case the exact all-z / all-x0 datasets; 0 where has_lower is false)",
    "upper": "certified upper bound on eps, amplify's rule for upper_from (default best: the smallest of the "
             "worst-case-beta pair, the (u+v)-scaled pair if scaled_variant, and the blanket pair where the "
             "randomizer carries its mechanism; 0 if delta >= beta); with a rounds axis the certified eps of the T "
             "rounds at total delta (the smallest of pld, blanket_pld, basic, advanced)",
    "paper": "paper's Theorem 4.7 value at the randomizer's beta (NOT a guarantee unless paper_certified)",
    "certified": "upper is a sound (certified) upper bound",
    "status": "engine status of the search behind upper (" + ", ".join(STATUS_NAMES) + ")",
    "worst_case": "certified eps of the clone pair whose constant is proven for this randomizer (standard clone "
                  "r = 1/(2q) by default, stronger clone 1/(p+1) for k-ary RR; docs/math.md 5.4)",
    "clone_proof": "the proof behind worst_case (" + ", ".join(CLONE_PROOF_NAMES) + "): standard: r = 1/(2q), any "
                   "randomizer; stronger: r = 1/(p+1), k-ary RR and binary RR on two options; general: r* of the "
                   "mechanism's matrix; multi_message: r = 1/q (docs/math.md 5.4)",
    "blanket": "certified eps of the blanket (three-count) pair of the concrete mechanism (k-ary RR; inf where "
               "the randomizer carries none or upper_from is worst-case)",
    "upper_source": "which sound bound gave upper (" + ", ".join(SOURCE_NAMES) + "; with a rounds axis one of "
                    + ", ".join(ROUND_SOURCES) + ")",
    "paper_certified": "the paper's pair has w = 0 and a clone constant within the proven one (then paper is sound)",
    "has_lower": "lower comes from a Theorem 5.1 pair",
    "status_lower": "engine status of the best lower-bound search",
    "status_paper": "engine status of the paper-value search",
    "p": "variation-ratio parameter p (largest probability ratio)",
    "beta": "variation-ratio parameter beta (largest total variation)",
    "q": "variation-ratio blanket ratio q",
    # a sweep with a rounds axis (jaxshuffle.accountant.rounds.composed_epsilon per point)
    "rounds": "number of rounds T on the same users (rounds axis: upper is then the certified eps of the T rounds "
              "at total delta)",
    "pld": "rounds axis: PLD composition of the worst-case pair over T rounds (certified upper bound)",
    "pld_lower": "rounds axis: the composed worst-case pair's eps from below (how tight pld is numerically; not a "
                 "lower bound on the mechanism)",
    "blanket_pld": "rounds axis: PLD composition of the k-RR blanket pair (certified upper bound; inf where the "
                   "randomizer has none or blanket_points is 0)",
    "basic": "rounds axis: basic composition T eps_1(delta/T) of the certified one-round bound (upper bound)",
    "advanced": "rounds axis: advanced composition (Dwork, Rothblum and Vadhan 2010) of the certified one-round "
                "bound at delta/(2T), capped by basic (upper bound)",
    "discretization": "rounds axis: loss grid spacing of the PLD composition (one per (randomizer options, n))",
}
RESULT_ORDER = ("lower", "upper", "paper", "certified", "status", "worst_case", "clone_proof", "blanket",
                "upper_source", "paper_certified", "has_lower", "status_lower", "status_paper", "p", "beta", "q")
#: Result columns of a sweep with a rounds axis (one composed_epsilon cell per point; no single-round searches).
ROUNDS_RESULT_ORDER = ("upper", "upper_source", "certified", "pld", "pld_lower", "blanket_pld", "basic", "advanced",
                       "discretization", "p", "beta", "q")
#: The rounds columns a rounds job stores in its chunk file's ``extra`` array, in this order.
ROUNDS_EXTRA = ("pld", "pld_lower", "blanket_pld", "basic", "advanced", "discretization")
STRING_COLUMNS = {"randomizer", "delta_rule", "status", "upper_source", "status_lower", "status_paper", "clone_proof"}
BOOL_COLUMNS = {"certified", "paper_certified", "has_lower"}


# ----------------------------------------------------------------------------------------
# Storage: manifest, atomic chunk files, CSV


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def format_cell(key: str, x) -> str:
    if key in BOOL_COLUMNS:
        return "true" if x else "false"
    if isinstance(x, (str, np.str_)):
        return str(x)
    x = float(x)
    if math.isnan(x):
        return ""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if key in ("index", "n", "rounds") and x == int(x):
        return str(int(x))
    return repr(x)


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


def read_csv(path) -> dict[str, np.ndarray]:
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

    def keys(self):
        return self.columns.keys()

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete", True))

    def select(self, **conditions) -> "SweepResult":
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

    def to_csv(self, path) -> None:
        atomic_write(Path(path), csv_text(self.columns, list(self.columns), True).encode())

    def __repr__(self) -> str:
        return f"SweepResult({len(self)} points, columns={list(self.columns)}, complete={self.complete})"

    def to_pandas(self):
        """A pandas DataFrame, one row per point (:func:`jaxshuffle.sweeps.frames.to_pandas`)."""
        from jaxshuffle.sweeps import frames

        return frames.to_pandas(self)

    def to_xarray(self, *, missing: str = "raise", dims=None):
        """An xarray Dataset over the grid axes (:func:`jaxshuffle.sweeps.frames.to_xarray`)."""
        from jaxshuffle.sweeps import frames

        return frames.to_xarray(self, missing=missing, dims=dims)

    def to_parquet(self, path, *, overwrite: bool = False) -> Path:
        """Write one Parquet file atomically (:func:`jaxshuffle.sweeps.frames.to_parquet`)."""
        from jaxshuffle.sweeps import frames

        return frames.to_parquet(self, path, overwrite=overwrite)


def load(path) -> SweepResult:
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


def environment(devices) -> dict:
    import jax

    from jaxshuffle.divergence import REL_ERR, REL_TAIL

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
             "(jaxshuffle.accountant.amplify; docs/math.md section 5); with upper_from best (default) also min with "
             "the blanket value below (upper_source says which), with blanket that value alone",
    "lower": "lower end of the certified bracket of the Theorem 5.1 pair(s) (catalog lower parameters and x* = x0); "
             "unless upper_from is worst-case, the larger with the exact all-z / all-x0 datasets' certified lower "
             "bound for k-ary RR and the rows that carry a matrix (jaxshuffle.accountant.with_mechanism_bounds)",
    "blanket": "certified: blanket (three-count) pair of the concrete mechanism, jaxshuffle.accountant."
               "with_mechanism_bounds (k-ary RR: jaxshuffle.blanket.krr_bounds, docs/math.md section 7; subset "
               "selection, Hadamard response, binary RR: jaxshuffle.blanket_matrix, section 18), one search per "
               "distinct point",
    "paper": "upper end of the bracket of the paper's Theorem 4.7 pair vr_pair(p, beta, q): not a guarantee when w > 0",
    "engine": "jaxshuffle.search.epsilon_with_plan: safeguarded Newton bracketing on the certified hockey-stick "
              "divergence band (jaxshuffle.divergence), float64",
}


def write_results(out_dir: Path, result: SweepResult, order: Sequence[str]) -> None:
    cols = result.columns
    atomic_write(out_dir / "results.csv", csv_text(cols, order, True).encode())
    if result.complete:
        atomic_write(out_dir / "results.npz", npz_bytes(**cols))
    atomic_write(out_dir / "results.json", json.dumps(result.meta, indent=1, default=_json_default).encode())


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(type(x))


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def clear_store(out_dir: Path) -> None:
    for name in ("sweep.json", "results.csv", "results.npz", "results.json"):
        (out_dir / name).unlink(missing_ok=True)
    for p in out_dir.glob("shard-*-of-*.npz"):
        p.unlink()
    if (out_dir / "chunks").is_dir():
        for p in (out_dir / "chunks").iterdir():
            if p.suffix != ".lock":  # the writers' locks (held by the caller) stay
                p.unlink()


def load_chunks(chunk_dir: Path, n_chunks: int, fingerprint: str | None = None) -> dict[int, dict]:
    """Finished chunks; leftovers of a killed write (temporary files) and unreadable files are removed.

    A chunk of a rounds bucket also carries ``extra`` (one row per job: :data:`ROUNDS_EXTRA`).
    """
    done: dict[int, dict] = {}
    for p in sorted(chunk_dir.iterdir()):
        if p.name.startswith("."):  # temporary file of an interrupted atomic write
            p.unlink(missing_ok=True)
            continue
        if not (p.name.startswith("c") and p.suffix == ".npz"):
            continue
        try:
            ci = int(p.stem[1:])
            with np.load(p, allow_pickle=False) as z:
                data = {k: z[k] for k in ("jobs", "lower", "upper", "status", "iterations")}
                if "extra" in z.files:
                    data["extra"] = z["extra"]
                ok = fingerprint is None or str(z["fingerprint"]) == fingerprint
            ok = ok and 0 <= ci < n_chunks and len({len(v) for v in data.values()}) == 1
        except Exception:  # truncated or corrupt: recompute this chunk
            ok = False
        if ok:
            done[ci] = data
        else:
            p.unlink(missing_ok=True)
    return done
