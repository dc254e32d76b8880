"""Import path kept for the two-count divergence: the module is :mod:`jaxshuffle.engine.two_count.divergence`.

``import jaxshuffle.divergence`` gives that very module (one module object under both names), so attributes
read, set or patched through either name are the same.
"""

import sys

from jaxshuffle.engine.two_count import divergence as _module

sys.modules[__name__] = _module
