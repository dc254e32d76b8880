"""The privacy-loss distribution types every round and composition shares, and their default loss grid.

:class:`DiscretePLD` is one direction's distribution of the privacy loss on a grid, discretised on
one side (pessimistic or optimistic, docs/math.md section 12.3); :class:`RoundPLD` holds a round's
distributions in both directions with the neighbouring relation they are about (section 12.9). They
live apart from the constructions (:mod:`jaxshuffle.pld.two_count` for a pair's cells,
:mod:`jaxshuffle.pld.profile` for a certified privacy profile) so that every construction
and :mod:`jaxshuffle.pld.composition` import them without importing each other.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from jaxshuffle._fft import MAX_FFT

if TYPE_CHECKING:
    from jaxshuffle.engine.two_count.pair import TwoCountPair

# A computed loss is off by at most pld.LOSS_ERR = 1e-11; the grid must stay far coarser.
MIN_DISCRETIZATION = 1e-9
#: largest number of rounds composed at :func:`default_discretization`'s grid. That grid's spacing
#: is ``2 accuracy sd / sqrt(T)`` and the composed window spans about ``2 z sd sqrt(T)`` (``z`` ~ 8
#: standard deviations each side for its tail), so the composed FFT needs about ``z T / accuracy``
#: bins whatever the randomizer: ~1.7e4 T after rounding to a power of two at accuracy 1e-3 (k-RR,
#: the general randomizer, n = 1e2 to 1e6), i.e. 2^26 (:data:`jaxshuffle._fft.MAX_FFT`) at T = 4000.
MAX_DEFAULT_ROUNDS = 4000


def grid_losses(lower_index: int, size: int, discretization: float) -> np.ndarray:
    """The losses ``(lower_index + j) * discretization``, ``j < size``, of a distribution on the grid (float64)."""
    return (lower_index + np.arange(size)) * discretization


class DiscretePLD(NamedTuple):
    """A privacy-loss distribution on the grid ``loss = (lower_index + j) * discretization``.

    Discretising on the safe side: docs/math.md section 12.3.

    Attributes:
      probs: float64 masses (``probs[j]`` at loss ``(lower_index + j) * discretization``).
      lower_index: grid index of ``probs[0]`` (a Python int).
      discretization: the grid spacing (a Python float).
      infinity_mass: mass at loss ``+inf`` (a Python float).
      pessimistic: True for an upper-bound discretisation, False for a lower-bound one.
    """

    probs: np.ndarray
    lower_index: int
    discretization: float
    infinity_mass: float
    pessimistic: bool

    def losses(self) -> np.ndarray:
        return grid_losses(self.lower_index, len(self.probs), self.discretization)

    def delta(self, eps: float) -> float:
        """``sum_j p_j (1 - e^{eps - l_j})_+ + infinity_mass`` (one direction, no float-error terms).

        On the side ``pessimistic`` names only up to the rounding of this sum, so it is not a certified value:
        a round's certified delta and epsilon come from :func:`~jaxshuffle.pld.composition.compose`
        (count 1), which adds every error term on the safe side.
        """
        ell = self.losses()
        keep = ell > eps
        return float(np.sum(self.probs[keep] * -np.expm1(eps - ell[keep])) + self.infinity_mass)


#: Neighbouring relation of a shuffled round: one user's input replaced by another (the user still
#: sends one message). The relation of every round this package builds.
REPLACE_ONE = "replace_one"
#: One user added or removed. Not a shuffled round's relation; rounds imported from dp_accounting
#: with it compose only among themselves.
ADD_OR_REMOVE_ONE = "add_or_remove_one"
RELATIONS = (REPLACE_ONE, ADD_OR_REMOVE_ONE)


def neighboring_relation(value, what: str = "neighboring_relation") -> str:
    """``value`` as one of :data:`RELATIONS`: a string, or a dp_accounting ``NeighboringRelation``
    (``REPLACE_ONE``, ``ADD_OR_REMOVE_ONE``; matched by name). ValueError naming ``what`` otherwise."""
    name = getattr(value, "name", value)
    if isinstance(name, str) and name.lower() in RELATIONS:
        return name.lower()
    raise ValueError(f"{what}: must be one of {', '.join(RELATIONS)} (or dp_accounting's NeighboringRelation."
                     f"REPLACE_ONE / ADD_OR_REMOVE_ONE), got {value!r}")


class RoundPLD(NamedTuple):
    """Both discretisations of one round's PLD, in both directions of the neighbouring relation.

    ``forward`` is ``PLD(P || Q)``, ``backward`` ``PLD(Q || P)`` (the same object for a symmetric
    pair, ``r0 == r1``). ``upper_*`` are pessimistic, ``lower_*`` optimistic. ``certified`` is True
    when the pair dominates the shuffled mechanism (an upper pair with ``w == 0``).
    ``neighboring_relation`` is what the guarantee is about: :data:`REPLACE_ONE` for every shuffled
    round (a user's input replaced; docs/math.md section 12.9). Rounds compose only with rounds of
    the same relation. Under replace-one a Gaussian sum of vectors clipped to norm ``C`` has
    sensitivity ``2 C``, not the add/remove ``C``. A pair's PLD, row by row: docs/math.md section 12.2.

    Attributes:
      upper_forward: pessimistic :class:`DiscretePLD` of ``P || Q`` (composes to upper bounds).
      upper_backward: pessimistic :class:`DiscretePLD` of ``Q || P`` (``upper_forward`` itself for a
        symmetric pair).
      lower_forward: optimistic :class:`DiscretePLD` of ``P || Q``, or None (no lower side).
      lower_backward: optimistic :class:`DiscretePLD` of ``Q || P``, or None.
      certified: True when the pair dominates the shuffled mechanism (above).
      source: label of the pair or import (e.g. ``"stronger-clone"``, ``"dp_accounting"``).
      max_loss: bound on every finite loss (``|log(u/v)|`` for a pair; ``inf`` when unknown), used by
        :func:`rdp`.
      neighboring_relation: :data:`REPLACE_ONE` or :data:`ADD_OR_REMOVE_ONE` (above).
    """

    upper_forward: DiscretePLD
    upper_backward: DiscretePLD
    lower_forward: DiscretePLD | None
    lower_backward: DiscretePLD | None
    certified: bool
    source: str
    max_loss: float = math.inf  # bound on every finite loss (|log(u/v)| for a pair); used by rdp()
    neighboring_relation: str = REPLACE_ONE


def default_discretization(pair: TwoCountPair, n, rounds: int, accuracy: float = 1e-3) -> float:
    """A grid spacing for ``rounds`` compositions of the pair at relative accuracy about ``accuracy``.

    Pessimistic rounding moves the composed loss up by at most ``rounds * discretization``; the
    composed epsilon is at least about ``z sd(L) sqrt(rounds)`` with ``z ~ 5`` at the deltas people
    use, so ``discretization = 2 accuracy sd(L) / sqrt(rounds)`` keeps the shift below ``accuracy``
    of it. ``sd(L)`` is the normal approximation ``2 c_p sqrt(q(1-q)/(n (r0+r1)))`` with
    ``c_p = |u-v|/(u+v)`` (a heuristic: it sets only the grid, never a bound).
    """
    u, v, r0, r1 = (float(np.asarray(x)) for x in (pair.u, pair.v, pair.r0, pair.r1))
    s = r0 + r1
    q = r0 / s if s > 0 else 0.5
    cp = abs(u - v) / max(u + v, 1e-300)
    sd = 2.0 * cp * math.sqrt(max(q * (1 - q), 1e-300) / max(float(n) * s, 1.0))
    sd = min(max(sd, 1e-6), abs(math.log(max(u, 1e-300) / max(v, 1e-300))) or 1e-6)
    if rounds > MAX_DEFAULT_ROUNDS:
        raise ValueError(f"rounds: {rounds:.6g} rounds at the default discretization would need about "
                         f"{1.7e4 * rounds:.2g} bins of the composed grid, more than {MAX_FFT}; at most "
                         f"{MAX_DEFAULT_ROUNDS} rounds are composed at the default grid. Pass a coarser "
                         "discretization explicitly (a looser bound), or compose fewer rounds")
    return max(MIN_DISCRETIZATION, 2.0 * accuracy * sd / math.sqrt(max(rounds, 1)))
