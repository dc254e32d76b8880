"""Interop with Google's dp_accounting (an optional extra: ``pip install jaxshuffle[interop]``).

:func:`to_dp_accounting` exports a round's pessimistic PLD as a
``dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution``, so a shuffled round composes
with the user's other mechanisms there. :func:`from_dp_accounting` imports one of theirs (say a
Gaussian round) as a :class:`~jaxshuffle.accountant.pld.RoundPLD` that composes with shuffled
rounds here. Both read and write dp_accounting's dense PMFs (``DensePLDPmf``); its fields have no
public accessors, so the private names are read in one place, below, and checked by the tests.
"""

from __future__ import annotations

import math

import numpy as np

from jaxshuffle.accountant.pld import DiscretePLD, RoundPLD


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


def to_dp_accounting(round_pld: RoundPLD):
    """The round's pessimistic PLD as a dp_accounting ``PrivacyLossDistribution`` (an upper bound).

    ``pmf_remove`` is ``PLD(P||Q)`` and ``pmf_add`` is ``PLD(Q||P)`` (the same for a symmetric pair).
    Only certified rounds are exported.
    """
    if not isinstance(round_pld, RoundPLD):
        raise ValueError(f"round_pld: expected a RoundPLD, got {type(round_pld).__name__}")
    if not round_pld.certified:
        raise ValueError(f"round_pld: the pair ({round_pld.source}) is not certified; "
                         "only certified rounds are exported")
    _, privacy_loss_distribution = _require()
    forward = _dense(round_pld.upper_forward)
    backward = forward if round_pld.upper_backward is round_pld.upper_forward else _dense(round_pld.upper_backward)
    return privacy_loss_distribution.PrivacyLossDistribution(forward, backward)


def _import_pmf(pmf, discretization: float, what: str) -> DiscretePLD:
    dense = pmf.to_dense_pmf()
    grid = float(dense._discretization)
    if not math.isclose(grid, discretization, rel_tol=1e-12):
        raise ValueError(f"{what}: its discretization {grid:.6g} differs from {discretization:.6g}; "
                         f"build it with value_discretization_interval={discretization!r}")
    return DiscretePLD(np.asarray(dense._probs, np.float64).copy(), int(dense._lower_loss), discretization,
                       float(dense._infinity_mass), bool(dense._pessimistic_estimate))


def from_dp_accounting(pessimistic, discretization: float, *, optimistic=None,
                       source: str = "dp_accounting") -> RoundPLD:
    """A dp_accounting ``PrivacyLossDistribution`` as a round that composes with shuffled rounds.

    ``pessimistic``: a PLD built with ``pessimistic_estimate=True`` and
    ``value_discretization_interval=discretization`` (the shuffled rounds' grid); it is trusted as an
    upper bound for its mechanism (``certified``). ``optimistic``: optionally the same mechanism with
    ``pessimistic_estimate=False``, for the lower side; without it the composition's ``lower`` is NaN.
    """
    for name, pld in (("pessimistic", pessimistic), ("optimistic", optimistic)):
        if pld is not None and not (hasattr(pld, "_pmf_remove") and hasattr(pld, "_pmf_add")):
            raise ValueError(f"{name}: expected a dp_accounting PrivacyLossDistribution, got {type(pld).__name__}")
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
    return RoundPLD(up_f, up_b, lo_f, lo_b, certified=True, source=source)
