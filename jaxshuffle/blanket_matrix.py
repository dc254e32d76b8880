"""Import path kept for the matrix engine: the module is :mod:`jaxshuffle.engine.matrix.search`.

``import jaxshuffle.blanket_matrix`` gives that very module (one module object under both names), which
re-exports the forms' public names (:mod:`jaxshuffle.engine.matrix.forms`), so attributes read, set or
patched through either name are the same.
"""

import sys

from jaxshuffle.engine.matrix import search as _module

sys.modules[__name__] = _module
