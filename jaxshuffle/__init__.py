"""jaxshuffle: certified privacy amplification by shuffling, in JAX (float64)."""
from jaxshuffle import _config  # noqa: F401  (enables float64 before anything else)
from jaxshuffle.pair import (
    TwoCountPair,
    standard_clone_pair,
    stronger_clone_pair,
    two_count_pair,
    vr_pair,
)

__version__ = "0.1.0"
