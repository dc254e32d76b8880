"""Import path kept for the matrix engine's lattice refinement: the module is :mod:`jaxshuffle.engine.matrix.lattice`.

``import jaxshuffle.blanket_lattice`` gives that very module (one module object under both names), so attributes
read, set or patched through either name are the same.
"""

import sys

from jaxshuffle.engine.matrix import lattice as _module

sys.modules[__name__] = _module
