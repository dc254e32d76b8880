"""float64 policy and input-checking helpers shared by every module.

jaxshuffle computes privacy bounds, so it never runs in float32. The x64 decision:

* By default importing the package enables ``jax_enable_x64`` for the process: a privacy
  accountant is usually the main user of JAX in its process, and every bound must be float64.
  A float32 model in the same process keeps working where its arrays carry explicit
  dtypes (flax and optax initialise parameters with ``param_dtype=float32``); only the
  *default* dtype of untyped constructors (``jnp.zeros(3)``) becomes float64.
* To leave the process-wide default alone (a float32 training loop beside the accountant),
  set ``JAXSHUFFLE_ENABLE_X64=0`` before the import and call jaxshuffle inside
  ``with jax.enable_x64(True):`` (a scoped switch). Outside such a block every entry point
  refuses (:func:`require_x64` raises), so a bound is never computed silently in float32.

Validation convention (one rule for the whole package):

* Called eagerly (concrete inputs), bad input raises ``ValueError`` naming the
  parameter and its valid range.
* Under tracing (``jit``/``vmap``/``grad``), nothing can raise. Pair
  constructors then encode an invalid point as NaN pair fields; the engine maps
  any invalid point to ``Status.INVALID`` with the *no-claim* values: an
  epsilon upper bound of ``+inf``, a lower bound of ``0``, a divergence of
  ``+inf``. A NaN never reaches a result.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

X64_ON_IMPORT = os.environ.get("JAXSHUFFLE_ENABLE_X64", "1").strip().lower() not in ("0", "false", "no", "off")
if X64_ON_IMPORT:
    jax.config.update("jax_enable_x64", True)


def require_x64() -> None:
    """Raise if JAX runs in 32-bit mode; bounds are only computed in float64."""
    if not jax.config.read("jax_enable_x64"):
        raise RuntimeError(
            "jaxshuffle needs float64 but jax_enable_x64 is off: call jaxshuffle inside "
            "`with jax.enable_x64(True):`, or enable it for the process with "
            "jax.config.update('jax_enable_x64', True) (jaxshuffle does so on import unless "
            "JAXSHUFFLE_ENABLE_X64=0 is set)."
        )


def f64(x) -> jax.Array:
    """Convert to a float64 jax array (refusing 32-bit mode)."""
    require_x64()
    return jnp.asarray(x, dtype=jnp.float64)


def is_concrete(*xs) -> bool:
    """True when every argument has a known value (eager, or the primal under grad/jvp)."""
    leaves = jax.tree_util.tree_leaves(xs)
    return all(not isinstance(x, jax.core.Tracer) or x.to_concrete_value() is not None for x in leaves)


def concrete(x, what: str) -> np.ndarray:
    """The value of ``x`` as numpy (the primal under grad/jvp); TypeError under jit."""
    if isinstance(x, jax.core.Tracer):
        value = x.to_concrete_value()
        if value is None:
            raise TypeError(f"{what} needs concrete inputs to plan its static windows; "
                            "inside jit use the *_with_plan functions")
        x = value
    return np.asarray(x)


def check(condition, name: str, message: str, value=None) -> None:
    """Raise ``ValueError(f"{name}: {message}, got {bad value}")`` unless ``condition`` holds everywhere.

    ``condition`` is a concrete boolean array; NaN inputs must make it False. ``value`` (the
    checked array, broadcastable to ``condition``) puts the first offending value in the message.
    """
    cond = np.asarray(condition)
    if not cond.all():
        bad = tuple(int(i) for i in np.argwhere(~cond)[0]) if cond.ndim else ()
        got = ""
        if value is not None:
            try:
                v = np.broadcast_to(np.asarray(value), cond.shape)[bad]
                got = f", got {float(v):.17g}" if np.ndim(v) == 0 and np.isreal(v) else f", got {v!r}"
            except (ValueError, TypeError):
                got = ""
        where = "" if cond.ndim == 0 else f" (first bad index {bad})"
        raise ValueError(f"{name}: {message}{got}{where}")


def broadcast_shapes_or_raise(**arrays) -> tuple[int, ...]:
    """Broadcast shape of named arrays, or a ValueError naming them and their shapes."""
    shapes = {k: np.shape(v) for k, v in arrays.items()}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        desc = ", ".join(f"{k}{list(s)}" for k, s in shapes.items())
        raise ValueError(f"shapes do not broadcast: {desc}") from None


def enable_compilation_cache() -> None:
    """JAX's persistent compilation cache at ``$JAXSHUFFLE_CACHE`` or ``~/.cache/jaxshuffle/xla``.

    For command-line entry points: each engine program takes seconds to compile, and JAX
    reads this setting once per process, so call it before anything compiles.
    """
    path = os.environ.get("JAXSHUFFLE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "jaxshuffle", "xla")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:  # read-only home: run without the cache
        return
    if jax.config.jax_compilation_cache_dir is None:
        jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def use_every_cpu_core() -> None:
    """One XLA CPU device per available core, for command-line entry points.

    One XLA:CPU program keeps about 1.6 of this project's 2 cores busy; a sweep sharded over
    one CPU device per core keeps them all busy (``benchmarks/sweep.py``, n = 1e6:
    ~1100 -> ~1200 points/s). Sets ``--xla_force_host_platform_device_count`` in
    ``XLA_FLAGS``, which only the CPU platform reads, and only once: it does nothing when
    the flag is already there or JAX's backends are already up. Results do not depend on
    the device count (sweeps are tested identical on 1 and 4 devices).
    """
    from jax._src import xla_bridge  # no public test for "backends initialised"

    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" in flags or xla_bridge.backends_are_initialized():
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores > 1:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={cores}".strip()
