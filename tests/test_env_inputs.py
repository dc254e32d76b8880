"""Environment switches and foreign objects that used to end in tracebacks: each gets one clear line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _cli(*args, **env):
    return subprocess.run([sys.executable, "-m", "jaxshuffle.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "JAX_PLATFORMS": "cpu", **env}, timeout=300)


def test_a_bad_max_grid_variable_warns_once_and_keeps_the_defaults():
    res = _cli("randomizers", JAXSHUFFLE_MAX_GRID="abc")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stderr.count("JAXSHUFFLE_MAX_GRID='abc' is not a number >= 1; using the defaults") == 1
    assert "Traceback" not in res.stderr
    code = "from jaxshuffle.sweeps import grid; print(grid.MAX_AXIS_VALUES, grid.MAX_GRID_POINTS)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "JAX_PLATFORMS": "cpu", "JAXSHUFFLE_MAX_GRID": "-5"})
    assert res.stdout.split() == ["1000000", "10000000"], res.stderr[-2000:]


def test_the_command_line_computes_in_float64_whatever_the_library_switch_says():
    res = _cli("epsilon", "--randomizer", "general", "--eps0", "1", "--n", "100", "--delta", "1e-3", "--json",
               JAXSHUFFLE_ENABLE_X64="0")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]


def test_from_dp_accounting_names_a_foreign_object():
    from jaxshuffle.accountant.interop import from_dp_accounting
    with pytest.raises(ValueError, match="^pessimistic: expected a dp_accounting PrivacyLossDistribution, got object"):
        from_dp_accounting(object(), 1e-4)
    with pytest.raises(ValueError, match="^optimistic: expected a dp_accounting PrivacyLossDistribution, got str"):
        from_dp_accounting(object.__new__(type("PLD", (), {"_pmf_remove": 0, "_pmf_add": 0})), 1e-4, optimistic="x")
