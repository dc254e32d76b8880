"""Multi-message protocols of the paper's Table 4: ``p = inf`` rows with blanket messages per user.

Returned sides and errors: as :mod:`jaxshuffle.randomizers` states for every row.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from jaxshuffle._config import f64
from jaxshuffle.randomizers.params import (
    BLANKET,
    Arg,
    Inputs,
    LowerParams,
    VRParams,
    blanket_messages,
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

    Args:
      coin: probability that a blanket bit is 1, in (0, 1).
      blanket_per_user: input-independent (blanket) messages each user sends, an integer >= 1.

    Returns:
      ``(p, beta, q)`` above and ``blanket_per_user`` as :class:`VRParams`, upper side.
    """
    inp = Inputs((COIN, coin), (BLANKET, blanket_per_user))
    coin, m = inp.values
    return inp.params(jnp.inf, 1.0, jnp.maximum(1.0 / coin, 1.0 / (1.0 - coin)), m)


def balcer_uniform(blanket_per_user) -> VRParams:
    """Binary summation with uniform blanket coins. Table 4 row "Balcer et al. (2021)".

    Original: Balcer, Cheu, Joseph, Mao, "Connecting robust shuffle privacy and
    pan-privacy", SODA 2021. Each user sends its bit and ``blanket_per_user`` uniform bits.

    ``p = inf``, ``beta = 1``, ``q = 2``.

    Args:
      blanket_per_user: input-independent (blanket) messages each user sends, an integer >= 1.

    Returns:
      ``(p, beta, q)`` above and ``blanket_per_user`` as :class:`VRParams`, upper side.
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

    Args:
      f: bit-flip probability, in (0, 1/2].
      blanket_per_user: fake messages each user sends (the paper's ``m - 1``), an integer >= 1.

    Returns:
      ``(p, beta, q)`` above and ``blanket_per_user`` as :class:`VRParams`, upper side.
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

    Args:
      d: number of bins (domain size), an integer >= 2.
      s: number of special bins per value, an integer in [1, d - 1].
      blanket_per_user: blanket balls each user throws, an integer >= 1.

    Returns:
      ``(p, beta, q)`` above and ``blanket_per_user`` as :class:`VRParams`, upper side.
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

    Args:
      d: domain size, an integer >= 2.
      blanket_per_user: dummy points each user sends, an integer >= 1.

    Returns:
      ``(p, beta, q)`` above and ``blanket_per_user`` as :class:`VRParams`, upper side.
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

    Args:
      f: GRR flip probability, in (0, (d-1)/d].
      d: domain size, an integer >= 2.
      blanket_per_user: dummy points each user sends, an integer >= 1.

    Returns:
      ``(p, beta, q)`` above and ``blanket_per_user`` as :class:`VRParams`, upper side.
    """
    inp = Inputs((F_MIX, f), (D_BINS, d), (BLANKET, blanket_per_user))
    f, d, m = inp.values
    inp.require(f <= (d - 1.0) / d, "f", "must be <= (d-1)/d")
    return inp.params((1.0 - f) * (d - 1.0) / f, ((1.0 - f) * (d - 1.0) - f) / (d - 1.0), (1.0 - f) * d, m)


# --------------------------------------------------------------------------------------
# The protocols' own guarantees (the eps' of the paper's Figures 3 and 4)
# --------------------------------------------------------------------------------------
#
# The seed paper (Section 7.2) compares its amplified epsilon with "the amplified privacy
# provided by the original works, denoted eps'" and prints only the balls-into-bins
# calibration (Figure 4's caption). Both guarantees below are the ones the paper's experiment
# uses, read from the authors' public experiment script (github.com/wangsw/PrivacyAmplification,
# ``unifiedamplification.py``, ``computeUBParameters`` rows "cheu" and "balls2bins"): the
# formulas are restated and derived here, not copied. docs/math.md section 19.

#: Constant of the fake-users guarantee: ``f (1-f) N >= CZ_CONSTANT coth^2(eps'/2) log(4/delta)``.
CZ_CONSTANT = 33.0 / 5.0
#: Constant of the balls-into-bins calibration ``N = LUO_CONSTANT log(2/delta) d / (eps'^2 s)``.
LUO_CONSTANT = 32.0


def _cz_rhs(eps_prime, delta):
    """``(33/5) coth^2(eps'/2) log(4/delta)``, the right-hand side of the fake-users condition."""
    eps_prime, delta = jnp.asarray(eps_prime, jnp.float64), jnp.asarray(delta, jnp.float64)
    coth = 1.0 / jnp.tanh(eps_prime / 2.0)
    return CZ_CONSTANT * coth * coth * jnp.log(4.0 / delta)


def cheu_zhilyaev_flip(eps_prime, n_reports, delta):
    """Flip probability ``f`` at which the fake-users protocol's own analysis gives ``(eps', delta)``.

    Cheu and Zhilyaev's protocol (S&P 2022) is ``(eps', delta)``-shuffle private when the
    ``N = n_reports`` noisy reports satisfy ``f (1 - f) N >= (33/5) coth^2(eps'/2) log(4/delta)``
    (``coth(eps'/2) = (e^eps' + 1)/(e^eps' - 1)``; the condition as the seed paper's experiment
    applies it, with ``N`` the number of users). Returns the smallest such ``f``, the smaller
    root ``f = (1 - sqrt(1 - 4 c/N))/2`` with ``c`` the right-hand side (the least noise, so
    the most favourable ``eps'`` for the original work); ``nan`` where ``N <= 4 c`` (no
    ``f < 1/2`` meets the condition: the original analysis gives no ``eps'`` there).
    """
    c = _cz_rhs(eps_prime, delta)
    n = jnp.asarray(n_reports, jnp.float64)
    disc = 1.0 - 4.0 * c / n
    ok = disc > 0
    return jnp.where(ok, 0.5 * (1.0 - jnp.sqrt(jnp.where(ok, disc, 1.0))), jnp.nan)


def cheu_zhilyaev_guarantee(f, n_reports, delta):
    """The fake-users protocol's own ``eps'`` at flip probability ``f`` (inverse of :func:`cheu_zhilyaev_flip`).

    ``coth^2(eps'/2) = f (1-f) N / ((33/5) log(4/delta))``, so
    ``eps' = 2 artanh(sqrt((33/5) log(4/delta) / (f (1-f) N)))``; ``inf`` where the square root
    is ``>= 1`` (the condition holds for no ``eps'``).
    """
    f, n, delta = (jnp.asarray(x, jnp.float64) for x in (f, n_reports, delta))
    t2 = CZ_CONSTANT * jnp.log(4.0 / delta) / (f * (1.0 - f) * n)
    ok = t2 < 1.0
    return jnp.where(ok, 2.0 * jnp.arctanh(jnp.sqrt(jnp.where(ok, t2, 0.25))), jnp.inf)


def balls_into_bins_messages(eps_prime, d, s, delta):
    """Blanket balls that balls-into-bins needs for ``(eps', delta)`` by its own analysis (Figure 4's caption).

    ``N = floor(32 log(2/delta) d / (eps'^2 s))`` (Luo, Wang, Yi, CCS 2022, as the seed
    paper's Figure 4 states it: the number of blanket ("covering") balls over ``d`` bins, ``s``
    special bins per value). Rounded down as the authors' script does.
    """
    eps_prime, d, s, delta = (jnp.asarray(x, jnp.float64) for x in (eps_prime, d, s, delta))
    return jnp.floor(LUO_CONSTANT * jnp.log(2.0 / delta) * d / (eps_prime * eps_prime * s))


def balls_into_bins_guarantee(n_messages, d, s, delta):
    """The balls-into-bins protocol's own ``eps' = sqrt(32 log(2/delta) d / (N s))`` for ``N`` blanket balls."""
    n, d, s, delta = (jnp.asarray(x, jnp.float64) for x in (n_messages, d, s, delta))
    return jnp.sqrt(LUO_CONSTANT * jnp.log(2.0 / delta) * d / (n * s))


def extra_amplification_ratio(eps_prime, eps):
    """The paper's "extra amplification ratio" ``eps'/eps`` (Section 7.2); budget saved ``= 1 - eps/eps'``."""
    return jnp.asarray(eps_prime, jnp.float64) / jnp.asarray(eps, jnp.float64)


# --------------------------------------------------------------------------------------
# Theorem 5.1 lower parameters of the multi-message rows (Section 5's exactly tight ones)
# --------------------------------------------------------------------------------------
#
# For a multi-message protocol the lower pair counts the marker outputs Y0 = {R(x0) > R(x1)},
# Y1 = {R(x1) > R(x0)} among the victim's message and every message distributed like a blanket
# message on Y0 and Y1. The marker counts of the shuffled output are a post-processing of it,
# so the pair's epsilon is a lower bound. The other users (all holding x*) send their own
# messages too: where those miss Y0 and Y1 they add nothing (balls-into-bins, pureDUMP), where
# they are distributed on Y0, Y1 exactly like a blanket message they join the blanket (fake
# users): :func:`lower_n_blanket`. docs/math.md section 19.4.

#: Rows whose other users' own messages join the lower pair's blanket (see :func:`lower_n_blanket`).
LOWER_OTHERS_JOIN_BLANKET = {"cheu-zhilyaev": True, "balls-into-bins": False, "pure-dump": False}


def lower_n_blanket(name: str, n, blanket_per_user):
    """Blanket messages of the lower pair of multi-message row ``name`` among ``n`` users.

    ``n m`` blanket messages (``m = blanket_per_user``, every user's, the victim's included), plus
    the ``n - 1`` other users' own messages where they are distributed like blanket messages on
    the marker sets (``LOWER_OTHERS_JOIN_BLANKET``). The upper side counts ``n m``
    (:meth:`VRParams.n_blanket`): adding the others' messages is a post-processing, so leaving
    them out is safe there.
    """
    if name not in LOWER_OTHERS_JOIN_BLANKET:
        raise ValueError(f"name: no multi-message lower parameters for {name!r}; "
                         f"choose one of {sorted(LOWER_OTHERS_JOIN_BLANKET)}")
    return blanket_messages(n, f64(blanket_per_user), LOWER_OTHERS_JOIN_BLANKET[name])


def _multi_message(name: str, lp: LowerParams, blanket_per_user) -> LowerParams:
    """``lp`` marked as the lower parameters of multi-message row ``name`` (its blanket count)."""
    return dataclasses.replace(lp, blanket_per_user=jnp.asarray(blanket_per_user, jnp.float64),
                               others_join_blanket=LOWER_OTHERS_JOIN_BLANKET[name])


def cheu_zhilyaev_lower(f, blanket_per_user) -> LowerParams:
    """Theorem 5.1 parameters of :func:`cheu_zhilyaev` (domain ``d >= 3``).

    ``x0 = e_1``, ``x1 = e_2``, the others hold ``x* = e_3``. On coordinates (1, 2) the victim's
    message shows ``10`` w.p. ``(1-f)^2`` under ``x0`` and ``f^2`` under ``x1`` (and the swap for
    ``01``), so ``p0 = (1-f)^2/f^2`` and ``beta = (1-f)^2 - f^2 = 1 - 2f``. A fake message (the zero
    vector flipped) and another user's message (``e_3`` flipped) both show ``10`` and ``01`` w.p.
    ``f (1-f)`` each: ``q0 = q1 = (1-f)^2/(f(1-f)) = (1-f)/f``, and the others' messages join the
    blanket (:func:`lower_n_blanket`). The parameters equal Table 4's upper ones; only the blanket
    count differs (``n m + n - 1`` against ``n m``).
    """
    inp = Inputs((F_CZ, f), (BLANKET, blanket_per_user))
    f, m = inp.values
    odds = (1.0 - f) / f
    return _multi_message("cheu-zhilyaev", inp.lower(odds * odds, 1.0 - 2.0 * f, odds, odds), m)


def balls_into_bins_lower(d, s, blanket_per_user) -> LowerParams:
    """Theorem 5.1 parameters of :func:`balls_into_bins` (``d >= 3s``).

    Inputs with disjoint special sets ``S_0, S_1`` and the others' value with a third, disjoint set
    (``d >= 3s``): the victim's ball is in ``Y0 = S_0`` under ``x0`` and never in ``Y1 = S_1``
    (``p0 = inf``, ``beta = 1``); a blanket ball is in each w.p. ``s/d`` (``q0 = q1 = d/s``); the
    others' balls miss both. Equal to the upper pair: exactly tight.
    """
    inp = Inputs((D_BINS, d), (S_BINS, s), (BLANKET, blanket_per_user))
    d, s, m = inp.values
    inp.require(d >= 3.0 * s, "d", "must be >= 3 s (a third value's special bins disjoint from both)")
    return _multi_message("balls-into-bins", inp.lower(jnp.inf, 1.0, d / s, d / s), m)


def pure_dump_lower(d, blanket_per_user) -> LowerParams:
    """Theorem 5.1 parameters of :func:`pure_dump` (``d >= 3``): ``x0, x1`` and the others' value
    ``x*`` distinct, ``p0 = inf``, ``beta = 1``, ``q0 = q1 = d`` (a dummy hits ``{x0}`` w.p. ``1/d``);
    the others' messages are ``x*``, in neither marker set. Equal to the upper pair: exactly tight."""
    inp = Inputs((D_BINS, d), (BLANKET, blanket_per_user))
    d, m = inp.values
    inp.require(d >= 3.0, "d", "must be >= 3 (a third value for the other users)")
    return _multi_message("pure-dump", inp.lower(jnp.inf, 1.0, d, d), m)
