"""A sweep's sample_rate axis (clients sampled per round): each point is amplify's (or, with a rounds axis,
composed_epsilon's) value at its sampling rate g, stored, resumed, and refused where no bound exists.

Light on purpose (2 cores): the single-round grids use k-ary RR at n <= 200 and the ``general``
randomizer (three-count pair) at n = 300; the rounds grid the ``general`` randomizer, whose sampled
rounds compose by the basic and advanced rules (no PLD build).
"""
from __future__ import annotations

import numpy as np
import pytest

from jaxshuffle import cli
from jaxshuffle import randomizers as R
from jaxshuffle import sweeps as sw
from jaxshuffle.accountant import amplify
from jaxshuffle.accountant.rounds import composed_epsilon
from jaxshuffle.sweeps import jobs as jobs_mod
from jaxshuffle.sweeps import sampled as sampled_mod
from jaxshuffle.sweeps.grids import make_grid

GRID = dict(randomizer="grr", k=3, eps0="1,2", n="60,200", sample_rate="0.3,1", delta="1e-3", quiet=True)
RTOL = 1e-6


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sampled") / "run"
    return sw.sweep(**GRID, out=out), out


@pytest.mark.slow
def test_sampled_points_are_amplifys_values(sampled_run):
    """Each point equals amplify(grr(eps0, 3), n, delta, sample_rate=g) called on the whole grid at once,
    within the search tolerance (both are certified brackets of width rtol; the sweep's batches differ, so
    their plans and last digits may); the labels (source, clone proof, has_lower) match exactly; g < 1 is
    more private than g = 1 at the same point; no two-count value where g < 1."""
    res, _ = sampled_run
    assert len(res) == 8 and res.complete
    assert list(res.keys())[:8] == ["index", "randomizer", "eps0", "k", "n", "sample_rate", "delta_rule", "delta"]
    rep = amplify(R.grr(np.asarray(res["eps0"]), 3), np.asarray(res["n"]), 1e-3,
                  sample_rate=np.asarray(res["sample_rate"]), rtol=RTOL)
    for i in range(len(res)):
        e0, n, g = float(res["eps0"][i]), float(res["n"][i]), float(res["sample_rate"][i])
        for key in ("upper", "lower"):
            want, got = float(getattr(rep, key)[i]), float(res[key][i])
            assert abs(got - want) <= 4 * RTOL * want, (key, e0, n, g, got, want)
        assert res["upper_source"][i] == sw.store.SOURCE_NAMES[int(rep.upper_source[i])]
        assert bool(res["has_lower"][i]) == bool(rep.has_lower[i]) and bool(res["certified"][i])
        assert res["lower"][i] <= res["upper"][i]
        if g < 1:
            assert res["clone_proof"][i] == "none" and np.isinf(res["worst_case"][i]) and np.isnan(res["paper"][i])
    for e0 in (1.0, 2.0):
        for n in (60.0, 200.0):
            sel = res.select(eps0=e0, n=n)
            by_g = dict(zip(sel["sample_rate"].tolist(), sel["upper"].tolist()))
            assert by_g[0.3] < by_g[1.0]


@pytest.mark.slow
def test_sampled_sweep_resumes_from_its_chunk_files(sampled_run, tmp_path, monkeypatch):
    """The same call again reads every chunk back (its report columns from the chunk's extra array) and
    computes nothing; the rows are identical, labels included."""
    res, out = sampled_run
    monkeypatch.setattr(sampled_mod, "evaluate_sampled", lambda *a, **k: pytest.fail("recomputed a finished chunk"))
    again = sw.sweep(**GRID, out=out)
    assert again.complete and again.meta["timing"]["chunks_run"] == 0
    for key in res.keys():
        a, b = np.asarray(res[key]), np.asarray(again[key])
        assert a.tolist() == b.tolist() or np.array_equal(a, b, equal_nan=True), key


def test_spec_without_the_axis_is_unchanged_and_the_axis_sits_after_n():
    spec = sw.grid.build_spec("general", "4,16", 1e-3, {"eps0": "0.5,2"})
    assert "sample_rate" not in spec and isinstance(make_grid(spec, {"lower": True, "upper_from": "best"}),
                                                    jobs_mod.SweepGrid)
    spec = sw.grid.build_spec("general", "4,16", 1e-3, {"eps0": "0.5,2"}, sample_rate="0.1,1")
    table, _, _ = sw.grid.expand(spec)
    assert table["sample_rate"].tolist() == [0.1, 1.0] * 4
    assert table["n"].tolist() == [4, 4, 16, 16] * 2
    grid = make_grid(spec, {"lower": True, "upper_from": "best"})
    assert isinstance(grid, sampled_mod.SampledGrid) and grid.n_jobs == 8
    # buckets never mix g = 1 with g < 1 (amplify would evaluate such a batch twice), nor bands of n
    for plan, ids, _ in grid.mechanism_buckets:
        rows = grid.job_rows(plan, ids)
        assert len(set((rows[:, -2] < 1).tolist())) == 1 and len(set(np.ceil(np.log2(rows[:, -3])).tolist())) == 1


@pytest.mark.slow
def test_rounds_and_sample_rate_axes_are_composed_epsilons():
    """With a rounds axis too, each point is composed_epsilon(..., sample_rate=g) called directly with the
    same T's and deltas (one call per (options, n, g)), bit for bit."""
    res = sw.sweep("general", eps0=1.0, n=300, sample_rate="0.2,1", rounds="1,8", delta="1e-6", discretization=1e-2,
                   quiet=True)
    assert len(res) == 4 and "sample_rate" in res.keys() and "lower" not in res.keys()
    for g in (0.2, 1.0):
        c = composed_epsilon(R.general(1.0), 300, [1, 8], [1e-6], discretization=1e-2, sample_rate=g)
        sel = res.select(sample_rate=g)
        np.testing.assert_array_equal(sel["upper"], c.upper[:, 0])
        assert sel["upper_source"].tolist() == c.upper_source[:, 0].tolist()
    assert res.select(sample_rate=0.2)["upper"][0] < res.select(sample_rate=1.0)["upper"][0]  # one round


@pytest.mark.slow
def test_three_count_pair_points_of_the_general_randomizer():
    """Any eps0-LDP randomizer (no mechanism): g < 1 points come from the three-count pair."""
    res = sw.sweep("general", eps0="1", n=300, sample_rate="0.1", delta="1e-6", quiet=True)
    rep = amplify(R.general(1.0), 300, 1e-6, sample_rate=0.1)
    assert res["upper_source"].tolist() == ["three-count"]
    assert abs(float(res["upper"][0]) - float(rep.upper)) <= 4e-6 * float(rep.upper)


def test_api_errors_name_the_parameter():
    with pytest.raises(ValueError, match=r"^sample_rate: must lie in \(0, 1\]"):
        sw.sweep("general", eps0=1, n=100, delta=1e-6, sample_rate="0,0.5", quiet=True)
    with pytest.raises(ValueError, match=r"^sample_rate: must lie in \(0, 1\]"):
        sw.sweep("general", eps0=1, n=100, delta=1e-6, sample_rate=1.5, quiet=True)
    with pytest.raises(ValueError, match=r"^sample_rate: clients sampled per round are certified for single-message"):
        sw.sweep("balcer-cheu", coin=0.5, blanket_per_user=3, n=100, delta=1e-6, sample_rate=0.5, quiet=True)
    with pytest.raises(ValueError, match=r"^upper_from: 'worst-case' has no bound with clients sampled"):
        sw.sweep("general", eps0=1, n=100, delta=1e-6, sample_rate=0.5, upper_from="worst-case", quiet=True)


@pytest.mark.parametrize("bad", ["0", "abc", "1.5", "", "0.5,-1"])
def test_bad_sample_rate_is_one_line_exit_2(bad, tmp_path, capsys):
    import jax

    jax.devices()
    argv = ["sweep", "--randomizer", "general", "--eps0", "1", "--n", "100", "--delta", "1e-6", "--sample-rate", bad,
            "--out", str(tmp_path / "x"), "--quiet", "--no-plot"]
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("jaxshuffle: error: --sample-rate: must lie in (0, 1]"), err
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_the_sweep_command_writes_the_sample_rate_column(tmp_path, capsys):
    out = tmp_path / "cli"
    assert cli.main(["sweep", "--randomizer", "general", "--eps0", "1", "--n", "300", "--delta", "1e-6",
                     "--sample-rate", "0.1,1", "--out", str(out), "--quiet", "--no-plot"]) == 0
    rows = sw.read_csv(out / "results.csv")
    assert rows["sample_rate"].tolist() == [0.1, 1.0]
    rep = amplify(R.general(1.0), 300, 1e-6, sample_rate=0.1)
    assert abs(float(rows["upper"][0]) - float(rep.upper)) <= 4 * RTOL * float(rep.upper)
