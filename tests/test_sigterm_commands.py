"""SIGTERM stops `jaxshuffle compose` and `jaxshuffle tune` as it stops `jaxshuffle sweep`: one line on
stderr, no traceback, exit status 143 (128 + SIGTERM), through the sweep's one mechanism
(jaxshuffle.cli.sweep._sigterm_raises).

The signal is sent once the command has installed its SIGTERM handler (read from /proc/PID/status,
so the test does not race the imports) and while it still computes (no compilation cache). Like
Ctrl-C, the handler runs when the main thread returns to Python, so the commands are small ones
(one long XLA call would delay the stop until it returns).
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
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_sigterm_is_one_line_and_exit_143(command):
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env.update(JAXSHUFFLE_CACHE="off", JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "jaxshuffle.cli", *COMMANDS[command]], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not catches_signal(proc.pid, signal.SIGTERM):
            assert proc.poll() is None, f"{command} ended before its SIGTERM handler was seen: {proc.communicate()}"
            assert time.monotonic() < deadline, "timed out waiting for the SIGTERM handler"
            time.sleep(0.01)
        time.sleep(0.2)  # into the computation
        assert proc.poll() is None, f"{command} finished before the signal: {proc.communicate()}"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM == 143, err
    assert "Traceback" not in err
    assert err == (f"jaxshuffle: interrupted (SIGTERM): nothing saved ({command} keeps no partial results; "
                   "rerun the same command)\n"), err
    assert out == ""


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
