"""The privacy-loss distribution types every round and composition shares.

:class:`DiscretePLD` is one direction's distribution of the privacy loss on a grid, discretised on
one side (pessimistic or optimistic, docs/math.md section 13.3); :class:`RoundPLD` holds a round's
distributions in both directions with the neighbouring relation they are about (section 13.10). They
live apart from the constructions (:mod:`jaxshuffle.accountant.pld` for a pair's cells,
:mod:`jaxshuffle.accountant.profile_pld` for a certified privacy profile) so that every construction
and :mod:`jaxshuffle.accountant.compose` import them without importing each other.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class DiscretePLD(NamedTuple):
    """A privacy-loss distribution on the grid ``loss = (lower_index + j) * discretization``.

    Discretising on the safe side: docs/math.md section 13.3.

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
        return (self.lower_index + np.arange(len(self.probs))) * self.discretization

    def delta(self, eps: float) -> float:
        """``sum_j p_j (1 - e^{eps - l_j})_+ + infinity_mass`` (one round, no float-error terms)."""
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
    round (a user's input replaced; docs/math.md section 13.10). Rounds compose only with rounds of
    the same relation. Under replace-one a Gaussian sum of vectors clipped to norm ``C`` has
    sensitivity ``2 C``, not the add/remove ``C``. A pair's PLD, row by row: docs/math.md section 13.2.

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
