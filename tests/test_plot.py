"""Plots render (headless), carry labelled axes with units and delta, and fail clearly without matplotlib.

The results here are synthetic (no engine call): plotting is tested, not the numbers.
"""
from __future__ import annotations

import argparse
import builtins
import itertools

import numpy as np
import pytest

from jaxshuffle.cli import sweep as cli_sweep
from jaxshuffle import sweeps as sw

mpl = pytest.importorskip("matplotlib", reason="matplotlib is the optional 'plot' extra")
mpl.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from jaxshuffle import plot as jplot  # noqa: E402


def _fake_results(ns=(1e3, 1e4, 1e5), eps0=np.geomspace(0.2, 6, 8), randomizer="grr", k=10.0):
    rows = list(itertools.product(eps0, ns))
    e0 = np.array([r[0] for r in rows])
    n = np.array([r[1] for r in rows])
    p = np.exp(e0)
    beta = (p - 1) / (p + k - 1)
    upper = np.minimum(e0, np.log1p((p - 1) * 4 * np.sqrt(2 * np.log(4e6) / ((p + 1) * n))))
    cols = {
        "index": np.arange(len(rows)), "randomizer": np.full(len(rows), randomizer), "eps0": e0,
        "k": np.full(len(rows), k), "n": n, "delta_rule": np.full(len(rows), "1e-06"),
        "delta": np.full(len(rows), 1e-6), "lower": 0.8 * upper, "upper": upper, "paper": 0.9 * upper,
        "certified": np.ones(len(rows), bool), "status": np.full(len(rows), "converged"),
        "worst_case": upper, "has_lower": np.ones(len(rows), bool), "p": p, "beta": beta, "q": p,
    }
    return sw.SweepResult(cols, {"complete": True})


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
