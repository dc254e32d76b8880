"""The notebooks under notebooks/ run top to bottom (small grids) and are committed without outputs.

Runner: no Jupyter needed. Each code cell's source is read from the notebook JSON (nbformat 4)
and executed with ``exec`` in one namespace, in order, like a kernel would; cells must therefore
be plain Python (no ``%magics``/``!shell``, which this test rejects). ``JAXSHUFFLE_SMALL=1``
shrinks the grids; matplotlib draws headless (Agg); files land in a temporary directory.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def _cells(path: Path) -> list[dict]:
    book = json.loads(path.read_text())
    assert book["nbformat"] == 4
    return book["cells"]


def _source(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def test_there_are_notebooks():
    names = {p.name for p in NOTEBOOKS}
    assert {"01_table5.ipynb", "02_comparison_figures.ipynb", "03_soundness_counterexample.ipynb",
            "04_privacy_utility_surface.ipynb", "05_witchhat.ipynb"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{path.name} cell {i} has outputs"
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has an execution count"


@pytest.mark.slow
@pytest.mark.usefixtures("release_programs_after")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path, monkeypatch):
    mpl = pytest.importorskip("matplotlib", reason="the notebooks plot (install the 'plot' extra)")
    mpl.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv("JAXSHUFFLE_SMALL", "1")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    try:
        for i, cell in enumerate(_cells(path)):
            if cell["cell_type"] != "code":
                continue
            src = _source(cell)
            for line in src.splitlines():
                assert not line.lstrip().startswith(("%", "!")), f"{path.name} cell {i}: IPython syntax"
            exec(compile(src, f"{path.name}[cell {i}]", "exec"), namespace)  # noqa: S102
    finally:
        plt.close("all")
    assert os.environ["JAXSHUFFLE_SMALL"] == "1" and namespace["SMALL"] is True
