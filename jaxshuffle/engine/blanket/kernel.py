"""Certified divergence of the blanket (three-count) sum form, for k-ary RR and its exact lower bounds.

docs/math.md section 10 ("Tight sound bounds for a concrete randomizer: the blanket pair" and "The
blanket engine", where the derivation is). Every quantity below is a
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

The kernel: the sum form (B1) of k-RR and its exact datasets (:func:`krr_sum_form`), and
:func:`point_divergence`, one sum form's certified divergence at one point.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxshuffle import _binomial
from jaxshuffle._config import array_module, as_float64
from jaxshuffle._numerics import FLUSH as _FLUSH
from jaxshuffle._numerics import ULP as _ULP
from jaxshuffle._numerics import materialize
from jaxshuffle._numerics import window_start as _window_start
from jaxshuffle.engine.blanket.walks import log_ratio_walk, outward_walk
from jaxshuffle.engine.two_count.divergence import REL_ERR, REL_TAIL, Divergence


class BlanketPlan(NamedTuple):
    """Static shape of one compiled blanket program (made by :func:`jaxshuffle.blanket.plan.plan_blanket`;
    defined here, where it is consumed, so the kernel imports nothing from the planner).

    window: s counts summed (a multiple of ``2 * block * chunk``; the planner's ladder:
      :func:`jaxshuffle.blanket.plan.window_ladder`).
    block: steps ``s -> s+2`` per anchor (one continued-fraction tail per line and block).
    lines: stretches tracked per block (``lines + 1`` boundary lines).
    max_step: largest integer move of a line per step (larger: the point claims nothing), with ``walk = 0``.
    chunk: blocks evaluated together (memory).
    walk: ``0`` (default): each sum of pmfs between two positions walks up to ``max_step`` log ratios
      (:func:`~jaxshuffle.engine.blanket.walks.log_ratio_walk`). ``S > 0``: it walks ``S`` linear ratios
      each way from the interval's largest term and bounds the rest geometrically
      (:func:`~jaxshuffle.engine.blanket.walks.outward_walk`), so a line may move any distance per step
      (``max_step`` is then unused): the cheaper walk where lines move far more than the binomial's
      spread (large eps0), docs/math.md section 10 ("Recurrences along lines").
    """

    window: int
    block: int
    lines: int
    max_step: int
    chunk: int = 8
    walk: int = 0


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


# ----------------------------------------------------------------------------------------
# Sum forms of k-ary RR.

KINDS = ("blanket", "all_z", "all_x0", "all_x0_mirror")


def krr_sum_form(eps0: ArrayLike, k: ArrayLike, kind: str) -> SumForm:
    """The sum form of k-RR for ``kind`` in :data:`KINDS` (float64, broadcasts; jittable).

    ``blanket``: (B1), an upper bound on every dataset. ``all_z`` (k >= 3), ``all_x0`` and
    ``all_x0_mirror`` (``D(Q||P)`` of the all-x0 dataset): exact divergences of those datasets.
    """
    xp = array_module(eps0, k)  # plain values (the planner): numpy, no small XLA programs
    eps0, k = xp.broadcast_arrays(as_float64(eps0, xp), as_float64(k, xp))
    E0 = xp.exp(eps0)
    em1 = xp.expm1(eps0)
    den = E0 + k - 1.0
    zero, one = xp.zeros_like(E0), xp.ones_like(E0)
    if kind == "blanket":
        pS, qS = 2.0 / den, (em1 + k - 2.0) / den
        pC = xp.clip((k - 2.0) / xp.maximum(em1 + k - 2.0, 1e-300), 0.0, 1.0)
        qC = xp.clip(em1 / xp.maximum(em1 + k - 2.0, 1e-300), 0.0, 1.0)
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


def _pmf(n, x, p, q):
    return jnp.exp(_binomial.log_pmf(n, x, p, q))


def _stacked(fn, *args, p, q):
    """``[fn(*a, p_i, q_i) for a in args]`` as one call of ``fn`` (one copy of it in the program) on the
    arguments broadcast, flattened and concatenated; returns each output split back into one array
    per entry of ``args`` (its broadcast shape)."""
    shapes = [jnp.broadcast_shapes(*(jnp.shape(x) for x in a), jnp.shape(pi), jnp.shape(qi))
              for a, pi, qi in zip(args, p, q)]

    def joined(columns):
        return jnp.concatenate([jnp.broadcast_to(c, sh).reshape(-1) for c, sh in zip(columns, shapes)])

    cols = [joined([a[i] for a in args]) for i in range(len(args[0]))]
    outs = fn(*cols, joined(p), joined(q))
    cuts = np.cumsum([int(np.prod(sh)) for sh in shapes])[:-1]

    def split(o):
        return tuple(part.reshape(sh) for part, sh in zip(jnp.split(o, cuts), shapes))

    return tuple(map(split, outs)) if isinstance(outs, tuple) else split(outs)


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


def chernoff_outside(n, p, lo, hi):
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
    """First s of a window of ``window`` counts around the mean of ``Bin(n, pS)`` (numpy or traced):
    :func:`jaxshuffle._numerics.window_start` with ``trials = n``."""
    return _window_start(n, pS, window)


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
    ``lower = 0``. A line moving more than ``plan.max_step`` per step gives ``[0, inf]`` (unless
    ``plan.walk``: then any move is walked, the walks' remainders charged).

    Size: one traced kernel: the per-block sums (``block``, mapped by ``lax.map``) and the certificate
    assembled after them read the same stored swapped form, geometry ``(g, h0, hs, hc)``, coefficients and
    plan shapes, and every error term a block sums is combined with those below.
    """
    L, B, J, M = plan.window, plan.block, plan.lines, plan.max_step
    nb = L // (2 * B)
    t = jnp.exp(jnp.maximum(eps, 0.0))
    swap0 = materialize(_geometry(f, n, t)[4])
    f = f._replace(pC=jnp.where(swap0, f.qC, f.pC), qC=jnp.where(swap0, f.pC, f.qC),
                   c0=jnp.where(swap0, f.d0, f.c0), c1=jnp.where(swap0, f.d1, f.c1),
                   d0=jnp.where(swap0, f.c0, f.d0), d1=jnp.where(swap0, f.c1, f.d1))
    # Every discrete decision below (C/D swap, thresholds, stretch boundaries) is made once from one
    # stored copy of these numbers: under jit XLA would otherwise re-evaluate them in each fusion, where
    # fused multiply-adds can round differently (jaxshuffle._numerics, docs/math.md 6.1).
    f, t = materialize((f, t))
    g, h0, hs, hc, _ = materialize(_geometry(f, n, t))
    cA, cB, cC, cD = materialize(coefficients(f, t))
    valid = (g > 0) & (n >= 1) & jnp.isfinite(t) & ~jnp.isnan(eps) & (eps >= 0)
    gmax = jnp.maximum(jnp.maximum(jnp.maximum(cA, cB), jnp.maximum(cC, cD)), 0.0)
    lines_mode = (hc > 0) & (f.pC > 0) & (f.pC < 1)
    hcl = jnp.where(lines_mode, hc, 1.0)
    pS, qS, pA, qA, pC, qC = f.pS, f.qS, f.pA, f.qA, f.pC, f.qC
    delta_e = (1.0 - 2.0 * hs) / hcl  # line move per step s -> s+2

    def block(kb):
        """Size: block ``kb``'s sums, whose F and SF line recurrences and per-stretch cells all read one stored
        stretch geometry ``(j, m, jb)`` and one stacked pmf, walk and anchor-tail call each (compile time follows
        program size)."""
        idx = 2 * B * kb + jnp.arange(2)[:, None] + 2 * jnp.arange(B)[None, :]  # (2, B), int
        s = s_lo + idx.astype(jnp.float64)
        N = n - s
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
        # One stored copy of the integer geometry: SF(j) and pmf(j - 1) of a stretch must see the same j.
        j, m, jb = materialize(jax.lax.stop_gradient((j, m, jb)))
        Nl = N[..., None]
        sl = s[..., None]
        m_next = jnp.concatenate([m[:, 1:], m[:, -1:]], axis=1)
        j_next = jnp.concatenate([j[:, 1:], j[:, -1:]], axis=1)
        step_live = (i_step[..., None] < B - 1) & (Nl - 2.0 >= -1.0)
        # The block's binomial pmfs, walks and tails each run as one stacked call: every call site is
        # a copy of Loader's form (or of a loop) in the program, and compile time follows program size
        # (the same elementwise computation as separate calls, up to the last ulp of XLA's vectorised
        # log/exp, which the error terms cover). pmfs: C's level at (N-1, m), (N-2, m), (N, m); A's at
        # (s, j'-1), (s, j'-2), (s-1, j-1), (s, jb); the weights W_s = Bin(n, pS) at s (REL_ERR each).
        pmfs = _stacked(_pmf, (Nl - 1.0, m), (Nl - 2.0, m), (Nl, m), (sl, j_next - 1.0), (sl, j_next - 2.0),
                        (sl - 1.0, j[..., 1:] - 1.0), (sl, jb), (n, s),
                        p=(pC,) * 3 + (pA,) * 4 + (pS,), q=(qC,) * 3 + (qA,) * 4 + (qS,))
        b1, b2, bN, bj1, bj2, pb, b_jb, W = pmfs
        walk_c = (Nl - 2.0, jnp.minimum(m, m_next) + 1.0, jnp.maximum(m, m_next), pC, qC)
        walk_a = (sl, jnp.minimum(j, j_next), jnp.maximum(j, j_next) - 1.0, pA, qA)
        # the outward walk takes any move per step (what it leaves out is charged: wrem, absolute);
        # the log-ratio walk at most M and leaves nothing out
        walk_sum = ((lambda nw, lo, hi, p, q: outward_walk(nw, lo, hi, p, q, plan.walk)) if plan.walk
                    else (lambda nw, lo, hi, p, q: log_ratio_walk(nw, lo, hi, p, q, M)))
        (walk, walkA), (wrel, wrelA), (wrem, wremA) = _stacked(walk_sum, walk_c[:3], walk_a[:3], p=(pC, pA),
                                                               q=(qC, qA))
        (F_anchor, S_anchor), (eF_anchor, eS_anchor) = _stacked(
            _tail_small_side, (N_a[..., None], N_a[..., None] - m[:, :1]), (s_a[..., None], j[:, :1]),
            p=(qC, pA), q=(pC, qA))  # P[C <= m] and P[A >= j] at the anchors
        def chain(anchor, e_anchor, inc, abs_inc, rel, rem):
            """A chain along the block's steps: ``anchor`` plus the increments before each step, and its
            error: the anchor's, the walks' relative error on the absolute increments, the outward walks'
            charged remainders, the running sum's rounding and each step's flushed terms."""
            inc, abs_inc, rem = (jnp.where(step_live, x, 0.0) for x in (inc, abs_inc, rem))
            cum, cum_abs, cum_rem = (jnp.cumsum(x, axis=1) - x for x in (inc, abs_inc, rem))
            err = (e_anchor + rel * cum_abs + cum_rem
                   + (B + 4.0) * _ULP * (anchor + cum_abs) + (M + 4.0) * B * _FLUSH)
            return anchor + cum, err

        # a line moving more than M per step is refused by the log-ratio walk (the outward walk takes any move)
        moves = (jnp.abs(m_next - m) > M) | (jnp.abs(j_next - j) > M)
        overflow = (plan.walk == 0) & jnp.any(step_live & live[..., None] & moves)
        # ---- F_N(m) along each line: anchor + recurrence.
        sgn = jnp.sign(m_next - m)
        known_a, exact_a = _cdf_exact(N_a[..., None], m[:, :1], pC)
        F_anchor = jnp.where(known_a, exact_a, F_anchor)
        eF_anchor = jnp.where(known_a, 0.0, eF_anchor)
        F, eF = chain(F_anchor, eF_anchor, pC * (b1 + b2) + sgn * walk, pC * (b1 + b2) + walk, wrel, wrem)
        known, exact = _cdf_exact(Nl, m, pC)
        F = jnp.clip(jnp.where(known, exact, F), 0.0, 1.0)
        eF = jnp.where(known, 0.0, eF)
        G = Nl * pC * F - pC * (Nl - m) * bN
        eG = Nl * pC * eF + pC * jnp.abs(Nl - m) * bN * REL_ERR + 4.0 * _ULP * (Nl * pC * F + pC * jnp.abs(Nl - m) * bN)
        # ---- SF_s(j) along each stretch.
        sgnA = jnp.sign(j_next - j)
        SF, eSF = chain(S_anchor, eS_anchor, -sgnA * walkA + pA * (1.0 + qA) * bj1 + pA * pA * bj2,
                        walkA + pA * (1.0 + qA) * bj1 + pA * pA * bj2, wrelA, wremA)
        s_known = (j <= 0) | (j > sl)
        SF = jnp.clip(jnp.where(s_known, jnp.where(j <= 0, 1.0, 0.0), SF), 0.0, 1.0)
        eSF = jnp.where(s_known, 0.0, eSF)
        # ---- Per stretch b = 1..J.
        P = F[..., 1:] - F[..., :-1]
        eP = eF[..., 1:] + eF[..., :-1] + 2.0 * _ULP
        P = jnp.maximum(P, 0.0)
        E = G[..., 1:] - G[..., :-1]
        eE = eG[..., 1:] + eG[..., :-1] + 2.0 * _ULP * (jnp.abs(G[..., 1:]) + jnp.abs(G[..., :-1]))
        Sb, eSb = SF[..., 1:], eSF[..., 1:]
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
    outside_s = chernoff_outside(n, pS, s_lo, s_lo + L - 1.0)
    drop = gmax * (outside_s + drop_c * (1.0 + w_rel))
    # Float probabilities: each binomial level's (p, q) has mass (p + q)^m, within exp(+-x) of 1;
    # the normalised float law is within 16u (relative, per category) of the true one, which moves
    # sqrt(D) by at most sqrt(n gmax) 16u / 2 (score bound: |dD| <= sqrt(E[(Z_+/n)^2] n) eps, E[.] <= gmax D).
    x_norm = 1.01 * n * (_mass_excess(pS, qS) + _mass_excess(pA, qA) + _mass_excess(pC, qC)) + 4.0 * _ULP
    c_pert = 0.5 * jnp.sqrt(n * gmax) * 16.0 * _ULP * 1.01
    value = scale * val
    # Rounded coefficients: each computed cX = x0 + x1 t is within coef_rel (|x0| + |x1| t) of the exact
    # one at t = e^eps (exp, the product, the sum, and the form's own fields such as -1/E0, a few ulps
    # each), so (Z)_+ moves by at most sum_X that * count_X and delta by sum_X that * P(X): one charge,
    # which also covers a coefficient that should cancel exactly (1 - t/E0 at t = E0) and does not.
    coef_rel = 16.0 * _ULP
    probs = (f.pS * f.pA, f.pS * f.qA, f.qS * f.pC, f.qS * f.qC)
    coef_err = coef_rel * 1.01 * sum(pr * (jnp.abs(x0) + jnp.abs(x1) * t) for pr, x0, x1 in
                                     zip(probs, (f.a0, f.b0, f.c0, f.d0), (f.a1, f.b1, f.c1, f.d1)))
    lo_f = jnp.maximum(value - err_total - assign_total - coef_err, 0.0) * jnp.exp(-x_norm)
    up_f = (value + err_total + assign_total + drop + coef_err) * jnp.exp(x_norm)
    lower = jnp.maximum(jnp.sqrt(lo_f) - c_pert, 0.0) ** 2
    upper = (jnp.sqrt(up_f) + c_pert) ** 2
    # Tangent value: a lower bound on P(E) - t Q(E) under the true law for the computed region E.
    # With h = Z 1_E / n (|h| <= cabs; negative only on misassigned cells, whose mass is at most
    # assign_total), Cauchy-Schwarz against the float law: |E_true h - E_float h| <= sqrt(E_float[h^2])
    # sqrt(chi^2) with E_float[h^2] <= cabs E_float|h| <= cabs (up_f + 2 assign_total) and
    # chi^2 <= 1.01 n (16u)^2 (n iid users, each within 16u relative): the square-root form of c_pert,
    # about sqrt(delta / cabs) times the linear bound cabs sqrt(n) 16u (docs/math.md, blanket tangent).
    cabs = jnp.maximum(jnp.maximum(jnp.abs(cA), jnp.abs(cB)), jnp.maximum(jnp.abs(cC), jnp.abs(cD)))
    lin_pert = jnp.sqrt(n) * 16.0 * _ULP * 1.01  # sqrt(chi^2) of the float law against the true one
    v_pert = jnp.sqrt(cabs * (up_f + 2.0 * assign_total * jnp.exp(x_norm))) * lin_pert
    tan_v = (value - err_total - coef_err) * jnp.exp(-x_norm * jnp.sign(value - err_total - coef_err)) - v_pert
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
