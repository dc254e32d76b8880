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


def test_pre_commit_runs_the_suites_own_checks():
    """The pre-commit config runs ruff, mypy and the notebook-output check locally (no hook repository to
    fetch), each as the test suite runs it."""
    yaml = pytest.importorskip("yaml", reason="PyYAML reads the config (dask and mkdocs bring it)")

    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = {h["id"]: h for repo in config["repos"] for h in repo["hooks"]}
    assert all(repo["repo"] == "local" for repo in config["repos"])
    assert hooks["ruff"]["entry"].startswith("python3 -m ruff check") and hooks["mypy"]["entry"] == "python3 -m mypy"
    assert "tests/test_notebooks.py" in hooks["notebooks-without-outputs"]["entry"]
