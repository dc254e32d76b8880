"""hockey_stick against brute-force enumeration, its certified band, and its conventions."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference import hockey_stick_enum, hockey_stick_mpmath

import jaxshuffle as js
from jaxshuffle.divergence import divergence_with_plan, hockey_stick_bounds
from jaxshuffle.plan import Plan


def random_pairs(rng, k, asymmetric=True, w_zero_frac=0.3):
    uvw = rng.dirichlet([1, 1, 1], size=k)
    zero_w = rng.uniform(size=k) < w_zero_frac
    uvw[zero_w, 2] = 0.0
    uvw /= uvw.sum(axis=1, keepdims=True)
    r = rng.dirichlet([1, 1, 1], size=k)[:, :2] * rng.uniform(0.02, 1.0, size=(k, 1))
    if not asymmetric:
        r[:, 0] *= 0.5
        r[:, 1] = r[:, 0]
    return uvw, r


@pytest.mark.slow
@pytest.mark.parametrize("asymmetric", [False, True])
def test_matches_enumeration(asymmetric):
    rng = np.random.default_rng(7 + asymmetric)
    k = 48
    uvw, r = random_pairs(rng, k, asymmetric)
    n = rng.choice([1, 2, 7, 40, 300], size=k).astype(float)
    eps = np.concatenate([rng.uniform(-4, 0, k // 4), rng.uniform(0, 1, k // 4), rng.uniform(1, 4, k // 4),
                          rng.uniform(4, 15, k - 3 * (k // 4))])
    pair = js.two_count_pair(uvw[:, 0], uvw[:, 1], uvw[:, 2], r[:, 0], r[:, 1])
    d = hockey_stick_bounds(pair, n, eps)
    ref = np.array([hockey_stick_enum(*uvw[i], r[i, 0], r[i, 1], int(n[i]), eps[i]) for i in range(k)])
    value, lower, upper = (np.asarray(x) for x in (d.value, d.lower, d.upper))
    big = ref > 1e-250
    assert np.all(np.abs(value - ref)[big] <= 1e-10 * ref[big])
    assert np.all(np.abs(value - ref)[~big] <= 1e-250)
    # the certified band contains the truth (the reference itself is good to ~1e-13)
    assert np.all(lower <= ref * (1 + 1e-12) + 1e-300) and np.all(ref <= upper * (1 + 1e-12) + 1e-300)


@pytest.mark.slow
@pytest.mark.parametrize("asymmetric", [False, True])
def test_tangent_bounds_the_divergence_below_at_smaller_eps(asymmetric):
    """D(t') >= tangent_value + (t - t') tangent_slope for t' <= t (convexity's certificate), and it is tight at t."""
    rng = np.random.default_rng(21 + asymmetric)
    k = 24
    uvw, r = random_pairs(rng, k, asymmetric)
    n = rng.choice([2, 7, 40, 300], size=k).astype(float)
    eps = rng.uniform(0.01, 4.0, k)
    pair = js.two_count_pair(uvw[:, 0], uvw[:, 1], uvw[:, 2], r[:, 0], r[:, 1])
    d = hockey_stick_bounds(pair, n, eps)
    tv, ts, lower, qm = (np.asarray(x) for x in (d.tangent_value, d.tangent_slope, d.lower, d.q_mass))
    assert np.all(ts >= 0)
    live = lower > 1e-200  # at t' = t the tangent is the certified lower end; its slope is Q(region)
    assert np.all(tv[live] >= lower[live] * (1 - 1e-12)) and np.all(ts[live] >= qm[live] * (1 - 1e-6))
    for frac in (0.0, 0.01, 0.2, 1.0):
        e2 = eps * (1 - frac)
        ref = np.array([hockey_stick_enum(*uvw[i], r[i, 0], r[i, 1], int(n[i]), e2[i]) for i in range(k)])
        line = tv + (np.exp(eps) - np.exp(e2)) * ts
        assert np.all(line <= ref * (1 + 1e-12) + 1e-300), frac


@pytest.mark.slow
def test_tangent_with_a_truncated_window_against_scipy():
    """Large n (window truncated, partial cells at its ends): the tangent still lies below D."""
    from reference import hockey_stick_window_scipy

    p = math.e**2
    pair = js.stronger_clone_pair(2.0)
    for n, eps in [(1e4, 0.08), (1e6, 0.01)]:
        d = hockey_stick_bounds(pair, n, eps)
        assert float(d.tangent_slope) >= 0.999 * float(d.q_mass) > 0
        for e2 in (eps, 0.99 * eps, 0.8 * eps):
            ref = hockey_stick_window_scipy(p / (p + 1), 1 / (p + 1), 0.0, 1 / (p + 1), int(n), e2)
            line = float(d.tangent_value) + (math.exp(eps) - math.exp(e2)) * float(d.tangent_slope)
            assert line <= ref * (1 + 1e-9)
            assert line >= ref * (1 - 1e-2) if e2 == eps else True


@pytest.mark.slow
@pytest.mark.parametrize("n,r0,r1,c_lo,window", [
    (1e6, 0.1, 0.1, 195904.0, 8192), (300.0, 1e-6, 1e-6, 0.0, 16), (1000.0, 0.3, 0.6, 772.0, 256),
    (50.0, 0.2, 0.1, 0.0, 64), (1e8, 1e-3, 2e-3, 291808.0, 16384), (300.0, 0.5, 0.5, 284.0, 16),
    (300.0, 0.3, 0.7 - 1e-16, 272.0, 32), (40.0, 1e-150, 1e-150, 0.0, 64)])
def test_window_weights_match_loader_within_their_bound(n, r0, r1, c_lo, window):
    """Step-ratio weights against Loader's pmf at every count, within the returned relative bound."""
    from jaxshuffle import _binomial
    from jaxshuffle.divergence import window_weights
    from jaxshuffle.plan import R_FLOOR

    plan = Plan(window, min(window, 512), 4, True)
    W, rel = jax.jit(window_weights, static_argnames="plan")(n, r0, r1, c_lo, plan=plan)
    pi = max(r0, R_FLOOR) + max(r1, R_FLOOR)
    c = c_lo + np.arange(window)
    ref = np.exp(np.asarray(_binomial.log_pmf(jnp.full(window, n - 1.0), jnp.asarray(c), pi, 1.0 - pi)))
    W, rel = np.asarray(W), float(rel)
    assert rel <= 1e-9
    big = ref > 1e-290
    assert np.all(np.abs(W[big] - ref[big]) <= (rel + 2e-10) * ref[big])  # Loader itself is within REL_ERR
    assert np.all(W[~big] <= 1e-280) and np.all(W[c > n - 1] == 0.0)
    if pi == 1.0:
        assert W[c == n - 1] == 1.0 and np.all(W[c < n - 1] == 0.0)


@pytest.mark.slow
def test_matches_mpmath_on_tiny_n():
    rng = np.random.default_rng(3)
    uvw, r = random_pairs(rng, 6)
    n = np.array([1, 2, 3, 4, 5, 6.0])
    eps = np.array([-0.5, 0.0, 0.3, 1.0, 2.5, 6.0])
    got = js.hockey_stick(js.two_count_pair(*uvw.T, r[:, 0], r[:, 1]), n, eps)
    for i in range(6):
        ref = hockey_stick_mpmath(*uvw[i], r[i, 0], r[i, 1], int(n[i]), eps[i])
        assert abs(float(got[i]) - ref) <= 1e-12 * max(ref, 1e-300)


def test_negative_eps_identity_and_tv_at_zero():
    pair = js.vr_pair(3.0, 0.4, 2.0)
    eps = np.array([-1.0, 1.0])
    d = np.asarray(js.hockey_stick(pair, 25.0, eps))
    t = math.exp(-1.0)
    assert d[0] == pytest.approx((1 - t) + t * d[1], rel=1e-12)
    # at eps = 0 it is the total variation distance between P and Q
    ref = hockey_stick_enum(*map(float, (pair.u, pair.v, pair.w, pair.r0, pair.r1)), 25, 0.0)
    assert float(js.hockey_stick(pair, 25.0, 0.0)) == pytest.approx(ref, rel=1e-12)


@pytest.mark.slow
def test_symmetries():
    """max over directions is invariant under swapping the markers; r0 == r1 makes u <-> v free."""
    rng = np.random.default_rng(11)
    uvw, r = random_pairs(rng, 8)
    eps = rng.uniform(0, 2, 8)
    a = js.hockey_stick(js.two_count_pair(*uvw.T, r[:, 0], r[:, 1]), 60.0, eps)
    b = js.hockey_stick(js.two_count_pair(uvw[:, 1], uvw[:, 0], uvw[:, 2], r[:, 1], r[:, 0]), 60.0, eps)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    c = js.hockey_stick(js.two_count_pair(*uvw.T, r[:, 0], r[:, 0]), 60.0, eps)
    d = js.hockey_stick(js.two_count_pair(uvw[:, 1], uvw[:, 0], uvw[:, 2], r[:, 0], r[:, 0]), 60.0, eps)
    np.testing.assert_allclose(c, d, rtol=1e-12)


@pytest.mark.slow
def test_monotone_in_eps_and_n():
    pair = js.vr_pair(np.e**2, 0.5, 4.0)
    eps = np.linspace(0, 2, 41)
    d = np.asarray(js.hockey_stick(pair, 200.0, eps))
    assert np.all(np.diff(d) <= 1e-15)
    clone = js.stronger_clone_pair(1.5)
    dn = np.asarray(js.hockey_stick(clone, np.array([10, 30, 100, 300, 1000.0]), 0.3))
    assert np.all(np.diff(dn) < 0)


def test_infinite_loss_cell_kept_at_p_inf():
    """p = inf: P puts u r0^(n-1) on (n, 0), where Q is 0, so D stays above it for any eps."""
    pair = js.vr_pair(np.inf, 0.6, 2.0)  # u = 0.6, v = 0, w = 0.4, r = 0.3
    n = 6.0
    d = float(js.hockey_stick(pair, n, 40.0))
    floor = 0.6 * 0.3 ** (n - 1)
    assert d >= floor * (1 - 1e-12)
    assert d == pytest.approx(hockey_stick_enum(0.6, 0.0, 0.4, 0.3, 0.3, int(n), 40.0), rel=1e-10)


@pytest.mark.slow
def test_large_n_band_is_tight_and_contains_scipy_reference():
    from reference import hockey_stick_window_scipy

    p = math.e
    pair = js.stronger_clone_pair(1.0)
    for n, eps in [(1e4, 0.043), (1e6, 0.005)]:
        d = hockey_stick_bounds(pair, n, eps)
        ref = hockey_stick_window_scipy(p / (p + 1), 1 / (p + 1), 0.0, 1 / (p + 1), int(n), eps)
        assert float(d.lower) <= ref * (1 + 1e-9) and ref <= float(d.upper) * (1 + 1e-9)
        assert (float(d.upper) - float(d.lower)) <= 1e-6 * float(d.value)


def test_bad_input_raises_naming_the_parameter():
    pair = js.stronger_clone_pair(1.0)
    with pytest.raises(ValueError, match="^n"):
        js.hockey_stick(pair, 0.0, 0.1)
    with pytest.raises(ValueError, match="^n"):
        js.hockey_stick(pair, 2.5, 0.1)
    with pytest.raises(ValueError, match="^eps"):
        js.hockey_stick(pair, 10.0, np.nan)
    with pytest.raises(ValueError, match="shapes do not broadcast"):
        js.hockey_stick(js.stronger_clone_pair(np.ones(3)), np.ones(2) * 5, 0.1)
    with pytest.raises(ValueError, match="^r0"):
        js.hockey_stick(js.TwoCountPair(*(jnp.asarray(x) for x in (0.5, 0.5, 0.0, np.nan, 0.2))), 10.0, 0.1)


@pytest.mark.slow
def test_jit_convention_invalid_points_give_no_claim():
    plan = Plan(window=16, block=16, max_step=2, symmetric=False)
    u = jnp.array([0.6, 0.6, 0.6, 0.6])
    v = jnp.array([0.3, 0.3, 0.3, 0.5])  # last one: u + v + w != 1
    w = jnp.array([0.1, 0.1, 0.1, 0.1])
    r0 = jnp.array([0.2, 0.2, np.nan, 0.2])
    r1 = jnp.array([0.2, 0.2, 0.2, 0.2])
    n = jnp.array([5.0, 0.0, 5.0, 5.0])  # n = 0 invalid
    eps = jnp.array([0.5, 0.5, 0.5, 0.5])
    d = jax.jit(divergence_with_plan, static_argnames="plan")((u, v, w, r0, r1), n, eps, jnp.zeros(4), plan=plan)
    assert not np.any(np.isnan(np.asarray(d.value)))
    np.testing.assert_array_equal(np.asarray(d.upper)[1:], np.inf)
    np.testing.assert_array_equal(np.asarray(d.lower)[1:], 0.0)
    assert float(d.value[0]) == pytest.approx(hockey_stick_enum(0.6, 0.3, 0.1, 0.2, 0.2, 5, 0.5), rel=1e-10)


@pytest.mark.slow
def test_gradients_match_finite_differences():
    """d/d(u, r0, r1, eps) of the divergence, including the asymmetric tail anchors."""
    n, e = 2000.0, 0.03

    def d(u, r0, r1, eps):
        return js.hockey_stick(js.two_count_pair(u, 0.3, 0.7 - u, r0, r1), n, eps)

    args = (0.5, 0.01, 0.011, e)
    grads = jax.grad(d, argnums=(0, 1, 2, 3))(*args)
    for i, g in enumerate(grads):
        h = 1e-7 * max(abs(args[i]), 1e-2)
        hi, lo = list(args), list(args)
        hi[i] += h
        lo[i] -= h
        fd = (float(d(*hi)) - float(d(*lo))) / (2 * h)
        assert float(g) == pytest.approx(fd, rel=1e-5), i


@pytest.mark.slow
@pytest.mark.parametrize("linear", [True, False])
def test_linear_and_log_neighbour_paths_match_enumeration(linear):
    """Both neighbour-pmf paths of the kernel (Plan.linear) on the same points, against enumeration.

    Includes extreme r0/r1 (where linear_safe fails: the linear path must then stay sound,
    its band widened by what underflow can hide) and steps up to the plan's max_step.
    """
    rng = np.random.default_rng(11)
    k = 24
    uvw, r = random_pairs(rng, k, asymmetric=True)
    r[:3, 1] = [1e-9, 1e-30, 1e-200]  # r0/r1 far from 1
    n = rng.choice([2, 7, 40, 300], size=k).astype(float)
    eps = rng.uniform(0.0, 6.0, size=k)
    plan = Plan(window=512, block=256, max_step=16, symmetric=False, linear=linear)
    d = divergence_with_plan(tuple(jnp.asarray(x) for x in (*uvw.T, r[:, 0], r[:, 1])), jnp.asarray(n),
                             jnp.asarray(eps), jnp.zeros(k), plan)
    ref = np.array([hockey_stick_enum(*uvw[i], r[i, 0], r[i, 1], int(n[i]), eps[i]) for i in range(k)])
    value, lower, upper = (np.asarray(x) for x in (d.value, d.lower, d.upper))
    assert not np.asarray(d.step_overflow).any()
    assert np.all(lower <= ref * (1 + 1e-12) + 1e-300) and np.all(ref <= upper * (1 + 1e-12) + 1e-300)
    big = ref > 1e-250
    assert np.all(np.abs(value - ref)[big] <= 1e-10 * ref[big])
    safe = np.asarray(js.plan.linear_safe(n, r[:, 0], r[:, 1], plan.max_step))
    assert not safe[:3].any() and safe[3:].all()
    # where the linear path is safe its band is as tight as the log path's
    width = (upper - lower)[safe & big] / ref[safe & big]
    assert np.all(width <= 1e-6)


@pytest.mark.slow
def test_step_ratios_out_of_float_range_flag_the_point():
    """A linear plan forced on a point it is not made for (linear_safe fails) makes no claim, never NaN."""
    from jaxshuffle.divergence import _log_base_by_steps
    c = jnp.arange(1000.0, 1017.0)  # 16 steps of +8 in the base: 8 ratios of ~1e200 each per step
    base = jnp.minimum(jnp.arange(17.0) * 8.0, c)
    log_base, err, broken = _log_base_by_steps(c, base, 1.0 - 1e-200, 1e-200, 8, 16)
    assert bool(broken) and np.all(np.isfinite(np.asarray(log_base))) and np.all(np.isfinite(np.asarray(err)))
    ok_base, _, ok = _log_base_by_steps(c, jnp.minimum(jnp.arange(17.0) * 4.0 + 400.0, c), 0.4, 0.6, 8, 16)
    assert not bool(ok)
    # the steps reproduce Loader's pmfs (as the enumeration tests check end to end)
    ref = js._binomial.log_pmf(c, jnp.minimum(jnp.arange(17.0) * 4.0 + 400.0, c), 0.4, 0.6)
    np.testing.assert_allclose(np.asarray(ok_base), np.asarray(ref), rtol=0, atol=1e-10)


def test_materialize_is_the_identity_with_identity_derivative():
    """The fusion barrier returns its input unchanged (NaN-first inputs take two trips) under
    jit and vmap, and passes derivatives straight through in both modes."""
    from jaxshuffle._numerics import materialize as _materialize

    x = (jnp.array([np.nan, 1.5, -np.inf]), jnp.array([2.0, 0.0, 3.0]))
    for f in (_materialize, jax.jit(_materialize), jax.vmap(_materialize)):
        out = f(x)
        for a, b in zip(out, x):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    g = jax.grad(lambda z: jnp.sum(_materialize(z) ** 2))(jnp.array([1.0, -2.0]))
    np.testing.assert_array_equal(np.asarray(g), [2.0, -4.0])
    _, t = jax.jvp(_materialize, (jnp.array([1.0, 2.0]),), (jnp.array([3.0, 4.0]),))
    np.testing.assert_array_equal(np.asarray(t), [3.0, 4.0])
