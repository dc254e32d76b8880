"""What :func:`jaxshuffle.accountant.amplify` returns: the report, its columns' codes and the choice of source.

:class:`AmplificationReport` (one pytree of arrays per call), :class:`UpperSource` (which sound bound gave
``upper``), :data:`UPPER_FROM` and :func:`check_upper_from` (the ``upper_from`` option), :data:`REPORT_DTYPES`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["REPORT_DTYPES", "UPPER_FROM", "AmplificationReport", "UpperSource", "check_upper_from"]


class UpperSource:
    """Codes of :attr:`AmplificationReport.upper_source` (which sound bound gave ``upper``)."""

    WORST_CASE = 0  #: the clone pair proven for the randomizer (w = 0; AmplificationReport.clone_proof says which)
    SCALED = 1  #: (u+v)-scaled clone pair at delta/(u+v) (docs/math.md section 3)
    TV = 2  #: delta >= beta: eps = 0
    BLANKET = 3  #: blanket (three-count) pair of the concrete mechanism (k-ary RR; docs/math.md section 10)
    THREE_COUNT = 4  #: three-count pair of a round with clients sampled, from the clone constant (docs/math.md 12.10)

    #: short names by code (sweep files), and the descriptions the CLI prints
    NAMES = ("worst-case", "scaled", "tv", "blanket", "three-count")
    DESCRIPTIONS = ("worst-case pair", "(u+v)-scaled pair", "delta >= beta", "blanket pair",
                    "three-count pair (clients sampled)")


#: values of ``amplify(upper_from=...)``: every sound source and the smallest value, or one source
UPPER_FROM = ("best", "worst-case", "blanket")


def check_upper_from(upper_from, *, sampled: bool = False) -> str:
    """``upper_from``, or ValueError naming it unless it is one of :data:`UPPER_FROM` (``sampled``: clients
    sampled per round, where ``"worst-case"`` has no bound either)."""
    if upper_from not in UPPER_FROM:
        raise ValueError(f"upper_from: must be one of {UPPER_FROM}, got {upper_from!r}")
    if sampled and upper_from == "worst-case":
        raise ValueError("upper_from: 'worst-case' has no bound with clients sampled (sample_rate < 1): no "
                         "two-count pair is an upper bound there (docs/math.md 12.10); use 'best' or 'blanket'")
    return upper_from


class AmplificationReport(NamedTuple):
    """Result of :func:`amplify` (a pytree of arrays, all of the broadcast shape).

    Attributes:
      upper: certified upper bound on the shuffled mechanism's epsilon (float64).
      worst_case: certified epsilon of the clone pair whose constant is proven for this randomizer
        (``clone_proof`` says which proof: the standard clone ``r = 1/(2q)`` for any randomizer with
        these ``p`` and ``q``, the stronger clone ``1/(p+1)`` for k-ary RR, ``r*`` of a matrix;
        docs/math.md 3.1); ``>= upper`` unless ``upper_from="blanket"``.
      blanket: certified epsilon of the blanket (three-count) pair of the concrete mechanism
        (``inf`` where the randomizer carries none: k-ary RR, the catalog rows that carry their matrix
        and ``with_matrix`` randomizers do; docs/math.md sections 10 and 11).
      lower: certified lower bound: the largest of the Theorem 5.1 pairs' and, for a randomizer that
        carries its mechanism, the exact datasets' (k-ary RR: all-z / all-x0; a matrix: every other
        user holding one input) (``0`` where ``has_lower`` is False).
      paper: the paper's Theorem 4.7 value for the randomizer's own beta (NOT a guarantee
        unless ``paper_certified``).
      certified: True where ``upper`` is a sound upper bound: every valid point, except where the opt-in
        ``(u+v)``-scaled pair gives ``upper`` for a randomizer it is not proven for
        (:func:`~jaxshuffle.randomizers.clone.scaled_pair_proven`; docs/math.md 3).
      paper_certified: True where the paper's pair has ``w = 0`` and its clone constant is within the one
        proven for the randomizer (then it is sound; docs/math.md 3.1).
      has_lower: True where ``lower`` comes from a Theorem 5.1 pair.
      upper_source: :class:`UpperSource` code (int8).
      status: :class:`~jaxshuffle.search.Status` of the search behind ``upper`` (int8).
      status_lower: status of the best lower-bound search (``ZERO`` where none).
      status_paper: status of the paper-value search.
      clone_proof: :class:`~jaxshuffle.randomizers.clone.CloneProof` code (int8) of ``worst_case``.
    """

    upper: jax.Array
    worst_case: jax.Array
    blanket: jax.Array
    lower: jax.Array
    paper: jax.Array
    certified: jax.Array
    paper_certified: jax.Array
    has_lower: jax.Array
    upper_source: jax.Array
    status: jax.Array
    status_lower: jax.Array
    status_paper: jax.Array
    clone_proof: jax.Array


#: dtypes of the report's columns (as the g = 1 path builds them)
REPORT_DTYPES = {"upper": jnp.float64, "worst_case": jnp.float64, "blanket": jnp.float64, "lower": jnp.float64,
                  "paper": jnp.float64, "certified": jnp.bool_, "paper_certified": jnp.bool_, "has_lower": jnp.bool_,
                  "upper_source": jnp.int8, "status": jnp.int8, "status_lower": jnp.int8, "status_paper": jnp.int8,
                  "clone_proof": jnp.int8}
