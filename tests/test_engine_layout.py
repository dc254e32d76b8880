"""The engines as siblings under jaxshuffle.engine: old import paths are the very modules, the package's
own code imports the new paths only, and the shared certified step keeps its side (docs/math.md section 5,
"One core for every engine")."""
import importlib
import pathlib
import re
import subprocess
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import jaxshuffle as js
from jaxshuffle.engine._search import EpsilonBracket, Status, tangent_lower

ALIASES = {
    "jaxshuffle.pair": "jaxshuffle.engine.two_count.pair",
    "jaxshuffle.plan": "jaxshuffle.engine.two_count.plan",
    "jaxshuffle.divergence": "jaxshuffle.engine.two_count.divergence",
    "jaxshuffle.search": "jaxshuffle.engine.two_count.search",
    "jaxshuffle.blanket": "jaxshuffle.engine.blanket",
    "jaxshuffle.blanket.kernel": "jaxshuffle.engine.blanket.kernel",
    "jaxshuffle.blanket.plan": "jaxshuffle.engine.blanket.plan",
    "jaxshuffle.blanket.search": "jaxshuffle.engine.blanket.search",
    "jaxshuffle.blanket_matrix": "jaxshuffle.engine.matrix.search",
    "jaxshuffle.blanket_lattice": "jaxshuffle.engine.matrix.lattice",
}
PACKAGE = pathlib.Path(js.__file__).parent


def test_old_import_paths_are_the_engine_modules():
    for old, new in ALIASES.items():
        assert importlib.import_module(old) is importlib.import_module(new), old
    assert js.search.Status is js.Status is js.engine.Status and js.search.EpsilonBracket is EpsilonBracket
    from jaxshuffle.blanket_matrix import pair_forms  # the forms' names through the old path
    from jaxshuffle.engine.matrix.forms import pair_forms as new_pair_forms
    assert pair_forms is new_pair_forms


def test_old_paths_in_a_fresh_process_share_one_module_object():
    """Imported first by the old name (no earlier import of the engine module in the process)."""
    code = ("import jaxshuffle.blanket.plan as a, jaxshuffle.search as s, jaxshuffle.blanket_matrix as m\n"
            "import jaxshuffle.engine.blanket.plan as b, jaxshuffle.engine.two_count.search as t\n"
            "import jaxshuffle.engine.matrix.search as n\n"
            "assert a is b and s is t and m is n and a.BlanketPlan is b.BlanketPlan\n"
            "import jaxshuffle as js; assert js.blanket.plan is b and js.engine.matrix.search is n\n")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


def test_the_package_imports_the_engines_by_their_new_paths():
    """The old paths are for users; inside the package each module is imported under one name only."""
    shims = {PACKAGE / f"{m}.py" for m in ("pair", "plan", "divergence", "search", "blanket_matrix",
                                           "blanket_lattice")} | {PACKAGE / "blanket" / "__init__.py"}
    old = re.compile(r"^\s*(from|import) jaxshuffle(\.(pair|plan|divergence|search|blanket_matrix|blanket_lattice|"
                     r"blanket)\b| import .*\b(pair|plan|divergence|search|blanket_matrix|blanket_lattice|blanket)\b)")
    offenders = [f"{p.relative_to(PACKAGE)}:{i}" for p in PACKAGE.rglob("*.py") if p not in shims
                 for i, line in enumerate(p.read_text().splitlines(), 1) if old.match(line)]
    assert not offenders, offenders


@given(st.lists(st.tuples(st.floats(0.05, 3.0), st.floats(0.0, 2.0)), min_size=1, max_size=5),
       st.floats(1e-9, 0.5), st.floats(0.0, 3.0))
def test_tangent_lower_never_passes_the_root(lines, delta, x):
    """D(t) = max_j (a_j - b_j t)_+ is convex and nonincreasing; its tangent at any evaluated x (value and
    slope of the active line) gives lo_tan, which must stay at or below the root eps* = log t*."""
    a = np.array([ln[0] for ln in lines]) + delta  # every line starts above delta at t = 0
    b = np.array([ln[1] for ln in lines]) + 1e-3
    t_root = float(np.max((a - delta) / b))  # D(t) <= delta iff every a_j - b_j t <= delta
    if t_root <= 1.0:
        return
    t = np.exp(x)
    vals = a - b * t
    j = int(np.argmax(vals))
    value, slope = max(float(vals[j]), 0.0), float(b[j]) if vals[j] > 0 else 0.0
    lo_tan, usable = tangent_lower(jnp.float64(x), jnp.float64(value), jnp.float64(slope), jnp.float64(delta),
                                   jnp.float64(0.0), jnp.float64(np.inf))
    if bool(usable):
        assert float(lo_tan) <= np.log(t_root)


def test_status_is_one_enum_for_every_engine():
    from jaxshuffle.engine.blanket import search as blanket_search
    from jaxshuffle.engine.matrix import search as matrix_search
    assert blanket_search.Status is matrix_search.Status is Status
    assert Status.MAX_ITER.label == "max-iter"


def test_one_search_loop_and_one_implicit_gradient_wrapper():
    """Every engine searches through engine._search.certified_search and differentiates through
    engine._search.implicit_upper: the package holds one bracketing while_loop and one custom_root."""
    def count(pattern):
        return {str(p.relative_to(PACKAGE)): len(re.findall(pattern, p.read_text()))
                for p in (PACKAGE / "engine").rglob("*.py") if re.search(pattern, p.read_text())}
    assert count(r"lax\.while_loop\(") == {"engine/_search.py": 1}
    assert count(r"lax\.custom_root\(") == {"engine/_search.py": 1}
    for engine in ("two_count", "blanket", "matrix"):
        assert "certified_search(" in (PACKAGE / "engine" / engine / "search.py").read_text(), engine


class _Band(NamedTuple):
    lower: jax.Array
    upper: jax.Array


@given(st.floats(0.05, 5.0), st.floats(1e-6, 0.2), st.floats(0.0, 0.05), st.integers(0, 2**31 - 1),
       st.booleans())
def test_the_loop_certifies_whatever_the_strategy(root, delta, band_rel, seed, wild_moves):
    """certified_search's bracket holds the root of a decreasing D with a band of relative width band_rel,
    whatever probes the strategy picks (random ones here); an engine proposing looser ends than the
    evaluations certified does not loosen the bracket (the loop keeps max/min)."""
    from jaxshuffle.engine._search import Move, SearchState, certified_search
    rng = np.random.default_rng(seed)
    probes = jnp.asarray(rng.uniform(0.0, 2.0 * root + 1.0, 40))

    def divergence(x):  # decreasing in eps, crossing delta exactly at eps = root
        return delta * jnp.exp(root - x)

    def evaluate(x):
        d = divergence(x)
        return _Band(d * (1.0 - band_rel), d * (1.0 + band_rel))

    def advance(s: SearchState, band, lo, hi) -> Move:
        if wild_moves:  # looser than what the evaluations certified: the loop must keep its own ends
            lo, hi = lo - 1.0, hi + 1.0
        nxt = probes[(s.it + 1) % probes.shape[0]]  # the start evaluated probes[0]
        return Move(lo, hi, nxt, jnp.int8(Status.MAX_ITER), jnp.asarray(False), s.extra)

    start = SearchState(jnp.int32(0), jnp.float64(0.0), jnp.float64(jnp.inf), probes[0], jnp.int8(Status.MAX_ITER),
                        jnp.asarray(False), ())
    out = certified_search(evaluate, advance, start, delta, max_iter=30)
    lo, hi = float(out.lo), float(out.hi)
    assert lo <= root * (1 + 1e-12) and root <= hi * (1 + 1e-12)
    # the ends are exactly the nearest probes certified on each side (none lost to a loose proposal)
    d = delta * np.exp(root - np.asarray(probes[:30]))
    above = np.asarray(probes[:30])[d * (1.0 + band_rel) <= delta]
    below = np.asarray(probes[:30])[d * (1.0 - band_rel) > delta]
    assert hi == (above.min() if above.size else np.inf) and lo == (below.max() if below.size else 0.0)
    assert int(out.it) == 30


def test_no_module_imports_another_modules_private_name():
    """A name with a leading underscore is its module's own: no module of the package imports one from
    another module (the package's shared private modules, ``_config``, ``_binomial``, ``_programs`` ...,
    are imported as modules or for their public names)."""
    import ast

    root = pathlib.Path(js.__file__).parent
    modules = {p.stem for p in root.rglob("*.py")}
    offenders = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jaxshuffle"):
                private = [a.name for a in node.names
                           if a.name.startswith("_") and not a.name.startswith("__") and a.name not in modules]
                offenders += [f"{path.relative_to(root)}:{node.lineno} {node.module}.{name}" for name in private]
    assert offenders == []
