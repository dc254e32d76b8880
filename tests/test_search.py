"""epsilon(): certified brackets against enumeration, Table 5, statuses, gradients, errors."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import epsilon_enum, epsilon_window_scipy

import jaxshuffle as js
from jaxshuffle.divergence import hockey_stick_bounds
from jaxshuffle.plan import Plan
from jaxshuffle.search import Status, epsilon_with_plan


@pytest.fixture(autouse=True, scope="module")
def _every_small_call_runs_the_quick_program():
    """A process runs the quick (unoptimised) program for a program's first call only; here every small
    call does, so the enumeration tests below check the quick program's certified brackets too."""
    from jaxshuffle import _programs
    before = _programs.QUICK_CALLS
    _programs.QUICK_CALLS = 1 << 30
    yield
    _programs.QUICK_CALLS = before


TABLE5_PAPER_T20 = {  # Wang et al. (VLDB 2024) Table 5, T = 20, delta = 0.01/n
    (1.0, 1e4): 0.0433, (1.0, 1e6): 0.00503, (1.0, 1e8): 0.000566,
    (3.0, 1e4): 0.227, (3.0, 1e6): 0.0255, (3.0, 1e8): 0.00283,
    (5.0, 1e4): 0.743, (5.0, 1e6): 0.0778, (5.0, 1e8): 0.00853,
    (7.0, 1e4): 6.99, (7.0, 1e6): 0.224, (7.0, 1e8): 0.0242,
}


@pytest.mark.slow
def test_brackets_contain_enumerated_epsilon():
    rng = np.random.default_rng(5)
    k = 24
    uvw = rng.dirichlet([1, 1, 1], size=k)
    uvw[::3, 2] = 0.0
    uvw /= uvw.sum(axis=1, keepdims=True)
    r = rng.dirichlet([1, 1, 1], size=k)[:, :2] * rng.uniform(0.05, 1.0, size=(k, 1))
    n = rng.choice([3, 40, 200], size=k).astype(float)
    delta = 10.0 ** rng.uniform(-8, -1, size=k)
    pair = js.two_count_pair(*uvw.T, r[:, 0], r[:, 1])
    res = js.epsilon(pair, n, delta)
    lower, upper, status = (np.asarray(x) for x in res[:3])
    for i in range(k):
        ref = epsilon_enum(*uvw[i], r[i, 0], r[i, 1], int(n[i]), delta[i])
        assert lower[i] <= ref * (1 + 1e-12) + 1e-15 and ref <= upper[i] * (1 + 1e-12) + 1e-15, i
        if status[i] == Status.CONVERGED:
            assert upper[i] - lower[i] <= 1e-6 * upper[i]


@pytest.mark.slow
def test_certified_sides_hold_for_the_returned_bracket():
    pair = js.vr_pair(np.array([2.0, 5.0, 20.0]), np.array([0.2, 0.5, 0.7]), np.array([2.0, 3.0, 4.0]))
    n, delta = 500.0, 1e-5
    res = js.epsilon(pair, n, delta)
    assert np.all(np.asarray(res.status) == Status.CONVERGED)
    at_upper = hockey_stick_bounds(pair, n, res.upper, trunc_tol=1e-6 * delta)
    at_lower = hockey_stick_bounds(pair, n, res.lower, trunc_tol=1e-6 * delta)
    assert np.all(np.asarray(at_upper.upper) <= delta)
    # The lower end may be certified by a tangent rather than evaluated, so check D itself there
    # (accurate to ~1e-10, far inside D(lower) - delta for a bracket of relative width 1e-6).
    assert np.all(np.asarray(at_lower.value) > delta)


@pytest.mark.slow
def test_few_divergence_evaluations_on_a_typical_grid():
    """The Gaussian-model first guess and the convexity bracket (tangent below, chord above)
    finish a typical grid in a few evaluations; the vmapped loop runs as long as its slowest lane."""
    eps0 = np.geomspace(0.5, 5.0, 48)
    res = js.epsilon(js.stronger_clone_pair(eps0), 1e5, 1e-7)
    assert np.all(np.asarray(res.status) == Status.CONVERGED)
    it = np.asarray(res.iterations)
    assert it.max() <= 4 and it.mean() <= 2.5, (it.mean(), it.max())


@pytest.mark.slow
def test_table5_brackets_contain_independent_reference():
    eps0 = np.array([1.0, 3.0, 5.0, 7.0])[:, None]
    n = np.array([1e4, 1e6, 1e8])[None, :]
    res = js.epsilon(js.stronger_clone_pair(eps0), n, 0.01 / n)
    lower, upper = np.asarray(res.lower), np.asarray(res.upper)
    assert np.all(np.asarray(res.status) == Status.CONVERGED)
    for i, e0 in enumerate(eps0[:, 0]):
        for j, nn in enumerate(n[0]):
            p = math.exp(e0)
            ref = epsilon_window_scipy(p / (p + 1), 1 / (p + 1), 0.0, 1 / (p + 1), int(nn), 0.01 / nn)
            assert lower[i, j] * (1 - 1e-9) <= ref <= upper[i, j] * (1 + 1e-9), (e0, nn)
            paper = TABLE5_PAPER_T20[(e0, nn)]
            # The paper's T=20 bisection overshoots the exact value by 0.1-0.7%; 3 printed digits.
            assert -1.5e-3 <= (paper - upper[i, j]) / upper[i, j] <= 8e-3, (e0, nn, paper, upper[i, j])


@pytest.mark.slow
def test_status_zero_infinite_and_unbounded_cases():
    # delta above the total variation distance: eps = 0 exactly.
    res = js.epsilon(js.stronger_clone_pair(0.5), 10.0, 0.9)
    assert int(res.status) == Status.ZERO and float(res.upper) == 0.0 == float(res.lower)
    # p = inf, beta = 1, q = 3: v = 0, w = 0; outcomes with b = 0 are impossible under Q,
    # with P-mass (1 - r)^(n-1) = (2/3)^4 = 0.1975 > delta: no finite eps.
    pair = js.vr_pair(np.inf, 1.0, 3.0)
    res = js.epsilon(pair, 5.0, 0.1)
    assert int(res.status) == Status.INFINITE and np.isinf(float(res.upper)) and np.isinf(float(res.lower))
    # Below that mass... above it, eps is finite and the bracket contains enumeration.
    res = js.epsilon(pair, 5.0, 0.25)
    ref = epsilon_enum(1.0, 0.0, 0.0, 1 / 3, 1 / 3, 5, 0.25, hi=60.0)
    assert int(res.status) == Status.CONVERGED
    assert float(res.lower) <= ref <= float(res.upper) * (1 + 1e-12)


@pytest.mark.slow
def test_monotone_in_n_and_beta():
    n = np.array([100.0, 1000.0, 10_000.0])
    up = np.asarray(js.epsilon(js.stronger_clone_pair(2.0), n, 1e-6).upper)
    assert np.all(np.diff(up) < 0)
    beta = np.linspace(0.05, (math.e**2 - 1) / (math.e**2 + 1), 6)
    up_b = np.asarray(js.epsilon(js.vr_pair(math.e**2, beta, math.e**2), 1000.0, 1e-6).upper)
    assert np.all(np.diff(up_b) > 0)


@pytest.mark.slow
def test_upper_is_differentiable_by_implicit_function_theorem():
    p, q, n = math.e**2, 3.0, 2000.0

    def upper(beta, delta):
        return js.epsilon(js.vr_pair(p, beta, q), n, delta, rtol=1e-12).upper

    # The bracket is certified to ~1e-9 here (the error band, not rtol, limits it), so
    # central differences with steps that move eps by ~1e-4 are good to ~1e-4.
    beta, delta = 0.4, 1e-6
    g_beta, g_delta = jax.grad(upper, argnums=(0, 1))(beta, delta)
    h_b, h_d = 1e-3, 1e-3 * delta
    fd_beta = (upper(beta + h_b, delta) - upper(beta - h_b, delta)) / (2 * h_b)
    fd_delta = (upper(beta, delta + h_d) - upper(beta, delta - h_d)) / (2 * h_d)
    assert float(g_beta) == pytest.approx(float(fd_beta), rel=1e-3)
    assert float(g_delta) == pytest.approx(float(fd_delta), rel=1e-3)
    g_eps0 = jax.grad(lambda e: js.epsilon(js.stronger_clone_pair(e), n, delta, rtol=1e-12).upper)(1.0)
    fd = (js.epsilon(js.stronger_clone_pair(1.0 + 1e-3), n, delta, rtol=1e-12).upper
          - js.epsilon(js.stronger_clone_pair(1.0 - 1e-3), n, delta, rtol=1e-12).upper) / 2e-3
    assert float(g_eps0) == pytest.approx(float(fd), rel=1e-3)
    # d/dn: the engine's pmfs extend to real n (lgamma), so custom_root differentiates in n too;
    # central differences over integers n +- 100 (measured agreement 4e-5).
    g_n = jax.grad(lambda m: js.epsilon(js.stronger_clone_pair(1.0), m, delta, rtol=1e-12).upper)(1e4)
    fd_n = (js.epsilon(js.stronger_clone_pair(1.0), 1e4 + 100, delta, rtol=1e-12).upper
            - js.epsilon(js.stronger_clone_pair(1.0), 1e4 - 100, delta, rtol=1e-12).upper) / 200.0
    assert float(g_n) == pytest.approx(float(fd_n), rel=1e-3)


@pytest.mark.slow
def test_jit_convention_invalid_points():
    plan = Plan(window=16, block=16, max_step=2, symmetric=True)
    u, v, w = jnp.full(4, 0.7), jnp.full(4, 0.3), jnp.zeros(4)
    r = jnp.array([0.3, 0.3, 0.3, np.nan])
    delta = jnp.array([1e-3, 2.0, 0.0, 1e-3])
    res = jax.jit(epsilon_with_plan, static_argnames=("plan",))((u, v, w, r, r), jnp.full(4, 10.0), delta,
                                                               jnp.zeros(4), plan=plan)
    status = np.asarray(res.status)
    assert status[0] == Status.CONVERGED and np.all(status[1:] == Status.INVALID)
    np.testing.assert_array_equal(np.asarray(res.upper)[1:], np.inf)
    np.testing.assert_array_equal(np.asarray(res.lower)[1:], 0.0)
    assert not np.any(np.isnan(np.asarray(res.upper)))


@pytest.mark.parametrize("kwargs,match", [
    (dict(delta=0.0), "^delta"), (dict(delta=1.0), "^delta"), (dict(delta=np.nan), "^delta"),
    (dict(n=0.0), "^n"), (dict(n=3.5), "^n"), (dict(n=np.nan), "^n"),
    (dict(delta=np.ones(2) * 1e-3, n=np.ones(3) * 10), "shapes do not broadcast"),
])
def test_bad_input_raises(kwargs, match):
    args = dict(n=10.0, delta=1e-3) | kwargs
    with pytest.raises(ValueError, match=match):
        js.epsilon(js.stronger_clone_pair(1.0), args["n"], args["delta"])


def test_under_jit_without_plan_refuses_clearly():
    with pytest.raises(TypeError, match="_with_plan"):
        jax.jit(lambda d: js.epsilon(js.stronger_clone_pair(1.0), 10.0, d).upper)(1e-3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(eps0=st.floats(0.05, 6.0), beta_frac=st.floats(0.0, 1.0), q_frac=st.floats(0.0, 1.0),
       log_delta=st.floats(-9, -2))
@pytest.mark.slow
def test_property_lower_le_upper_and_enumeration_inside(eps0, beta_frac, q_frac, log_delta):
    p = math.exp(eps0)
    beta = beta_frac * (p - 1) / (p + 1)
    q = max(1.0, 2 * beta * p / (p - 1)) + q_frac * p  # keeps 2r <= 1
    pair = js.vr_pair(p, beta, q)
    delta = 10.0**log_delta
    res = js.epsilon(pair, 40.0, delta)
    assert float(res.lower) <= float(res.upper)
    ref = epsilon_enum(float(pair.u), float(pair.v), float(pair.w), float(pair.r0), float(pair.r1), 40, delta)
    assert float(res.lower) <= ref * (1 + 1e-12) + 1e-15 and ref <= float(res.upper) * (1 + 1e-12) + 1e-15


def test_newton_outside_the_bracket_bisects_instead_of_stalling():
    """3-ary RR, eps0 = 5, n = 1000, delta = 0.01/n: the Thm 4.7 pair's eps is 4.502 (docs/math.md section 3).

    Newton from the first guess overshoots the bracket here; clipping it to the bracket's edge
    used to shrink the bracket by ~rtol per step and end at MAX_ITER.
    """
    p = math.exp(5.0)
    res = js.epsilon(js.vr_pair(p, (p - 1) / (p + 2), p), 1000.0, 1e-5)
    assert int(res.status) == Status.CONVERGED
    assert float(res.upper) == pytest.approx(4.502, abs=5e-4)
