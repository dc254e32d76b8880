"""The small sweep the store tests share (12 points, 2 chunks, one device) and its fixtures' helpers."""

from __future__ import annotations

import shutil
from pathlib import Path

from jaxshuffle import sweeps as sw

SMALL = dict(randomizer="general", eps0="0.5:4:12", n="12", delta="1e-3", chunk_size=8, devices=1, quiet=True)


def finished_sweep(tmp_path_factory, name: str) -> Path:
    """A finished run of :data:`SMALL` in a fresh folder (for a module-scoped fixture)."""
    out = tmp_path_factory.mktemp(name) / "clean"
    assert sw.sweep(**SMALL, out=out).complete
    return out


def copy_sweep(clean: Path, tmp_path: Path, name: str = "run") -> Path:
    """A copy of the finished sweep ``clean`` at ``tmp_path / name``, for a test to change."""
    out = tmp_path / name
    shutil.copytree(clean, out)
    return out
