"""Every applicable bound side by side, for one randomizer over a grid of (eps0, n, delta).

:func:`compare` evaluates, at each grid point, the bounds below and returns them as arrays
and as a tidy long table (one row per point and bound, CSV-ready). Each bound carries a
``kind``:

* ``certified``: a sound upper bound on the shuffled mechanism, computed by the certified
  engine (:func:`jaxshuffle.accountant.amplify`'s ``upper`` under ``upper_from``, by default the
  smallest sound source; where the randomizer carries its mechanism (k-ary RR) also the
  worst-case pair and the blanket pair on their own rows; the numerical standard clone of FMT'21
  for ``eps0 = log p``, and the stronger clone of FMT'23 where its clone condition is proven for the
  randomizer (k-ary RR; elsewhere kind ``paper``: its general proof was withdrawn, docs/math.md
  3.1); the variation-ratio closed
  forms where the Theorem 4.7 pair is itself sound, ``beta`` at the worst case);
* ``lower``: the numerical Theorem 5.1 lower bound, where the catalog derives it (for k-ary RR,
  unless ``upper_from="worst-case"``, the larger with the exact all-z / all-x0 datasets');
* ``paper``: the paper's Theorem 4.7 value and closed forms for the randomizer's own beta,
  which are *not* upper bounds when ``beta`` is below the worst case (docs/math.md section 3);
* ``pitfall`` (only with ``sample_rate < 1``): the two wrong constructions for sampled clients
  (docs/how-to/sampled-clients.md), shown so that they can be recognised, never upper bounds;
* ``reference``: earlier published closed forms (EFMRTT'19, privacy blanket, FMT'21/'23
  closed forms) as implemented in :mod:`jaxshuffle.closed_forms`, shown for comparison
  and not certified by jaxshuffle. For the rows with a derived total variation similarity
  ``gamma`` (``closed_forms.BLANKET_GAMMA``: k-ary RR, subset selection, local hashing) also
  the randomizer-specific privacy blanket, labelled :data:`BLANKET_SPECIFIC` (the smaller of
  its Hoeffding and Bennett forms, the paper's Figures 1-2 curve).

Where a bound's conditions fail its value is ``inf`` and ``valid`` is False.

With clients sampled (``sample_rate=g < 1``, docs/math.md 12.10) the rows are those that mean
something for a sampled round: the certified upper at ``g`` and its lower bound, the certified upper
at full participation (also an upper bound at ``g``: dropping each message with probability ``1 - g``
is a post-processing of the shuffled output), and the two pitfalls: the two-count pair with
``w = 1 - g`` and the clone probabilities scaled by ``g``, and the add/remove subsampling formula
``log(1 + g(e^eps - 1))`` applied to full participation's bound. The paper's value, the clones and the
closed forms are of full participation and are left out.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxshuffle import closed_forms as cf
from jaxshuffle.accountant import amplify
from jaxshuffle.engine.two_count.pair import standard_clone_pair, stronger_clone_pair, two_count_pair
from jaxshuffle.engine.two_count.search import epsilon
from jaxshuffle.randomizers import check_options
from jaxshuffle.randomizers.clone import CloneProof

#: Label of the randomizer-specific privacy blanket row (Balle et al. with the randomizer's gamma).
BLANKET_SPECIFIC = "blanket (specific gamma)"


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


#: Labels of the sampled-round rows (``sample_rate < 1``).
SAMPLED_FULL = "full participation g = 1 (jaxshuffle)"
PITFALL_PAIR = "two-count pair w = 1 - g (NOT a bound)"
PITFALL_FORMULA = "log(1 + g(e^eps - 1)) add/remove (NOT a bound)"


def compare(randomizer: str, eps0, n, delta, *, rtol: float = 1e-6, upper_from: str = "best",
            sample_rate: float = 1.0, **options) -> Comparison:
    """All bounds for ``CATALOG[randomizer]`` with ``options`` over the broadcast grid.

    ``eps0, n, delta`` broadcast (e.g. ``eps0[:, None]`` against ``n[None, :]``). The
    randomizer's entry must take ``eps0``; its ``p`` sets the LDP level ``log p`` used by
    the clone and earlier bounds. ``upper_from`` is :func:`~jaxshuffle.accountant.amplify`'s
    (``"best"``, ``"worst-case"`` or ``"blanket"``): which sound source gives the row
    ``certified upper (jaxshuffle)``. ``sample_rate`` (one ``g`` in (0, 1]): below 1, the sampled
    round's rows (module docstring). The closed forms beside it: docs/math.md section 7.

    Args:
      randomizer: a catalog name (``CATALOG``) whose entry takes ``eps0``.
      eps0: local budgets, broadcast against ``n`` and ``delta``.
      n: numbers of users.
      delta: target deltas in (0, 1).
      rtol: relative width of every epsilon bracket.
      upper_from: :func:`~jaxshuffle.accountant.amplify`'s ``upper_from`` (``"best"``, ``"worst-case"``
        or ``"blanket"``).
      sample_rate: one probability ``g`` in (0, 1] that each user takes part (default 1).
      **options: the randomizer's other options (e.g. ``k=10``), as :func:`~jaxshuffle.randomizers.build`.

    Returns:
      The table, a :class:`Comparison`: every bound over the broadcast grid, each with its ``kind`` (module
        docstring): ``certified``, certified upper bounds (errs high); ``lower``, lower bounds (errs low);
        ``paper`` and ``reference``, values as published, not certified (upper bounds only where their
        ``certified`` flag is True); ``pitfall``, NOT bounds.

    Raises:
      ValueError: naming the parameter, for unknown names, bad options, a bad
        ``upper_from`` (``"blanket"`` for a randomizer that carries no mechanism included) or a bad
        ``sample_rate`` (or one below 1 for a randomizer whose sampled round has no bound).
    """
    from jaxshuffle.accountant.subsampling import scalar_sample_rate

    entry = check_options(randomizer, options, skip=("eps0",))
    if "eps0" not in {a.name for a in entry.args}:
        raise ValueError(f"randomizer: {randomizer!r} has no eps0 option; compare needs one")
    g = scalar_sample_rate(sample_rate, "compare")
    e0, nn, dd = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (eps0, n, delta)))
    params = entry.fn(eps0=jnp.asarray(e0), **options)
    if g < 1:
        return Comparison(randomizer, dict(options), e0, nn, dd, _sampled_rows(params, nn, dd, g, rtol, upper_from))
    lower = entry.lower(eps0=jnp.asarray(e0), **options) if entry.lower is not None else None
    rep = amplify(params, nn, dd, lower_params=lower, rtol=rtol, upper_from=upper_from)
    blanket = np.asarray(rep.blanket)
    with_mechanism = bool(np.isfinite(blanket).any())
    p, beta, q = (np.broadcast_to(np.asarray(x), e0.shape) for x in (params.p, params.beta, params.q))
    ldp = np.log(p)  # the randomizer is log(p)-LDP
    true = np.ones(e0.shape, bool)
    bounds: dict[str, Bound] = {}

    def add(name, value, valid, kind, certified):
        value, valid = np.asarray(value, np.float64), np.asarray(valid, bool)
        bounds[name] = Bound(np.where(valid, value, np.inf), valid, kind,
                             np.asarray(certified, bool) & valid & (kind == "certified"))

    add("certified upper (jaxshuffle)", rep.upper, true, "certified", rep.certified)
    if with_mechanism:  # both sound sources on their own rows; upper is their minimum (or one of them)
        add("worst-case pair (jaxshuffle)", rep.worst_case, true, "certified", True)
        add("blanket pair (jaxshuffle)", blanket, np.isfinite(blanket), "certified", True)
    if lower is not None or with_mechanism:
        add("lower bound (Thm 5.1, exact datasets)" if with_mechanism else "lower bound (Thm 5.1)", rep.lower,
            np.asarray(rep.has_lower), "lower", False)
    paper_cert = np.asarray(rep.paper_certified)
    add("paper Thm 4.7 (numerical)", rep.paper, true, "paper", False)
    finite = np.isfinite(ldp)
    if finite.any():
        safe = np.where(finite, ldp, 1.0)
        # certified only where its pointwise clone condition is proven for the randomizer (docs/math.md 3.1)
        strong = np.asarray(rep.clone_proof) == CloneProof.STRONGER
        add("stronger clone FMT23 (numerical)", epsilon(stronger_clone_pair(safe), nn, dd, rtol=rtol).upper, finite,
            "certified" if strong.all() else "paper", strong)
        add("standard clone FMT21 (numerical)",
            epsilon(standard_clone_pair(safe), nn, dd, rtol=rtol).upper, finite, "certified", True)
    for label, (value, valid, form) in cf.evaluate(np.where(finite, ldp, 1.0), nn, dd, p, beta, q).items():
        if form.kind == "reference":
            add(label, value, valid & finite, "reference", False)
        else:  # a bound on the Theorem 4.7 pair: sound exactly where that pair is (beta at the worst case)
            bounds[label] = Bound(value, valid, "certified" if paper_cert.all() else "paper", valid & paper_cert)
    if randomizer in cf.BLANKET_GAMMA and finite.any():
        gamma_fn, names = cf.BLANKET_GAMMA[randomizer]
        others = {k: options[k] for k in names if k != "eps0"}
        gamma = np.broadcast_to(np.asarray(gamma_fn(eps0=jnp.asarray(e0), **others)), e0.shape)
        value, valid = cf.blanket_specific(nn, np.where(finite, ldp, 1.0), dd, gamma)
        add(BLANKET_SPECIFIC, value, np.asarray(valid) & finite, "reference", False)
    return Comparison(randomizer, dict(options), e0, nn, dd, bounds)


def _sampled_rows(params, n, delta, g: float, rtol: float, upper_from: str) -> dict[str, Bound]:
    """The rows of a sampled round (module docstring): certified at ``g`` and at ``g = 1``, the lower
    bound at ``g``, and the two pitfalls (kind ``pitfall``, never certified)."""
    rep = amplify(params, n, delta, rtol=rtol, upper_from=upper_from, sample_rate=g)
    full = np.asarray(amplify(params, n, delta, rtol=rtol, with_paper=False).upper, np.float64)
    p = np.broadcast_to(np.asarray(params.p, np.float64), n.shape)
    # the wrong pair: the victim absent with probability 1 - g, the others' stronger-clone markers scaled by g
    naive = epsilon(two_count_pair(g * p / (p + 1), g / (p + 1), 1 - g, g / (p + 1), g / (p + 1)), n, delta, rtol=rtol)
    true = np.ones(n.shape, bool)
    no = np.zeros(n.shape, bool)
    has_lower = np.asarray(rep.has_lower, bool)
    return {"certified upper (jaxshuffle)": Bound(np.asarray(rep.upper, np.float64), true, "certified", true),
            SAMPLED_FULL: Bound(full, true, "certified", true),
            "lower bound (exact datasets)": Bound(np.where(has_lower, np.asarray(rep.lower, np.float64), np.inf),
                                                  has_lower, "lower", no),
            PITFALL_PAIR: Bound(np.asarray(naive.upper, np.float64), true, "pitfall", no),
            PITFALL_FORMULA: Bound(np.log1p(g * np.expm1(full)), true, "pitfall", no)}


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



# --------------------------------------------------------------------------------------
# Figures 3 and 4: multi-message protocols against their own guarantees
# --------------------------------------------------------------------------------------

MULTI_MESSAGE_FIGURES = ("cheu-zhilyaev", "balls-into-bins")


class MultiMessageFigure(NamedTuple):
    """Data of the paper's Figure 3 (``cheu-zhilyaev``) or Figure 4 (``balls-into-bins``).

    Every array has the broadcast shape of the inputs. ``eps`` values are ``nan`` where
    ``valid`` is False (the original analysis gives no ``eps'`` there: Figure 3 at small eps').

    Attributes:
      protocol: ``"cheu-zhilyaev"`` or ``"balls-into-bins"``.
      eps_prime: the original work's guarantee ``eps'`` (the x axis).
      delta: the delta of both sides.
      n_messages: ``N``, the number of noisy reports (Figure 3: the number of users ``n``) or
        blanket balls (Figure 4: ``32 log(2/delta) d/(eps'^2 s)``) of the original guarantee.
        The variation-ratio side mixes the victim's message with ``N - 1`` blanket messages,
        as the authors' experiment does (one fewer than ``N``: conservative).
      f: Figure 3's flip probability (:func:`~jaxshuffle.randomizers.multi_message.cheu_zhilyaev_flip`);
        ``nan`` for Figure 4.
      valid: where the original guarantee exists.
      upper: certified upper bound (``amplify(...).upper``).
      paper: the paper's Theorem 4.7 value (its "variation-ratio"; certified where
        ``paper_certified``: always for Figure 4, ``beta = 1`` at ``p = inf``; not for Figure 3).
      paper_certified: see ``paper``.
      thm42, thm43: the closed forms of Theorems 4.2 (corrected) and 4.3 on the Theorem 4.7 pair
        (the paper's "variation-ratio, analytic" and "variation-ratio, asymptotic").
    """

    protocol: str
    eps_prime: np.ndarray
    delta: np.ndarray
    n_messages: np.ndarray
    f: np.ndarray
    valid: np.ndarray
    upper: np.ndarray
    paper: np.ndarray
    paper_certified: np.ndarray
    thm42: np.ndarray
    thm43: np.ndarray

    def ratios(self) -> dict[str, np.ndarray]:
        """The extra amplification ratio ``eps'/eps`` of each variation-ratio bound (``nan`` off ``valid``)."""
        return {name: self.eps_prime / getattr(self, name) for name in ("upper", "paper", "thm42", "thm43")}

    def savings(self) -> dict[str, np.ndarray]:
        """Budget saved against the original work, ``1 - eps/eps'``, per bound."""
        return {name: 1.0 - getattr(self, name) / self.eps_prime for name in ("upper", "paper", "thm42", "thm43")}


def multi_message_figure(protocol: str, eps_prime, delta, *, n=None, d=None, s=None,
                         rtol: float = 1e-6) -> MultiMessageFigure:
    """Figures 3 and 4 of the paper: the protocols' own ``eps'`` against the variation-ratio bounds.

    * ``"cheu-zhilyaev"`` (Figure 3): ``n`` users; the flip probability ``f`` is the one at which
      the original analysis gives ``(eps', delta)`` with ``N = n`` reports
      (:func:`~jaxshuffle.randomizers.multi_message.cheu_zhilyaev_flip`); the variation-ratio
      side uses Table 4's ``(p, beta, q) = ((1-f)^2/f^2, 1-2f, (1-f)/f)``. ``d`` does not enter.
    * ``"balls-into-bins"`` (Figure 4): ``d`` bins, ``s`` special bins per value; ``N`` blanket
      balls from the calibration ``N = floor(32 log(2/delta) d/(eps'^2 s))``; Table 4's
      ``(inf, 1, d/s)``. Only ``d/s`` enters.

    ``eps_prime``, ``delta`` (and ``n``, ``d``, ``s``) broadcast. The paper's claims: numerical
    savings of about 75 % (ratio about 4), Theorem 4.2 more than 50 %, both closed forms better
    than the original (ratio > 1); docs/math.md section 19 and ``tests/test_paper_rows.py``.
    """
    from jaxshuffle.randomizers import multi_message as mm

    if protocol not in MULTI_MESSAGE_FIGURES:
        raise ValueError(f"protocol: must be one of {MULTI_MESSAGE_FIGURES}, got {protocol!r}")
    if protocol == "cheu-zhilyaev":
        if n is None:
            raise ValueError("n: the cheu-zhilyaev figure needs the number of users n")
        ep, dl, nn = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (eps_prime, delta, n)))
        f = np.asarray(mm.cheu_zhilyaev_flip(ep, nn, dl))
        valid = np.isfinite(f)
        params = lambda m: mm.cheu_zhilyaev(jnp.asarray(f[m]), 1)  # noqa: E731
    else:
        if d is None or s is None:
            raise ValueError("d, s: the balls-into-bins figure needs the number of bins d and special bins s")
        ep, dl, dd, ss = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (eps_prime, delta, d, s)))
        nn = np.asarray(mm.balls_into_bins_messages(ep, dd, ss, dl))
        f = np.full(ep.shape, np.nan)
        valid = nn >= 2
        params = lambda m: mm.balls_into_bins(jnp.asarray(dd[m]), jnp.asarray(ss[m]), 1)  # noqa: E731
    out = {k: np.full(ep.shape, np.nan) for k in ("upper", "paper", "thm42", "thm43")}
    cert = np.zeros(ep.shape, bool)
    if valid.any():
        prm = params(valid)
        # N - 1 blanket messages: N - 1 users with one blanket message each (VRParams.n_blanket).
        rep = amplify(prm, nn[valid] - 1.0, dl[valid], rtol=rtol)
        out["upper"][valid] = np.asarray(rep.upper)
        out["paper"][valid] = np.asarray(rep.paper)
        cert[valid] = np.asarray(rep.paper_certified)
        for key, fn in (("thm42", cf.vr_theorem42), ("thm43", cf.vr_theorem43)):
            value, ok = fn(nn[valid], dl[valid], prm.p, prm.beta, prm.q)  # the pair's "users" = N
            out[key][valid] = np.where(np.asarray(ok), np.asarray(value), np.inf)
    return MultiMessageFigure(protocol, ep, dl, nn, f, valid, out["upper"], out["paper"], cert,
                              out["thm42"], out["thm43"])


def multi_message_lower(randomizer: str, n, delta, *, rtol: float = 1e-6, **options):
    """Theorem 5.1 lower bound of a multi-message catalog row (``cheu-zhilyaev``, ``balls-into-bins``,
    ``pure-dump``) shuffled among ``n`` users: the lower pair's certified bracket (its ``lower`` end is
    the lower bound) with the blanket count of
    :func:`~jaxshuffle.randomizers.multi_message.lower_n_blanket`. docs/math.md section 19.4.
    """
    from jaxshuffle.randomizers import multi_message as mm

    fns: dict[str, Callable[..., mm.LowerParams]] = {"cheu-zhilyaev": mm.cheu_zhilyaev_lower,
                                                      "balls-into-bins": mm.balls_into_bins_lower,
                                                      "pure-dump": mm.pure_dump_lower}
    if randomizer not in fns:
        raise ValueError(f"randomizer: no multi-message lower parameters for {randomizer!r}; "
                         f"choose one of {sorted(fns)}")
    check_options(randomizer, options)
    low = fns[randomizer](**options)
    n_bl = mm.lower_n_blanket(randomizer, n, options["blanket_per_user"])
    return epsilon(low.pair(), n_bl + 1.0, delta, rtol=rtol)
