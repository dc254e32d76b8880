"""Ready-made utilities (jaxshuffle.utility) against exact enumeration, distributions and simulation."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from jaxshuffle import utility as U
from jaxshuffle.randomizers.witchhat import witchhat


def _fd(fn, x, h=1e-6):
    return (float(fn(x + h)) - float(fn(x - h))) / (2 * h)


@pytest.mark.parametrize("k,n,count,eps0", [(3, 12, 4, 1.0), (10, 20, 6, 0.5), (5, 15, 0, 2.5)])
def test_grr_item_mse_equals_exact_enumeration(k, n, count, eps0):
    """Fixed data: ``count`` users hold the item. Distribution of the report count by convolution."""
    e = math.exp(eps0)
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    pmf = np.convolve(stats.binom.pmf(np.arange(count + 1), count, p),
                      stats.binom.pmf(np.arange(n - count + 1), n - count, q))
    c = np.arange(n + 1)
    est = (c / n - q) / (p - q)
    f = count / n
    mse = float(np.sum(pmf * (est - f) ** 2))
    assert float(np.sum(pmf * est)) == pytest.approx(f, abs=1e-12)  # unbiased
    assert float(U.grr_frequency_mse(k, n, f)(eps0)) == pytest.approx(mse, rel=1e-10)


def test_grr_total_is_the_sum_over_items():
    k, n, eps0 = 6, 30, 1.3
    counts = np.array([10, 7, 5, 4, 4, 0])
    per_item = sum(float(U.grr_frequency_mse(k, n, c / n)(eps0)) for c in counts)
    assert float(U.grr_frequency_mse_total(k, n)(eps0)) == pytest.approx(per_item, rel=1e-12)
    counts2 = np.array([30, 0, 0, 0, 0, 0])  # independent of the data
    per_item2 = sum(float(U.grr_frequency_mse(k, n, c / n)(eps0)) for c in counts2)
    assert per_item2 == pytest.approx(per_item, rel=1e-12)


def test_binary_rr_mean_mse_equals_the_bernoulli_variance():
    """x_i in [0, 1], randomized rounding then RR: each report is Bernoulli(q + x_i (p - q))."""
    rng = np.random.default_rng(0)
    for eps0 in (0.3, 1.0, 4.0):
        e = math.exp(eps0)
        p, q = e / (e + 1), 1 / (e + 1)
        for x in (rng.integers(0, 2, 50).astype(float), rng.uniform(0, 1, 50)):
            pi = q + x * (p - q)
            direct = np.sum(pi * (1 - pi)) / (x.size * (p - q)) ** 2
            spread = float(np.mean(x * (1 - x)))
            assert float(U.binary_rr_mean_mse(x.size, spread)(eps0)) == pytest.approx(direct, rel=1e-12)


def test_laplace_mean_mse_is_the_laplace_variance():
    for eps0, width, n in ((0.5, 1.0, 10), (2.0, 2.0, 1000)):
        assert float(U.laplace_mean_mse(n, width)(eps0)) == pytest.approx(
            stats.laplace(scale=width / eps0).var() / n, rel=1e-14)


def test_witchhat_mse_against_quadrature_and_simulation():
    m, f, b, n = 2.0, 0.7, 1.0, 50
    xs = np.linspace(-1, 1, n)
    w = witchhat(m, f, b)
    r = m * f / 2
    c = f * (1 - math.exp(-m) - m * math.exp(-m))
    var = []
    for x in xs[::7]:
        g = lambda z, x=x: math.exp(-2 * min(abs(z - x), r) / f)
        pts = [p for p in (x - r, x, x + r) if -b - r < p < b + r]
        mom = [integrate.quad(lambda z, j=j, g=g: z ** j * g(z), -b - r, b + r, points=pts, limit=200, epsabs=0,
                              epsrel=1e-12)[0] for j in range(3)]
        var.append((mom[0] / c) ** 2 * (mom[2] / mom[0] - (mom[1] / mom[0]) ** 2))
    s2 = float(np.mean(xs[::7] ** 2))
    assert float(U.witchhat_mse(m, f, b, len(var), s2)) == pytest.approx(np.mean(var) / len(var), rel=1e-9)
    # simulation: 4000 repetitions of the mean of n shuffled reports
    z = w.sample(jax.random.PRNGKey(3), jnp.broadcast_to(jnp.asarray(xs), (4000, n)))
    err = np.asarray(w.mean_estimate(jax.random.permutation(jax.random.PRNGKey(4), z, axis=1))) - xs.mean()
    mse = float(U.witchhat_mse(m, f, b, n, float(np.mean(xs ** 2))))
    assert abs(err.mean()) < 5 * math.sqrt(mse / err.size)
    assert np.mean(err ** 2) == pytest.approx(mse, rel=0.1)  # 4000 draws: sd of the estimate ~ 2.2 %


def test_witchhat_mean_mse_parameterisation_and_best_ratio():
    b, n, s2 = 1.0, 100, 1 / 3
    for eps0 in (0.25, 1.0, 4.0):
        for kw, (m, f) in (({"m_ratio": 2.0}, (2.0 * eps0, 4 * b / eps0)),
                           ({"f_ratio": 0.3}, (eps0, 0.3 * 4 * b / eps0))):
            w = witchhat(m, f, b)
            assert float(w.eps0) == pytest.approx(eps0, rel=1e-14)
            assert float(U.witchhat_mean_mse(b, n, s2, **kw)(eps0)) == pytest.approx(float(w.mean_mse(n, s2)),
                                                                                  rel=1e-14)
        m, f = U.witchhat_eps0_params(eps0, b, n, s2)
        assert float(witchhat(m, f, b).eps0) == pytest.approx(eps0, rel=1e-12)
    with pytest.raises(ValueError, match="^m_ratio, f_ratio: give at most one"):
        U.witchhat_mean_mse(b, n, s2, m_ratio=2.0, f_ratio=0.5)


@pytest.mark.parametrize("eps0", [0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 12.0])
def test_witchhat_best_ratio_beats_or_matches_laplace(eps0):
    """The optimised MSE is the minimum over both branches (checked on dense grids: unimodal in
    each), never above Laplace at the same eps0, and well below it at small and at large eps0."""
    b, n, s2 = 1.0, 1, 1 / 3
    lap = float(U.laplace_mean_mse(n, 2 * b)(eps0))
    best = float(U.witchhat_mean_mse(b, n, s2)(eps0))
    kap = np.geomspace(1, min(1e3, 700 / eps0), 4000)
    phi = np.geomspace(1e-12, 1, 4000)
    grid0 = np.asarray(witchhat(kap * eps0, 4 * b / eps0, b).mean_mse(n, s2)).min()
    grid1 = np.asarray(witchhat(eps0, phi * 4 * b / eps0, b).mean_mse(n, s2)).min()
    assert best <= min(grid0, grid1) * (1 + 1e-9)
    assert best >= min(grid0, grid1) * (1 - 1e-4)
    assert best <= lap * (1 + 1e-9)
    if eps0 <= 0.25 or eps0 >= 8:
        assert best < 0.9 * lap


@pytest.mark.parametrize("make", [
    lambda: U.grr_frequency_mse(10, 1000, 0.1), lambda: U.grr_frequency_mse_total(10, 1000),
    lambda: U.binary_rr_mean_mse(1000, 0.1), lambda: U.laplace_mean_mse(1000, 2.0),
    lambda: U.witchhat_mean_mse(1.0, 1000, 0.3, m_ratio=3.0), lambda: U.witchhat_mean_mse(1.0, 1000, 0.3, f_ratio=0.2)])
def test_utilities_are_differentiable_and_jit(make):
    u = make()
    for eps0 in (0.5, 1.7):
        g = float(jax.grad(u)(jnp.float64(eps0)))
        assert g == pytest.approx(_fd(u, eps0), rel=1e-5)
        assert g < 0  # more budget, less error
        assert float(jax.jit(u)(eps0)) == pytest.approx(float(u(eps0)), rel=1e-12)
    v = jnp.array([0.5, 1.7])
    assert float(u(v)) == pytest.approx(float(u(0.5)) + float(u(1.7)), rel=1e-12)


@pytest.mark.slow
def test_best_ratio_gradient_is_the_envelope_gradient():
    """The optimum over the ratios is flat (the ratio found jumps between nearby eps0), so a finite
    difference of the optimised value is noise-limited; its gradient is d MSE/d eps0 at the ratio found."""
    u = U.witchhat_mean_mse(1.0, 1000, 0.3)
    for eps0 in (0.3, 1.7, 6.0):
        m, f = (float(v) for v in U.witchhat_eps0_params(eps0, 1.0, 1000, 0.3))
        kw = {"m_ratio": m / eps0} if f == pytest.approx(4 / eps0, rel=1e-14) else {"f_ratio": f * eps0 / 4}
        fixed = U.witchhat_mean_mse(1.0, 1000, 0.3, **kw)
        assert float(u(eps0)) == pytest.approx(float(fixed(eps0)), rel=1e-12)
        assert float(jax.grad(u)(jnp.float64(eps0))) == pytest.approx(_fd(fixed, eps0), rel=1e-5)
        assert float(jax.jit(u)(eps0)) == pytest.approx(float(u(eps0)), rel=1e-12)


def test_weighted_sum_with_a_users_own_function():
    grr = U.grr_frequency_mse_total(10, 1000)
    own = lambda e: jnp.sum(jnp.square(e))
    lap = U.laplace_mean_mse(500)
    u = U.weighted_sum([grr, own, lap], weights=[1.0, 0.5, 2.0], sizes=[2, 1, 1])
    eps = jnp.array([0.5, 1.0, 2.0, 0.7])
    want = float(grr(eps[:2])) + 0.5 * 4.0 + 2.0 * float(lap(0.7))
    assert float(u(eps)) == pytest.approx(want, rel=1e-14)
    g = jax.grad(u)(eps)
    assert float(g[2]) == pytest.approx(0.5 * 2 * 2.0, rel=1e-14)
    with pytest.raises(ValueError, match="^eps0: must have 4 entries"):
        u(jnp.ones(3))
    with pytest.raises(ValueError, match="^weights: must have shape"):
        U.weighted_sum([grr, lap], weights=[1.0])
    with pytest.raises(ValueError, match="^sizes: must have one entry per utility"):
        U.weighted_sum([grr, lap], sizes=[1])


def test_second_moment():
    x = np.array([-1.0, 0.5, 2.0])
    assert float(U.second_moment(x)) == pytest.approx(np.mean(x ** 2), rel=1e-15)
    assert float(U.second_moment(x, [1, 2, 1])) == pytest.approx((1 + 0.5 + 4) / 4, rel=1e-15)


@settings(derandomize=True, deadline=None, max_examples=40)
@given(st.floats(0.05, 8.0), st.integers(2, 50), st.floats(0.0, 1.0))
def test_grr_item_mse_properties(eps0, k, f):
    n = 1000
    item = float(U.grr_frequency_mse(k, n, f)(eps0))
    zero = float(U.grr_frequency_mse(k, n, 0.0)(eps0))
    assert item >= zero * (1 - 1e-12) > 0  # k >= 2: the frequency term is non-negative
    assert float(U.grr_frequency_mse_total(k, n)(eps0)) >= item * (1 - 1e-12)
