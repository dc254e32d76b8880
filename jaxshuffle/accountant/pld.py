"""Import path kept for a two-count pair's round PLD: the module is :mod:`jaxshuffle.pld.two_count`.

``import jaxshuffle.accountant.pld`` gives that very module (one module object under both names), so
attributes read, set or patched through either name are the same.
"""

import sys
from typing import TYPE_CHECKING

from jaxshuffle.pld import two_count as _module

if TYPE_CHECKING:  # type checkers do not follow sys.modules: they read the module's names through this path
    from jaxshuffle.pld.two_count import *  # noqa: F403

sys.modules[__name__] = _module
