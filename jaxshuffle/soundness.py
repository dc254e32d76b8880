"""Deprecated import path: the sandwich reports live in :mod:`jaxshuffle.exact.soundness`.

Importing this module still works and warns once (``DeprecationWarning``) with the new path.
"""

import warnings

from jaxshuffle.exact.soundness import OrderViolation, SandwichReport, grr_matrix, matrix_vr_parameters, sandwich

warnings.warn("jaxshuffle.soundness is deprecated: import from jaxshuffle.exact.soundness (or jaxshuffle.exact)",
              DeprecationWarning, stacklevel=2)

__all__ = ["OrderViolation", "SandwichReport", "grr_matrix", "matrix_vr_parameters", "sandwich"]
