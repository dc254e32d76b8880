"""jaxshuffle: certified privacy amplification by shuffling, in JAX (float64).

Three lines to an amplified epsilon::

    import jaxshuffle as js
    bracket = js.epsilon(js.standard_clone_pair(eps0=1.0), n=10_000, delta=1e-6)
    print(bracket.upper)  # certified for every eps0-LDP randomizer: the shuffled mechanism is (upper, delta)-DP

(``stronger_clone_pair`` is tighter and certified for k-ary randomized response; docs/math.md 3.1.)

Public API:

* pairs (:mod:`jaxshuffle.pair`): :func:`vr_pair`, :func:`stronger_clone_pair`,
  :func:`standard_clone_pair`, :func:`two_count_pair`, :class:`TwoCountPair`;
* the engine: :func:`hockey_stick` (divergence), :func:`hockey_stick_bounds` (with its
  certified band), :func:`epsilon` (certified bracket), :class:`Status`; :func:`plan_for`
  plans the static shapes once so that ``epsilon(..., plan=plan)`` runs inside ``jit``/``grad``;
* the accountant: :func:`amplify` (certified upper, lower bound, paper value for a
  randomizer from :mod:`jaxshuffle.randomizers`; :class:`UpperSource` names the bound that
  gave ``upper``; for k-ary RR the blanket pair, :func:`krr_bounds`), :func:`calibrate_eps0`,
  :func:`calibrate_n`; :func:`shuffled_round` + :func:`compose` (T rounds composed through
  their privacy-loss distributions, :class:`CompositionBound`; :func:`compose_delta` the delta
  side of the curve); :class:`RoundAccountant` (rounds added as they happen, :class:`ShuffledRound`);
  :mod:`jaxshuffle.interop` (a shuffle event for dp_accounting); :func:`tune` (split a certified
  composed budget across queries, :func:`query`, :class:`TuneResult`); :func:`compare` (every
  bound side by side); :func:`sandwich`
  (lower <= exact <= certified upper for a finite mechanism); :func:`sweep` (certified
  amplification over a parameter grid, resumable and sharded).

Layout (one concept per module): ``engine`` (the shared search pieces and status codes; the engines as
siblings: ``two_count`` with ``pair`` -> ``plan`` -> ``divergence`` -> ``search``, ``blanket`` for k-ary RR,
``matrix`` for any finite mechanism) -> ``pld`` (a round's privacy-loss distribution from its pair,
composition by FFT) -> ``accountant`` (``amplify``, ``calibrate``, ``parallel``, the T-round rule);
``randomizers`` (catalog, rows, parameters), ``closed_forms`` (one file per paper, a registry), ``exact``
(enumeration, PEM, sandwich), ``comparison``, ``metric`` (local-metric solver), ``sweeps`` (grid, jobs,
schedule, store, run), ``plot``, ``cli``.

float64: importing the package enables ``jax_enable_x64`` unless ``JAXSHUFFLE_ENABLE_X64=0``
is set, in which case call it inside ``with jax.enable_x64(True):`` (see ``_config``).
"""
import importlib
from typing import TYPE_CHECKING

from jaxshuffle import _config  # noqa: F401  (float64 and the compilation cache, before anything compiles)
from jaxshuffle._config import cache_info, clear_cache, configure
from jaxshuffle.engine.two_count.divergence import Divergence, hockey_stick, hockey_stick_bounds
from jaxshuffle.engine.two_count.pair import (
    TwoCountPair,
    standard_clone_pair,
    stronger_clone_pair,
    two_count_pair,
    vr_pair,
)
from jaxshuffle.engine.two_count.plan import Plan, plan_for
from jaxshuffle.engine.two_count.search import EpsilonBracket, Status, epsilon

# The rest of the API loads on first use (PEP 562): ``import jaxshuffle`` and a first ``epsilon`` do not
# pay for the accountant, the sweeps, the comparison tables or the exact enumeration (about 0.1 s).
_LAZY = {
    **dict.fromkeys(("AmplificationReport", "CompositionBound", "UpperSource", "amplify", "calibrate_eps0",
                     "calibrate_n", "Query", "RoundAccountant", "ShuffledRound", "TuneResult", "compose",
                     "compose_delta", "query", "shuffled_round", "tune"),
                    "jaxshuffle.accountant"),
    "compare": "jaxshuffle.comparison",
    "sandwich": "jaxshuffle.exact",
    **dict.fromkeys(("blanket_epsilon", "blanket_lower_epsilon", "krr_bounds", "plan_blanket"),
                    "jaxshuffle.engine.blanket"),
    "sweep": "jaxshuffle.sweeps",
}
#: subpackages and modules users reach as ``js.<name>`` after ``import jaxshuffle as js`` (imported on first use)
_LAZY_MODULES = ("accountant", "blanket", "blanket_lattice", "blanket_matrix", "closed_forms", "comparison",
                 "divergence", "engine", "exact", "interop", "metric", "pair", "plan", "pld", "plot", "randomizers",
                 "search", "sweeps", "utility")

# The type: ignore below: mypy sees amplify, compose and tune also as the submodules of those names (the
# functions shadow them in jaxshuffle.accountant at runtime).
if TYPE_CHECKING:  # the same names, for type checkers and IDEs
    from jaxshuffle import randomizers, utility  # noqa: F401
    from jaxshuffle.accountant import (  # type: ignore[no-redef]
        AmplificationReport,
        CompositionBound,
        Query,
        RoundAccountant,
        ShuffledRound,
        TuneResult,
        UpperSource,
        amplify,
        calibrate_eps0,
        calibrate_n,
        compose,
        compose_delta,
        query,
        shuffled_round,
        tune,
    )
    from jaxshuffle.comparison import compare  # noqa: F401
    from jaxshuffle.engine.blanket import blanket_epsilon, blanket_lower_epsilon, krr_bounds, plan_blanket  # noqa: F401
    from jaxshuffle.exact import sandwich  # noqa: F401
    from jaxshuffle.sweeps import sweep  # noqa: F401


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _LAZY_MODULES:
        value = importlib.import_module(f"jaxshuffle.{name}")
    else:
        raise AttributeError(f"module 'jaxshuffle' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_LAZY_MODULES))


__version__ = _config.VERSION

__all__ = [
    "AmplificationReport",
    "CompositionBound",
    "Divergence",
    "EpsilonBracket",
    "Plan",
    "RoundAccountant",
    "ShuffledRound",
    "Status",
    "TwoCountPair",
    "UpperSource",
    "amplify",
    "blanket_epsilon",
    "blanket_lower_epsilon",
    "cache_info",
    "clear_cache",
    "configure",
    "calibrate_eps0",
    "calibrate_n",
    "compare",
    "compose",
    "compose_delta",
    "epsilon",
    "hockey_stick",
    "hockey_stick_bounds",
    "krr_bounds",
    "plan_blanket",
    "plan_for",
    "sandwich",
    "shuffled_round",
    "standard_clone_pair",
    "stronger_clone_pair",
    "sweep",
    "Query",
    "TuneResult",
    "query",
    "tune",
    "two_count_pair",
    "vr_pair",
]
