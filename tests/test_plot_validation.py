"""`jaxshuffle plot` refuses impossible data and a directory as its output, with one line per problem.

Impossible: a NaN bound, eps0 <= 0 (or NaN where the randomizer has eps0), a one-round certified upper
above eps0 (beyond a relative 1e-9), a lower above the upper. The results are synthetic (no engine call),
written as the package writes them (SweepResult.to_csv).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from jaxshuffle import cli
from jaxshuffle import sweeps as sw

mpl = pytest.importorskip("matplotlib", reason="matplotlib is the optional 'plot' extra")
mpl.use("Agg")

from jaxshuffle import plot as jplot  # noqa: E402
from jaxshuffle.cli import sweep as cli_sweep  # noqa: E402


def _results(**overrides):
    """A small grr sweep's results (eps0 x n = 3 x 2 rows); ``overrides`` maps column -> {row: value}."""
    rows = list(itertools.product([0.5, 1.0, 2.0], [1e3, 1e4]))
    e0 = np.array([r[0] for r in rows])
    n = np.array([r[1] for r in rows])
    upper = np.minimum(e0, e0 * 30 / np.sqrt(n))
    size = len(rows)
    cols = {
        "index": np.arange(size), "randomizer": np.full(size, "grr"), "eps0": e0, "k": np.full(size, 3.0), "n": n,
        "delta_rule": np.full(size, "1e-06"), "delta": np.full(size, 1e-6), "lower": 0.8 * upper, "upper": upper,
        "paper": 0.9 * upper, "certified": np.ones(size, bool), "status": np.full(size, "converged"),
    }
    for name, values in overrides.items():
        cols[name] = cols[name].astype(np.float64) if name in ("index",) else cols[name].copy()
        for i, v in values.items():
            cols[name][i] = v
    return sw.SweepResult(cols, {"complete": True})


def _csv(tmp_path, res, name="results.csv"):
    path = tmp_path / name
    res.to_csv(path)
    return path


def _plot(capsys, *argv):
    status = cli.main(["plot", *map(str, argv)])
    captured = capsys.readouterr()
    return status, captured.err


def test_consistent_results_are_drawn(tmp_path, capsys):
    path = _csv(tmp_path, _results())
    assert jplot.check_results(sw.load(path)) == []
    png = tmp_path / "ok.png"
    status, err = _plot(capsys, path, "-o", png)
    assert status == 0 and err == "" and png.stat().st_size > 0


@pytest.mark.parametrize("column, value, text", [
    ("upper", np.nan, "upper = nan is not a number"),
    ("lower", np.nan, "lower = nan is not a number"),
    ("lower", -0.25, "lower = -0.25 is negative"),
    ("eps0", -1.0, "eps0 = -1 is not allowed (the local budget must be a finite number > 0)"),
    ("eps0", 0.0, "eps0 = 0 is not allowed"),
    ("eps0", np.nan, "eps0 = nan is not a number (the local budget of randomizer 'grr'"),
    ("upper", 1.5, "upper = 1.5 is above eps0 = 1 (shuffling never raises epsilon above eps0"),
    ("lower", 0.9, "lower = 0.9 is above upper = "),
])
def test_one_impossible_value_is_one_line_naming_row_column_value(tmp_path, capsys, column, value, text):
    """Row 3 (eps0 = 1, n = 1e4: upper 0.3) gets the bad value: exit 2, a single line, no figure, no traceback."""
    path = _csv(tmp_path, _results(**{column: {3: value}}))
    png = tmp_path / "bad.png"
    status, err = _plot(capsys, path, "-o", png)
    assert status == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"jaxshuffle: error: results: {path}: row 3 (index 3): {text}")
    assert err.rstrip().endswith("(nothing drawn)")
    assert not png.exists()
    # the API says the same, without the CLI prefix
    lines = jplot.check_results(path)
    assert len(lines) == 1 and lines[0].startswith(f"results: {path}: row 3 (index 3): {text}")


def test_every_problem_gets_its_own_line(tmp_path, capsys):
    path = _csv(tmp_path, _results(upper={0: np.nan, 5: 2.5}, eps0={2: -1.0}))
    status, err = _plot(capsys, path, "-o", tmp_path / "x.png")
    lines = err.splitlines()
    assert status == 2 and len(lines) == 3 and "Traceback" not in err
    assert [ln.split(": ")[4] for ln in lines] == ["row 0 (index 0)", "row 2 (index 2)", "row 5 (index 5)"]
    assert "upper = nan" in lines[0] and "eps0 = -1" in lines[1] and "upper = 2.5 is above eps0 = 2" in lines[2]
    assert lines[-1].endswith("(nothing drawn; 3 impossible values in all)")


def test_many_problems_are_capped(tmp_path, capsys):
    res = _results()
    big = sw.SweepResult({k: np.concatenate([c] * 5) for k, c in res.columns.items()}, res.meta)
    big.columns["index"] = np.arange(len(big))
    big.columns["upper"] = np.full(len(big), np.nan)
    status, err = _plot(capsys, _csv(tmp_path, big), "-o", tmp_path / "x.png")
    lines = err.splitlines()
    assert status == 2 and len(lines) == cli_sweep.MAX_PROBLEM_LINES
    assert lines[-1].endswith(f"(nothing drawn; 30 impossible values in all, the first "
                              f"{cli_sweep.MAX_PROBLEM_LINES} listed)")


def test_what_is_not_impossible_passes():
    eps0 = 1.0
    # rounding slack: upper a relative 1e-12 above eps0, lower a relative 1e-12 above upper
    assert jplot.check_results(_results(upper={3: eps0 * (1 + 1e-12)}, lower={3: eps0 * (1 + 2e-12)})) == []
    # beyond the slack it is refused
    assert len(jplot.check_results(_results(upper={3: eps0 * (1 + 1e-8)}))) == 1
    # upper = inf: no finite certified bound (an engine that does not cover the point), not a contradiction
    assert jplot.check_results(_results(upper={3: np.inf})) == []
    # a randomizer without an eps0 option leaves the cell empty
    res = _results(eps0={0: np.nan})
    res.columns["randomizer"] = res.columns["randomizer"].astype(object)
    res.columns["randomizer"][0] = "balcer-uniform"
    assert jplot.check_results(res) == []
    # a rounds axis: upper is the eps of T composed rounds, which may exceed eps0
    res = _results(upper={3: 4.0}, lower={3: 0.1})
    res.columns["rounds"] = np.full(len(res), 100.0)
    assert jplot.check_results(res) == []


def test_output_directory_is_an_error_naming_the_option(tmp_path, capsys):
    path = _csv(tmp_path, _results())
    out = tmp_path / "figs"
    out.mkdir()
    status, err = _plot(capsys, path, "-o", out)
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"jaxshuffle: error: -o/--output: {out} is a directory; give a file name such as "
                          f"{out / 'sweep.png'}")
    assert not (tmp_path / "figs.png").exists() and list(out.iterdir()) == []
    status, err = _plot(capsys, path, "-o", tmp_path / "missing" / "x.png")
    assert status == 2 and err.startswith("jaxshuffle: error: -o/--output: the folder") and "does not exist" in err
