"""Composed PLDs whose losses pass 709 (e^eps overflows, e^-l underflows): the delta table stays on its side.

Reference: every outcome of T rounds enumerated, delta(eps) = sum p (1 - e^{eps - l})_+ with the exponent
taken as a difference (never above 0), independent of the table's suffix sums."""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from jaxshuffle.accountant.compose import compose_discrete
from jaxshuffle.accountant.pld import DiscretePLD


def exact_delta(probs, losses, T, eps):
    total, mass = np.zeros(1), np.ones(1)
    for _ in range(T):
        total = (total[:, None] + losses[None, :]).ravel()
        mass = (mass[:, None] * probs[None, :]).ravel()
    return np.array([np.sum(mass * -np.expm1(np.minimum(e - total, 0.0))) for e in np.atleast_1d(eps)])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), width=st.integers(2, 6), T=st.integers(1, 3),
       shift=st.sampled_from([0, 3000, 7000, 20000]), grid=st.sampled_from([0.1, 0.25]))
def test_property_delta_brackets_enumeration_at_any_loss(seed, width, T, shift, grid):
    """Random PLDs on grids far above 709 (shift in bins): the pessimistic table's delta is >= the exact
    one and the optimistic table's <= it, at eps on and off the grid."""
    rng = np.random.default_rng(seed)
    probs = rng.random(width) ** 2
    probs /= probs.sum()
    losses = (shift + np.arange(width)) * grid
    eps = T * losses[0] + rng.uniform(0, T * (width - 1) * grid, 7)
    ref = exact_delta(probs, losses, T, eps)
    up = compose_discrete([(DiscretePLD(probs, shift, grid, 0.0, True), T)]).delta(eps)
    lo = compose_discrete([(DiscretePLD(probs, shift, grid, 0.0, False), T)]).delta(eps)
    assert np.all(np.isfinite(up)) and np.all(np.isfinite(lo))
    assert np.all(ref <= up * (1 + 1e-9) + 1e-15), (ref, up)
    assert np.all(lo <= ref * (1 + 1e-9) + 1e-15), (lo, ref)


def test_two_thousand_rounds_past_709():
    """Losses 0.4 and 0.6 with probability 1/2 each, 2000 rounds: the composed loss is 800 + 0.2 K,
    K ~ Bin(2000, 1/2). The certified epsilon at 1e-6 lies within one grid step above the exact one
    (1020.56; the table once returned 800, the smallest composed loss)."""
    c = compose_discrete([(DiscretePLD(np.array([0.5, 0.5]), 2, 0.2, 0.0, True), 2000)])
    k = np.arange(2001)
    loss, w = 800 + 0.2 * k, binom.pmf(k, 2000, 0.5)

    def delta(e):
        return np.sum(w * -np.expm1(np.minimum(e - loss, 0.0)))

    lo, hi = 800.0, 1200.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta(mid) > 1e-6 else (lo, mid)
    assert hi <= float(c.epsilon(1e-6)) <= hi + 0.2 + 1e-9


def test_itertools_reference_agrees():
    probs, losses = np.array([0.2, 0.8]), np.array([800.0, 801.0])
    direct = sum(probs[a] * probs[b] * -math.expm1(min(1600.5 - losses[a] - losses[b], 0.0))
                 for a, b in itertools.product(range(2), repeat=2))
    assert exact_delta(probs, losses, 2, 1600.5)[0] == pytest.approx(direct, rel=1e-15)
