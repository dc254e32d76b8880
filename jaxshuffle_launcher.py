"""Console entry point of ``jaxshuffle``, outside the package so that Ctrl-C during start-up is clean.

Importing anything under ``jaxshuffle`` first imports the package, and with it JAX (a second or
two). A Ctrl-C in that window ends in a traceback (a KeyboardInterrupt, or an ImportError when it
lands inside jaxlib's extension initialisation) before :func:`jaxshuffle.cli.main` can handle it.
Here, until the import is done, SIGINT prints one line and exits 130 at once (nothing has been
computed yet, so nothing is lost); then Python's own handler is back and the CLI's handling
(one line, sweeps saved and resumable) takes over.
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_while_starting(signum, frame):
    os.write(2, b"jaxshuffle: interrupted (SIGINT) while starting\n")
    os._exit(130)


def main() -> int:
    signal.signal(signal.SIGINT, _interrupted_while_starting)
    from jaxshuffle.cli import main as cli_main

    signal.signal(signal.SIGINT, signal.default_int_handler)
    return cli_main()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
