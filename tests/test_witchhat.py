"""WitchHat (randomizers.witchhat) against numerical integration, brute force and sampling."""
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

import jaxshuffle as js
import jaxshuffle.randomizers as R
from jaxshuffle.randomizers.witchhat import witchhat

GRID = list(itertools.product([0.5, 2.0, 6.0], [0.2, 1.0, 3.0], [0.5, 1.0, 4.0]))  # (m, f, b)


def _quad(fn, w, x):
    r, b = float(w.reach), float(w.b)
    pts = sorted({-b - r, x - r, x, x + r, b + r})
    return integrate.quad(fn, -b - r, b + r, points=pts[1:-1], limit=400, epsabs=0, epsrel=1e-12)[0]


@pytest.mark.parametrize("m,f,b", GRID)
def test_normaliser_mean_and_exact_variance_against_quadrature(m, f, b):
    w = witchhat(m, f, b)
    c = float(w.normaliser) / (f * (1 - math.exp(-m) - m * math.exp(-m)))
    for x in (-b, -0.3 * b, 0.0, 0.7 * b, b):
        dens = lambda z: float(w.density(z, x))  # noqa: E731
        assert _quad(dens, w, x) == pytest.approx(1.0, rel=1e-11)
        ez = _quad(lambda z: z * dens(z), w, x)
        ez2 = _quad(lambda z: z * z * dens(z), w, x)
        assert c * ez == pytest.approx(x, abs=1e-10 * b)  # unbiased
        assert float(w.variance(x)) == pytest.approx(c * c * (ez2 - ez * ez), rel=1e-9)


def test_the_supplements_bound_against_the_exact_variance():
    """The printed bound (its ``6 m^2 f`` term has the units of a length) is not always a bound.

    On this grid of 27 (m, f, b) x 5 inputs it lies below the exact variance exactly once:
    m = 6, f = 3, b = 4, x = 0 (by 1.6 %), where the dropped ``m^2 f^2`` term matters (f > 1).
    """
    below = []
    for m, f, b in GRID:
        w = witchhat(m, f, b)
        for x in np.linspace(-b, b, 5):
            ratio = float(w.variance_bound(x)) / float(w.variance(x))
            if ratio < 1 - 1e-12:
                below.append((m, f, b, float(x), round(ratio, 3)))
    assert below == [(6.0, 3.0, 4.0, 0.0, 0.984)]


@pytest.mark.parametrize("m,f,b,x", [(2.0, 0.5, 1.0, 0.3), (0.5, 1.0, 1.0, -1.0), (6.0, 0.2, 4.0, 2.5)])
def test_sampler_passes_ks_and_its_mean_is_unbiased(m, f, b, x):
    w = witchhat(m, f, b)
    z = np.asarray(w.sample(jax.random.PRNGKey(7), jnp.full(100_000, x)))
    r = float(w.reach)
    grid = np.linspace(-b - r, b + r, 4001)
    cdf_grid = np.concatenate([[0.0], np.cumsum(np.diff(grid) * 0.5 * (np.asarray(w.density(grid[1:], x))
                                                                      + np.asarray(w.density(grid[:-1], x))))])
    ks = stats.kstest(z, lambda t: np.interp(t, grid, cdf_grid / cdf_grid[-1]))
    assert ks.pvalue > 1e-3
    est = np.asarray(w.estimate(z))
    assert abs(est.mean() - x) < 5 * est.std() / math.sqrt(est.size)
    assert est.var() == pytest.approx(float(w.variance(x)), rel=0.05)


@pytest.mark.parametrize("m,f,b", GRID[::3])
def test_density_ratio_never_exceeds_the_metric_and_eps0(m, f, b):
    w = witchhat(m, f, b)
    r = float(w.reach)
    z = np.linspace(-b - r, b + r, 20001)
    xs = np.linspace(-b, b, 9)
    dens = np.asarray(w.density(z[None, :], xs[:, None]))
    for i, j in itertools.combinations(range(xs.size), 2):
        ratio = np.max(np.abs(np.log(dens[i] / dens[j])))
        assert ratio <= float(w.metric(xs[i], xs[j])) * (1 + 1e-12) + 1e-12
        assert ratio <= float(w.eps0) * (1 + 1e-12) + 1e-12
    assert float(w.eps0) == pytest.approx(min(m, 4 * b / f))


@pytest.mark.parametrize("m,f,b", GRID)
def test_total_variation_closed_form_against_quadrature(m, f, b):
    w = witchhat(m, f, b)
    r = float(w.reach)
    pts = sorted({-b - r, -b, -b + r, 0.0, b - r, b, b + r})
    tv = 0.5 * integrate.quad(lambda z: abs(float(w.density(z, -b)) - float(w.density(z, b))), -b - r, b + r,
                              points=pts[1:-1], limit=400, epsabs=0, epsrel=1e-12)[0]
    assert float(w.total_variation()) == pytest.approx(tv, rel=1e-9, abs=1e-14)
    p = math.exp(float(w.eps0))
    assert float(w.total_variation()) <= (p - 1) / (p + 1) * (1 + 1e-12)


def test_mean_mse_is_the_average_variance():
    w = witchhat(2.0, 0.5, 1.0)
    xs = np.linspace(-1, 1, 11)
    direct = np.mean(np.asarray(w.variance(xs))) / 1000
    assert float(w.mean_mse(1000, np.mean(xs**2))) == pytest.approx(direct, rel=1e-12)


def test_amplify_certifies_witchhat_and_the_catalog_row_agrees():
    w = R.witchhat(2.0, 0.5, 1.0)
    rep = js.amplify(w, 10_000, 1e-6)
    assert bool(rep.certified) and np.isfinite(float(rep.upper))
    clone = js.epsilon(js.stronger_clone_pair(float(w.eps0)), 10_000, 1e-6).upper
    assert float(rep.upper) <= float(clone) * (1 + 1e-6)
    row = R.build("witchhat", m=2.0, f=0.5, b=1.0)
    np.testing.assert_array_equal(np.asarray(row.beta), np.asarray(w.vr_params().beta))


@pytest.mark.parametrize("kwargs,name", [(dict(m=0.0, f=1.0, b=1.0), "m"), (dict(m=1.0, f=-1.0, b=1.0), "f"),
                                         (dict(m=1.0, f=1.0, b=0.0), "b"), (dict(m=math.nan, f=1.0, b=1.0), "m")])
def test_bad_parameters_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name}: must be"):
        witchhat(**kwargs)
    with pytest.raises(ValueError, match=r"^x: must lie in \[-b, b\]"):
        witchhat(1.0, 1.0, 1.0).sample(jax.random.PRNGKey(0), jnp.array([2.0]))
