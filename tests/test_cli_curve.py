"""``jaxshuffle compose --curve``: the privacy curve of T rounds as CSV, drawn beside it.

Two small computed runs (k-RR without the blanket pair, then ``general`` written over the first run's
files, which --curve wrote), shared by the tests; the refusals fail before anything is computed.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json

import numpy as np
import pytest

from jaxshuffle import cli
from jaxshuffle.accountant.compose import compose_delta
from jaxshuffle.accountant.rounds import curve_round
from jaxshuffle.cli.compose import CURVE_COLUMNS
from jaxshuffle.randomizers import CATALOG

GRR = ["--randomizer", "grr", "--eps0", "1", "--k", "4", "--n", "1000", "--blanket-points", "0"]
GENERAL = ["--randomizer", "general", "--eps0", "1", "--n", "1000"]


def _main(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def _read(path) -> list[dict]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == CURVE_COLUMNS
        return [{"n": float(r["n"]), "rounds": int(r["rounds"]), "eps": float(r["eps"]), "delta": float(r["delta"]),
                 "source": r["source"]} for r in reader]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{name: (json rows, curve rows, argv)}: grr then general, both to the same --curve file."""
    folder = tmp_path_factory.mktemp("curve")
    table = folder / "curve.csv"
    out = {}
    for name, argv in (("grr", GRR + ["--rounds", "5", "--delta", "1e-6,1e-3", "--curve-points", "16"]),
                       ("general", GENERAL + ["--rounds", "2,5", "--delta", "1e-6"])):
        code, text, err = _main(["compose", *argv, "--curve", str(table), "--json"])
        assert code == 0, err
        out[name] = (json.loads(text), _read(table), argv)
    out["png"] = table.with_suffix(".png").read_bytes()
    return out


def _pair(argv):
    opt = dict(zip(argv[::2], argv[1::2]))
    entry = CATALOG[opt["--randomizer"]]
    params = entry.fn(**{a.name: float(opt[f"--{a.name}"]) for a in entry.args if f"--{a.name}" in opt})
    rounds = [int(t) for t in opt["--rounds"].split(",")]
    bp = int(opt["--blanket-points"]) if "--blanket-points" in opt else None
    return curve_round(params, float(opt["--n"]), rounds, blanket_points=bp)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["grr", "general"])
def test_curve_is_the_pairs_certified_delta(runs, name):
    rows, curve, argv = runs[name]
    pair = _pair(argv)
    assert {r["source"] for r in curve} == {pair.source}
    for T in sorted({r["rounds"] for r in rows}):
        mine = [r for r in curve if r["rounds"] == T]
        eps = np.array([r["eps"] for r in mine])
        delta = np.array([r["delta"] for r in mine])
        assert eps[0] == 0.0 and np.all(np.diff(eps) > 0) and np.all(np.diff(delta) <= 0)
        assert all(r["n"] == 1000 for r in mine)
        np.testing.assert_array_equal(delta, compose_delta([(pair, T)], eps))  # the written values, exactly
        for row in (r for r in rows if r["rounds"] == T):
            # the pair composed is the one the table reports as its PLD source (no blanket pair here)
            at = row["pld"] if row["blanket_pld"] is None else row["blanket_pld"]
            assert at <= eps[-1] / 1.2 and float(compose_delta([(pair, T)], at)) <= row["delta"]
            assert delta[eps == at].size == 1 and delta[eps == at][0] <= row["delta"]


@pytest.mark.slow
def test_curve_replaces_its_own_files_only(runs, tmp_path):
    assert runs["png"][:8] == b"\x89PNG\r\n\x1a\n" and len(runs["png"]) > 10_000  # general's run replaced grr's
    argv = ["compose", *GRR, "--rounds", "5", "--delta", "1e-6"]
    for foreign in ("notes.csv", "notes.png"):
        (tmp_path / foreign).write_text("mine\n")
        code, out, err = _main([*argv, "--curve", str(tmp_path / "notes.csv")])
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert f"curve: {'the figure beside it, ' if foreign.endswith('png') else ''}{tmp_path / foreign} exists " \
               "and jaxshuffle did not write it" in err
        assert (tmp_path / foreign).read_text() == "mine\n"
        (tmp_path / foreign).unlink()


@pytest.mark.parametrize("extra,pattern", [
    (["--curve-points", "1", "--curve", "c.csv"], "curve-points: must be an integer in [2, 10000], got '1'"),
    (["--curve-points", "abc", "--curve", "c.csv"], "curve-points: must be an integer in [2, 10000], got 'abc'"),
    (["--curve-points", "2.5", "--curve", "c.csv"], "curve-points: must be an integer in [2, 10000], got '2.5'"),
    (["--curve-points", "8"], "curve-points: needs --curve CSV"),
    (["--curve", "/no/such/folder/c.csv"], "curve: the folder /no/such/folder"),
    (["--curve", "."], "curve: . is a directory"),
    (["--curve", "c.png"], "curve: c.png names a figure"),
    (["--curve", "c.csv", "--plot", "c.png"], "plot: c.png is where --curve writes"),
])
def test_curve_bad_input_is_one_line(extra, pattern, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _main(["compose", *GRR, "--rounds", "5", "--delta", "1e-6", *extra])
    assert code == 2 and out == "" and pattern in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_curve_round_picks_the_pair_composed_epsilon_composes(monkeypatch):
    """k-RR: the blanket pair's PLD under composed_epsilon's default rule (n <= BLANKET_PLD_MAX_N) or a
    count, on the worst-case pair's grid; the worst-case pair with 0 points or for general."""
    from jaxshuffle.accountant import blanket_pld
    from jaxshuffle.randomizers import general, grr

    built = []

    def stub(eps0, k, n, *, discretization, points, sample_rate=1.0):
        assert sample_rate == 1.0
        built.append((eps0, k, n, discretization, points))
        return "blanket"

    monkeypatch.setattr(blanket_pld, "blanket_round", stub)
    assert curve_round(grr(1.0, 4), 1000, [5]) == "blanket"
    assert built[0][:3] == (1.0, 4.0, 1000) and built[0][4] == blanket_pld.DEFAULT_POINTS
    assert curve_round(grr(1.0, 4), 1000, [5], blanket_points=64) == "blanket" and built[1][4] == 64
    worst = curve_round(grr(1.0, 4), 1000, [5], blanket_points=0)
    assert worst.source.endswith("clone") and built[0][3] == worst.upper_forward.discretization
    assert curve_round(general(1.0), 1000, [5]).source.endswith("clone") and len(built) == 2


def test_default_rule_takes_fewer_profile_points_above_large_n_and_none_above_the_cap(monkeypatch):
    """default_blanket_points: 512 up to 1e5, at most 128 up to BLANKET_PLD_MAX_N (1e6), then 0; a
    sampled round (no other PLD) at every n; a smaller count given is never raised. The round built
    by composed_epsilon's rule takes exactly those points."""
    from jaxshuffle.accountant import blanket_pld
    from jaxshuffle.randomizers import grr

    rule = blanket_pld.default_blanket_points
    n = np.array([2.0, 1e5, 1e5 + 1, 1e6, 1e6 + 1, 1e8])
    np.testing.assert_array_equal(rule(n), [512, 512, 128, 128, 0, 0])
    np.testing.assert_array_equal(rule(n, 0.5), [512, 512, 128, 128, 128, 128])
    np.testing.assert_array_equal(rule(n, 1.0, 64), [64, 64, 64, 64, 0, 0])
    assert rule(n).dtype == np.int64 and rule(3e5).shape == ()

    built = []
    monkeypatch.setattr(blanket_pld, "blanket_round",
                        lambda eps0, k, n, *, discretization, points, sample_rate=1.0: built.append((n, points)))
    for m in (1e4, 5e5, 2e6):
        blanket_pld.blanket_round_where_built(grr(1.0, 4), m, 1e-4, None)
    assert built == [(1e4, 512), (5e5, 128)]
