"""The shared numerics (jaxshuffle._numerics): each numpy twin pinned to its jnp partner, and the
Newton margin's safe side."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxshuffle import _numerics as nu
from jaxshuffle import plan as two_count_plan
from jaxshuffle.blanket import kernel

_trials = st.one_of(st.sampled_from([1.0, 2.0, 3.0, 1e12]), st.integers(1, 10**9).map(float))
_p = st.one_of(st.sampled_from([0.0, 1e-300, 5e-324, 1e-16, 0.5, 1.0 - 1e-16, 1.0]), st.floats(0.0, 1.0))
_window = st.sampled_from([1, 2, 16, 64, 1024, 2**20])


@pytest.mark.slow
@settings(derandomize=True, deadline=None, max_examples=200)
@given(trials=_trials, p=_p, window=_window)
def test_window_start_twins_agree(trials, p, window):
    """numpy and jnp (eager and jitted) give the same start, inside ``[0, max(trials + 1 - window, 0)]``."""
    ref = nu.window_start(np.float64(trials), np.float64(p), window)
    assert isinstance(ref, np.floating | np.ndarray)
    eager = nu.window_start(jnp.float64(trials), jnp.float64(p), window)
    jitted = jax.jit(lambda t, q: nu.window_start(t, q, window))(jnp.float64(trials), jnp.float64(p))
    assert float(ref) == float(eager) == float(jitted)
    assert 0.0 <= float(ref) <= max(trials + 1.0 - window, 0.0)
    assert float(ref) == np.floor(float(ref))


@settings(derandomize=True, deadline=None, max_examples=100)
@given(n=st.one_of(st.sampled_from([1.0, 2.0, 3.0]), st.integers(1, 10**9).map(float)), p=_p, window=_window)
def test_window_starts_of_both_kernels(n, p, window):
    """The two-count window centres on Bin(n - 1, r) (r floored), the blanket window on Bin(n, pS), in
    numpy (planning) and jnp (a fixed plan) alike; the formula they used before, spelled out."""
    N, pi = n - 1.0, float(np.clip(p, 2 * two_count_plan.R_FLOOR, 1.0))
    old_two = np.clip(np.floor(N * pi) - window // 2, 0, np.maximum(n - window, 0))
    old_blanket = np.clip(np.floor(n * p) - window // 2, 0.0, np.maximum(n + 1.0 - window, 0.0))
    assert float(two_count_plan.window_start(np.float64(n), np.float64(p), window)) == old_two
    assert float(two_count_plan.window_start(jnp.float64(n), jnp.float64(p), window, jnp)) == old_two
    assert float(kernel.window_start(np.float64(n), np.float64(p), window)) == old_blanket
    assert float(kernel.window_start(jnp.float64(n), jnp.float64(p), window)) == old_blanket


def test_window_start_degenerate_points():
    # n = 2 users: the two-count window covers the others' counts 0..1, the blanket one 0..2
    assert float(two_count_plan.window_start(np.float64(2.0), np.float64(0.5), 16)) == 0.0
    assert float(kernel.window_start(jnp.float64(2.0), jnp.float64(0.5), 16)) == 0.0
    # a window shorter than the support ends on the last count at p = 1
    assert float(nu.window_start(np.float64(100.0), np.float64(1.0), 16)) == 85.0
    assert float(nu.window_start(jnp.float64(100.0), jnp.float64(1.0), 16)) == 85.0
    assert float(nu.window_start(np.float64(100.0), np.float64(1e-300), 16)) == 0.0


@settings(derandomize=True, deadline=None, max_examples=200)
@given(rtol=st.sampled_from([1e-9, 1e-6, 1e-3]), x=st.floats(0.0, 700.0), lo=st.floats(0.0, 700.0),
       hi=st.one_of(st.floats(0.0, 700.0), st.just(np.inf)))
def test_newton_margin_stays_on_the_safe_side(rtol, x, lo, hi):
    """Never more than ``0.25 rtol hi`` (the old bound, where hi is finite), finite and >= 0 also with
    ``hi = inf``, and relative to the point brought into the bracket."""
    lo, hi = min(lo, hi), max(lo, hi)
    m = float(nu.newton_margin(rtol, jnp.float64(x), jnp.float64(lo), jnp.float64(hi)))
    assert np.isfinite(m) and m >= 0.0
    assert m <= 0.25 * rtol * hi
    # abs: XLA on the CPU flushes subnormals
    assert m == pytest.approx(0.25 * rtol * min(hi, max(x, lo)), rel=1e-15, abs=1e-300)


def test_rounding_constants():
    assert nu.UNIT_ROUNDOFF == np.finfo(np.float64).eps / 2
    assert 2 * nu.UNIT_ROUNDOFF <= nu.ULP < 2.4e-16  # 2u, rounded up
    from jaxshuffle import _fft, blanket_matrix, divergence
    from jaxshuffle.accountant import pld
    assert divergence._ULP == kernel._ULP == blanket_matrix._ULP == pld._ULP == nu.ULP
    assert _fft.U == nu.UNIT_ROUNDOFF


def test_tail_names():
    """The round's cell tail and the composition's wrap-around tail are two defaults; the old name
    stays importable from each module."""
    import importlib
    compose = importlib.import_module("jaxshuffle.accountant.compose")  # the package exports a function of that name
    pld = importlib.import_module("jaxshuffle.accountant.pld")
    assert pld.DEFAULT_TAIL == pld.CELL_TAIL == 1e-16
    assert compose.DEFAULT_TAIL == compose.WRAP_TAIL == 1e-15
