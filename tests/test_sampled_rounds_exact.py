"""amplify with clients sampled against exact enumeration of the sampled round (every dataset of the others).

The sampled round is the shuffled ``R_g = [g R | (1 - g) 1]`` (docs/math.md 12.10); ``jaxshuffle.exact``
enumerates its shuffled histograms, independently of the engines. Each point: the exact epsilon of the
worst dataset lies in ``[lower, upper]``. Slack: ``exact.epsilon`` bisects to about 1e-12, so 1e-9.
"""

import itertools
import math

import numpy as np
import pytest

import jaxshuffle as js
import jaxshuffle.randomizers as R
from jaxshuffle import exact
from jaxshuffle.accountant.amplify import UpperSource
from jaxshuffle.randomizers.clone import CloneProof

SLACK = 1e-9


def krr_matrix(eps0, k):
    e = math.exp(eps0)
    return (np.ones((k, k)) + (e - 1) * np.eye(k)) / (e + k - 1)


def sampled(M, g):
    return np.hstack([g * M, np.full((M.shape[0], 1), 1 - g)])


def worst_exact(M, n, delta, pairs=None):
    """The exact epsilon of the shuffled M, n users: the worst ordered pair of inputs (exact.epsilon takes both
    directions) and the worst multiset of the others' inputs."""
    K = M.shape[0]
    pairs = pairs or list(itertools.combinations(range(K), 2))
    return max(exact.epsilon(M, a, b, list(others), delta) for a, b in pairs
               for others in itertools.combinations_with_replacement(range(K), n - 1))


def random_ldp_matrix(rng, equal_column=False):
    """A random 3 x 3 matrix with positive entries (its eps0 is its largest column ratio)."""
    M = rng.uniform(0.2, 1.0, size=(3, 3))
    if equal_column:
        M[:, 2] = M[0, 2]
    return M / M.sum(axis=1, keepdims=True)


def ldp_randomizer(M):
    eps0 = float(np.log(np.max(M[:, None, :] / M[None, :, :]))) * (1 + 1e-12)
    return R.with_matrix(R.general(eps0), M)


def _check_krr(ks, eps0s, ns, gs, deltas):
    checked = 0
    for k, eps0, n in itertools.product(ks, eps0s, ns):
        g, d = (x.ravel() for x in np.meshgrid(gs, deltas, indexing="ij"))
        rep = js.amplify(R.grr(np.full(g.shape, eps0), k), n, d, sample_rate=g)
        assert np.all(np.asarray(rep.upper_source) == UpperSource.BLANKET)
        assert np.all(np.isinf(rep.worst_case)) and np.all(np.asarray(rep.clone_proof) == CloneProof.NONE)
        # k-RR: inputs 2..k-1 are interchangeable, so the pair (0, 1) covers every pair
        for i in range(g.size):
            ex = worst_exact(sampled(krr_matrix(eps0, k), g[i]), n, d[i], pairs=[(0, 1)])
            assert float(rep.lower[i]) <= ex + SLACK, (k, eps0, n, g[i], d[i], float(rep.lower[i]), ex)
            assert ex <= float(rep.upper[i]) + SLACK, (k, eps0, n, g[i], d[i], ex, float(rep.upper[i]))
            checked += 1
    return checked


@pytest.mark.slow
def test_krr_sampled_round_brackets_the_exact_value():
    assert _check_krr((2, 3), (1.0,), (2, 5), (0.1, 0.5, 0.9), (1e-2, 1e-6)) == 24


@pytest.mark.slow
def test_krr_sampled_round_brackets_the_exact_value_on_the_grid():
    """k = 2..4, eps0 in {0.5, 2}, n in {2, 3, 5, 8}, g in {0.1, 0.3, 0.5, 0.9}, delta in {1e-2, 1e-3, 1e-6}."""
    assert _check_krr((2, 3, 4), (0.5, 2.0), (2, 3, 5, 8), (0.1, 0.3, 0.5, 0.9), (1e-2, 1e-3, 1e-6)) == 288


def _check_matrix(M, ns, gs, deltas):
    V = ldp_randomizer(M)
    checked = 0
    for n in ns:
        g, d = (x.ravel() for x in np.meshgrid(gs, deltas, indexing="ij"))
        rep = js.amplify(V, n, d, sample_rate=g)
        for i in range(g.size):
            ex = worst_exact(sampled(M, g[i]), n, d[i])
            assert float(rep.lower[i]) <= ex + SLACK, (M, n, g[i], d[i], float(rep.lower[i]), ex)
            assert ex <= float(rep.upper[i]) + SLACK, (M, n, g[i], d[i], ex, float(rep.upper[i]))
            assert bool(rep.has_lower[i]) and float(rep.lower[i]) > 0
            checked += 1
    return checked


@pytest.mark.slow
def test_random_matrix_sampled_round_brackets_the_exact_value():
    """A random 3 x 3 eps0-LDP matrix through the matrix route (the matrix engine on R_g, or the three-count
    pair with the matrix's clone constant where smaller)."""
    assert _check_matrix(random_ldp_matrix(np.random.default_rng(7)), (3,), (0.3,), (1e-2, 1e-6)) == 2


@pytest.mark.slow
def test_random_matrices_sampled_rounds_bracket_the_exact_value():
    """Three random 3 x 3 eps0-LDP matrices (one with a column of equal entries), n in {2, 3, 5},
    g in {0.1, 0.5, 0.9}, delta in {1e-2, 1e-6}."""
    rng = np.random.default_rng(11)
    mats = [random_ldp_matrix(rng), random_ldp_matrix(rng), random_ldp_matrix(rng, equal_column=True)]
    assert sum(_check_matrix(M, (2, 3, 5), (0.1, 0.5, 0.9), (1e-2, 1e-6)) for M in mats) == 54


def _same(a, b):
    return all(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=np.asarray(x).dtype.kind == "f")
               for x, y in zip(a, b))


@pytest.mark.slow
@pytest.mark.parametrize("matrix", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_rate_one_is_todays_report_bit_for_bit(matrix):
    """g = 1 takes today's path: every field equal, NaN for NaN, for k-RR and for a matrix; a batch that mixes
    g = 1 and g < 1 keeps the g = 1 points bit for bit too."""
    if matrix:
        V = ldp_randomizer(random_ldp_matrix(np.random.default_rng(3)))
        assert _same(js.amplify(V, 3, 1e-3, sample_rate=1.0), js.amplify(V, 3, 1e-3))
        return
    assert _same(js.amplify(R.grr(1.0, 4), 50, 1e-3, sample_rate=1.0), js.amplify(R.grr(1.0, 4), 50, 1e-3))
    mixed = js.amplify(R.grr(1.0, 4), 50, 1e-3, sample_rate=np.array([1.0, 0.5]))
    alone = js.amplify(R.grr(1.0, 4), 50, 1e-3)
    assert _same([np.asarray(x)[0] for x in mixed], alone)
    assert float(mixed.upper[1]) < float(mixed.upper[0])  # sampling helps


def test_bad_rates_are_named():
    for g in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="^sample_rate"):
            js.amplify(R.grr(1.0, 4), 50, 1e-3, sample_rate=g)
