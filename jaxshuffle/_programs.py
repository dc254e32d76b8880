"""Compile once per machine: the engine's programs, exported and kept next to the compilation cache.

JAX's persistent compilation cache removes XLA compilation from a warm start, but not tracing:
to find a program in that cache JAX first traces the Python function, and the engine's search
program takes 2-4 s to trace on a CPU (measured: the 12 Table 5 cells spent 33 of 39 s of a
warm-cache process tracing 9 programs). This module keeps each program as a serialized
``jax.export.Exported`` (StableHLO), keyed by its static shape, the argument shapes, the
versions and a digest of this package's source, in ``<cache dir>/programs``; a later process
deserializes it (milliseconds) and lets the compilation cache turn it into an executable, with no
tracing at all.

Only eager calls use it: when an argument is a tracer (``grad``, ``vmap``, a user's ``jit``)
the function is called directly, so gradients and transformations are unchanged. The exported
program is the same computation as the jitted one (tests compare them bit for bit).

**Quick compilation of small batches.** XLA's optimising CPU backend spends about 3 s on the
two-count search program, against milliseconds of evaluation for a few points. A caller that asks
``quick=True`` (an eager search call of at most :data:`QUICK_MAX_POINTS` points) gets the program
compiled with :data:`QUICK_COMPILE_OPTIONS` on a CPU: no LLVM optimisation and XLA's classic
emitters, about 3x faster to compile and 2-5x slower to run (measured ad hoc on the search at 1-8
points: 1.2 s against 3.0-3.4 s, 8 ms against 2 ms per call). The computation is the same; only the
order and fusion of float operations may differ, by a few ulps (so may lanes of programs of different
widths: the rule is per call, so that a batch of more points, a sweep's chunk included, always runs
the optimised program and gives the same numbers as before), which the certificate's error
budgets (docs/math.md section 4: relative budgets of 1e-10 and more against ulp-level rounding)
absorb; ``tests/test_programs.py`` checks both programs against each other and the certified
brackets of the quick one against exact enumeration. The blanket kernel does not ask: its
evaluation is seconds at large n and the slower code would cost more than the compilation saves.

The quick program serves only the first :data:`QUICK_CALLS` calls of a program (its key) in a process:
it buys a fast first answer, but a user who calls ``epsilon`` in a loop would pay its slower evaluation
on every call. From the next call on the optimised program runs (compiled then, or read from JAX's
persistent compilation cache), so warm calls are as fast as the optimised program. The rule counts
calls, not time, so which program answers a call never depends on timing.

**A search of many shapes** (``calibrate_n``: each probe plans its own window, so a cold call meets a
dozen programs, most of them a few times) may widen the allowance for its own calls with
:func:`quick_while`: inside the block, every call its rule accepts (the caller knows which of its
programs are cheap to evaluate: the blanket kernel at a small plan) runs the quick program, the blanket
kernel's included; such calls do not count against :data:`QUICK_CALLS`. The rule reads only the call's
name, static key and argument shapes (never timing), and the block is per thread. The allowance holds for
a program inside the first block that runs it only: a later block (the user's next ``calibrate_n``) runs
the optimised program, so repeated calls are as fast as the optimised program, as outside a block.

**Re-certification runs the optimised programs.** Inside :func:`optimised_programs` every call runs the
optimised program, whatever a block or the first-call rule would allow: a calibration re-certifies its
answer there, so the value it reports is the one any later call of the same question returns, bit for
bit. Once a program's optimised version is compiled in a process, its quick version never runs again.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import jax
import numpy as np

from jaxshuffle._config import VERSION, program_dir

if TYPE_CHECKING:
    from jax.export import Exported

_LOADED: dict[str, Exported] = {}
_CALLERS: dict[tuple[str, bool], Callable] = {}  # (program key, quick) -> jitted caller of the exported program
_QUICK_SERVED: dict[str, int] = {}  # program key -> calls its quick program answered in this process
# Compile options of a quick program on the CPU (XLA DebugOptions names).
QUICK_COMPILE_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
QUICK_MAX_POINTS = 16  # eager search calls of at most this many points compile quickly (module docstring)
QUICK_CALLS = 1  # calls of one program answered by its quick program before the optimised one takes over
_SCOPES = threading.local()  # .rules: (block number, rule) of this thread's open quick_while blocks, innermost last
_BLOCKS = itertools.count()  # numbers the quick_while blocks of the process
_QUICK_BLOCK: dict[str, int] = {}  # program key -> the quick_while block whose allowance first ran it
_VERSION = "1"  # bump when a program's meaning changes without its name or static key changing


def _export_module():
    try:
        from jax import export
        from jax._src.export import serialization  # noqa: F401  (needs flatbuffers)
    except ImportError:  # pragma: no cover - flatbuffers missing: plain jit
        return None
    return export


def source_digest(root: str | None = None) -> str:
    """SHA-256 of every ``.py`` file under ``root`` (default: this package), paths and contents.

    Part of every program's key: a program exported by other code (an edited checkout, an upgrade
    that kept the version number) is never loaded, since its meaning may differ (a fixed kernel, a
    new certificate) under the same name and static key.
    """
    root = root or os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                h.update(os.path.relpath(path, root).encode())
                with open(path, "rb") as fh:
                    h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


_SOURCE: list[str] = []  # this process's source digest, computed at the first program's key


def _key(name: str, static, arrays) -> str:
    if not _SOURCE:
        _SOURCE.append(source_digest())
    parts = [_VERSION, VERSION, _SOURCE[0], jax.__version__, jax.default_backend(), str(jax.device_count()), name,
             repr(static)]
    parts += [f"{np.shape(a)}:{np.asarray(a).dtype if not hasattr(a, 'dtype') else a.dtype}" for a in arrays]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


@contextlib.contextmanager
def quick_while(rule: Callable[[str, object, list], bool]) -> Iterator[None]:
    """Inside the block, this thread's :func:`run` calls for which ``rule(name, static, arrays)`` holds run
    the quick program on a CPU, at every call (module docstring), without counting against
    :data:`QUICK_CALLS`, for programs no earlier block ran; other calls follow the usual rule. Blocks
    nest: the innermost rule decides."""
    rules = _SCOPES.__dict__.setdefault("rules", [])
    rules.append((next(_BLOCKS), rule))
    try:
        yield
    finally:
        rules.pop()


@contextlib.contextmanager
def optimised_programs() -> Iterator[None]:
    """Inside the block, this thread's :func:`run` calls run the optimised program (module docstring)."""
    previous = getattr(_SCOPES, "optimised", False)
    _SCOPES.optimised = True
    try:
        yield
    finally:
        _SCOPES.optimised = previous


def _scoped_quick(name: str, static, arrays: list, key: str | None = None) -> bool:
    """Whether the innermost open block's rule accepts the call and, for a program ``key``, no earlier
    block's allowance ran that program (it then belongs to this block)."""
    rules: list = getattr(_SCOPES, "rules", [])
    if not rules or not rules[-1][1](name, static, arrays):
        return False
    block = rules[-1][0]
    return key is None or _QUICK_BLOCK.setdefault(key, block) == block


def run(name: str, fn: Callable, static, arrays: list, *, quick: bool = False):
    """``fn(*arrays)`` (a jitted function of flat arrays, returning a tuple of arrays), through an exported program.

    ``static`` must identify everything ``fn`` closes over (plan, tolerances). Falls back to
    calling ``fn`` when an argument is traced or export is unavailable. ``quick`` compiles the
    program with :data:`QUICK_COMPILE_OPTIONS` where the backend is the CPU, for the first
    :data:`QUICK_CALLS` calls of this program in the process, and at every call a :func:`quick_while`
    block's rule accepts (module docstring).
    """
    export = _export_module()
    if export is None or any(isinstance(a, jax.core.Tracer) for a in arrays):
        return fn(*arrays)
    key = _key(name, static, arrays)
    exported = _LOADED.get(key)
    if exported is None:
        folder = program_dir()
        path = None if folder is None else os.path.join(folder, f"{name}-{key}.bin")
        if path is not None and os.path.exists(path):
            try:
                with open(path, "rb") as fh:
                    exported = export.deserialize(fh.read())
            except Exception:  # a torn or foreign file: rebuild it
                exported = None
        if exported is None:
            specs = [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in arrays]
            exported = export.export(jax.jit(fn))(*specs)
            if path is not None:
                assert folder is not None  # path is set only under a folder
                try:
                    os.makedirs(folder, exist_ok=True)
                    tmp = f"{path}.{os.getpid()}.tmp"
                    with open(tmp, "wb") as fh:
                        fh.write(exported.serialize())
                    os.replace(tmp, path)
                except OSError:
                    pass
        _LOADED[key] = exported
    # quick only on a CPU, never once the optimised program exists, never inside optimised_programs()
    may = jax.default_backend() == "cpu" and (key, False) not in _CALLERS and not getattr(_SCOPES, "optimised", False)
    scoped = may and _scoped_quick(name, static, arrays, key)
    quick = scoped or (bool(quick) and may and _QUICK_SERVED.get(key, 0) < QUICK_CALLS)
    if quick and not scoped:
        _QUICK_SERVED[key] = _QUICK_SERVED.get(key, 0) + 1
    caller = _CALLERS.get((key, quick))
    if caller is None:
        caller = jax.jit(exported.call, compiler_options=QUICK_COMPILE_OPTIONS if quick else None)
        _CALLERS[(key, quick)] = caller
    return caller(*arrays)
