"""Every applicable bound side by side, for one randomizer over a grid of (eps0, n, delta).

:func:`compare` evaluates, at each grid point, the bounds below and returns them as arrays
and as a tidy long table (one row per point and bound, CSV-ready). Each bound carries a
``kind``:

* ``certified``: a sound upper bound on the shuffled mechanism, computed by the certified
  engine (:func:`jaxshuffle.accountant.amplify`'s ``upper``; the numerical stronger clone
  of FMT'23 and standard clone of FMT'21 for ``eps0 = log p``; the variation-ratio closed
  forms where the Theorem 4.7 pair is itself sound, ``beta`` at the worst case);
* ``lower``: the numerical Theorem 5.1 lower bound, where the catalog derives it;
* ``paper``: the paper's Theorem 4.7 value and closed forms for the randomizer's own beta,
  which are *not* upper bounds when ``beta`` is below the worst case (docs/math.md section 5);
* ``reference``: earlier published closed forms (EFMRTT'19, privacy blanket, FMT'21/'23
  closed forms) as implemented in :mod:`jaxshuffle.closed_forms`, shown for comparison
  and not certified by jaxshuffle.

Where a bound's conditions fail its value is ``inf`` and ``valid`` is False.
"""

from __future__ import annotations

import csv
import math
from typing import Mapping, NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxshuffle import closed_forms as cf
from jaxshuffle.accountant import amplify
from jaxshuffle.pair import standard_clone_pair, stronger_clone_pair
from jaxshuffle.randomizers import check_options
from jaxshuffle.search import epsilon


class Bound(NamedTuple):
    value: np.ndarray  #: epsilon (inf where not valid)
    valid: np.ndarray  #: the bound's conditions hold
    kind: str  #: certified | lower | paper | reference
    certified: np.ndarray  #: True where ``value`` is a sound upper bound on the mechanism


class Comparison(NamedTuple):
    randomizer: str
    options: Mapping
    eps0: np.ndarray
    n: np.ndarray
    delta: np.ndarray
    bounds: dict[str, Bound]

    def rows(self) -> list[dict]:
        """Tidy table: one dict per (grid point, bound), with the amplification ratio eps0/eps."""
        out = []
        for idx in np.ndindex(self.eps0.shape):
            e0, n, d = float(self.eps0[idx]), float(self.n[idx]), float(self.delta[idx])
            for name, b in self.bounds.items():
                v = float(b.value[idx])
                out.append(dict(randomizer=self.randomizer, **{k: self.options[k] for k in sorted(self.options)},
                                eps0=e0, n=n, delta=d, bound=name, kind=b.kind, epsilon=v,
                                valid=bool(b.valid[idx]), certified=bool(b.certified[idx]),
                                ratio=(e0 / v if v > 0 and math.isfinite(v) else (math.inf if v == 0 else 0.0))))
        return out

    def figure(self, path) -> None:
        """Write the amplification-ratio figure (one panel per n; needs matplotlib) to ``path``."""
        _write_figure(self, path)

    def to_csv(self, path) -> None:
        rows = self.rows()
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


def compare(randomizer: str, eps0, n, delta, *, rtol: float = 1e-6, **options) -> Comparison:
    """All bounds for ``CATALOG[randomizer]`` with ``options`` over the broadcast grid.

    ``eps0, n, delta`` broadcast (e.g. ``eps0[:, None]`` against ``n[None, :]``). The
    randomizer's entry must take ``eps0``; its ``p`` sets the LDP level ``log p`` used by
    the clone and earlier bounds. Raises ValueError for unknown names or bad options.
    """
    entry = check_options(randomizer, options, skip=("eps0",))
    if "eps0" not in {a.name for a in entry.args}:
        raise ValueError(f"randomizer: {randomizer!r} has no eps0 option; compare needs one")
    e0, nn, dd = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (eps0, n, delta)))
    params = entry.fn(eps0=jnp.asarray(e0), **options)
    lower = entry.lower(eps0=jnp.asarray(e0), **options) if entry.lower is not None else None
    rep = amplify(params, nn, dd, lower_params=lower, rtol=rtol)
    p, beta, q = (np.broadcast_to(np.asarray(x), e0.shape) for x in (params.p, params.beta, params.q))
    ldp = np.log(p)  # the randomizer is log(p)-LDP
    true = np.ones(e0.shape, bool)
    bounds: dict[str, Bound] = {}

    def add(name, value, valid, kind, certified):
        value, valid = np.asarray(value, np.float64), np.asarray(valid, bool)
        bounds[name] = Bound(np.where(valid, value, np.inf), valid, kind,
                             np.asarray(certified, bool) & valid & (kind == "certified"))

    add("certified upper (jaxshuffle)", rep.upper, true, "certified", rep.certified)
    if lower is not None:
        add("lower bound (Thm 5.1)", rep.lower, np.asarray(rep.has_lower), "lower", False)
    paper_cert = np.asarray(rep.paper_certified)
    add("paper Thm 4.7 (numerical)", rep.paper, true, "paper", False)
    finite = np.isfinite(ldp)
    if finite.any():
        safe = np.where(finite, ldp, 1.0)
        add("stronger clone FMT23 (numerical)",
            epsilon(stronger_clone_pair(safe), nn, dd, rtol=rtol).upper, finite, "certified", True)
        add("standard clone FMT21 (numerical)",
            epsilon(standard_clone_pair(safe), nn, dd, rtol=rtol).upper, finite, "certified", True)
    for label, (value, valid, form) in cf.evaluate(np.where(finite, ldp, 1.0), nn, dd, p, beta, q).items():
        if form.kind == "reference":
            add(label, value, valid & finite, "reference", False)
        else:  # a bound on the Theorem 4.7 pair: sound exactly where that pair is (beta at the worst case)
            bounds[label] = Bound(value, valid, "certified" if paper_cert.all() else "paper", valid & paper_cert)
    return Comparison(randomizer, dict(options), e0, nn, dd, bounds)


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install 'jaxshuffle[plot]'") from exc
    return plt


def plot_ratio(table: Comparison, ax=None, *, n_index: int = 0, legend: bool = True):
    """Amplification ratio ``eps0 / eps`` against ``eps0`` for every valid bound at one ``n``
    (the paper's Figures 1-2); certified bounds solid, others dashed. Returns ``ax``."""
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    e0 = table.eps0[:, n_index]
    colors = plt.get_cmap("tab20").colors
    for i, (name, b) in enumerate(table.bounds.items()):
        v = b.value[:, n_index]
        ok = b.valid[:, n_index] & (v > 0) & np.isfinite(v)
        if not ok.any():
            continue
        style = "-" if b.kind == "certified" else ":" if b.kind == "lower" else "--"
        ax.plot(e0[ok], e0[ok] / v[ok], style, color=colors[(2 * i) % 20 + (i >= 10)],
                lw=2.2 if b.kind == "certified" else 1.4, marker="." if ok.sum() < 15 else None,
                label=f"{name} [{b.kind}]")
    n = table.n[0, n_index]
    ax.set_xlabel(r"local budget $\varepsilon_0$ (nats)")
    ax.set_ylabel(r"amplification ratio $\varepsilon_0/\varepsilon$")
    ax.set_yscale("log")
    ax.set_title(f"{table.randomizer} {dict(table.options) or ''}  n = {n:g},  "
                 rf"$\delta$ = {table.delta.flat[0]:g}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if legend:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def _write_figure(self: Comparison, path) -> None:
    plt = _pyplot()
    k = self.n.shape[1] if self.n.ndim == 2 else 1
    fig, axes = plt.subplots(1, k, figsize=(5.5 * k + 3.2, 4.6), squeeze=False)
    for j in range(k):
        plot_ratio(self, axes[0, j], n_index=j, legend=j == k - 1)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

