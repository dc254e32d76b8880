"""The ``jaxshuffle`` command line: in-process via ``main(argv)`` (fast), one subprocess smoke test.

The epsilon runs reuse the batch shapes of tests/test_accountant.py (grr, k = 3, n = 2) so the
compiled programs are shared within a session.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

import jaxshuffle as js
from jaxshuffle import cli
from jaxshuffle import randomizers as R
from jaxshuffle.randomizers import CATALOG

DONE_WHEN = ["epsilon", "--randomizer", "grr", "--k", "3", "--eps0", "1", "--n", "2", "--delta", "0.01"]


def run(capsys, argv):
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_done_when_plain(capsys):
    code, out, err = run(capsys, DONE_WHEN)
    assert code == 0 and err == ""
    assert "Shuffle model" in out and "replace-one" in out and "single message" in out
    upper = float(out.split("eps <= ")[1].split()[0])
    assert upper >= 0.969408
    paper_line = [line for line in out.splitlines() if "paper" in line][0]
    assert "0.914553" in paper_line and "NOT certified" in paper_line
    assert "eps >= 0.969408" in out  # Theorem 5.1 lower bound (x* = x0) is exact here


@pytest.mark.slow
def test_done_when_json_schema(capsys):
    code, out, _ = run(capsys, DONE_WHEN + ["--json"])
    assert code == 0
    rows = json.loads(out)
    assert isinstance(rows, list) and len(rows) == 1
    r = rows[0]
    for key in ("lower", "upper", "paper", "certified", "paper_certified", "n", "delta", "options", "randomizer",
                "messages", "worst_case", "upper_source", "status", "p", "beta", "q"):
        assert key in r, key
    assert r["certified"] is True and r["paper_certified"] is False
    assert r["upper"] >= 0.969408 and abs(r["paper"] - 0.914553) < 1e-6
    assert r["lower"] <= 0.9694083 <= r["upper"]
    assert r["options"] == {"eps0": 1.0, "k": 3.0} and r["messages"] == "single"


def test_grid_is_cartesian(capsys):
    names, cols = cli._cartesian({"eps0": [1.0, 2.0], "n": [1e4, 1e6, 1e8]})
    assert names == ["eps0", "n"]
    assert cols["eps0"].tolist() == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    assert cols["n"].tolist() == [1e4, 1e6, 1e8] * 2
    code, out, _ = run(capsys, ["epsilon", "--randomizer", "general", "--eps0", "1,2", "--n", "2",
                                "--delta", "0.01", "--json"])
    rows = json.loads(out)
    assert code == 0 and [r["options"]["eps0"] for r in rows] == [1.0, 2.0]
    # the paper's pair is the stronger clone here, not proven for a general randomizer (docs/math.md 3.1)
    assert all(not r["paper_certified"] and r["certified"] and r["paper"] < r["upper"] for r in rows)
    assert all(r["has_lower"] is False and r["lower"] == 0.0 for r in rows)


@pytest.mark.slow
def test_calibrate_eps0_cli(capsys):
    code, out, _ = run(capsys, ["calibrate", "--randomizer", "grr", "--k", "3", "--target", "0.5", "--n", "2",
                                "--delta", "0.01", "--json"])
    assert code == 0
    (r,) = json.loads(out)
    assert r["solved_for"] == "eps0" and r["calibration_status"] == "converged"
    assert r["upper"] <= 0.5 and r["value"] < r["over"] <= r["value"] * (1 + 2e-6)
    for key in ("lower", "upper", "paper", "certified"):
        assert key in r
    code, out, _ = run(capsys, ["calibrate", "--randomizer", "grr", "--k", "3", "--target", "0.5", "--n", "2",
                                "--delta", "0.01"])
    assert code == 0 and "largest eps0 =" in out


def test_randomizers_list(capsys):
    code, out, _ = run(capsys, ["randomizers"])
    assert code == 0
    for name in CATALOG:
        assert name in out
    code, out, _ = run(capsys, ["randomizers", "--json"])
    listing = json.loads(out)
    assert {e["name"] for e in listing} == set(CATALOG)
    grr = next(e for e in listing if e["name"] == "grr")
    assert grr["source"] and [o["name"] for o in grr["options"]] == ["eps0", "k"]


@pytest.mark.parametrize("argv, pattern", [
    (["epsilon", "--randomizer", "grr", "--k", "1", "--eps0", "1", "--n", "2", "--delta", "0.01"],
     "k: must be an integer >= 2"),
    (["epsilon", "--randomizer", "grr", "--eps0", "1", "--n", "2", "--delta", "0.01"], "k: required option"),
    (["epsilon", "--randomizer", "nope", "--n", "2", "--delta", "0.01"], "randomizer: unknown name 'nope'"),
    (["epsilon", "--randomizer", "grr", "--k", "3", "--eps0", "-1", "--n", "2", "--delta", "0.01"],
     "eps0: must be a number in [0, 700], got -1"),
    (["epsilon", "--randomizer", "grr", "--k", "3", "--eps0", "1", "--n", "2", "--delta", "2"],
     "delta: must lie in (0, 1)"),
    (["epsilon", "--randomizer", "grr", "--k", "3", "--eps0", "1", "--n", "0.5", "--delta", "0.1"],
     "n: must be integers >= 1 (grid syntax: 1,2,5 | 0.5:4:8 | 1e3..1e6:7, rounded to integers); got '0.5'"),
    (["epsilon", "--randomizer", "grr", "--k", "3", "--eps0", "1x", "--n", "2", "--delta", "0.1"],
     "eps0: invalid number '1x'"),
    (["epsilon", "--randomizer", "subset-selection", "--eps0", "1", "--d", "3", "--k", "3", "--n", "2",
      "--delta", "0.1"], "k: must be <= d - 1"),
    (["calibrate", "--randomizer", "metric-laplace", "--dmax", "2", "--target", "0.5", "--n", "10",
      "--delta", "0.1"], "randomizer: 'metric-laplace' has no eps0 option"),
    (["bogus"], "argument command: invalid choice"),
])
def test_user_errors_exit_2_one_line(capsys, argv, pattern):
    code, out, err = run(capsys, argv)
    assert code == 2 and out == ""
    assert err.startswith("jaxshuffle: error: ") and err.count("\n") == 1, err
    assert pattern in err and "Traceback" not in err


def test_enables_persistent_cache(tmp_path):
    """``cli.main`` turns JAX's persistent compilation cache on, in ``$JAXSHUFFLE_CACHE/xla``."""
    probe = ("import jax, sys; from jaxshuffle import cli; "
             "code = cli.main(['epsilon', '--randomizer', 'nope', '--n', '2', '--delta', '0.01']); "
             "print(code, jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs)")
    env = dict(os.environ, JAXSHUFFLE_CACHE=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    code, folder, threshold = done.stdout.split()
    assert code == "2" and folder == str(tmp_path / "cache" / "xla") and float(threshold) == 0.0


def test_subprocess_smoke(tmp_path):
    """The installed console script (or ``python -m jaxshuffle.cli``): listing and a user error."""
    exe = shutil.which("jaxshuffle")
    base = [exe] if exe else [sys.executable, "-m", "jaxshuffle.cli"]
    env = dict(os.environ, JAXSHUFFLE_CACHE=str(tmp_path / "xla"))
    ok = subprocess.run(base + ["randomizers", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0 and {e["name"] for e in json.loads(ok.stdout)} == set(CATALOG)
    bad = subprocess.run(base + ["epsilon", "--randomizer", "grr", "--k", "1", "--eps0", "1", "--n", "2",
                                 "--delta", "0.01"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip() == "jaxshuffle: error: k: must be an integer >= 2, got 1"


@pytest.mark.slow
def test_sandwich_cli_shows_the_counterexample(capsys):
    assert cli.main(["sandwich", "--grr", "3", "--eps0", "1", "--n", "2", "--delta", "0.01"]) == 0
    out = capsys.readouterr().out
    assert "0.969408" in out and "0.914553" in out and "NOT an upper bound" in out


@pytest.mark.slow
def test_sandwich_cli_json_and_errors(capsys):
    assert cli.main(["sandwich", "--matrix", "0.7,0.3;0.3,0.7", "--n", "3", "--delta", "0.01", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["lower"] <= rows[0]["exact"] <= rows[0]["upper"] + 1e-9
    assert cli.main(["sandwich", "--matrix", "0.7,x;0.3,0.7", "--n", "3", "--delta", "0.01"]) == 2
    assert "matrix" in capsys.readouterr().err
    assert cli.main(["sandwich", "--grr", "3", "--n", "3", "--delta", "0.01"]) == 2


@pytest.mark.usefixtures("release_programs_after")
@pytest.mark.slow
def test_compare_cli_writes_table_and_figure(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert cli.main(["compare", "--randomizer", "grr", "--k", "3", "--eps0", "0.5:2:3", "--n", "1e3",
                 "--delta", "1e-6", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "certified upper (jaxshuffle)" in text and "reference" in text
    assert (out / "compare.csv").stat().st_size > 0 and (out / "compare.png").stat().st_size > 0


def test_sweep_entry_point_uses_every_cpu_core_unless_told():
    """use_every_cpu_core (called by `jaxshuffle sweep`) gives one CPU device per core, keeps a
    device count the user set, and does nothing once JAX's backends are up."""
    probe = ("import os, jax; from jaxshuffle._config import use_every_cpu_core; use_every_cpu_core(); "
             "print(len(jax.devices('cpu')), os.environ.get('XLA_FLAGS', ''))")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    cores = len(os.sched_getaffinity(0))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[0]) == cores
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=3"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3", "--xla_force_host_platform_device_count=3"]
    jax.devices()  # this process: backends up, so the call must leave XLA_FLAGS alone
    before = os.environ.get("XLA_FLAGS")
    from jaxshuffle._config import use_every_cpu_core
    use_every_cpu_core()
    assert os.environ.get("XLA_FLAGS") == before


@pytest.mark.slow
@pytest.mark.usefixtures("release_programs_after")
def test_compose_json_brackets_and_beats_basic_composition(capsys):
    code, out, err = run(capsys, ["compose", "--randomizer", "grr", "--k", "10", "--eps0", "1", "--n", "1e4",
                                  "--rounds", "1,20", "--delta", "1e-6", "--blanket-points", "128", "--json"])
    assert code == 0, err
    rows = json.loads(out)
    assert [r["rounds"] for r in rows] == [1, 20]
    # one round of the composed (worst-case) pair reproduces that pair's single-round bracket
    one = float(js.amplify(R.grr(1.0, 10), 10_000, 1e-6, upper_from="worst-case").upper)
    assert rows[0]["lower"] <= one <= rows[0]["pld"] <= one + 3 * rows[0]["discretization"]
    assert rows[1]["lower"] <= rows[1]["pld"] < rows[1]["advanced"] <= rows[1]["basic"]
    # the reported bound is the smallest certified one: at T = 1 basic composition of the blanket pair's
    # one-round bound, which the blanket pair's PLD reproduces within its grid
    blanket = float(js.amplify(R.grr(1.0, 10), 10_000, 1e-6).upper)
    assert rows[0]["basic"] == pytest.approx(blanket, 1e-12) and rows[0]["upper"] <= rows[0]["basic"]
    assert abs(rows[0]["blanket_pld"] - blanket) <= 1e-3 * blanket
    # at T = 20 the blanket pair's own composition wins, far below the worst-case pair's
    assert rows[1]["upper_source"] == "blanket PLD"
    assert rows[1]["upper"] == rows[1]["blanket_pld"] < 0.8 * rows[1]["pld"]


@pytest.mark.slow
def test_compose_plot_draws_the_rounds_curve(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "rounds.png"
    code, out, err = run(capsys, ["compose", "--randomizer", "general", "--eps0", "1", "--n", "1e3",
                                  "--rounds", "1,10,100", "--delta", "1e-6,1e-8", "--plot", str(png), "--json"])
    assert code == 0, err
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(json.loads(out)) == 6


@pytest.mark.parametrize("argv,pattern", [
    (["--rounds", "10", "--delta", "1e-6", "--plot", "/no/such/folder/x.png"], "plot: the folder /no/such/folder"),
    (["--rounds", "10", "--delta", "1e-6", "--plot", "."], "plot: . is a directory"),
    (["--rounds", "0", "--delta", "1e-6"], "rounds: must be integers >= 1"),
    (["--rounds", "10", "--delta", "2"], "delta: must lie in (0, 1)"),
    (["--rounds", "abc", "--delta", "1e-6"], "rounds"),
    (["--rounds", "10", "--delta", "1e-6", "--blanket-points", "-1"], "blanket-points: must be an integer >= 0"),
])
def test_compose_bad_input_is_one_line(capsys, argv, pattern):
    code, out, err = run(capsys, ["compose", "--randomizer", "grr", "--k", "3", "--eps0", "1", "--n", "100", *argv])
    assert code == 2 and out == "" and pattern in err and err.count("\n") == 1, err


@pytest.mark.slow
def test_epsilon_folds_in_a_catalog_rows_matrix(capsys):
    """subset-selection carries its matrix (docs/math.md 11.6): the CLI's default gives amplify's upper,
    the smallest of the worst-case pair and the matrix blanket bound, with its source named."""
    from jaxshuffle import randomizers as R
    base = ["epsilon", "--randomizer", "subset-selection", "--eps0", "1", "--d", "4", "--k", "2", "--n", "5",
            "--delta", "0.05", "--json"]
    code, out, err = run(capsys, base)
    assert code == 0, err
    got = json.loads(out)[0]
    rep = js.amplify(R.subset_selection(1.0, 4, 2), 5, 0.05, lower_params=R.subset_selection_lower(1.0, 4, 2))
    assert np.isfinite(float(rep.blanket)) and abs(got["upper"] - float(rep.upper)) <= 1e-6 * float(rep.upper)
    assert got["upper_source"] == js.UpperSource.DESCRIPTIONS[int(rep.upper_source)]


@pytest.mark.slow
def test_epsilon_upper_from_picks_the_source(capsys):
    """k-RR: the default takes the blanket pair (MATH.md section 10 cross-check: n = 2, k = 3, eps0 = 1,
    delta = 0.01 gives 0.9694082); --upper-from worst-case the two-count pair (0.981112)."""
    base = ["epsilon", "--randomizer", "grr", "--k", "3", "--eps0", "1", "--n", "2", "--delta", "0.01", "--json"]
    code, out, err = run(capsys, base)
    assert code == 0, err
    best = json.loads(out)[0]
    assert best["upper_source"] == "blanket pair" and abs(best["upper"] - 0.9694082) < 2e-6
    assert best["lower"] <= best["upper"] and abs(best["lower"] - 0.9694082) < 1e-6  # 7 printed digits
    code, out, err = run(capsys, base + ["--upper-from", "worst-case"])
    assert code == 0, err
    wc = json.loads(out)[0]
    assert wc["upper_source"] == "worst-case pair" and abs(wc["upper"] - 0.981112) < 1e-6
    code, out, err = run(capsys, base + ["--upper-from", "clone"])
    assert code == 2 and err.startswith("jaxshuffle: error:") and "upper-from" in err and "Traceback" not in err


def test_errors_name_the_option_not_the_api_parameter(capsys):
    """An API error about ``upper_from`` reaches the CLI user as ``--upper-from`` (the option given),
    in one line; a name without an underscore is the option's name already and stays as it is."""
    argv = ["calibrate", "--randomizer", "subset-selection", "--d", "4", "--k", "2", "--target", "0.5",
            "--n", "1e3", "--delta", "1e-6", "--upper-from", "blanket"]
    code, out, err = run(capsys, argv)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("jaxshuffle: error: --upper-from: 'blanket' calibration covers k-ary RR"), err
    assert cli._user_facing("upper_from: x", ["--upper-from=blanket"]) == "--upper-from: x"
    assert cli._user_facing("upper_from: x", []) == "upper_from: x"  # not given: the API's name stays
    assert cli._user_facing("k: must be an integer >= 2", ["--k", "1"]) == "k: must be an integer >= 2"
