"""Reading results into plottable form and choosing a figure's form.

:func:`as_result` turns a :class:`jaxshuffle.sweeps.SweepResult`, a path or a mapping of columns
into a SweepResult with the columns a plot needs (else a ValueError naming the file and what is
missing); :func:`split_facets` splits it into panels (rows of panels, :class:`Facet`): one per
randomizer, delta rule and value of every independent option axis (:func:`one_facet`: the first, for a
single-panel plot); :func:`representative` picks the values of ``n``
(or ``eps0``, delta) a panel draws; :func:`panel_kinds` and :func:`first_panels` choose which
panels a figure draws; number and delta formatting for titles and legends. No drawing here.
"""

from __future__ import annotations

import csv
import math
import os
import warnings
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from typing import TypeAlias

    from jaxshuffle.sweeps.store import SweepResult

    #: What the plots read: a SweepResult, a path to results, or a mapping of column name to array.
    Results: TypeAlias = SweepResult | str | os.PathLike[str] | Mapping[str, ArrayLike]

_T = TypeVar("_T")

# ----------------------------------------------------------------------------------------
# Input: a SweepResult, a path or a mapping; clear errors for empty or unusable results

def error_prefix(res: SweepResult) -> str:
    """``"results: PATH: "`` (or ``"results: "`` for results not read from a file), the start of an error message."""
    return f"results: {res.path}: " if getattr(res, "path", None) is not None else "results: "


def as_result(results: Results, need: Sequence[str] = ()) -> SweepResult:
    """``results`` as a SweepResult with rows and the ``need`` columns, else a ValueError saying what is wrong."""
    from jaxshuffle.sweeps.store import SweepResult, load

    if isinstance(results, SweepResult):
        res = results
    elif isinstance(results, (str, os.PathLike)):
        try:
            res = load(results)
        except (ValueError, OSError, csv.Error, zipfile.BadZipFile, KeyError, EOFError) as exc:
            msg = str(exc)
            if isinstance(exc, ValueError) and not isinstance(exc, UnicodeDecodeError) and str(results) in msg:
                raise ValueError(msg if msg.startswith("results:") else f"results: {msg}") from None
            raise ValueError(f"results: {os.fspath(results)} is not a readable sweep results file "
                             f"(results.csv, results.npz or a sweep directory): {type(exc).__name__}: {msg}") from None
    elif hasattr(results, "keys"):
        cols = {k: np.asarray(results[k]) for k in results.keys()}
        sizes = {k: c.shape for k, c in cols.items()}
        if any(len(s) != 1 for s in sizes.values()) or len({s[0] for s in sizes.values()}) > 1:
            raise ValueError("results: the columns must be 1-D arrays of one length (got shapes "
                             + ", ".join(f"{k} {s}" for k, s in sizes.items()) + ")")
        res = SweepResult(cols, {})
    else:
        raise TypeError("results: expected a SweepResult, a path, or a mapping of columns, "
                        f"not {type(results).__name__}")
    where = error_prefix(res)
    if not res.columns:
        raise ValueError(f"{where}no columns (an empty file?): nothing to plot")
    if len(res) == 0:
        raise ValueError(f"{where}no rows (a header-only file, or an empty sweep): nothing to plot")
    missing = [c for c in need if c not in res]
    if missing:
        raise ValueError(f"{where}no column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                         f"(it has: {', '.join(res.keys())}); a sweep's results.csv has n, eps0, delta, upper, ...")
    for c in need:
        col = res[c]
        if col.dtype.kind not in "fiub":
            raise ValueError(f"{where}column {c} is not numeric (dtype {col.dtype})")
        if c != "eps0" and not np.isfinite(col.astype(np.float64)).any():
            raise ValueError(f"{where}column {c} has no finite value ({len(res)} rows): nothing to plot")
    return res


#: Relative slack of the consistency checks of :func:`check_results` (``upper <= eps0``, ``lower <= upper``).
CHECK_RTOL = 1e-9


def _eps0_randomizers() -> set[str]:
    """Catalog names whose randomizer has an ``eps0`` option (elsewhere an empty eps0 cell is expected)."""
    from jaxshuffle.randomizers import CATALOG

    return {name for name, e in CATALOG.items() if any(a.name == "eps0" for a in e.args)}


def check_results(results: Results, *, rtol: float = CHECK_RTOL) -> list[str]:
    """The impossible values in sweep results, one line per problem (empty when the data can be drawn).

    A row is refused where

    * ``upper`` (or ``lower``, where the column exists) is NaN or negative;
    * ``eps0`` is NaN (for a randomizer with an ``eps0`` option), infinite, zero or negative: the local
      budget of an eps0-LDP randomizer is a finite number > 0 on the plots' log axes and in
      the ratio ``eps0 / eps`` (a sweep at eps0 = 0 has nothing to amplify);
    * a finite ``upper`` is above ``eps0`` by more than the relative ``rtol``: shuffling one
      round of eps0-LDP messages never raises epsilon above eps0 (not checked with a ``rounds``
      column, whose ``upper`` is the eps of T composed rounds). ``upper = inf`` is no finite
      certified bound (the package writes it where an engine does not cover the point), not a
      contradiction;
    * ``lower`` is above ``upper`` by more than the relative ``rtol``.

    Args:
      results: a :class:`jaxshuffle.sweeps.SweepResult`, a path to results or a mapping of columns.
      rtol: relative slack of the comparisons (default :data:`CHECK_RTOL`).

    Returns:
      Lines ``"results: PATH: row I (index J): COLUMN = VALUE ..."``; ``I`` counts data rows from 0,
      ``J`` is the row's ``index`` column (the grid point number) where there is one.
    """
    res = as_result(results)
    where = error_prefix(res)
    size = len(res)

    def col(name: str) -> np.ndarray | None:
        if name not in res:
            return None
        c = res[name]
        if c.dtype.kind not in "fiub":
            raise ValueError(f"{where}column {name} is not numeric (dtype {c.dtype})")
        return c.astype(np.float64)

    upper, lower, eps0 = col("upper"), col("lower"), col("eps0")
    index = res["index"] if "index" in res else None
    names = res["randomizer"] if "randomizer" in res else None
    with_eps0 = _eps0_randomizers()
    one_round = "rounds" not in res
    problems: list[tuple[np.intp, str]] = []
    for name, c in (("upper", upper), ("lower", lower)):
        if c is None:
            continue
        for i in np.flatnonzero(np.isnan(c)):
            problems.append((i, f"{name} = nan is not a number (a bound must be a number >= 0)"))
        for i in np.flatnonzero(c < 0):
            problems.append((i, f"{name} = {_fmt_value(c[i])} is negative (epsilon is >= 0)"))
    if eps0 is not None:
        expected = np.ones(size, bool) if names is None else np.isin(names.astype(str), list(with_eps0))
        for i in np.flatnonzero(np.isnan(eps0) & expected):
            problems.append((i, f"eps0 = nan is not a number (the local budget of randomizer "
                                f"{str(names[i]) if names is not None else 'this row'!r} must be > 0)"))
        for i in np.flatnonzero(~np.isnan(eps0) & ~(np.isfinite(eps0) & (eps0 > 0))):
            problems.append((i, f"eps0 = {_fmt_value(eps0[i])} is not allowed "
                                "(the local budget must be a finite number > 0)"))
        if one_round and upper is not None:
            ok_e = np.isfinite(eps0) & (eps0 > 0)
            above = ok_e & np.isfinite(upper) & (upper > eps0 * (1 + rtol))
            for i in np.flatnonzero(above):
                problems.append((i, f"upper = {_fmt_value(upper[i])} is above eps0 = {_fmt_value(eps0[i])} "
                                    f"(shuffling never raises epsilon above eps0; relative slack {rtol:g})"))
    if upper is not None and lower is not None:
        above = ~np.isnan(lower) & np.isfinite(upper) & (lower > upper + rtol * np.abs(upper))
        for i in np.flatnonzero(above):
            problems.append((i, f"lower = {_fmt_value(lower[i])} is above upper = {_fmt_value(upper[i])} "
                                f"(a lower bound cannot exceed the certified upper bound; relative slack {rtol:g})"))
    problems.sort(key=lambda t: t[0])
    lines = []
    for i, text in problems:
        idx = "" if index is None else f" (index {_fmt_index(index[i])})"
        lines.append(f"{where}row {i}{idx}: {text}")
    return lines


def _fmt_value(x: float | np.floating) -> str:
    """A float as its shortest exact text, without a trailing ``.0`` (``-1``, ``0.3``, ``1.0000000001``)."""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def _fmt_index(value: float | np.number | str) -> str:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    return str(int(x)) if math.isfinite(x) and x == int(x) else str(value)


def select_rows(res: SweepResult, mask: np.ndarray) -> SweepResult:
    from jaxshuffle.sweeps.store import SweepResult

    return SweepResult({k: c[mask] for k, c in res.columns.items()}, res.meta, res.path)


def fmt_num(x: float) -> str:
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    e = math.floor(math.log10(abs(x)))
    m = x / 10 ** e
    if abs(e) <= 3:
        return f"{x:.4g}"
    if abs(m - 1) < 1e-9:
        return f"$10^{{{e}}}$"
    return f"${m:.3g}\\times10^{{{e}}}$"


def delta_text(rule: str) -> str:
    try:
        return fmt_num(float(rule))
    except ValueError:
        return rule


def pick(res: SweepResult, column: str, wanted: str | None) -> tuple[SweepResult, str]:
    """``res`` restricted to ``column == wanted`` (default: its first value), and the value."""
    values = res.unique(column)
    chosen = wanted if wanted is not None else str(values[0])
    if chosen not in values:
        raise ValueError(f"{column}: {chosen!r} is not in the results ({', '.join(map(str, values))})")
    return res.select(**{column: chosen}), chosen


def finite_unique(col: ArrayLike) -> np.ndarray:
    col = np.asarray(col)
    if col.dtype.kind not in "fiu":
        return np.unique(col)
    col = col.astype(np.float64)
    return np.unique(col[np.isfinite(col)])


def _function_of(res: SweepResult, base: list[str], key: str) -> bool:
    """True if column ``key`` is determined by the ``base`` columns (a derived option, not an independent axis)."""
    def num(c: str) -> np.ndarray:
        return np.nan_to_num(np.asarray(res[c], dtype=np.float64), nan=-1.2345e300)

    if not base:
        return finite_unique(res[key]).size <= 1
    axes = [num(c) for c in base]
    pairs = np.unique(np.stack(axes, 1), axis=0).shape[0]
    triples = np.unique(np.stack([*axes, num(key)], 1), axis=0).shape[0]
    return triples == pairs


def _function_of_axes(res: SweepResult, key: str) -> bool:
    """True if the column is determined by (eps0, n) (a derived option), not an independent axis."""
    return _function_of(res, [c for c in ("eps0", "n") if c in res], key)


# ----------------------------------------------------------------------------------------
# Facets: one panel (row of panels) per randomizer, delta rule and value of every independent option

@dataclass
class Facet:
    """One panel's (row of panels') rows of the results, randomizer name, delta rule and notes (the options
    that are constant or derived in it), and the values that tell it from the other facets."""

    res: SweepResult
    name: str
    rule: str
    notes: list[str] = field(default_factory=list)
    keys: dict[str, Any] = field(default_factory=dict)  # the values that tell this facet from the others

    @property
    def label(self) -> str:
        parts = [f"{k} = {num_text(v)}" if k not in ("randomizer", "delta_rule") else
                 (str(v) if k == "randomizer" else f"δ = {delta_text(str(v))}") for k, v in self.keys.items()]
        return ", ".join(parts) or self.name


def num_text(v: object) -> str:
    return f"{v:g}" if isinstance(v, (float, np.floating, int, np.integer)) else str(v)


def _option_columns(res: SweepResult) -> list[str]:
    """Numeric columns that are randomizer options (not results, not the n axis, not eps0)."""
    from jaxshuffle.sweeps.store import COLUMNS

    out = [k for k in res.keys() if k not in COLUMNS and k != "eps0" and res[k].dtype.kind in "fiu"]
    if "delta_rule" not in res and "delta" in res:
        out.append("delta")
    return out


def split_column(res: SweepResult, key: str) -> Iterator[tuple[Any, SweepResult]]:
    col = res[key]
    if col.dtype.kind in "fiu":
        col = col.astype(np.float64)
        for v in finite_unique(col):
            yield float(v), select_rows(res, col == v)
        if np.isnan(col).any():
            yield math.nan, select_rows(res, np.isnan(col))
    else:
        for v in res.unique(key):
            yield v, select_rows(res, col == v)


def split_facets(res: SweepResult, randomizer: str | None = None, delta_rule: str | None = None,
            fixed: Mapping[str, Any] | None = None) -> list[Facet]:
    """Split the results into panels: nothing is dropped except by an explicit selection."""
    for k, v in (fixed or {}).items():
        if k not in res:
            raise ValueError(f"fixed: the results have no column {k!r}")
        sel = res.select(**{k: v})
        if len(sel) == 0:
            raise ValueError(f"{k}: {v!r} is not in the results ({', '.join(map(num_text, res.unique(k)))})")
        res = sel
    if randomizer is not None and "randomizer" in res:
        res, _ = pick(res, "randomizer", randomizer)
    if delta_rule is not None:
        if "delta_rule" in res:
            res, _ = pick(res, "delta_rule", delta_rule)
        elif "delta" in res:
            res = res.select(delta=float(delta_rule))
            if len(res) == 0:
                raise ValueError(f"delta_rule: {delta_rule!r} is not in the results")
    groups: list[tuple[dict[str, Any], SweepResult]] = [({}, res)]
    for key in ("randomizer", "delta_rule"):
        if key in res:
            groups = [({**keys, key: v}, sub) for keys, g in groups for v, sub in split_column(g, key)]
    facets = []
    for keys, g in groups:
        name = str(keys.get("randomizer", randomizer or "?"))
        cands = [k for k in _option_columns(g) if finite_unique(g[k]).size > 1]
        cands.sort(key=lambda k: (finite_unique(g[k]).size, k != "delta", k))
        base = [c for c in ("eps0", "n") if c in g and np.isfinite(g[c].astype(np.float64)).any()]
        chosen: list[str] = []
        derived: list[str] = []
        for k in cands:
            (derived if _function_of(g, base + chosen, k) else chosen).append(k)
        parts = [(keys, g)]
        for k in chosen:
            parts = [({**kk, k: v}, sub) for kk, gg in parts for v, sub in split_column(gg, k)]
        for kk, sub in parts:
            if "delta_rule" in sub:
                rule = str(kk.get("delta_rule", sub["delta_rule"][0]))
            elif "delta" in sub:
                d = finite_unique(sub["delta"])
                rule = repr(float(d[0])) if d.size == 1 else "δ(n)"
            else:
                rule = "?"
            notes = []
            for k in _option_columns(sub):
                if k == "delta":
                    continue
                vals = finite_unique(sub[k])
                if k in derived and vals.size > 1:
                    notes.append(f"{k} = {k}(ε₀)" if "eps0" in base else f"{k} = {k}(n)")
                elif vals.size == 1:
                    notes.append(f"{k} = {vals[0]:g}")
            facets.append(Facet(sub, name, rule, notes, kk))
    return facets


def one_facet(res: SweepResult, randomizer: str | None, delta_rule: str | None, fixed: Mapping[str, Any] | None = None,
            *, who: str = "this plot") -> Facet:
    """One panel's facet: its rows, name, rule and notes (the first facet; a warning names what else the
    results hold)."""
    facets = split_facets(res, randomizer, delta_rule, fixed)
    if len(facets) > 1:
        shown = "; ".join(f.label for f in facets[:6]) + ("; ..." if len(facets) > 6 else "")
        warnings.warn(f"{who}: the results hold {len(facets)} panels ({shown}); drawing the first "
                      f"({facets[0].label}). Choose one with randomizer=, delta_rule= or fixed={{column: value}}, "
                      "or draw them all with summary_figure.", UserWarning, stacklevel=3)
    return facets[0]


def representative(values: ArrayLike, m: int) -> np.ndarray:
    """At most ``m`` of the sorted unique ``values``, evenly spaced in log (linear if any is <= 0), ends included."""
    v = np.sort(np.unique(np.asarray(values, dtype=np.float64)))
    v = v[np.isfinite(v)]
    if v.size <= m:
        return v
    t = np.log(v) if v[0] > 0 else v
    targets = np.linspace(t[0], t[-1], m)
    return v[np.unique(np.abs(t[:, None] - targets[None, :]).argmin(0))]


def shown_note(what: str, shown: Sequence[Any] | np.ndarray, total: Sequence[Any] | np.ndarray) -> str:
    return "" if len(shown) == len(total) else f"{len(shown)} of {len(total)} {what} values drawn"


# ----------------------------------------------------------------------------------------
# A figure's form: which panels a facet gets, and which panels are drawn

def panel_kinds(f: Facet, kind: str, n: float | None) -> list[str]:
    res = f.res
    e0 = finite_unique(res["eps0"]) if "eps0" in res else np.array([])
    ns = np.unique(res["n"])
    if e0.size == 0:
        return ["n"]  # no eps0 axis for this randomizer: certified eps against n
    surface_ok = e0.size >= 2 and ns.size >= 2
    dense = e0.size >= 3 and ns.size >= 3
    if kind == "auto":
        if dense:
            return ["surface", "ratio"]
        if n is not None or e0.size >= ns.size:
            return ["ratio"]
        return ["n"]
    if kind == "ratio":
        return ["ratio"]
    if kind == "surface":
        return ["surface"] if surface_ok else (["ratio"] if e0.size >= ns.size else ["n"])
    return ["surface", "ratio"] if surface_ok else ["ratio"]


def first_panels(items: list[_T], labels: list[str], max_panels: int, who: str,
                  hint: str) -> tuple[list[_T], list[_T]]:
    """``(items[:max_panels], the rest)``; warns, naming the panels left out and ``hint``, when any are."""
    omitted = items[max_panels:]
    if omitted:
        warnings.warn(f"{who}: {len(items)} panels' worth of results; drawing the first {max_panels} "
                      f"(left out: {'; '.join(labels[max_panels:])}). {hint}", UserWarning, stacklevel=3)
    return items[:max_panels], omitted
