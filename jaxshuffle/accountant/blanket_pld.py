"""Import path kept for the blanket and three-count pairs' round PLDs: the module is :mod:`jaxshuffle.pld.blanket`.

``import jaxshuffle.accountant.blanket_pld`` gives that very module (one module object under both names), so
attributes read, set or patched through either name are the same.
"""

import sys
from typing import TYPE_CHECKING

from jaxshuffle.pld import blanket as _module

if TYPE_CHECKING:  # type checkers do not follow sys.modules: they read the module's names through this path
    from jaxshuffle.pld.blanket import *  # noqa: F403

sys.modules[__name__] = _module
