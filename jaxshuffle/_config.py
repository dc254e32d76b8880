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
import importlib
import os
import re
import stat
import warnings
from typing import NamedTuple

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


def moved_names(module: str, homes: dict[str, str], also: str = ""):
    """A module ``__getattr__`` for names that moved out of ``module``: each name of ``homes`` (name -> the
    path of its new module) still resolves there, with a ``DeprecationWarning`` naming the new path (and
    ``also``, a further hint); any other name raises the usual AttributeError."""

    def __getattr__(name: str):
        if name in homes:
            warnings.warn(f"{module}.{name} moved: import it from {homes[name]}{also}", DeprecationWarning,
                          stacklevel=2)
            return getattr(importlib.import_module(homes[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


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

#: The names written in each of jaxshuffle's cache folders, and only those are ever deleted there:
#: ``programs/``: ``_programs.run``'s ``{name}-{key}.bin`` (key: 32 hex digits) and its temporary
#: ``{name}-{key}.bin.{pid}.tmp``; ``xla/``: JAX's persistent compilation cache (jax 0.10,
#: ``jax/_src/lru_cache.py``) ``{module}-{sha256 hex}-cache`` and, with a size limit, ``...-atime``
#: (``{module}`` is ``mlir.sanitize_name``'s ``[\w.-]``). JAX's ``.lockfile`` (size limit set) and the
#: marker are kept: another process may hold the lock.
_OWN_NAMES = {
    "xla": re.compile(r"[\w.-]+-[0-9a-f]{64}-(?:cache|atime)", re.ASCII),
    "programs": re.compile(r"[\w.-]+-[0-9a-f]{32}\.bin(?:\.[0-9]+\.tmp)?", re.ASCII),
}
_KEPT = {CACHE_MARKER, ".lockfile"}

# Deletes by name relative to an open folder (no path is looked up again, so a folder swapped for a
# link meanwhile is never entered); the paths instead where the platform lacks *at calls (Windows).
# os.remove takes dir_fd wherever os.unlink does (one function; supports_dir_fd lists unlink only).
_AT_CALLS = (os.unlink in os.supports_dir_fd and os.stat in os.supports_dir_fd and os.scandir in os.supports_fd
             and hasattr(os, "O_DIRECTORY") and hasattr(os, "O_NOFOLLOW"))


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
    file; folders that were there before are used unmarked (:func:`clear_cache` keeps them).
    """
    path = path or cache_dir()
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
        for sub in _OWN_NAMES:
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


def _cache_folders() -> list[tuple[str, re.Pattern[str]]]:
    """The cache folders in use, each with the names of its entries."""
    folders = [(_xla_cache_dir(), _OWN_NAMES["xla"]), (program_dir(), _OWN_NAMES["programs"])]
    return [(f, names) for f, names in folders if f and os.path.isdir(f)]


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
        cache folder, None when unset), ``files`` and ``bytes`` (the cache entries the folders hold: regular
        files named as jaxshuffle and JAX name them; other files, links and subfolders are not counted).
    """
    files, size = 0, 0
    for folder, names in _cache_folders():
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if names.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                    files += 1
                    size += entry.stat(follow_symlinks=False).st_size
            except OSError:
                pass
    return {"dir": _CACHE["root"], "xla_dir": _xla_cache_dir() or None, "files": files,
            "bytes": size}


class CacheClear(NamedTuple):
    """What :func:`clear_cache_report` did: ``removed`` files, and one line ``"PATH: why"`` for each thing
    in or of jaxshuffle's cache folders it ``left`` (foreign files, links, subfolders, unmarked folders,
    files it could not remove)."""

    removed: int
    left: tuple[str, ...]


def _clear_own_folder(folder: str, names: re.Pattern[str]) -> tuple[int, list[str]]:
    """Delete the regular files named by ``names`` directly in ``folder`` when it holds :data:`CACHE_MARKER`;
    returns how many it removed and a line for each thing it left (the contract: :func:`clear_cache`).
    Never enters a subfolder or follows a link."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return 0, []
    except OSError as exc:
        return 0, [f"{folder}: not read ({exc.strerror or exc})"]
    if stat.S_ISLNK(st.st_mode):
        return 0, [f"{folder}: a link, not followed"]
    if not stat.S_ISDIR(st.st_mode):
        return 0, [f"{folder}: not a folder"]
    fd = None
    try:
        if _AT_CALLS:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            marked = stat.S_ISREG(os.stat(CACHE_MARKER if fd is not None else os.path.join(folder, CACHE_MARKER),
                                          dir_fd=fd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            marked = False
        entries = sorted(os.scandir(fd if fd is not None else folder), key=lambda e: e.name)
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        return 0, [f"{folder}: not read ({exc.strerror or exc})"]
    try:
        if not marked:
            like = sum(1 for e in entries if names.fullmatch(e.name) and e.is_file(follow_symlinks=False))
            return 0, [f"{folder}: left alone, it has no {CACHE_MARKER} marker (jaxshuffle did not make this "
                       f"folder, or jaxshuffle 0.2.0 or earlier did); {like} of its files have names jaxshuffle or "
                       "JAX writes: delete them by hand if they are not yours"]
        removed, left = 0, []
        for e in entries:
            path = os.path.join(folder, e.name)
            if e.is_symlink():
                left.append(f"{path}: a link, not followed")
            elif e.is_dir(follow_symlinks=False):
                left.append(f"{path}: a folder (jaxshuffle writes none here)")
            elif e.name in _KEPT:
                continue  # the marker, and JAX's lock file (another process may hold it)
            elif not names.fullmatch(e.name):
                left.append(f"{path}: not a name jaxshuffle or JAX writes here")
            elif not e.is_file(follow_symlinks=False):
                left.append(f"{path}: not a regular file")
            else:
                try:
                    os.remove(e.name if fd is not None else path, dir_fd=fd)
                    removed += 1
                except OSError as exc:
                    left.append(f"{path}: not removed ({exc.strerror or exc})")
        return removed, left
    finally:
        if fd is not None:
            os.close(fd)


def clear_cache_report() -> CacheClear:
    """:func:`clear_cache`, returning what it removed and a line for each thing it left."""
    root = _CACHE["root"]
    if root is None:
        return CacheClear(0, ())
    removed, left = 0, []
    for sub, names in _OWN_NAMES.items():
        n, kept = _clear_own_folder(os.path.join(root, sub), names)
        removed += n
        left += kept
    return CacheClear(removed, tuple(left))


def clear_cache() -> int:
    """Delete the entries of jaxshuffle's own caches (``<root>/xla`` and ``<root>/programs`` of
    :func:`cache_dir`); returns how many files were removed.

    The package deletes only files it wrote. In a folder it made (it holds :data:`CACHE_MARKER`, which
    the package writes when it creates the folder) it deletes the regular files directly inside whose
    names it or JAX's compilation cache write there: ``{name}-{32 hex}.bin`` (and their ``.{pid}.tmp``)
    in ``programs``, ``{module}-{64 hex}-cache`` / ``-atime`` in ``xla``. Any other file, every
    subfolder and every symbolic link (never followed) is left, and so is a folder without the marker
    (one that was there before jaxshuffle used it, or a cache of jaxshuffle 0.2.0 or earlier: its files'
    names are no proof that jaxshuffle wrote them; delete such a folder by hand). A JAX compilation
    cache folder the user set elsewhere (:func:`foreign_compilation_cache`) is left alone: it may hold
    other programs' entries.

    Whatever is left in or of these folders is named in one :class:`UserWarning`
    (:func:`clear_cache_report` returns the lines instead).

    Returns:
      The number of files removed (files that could not be removed are named in the warning, not counted).
    """
    report = clear_cache_report()
    if report.left:
        warnings.warn(f"cache clear left {len(report.left)} things in place:\n  " + "\n  ".join(report.left),
                      stacklevel=2)
    return report.removed


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
