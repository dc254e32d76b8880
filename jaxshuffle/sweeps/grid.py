"""Grid syntax, the only parser of grid values and delta rules in jaxshuffle, and the expansion of a sweep spec.

Syntax (CLI and string arguments): ``1,2,5`` (a list); ``0.5:4:8`` (8 evenly spaced values,
ends included); ``1e3..1e6:7`` (7 log-spaced values); pieces combine (``0.1,1:5:5``). ``n`` and
integer options are rounded and duplicates dropped (order kept). An option may be a rule in the
randomizer's other options (``k="max(1, round(d/(exp(eps0)+1)))"``); ``delta`` accepts rules in ``n``
(``0.01/n``, ``min(1e-6, 1/n)``). Rules are a whitelist of arithmetic evaluated in float64 (no
Python integer powers: ``1/n**(9**9**9)`` is 0 at once) on read-only copies of the axes: the
functions ``log log10 exp sqrt round floor ceil`` take exactly one argument, ``min`` and ``max``
exactly two (nest them: ``max(a, max(b, c))``), none takes a keyword; another count is refused
before evaluation, so no rule reaches numpy's ``out`` argument. Grids are sized before anything is
allocated: an axis of more than :data:`MAX_AXIS_VALUES` values (``JAXSHUFFLE_MAX_GRID``) is refused
with a message naming the size and how to lift the cap.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from typing import TypeAlias

    from jaxshuffle.randomizers.catalog import Entry

    #: A delta axis as given: grid text with rules in ``n``, a number, a callable ``f(n) -> delta``, or a
    #: sequence of those.
    DeltaAxis: TypeAlias = (str | float | Callable[[np.ndarray], ArrayLike] | np.ndarray
                            | Sequence[str | float | Callable[[np.ndarray], ArrayLike]])

# ----------------------------------------------------------------------------------------
# Grid syntax


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"invalid number {text!r} (grid syntax: 1,2,5 | 0.5:4:8 | 1e3..1e6:7)") from None


_WARNED: set[str] = set()


def _env_limit(name: str, default: float) -> int:
    """``int(float($name))``, or ``default`` with a warning naming the variable when it is not a
    number >= 1 (a bad value must not stop every command at import)."""
    raw = os.environ.get(name)
    if raw is None:
        return int(default)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1):
        if name not in _WARNED:
            _WARNED.add(name)
            warnings.warn(f"{name}={raw!r} is not a number >= 1; using the defaults", stacklevel=2)
        return int(default)
    return int(value)


#: Largest number of values one grid axis may have (checked before anything is allocated);
#: the environment variable ``JAXSHUFFLE_MAX_GRID`` (API and CLI) or ``max_values=`` lifts it.
MAX_AXIS_VALUES = _env_limit("JAXSHUFFLE_MAX_GRID", 1e6)
#: Largest number of points of a whole sweep grid (the cartesian product), same variable.
MAX_GRID_POINTS = _env_limit("JAXSHUFFLE_MAX_GRID", 1e7)


def _count(text: str, piece: str, max_values: int) -> int:
    try:
        k = float(text)
    except ValueError:
        k = -1.0
    if not (k >= 1 and k == math.floor(k) and math.isfinite(k)):
        raise ValueError(f"invalid grid {piece!r}: the count after ':' must be an integer >= 1")
    if k > max_values:
        raise ValueError(f"invalid grid {piece!r}: {k:.0f} values exceed the limit of {max_values} per axis "
                         "(set JAXSHUFFLE_MAX_GRID to lift it)")
    return int(k)


def parse_grid(text: str | ArrayLike, *, integer: bool = False, max_values: int = MAX_AXIS_VALUES) -> np.ndarray:
    """Values of a grid: ``"1,2,5"``, ``"0.5:4:8"`` (linspace), ``"1e3..1e6:7"`` (geomspace), or a mix.

    Numbers and sequences are accepted as they are. ``integer=True`` rounds to integers.
    Exact duplicates are dropped, order kept. Raises ValueError on bad syntax, and before
    allocating anything when a piece asks for more than ``max_values`` values.
    """
    if isinstance(text, str):
        values: list[float] = []
        for piece in text.split(","):
            piece = piece.strip()
            if not piece:
                raise ValueError(f"invalid grid {text!r}: empty item")
            if ".." in piece:
                head, _, k_text = piece.rpartition(":")
                if not head or ".." not in head:
                    raise ValueError(f"invalid grid {piece!r}: a log grid is A..B:K (e.g. 1e3..1e6:7)")
                a_text, b_text = head.split("..", 1)
                a, b, k = _number(a_text), _number(b_text), _count(k_text, piece, max_values)
                if not (a > 0 and b > 0):
                    raise ValueError(f"invalid grid {piece!r}: a log grid needs positive ends")
                values.extend(np.geomspace(a, b, k).tolist() if k > 1 else [a])
            elif ":" in piece:
                parts = piece.split(":")
                if len(parts) != 3:
                    raise ValueError(f"invalid grid {piece!r}: a linear grid is A:B:K (e.g. 0.5:4:8)")
                a, b, k = _number(parts[0]), _number(parts[1]), _count(parts[2], piece, max_values)
                values.extend(np.linspace(a, b, k).tolist() if k > 1 else [a])
            else:
                values.append(_number(piece))
        arr = np.asarray(values, dtype=np.float64)
    else:
        arr = np.atleast_1d(np.asarray(text, dtype=np.float64)).ravel()
    if integer:
        arr = np.round(arr)
    _, first = np.unique(arr, return_index=True)
    return arr[np.sort(first)]


#: The functions a rule may call: name -> (function, number of positional arguments). Each takes
#: exactly that many positional arguments and no keyword argument (numpy's ``out=``/``where=``, or
#: a ufunc's positional ``out``, would write into a grid axis): ``min`` and ``max`` take two (nest
#: them for more: ``max(a, max(b, c))``), ``round`` rounds to an integer.
_ARITY = {"log": (np.log, 1), "log10": (np.log10, 1), "exp": (np.exp, 1), "sqrt": (np.sqrt, 1),
          "min": (np.minimum, 2), "max": (np.maximum, 2),
          "round": (np.round, 1), "floor": (np.floor, 1), "ceil": (np.ceil, 1)}


class _RuleCallError(ValueError):
    """A whitelisted function called with the wrong arguments (reported with the rule by :func:`eval_rule`)."""


def _arity_text(name: str) -> str:
    k = _ARITY[name][1]
    return f"{name}() takes exactly {k} positional argument{'s' if k != 1 else ''} and no keywords"


def _guarded(name: str):
    fn, k = _ARITY[name]

    def call(*args, **kwargs):
        if kwargs or len(args) != k:
            got = f"{len(args)} positional argument(s)" + (f" and keyword(s) {', '.join(kwargs)}" if kwargs else "")
            raise _RuleCallError(f"calls {name}() with {got}; {_arity_text(name)}")
        return fn(*args)

    call.__name__ = name
    return call


#: The callables a rule sees: every function of :data:`_ARITY`, arity-checked.
_FUNCS = {name: _guarded(name) for name in _ARITY}


def check_rule(node: ast.AST, text: str, names: Sequence[str] = ("n",), what: str = "delta") -> None:
    """Refuse a rule that is not whitelisted arithmetic, before it is evaluated.

    Allowed: numbers, the ``names`` (grid axes), ``+ - * / **``, unary ``+ -`` and calls of the
    functions of :data:`_ARITY` with exactly their number of positional arguments and no keyword
    (a function name is allowed only where it is called).

    Args:
      node: the parsed rule (``ast.parse(text, mode="eval")``).
      text: the rule as given (for the messages).
      names: the variables the rule may use.
      what: the parameter or option the rule gives (the messages start with it).

    Raises:
      ValueError: one line naming ``what``, the rule and what is allowed.
    """
    ok = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow,
          ast.USub, ast.UAdd, ast.Load, ast.Call)
    callees = {id(sub.func) for sub in ast.walk(node) if isinstance(sub, ast.Call)}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, (int, float)):
            continue
        if isinstance(sub, ast.Name) and sub.id in names:
            continue
        if isinstance(sub, ast.Name) and sub.id in _FUNCS:
            if id(sub) not in callees:
                raise ValueError(f"{what}: rule {text!r} uses the function {sub.id!r} without calling it "
                                 f"({_arity_text(sub.id)})")
            continue
        if isinstance(sub, ast.Name):
            raise ValueError(f"{what}: rule {text!r} uses {sub.id!r} (allowed names: {', '.join(names)})")
        if isinstance(sub, ast.Call):
            if not (isinstance(sub.func, ast.Name) and sub.func.id in _FUNCS):
                raise ValueError(f"{what}: rule {text!r} calls an unknown function (allowed: {', '.join(_FUNCS)})")
            name = sub.func.id
            if sub.keywords:
                kws = ", ".join(f"{kw.arg}=" if kw.arg else "**" for kw in sub.keywords)
                raise ValueError(f"{what}: rule {text!r} passes keyword(s) {kws} to {name}(); {_arity_text(name)}")
            if any(isinstance(a, ast.Starred) for a in sub.args):
                raise ValueError(f"{what}: rule {text!r} unpacks arguments (*) into {name}(); {_arity_text(name)}")
            if len(sub.args) != _ARITY[name][1]:
                raise ValueError(f"{what}: rule {text!r} calls {name}() with {len(sub.args)} argument(s); "
                                 f"{_arity_text(name)}")
        if not isinstance(sub, ok):
            raise ValueError(f"{what}: rule {text!r} is not an arithmetic expression "
                             f"(numbers, {', '.join(names)}, + - * / **, {', '.join(_FUNCS)})")


class _FloatConstants(ast.NodeTransformer):
    """Numeric literals become float64 names, so a rule never does Python big-integer arithmetic."""

    def __init__(self) -> None:
        self.values: dict[str, np.float64] = {}

    def visit_Constant(self, node):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            name = f"_c{len(self.values)}"
            self.values[name] = np.float64(node.value)
            return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)
        return node


def eval_rule(text: str, n: np.ndarray | None = None, *, env: dict | None = None, what: str = "delta") -> np.ndarray:
    """Evaluate a checked rule in float64 (``1/n**(9**9**9)`` is 0 at once, never a huge integer).

    The rule sees read-only float64 copies of its inputs, so no rule can change an array it is
    given (the caller's ``n`` or grid axes are the same after the call).

    Args:
      text: the rule, e.g. ``"min(1e-6, 1/n)"`` or ``"max(1, round(d/(exp(eps0)+1)))"``.
      n: the values of ``n`` (when ``env`` is None).
      env: the variables the rule may use, name -> array (default ``{"n": n}``).
      what: the parameter or option the rule gives (error messages start with it).

    Returns:
      The values, broadcast to the common shape of the inputs (read-only).

    Raises:
      ValueError: the rule does not parse, uses a name or function outside the whitelist, or
        calls a function with other than its number of positional arguments or with a keyword.
    """
    env = {"n": n} if env is None else env
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"{what}: rule {text!r} does not parse") from None
    check_rule(tree, text, tuple(env), what)
    consts = _FloatConstants()
    tree = ast.fix_missing_locations(consts.visit(tree))
    shape = np.broadcast_shapes(*(np.shape(v) for v in env.values()))
    values = {}
    for k, v in env.items():
        values[k] = np.array(v, dtype=np.float64)  # a copy: the caller's array is never written
        values[k].flags.writeable = False
    try:
        with np.errstate(all="ignore"):
            value = eval(compile(tree, f"<{what} rule>", "eval"), {"__builtins__": {}},  # noqa: S307
                         {**_FUNCS, **values, **consts.values})
    except _RuleCallError as exc:  # check_rule catches these first; kept as a second line of defence
        raise ValueError(f"{what}: rule {text!r} {exc}") from None
    return np.broadcast_to(np.asarray(value, dtype=np.float64), shape)


def is_rule(text: object) -> bool:
    return isinstance(text, str) and any(not (c.isdigit() or c in "eE.+-:, ") for c in text)


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (``min(1e-6, 1/n),1e-8`` has two items)."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for c in text:
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += (c == "(") - (c == ")")
        cur.append(c)
    parts.append("".join(cur))
    return parts


def parse_delta(text: DeltaAxis) -> list[float | str | Callable[[np.ndarray], ArrayLike]]:
    """Items of a delta axis: floats and rule strings in ``n`` (``"1e-6,0.01/n"``), or as given.

    Accepts a string (grid syntax plus rules), a number, a callable ``f(n) -> delta``, or a
    sequence of those. Rules are checked (a whitelist of arithmetic) and kept as strings.
    """
    if callable(text):
        return [text]
    if isinstance(text, str):
        items: list[float | str | Callable[[np.ndarray], ArrayLike]] = []
        for piece in _split_top(text):
            piece = piece.strip()
            if is_rule(piece):
                eval_rule(piece, np.ones(1))  # checks it
                items.append(piece)
            else:
                try:
                    items.extend(parse_grid(piece).tolist())
                except ValueError as exc:
                    raise ValueError(f"delta: {exc}") from None
        return items
    if isinstance(text, (list, tuple)):
        out: list[float | str | Callable[[np.ndarray], ArrayLike]] = []
        for t in text:
            out.extend(parse_delta(t) if isinstance(t, str) or callable(t) else [float(t)])
        return out
    return [float(x) for x in np.atleast_1d(np.asarray(text, dtype=np.float64)).ravel()]


def parse_n(text: str | ArrayLike, *, max_values: int = MAX_AXIS_VALUES) -> np.ndarray:
    """Values of an ``n`` axis (numbers of users): grid syntax, rounded to integers, duplicates dropped.

    The one rule for ``n`` in a sweep and in every CLI command: ``"1e3..1e4:3"`` gives 1000, 3162,
    10000. Raises ValueError naming ``n``, its range (integers >= 1) and the value given, for bad
    syntax, a value below 1 (after rounding) or a non-finite value.
    """
    what = "n: must be integers >= 1 (grid syntax: 1,2,5 | 0.5:4:8 | 1e3..1e6:7, rounded to integers)"
    return _parse_counts(text, what, max_values)


def _parse_counts(text: str | ArrayLike, what: str, max_values: int) -> np.ndarray:
    """An integer axis whose values must be >= 1 (``n``, ``rounds``): rounded, duplicates dropped;
    ValueError ``what`` plus the value given for bad syntax, no value, or a value below 1 or not finite."""
    if isinstance(text, str) and not text.strip():
        raise ValueError(f"{what}; got an empty value")
    try:
        values = parse_grid(text, integer=True, max_values=max_values)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what}; got {text!r} ({exc})") from None
    if values.size == 0:
        raise ValueError(f"{what}; got no value")
    bad = ~(np.isfinite(values) & (values >= 1))
    if bad.any():
        raw = text if isinstance(text, str) else np.asarray(text).tolist()
        raise ValueError(f"{what}; got {raw!r} (value {values[bad][0]:g} after rounding)")
    return values


def parse_option(name: str, text: str | ArrayLike, *, integer: bool = False,
                 max_values: int = MAX_AXIS_VALUES) -> np.ndarray:
    """Values of the grid axis of option ``name`` (rounded to integers when ``integer``); a ValueError
    names the option, so a sweep and every CLI command refuse a bad grid with the same message."""
    try:
        return parse_grid(text, integer=integer, max_values=max_values)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


#: Largest number of rounds of a ``rounds`` axis (every integer up to it is exact in float64).
MAX_ROUNDS = 2 ** 53


def parse_rounds(text: str | ArrayLike, *, max_values: int = MAX_AXIS_VALUES) -> np.ndarray:
    """Values of a ``rounds`` axis (numbers of rounds ``T``): grid syntax, rounded to integers, duplicates dropped.

    ``"1..1000:20"`` gives 20 log-spaced values rounded to integers (fewer where two round to the
    same integer). Raises ValueError naming ``rounds`` and its range (integers >= 1) for bad syntax,
    a value below 1 (after rounding), or a non-finite value.
    """
    what = "rounds: must be integers >= 1 (grid syntax: 1,10,100 | 1:100:5 | 1..1000:20, rounded to integers)"
    values = _parse_counts(text, what, max_values)
    if values.max() > MAX_ROUNDS:
        raise ValueError(f"rounds: {values.max():g} is above the largest supported number of rounds, {MAX_ROUNDS} "
                         "(2^53: integers >= 1 up to there are exact in float64)")
    return values.astype(np.int64)


def parse_sample_rate(text: str | ArrayLike, *, max_values: int = MAX_AXIS_VALUES) -> np.ndarray:
    """Values of a ``sample_rate`` axis (the probability ``g`` that each user takes part in a round):
    grid syntax, duplicates dropped. Raises ValueError naming ``sample_rate`` and its range (0, 1] for
    bad syntax, no value, or a value outside it."""
    what = "sample_rate: must lie in (0, 1] (the probability that a user takes part; grid syntax: 0.01,0.1,1)"
    if isinstance(text, str) and not text.strip():
        raise ValueError(f"{what}; got an empty value")
    try:
        values = parse_grid(text, max_values=max_values)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what}; got {text!r} ({exc})") from None
    if values.size == 0:
        raise ValueError(f"{what}; got no value")
    bad = ~((values > 0) & (values <= 1))
    if bad.any():
        raise ValueError(f"{what}; got {values[bad][0]!r}")
    return values


# ----------------------------------------------------------------------------------------
# The grid


def default_grid() -> dict:
    """The embedded default grid (``jaxshuffle sweep`` with no axes): about a minute on 2 CPU cores.

    Any eps0-LDP randomizer (``general``: the certified bound of the standard clone, with the
    paper's stronger-clone value beside it, two searches a point), eps0 from 0.2 to 8 (16
    log-spaced values), n from 100 to 10^5 (13 log-spaced values), delta = 1e-6: a privacy surface
    and the amplification ratio, 208 points.
    """
    return dict(randomizer="general", eps0="0.2..8:16", n="1e2..1e5:13", delta="1e-6")


def catalog_rows() -> dict[str, Entry]:
    from jaxshuffle.randomizers import CATALOG

    return CATALOG


def option_kinds() -> dict[str, str]:
    kinds: dict[str, str] = {}
    for e in catalog_rows().values():
        for a in e.args:
            kinds.setdefault(a.name, a.kind)
    return kinds


def _delta_label(rule) -> str:
    if isinstance(rule, str):
        return rule
    if isinstance(rule, dict):
        return rule["name"]
    return repr(float(rule))


def build_spec(randomizer: str | Sequence[str], n: str | ArrayLike | None, delta: DeltaAxis | None, axes: Mapping,
               rounds: str | ArrayLike | None = None, sample_rate: str | ArrayLike | None = None) -> dict:
    """A JSON-serializable description of the grid (what the fingerprint covers).

    ``rounds`` (None: no rounds axis, and no ``"rounds"`` key in the spec, so a sweep without one
    keeps its fingerprint) adds the numbers of rounds ``T`` as an axis (:func:`parse_rounds`);
    ``sample_rate`` (None: no such axis and no key) the clients' sampling rates ``g``
    (:func:`parse_sample_rate`).
    """
    catalog = catalog_rows()
    names = [randomizer] if isinstance(randomizer, str) else list(randomizer)
    names = [s.strip() for name in names for s in name.split(",")] if names else []
    if not names:
        raise ValueError("randomizer: give at least one catalog name")
    for name in names:
        if name not in catalog:
            raise ValueError(f"randomizer: unknown name {name!r}; choose one of {', '.join(sorted(catalog))}")
    kinds = option_kinds()
    used = set()
    for name in names:
        used |= {a.name for a in catalog[name].args}
    grids: dict[str, list[float] | dict] = {}
    for key, value in axes.items():
        if value is None:
            continue
        if key not in kinds or key not in used:
            valid = sorted(used)
            raise ValueError(f"{key}: not an option of randomizer(s) {', '.join(names)} (options: {', '.join(valid)})")
        if is_rule(value):  # derived option: a rule in the other options
            eval_rule(value, env={k: np.ones(1) for k in used if k != key}, what=key)  # syntax and names
            grids[key] = {"rule": value.strip()}
            continue
        grids[key] = parse_option(key, value, integer=kinds[key] == "int").tolist()
        if not grids[key]:
            raise ValueError(f"{key}: empty grid")
    if n is None:
        raise ValueError("n: required (e.g. n='1e3,1e4' or --n 1e3..1e6:7)")
    if delta is None:
        raise ValueError("delta: required (e.g. delta=1e-6, '0.01/n' or --delta 1e-8,0.01/n)")
    n_vals = parse_n(n)
    rules: list[float | str | dict[str, Any]] = []
    for item in parse_delta(delta):
        if callable(item):
            vals = np.asarray(item(n_vals.copy()), dtype=np.float64)
            vals = np.broadcast_to(vals, n_vals.shape)
            rules.append({"name": getattr(item, "__name__", "delta(n)"), "n": n_vals.tolist(), "values": vals.tolist()})
        else:
            rules.append(item)
    spec = {"randomizers": names, "options": grids, "n": n_vals.tolist(), "delta": rules}
    if sample_rate is not None:
        spec["sample_rate"] = parse_sample_rate(sample_rate).tolist()
    if rounds is not None:
        spec["rounds"] = parse_rounds(rounds).tolist()
        if not np.all(n_vals >= 2):
            raise ValueError(f"n: a sweep with a rounds axis needs n >= 2 users (composition of shuffled rounds), "
                             f"got {n_vals.min():g}")
    return spec


def _rule_values(rule, n: np.ndarray) -> np.ndarray:
    if isinstance(rule, str):
        return eval_rule(rule, n)
    if isinstance(rule, dict):
        table = dict(zip(rule["n"], rule["values"]))
        return np.asarray([table[float(x)] for x in n], dtype=np.float64)
    return np.full(n.shape, float(rule))


@dataclasses.dataclass
class Group:
    """One randomizer's block of consecutive grid points."""

    name: str
    start: int
    stop: int
    options: dict[str, np.ndarray]


def expand(spec: dict) -> tuple[dict[str, np.ndarray], list[Group], list[str]]:
    """Grid points (parameter columns) of a spec, in index order; groups per randomizer."""
    catalog = catalog_rows()
    n_vals = np.asarray(spec["n"], dtype=np.float64)
    rules = spec["delta"]
    option_names: list[str] = []
    kinds = option_kinds()
    for name in spec["randomizers"]:
        for a in catalog[name].args:
            if a.name not in option_names:
                option_names.append(a.name)
    rounds, rates = spec.get("rounds"), spec.get("sample_rate")
    r_vals = np.asarray(rounds if rounds is not None else [0], dtype=np.float64)  # [0]: no rounds axis
    g_vals = np.asarray(rates if rates is not None else [1], dtype=np.float64)  # [1]: no sample_rate axis
    axis_t = ("rounds",) if rounds is not None else ()
    axis_g = ("sample_rate",) if rates is not None else ()
    cols: dict[str, list] = {k: [] for k in ("randomizer", *option_names, "n", *axis_g, *axis_t, "delta_rule",
                                             "delta")}
    groups: list[Group] = []
    start = 0
    for name in spec["randomizers"]:
        entry = catalog[name]
        axes, free, derived = [], [], {}
        for a in entry.args:
            given = spec["options"].get(a.name)
            if isinstance(given, dict):
                derived[a.name] = given["rule"]
            elif given is not None:
                axes.append(given)
                free.append(a.name)
            elif a.default is not None:
                axes.append([float(a.default)])
                free.append(a.name)
            else:
                raise ValueError(f"{a.name}: required option of randomizer {name!r} ({a.help}; {a.range_text()})")
        total = math.prod(len(a) for a in axes) * len(n_vals) * len(g_vals) * len(r_vals) * len(rules)
        if total > MAX_GRID_POINTS:
            raise ValueError(f"grid: {total} points for randomizer {name!r} exceed the limit of {MAX_GRID_POINTS} "
                             "(set JAXSHUFFLE_MAX_GRID to lift it)")
        # the sample_rate and rounds axes (one value, ignored, without them) vary between n and delta (row
        # order unchanged without them)
        combos = list(itertools.product(*axes, range(len(n_vals)), range(len(g_vals)), range(len(r_vals)),
                                        range(len(rules))))
        size = len(combos)
        opts = {k: np.asarray([c[i] for c in combos], dtype=np.float64) for i, k in enumerate(free)}
        for k, rule in derived.items():
            val = eval_rule(rule, env=dict(opts), what=k)
            if kinds[k] == "int":
                val = np.round(val)
            opts[k] = np.array(val, dtype=np.float64)
        opts = {a.name: opts[a.name] for a in entry.args}
        n_idx = np.asarray([c[-4] for c in combos], dtype=np.int64)
        g_idx = np.asarray([c[-3] for c in combos], dtype=np.int64)
        t_idx = np.asarray([c[-2] for c in combos], dtype=np.int64)
        r_idx = np.asarray([c[-1] for c in combos], dtype=np.int64)
        n_pts = n_vals[n_idx]
        delta = np.empty(size)
        for j, rule in enumerate(rules):
            sel = r_idx == j
            delta[sel] = _rule_values(rule, n_pts[sel])
        if not np.all((delta > 0) & (delta < 1)):
            bad = int(np.argmax(~((delta > 0) & (delta < 1))))
            raise ValueError(f"delta: must lie in (0, 1); rule {_delta_label(rules[r_idx[bad]])} "
                             f"gives {delta[bad]!r} at n = {n_pts[bad]:g}")
        cols["randomizer"].extend([name] * size)
        for k in option_names:
            cols[k].extend(opts[k].tolist() if k in opts else [math.nan] * size)
        cols["n"].extend(n_pts.tolist())
        if rates is not None:
            cols["sample_rate"].extend(g_vals[g_idx].tolist())
        if rounds is not None:
            cols["rounds"].extend(r_vals[t_idx].tolist())
        cols["delta_rule"].extend(_delta_label(rules[j]) for j in r_idx)
        cols["delta"].extend(delta.tolist())
        groups.append(Group(name, start, start + size, opts))
        start += size
    table = {k: (np.asarray(v, dtype=str) if k in ("randomizer", "delta_rule") else np.asarray(v, dtype=np.float64))
             for k, v in cols.items()}
    return table, groups, option_names
