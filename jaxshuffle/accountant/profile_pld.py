"""Import path kept for a round PLD connected from a certified privacy profile: the module is
:mod:`jaxshuffle.pld.profile`.

``import jaxshuffle.accountant.profile_pld`` gives that very module (one module object under both names), so
attributes read, set or patched through either name are the same.
"""

import sys
from typing import TYPE_CHECKING

from jaxshuffle.pld import profile as _module

if TYPE_CHECKING:  # type checkers do not follow sys.modules: they read the module's names through this path
    from jaxshuffle.pld.profile import *  # noqa: F403

sys.modules[__name__] = _module
