"""``python -m jaxshuffle.cli ARGS`` = ``jaxshuffle ARGS``."""
import sys

from jaxshuffle.cli import main

sys.exit(main())
