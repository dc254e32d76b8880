"""Sweeps on an executor (issue 20): a Dask LocalCluster (2 worker processes on loopback), Dask's
``get_executor()``, a ProcessPoolExecutor; lost workers, chunks failing twice, driver stops and resumes.

Every run is checked against a local run of the same tiny grid (12 points of the general
randomizer at n = 12, 3 chunks of 4 points, one program): ``results.csv`` byte-identical.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from jaxshuffle import sweeps as sw  # noqa: E402
from jaxshuffle.sweeps import distributed as dist_mod  # noqa: E402
from jaxshuffle.sweeps.run import SweepInterrupted  # noqa: E402

SMALL = dict(randomizer="general", eps0="0.5:4:12", n="12", delta="1e-3", chunk_size=4, quiet=True)
LONGER = dict(SMALL, eps0="0.5:4:24")  # 12 chunks (two searches per point): room to kill a worker or stop the driver


def _local(out: Path, grid: dict) -> bytes:
    sw.sweep(**grid, devices=1, out=out)
    return (out / "results.csv").read_bytes()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("dist-ref")
    return {"small": _local(root / "small", SMALL), "longer": _local(root / "longer", LONGER)}


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:  # as the CLI's: sweep must not need a default
        yield c



@pytest.mark.slow
def test_dask_client_is_byte_identical_to_local(tmp_path, client, reference):
    res = sw.sweep(**SMALL, out=tmp_path / "dask", executor=client)
    assert (tmp_path / "dask" / "results.csv").read_bytes() == reference["small"]
    # 12 points, two searches each (the standard clone certifies, the paper's pair differs), chunks of 4
    assert res.complete and res.meta["timing"]["chunks_run"] == 6
    ex = res.meta["executor"]
    assert ex["failed"] == [] and sum(w["chunks"] for w in ex["workers"].values()) == 6
    assert all(w["programs_compiled"] <= 1 for w in ex["workers"].values())  # one program per worker at most
    assert set(ex["workers"]) <= set(client.scheduler_info()["workers"])
    again = sw.sweep(**SMALL, out=tmp_path / "dask", executor=client)  # finished: nothing to run
    assert again.meta["timing"]["chunks_run"] == 0


@pytest.mark.slow
def test_get_executor_and_process_pool_are_byte_identical(tmp_path, client, reference):
    res = sw.sweep(**SMALL, out=tmp_path / "exec", executor=client.get_executor())
    assert (tmp_path / "exec" / "results.csv").read_bytes() == reference["small"]
    assert res.meta["executor"]["kind"].startswith("ClientExecutor of Dask scheduler")  # sized by the cluster
    with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as pool:
        res = sw.sweep(**SMALL, out=tmp_path / "pool", executor=pool)
    assert (tmp_path / "pool" / "results.csv").read_bytes() == reference["small"]
    assert len(res.meta["executor"]["workers"]) <= 2


def test_bad_executor_names_the_parameter():
    with pytest.raises(ValueError, match="executor: must be a dask.distributed.Client or a concurrent"):
        sw.sweep(**SMALL, executor=object())


@pytest.mark.slow
def test_chunk_failing_twice_is_reported_and_the_rest_finishes(tmp_path, monkeypatch, reference):
    """In-process threads, so the worker function can be patched: the chunk holding job 0 always fails."""
    real = dist_mod.run_chunk
    calls = {"bad": 0}

    def flaky(plan, jobs, c_lo, size, rtol):
        if np.array_equal(jobs[0], first_job):
            calls["bad"] += 1
            raise RuntimeError("worker exploded")
        return real(plan, jobs, c_lo, size, rtol)

    from jaxshuffle.sweeps.grid import build_spec
    from jaxshuffle.sweeps.jobs import SweepGrid

    first_job = SweepGrid(build_spec("general", "12", "1e-3", {"eps0": "0.5:4:12"}), True, False).jobs[0]
    monkeypatch.setattr(dist_mod, "run_chunk", flaky)
    out = tmp_path / "flaky"
    with ThreadPoolExecutor(2) as pool, pytest.warns(RuntimeWarning, match=r"chunk \d+ failed twice \(RuntimeError: "
                                                     r"worker exploded; RuntimeError: worker exploded\)"):
        res = sw.sweep(**SMALL, out=out, executor=pool)
    assert calls["bad"] == 2 and not res.complete
    failed = res.meta["executor"]["failed"]
    assert len(failed) == 1 and failed[0]["points"]
    assert set(res["index"].tolist()).isdisjoint(failed[0]["points"])
    assert len(res) + len(failed[0]["points"]) == 12
    monkeypatch.undo()  # the same call again computes only the missing points
    with ThreadPoolExecutor(2) as pool:
        again = sw.sweep(**SMALL, out=out, executor=pool)
    assert again.complete and again.meta["timing"]["chunks_run"] == 1
    assert (out / "results.csv").read_bytes() == reference["small"]


@pytest.mark.slow
def test_killed_worker_is_retried_and_rows_are_identical(tmp_path, client, reference):
    """SIGKILL one worker process while it runs a chunk: Dask reruns its chunks elsewhere (the nanny restarts it)."""
    client.run(os.environ.__setitem__, "JAXSHUFFLE_SWEEP_WORKER_SLEEP", "0.5")
    pids = client.run(os.getpid)
    out = tmp_path / "killed"
    killed = []

    def killer():
        deadline = time.monotonic() + 120
        while not list((out / "chunks").glob("c*.npz")) and time.monotonic() < deadline:
            time.sleep(0.02)
        victim = sorted(pids.values())[0]
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)

    t = threading.Thread(target=killer)
    t.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no chunk may be reported failed
            res = sw.sweep(**LONGER, out=out, executor=client)
    finally:
        t.join()
        client.wait_for_workers(2, timeout=120)  # the nanny restarts the killed worker (without the variable)
        client.run(os.environ.pop, "JAXSHUFFLE_SWEEP_WORKER_SLEEP", None, on_error="ignore")
    assert killed and killed[0] not in client.run(os.getpid).values()  # the worker really died
    assert res.complete and res.meta["executor"]["failed"] == []
    assert (out / "results.csv").read_bytes() == reference["longer"]


def _interrupt_after_first_chunk(out: Path) -> threading.Thread:
    def send():
        deadline = time.monotonic() + 120
        while not list((out / "chunks").glob("c*.npz")) and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=send)
    t.start()
    return t


@pytest.mark.slow
@pytest.mark.parametrize("first, then", [("dask", "local"), ("local", "dask")])
def test_driver_stopped_then_resumed_is_identical(tmp_path, client, reference, monkeypatch, default_sigint,
                                                  first, then):
    """Ctrl-C in the driver after its first chunk file; the same call (on the cluster or here) resumes."""
    out = tmp_path / "stopped"
    where = {"dask": dict(executor=client), "local": dict(devices=1)}
    monkeypatch.setenv("JAXSHUFFLE_SWEEP_CHUNK_SLEEP", "0.3")  # the driver pauses after each stored chunk
    t = _interrupt_after_first_chunk(out)
    try:
        with pytest.raises(SweepInterrupted) as info:
            sw.sweep(**LONGER, out=out, **where[first])
    finally:
        t.join()
    assert "points saved in" in info.value.saved
    done = len(list((out / "chunks").glob("c*.npz")))
    assert 1 <= done < 6
    monkeypatch.delenv("JAXSHUFFLE_SWEEP_CHUNK_SLEEP")
    res = sw.sweep(**LONGER, out=out, **where[then])
    assert res.complete and res.meta["timing"]["chunks_run"] == 12 - done
    assert (out / "results.csv").read_bytes() == reference["longer"]


@pytest.mark.slow
def test_cli_scheduler_is_byte_identical(tmp_path, client, reference, capsys):
    from jaxshuffle import cli

    args = ["sweep", "--randomizer", "general", "--eps0", "0.5:4:12", "--n", "12", "--delta", "1e-3",
            "--chunk-size", "4", "--no-plot"]
    assert cli.main([*args, "--out", str(tmp_path / "cli"), "--scheduler", client.scheduler.address]) == 0
    assert (tmp_path / "cli" / "results.csv").read_bytes() == reference["small"]
    err = capsys.readouterr().err
    assert "Dask scheduler" in err and "programs compiled per worker" in err


@pytest.mark.parametrize("extra, message", [
    (["--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "1"],
     "--scheduler tcp://127.0.0.1:1: cannot reach the Dask scheduler within 1 s"),
    (["--scheduler", "bogus::"], "--scheduler bogus::: not a reachable scheduler address"),
    (["--scheduler-file", "/nonexistent/scheduler.json"], "--scheduler-file /nonexistent/scheduler.json: no such file"),
    (["--scheduler", "tcp://127.0.0.1:1", "--scheduler-file", "x"], "give --scheduler or --scheduler-file, not both"),
])
def test_cli_scheduler_errors_are_one_line(tmp_path, capsys, extra, message):
    from jaxshuffle import cli

    t = time.monotonic()
    status = cli.main(["sweep", "--randomizer", "general", "--eps0", "1", "--n", "12", "--delta", "1e-3",
                       "--out", str(tmp_path / "x"), *extra])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and message in err, err
    assert time.monotonic() - t < 30


@pytest.mark.parametrize("content, message", [
    ("garbage{", "not a scheduler file written by 'dask scheduler --scheduler-file' (JSONDecodeError"),
    ('["tcp://127.0.0.1:1"]', "(a JSON object with an 'address' string)"),
    ('{"address": "bogus::"}', "not a reachable scheduler address"),
])
def test_cli_malformed_scheduler_file_is_one_line_and_nothing_after(tmp_path, content, message):
    """A scheduler file that is not dask's JSON object: one line naming the option and the file, exit 2,
    and no traceback afterwards (a half-made Client used to print one from its destructor at exit)."""
    import subprocess
    import sys

    path = tmp_path / "scheduler.json"
    path.write_text(content)
    out = subprocess.run([sys.executable, "-m", "jaxshuffle.cli", "sweep", "--randomizer", "general", "--eps0", "1",
                          "--n", "12", "--delta", "1e-3", "--out", str(tmp_path / "x"), "--scheduler-file", str(path),
                          "--connect-timeout", "2"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"jaxshuffle: error: --scheduler-file {path}: ") and message in out.stderr


def test_cli_without_dask_says_how_to_install(tmp_path, capsys, monkeypatch):
    import sys

    from jaxshuffle import cli

    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    status = cli.main(["sweep", "--randomizer", "general", "--eps0", "1", "--n", "12", "--delta", "1e-3",
                       "--out", str(tmp_path / "x"), "--scheduler", "tcp://127.0.0.1:8786"])
    err = capsys.readouterr().err
    assert status == 2 and "needs dask.distributed (pip install 'jaxshuffle[distributed]')" in err


class _FakeTTY:
    def __init__(self):
        import io

        self.buf = io.StringIO()

    def write(self, s):
        return self.buf.write(s)

    def flush(self):
        pass

    def isatty(self):
        return True


def test_progress_bar_is_fed_by_completed_futures(monkeypatch):
    import sys

    tty = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    with ThreadPoolExecutor(2) as pool:
        sw.sweep(**{**SMALL, "quiet": False}, executor=pool)
    text = tty.buf.getvalue()
    assert "ThreadPoolExecutor (2 workers)" in text and "12/12 points" in text
    assert "programs compiled per worker" in text


def test_shard_on_an_executor_merges_to_the_local_run(tmp_path, reference):
    with ThreadPoolExecutor(2) as pool:
        sw.sweep(**SMALL, shard="0/2", out=tmp_path / "run-0", executor=pool)
    sw.sweep(**SMALL, shard="1/2", out=tmp_path / "run-1", devices=1)
    sw.merge([tmp_path / "run-0", tmp_path / "run-1"], tmp_path / "merged", quiet=True)
    assert (tmp_path / "merged" / "results.csv").read_bytes() == reference["small"]


def test_broken_process_pool_stops_with_finished_chunks_saved(tmp_path, reference):
    pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
    from concurrent.futures.process import BrokenProcessPool

    with pytest.raises(BrokenProcessPool):  # the pool's process dies: concurrent.futures breaks the pool for good
        pool.submit(os._exit, 1).result(timeout=120)
    with pytest.raises(RuntimeError, match="executor: takes no more chunks .*run the same sweep again"):
        sw.sweep(**SMALL, out=tmp_path / "broken", executor=pool)
    pool.shutdown()
    sw.sweep(**SMALL, out=tmp_path / "broken", devices=1)  # resumes locally
    assert (tmp_path / "broken" / "results.csv").read_bytes() == reference["small"]


def test_worker_without_float64_stops_the_sweep(tmp_path, monkeypatch):
    def worker_in_32_bit_mode(*args):
        from jaxshuffle._config import require_x64

        with jax.enable_x64(False):
            require_x64()  # what run_chunk checks first in a worker

    import jax

    monkeypatch.setattr(dist_mod, "run_chunk", worker_in_32_bit_mode)
    with ThreadPoolExecutor(1) as pool, pytest.raises(RuntimeError, match="executor: a worker cannot run jaxshuffle: "
                                                                          "jaxshuffle needs float64"):
        sw.sweep(**SMALL, out=tmp_path / "x32", executor=pool)


def test_cli_exit_status_says_when_chunks_failed(tmp_path, capsys):
    from types import SimpleNamespace

    from jaxshuffle.cli.sweep import _finish_sweep

    args = SimpleNamespace(no_plot=True, plot=None, shard=None)
    meta = {"executor": {"failed": [{"chunk": 1, "points": [4, 5, 6, 7], "error": "KilledWorker"}]}}
    res = type("Result", (), {"complete": False, "meta": meta, "__len__": lambda self: 8})()  # 8 of 12 points
    assert _finish_sweep(args, res, tmp_path) == 1
    err = capsys.readouterr().err
    assert "1 chunk(s) failed twice; their 4 points are missing" in err and "rerun the same command" in err


def test_chunks_of_one_program_go_to_the_worker_that_holds_it():
    """ChunkPool._pick: a worker already holding the program while it has room, else the least loaded one."""
    pool = dist_mod.ChunkPool.__new__(dist_mod.ChunkPool)
    pool.cap, pool.load, pool.plan_workers = 2, {}, {}
    pool._known = (float("inf"), {"w1": 1, "w2": 1})  # two single-threaded workers, never refreshed

    def place(key):
        addr = pool._pick(key)
        pool.load[addr] = pool.load.get(addr, 0) + 1
        return addr

    assert [place("A"), place("A")] == ["w1", "w1"]  # the second chunk of A queues behind the first on w1
    assert place("A") == "w2"  # w1 is full (2 per thread): A is compiled on w2 too
    assert place("B") in ("w1", "w2") and pool.plan_workers["A"] == {"w1", "w2"}
    pool.load = {"w1": 0, "w2": 0}
    pool.plan_workers = {"C": {"w2"}}
    assert place("C") == "w2" and place("C") == "w2" and place("D") == "w1"
