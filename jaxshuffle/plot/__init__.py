"""Plots of sweep results: amplification ratio and privacy-utility surfaces (matplotlib, optional).

matplotlib is an optional dependency (``pip install 'jaxshuffle[plot]'``); it is imported when a
function here is called, with a clear ImportError if it is missing. Every single-panel function
takes an ``ax`` (a new figure's axes when ``None``) and returns it.

* :func:`amplification_ratio` -- ``eps0 / eps`` against ``eps0`` for several bounds (certified
  upper, the paper's Theorem 4.7 value, the lower bound, closed forms of
  :mod:`jaxshuffle.closed_forms`), as in Figures 1-4 of Wang et al. (VLDB 2024). With many ``n``
  in the results, at most ``max_lines`` representative values (log-spaced) are drawn, and the
  legend says which.
* :func:`privacy_utility_surface` -- amplified eps over ``(n, eps0)`` as a heat map with log
  axes and a labelled colour bar, contour lines at target eps values, and, where it applies (the
  k-ary randomized response, ``grr``), a utility overlay: the standard deviation of the k-RR
  frequency estimator (:func:`grr_frequency_std`).
* :func:`composition_curve` -- composed eps against the number of rounds T (what ``jaxshuffle
  compose --plot`` draws): the certified composed epsilon (the smallest certified bound; the
  legend names its source) next to basic and advanced composition of the one-round bound, one
  colour per delta. :func:`composition_figure` draws one such panel per (randomizer options, n)
  of a sweep with a rounds axis (what ``jaxshuffle sweep --rounds`` and ``jaxshuffle plot`` draw).
* :func:`privacy_curve` -- the privacy curve of T composed rounds, certified delta against eps
  (log scale), one line per T (what ``jaxshuffle compose --curve`` draws).
* :func:`check_results` -- the impossible values in results, one line per problem (NaN bounds,
  eps0 <= 0, a one-round upper above eps0, lower above upper): ``jaxshuffle plot`` refuses to
  draw such results.
* :func:`summary_figure` -- small multiples, written to a file (what ``jaxshuffle sweep`` and
  ``jaxshuffle plot`` draw): one row of panels per randomizer, per delta rule and per value of
  every other option axis (e.g. ``k``); in each row a heat map for a dense ``(n, eps0)`` grid
  (one colour scale shared by all heat maps) and/or the amplification ratio, or certified eps
  against ``n`` when ``eps0`` has fewer values than ``n`` (or the randomizer has no ``eps0``).

One module per concept:

* :mod:`jaxshuffle.plot.facets`: reading results into plottable form (a SweepResult with the
  columns a plot needs, or a ValueError naming the file and what is missing) and choosing the
  figure's form (facets: one row of panels per randomizer, delta rule and independent option
  value; which panels each row gets; which values of ``n`` are drawn); formatting of numbers.
* :mod:`jaxshuffle.plot.amplification`: drawing one round's amplification: the ratio, certified
  eps against ``n`` and the privacy-utility surface panels (colour bar, contour levels, label
  decluttering), the k-RR utility and closed forms they draw, and :func:`summary_figure`.
* :mod:`jaxshuffle.plot.composition`: drawing composition over rounds (:func:`composition_curve`,
  :func:`composition_figure`, :func:`privacy_curve`) and budget tuning (:func:`tuning_front`).
* :mod:`jaxshuffle.plot.common`: the lazy matplotlib import, a new figure's axes, the limits
  :data:`MAX_LINES` and :data:`MAX_FACETS`, line colours and legends.

``results`` is a :class:`jaxshuffle.sweeps.SweepResult`, a path to a sweep's results (CSV,
npz or directory), or a mapping of column name to array with at least ``n`` and ``upper``
(``eps0`` for the ratio and the surface). Empty or unusable results raise a ``ValueError`` that
names the file and what is missing.

Units: epsilon is in nats (natural logarithm: the guarantee is ``P[M(D) in S] <= e^eps
P[M(D') in S] + delta``).
"""

from __future__ import annotations

from jaxshuffle.plot.amplification import (
    amplification_ratio,
    closed_form_bounds,
    grr_frequency_std,
    privacy_utility_surface,
    summary_figure,
)
from jaxshuffle.plot.common import MAX_FACETS as MAX_FACETS
from jaxshuffle.plot.common import MAX_LINES as MAX_LINES
from jaxshuffle.plot.common import require_matplotlib as require_matplotlib
from jaxshuffle.plot.composition import composition_curve, composition_figure, privacy_curve, tuning_front
from jaxshuffle.plot.facets import check_results

__all__ = ["amplification_ratio", "privacy_utility_surface", "summary_figure", "composition_curve",
           "composition_figure", "privacy_curve", "tuning_front", "grr_frequency_std", "closed_form_bounds",
           "check_results"]
