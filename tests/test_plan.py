"""Planning (jaxshuffle.plan): epsilon under jit with a public plan, degenerate pairs, bounded shapes."""
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshuffle as js
import jaxshuffle.randomizers as R
from jaxshuffle import exact
from jaxshuffle.plan import plan_epsilon
from jaxshuffle.search import Status


@pytest.mark.slow
def test_epsilon_under_jit_with_a_public_plan_matches_the_eager_call_and_has_gradients():
    e0 = jnp.array([0.5, 1.0, 2.0])
    plan = js.plan_for(js.stronger_clone_pair(e0), 1e4, 1e-6)
    f = jax.jit(lambda e: js.epsilon(js.stronger_clone_pair(e), 1e4, 1e-6, plan=plan).upper)
    eager = js.epsilon(js.stronger_clone_pair(e0), 1e4, 1e-6)
    np.testing.assert_allclose(np.asarray(f(e0)), np.asarray(eager.upper), rtol=1e-6)
    g = jax.jit(jax.grad(lambda e: f(e).sum()))(e0)
    h = 1e-5
    fd = (np.asarray(js.epsilon(js.stronger_clone_pair(e0 + h), 1e4, 1e-6).upper)
          - np.asarray(js.epsilon(js.stronger_clone_pair(e0 - h), 1e4, 1e-6).upper)) / (2 * h)
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-3)


@pytest.mark.slow
def test_jit_marks_invalid_points_invalid_never_a_number():
    plan = js.plan_for(js.stronger_clone_pair(1.0), 100, 1e-3)
    run = jax.jit(lambda e, n, d: js.epsilon(js.stronger_clone_pair(e), n, d, plan=plan))
    for e, n, d in ((1.0, 1.5, 1e-3), (1.0, 100.0, 0.0), (1.0, 100.0, 1.0), (-1.0, 100.0, 1e-3),
                    (710.0, 100.0, 1e-3), (1.0, jnp.inf, 1e-3), (jnp.nan, 100.0, 1e-3)):
        r = run(e, n, d)
        assert int(r.status) == Status.INVALID, (e, n, d)
        assert float(r.lower) == 0.0 and float(r.upper) == np.inf


@pytest.mark.slow
def test_a_point_outside_the_plan_stays_certified():
    """A plan made for n = 100 used at n = 1e5: the window misses mass, the band says so, no false claim."""
    plan = js.plan_for(js.stronger_clone_pair(1.0), 100, 1e-6)
    r = jax.jit(lambda e: js.epsilon(js.stronger_clone_pair(e), 1e5, 1e-6, plan=plan))(1.0)
    exact_upper = float(js.epsilon(js.stronger_clone_pair(1.0), 1e5, 1e-6).upper)
    assert float(r.upper) >= exact_upper * (1 - 1e-6)


def test_eps0_beyond_float_range_is_rejected_by_name():
    with pytest.raises(ValueError, match=r"eps0: must lie in \[0, 700\].*got 710"):
        js.stronger_clone_pair(710.0)
    with pytest.raises(ValueError, match=r"eps0: .*got 710"):
        R.grr(710.0, 3)


@pytest.mark.slow
def test_degenerate_lower_pairs_are_planned_within_the_normal_budget():
    """Theorem 5.1 pairs of 2x2 matrices: r0 + r1 = 1 and w at rounding level used to plan a 1e6 step.

    The cost of a program is its window times its threshold-step budget; a batch with such a
    pair must be planned like the batch without it.
    """
    lower = []
    for a in np.linspace(0.55, 0.95, 9):
        m = np.array([[a, 1 - a], [1 - a, a]])
        lower.append(exact.lower_bound_parameters(m, 0, 1))
    p0, b0, q0, q1 = (np.array(x) for x in zip(*lower))
    pair = js.vr_pair(p0, b0, q0=q0, q1=q1)
    assert np.all(np.asarray(pair.w) == 0.0)  # the snap rule: worst case exactly
    normal = js.stronger_clone_pair(np.log(p0))
    n, d = np.full(p0.shape, 1e3), np.full(p0.shape, 1e-6)
    L_deg, _, M_deg = plan_epsilon(*(np.asarray(x) for x in pair.arrays()), n, d)
    L_ok, _, M_ok = plan_epsilon(*(np.asarray(x) for x in normal.arrays()), n, d)
    assert L_deg.max() <= 2 * L_ok.max() and M_deg.max() <= 4 * max(M_ok.max(), 1)
    # and a batch mixing them runs: every point certified and converged
    both = js.TwoCountPair(*(jnp.concatenate([a, b]) for a, b in zip(pair.arrays(), normal.arrays())))
    t0 = time.perf_counter()
    r = js.epsilon(both, 1e3, 1e-6)
    assert np.all(np.asarray(r.status) == Status.CONVERGED), time.perf_counter() - t0


def test_plans_refuse_windows_beyond_memory_before_allocating():
    t0 = time.perf_counter()
    for n in (1e15, 1e20):
        with pytest.raises(ValueError, match=r"n: .*largest supported n"):
            js.epsilon(js.stronger_clone_pair(1.0), n, 1e-6)
    assert time.perf_counter() - t0 < 10


def test_empty_batches_and_non_pairs():
    r = js.epsilon(js.stronger_clone_pair(jnp.zeros((0,))), 100, 1e-3)
    assert r.upper.shape == (0,)
    with pytest.raises(TypeError, match="pair: must be a TwoCountPair"):
        js.epsilon((0.5, 0.5, 0.0, 0.1, 0.1), 100, 1e-3)
    with pytest.raises(ValueError, match="n: must be a finite integer"):
        js.epsilon(js.stronger_clone_pair(1.0), np.inf, 1e-3)
