"""Import path kept for the PLD export to and import from dp_accounting: the module is :mod:`jaxshuffle.pld.interop`.

``import jaxshuffle.accountant.interop`` gives that very module (one module object under both names), so
attributes read, set or patched through either name are the same.
"""

import sys
from typing import TYPE_CHECKING

from jaxshuffle.pld import interop as _module

if TYPE_CHECKING:  # type checkers do not follow sys.modules: they read the module's names through this path
    from jaxshuffle.pld.interop import *  # noqa: F403

sys.modules[__name__] = _module
