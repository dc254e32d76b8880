"""Drawing one-round amplification: the privacy-utility panels and the summary figure.

:func:`amplification_ratio` (``eps0 / eps`` against ``eps0``), :func:`privacy_utility_surface`
(a heat map over ``(n, eps0)`` with target contours and the k-RR utility overlay), certified eps
against ``n``, their colour bar, contour levels, tick and label helpers (:func:`_declutter`
removes overlapping contour labels), and :func:`summary_figure` (small multiples of those panels;
a sweep with a rounds axis goes to :func:`jaxshuffle.plot.composition.composition_figure`). Also
the utility and closed-form curves they draw: :func:`grr_frequency_std`,
:func:`closed_form_bounds`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from jaxshuffle.plot.common import MAX_FACETS, MAX_LINES, line_colors, lines_legend, new_ax, require_matplotlib
from jaxshuffle.plot.composition import composition_figure
from jaxshuffle.plot.facets import (
    Facet,
    as_result,
    delta_text,
    error_prefix,
    finite_unique,
    first_panels,
    fmt_num,
    one_facet,
    panel_kinds,
    representative,
    select_rows,
    shown_note,
    split_facets,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.collections import QuadMesh
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox

    from jaxshuffle.plot.facets import Results

#: Randomizers whose frequency estimator is the k-ary randomized response one.
_KRR = ("grr",)

#: Randomizers for which an eps0-LDP result holds for every eps0-LDP randomizer (k-RR included).
_ANY_LDP = ("general",)


# ----------------------------------------------------------------------------------------
# Utility and closed forms

def grr_frequency_std(eps0: ArrayLike, n: ArrayLike, k: ArrayLike, f: float | np.ndarray = 0.0) -> np.ndarray:
    """Standard deviation of the k-ary randomized response frequency estimate of a value with frequency ``f``.

    With ``p = e^eps0/(e^eps0+k-1)``, ``q = 1/(e^eps0+k-1)`` and ``f_hat = (C/n - q)/(p - q)``
    (Wang, Blocki, Li, Jha 2017)::

        Var = q(1-q)/(n (p-q)^2) + f (1-p-q)/(n (p-q))  ->  (e^eps0 + k - 2)/(n (e^eps0 - 1)^2)  at f = 0.
    """
    eps0, n, k = (np.asarray(x, dtype=np.float64) for x in (eps0, n, k))
    e = np.exp(eps0)
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    var = q * (1 - q) / (n * (p - q) ** 2) + f * (1 - p - q) / (n * (p - q))
    return np.sqrt(var)


def closed_form_bounds(eps0: ArrayLike, n: ArrayLike, delta: ArrayLike, p: ArrayLike | None = None,
                       beta: ArrayLike | None = None, q: ArrayLike | None = None) -> dict[str, np.ndarray]:
    """Closed-form epsilon bounds (``inf`` where a theorem's conditions fail), keyed by legend label.

    The eps0-LDP forms of :data:`jaxshuffle.closed_forms.CLOSED_FORMS` except the generic blanket
    bounds (FMT'23, FMT'21, EFMRTT'19); with ``(p, beta, q)`` also the variation-ratio Theorems 4.2
    and 4.3 (bounds on the paper's Theorem 4.7 pair, a guarantee only at the worst-case beta).
    """
    from jaxshuffle import closed_forms as cf

    eps0, n, delta = (np.asarray(x, dtype=np.float64) for x in (eps0, n, delta))
    out = cf.evaluate(eps0, n, delta, p, beta, q)
    return {label: value for label, (value, _, form) in out.items() if "blanket" not in label}


def _utility_k(name: str, res, utility_k):
    """(k of the k-RR overlay or None, why not) for a panel of randomizer ``name``.

    Default (None): the panel's own k for ``grr``, none elsewhere. An explicit ``k`` is drawn on a
    ``grr`` panel of that k and on ``general`` (whose bound holds for every eps0-LDP randomizer,
    k-RR included); elsewhere it does not apply.
    """
    own = None
    if name in _KRR and "k" in res:
        ks = finite_unique(res["k"])
        own = float(ks[0]) if ks.size == 1 else None
    if utility_k is None:
        return own, None
    if not utility_k:
        return None, None
    k = float(utility_k)
    if name in _ANY_LDP or (name in _KRR and own == k):
        return k, None
    return None, f"{k:g}-ary RR utility not drawn: it does not apply to {name}" + (
        f" with k = {own:g}" if own is not None else "")


# ----------------------------------------------------------------------------------------
# Panels

_STYLES = {
    "upper": dict(color="black", lw=2.2, ls="-", label="certified upper bound on ε (this library)"),
    "paper": dict(color="tab:orange", lw=1.8, ls="--", label="paper Thm 4.7 value (not certified if w > 0)"),
    "lower": dict(color="tab:green", lw=1.8, ls=":", label="from the lower bound on ε (Thm 5.1 pair): ratio ceiling"),
}

_CF_STYLES = [dict(color="tab:blue", ls="--", marker="o"), dict(color="tab:purple", ls="-.", marker="s"),
              dict(color="tab:red", ls=":", marker="^"), dict(color="tab:brown", ls="-.", marker="x"),
              dict(color="tab:cyan", ls="--", marker="d")]


def amplification_ratio(results: Results, ax: Axes | None = None, *, n: float | None = None,
                        randomizer: str | None = None, delta_rule: str | None = None,
                        bounds: Sequence[str] | None = None, closed_forms: bool = True, log_y: bool = False,
                        max_lines: int = MAX_LINES, fixed: Mapping[str, Any] | None = None) -> Axes:
    """Amplification ratio ``eps0 / eps`` against ``eps0`` (like Figures 1-4 of the paper).

    Size: a public entry point whose keywords are the user's options: which rows (``n``, ``randomizer``,
    ``delta_rule``, ``fixed``), which lines (``bounds``, ``closed_forms``, ``max_lines``) and the axis (``log_y``).

    Args:
      results: sweep results with an ``eps0`` axis.
      ax: matplotlib axes (new figure if None). Returned.
      n: plot this ``n`` only; ``None`` with several ``n`` in the results draws one line per
        ``n`` (colours) for each bound (line styles), for at most ``max_lines`` values of ``n``
        (evenly spaced in log, the smallest and largest included; the legend says how many).
      randomizer, delta_rule: which rows (default: the first of each in the results).
      bounds: subset of ``("upper", "paper", "lower")``; default: ``upper``, plus ``paper``
        where it differs from it and ``lower`` where the results have one (those two only
        with at most 3 lines of ``n``).
      closed_forms: with a single ``n``, add the closed forms (:func:`closed_form_bounds`)
        where their conditions hold.
      log_y: logarithmic ratio axis.
      max_lines: most values of ``n`` drawn.
      fixed: ``{column: value}`` selecting the rows of other option axes (e.g. ``{"k": 10}``);
        without it a results file with several panels' worth draws the first, with a warning.
    """
    res = as_result(results, need=("n", "upper"))
    if "eps0" not in res:
        raise ValueError(f"{error_prefix(res)}no column eps0 (the ratio plot needs an eps0 axis)")
    facet = one_facet(res, randomizer, delta_rule, fixed, who="amplification_ratio")
    ax = ax if ax is not None else new_ax()
    _ratio_panel(ax, facet, _RatioOptions(n=n, bounds=bounds, closed_forms=closed_forms, log_y=log_y,
                                          max_lines=max_lines))
    return ax


class _RatioOptions(NamedTuple):
    """What a ratio panel draws (:func:`amplification_ratio`'s keywords of the same names)."""

    n: float | None = None
    bounds: Sequence[str] | None = None
    closed_forms: bool = True
    log_y: bool = False
    max_lines: int = MAX_LINES


def _ratio_panel(ax, facet: Facet, options: _RatioOptions):
    res, name, rule, notes = facet.res, facet.name, facet.rule, facet.notes
    n, bounds, closed_forms, log_y, max_lines = options
    if not np.isfinite(res["eps0"]).any():
        raise ValueError(f"eps0: the {name} rows have no eps0 value (the ratio plot needs an eps0 axis)")
    if n is not None:
        res = res.select(n=float(n))
        if len(res) == 0:
            raise ValueError(f"n: {n:g} is not in the results")
    all_ns = np.sort(np.unique(res["n"]))
    ns = representative(all_ns, max(1, int(max_lines)))
    if bounds is None:
        bounds = ["upper"]
        few = ns.size <= 3
        if few and "paper" in res and not np.allclose(res["paper"], res["upper"], rtol=1e-9, equal_nan=True):
            bounds.append("paper")
        if few and "has_lower" in res and np.any(res["has_lower"]):
            bounds.append("lower")
    single = ns.size == 1
    colors = line_colors(ns)
    for j, nv in enumerate(ns):
        sub = res.select(n=float(nv))
        order = np.argsort(sub["eps0"])
        e0 = sub["eps0"][order]
        for b in bounds:
            eps = sub[b][order]
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(eps > 0, e0 / eps, np.nan)
            style = dict(_STYLES[b])
            if not single:
                style["color"] = colors[j]
                style["label"] = (f"n = {fmt_num(nv)}" if b == bounds[0] else None)
                style["lw"] = 1.6
            ax.plot(e0, ratio, **style)
        if single and closed_forms and "delta" in sub:
            kw = {}
            if {"p", "beta", "q"} <= set(sub.keys()) and all(np.isfinite(sub[c]).all() for c in ("p", "beta", "q")):
                kw = dict(p=sub["p"][order], beta=sub["beta"][order], q=sub["q"][order])
            cfs = closed_form_bounds(e0, sub["n"][order], sub["delta"][order], **kw)
            for c, (label, eps) in enumerate(cfs.items()):
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(np.isfinite(eps) & (eps > 0), e0 / eps, np.nan)
                if np.all(np.isnan(ratio)):
                    continue
                ax.plot(e0, ratio, lw=1.2, ms=4, mfc="none", label=label, **_CF_STYLES[c % len(_CF_STYLES)])
    shown = shown_note("n", ns, all_ns)
    if not single:
        from matplotlib.lines import Line2D

        handles, labels = ax.get_legend_handles_labels()
        if len(bounds) > 1:
            for b in bounds:
                handles.append(Line2D([], [], color="gray", lw=1.6, ls=_STYLES[b]["ls"]))
                labels.append(_STYLES[b]["label"])
        title = f"n ({len(ns)} of {len(all_ns)}, log-spaced)" if shown else None
        lines_legend(ax, len(ns), (handles, labels), title=title)
    else:
        ax.legend(fontsize=8, loc="best")
    ax.axhline(1.0, color="0.6", lw=0.8)
    ax.set_xlabel(r"local privacy $\varepsilon_0$ (nats)")
    ax.set_ylabel(r"amplification ratio $\varepsilon_0/\varepsilon$" + f"  at $\\delta$ = {delta_text(rule)}")
    if log_y:
        ax.set_yscale("log")
    where = f"n = {fmt_num(ns[0])}" if single else f"n = {fmt_num(all_ns[0])} .. {fmt_num(all_ns[-1])}"
    if shown:
        where += f" ({shown})"
    extra = ("; " + ", ".join(notes)) if notes else ""
    ax.set_title(f"amplification by shuffling: {name}{extra}\n{where}, $\\delta$ = {delta_text(rule)}", fontsize=9)
    ax.grid(True, alpha=0.3)
    return ax


def _eps_vs_n_panel(ax, facet: Facet, *, max_lines=MAX_LINES):
    """Certified eps against n (log-log), one line per eps0 (at most ``max_lines``), or one line without eps0."""
    res, name, rule, notes = facet.res, facet.name, facet.rule, facet.notes
    has_e0 = "eps0" in res and np.isfinite(res["eps0"]).any()
    all_e0 = np.sort(finite_unique(res["eps0"])) if has_e0 else np.array([math.nan])
    e0s = representative(all_e0, max(1, int(max_lines))) if has_e0 else all_e0
    colors = line_colors(e0s) if has_e0 else ["black"]
    for j, e in enumerate(e0s):
        sub = res.select(eps0=float(e)) if has_e0 else res
        order = np.argsort(sub["n"])
        label = f"ε₀ = {e:.3g}" if has_e0 else "certified upper bound on ε"
        ax.plot(sub["n"][order], sub["upper"][order], color=colors[j], lw=1.6, marker="o", ms=3, label=label)
    ax.set_xscale("log")
    pos = res["upper"][np.isfinite(res["upper"]) & (res["upper"] > 0)]
    if pos.size and pos.max() / pos.min() > 20:
        ax.set_yscale("log")
    shown = shown_note("ε₀", e0s, all_e0) if has_e0 else ""
    lines_legend(ax, len(e0s), title=f"ε₀ ({len(e0s)} of {len(all_e0)}, log-spaced)" if shown else None)
    ax.set_xlabel("number of users n (log scale)")
    ax.set_ylabel(f"certified ε (nats) at δ = {delta_text(rule)}")
    extra = ("; " + ", ".join(notes)) if notes else ""
    ax.set_title(f"certified amplified ε against n: {name}{extra}\n"
                 f"δ = {delta_text(rule)}" + (f" ({shown})" if shown else ""), fontsize=9)
    ax.grid(True, alpha=0.3, which="both")
    return ax


def _edges(x: np.ndarray, log: bool) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    t = np.log(x) if log else x
    if t.size == 1:
        mids = np.array([t[0] - 0.5, t[0] + 0.5])
    else:
        mid = 0.5 * (t[1:] + t[:-1])
        mids = np.concatenate([[t[0] - (mid[0] - t[0])], mid, [t[-1] + (t[-1] - mid[-1])]])
    return np.exp(mids) if log else mids


def _plain_log_ticks(axis) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _levels_between(lo: float, hi: float, mantissas=(1, 3)) -> list[float]:
    out = []
    for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for m in mantissas:
            v = m * 10.0 ** e
            if lo < v < hi:
                out.append(v)
    return out


def _utility_levels(lo: float, hi: float, most: int = 3) -> list[float]:
    """Few standard-deviation levels: powers of ten in range (thinned to ``most``), else 1 and 3 times them."""
    lv = _levels_between(lo, hi, (1,)) or _levels_between(lo, hi)
    return [float(v) for v in representative(lv, most)] if lv else []


def _value_range(values) -> tuple[float, float]:
    v = np.asarray(values, dtype=np.float64)
    pos = v[np.isfinite(v) & (v > 0)]
    vmin, vmax = (float(pos.min()), float(pos.max())) if pos.size else (1e-3, 1.0)
    return (vmin, vmin * 10) if vmax <= vmin else (vmin, vmax)


_WHAT = {"upper": "certified amplified ε", "paper": "paper's Thm 4.7 ε (not certified)", "lower": "lower bound on ε"}


def _colorbar_label(value: str, rule) -> str:
    delta = f"at δ = {delta_text(rule)}" if rule is not None else "(δ: see each panel)"
    return f"{'certified ' if value == 'upper' else value + ' '}ε (nats) {delta}"


def privacy_utility_surface(results: Results, ax: Axes | None = None, *, randomizer: str | None = None,
                            delta_rule: str | None = None, value: str = "upper",
                            targets: Sequence[float] = (0.1, 0.3, 1.0), utility_k: float | None = None,
                            utility_levels: Sequence[float] | None = None, colorbar: bool = True,
                            log_eps0: bool = True, fixed: Mapping[str, Any] | None = None,
                            vlim: tuple[float, float] | None = None) -> Axes:
    """Amplified eps over ``(n, eps0)``: heat map (log axes), contours at ``targets``, utility overlay.

    Size: a public entry point whose keywords are the user's options: which rows (``randomizer``,
    ``delta_rule``, ``fixed``), what is drawn (``value``, ``targets``, ``utility_k``, ``utility_levels``) and how
    (``colorbar``, ``log_eps0``, ``vlim``).

    Args:
      results: sweep results with ``n`` and ``eps0`` axes (several values each).
      value: the column shown (``"upper"``: certified; ``"paper"``, ``"lower"``).
      targets: eps levels drawn as labelled solid contour lines (and marked on the colour bar).
      utility_k: ``k`` of the k-ary RR whose frequency-estimate standard deviation
        (:func:`grr_frequency_std`, at frequency 0) is overlaid as dashed contours. Default: the
        results' ``k`` for ``grr``, no overlay for other randomizers (it does not apply to them);
        an explicit ``k`` is also drawn on ``general`` (its bound holds for k-RR), never on a
        ``grr`` panel of another ``k`` or on another randomizer; ``0`` turns the overlay off.
      utility_levels: standard-deviation levels (default: up to 3 powers of ten in range).
      colorbar: add a colour bar.
      log_eps0: logarithmic eps0 axis.
      fixed: ``{column: value}`` selecting the rows of other option axes (e.g. ``{"k": 10}``).
      vlim: ``(vmin, vmax)`` of the colour scale (default: the panel's positive values).

    Contour labels that would overlap one another (or leave the axes) are left out; every
    target level keeps its mark on the colour bar.
    """
    require_matplotlib()
    res = as_result(results, need=("eps0", "n", value))
    facet = one_facet(res, randomizer, delta_rule, fixed, who="privacy_utility_surface")
    ax = ax if ax is not None else new_ax()
    mesh, levels = _surface_panel(ax, facet, _SurfaceOptions(value=value, targets=targets, utility_k=utility_k,
                                                             utility_levels=utility_levels, log_eps0=log_eps0,
                                                             vlim=vlim))
    if colorbar:
        _colorbar(ax.figure, mesh, [ax], value, facet.rule, levels)
    _declutter(ax.figure)
    return ax


def _colorbar(fig, mesh, axes, value, rule, levels):
    cb = fig.colorbar(mesh, ax=axes, fraction=0.05 if len(axes) == 1 else 0.03, pad=0.02)
    cb.set_label(_colorbar_label(value, rule))
    if mesh.norm.vmax / mesh.norm.vmin < 100:
        _plain_log_ticks(cb.ax.yaxis)
    if levels:
        cb.add_lines(levels, ["black"] * len(levels), [1.8] * len(levels))
        cb.ax.yaxis.set_tick_params(which="minor", length=0)
    return cb


class _SurfaceOptions(NamedTuple):
    """What a surface panel draws (:func:`privacy_utility_surface`'s keywords of the same names)."""

    value: str = "upper"
    targets: Sequence[float] = (0.1, 0.3, 1.0)
    utility_k: float | None = None
    utility_levels: Sequence[float] | None = None
    log_eps0: bool = True
    vlim: tuple[float, float] | None = None


def _surface_panel(ax, facet: Facet, options: _SurfaceOptions):
    from matplotlib.colors import LogNorm

    res, name, rule, notes = facet.res, facet.name, facet.rule, facet.notes
    value, targets, utility_k, utility_levels, log_eps0, vlim = options

    e0s = np.sort(finite_unique(res["eps0"]))
    ns = np.sort(np.unique(res["n"]))
    if e0s.size < 2 or ns.size < 2:
        raise ValueError(f"results: the surface needs at least 2 values of n and of eps0 ({name}: {ns.size} n, "
                         f"{e0s.size} eps0)")
    res = select_rows(res, np.isfinite(res["eps0"]))
    Z = np.full((e0s.size, ns.size), np.nan)
    i = np.searchsorted(e0s, res["eps0"])
    j = np.searchsorted(ns, res["n"])
    Z[i, j] = res[value]
    vmin, vmax = vlim if vlim is not None else _value_range(Z)
    Zm = np.ma.masked_invalid(np.where(Z > 0, Z, np.nan))
    mesh = ax.pcolormesh(_edges(ns, True), _edges(e0s, log_eps0), Zm, norm=LogNorm(vmin=vmin, vmax=vmax),
                         cmap="YlOrRd", shading="flat")
    ax.set_xscale("log")
    if ns[-1] / ns[0] < 100:  # less than two decades: 50, 100, 200 rather than 5x10^1
        _plain_log_ticks(ax.xaxis)
    if log_eps0:
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis)
    N, E = np.meshgrid(ns, e0s)
    zmin, zmax = _value_range(Z)
    levels = sorted(t for t in targets if zmin < t < zmax)
    labels = []
    if levels:
        cs = ax.contour(N, E, np.where(np.isfinite(Z), Z, zmax), levels=levels, colors="black", linewidths=1.8)
        texts = ax.clabel(cs, fmt=lambda v: f"ε = {v:g}", fontsize=8, inline=False)
        for t in texts:
            t.set_bbox(dict(facecolor="white", alpha=0.85, edgecolor="none", pad=0.6))
        labels.append((cs, list(texts)))
    k, skipped = _utility_k(name, res, utility_k)
    lv = []
    if k:
        sd = grr_frequency_std(E, N, k)
        lv = list(utility_levels) if utility_levels else _utility_levels(float(np.nanmin(sd)), float(np.nanmax(sd)))
        if lv:
            cu = ax.contour(N, E, sd, levels=lv, colors="tab:blue", linestyles="--", linewidths=1.1)
            texts = ax.clabel(cu, fmt=lambda v: f"sd {v:.0e}" if v < 0.01 else f"sd {v:g}", fontsize=7, inline=False)
            for t in texts:
                t.set_bbox(dict(facecolor="white", alpha=0.75, edgecolor="none", pad=0.4))
            labels.append((cu, list(texts)))
    ax._jaxshuffle_labels = labels
    ax.set_xlabel("number of users n (log scale)")
    ax.set_ylabel(r"local privacy $\varepsilon_0$ (nats)")
    extra = ("; " + ", ".join(notes)) if notes else ""
    second = f"solid black: ε = {', '.join(f'{t:g}' for t in levels)}" if levels else "no target ε in range"
    if k and lv:
        second += f"\ndashed blue: std of the {k:g}-ary RR frequency estimate (f = 0)"
    elif skipped:
        second += f"\n({skipped})"
    ax.set_title(f"{_WHAT.get(value, value)}: {name}{extra}, δ = {delta_text(rule)}\n{second}", fontsize=9)
    return mesh, levels


def _declutter(fig) -> None:
    """Remove contour labels that overlap an earlier kept label or leave their axes (after layout)."""
    labelled = [ax for ax in fig.axes if getattr(ax, "_jaxshuffle_labels", None)]
    if not labelled:
        return
    if not hasattr(fig.canvas, "get_renderer"):  # a pyplot-free Figure: give it an Agg canvas to measure text
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    for ax in labelled:
        box = ax.get_window_extent(renderer)
        # first label of every level (black targets first), then the others
        ranked = []
        for g, (cs, texts) in enumerate(ax._jaxshuffle_labels):
            seen: dict = {}
            for t in texts:
                key = t.get_text()
                seen[key] = seen.get(key, -1) + 1
                ranked.append(((seen[key] > 0, g, seen[key]), cs, t))
        ranked.sort(key=lambda r: r[0])
        kept: list[Bbox] = []
        for _, cs, t in ranked:
            bb = t.get_window_extent(renderer)
            bb = bb.expanded(1.0 + 8.0 / max(bb.width, 1.0), 1.0 + 6.0 / max(bb.height, 1.0))
            inside = bb.x0 >= box.x0 and bb.x1 <= box.x1 and bb.y0 >= box.y0 and bb.y1 <= box.y1
            if inside and not any(bb.overlaps(o) for o in kept):
                kept.append(bb)
                continue
            t.remove()
            if t in cs.labelTexts:
                idx = cs.labelTexts.index(t)
                for lst in (cs.labelTexts, cs.labelCValues, getattr(cs, "labelXYs", None)):
                    if lst is not None and idx < len(lst):
                        del lst[idx]
        ax._jaxshuffle_labels = []


# ----------------------------------------------------------------------------------------
# The summary figure: small multiples

def summary_figure(results: Results, path: str | os.PathLike[str] | None = None, *, kind: str = "auto",
                   n: float | None = None, delta_rule: str | None = None, randomizer: str | None = None,
                   targets: Sequence[float] = (0.1, 0.3, 1.0), utility_k: float | None = None, dpi: int = 150,
                   max_lines: int = MAX_LINES, max_panels: int = MAX_FACETS) -> Figure:
    """Small multiples of the results: the privacy-utility surface and/or the amplification ratio; saved to ``path``.

    One row of panels per randomizer, per delta rule and per value of every other independent
    option axis (``k`` of ``grr``, ``d`` ...; an option that is a function of ``(eps0, n)`` is
    noted, not split). In each row, by ``kind``:

    * ``"auto"``: a dense grid (at least 3 values of ``n`` and of ``eps0``) gets the heat map
      and the ratio; a grid with more ``eps0`` than ``n`` values the ratio; otherwise (or without
      an ``eps0`` axis) certified eps against ``n``, one line per ``eps0``.
    * ``"ratio"``, ``"surface"`` or ``"both"``: those panels where the grid allows.

    Line panels draw at most ``max_lines`` values (log-spaced; the legend says which); the heat
    maps share one colour scale and one colour bar; the k-RR utility overlay is drawn only on
    the panels where it applies (see :func:`privacy_utility_surface`). With more than
    ``max_panels`` rows the first ``max_panels`` are drawn, with a warning and a note in the
    figure. ``randomizer`` and ``delta_rule`` restrict the rows to one value. Results with a
    ``rounds`` column (a sweep with a rounds axis) are drawn by :func:`composition_figure` (composed
    eps against T; ``kind`` must be ``"auto"``). Returns the matplotlib Figure (built without
    pyplot, so no global state is touched).

    Raises ValueError for empty or unusable results (no rows, missing columns), naming the file.

    Size: a public entry point whose keywords are the user's options: which rows (``randomizer``,
    ``delta_rule``, ``n``), the panels (``kind``, ``targets``, ``utility_k``, ``max_lines``, ``max_panels``) and
    the file (``path``, ``dpi``).
    """
    require_matplotlib()
    from matplotlib.figure import Figure

    if kind not in ("auto", "ratio", "surface", "both"):
        raise ValueError(f"kind: {kind!r} is not one of auto, ratio, surface, both")
    res = as_result(results, need=("n", "upper"))
    if "rounds" in res:  # a sweep with a rounds axis: composed eps against T
        if kind != "auto":
            raise ValueError(f"kind: a sweep with a rounds axis is drawn as composed eps against T (kind auto), "
                             f"not {kind!r}")
        return composition_figure(res, path, randomizer=randomizer, delta_rule=delta_rule, n=n, dpi=dpi,
                                  max_panels=max_panels)
    facets = split_facets(res, randomizer, delta_rule)
    plans = [(f, panel_kinds(f, kind, n)) for f in facets]
    if kind in ("surface", "both") and not any("surface" in p for _, p in plans):
        raise ValueError("kind: the surface needs at least 2 values of n and of eps0")
    if kind == "ratio" and not any("ratio" in p for _, p in plans):
        raise ValueError(f"{error_prefix(res)}no eps0 values: the ratio plot needs an eps0 axis")
    plans, omitted = first_panels(plans, [f.label for f, _ in plans], max_panels, "summary_figure",
                                   "Choose with randomizer= or delta_rule=, or plot subsets.")
    width = max(len(p) for _, p in plans)
    per_row = max(1, min(len(plans), 3 // width))
    nrows = math.ceil(len(plans) / per_row)
    ncols = per_row * width
    fig = Figure(figsize=(6.6 * ncols, 4.9 * nrows + (0.4 if len(plans) > 1 else 0.0)), layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False)
    used = set()
    surf = [f for f, p in plans if "surface" in p]
    vlim = _value_range(np.concatenate([f.res["upper"] for f in surf])) if surf else None
    meshes: list[QuadMesh] = []
    surf_axes: list[Axes] = []
    levels: list[float] = []
    for i, (f, p) in enumerate(plans):
        r, c0 = divmod(i, per_row)
        for j, what in enumerate(p):
            ax = grid[r, c0 * width + j]
            used.add((r, c0 * width + j))
            if what == "surface":
                mesh, lv = _surface_panel(ax, f, _SurfaceOptions(targets=targets, utility_k=utility_k, vlim=vlim))
                meshes.append(mesh)
                surf_axes.append(ax)
                levels = sorted(set(levels) | set(lv))
            elif what == "ratio":
                sel = f.res if n is None else f.res.select(n=float(n))
                with np.errstate(divide="ignore", invalid="ignore"):
                    q = sel["eps0"] / sel["upper"]
                q = q[np.isfinite(q) & (q > 0)]
                log_y = bool(q.size and q.max() / max(q.min(), 1e-300) > 20)
                _ratio_panel(ax, f, _RatioOptions(n=n, log_y=log_y, max_lines=max_lines))
            else:
                _eps_vs_n_panel(ax, f, max_lines=max_lines)
    for r in range(nrows):
        for c in range(ncols):
            if (r, c) not in used:
                fig.delaxes(grid[r, c])
    if meshes:
        rules = {f.rule for f in surf}
        _colorbar(fig, meshes[0], surf_axes, "upper", rules.pop() if len(rules) == 1 else None, levels)
    if len(plans) > 1 or omitted:
        keys = dict.fromkeys(k for f, _ in plans for k in f.keys)
        axes_names = [k for k in keys if len({str(f.keys.get(k)) for f, _ in plans}) > 1] or list(keys)
        head = f"{len(plans)} rows of panels, one per " + " × ".join(
            {"randomizer": "randomizer", "delta_rule": "δ rule"}.get(k, k) for k in axes_names)
        if len(plans) > 1 and len(surf) > 1:
            head += "; one colour scale for all heat maps"
        if omitted:
            head += f"\n{len(omitted)} more not drawn: {'; '.join(f.label for f, _ in omitted[:4])}" + (
                " ..." if len(omitted) > 4 else "")
        fig.suptitle(head, fontsize=11)
    _declutter(fig)
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return fig
