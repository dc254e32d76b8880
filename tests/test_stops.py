"""Clean stops of a sweep: SIGINT/SIGTERM, the lock on the output directory, torn CSV rows, progress.

The subprocess tests run `jaxshuffle sweep` on 12 points of the general randomizer at n = 12
(one small program, 3 chunks of 4 points), slowed by JAXSHUFFLE_SWEEP_CHUNK_SLEEP so that a
signal arrives between chunks, and without the persistent compilation cache.
"""
from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from small_sweep import SMALL
from stopping import assert_same_results

from jaxshuffle import cli
from jaxshuffle import sweeps as sw
from jaxshuffle.sweeps import execution as execution_mod
from jaxshuffle.sweeps import progress as progress_mod
from jaxshuffle.sweeps.run import SweepInterrupted, SweepLocked

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["sweep", "--randomizer", "general", "--eps0", "0.5:4:12", "--n", "12", "--delta", "1e-3",
        "--chunk-size", "8", "--no-plot"]
POINTS = 12


def _env(**extra) -> dict:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env.pop("JAXSHUFFLE_SWEEP_CHUNK_SLEEP", None)
    env.update(JAXSHUFFLE_CACHE="off", JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1", **extra)
    return env


def _start(out: Path, sleep: float, *extra: str, stderr=subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "jaxshuffle.cli", *ARGS, "--out", str(out), *extra],
                            env=_env(JAXSHUFFLE_SWEEP_CHUNK_SLEEP=str(sleep)), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=stderr, text=True)


def _wait_for(cond, proc: subprocess.Popen, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"sweep ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _read_csv_strict(path: Path) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a torn row would be a failure here
        return sw.read_csv(path)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """An uninterrupted run of the same sweep."""
    out = tmp_path_factory.mktemp("stops") / "ref"
    done = subprocess.run([sys.executable, "-m", "jaxshuffle.cli", *ARGS, "--out", str(out)], env=_env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert len(_read_csv_strict(out / "results.csv")["index"]) == POINTS
    return out


# ------------------------------------------------------------------------------ SIGINT / SIGTERM


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGINT", pytest.param("SIGTERM", marks=pytest.mark.slow)])
def test_signal_stops_cleanly_and_resume_is_identical(tmp_path, reference, signame):
    signum = getattr(signal, signame)
    out = tmp_path / "run"
    proc = _start(out, 1.5)
    try:
        _wait_for(lambda: len(list((out / "chunks").glob("c*.npz"))) >= 1, proc, "the first chunk")
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    # stderr is not a terminal: no progress bar, only the summary line and the one line of the stop
    assert len(lines) == 2 and lines[0].startswith("[sweep] 12 points"), err
    m = re.fullmatch(rf"jaxshuffle: interrupted \({signame}\): (\d+) of 12 points saved in (.+); "
                     r"rerun the same command to resume: jaxshuffle sweep .*--out (\S+)", lines[1])
    assert m, lines[1]
    saved = int(m.group(1))
    assert Path(m.group(2)) == out / "results.csv" and Path(m.group(3)) == out
    chunks = sorted((out / "chunks").glob("c*.npz"))
    assert 1 <= len(chunks) < 3 and saved == 4 * len(chunks)

    # the rows finished so far are in results.csv (no torn row), with the reference's values
    part, ref = _read_csv_strict(out / "results.csv"), _read_csv_strict(reference / "results.csv")
    assert len(part["index"]) == saved
    rows = part["index"]
    for key in ref:
        if ref[key].dtype.kind == "f":
            np.testing.assert_array_equal(part[key], ref[key][rows], err_msg=key)
        else:
            assert part[key].tolist() == ref[key][rows].tolist(), key
    assert not (out / "results.npz").exists()
    assert not list(out.glob(".*")) and not list((out / "chunks").glob(".*"))  # no temporary files left

    again = subprocess.run([sys.executable, "-m", "jaxshuffle.cli", *ARGS, "--out", str(out)], env=_env(), cwd=ROOT,
                           capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stderr
    assert f"({len(chunks)} of this sweep's 3 already done)" in again.stderr
    assert_same_results(out, reference)


def _count_runs(monkeypatch, fail_on: int | None = None, signal_in_write: int | None = None):
    """Wrap Runner.run: raise KeyboardInterrupt on run number ``fail_on``; send SIGINT to this process
    from inside the chunk-file write after run number ``signal_in_write``."""
    calls = {"run": 0}
    real_run, real_write = execution_mod.Runner.run, execution_mod.atomic_write

    def run(self, *a, **k):
        calls["run"] += 1
        if calls["run"] == fail_on:
            raise KeyboardInterrupt
        return real_run(self, *a, **k)

    def write(path, data):
        if calls["run"] == signal_in_write and path.parent.name == "chunks":
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs at once: the write must still complete
            time.sleep(0.05)
        return real_write(path, data)

    monkeypatch.setattr(execution_mod.Runner, "run", run)
    monkeypatch.setattr(execution_mod, "atomic_write", write)  # the chunk files: SweepRun.record
    return calls




def test_api_keyboard_interrupt_leaves_a_consistent_store(tmp_path, monkeypatch, default_sigint):
    out = tmp_path / "api"
    _count_runs(monkeypatch, fail_on=2)
    with pytest.raises(KeyboardInterrupt) as info:
        sw.sweep(**SMALL, out=out)
    exc = info.value
    assert isinstance(exc, SweepInterrupted) and exc.signum == signal.SIGINT and exc.exit_status == 130
    assert exc.saved == f"4 of 12 points saved in {out / 'results.csv'}"
    assert "call sweep() again with the same arguments to resume" in str(exc)
    assert _read_csv_strict(out / "results.csv")["index"].tolist() == [0, 1, 2, 3]
    assert [p.name for p in (out / "chunks").glob("c*.npz")] == ["c000000.npz"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    monkeypatch.undo()
    resumed = sw.sweep(**SMALL, out=out)  # the lock was released: no error
    assert resumed.meta["timing"]["chunks_run"] == 2
    fresh = sw.sweep(**SMALL)
    for key in fresh.keys():
        np.testing.assert_array_equal(resumed[key], fresh[key], err_msg=key)


def test_signal_during_a_write_waits_for_the_write(tmp_path, monkeypatch, default_sigint):
    """SIGINT arriving while chunk 2 is written: chunk 2 and its CSV rows are saved, then the sweep stops."""
    out = tmp_path / "defer"
    _count_runs(monkeypatch, signal_in_write=2)
    with pytest.raises(SweepInterrupted) as info:
        sw.sweep(**SMALL, out=out)
    assert info.value.saved.startswith("8 of 12 points saved")
    assert sorted(p.name for p in (out / "chunks").glob("c*.npz")) == ["c000000.npz", "c000001.npz"]
    assert _read_csv_strict(out / "results.csv")["index"].tolist() == list(range(8))


def test_cli_main_keyboard_interrupt_is_one_line(monkeypatch, capsys):
    def boom(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_cmd_randomizers", boom)
    assert cli.main(["randomizers"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "jaxshuffle: interrupted (SIGINT)\n" and captured.out == ""


# ------------------------------------------------------------------------------ the lock


@pytest.mark.slow
def test_second_cli_writer_is_refused_or_waits(tmp_path, reference):
    """A second `jaxshuffle sweep` into the same --out stops with one line (exit 2); with --wait it waits
    for the lock and then finishes the sweep (here after the first was stopped with Ctrl-C)."""
    out = tmp_path / "locked"
    first = _start(out, 60.0)  # one chunk, then a long sleep (it is interrupted below)
    procs = [first]
    w_log = open(tmp_path / "waiting.err", "w")
    try:
        _wait_for(lambda: (out / "sweep.json").exists(), first, "the manifest")  # written under the lock
        refused = subprocess.Popen([sys.executable, "-m", "jaxshuffle.cli", *ARGS, "--out", str(out)], env=_env(),
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        waiting = _start(out, 0.0, "--wait", stderr=w_log)
        procs += [refused, waiting]
        r_out, r_err = refused.communicate(timeout=120)
        assert refused.returncode == 2, r_err
        lock = out / "chunks" / "sweep.lock"
        assert r_err == (f"jaxshuffle: error: --out {out}: another sweep is writing there (lock file {lock}); "
                         "wait for it or pass --wait\n")
        assert r_out == ""
        _wait_for(lambda: "waiting for the other sweep writing to" in (tmp_path / "waiting.err").read_text(),
                  waiting, "the waiting message")
        assert first.poll() is None and waiting.poll() is None
        _wait_for(lambda: list((out / "chunks").glob("c*.npz")), first, "the first chunk")
        first.send_signal(signal.SIGINT)
        _, f_err = first.communicate(timeout=60)
        assert first.returncode == 130, f_err
        saved = len(list((out / "chunks").glob("c*.npz")))
        w_out, _ = waiting.communicate(timeout=180)
        w_err = (tmp_path / "waiting.err").read_text()
        assert waiting.returncode == 0, w_err
        assert f"({saved} of this sweep's 3 already done)" in w_err  # it started after the first stopped
        assert "Traceback" not in r_err + f_err + w_err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        w_log.close()
    assert (out / "results.csv").read_bytes() == (reference / "results.csv").read_bytes()


class _HeldLock:
    """A FileLock held by another thread (as another writer would hold it) until ``release()``."""

    def __init__(self, path: Path):
        from filelock import FileLock

        self.acquired, self.go = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold, args=(FileLock(str(path)),), daemon=True)
        self.thread.start()
        assert self.acquired.wait(30)

    def _hold(self, lock):
        with lock:
            self.acquired.set()
            self.go.wait(60)

    def release(self, after: float = 0.0):
        threading.Timer(after, self.go.set).start()


def test_api_lock_refuses_then_waits(tmp_path):
    out = tmp_path / "api-lock"
    (out / "chunks").mkdir(parents=True)
    held = _HeldLock(out / "chunks" / "sweep.lock")
    try:
        with pytest.raises(SweepLocked, match="another sweep is writing there .*wait=True") as info:
            sw.sweep(**SMALL, out=out)
        assert isinstance(info.value, ValueError) and info.value.lock_path == out / "chunks" / "sweep.lock"
        assert not (out / "sweep.json").exists()  # refused before touching the store
        held.release(after=1.0)
        t0 = time.monotonic()
        res = sw.sweep(**SMALL, out=out, wait=True)
        assert time.monotonic() - t0 >= 0.9 and res.complete and len(res) == POINTS
    finally:
        held.release()
        held.thread.join(30)

    # shards take their own lock: shard 0/2 is not blocked by a held whole-sweep lock
    out2 = tmp_path / "shared"
    (out2 / "chunks").mkdir(parents=True)
    other = _HeldLock(out2 / "chunks" / "sweep.lock")
    try:
        part = sw.sweep(**SMALL, out=out2, shard="0/2")
        assert not part.complete and (out2 / "shard-0-of-2.npz").exists()
        with pytest.raises(SweepLocked):  # ... while the whole sweep is
            sw.sweep(**SMALL, out=out2)
    finally:
        other.release()
        other.thread.join(30)


# ------------------------------------------------------------------------------ torn rows, bad files


def test_torn_last_row_warned_and_repaired_by_resume(tmp_path, capsys):
    out = tmp_path / "torn"
    sw.sweep(**SMALL, out=out)
    good = (out / "results.csv").read_bytes()
    lines = good.decode().splitlines(keepends=True)
    (out / "results.csv").write_text("".join(lines[:4]) + lines[4][:17])  # header, 3 rows, a torn 4th row
    (out / "results.npz").unlink()  # load() then reads the CSV
    with pytest.warns(RuntimeWarning, match=rf"{re.escape(str(out / 'results.csv'))}: line 5 \(the last row\) is torn"):
        res = sw.load(out)
    assert res["index"].tolist() == [0, 1, 2]
    with pytest.warns(RuntimeWarning, match="line 5"):
        assert sw.read_csv(out / "results.csv")["index"].tolist() == [0, 1, 2]

    # the command line: one warning line, then the figure
    pytest.importorskip("matplotlib")
    png = tmp_path / "torn.png"
    assert cli.main(["plot", str(out / "results.csv"), "-o", str(png)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"jaxshuffle: warning: {out / 'results.csv'}: line 5 (the last row) is torn")
    assert err.count("\n") == 1 and png.stat().st_size > 0

    again = sw.sweep(**{**SMALL, "quiet": False}, out=out)
    assert again.meta["timing"]["chunks_run"] == 0
    assert (out / "results.csv").read_bytes() == good
    assert f"{out / 'results.csv'}: repaired the torn last row (line 5)" in capsys.readouterr().err
    assert len(_read_csv_strict(out / "results.csv")["index"]) == POINTS


def test_damaged_row_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "mid.csv"
    path.write_text("index,n,upper\n0,1,0.5\n1,2\n2,3,0.7\n")
    with pytest.raises(ValueError, match=r"mid\.csv, line 3: 2 fields, the header has 3"):
        sw.read_csv(path)


@pytest.mark.parametrize("content, why", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary content"),
    (b"\xff\xfe\xfdnot utf-8,x\n", "binary content, not UTF-8"),
    (b"", "empty file"),
    (b"index,randomizer,eps0,n,delta_rule,delta,lower,upper\n", "header but no result rows"),
    (b"a,b\n1,2\n", "no 'upper' column"),
])
def test_unusable_files_name_the_file(tmp_path, capsys, content, why):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(f"results: {path}") + ".*" + re.escape(why)):
        sw.load(path)
    pytest.importorskip("matplotlib")
    assert cli.main(["plot", str(path), "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"jaxshuffle: error: results: {path}") and why in err and err.count("\n") == 1
    assert not (tmp_path / "x.png").exists()


# ------------------------------------------------------------------------------ progress


class _FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_shows_compiling_and_times_evaluation_only():
    tty = _FakeTTY()
    p = progress_mod.Progress(False, total_points=40, done_points=0, programs=2, file=tty)
    p.start_chunk(True)
    assert "compiling program 1/2" in tty.getvalue()
    p.update(4, work=100.0, dt=30.0, compiled=True, work_left=300.0, programs_left=1)
    assert p.rate_eta(300.0, 1) == (None, None)  # no evaluation time yet: no rate, no ETA
    assert "? points/s, ETA ?" in tty.getvalue()
    p.start_chunk(False)
    p.update(8, work=100.0, dt=2.0, compiled=False, work_left=200.0, programs_left=1)
    rate, eta = p.rate_eta(200.0, 0)
    assert rate == pytest.approx(4.0)  # 8 points in 2 s of evaluation (the 30 s compile chunk excluded)
    assert eta == pytest.approx(200.0 * 2.0 / 100.0)  # evaluation time per unit of work only
    assert p.rate_eta(200.0, 1)[1] == pytest.approx(4.0 + 30.0)  # plus one compile per program still to build
    p.start_chunk(True)
    assert "compiling program 2/2" in tty.getvalue()
    p.close()
    assert "12/40 points" in tty.getvalue()


def test_progress_is_silent_without_a_terminal_or_when_quiet():
    for quiet, stream in ((False, io.StringIO()), (True, _FakeTTY())):
        p = progress_mod.Progress(quiet, total_points=10, done_points=0, programs=1, file=stream)
        p.start_chunk(True)
        p.update(5, work=1.0, dt=1.0, compiled=True, work_left=1.0, programs_left=0)
        p.close()
        assert p.bar is None and stream.getvalue() == ""


# ------------------------------------------------------------------------------ Ctrl-C while starting

_SLOW_IMPORT = """
import sys, time
import jaxshuffle_launcher

class SlowImport:  # holds the import of jaxshuffle.cli, as a slow start of JAX would
    def find_spec(self, name, path=None, target=None):
        if name == "jaxshuffle.cli":
            print("importing", flush=True)
            time.sleep(60)
        return None

sys.meta_path.insert(0, SlowImport())
sys.argv[1:] = ["info"]
sys.exit(jaxshuffle_launcher.main())
"""


def test_ctrl_c_while_the_console_script_imports_prints_one_line():
    """The console script (pyproject: jaxshuffle_launcher:main) stops cleanly during its imports."""
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_IMPORT], env=_env(), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "importing\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert err == "jaxshuffle: interrupted (SIGINT) while starting\n"


def test_console_script_runs_the_cli():
    launch = "import sys, jaxshuffle_launcher; sys.exit(jaxshuffle_launcher.main())"
    argv = ["epsilon", "--randomizer", "general", "--eps0", "-1", "--n", "10", "--delta", "1e-6"]
    done = subprocess.run([sys.executable, "-c", launch, *argv], env=_env(), cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("jaxshuffle: error: eps0")
