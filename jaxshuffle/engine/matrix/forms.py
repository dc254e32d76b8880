"""The matrix engine's sum forms: the blanket bound of a general finite mechanism (a ``K x K'`` row-stochastic matrix).

docs/math.md section 11. ``R[x, y]`` is the probability that input ``x`` emits message ``y``;
``n`` users, the victim's input changes from ``x0`` to ``x1`` (replace-one), ``t = e^eps``.

Sum form of an ordered pair against a *reference* law ``w`` on the messages::

    delta_w(t) = (1/n) E[(G_1 + ... + G_n)_+] + sum_{y: w(y) = 0} (R(x0,y) - t R(x1,y))_+,       (11.1)
    G = g_y = (R(x0,y) - t R(x1,y)) / w(y)  with probability w(y),  G = 0 with probability 1 - sum w.

* ``w = omega``, ``omega(y) = min_x R(x, y)`` (the blanket): ``max`` over ordered pairs of (11.1) is a
  certified **upper** bound on the hockey-stick divergence of the shuffled mechanism, for every
  dataset of the other ``n - 1`` users (:func:`matrix_bounds`, ``upper``).
* ``w = R(x*, .)`` (every other user holds ``x*``): (11.1) is the **exact** divergence of that
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
   bound (docs/math.md 11.3). The run split is the one with the least probability-weighted move.
   After the search, :func:`search_matrix` lowers the coarsened blanket forms' epsilons with a lattice
   and an FFT (:mod:`jaxshuffle.blanket_lattice`, docs/math.md 11.8) at ``n <= LATTICE_AUTO_MAX_N``.
3. ``max_j c_j <= 0`` gives 0 and ``min_j c_j >= 0`` gives the mean ``sum_j w_j c_j``, exactly.
4. The victim-only term is added with its rounding bound.

Public API: :class:`MatrixMechanism` (the pytree a :class:`~jaxshuffle.randomizers.VRParams` carries),
Here: the forms of every ordered pair (:func:`pair_forms`) and their certified value at one ``t``
(:func:`form_divergence`; with the lattice, :func:`lattice_divergence`). The search over ``eps`` is
:mod:`jaxshuffle.engine.matrix.search`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import check, require_x64
from jaxshuffle._numerics import ULP as _ULP
from jaxshuffle.engine import blanket as bl
from jaxshuffle.engine.matrix import lattice as la

#: merged categories per form before coarsening (the kernel takes four; more are rounded into four)
KERNEL_CATEGORIES = 4
#: largest number of input rows / message columns a mechanism matrix may have
MAX_INPUTS = 4096
MAX_OUTPUTS = 1 << 20


class PairForms(NamedTuple):
    """Sum forms (11.1), one row per form (numpy, eager), categories padded with zero probability.

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
    (docs/math.md 11.3): an upper bound stays one; lowering them keeps a lower bound.
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
    """Categories and victim-only masses of (11.1) for ``(x0, x1)`` against reference ``ref`` (numpy);
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
    """The distinct sum forms (11.1) of every ordered pair of inputs (eager numpy).

    ``reference="blanket"``: ``w = omega`` (column minima), one form per ordered pair; the
    largest epsilon among them is a certified upper bound (docs/math.md 11.1).
    ``reference="datasets"``: ``w = R(x*, .)`` for every ``x*`` (the others all hold ``x*``), one form
    per ordered pair and ``x*``: each is the exact divergence of that dataset (lower bounds, 11.4).
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


coarsen_batch = jax.jit(jax.vmap(coarsen, in_axes=(0, 0, None)))


def victim_term(v0, v1, t, upper):
    """``sum (v0 - t v1)_+`` moved by its rounding bound (up where ``upper``, which may be traced)."""
    xp = jnp if any(isinstance(x, jax.Array) for x in (t, v0, upper)) else np
    d = v0 - t * v1
    err = 4.0 * _ULP * (v0 + t * v1)
    total = xp.sum(xp.maximum(xp.where(upper, d + err, d - err), 0.0), axis=-1)
    n_terms = v0.shape[-1]
    return xp.where(upper, total * (1.0 + n_terms * _ULP), total * (1.0 - n_terms * _ULP))


def form_divergence(w, a0, a1, v0, v1, n, eps, plan: bl.BlanketPlan, upper):
    """Certified value of (11.1) for one form at ``eps`` (jnp scalars/1-D rows; jittable).

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



def lattice_divergence(w, a0, a1, v0, v1, n, eps, *, bins: int | None = None) -> float:
    """Certified upper bound on a blanket form's divergence (11.1) at ``eps`` (numpy rows of a
    :class:`PairForms`), for any number of categories: ``t = e^eps`` rounded down (the divergence is
    nonincreasing in ``t``), coefficients rounded up (:func:`coefficient_values`),
    :func:`jaxshuffle.blanket_lattice.lattice_value`, and the victim-only term rounded up."""
    t = math.exp(eps) * (1.0 - 4.0 * la.U)
    c = coefficient_values(np.asarray(a0), np.asarray(a1), t, True)
    value = la.lattice_value(w, c, n, bins=bins or la.default_bins(n)).value
    return (value + float(victim_term(np.asarray(v0), np.asarray(v1), t, True))) * (1.0 + 2.0 * la.U)

