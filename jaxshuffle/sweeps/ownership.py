"""What the package owns in a sweep directory, and the proof of it.

The names the package gives its files (``sweep.json``, ``results.{csv,npz,json}``, ``shard-I-of-N.{npz,sha256}``,
``chunks/cNNNNNN.{npz,sha256}``, lock files and the temporary names of atomic writes) are no proof by
themselves: they are the package's files only in a directory that is a sweep it wrote (:func:`store_is_ours`:
its manifest reads as one, or, damaged, a chunk verifies against its checksum sidecar). Every delete of a
sweep's files goes through :func:`remove_ours`; a user's files (``chunks/MY_NOTES.txt``, a ``results.csv``
of their own) are never deleted or replaced. Symbolic links are never followed or deleted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from jaxshuffle.sweeps.checksums import checksum_problem, read_job_arrays, recorded_digest
from jaxshuffle.sweeps.files import SweepStoreError

_TOP_NAMES = re.compile(r"(sweep\.json|results\.csv|results\.npz|results\.json|shard-\d+-of-\d+\.(npz|sha256))")
_CHUNK_NAMES = re.compile(r"c\d{6,}\.(npz|sha256)")
_LOCK_NAMES = re.compile(r"(sweep|shard-\d+-of-\d+)\.lock")
TMP_NAME = re.compile(r"\.(.+)\.tmp-\d+")
CHUNK_FILE = re.compile(r"c(\d{6,})\.npz")


def _named_ours(name: str, *, in_chunks: bool, locks: bool = False) -> bool:
    """Whether ``name`` is one this package gives its files (see :func:`is_ours`), whatever the entry is."""
    m = TMP_NAME.fullmatch(name)
    if m:
        name = m.group(1)
    pats: tuple[re.Pattern[str], ...] = (_CHUNK_NAMES,) if in_chunks else (_TOP_NAMES,)
    if in_chunks and locks:
        pats += (_LOCK_NAMES,)
    return any(p.fullmatch(name) for p in pats)


def _first_manifest_write(name: str) -> bool:
    """Whether ``name`` is the temporary name of an atomic write of ``sweep.json`` (a sweep killed before its
    manifest landed leaves it: no proof of anything, and never the user's)."""
    return TMP_NAME.fullmatch(name) is not None and name.startswith(".sweep.json.")


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


def parse_manifest(path: Path) -> dict:
    """The manifest at ``path``; OSError where unreadable, ValueError where it is not a sweep manifest."""
    m = json.loads(path.read_text())
    if not isinstance(m, dict) or "fingerprint" not in m or "chunks" not in m:
        raise ValueError("not a sweep manifest: no fingerprint and chunks")
    return m


def has_verified_chunk(out_dir: Path) -> bool:
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
        parse_manifest(mpath)
    except (OSError, ValueError):
        return has_verified_chunk(out_dir)
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
        elif not (is_ours(p, in_chunks=False) and (owned or _first_manifest_write(p.name))):
            other.append(p)
    return other


def would_replace(out_dir: Path, entries: Sequence[Path]) -> list[Path]:
    """Those of ``entries`` (:func:`holds_other_files`' answer for ``out_dir``) that bear a name a sweep writes
    or removes (``results.csv``, ``chunks/c000000.npz``, ...; not lock files), files or not: in a directory that
    is not a sweep this package wrote they are the user's, and a sweep there would replace them."""
    out_dir = Path(out_dir)
    return [p for p in entries if (p.parent == out_dir and _named_ours(p.name, in_chunks=False)
                                   and not _first_manifest_write(p.name))
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
        m = parse_manifest(path)
    except OSError as exc:
        raise SweepStoreError(f"out: cannot read {path} ({exc.strerror or exc})", path) from None
    except ValueError as exc:  # JSON errors included
        why = " ".join(str(exc).split())
        if has_verified_chunk(path.parent):
            todo = (f"rerun with --overwrite to recompute the sweep in {path.parent} (only the sweep's own files "
                    "are replaced)")
        else:
            todo = (f"use another --out (no chunk file in {path.parent} verifies, so nothing shows that jaxshuffle "
                    "wrote it: --overwrite leaves it alone)")
        raise SweepStoreError(f"out: {path} is damaged ({why}); nothing was changed: restore it from a copy, or "
                              f"{todo}", path) from None
    return m


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
