"""One grid rule on the command line: every subcommand reads a grid text into the points ``sweep`` makes of it
(``n`` and integer options rounded, duplicates dropped), or refuses it with the sweep's one-line message.

Cheap: the parsers are compared without computing anything (the sweep command's points are taken from the
spec it builds, its engine replaced), and the one computed run is three ``general`` points.
"""
from __future__ import annotations

import json

import jax
import pytest

from jaxshuffle import cli
from jaxshuffle.cli import sweep as cli_sweep
from jaxshuffle.sweeps.grid import build_spec

#: Grid texts of n and the integers a sweep makes of them, by hand: sqrt(1e7) = 3162.28 -> 3162;
#: 2.5 and 3.5 round half to even (2, 4); 10:12:3 is 10, 11, 12; 4.4 rounds onto the 4 already there.
N_GRIDS = [("1e3..1e4:3", [1000.0, 3162.0, 10000.0]),
           ("2.5,3.5,10:12:3,4.4", [2.0, 4.0, 10.0, 11.0, 12.0])]

#: Every command with an --n grid, as far as its parser: the parsed ``args.n`` is what it computes on.
COMMANDS = {
    "epsilon": ["epsilon", "--randomizer", "general", "--eps0", "1", "--delta", "1e-6"],
    "calibrate": ["calibrate", "--randomizer", "general", "--target", "0.5", "--delta", "1e-6"],
    "compare": ["compare", "--randomizer", "grr", "--k", "3", "--eps0", "1", "--delta", "1e-6"],
    "sandwich": ["sandwich", "--grr", "3", "--eps0", "1", "--delta", "0.01"],
}


class _Captured(Exception):
    """Raised by the stand-in sweep engine with the spec the command built."""


def _sweep_points(monkeypatch, argv) -> dict:
    """The spec ``jaxshuffle sweep ARGV`` builds (its points), through the sweep's own reading of the grid."""
    def spec_only(name, *, n, delta, rounds=None, **kw):
        opts = {k: v for k, v in kw.items() if k in ("eps0", "k")}
        raise _Captured(build_spec(name, n, delta, opts, rounds=rounds))

    monkeypatch.setattr(cli_sweep, "sweep", spec_only)
    with pytest.raises(_Captured) as caught:
        cli_sweep._cmd_sweep(cli._build_parser(argv).parse_args(argv))
    return caught.value.args[0]


def _parsed(argv):
    return cli._build_parser(argv).parse_args(argv)


@pytest.mark.parametrize("text, expected", N_GRIDS)
def test_every_command_reads_n_as_sweep_does(monkeypatch, text, expected):
    spec = _sweep_points(monkeypatch, ["sweep", "--randomizer", "general", "--eps0", "1", "--n", text,
                                       "--delta", "1e-6"])
    assert spec["n"] == expected
    for name, argv in COMMANDS.items():
        assert _parsed(argv + ["--n", text]).n == expected, name
    argv = ["compose", "--randomizer", "general", "--eps0", "1", "--n", text, "--rounds", "1", "--delta", "1e-6"]
    assert _parsed(argv).n == expected


def test_integer_options_round_as_in_sweep(monkeypatch):
    """k of k-ary RR is an integer option: 2.6 and 3.4 are both 3 (one point), in sweep and epsilon alike;
    compose's rounds round the same way."""
    spec = _sweep_points(monkeypatch, ["sweep", "--randomizer", "grr", "--k", "2.6,3.4,9.5", "--eps0", "1",
                                       "--n", "100", "--delta", "1e-6"])
    assert spec["options"]["k"] == [3.0, 10.0]
    k = ["--randomizer", "grr", "--k", "2.6,3.4,9.5", "--eps0", "1", "--n", "100", "--delta", "1e-6"]
    for argv in (["epsilon", *k], ["calibrate", *k, "--target", "1"], ["compose", *k, "--rounds", "1..3:5"]):
        args = _parsed(argv)
        assert args.opt_k == [3.0, 10.0] and args.opt_eps0 == [1.0], argv[0]
    assert args.rounds == [1.0, 2.0, 3.0]  # 1, 1.32, 1.73, 2.28, 3 rounded, as sweep --rounds


@pytest.mark.parametrize("flag, bad, start", [
    ("--n", "0.5", "n: must be integers >= 1"),
    ("--n", "1e3..1e4:x", "n: must be integers >= 1"),
    ("--n", "1,,2", "n: must be integers >= 1"),
    ("--eps0", "1..2:0", "eps0: invalid grid '1..2:0'"),
])
def test_a_bad_grid_is_the_same_one_line_error_everywhere(capsys, tmp_path, flag, bad, start):
    jax.devices()  # backends up: the sweep command leaves XLA_FLAGS alone in this process
    base = {"--n": "100", "--eps0": "1"}
    base[flag] = bad
    grid = ["--eps0", base["--eps0"], "--n", base["--n"], "--delta", "1e-6"]
    runs = {
        "sweep": ["sweep", "--randomizer", "general", *grid, "--out", str(tmp_path / "x"), "--quiet", "--no-plot"],
        "epsilon": ["epsilon", "--randomizer", "general", *grid],
        "calibrate": ["calibrate", "--randomizer", "general", "--target", "0.5", *grid[2:]]
        if flag == "--n" else ["calibrate", "--randomizer", "general", "--target", "0.5", *grid[:2], *grid[4:]],
        "compare": ["compare", "--randomizer", "grr", "--k", "3", *grid],
    }
    errors = {}
    for name, argv in runs.items():
        code = cli.main(argv)
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (name, err)
        errors[name] = err
    assert len(set(errors.values())) == 1, errors
    assert errors["sweep"].startswith(f"jaxshuffle: error: {start}") and repr(bad) in errors["sweep"]
    assert not (tmp_path / "x").exists()


@pytest.mark.usefixtures("release_programs_after")
def test_epsilon_certifies_every_point_of_a_log_grid_of_n(capsys):
    """``--n 1e3..1e4:3`` is three numbers of users, as in a sweep (3162.28 rounds to 3162): three
    certified points, not a refusal of the non-integer middle value."""
    code = cli.main(["epsilon", "--randomizer", "general", "--eps0", "1", "--n", "1e3..1e4:3", "--delta", "1e-6",
                     "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = json.loads(out)
    assert [r["n"] for r in rows] == [1000.0, 3162.0, 10000.0]
    assert all(r["certified"] and 0 < r["upper"] < 1 for r in rows)
    assert rows[0]["upper"] > rows[1]["upper"] > rows[2]["upper"]  # more users, more amplification


@pytest.mark.parametrize("command", ["epsilon", "calibrate"])
def test_a_grid_above_the_sweep_limit_is_refused_before_it_is_built(capsys, monkeypatch, command):
    """25 million points (5000 eps0 x 5000 n) exceed the sweep's grid limit: one line naming the axes and
    their sizes, before any combination is built (the command computed for a minute before)."""
    from jaxshuffle.sweeps import grid

    argv = {"epsilon": ["epsilon", "--randomizer", "grr", "--k", "10", "--eps0", "0.1..5:5000", "--delta", "1e-6"],
            "calibrate": ["calibrate", "--randomizer", "grr", "--k", "10", "--target", "0.1..5:5000",
                          "--delta", "1e-6"]}[command]
    assert cli.main([*argv, "--n", "1e3..1e6:5000"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"exceed the limit of {grid.MAX_GRID_POINTS:.0f}" in err, err
    assert "5000 (n) = 25000000 points" in err and "jaxshuffle sweep" in err, err
