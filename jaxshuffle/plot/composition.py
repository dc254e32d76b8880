"""Drawing composition over rounds and budget tuning.

:func:`composition_curve` (composed eps against the number of rounds T, next to basic and advanced
composition; what ``jaxshuffle compose --plot`` draws), :func:`composition_figure` (one such panel
per (randomizer options, n) of a sweep with a rounds axis), :func:`privacy_curve` (certified delta
against eps of T rounds; what ``jaxshuffle compose --curve`` draws) and :func:`tuning_front` (budget
tuning's privacy-utility front).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from jaxshuffle.plot.common import (
    MAX_FACETS,
    MAX_LINES,
    line_colors,
    lines_legend,
    new_ax,
    require_matplotlib,
    savefig,
)
from jaxshuffle.plot.facets import (
    as_result,
    first_panels,
    fmt_num,
    num_text,
    pick,
    representative,
    shown_note,
    split_column,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from jaxshuffle.accountant.tune import ParetoFront
    from jaxshuffle.plot.facets import Results
    from jaxshuffle.sweeps.store import SweepResult

# ----------------------------------------------------------------------------------------
# Composition over rounds

_COMPOSITION_KEYS = ("rounds", "delta", "upper", "basic", "advanced")

#: At most this many runs of one source are named in a certified line's legend entry.
_MAX_SOURCE_RUNS = 4


def _source_text(T: np.ndarray, sources: np.ndarray) -> str:
    """The sources of a certified line along increasing T: ``"blanket PLD"``, or ``"basic at T = 1,
    blanket PLD at T = 20-1000"`` when the source changes with T."""
    runs: list[list[Any]] = []
    for t, src in zip(T, sources):
        if runs and runs[-1][0] == src:
            runs[-1][2] = t
        else:
            runs.append([src, t, t])
    if len(runs) == 1:
        return str(runs[0][0])
    parts = [f"{src} at T = {a:g}" + (f"-{b:g}" if b != a else "") for src, a, b in runs[:_MAX_SOURCE_RUNS]]
    return ", ".join(parts) + (", ..." if len(runs) > _MAX_SOURCE_RUNS else "")


def composition_curve(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike[str] | None = None,
                      ax: Axes | None = None, *, dpi: int = 150, title: str | None = None) -> Axes:
    """Composed epsilon against the number of rounds T, next to basic and advanced composition.

    ``rows``: a list of mappings with ``rounds``, ``delta``, ``upper`` (the certified composed
    epsilon: the smallest certified bound, drawn whatever its source), ``basic`` and ``advanced``
    (``None`` or ``inf`` where no claim), e.g. the output of ``jaxshuffle compose --json`` or the
    rows of a sweep with a rounds axis; optionally ``upper_source`` (which bound gave ``upper``:
    named in the legend, per range of T where it changes) and ``lower`` (the composed worst-case
    pair from below, drawn thin; with ``upper_source`` only where that pair's PLD gave ``upper``, the
    bound it brackets).
    One colour per delta (at most :data:`MAX_LINES`, log-spaced, the legend says which); solid:
    the certified composed epsilon, dashed: advanced composition (Dwork, Rothblum and Vadhan
    2010), dotted: basic composition, both of the certified one-round bound. Log-log axes.
    ``title`` replaces the default title ("T rounds composed").

    Saves to ``path`` when given. Returns the axes. Raises ValueError naming the missing column or
    saying that no row has a finite value.
    """
    require_matplotlib()
    rows = list(rows)
    if not rows:
        raise ValueError("rows: no rows to plot (expected jaxshuffle compose --json output)")
    for key in _COMPOSITION_KEYS:
        if any(not isinstance(r, dict) or key not in r for r in rows):
            raise ValueError(f"rows: every row needs {key!r} (columns {', '.join(_COMPOSITION_KEYS)})")

    def col(key: str) -> np.ndarray:
        return np.array([np.inf if r.get(key) is None else float(r[key]) for r in rows], dtype=np.float64)

    T, delta, upper = col("rounds"), col("delta"), col("upper")
    if not np.isfinite(upper).any():
        raise ValueError("rows: no finite certified epsilon to plot")
    has_source = all("upper_source" in r for r in rows)
    sources = np.array([str(r.get("upper_source")) for r in rows]) if has_source else None
    has_lower = all("lower" in r for r in rows)
    deltas = np.unique(delta)
    shown = representative(deltas, MAX_LINES)
    colors = dict(zip(shown.tolist(), line_colors(shown)))
    if ax is None:
        ax = new_ax()
    for d in shown:
        m = delta == d
        order = np.argsort(T[m], kind="stable")
        t = T[m][order]
        for key, style, width in (("upper", "-", 2.0), ("lower", "-", 0.8), ("advanced", "--", 1.2),
                                  ("basic", ":", 1.2)):
            if key == "lower" and not has_lower:
                continue
            y = col(key)[m][order]
            ok = np.isfinite(y) & (y > 0)
            if key == "lower" and sources is not None:
                ok &= sources[m][order] == "PLD"  # the bracket of the PLD bound, where that is what is drawn
            if not ok.any():
                continue
            label = {"upper": "certified", "advanced": "advanced", "basic": "basic"}.get(key)
            if key == "upper" and sources is not None and label is not None:
                label += f" ({_source_text(t[ok], sources[m][order][ok])})"
            ax.plot(t[ok], y[ok], style, lw=width, color=colors[float(d)],
                    label=f"{label}, delta={fmt_num(d)}" if label else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rounds T")
    ax.set_ylabel("composed epsilon (nats)")
    note = shown_note("delta", shown, deltas)
    title_kw: dict[str, Any] = {"fontsize": 9} if title else {}
    ax.set_title((title or "T rounds composed") + (f" ({note})" if note else ""), **title_kw)
    ax.grid(True, which="both", alpha=0.3)
    lines_legend(ax, 3 * len(shown))
    if path is not None:
        savefig(ax, path, dpi)
    return ax


#: Columns a sweep with a rounds axis needs for :func:`composition_figure`.
_ROUNDS_NEED = ("n", "rounds", "delta", "upper", "basic", "advanced")


def _rounds_panels(res: SweepResult) -> list[tuple[str, SweepResult]]:
    """One panel per (randomizer, option values, n) of a sweep with a rounds axis: ``(label, rows)``."""
    from jaxshuffle.sweeps.store import COLUMNS

    options = [k for k in res.keys() if k not in COLUMNS and res[k].dtype.kind in "fiu"]
    parts: list[tuple[dict[str, Any], SweepResult]] = [({}, res)]
    for key in ("randomizer", *options, "n"):
        if key in res:
            parts = [({**keys, key: v}, sub) for keys, g in parts for v, sub in split_column(g, key)]
    out = []
    for keys, sub in parts:
        bits = [str(v) if k == "randomizer" else f"{k} = {num_text(v)}" for k, v in keys.items()
                if not (isinstance(v, float) and math.isnan(v))]
        out.append((", ".join(bits), sub))
    return out


def _rounds_rows(sub: SweepResult) -> list[dict[str, Any]]:
    """The rows composition_curve draws from a sweep's rows (one per distinct (rounds, delta))."""
    keys = [("rounds", "rounds"), ("delta", "delta"), ("upper", "upper"), ("basic", "basic"),
            ("advanced", "advanced"), ("upper_source", "upper_source"), ("lower", "pld_lower")]
    rows: list[dict[str, Any]] = []
    seen: set[tuple[float, float]] = set()
    for i in range(len(sub)):
        cell = (float(sub["rounds"][i]), float(sub["delta"][i]))
        if cell in seen:
            continue
        seen.add(cell)
        row: dict[str, Any] = {}
        for name, column in keys:
            if column in sub:
                v = sub[column][i]
                row[name] = str(v) if column == "upper_source" else float(v)
        rows.append(row)
    return rows


def composition_figure(results: Results, path: str | os.PathLike[str] | None = None, *, randomizer: str | None = None,
                       delta_rule: str | None = None, n: float | None = None, dpi: int = 150,
                       max_panels: int = MAX_FACETS) -> Figure:
    """A sweep with a rounds axis: composed epsilon against T, one panel per (randomizer, option values, n).

    Each panel is :func:`composition_curve` of its points: one colour per delta, the certified
    composed epsilon (its source in the legend) solid, advanced composition dashed, basic dotted.
    ``randomizer``, ``delta_rule`` and ``n`` restrict the points; with more than ``max_panels``
    panels the first are drawn, with a warning and a note in the figure. Saves to ``path`` when
    given; returns the matplotlib Figure (built without pyplot). Raises ValueError for results
    without the rounds columns, naming what is missing.
    """
    require_matplotlib()
    from matplotlib.figure import Figure

    res = as_result(results, need=_ROUNDS_NEED)
    if randomizer is not None and "randomizer" in res:
        res, _ = pick(res, "randomizer", randomizer)
    if delta_rule is not None and "delta_rule" in res:
        res, _ = pick(res, "delta_rule", delta_rule)
    if n is not None:
        res = res.select(n=float(n))
        if len(res) == 0:
            raise ValueError(f"n: {n:g} is not in the results")
    panels = _rounds_panels(res)
    panels, omitted = first_panels(panels, [label for label, _ in panels], max_panels, "composition_figure",
                                    "Choose with randomizer=, delta_rule= or n=.")
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(6.4 * ncols, 4.8 * nrows + (0.4 if omitted else 0.0)), layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False)
    for i, (label, sub) in enumerate(panels):
        composition_curve(_rounds_rows(sub), ax=grid.flat[i], title=f"{label}: T rounds composed")
    for ax in grid.flat[len(panels):]:
        fig.delaxes(ax)
    if omitted:
        fig.suptitle(f"{len(omitted)} more panels not drawn: {'; '.join(label for label, _ in omitted[:4])}"
                     + (" ..." if len(omitted) > 4 else ""), fontsize=11)
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return fig


def privacy_curve(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike[str] | None = None,
                  ax: Axes | None = None, *, dpi: int = 150,
                  marks: Sequence[tuple[float, float]] | np.ndarray | None = None) -> Axes:
    """The privacy curve of T composed rounds: certified delta against eps, one line per (n, T)
    (what ``jaxshuffle compose --curve`` draws).

    ``rows``: mappings with ``n``, ``rounds``, ``eps`` and ``delta`` (e.g. the rows of the CSV that
    ``--curve`` writes). One colour per number of rounds (at most :data:`MAX_LINES`, log-spaced, the
    title says which); delta on a log axis (points with delta 0 are not drawn). ``marks``: optional
    ``(eps, delta)`` points drawn as dots (the certified eps at the requested deltas). Saves to
    ``path`` when given; returns the axes. Raises ValueError naming a missing column.
    """
    require_matplotlib()
    rows = list(rows)
    for key in ("n", "rounds", "eps", "delta"):
        if not rows or any(key not in r for r in rows):
            raise ValueError(f"rows: every row needs {key!r} (columns n, rounds, eps, delta)")
    n, T, eps, delta = (np.array([float(r[k]) for r in rows]) for k in ("n", "rounds", "eps", "delta"))
    lines = sorted({(a, b) for a, b in zip(n, T)})
    shown_T = representative([b for _, b in lines], MAX_LINES)
    colors = dict(zip(shown_T.tolist(), line_colors(shown_T)))
    if ax is None:
        ax = new_ax()
    drawn = [(a, b) for a, b in lines if b in colors]
    for a, b in drawn:
        m = (n == a) & (T == b) & (delta > 0)
        order = np.argsort(eps[m], kind="stable")
        label = f"T = {b:g}" + (f", n = {fmt_num(a)}" if len({x for x, _ in lines}) > 1 else "")
        ax.plot(eps[m][order], delta[m][order], "-", lw=1.6, color=colors[b], label=label)
    if marks is not None and len(marks):
        me, md = np.asarray(marks, np.float64).reshape(-1, 2).T
        ok = np.isfinite(me) & (md > 0)
        ax.plot(me[ok], md[ok], "o", ms=3.5, color="black", label="certified eps at the deltas asked")
    ax.set_yscale("log")
    ax.set_xlabel("epsilon (nats)")
    ax.set_ylabel("certified delta")
    note = shown_note("T", shown_T, np.unique(T))
    ax.set_title("privacy curve of T rounds composed" + (f" ({note})" if note else ""))
    ax.grid(True, which="both", alpha=0.3)
    lines_legend(ax, len(drawn) + (marks is not None))
    if path is not None:
        savefig(ax, path, dpi)
    return ax


def tuning_front(front: ParetoFront, path: str | os.PathLike[str] | None = None, ax: Axes | None = None, *,
                 dpi: int = 150) -> Axes:
    """Total utility (an error, log scale) against the certified composed epsilon: budget tuning's
    privacy-utility front, tuned allocation next to the equal split, both certified.

    ``front``: a :class:`jaxshuffle.accountant.tune.ParetoFront` (from ``pareto_front``). Saves to
    ``path`` when given. Returns the axes.
    """
    require_matplotlib()
    if ax is None:
        ax = new_ax()
    ax.plot(front.upper, front.utility, "o-", label="tuned (certified)")
    ax.plot(front.baseline_upper, front.baseline_utility, "s--", label="equal split (certified)")
    ax.set_xlabel("certified composed epsilon")
    ax.set_ylabel("total MSE")
    ax.set_yscale("log")
    ax.legend()
    ax.grid(alpha=0.3)
    if path is not None:
        savefig(ax, path, dpi)
    return ax
