"""Moved: the sandwich reports live in :mod:`jaxshuffle.exact.soundness` (re-exported here for old imports)."""

from jaxshuffle.exact.soundness import OrderViolation, SandwichReport, grr_matrix, matrix_vr_parameters, sandwich

__all__ = ["OrderViolation", "SandwichReport", "grr_matrix", "matrix_vr_parameters", "sandwich"]
