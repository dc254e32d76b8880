"""The lattice and FFT evaluation of a blanket sum form (docs/math.md 11.8) against exact enumeration.

Reference: ``(1/n) E[(G_1 + ... + G_n)_+]`` summed over every composition of ``n`` into the
categories (multinomial pmf from ``lgamma``, ``math.fsum``): relative error about 1e-13, far below
the lattice's slack, which is why the soundness checks allow the reference that much and no more.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxshuffle import blanket_lattice as la
from jaxshuffle import blanket_matrix as bm
from jaxshuffle.exact import enumerate as exact
from jaxshuffle.randomizers.matrices import subset_selection_matrix

REF_RTOL = 1e-11  # the enumeration's own rounding (see the module docstring)


def enumerated(w, c, n):
    """``(1/n) E[(sum of n iid G)_+]`` by summing over every count vector."""
    C = len(w)
    terms = []

    def rec(i, left, counts):
        if i == C - 1:
            counts = counts + [left]
            s = math.fsum(k * x for k, x in zip(counts, c))
            if s > 0:
                lp = math.lgamma(n + 1) + sum(k * math.log(p) - math.lgamma(k + 1) for k, p in zip(counts, w))
                terms.append(s * math.exp(lp))
            return
        for k in range(left + 1):
            rec(i + 1, left - k, counts + [k])

    rec(0, n, [])
    return math.fsum(terms) / n


def random_form(rng, C):
    w = rng.dirichlet(np.full(C, 0.7))
    c = rng.normal(size=C) * rng.choice([0.1, 1.0, 10.0]) - rng.uniform(0.0, 0.5)
    return w, c


@pytest.mark.slow
def test_lattice_bounds_enumeration_and_is_tight():
    """Random forms (5 and 6 categories, coefficients of both signs), n up to 30: the certified value
    is never below the enumerated one, and above it by at most what the lattice can add (``h``:
    ``E[(S + n h)_+] - E[S_+] <= n h``) plus the FFT and tail terms."""
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(12):
        w, c = random_form(rng, int(rng.choice([5, 6])))
        for n in (1, 2, 5, 12, 30):
            exact = enumerated(w, c, n)
            lv = la.lattice_value(w, c, n, bins=la.default_bins(n))
            assert lv.value >= exact * (1.0 - REF_RTOL), (w, c, n, lv, exact)
            assert lv.value <= exact + lv.h + lv.fft + lv.tail + REF_RTOL * exact, (w, c, n, lv, exact)
            checked += 1
    assert checked == 60


def test_wrapped_window_stays_an_upper_bound():
    """With far too few bins the window misses mass on both sides (the Chernoff term is not 0), and the
    value is still ``>=`` the enumeration. The same forms with enough bins are tighter."""
    rng = np.random.default_rng(3)
    for _ in range(8):
        w, c = random_form(rng, 5)
        n = 20
        exact = enumerated(w, c, n)
        small = la.lattice_value(w, c, n, bins=16, sds=1.0)
        assert small.value >= exact * (1.0 - REF_RTOL), (w, c, small, exact)
        big = la.lattice_value(w, c, n, bins=1 << 16)
        assert big.value >= exact * (1.0 - REF_RTOL)
        assert big.value <= small.value * (1.0 + 1e-9)
    assert small.tail > 0  # the last form's window did miss mass above it


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), C=st.integers(2, 7), n=st.integers(1, 9),
       bins_log2=st.integers(4, 14), sds=st.sampled_from([0.5, 2.0, 8.0]))
def test_lattice_property(seed, C, n, bins_log2, sds):
    """Any form, any ``n``, any window: ``>=`` the enumeration; the parts are non-negative."""
    rng = np.random.default_rng(seed)
    w, c = random_form(rng, C)
    exact = enumerated(w, c, n)
    lv = la.lattice_value(w, c, n, bins=1 << bins_log2, sds=sds)
    assert lv.value >= exact * (1.0 - REF_RTOL)
    assert min(lv.window, lv.fft, lv.tail) >= 0.0


def test_all_negative_and_float_noise_edges():
    """No positive coefficient: exactly 0. Probabilities short of 1 by rounding: the rest sits at 0."""
    assert la.lattice_value([0.5, 0.5], [-1.0, -2.0], 10).value == 0.0
    w = np.array([0.3, 0.3, 0.4 - 1e-16])
    c = np.array([1.0, -1.0, 0.5])
    assert la.lattice_value(w, c, 4, bins=1 << 12).value >= enumerated(list(w) + [1e-16], list(c) + [0.0], 4)
    assert la.default_bins(1) == la.MIN_BINS and la.default_bins(1e9) == la.LATTICE_BINS


@pytest.mark.slow
def test_refined_matrix_bound_is_lower_and_still_certified():
    """2-subsets of 5 (ten messages, five blanket categories: coarsened): the lattice lowers the
    certified upper, which stays above the certified lower bound, and no dataset of the others (all
    multisets, enumerated by :func:`jaxshuffle.exact.enumerate.epsilon`) has a larger exact epsilon."""
    M = subset_selection_matrix(1.0, 5, 2)
    n, delta = 4, 0.05
    pl = bm.plan_matrix(M, n, delta)
    coarse = bm.search_matrix(pl, lattice=False)
    fine = bm.search_matrix(pl, lattice=True)
    assert not coarse.exact_kernel and fine.lattice and not coarse.lattice
    assert fine.lower == coarse.lower <= fine.upper < coarse.upper
    worst = 0.0
    for others in itertools.combinations_with_replacement(range(M.shape[0]), n - 1):  # every dataset
        ex = exact.epsilon(M, 0, 1, list(others), delta)  # enumeration of the shuffled histogram
        assert ex <= fine.upper * (1 + 1e-9), (others, ex, fine)
        worst = max(worst, ex)
    assert fine.upper < coarse.upper and worst >= fine.lower * (1 - 1e-9)
    # the default refines at this n
    assert bm.search_matrix(pl).upper == fine.upper


@pytest.mark.slow
def test_must_show_subset_selection_at_n_1e4():
    """The case the coarsening was measured on (docs/math.md 11.8): 2-subsets of 5, eps0 = 1,
    n = 1e4, delta = 1e-6. The lattice's upper is below the coarsened one and above the lower bound."""
    M = subset_selection_matrix(1.0, 5, 2)
    pl = bm.plan_matrix(M, 1e4, 1e-6)
    ups, lows = bm.form_epsilons(pl)  # the coarsened search, once
    lower = float(np.max(lows))
    coarse = np.sum(pl.up_forms.w > 0, axis=1) > bm.KERNEL_CATEGORIES
    assert coarse.all()
    fine = bm.refine_upper(pl.up_forms, ups, coarse, 1e4, 1e-6, lower)
    assert lower < np.max(fine) < 0.95 * np.max(ups)


def test_tighten_upper_returns_only_certified_points():
    """The bracket search returns ``hi`` (certified by the caller) or a probe whose lattice value is
    ``<= delta``; from a loose bracket it gets within ``LATTICE_RTOL`` of where the value crosses delta."""
    M = subset_selection_matrix(1.0, 5, 2)
    form = tuple(np.asarray(x[0]) for x in bm.pair_forms(M, "blanket")[:5])
    n, delta = 50, 1e-3

    def value(e):
        return bm.lattice_divergence(*form, n, e)

    hi = 3.0
    assert value(hi) <= delta
    r = la.tighten_upper(value, delta, 0.0, hi)
    assert r < hi and value(r) <= delta
    assert value(r * (1.0 - 2.0 * la.LATTICE_RTOL)) > delta  # converged: just below r the value exceeds delta
    # a bracket whose hi the lattice cannot certify comes back unchanged
    assert la.tighten_upper(value, delta, 0.0, 0.5 * r) == 0.5 * r
