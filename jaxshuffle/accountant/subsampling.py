"""Clients sampled per round: each of ``n`` users takes part with probability ``g`` (Poisson sampling).

A participant sends ``R(x)``; the shuffler releases the participants' messages, so their number is
visible. Neighbouring datasets replace one user's input (docs/math.md section 13.11).

What is certified here: **k-ary randomized response**. The subsampled k-RR is k-RR's blanket sum
form (B1) at the real ``k' = k + (1 - g)(e^eps0 + k - 1)/g``: a non-participant is one more
"other value" message that no one counts as x0 or x1, and ``1/(e^eps0 + k' - 1) = g/(e^eps0 + k - 1)``
puts every category at its subsampled probability (docs/math.md 13.11 derives it). The blanket
engine evaluates (B1) at a real ``k'`` (:func:`jaxshuffle.blanket.blanket_epsilon` with
``real_k=True``). Other randomizers are refused with ``sample_rate < 1`` for now.

What is NOT an upper bound, and is never used: the two-count pair with ``w = 1 - g`` (it merges the
non-participants into the others' null marker, but the mechanism reveals how many there are), and
``log(1 + g (e^eps - 1))`` (the add/remove amplification by subsampling).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxshuffle._numerics import UNIT_ROUNDOFF

#: relative margin by which the computed ``k'`` is lowered: a few roundings (exp, sum, product,
#: division) each of at most one unit roundoff, with room to spare
K_MARGIN = 16 * UNIT_ROUNDOFF


def check_sample_rate(sample_rate, name: str = "sample_rate") -> np.ndarray:
    """``sample_rate`` as float64, ValueError naming it unless every value lies in (0, 1]."""
    g = np.asarray(sample_rate, np.float64)
    bad = ~((g > 0) & (g <= 1))
    if np.any(bad):
        got = float(g[bad].flat[0]) if g.ndim else float(g)
        raise ValueError(f"{name}: the probability that a user takes part in a round must lie in (0, 1], got {got!r}")
    return g


def subsampled_krr_k(eps0, k, sample_rate) -> np.ndarray:
    """The real ``k'`` whose k-RR blanket form is k-RR's with clients sampled at rate ``g``.

    ``k' = k + (1 - g)(e^eps0 + k - 1)/g`` (docs/math.md 13.11), lowered by :data:`K_MARGIN`
    relative where ``g < 1`` and exactly ``k`` at ``g = 1``. Lowering is the safe side: ``k'`` at a
    smaller value is the form of a larger rate ``g' >= g``, and the mechanism at rate ``g`` is a
    post-processing of the one at ``g'`` (drop each message with probability ``1 - g/g'``), so its
    epsilon is at most that one's.
    """
    eps0, k, g = np.broadcast_arrays(np.asarray(eps0, np.float64), np.asarray(k, np.float64),
                                     check_sample_rate(sample_rate))
    with np.errstate(over="ignore"):
        extra = (1.0 - g) * (np.exp(eps0) + k - 1.0) / g
    lowered = np.maximum((k + extra) * (1.0 - K_MARGIN), k)
    return np.where(g == 1.0, k, lowered)


class SubsampledEpsilon(NamedTuple):
    """Certified epsilon of one round with clients sampled at ``sample_rate`` (arrays of the points' shape).

    upper: certified upper bound on the round's epsilon at ``delta``. status: the blanket search's
    status (:class:`jaxshuffle.Status`). k_blanket: the real ``k'`` the blanket form was evaluated at.
    source: the proof behind ``upper``.
    """

    upper: np.ndarray
    status: np.ndarray
    k_blanket: np.ndarray
    source: str


def subsampled_epsilon(randomizer, n, delta, *, sample_rate) -> SubsampledEpsilon:
    """Certified epsilon of ``n`` users' shuffled ``randomizer`` when each takes part with probability ``sample_rate``.

    Args:
      randomizer: a :class:`~jaxshuffle.randomizers.VRParams` of k-ary randomized response
        (``R.grr(eps0, k)``, ``R.binary_rr``-like rows whose mechanism is k-RR); others are refused.
      n: the number of users (each may or may not take part), integers in [2, 1e12].
      delta: target delta(s) in (0, 1).
      sample_rate: ``g``, the probability that a user takes part in the round, in (0, 1].

    Arrays broadcast. ``upper`` is certified (upper side): the blanket form of k-RR at the real
    ``k'`` of :func:`subsampled_krr_k`. At ``sample_rate = 1`` it is
    ``jaxshuffle.blanket.blanket_epsilon(eps0, k, n, delta).upper`` exactly.
    """
    from jaxshuffle.blanket import blanket_epsilon
    from jaxshuffle.randomizers.params import VRParams

    if not isinstance(randomizer, VRParams):
        raise ValueError(f"randomizer: expected VRParams (jaxshuffle.randomizers), got {type(randomizer).__name__}")
    mech = randomizer.krr()
    if mech is None:
        raise ValueError("randomizer: clients sampled per round are certified for k-ary randomized response "
                         "(R.grr) only so far; other randomizers have no certified subsampled bound here yet")
    g = check_sample_rate(sample_rate)
    eps0, k = np.asarray(mech.eps0, np.float64), np.asarray(mech.k, np.float64)
    k_blanket = subsampled_krr_k(eps0, k, g)
    res = blanket_epsilon(eps0, k_blanket, n, delta, real_k=True)
    return SubsampledEpsilon(np.asarray(res.upper), np.asarray(res.status), np.asarray(k_blanket),
                             "blanket pair of k-ary RR, clients sampled (real k)")

