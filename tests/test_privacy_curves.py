"""Privacy curves of a composition: delta(eps) (``compose_delta``) and eps(delta) (``compose``), upper side."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_compose import composed_delta, pair_cells

import jaxshuffle as js
from jaxshuffle import randomizers as R
from jaxshuffle.accountant.compose import compose, compose_delta
from jaxshuffle.accountant.pld import round_pld, shuffled_round


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(u=st.floats(0.55, 0.9), r0=st.floats(0.05, 0.45), r1=st.floats(0.05, 0.45), n=st.integers(2, 7),
       T=st.integers(1, 3), eps=st.lists(st.floats(-0.5, 2.5), min_size=1, max_size=6))
def test_compose_delta_is_above_the_pairs_exact_composed_delta(u, r0, r1, n, T, eps):
    """Against the pair's exact T-fold delta, by enumerating every T-tuple of its outcomes (both directions)."""
    pair = js.two_count_pair(u, 1 - u, 0.0, r0, r1)
    r = round_pld(pair, n, discretization=1e-3)
    P, Q = pair_cells(u, 1 - u, 0.0, r0, r1, n)
    eps = np.asarray(eps)
    ours = compose_delta([(r, T)], eps)
    exact = np.maximum(composed_delta(P, Q, T, eps), composed_delta(Q, P, T, eps))
    assert ours.shape == eps.shape
    assert np.all(exact <= ours * (1 + 1e-9) + 1e-15), (exact - ours).max()


@pytest.mark.slow
@settings(max_examples=5, deadline=None)
@given(eps0=st.floats(0.3, 3.0), k=st.integers(2, 12), n=st.sampled_from([50, 5_000]), T=st.integers(1, 40))
def test_both_directions_of_the_curve_agree_on_the_safe_side(eps0, k, n, T):
    """delta(eps(delta)) <= delta, and both curves are monotone (non-increasing)."""
    r = shuffled_round(R.grr(eps0, k), n, rounds=T)
    deltas = np.geomspace(1e-12, 1e-1, 12)
    eps = compose([(r, T)], deltas).upper
    assert np.all(np.diff(eps) <= 0)
    back = compose_delta([(r, T)], eps)
    assert np.all(back[np.isfinite(eps)] <= deltas[np.isfinite(eps)])
    grid = np.linspace(-0.1, float(eps.max()) + 1.0, 64)
    curve = compose_delta([(r, T)], grid)
    assert np.all(np.diff(curve) <= 0) and np.all((curve >= 0) & (curve <= 1))
    assert curve[0] == 1.0  # below eps = 0 only the trivial bound


def test_compose_delta_names_bad_input():
    r = shuffled_round(R.grr(1.0, 4), 100, discretization=1e-3)
    with pytest.raises(ValueError, match="eps: must be finite"):
        compose_delta([(r, 2)], [0.5, np.nan])
    with pytest.raises(ValueError, match="rounds"):
        compose_delta([], [0.5])


def exact_round_delta(matrix, others, eps):
    """The shuffled mechanism's exact delta at each eps for inputs 0 vs 1 (both orders), by enumeration."""
    from jaxshuffle import exact

    log_p, log_q = exact.histogram_log_pmfs(matrix, 0, 1, list(others))
    P, Q = np.exp(log_p), np.exp(log_q)
    return np.array([max(np.sum(np.maximum(P - np.exp(e) * Q, 0)), np.sum(np.maximum(Q - np.exp(e) * P, 0)))
                     for e in eps])


def krr_matrix(eps0, k):
    e = np.exp(eps0)
    return (np.ones((k, k)) + (e - 1) * np.eye(k)) / (e + k - 1)


@pytest.mark.slow
@pytest.mark.parametrize("k,eps0,others", [(3, 1.0, (2, 2, 2, 2)), (3, 1.0, (0, 1, 2)), (4, 2.0, (0, 0, 3, 3, 1)),
                                           (2, 0.7, (0,))])
def test_amplify_delta_is_above_the_exact_round(k, eps0, others):
    """k-RR through a shuffler, n <= 6: every dataset here is below the curve, for k-RR and for any
    eps0-LDP randomizer (the general row certifies every one)."""
    from jaxshuffle.accountant.curves import amplify_delta

    eps = np.linspace(0.0, eps0, 9)
    exact = exact_round_delta(krr_matrix(eps0, k), others, eps)
    n = len(others) + 1
    for randomizer in (R.grr(eps0, k), R.general(eps0)):
        curve = amplify_delta(randomizer, n, eps)
        assert np.all(exact <= curve.upper * (1 + 1e-9) + 1e-15), (randomizer, exact - curve.upper)
        assert np.all(np.diff(curve.upper) <= 1e-15)


@pytest.mark.slow
def test_amplify_delta_picks_the_blanket_pair_for_k_rr_and_agrees_with_amplify():
    from jaxshuffle.accountant.curves import amplify_delta

    report = js.amplify(R.grr(1.0, 10), 10_000, 1e-6)
    eps, lower = float(report.upper), float(report.lower)
    curve = amplify_delta(R.grr(1.0, 10), 10_000, [0.0, eps / 2, lower])
    assert list(curve.source) == ["blanket pair (k-ary RR)"] * 3 and curve.clone_proof == "stronger"
    # amplify's certified lower eps is one where the round's true delta is still >= 1e-6, so an upper
    # curve must be >= 1e-6 there
    assert curve.upper[2] >= 1e-6
    assert curve.upper[0] > curve.upper[1] > curve.upper[2]
    general = amplify_delta(R.general(1.0), 10_000, [float(eps)])
    assert general.source[0] == "worst-case pair" and general.upper[0] > curve.upper[2]
    with pytest.raises(ValueError, match="eps: must be finite and >= 0"):
        amplify_delta(R.grr(1.0, 10), 100, [-0.1])
    with pytest.raises(ValueError, match=r"n: must be an integer in \[2, 1e12\]"):
        amplify_delta(R.grr(1.0, 10), 1, [0.1])
