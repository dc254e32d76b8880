"""WitchHat (randomizers.witchhat) against numerical integration, brute force and sampling.

References are written here from the supplement's definition (sections D, E), not from the module:
the unnormalised density ``g(z) = exp(-(2/f) min(|z - x|, R))`` on ``[-b - R, b + R]``, ``R = m f/2``,
and the estimator ``x_hat = N z / (f (1 - e^{-m} - m e^{-m}))`` with ``N`` the integral of ``g``.
"""
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

import jaxshuffle as js
import jaxshuffle.randomizers as R
from jaxshuffle.metric import local_metrics_algorithm1, local_metrics_algorithm3
from jaxshuffle.randomizers.clone import CloneProof
from jaxshuffle.randomizers.witchhat import (
    WitchHat,
    best_f,
    witchhat,
    witchhat_from_candidates,
    witchhat_from_local_metric,
    witchhat_params,
)

pytestmark = pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")

GRID = list(itertools.product([0.5, 2.0, 6.0], [0.2, 1.0, 3.0], [0.5, 1.0, 4.0]))  # (m, f, b)


def _g(z, x, m, f, b):
    """Unnormalised density, straight from the definition (numpy)."""
    r = m * f / 2
    inside = np.abs(z) <= b + r
    return np.where(inside, np.where(np.abs(z - x) <= r, np.exp(-2 * np.abs(z - x) / f), np.exp(-m)), 0.0)


def _quad(fn, m, f, b, x, extra=()):
    r = m * f / 2
    pts = sorted({-b - r, x - r, x, x + r, b + r, *extra})
    inner = [p for p in pts if -b - r < p < b + r]
    return integrate.quad(fn, -b - r, b + r, points=inner or None, limit=400, epsabs=0, epsrel=1e-12)[0]


def _moments(m, f, b, x):
    g = lambda z: float(_g(z, x, m, f, b))
    n0 = _quad(g, m, f, b, x)
    n1 = _quad(lambda z: z * g(z), m, f, b, x)
    n2 = _quad(lambda z: z * z * g(z), m, f, b, x)
    return n0, n1 / n0, n2 / n0


@pytest.mark.parametrize("m,f,b", GRID)
def test_variance_matches_quadrature(m, f, b):
    """Normaliser, unbiasedness and the exact variance (docs: WitchHat, exact variance) to 1e-9."""
    w = witchhat(m, f, b)
    c = f * (1 - math.exp(-m) - m * math.exp(-m))  # the supplement's estimator denominator
    for x in (-b, -0.3 * b, 0.0, 0.7 * b, b):
        n0, ez, ez2 = _moments(m, f, b, x)
        assert float(w.normaliser) == pytest.approx(n0, rel=1e-11)
        assert n0 * ez / c == pytest.approx(x, abs=1e-10 * b)  # unbiased
        assert float(w.estimate(ez)) == pytest.approx(n0 * ez / c, rel=1e-11, abs=1e-14)
        assert float(w.variance(x)) == pytest.approx((n0 / c) ** 2 * (ez2 - ez * ez), rel=1e-9)
        dens = lambda z, x=x: float(w.density(z, x))
        assert dens(x) == pytest.approx(1 / n0, rel=1e-12)
        assert dens(b + m * f / 2 + 1e-9) == 0.0


@pytest.mark.parametrize("m,f,b", GRID[::4])
def test_cdf_and_quantile_against_quadrature(m, f, b):
    w = witchhat(m, f, b)
    r = m * f / 2
    x = 0.4 * b
    n0 = _quad(lambda z: float(_g(z, x, m, f, b)), m, f, b, x)
    for z in np.linspace(-b - r, b + r, 13)[1:-1]:
        ref = integrate.quad(lambda t: float(_g(t, x, m, f, b)), -b - r, z,
                             points=[p for p in (x - r, x, x + r) if -b - r < p < z] or None,
                             limit=400, epsabs=0, epsrel=1e-12)[0] / n0
        assert float(w.cdf(z, x)) == pytest.approx(ref, rel=1e-10, abs=1e-14)
    u = np.linspace(0, 1, 10_001)[:-1]
    np.testing.assert_allclose(np.asarray(w.cdf(w.quantile(u, x), x)), u, rtol=0, atol=1e-12)


def test_the_supplements_bound_against_the_exact_variance():
    """The printed bound (its ``6 m^2 f`` term has the units of a length) is not always a bound.

    On this grid of 27 (m, f, b) x 5 inputs it lies below the exact variance exactly once:
    m = 6, f = 3, b = 4, x = 0 (by 1.6 %), where the dropped ``m^2 f^2`` term matters (f > 1).
    The corrected bound (``6 m^2 f^2``) is above the exact variance everywhere.
    """
    below = []
    for m, f, b in GRID:
        w = witchhat(m, f, b)
        for x in np.linspace(-b, b, 5):
            exact = float(w.variance(x))
            assert float(w.variance_bound_corrected(x)) >= exact * (1 - 1e-13)
            ratio = float(w.variance_bound(x)) / exact
            if ratio < 1 - 1e-12:
                below.append((m, f, b, float(x), round(ratio, 3)))
    assert below == [(6.0, 3.0, 4.0, 0.0, 0.984)]


def test_printed_bound_fails_where_the_derivation_says():
    """At x = 0 the printed bound is below the exact variance iff b m^2 (f - 1) > f^2 (1 + m + m^2/2)."""
    for m, f, b in itertools.product([0.5, 1.0, 3.0, 8.0], [0.5, 1.5, 4.0], [0.1, 1.0, 10.0, 1000.0]):
        w = witchhat(m, f, b)
        fails = float(w.variance_bound(0.0)) < float(w.variance(0.0))
        lhs, rhs = b * m * m * (f - 1), f * f * (1 + m + m * m / 2)
        if abs(lhs - rhs) > 1e-6 * rhs:
            assert fails == (lhs > rhs), (m, f, b)


@pytest.mark.parametrize("m,f,b,x", [(2.0, 0.5, 1.0, 0.3), (0.5, 1.0, 1.0, -1.0), (6.0, 0.2, 4.0, 2.5)])
def test_sampler_passes_ks_and_its_mean_is_unbiased(m, f, b, x):
    w = witchhat(m, f, b)
    z = np.asarray(w.sample(jax.random.PRNGKey(7), jnp.full(100_000, x)))
    ks = stats.kstest(z, lambda t: np.asarray(w.cdf(t, x)))
    assert ks.pvalue > 1e-3
    est = np.asarray(w.estimate(z))
    assert abs(est.mean() - x) < 5 * math.sqrt(float(w.variance(x)) / est.size)
    assert est.var() == pytest.approx(float(w.variance(x)), rel=0.05)
    assert float(w.mean_estimate(z)) == pytest.approx(est.mean(), rel=1e-12)


@pytest.mark.slow
def test_sampler_is_vmapped_over_inputs():
    w = witchhat(2.0, 0.5, 1.0)
    xs = jnp.linspace(-1, 1, 7)
    z = w.sample(jax.random.PRNGKey(0), jnp.broadcast_to(xs, (20_000, 7)))
    est = np.asarray(w.estimate(z)).mean(axis=0)
    se = np.sqrt(np.asarray(w.variance(xs)) / 20_000)
    assert np.all(np.abs(est - np.asarray(xs)) < 5 * se)
    z2 = jax.jit(jax.vmap(w.sample, in_axes=(0, 0)))(jax.random.split(jax.random.PRNGKey(1), 7), xs)
    assert z2.shape == (7,) and bool(jnp.all(jnp.abs(z2) <= 1 + 0.5)) and bool(jnp.all(jnp.isfinite(z2)))


@pytest.mark.parametrize("m,f,b", GRID[::3])
def test_density_ratio_never_exceeds_the_metric_and_is_tight(m, f, b):
    w = witchhat(m, f, b)
    r = m * f / 2
    xs = np.linspace(-b, b, 9)
    z = np.union1d(np.linspace(-b - r, b + r, 20001), xs)
    dens = _g(z[None, :], xs[:, None], m, f, b)
    for i, j in itertools.combinations(range(xs.size), 2):
        logratio = np.max(np.abs(np.log(dens[i] / dens[j])))
        d = float(w.metric(xs[i], xs[j]))
        assert d == pytest.approx(min(m, 2 * abs(xs[i] - xs[j]) / f), rel=1e-14)
        assert logratio <= d * (1 + 1e-12) + 1e-12
        assert logratio >= d * (1 - 1e-9)  # attained at z = x_i
        assert d <= float(w.eps0) * (1 + 1e-15)
    assert float(w.eps0) == pytest.approx(min(m, 4 * b / f), rel=1e-15)


@pytest.mark.parametrize("m,f,b", GRID)
def test_total_variation_closed_form_against_quadrature(m, f, b):
    w = witchhat(m, f, b)
    n0 = float(w.normaliser)
    for d in (0.3 * b, b, 2 * b):
        a0, a1 = -b, -b + d
        r = m * f / 2
        diff = lambda z, a0=a0, a1=a1: abs(float(_g(z, a0, m, f, b)) - float(_g(z, a1, m, f, b))) / n0
        tv = 0.5 * _quad(diff, m, f, b, a0, extra=(a1 - r, a1, a1 + r, 0.5 * (a0 + a1)))
        assert float(w.total_variation(d)) == pytest.approx(tv, rel=1e-9, abs=1e-14)
    assert float(w.total_variation()) == pytest.approx(float(w.total_variation(2 * b)), rel=1e-15)
    p = math.exp(float(w.eps0))
    assert float(w.total_variation()) <= (p - 1) / (p + 1) * (1 + 1e-12)
    tvs = np.asarray(w.total_variation(np.linspace(0, 2 * b, 50)))
    assert np.all(np.diff(tvs) >= -1e-15) and tvs[0] == 0.0


@settings(derandomize=True, deadline=None, max_examples=60)
@given(st.floats(0.01, 50.0), st.floats(0.01, 100.0), st.floats(0.01, 100.0), st.floats(-1.0, 1.0))
def test_properties_over_random_parameters(m, f, b, xfrac):
    w = witchhat(m, f, b)
    x = xfrac * b
    var = float(w.variance(x))
    assert var > 0 and math.isfinite(var)
    assert float(w.variance_bound_corrected(x)) >= var * (1 - 1e-12)
    assert float(w.variance(0.0)) <= var * (1 + 1e-12)  # increases in |x|
    p = math.exp(float(w.eps0))
    assert 0 <= float(w.total_variation()) <= (p - 1) / (p + 1) * (1 + 1e-12)
    u = np.array([0.0, 1e-9, 0.25, 0.5, 0.75, 1 - 1e-9])
    np.testing.assert_allclose(np.asarray(w.cdf(w.quantile(u, x), x)), u, atol=1e-9)
    vr = w.vr_params()
    assert float(vr.q) == float(vr.p) == pytest.approx(p, rel=1e-15)


def test_mean_mse_is_the_average_variance():
    w = witchhat(2.0, 0.5, 1.0)
    xs = np.linspace(-1, 1, 11)
    direct = np.mean(np.asarray(w.variance(xs))) / 1000
    assert float(w.mean_mse(1000, np.mean(xs**2))) == pytest.approx(direct, rel=1e-12)


def test_amplify_certifies_witchhat_and_the_catalog_row_agrees():
    w = R.witchhat(2.0, 0.5, 1.0)
    rep = js.amplify(w.vr_params(), 10_000, 1e-6)
    assert bool(rep.certified) and np.isfinite(float(rep.upper))
    assert not bool(rep.paper_certified)  # beta = TV(-b, b) is below the worst case: w > 0
    clone = js.epsilon(js.standard_clone_pair(float(w.eps0)), 10_000, 1e-6)  # the clone proven for it
    assert int(rep.clone_proof) == int(CloneProof.STANDARD)
    assert float(clone.lower) * (1 - 1e-6) <= float(rep.upper) <= float(clone.upper) * (1 + 1e-6)
    row = R.build("witchhat", m=2.0, f=0.5, b=1.0)
    for name in ("p", "beta", "q"):
        np.testing.assert_array_equal(np.asarray(getattr(row, name)), np.asarray(getattr(w.vr_params(), name)))
    assert float(row.beta) == pytest.approx(float(w.total_variation()), rel=1e-15)


@pytest.mark.parametrize("kwargs,name", [({"m": 0.0, "f": 1.0, "b": 1.0}, "m"), ({"m": 701.0, "f": 1.0, "b": 1.0}, "m"),
                                         ({"m": 1.0, "f": -1.0, "b": 1.0}, "f"), ({"m": 1.0, "f": 1.0, "b": 0.0}, "b"),
                                         ({"m": math.nan, "f": 1.0, "b": 1.0}, "m")])
def test_bad_parameters_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name}: must be"):
        witchhat(**kwargs)
    with pytest.raises(ValueError, match=rf"^{name}: must be"):
        witchhat_params(**kwargs)


def test_bad_inputs_and_traced_invalid_points():
    w = witchhat(1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"^x: must lie in \[-b, b\] = \[-1, 1\], got 2"):
        w.sample(jax.random.PRNGKey(0), jnp.array([2.0]))
    for method in (w.variance, w.variance_bound, w.estimate and w.variance_bound_corrected):
        with pytest.raises(ValueError, match=r"^x: must lie"):
            method(-1.5)
    with pytest.raises(ValueError, match=r"^a: must lie"):
        w.metric(3.0, 0.0)
    out = jax.jit(lambda m: witchhat(m, 1.0, 1.0).variance(0.2))(-1.0)
    assert np.isnan(float(out))
    vr = jax.jit(lambda f: witchhat_params(1.0, f, 1.0))(0.0)
    assert np.isnan(float(vr.p))
    assert np.isnan(float(jax.jit(lambda x: w.sample(jax.random.PRNGKey(0), x))(3.0)))


def test_mean_mse_is_differentiable():
    g = jax.grad(lambda mf: WitchHat(mf[0], mf[1], 1.0).mean_mse(100.0, 0.3))(jnp.array([2.0, 0.5]))
    h = 1e-6
    for i in range(2):
        e = np.zeros(2)
        e[i] = h
        fd = (float(WitchHat(*(2.0 + e[0], 0.5 + e[1]), 1.0).mean_mse(100.0, 0.3))
              - float(WitchHat(*(2.0 - e[0], 0.5 - e[1]), 1.0).mean_mse(100.0, 0.3))) / (2 * h)
        assert float(g[i]) == pytest.approx(fd, rel=1e-6)


def test_best_f_is_a_minimum():
    for m in (0.5, 1.0, 3.0, 10.0):
        for s2 in (0.0, 0.5):
            f = float(best_f(m, 1.0, s2))
            obj = lambda ff, m=m, s2=s2: np.asarray(WitchHat(m, jnp.asarray(ff), 1.0).mean_mse(1.0, s2))
            grid = np.geomspace(1e-3, 1e3, 20_001)
            at = float(obj(f))
            assert at <= obj(grid).min() * (1 + 1e-9)
            assert at <= obj(np.array([f * 1.001, f / 1.001])).min()


@pytest.mark.slow
@pytest.mark.parametrize("solver", [local_metrics_algorithm1, local_metrics_algorithm3])
def test_local_metric_candidates_map_to_feasible_witchhats(solver):
    b, n, delta = 1.0, 100_000, 1e-6
    pts = np.linspace(-b, b, 9)
    target = 0.5 * np.abs(pts[:, None] - pts[None, :])  # D#(a, b) = 0.5 |a - b|
    cands = solver(target, n, delta, num=16)
    m, f, amp = witchhat_from_candidates(cands, pts, b, n, delta, 1 if solver is local_metrics_algorithm1 else 2)
    m, f, amp = np.asarray(m), np.asarray(f), np.asarray(amp)
    assert np.all(np.isfinite(m)) and np.all(np.isfinite(f))
    local = np.asarray(cands.local)
    for i in range(m.size):
        w = witchhat(m[i], f[i], b)
        d_wh = np.asarray(w.metric(pts[:, None], pts[None, :]))
        assert np.all(d_wh <= local[i] * (1 + 1e-12) + 1e-15)
        assert float(w.eps0) <= local[i].max() * (1 + 1e-12)
    assert np.all(amp <= np.asarray(cands.amplified) * (1 + 1e-12) + 1e-15)
    assert np.all(amp <= target * (1 + 1e-9) + 1e-15)
    one = witchhat_from_local_metric(pts, local[0], b)
    assert float(one[0]) == pytest.approx(m[0]) and float(one[1]) == pytest.approx(f[0])
