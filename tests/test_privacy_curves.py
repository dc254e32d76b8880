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
