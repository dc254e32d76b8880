"""Grid sweeps: grid syntax, agreement with amplify, files, SIGKILL + resume, shards, 4 devices.

Grids here use n <= 16 (every window is the minimum, 16 counts) or a handful of points, so a
test compiles one or two small programs. Subprocess tests share a persistent compilation
cache (a temporary directory) through $JAXSHUFFLE_CACHE.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from jaxshuffle import sweeps as sw
from jaxshuffle.accountant import amplify
from jaxshuffle.cli import sweep as cli_sweep
from jaxshuffle.randomizers import CATALOG
from jaxshuffle.sweeps import grid as grid_mod
from jaxshuffle.sweeps import jobs as jobs_mod
from jaxshuffle.sweeps import schedule as schedule_mod

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ names


def test_exported_functions_and_modules_do_not_clash():
    """jaxshuffle.sweep/compare/sandwich are functions; their modules are sweeps/comparison/soundness."""
    import importlib
    import types

    import jaxshuffle as js

    for func, module in (("sweep", "sweeps"), ("compare", "comparison"), ("sandwich", "soundness")):
        mod = importlib.import_module(f"jaxshuffle.{module}")
        assert isinstance(mod, types.ModuleType) and not callable(mod)
        assert getattr(js, func) is getattr(mod, func) and isinstance(getattr(js, func), types.FunctionType)
        assert getattr(js, module) is mod


# ------------------------------------------------------------------------------ grid syntax


def test_parse_grid_forms():
    np.testing.assert_array_equal(sw.parse_grid("1,2,5"), [1, 2, 5])
    np.testing.assert_allclose(sw.parse_grid("0.5:4:8"), np.linspace(0.5, 4, 8))
    np.testing.assert_allclose(sw.parse_grid("1e3..1e6:4"), [1e3, 1e4, 1e5, 1e6])
    np.testing.assert_allclose(sw.parse_grid("0.1, 1:2:3,1e2..1e3:2"), [0.1, 1, 1.5, 2, 100, 1000])
    np.testing.assert_array_equal(sw.parse_grid("1e3..1e6:7", integer=True),
                                  np.round(np.geomspace(1e3, 1e6, 7)))
    np.testing.assert_array_equal(sw.parse_grid("1,1,2,1"), [1, 2])  # duplicates dropped, order kept
    np.testing.assert_array_equal(sw.parse_grid([3, 1]), [3, 1])
    np.testing.assert_array_equal(sw.parse_grid(2.0), [2.0])


@pytest.mark.parametrize("bad", ["", "1,,2", "a", "1:2", "1:2:0", "1:2:2.5", "0..10:3", "1..:3", "1..10"])
def test_parse_grid_errors(bad):
    with pytest.raises(ValueError, match="grid|number"):
        sw.parse_grid(bad)


def test_parse_delta_rules():
    assert sw.parse_delta("1e-6,0.01/n") == [1e-6, "0.01/n"]
    assert sw.parse_delta("1e-8..1e-6:3") == pytest.approx([1e-8, 1e-7, 1e-6])
    n = np.array([10.0, 1000.0])
    np.testing.assert_allclose(grid_mod.eval_rule("0.01/n", n), [1e-3, 1e-5])
    np.testing.assert_allclose(grid_mod.eval_rule("min(1e-4, 1/n**1.5)", n), [1e-4, 1000.0 ** -1.5])
    assert sw.parse_delta("min(1e-4, 1/n),1e-8") == ["min(1e-4, 1/n)", 1e-8]
    for bad in ("__import__('os').getcwd()", "n.real", "open('x')", "[n]", "lambda: 1"):
        with pytest.raises(ValueError, match="delta"):
            sw.parse_delta(bad)


def test_spec_errors():
    with pytest.raises(ValueError, match="randomizer: unknown"):
        grid_mod.build_spec("nope", 10, 0.1, {})
    with pytest.raises(ValueError, match="k: not an option"):
        grid_mod.build_spec("general", 10, 0.1, {"k": "3"})
    with pytest.raises(ValueError, match="n: required"):
        grid_mod.build_spec("general", None, 0.1, {"eps0": 1})
    with pytest.raises(ValueError, match="k: required option"):
        grid_mod.expand(grid_mod.build_spec("grr", 10, 0.1, {"eps0": 1}))
    with pytest.raises(ValueError, match="delta: must lie in"):
        grid_mod.expand(grid_mod.build_spec("general", "1,10", "2/n", {"eps0": 1}))
    with pytest.raises(ValueError, match="eps0"):  # catalog validation names the option
        jobs_mod.SweepGrid(grid_mod.build_spec("general", 10, 0.1, {"eps0": -1}), True)


def test_grid_order_and_defaults():
    spec = grid_mod.build_spec(["grr", "local-hash"], "2,4", "0.1,0.01/n", {"eps0": "1,2", "k": 3, "l": 4})
    table, groups, names = grid_mod.expand(spec)
    assert names == ["eps0", "k", "l", "collision"]
    assert [g.name for g in groups] == ["grr", "local-hash"]
    assert len(table["n"]) == 2 * 2 * 2 * 2
    # cartesian order: options (catalog order), then n, then delta rule
    assert table["eps0"][:4].tolist() == [1, 1, 1, 1] and table["n"][:4].tolist() == [2, 2, 4, 4]
    assert table["delta_rule"][:2].tolist() == ["0.1", "0.01/n"]
    assert table["delta"][:4].tolist() == [0.1, 0.005, 0.1, 0.0025]
    assert np.isnan(table["l"][:8]).all() and np.isnan(table["k"][8:]).all()
    assert (table["collision"][8:] == 0.0).all()  # catalog default


# ------------------------------------------------------------------------------ values


@pytest.mark.slow
def test_sweep_equals_amplify():
    """Per-point values are exactly amplify's two-count ones (upper, lower, paper, worst_case, statuses)."""
    res = sw.sweep("grr", k="3,10", eps0="0.5,3", n="2,12", delta="0.01/n,0.2", merge_buckets=False,
                   scaled_variant=True, upper_from="worst-case", quiet=True)
    assert len(res) == 16 and res.complete
    assert np.isinf(res["blanket"]).all()  # no mechanism searches under the two-count rules
    e = CATALOG["grr"]
    opts = {"eps0": res["eps0"], "k": res["k"]}
    rep = amplify(e.fn(**opts), res["n"], res["delta"], lower_params=e.lower(**opts), scaled_variant=True,
                  upper_from="worst-case")
    for key in ("upper", "lower", "paper", "worst_case"):
        np.testing.assert_array_equal(res[key], np.asarray(getattr(rep, key)), err_msg=key)
    assert res["status"].tolist() == [sw.STATUS_NAMES[s] for s in np.asarray(rep.status)]
    assert res["status_paper"].tolist() == [sw.STATUS_NAMES[s] for s in np.asarray(rep.status_paper)]
    assert res["upper_source"].tolist() == [sw.SOURCE_NAMES[s] for s in np.asarray(rep.upper_source)]
    np.testing.assert_array_equal(res["paper_certified"], np.asarray(rep.paper_certified))
    assert res["certified"].all() and res["has_lower"].all()
    assert np.all(res["lower"] <= res["upper"])
    assert (res["upper_source"] == "scaled").any()
    # default (as amplify's): no scaled pair, upper = worst-case pair unless delta >= beta
    plain = sw.sweep("grr", k="3,10", eps0="0.5,3", n="2,12", delta="0.01/n,0.2", merge_buckets=False,
                     upper_from="worst-case", quiet=True)
    np.testing.assert_array_equal(plain["upper"], np.where(plain["upper_source"] == "tv", 0.0, res["worst_case"]))
    assert not (plain["upper_source"] == "scaled").any()


KRR = dict(randomizer="grr", k="3,10", eps0="0.5,3", n="2,12", delta="0.01/n", merge_buckets=False, quiet=True)


def _amplify_per_n(res, upper_from):
    """amplify over the sweep's points, one call per n (the sweep's mechanism buckets are n bands)."""
    e = CATALOG["grr"]
    cols = {}
    for n in np.unique(res["n"]):
        sel = res["n"] == n
        opts = {"eps0": res["eps0"][sel], "k": res["k"][sel]}
        rep = amplify(e.fn(**opts), n, res["delta"][sel], lower_params=e.lower(**opts), upper_from=upper_from)
        for key, v in rep._asdict().items():
            cols.setdefault(key, np.zeros(len(res), np.asarray(v).dtype))[sel] = np.asarray(v)
    return cols


def _assert_same_as_amplify(res, rep):
    for key in ("upper", "lower", "blanket", "worst_case", "paper"):
        np.testing.assert_array_equal(res[key], rep[key], err_msg=key)
    for key, names in (("status", sw.STATUS_NAMES), ("status_lower", sw.STATUS_NAMES),
                       ("upper_source", sw.SOURCE_NAMES)):
        assert res[key].tolist() == [names[s] for s in rep[key]], key
    np.testing.assert_array_equal(res["has_lower"], rep["has_lower"])


@pytest.mark.slow
def test_krr_sweep_uses_amplify_rule_and_resumes(tmp_path):
    """k-RR: the default rule (smallest certified source: worst-case or blanket pair, exact-dataset lower) and
    upper_from="blanket" equal amplify pointwise; a run whose chunk files are partly gone (an interrupted
    sweep: each chunk file is complete or absent) and whose CSV is torn resumes to byte-identical files."""
    res = sw.sweep(**KRR, out=tmp_path / "ref")
    assert len(res) == 8 and res.complete
    _assert_same_as_amplify(res, _amplify_per_n(res, "best"))
    assert (res["upper_source"] == "blanket").any() and np.isfinite(res["blanket"]).all()
    assert np.all(res["upper"] <= res["worst_case"]) and np.all(res["lower"] <= res["upper"])
    only = sw.sweep(**KRR, upper_from="blanket")
    _assert_same_as_amplify(only, _amplify_per_n(only, "blanket"))

    manifest = json.loads((tmp_path / "ref" / "sweep.json").read_text())
    assert manifest["schema"] == sw.store.STORE_SCHEMA and manifest["settings"]["upper_from"] == "best"
    grid = jobs_mod.SweepGrid(manifest["spec"], True, False, "best")
    assert grid.n_jobs - len(grid.jobs) == 8 and len(grid.mechanism_buckets) == 2  # one per point, two n bands
    import shutil
    shutil.copytree(tmp_path / "ref", tmp_path / "cut")
    chunk_files = sorted((tmp_path / "cut" / "chunks").glob("c*.npz"))
    for p in chunk_files[1::2]:  # every other chunk lost, two-count and mechanism ones
        p.unlink()
    (tmp_path / "cut" / "results.npz").unlink()
    text = (tmp_path / "ref" / "results.csv").read_text()
    (tmp_path / "cut" / "results.csv").write_text(text[:len(text) // 2])
    again = sw.sweep(**KRR, out=tmp_path / "cut")
    assert again.complete
    for name in ("results.csv", "results.npz"):
        assert (tmp_path / "cut" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name


@pytest.mark.slow
def test_matrix_row_sweep_uses_amplify_rule():
    """A row that carries its matrix point by point (2-subsets of 4, docs/math.md 11.6): the sweep's
    mechanism searches give amplify's report at every point (blanket column finite, upper the smallest
    source); a 'blanket' sweep of Hadamard response with B = 2 (no matrix built) is refused up front."""
    res = sw.sweep("subset-selection", eps0="0.5,2", d=4, k=2, n=5, delta=0.05, merge_buckets=False, quiet=True)
    assert len(res) == 2 and res.complete and np.isfinite(res["blanket"]).all()
    e = CATALOG["subset-selection"]
    cols = {}
    for n in np.unique(res["n"]):
        sel = res["n"] == n
        opts = {"eps0": res["eps0"][sel], "d": res["d"][sel], "k": res["k"][sel]}
        rep = amplify(e.fn(**opts), n, res["delta"][sel], lower_params=e.lower(**opts))
        for key, v in rep._asdict().items():
            cols.setdefault(key, np.zeros(len(res), np.asarray(v).dtype))[sel] = np.asarray(v)
    _assert_same_as_amplify(res, cols)
    assert np.all(res["upper"] == np.minimum(res["worst_case"], res["blanket"]))
    with pytest.raises(ValueError, match="upper_from: 'blanket' needs randomizers that carry their mechanism at every"):
        sw.sweep("hadamard-response", eps0=1, K=16, s=4, B=2, n=3, delta=1e-3, upper_from="blanket", quiet=True)


@pytest.mark.slow
def test_upper_from_checked_and_old_store_refused(tmp_path):
    with pytest.raises(ValueError, match="upper_from: 'blanket' needs randomizers that carry"):
        sw.sweep("general", eps0=1, n=3, delta=1e-3, upper_from="blanket", quiet=True)
    with pytest.raises(ValueError, match="upper_from: must be one of"):
        sw.sweep("general", eps0=1, n=3, delta=1e-3, upper_from="smallest", quiet=True)
    sw.sweep("general", eps0=1, n=3, delta=1e-3, out=tmp_path, quiet=True)
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    del manifest["schema"]  # as written before mechanism searches existed
    (tmp_path / "sweep.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="store schema 1 .*cannot be resumed"):
        sw.sweep("general", eps0=1, n=3, delta=1e-3, out=tmp_path, quiet=True)
    assert len(sw.load(tmp_path)) == 1  # its results still load
    redone = sw.sweep("general", eps0=1, n=3, delta=1e-3, out=tmp_path, overwrite=True, quiet=True)
    assert redone.complete
    # schema 3 added the rounds axis only: a schema-2 directory (no rounds axis, the same files) is resumed
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    assert manifest["schema"] == sw.store.STORE_SCHEMA == 3
    manifest["schema"] = 2
    (tmp_path / "sweep.json").write_text(json.dumps(manifest))
    resumed = sw.sweep("general", eps0=1, n=3, delta=1e-3, out=tmp_path, quiet=True)
    assert resumed.complete and resumed.meta["timing"]["chunks_run"] == 0
    np.testing.assert_array_equal(resumed["upper"], redone["upper"])


def test_general_searches_the_certified_and_the_paper_pair():
    """For a general randomizer the certified pair is the standard clone and the paper's pair (the stronger
    clone, not proven for it: docs/math.md 3.1) is a second search per point, reported uncertified."""
    spec = grid_mod.build_spec("general", "4,16", 1e-3, {"eps0": "0.5,2"})
    grid = jobs_mod.SweepGrid(spec, True)
    assert len(grid.jobs) == 2 * grid.size == 8
    res = sw.sweep("general", eps0="0.5,2", n="4,16", delta=1e-3, chunk_size=4, quiet=True)
    assert (res["paper"] <= res["upper"]).all()
    np.testing.assert_array_equal(res["worst_case"], res["upper"])
    assert not res["paper_certified"].any() and not res["has_lower"].any()
    assert (res["lower"] == 0).all() and (res["status"] == "converged").all()


def test_merge_windows_dp():
    L = np.array([16] * 100 + [32] * 100 + [4096] * 3)
    sym = np.ones(L.size, bool)
    out = schedule_mod._merge_windows(L, sym, cost=2e-5)
    assert set(out[:200].tolist()) == {32}  # merging 16 into 32 is cheaper than a compile
    assert set(out[200:].tolist()) == {4096}
    out = schedule_mod._merge_windows(L, sym, cost=1.0)  # compute dear: no merging
    np.testing.assert_array_equal(out, L)


# ------------------------------------------------------------------------------ files


# Every general-randomizer grid below has n <= 16 and chunk_size 4: one compiled program serves them all.
SMALL = dict(randomizer="general", eps0="0.5,1,2", n="3,9", delta="1e-3", chunk_size=8)  # 4 points a chunk


def test_files_csv_npz_json(tmp_path):
    out = tmp_path / "run"
    res = sw.sweep(**SMALL, out=out, quiet=True)
    assert sorted(p.name for p in out.iterdir()) == ["chunks", "results.csv", "results.json", "results.npz",
                                                      "sweep.json"]
    csv_cols = sw.read_csv(out / "results.csv")
    for key in ("index", "randomizer", "eps0", "n", "delta_rule", "delta", "lower", "upper", "paper",
                "certified", "status"):
        assert key in csv_cols
    assert csv_cols["index"].tolist() == list(range(6))
    with np.load(out / "results.npz", allow_pickle=False) as z:
        for key in res.keys():
            np.testing.assert_array_equal(z[key], res[key], err_msg=key)
            if csv_cols[key].dtype.kind == "f":  # CSV floats round-trip exactly
                np.testing.assert_array_equal(csv_cols[key], res[key], err_msg=key)
            else:
                assert csv_cols[key].tolist() == res[key].tolist()
    meta = json.loads((out / "results.json").read_text())
    assert meta["version"] and meta["jax"] and meta["float64"] is True and meta["complete"] is True
    assert meta["devices"][0]["platform"] == "cpu"
    assert set(meta["methods"]) >= {"upper", "lower", "paper"}
    assert meta["tolerances"]["rtol"] == 1e-6
    assert meta["grid"]["n"] == [3.0, 9.0] and meta["points"] == 6
    loaded = sw.load(out)
    np.testing.assert_array_equal(loaded["upper"], res["upper"])
    # rerun: nothing left to do, same numbers
    again = sw.sweep(**SMALL, out=out, quiet=True)
    assert again.meta["timing"]["chunks_run"] == 0
    np.testing.assert_array_equal(again["upper"], res["upper"])
    with pytest.raises(ValueError, match="different sweep"):
        sw.sweep(**{**SMALL, "n": "3"}, out=out, quiet=True)


def test_cli_parsers(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="jaxshuffle")
    sub = parser.add_subparsers(dest="command")
    cli_sweep.add_sweep_parser(sub)
    cli_sweep.add_plot_parser(sub)
    out = tmp_path / "cli"
    args = parser.parse_args(["sweep", "--randomizer", "general", "--eps0", "1,2", "--n", "3,9", "--delta", "1e-3",
                              "--out", str(out), "--quiet", "--no-plot", "--chunk-size", "4"])
    assert args.func(args) == 0
    cols = sw.read_csv(out / "results.csv")
    assert {"eps0", "n", "delta", "lower", "upper"} <= set(cols)
    assert len(cols["n"]) == 4
    args = parser.parse_args(["sweep", "merge", str(out), "--out", str(tmp_path / "m"), "--quiet"])
    assert args.func(args) == 0
    np.testing.assert_array_equal(sw.read_csv(tmp_path / "m" / "results.csv")["upper"], cols["upper"])
    help_text = sub.choices["sweep"].format_help()
    assert "1e3..1e6:7" in help_text and "--shard" in help_text and "merge" in help_text
    args = parser.parse_args(["sweep", "--n", "3"])
    with pytest.raises(ValueError, match="delta: required"):
        args.func(args)


def test_shards_and_merge(tmp_path):
    full = sw.sweep(**SMALL, out=tmp_path / "full", quiet=True)
    part0 = sw.sweep(**SMALL, out=tmp_path / "s0", shard="0/2", quiet=True)
    assert not part0.complete and len(part0) == 4 and (tmp_path / "s0" / "shard-0-of-2.npz").exists()
    with pytest.raises(ValueError, match="missing"):
        sw.merge([tmp_path / "s0"], tmp_path / "m0", quiet=True)
    partial = sw.merge([tmp_path / "s0"], tmp_path / "m0", allow_partial=True, quiet=True)
    assert not partial.complete and partial["index"].tolist() == [0, 1, 2, 3]
    sw.sweep(**SMALL, out=tmp_path / "s1", shard=(1, 2), quiet=True)
    merged = sw.merge([tmp_path / "s0" / "shard-0-of-2.npz", tmp_path / "s1"], tmp_path / "m", quiet=True)
    assert merged.complete and (tmp_path / "m" / "results.npz").exists()
    for key in full.keys():
        np.testing.assert_array_equal(merged[key], full[key], err_msg=key)
    sw.sweep(**{**SMALL, "eps0": 1}, out=tmp_path / "other", quiet=True)
    with pytest.raises(ValueError, match="different sweep"):
        sw.merge([tmp_path / "s0", tmp_path / "other"], tmp_path / "bad", quiet=True)


# ------------------------------------------------------------------------------ SIGKILL + resume


def _env(cache: Path, **extra) -> dict:
    env = dict(os.environ)
    env.update(JAXSHUFFLE_CACHE=str(cache), JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1", **extra)
    env.pop("XLA_FLAGS", None)
    return env


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("xla-cache")


KILL_ARGS = ["sweep", "--randomizer", "general", "--eps0", "0.5:4:24", "--n", "12", "--delta", "1e-3",
             "--chunk-size", "8", "--no-plot"]


def _run_cli(args, env, timeout=240):
    return subprocess.run([sys.executable, "-m", "jaxshuffle.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_sigkill_then_resume_loses_nothing(tmp_path, cache_dir):
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    done = _run_cli([*KILL_ARGS, "--out", str(ref)], _env(cache_dir))
    assert done.returncode == 0, done.stderr
    n_chunks = 6  # 24 points, two searches each (the certified and the paper's pair), 4 points per chunk

    proc = subprocess.Popen([sys.executable, "-m", "jaxshuffle.cli", *KILL_ARGS, "--out", str(killed)],
                            env=_env(cache_dir, JAXSHUFFLE_SWEEP_CHUNK_SLEEP="1.0"), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            chunk_dir = killed / "chunks"
            if chunk_dir.is_dir() and len(list(chunk_dir.glob("c*.npz"))) >= 2:
                break
            assert proc.poll() is None, "sweep ended before it could be killed"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    finished = sorted(p.name for p in (killed / "chunks").glob("c*.npz"))
    assert 2 <= len(finished) < n_chunks
    assert not (killed / "results.npz").exists()
    partial = sw.read_csv(killed / "results.csv")  # rows appended for finished chunks
    assert 4 <= len(partial["index"]) < 24

    # What a kill in the middle of a write can leave behind: a temporary chunk file, a torn
    # CSV line, and (a write that bypassed the rename, e.g. a damaged disk) a corrupt chunk file.
    missing = next(f"c{i:06d}.npz" for i in range(n_chunks) if f"c{i:06d}.npz" not in finished)
    (killed / "chunks" / f".{missing}.tmp-12345").write_bytes(b"PK\x03\x04 half a zip")
    (killed / "chunks" / missing).write_bytes(b"PK\x03\x04 truncated")
    with open(killed / "results.csv", "a") as f:
        f.write("17,general,2.9")

    again = _run_cli([*KILL_ARGS, "--out", str(killed)], _env(cache_dir))
    assert again.returncode == 0, again.stderr
    assert f"{len(finished)} of this sweep's {n_chunks} already done" in again.stderr
    got, want = sw.read_csv(killed / "results.csv"), sw.read_csv(ref / "results.csv")
    assert got["index"].tolist() == list(range(24))  # every point exactly once
    for key in want:
        if want[key].dtype.kind == "f":
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
        else:
            assert got[key].tolist() == want[key].tolist(), key
    assert (killed / "results.csv").read_bytes() == (ref / "results.csv").read_bytes()
    assert not list((killed / "chunks").glob(".*"))  # leftovers cleaned up
    assert json.loads((killed / "results.json").read_text())["complete"] is True


# ------------------------------------------------------------------------------ 4 devices


FOUR_DEVICES = textwrap.dedent("""
    import os, sys, json
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax
    import numpy as np
    from jaxshuffle import sweeps as sw
    assert len(jax.devices()) == 4, jax.devices()
    kw = dict(randomizer="grr", k=3, eps0="0.5,1,2,4", n="2,7,12", delta="0.01/n", lower=False,
              upper_from="worst-case", quiet=True)
    four = sw.sweep(**kw, devices=4, chunk_size=8, out=sys.argv[1])
    one = sw.sweep(**kw, devices=1, chunk_size=8)
    same = {k: bool(np.array_equal(four[k], one[k])) for k in one.keys()}
    meta = json.load(open(os.path.join(sys.argv[1], "results.json")))
    print(json.dumps({"same": same, "ndev": len(meta["devices"]), "points": len(one),
                      "programs": meta["timing"]["programs_compiled"]}))
""")


@pytest.mark.slow
def test_four_cpu_devices_equal_single_device(tmp_path, cache_dir):
    env = _env(cache_dir)
    proc = subprocess.run([sys.executable, "-c", FOUR_DEVICES, str(tmp_path / "four")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["ndev"] == 4 and report["points"] == 12
    assert all(report["same"].values()), report["same"]
    assert report["programs"] == 1  # one window bucket, one program (sharded over the mesh)


def test_default_grid_is_small():
    """`jaxshuffle sweep` with no axes: ~200 points in at most 2 programs (under a minute on 2 cores)."""
    g = sw.default_grid()
    spec = grid_mod.build_spec(g.pop("randomizer"), g.pop("n"), g.pop("delta"), g)
    grid = jobs_mod.SweepGrid(spec, True)
    buckets = schedule_mod.plan_jobs(grid.jobs, True, "cpu")
    assert 100 <= grid.size <= 300 and len(grid.jobs) == 2 * grid.size  # the certified and the paper's pair
    assert len(buckets) <= 2 and max(p.window for p, _, _ in buckets) <= 4096
