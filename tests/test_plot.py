"""Plots render (headless), carry labelled axes with units and delta, and fail clearly without matplotlib.

The results here are synthetic (no engine call): plotting is tested, not the numbers.
"""
from __future__ import annotations

import argparse
import builtins
import itertools

import numpy as np
import pytest

from jaxshuffle import sweeps as sw
from jaxshuffle.cli import sweep as cli_sweep

mpl = pytest.importorskip("matplotlib", reason="matplotlib is the optional 'plot' extra")
mpl.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from jaxshuffle import plot as jplot  # noqa: E402
from jaxshuffle.plot.facets import representative  # noqa: E402

EPS0_AXIS = tuple(np.geomspace(0.2, 6, 8))


def _fake_results(ns=(1e3, 1e4, 1e5), eps0=EPS0_AXIS, randomizer="grr", k=10.0):
    """Synthetic results over the product k x eps0 x n (``k`` a number or a sequence; NaN: no k option)."""
    rows = list(itertools.product(np.atleast_1d(np.asarray(k, dtype=float)), eps0, ns))
    kk = np.array([r[0] for r in rows])
    e0 = np.array([r[1] for r in rows])
    n = np.array([r[2] for r in rows])
    p = np.exp(e0)
    beta = (p - 1) / (p + np.nan_to_num(kk, nan=2.0) - 1)
    scale = np.sqrt(np.nan_to_num(kk, nan=10.0) / 10.0)  # a k-dependent surface, so panels differ
    upper = np.minimum(e0, np.log1p((p - 1) * 4 * np.sqrt(2 * np.log(4e6) / ((p + 1) * n)) * scale))
    cols = {
        "index": np.arange(len(rows)), "randomizer": np.full(len(rows), randomizer), "eps0": e0,
        "k": kk, "n": n, "delta_rule": np.full(len(rows), "1e-06"),
        "delta": np.full(len(rows), 1e-6), "lower": 0.8 * upper, "upper": upper, "paper": 0.9 * upper,
        "certified": np.ones(len(rows), bool), "status": np.full(len(rows), "converged"),
        "worst_case": upper, "has_lower": np.ones(len(rows), bool), "p": p, "beta": beta, "q": p,
    }
    return sw.SweepResult(cols, {"complete": True})


def _concat(*results):
    return sw.SweepResult({c: np.concatenate([r[c] for r in results]) for c in results[0].keys()},
                          {"complete": True})


def _texts(ax):
    return " ".join([ax.get_xlabel(), ax.get_ylabel(), ax.get_title()])


def test_amplification_ratio_single_n_with_closed_forms():
    res = _fake_results()
    fig, ax = plt.subplots()
    out = jplot.amplification_ratio(res, ax, n=1e4)
    assert out is ax
    labels = [line.get_label() for line in ax.get_lines()]
    assert any("certified" in lb for lb in labels) and any("paper" in lb for lb in labels)
    assert any("lower" in lb for lb in labels) and any("FMT'23" in lb for lb in labels)
    text = _texts(ax)
    assert "nats" in ax.get_xlabel() and "delta" in text and "10^{-6}" in text
    plt.close(fig)


def test_amplification_ratio_several_n_and_new_axes():
    ax = jplot.amplification_ratio(_fake_results(randomizer="general"), bounds=["upper", "paper"], log_y=True)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum(t.startswith("n = ") for t in legend) == 3
    assert ax.get_yscale() == "log"
    plt.close(ax.figure)


def test_privacy_utility_surface_labels_and_contours():
    fig, ax = plt.subplots()
    out = jplot.privacy_utility_surface(_fake_results(), ax, targets=(0.1, 0.3, 1.0))
    assert out is ax and ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "number of users n" in ax.get_xlabel() and "nats" in ax.get_ylabel()
    assert "10-ary RR" in ax.get_title() and "δ" in ax.get_title()
    cbar_label = fig.axes[-1].get_ylabel()
    assert "certified" in cbar_label and "δ" in cbar_label and "nats" in cbar_label
    texts = [t.get_text() for t in ax.texts]  # contour labels
    assert any(t.startswith("ε = ") for t in texts) and any(t.startswith("sd ") for t in texts)
    plt.close(fig)
    with pytest.raises(ValueError, match="at least 2"):
        jplot.privacy_utility_surface(_fake_results(ns=(1e4,)))


def test_grr_frequency_std():
    eps0, n, k = 1.0, 1000.0, 10.0
    e = np.exp(eps0)
    want = np.sqrt((e + k - 2) / (n * (e - 1) ** 2))
    assert jplot.grr_frequency_std(eps0, n, k) == pytest.approx(want, rel=1e-12)
    # fixed data, f n users hold the value: the count is a sum of Bernoulli(p) and Bernoulli(q) reports
    f = 0.3
    p, q = e / (e + k - 1), 1 / (e + k - 1)
    var_count = f * n * p * (1 - p) + (1 - f) * n * q * (1 - q)
    assert jplot.grr_frequency_std(eps0, n, k, f) == pytest.approx(np.sqrt(var_count) / (n * (p - q)), rel=1e-12)


def test_summary_figure_png_and_cli(tmp_path):
    res = _fake_results()
    png = tmp_path / "both.png"
    fig = jplot.summary_figure(res, png)
    assert len(fig.axes) == 3  # surface, its colour bar, ratio
    assert png.stat().st_size > 20_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the CLI reads a results CSV
    res.to_csv(tmp_path / "results.csv")
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    cli_sweep.add_plot_parser(sub)
    out = tmp_path / "cli.png"
    args = parser.parse_args(["plot", str(tmp_path / "results.csv"), "-o", str(out), "--kind", "ratio",
                              "--n", "1000"])
    assert args.func(args) == 0 and out.stat().st_size > 10_000
    args = parser.parse_args(["plot", str(tmp_path / "results.csv"), "-o", str(tmp_path / "s.png"),
                              "--kind", "surface", "--targets", "0.05,0.5", "--utility-k", "0"])
    assert args.func(args) == 0


def test_missing_matplotlib_is_a_clear_error(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *a, **kw):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"pip install 'jaxshuffle\[plot\]'"):
        jplot.privacy_utility_surface(_fake_results())


# ----------------------------------------------------------------------------------------
# Plots that scale (issue #19): small multiples, few lines, overlays where they apply, no label collisions,
# clear errors. Helpers classify a figure's axes without rendering a PNG.

def _is_colorbar(ax):
    return ax.get_label() == "<colorbar>"


def _surfaces(fig):
    from matplotlib.collections import QuadMesh

    return [ax for ax in fig.axes if not _is_colorbar(ax) and any(isinstance(c, QuadMesh) for c in ax.collections)]


def _line_panels(fig):
    return [ax for ax in fig.axes if not _is_colorbar(ax) and ax not in _surfaces(fig)]


def _labelled_lines(ax):
    return [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]


def _mesh_cells(ax):
    from matplotlib.collections import QuadMesh

    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    return int(np.ma.count(mesh.get_array()))


def _contour_label_boxes(fig):
    """Window extents of the contour labels of each surface (after a draw)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return {ax: [t.get_window_extent(renderer) for t in ax.texts] for ax in _surfaces(fig)}


class _no_warning:
    """Any warning inside the block is an error."""

    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)


GRID40 = dict(ns=np.geomspace(1e2, 1e6, 40), eps0=np.geomspace(0.1, 8, 40))


def test_two_k_dense_grid_one_row_per_k_nothing_dropped(tmp_path):
    res = _fake_results(k=(3.0, 10.0), **GRID40)
    assert len(res) == 2 * 40 * 40
    png = tmp_path / "two_k.png"
    fig = jplot.summary_figure(res, png)
    surfaces, lines = _surfaces(fig), _line_panels(fig)
    colorbars = [ax for ax in fig.axes if _is_colorbar(ax)]
    assert len(surfaces) == 2 and len(lines) == 2 and len(colorbars) == 1 and len(fig.axes) == 5
    # every k has its heat map and its ratio panel, each labelled with the k
    for k in ("k = 3", "k = 10"):
        assert sum(k in ax.get_title() for ax in surfaces) == 1
        assert sum(k in ax.get_title() for ax in lines) == 1
    # nothing dropped: every grid point is a cell of a heat map
    assert sum(_mesh_cells(ax) for ax in surfaces) == len(res)
    # one colour scale for both heat maps, and a labelled colour bar
    norms = {(m.norm.vmin, m.norm.vmax) for ax in surfaces for m in ax.collections[:1]}
    assert len(norms) == 1
    assert "certified" in colorbars[0].get_ylabel() and "nats" in colorbars[0].get_ylabel()
    # each line panel has a legend naming the n values drawn, at most 8 of the 40
    for ax in lines:
        legend = ax.get_legend()
        assert legend is not None and "8 of 40" in legend.get_title().get_text()
        assert 2 <= len(_labelled_lines(ax)) <= 8
    assert "one per k" in fig.get_suptitle()
    assert png.stat().st_size > 50_000


def test_cli_plot_40x40_two_k(tmp_path):
    res = _fake_results(k=(3.0, 10.0), **GRID40)
    res.to_csv(tmp_path / "results.csv")
    parser = argparse.ArgumentParser()
    cli_sweep.add_plot_parser(parser.add_subparsers())
    out = tmp_path / "cli.png"
    args = parser.parse_args(["plot", str(tmp_path / "results.csv"), "-o", str(out)])
    assert args.func(args) == 0 and out.read_bytes()[:4] == b"\x89PNG"


def test_forty_n_values_at_most_eight_labelled_lines():
    res = _fake_results(randomizer="general", k=np.nan, **GRID40)
    with _no_warning():
        ax = jplot.amplification_ratio(res)
    assert len(_labelled_lines(ax)) == 8
    assert len(ax.get_lines()) <= 8 + 1  # one bound (upper) per n with this many n, plus the ratio-1 line
    assert "8 of 40" in ax.get_title() and "8 of 40" in ax.get_legend().get_title().get_text()
    shown = [float(ln.get_xdata()[0]) for ln in _labelled_lines(ax)]
    assert len(shown) == 8
    plt.close(ax.figure)
    # eps0 with few values, n with many: certified eps against n, one line per eps0
    fig = jplot.summary_figure(_fake_results(randomizer="general", k=np.nan, ns=GRID40["ns"], eps0=(1.0, 4.0)))
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and "number of users" in ax.get_xlabel()
    assert len(_labelled_lines(ax)) == 2 and all(len(ln.get_xdata()) == 40 for ln in _labelled_lines(ax))
    # many eps0 values on that panel: at most 8 lines, said in the legend
    fig = jplot.summary_figure(_fake_results(randomizer="general", k=np.nan, **GRID40), kind="ratio")
    for ax in fig.axes:
        assert len(_labelled_lines(ax)) <= 8


def test_representative_values_log_spaced_with_ends():
    v = np.geomspace(1e2, 1e6, 40)
    r = representative(v, 8)
    assert r.size == 8 and r[0] == v[0] and r[-1] == v[-1]
    step = np.log(1e4) / 39  # the grid's own log step: picks are within one step of even spacing
    assert np.all(np.abs(np.log(r) - np.linspace(np.log(1e2), np.log(1e6), 8)) <= step)
    assert np.array_equal(representative(v[:5], 8), v[:5])


def test_plot_modules_import_only_public_names_of_their_siblings():
    """The helpers the plot modules share are public names of public modules (plot.common, plot.facets):
    no module of jaxshuffle.plot imports an underscored module or name from another."""
    import ast
    import pathlib

    offenders = []
    for path in pathlib.Path(jplot.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jaxshuffle.plot"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private or node.module.rsplit(".", 1)[-1].startswith("_"):
                    offenders.append(f"{path.name}:{node.lineno} from {node.module} import {private or '...'}")
    assert not offenders, offenders


def test_general_panel_has_no_krr_overlay():
    general = _fake_results(randomizer="general", k=np.nan, ns=np.geomspace(1e2, 1e5, 13),
                            eps0=np.geomspace(0.2, 8, 16))
    grr = _fake_results(k=(3.0,), ns=np.geomspace(1e2, 1e5, 13), eps0=np.geomspace(0.2, 8, 16))
    fig = jplot.summary_figure(_concat(general, grr))
    surfaces = _surfaces(fig)
    assert len(surfaces) == 2 and "randomizer" in fig.get_suptitle()
    by_name = {("general" if "general" in ax.get_title() else "grr"): ax for ax in surfaces}
    g, r = by_name["general"], by_name["grr"]
    assert "RR" not in g.get_title() and not any(t.get_text().startswith("sd") for t in g.texts)
    assert len(g.collections) == 2  # the heat map and the target contours only
    assert "3-ary RR" in r.get_title() and len(r.collections) == 3
    assert sum(_mesh_cells(ax) for ax in surfaces) == len(general) + len(grr)
    # the single-panel function: no overlay by default on general
    ax = jplot.privacy_utility_surface(general)
    assert "RR" not in ax.get_title() and not any(t.get_text().startswith("sd") for t in ax.texts)
    plt.close(ax.figure)
    # an explicit k: drawn on general (its bound holds for k-RR), not on the grr panel of another k
    fig = jplot.summary_figure(_concat(general, grr), utility_k=10)
    by_name = {("general" if "general" in ax.get_title() else "grr"): ax for ax in _surfaces(fig)}
    assert "10-ary RR" in by_name["general"].get_title()
    assert "not drawn" in by_name["grr"].get_title() and len(by_name["grr"].collections) == 2


def test_contour_labels_do_not_overlap():
    res = _fake_results(k=(3.0, 10.0), **GRID40)
    targets = (0.01, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)  # crowded levels
    fig = jplot.summary_figure(res, targets=targets)
    boxes = _contour_label_boxes(fig)
    assert boxes and all(len(b) >= 3 for b in boxes.values())
    for ax, bb in boxes.items():
        frame = ax.get_window_extent()
        for i, a in enumerate(bb):
            assert frame.x0 <= a.x0 and a.x1 <= frame.x1 and frame.y0 <= a.y0 and a.y1 <= frame.y1
            for b in bb[i + 1:]:
                assert not a.overlaps(b), (a, b)
    # every target in range is marked on the colour bar, labelled or not
    cbar = next(ax for ax in fig.axes if _is_colorbar(ax))
    assert len(cbar.collections) >= 2
    # the single-panel function too, on a small pyplot figure
    fig, ax = plt.subplots(figsize=(4, 3))
    jplot.privacy_utility_surface(_fake_results(**GRID40), ax, targets=targets)
    for bb in _contour_label_boxes(fig).values():
        for i, a in enumerate(bb):
            assert not any(a.overlaps(b) for b in bb[i + 1:])
    plt.close(fig)


def test_single_panel_functions_say_what_they_leave_out():
    res = _fake_results(k=(3.0, 10.0))
    with pytest.warns(UserWarning, match=r"2 panels .*k = 3.*k = 10.*fixed="):
        ax = jplot.amplification_ratio(res)
    assert "k = 3" in ax.get_title()
    plt.close(ax.figure)
    with _no_warning():
        ax = jplot.privacy_utility_surface(res, fixed={"k": 10})
    assert "k = 10" in ax.get_title() and "10-ary RR" in ax.get_title()
    plt.close(ax.figure)
    with pytest.raises(ValueError, match=r"k: 7"):
        jplot.amplification_ratio(res, fixed={"k": 7})


def test_many_panels_are_capped_with_a_note():
    res = _fake_results(k=np.arange(2.0, 16.0), ns=(1e3, 1e4), eps0=(1.0, 2.0, 4.0))
    with pytest.warns(UserWarning, match=r"14 panels.*first 12"):
        fig = jplot.summary_figure(res)
    assert len(_line_panels(fig)) == 12 and "2 more not drawn" in fig.get_suptitle()
    fig = jplot.summary_figure(res, max_panels=20)
    assert len(_line_panels(fig)) == 14


def test_derived_option_is_noted_not_split():
    res = _fake_results(randomizer="subset-selection", k=(1.0,), ns=(1e3, 1e4, 1e5))
    res.columns["k"] = np.maximum(1, np.round(16 / (np.exp(res["eps0"]) + 1)))  # k(eps0), as in notebook 02
    fig = jplot.summary_figure(res)
    assert len(_surfaces(fig)) == 1 and "k = k(ε₀)" in _surfaces(fig)[0].get_title()


def test_randomizer_without_eps0_plots_eps_against_n():
    n = np.geomspace(1e2, 1e5, 10)
    cols = {"randomizer": np.full(10, "metric-general"), "n": n, "delta_rule": np.full(10, "1e-06"),
            "delta": np.full(10, 1e-6), "upper": 1 / np.sqrt(n), "d01": np.full(10, 1.0)}
    fig = jplot.summary_figure(cols)
    (ax,) = fig.axes
    assert "against n" in ax.get_title() and "d01 = 1" in ax.get_title() and len(_labelled_lines(ax)) == 1


def _header_only(path):
    res = _fake_results()
    path.write_text(",".join(res.keys()) + "\n")
    return path


@pytest.mark.parametrize("make, match", [
    (lambda p: _header_only(p / "results.csv"), r"results\.csv.*no (result )?rows"),
    (lambda p: (p / "results.csv").write_text("") and None or p / "results.csv", r"results\.csv.*empty"),
    (lambda p: (p / "results.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe") and None or p / "results.csv",
     r"results\.csv is not a (readable sweep )?results"),
    (lambda p: p / "missing.csv", r"missing\.csv does not exist"),
    (lambda p: (p / "results.csv").write_text("eps0,n\n1,100\n") and None or p / "results.csv",
     r"results\.csv.*no (column upper|'upper' column)"),
    (lambda p: (p / "results.csv").write_text("eps0,n,upper\n1,100,\n2,100,\n") and None or p / "results.csv",
     r"results\.csv: column upper has no finite value"),
])
def test_empty_or_unusable_results_are_a_clear_error(tmp_path, make, match):
    path = make(tmp_path)
    with pytest.raises(ValueError, match=match):
        jplot.summary_figure(path)
    with pytest.raises(ValueError, match=match):
        jplot.amplification_ratio(str(path))


def test_empty_results_objects_and_cli(tmp_path):
    empty = sw.SweepResult({k: v[:0] for k, v in _fake_results().columns.items()}, {})
    with pytest.raises(ValueError, match="no rows"):
        jplot.summary_figure(empty)
    with pytest.raises(ValueError, match="no rows"):
        jplot.privacy_utility_surface(empty)
    with pytest.raises(ValueError, match="no column eps0"):
        jplot.amplification_ratio({"n": [1e3], "upper": [0.1]})
    with pytest.raises(ValueError, match="one length"):
        jplot.summary_figure({"n": [1e3, 1e4], "upper": [0.1]})
    with pytest.raises(ValueError, match="kind"):
        jplot.summary_figure(_fake_results(), kind="heat")
    # the CLI: a header-only CSV names the file
    path = _header_only(tmp_path / "results.csv")
    parser = argparse.ArgumentParser()
    cli_sweep.add_plot_parser(parser.add_subparsers())
    args = parser.parse_args(["plot", str(path), "-o", str(tmp_path / "x.png")])
    with pytest.raises(ValueError, match=r"results\.csv.*no (result )?rows"):
        args.func(args)


def test_composition_curve_lines_and_errors(tmp_path):
    """One colour per delta, certified solid, advanced dashed, basic dotted; bad rows name what is missing."""
    rows = [{"rounds": T, "delta": d, "upper": 0.05 * T ** 0.5, "lower": 0.049 * T ** 0.5,
             "basic": 0.05 * T, "advanced": 0.3 * T ** 0.5 if T > 1 else None}
            for T in (1, 10, 100) for d in (1e-6, 1e-8)]
    ax = jplot.composition_curve(rows, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 10_000
    styles = sorted((line.get_linestyle(), len(line.get_xdata())) for line in ax.get_lines())
    # per delta: certified and lower (3 points each), advanced (2 finite), basic (3)
    assert styles == sorted([("-", 3)] * 4 + [("--", 2)] * 2 + [(":", 3)] * 2)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="rows: every row needs 'basic'"):
        jplot.composition_curve([{"rounds": 1, "delta": 1e-6, "upper": 0.1, "advanced": 0.1}])
    with pytest.raises(ValueError, match="rows: no rows"):
        jplot.composition_curve([])
    with pytest.raises(ValueError, match="no finite certified epsilon"):
        jplot.composition_curve([{"rounds": 1, "delta": 1e-6, "upper": None, "basic": None, "advanced": None}])


def test_composition_curve_draws_the_certified_upper_and_names_its_source():
    """compose --json rows where the blanket pair's PLD wins: the solid line is upper (not the worst-case pair's
    pld), its legend names the source per range of T, and the worst-case pair's lower is drawn only where the PLD
    is the source (there it brackets upper)."""
    rows = []
    for T in (1, 10, 100, 1000):
        pld = 0.05 * T ** 0.5
        blanket = 0.6 * pld
        basic = 0.03 * T
        upper, source = (basic, "basic") if T == 1 else (blanket, "blanket PLD")
        rows.append({"rounds": T, "delta": 1e-6, "upper": upper, "upper_source": source, "pld": pld,
                     "blanket_pld": blanket, "lower": 0.99 * pld, "basic": basic, "advanced": 2 * basic})
    ax = jplot.composition_curve(rows)
    solid = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    assert len(solid) == 1  # no PLD-sourced point: the worst-case pair's lower is not drawn
    np.testing.assert_array_equal(solid[0].get_ydata(), [r["upper"] for r in rows])
    assert solid[0].get_label() == "certified (basic at T = 1, blanket PLD at T = 10-1000), delta=$10^{-6}$"
    rows[-1].update(upper=rows[-1]["pld"], upper_source="PLD")  # the PLD wins at T = 1000 only
    ax = jplot.composition_curve(rows)
    thin = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-" and ln.get_linewidth() < 1]
    assert len(thin) == 1 and thin[0].get_xdata().tolist() == [1000.0]
    assert {ln.get_linestyle() for ln in ax.get_lines()} == {"-", "--", ":"}


def test_tuning_front_draws_tuned_and_equal_split(tmp_path):
    from jaxshuffle.accountant.tune import ParetoFront

    front = ParetoFront(targets=np.array([0.5, 1.0]), upper=np.array([0.49, 0.99]), utility=np.array([4e-6, 1.5e-6]),
                        baseline_upper=np.array([0.495, 0.992]), baseline_utility=np.array([7e-6, 2.5e-6]),
                        eps0=np.ones((2, 3)), results=())
    out = tmp_path / "front.png"
    ax = jplot.tuning_front(front, out)
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["tuned (certified)", "equal split (certified)"]
    assert np.array_equal(lines[0].get_xdata(), front.upper) and np.array_equal(lines[1].get_ydata(),
                                                                                front.baseline_utility)
    assert out.stat().st_size > 0
