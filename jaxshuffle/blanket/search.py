"""Certified divergence of the blanket (three-count) sum form, for k-ary RR and its exact lower bounds.

docs/math.md section "Tight sound bounds for a concrete randomizer: the blanket pair"; the
derivation, in this package's words, is docs/parts/blanket.md. Every quantity below is a
*sum form* ("GPARV"): with counts ``(A, B, C, D) ~ Multinomial(n; pS pA, pS qA, qS pC, qS qC)``
and coefficients affine in ``t = e^eps``,

    delta(t) = (1/n) E[(cA A + cB B + cC C + cD D)_+],    cX = x0 + x1 t.       (sum form)

* k-ary RR, blanket pair (B1): ``E0 = e^eps0``, ``r = 1/(E0+k-1)``, categories x0, x1, "z",
  null with probabilities ``(r, r, (k-2) r, (E0-1) r)`` and coefficients
  ``(E0 - t, 1 - t E0, 1 - t, 0)``. Certified *upper* bound on the shuffled k-RR's delta.
* Exact all-z dataset (k >= 3): ``(E0-t, 1-tE0, (1-t)/E0, 1-t)`` with ``(r, r, E0 r, (k-3) r)``.
* Exact all-x0 dataset: ``(1-t/E0, 1-tE0, 1-t)`` with ``(E0 r, r, (k-2) r)`` and its mirror
  ``(E0-t, 1/E0-t, 1-t)`` with ``(r, E0 r, (k-2) r)``. The two exact datasets' epsilons are
  *lower* bounds on the mechanism's (:func:`blanket_lower_epsilon`).

Evaluation (``s = A+B``, ``N = n-s``, ``A|s ~ Bin(s, pA)``, ``C|s ~ Bin(N, pC)``): with
``g = cA - cB > 0`` the summand is ``g (A - tau(s, c))``, ``tau = h0 + hs s + hc c`` (C and D are
swapped first if needed so that ``hc >= 0``). The smallest counted ``A`` is
``j = floor(tau) + 1``; it is constant on *stretches* of c, bounded by the lines
``e_jb(s) = (jb - h0 - hs s)/hc`` (last c of the stretch ``m = ceil(e) - 1``). Per stretch

    sum_{c in I} b_N(c) E[(A - tau)_+] = SF_s(j) (K_s P_I - hc E_I) + s pA qA b_{s-1}(j-1) P_I,

``K_s = s pA - h0 - hs s``, ``P_I`` = F differences, ``E_I`` = G differences with
``G(m) = E[C; C <= m] = N pC F_N(m) - pC (N-m) b_N(m)``. Stepping ``s -> s+2`` moves a line
``jb -> jb+1`` by a fixed ``Delta e = (1 - 2 hs)/hc`` (``-(E0+1)`` for B1), so along each line

    F_{N-2}(m') = F_N(m) + pC b_{N-1}(m) + pC b_{N-2}(m) +- (pmfs of Bin(N-2, pC) between m, m')
    SF_{s+2}(j') = SF_s(j) -+ (pmfs of Bin(s, pA) between j, j') + pA(1+qA) b_s(j'-1) + pA^2 b_s(j'-2)

and one continued-fraction tail per line and block of ``plan.block`` steps anchors the sums.

Certificate (every term on the safe side): the tested accuracies ``REL_ERR`` (Loader pmf) and
``REL_TAIL`` (continued fraction) of :mod:`jaxshuffle._binomial`, the chain of log ratios of each
walk, the rounding of every sum, the c-mass outside the tracked lines (the computed tails
plus their errors) and the s-mass outside the window (Chernoff) times the largest summand
``max(cX)_+``, the misassignment of a boundary cell by a rounded ``e`` (``|tau - jb| b_s(jb)``),
and the rounding of the category probabilities (``TV <= sqrt(n/2) 16u`` by Pinsker).
``-d delta/dt`` is the Q-mass of the region, from the same sums; it gives the certified tangent
used by the search (``jaxshuffle.divergence.Divergence`` fields).

Public API: :func:`blanket_epsilon` (certified upper bound for shuffled k-RR, or a dataset's
bracket with ``kind=``), :func:`blanket_lower_epsilon` (certified lower bound),
:func:`plan_blanket` and the jittable :func:`blanket_epsilon_with_plan`, :func:`point_divergence`
(one sum form's certified divergence), :func:`krr_sum_form`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxshuffle import _binomial
from jaxshuffle.divergence import REL_ERR, REL_TAIL, Divergence

_ULP = 2.3e-16
_FLUSH = 2.3e-308
_LRR_CAP = 1e4  # log(q/p) is clipped here (p = 0 or q = 0: such tails are exact, never walked)
MIN_WINDOW = 16
#: lanes (point x sum form) searched at once; more lanes run one batch after another (bounded memory)
LANES_PER_BATCH = 8


class SumForm(NamedTuple):
    """Four-category sum form: probabilities and coefficients ``cX = x0 + x1 t`` (scalars or batches).

    ``s = A + B ~ Bin(n, pS)``, ``A | s ~ Bin(s, pA)``, ``C | s ~ Bin(n - s, pC)``, ``D = n - s - C``.
    Complements are given separately (``qS = 1 - pS`` etc.) so that no digit is lost.
    """

    pS: jax.Array
    qS: jax.Array
    pA: jax.Array
    qA: jax.Array
    pC: jax.Array
    qC: jax.Array
    a0: jax.Array
    a1: jax.Array
    b0: jax.Array
    b1: jax.Array
    c0: jax.Array
    c1: jax.Array
    d0: jax.Array
    d1: jax.Array


class BlanketPlan(NamedTuple):
    """Static shape of one compiled blanket program.

    window: s counts summed (a power of two, a multiple of ``2 * block``).
    block: steps ``s -> s+2`` per anchor (one continued-fraction tail per line and block).
    lines: stretches tracked per block (``lines + 1`` boundary lines).
    max_step: largest integer move of a line per step (larger: the point claims nothing).
    chunk: blocks evaluated together (memory).
    """

    window: int
    block: int
    lines: int
    max_step: int
    chunk: int = 8


#: Bytes one lane (one point and sum form) of a compiled blanket search holds per cell of a chunk
#: (``2 * block`` counts times ``lines + 1`` boundary lines, ``chunk`` blocks at once): XLA's own
#: memory analysis of the k-RR and matrix searches on CPU, rounded up
#: (tests/test_blanket.py::test_lane_memory_model_bounds_xla checks that it stays above).
BYTES_PER_CELL = 2400


class BlanketMemoryError(ValueError):
    """A point needs more memory per lane than the budget allows, even one block at a time."""


def lane_bytes(plan: BlanketPlan) -> int:
    """Estimated peak bytes of one lane of a blanket search with ``plan`` (upper estimate)."""
    return BYTES_PER_CELL * plan.chunk * 2 * plan.block * (plan.lines + 1) + 64 * plan.window


def fit_memory(plan: BlanketPlan, n, memory: float | None = None) -> BlanketPlan:
    """``plan`` with ``chunk`` halved until :data:`LANES_PER_BATCH` lanes fit the memory budget (default
    :data:`jaxshuffle.plan.DEFAULT_MEMORY_BYTES`); a smaller chunk costs little time, only memory.

    Raises :class:`BlanketMemoryError` (a ValueError naming ``n``) when one lane alone, one block
    at a time, exceeds the budget: asked of XLA, such a plan would end in an out-of-memory abort.
    """
    from jaxshuffle.plan import memory_budget
    budget = memory_budget(memory)
    while plan.chunk > 1 and LANES_PER_BATCH * lane_bytes(plan) > budget:
        plan = plan._replace(chunk=plan.chunk // 2)
    if lane_bytes(plan) > budget:
        n_max = float(np.max(n))
        raise BlanketMemoryError(
            f"n: the blanket bound at n = {n_max:g} needs about {lane_bytes(plan) / 2**30:.1f} GiB per point "
            f"({plan.lines} lines x {2 * plan.block} counts per block, window {plan.window}), over the memory "
            f"budget of {budget / 2**30:.1f} GiB; use a smaller n, or the worst-case pair's bound")
    return plan


def lanes_per_batch(plan: BlanketPlan, memory: float | None = None) -> int:
    """Lanes searched at once (a power of two, at most :data:`LANES_PER_BATCH`) within the budget."""
    from jaxshuffle.plan import memory_budget
    lanes, budget = LANES_PER_BATCH, memory_budget(memory)
    while lanes > 1 and lanes * lane_bytes(plan) > budget:
        lanes //= 2
    return lanes


# ----------------------------------------------------------------------------------------
# Sum forms of k-ary RR.

KINDS = ("blanket", "all_z", "all_x0", "all_x0_mirror")


def krr_sum_form(eps0: ArrayLike, k: ArrayLike, kind: str) -> SumForm:
    """The sum form of k-RR for ``kind`` in :data:`KINDS` (float64, broadcasts; jittable).

    ``blanket``: (B1), an upper bound on every dataset. ``all_z`` (k >= 3), ``all_x0`` and
    ``all_x0_mirror`` (``D(Q||P)`` of the all-x0 dataset): exact divergences of those datasets.
    """
    eps0, k = jnp.broadcast_arrays(jnp.asarray(eps0, jnp.float64), jnp.asarray(k, jnp.float64))
    E0 = jnp.exp(eps0)
    em1 = jnp.expm1(eps0)
    den = E0 + k - 1.0
    zero, one = jnp.zeros_like(E0), jnp.ones_like(E0)
    if kind == "blanket":
        pS, qS = 2.0 / den, (em1 + k - 2.0) / den
        pC = jnp.clip((k - 2.0) / jnp.maximum(em1 + k - 2.0, 1e-300), 0.0, 1.0)
        qC = jnp.clip(em1 / jnp.maximum(em1 + k - 2.0, 1e-300), 0.0, 1.0)
        return SumForm(pS, qS, 0.5 * one, 0.5 * one, pC, qC, E0, -one, one, -E0, one, -one, zero, zero)
    if kind == "all_z":
        rest = E0 + (k - 3.0)  # >= E0 after rounding, so pC <= 1 (E0 + k - 3.0 could round below E0)
        pS, qS = 2.0 / den, rest / den
        pC = E0 / rest
        qC = (k - 3.0) / rest
        return SumForm(pS, qS, 0.5 * one, 0.5 * one, pC, qC, E0, -one, one, -E0, one / E0, -one / E0, one, -one)
    if kind == "all_x0":
        pS, qS = (E0 + 1.0) / den, (k - 2.0) / den
        pA, qA = E0 / (E0 + 1.0), 1.0 / (E0 + 1.0)
        return SumForm(pS, qS, pA, qA, one, zero, one, -one / E0, one, -E0, one, -one, one, -one)
    if kind == "all_x0_mirror":
        pS, qS = (E0 + 1.0) / den, (k - 2.0) / den
        pA, qA = 1.0 / (E0 + 1.0), E0 / (E0 + 1.0)
        return SumForm(pS, qS, pA, qA, one, zero, E0, -one, one / E0, -one, one, -one, one, -one)
    raise ValueError(f"kind: must be one of {KINDS}, got {kind!r}")


def coded_sum_form(eps0, k, code) -> SumForm:
    """The sum form of kind ``KINDS[code]`` with ``code`` a (traced) integer: one compiled program
    serves every kind, so the upper bound and the exact lower bounds run as lanes of one batch."""
    forms = [krr_sum_form(eps0, k, kind) for kind in KINDS]
    return SumForm(*(jnp.stack(fields)[code] for fields in zip(*forms)))


def coefficients(f: SumForm, t):
    """``(cA, cB, cC, cD)`` at ``t``."""
    return f.a0 + f.a1 * t, f.b0 + f.b1 * t, f.c0 + f.c1 * t, f.d0 + f.d1 * t


def gaussian_delta(f: SumForm, n, t):
    """Gaussian model of the sum form's delta (heuristic: first guesses and planning only)."""
    cA, cB, cC, cD = coefficients(f, t)
    xp = jnp if isinstance(t, jax.Array) else np
    probs = (f.pS * f.pA, f.pS * f.qA, f.qS * f.pC, f.qS * f.qC)
    mu = sum(p * c for p, c in zip(probs, (cA, cB, cC, cD)))
    m2 = sum(p * c * c for p, c in zip(probs, (cA, cB, cC, cD)))
    sd = xp.sqrt(xp.maximum(m2 - mu * mu, 1e-300))
    z = xp.sqrt(n) * mu / sd
    if xp is np:
        from scipy.special import ndtr
        phi = np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
    else:
        ndtr = jax.scipy.special.ndtr
        phi = jnp.exp(-0.5 * z * z) / jnp.sqrt(2 * jnp.pi)
    return (n * mu * ndtr(z) + xp.sqrt(n) * sd * phi) / n


# ----------------------------------------------------------------------------------------
# Small helpers (one point; scalars or arrays inside the kernel).


def _lpmf(n, x, p, q):
    return _binomial.log_pmf(n, x, p, q)


def _pmf(n, x, p, q):
    return jnp.exp(_lpmf(n, x, p, q))


def _walk(nw, lo, hi, p, q, M: int):
    """``sum_{i=lo}^{hi} b(i)`` of ``Bin(nw, p)`` (``hi - lo + 1 <= M``), walking down from ``min(hi, nw)``
    by exact log ratios ``b(i-1)/b(i) = i/(nw-i+1) * q/p``. Returns ``(sum, rel_err)``."""
    top = jnp.minimum(hi, nw)
    count = jnp.maximum(top - lo + 1.0, 0.0)
    lq = jnp.log(jnp.where(q > 0, q, 1.0)) - jnp.log(jnp.where(p > 0, p, 1.0))
    lrr = jnp.where((p > 0) & (q > 0), lq, _LRR_CAP)
    lb = _lpmf(nw, top, p, q)

    def step(o, carry):
        lb, acc = carry
        i = top - o
        acc = acc + jnp.where((o < count) & (i >= 0), jnp.exp(lb), 0.0)
        ok = (i >= 1) & (i <= nw)
        lr = jnp.log(jnp.where(ok, i, 1.0) / jnp.where(ok, nw - i + 1.0, 1.0)) + lrr
        return jnp.where(ok, lb + lr, -jnp.inf), acc

    acc = jax.lax.fori_loop(0, M, step, (lb, jnp.zeros_like(lb)))[1]
    # each ratio: quotient, its log, log(q/p) and the running sum (|log b| <= 746 before a flush)
    rel = M * 4.0 * _ULP * (4.0 + jnp.abs(lrr) + jnp.log(jnp.maximum(nw, 0.0) + 2.0) + 746.0) + REL_ERR
    return acc, rel


@jax.custom_jvp
def _sf_value(n, k, p, q):
    """``P[Bin(n,p) >= k]`` by the continued fraction; custom derivative ``d/dp = k b_n(k)/p`` (along p + q = 1)."""
    return jnp.exp(_binomial.log_sf(n, k, p, q))


@_sf_value.defjvp
def _sf_value_jvp(primals, tangents):
    n, k, p, q = primals
    _, _, dp, dq = tangents
    val = _sf_value(n, k, p, q)
    # n b_{n-1}(k-1) = k b_n(k)/p = (n-k+1) b_n(k-1)/q; the form without 0/0.
    dens = jnp.where(p >= q, k * _pmf(n, k, p, q) / jnp.where(p > 0, p, 1.0),
                     (n - k + 1.0) * _pmf(n, k - 1.0, p, q) / jnp.where(q > 0, q, 1.0))
    dens = jnp.where((k >= 1) & (k <= n), dens, 0.0)
    return val, dens * 0.5 * (dp - dq)


def _tail_small_side(n, k, p, q):
    """``P[Bin(n,p) >= k]`` by the continued fraction, asked for on its small side: ``(sf, abs_err)``."""
    n, k, p, q = jnp.broadcast_arrays(n, k, p, q)
    upper = k > n * p
    kk = jnp.where(upper, k, n - k + 1.0)
    pp, qq = jnp.where(upper, p, q), jnp.where(upper, q, p)
    live = (n >= 0) & (kk >= 1) & (kk <= n)
    small = jnp.where(live, _sf_value(jnp.where(live, n, 2.0), jnp.where(live, kk, 1.0), pp, qq),
                      jnp.where(kk <= 0, 1.0, 0.0))
    sf = jnp.where(upper, small, 1.0 - small)
    return sf, REL_TAIL * small + 2.0 * _ULP


def _mass_excess(p, q):
    """``|p + q - 1|`` exactly (two-sum): the float pair's binomial has mass ``(p + q)^m``."""
    s = p + q
    bb = s - p
    return jnp.abs((s - 1.0) + ((p - (s - bb)) + (q - bb)))


def _cdf_exact(n, m, p):
    """``(known, value)``: where ``P[Bin(n,p) <= m]`` is exactly 0 or 1 (outside the support, p in {0,1})."""
    det = jnp.where(p >= 1.0, n, 0.0)
    deterministic = (p <= 0.0) | (p >= 1.0)
    known = (m < 0) | (m >= n) | deterministic
    value = jnp.where(m < 0, 0.0, jnp.where(m >= n, 1.0, (m >= det).astype(jnp.float64)))
    return known, value


def _chernoff_outside(n, p, lo, hi):
    """Upper bound on ``P[X < lo] + P[X > hi]``, ``X ~ Bin(n, p)`` (Chernoff; exact 0 where the range covers 0..n)."""
    def log_bound(m):
        a = jnp.clip(m / jnp.maximum(n, 1.0), 1e-300, 1.0 - 1e-16)
        pc = jnp.clip(p, 1e-300, 1.0 - 1e-16)
        kl = a * jnp.log(a / pc) + (1.0 - a) * (jnp.log1p(-a) - jnp.log1p(-pc))
        return -n * kl * (1.0 - 1e-10)

    mu = n * p
    below = jnp.where(lo <= 0, 0.0, jnp.where(lo - 1.0 < mu, jnp.exp(log_bound(lo - 1.0)), 1.0))
    above = jnp.where(hi >= n, 0.0, jnp.where(hi + 1.0 > mu, jnp.exp(log_bound(hi + 1.0)), 1.0))
    below = jnp.where((p >= 1.0) & (lo <= n), 0.0, below)
    above = jnp.where((p <= 0.0) & (hi >= 0), 0.0, above)
    return jnp.minimum(below + above, 1.0)


def window_start(n, pS, window):
    """First s of a window of ``window`` counts around the mean of ``Bin(n, pS)`` (numpy or traced)."""
    xp = jnp if isinstance(n, jax.Array) or isinstance(pS, jax.Array) else np
    return xp.clip(xp.floor(n * pS) - window // 2, 0.0, xp.maximum(n + 1.0 - window, 0.0))


# ----------------------------------------------------------------------------------------
# The kernel: one point.


def _geometry(f: SumForm, n, t):
    """Threshold geometry: ``(g, h0, hs, hc, swap)`` with C and D swapped where ``hc`` would be negative."""
    cA, cB, cC, cD = coefficients(f, t)
    g = cA - cB
    gs = jnp.where(g > 0, g, 1.0)
    hc_raw = -(cC - cD) / gs
    swap = hc_raw < 0
    cC, cD = jnp.where(swap, cD, cC), jnp.where(swap, cC, cD)
    h0 = -cD * n / gs
    hs = -(cB - cD) / gs
    hc = -(cC - cD) / gs
    return g, h0, hs, hc, swap


def point_divergence(f: SumForm, n, eps, s_lo, plan: BlanketPlan) -> Divergence:
    """Certified ``delta(e^eps)`` of one sum form (scalars) at ``eps >= 0``; band, Q-mass and tangent.

    ``lower <= delta <= upper``; invalid points (``g <= 0``, ``n < 1``, NaN) get ``upper = inf``,
    ``lower = 0``. A line moving more than ``plan.max_step`` per step gives ``[0, inf]``.
    """
    L, B, J, M = plan.window, plan.block, plan.lines, plan.max_step
    nb = L // (2 * B)
    t = jnp.exp(jnp.maximum(eps, 0.0))
    swap0 = _geometry(f, n, t)[4]
    f = f._replace(pC=jnp.where(swap0, f.qC, f.pC), qC=jnp.where(swap0, f.pC, f.qC),
                   c0=jnp.where(swap0, f.d0, f.c0), c1=jnp.where(swap0, f.d1, f.c1),
                   d0=jnp.where(swap0, f.c0, f.d0), d1=jnp.where(swap0, f.c1, f.d1))
    g, h0, hs, hc, _ = _geometry(f, n, t)
    cA, cB, cC, cD = coefficients(f, t)
    valid = (g > 0) & (n >= 1) & jnp.isfinite(t) & ~jnp.isnan(eps) & (eps >= 0)
    gmax = jnp.maximum(jnp.maximum(jnp.maximum(cA, cB), jnp.maximum(cC, cD)), 0.0)
    lines_mode = (hc > 0) & (f.pC > 0) & (f.pC < 1)
    hcl = jnp.where(lines_mode, hc, 1.0)
    pS, qS, pA, qA, pC, qC = f.pS, f.qS, f.pA, f.qA, f.pC, f.qC
    # Weights W_s = Bin(n, pS) pmf over the window (one Loader pmf per s, REL_ERR each).
    s_all = s_lo + jnp.arange(L, dtype=jnp.float64)
    W_all = jnp.where(s_all <= n, _pmf(n, s_all, pS, qS), 0.0)
    delta_e = (1.0 - 2.0 * hs) / hcl  # line move per step s -> s+2

    def block(kb):
        idx = 2 * B * kb + jnp.arange(2)[:, None] + 2 * jnp.arange(B)[None, :]  # (2, B), int
        s = s_lo + idx.astype(jnp.float64)
        N = n - s
        W = W_all[idx]
        live = (s <= n)
        i_step = jnp.arange(B, dtype=jnp.float64)[None, :]
        s_a, N_a = s[:, :1], N[:, :1]  # anchors (2, 1)
        # Lowest c to cover over the block (anchor coordinates), then the first boundary jb.
        mu_a = N_a * pC
        half = 9.0 * jnp.sqrt(jnp.maximum(N_a, 0.0) * pC * qC) + 10.0
        drift = (B - 1.0) * (delta_e + 2.0 * pC)
        c_need = mu_a - half - jnp.maximum(drift, 0.0)
        J0 = jnp.floor(h0 + hs * s_a + hc * c_need)  # (2, 1)
        b_idx = jnp.arange(J + 1, dtype=jnp.float64)[None, None, :]
        jb = J0[..., None] + b_idx + i_step[..., None]  # (2, B, J+1) boundary j
        e = (jb - h0 - hs * s[..., None]) / hcl
        m_lines = jnp.clip(jnp.ceil(e) - 1.0, -1.0, N[..., None])
        m_nl = jnp.where(b_idx == 0, -1.0, N[..., None])
        m = jnp.where(lines_mode, m_lines, m_nl)
        tau_nl = h0 + hs * s + hc * N * jnp.where(pC >= 1.0, 1.0, 0.0)
        j_nl = jnp.floor(tau_nl) + 1.0
        j = jnp.where(lines_mode, jb, j_nl[..., None])  # stretch b (b >= 1) uses j[..., b]
        # ---- F_N(m) along each line: anchor + recurrence.
        Nl = N[..., None]
        m_next = jnp.concatenate([m[:, 1:], m[:, -1:]], axis=1)
        step_live = (i_step[..., None] < B - 1) & (Nl - 2.0 >= -1.0)
        b1 = _pmf(Nl - 1.0, m, pC, qC)
        b2 = _pmf(Nl - 2.0, m, pC, qC)
        lo_w = jnp.minimum(m, m_next) + 1.0
        hi_w = jnp.maximum(m, m_next)
        walk, wrel = _walk(Nl - 2.0, lo_w, hi_w, pC, qC, M)
        sgn = jnp.sign(m_next - m)
        incF = jnp.where(step_live, pC * (b1 + b2) + sgn * walk, 0.0)
        absF = jnp.where(step_live, pC * (b1 + b2) + walk, 0.0)
        overflow = jnp.any(step_live & live[..., None] & (jnp.abs(m_next - m) > M))
        F_anchor, eF_anchor = _tail_small_side(N_a[..., None], N_a[..., None] - m[:, :1], qC, pC)  # P[C <= m]
        known_a, exact_a = _cdf_exact(N_a[..., None], m[:, :1], pC)
        F_anchor = jnp.where(known_a, exact_a, F_anchor)
        eF_anchor = jnp.where(known_a, 0.0, eF_anchor)
        cum = jnp.cumsum(incF, axis=1) - incF
        cum_abs = jnp.cumsum(absF, axis=1) - absF
        F = F_anchor + cum
        eF = eF_anchor + wrel * cum_abs + (B + 4.0) * _ULP * (F_anchor + cum_abs) + (M + 4.0) * B * _FLUSH
        known, exact = _cdf_exact(Nl, m, pC)
        F = jnp.clip(jnp.where(known, exact, F), 0.0, 1.0)
        eF = jnp.where(known, 0.0, eF)
        bN = _pmf(Nl, m, pC, qC)
        G = Nl * pC * F - pC * (Nl - m) * bN
        eG = Nl * pC * eF + pC * jnp.abs(Nl - m) * bN * REL_ERR + 4.0 * _ULP * (Nl * pC * F + pC * jnp.abs(Nl - m) * bN)
        # ---- SF_s(j) along each stretch.
        sl = s[..., None]
        j_next = jnp.concatenate([j[:, 1:], j[:, -1:]], axis=1)
        lo_a = jnp.minimum(j, j_next)
        hi_a = jnp.maximum(j, j_next) - 1.0
        walkA, wrelA = _walk(sl, lo_a, hi_a, pA, qA, M)
        bj1 = _pmf(sl, j_next - 1.0, pA, qA)
        bj2 = _pmf(sl, j_next - 2.0, pA, qA)
        sgnA = jnp.sign(j_next - j)
        incS = jnp.where(step_live, -sgnA * walkA + pA * (1.0 + qA) * bj1 + pA * pA * bj2, 0.0)
        absS = jnp.where(step_live, walkA + pA * (1.0 + qA) * bj1 + pA * pA * bj2, 0.0)
        overflow = overflow | jnp.any(step_live & live[..., None] & (jnp.abs(j_next - j) > M))
        S_anchor, eS_anchor = _tail_small_side(s_a[..., None], j[:, :1], pA, qA)
        cumS = jnp.cumsum(incS, axis=1) - incS
        cumS_abs = jnp.cumsum(absS, axis=1) - absS
        SF = S_anchor + cumS
        eSF = eS_anchor + wrelA * cumS_abs + (B + 4.0) * _ULP * (S_anchor + cumS_abs) + (M + 4.0) * B * _FLUSH
        s_known = (j <= 0) | (j > sl)
        SF = jnp.clip(jnp.where(s_known, jnp.where(j <= 0, 1.0, 0.0), SF), 0.0, 1.0)
        eSF = jnp.where(s_known, 0.0, eSF)
        # ---- Per stretch b = 1..J.
        P = F[..., 1:] - F[..., :-1]
        eP = eF[..., 1:] + eF[..., :-1] + 2.0 * _ULP
        P = jnp.maximum(P, 0.0)
        E = G[..., 1:] - G[..., :-1]
        eE = eG[..., 1:] + eG[..., :-1] + 2.0 * _ULP * (jnp.abs(G[..., 1:]) + jnp.abs(G[..., :-1]))
        Sb, eSb, jj = SF[..., 1:], eSF[..., 1:], j[..., 1:]
        pb = _pmf(sl - 1.0, jj - 1.0, pA, qA)
        K = sl * pA - h0 - hs * sl
        eK = 8.0 * _ULP * (sl * pA + jnp.abs(h0) + jnp.abs(hs * sl))
        X = K * P - hc * E
        eX = jnp.abs(K) * eP + eK * P + jnp.abs(hc) * eE + 4.0 * _ULP * (jnp.abs(K) * P + jnp.abs(hc * E))
        v2 = sl * pA * qA * pb * P
        cell = Sb * X + v2
        e_cell = (eSb * jnp.abs(X) + Sb * eX + sl * pA * qA * (pb * REL_ERR * P + pb * eP)
                  + 8.0 * _ULP * (jnp.abs(Sb * X) + v2))
        # Q-mass: -(1/n) E[dZ/dt; region] per stretch.
        da, db, dc, dd = f.a1, f.b1, f.c1, f.d1
        EA = sl * pA * (Sb * P + qA * pb * P)
        qcell = -((da - db) * EA + Sb * ((db * sl + dd * Nl) * P + (dc - dd) * E))
        e_q = (jnp.abs(da - db) * sl * pA * (eSb * P + Sb * eP + qA * pb * (REL_ERR * P + eP))
               + eSb * jnp.abs((db * sl + dd * Nl) * P + (dc - dd) * E)
               + Sb * (jnp.abs(db * sl + dd * Nl) * eP + jnp.abs(dc - dd) * eE)
               + 8.0 * _ULP * (jnp.abs(da - db) * EA + Sb * (jnp.abs(db * sl + dd * Nl) * P + jnp.abs((dc - dd) * E))))
        # Boundary cells a rounded e may misassign (|tau - jb| <= tau_err there).
        tau_err = 16.0 * _ULP * (jnp.abs(jb) + jnp.abs(h0) + jnp.abs(hs * sl) + hc * jnp.abs(e) + 1.0)
        b_jb = _pmf(sl, jb, pA, qA)
        assign = jnp.where(lines_mode, jnp.sum(tau_err * b_jb, axis=-1), 0.0)
        # c-mass outside the lines: below line 0 and above line J.
        drop_c = (F[..., 0] + eF[..., 0]) + (1.0 - F[..., -1] + eF[..., -1])
        Wl = jnp.where(live, W, 0.0)
        val = jnp.sum(Wl * jnp.sum(cell, axis=-1))
        abs_val = jnp.sum(Wl * jnp.sum(jnp.abs(Sb * X) + v2, axis=-1))
        err = jnp.sum(Wl * jnp.sum(e_cell, axis=-1))
        q = jnp.sum(Wl * jnp.sum(qcell, axis=-1))
        eq = jnp.sum(Wl * jnp.sum(e_q, axis=-1))
        abs_q = jnp.sum(Wl * jnp.sum(jnp.abs(qcell), axis=-1))
        return (val, abs_val, err, q, eq, abs_q, jnp.sum(Wl * assign), jnp.sum(Wl * drop_c), overflow)

    out = jax.lax.map(block, jnp.arange(nb), batch_size=min(plan.chunk, nb))
    val, abs_val, err, q, eq, abs_q, assign, drop_c, overflow = (jnp.sum(x) if x.dtype != bool else jnp.any(x)
                                                                for x in out)
    scale = g / n
    w_rel = REL_ERR + 4.0 * _ULP
    n_terms = L * (J + 1) + 8.0
    err_total = scale * (err + (w_rel + n_terms * _ULP) * abs_val) + 8.0 * _ULP * scale * abs_val
    assign_total = scale * assign
    q_mass = q / n
    q_err = (eq + (w_rel + n_terms * _ULP) * abs_q) / n + 8.0 * _ULP * abs_q / n
    outside_s = _chernoff_outside(n, pS, s_lo, s_lo + L - 1.0)
    drop = gmax * (outside_s + drop_c * (1.0 + w_rel))
    # Float probabilities: each binomial level's (p, q) has mass (p + q)^m, within exp(+-x) of 1;
    # the normalised float law is within 16u (relative, per category) of the true one, which moves
    # sqrt(D) by at most sqrt(n gmax) 16u / 2 (score bound: |dD| <= sqrt(E[(Z_+/n)^2] n) eps, E[.] <= gmax D).
    x_norm = 1.01 * n * (_mass_excess(pS, qS) + _mass_excess(pA, qA) + _mass_excess(pC, qC)) + 4.0 * _ULP
    c_pert = 0.5 * jnp.sqrt(n * gmax) * 16.0 * _ULP * 1.01
    value = scale * val
    lo_f = jnp.maximum(value - err_total - assign_total, 0.0) * jnp.exp(-x_norm)
    up_f = (value + err_total + assign_total + drop) * jnp.exp(x_norm)
    lower = jnp.maximum(jnp.sqrt(lo_f) - c_pert, 0.0) ** 2
    upper = (jnp.sqrt(up_f) + c_pert) ** 2
    cmax1 = jnp.maximum(jnp.maximum(jnp.abs(f.a0 + f.a1), jnp.abs(f.b0 + f.b1)),
                        jnp.maximum(jnp.abs(f.c0 + f.c1), jnp.abs(f.d0 + f.d1)))
    lin_pert = jnp.sqrt(n) * 16.0 * _ULP * 1.01  # |E_true[h] - E_float[h]| <= sup|h| sqrt(n) eps
    tan_v = (value - err_total) * jnp.exp(-x_norm * jnp.sign(value - err_total)) - jnp.maximum(cmax1, gmax) * lin_pert
    slope_pert = jnp.maximum(jnp.maximum(jnp.abs(f.a1), jnp.abs(f.b1)), jnp.maximum(jnp.abs(f.c1), jnp.abs(f.d1)))
    tan_s = (q_mass - q_err) * jnp.exp(-x_norm) - slope_pert * lin_pert
    bad = ~valid
    lower = jnp.where(overflow | bad, 0.0, lower)
    upper = jnp.where(overflow | bad, jnp.inf, upper)
    tan_ok = valid & ~overflow
    return Divergence(
        value=jnp.where(bad, jnp.inf, value),
        lower=lower,
        upper=upper,
        q_mass=jnp.where(bad, 0.0, q_mass),
        step_overflow=overflow & valid,
        tangent_value=jnp.where(tan_ok, tan_v, 0.0),
        tangent_slope=jnp.where(tan_ok, jnp.maximum(tan_s, 0.0), 0.0),
    )


# ----------------------------------------------------------------------------------------
# Planning (eager numpy) and the search.


def plan_geometry(f: SumForm, n, t, block: int):
    """Lines and largest line move per step that the kernel needs for sum form ``f`` at ``t`` (numpy).

    ``f`` holds numpy arrays; used by every planner of :func:`point_divergence` (k-RR here, general
    matrices in :mod:`jaxshuffle.blanket_matrix`). Returns ``(lines, max_step)`` arrays.
    """
    cA, cB, cC, cD = (np.asarray(x) for x in coefficients(f, t))
    g = np.maximum(cA - cB, 1e-300)
    hc = np.abs(cC - cD) / g
    swap = (cC - cD) > 0
    pC = np.where(swap, f.qC, f.pC)
    cDs = np.where(swap, cC, cD)
    hs = -(cB - cDs) / g
    with np.errstate(divide="ignore", invalid="ignore"):
        de = np.where(hc > 0, np.abs(1.0 - 2.0 * hs) / np.where(hc > 0, hc, 1.0), 0.0)
    half = 9.0 * np.sqrt(n * np.clip(pC * (1 - pC), 0.0, None)) + 10.0
    need = hc * (2.0 * half + 2.0 + (block - 1.0) * (de + 2.0)) + 4.0
    lines = np.minimum(need, hc * (n + 2.0 + (block - 1.0) * (de + 2.0)) + 4.0)
    step = np.maximum(np.ceil(de) + 3.0, np.ceil(2.0 * np.abs(hs)) + 3.0)
    return lines, step


def _plan_numbers(eps0, k, n, delta, kind: str, block: int):
    """Per point: s-window length, lines and max step needed up to the planned eps (numpy)."""
    f = krr_sum_form(np.asarray(eps0, np.float64), np.asarray(k, np.float64), kind)
    f = SumForm(*(np.asarray(x) for x in f))
    E0 = np.exp(eps0)
    # The Gaussian model's root, bisected on [0, eps0]: where the search will look.
    lo, hi = np.zeros_like(eps0), np.asarray(eps0, np.float64).copy()
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        above = gaussian_delta(f, n, np.exp(mid)) > delta
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    eps_hi = np.minimum(eps0, (1.3 + 20.0 / np.sqrt(n)) * hi + 1e-4)  # the model is good to a few % at large n
    tol = np.maximum(1e-6 * delta / np.maximum(E0, 1.0), 1e-300)
    from jaxshuffle.plan import plan_windows
    L, _ = plan_windows(n + 1.0, f.pS, tol)
    L = np.maximum(L, 2 * block)
    lines = np.zeros(np.shape(n))
    step = np.zeros(np.shape(n))
    for frac in np.linspace(0.0, 1.0, 17):
        ln, st = plan_geometry(f, n, np.exp(frac * eps_hi), block)
        lines, step = np.maximum(lines, ln), np.maximum(step, st)
    return L, np.ceil(lines), np.minimum(step, n + 3.0), hi


def _pow2(x) -> int:
    return int(2 ** int(np.ceil(np.log2(max(float(x), 1.0)))))


def plan_blanket(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, *, kind: str = "blanket",
                 block: int = 64, chunk: int = 8) -> BlanketPlan:
    """One :class:`BlanketPlan` covering every point of ``(eps0, k, n, delta)`` (eager, concrete values).

    A plan never affects soundness: a point it does not cover (a larger eps, n or k) gets
    a wider band (the c-mass outside the tracked lines is charged) or no claim (a line moving
    more than ``max_step``). Pass it to the ``*_with_plan`` functions inside ``jit``.
    """
    eps0, k, n, delta = _check(eps0, k, n, delta, kind)
    b = _pow2(min(block, max(8, _pow2(np.max(n) + 1) // 4)))
    L, lines, step, _ = _plan_numbers(eps0, k, n, delta, kind, b)
    window = max(_pow2(np.max(L)), 2 * b)
    return fit_memory(BlanketPlan(window=window, block=b, lines=int(max(4, 4 * np.ceil(np.max(lines) / 4))),
                                  max_step=int(np.max(step)), chunk=int(max(1, min(chunk, window // (2 * b))))), n)


def _check(eps0, k, n, delta, kind):
    from jaxshuffle._config import check, require_x64
    require_x64()
    if kind not in KINDS:
        raise ValueError(f"kind: must be one of {KINDS}, got {kind!r}")
    eps0, k, n, delta = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (eps0, k, n, delta)))
    check(np.isfinite(eps0) & (eps0 >= 0) & (eps0 <= 50), "eps0", "must be finite, >= 0 and <= 50", value=eps0)
    kmin = 3 if kind == "all_z" else 2
    check((k >= kmin) & (k == np.floor(k)) & (k < 1e12), "k", f"must be an integer >= {kmin}", value=k)
    check((n >= 1) & (n == np.floor(n)) & (n <= 1e12), "n", "must be an integer in [1, 1e12]", value=n)
    check((delta > 0) & (delta < 1), "delta", "must lie in (0, 1)", value=delta)
    return eps0, k, n, delta


class _Search(NamedTuple):
    it: jax.Array
    lo: jax.Array
    hi: jax.Array
    x: jax.Array
    status: jax.Array
    done: jax.Array
    n_amb: jax.Array
    tried_zero: jax.Array


def _point_search(eps0, k, n, delta, code, *, plan: BlanketPlan, rtol: float, max_iter: int):
    """Certified bracket for one point of sum form ``KINDS[code]``: ``D(lower) > delta >= D(upper)``
    from bands and tangents."""
    from jaxshuffle.search import Status
    kmin = jnp.where(code == KINDS.index("all_z"), 3.0, 2.0)
    valid = ((eps0 >= 0) & jnp.isfinite(eps0) & (k >= kmin) & (k == jnp.floor(k)) & (n >= 1)
             & (n == jnp.floor(n)) & (delta > 0) & (delta < 1))
    eps0 = jnp.where(valid, eps0, 1.0)
    k, n, delta = jnp.where(valid, k, 3.0), jnp.where(valid, n, 2.0), jnp.where(valid, delta, 0.5)
    trivial = eps0 == 0  # the randomizer ignores its input: delta = 0 at every eps
    eps0s = jnp.where(trivial, 1.0, eps0)
    f = coded_sum_form(eps0s, k, code)
    s_lo = window_start(n, f.pS, plan.window)
    div = functools.partial(point_divergence, f, n, s_lo=s_lo, plan=plan)
    # The Gaussian model's root as first point.
    def gaussian_bisection(_, bracket):
        lo_g, hi_g = bracket
        mid = 0.5 * (lo_g + hi_g)
        above = gaussian_delta(f, n, jnp.exp(mid)) > delta
        return jnp.where(above, mid, lo_g), jnp.where(above, hi_g, mid)

    # a loop, not 50 unrolled copies: the unrolled form was a large share of the program's compile time
    lo_g, hi_g = jax.lax.fori_loop(0, 50, gaussian_bisection, (jnp.zeros(()), eps0s))
    x0 = jnp.clip(hi_g, 1e-9, eps0s)
    st0 = jnp.where(valid & ~trivial, Status.MAX_ITER, jnp.where(trivial & valid, Status.ZERO, Status.INVALID))
    state = _Search(jnp.asarray(0), jnp.zeros(()), eps0s, x0, st0.astype(jnp.int8), ~valid | trivial,
                    jnp.asarray(0), jnp.asarray(False))

    def body(st: _Search) -> _Search:
        d = div(st.x)
        x, lo, hi = st.x, st.lo, st.hi
        is_hi, is_lo = d.upper <= delta, d.lower > delta
        lo = jnp.where(is_lo, jnp.maximum(lo, x), lo)
        hi = jnp.where(is_hi, jnp.minimum(hi, x), hi)
        # Convexity in t: the certified tangent is above delta up to t_cross.
        t = jnp.exp(x)
        sl = d.tangent_slope
        t_cross = (t - (delta - d.tangent_value) / jnp.where(sl > 0, sl, 1.0)) * (1.0 - 1e-14)
        lo_tan = jnp.log(jnp.maximum(t_cross, 1.0)) * (1.0 - 1e-14)
        use = (sl > 0) & (d.tangent_value < delta) & (t_cross > 1.0) & (lo_tan > lo) & (lo_tan < hi)
        lo = jnp.where(use, lo_tan, lo)
        # Newton on D(t) (convex, decreasing), aimed a margin above the root.
        margin = 0.25 * rtol * hi
        t_new = t + (d.value - delta) / jnp.maximum(d.q_mass, 1e-300)
        newton = jnp.log(jnp.maximum(t_new, 1e-300)) + 2.0 * margin
        ok = (d.q_mass > 0) & jnp.isfinite(newton) & (newton > lo) & (newton < hi)
        nxt = jnp.where(ok, jnp.clip(newton, lo + margin, hi - margin), 0.5 * (lo + hi))
        amb = ~is_hi & ~is_lo & (x > 0)
        n_amb = st.n_amb + amb.astype(jnp.int32)
        step = jnp.maximum(margin, 2.0 * (d.upper - d.lower) / jnp.maximum(t * d.q_mass, 1e-300))
        probe = jnp.where(hi - x > 1.5 * step, x + step, jnp.maximum(x - step, 0.5 * (lo + x)))
        nxt = jnp.where(amb, probe, nxt)
        to_zero = (lo == 0) & ~st.tried_zero & (newton <= 0.25 * x) & ~amb
        nxt = jnp.where(to_zero, 0.0, nxt)
        zero = (x == 0) & is_hi
        conv = hi - lo <= rtol * hi
        limited = n_amb >= 4
        new_status = jnp.where(zero, Status.ZERO, jnp.where(conv, Status.CONVERGED, jnp.where(
            limited, Status.ERROR_LIMITED, Status.MAX_ITER))).astype(jnp.int8)
        stop = zero | conv | limited
        keep = st.done
        return _Search(st.it + 1, jnp.where(keep, st.lo, lo), jnp.where(keep, st.hi, hi),
                       jnp.where(keep, st.x, nxt), jnp.where(keep, st.status, new_status), keep | stop,
                       n_amb, st.tried_zero | (x == 0))

    st = jax.lax.while_loop(lambda s: (s.it < max_iter) & ~s.done, body, state)
    zero = st.status == jnp.int8(Status.ZERO)
    lower = jnp.where(valid, jnp.where(zero, 0.0, st.lo), 0.0)
    upper = jnp.where(valid, jnp.where(zero, 0.0, st.hi), jnp.inf)
    return lower, upper, st.status, st.it


@functools.partial(jax.jit, static_argnames=("plan", "rtol", "max_iter", "gradients"))
def _coded_brackets(eps0, k, n, delta, code, *, plan: BlanketPlan, rtol: float, max_iter: int,
                    gradients: bool = True):
    """Certified brackets over flat lanes, lane ``i`` of sum form ``KINDS[code[i]]`` (one program for
    every kind). Invalid lanes: status INVALID, ``lower = 0``, ``upper = inf``. With ``gradients``,
    ``upper`` has implicit gradients in ``eps0`` and ``delta`` (``jax.lax.custom_root`` on
    ``log D(eps) = log delta``); without, the same values from a program about half the size (the
    root equation is a second copy of the kernel, traced and linearised on every call).
    """
    from jaxshuffle.search import EpsilonBracket, Status
    search = functools.partial(_point_search, plan=plan, rtol=rtol, max_iter=max_iter)
    sg = jax.lax.stop_gradient
    # lanes run a few at a time (vmapped inside a batch, sequential across batches, as many as the
    # memory budget allows: lanes_per_batch): one vmap over a large batch grew memory with the batch
    # (64 k-RR points: 9 GB)
    lower, upper, status, it = jax.lax.map(lambda a: search(*a), (sg(eps0), sg(k), sg(n), sg(delta), code),
                                           batch_size=lanes_per_batch(plan))
    if not gradients:
        return EpsilonBracket(lower, upper, status, it)
    diff = ((status == jnp.int8(Status.CONVERGED)) | (status == jnp.int8(Status.MAX_ITER))
            | (status == jnp.int8(Status.ERROR_LIMITED)))

    def root_eq(eps):
        def one(e, a, kk, nn, dd, cc):
            a = jnp.where(a > 0, a, 1.0)
            f = coded_sum_form(a, kk, cc)
            d = point_divergence(f, nn, e, window_start(sg(nn), sg(f.pS), plan.window), plan)
            return jnp.log(jnp.maximum(d.value, 1e-320)) - jnp.log(dd)
        return jnp.where(diff, jax.vmap(one)(eps, eps0, k, n, delta, code), 0.0)

    root = jax.lax.custom_root(root_eq, jnp.where(diff, upper, 1.0), solve=lambda _, x: x,
                               tangent_solve=lambda g, y: y / jnp.where(diff, g(jnp.ones_like(y)), 1.0))
    upper = jnp.where(diff, root, upper)
    return EpsilonBracket(lower, upper, status, it)


def blanket_epsilon_with_plan(eps0, k, n, delta, *, plan: BlanketPlan, kind: str = "blanket",
                              rtol: float = 1e-6, max_iter: int = 40):
    """Jittable certified bracket over flat float64 arrays ``eps0, k, n, delta`` (shape (P,)).

    ``kind="blanket"``: ``upper`` is a certified upper bound on the shuffled k-RR's epsilon.
    Other kinds (exact datasets): ``lower`` is a certified lower bound on that dataset's
    epsilon (and so on the mechanism's). Invalid points: status INVALID, ``lower = 0``,
    ``upper = inf``. ``upper`` has implicit gradients in ``eps0`` and ``delta``.
    """
    if kind not in KINDS:
        raise ValueError(f"kind: must be one of {KINDS}, got {kind!r}")
    code = jnp.full(jnp.shape(eps0), KINDS.index(kind), dtype=jnp.int32)
    return _coded_brackets(eps0, k, n, delta, code, plan=plan, rtol=rtol, max_iter=max_iter)


def eager_brackets(eps0, k, n, delta, code, *, plan: BlanketPlan, rtol: float = 1e-6, max_iter: int = 40):
    """:func:`_coded_brackets` for eager callers (concrete flat arrays; lane ``i`` of sum form
    ``KINDS[code[i]]``): the same values, from the program without the implicit-gradient root (no
    caller here differentiates), run as an exported program (:mod:`jaxshuffle._programs`), so a
    warm process loads it instead of tracing the search."""
    from jaxshuffle import _programs
    from jaxshuffle.search import EpsilonBracket

    def lanes(e, kk, nn, d, c):
        return tuple(_coded_brackets(e, kk, nn, d, c, plan=plan, rtol=rtol, max_iter=max_iter, gradients=False))

    args = [np.asarray(x, np.float64) for x in (eps0, k, n, delta)] + [np.asarray(code, np.int32)]
    return EpsilonBracket(*_programs.run("blanket-lanes", lanes, (plan, rtol, max_iter), args))



def blanket_epsilon(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, *, kind: str = "blanket",
                    rtol: float = 1e-6, plan: BlanketPlan | None = None,
                    max_iter: int = 40):
    """Certified epsilon bracket of the k-RR sum form ``kind`` for ``n`` users at ``delta``.

    Returns :class:`jaxshuffle.search.EpsilonBracket` (broadcast shape of the inputs).
    ``kind="blanket"`` (default): ``upper`` is a certified upper bound on the epsilon of the
    shuffled k-ary randomized response (every dataset of the others), ``lower`` certifies that
    the blanket bound itself cannot go lower. Bad input raises ValueError naming the parameter.

    Example::

        >>> import jaxshuffle.blanket as bl
        >>> float(bl.blanket_epsilon(1.0, 3, 2, 0.01).upper)  # doctest: +ELLIPSIS
        0.96940...
    """
    e, kk, nn, d = _check(eps0, k, n, delta, kind)
    plan = plan or plan_blanket(e, kk, nn, d, kind=kind)
    code = np.full(e.size, KINDS.index(kind), np.int32)
    res = eager_brackets(e.ravel(), kk.ravel(), nn.ravel(), d.ravel(), code, plan=plan, rtol=rtol, max_iter=max_iter)
    return type(res)(*(x.reshape(e.shape) for x in res))


class KaryRRBounds(NamedTuple):
    """Both sides for shuffled k-ary RR (:func:`krr_bounds`), arrays of the points' shape.

    upper: certified upper bound on the shuffled k-RR's epsilon (the blanket pair's bracket, upper end).
    lower: certified lower bound: the largest certified lower end over the exact all-z (k >= 3),
      all-x0 and mirrored all-x0 datasets of the others.
    status: search status of ``upper``; status_lower: that of the dataset giving ``lower``.
    """

    upper: jax.Array
    lower: jax.Array
    status: jax.Array
    status_lower: jax.Array


_LOWER_KINDS = ("all_x0", "all_x0_mirror", "all_z")


def _merged_plan(e, kk, nn, d, kinds, block: int = 64, chunk: int = 8) -> BlanketPlan:
    """One plan covering the sum forms ``kinds`` of every point (all_z only where k >= 3)."""
    has_z = kk >= 3
    plans = [plan_blanket(e[sel], kk[sel], nn[sel], d[sel], kind=kind, block=block, chunk=chunk)
             for kind in kinds for sel in [has_z if kind == "all_z" else np.ones_like(has_z)] if np.any(sel)]
    # lines and max_step snapped up to powers of two: calls at nearby points (a calibration's
    # probes) share one compiled program; a larger plan only costs time, never soundness
    return fit_memory(BlanketPlan(window=max(p.window for p in plans), block=plans[0].block,
                                  lines=_pow2(max(p.lines for p in plans)),
                                  max_step=_pow2(max(p.max_step for p in plans)),
                                  chunk=min(p.chunk for p in plans)), nn)


def _kind_lanes(points, kinds, plan: BlanketPlan, rtol: float, max_iter: int):
    """Brackets of every point (``points``: validated numpy ``eps0, k, n, delta`` of one shape) for each
    sum form of ``kinds``, as one batch: arrays (len(kinds), P).

    all_z needs k >= 3: for k = 2 its lane repeats all_x0 (same value, so never the larger one)."""
    P = points[1].size
    has_z = points[1].ravel() >= 3
    codes = np.concatenate([np.where(has_z, KINDS.index("all_z"), KINDS.index("all_x0")) if kind == "all_z"
                            else np.full(P, KINDS.index(kind)) for kind in kinds])
    res = eager_brackets(*(np.tile(x.ravel(), len(kinds)) for x in points), codes, plan=plan, rtol=rtol,
                         max_iter=max_iter)
    return type(res)(*(x.reshape(len(kinds), P) for x in res))


def plan_krr_bounds(eps0, k, n, delta, *, block: int = 64, chunk: int = 8) -> BlanketPlan:
    """One plan covering the blanket pair and the exact datasets of every point (eager), for
    :func:`krr_bounds`."""
    e, kk, nn, d = _check(eps0, k, n, delta, "blanket")
    return _merged_plan(e, kk, nn, d, ("blanket",) + _LOWER_KINDS, block, chunk)


def krr_bounds(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, *, rtol: float = 1e-6,
               plan: BlanketPlan | None = None, max_iter: int = 40) -> KaryRRBounds:
    """Certified upper (blanket pair) and lower (exact datasets) bounds for shuffled k-ary RR.

    One compiled program evaluates the four sum forms of every point as lanes of one batch
    (docs/math.md section 7). ``upper`` errs high and ``lower`` errs low, each by at most the
    certified band of its search (``rtol``). Bad input raises ValueError naming the parameter.
    """
    e, kk, nn, d = points = _check(eps0, k, n, delta, "blanket")
    shape = e.shape
    plan = plan or plan_krr_bounds(e, kk, nn, d)
    res = _kind_lanes(points, ("blanket",) + _LOWER_KINDS, plan, rtol, max_iter)
    lows, st_lows = res.lower[1:], res.status[1:]
    best = jnp.argmax(lows, axis=0)
    status_lower = jnp.take_along_axis(st_lows, best[None], axis=0)[0]
    return KaryRRBounds(res.upper[0].reshape(shape), jnp.max(lows, axis=0).reshape(shape),
                        res.status[0].reshape(shape), status_lower.reshape(shape))


def blanket_lower_epsilon(eps0: ArrayLike, k: ArrayLike, n: ArrayLike, delta: ArrayLike, *, rtol: float = 1e-6):
    """Certified *lower* bound on the shuffled k-RR's epsilon: the largest certified lower end of
    the exact all-z (k >= 3) and all-x0 (both directions) datasets' epsilons.

    Returns :class:`jaxshuffle.search.EpsilonBracket` whose ``lower`` is the certified value (errs
    low: each dataset's bracket moves its lower end only where its divergence band's lower side
    exceeds delta) and whose ``upper`` is the largest of the datasets' upper ends (an estimate).
    """
    from jaxshuffle.search import EpsilonBracket
    e, kk, nn, d = points = _check(eps0, k, n, delta, "blanket")
    shape = e.shape
    res = _kind_lanes(points, _LOWER_KINDS, _merged_plan(e, kk, nn, d, _LOWER_KINDS), rtol, 40)
    return EpsilonBracket(*(jnp.max(x, axis=0).reshape(shape) for x in (res.lower, res.upper, res.status)),
                          res.iterations[0].reshape(shape))
