"""Import path kept for the composition of round PLDs: the module is :mod:`jaxshuffle.pld.composition`.

``import jaxshuffle.accountant.compose`` gives that very module (one module object under both names), so
attributes read, set or patched through either name are the same.
"""

import sys
from typing import TYPE_CHECKING

from jaxshuffle.pld import composition as _module

if TYPE_CHECKING:  # type checkers do not follow sys.modules: they read the module's names through this path
    from jaxshuffle.pld.composition import *  # noqa: F403

sys.modules[__name__] = _module
