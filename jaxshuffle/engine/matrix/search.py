"""Certified blanket bounds for a general finite mechanism (a ``K x K'`` row-stochastic matrix).

docs/math.md section 18. ``R[x, y]`` is the probability that input ``x`` emits message ``y``;
``n`` users, the victim's input changes from ``x0`` to ``x1`` (replace-one), ``t = e^eps``.

Sum form of an ordered pair against a *reference* law ``w`` on the messages::

    delta_w(t) = (1/n) E[(G_1 + ... + G_n)_+] + sum_{y: w(y) = 0} (R(x0,y) - t R(x1,y))_+,       (18.1)
    G = g_y = (R(x0,y) - t R(x1,y)) / w(y)  with probability w(y),  G = 0 with probability 1 - sum w.

* ``w = omega``, ``omega(y) = min_x R(x, y)`` (the blanket): ``max`` over ordered pairs of (18.1) is a
  certified **upper** bound on the hockey-stick divergence of the shuffled mechanism, for every
  dataset of the other ``n - 1`` users (:func:`matrix_bounds`, ``upper``).
* ``w = R(x*, .)`` (every other user holds ``x*``): (18.1) is the **exact** divergence of that
  dataset, so its epsilon is a **lower** bound on the mechanism's (``lower``).

Columns with equal coefficients ``(R(x0,y)/w(y), R(x1,y)/w(y))`` merge into one category
(:func:`pair_forms`), coefficients that differ only by float noise (relative :data:`SNAP_REL`) after
being moved to the bound's side (:func:`_snap`: up for the blanket forms, down for the datasets').
Evaluation at each ``t`` (:func:`form_divergence`), every step on its side:

1. Coefficients ``c_j = a0_j + a1_j t`` are moved by their rounding bound (up for an upper bound,
   down for a lower bound).
2. At most four categories (the null one included) are the grouped exact kernel
   (:func:`jaxshuffle.blanket.point_divergence`) as they are. More categories are *coarsened*:
   the largest (A) and smallest (B) stay, the others are split into two runs of consecutive
   values, each run takes its largest value (upper) or smallest (lower). ``E[(sum)_+]`` is
   nondecreasing in every ``g``, so rounding up keeps an upper bound and rounding down a lower
   bound (docs/math.md 18.3). The run split is the one with the least probability-weighted move.
   After the search, :func:`search_matrix` lowers the coarsened blanket forms' epsilons with a lattice
   and an FFT (:mod:`jaxshuffle.blanket_lattice`, docs/math.md 18.8) at ``n <= LATTICE_AUTO_MAX_N``.
3. ``max_j c_j <= 0`` gives 0 and ``min_j c_j >= 0`` gives the mean ``sum_j w_j c_j``, exactly.
4. The victim-only term is added with its rounding bound.

Public API: :class:`MatrixMechanism` (the pytree a :class:`~jaxshuffle.randomizers.VRParams` carries),
:func:`pair_forms`, :func:`matrix_bounds` (certified ``[lower, upper]`` on the shuffled mechanism's
epsilon), :func:`form_divergence` (one form's certified band at one ``t``).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle import blanket as bl
from jaxshuffle import blanket_lattice as la
from jaxshuffle._bisect import bisect_fixed
from jaxshuffle._config import check, require_x64
from jaxshuffle._numerics import ULP as _ULP
from jaxshuffle.randomizers.params import MatrixMechanism  # noqa: F401  (re-exported: what VRParams carries)
from jaxshuffle.search import Status, lane_constant

#: merged categories per form before coarsening (the kernel takes four; more are rounded into four)
KERNEL_CATEGORIES = 4
#: largest number of input rows / message columns a mechanism matrix may have
MAX_INPUTS = 4096
MAX_OUTPUTS = 1 << 20
#: Largest cost (:func:`matrix_cells`) of one point for which ``amplify``'s automatic source runs the
#: matrix engine: about 5 s per point on a 2-core CPU (about 5 microseconds per cell, warm). The
#: engine runs point by point, so this is smaller than k-RR's batched :data:`jaxshuffle.blanket.
#: AUTO_MAX_CELLS`; costlier points keep the two-count bound (``upper_from="blanket"`` runs them).
#: The exact datasets' forms run beside the blanket forms only where both together fit it.
MATRIX_AUTO_MAX_CELLS = 1 << 20
#: Largest ``n`` at which :func:`search_matrix` refines coarsened forms with the lattice by default
#: (docs/math.md 18.8; ``benchmarks/blanket.py --lattice-ns``): 2-subsets of 5 gain 9 % at n = 1e4 and
#: at 1e5, nothing at 1e6, where the lattice's slack (``2 SDS n / LATTICE_BINS`` standard deviations of
#: the sum) outgrows what coarsening costs; 0.5-5 s per point (benchmarks/results/blanket_lattice_cpu.txt)
LATTICE_AUTO_MAX_N = 1e5


class PairForms(NamedTuple):
    """Sum forms (18.1), one row per form (numpy, eager), categories padded with zero probability.

    w, a0, a1: (F, C) category probabilities (the null one included) and coefficients
      ``c = a0 + a1 t`` (``a0 >= 0 >= a1``); v0, v1: (F, V) victim-only masses
      ``R(x0, y), R(x1, y)`` on messages the reference cannot produce; eps_max: (F,)
      ``max log R(x0,y)/R(x1,y)`` over messages both inputs emit: for a blanket form every ``g <= 0``
      there, so its divergence is exactly ``v_inf``; v_inf: (F,) ``sum v0`` over ``v1 = 0`` (a
      lower bound on the divergence at every ``t``, equal to it at ``eps_max`` for blanket forms);
      pair: (F, 2) ``(x0, x1)``; reference: (F,) ``-1`` for the blanket ``omega``, else the others' common input ``x*``.
    """

    w: np.ndarray
    a0: np.ndarray
    a1: np.ndarray
    v0: np.ndarray
    v1: np.ndarray
    eps_max: np.ndarray
    v_inf: np.ndarray
    pair: np.ndarray
    reference: np.ndarray


def validate_matrix(matrix) -> np.ndarray:
    """A float64 ``K x K'`` row-stochastic matrix (:func:`jaxshuffle.exact.validate_matrix`: a real numeric
    dtype, complex, boolean, object and string arrays refused; rows within 1e-9 of 1, entries finite and
    >= 0) with 2 to ``MAX_INPUTS`` inputs and at most ``MAX_OUTPUTS`` messages; else ValueError naming ``matrix``."""
    from jaxshuffle.exact.enumerate import validate_matrix as validate_stochastic

    require_x64()
    R = validate_stochastic(matrix)
    check(np.array(2 <= R.shape[0] <= MAX_INPUTS), "matrix", f"must have 2 to {MAX_INPUTS} rows (inputs)",
          value=R.shape[0])
    check(np.array(R.shape[1] <= MAX_OUTPUTS), "matrix", f"must have at most {MAX_OUTPUTS} columns (messages)",
          value=R.shape[1])
    return R


#: relative gap below which two coefficients of one form are float noise of one value (:func:`_snap`)
SNAP_REL = 2.0 ** -40


def _snap(v: np.ndarray, upper: bool) -> np.ndarray:
    """``v`` with each run of values within :data:`SNAP_REL` (relative) of its neighbour replaced by the
    run's largest (``upper``) or smallest value.

    A matrix built from a formula has entries whose ratios to the reference agree only up to a few
    ulps (binary RR: ``e^eps0`` as 2.7182818284590455 and 2.718281828459046), which would keep equal
    categories apart (8 instead of 5) and force coarsening. Raising coefficients ``a0``, ``a1`` raises
    ``c = a0 + a1 t`` for every ``t > 0``, and ``E[(sum)_+]`` is nondecreasing in every ``g``
    (docs/math.md 18.3): an upper bound stays one; lowering them keeps a lower bound.
    """
    if v.size < 2:
        return v
    order = np.argsort(v, kind="stable")
    s = v[order]
    starts = np.concatenate([[True], np.abs(np.diff(s)) > SNAP_REL * np.maximum(np.abs(s[1:]), np.abs(s[:-1]))])
    rep = (np.maximum if upper else np.minimum).reduceat(s, np.flatnonzero(starts))
    out = np.empty_like(v)
    out[order] = rep[np.cumsum(starts) - 1]
    return out


def _one_form(R, x0: int, x1: int, ref: np.ndarray, upper: bool):
    """Categories and victim-only masses of (18.1) for ``(x0, x1)`` against reference ``ref`` (numpy);
    coefficients that differ by float noise merged on the side of the bound (``upper``: the blanket
    reference; else a dataset's, :func:`_snap`)."""
    live = ref > 0
    r0, r1, wl = R[x0, live], R[x1, live], ref[live]
    a0, a1 = _snap(r0 / wl, upper), _snap(-(r1 / wl), upper)
    # merge equal coefficient pairs; the null category (prob 1 - sum w, coefficient 0) joins a (0, 0) one
    keys = np.stack([a0, a1], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    w = np.bincount(inv.ravel(), weights=wl, minlength=len(uniq))
    null = max(0.0, 1.0 - float(np.sum(wl)))
    cats = [(float(p), float(u[0]), float(u[1])) for p, u in zip(w, uniq)]
    if null > 0:
        cats.append((null, 0.0, 0.0))
    v0, v1 = R[x0, ~live], R[x1, ~live]
    keep = v0 > 0
    v0, v1 = v0[keep], v1[keep]
    both = (R[x0] > 0) & (R[x1] > 0)
    eps_max = float(np.max(np.log(R[x0, both] / R[x1, both]), initial=0.0))
    v_inf = float(np.sum(v0[v1 == 0]))  # the victim-only term for every t: delta_w(t) >= v_inf
    return cats, v0, v1, max(eps_max, 0.0), v_inf


def pair_forms(matrix, reference: str = "blanket") -> PairForms:
    """The distinct sum forms (18.1) of every ordered pair of inputs (eager numpy).

    ``reference="blanket"``: ``w = omega`` (column minima), one form per ordered pair; the
    largest epsilon among them is a certified upper bound (docs/math.md 18.1).
    ``reference="datasets"``: ``w = R(x*, .)`` for every ``x*`` (the others all hold ``x*``), one form
    per ordered pair and ``x*``: each is the exact divergence of that dataset (lower bounds, 18.4).
    Identical forms (after sorting categories) appear once.
    """
    R = validate_matrix(matrix)
    K = R.shape[0]
    if reference == "blanket":
        refs = [(-1, R.min(axis=0))]
    elif reference == "datasets":
        refs = [(x, R[x]) for x in range(K)]
    else:
        raise ValueError(f"reference: must be 'blanket' or 'datasets', got {reference!r}")
    rows, seen = [], set()
    for xs, ref in refs:
        for x0 in range(K):
            for x1 in range(K):
                if x0 == x1:
                    continue
                cats, v0, v1, eps_max, v_inf = _one_form(R, x0, x1, ref, upper=xs == -1)
                cats = sorted(cats)
                vv = sorted(zip(v0.tolist(), v1.tolist()))
                key = (tuple(cats), tuple(vv))
                if key in seen:
                    continue
                seen.add(key)
                rows.append((cats, vv, eps_max, v_inf, (x0, x1), xs))
    C = max(len(r[0]) for r in rows)
    V = max(1, max(len(r[1]) for r in rows))
    F = len(rows)
    w, a0, a1 = np.zeros((F, C)), np.zeros((F, C)), np.zeros((F, C))
    v0, v1 = np.zeros((F, V)), np.zeros((F, V))
    for i, (cats, vv, *_rest) in enumerate(rows):
        for j, (p, c0, c1) in enumerate(cats):
            w[i, j], a0[i, j], a1[i, j] = p, c0, c1
        for j, (u0, u1) in enumerate(vv):
            v0[i, j], v1[i, j] = u0, u1
    return PairForms(w, a0, a1, v0, v1, np.array([r[2] for r in rows]), np.array([r[3] for r in rows]),
                     np.array([r[4] for r in rows], dtype=np.int64), np.array([r[5] for r in rows], dtype=np.int64))


# ----------------------------------------------------------------------------------------
# One form at one t: coefficients on the safe side, coarsened to the kernel's four categories.


def coefficient_values(a0, a1, t, upper):
    """``a0 + a1 t`` moved by its rounding bound: up where ``upper`` (bool, may be traced) or down."""
    xp = jnp if any(isinstance(x, jax.Array) for x in (t, a0, upper)) else np
    c = a0 + a1 * t
    err = 4.0 * _ULP * (xp.abs(a0) + xp.abs(a1 * t))
    return xp.where(upper, c + err, c - err)


def coarsen(w, c, upper):
    """Four-category :class:`jaxshuffle.blanket.SumForm` (coefficients at one ``t``, ``x1 = 0``) from
    categories ``(w, c)`` (1-D, jnp; zero-probability entries are padding; ``upper`` may be traced).

    A = the largest coefficient, B = the smallest; the rest, sorted, is split into two runs of
    consecutive values; each run's coefficient is its largest (``upper``) or smallest value.
    Since ``E[(sum)_+]`` is nondecreasing in each coefficient, the result is ``>=`` (``upper``) or
    ``<=`` the form's ``E[(sum)_+]``; exact when at most four categories have positive probability.
    The split minimises ``sum_j w_j |c_run - c_j|`` over the ``C - 3`` choices.
    """
    C = w.shape[-1]
    live = w > 0
    iA = jnp.argmax(jnp.where(live, c, -jnp.inf))
    iB = jnp.argmin(jnp.where(live, c, jnp.inf))
    iB = jnp.where(iB == iA, (iA + 1) % C, iB)
    idx = jnp.arange(C)
    rest = (idx != iA) & (idx != iB) & live
    big = jnp.finfo(jnp.float64).max
    key = jnp.where(rest, c, big)
    order = jnp.argsort(key)[: C - 2]  # the rest first (sorted), padding last
    wr = jnp.where(rest[order], w[order], 0.0)
    cr = jnp.where(rest[order], c[order], 0.0)
    m = C - 2
    if m >= 2:
        # run 1 = first s sorted entries (s = 1..m-1), run 2 = the others
        s = jnp.arange(1, m)[:, None]
        pos = jnp.arange(m)[None, :]
        in1 = (pos < s) & (wr[None, :] > 0)
        in2 = (pos >= s) & (wr[None, :] > 0)
        v1 = jnp.where(upper, jnp.max(jnp.where(in1, cr[None, :], -big), axis=1),
                       jnp.min(jnp.where(in1, cr[None, :], big), axis=1))
        v2 = jnp.where(upper, jnp.max(jnp.where(in2, cr[None, :], -big), axis=1),
                       jnp.min(jnp.where(in2, cr[None, :], big), axis=1))
        cost = (jnp.sum(jnp.where(in1, wr[None, :] * jnp.abs(v1[:, None] - cr[None, :]), 0.0), axis=1)
                + jnp.sum(jnp.where(in2, wr[None, :] * jnp.abs(v2[:, None] - cr[None, :]), 0.0), axis=1))
        b = jnp.argmin(cost)
        wC = jnp.sum(jnp.where(in1[b], wr, 0.0))
        wD = jnp.sum(jnp.where(in2[b], wr, 0.0))
        # an empty run takes the other's coefficient (no threshold lines: the kernel's hc = 0)
        cC = jnp.where(wC > 0, v1[b], jnp.where(wD > 0, v2[b], 0.0))
        cD = jnp.where(wD > 0, v2[b], cC)
    elif m == 1:
        wC, wD, cC, cD = wr[0], jnp.zeros(()), cr[0], cr[0]
    else:
        wC, wD, cC, cD = jnp.zeros(()), jnp.zeros(()), jnp.zeros(()), jnp.zeros(())
    wA, wB = w[iA], jnp.where(live[iB], w[iB], 0.0)
    pS = wA + wB
    qS = wC + wD
    pSs, qSs = jnp.where(pS > 0, pS, 1.0), jnp.where(qS > 0, qS, 1.0)
    zero = jnp.zeros(())
    return bl.SumForm(pS, qS, wA / pSs, wB / pSs, jnp.where(qS > 0, wC / qSs, 0.0), jnp.where(qS > 0, wD / qSs, 1.0),
                      c[iA], zero, jnp.where(live[iB], c[iB], 0.0), zero, cC, zero, cD, zero)


_coarsen_batch = jax.jit(jax.vmap(coarsen, in_axes=(0, 0, None)))


def victim_term(v0, v1, t, upper):
    """``sum (v0 - t v1)_+`` moved by its rounding bound (up where ``upper``, which may be traced)."""
    xp = jnp if any(isinstance(x, jax.Array) for x in (t, v0, upper)) else np
    d = v0 - t * v1
    err = 4.0 * _ULP * (v0 + t * v1)
    total = xp.sum(xp.maximum(xp.where(upper, d + err, d - err), 0.0), axis=-1)
    n_terms = v0.shape[-1]
    return xp.where(upper, total * (1.0 + n_terms * _ULP), total * (1.0 - n_terms * _ULP))


def form_divergence(w, a0, a1, v0, v1, n, eps, plan: bl.BlanketPlan, upper):
    """Certified value of (18.1) for one form at ``eps`` (jnp scalars/1-D rows; jittable).

    ``upper`` True (bool, may be traced: one program serves both sides): a value ``>=`` the form's
    divergence (coefficients rounded up, coarsened up, the kernel's band upper end); False: ``<=`` it.
    A point the plan does not cover gives ``inf`` (upper) or ``0`` (lower).
    """
    t = jnp.exp(eps)
    c = coefficient_values(a0, a1, t, upper)
    live = w > 0
    cmax = jnp.max(jnp.where(live, c, -jnp.inf))
    cmin = jnp.min(jnp.where(live, c, jnp.inf))
    f = coarsen(w, c, upper)
    s_lo = bl.window_start(n, f.pS, plan.window)
    d = bl.point_divergence(f, n, eps, s_lo, plan)
    mean = jnp.sum(w * c)
    m_err = (w.shape[-1] + 2) * _ULP * jnp.sum(w * jnp.abs(c))
    kern = jnp.where(cmax <= 0, 0.0, jnp.where(
        cmin >= 0, jnp.where(upper, mean + m_err, jnp.maximum(mean - m_err, 0.0)), jnp.where(upper, d.upper, d.lower)))
    return kern + victim_term(v0, v1, t, upper)


# ----------------------------------------------------------------------------------------
# Planning (eager numpy) and the search.


def _gaussian_eps(forms: PairForms, n, delta, hi) -> np.ndarray:
    """Root of the Gaussian model of each form's divergence on ``[0, hi]`` (heuristic: planning only)."""
    from scipy.special import ndtr

    def meets(eps):
        t = np.exp(eps)[:, None]
        c = forms.a0 + forms.a1 * t
        mu = np.sum(forms.w * c, axis=1)
        sd = np.sqrt(np.maximum(np.sum(forms.w * c * c, axis=1) - mu * mu, 1e-300))
        z = np.sqrt(n) * mu / sd
        gd = mu * ndtr(z) + sd / np.sqrt(n) * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
        return ~(gd + victim_term(forms.v0, forms.v1, t, True) > delta)

    return bisect_fixed(meets, np.zeros(len(forms.w)), hi, steps=60)[1]


def plan_forms(forms: PairForms, n: float, delta: float, block: int = 64, chunk: int = 8):
    """One :class:`jaxshuffle.blanket.BlanketPlan` covering every form up to the eps the search visits,
    and the per-form top of that range ``eps_top`` (numpy). Never affects soundness (docs/math.md 18.5)."""
    from jaxshuffle.plan import plan_windows
    n = float(n)
    b = bl.power_of_two(min(block, max(8, bl.power_of_two(n + 1) // 4)))
    g = _gaussian_eps(forms, n, delta, forms.eps_max)
    eps_top = np.minimum(forms.eps_max, (1.3 + 20.0 / np.sqrt(n)) * g + 1e-4)
    L, lines, step = 2 * b, 4.0, 3.0
    live = forms.w > 0
    for frac in np.linspace(0.0, 1.0, 17):
        t = np.exp(frac * eps_top)[:, None]
        for up in (True, False):
            c = coefficient_values(forms.a0, forms.a1, t, up)
            f = bl.SumForm(*(np.asarray(x) for x in _coarsen_batch(jnp.asarray(forms.w), jnp.asarray(c), up)))
            mixed = (np.max(np.where(live, c, -np.inf), axis=1) > 0) & (np.min(np.where(live, c, np.inf), axis=1) < 0)
            if not mixed.any():
                continue
            f = bl.SumForm(*(x[mixed] for x in f))
            gmax = np.maximum(np.max(np.abs(c[mixed]), axis=1), 1e-300)
            Li, _ = plan_windows(np.full(mixed.sum(), n + 1.0), f.pS, np.maximum(1e-6 * delta / gmax, 1e-300))
            ln, st = bl.plan_geometry(f, n, t[mixed, 0], b)
            L, lines, step = max(L, int(np.max(Li))), max(lines, float(np.max(ln))), max(step, float(np.max(st)))
    window = max(bl.power_of_two(L), 2 * b)
    plan = bl.BlanketPlan(window=window, block=b, lines=bl.power_of_two(max(4.0, np.ceil(lines))),
                          max_step=bl.power_of_two(min(step, n + 3.0)),
                          chunk=int(max(1, min(chunk, window // (2 * b)))))
    return bl.fit_memory(plan, n), eps_top


# ----------------------------------------------------------------------------------------
# Forms with more than four categories: the lattice and FFT refinement (docs/math.md 18.8).


def lattice_divergence(w, a0, a1, v0, v1, n, eps, *, bins: int | None = None) -> float:
    """Certified upper bound on a blanket form's divergence (18.1) at ``eps`` (numpy rows of a
    :class:`PairForms`), for any number of categories: ``t = e^eps`` rounded down (the divergence is
    nonincreasing in ``t``), coefficients rounded up (:func:`coefficient_values`),
    :func:`jaxshuffle.blanket_lattice.lattice_value`, and the victim-only term rounded up."""
    t = math.exp(eps) * (1.0 - 4.0 * la.U)
    c = coefficient_values(np.asarray(a0), np.asarray(a1), t, True)
    value = la.lattice_value(w, c, n, bins=bins or la.default_bins(n)).value
    return (value + float(victim_term(np.asarray(v0), np.asarray(v1), t, True))) * (1.0 + 2.0 * la.U)


def refine_upper(forms: PairForms, ups: np.ndarray, refine: np.ndarray, n, delta, floor: float, *,
                 bins: int | None = None) -> np.ndarray:
    """Blanket forms' certified epsilons (``ups``, from the coarsened search), lowered by
    :func:`jaxshuffle.blanket_lattice.tighten_upper` on :func:`lattice_divergence` where ``refine``
    (the coarsened forms). Only the maximum matters, so the forms go from the largest ``ups`` down,
    none below ``floor`` (a lower bound on the mechanism's epsilon) or below the forms already
    settled; forms with identical rows share one search."""
    ups = np.array(ups, np.float64)
    settled = float(np.max(np.where(refine, floor, ups), initial=floor))
    done: dict = {}
    for f in np.argsort(-ups, kind="stable"):
        if not refine[f] or not np.isfinite(ups[f]) or ups[f] <= settled:
            continue
        live = forms.w[f] > 0
        cats = sorted(zip(forms.w[f][live], forms.a0[f][live], forms.a1[f][live]))
        key = (tuple(cats), tuple(sorted(zip(forms.v0[f], forms.v1[f]))))
        if key not in done:
            row = tuple(np.asarray(x[f]) for x in (forms.w, forms.a0, forms.a1, forms.v0, forms.v1))
            done[key] = la.tighten_upper(lambda e, row=row: lattice_divergence(*row, n, e, bins=bins), delta,
                                         max(floor, settled), float(ups[f]))
        ups[f] = min(ups[f], done[key])
        settled = max(settled, ups[f])
    return ups


#: relative width ``(hi - lo) / hi`` at which a lane's search stops (about what the 32 bisection steps it
#: replaced gave)
SEARCH_RTOL = 1e-9
#: search steps per lane at most (a lane that has not converged keeps its certified end all the same)
SEARCH_MAX_ITER = 64


class _Search(NamedTuple):
    it: jax.Array
    lo: jax.Array
    hi: jax.Array
    g_lo: jax.Array  # log(v / delta) at lo and hi (NaN: not probed): ITP's interpolation, steers probes only
    g_hi: jax.Array
    tol: jax.Array  # ITP's tolerance, budget and truncation constant, set from the bracket of the first probe
    n_max: jax.Array
    kappa: jax.Array


@functools.partial(jax.jit, static_argnames=("plan", "rtol", "max_iter"))
def _brackets(w, a0, a1, v0, v1, eps_max, eps_top, upper, n, delta, *, plan,
              rtol: float = SEARCH_RTOL, max_iter: int = SEARCH_MAX_ITER):
    """Per form (lane): a bracket ``[lo, hi]`` in eps on the certified value of the lane's side.

    ``upper`` lanes: ``hi`` only moves to probes whose certified upper value is ``<= delta`` (at
    ``eps_max`` a blanket form is exactly ``v_inf``, which the caller compares with delta), so ``hi``
    is a certified upper bound on the form's epsilon. Otherwise ``lo`` only moves to probes whose
    certified lower value exceeds ``delta``: a certified lower bound. Where the probes go never
    affects soundness, only the number of steps: the first probe at ``eps_top`` (the plan's range)
    gives ``[0, eps_top]`` or ``[eps_top, eps_max]``; the second is ``0`` in the first case; then ITP
    steps (:func:`jaxshuffle._bisect.itp_step`: regula falsi on ``log(v / delta)`` with bisection's
    worst case) until ``hi - lo <= rtol * hi`` or ``max_iter`` probes. One loop holds the only copy of
    the kernel (three copies compiled three times as long). Returns ``(lo, hi, probes)`` per lane
    (docs/math.md 18.5).
    """
    from jaxshuffle._bisect import KAPPA1, itp_step

    def lane(w, a0, a1, v0, v1, emax, etop, upper):
        def body(st: _Search) -> _Search:
            first = st.it == 0
            x = itp_step(st.lo, st.hi, st.g_lo, st.g_hi, st.tol, st.n_max - st.it, st.kappa)
            x = jnp.where(first, etop, jnp.where((st.it == 1) & (st.lo == 0), 0.0, x))
            v = form_divergence(w, a0, a1, v0, v1, n, x, plan, upper)
            good = jnp.where(upper, v <= delta, ~(v > delta))  # lower lanes: False only where v > delta is certified
            g = jnp.log(jnp.clip(v, 1e-300, 1e300)) - jnp.log(delta)
            lo, hi = jnp.where(good, st.lo, x), jnp.where(good, x, st.hi)
            g_lo, g_hi = jnp.where(good, st.g_lo, g), jnp.where(good, g, st.g_hi)
            # the first probe: [0, eps_top] (0 not probed yet) or [eps_top, eps_max] (eps_max never probed)
            lo, hi = jnp.where(first, jnp.where(good, 0.0, etop), lo), jnp.where(first, jnp.where(good, etop, emax), hi)
            g_lo, g_hi = jnp.where(first & good, jnp.nan, g_lo), jnp.where(first & ~good, jnp.nan, g_hi)
            # ITP's budget from that bracket: tolerance rtol/2 of a scale below the root, n0 = 1, counted
            # from the first ITP step (probe 2 after a probe at 0, else probe 1)
            span0 = hi - lo
            tol = jnp.where(first, 0.5 * rtol * jnp.maximum(lo, 0.5 * hi), st.tol)
            itp_budget = jnp.ceil(jnp.log2(jnp.maximum(span0 / (2.0 * tol), 1.0))) + 1.0
            n_max = jnp.where(first, itp_budget + jnp.where(good, 2.0, 1.0), st.n_max)
            kappa = jnp.where(first, KAPPA1 / jnp.where(span0 > 0, span0, 1.0), st.kappa)
            return _Search(st.it + 1, lo, hi, g_lo, g_hi, tol, n_max, kappa)

        def running(st: _Search):
            return (st.it == 0) | ((st.it < max_iter) & (st.hi - st.lo > rtol * st.hi))

        zero = lane_constant(emax > 0, 0.0, jnp.float64)  # per-lane starting carries (search.lane_constant)
        st = jax.lax.while_loop(running, body, _Search(lane_constant(emax > 0, 0), zero, emax, zero, zero,
                                                       zero, zero, zero))
        return st.lo, st.hi, st.it

    return jax.vmap(lane)(w, a0, a1, v0, v1, eps_max, eps_top, upper)


class MatrixBounds(NamedTuple):
    """Result of :func:`matrix_bounds` (Python floats and the forms behind them).

    upper: certified upper bound on the shuffled mechanism's epsilon at ``delta`` (every dataset of
      the others): the largest certified epsilon over the ordered pairs' blanket forms.
    lower: certified lower bound: the largest certified lower epsilon over the exact datasets
      "every other user holds x*" (every ordered pair, every ``x*``).
    exact_kernel: True when every blanket form had at most four categories (no coarsening).
    worst_pair: ``(x0, x1)`` of the form giving ``upper``.
    lattice: True when the coarsened forms went through the lattice and FFT refinement (docs/math.md
      18.8), which keeps a form's coarsened epsilon wherever it certifies no smaller one.
    status: :class:`~jaxshuffle.search.Status` of the search behind ``upper``: ``CONVERGED`` where the
      form's bracket met its relative width, ``MAX_ITER`` where the iteration cap stopped it (still
      certified, only wider), ``ERROR_LIMITED`` where the lattice refinement gave ``upper`` (its step
      limits the tightness), ``ZERO``, or ``UNBOUNDED`` (``upper = inf``).
    status_lower: the same for the search behind ``lower`` (``ZERO`` where there is none).
    """

    upper: float
    lower: float
    exact_kernel: bool
    worst_pair: tuple
    lattice: bool = False
    status: int = int(Status.CONVERGED)
    status_lower: int = int(Status.ZERO)


def _pad(x: np.ndarray, width: int) -> np.ndarray:
    return np.pad(x, ((0, 0), (0, width - x.shape[1])))


def _lanes(up_forms: PairForms, low_forms: PairForms) -> PairForms:
    """Both sides' forms as one batch of lanes, categories and victim-only columns padded to powers of two."""
    C = bl.power_of_two(max(up_forms.w.shape[1], low_forms.w.shape[1], KERNEL_CATEGORIES))
    V = bl.power_of_two(max(up_forms.v0.shape[1], low_forms.v0.shape[1], 2))  # 1 and 2 columns share a program
    width = dict(w=C, a0=C, a1=C, v0=V, v1=V)
    return PairForms(*(np.concatenate([_pad(a, width[k]), _pad(b, width[k])]) if k in width else np.concatenate([a, b])
                       for k, a, b in zip(PairForms._fields, up_forms, low_forms)))


class MatrixPlan(NamedTuple):
    """One point's planned search of a matrix (:func:`plan_matrix`): its forms and the plan they share.

    up_forms / low_forms: the blanket forms (18.1) and the exact datasets' forms (18.4; none when
      planned with ``lower=False``), run as lanes of one program.
    n, delta: the point (validated).
    plan, eps_top: :func:`plan_forms` of all those lanes.
    """

    up_forms: PairForms
    low_forms: PairForms
    n: float
    delta: float
    plan: bl.BlanketPlan
    eps_top: np.ndarray

    @property
    def cells(self) -> float:
        """The search's cost in cells (:func:`matrix_cells`)."""
        batch = bl.lanes_per_batch(self.plan)
        lanes = -(-(len(self.up_forms.w) + len(self.low_forms.w)) // batch) * batch
        return float(lanes * self.plan.window * (self.plan.lines + 1) * step_factor(self.plan.max_step))


def step_factor(max_step: int) -> float:
    """Cost of a cell relative to a short-step plan's: ``max(1 + max_step / 1024, max_step / 16)``.

    k-RR's kernel pays about a thousandth of a cell per step (:func:`jaxshuffle.blanket.point_cells`);
    the matrix engine's coarsened forms pay far more. Timed warm with an ad hoc script on the 2-core
    CPU, Hadamard response K = 16 at n = 1e3, delta = 1e-6 with the exact datasets' forms: eps0 = 2
    plans max step 1024 and took 180 s for 2.6e5 window x line cells, eps0 = 0.5 max step 8 and 5.8 s
    for 5.3e5 (62x per cell, this factor says 64).
    """
    return max(1.0 + max_step / 1024.0, max_step / 16.0)


def plan_matrix(matrix, n, delta, *, lower: bool = True) -> MatrixPlan:
    """Validate ``(matrix, n, delta)``, build the forms (with the exact datasets' unless ``lower=False``)
    and plan their search: the first half of :func:`matrix_bounds`, whose cost a caller can read
    (``.cells``) before running the second (:func:`search_matrix`). Bad input: ValueError naming the
    parameter; a plan whose single lane exceeds the memory budget:
    :class:`~jaxshuffle.blanket.BlanketMemoryError`."""
    R = validate_matrix(matrix)
    n_np, d_np = np.asarray(n, np.float64), np.asarray(delta, np.float64)
    check((n_np >= 1) & (n_np == np.floor(n_np)) & (n_np <= 1e12), "n", "must be an integer in [1, 1e12]", value=n_np)
    check((d_np > 0) & (d_np < 1), "delta", "must lie in (0, 1)", value=d_np)
    n, delta = float(n_np), float(d_np)
    up = pair_forms(R, "blanket")
    low = pair_forms(R, "datasets") if lower else _no_forms(up)
    plan, eps_top = plan_forms(_lanes(up, low), n, delta)
    return MatrixPlan(up, low, n, delta, plan, eps_top)


def matrix_cells(matrix, n, delta, *, lower: bool = True) -> float:
    """Cost of :func:`matrix_bounds` at one point in cells (numpy; the model behind amplify's cost cap
    :data:`MATRIX_AUTO_MAX_CELLS`): lanes (forms, padded to whole batches) x window counts x
    boundary lines x :func:`step_factor` ``(max_step)`` of the plan. Measured warm on a 2-core CPU
    (``benchmarks/blanket.py`` [3], ``benchmarks/results/blanket_matrix_cpu.txt``): k-RR's 10 x 10
    matrix at n = 1e6, 1.1e6 cells, 5.1 s, about 5 microseconds per cell with 8-15 probes per lane
    (22 s with the 32 bisection steps before). ``lower=False``: the cost of the upper bound alone
    (``matrix_bounds(..., lower=False)``), whose own plan can need far fewer lines than the exact
    datasets' coarsened forms (3-subsets of 10 at n = 1e6: 17 lines against 2049)."""
    return plan_matrix(matrix, n, delta, lower=lower).cells


def _no_forms(forms: PairForms) -> PairForms:
    return PairForms(*(np.asarray(x)[:0] for x in forms))


def form_epsilons(planned: MatrixPlan, plan: bl.BlanketPlan | None = None):
    """Certified epsilons of every form: ``(upper ends of up_forms, lower ends of low_forms)`` (numpy).

    Both sides run as lanes of one program, called on batches of :func:`~jaxshuffle.blanket.lanes_per_batch`
    lanes: the memory budget bounds what one call holds (a vmap over every lane asked XLA for
    31.5 GB for a 6-input subset-selection matrix at n = 1e4), and the program's shape does not
    depend on how many forms a mechanism has. Categories and victim-only columns are padded to
    powers of two, so that similar mechanisms share the program. ``plan`` (default: the planned
    one, :func:`plan_forms`) never affects soundness, only tightness.
    """
    ups, lows, _, _ = _form_search(planned, plan)
    return ups, lows


def _lane_status(value, lo, hi, infinite: int) -> np.ndarray:
    """Status of each lane's search from its bracket (the loop's own stopping rule, ``SEARCH_RTOL``)."""
    done = (hi - lo) <= SEARCH_RTOL * hi * (1.0 + 1e-12)
    st = np.where(done, Status.CONVERGED, Status.MAX_ITER)
    st = np.where(value == 0.0, Status.ZERO, st)
    return np.where(np.isinf(value), infinite, st).astype(np.int8)


def _form_search(planned: MatrixPlan, plan: bl.BlanketPlan | None = None):
    """:func:`form_epsilons` and each form's search status (``(ups, lows, up_status, low_status)``)."""
    up_forms, low_forms, n, delta = planned.up_forms, planned.low_forms, planned.n, planned.delta
    both = _lanes(up_forms, low_forms)
    F, total = len(up_forms.w), len(both.w)
    side = np.arange(total) < F
    plan = plan or planned.plan
    batch = bl.lanes_per_batch(plan)
    fill = np.arange(-(-total // batch) * batch) % total  # padding lanes repeat real ones (results not read)
    args = [np.asarray(x)[fill] for x in (both.w, both.a0, both.a1, both.v0, both.v1, both.eps_max, planned.eps_top,
                                          side)]
    parts = [_brackets(*(jnp.asarray(a[s:s + batch]) for a in args), jnp.float64(n), jnp.float64(delta), plan=plan)
             for s in range(0, fill.size, batch)]
    lo, hi = (np.concatenate([np.asarray(p[i]) for p in parts])[:total] for i in (0, 1))
    # v_inf > delta: the divergence never drops to delta, eps = inf (a blanket form: at most; a dataset: at least)
    ups = np.where(up_forms.v_inf > delta * (1.0 - 8 * _ULP), np.inf, hi[:F])
    lows = np.where(low_forms.v_inf > delta * (1.0 + 8 * _ULP), np.inf, lo[F:])
    up_status = _lane_status(ups, lo[:F], hi[:F], Status.UNBOUNDED)
    low_status = _lane_status(lows, lo[F:], hi[F:], Status.INFINITE)
    return ups, lows, up_status, low_status


def search_matrix(planned: MatrixPlan, *, plan: bl.BlanketPlan | None = None,
                  lattice: bool | None = None) -> MatrixBounds:
    """The second half of :func:`matrix_bounds`: run a :func:`plan_matrix` search (same sides, same values).

    ``lattice``: lower the coarsened blanket forms' epsilons with the lattice and FFT evaluation
    (:func:`refine_upper`, docs/math.md 18.8); None (default) does so where
    some form was coarsened and ``n <= LATTICE_AUTO_MAX_N``.
    """
    ups, lows, up_status, low_status = _form_search(planned, plan)
    up_forms = planned.up_forms
    lower = float(np.max(lows, initial=0.0))
    status_lower = int(low_status[int(np.argmax(lows))]) if lows.size and lower > 0 else int(Status.ZERO)
    coarse = np.sum(up_forms.w > 0, axis=1) > KERNEL_CATEGORIES
    refined = bool(coarse.any() and (planned.n <= LATTICE_AUTO_MAX_N if lattice is None else lattice))
    if refined:
        searched = ups
        ups = refine_upper(up_forms, ups, coarse, planned.n, planned.delta, lower)
        up_status = np.where(ups < searched, np.int8(Status.ERROR_LIMITED), up_status).astype(np.int8)
    i = int(np.argmax(ups))
    return MatrixBounds(float(ups[i]), lower, not coarse.any(), tuple(int(x) for x in up_forms.pair[i]), refined,
                        int(up_status[i]), status_lower)


def search_forms(forms: PairForms, n, delta) -> MatrixBounds:
    """Certified upper epsilon of the largest of the given blanket forms (18.1) at ``(n, delta)``, each a
    dominating bound built elsewhere (the three-count pair of a round with clients sampled,
    :func:`jaxshuffle.accountant.subsampling.three_count_forms`): planned and searched as
    :func:`search_matrix` does a matrix's blanket forms; no lower bound (``lower = 0``)."""
    n, delta = float(n), float(delta)
    plan, eps_top = plan_forms(forms, n, delta)
    return search_matrix(MatrixPlan(forms, _no_forms(forms), n, delta, plan, eps_top))


def matrix_bounds(matrix, n, delta, *, plan: bl.BlanketPlan | None = None, lower: bool = True) -> MatrixBounds:
    """Certified ``[lower, upper]`` on the epsilon of the shuffled mechanism ``matrix`` (docs/math.md 18).

    ``upper`` errs high: every ordered pair's blanket form (18.1) evaluated with coefficients rounded
    up, coarsened up when a form has more than four categories, and the kernel's certified band
    (upper end); the bisection keeps only probes whose certified value is ``<= delta``. ``lower``
    errs low: the exact datasets (every other user holding ``x*``), rounded down, the band's lower
    end, probes whose certified value exceeds ``delta``. ``lower=False``: the blanket forms alone, under
    their own plan, and ``lower = 0`` (no claim). Bad input: ValueError naming the parameter.
    ``search_matrix(plan_matrix(matrix, n, delta, lower=lower), plan=plan)``.
    """
    return search_matrix(plan_matrix(matrix, n, delta, lower=lower), plan=plan)
