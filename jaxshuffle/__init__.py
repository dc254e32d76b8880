"""jaxshuffle: certified privacy amplification by shuffling, in JAX (float64).

Three lines to an amplified epsilon::

    import jaxshuffle as js
    bracket = js.epsilon(js.stronger_clone_pair(eps0=1.0), n=10_000, delta=1e-6)
    print(bracket.upper)  # certified: the shuffled eps0-LDP mechanism is (upper, delta)-DP

Public API:

* pairs (:mod:`jaxshuffle.pair`): :func:`vr_pair`, :func:`stronger_clone_pair`,
  :func:`standard_clone_pair`, :func:`two_count_pair`, :class:`TwoCountPair`;
* the engine: :func:`hockey_stick` (divergence), :func:`hockey_stick_bounds` (with its
  certified band), :func:`epsilon` (certified bracket), :class:`Status`;
* the accountant: :func:`amplify` (certified upper, lower bound, paper value for a
  randomizer from :mod:`jaxshuffle.randomizers`), :func:`calibrate_eps0`,
  :func:`calibrate_n`; :func:`compare` (every bound side by side); :func:`sandwich`
  (lower <= exact <= certified upper for a finite mechanism); :func:`sweep` (certified
  amplification over a parameter grid, resumable and sharded).

Modules: ``randomizers`` (parameter catalog), ``closed_forms`` and ``metric`` (closed-form
bounds), ``exact`` (ground truth by enumeration, PEM lower bound), ``comparison``
(:func:`compare`), ``soundness`` (:func:`sandwich`), ``sweeps`` (:func:`sweep`,
``merge``, ``load``, grid syntax), ``plot`` (figures of sweep results). Importing the
package enables ``jax_enable_x64``: every bound is computed in float64.
"""
from jaxshuffle import _config  # noqa: F401  (enables float64 before anything else)
from jaxshuffle.divergence import Divergence, hockey_stick, hockey_stick_bounds
from jaxshuffle.pair import (
    TwoCountPair,
    standard_clone_pair,
    stronger_clone_pair,
    two_count_pair,
    vr_pair,
)
from jaxshuffle.search import EpsilonBracket, Status, epsilon
from jaxshuffle.accountant import AmplificationReport, amplify, calibrate_eps0, calibrate_n  # noqa: E402
from jaxshuffle.comparison import compare  # noqa: E402
from jaxshuffle.exact import sandwich  # noqa: E402
from jaxshuffle.sweeps import sweep  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "AmplificationReport",
    "Divergence",
    "EpsilonBracket",
    "Status",
    "TwoCountPair",
    "amplify",
    "calibrate_eps0",
    "calibrate_n",
    "compare",
    "epsilon",
    "hockey_stick",
    "hockey_stick_bounds",
    "sandwich",
    "standard_clone_pair",
    "stronger_clone_pair",
    "sweep",
    "two_count_pair",
    "vr_pair",
]
