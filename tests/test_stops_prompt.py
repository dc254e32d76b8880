"""Stops within seconds: Ctrl-C and SIGTERM act at once, even inside a long XLA call, and keep every finished chunk.

A chunk's computation runs in a worker thread while the main thread waits in short steps
(jaxshuffle.sweeps.stops.run_interruptible), so a signal no longer waits for the running chunk's
XLA calls: on 2 CPU cores a SIGINT 10-30 s into the first blanket chunk of :data:`KRR` took 98-112 s
to act before (one was lost inside a gc callback and the sweep ran on to its end), and compose and
tune died of a segmentation fault after their message. The subprocess tests time the stop from the
signal to the process's exit: measured 0.05-0.2 s on 2 cores; the bound :data:`BOUND_S` is 5 s,
generous for a loaded machine yet far below the XLA calls' own length. They run without the
compilation cache, so every chunk compiles its programs (long XLA calls).
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
from stopping import assert_same_results, catches_signal

from jaxshuffle import sweeps as sw
from jaxshuffle.sweeps import execution as execution_mod
from jaxshuffle.sweeps import progress as progress_mod
from jaxshuffle.sweeps import stops as stops_mod
from jaxshuffle.sweeps.run import SweepInterrupted

ROOT = Path(__file__).resolve().parents[1]

#: Seconds from the signal to the process's exit that a test accepts (measured: 0.05-0.2 s on 2 cores).
BOUND_S = 5.0

#: k-ary RR, 12 points: two two-count chunks (~7 s each on 2 cores), then three chunks of 4 blanket-engine
#: searches (60-110 s each); the points finish with the blanket chunks.
KRR = ["sweep", "--randomizer", "grr", "--k", "10", "--eps0", "0.5..8:4", "--n", "1e5..1e7:3", "--delta", "1e-6",
       "--no-plot"]
#: The same grid with the two-count bounds only: two chunks of one long XLA call each (~7 s), 14 s in all.
KRR_WORST = [*KRR, "--upper-from", "worst-case"]

_SAVED = re.compile(r"(\d+) of (\d+) points saved in ([^;\s]+)(?:; (\d+) of (\d+) chunks \((\d+) of (\d+) searches"
                    r"(?:, part of (\d+) more points)?\) kept in ([^;\s]+))?; ")

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")


def _env() -> dict:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env.pop("JAXSHUFFLE_SWEEP_CHUNK_SLEEP", None)
    env.update(JAXSHUFFLE_CACHE="off", JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    return env


def _start(args: list[str], err: Path) -> subprocess.Popen:
    with open(err, "w") as fh:
        return subprocess.Popen([sys.executable, "-m", "jaxshuffle.cli", *args], env=_env(), cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=fh, text=True)


def _wait_for(cond, proc: subprocess.Popen, what: str, timeout: float = 120.0) -> bool:
    """Wait for ``cond``; False when the process ended first (a machine fast enough to finish the grid)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            return False
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return True


def _stop(proc: subprocess.Popen, signum: int) -> float:
    """Send ``signum``; the seconds until the process exited."""
    t = time.monotonic()
    proc.send_signal(signum)
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return time.monotonic() - t


def _chunk_files(out: Path) -> dict[str, np.ndarray]:
    """Each chunk file's job ids."""
    found = {}
    for path in sorted((out / "chunks").glob("c*.npz")):
        with np.load(path) as z:
            found[path.name] = z["jobs"].copy()
    return found


def _csv_rows(path: Path) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a torn row would be a failure here
        return len(sw.read_csv(path)["index"])


def _check_saved(line: str, signame: str, out: Path, points: int, chunks: int, searches: int) -> tuple[int, int]:
    """The stop's line says exactly what the chunk files on disk hold; returns (points saved, chunk files)."""
    head = f"jaxshuffle: interrupted ({signame}): "
    assert line.startswith(head) and "; rerun the same command to resume: jaxshuffle sweep " in line, line
    m = _SAVED.match(line[len(head):])
    assert m, line
    files = _chunk_files(out)
    saved, total, csv = int(m.group(1)), int(m.group(2)), Path(m.group(3))
    assert total == points and csv == out / "results.csv"
    assert saved == _csv_rows(csv)  # the points saved are the rows of results.csv ...
    kept_jobs = sum(len(j) for j in files.values())
    if m.group(4) is None:  # ... and, where the chunk files hold no more than those points, nothing else is kept
        assert kept_jobs == 0 or saved > 0
        return saved, len(files)
    assert (int(m.group(4)), int(m.group(5))) == (len(files), chunks)  # chunk files on disk
    assert (int(m.group(6)), int(m.group(7))) == (kept_jobs, searches)  # the searches in them
    assert Path(m.group(9)) == out / "chunks"
    return saved, len(files)


# ------------------------------------------------------------------------------ the command line


@pytest.mark.slow
def test_sigint_inside_a_blanket_chunk_stops_at_once_and_says_what_is_kept(tmp_path):
    """Ctrl-C 10 s into a k-RR sweep's first blanket-engine chunk (60-110 s of XLA calls): exit 130 within the
    bound, the line counts exactly what the chunk files hold (two two-count chunks, no point finished); the
    rerun says it resumes from them, and its SIGTERM (143) counts them too (an earlier run's chunks)."""
    out = tmp_path / "krr"
    proc = _start([*KRR, "--out", str(out)], tmp_path / "err1")
    if not _wait_for(lambda: len(list((out / "chunks").glob("c*.npz"))) >= 2, proc, "the two-count chunks"):
        pytest.skip("the sweep finished before it could be stopped")
    time.sleep(10.0)  # well into the first blanket chunk (its long XLA calls)
    assert proc.poll() is None, "the blanket chunk ended within 10 s"
    took = _stop(proc, signal.SIGINT)
    err = (tmp_path / "err1").read_text()
    assert proc.returncode == 130, err
    assert took < BOUND_S, f"{took:.1f} s from SIGINT to exit"
    assert "Traceback" not in err and "Exception ignored" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[sweep] 12 points, 48 distinct searches"), err
    saved, files = _check_saved(lines[1], "SIGINT", out, 12, 5, 48)
    assert files >= 2 and "part of" in lines[1]
    assert not list(out.glob(".*")) and not list((out / "chunks").glob(".*"))  # no temporary files left
    before = {p.name: p.read_bytes() for p in (out / "chunks").glob("c*.npz")}

    again = _start([*KRR, "--out", str(out)], tmp_path / "err2")
    assert _wait_for(lambda: f"({files} of this sweep's 5 already done)" in (tmp_path / "err2").read_text(), again,
                     "the resumed sweep's first line")
    time.sleep(5.0)
    took = _stop(again, signal.SIGTERM)
    err = (tmp_path / "err2").read_text()
    assert again.returncode == 143, err
    assert took < BOUND_S, f"{took:.1f} s from SIGTERM to exit"
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in err, err
    assert _check_saved(lines[1], "SIGTERM", out, 12, 5, 48) == (saved, files)  # the earlier run's chunks counted
    assert {p.name: p.read_bytes() for p in (out / "chunks").glob("c*.npz")} == before  # kept as they were


@pytest.fixture(scope="module")
def worst_reference(tmp_path_factory) -> Path:
    """An uninterrupted run of :data:`KRR_WORST`."""
    out = tmp_path_factory.mktemp("prompt") / "ref"
    done = subprocess.run([sys.executable, "-m", "jaxshuffle.cli", *KRR_WORST, "--out", str(out)], env=_env(),
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.slow
def test_sigint_inside_one_long_xla_call_then_resume_is_identical(tmp_path, worst_reference):
    """Ctrl-C while a two-count chunk runs its one XLA call: exit 130 within the bound, the finished chunk kept;
    the rerun computes only the rest and ends with the uninterrupted run's files."""
    out = tmp_path / "worst"
    proc = _start([*KRR_WORST, "--out", str(out)], tmp_path / "err")
    if not _wait_for(lambda: list((out / "chunks").glob("c*.npz")), proc, "the first chunk"):
        pytest.skip("the sweep finished before it could be stopped")
    took = _stop(proc, signal.SIGINT)
    err = (tmp_path / "err").read_text()
    if proc.returncode == 0:
        pytest.skip("the last chunk finished before the signal")
    assert proc.returncode == 130, err
    assert took < BOUND_S, f"{took:.1f} s from SIGINT to exit"
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "Traceback" not in err, err
    chunks = int(re.search(r"(\d+) chunks \(0 of", lines[0]).group(1))
    _, files = _check_saved(lines[1], "SIGINT", out, 12, chunks, 36)
    assert 1 <= files < chunks

    again = subprocess.run([sys.executable, "-m", "jaxshuffle.cli", *KRR_WORST, "--out", str(out)], env=_env(),
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"({files} of this sweep's {chunks} already done)" in again.stderr
    assert_same_results(out, worst_reference)


COMMANDS = {  # each computes for well over a minute on 2 cores without the compilation cache
    "compose": ["compose", "--randomizer", "grr", "--k", "10", "--eps0", "1", "--n", "1e5", "--rounds", "1,100",
                "--delta", "1e-6"],
    "tune": ["tune", "--query", "grr:k=2", "--query", "grr:k=10", "--n", "1e5", "--target", "1", "--delta", "1e-6",
             "--steps", "20"],
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_sigterm_during_a_long_computation_stops_at_once(tmp_path, command):
    """SIGTERM a few seconds into `compose` (its PLD composition: long XLA calls) or `tune`: exit 143 within the
    bound, one line saying that nothing is saved, no file written (compose's --curve)."""
    args = list(COMMANDS[command])
    curve = tmp_path / "curve.csv"
    if command == "compose":
        args += ["--curve", str(curve)]
    proc = _start(args, tmp_path / "err")
    assert _wait_for(lambda: catches_signal(proc.pid, signal.SIGTERM), proc, "the SIGTERM handler")
    time.sleep(3.0)  # into the computation
    assert proc.poll() is None, f"{command} finished before the signal"
    took = _stop(proc, signal.SIGTERM)
    err = (tmp_path / "err").read_text()
    assert proc.returncode == 143, err
    assert took < BOUND_S, f"{took:.1f} s from SIGTERM to exit"
    assert err == (f"jaxshuffle: interrupted (SIGTERM): nothing saved ({command} keeps no partial results; "
                   "rerun the same command)\n")
    assert proc.stdout.read() == ""
    assert not curve.exists() and not curve.with_suffix(".png").exists()


# ------------------------------------------------------------------------------ the library


def test_api_stop_abandons_the_running_chunk_which_writes_nothing(tmp_path, monkeypatch, default_sigint):
    """SIGINT while a chunk computes (here: blocked until released) raises SweepInterrupted at once; the
    abandoned chunk, released later, writes nothing; the same call then resumes to the uninterrupted values."""
    out = tmp_path / "api"
    real_run = execution_mod.Runner.run
    release, started, finished = threading.Event(), threading.Event(), threading.Event()
    calls = {"run": 0}

    def run(self, *a, **k):
        calls["run"] += 1
        if calls["run"] == 2:  # the second chunk: a long computation (its thread is not the main thread)
            assert threading.current_thread() is not threading.main_thread()
            started.set()
            release.wait(60)
            try:
                return real_run(self, *a, **k)
            finally:
                finished.set()
        return real_run(self, *a, **k)

    monkeypatch.setattr(execution_mod.Runner, "run", run)
    sent = {}

    def interrupt():
        if started.wait(60):
            sent["t"] = time.monotonic()
            os.kill(os.getpid(), signal.SIGINT)

    killer = threading.Thread(target=interrupt, daemon=True)
    killer.start()
    with pytest.raises(SweepInterrupted) as info:
        sw.sweep(**SMALL, out=out)
    took = time.monotonic() - sent["t"]
    killer.join(5)
    assert took < 2.0, f"{took:.2f} s from SIGINT to SweepInterrupted"
    assert info.value.saved == f"4 of 12 points saved in {out / 'results.csv'}"
    assert stops_mod.abandoned() >= 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    files = {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    release.set()  # the abandoned chunk computes to its end ...
    assert finished.wait(120)
    deadline = time.monotonic() + 30
    while stops_mod.abandoned() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stops_mod.abandoned() == 0
    assert {p.name: p.read_bytes() for p in out.rglob("*") if p.is_file()} == files  # ... and writes nothing

    monkeypatch.undo()
    resumed = sw.sweep(**SMALL, out=out)
    assert resumed.complete and resumed.meta["timing"]["chunks_run"] == 2
    fresh = sw.sweep(**SMALL)
    for key in fresh.keys():
        np.testing.assert_array_equal(resumed[key], fresh[key], err_msg=key)


def test_a_stop_swallowed_by_a_callback_is_raised_again_by_the_wait(default_sigint, monkeypatch):
    """Python ignores exceptions raised in gc callbacks and ``__del__`` (JAX registers a gc callback): a
    KeyboardInterrupt whose handler ran there is raised again by the wait for the computation."""
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)  # the swallowed exception, silently

    class Victim:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):  # the handler runs between these bytecodes, inside __del__
                pass

    release = threading.Event()
    try:
        with stops_mod.DeferSignals() as guard:
            victim = Victim()
            del victim
            assert isinstance(guard.raised, KeyboardInterrupt)  # raised, and swallowed
            start = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                stops_mod.run_interruptible(release.wait, 30, guard=guard)
        assert time.monotonic() - start < 1.0
    finally:
        release.set()  # the abandoned wait ends


def test_the_worker_keeps_the_callers_jax_settings():
    """JAX keeps ``with jax.enable_x64(...)`` and ``jax.default_device`` per thread: the worker gets the caller's;
    its exception is raised in the caller."""
    import jax
    import jax.numpy as jnp

    def probe():
        return jnp.zeros(1).dtype, jax.config.jax_default_device

    device = jax.devices()[0]
    with jax.enable_x64(False), jax.default_device(device):
        assert stops_mod.run_interruptible(probe) == (jnp.float32, device)
    assert stops_mod.run_interruptible(probe) == (jnp.float64, None)

    def boom():
        raise ValueError("from the worker")

    with pytest.raises(ValueError, match="from the worker"):
        stops_mod.run_interruptible(boom)


# ------------------------------------------------------------------------------ progress


class _FakeTTY(io.StringIO):
    def isatty(self):
        return True

    def last(self) -> str:
        """The bar as last drawn."""
        return self.getvalue().rstrip().split("\r")[-1]


def test_progress_shows_a_rate_and_an_eta_after_the_first_chunk():
    """A k-RR sweep: two-count chunks that finish no point, then mechanism chunks (each kind priced by its own
    chunks once one ran; until then a rough guess, marked ~). Every line after the first chunk has values."""
    tty = _FakeTTY()
    p = progress_mod.Progress(False, total_points=12, done_points=0, programs=3, file=tty)
    p.start_chunk(True)
    assert "? points/s, ETA ?" in tty.getvalue()  # nothing measured yet
    left = {"Plan": 1.0e6, "MechanismPlan": 3 * 8.0e6}
    left["Plan"] -= 1.0e6
    p.update(0, work=1.0e6, dt=7.0, compiled=True, work_left=dict(left), programs_left=2, kind="Plan")
    shown = tty.last()
    assert "?" not in shown and "points/s, ETA ~0:02:48" in shown, shown  # a guess: no mechanism chunk ran yet
    rate, eta = p.rate_eta(left, 2, guess=True)
    assert eta == pytest.approx(3 * 8.0e6 * 7.0 / 1.0e6) and rate == pytest.approx(12 / eta)
    assert p.rate_eta(left, 2) == (None, None)  # nothing ran on a compiled program yet

    left["MechanismPlan"] -= 8.0e6
    p.start_chunk(True)
    p.update(4, work=8.0e6, dt=90.0, compiled=True, work_left=dict(left), programs_left=0, kind="MechanismPlan")
    rate, eta = p.rate_eta(left, 0, guess=True)
    assert eta == pytest.approx(2 * 90.0) and rate == pytest.approx(4 / 97.0)  # priced by its own chunk now
    left["MechanismPlan"] -= 8.0e6
    p.start_chunk(False)
    p.update(4, work=8.0e6, dt=60.0, compiled=False, work_left=dict(left), programs_left=0, kind="MechanismPlan")
    rate, eta = p.rate_eta(left, 0)  # a chunk on a compiled program: the measured values, no guess
    assert rate == pytest.approx(4 / 60.0) and eta == pytest.approx(60.0)
    shown = tty.last()
    assert "0.067 points/s, ETA 0:01:00" in shown and "~" not in shown, shown
    p.close()
    assert "8/12 points" in tty.getvalue()
