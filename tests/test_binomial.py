"""The binomial routines against extended-precision references, n = 1 .. 1e8.

The engine's certificate assumes each pmf is within REL_ERR and each continued-
fraction tail within REL_TAIL (relative); these tests hold them to a tenth of that.
"""
import math

import jax
import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from jaxshuffle import _binomial
from jaxshuffle.divergence import REL_ERR, REL_TAIL

NS = [1, 2, 5, 10, 30, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000]
PS = [1e-6, 1e-4, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999, 1 - 1e-5]


def grid():
    rows = []
    for n in NS:
        for p in PS:
            sd = math.sqrt(n * p * (1 - p))
            for z in np.linspace(-12, 12, 25):
                rows.append((float(n), float(np.clip(np.round(n * p + z * max(sd, 1.0)), 0, n)), p))
            rows += [(float(n), 0.0, p), (float(n), float(n), p)]
    n, x, p = map(np.array, zip(*rows))
    q = 1.0 - p
    p = 1.0 - q  # now p + q == 1 exactly (Sterbenz), so every routine sees one distribution
    return n, x, p, q


def mp_log_pmf(n, x, p, q):
    n, x = int(n), int(x)
    return mp.loggamma(n + 1) - mp.loggamma(x + 1) - mp.loggamma(n - x + 1) + x * mp.log(p) + (n - x) * mp.log(q)


def test_log_pmf_matches_mpmath():
    n, x, p, q = grid()
    got = np.asarray(jax.jit(_binomial.log_pmf)(n, x, p, q))
    rng = np.random.default_rng(0)
    idx = rng.choice(n.size, 400, replace=False)
    with mp.workdps(40):
        ref = np.array([float(mp_log_pmf(n[i], x[i], mp.mpf(p[i]), mp.mpf(q[i]))) for i in idx])
    finite = ref > -700
    err = np.abs(got[idx][finite] - ref[finite])
    assert err.max() <= REL_ERR / 10, err.max()


def test_log_pmf_outside_support_and_degenerate_p():
    f = jax.jit(_binomial.log_pmf)
    assert np.isneginf(f(10.0, -1.0, 0.3, 0.7)) and np.isneginf(f(10.0, 11.0, 0.3, 0.7))
    assert float(f(10.0, 0.0, 0.0, 1.0)) == 0.0 and np.isneginf(f(10.0, 1.0, 0.0, 1.0))
    assert float(f(10.0, 10.0, 1.0, 0.0)) == 0.0 and float(f(0.0, 0.0, 0.5, 0.5)) == 0.0


def test_log_sf_matches_boost_everywhere():
    """scipy.stats.binom.logsf (Boost ibeta) as the reference over the whole grid."""
    n, x, p, q = grid()
    got = np.asarray(jax.jit(_binomial.log_sf)(n, x, p, q))
    ref = stats.binom.logsf(x - 1, n, p)
    ok = np.isfinite(ref) & (ref > -700)
    err = np.abs(got[ok] - ref[ok])
    assert err.max() <= REL_TAIL / 10, err.max()
    assert np.all(got[x <= 0] == 0.0)


def _mp_log_sf_by_summation(n, k, p):
    """Exact tail by summing pmf terms on the smaller side (mpmath, 40 digits)."""
    n, k, p = int(n), int(k), mp.mpf(p)
    with mp.workdps(40):
        if k > n * p:
            term, s, j = mp.e ** mp_log_pmf(n, k, p, 1 - p), mp.mpf(0), k
            while j <= n and (j == k or term > s * mp.mpf(10) ** -30):
                s, term, j = s + term, term * (n - j) / (j + 1) * p / (1 - p), j + 1
            return float(mp.log(s))
        term, s, j = mp.e ** mp_log_pmf(n, k - 1, p, 1 - p), mp.mpf(0), k - 1
        while j >= 0 and (j == k - 1 or term > s * mp.mpf(10) ** -30):
            s, term, j = s + term, term * j / (n - j + 1) * (1 - p) / p, j - 1
        return float(mp.log1p(-s))


@pytest.mark.slow
@pytest.mark.parametrize("n,p", [(50, 0.5), (1_000, 0.3), (100_000, 0.5), (10_000_000, 0.5), (100_000_000, 2e-6)])
def test_log_sf_matches_exact_summation(n, p):
    sd = math.sqrt(n * p * (1 - p))
    ks = np.unique(np.clip(np.round(n * p + np.array([-6, -2, -0.5, 0, 0.5, 2, 6, 12]) * sd), 1, n))
    got = np.asarray(_binomial.log_sf(float(n), ks, p, 1 - p))
    ref = np.array([_mp_log_sf_by_summation(n, k, p) for k in ks])
    assert np.max(np.abs(got - ref)) <= REL_TAIL / 10


def test_stirlerr_table_and_series_agree_at_the_seam():
    with mp.workdps(40):
        for n in [15, 16, 17, 40, 1000]:
            ref = mp.loggamma(n + 1) - (n + mp.mpf(1) / 2) * mp.log(n) + n - mp.log(mp.sqrt(2 * mp.pi))
            assert abs(float(_binomial.stirlerr(np.float64(n))) - float(ref)) < 1e-16
