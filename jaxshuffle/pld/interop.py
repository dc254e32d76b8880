"""Interop with Google's dp_accounting (an optional extra: ``pip install jaxshuffle[interop]``).

:func:`to_dp_accounting` exports a round's pessimistic PLD as a
``dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution``, so a shuffled round composes
with the user's other mechanisms there. :func:`from_dp_accounting` imports one of theirs (say a
Gaussian round) as a :class:`~jaxshuffle.pld.distribution.RoundPLD` that composes with shuffled
rounds here. Both read and write dp_accounting's dense PMFs (``DensePLDPmf``); its fields have no
public accessors, so the private names are read in one place, below, and checked by the tests.

Both take ``neighboring_relation=`` and refuse a mismatch. A shuffled round is a *replace-one*
guarantee: composed in dp_accounting beside an add/remove Gaussian (``from_gaussian_mechanism``'s
default) it would count that Gaussian at half its sensitivity and understate the total epsilon
(about 2x for ten 10-RR rounds beside ten Gaussians of sigma 20). Compose it with mechanisms built
for ``NeighboringRelation.REPLACE_ONE`` (dp_accounting then uses sensitivity 2 for a Gaussian sum of
vectors clipped to norm 1), or use :class:`jaxshuffle.interop.ShufflePLDAccountant`, which is fixed
to replace-one.
"""

from __future__ import annotations

import math

import numpy as np

from jaxshuffle.pld.distribution import DiscretePLD, RoundPLD, neighboring_relation

_REQUIRED = object()


def _relation(value, what: str) -> str:
    if value is _REQUIRED:
        raise ValueError(f"{what}: required (a PLD is a guarantee for one neighbouring relation): pass "
                         "neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE, the relation of a "
                         "shuffled round, and build every mechanism it composes with for that relation")
    return neighboring_relation(value, what)


def _require():
    try:
        from dp_accounting.pld import pld_pmf, privacy_loss_distribution
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError("dp_accounting is needed for this: pip install 'jaxshuffle[interop]'") from e
    return pld_pmf, privacy_loss_distribution


def _dense(pld: DiscretePLD):
    pld_pmf, _ = _require()
    return pld_pmf.DensePLDPmf(pld.discretization, int(pld.lower_index), np.asarray(pld.probs, np.float64),
                               float(pld.infinity_mass), pld.pessimistic)


def to_dp_accounting(round_pld: RoundPLD, *, neighboring_relation=_REQUIRED):
    """The round's pessimistic PLD as a dp_accounting ``PrivacyLossDistribution`` (an upper bound).

    ``neighboring_relation``: the relation of the composition it goes into (dp_accounting's
    ``NeighboringRelation`` or its name); it must be the round's own (``REPLACE_ONE`` for a shuffled
    round), else ValueError naming both. Compose the result only with PLDs built for that relation.
    The returned object carries it as ``.neighboring_relation`` (a string).

    ``pmf_remove`` is ``PLD(P||Q)`` and ``pmf_add`` is ``PLD(Q||P)`` (the same for a symmetric pair).
    Only certified rounds are exported. Interop and the neighbouring relation: docs/math.md
    sections 12.7 and 12.9.

    Args:
      round_pld: a certified :class:`~jaxshuffle.pld.distribution.RoundPLD` (e.g. from
        :func:`~jaxshuffle.pld.two_count.shuffled_round`).
      neighboring_relation: the relation of the composition it goes into (required; above).

    Returns:
      A dp_accounting ``PrivacyLossDistribution`` built from the round's pessimistic PLDs: a certified upper
        bound (errs high) on the round's privacy curve; ``.neighboring_relation`` says its relation.

    Raises:
      ValueError: naming the parameter, for a ``round_pld`` that is not a certified ``RoundPLD``, or a
        ``neighboring_relation`` that is not the round's own.
      ImportError: without dp_accounting (the ``interop`` extra).
    """
    if not isinstance(round_pld, RoundPLD):
        raise ValueError(f"round_pld: expected a RoundPLD, got {type(round_pld).__name__}")
    relation = _relation(neighboring_relation, "neighboring_relation")
    if relation != round_pld.neighboring_relation:
        raise ValueError(f"neighboring_relation: {relation} asked, but the round is a {round_pld.neighboring_relation} "
                         f"guarantee ({round_pld.source}); compose it in a {round_pld.neighboring_relation} accounting")
    if not round_pld.certified:
        raise ValueError(f"round_pld: the pair ({round_pld.source}) is not certified; "
                         "only certified rounds are exported")
    _, privacy_loss_distribution = _require()
    forward = _dense(round_pld.upper_forward)
    backward = forward if round_pld.upper_backward is round_pld.upper_forward else _dense(round_pld.upper_backward)
    pld = privacy_loss_distribution.PrivacyLossDistribution(forward, backward)
    pld.neighboring_relation = relation
    return pld


def _import_pmf(pmf, discretization: float, what: str) -> DiscretePLD:
    dense = pmf.to_dense_pmf()
    grid = float(dense._discretization)
    if not math.isclose(grid, discretization, rel_tol=1e-12):
        raise ValueError(f"{what}: its discretization {grid:.6g} differs from {discretization:.6g}; "
                         f"build it with value_discretization_interval={discretization!r}")
    probs = np.asarray(dense._probs, np.float64)
    infinity = float(dense._infinity_mass)
    if not (np.all(np.isfinite(probs)) and 0.0 <= infinity <= 1.0):
        raise ValueError(f"{what}: its masses are not finite probabilities "
                         "(NaN, inf, or an infinity mass outside [0, 1])")
    # dp_accounting's FFT compositions leave tiny negative masses (about -1e-20); raising them to 0 can
    # only raise every delta (delta is non-decreasing in each mass): the safe side for an upper bound
    return DiscretePLD(np.maximum(probs, 0.0), int(dense._lower_loss), discretization, infinity,
                       bool(dense._pessimistic_estimate))


def from_dp_accounting(pessimistic, discretization: float, *, neighboring_relation=_REQUIRED, optimistic=None,
                       source: str = "dp_accounting") -> RoundPLD:
    """A dp_accounting ``PrivacyLossDistribution`` as a round that composes with shuffled rounds.

    ``neighboring_relation``: the relation the PLD was built for (dp_accounting's
    ``NeighboringRelation`` or its name; required). It composes with shuffled rounds only if it is
    ``REPLACE_ONE`` (:func:`~jaxshuffle.pld.composition.compose` refuses a mix, naming both). A PLD
    exported by :func:`to_dp_accounting` carries its relation, which must match.
    ``pessimistic``: a PLD built with ``pessimistic_estimate=True`` and
    ``value_discretization_interval=discretization`` (the shuffled rounds' grid); it is trusted as an
    upper bound for its mechanism (``certified``). ``optimistic``: optionally the same mechanism with
    ``pessimistic_estimate=False``, for the lower side; without it the composition's ``lower`` is NaN.
    Interop and the neighbouring relation: docs/math.md sections 12.7 and 12.9.

    Args:
      pessimistic: a dp_accounting ``PrivacyLossDistribution`` built with ``pessimistic_estimate=True``
        on the grid ``discretization`` (above).
      discretization: the loss grid spacing of the shuffled rounds it composes with (and of the PLDs).
      neighboring_relation: the relation the PLD was built for (required; above).
      optimistic: optionally the same mechanism's PLD with ``pessimistic_estimate=False`` (above).
      source: the label the round carries (``RoundPLD.source``, listed in a composition's ``sources``).

    Returns:
      The round, a :class:`~jaxshuffle.pld.distribution.RoundPLD` (``certified=True``): the pessimistic PLD,
        trusted as an upper bound (errs high) for its mechanism, and the optimistic one (if given) for the
        lower side.

    Raises:
      ValueError: naming the parameter, for an object that is not a ``PrivacyLossDistribution``, a PLD on
        another grid, masses that are not finite probabilities, a pessimistic PLD built optimistic (or
        the reverse), or a ``neighboring_relation`` unknown or other than the one the PLD carries.
    """
    for name, pld in (("pessimistic", pessimistic), ("optimistic", optimistic)):
        if pld is not None and not (hasattr(pld, "_pmf_remove") and hasattr(pld, "_pmf_add")):
            raise ValueError(f"{name}: expected a dp_accounting PrivacyLossDistribution, got {type(pld).__name__}")
    relation = _relation(neighboring_relation, "neighboring_relation")
    for name, pld in (("pessimistic", pessimistic), ("optimistic", optimistic)):
        carried = getattr(pld, "neighboring_relation", None)
        if carried is not None and carried != relation:
            raise ValueError(f"neighboring_relation: {relation} given, but {name} was exported as a {carried} PLD")
    up_f = _import_pmf(pessimistic._pmf_remove, discretization, "pessimistic")
    up_b = (up_f if pessimistic._pmf_add is pessimistic._pmf_remove
            else _import_pmf(pessimistic._pmf_add, discretization, "pessimistic"))
    if not (up_f.pessimistic and up_b.pessimistic):
        raise ValueError("pessimistic: was built with pessimistic_estimate=False")
    lo_f = lo_b = None
    if optimistic is not None:
        lo_f = _import_pmf(optimistic._pmf_remove, discretization, "optimistic")
        lo_b = (lo_f if optimistic._pmf_add is optimistic._pmf_remove
                else _import_pmf(optimistic._pmf_add, discretization, "optimistic"))
        if lo_f.pessimistic or lo_b.pessimistic:
            raise ValueError("optimistic: was built with pessimistic_estimate=True")
    return RoundPLD(up_f, up_b, lo_f, lo_b, certified=True, source=source, neighboring_relation=relation)
