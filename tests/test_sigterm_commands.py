"""SIGTERM stops every computing command (compose, tune, epsilon, calibrate, sandwich, compare) as it stops
`jaxshuffle sweep`: one line on stderr, no traceback, exit status 143 (128 + SIGTERM), through the sweep's one
mechanism (jaxshuffle.cli.sweep._sigterm_raises).

The signal is sent once the command has installed its SIGTERM handler (read from /proc/PID/status,
so the test does not race the imports) and while it still computes (no compilation cache). Like
Ctrl-C, the handler runs when the main thread returns to Python; the commands run their XLA calls in a
worker thread while the main thread waits in 0.1 s steps, so a long XLA call does not delay the stop
(test_sigterm_does_not_wait_for_a_long_xla_call).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stopping import catches_signal

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")

COMMANDS = {  # each takes well over a minute without the compilation cache; the signal comes in seconds
    "compose": ["compose", "--randomizer", "grr", "--k", "10", "--eps0", "1", "--n", "1e3", "--rounds", "1,10",
                "--delta", "1e-6", "--blanket-points", "0"],
    "tune": ["tune", "--query", "grr:k=2", "--query", "grr:k=10", "--n", "1e4", "--target", "1", "--delta", "1e-6",
             "--steps", "5"],
    # these take 3-20 s without the compilation cache (compiling the engine's programs)
    "epsilon": ["epsilon", "--randomizer", "grr", "--k", "10", "--eps0", "1", "--n", "1e3", "--delta", "1e-6"],
    "calibrate": ["calibrate", "--randomizer", "grr", "--k", "10", "--target", "0.5", "--n", "1e4", "--delta", "1e-8"],
    "sandwich": ["sandwich", "--grr", "3", "--eps0", "1", "--n", "3", "--delta", "1e-3"],
    "compare": ["compare", "--randomizer", "grr", "--k", "3", "--eps0", "1", "--n", "1e3", "--delta", "1e-6",
                "--out", "{tmp}/compare"],
}


def _start(argv: list[str]) -> subprocess.Popen:
    """``jaxshuffle ARGV`` in a subprocess without the compilation cache, once its SIGTERM handler is installed."""
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env.update(JAXSHUFFLE_CACHE="off", JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "jaxshuffle.cli", *argv], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not catches_signal(proc.pid, signal.SIGTERM):
            assert proc.poll() is None, f"{argv[0]} ended before its SIGTERM handler was seen: {proc.communicate()}"
            assert time.monotonic() < deadline, "timed out waiting for the SIGTERM handler"
            time.sleep(0.01)
    except BaseException:
        proc.kill()
        raise
    return proc


def _stop(proc: subprocess.Popen, into: float) -> tuple[str, str, float]:
    """SIGTERM ``into`` seconds after the handler was seen (the command still computing): (stdout, stderr,
    seconds from the signal to the exit)."""
    try:
        time.sleep(into)
        assert proc.poll() is None, f"finished before the signal: {proc.communicate()}"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        return out, err, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()


def _assert_stopped(command: str, proc: subprocess.Popen, out: str, err: str) -> None:
    assert proc.returncode == 128 + signal.SIGTERM == 143, err
    assert "Traceback" not in err
    assert err == (f"jaxshuffle: interrupted (SIGTERM): nothing saved ({command} keeps no partial results; "
                   "rerun the same command)\n"), err
    assert out == ""


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_sigterm_is_one_line_and_exit_143(command, tmp_path):
    proc = _start([a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]])
    out, err, _ = _stop(proc, 0.2)  # into the computation
    _assert_stopped(command, proc, out, err)
    assert not (tmp_path / "compare").exists()  # compare: nothing written (it writes once computed)


@pytest.mark.slow
def test_sigterm_does_not_wait_for_a_long_xla_call():
    """calibrate at n = 1e6 with the blanket pair runs about 2 minutes without the compilation cache, in XLA
    calls (compilations and runs) of several seconds each. With the calls in the main thread, a stop waited
    for the running one: 8.4 s from the signal to the exit ten seconds in (4-8 s later on; epsilon stopped
    that way sometimes crashed at exit, SIGSEGV); through the worker thread it takes 0.05 s."""
    proc = _start(["calibrate", "--randomizer", "grr", "--k", "10", "--target", "0.2", "--n", "1e6",
                   "--delta", "1e-8", "--upper-from", "blanket"])
    out, err, took = _stop(proc, 10.0)
    _assert_stopped("calibrate", proc, out, err)
    assert took < 5.0, f"{took:.1f} s from SIGTERM to exit"


def test_a_sigterm_swallowed_by_a_callback_is_delivered_again():
    """Python ignores exceptions raised in gc callbacks and ``__del__`` (jax registers a gc callback):
    a SIGTERM whose handler runs there must still stop the command, a moment later."""
    import os
    import signal as sig
    import time as t

    from jaxshuffle.cli.sweep import _sigterm_raises
    from jaxshuffle.sweeps.stops import SweepInterrupted

    class Victim:
        def __del__(self):
            os.kill(os.getpid(), sig.SIGTERM)
            for _ in range(10_000):  # the handler runs between these bytecodes, inside __del__
                pass

    start = t.monotonic()
    with pytest.raises(SweepInterrupted):
        with _sigterm_raises():
            victim = Victim()
            del victim
            t.sleep(5)
    assert t.monotonic() - start < 2
