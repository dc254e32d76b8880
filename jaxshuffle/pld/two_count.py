"""Privacy-loss distribution (PLD) of one shuffled round, from a certified two-count pair.

A pair ``(P, Q)`` with ``w = 0`` (:mod:`jaxshuffle.pair`) *dominates* the shuffled mechanism: the
mechanism's outputs on neighbouring datasets are one post-processing of ``P`` and ``Q``
(docs/math.md section 12.1), so for every ``eps`` and every number of (adaptively chosen) rounds
the composed mechanism's hockey-stick divergence is at most the composed pair's. Composition
therefore runs on the pair's privacy-loss distribution: the law of ``L = log P(o)/Q(o)`` for
``o ~ P`` (plus the mass where ``Q(o) = 0``, at ``+inf``).

Cells. Given the others' count ``c = a + b - 1 ~ Bin(n-1, r0+r1)`` (the victim's marker is never
``(0,0)`` when ``w = 0``), the others' ``(1,0)`` count is ``k ~ Bin(c, q)``, ``q = r0/(r0+r1)``,
and ``a = k + 1`` if the victim sent ``(1,0)`` (prob ``u`` under P), ``a = k`` otherwise::

    P(c, a) = W_c [u B_c(a-1) + v B_c(a)],   Q(c, a) = W_c [v B_c(a-1) + u B_c(a)]
    L(c, a) = log(u rho + v) - log(v rho + u),   rho = B_c(a-1)/B_c(a) = a (1-q) / ((c+1-a) q)

(``W_c = P[Bin(n-1, r0+r1) = c]``, ``B_c(k) = P[Bin(c, q) = k]``; docs/math.md section 12.2.)
The loss is bounded by ``|log(u/v)|``: a pair with ``v > 0`` has no infinite loss.

Two discretisations on the grid ``loss = j * discretization`` (docs/math.md section 12.3):

* **pessimistic** (an upper bound for every composition): each cell's loss rounded *up* (after
  adding its float error), each mass multiplied by ``1 + mass_rel`` (every relative error of the
  pmfs, the products and the histogram's sums), and the mass outside the evaluated cells (a
  Chernoff bound for the others' count window and for each row's ``k`` window) put at ``+inf``;
* **optimistic** (a lower bound on the pair's composed divergence): losses rounded *down*, masses
  multiplied by ``1 - mass_rel``, the mass outside the cells dropped.

Rounding a loss up is a coupling ``L' >= L`` under ``P``, and ``delta(eps) = E_P[(1 - e^{eps-L})_+]``
is non-decreasing in every loss and every mass, also after summing independent rounds; so the
pessimistic PLD's composition bounds the pair's from above, and the optimistic one from below.

Only pairs with ``w == 0`` are accepted: the paper's Theorem 4.7 pair with ``w > 0`` is not an
upper bound even for one round (docs/math.md section 3), so it is never composed.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle import _binomial
from jaxshuffle._config import check, concrete, f64, moved_names
from jaxshuffle._numerics import ULP as _ULP
from jaxshuffle._numerics import quarter_octave
from jaxshuffle.engine.two_count.divergence import REL_ERR, chernoff_outside, window_weights
from jaxshuffle.engine.two_count.pair import TwoCountPair, check_fields
from jaxshuffle.engine.two_count.plan import MAX_WINDOW, Plan, needed_halfwidth, plan_windows, window_start
from jaxshuffle.pld import distribution
from jaxshuffle.pld.distribution import MIN_DISCRETIZATION, DiscretePLD, RoundPLD, default_discretization
from jaxshuffle.randomizers.clone import certified_worst_case_pair

# Absolute error of one computed loss (a handful of logs of numbers below e^800); far below any grid.
LOSS_ERR = 1e-11
#: Default P-mass of one round left outside the evaluated cells (Chernoff), which goes to +inf in the
#: pessimistic PLD. Not :data:`jaxshuffle.pld.composition.WRAP_TAIL`: that one is the composed mass
#: outside the FFT window, charged to delta after composing.
CELL_TAIL = 1e-16
DEFAULT_TAIL = CELL_TAIL  # the former name
#: Largest round whose PLD :func:`round_pld` builds cell by cell by default (about half a second of
#: CPU); a symmetric pair with more cells (``n`` above about 3e5) is connected from its profile.
MAX_CELLS = 1 << 24
# Cells per chunk of the histogram loop (bounds memory: about 100 bytes per cell).
CHUNK_CELLS = 1 << 21
# A grid larger than this is refused (memory), with the smallest discretization that fits.
MAX_BINS = 1 << 26
# Least histogram length: rounds on shorter grids share one program (its extra zero bins are trimmed).
MIN_BINS = 1 << 15


class _Probabilities(NamedTuple):
    """The four probabilities of one direction of a ``w = 0`` pair (module docstring): the victim's
    ``u``, ``v`` and each other user's ``r0``, ``r1`` (floats to plan, float64 arrays to trace)."""

    u: Any
    v: Any
    r0: Any
    r1: Any


class _CellPlan(NamedTuple):
    window: int  # others' counts c evaluated (plan_windows)
    row: int  # k window per row (A); a takes A + 1 values
    bins: int  # histogram length (power of two)
    rows_per_chunk: int


def _loss(u, v, c, a, q):
    """``L(c, a)`` of the module docstring, with ``log rho`` clipped to +-1000 (L saturates there)."""
    log_rho = (jnp.log(jnp.maximum(a, 0.0)) + jnp.log1p(-q) - jnp.log(jnp.maximum(c + 1.0 - a, 0.0)) - jnp.log(q))
    log_rho = jnp.clip(log_rho, -1000.0, 1000.0)
    return jnp.logaddexp(jnp.log(u) + log_rho, jnp.log(v)) - jnp.logaddexp(jnp.log(v) + log_rho, jnp.log(u))


def _cell_windows(r0: float, r1: float, n: float, tail: float, *, ladder: bool = False) -> tuple[int, int, int]:
    """``(L, c_lo, A)``: the others' counts evaluated (``L`` from ``c_lo``) and each row's ``k`` window ``A``;
    the round has ``L (A + 1)`` cells. ``ladder``: ``L`` and ``A`` rounded up to the programs' sizes (a
    quarter octave of their units, :func:`~jaxshuffle._numerics.quarter_octave`), else to their units alone."""
    s = r0 + r1
    size = quarter_octave if ladder else (lambda units: max(int(units), 1))
    # Others' counts: a window of C ~ Bin(n-1, s) leaving out at most tail/2 (Chernoff), a multiple
    # of 512 long (window_weights' blocks); on the ladder a quarter octave of them, not a power of two
    # (every row costs a full k window, so up to 25 % more cells, not up to twice).
    half = float(needed_halfwidth(np.float64(n - 1), np.float64(min(s, 1 - 1e-16)), np.float64(tail / 4)))
    L = int(min(2 * half + 2, n))
    L = 512 * size(-(-L // 512))
    if L > MAX_WINDOW:
        plan_windows(np.asarray([n], np.float64), np.asarray([s]), tail / 2)  # raises the engine's n message
    c_lo = int(window_start(np.float64(n), np.float64(s), L))
    q = r0 / s
    c_hi = min(c_lo + L - 1, n - 1)
    h = float(needed_halfwidth(np.float64(max(c_hi, 1)), np.float64(min(max(q, 1e-300), 1 - 1e-16)),
                                np.float64(tail / 2)))
    A = 16 * size(-(-int(min(2 * h + 2, c_hi + 2)) // 16))
    return L, c_lo, A


def _plan_cells(pair_np: _Probabilities, n: float, discretization: float,
                tail: float) -> tuple[Plan, int, _CellPlan, int]:
    u, v, r0, r1 = pair_np
    L, c_lo, A = _cell_windows(r0, r1, n, tail, ladder=True)
    q = r0 / (r0 + r1)
    # Loss range: L(c, a) is monotone in a, so its extremes over a row are at the row's ends.
    c = c_lo + np.arange(L, dtype=np.float64)
    c = c[c <= n - 1]
    k_lo = _row_start(c, q, A, np)
    ends = np.concatenate([k_lo, k_lo + A])
    cc = np.concatenate([c, c])
    ends = np.minimum(ends, cc + 1)
    with np.errstate(divide="ignore"):
        lr = np.clip(np.log(ends) + np.log1p(-q) - np.log(cc + 1 - ends) - np.log(q), -1000, 1000)
    lo_u, lo_v = math.log(u), math.log(v)
    loss = np.logaddexp(lo_u + lr, lo_v) - np.logaddexp(lo_v + lr, lo_u)
    j_min = math.floor((loss.min() - LOSS_ERR) / discretization) - 1
    j_max = math.ceil((loss.max() + LOSS_ERR) / discretization) + 1
    bins = j_max - j_min + 1
    if bins > MAX_BINS:
        raise ValueError(f"discretization: {discretization:.3g} needs {bins} bins for this round, more than "
                         f"{MAX_BINS}; use at least {(loss.max() - loss.min()) / (MAX_BINS - 8):.3g}")
    bins = int(2 ** math.ceil(math.log2(max(bins, MIN_BINS))))
    rows = 1 << int(math.floor(math.log2(max(1, min(512, CHUNK_CELLS // (A + 1))))))  # divides L
    plan = Plan(window=L, block=512, max_step=1, symmetric=bool(r0 == r1), linear=True)
    return plan, c_lo, _CellPlan(L, A, bins, rows), j_min


def _row_start(c, q, A: int, xp):
    """First ``k`` of row ``c``'s window of ``A`` counts, centred on ``c q``."""
    return xp.clip(xp.floor(c * q) - A // 2, 0, xp.maximum(c + 1 - A, 0))


@functools.partial(jax.jit, static_argnames=("plan", "cells"))
def _histograms(pair: _Probabilities, n, c_lo, j_min, discretization, *, plan: Plan, cells: _CellPlan):
    """Pessimistic and optimistic histograms of ``PLD(P||Q)`` over the evaluated cells, the bound on
    the mass outside them, and the number of cells (for the summation error)."""
    u, v, r0, r1 = pair
    W, w_rel = window_weights(n, r0, r1, c_lo, plan)
    s = r0 + r1
    q = r0 / s
    A, R = cells.row, cells.rows_per_chunk
    chunks = cells.window // R
    c_all = (c_lo + jnp.arange(cells.window, dtype=jnp.float64)).reshape(chunks, R)
    W = W.reshape(chunks, R)
    log_u, log_v = jnp.log(u), jnp.log(v)
    lq, lq_c = jnp.log(q), jnp.log1p(-q)

    def chunk(carry, xs):
        hist_up, hist_lo, outside, row_err = carry
        c, Wc = xs
        cc = c[:, None]
        k_lo = _row_start(cc, q, A, jnp)
        # Steps s_k = log B_c(k+1)/B_c(k) for k = k_lo - 1 .. k_lo + A - 1 (exact zeros past c: -inf).
        k_step = k_lo - 1.0 + jnp.arange(A + 1, dtype=jnp.float64)[None, :]
        log_quot = jnp.log(jnp.maximum(cc - k_step, 0.0) / jnp.maximum(k_step + 1.0, 0.0))
        step = log_quot + (lq - lq_c)
        # log B_c(k) on the row's window by prefix sums from one Loader anchor at the mode.
        prefix = jnp.concatenate([jnp.zeros_like(cc), jnp.cumsum(step[:, 1:A], axis=1)], axis=1)
        i_anchor = jnp.clip(jnp.floor((cc + 1.0) * q), k_lo, k_lo + A - 1.0) - k_lo
        anchor = _binomial.log_pmf(cc, k_lo + i_anchor, q, 1.0 - q)
        lb = anchor + prefix - jnp.take_along_axis(prefix, i_anchor.astype(jnp.int32), axis=1)
        # a = k_lo .. k_lo + A; log rho_a = log B(a-1) - log B(a) = -s_{a-1} (the true ratio, also at the edges)
        log_rho = jnp.clip(-step, -1000.0, 1000.0)
        t1 = jnp.logaddexp(log_u + log_rho, log_v)  # log(u rho + v)
        t2 = jnp.logaddexp(log_v + log_rho, log_u)  # log(v rho + u)
        loss = t1 - t2
        # P(c, a) = W_c [u B(a-1) + v B(a)] with B restricted to the row's window:
        # log(u B(a-1) + v B(a)) = log B(a) + t1, or log u + log B(a-1) where B(a) = 0 (a = c + 1)
        inner = jnp.where(jnp.isfinite(lb[:, 1:]), lb[:, 1:] + t1[:, 1:A], log_u + lb[:, :-1])
        log_mass = jnp.concatenate([log_v + lb[:, :1], inner, log_u + lb[:, -1:]], axis=1)
        mass = jnp.exp(jnp.log(Wc)[:, None] + log_mass)
        mass = jnp.where((Wc[:, None] > 0) & jnp.isfinite(log_mass), mass, 0.0)
        # Empty cells (past n - 1, k > c) may carry any loss: send them past the end (dropped).
        j_up = jnp.where(mass > 0, jnp.ceil((loss + LOSS_ERR) / discretization) - j_min, cells.bins)
        j_lo = jnp.where(mass > 0, jnp.floor((loss - LOSS_ERR) / discretization) - j_min, cells.bins)
        hist_up = hist_up.at[j_up.astype(jnp.int32).ravel()].add(mass.ravel(), mode="drop")
        hist_lo = hist_lo.at[j_lo.astype(jnp.int32).ravel()].add(mass.ravel(), mode="drop")
        # Relative error of log B along the row (as window_weights): each step's rounding, and the prefix sums'.
        finite = jnp.isfinite(step[:, 1:A]) & (Wc[:, None] > 0)
        abs_step = jnp.where(finite, jnp.abs(step[:, 1:A]), 0.0)
        step_err = jnp.where(finite, 4.0 * _ULP * (2.0 + jnp.abs(log_quot[:, 1:A]) + jnp.abs(lq) + jnp.abs(lq_c)), 0.0)
        err = jnp.sum(step_err, axis=1) + (A + 4) * _ULP * jnp.sum(abs_step, axis=1)
        row_err = jnp.maximum(row_err, jnp.max(err))
        # P-mass of the row outside its k window (Chernoff).
        row_out = chernoff_outside(c + 1.0, q, k_lo[:, 0], jnp.float64(A))
        outside = outside + jnp.sum(Wc * jnp.minimum(row_out, 1.0))
        return (hist_up, hist_lo, outside, row_err), None

    zeros = jnp.zeros(cells.bins, jnp.float64)
    init = (zeros, zeros, jnp.float64(0.0), jnp.float64(0.0))
    (hist_up, hist_lo, outside, row_err), _ = jax.lax.scan(chunk, init, (c_all, W))
    outside = outside * (1.0 + w_rel) + chernoff_outside(n, s, c_lo, jnp.float64(cells.window))
    return hist_up, hist_lo, outside, w_rel + jnp.expm1(row_err)


def _one_direction(u: float, v: float, r0: float, r1: float, n: float, discretization: float,
                   tail: float) -> tuple[DiscretePLD, DiscretePLD]:
    plan, c_lo, cells, j_min = _plan_cells(_Probabilities(u, v, r0, r1), n, discretization, tail)
    hist_up, hist_lo, outside, w_rel = _histograms(
        _Probabilities(f64(u), f64(v), f64(r0), f64(r1)), f64(n), f64(c_lo), f64(j_min), f64(discretization),
        plan=plan, cells=cells)
    hist_up, hist_lo = np.asarray(hist_up), np.asarray(hist_lo)
    n_cells = cells.window * (cells.row + 1)
    # Relative error of one cell's mass: W and the rows' prefix sums (w_rel), Loader's anchor
    # (REL_ERR), exp/logaddexp/product roundings; then every bin's sum of at most n_cells
    # positive terms (n_cells u).
    mass_rel = float(w_rel) + 2 * REL_ERR + 16 * _ULP + n_cells * _ULP
    # Cells whose mass underflowed to 0 (below 2.3e-308 each) also go to +inf.
    infinity = (float(outside) + n_cells * 2.3e-308) * (1 + 1e-6)
    upper = DiscretePLD(hist_up * (1 + mass_rel), j_min, discretization, min(infinity, 1.0), True)
    lower = DiscretePLD(hist_lo * max(0.0, 1 - mass_rel), j_min, discretization, 0.0, False)
    return _trim(upper), _trim(lower)


def _trim(pld: DiscretePLD) -> DiscretePLD:
    """Drop the zero bins at both ends (the planned histogram is a power of two long)."""
    nz = np.flatnonzero(pld.probs)
    if nz.size == 0:
        return pld._replace(probs=np.zeros(1))
    return pld._replace(probs=np.ascontiguousarray(pld.probs[nz[0]:nz[-1] + 1]),
                        lower_index=pld.lower_index + int(nz[0]))


def round_pld(pair: TwoCountPair, n, *, discretization: float | None = None, rounds: int = 1,
              tail: float = CELL_TAIL, method: str = "auto") -> RoundPLD:
    """Privacy-loss distributions of one round of a scalar two-count pair, from its cells or its profile.

    Two constructions, each certified (pessimistic side: composes to upper bounds):

    * ``"cells"``: every cell ``(c, a)`` of the pair enumerated (docs/math.md sections 12.2-12.3),
      giving the pessimistic *and* the optimistic PLD. Costs ``window x row`` cells, growing as ``n``
      (6e7 at ``n = 1e6``, 5.7e9 at ``n = 1e8``).
    * ``"profile"``: the pessimistic PLD connected from the pair's certified privacy profile at
      about 576 eps (:func:`~jaxshuffle.pld.profile.two_count_round`, docs/math.md 12.8), each
      ``O(window)``; symmetric pairs (``r0 == r1``, every worst-case pair) only; no optimistic side.
    * ``"auto"`` (default): cells up to :data:`MAX_CELLS` cells, the profile beyond (cells for an
      asymmetric pair).

    Args:
      pair: a scalar :class:`~jaxshuffle.pair.TwoCountPair` with ``w == 0`` and ``u, v > 0``
        (e.g. :func:`~jaxshuffle.pair.stronger_clone_pair`, or the worst-case variation-ratio pair).
      n: number of users (the pair's ``n``: the others are ``n - 1``), an integer >= 2.
      discretization: grid spacing of the losses; default :func:`default_discretization` for
        ``rounds`` rounds.
      rounds: the number of compositions the grid is chosen for (only used for the default grid).
      tail: P-mass left outside the evaluated cells (moved to ``+inf`` in the pessimistic PLD), in
        (0, 1e-3); cells only.
      method: ``"auto"``, ``"cells"`` or ``"profile"`` (above).

    Returns:
      The round, a :class:`RoundPLD`. Its pessimistic side composes to certified upper bounds (errs high) when
        the pair is an upper pair (``pair.bound == "upper"``); the optimistic side (cells only, else None)
        bounds the *pair's* composed divergence from below (a lower bound for the mechanism only for a
        lower pair).

    Raises:
      ValueError: naming the parameter for bad input, and for ``w > 0`` (not a dominating pair).
    """
    if pair.shape != ():
        raise ValueError(f"pair: round_pld takes one scalar pair, got shape {pair.shape}")
    u, v, w, r0, r1 = (float(concrete(x, "round_pld")) for x in pair.arrays())
    check_fields(*(np.float64(x) for x in (u, v, w, r0, r1)))
    if w != 0.0:
        raise ValueError(f"pair: w must be 0 for composition (a pair with w = {w:.3g} > 0 does not dominate the "
                         "shuffled mechanism, docs/math.md section 3)")
    check(np.float64(min(u, v)) > 0, "pair", "needs u > 0 and v > 0 (finite eps0)", value=np.float64(min(u, v)))
    check(np.float64(r0) > 0, "pair.r0", "must be > 0 (no blanket: no amplification to account)", value=np.float64(r0))
    check(np.float64(r1) > 0, "pair.r1", "must be > 0 (no blanket: no amplification to account)", value=np.float64(r1))
    n_np = np.float64(concrete(f64(n), "round_pld"))
    check(np.isfinite(n_np) & (n_np >= 2) & (n_np == np.floor(n_np)), "n", "must be a finite integer >= 2", value=n_np)
    check(np.float64(rounds) >= 1, "rounds", "must be >= 1", value=np.float64(rounds))
    check((np.float64(tail) > 0) & (np.float64(tail) < 1e-3), "tail", "must lie in (0, 1e-3)", value=np.float64(tail))
    if discretization is None:
        discretization = default_discretization(pair, n_np, int(rounds))
    check(np.float64(discretization) >= MIN_DISCRETIZATION, "discretization",
          f"must be at least {MIN_DISCRETIZATION}", value=np.float64(discretization))
    if method not in ("auto", "cells", "profile"):
        raise ValueError(f"method: must be 'auto', 'cells' or 'profile', got {method!r}")
    symmetric = r0 == r1
    if method == "profile" and not symmetric:
        raise ValueError(f"method: 'profile' needs a symmetric pair (r0 == r1), got r0 = {r0:.6g}, r1 = {r1:.6g}")
    if method == "auto":
        window, _, row = _cell_windows(r0, r1, float(n_np), float(tail))
        method = "profile" if symmetric and window * (row + 1) > MAX_CELLS else "cells"
    if method == "profile":
        from jaxshuffle.pld.profile import two_count_round

        r = two_count_round(pair, float(n_np), float(discretization))
        return r._replace(certified=pair.bound == "upper")
    up_f, lo_f = _one_direction(u, v, r0, r1, float(n_np), float(discretization), float(tail))
    if r0 == r1:  # symmetric: PLD(Q||P) = PLD(P||Q) (swap a <-> c + 1 - a)
        up_b, lo_b = up_f, lo_f
    else:  # Q is P with u and v swapped
        up_b, lo_b = _one_direction(v, u, r0, r1, float(n_np), float(discretization), float(tail))
    return RoundPLD(up_f, up_b, lo_f, lo_b, certified=pair.bound == "upper", source=pair.source,
                    max_loss=abs(math.log(u / v)))


def shuffled_round(randomizer, n, *, discretization: float | None = None, rounds: int = 1,
                   tail: float = CELL_TAIL, sample_rate: float = 1.0, method: str = "auto") -> RoundPLD:
    """The certified round PLD of ``n`` users running ``randomizer`` through a shuffler.

    A certified pair dominates the shuffled mechanism at every eps, over any number of rounds:
    docs/math.md section 12.1.

    Args:
      randomizer: a scalar :class:`~jaxshuffle.randomizers.VRParams` (e.g. ``R.grr(1.0, 10)``;
        its certified pair is the worst-case variation-ratio pair ``vr_pair(p, (p-1)/(p+1), q)``
        with ``n_blanket(n) + 1`` users, as in :func:`~jaxshuffle.amplify`; the clone constant proven
        for it, docs/math.md 3.1), or a :class:`~jaxshuffle.pair.TwoCountPair` used as is.
      n: number of users, a finite integer >= 1 (>= 2 for a ``TwoCountPair``, as :func:`round_pld`).
      discretization: grid spacing of the losses, as :func:`round_pld`.
      rounds: the number of compositions the default grid is chosen for, as :func:`round_pld`.
      tail: P-mass left outside the evaluated cells, as :func:`round_pld`.
      sample_rate: the probability ``g`` in (0, 1] that each user takes part (Poisson client
        sampling; ``n`` counts every user). At ``g < 1`` no two-count pair is an upper bound
        (docs/math.md 12.10): the round is k-ary RR's blanket pair at the real ``k'``
        (:func:`~jaxshuffle.pld.blanket.blanket_round` with ``sample_rate``), or for any other
        single-message randomizer its three-count pair
        (:func:`~jaxshuffle.pld.blanket.three_count_round`); ``tail`` does not apply;
        multi-message randomizers and a ``TwoCountPair`` are refused.
      method: how the full round's pair PLD is built: ``"auto"``, ``"cells"`` or ``"profile"``, as
        :func:`round_pld` (``"cells"`` for its optimistic side or a finite :func:`rdp` at large ``n``).

    Returns:
      The round's :class:`RoundPLD` (``certified`` for a ``VRParams``; a ``TwoCountPair`` as :func:`round_pld`
        says): its pessimistic side composes to certified upper bounds (errs high).

    Raises:
      ValueError: naming the parameter, for a ``randomizer`` of another type, a bad ``n``,
        ``discretization``, ``rounds``, ``tail`` or ``sample_rate`` (or one below 1 for a randomizer
        whose sampled round has no certified PLD).
    """
    from jaxshuffle.accountant.subsampling import scalar_sample_rate
    from jaxshuffle.randomizers.params import VRParams

    g = scalar_sample_rate(sample_rate, "shuffled_round")
    if g < 1.0:
        from jaxshuffle.accountant.subsampling import SAMPLED_SCOPE, sampled_route

        if not isinstance(randomizer, VRParams) or sampled_route(randomizer) is None:
            raise ValueError(f"sample_rate: {SAMPLED_SCOPE} (no two-count pair is an upper bound for a sampled "
                             "round, docs/math.md 12.10)")
        from jaxshuffle.pld.blanket import blanket_round_where_built, round_grid

        return blanket_round_where_built(randomizer, n, round_grid(randomizer, n, int(rounds), discretization), None,
                                         g)
    if isinstance(randomizer, TwoCountPair):
        return round_pld(randomizer, n, discretization=discretization, rounds=rounds, tail=tail, method=method)
    if not isinstance(randomizer, VRParams):
        raise ValueError(f"randomizer: expected VRParams (jaxshuffle.randomizers) or a TwoCountPair, "
                         f"got {type(randomizer).__name__}")
    n_np = np.float64(concrete(f64(n), "shuffled_round"))
    check(np.isfinite(n_np) & (n_np >= 1) & (n_np == np.floor(n_np)), "n", "must be a finite integer >= 1", value=n_np)
    pair, _ = certified_worst_case_pair(randomizer)  # the clone constant proven for it (docs/math.md 3.1)
    if not has_finite_losses(pair):
        raise ValueError(f"randomizer: p = inf ({pair.source} pair, u = 1, v = 0): one of the victim's messages "
                         "is impossible under the other input, so the round's privacy loss is infinite with positive "
                         "probability and it has no privacy-loss distribution to compose; composed_epsilon composes "
                         "such rounds by basic and advanced composition of amplify's certified one-round bound")
    n_engine = float(np.asarray(randomizer.n_blanket(n_np))) + 1.0
    return round_pld(pair, n_engine, discretization=discretization, rounds=rounds, tail=tail, method=method)


def has_finite_losses(pair: TwoCountPair) -> bool:
    """Whether the scalar pair's privacy losses are all finite (``u > 0`` and ``v > 0``; ``p < inf``): the
    condition for a round PLD (:func:`round_pld`)."""
    return bool(np.asarray(pair.u) > 0 and np.asarray(pair.v) > 0)


def rdp(round_pld_: RoundPLD, orders) -> np.ndarray:
    """Upper bound on the round's Renyi DP ``max(D_a(P||Q), D_a(Q||P))`` at each order ``a > 1``.

    From the pessimistic PLDs: ``D_a <= log(sum_j p_j e^{(a-1) l_j} + p_out e^{(a-1) max_loss}) / (a-1)``;
    losses rounded up and masses inflated only increase the sum, and the mass left outside the
    evaluated cells has a loss of at most ``max_loss = |log(u/v)|`` (docs/math.md section 12.6). A round
    connected from its profile (``round_pld(..., method="profile")``, the default above
    :data:`MAX_CELLS` cells) keeps its profile's last value at ``+inf``, so its bound is ``inf``: build the
    round with ``method="cells"`` for a finite one.

    Args:
      round_pld_: a certified :class:`RoundPLD` (:func:`shuffled_round`, :func:`round_pld`).
      orders: Renyi orders ``a``, each finite and > 1 (any shape).

    Returns:
      An array of ``orders``' shape: a certified upper bound (errs high) on the round's Renyi DP at each order
        (at least 0).

    Raises:
      ValueError: naming ``orders`` for an order not finite and > 1, or ``round_pld_`` for a round
        that is not certified.
    """
    orders = np.asarray(orders, np.float64)
    check((orders > 1) & np.isfinite(orders), "orders", "must be finite and > 1", value=orders)
    if not round_pld_.certified:
        raise ValueError(f"round_pld_: the pair ({round_pld_.source}) is not certified; no RDP bound")
    out = np.full(orders.shape, -np.inf)
    for pld in (round_pld_.upper_forward, round_pld_.upper_backward):
        ell = pld.losses()
        with np.errstate(divide="ignore"):
            terms = np.log(pld.probs)[None, :] + (orders.ravel()[:, None] - 1) * ell[None, :]
            extra = np.log(pld.infinity_mass) + (orders.ravel() - 1) * round_pld_.max_loss
        total = np.logaddexp(np.logaddexp.reduce(terms, axis=1), extra) * (1 + 1e-12) + 1e-15
        out = np.maximum(out, (total / (orders.ravel() - 1)).reshape(orders.shape))
    return np.maximum(out, 0.0)


# The round-PLD types' neighbouring relations and size limit lived here (and so at the old path
# jaxshuffle.accountant.pld); their home is jaxshuffle.pld.distribution.
__getattr__ = moved_names(__name__, dict.fromkeys(("ADD_OR_REMOVE_ONE", "MAX_DEFAULT_ROUNDS", "RELATIONS",
                                                   "REPLACE_ONE", "neighboring_relation"), distribution.__name__))
