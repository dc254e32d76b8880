"""The matrix engine: the blanket bound of any finite mechanism (docs/math.md section 11).

``forms`` (the sum forms of every ordered pair and their certified value at one ``t``), ``search``
(each form's certified epsilon and the mechanism's bracket, :func:`matrix_bounds`), ``lattice`` (the
lattice and FFT refinement of forms with more than four categories).
"""

from jaxshuffle.engine.matrix.forms import PairForms, form_divergence, pair_forms
from jaxshuffle.engine.matrix.search import MatrixBounds, MatrixPlan, matrix_bounds, plan_matrix, search_matrix

__all__ = ["MatrixBounds", "MatrixPlan", "PairForms", "form_divergence", "matrix_bounds", "pair_forms", "plan_matrix",
           "search_matrix"]
