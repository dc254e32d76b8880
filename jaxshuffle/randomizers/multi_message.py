"""Multi-message protocols of the paper's Table 4: ``p = inf`` rows with blanket messages per user."""

from __future__ import annotations


import jax.numpy as jnp

from jaxshuffle.randomizers.params import (
    BLANKET,
    Arg,
    Inputs,
    VRParams,
)


COIN = Arg("coin", "real", 0.0, 1.0, low_open=True, help="probability that a blanket bit is 1")
F_CZ = Arg("f", "real", 0.0, 0.5, low_open=True, high_open=False, help="bit-flip probability, 0 < f <= 1/2")
D_BINS = Arg("d", "int", 2.0, help="number of bins (domain size)")
S_BINS = Arg("s", "int", 1.0, help="number of special bins per value, 1 <= s <= d - 1")
F_MIX = Arg("f", "real", 0.0, 1.0, low_open=True, help="GRR flip probability, 0 < f <= (d-1)/d")


def balcer_cheu(coin, blanket_per_user) -> VRParams:
    """Binary summation with biased blanket coins. Table 4 row "Balcer et al. (Balcer and Cheu, 2020)".

    Original: Balcer, Cheu, "Separating local & shuffled differential privacy via
    histograms", ITC 2020. Each user sends its bit ``x`` and ``blanket_per_user`` bits
    ``~ Bernoulli(coin)``.

    ``p = inf``, ``beta = 1``, ``q = max(1/coin, 1/(1 - coin))``.
    """
    inp = Inputs((COIN, coin), (BLANKET, blanket_per_user))
    coin, m = inp.values
    return inp.params(jnp.inf, 1.0, jnp.maximum(1.0 / coin, 1.0 / (1.0 - coin)), m)


def balcer_uniform(blanket_per_user) -> VRParams:
    """Binary summation with uniform blanket coins. Table 4 row "Balcer et al. (2021)".

    Original: Balcer, Cheu, Joseph, Mao, "Connecting robust shuffle privacy and
    pan-privacy", SODA 2021. Each user sends its bit and ``blanket_per_user`` uniform bits.

    ``p = inf``, ``beta = 1``, ``q = 2``.
    """
    inp = Inputs((BLANKET, blanket_per_user))
    (m,) = inp.values
    return inp.params(jnp.inf, 1.0, 2.0, m)


def cheu_zhilyaev(f, blanket_per_user) -> VRParams:
    """Histograms from fake users. Table 4 row "Cheu et al. (Cheu and Zhilyaev, 2022)".

    Original: Cheu, Zhilyaev, "Differentially private histograms in the shuffle model from
    fake users", IEEE S&P 2022. Each user flips every bit of its one-hot ``x in {0,1}^d``
    w.p. ``f`` and sends ``blanket_per_user`` (the paper's ``m - 1``) fake messages: the
    zero vector with bits flipped w.p. ``f``.

    ``p = (1-f)^2/f^2``, ``beta = 1 - 2f``, ``q = (1-f)/f``.
    """
    inp = Inputs((F_CZ, f), (BLANKET, blanket_per_user))
    f, m = inp.values
    odds = (1.0 - f) / f
    return inp.params(odds * odds, 1.0 - 2.0 * f, odds, m)


def balls_into_bins(d, s, blanket_per_user) -> VRParams:
    """Balls into bins. Table 4 row "Balls-into-bins (Luo et al., 2022)".

    Original: Luo, Wang, Yi, "Frequency estimation in the shuffle model with almost a single
    message", CCS 2022. Each value owns ``s`` special bins out of ``d``; a user throws its
    ball into a uniform special bin of its value and ``blanket_per_user`` blanket balls into
    uniform bins (for a random number of blanket balls per user, model it as
    ``blanket_per_user`` slots each used w.p. ``rho`` and divide ``q`` by ``rho``).

    ``p = inf``, ``beta = min(s, d - s)/s`` (``= 1`` for ``d >= 2s``, the table's value),
    ``q = d/s``.
    """
    inp = Inputs((D_BINS, d), (S_BINS, s), (BLANKET, blanket_per_user))
    d, s, m = inp.values
    inp.require(s <= d - 1.0, "s", "must be <= d - 1")
    return inp.params(jnp.inf, jnp.minimum(s, d - s) / s, d / s, m)


def pure_dump(d, blanket_per_user) -> VRParams:
    """pureDUMP (not in the seed tables). Table 4 family, derived from the definition.

    Original: Li et al., "Privacy enhancement via dummy points in the shuffle model", IEEE
    TDSC 2023. Each user sends its value ``x in [d]`` unperturbed and ``blanket_per_user``
    dummy points uniform on ``[d]``.

    ``p = inf``, ``beta = 1``, ``q = d``.
    """
    inp = Inputs((D_BINS, d), (BLANKET, blanket_per_user))
    d, m = inp.values
    return inp.params(jnp.inf, 1.0, d, m)


def mix_dump(f, d, blanket_per_user) -> VRParams:
    """mixDUMP. Table 4 row "mixDUMP (Li et al., 2023)".

    Original: Li et al., "Privacy enhancement via dummy points in the shuffle model", IEEE
    TDSC 2023. Each user reports ``x`` by GRR (kept w.p. ``1 - f``, else uniform among the
    other ``d - 1`` values) and sends ``blanket_per_user`` dummy points uniform on ``[d]``.

    ``p = (1-f)(d-1)/f``, ``beta = ((1-f)(d-1) - f)/(d-1)``, ``q = (1-f) d``.
    """
    inp = Inputs((F_MIX, f), (D_BINS, d), (BLANKET, blanket_per_user))
    f, d, m = inp.values
    inp.require(f <= (d - 1.0) / d, "f", "must be <= (d-1)/d")
    return inp.params((1.0 - f) * (d - 1.0) / f, ((1.0 - f) * (d - 1.0) - f) / (d - 1.0), (1.0 - f) * d, m)
