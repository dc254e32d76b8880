"""The accountant: certified amplification of shuffled randomizers and what builds on it.

Setting: ``n`` users each apply a local randomizer ``R`` with variation-ratio parameters
``(p, beta, q)`` (:class:`~jaxshuffle.randomizers.VRParams`) and a shuffler releases the
multiset of messages; neighbouring datasets differ in one user's input (replace-one). For a
multi-message protocol (Table 4) each user also sends ``m = blanket_per_user``
input-independent blanket messages.

Modules (one concept each):

* :mod:`~jaxshuffle.accountant.amplify`: :func:`amplify` (certified upper, lower bound, the
  paper's value), its rules as :func:`amplification_jobs` + :func:`combine_amplification`; its report
  (:class:`AmplificationReport`, :class:`UpperSource`) in :mod:`~jaxshuffle.accountant.report`, the
  concrete mechanism's bounds folded in by :mod:`~jaxshuffle.accountant.mechanism`;
* :mod:`~jaxshuffle.accountant.calibrate`: :func:`calibrate_eps0`, :func:`calibrate_n`
  (never past the target);
* :mod:`~jaxshuffle.accountant.parallel`: parallel composition (the paper's Theorem 6.1) and
  the hierarchical range queries of its Section 7.3;
* :mod:`~jaxshuffle.accountant.curves`: :func:`amplify_delta`, one round's certified delta at
  each eps (the best certified source);
* :mod:`~jaxshuffle.accountant.subsampling`: clients sampled per round (Poisson), certified for
  k-ary RR and randomizers that carry their matrix (:func:`subsampled_bounds`, :func:`subsampled_epsilon`);
* :mod:`~jaxshuffle.accountant.round_accountant`: :class:`RoundAccountant`, rounds added one
  after another (:class:`ShuffledRound`), each answer certified;
* :mod:`~jaxshuffle.accountant.rounds`: :func:`composed_epsilon` (T rounds of one randomizer: the
  smallest certified bound of PLD, basic and advanced composition);
* :mod:`~jaxshuffle.accountant.tune`: :func:`tune` (per-query eps0 under one certified composed
  budget, optax on a smooth surrogate, certified at the end), :func:`pareto_front`;

The privacy-loss distributions these rules compose have a package of their own, :mod:`jaxshuffle.pld`
(a round's PLD from its pair, composition by FFT, dp_accounting interop); the accountant re-exports its
main names (:class:`RoundPLD`, :func:`shuffled_round`, :func:`compose`, ...), and the modules' earlier
paths here (``loss_distribution``, ``pld``, ``profile_pld``, ``blanket_pld``, ``compose``, ``interop``)
give those very modules.
"""

# ``compose`` names both this package's function and the old path of the composition module
# (jaxshuffle.accountant.compose, now jaxshuffle.pld.composition). The import system sets a submodule as
# its package's attribute when it first loads it, so that path is loaded here, before the function is
# bound: a later ``import jaxshuffle.accountant.compose`` then finds it loaded and leaves the function.
from jaxshuffle.accountant import compose as _composition_path  # noqa: F401

# The sweep's job protocol (amplify split into searches and their combination) lives in
# jaxshuffle.accountant.amplify; these names stay importable here for code written against 0.2.
from jaxshuffle.accountant.amplify import (  # noqa: F401
    JOB_ROLES,
    AmplificationReport,
    PairJob,
    PointInfo,
    UpperSource,
    amplification_jobs,
    amplify,
    combine_amplification,
)
from jaxshuffle.accountant.calibrate import Calibration, CalibrationStatus, calibrate_eps0, calibrate_n
from jaxshuffle.accountant.curves import DeltaCurve, amplify_delta
from jaxshuffle.accountant.round_accountant import RoundAccountant, ShuffledRound
from jaxshuffle.accountant.rounds import ComposedEpsilon, composed_epsilon
from jaxshuffle.accountant.subsampling import SubsampledBounds, SubsampledEpsilon, subsampled_bounds, subsampled_epsilon
from jaxshuffle.accountant.tune import ParetoFront, Query, TuneResult, pareto_front, query, tune
from jaxshuffle.pld.composition import CompositionBound, compose, compose_delta, epsilon_over_rounds
from jaxshuffle.pld.distribution import DiscretePLD, RoundPLD
from jaxshuffle.pld.interop import from_dp_accounting, to_dp_accounting
from jaxshuffle.pld.two_count import rdp, round_pld, shuffled_round

__all__ = ["AmplificationReport", "UpperSource", "amplify",
           "Calibration", "CalibrationStatus", "calibrate_eps0", "calibrate_n",
           "CompositionBound", "compose", "compose_delta", "epsilon_over_rounds", "ComposedEpsilon", "composed_epsilon",
           "RoundAccountant", "ShuffledRound", "DeltaCurve", "amplify_delta",
           "SubsampledEpsilon", "subsampled_epsilon", "SubsampledBounds", "subsampled_bounds",
           "DiscretePLD", "RoundPLD", "rdp", "round_pld", "shuffled_round", "from_dp_accounting", "to_dp_accounting",
           "ParetoFront", "Query", "TuneResult", "pareto_front", "query", "tune"]
