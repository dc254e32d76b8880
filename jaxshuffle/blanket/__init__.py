"""Import path kept for k-ary RR's blanket engine: the package is :mod:`jaxshuffle.engine.blanket`.

``import jaxshuffle.blanket`` (and ``jaxshuffle.blanket.kernel``, ``.plan``, ``.search``) gives those very
modules (one module object under both names), so attributes read, set or patched through either
name are the same.
"""

import sys

from jaxshuffle.engine import blanket as _package
from jaxshuffle.engine.blanket import kernel, plan, search

for _name, _module in (("kernel", kernel), ("plan", plan), ("search", search)):
    sys.modules[f"{__name__}.{_name}"] = _module
sys.modules[__name__] = _package
