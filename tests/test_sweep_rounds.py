"""A sweep's rounds axis (issue 17): composed epsilon over T rounds per grid point, stored, resumed and plotted.

Light on purpose (the whole suite runs on 2 cores): composed_epsilon compiles its programs per
(randomizer options, n) shapes, so the sweeps here use the ``general`` randomizer (no blanket engine)
at n = 300 with a coarse loss grid, and two eps0 groups whose programs share their shapes (one
compile). One sweep (module fixture) serves the value, file and plot tests; the resume and shard
tests reuse its programs. The k-RR blanket pair's wiring is checked on a stand-in composed_epsilon
(its values are test_compose's and test_cli's business: a real blanket PLD costs minutes here).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from jaxshuffle import cli
from jaxshuffle import sweeps as sw
from jaxshuffle.accountant import rounds as rounds_mod
from jaxshuffle.randomizers import CATALOG
from jaxshuffle.sweeps import jobs as jobs_mod
from jaxshuffle.sweeps.grids import make_grid

# 2 groups (eps0) x 3 T x 2 delta rules: two composed_epsilon calls in all
GRID = dict(randomizer="general", eps0="1,1.01", n=300, rounds="1,4,16", delta="1e-6,0.01/n", discretization=1e-2,
            quiet=True)
EPS0 = (1.0, 1.01)


@pytest.fixture(scope="module")
def rounds_run(tmp_path_factory):
    """The GRID sweep written to a directory, with the composed_epsilon calls it made."""
    calls = []
    real = rounds_mod.composed_epsilon

    def counting(randomizer, n, rounds, delta, **kw):
        calls.append((float(n), np.asarray(rounds).tolist(), np.asarray(delta).tolist(), kw))
        return real(randomizer, n, rounds, delta, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(rounds_mod, "composed_epsilon", counting)
    try:
        out = tmp_path_factory.mktemp("rounds") / "run"
        res = sw.sweep(**GRID, out=out)
    finally:
        mp.undo()
    return res, out, calls


@pytest.mark.slow
def test_rounds_sweep_values_are_composed_epsilons(rounds_run):
    """Every point holds composed_epsilon(randomizer, n, T's, deltas) called directly, one call per (options, n)."""
    res, out, calls = rounds_run
    assert len(res) == 12 and res.complete
    # one PLD build (one composed_epsilon call) per (randomizer options, n), covering all its T and deltas
    assert [c[0] for c in calls] == [300.0, 300.0]
    assert all(c[1] == [1, 4, 16] and len(c[2]) == 2 for c in calls)
    assert all(c[3] == {"discretization": 1e-2, "blanket_points": None} for c in calls)
    assert list(res.keys())[:7] == ["index", "randomizer", "eps0", "n", "rounds", "delta_rule", "delta"]
    assert "lower" not in res and "paper" not in res  # no single-round searches
    for eps0 in EPS0:
        sel = res.select(eps0=eps0)
        deltas = np.unique(sel["delta"])
        assert deltas.tolist() == sorted([1e-6, 0.01 / 300])
        params = CATALOG["general"].fn(eps0=eps0)
        c = rounds_mod.composed_epsilon(params, 300.0, np.unique(sel["rounds"]), deltas, discretization=1e-2)
        i = np.searchsorted(c.rounds, sel["rounds"].astype(np.int64))
        j = np.searchsorted(c.delta, sel["delta"])
        for col, want in (("upper", c.upper), ("pld", c.pld), ("pld_lower", c.lower), ("blanket_pld", c.blanket_pld),
                          ("basic", c.basic), ("advanced", c.advanced)):
            np.testing.assert_array_equal(sel[col], want[i, j], err_msg=col)
        assert sel["upper_source"].tolist() == c.upper_source[i, j].tolist()
        assert (sel["discretization"] == c.discretization).all()
        for col in ("p", "beta", "q"):
            np.testing.assert_array_equal(sel[col], np.asarray(getattr(params, col)), err_msg=col)
    # the certified value is the smallest candidate; the PLD wins at 16 rounds, far below basic composition
    assert np.all(res["upper"] <= np.minimum(res["basic"], res["advanced"]))
    assert np.all(res["upper"] <= res["pld"]) and np.isinf(res["blanket_pld"]).all()
    t16 = res["rounds"] == 16
    assert (res["upper_source"][t16] == "PLD").all() and np.all(res["upper"][t16] < 0.5 * res["basic"][t16])
    assert res["certified"].all()
    # files: CSV and npz hold the same columns; the manifest the rounds axis and settings
    loaded = sw.load(out / "results.csv")
    for key in res.keys():
        if res[key].dtype.kind == "f":
            np.testing.assert_array_equal(loaded[key], res[key], err_msg=key)
        else:
            assert loaded[key].tolist() == res[key].tolist(), key
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["schema"] == 3 and manifest["spec"]["rounds"] == [1, 4, 16]
    assert manifest["settings"]["rounds"] == {"blanket_points": None, "discretization": 1e-2}
    chunks = sorted((out / "chunks").glob("c*.npz"))
    assert len(chunks) == 2
    with np.load(chunks[0]) as z:
        assert z["extra"].shape == (6, len(sw.store.ROUNDS_EXTRA))


def test_krr_rounds_wiring_on_a_stand_in(monkeypatch):
    """k-RR through the rounds axis: blanket_points reaches composed_epsilon, and every cell (the blanket pair's
    column and a 'blanket PLD' source included) lands on its point. composed_epsilon is replaced by a stand-in
    whose cells are distinct functions of (T, delta), so a misplaced cell shows."""
    seen = []

    def stand_in(randomizer, n, rounds, delta, *, discretization=None, blanket_points=None):
        seen.append((float(np.asarray(randomizer.mechanism.k)), float(n), blanket_points, discretization))
        T, d = np.meshgrid(np.asarray(rounds, np.float64), np.asarray(delta, np.float64), indexing="ij")
        cand = np.stack([T, T / 2, T / 3, T / 4]) * (1 + d)  # basic, advanced, pld, blanket_pld
        pick = (T.astype(np.int64) + (d > 1e-7)) % 4
        up = np.take_along_axis(cand, pick[None], 0)[0]
        return rounds_mod.ComposedEpsilon(np.asarray(rounds, np.int64), np.asarray(delta, np.float64), up,
                                          np.asarray(rounds_mod.SOURCES)[pick], cand[2], cand[3], cand[2] - 1e-3,
                                          cand[0], cand[1], 0.125)

    monkeypatch.setattr(rounds_mod, "composed_epsilon", stand_in)
    res = sw.sweep("grr", k="3,10", eps0=1, n=50, rounds="1..8:4", delta="1e-8,1e-6", blanket_points=16, quiet=True)
    assert sorted(seen) == [(3.0, 50.0, 16, None), (10.0, 50.0, 16, None)]
    assert len(res) == 16
    T, d = res["rounds"], res["delta"]
    cand = {"basic": T * (1 + d), "advanced": T / 2 * (1 + d), "PLD": T / 3 * (1 + d), "blanket PLD": T / 4 * (1 + d)}
    np.testing.assert_array_equal(res["blanket_pld"], cand["blanket PLD"])
    np.testing.assert_array_equal(res["pld"], cand["PLD"])
    np.testing.assert_array_equal(res["basic"], cand["basic"])
    np.testing.assert_array_equal(res["advanced"], cand["advanced"])
    np.testing.assert_array_equal(res["upper"], [cand[s][i] for i, s in enumerate(res["upper_source"])])
    pick = (T.astype(np.int64) + (d > 1e-7)) % 4
    assert res["upper_source"].tolist() == [rounds_mod.SOURCES[i] for i in pick]
    assert set(res["upper_source"].tolist()) == set(rounds_mod.SOURCES)
    assert (res["discretization"] == 0.125).all()


@pytest.mark.slow
def test_rounds_sweep_resumes_keeping_finished_rows(tmp_path, monkeypatch):
    """Interrupted after its first (options, n) chunk: the finished rows stay in results.csv, and the rerun
    computes only the other chunk and ends with the same rows."""
    out = tmp_path / "run"
    real = jobs_mod.evaluate_rounds
    calls = []

    def interrupting(plan, rows, size):
        calls.append(rows[0, 0])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(plan, rows, size)

    monkeypatch.setattr(jobs_mod, "evaluate_rounds", interrupting)
    with pytest.raises(sw.run.SweepInterrupted, match="6 of 12 points saved"):
        sw.sweep(**GRID, out=out)
    saved = sw.read_csv(out / "results.csv")
    assert len(saved["index"]) == 6 and saved["eps0"].tolist() == [1.0] * 6
    assert not (out / "results.npz").exists()

    monkeypatch.setattr(jobs_mod, "evaluate_rounds", real)
    again = sw.sweep(**GRID, out=out)
    assert again.complete and again.meta["timing"]["chunks_run"] == 1
    rows = np.isin(again["index"], saved["index"])
    for key in ("upper", "pld", "pld_lower", "basic", "advanced", "rounds", "delta"):
        np.testing.assert_array_equal(again[key][rows], saved[key], err_msg=key)
    assert again["upper_source"][rows].tolist() == saved["upper_source"].tolist()
    assert sw.read_csv(out / "results.csv")["index"].tolist() == list(range(12))
    assert np.isfinite(again["upper"]).all() and (out / "results.npz").exists()


def test_rounds_shards_merge_and_executor_give_the_same_rows(rounds_run, tmp_path):
    """--shard i/N then merge, and chunks sent to an executor: the composed columns travel through the shard
    files and the workers' results unchanged."""
    from concurrent.futures import ThreadPoolExecutor

    res, _, _ = rounds_run
    with ThreadPoolExecutor(max_workers=1) as pool:
        remote = sw.sweep(**GRID, executor=pool, out=tmp_path / "pool")
    assert remote.complete and remote.meta["executor"]["failed"] == []
    for key in res.keys():
        assert remote[key].tolist() == res[key].tolist(), key
    for i in (0, 1):
        part = sw.sweep(**GRID, shard=f"{i}/2", out=tmp_path / f"s{i}")
        assert not part.complete and len(part) == 6
    merged = sw.merge([tmp_path / "s0", tmp_path / "s1" / "shard-1-of-2.npz"], tmp_path / "m", quiet=True)
    assert merged.complete and list(merged.keys()) == list(res.keys())
    for key in res.keys():
        if res[key].dtype.kind == "f":
            np.testing.assert_array_equal(merged[key], res[key], err_msg=key)
        else:
            assert merged[key].tolist() == res[key].tolist(), key


def test_store_schema_refused_with_a_clear_error(rounds_run, tmp_path):
    """A rounds directory under a schema this jaxshuffle does not resume is refused with a clear error, and its
    results still load (test_sweep's old-store test: a schema-2 directory, without rounds, is resumed)."""
    import shutil

    _, out, _ = rounds_run
    copy = tmp_path / "old"
    shutil.copytree(out, copy)
    manifest = json.loads((copy / "sweep.json").read_text())
    manifest["schema"] = 1
    (copy / "sweep.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"store schema 1 .*resumes schemas 2, 3.*cannot be resumed"):
        sw.sweep(**GRID, out=copy)
    assert len(sw.load(copy)) == 12
    redone = sw.sweep(**GRID, out=copy, overwrite=True)
    assert redone.complete and json.loads((copy / "sweep.json").read_text())["schema"] == 3


def test_rounds_plot_one_line_per_delta_and_group(rounds_run, tmp_path):
    """jaxshuffle plot on a rounds sweep: one panel per (options, n), one certified line per delta (the stored
    upper, its source named), next to basic (dotted) and advanced (dashed)."""
    pytest.importorskip("matplotlib")
    import argparse

    from jaxshuffle.cli import sweep as cli_sweep

    res, out, _ = rounds_run
    from jaxshuffle import plot as jplot

    fig = jplot.summary_figure(res, tmp_path / "f.png")
    axes = fig.axes
    assert len(axes) == 2
    for ax, eps0 in zip(axes, EPS0):
        assert f"eps0 = {eps0:g}, n = 300" in ax.get_title()
        certified = [ln for ln in ax.get_lines() if ln.get_label().startswith("certified")]
        assert len(certified) == 2  # one per delta
        assert sum(ln.get_linestyle() == ":" for ln in ax.get_lines()) == 2
        assert sum(ln.get_linestyle() == "--" for ln in ax.get_lines()) == 2
        sel = res.select(eps0=eps0)
        drawn = sorted(tuple(ln.get_ydata()) for ln in certified)
        want = sorted(tuple(sel["upper"][(sel["delta"] == d)][np.argsort(sel["rounds"][sel["delta"] == d])])
                      for d in np.unique(sel["delta"]))
        assert drawn == want
        assert all("PLD" in ln.get_label() for ln in certified)
    parser = argparse.ArgumentParser()
    cli_sweep.add_plot_parser(parser.add_subparsers())
    args = parser.parse_args(["plot", str(out), "-o", str(tmp_path / "cli.png")])
    assert args.func(args) == 0 and (tmp_path / "cli.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="kind: a sweep with a rounds axis"):
        jplot.summary_figure(res, kind="surface")


@pytest.mark.parametrize("bad", ["0", "-3", "abc", "0.4", "inf", "", "1,0", "1..0:3"])
def test_bad_rounds_is_one_line_exit_2(bad, tmp_path, capsys):
    import jax

    jax.devices()  # backends up: the sweep command leaves XLA_FLAGS alone in this process
    argv = ["sweep", "--randomizer", "general", "--eps0", "1", "--n", "100", "--delta", "1e-6", "--rounds", bad,
            "--out", str(tmp_path / "x"), "--quiet", "--no-plot"]
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("jaxshuffle: error: --rounds: must be integers >= 1"), err
    assert not (tmp_path / "x").exists()


def test_rounds_api_errors_name_the_parameter():
    with pytest.raises(ValueError, match=r"rounds: must be integers >= 1"):
        sw.sweep("general", eps0=1, n=100, delta=1e-6, rounds=[0, 5], quiet=True)
    with pytest.raises(ValueError, match=r"rounds: .* above the largest supported"):
        sw.sweep("general", eps0=1, n=100, delta=1e-6, rounds=1e300, quiet=True)
    with pytest.raises(ValueError, match=r"n: a sweep with a rounds axis needs n >= 2"):
        sw.sweep("general", eps0=1, n="1,100", delta=1e-6, rounds=3, quiet=True)
    with pytest.raises(ValueError, match=r"upper_from: .* must be 'best'"):
        sw.sweep("general", eps0=1, n=100, delta=1e-6, rounds=3, upper_from="worst-case", quiet=True)
    with pytest.raises(ValueError, match=r"blanket_points: applies to a sweep with a rounds axis only"):
        sw.sweep("general", eps0=1, n=100, delta=1e-6, blanket_points=16, quiet=True)
    with pytest.raises(ValueError, match=r"blanket_points: must be 0 .* or an integer in \[2, 65536\]"):
        sw.sweep("grr", k=3, eps0=1, n=100, delta=1e-6, rounds=3, blanket_points=1, quiet=True)
    with pytest.raises(ValueError, match=r"discretization: must be a finite number > 0"):
        sw.sweep("general", eps0=1, n=100, delta=1e-6, rounds=3, discretization=-1.0, quiet=True)


def test_sweep_without_rounds_keeps_its_spec_and_columns():
    """No rounds axis: no 'rounds' key in the spec (the fingerprint of an existing sweep is unchanged)."""
    spec = sw.grid.build_spec("general", "4,16", 1e-3, {"eps0": "0.5,2"})
    assert "rounds" not in spec
    grid = make_grid(spec, {"lower": True, "upper_from": "best"})
    assert isinstance(grid, jobs_mod.SweepGrid) and grid.result_order == sw.store.RESULT_ORDER
    assert "rounds" not in grid.table
    with_rounds = sw.grid.build_spec("general", "4,16", 1e-3, {"eps0": "0.5,2"}, rounds="1..100:3")
    assert with_rounds["rounds"] == [1, 10, 100]
    table, _, _ = sw.grid.expand(with_rounds)
    # rounds varies between n and delta: each (eps0, n) block holds its T values consecutively
    assert table["rounds"].tolist() == [1, 10, 100] * 4
    assert table["n"].tolist() == [4] * 3 + [16] * 3 + [4] * 3 + [16] * 3
    rgrid = make_grid(with_rounds, {"rounds": {}})
    assert len(rgrid.mechanism_buckets) == 4 and rgrid.n_jobs == 12
    plans = {b[0] for b in rgrid.mechanism_buckets}
    assert plans == {jobs_mod.RoundsPlan("general", ("eps0",))}
