"""Checksums of a sweep's chunk and shard files: a sidecar ``cNNNNNN.sha256`` beside each file records the
SHA-256 of its arrays, checked on resume and merge (a file changed since it was written is named)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


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
