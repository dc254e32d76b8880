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

import hashlib
import os

import jax
import jax.numpy as jnp
import numpy as np

#: The package version, its one home: pyproject.toml reads it ([tool.setuptools.dynamic], statically,
#: without importing jax) and jaxshuffle.__version__ re-exports it.
VERSION = "0.2.0"

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


def array_module(*xs):
    """``numpy`` when no argument holds a JAX tracer, else ``jax.numpy``.

    Eager code on plain values computes in numpy: each eager ``jnp`` operation compiles a small XLA
    program the first time it meets a shape (tens of ms each; a first CLI call ran about 50 of them).
    Under ``jit``, ``grad`` or ``vmap`` the same formulas run in ``jnp``.
    """
    return jnp if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(xs)) else np


def as_float64(x, xp):
    """``x`` as a float64 array of the module ``xp`` (:func:`array_module`); None stays None."""
    if x is None:
        return None
    if xp is jnp:
        return f64(x)
    require_x64()  # results become jax arrays later: float64 only in 64-bit mode
    return np.asarray(x, dtype=np.float64)


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


def array_digest(static, arrays) -> bytes:
    """Digest of ``static`` (by ``repr``) and the arrays' dtypes, shapes and bytes: the key of a pure
    function's result in :func:`remember`."""
    head = repr((static, [(a.dtype.str, a.shape) for a in arrays])).encode()
    return hashlib.blake2b(head + b"".join(np.ascontiguousarray(a).tobytes() for a in arrays),
                           digest_size=32).digest()


def remember(store: dict, key, compute, size: int):
    """``store[key]``, computed by ``compute()`` and kept first if absent; beyond ``size`` entries the
    oldest are dropped (a bounded per-process store of a pure function's results)."""
    if key not in store:
        store[key] = compute()
        while len(store) > size:
            store.pop(next(iter(store)))
    return store[key]


def broadcast_shapes_or_raise(**arrays) -> tuple[int, ...]:
    """Broadcast shape of named arrays, or a ValueError naming them and their shapes."""
    shapes = {k: np.shape(v) for k, v in arrays.items()}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        desc = ", ".join(f"{k}{list(s)}" for k, s in shapes.items())
        raise ValueError(f"shapes do not broadcast: {desc}") from None


_CACHE_OFF = ("0", "off", "false", "no", "none", "")


def cache_dir() -> str | None:
    """jaxshuffle's cache folder (``None``: switched off): compiled XLA programs in ``xla/``,
    exported engine programs in ``programs/`` (:mod:`jaxshuffle._programs`).

    ``$JAXSHUFFLE_CACHE`` (a path, or ``off``), else the user's cache directory:
    ``platformdirs.user_cache_dir("jaxshuffle")`` when platformdirs is installed, else the XDG
    rule ``$XDG_CACHE_HOME/jaxshuffle`` (``~/.cache/jaxshuffle``).
    """
    env = os.environ.get("JAXSHUFFLE_CACHE")
    if env is not None:
        return None if env.strip().lower() in _CACHE_OFF else os.path.abspath(os.path.expanduser(env))
    try:
        import platformdirs

        return platformdirs.user_cache_dir("jaxshuffle")
    except ImportError:
        return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "jaxshuffle")


_CACHE: dict[str, str | None] = {"root": None}

#: The file jaxshuffle writes into each cache folder it creates (``<root>/xla``, ``<root>/programs``).
#: ``cache clear`` deletes nothing in a folder without it: only a folder the package made is its own.
CACHE_MARKER = ".jaxshuffle-cache"
_MARKER_TEXT = ("This folder was made by jaxshuffle as a cache. `jaxshuffle cache clear` deletes the files in\n"
                "it whose names jaxshuffle or JAX's compilation cache write, and nothing else.\n")

_CACHE_FOLDERS = ("xla", "programs")


def _make_cache_folder(folder: str) -> None:
    """Create ``folder`` and its :data:`CACHE_MARKER`; a folder that already exists is used as it is,
    unmarked when the package did not make it (``cache clear`` then leaves it alone)."""
    try:
        os.mkdir(folder)
    except FileExistsError:
        if os.path.isdir(folder):
            return
        raise
    try:
        with open(os.path.join(folder, CACHE_MARKER), "x", encoding="utf-8") as fh:
            fh.write(_MARKER_TEXT)
    except OSError:  # a full disk: the cache works, cache clear reports the folder and keeps it
        pass


def enable_compilation_cache(path: str | None = None) -> str | None:
    """Turn on the caches at ``path`` (default :func:`cache_dir`): JAX's persistent compilation
    cache in ``path/xla`` and the exported programs in ``path/programs``.

    Each engine program takes seconds to trace and compile; with both caches a later process
    loads it in a fraction of a second. JAX reads its setting before its first compilation, so
    jaxshuffle calls this on import. A compilation cache directory the user already set for JAX
    is left alone (and used). An unwritable folder means no cache, silently. Returns the folder
    in use, or ``None``. The ``xla`` and ``programs`` folders it creates get a :data:`CACHE_MARKER`
    file; folders that were there before are used unmarked.
    """
    path = path or cache_dir()
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
        for sub in _CACHE_FOLDERS:
            _make_cache_folder(os.path.join(path, sub))
    except OSError:  # read-only home: run without the cache
        return None
    _CACHE["root"] = path
    if not _xla_cache_dir():
        jax.config.update("jax_compilation_cache_dir", os.path.join(path, "xla"))
        # jaxshuffle's programs compile in 0.3-5 s; JAX's default threshold (1 s) would skip many.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return path


def _xla_cache_dir() -> str | None:
    """JAX's ``jax_compilation_cache_dir`` option (``None`` or ``""`` when unset)."""
    return jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined]  # jax's Config stub lists no options


def program_dir() -> str | None:
    """Folder of the exported engine programs (``None`` when the cache is off)."""
    return None if _CACHE["root"] is None else os.path.join(_CACHE["root"], "programs")


def _cache_folders() -> list[str]:
    folders = [_xla_cache_dir(), program_dir()]
    return [f for f in folders if f and os.path.isdir(f)]


def _own_cache_folders() -> list[str]:
    """The cache folders jaxshuffle made: ``<root>/xla`` (when JAX uses it) and ``<root>/programs``."""
    root = _CACHE["root"]
    if root is None:
        return []
    ours = {os.path.realpath(os.path.join(root, "xla")), os.path.realpath(os.path.join(root, "programs"))}
    return [f for f in _cache_folders() if os.path.realpath(f) in ours and not os.path.islink(f)]


def foreign_compilation_cache() -> str | None:
    """JAX's compilation cache folder when the user set it outside jaxshuffle's cache (never cleared)."""
    xla = _xla_cache_dir()
    if not xla:
        return None
    root = _CACHE["root"]
    if root is not None and os.path.realpath(xla) == os.path.realpath(os.path.join(root, "xla")):
        return None
    return xla


def cache_info() -> dict:
    """The caches in use: ``{"dir", "xla_dir", "files", "bytes"}`` (``dir`` None when off).

    Returns:
      A dict: ``dir`` (jaxshuffle's cache root, None when the cache is off), ``xla_dir`` (JAX's compilation
        cache folder, None when unset), ``files`` and ``bytes`` (what the cache folders hold).
    """
    files, size = 0, 0
    for folder in _cache_folders():
        for root, _, names in os.walk(folder):
            for name in names:
                files += 1
                try:
                    size += os.path.getsize(os.path.join(root, name))
                except OSError:
                    pass
    return {"dir": _CACHE["root"], "xla_dir": _xla_cache_dir() or None, "files": files,
            "bytes": size}


def clear_cache() -> int:
    """Delete the files of jaxshuffle's own caches (``<root>/xla`` and ``<root>/programs`` of
    :func:`cache_dir`); returns how many were removed.

    A JAX compilation cache folder the user set elsewhere (:func:`foreign_compilation_cache`) is left
    alone: it may hold other programs' entries. Symbolic links are removed as links, never followed.

    Returns:
      The number of files removed (files that could not be removed are skipped, not counted).
    """
    removed = 0
    for folder in _own_cache_folders():
        for root, _, names in os.walk(folder):  # followlinks=False: a linked folder is not entered
            for name in names:
                try:
                    os.remove(os.path.join(root, name))
                    removed += 1
                except OSError:
                    pass
    return removed


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


def configure(*, cache: bool | str | None = None) -> dict:
    """Package settings, callable before the first computation.

    JAX fixes the cache at its first compilation, so later changes apply to programs compiled
    afterwards only.

    Args:
      cache: ``False`` switches the persistent compilation cache off for this process,
        ``True`` turns it on at the default place (:func:`cache_dir`), a path puts it there;
        ``None`` (default) leaves it as it is.

    Returns:
      The dict :func:`cache_info` returns, after the change.

    Raises:
      TypeError: naming ``cache``, for anything but True, False, None or a directory path.
    """
    if cache is False:
        jax.config.update("jax_compilation_cache_dir", None)
        _CACHE["root"] = None
    elif cache is True:
        enable_compilation_cache()
    elif isinstance(cache, (str, os.PathLike)):
        jax.config.update("jax_compilation_cache_dir", None)
        enable_compilation_cache(os.path.abspath(os.fspath(cache)))
    elif cache is not None:
        raise TypeError(f"cache: must be True, False or a directory path, got {cache!r}")
    return cache_info()


# On by default for the Python API and the CLI (see the README's "Compilation cache").
enable_compilation_cache()
