"""One shuffled round's privacy curve: the certified delta at each eps, from the best certified source.

:func:`amplify` answers eps at given deltas (its ``delta`` may be an array: that is the curve's
other direction). :func:`amplify_delta` answers delta at given epsilons. For a single round the
smallest of several certified upper bounds on ``delta(eps)`` is again one, eps by eps (each
source's pair dominates the round at every eps; docs/math.md section 12.9). Over several rounds
use :func:`~jaxshuffle.pld.composition.compose_delta`, which composes one pair at a time.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxshuffle._config import check
from jaxshuffle._numerics import quarter_octave

#: ``source`` values of :class:`DeltaCurve`.
WORST_CASE, BLANKET = "worst-case pair", "blanket pair (k-ary RR)"


class DeltaCurve(NamedTuple):
    """Certified upper delta of one shuffled round at each eps.

    Attributes:
      eps: the epsilons asked (float64, as given).
      upper: an upper bound on the round's ``delta(eps)`` (both orders of the neighbours), the smallest
        certified source's (certified, errs high).
      source: which source gave it (``"worst-case pair"`` or ``"blanket pair (k-ary RR)"``).
      clone_proof: the proof behind the worst-case pair (``"standard"``, ``"stronger"``, ...).
    """

    eps: np.ndarray
    upper: np.ndarray
    source: np.ndarray
    clone_proof: str


def amplify_delta(randomizer, n, eps) -> DeltaCurve:
    """Certified delta at each ``eps`` of ``n`` users' shuffled ``randomizer`` (upper side).

    Args:
      randomizer: a scalar :class:`~jaxshuffle.randomizers.VRParams` (e.g. ``R.grr(1.0, 10)``).
      n: the number of users, an integer in [2, 1e12].
      eps: epsilons, each finite and ``>= 0`` (any shape).

    Sources: the worst-case two-count pair with the clone constant proven for the randomizer
    (:func:`~jaxshuffle.randomizers.clone.certified_worst_case_pair`, evaluated by
    :func:`~jaxshuffle.hockey_stick_bounds`), and for k-ary RR the blanket pair (the blanket
    engine's certified profile). The smaller is reported, with its source. The hockey-stick
    divergence is the curve ``delta(eps)``: docs/math.md section 2 (two-count pair) and section 10
    (blanket pair); the clone constants: section 3.1.

    Returns:
      The curve, a :class:`DeltaCurve`: ``upper``, of ``eps``'s shape, a certified upper bound (errs high) on
        the round's delta at each ``eps`` (at most 1), with its source and clone proof.

    Raises:
      ValueError: naming the parameter, for a ``randomizer`` that is not one scalar ``VRParams``, an
        ``n`` outside the integers in [2, 1e12], or an ``eps`` not finite and ``>= 0``.
    """
    from jaxshuffle.engine.two_count.divergence import hockey_stick_bounds
    from jaxshuffle.randomizers.clone import CloneProof, certified_worst_case_pair
    from jaxshuffle.randomizers.params import VRParams

    if not isinstance(randomizer, VRParams) or np.shape(randomizer.p) != ():
        raise ValueError(f"randomizer: expected one scalar VRParams (jaxshuffle.randomizers), got "
                         f"{type(randomizer).__name__}{'' if not hasattr(randomizer, 'p') else np.shape(randomizer.p)}")
    n = np.float64(n)
    check(np.isfinite(n) & (n >= 2) & (n == np.floor(n)) & (n <= 1e12), "n", "must be an integer in [2, 1e12]",
          value=n)
    eps = np.asarray(eps, np.float64)
    check(np.isfinite(eps) & (eps >= 0), "eps", "must be finite and >= 0", value=eps)
    flat = eps.ravel()
    pair, proof = certified_worst_case_pair(randomizer)
    n_engine = float(np.asarray(randomizer.n_blanket(n))) + 1.0
    worst = np.asarray(hockey_stick_bounds(pair, n_engine, flat).upper, np.float64)
    blanket = np.full_like(worst, np.inf)
    mech = randomizer.krr()
    if mech is not None:
        blanket = _blanket_profile(float(np.asarray(mech.eps0)), float(np.asarray(mech.k)), float(n), flat)
    use_blanket = blanket < worst
    upper = np.minimum(np.where(use_blanket, blanket, worst), 1.0)
    source = np.where(use_blanket, BLANKET, WORST_CASE)
    proof_name = CloneProof(int(np.asarray(proof))).name.lower()  # one scalar randomizer, one proof
    return DeltaCurve(eps, upper.reshape(eps.shape), source.reshape(eps.shape), proof_name)


def _blanket_profile(eps0: float, k: float, n: float, eps: np.ndarray) -> np.ndarray:
    """The blanket pair's certified ``delta`` at each ``eps`` (its plan on the program ladder of its round PLD:
    :func:`~jaxshuffle.pld.blanket.profile_plan`)."""
    from jaxshuffle.pld.blanket import profile_plan, profile_upper

    plan = profile_plan(eps0, k, n, eps.size)
    padded = np.full(quarter_octave(eps.size), float(eps[-1]) if eps.size else 0.0)
    padded[:eps.size] = eps
    return np.asarray(profile_upper(eps0, k, n, padded, plan), np.float64)[:eps.size]
