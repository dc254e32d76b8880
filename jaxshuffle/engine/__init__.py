"""The engines: certified epsilon brackets of shuffled mechanisms, siblings on one shared core.

* :mod:`jaxshuffle.engine._search`: what every search shares (:class:`Status`, :class:`EpsilonBracket`,
  the certified steps that move a bracket end).
* :mod:`jaxshuffle.engine.two_count`: the two-count pair (``pair`` -> ``plan`` -> ``divergence`` ->
  ``search``), certified for every eps0-LDP randomizer (docs/math.md sections 2-6).
* :mod:`jaxshuffle.engine.blanket`: k-ary randomized response's blanket (three-count) pair (section 10).
* :mod:`jaxshuffle.engine.matrix`: the blanket bound of any finite mechanism's matrix, with its lattice
  refinement (section 11).

The old import paths (``jaxshuffle.search``, ``jaxshuffle.blanket``, ``jaxshuffle.blanket_matrix``, ...)
give these very modules.
"""

from jaxshuffle.engine._search import EpsilonBracket, Status

__all__ = ["EpsilonBracket", "Status"]
