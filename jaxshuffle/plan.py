"""Import path kept for the two-count engine's static plans: the module is :mod:`jaxshuffle.engine.two_count.plan`.

``import jaxshuffle.plan`` gives that very module (one module object under both names), so attributes
read, set or patched through either name are the same.
"""

import sys

from jaxshuffle.engine.two_count import plan as _module

sys.modules[__name__] = _module
