"""An output the command line cannot write is refused before anything is computed, with one line naming the
option (exit 2, no traceback): ``plot -o``, ``compose --plot``, ``sweep --plot``, ``sweep merge --out`` and
``compare --out``; and a ``sweep merge`` input directory without its ``chunks/`` folder is named.

The unwritable place is a folder with mode 0o500; where that does not stop this process (root ignores it), a
path under a regular file instead, which no one can create. The computation each command would run is
replaced by one that fails the test, so a check made only after computing fails here too.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from jaxshuffle import cli
from jaxshuffle import sweeps as sw
from jaxshuffle.cli import compose as cli_compose
from jaxshuffle.cli import sweep as cli_sweep


@pytest.fixture
def blocked(tmp_path):
    """``blocked(name)``: a path ``name`` whose folder cannot be written (or, for root, cannot exist)."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    if os.access(folder, os.W_OK):  # root: the mode does not stop it; a regular file as the parent does
        folder.chmod(0o700)
        folder = tmp_path / "a-file"
        folder.write_text("not a folder\n")
    yield lambda name: folder / name
    if folder.is_dir():
        folder.chmod(0o700)  # tmp_path can be removed


@pytest.fixture
def no_computation(monkeypatch):
    """Every computation the commands here could start fails the test."""
    def computed(*args, **kwargs):
        raise AssertionError("computed before the output path was checked")

    monkeypatch.setattr(cli_compose, "run_interruptible", computed)
    monkeypatch.setattr(cli_sweep, "sweep", computed)
    monkeypatch.setattr(cli_sweep, "merge", computed)
    monkeypatch.setattr("jaxshuffle.comparison.compare", computed)


def _one_line_error(capsys, argv: list[str], option: str) -> str:
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert status == 2, err
    assert "Traceback" not in err and out == ""
    assert err.count("\n") == 1 and err.startswith(f"jaxshuffle: error: {option}: "), err
    return err


def test_plot_output_in_an_unwritable_folder(capsys, blocked, tmp_path):
    pytest.importorskip("matplotlib", reason="plot needs matplotlib (checked first)")
    png = blocked("figure.png")
    # the results are read after the check: a missing results file is not what is reported
    err = _one_line_error(capsys, ["plot", tmp_path / "missing.csv", "-o", png], "-o/--output")
    assert str(png) in err


def test_compose_plot_in_an_unwritable_folder(capsys, blocked, no_computation):
    pytest.importorskip("matplotlib", reason="compose --plot needs matplotlib (checked after the path)")
    png = blocked("rounds.png")
    err = _one_line_error(capsys, ["compose", "--randomizer", "general", "--eps0", "1", "--n", "1e3", "--rounds", "2",
                                   "--delta", "1e-6", "--plot", png], "plot")
    assert str(png) in err


def test_sweep_plot_in_an_unwritable_folder(capsys, blocked, no_computation, tmp_path):
    pytest.importorskip("matplotlib", reason="sweep --plot needs matplotlib")
    png = blocked("sweep.png")
    out = tmp_path / "sweep"
    err = _one_line_error(capsys, ["sweep", "--randomizer", "general", "--eps0", "1", "--n", "10", "--delta", "1e-3",
                                   "--upper-from", "worst-case", "--out", out, "--plot", png, "--quiet"], "plot")
    assert str(png) in err
    assert not out.exists()  # refused before the sweep started


def test_sweep_plot_is_not_checked_when_not_drawn(capsys, blocked, no_computation, tmp_path):
    """--no-plot (and a shard other than 1 of 1) draws nothing: an unwritable --plot is not an error there."""
    with pytest.raises(AssertionError, match="computed before"):  # reached the sweep
        cli.main(["sweep", "--randomizer", "general", "--eps0", "1", "--n", "10", "--delta", "1e-3",
                  "--out", str(tmp_path / "sweep"), "--plot", str(blocked("sweep.png")), "--no-plot", "--quiet"])


def _fake_sweep_dir(path: Path, *, chunks: bool = True) -> Path:
    path.mkdir(parents=True)
    (path / "sweep.json").write_text("{}\n")
    if chunks:
        (path / "chunks").mkdir()
    return path


def test_merge_out_in_an_unwritable_folder(capsys, blocked, no_computation, tmp_path):
    # checked before the inputs are read (this input's manifest is not a sweep's: reading it would fail)
    run = _fake_sweep_dir(tmp_path / "run-0")
    merged = blocked("merged")
    err = _one_line_error(capsys, ["sweep", "merge", run, "--out", merged], "out")
    assert str(merged) in err


def test_merge_out_that_is_a_file(capsys, no_computation, tmp_path):
    run = _fake_sweep_dir(tmp_path / "run-0")
    (tmp_path / "merged").write_text("")
    err = _one_line_error(capsys, ["sweep", "merge", run, "--out", tmp_path / "merged"], "out")
    assert "is a file" in err


def test_merge_input_without_chunks_is_named(capsys, tmp_path):
    """A real sweep's directory whose chunks/ folder is gone: merge names it (it said only that points were
    missing), with --allow-partial too (where it merged nothing from it)."""
    run = tmp_path / "run-0"
    assert sw.sweep("general", eps0="1", n="10", delta="1e-3", out=run, quiet=True, upper_from="worst-case",
                    lower=False, devices=1).complete
    shutil.rmtree(run / "chunks")
    for extra in ([], ["--allow-partial"]):
        merged = tmp_path / f"merged{len(extra)}"
        err = _one_line_error(capsys, ["sweep", "merge", run, "--out", merged, *extra], "inputs")
        assert f"inputs: {run} has no chunks/ folder" in err
        assert not merged.exists()


def test_compare_out_in_an_unwritable_folder(capsys, blocked, no_computation):
    out = blocked("compare-out")
    err = _one_line_error(capsys, ["compare", "--randomizer", "grr", "--k", "3", "--eps0", "1", "--n", "1e3",
                                   "--delta", "1e-6", "--upper-from", "worst-case", "--out", out], "out")
    assert str(out) in err


@pytest.mark.parametrize("case", ["file", "csv-is-a-folder"])
def test_compare_out_that_cannot_hold_its_files(capsys, no_computation, tmp_path, case):
    out = tmp_path / "compare-out"
    if case == "file":
        out.write_text("")
    else:
        (out / "compare.csv").mkdir(parents=True)
    err = _one_line_error(capsys, ["compare", "--randomizer", "grr", "--k", "3", "--eps0", "1", "--n", "1e3",
                                   "--delta", "1e-6", "--upper-from", "worst-case", "--out", out], "out")
    assert ("is a file" if case == "file" else f"{out / 'compare.csv'} is a folder") in err
