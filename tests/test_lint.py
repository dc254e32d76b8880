"""The package, tests and benchmarks pass the project's lint rules (``[tool.ruff]`` in pyproject.toml:
pyflakes, pycodestyle, import order, pyupgrade and bugbear at 120 columns)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    pytest.importorskip("ruff", reason="ruff is part of the test extra: pip install -e '.[test]'")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
