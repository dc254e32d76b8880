"""Sizes checked before allocation, in the user's terms: every refusal names the argument the caller gave
(a lattice's ``bins``, a composition's ``rounds[i] count`` or ``counts``) and the largest supported value,
at once (no multi-terabyte allocation, no blame on ``discretization`` for a count the caller chose)."""

from __future__ import annotations

import functools
import math
import re
import time

import numpy as np
import pytest

from jaxshuffle import blanket_lattice as la
from jaxshuffle import randomizers as R
from jaxshuffle._fft import MAX_FFT
from jaxshuffle.accountant.compose import (
    MAX_COUNT,
    WRAP_TAIL,
    CompositionSizeError,
    _window,
    compose,
    compose_discrete,
    epsilon_over_rounds,
)
from jaxshuffle.accountant.pld import shuffled_round

W, C = np.array([0.5, 0.3, 0.2]), np.array([1.0, -0.5, 0.2])
LIMIT = f"must be a power of two from 16 to {MAX_FFT} (2^26, the largest FFT"


@functools.lru_cache(maxsize=1)
def _round():
    """A coarse round (k-RR at n = 1000 on a 0.01 grid): about 60 bins, built in well under a second."""
    return shuffled_round(R.grr(1.0, 10), 1000, discretization=0.01)


@pytest.mark.parametrize("bins", [2 ** 40, 2 ** 27, 1000, 8, 2])
def test_lattice_bins_beyond_the_fft_are_refused_before_allocating(bins):
    """lattice_value(bins=2^40) asked numpy for 8 TiB (MemoryError), bins=2 divided by zero and bins=1000
    (not a power of two: the FFT error bound is the radix-2 one) was taken: each is now refused at once,
    naming ``bins``, its range and the value given."""
    start = time.perf_counter()
    with pytest.raises(ValueError) as err:
        la.lattice_value(W, C, 100, bins=bins)
    assert time.perf_counter() - start < 1.0
    msg = str(err.value)
    assert msg.startswith(f"bins: {LIMIT}") and msg.endswith(f"got {bins}"), msg


def test_lattice_refinement_through_the_matrix_engine_names_bins():
    """The matrix engine's lattice option hands ``bins`` down (refine_upper -> lattice_divergence): the
    same refusal reaches its caller."""
    from jaxshuffle.engine.matrix.forms import lattice_divergence

    with pytest.raises(ValueError, match=rf"^bins: {re.escape(LIMIT)}.*got 4294967296$"):
        lattice_divergence(W, np.array([1.0, 0.5, 0.2]), np.array([0.5, 1.0, 0.2]), [0.0], [0.0], 100, 0.5,
                           bins=2 ** 32)


@pytest.mark.parametrize("kw,param,shown", [({"n": 2.5}, "n", "2.5"), ({"n": math.nan}, "n", "nan"),
                                            ({"sds": -1.0}, "sds", "-1"), ({"sds": math.inf}, "sds", "inf")])
def test_lattice_other_sizes_name_their_argument(kw, param, shown):
    """n = 2.5 was truncated to 2 users (silently another question), n = NaN failed inside int(), sds = -1
    was taken: each now names its argument."""
    args = {"n": 100, **kw}
    with pytest.raises(ValueError) as err:
        la.lattice_value(W, C, args.pop("n"), **args)
    assert str(err.value).startswith(f"{param}: ") and str(err.value).endswith(f"got {shown}"), str(err.value)


def test_lattice_default_bins_for_a_huge_n_stay_within_range():
    assert la.default_bins(1e30) == la.LATTICE_BINS and la.default_bins(1) == la.MIN_BINS


def _largest_fits(pld, count) -> bool:
    """The window of ``count`` rounds of ``pld`` fits 2^26 bins and one more round's does not."""
    fits = _window([(pld, count)], WRAP_TAIL).size <= MAX_FFT
    try:
        _window([(pld, count + 1)], WRAP_TAIL)
    except CompositionSizeError:
        return fits
    return False


def test_compose_a_huge_count_names_the_count_and_the_largest_that_fits():
    """compose([(r, 10**15)]) blamed ``discretization`` ("use a coarser discretization"), which the caller may
    not have given; it now names the count, its bins, the grid and the largest count that fits."""
    r = _round()
    start = time.perf_counter()
    with pytest.raises(CompositionSizeError) as err:
        compose([(r, 10 ** 15)], 1e-6)
    assert time.perf_counter() - start < 5.0
    msg, e = str(err.value), err.value
    assert msg.startswith("rounds[0] count: composing 1e+15 rounds needs about ")
    assert f"more than {MAX_FFT}; at most {e.largest} rounds fit on this grid" in msg
    assert "(discretization 0.01)" in msg and "discretization:" not in msg
    assert 1 <= e.largest < 10 ** 15 and _largest_fits(r.upper_forward, e.largest)
    assert isinstance(e, ValueError)


def test_compose_several_rounds_blames_the_largest_count():
    r = _round()
    with pytest.raises(CompositionSizeError, match=r"^rounds\[1\] count: composing 1e\+15 rounds .* at most \d+ "
                                                   r"rounds \(with the other rounds as given\) fit"):
        compose([(r, 10), (r, 10 ** 15)], 1e-6)


def test_epsilon_over_rounds_names_counts():
    """epsilon_over_rounds' argument is ``counts``: its refusals name it (the size, and the 2^53 limit of an
    exact float64 count, where 1e20 rounds were sized as 1.4e17 bins and blamed on discretization)."""
    r = _round()
    with pytest.raises(CompositionSizeError, match=r"^counts: composing 1e\+15 rounds .* at most \d+ rounds fit"):
        epsilon_over_rounds(r, [10, 10 ** 15], 1e-6)
    with pytest.raises(ValueError, match=rf"^counts: must be at most 2\^53 = {MAX_COUNT} .*got 1e\+20$"):
        epsilon_over_rounds(r, 1e20, 1e-6)


@pytest.mark.parametrize("count", [2 ** 53 + 2, 10 ** 20])
def test_counts_past_float64_integers_are_refused(count):
    """A count above 2^53 is not exact in float64 (the FFT's powers would compose another number of
    rounds): refused by name, with the limit, for compose and compose_discrete alike."""
    r = _round()
    for call in (lambda: compose([(r, count)], 1e-6), lambda: compose_discrete([(r.upper_forward, count)])):
        with pytest.raises(ValueError, match=rf"^rounds\[0\] count: must be at most 2\^53 = {MAX_COUNT} "):
            call()


def test_a_count_that_fits_still_composes():
    """A count within the grid is composed as before (1e4 rounds of the coarse round)."""
    b = compose([(_round(), 10 ** 4)], 1e-6)
    assert np.isfinite(b.upper) and b.upper > 0
