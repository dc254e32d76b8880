"""Import path kept for the two-count pair: the module is :mod:`jaxshuffle.engine.two_count.pair`.

``import jaxshuffle.pair`` gives that very module (one module object under both names), so attributes
read, set or patched through either name are the same.
"""

import sys

from jaxshuffle.engine.two_count import pair as _module

sys.modules[__name__] = _module
