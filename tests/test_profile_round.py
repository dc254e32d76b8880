"""The worst-case two-count pair's round PLD connected from its certified profile (accountant.profile_pld):
above the pair's exact composition (enumeration), as tight as the cells where both run, and the route
round_pld takes by default at large n (docs/math.md 12.8)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_compose import composed_delta, pair_cells

import jaxshuffle as js
from jaxshuffle import randomizers as R
from jaxshuffle.accountant import pld as pld_module
from jaxshuffle.accountant.compose import compose, compose_discrete
from jaxshuffle.accountant.interop import to_dp_accounting
from jaxshuffle.accountant.pld import round_pld, shuffled_round


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(eps0=st.floats(0.2, 3.0), r_frac=st.floats(0.05, 1.0), n=st.integers(2, 8), T=st.integers(1, 3))
def test_property_profile_round_is_above_the_pairs_exact_composition(eps0, r_frac, n, T):
    """Random symmetric pairs (u, v, 0, r, r) at n <= 8 (n = 2 included): the profile-connected PLD's
    T-fold composition is >= the exact composed delta at every eps (by enumerating every outcome), in
    both directions (the pair is symmetric, so one PLD serves both)."""
    p = math.exp(eps0)
    u, v = p / (1 + p), 1 / (1 + p)
    r = 0.5 * r_frac
    pair = js.two_count_pair(u, v, 0.0, r, r)
    rnd = round_pld(pair, n, discretization=1e-3, method="profile")
    assert rnd.lower_forward is None and rnd.upper_backward is rnd.upper_forward
    P, Q = pair_cells(u, v, 0.0, r, r, n)
    eps = np.linspace(0.0, eps0 * T + 0.1, 41)
    hi = compose_discrete([(rnd.upper_forward, T)]).delta(eps)
    for A, B in ((P, Q), (Q, P)):
        ref = composed_delta(A, B, T, eps)
        assert np.all(ref <= hi * (1 + 1e-9) + 1e-15), (ref - hi).max()


@pytest.mark.slow
def test_profile_round_is_as_tight_as_the_cells_at_moderate_n():
    """n = 2e4, 10 rounds of 10-ary RR's worst-case pair: both constructions are certified upper bounds of
    the same pair, so each lies above the cells' optimistic lower; the profile's is within 0.1 % of the
    cells' (its 576 profile points against every cell)."""
    randomizer = R.grr(1.0, 10)
    cells = shuffled_round(randomizer, 20_000, rounds=10, method="cells")
    prof = shuffled_round(randomizer, 20_000, rounds=10, method="profile")
    a, b = compose([(cells, 10)], 1e-6), compose([(prof, 10)], 1e-6)
    assert a.lower <= b.upper and a.lower <= a.upper
    assert abs(float(b.upper) - float(a.upper)) <= 1e-3 * float(a.upper)


def test_round_pld_routes_large_rounds_to_the_profile(monkeypatch):
    """Above MAX_CELLS cells a symmetric pair's round is connected from its profile (no optimistic side);
    an asymmetric pair keeps its cells; method names the route and is checked."""
    pair = js.stronger_clone_pair(1.0)
    assert round_pld(pair, 50, discretization=1e-3).lower_forward is not None  # few cells
    monkeypatch.setattr(pld_module, "MAX_CELLS", 0)
    rnd = round_pld(pair, 50, discretization=1e-3)
    assert rnd.lower_forward is None and rnd.certified and rnd.source == pair.source
    asym = js.two_count_pair(0.7, 0.3, 0.0, 0.2, 0.35)
    assert round_pld(asym, 8, discretization=1e-3).lower_forward is not None
    with pytest.raises(ValueError, match="method: 'profile' needs a symmetric pair"):
        round_pld(asym, 8, discretization=1e-3, method="profile")
    from jaxshuffle.accountant.profile_pld import two_count_round
    with pytest.raises(ValueError, match="pair: two_count_round needs w = 0, r0 = r1"):
        two_count_round(asym, 8, 1e-3)
    with pytest.raises(ValueError, match="method: must be 'auto', 'cells' or 'profile', got 'fast'"):
        round_pld(pair, 8, discretization=1e-3, method="fast")


@pytest.mark.slow
def test_a_round_at_n_1e8_against_the_engine_and_dp_accounting():
    """n = 1e8 (5.7e9 cells): the round is built from its profile. One round composed is within the
    loss grid of the two-count engine's certified bracket and never below its lower end; ten rounds
    composed by dp_accounting on the same exported PLD agree with ours within 0.5 %."""
    dp_accounting = pytest.importorskip("dp_accounting")
    randomizer = R.grr(1.0, 10)
    rnd = shuffled_round(randomizer, 1e8, rounds=10)
    assert rnd.lower_forward is None
    one = compose([(rnd, 1)], 1e-6)
    pair, _ = R.clone.certified_worst_case_pair(randomizer)
    engine = js.epsilon(pair, float(np.asarray(randomizer.n_blanket(1e8))) + 1, 1e-6)
    assert float(engine.lower) <= float(one.upper) <= float(engine.upper) * 1.02
    ours = compose([(rnd, 10)], 1e-6)
    theirs = to_dp_accounting(rnd, neighboring_relation="replace_one").self_compose(10).get_epsilon_for_delta(1e-6)
    assert isinstance(theirs, float) and dp_accounting is not None
    assert theirs <= float(ours.upper) * (1 + 1e-9) and float(ours.upper) <= theirs * 1.005
