"""Test configuration: float64, JAX's strictest promotion rules, derandomized Hypothesis, the slow tier.

``pytest -m "not slow"`` is the fast tier for the development loop (under 3 minutes on 2 cores: a test
that compiles programs of its own for more than a few seconds is marked slow);
CI runs everything. Hypothesis is derandomized for every test (profile ``jaxshuffle``), so a CI
run is reproducible; ``HYPOTHESIS_PROFILE=explore`` draws fresh examples locally.
"""
import atexit
import contextlib
import ctypes
import gc
import logging
import os
import re
import shutil
import signal
import tempfile

# One persistent cache for the whole test run, shared by both xdist workers and every subprocess
# they start (README examples, CLI runs, notebooks): the suite compiles the same engine programs in
# many modules and processes, and compilation is most of its time. The folder is fresh for each
# run (the controller creates it before the workers start, and they inherit the variable), so no
# test sees programs from an earlier run or from the user's cache. Tests of the caches themselves
# set JAXSHUFFLE_CACHE in their subprocesses.
if not os.environ.get("JAXSHUFFLE_TEST_CACHE"):
    os.environ["JAXSHUFFLE_TEST_CACHE"] = tempfile.mkdtemp(prefix="jaxshuffle-tests-")
    atexit.register(shutil.rmtree, os.environ["JAXSHUFFLE_TEST_CACHE"], True)
SESSION_CACHE = os.environ["JAXSHUFFLE_TEST_CACHE"]
os.environ["JAXSHUFFLE_CACHE"] = SESSION_CACHE

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

import jaxshuffle  # noqa: E402,F401  (enables float64)

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")

settings.register_profile("jaxshuffle", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "jaxshuffle"))


def _release() -> None:
    jax.clear_caches()
    gc.collect()
    _return_freed_memory()


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module.

    Every compiled CPU executable keeps a few memory maps; one process running the whole suite
    reached the kernel's limit (vm.max_map_count = 65530) and XLA crashed inside a compilation
    (SIGSEGV) or a cache write (SIGABRT). Modules rarely share programs, so this costs little.
    """
    yield
    _release()


# Past this resident size a test process drops its compiled programs after the test (they come
# back from the run's persistent cache if a later test needs them): the suite's processes stay
# under 3 GB (issue 19), the largest single test adding about 1.1 GB.
RELEASE_ABOVE_BYTES = 1.6 * 2**30


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):  # not Linux: never release early
        return 0


@pytest.fixture(autouse=True)
def _release_when_large():
    yield
    if _resident_bytes() > RELEASE_ABOVE_BYTES:
        _release()


@pytest.fixture
def release_programs_after():
    """The same after one test: for tests that compile many programs no later test reuses (the
    notebooks: without it one test process grew by ~0.5 GB per notebook, to 4.5 GB)."""
    yield
    _release()


def _return_freed_memory() -> None:
    """Hand freed heap pages back to the OS (glibc keeps them otherwise: one test process grew to
    6 GB RSS over the suite, most of it memory already freed by earlier modules)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


@pytest.fixture(autouse=True)
def _float64_and_shared_cache_guard():
    assert jax.config.read("jax_enable_x64")
    yield
    # Every test in this process shares the run's cache; one that moved it would leave later tests
    # compiling into (or loading from) a folder the run does not own.
    assert jax.config.jax_compilation_cache_dir == os.path.join(SESSION_CACHE, "xla"), \
        "a test moved the persistent compilation cache"


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler (KeyboardInterrupt), whatever the test runner installed."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def compiled_programs():
    """Collect the names of the XLA programs compiled inside the block (JAX's compile log):
    ``jit(name)`` gives ``name``; ``stage`` is JAX's copy of a new-shaped array to the device,
    ``call`` an engine program run through jaxshuffle._programs."""
    names: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            m = re.match(r"Finished XLA compilation of jit\((.*?)\)", record.getMessage())
            if m:
                names.append(m.group(1))

    handler, logger = Collect(), logging.getLogger("jax")
    logger.addHandler(handler)
    try:
        with jax.log_compiles(True):
            yield names
    finally:
        logger.removeHandler(handler)
