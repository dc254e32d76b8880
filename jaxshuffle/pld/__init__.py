"""Privacy-loss distributions (PLDs): a round's distribution from a certified dominating pair, and their composition.

A pair ``(P, Q)`` that dominates a shuffled round has a privacy-loss distribution, the law of
``log P(o)/Q(o)`` for ``o ~ P`` (docs/math.md section 12); rounds compose by convolving their PLDs.
This package holds those mechanics; which pair, which rounds and which bound to report is the
accountant's policy (:mod:`jaxshuffle.accountant`, e.g. :func:`~jaxshuffle.accountant.composed_epsilon`).

Modules (one concept each):

* :mod:`~jaxshuffle.pld.distribution`: the types every construction returns and every composition
  takes (:class:`DiscretePLD`, one direction on one side; :class:`RoundPLD`, a round in both directions
  with its neighbouring relation), and the default loss grid (:func:`default_discretization`);
* :mod:`~jaxshuffle.pld.two_count`: a two-count pair's round from its cells (pessimistic and optimistic)
  or, at large ``n``, its profile (:func:`round_pld`, :func:`shuffled_round`), and its RDP (:func:`rdp`);
* :mod:`~jaxshuffle.pld.profile`: a round connected from a symmetric pair's certified privacy profile
  (connecting the dots, docs/math.md 12.8; :func:`two_count_round`);
* :mod:`~jaxshuffle.pld.blanket`: k-ary RR's blanket pair and a sampled round's three-count pair as
  rounds (:func:`blanket_round`, :func:`three_count_round`);
* :mod:`~jaxshuffle.pld.composition`: rounds composed by FFT, every error on the safe side
  (:func:`compose`, :func:`compose_delta`, :func:`epsilon_over_rounds`, :func:`compose_discrete`);
* :mod:`~jaxshuffle.pld.interop`: a round to and from dp_accounting (:func:`to_dp_accounting`,
  :func:`from_dp_accounting`; the optional ``interop`` extra).

Which type answers what, and on which side (one contract for the composed answers, none of a round's own):

* every construction returns a :class:`RoundPLD` (the cells, a connected profile, the blanket and
  three-count pairs, an import from dp_accounting); it has no ``delta`` or ``epsilon`` of its own;
* :class:`DiscretePLD` is one direction on one side; its ``delta(eps)`` has no float-error terms (not
  certified);
* the certified answers come from composition, each error term added on the side of ``pessimistic``:
  :class:`ComposedPLD` (``compose_discrete``) has ``delta(eps)`` (errs high when pessimistic, low when
  optimistic) and ``epsilon(delta)`` (the same side); :func:`compose` and :func:`epsilon_over_rounds`
  return a :class:`CompositionBound` (``upper`` certified over both directions, ``lower`` the optimistic
  side, a numerical check), :func:`compose_delta` the upper delta as an array. The T-round rule's
  :class:`~jaxshuffle.accountant.ComposedEpsilon` is another type: the smallest of several certified
  bounds (this package's composition among them), with each bound's column.

The package stands below the accountant: it imports the engines and the randomizers, and the
accountant imports it (importing it loads no accountant module). The modules' earlier paths under
``jaxshuffle.accountant`` (``loss_distribution``, ``pld``, ``profile_pld``, ``blanket_pld``, ``compose``,
``interop``) give these very modules.
"""

from jaxshuffle.pld.blanket import blanket_round, three_count_round
from jaxshuffle.pld.composition import (
    ComposedPLD,
    CompositionBound,
    CompositionSizeError,
    compose,
    compose_delta,
    compose_discrete,
    epsilon_over_rounds,
)
from jaxshuffle.pld.distribution import (
    ADD_OR_REMOVE_ONE,
    RELATIONS,
    REPLACE_ONE,
    DiscretePLD,
    RoundPLD,
    default_discretization,
    neighboring_relation,
)
from jaxshuffle.pld.interop import from_dp_accounting, to_dp_accounting
from jaxshuffle.pld.profile import two_count_round
from jaxshuffle.pld.two_count import rdp, round_pld, shuffled_round

__all__ = ["DiscretePLD", "RoundPLD", "REPLACE_ONE", "ADD_OR_REMOVE_ONE", "RELATIONS", "neighboring_relation",
           "default_discretization", "round_pld", "shuffled_round", "rdp", "two_count_round", "blanket_round",
           "three_count_round", "ComposedPLD", "CompositionBound", "CompositionSizeError", "compose",
           "compose_delta", "compose_discrete", "epsilon_over_rounds", "from_dp_accounting", "to_dp_accounting"]
