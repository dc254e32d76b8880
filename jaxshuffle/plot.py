"""Plots of sweep results: amplification ratio and privacy-utility surfaces (matplotlib, optional).

matplotlib is an optional dependency (``pip install 'jaxshuffle[plot]'``); it is imported when a
function here is called, with a clear ImportError if it is missing. Every function takes an
``ax`` (a new figure's axes when ``None``) and returns it.

* :func:`amplification_ratio` -- ``eps0 / eps`` against ``eps0`` for several bounds (certified
  upper, the paper's Theorem 4.7 value, the lower bound, closed forms of
  :mod:`jaxshuffle.closed_forms`), as in Figures 1-4 of Wang et al. (VLDB 2024).
* :func:`privacy_utility_surface` -- amplified eps over ``(n, eps0)`` as a heat map with log
  axes, contour lines at target eps values, and a utility overlay: the standard deviation of
  the k-ary randomized-response frequency estimator (:func:`grr_frequency_std`).
* :func:`summary_figure` -- both panels, written to a file (what ``jaxshuffle sweep`` and
  ``jaxshuffle plot`` draw).

``results`` is a :class:`jaxshuffle.sweeps.SweepResult`, a path to a sweep's results (CSV,
npz or directory), or a mapping of column name to array with at least ``eps0``, ``n``,
``delta``, ``upper``.

Units: epsilon is in nats (natural logarithm: the guarantee is ``P[M(D) in S] <= e^eps
P[M(D') in S] + delta``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

__all__ = ["amplification_ratio", "privacy_utility_surface", "summary_figure", "grr_frequency_std",
           "closed_form_bounds"]

_INSTALL = "matplotlib is needed for plots: pip install 'jaxshuffle[plot]' (or pip install matplotlib)"


def _require_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only without matplotlib
        raise ImportError(_INSTALL) from exc
    return matplotlib


def _new_ax():
    _require_matplotlib()
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(6.4, 4.6), layout="constrained")
    return ax


def _as_result(results):
    from jaxshuffle.sweeps.store import SweepResult, load

    if isinstance(results, SweepResult):
        return results
    if isinstance(results, (str, Path)):
        return load(results)
    if hasattr(results, "keys"):
        cols = {k: np.asarray(results[k]) for k in results.keys()}
        return SweepResult(cols, {})
    raise TypeError("results: expected a SweepResult, a path, or a mapping of columns")


def _fmt_num(x: float) -> str:
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    e = math.floor(math.log10(abs(x)))
    m = x / 10 ** e
    if abs(e) <= 3:
        return f"{x:g}"
    if abs(m - 1) < 1e-9:
        return f"$10^{{{e}}}$"
    return f"${m:.3g}\\times10^{{{e}}}$"


def _delta_text(rule: str) -> str:
    try:
        return _fmt_num(float(rule))
    except ValueError:
        return rule


def _pick(res, column: str, wanted):
    """``res`` restricted to ``column == wanted`` (default: its first value), and the value."""
    values = res.unique(column)
    chosen = wanted if wanted is not None else str(values[0])
    if chosen not in values:
        raise ValueError(f"{column}: {chosen!r} is not in the results ({', '.join(map(str, values))})")
    return res.select(**{column: chosen}), chosen


def _subset(res, randomizer, delta_rule, fixed: dict | None = None):
    """Rows of one randomizer and one delta rule; other option axes fixed at their first value."""
    if "randomizer" in res:
        res, name = _pick(res, "randomizer", randomizer)
    else:
        name = randomizer or "?"
    if "delta_rule" in res:
        res, rule = _pick(res, "delta_rule", delta_rule)
    else:
        d = res.unique("delta")
        rule = repr(float(d[0])) if delta_rule is None else delta_rule
        res = res.select(delta=float(rule))
    notes = []
    skip = {"index", "randomizer", "n", "eps0", "delta_rule", "delta", *((fixed or {}).keys())}
    from jaxshuffle.sweeps.store import COLUMNS

    for k in list(res.keys()):
        if k in skip or k in COLUMNS:
            continue
        col = res[k]
        if col.dtype.kind != "f":
            continue
        vals = col[~np.isnan(col)]
        if vals.size == 0:
            continue
        if np.unique(vals).size > 1:
            if _function_of_axes(res, k):  # e.g. the optimal k(eps0) of a derived option
                notes.append(f"{k} = {k}(ε₀)")
                continue
            res = res.select(**{k: float(res.unique(k)[0])})
        notes.append(f"{k} = {float(res[k][0]):g}")
    return res, name, rule, notes


def _function_of_axes(res, key: str) -> bool:
    """True if the column is determined by (eps0, n) (a derived option), not an independent axis."""
    axes = [res[c] for c in ("eps0", "n") if c in res]
    if not axes:
        return False
    pairs = np.unique(np.stack(axes, 1), axis=0).shape[0]
    triples = np.unique(np.stack([*axes, res[key]], 1), axis=0).shape[0]
    return triples == pairs


def grr_frequency_std(eps0, n, k, f=0.0):
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


def closed_form_bounds(eps0, n, delta, p=None, beta=None, q=None) -> dict[str, np.ndarray]:
    """Closed-form epsilon bounds (``inf`` where a theorem's conditions fail), keyed by legend label.

    The eps0-LDP forms of :data:`jaxshuffle.closed_forms.CLOSED_FORMS` except the generic blanket
    bounds (FMT'23, FMT'21, EFMRTT'19); with ``(p, beta, q)`` also the variation-ratio Theorems 4.2
    and 4.3 (bounds on the paper's Theorem 4.7 pair, a guarantee only at the worst-case beta).
    """
    from jaxshuffle import closed_forms as cf

    eps0, n, delta = (np.asarray(x, dtype=np.float64) for x in (eps0, n, delta))
    out = cf.evaluate(eps0, n, delta, p, beta, q)
    return {label: value for label, (value, _, form) in out.items() if "blanket" not in label}


_STYLES = {
    "upper": dict(color="black", lw=2.2, ls="-", label="certified upper bound on ε (this library)"),
    "paper": dict(color="tab:orange", lw=1.8, ls="--", label="paper Thm 4.7 value (not certified if w > 0)"),
    "lower": dict(color="tab:green", lw=1.8, ls=":", label="from the lower bound on ε (Thm 5.1 pair): ratio ceiling"),
}
_CF_STYLES = [dict(color="tab:blue", ls="--", marker="o"), dict(color="tab:purple", ls="-.", marker="s"),
              dict(color="tab:red", ls=":", marker="^"), dict(color="tab:brown", ls="-.", marker="x"),
              dict(color="tab:cyan", ls="--", marker="d")]


def amplification_ratio(results, ax=None, *, n=None, randomizer=None, delta_rule=None, bounds=None,
                        closed_forms: bool = True, log_y: bool = False):
    """Amplification ratio ``eps0 / eps`` against ``eps0`` (like Figures 1-4 of the paper).

    Args:
      results: sweep results with an ``eps0`` axis.
      ax: matplotlib axes (new figure if None). Returned.
      n: plot this ``n`` only; ``None`` with several ``n`` in the results draws one line per
        ``n`` (colours) for each bound (line styles).
      randomizer, delta_rule: which rows (default: the first of each in the results).
      bounds: subset of ``("upper", "paper", "lower")``; default: ``upper``, plus ``paper``
        where it differs from it, plus ``lower`` where the results have one.
      closed_forms: with a single ``n``, add the closed forms (:func:`closed_form_bounds`)
        where their conditions hold.
      log_y: logarithmic ratio axis.
    """
    res = _as_result(results)
    if "eps0" not in res:
        raise ValueError("results: no eps0 column (the ratio plot needs an eps0 axis)")
    res, name, rule, notes = _subset(res, randomizer, delta_rule)
    if n is not None:
        res = res.select(n=float(n))
        if len(res) == 0:
            raise ValueError(f"n: {n:g} is not in the results")
    ns = np.sort(np.unique(res["n"]))
    if bounds is None:
        bounds = ["upper"]
        if "paper" in res and not np.allclose(res["paper"], res["upper"], rtol=1e-9, equal_nan=True):
            bounds.append("paper")
        if "has_lower" in res and np.any(res["has_lower"]):
            bounds.append("lower")
    ax = ax if ax is not None else _new_ax()
    single = ns.size == 1
    cmap = None
    if not single:
        _require_matplotlib()
        import matplotlib

        cmap = matplotlib.colormaps["viridis"]
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
                style["color"] = cmap(j / max(ns.size - 1, 1) * 0.9)
                style["label"] = (f"n = {_fmt_num(nv)}" if b == bounds[0] else None)
                style["lw"] = 1.6
            ax.plot(e0, ratio, **style)
        if single and closed_forms:
            kw = {}
            if {"p", "beta", "q"} <= set(sub.keys()):
                kw = dict(p=sub["p"][order], beta=sub["beta"][order], q=sub["q"][order])
            cfs = closed_form_bounds(e0, sub["n"][order], sub["delta"][order], **kw)
            for c, (label, eps) in enumerate(cfs.items()):
                with np.errstate(divide="ignore", invalid="ignore"):
                    ratio = np.where(np.isfinite(eps) & (eps > 0), e0 / eps, np.nan)
                if np.all(np.isnan(ratio)):
                    continue
                ax.plot(e0, ratio, lw=1.2, ms=4, mfc="none", label=label, **_CF_STYLES[c % len(_CF_STYLES)])
    if not single and len(bounds) > 1:
        from matplotlib.lines import Line2D

        handles, labels = ax.get_legend_handles_labels()
        for b in bounds:
            handles.append(Line2D([], [], color="gray", lw=1.6, ls=_STYLES[b]["ls"]))
            labels.append(_STYLES[b]["label"])
        ax.legend(handles, labels, fontsize=8, loc="best")
    else:
        ax.legend(fontsize=8, loc="best")
    ax.axhline(1.0, color="0.6", lw=0.8)
    ax.set_xlabel(r"local privacy $\varepsilon_0$ (nats)")
    ax.set_ylabel(r"amplification ratio $\varepsilon_0/\varepsilon$" + f"  at $\\delta$ = {_delta_text(rule)}")
    if log_y:
        ax.set_yscale("log")
    where = f"n = {_fmt_num(ns[0])}" if single else f"n = {_fmt_num(ns[0])} .. {_fmt_num(ns[-1])}"
    extra = ("; " + ", ".join(notes)) if notes else ""
    ax.set_title(f"amplification by shuffling: {name}{extra}\n{where}, $\\delta$ = {_delta_text(rule)}", fontsize=10)
    ax.grid(True, alpha=0.3)
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


def _levels_between(lo: float, hi: float) -> list[float]:
    out = []
    for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for m in (1, 3):
            v = m * 10.0 ** e
            if lo < v < hi:
                out.append(v)
    return out


def privacy_utility_surface(results, ax=None, *, randomizer=None, delta_rule=None, value: str = "upper",
                            targets=(0.1, 0.3, 1.0), utility_k=None, utility_levels=None, colorbar: bool = True,
                            log_eps0: bool = True):
    """Amplified eps over ``(n, eps0)``: heat map (log axes), contours at ``targets``, utility overlay.

    Args:
      results: sweep results with ``n`` and ``eps0`` axes (several values each).
      value: the column shown (``"upper"``: certified; ``"paper"``, ``"lower"``).
      targets: eps levels drawn as labelled solid contour lines.
      utility_k: ``k`` of the k-ary RR whose frequency-estimate standard deviation
        (:func:`grr_frequency_std`, at frequency 0) is overlaid as dashed contours; default:
        the results' ``k`` for ``grr``, else 10; ``0`` turns the overlay off.
      utility_levels: standard-deviation levels (default: 1 and 3 times powers of ten in range).
      colorbar: add a colour bar.
      log_eps0: logarithmic eps0 axis.
    """
    _require_matplotlib()
    from matplotlib.colors import LogNorm

    res = _as_result(results)
    for col in ("eps0", "n", value):
        if col not in res:
            raise ValueError(f"results: no {col} column")
    res, name, rule, notes = _subset(res, randomizer, delta_rule)
    e0s = np.sort(np.unique(res["eps0"]))
    ns = np.sort(np.unique(res["n"]))
    if e0s.size < 2 or ns.size < 2:
        raise ValueError("results: the surface needs at least 2 values of n and of eps0")
    Z = np.full((e0s.size, ns.size), np.nan)
    i = np.searchsorted(e0s, res["eps0"])
    j = np.searchsorted(ns, res["n"])
    Z[i, j] = res[value]
    ax = ax if ax is not None else _new_ax()
    pos = Z[np.isfinite(Z) & (Z > 0)]
    vmin, vmax = (float(pos.min()), float(pos.max())) if pos.size else (1e-3, 1.0)
    if vmax <= vmin:
        vmax = vmin * 10
    Zm = np.ma.masked_invalid(np.where(Z > 0, Z, np.nan))
    mesh = ax.pcolormesh(_edges(ns, True), _edges(e0s, log_eps0), Zm, norm=LogNorm(vmin=vmin, vmax=vmax),
                         cmap="YlOrRd", shading="flat")
    ax.set_xscale("log")
    if log_eps0:
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis)
    N, E = np.meshgrid(ns, e0s)
    levels = sorted(t for t in targets if vmin < t < vmax)
    if levels:
        cs = ax.contour(N, E, np.where(np.isfinite(Z), Z, vmax), levels=levels, colors="black", linewidths=1.8)
        for t in ax.clabel(cs, fmt=lambda v: f"ε = {v:g}", fontsize=8):
            t.set_bbox(dict(facecolor="white", alpha=0.6, edgecolor="none", pad=0.5))
    k = utility_k
    if k is None:
        k = float(res["k"][0]) if (name == "grr" and "k" in res) else 10.0
    if k and k >= 2:
        sd = grr_frequency_std(E, N, k)
        lv = utility_levels or _levels_between(float(np.nanmin(sd)), float(np.nanmax(sd)))
        if lv:
            cu = ax.contour(N, E, sd, levels=lv, colors="tab:blue", linestyles="--", linewidths=1.1)
            for t in ax.clabel(cu, fmt=lambda v: f"sd {v:.0e}" if v < 0.01 else f"sd {v:g}", fontsize=7):
                t.set_bbox(dict(facecolor="white", alpha=0.5, edgecolor="none", pad=0.3))
    if colorbar:
        cb = ax.figure.colorbar(mesh, ax=ax)
        cb.set_label(f"{'certified ' if value == 'upper' else value + ' '}ε (nats) at δ = {_delta_text(rule)}")
    ax.set_xlabel("number of users n (log scale)")
    ax.set_ylabel(r"local privacy $\varepsilon_0$ (nats)")
    extra = ("; " + ", ".join(notes)) if notes else ""
    util = (f"; dashed blue: std of the {k:g}-ary RR\nfrequency estimate (f = 0) for the same (n, ε₀)"
            if k and k >= 2 else "")
    what = {"upper": "certified amplified ε", "paper": "paper's Thm 4.7 ε (not certified)",
            "lower": "lower bound on ε"}.get(value, value)
    ax.set_title(f"{what}: {name}{extra}, δ = {_delta_text(rule)}"
                 f"\nsolid black: ε = {', '.join(f'{t:g}' for t in levels)}{util}", fontsize=9)
    return ax


def summary_figure(results, path=None, *, kind: str = "auto", n=None, delta_rule=None, randomizer=None,
                   targets=(0.1, 0.3, 1.0), utility_k=None, dpi: int = 150):
    """Figure with the privacy-utility surface and/or the amplification ratio; saved to ``path`` if given.

    ``kind``: ``"auto"`` (both panels when the results have several ``n`` and ``eps0``, else the
    ratio), ``"ratio"``, ``"surface"`` or ``"both"``. Returns the matplotlib Figure (built without
    pyplot, so no global state is touched).
    """
    _require_matplotlib()
    from matplotlib.figure import Figure

    res = _as_result(results)
    if "eps0" not in res:
        raise ValueError("results: plots need an eps0 axis")
    sub, *_ = _subset(res, randomizer, delta_rule)
    grid2d = np.unique(sub["n"]).size >= 2 and np.unique(sub["eps0"]).size >= 2
    if kind == "auto":
        kind = "both" if grid2d else "ratio"
    if kind in ("surface", "both") and not grid2d:
        raise ValueError("kind: the surface needs at least 2 values of n and of eps0")
    panels = {"both": 2, "ratio": 1, "surface": 1}[kind]
    fig = Figure(figsize=(6.6 * panels, 5.0), layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False)[0]
    a = 0
    if kind in ("surface", "both"):
        privacy_utility_surface(res, axes[a], randomizer=randomizer, delta_rule=delta_rule, targets=targets,
                                utility_k=utility_k)
        a += 1
    if kind in ("ratio", "both"):
        sel = sub if n is None else sub.select(n=float(n))
        with np.errstate(divide="ignore", invalid="ignore"):
            r = sel["eps0"] / sel["upper"]
        r = r[np.isfinite(r) & (r > 0)]
        log_y = bool(r.size and r.max() / max(r.min(), 1e-300) > 20)
        amplification_ratio(res, axes[a], n=n, randomizer=randomizer, delta_rule=delta_rule, log_y=log_y)
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return fig
