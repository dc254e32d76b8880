"""Helpers the stop tests share: whether a process catches a signal yet, and two sweeps' result files compared."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def catches_signal(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` installed (its ``SigCgt`` mask in /proc)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except OSError:
        return False
    return False


def assert_same_results(out: Path, reference: Path) -> None:
    """``out``'s results.csv byte for byte and results.npz array for array are ``reference``'s."""
    assert (out / "results.csv").read_bytes() == (reference / "results.csv").read_bytes()
    with np.load(out / "results.npz") as got, np.load(reference / "results.npz") as want:
        assert sorted(got.files) == sorted(want.files)
        for key in want.files:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
