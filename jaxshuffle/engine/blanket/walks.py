"""Sums of a binomial's pmf over an interval: the walks of the blanket kernel's recurrences.

Both return ``(sum, rel_err, rem)``, the true sum within ``[sum (1 - rel_err), sum (1 + rel_err) + rem]``:
:func:`log_ratio_walk` sums at most ``M`` terms by log ratios from the interval's top (``rem = 0``);
:func:`outward_walk` sums any interval from its largest term by linear ratios, ``S`` terms each way,
and charges a geometric bound on the rest. docs/math.md section 10 ("Recurrences along lines").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxshuffle import _binomial
from jaxshuffle._numerics import FLUSH as _FLUSH
from jaxshuffle._numerics import ULP as _ULP
from jaxshuffle.engine.two_count.divergence import REL_ERR

_LRR_CAP = 1e4  # log(q/p) is clipped here (p = 0 or q = 0: such levels are summed exactly, not walked)


def log_ratio_walk(nw, lo, hi, p, q, M: int):
    """``sum_{i=lo}^{hi} b(i)`` of ``Bin(nw, p)`` (``hi - lo + 1 <= M``), walking down from ``min(hi, nw)``
    by exact log ratios ``b(i-1)/b(i) = i/(nw-i+1) * q/p``. Returns ``(sum, rel_err, rem)`` as
    :func:`outward_walk` does, ``rem = 0``: it leaves no term of the interval out.

    A level with ``p = 0`` or ``q = 0`` (a category without mass: a matrix form whose second category is
    empty has ``pA = 1``) is a point mass at 0 or ``nw``; its sum is exact (1 where that point lies in
    the interval, else 0), where the walk's capped log ratio would give 0 or inf."""
    top = jnp.minimum(hi, nw)
    count = jnp.maximum(top - lo + 1.0, 0.0)
    lq = jnp.log(jnp.where(q > 0, q, 1.0)) - jnp.log(jnp.where(p > 0, p, 1.0))
    lrr = jnp.where((p > 0) & (q > 0), lq, _LRR_CAP)
    lb = _binomial.log_pmf(nw, top, p, q)

    def step(o, carry):
        lb, acc = carry
        i = top - o
        acc = acc + jnp.where((o < count) & (i >= 0), jnp.exp(lb), 0.0)
        ok = (i >= 1) & (i <= nw)
        lr = jnp.log(jnp.where(ok, i, 1.0) / jnp.where(ok, nw - i + 1.0, 1.0)) + lrr
        return jnp.where(ok, lb + lr, -jnp.inf), acc

    acc = jax.lax.fori_loop(0, M, step, (lb, jnp.zeros_like(lb)))[1]
    point = jnp.where(p > 0, nw, 0.0)  # the one point of a level with p = 0 or q = 0
    exact = (point >= jnp.maximum(lo, 0.0)) & (point <= top)
    acc = jnp.where((p > 0) & (q > 0), acc, jnp.where(exact, 1.0, 0.0))
    # each ratio: quotient, its log, log(q/p) and the running sum (|log b| <= 746 before a flush)
    rel = M * 4.0 * _ULP * (4.0 + jnp.abs(lrr) + jnp.log(jnp.maximum(nw, 0.0) + 2.0) + 746.0) + REL_ERR
    return acc, rel, jnp.zeros_like(acc)


def outward_walk(nw, lo, hi, p, q, S: int):
    """``sum_{i=lo}^{hi} b(i)`` of ``Bin(nw, p)`` for an interval of any length: ``(sum, rel_err, rem)``,
    the true sum within ``[sum (1 - rel_err), sum (1 + rel_err) + rem]``.

    From the interval's largest term ``b(a)`` (``a`` the mode clipped to the interval: the pmf is
    unimodal), ``S`` terms are summed downward by the linear ratios ``b(i-1) = b(i) i/(nw-i+1) q/p`` and
    ``S`` upward by ``b(i+1) = b(i) (nw-i)/(i+1) p/q``; past the mode the ratios shrink monotonically, so
    what is left of each side is at most its next term times ``min(terms left, 1/(1 - ratio))``
    (geometric). Each term carries at most ``5 (S + 1)`` roundings after Loader's ``b(a)`` (``REL_ERR``;
    a ratio's quotient, its factor ``q/p`` and product, the reciprocal XLA may form, the term's product),
    the sum ``2S`` more; a term below the normal range may flush: ``2 (2S + 2)`` flush units charged.
    Derivation: docs/math.md section 10 ("Recurrences along lines"); checked against 60-digit sums by
    ``tests/test_blanket.py::test_outward_walk_sums_the_binomial_pmf_within_its_stated_error``.
    A level with ``p = 0`` or ``q = 0`` is a point mass, summed exactly (as :func:`log_ratio_walk`)."""
    top = jnp.minimum(hi, nw)
    bot = jnp.maximum(lo, 0.0)
    count = jnp.maximum(top - bot + 1.0, 0.0)
    mass = (p > 0) & (q > 0)
    live = mass & (count > 0)
    ps, qs = jnp.where(mass, p, 0.5), jnp.where(mass, q, 0.5)
    nws = jnp.where(live, nw, 1.0)
    # the mode floor((nw+1) p) clipped into the interval: within one of the true mode, where neighbouring
    # terms differ by a factor 1 + O(1/sqrt(nw)), so b(a) is the interval's largest term up to that factor
    a = jnp.where(live, jnp.clip(jnp.floor((nws + 1.0) * ps), bot, top), 0.0)
    # q/p and p/q capped: they exceed 1e300 only where p (or q) < 1e-300, and then the mode sits at the
    # support's end, so the walk on that side has no term of the interval to reach (values stay finite)
    qp = jnp.minimum(qs / ps, 1e300)
    pq = jnp.minimum(ps / qs, 1e300)
    b_a = jnp.where(live, jnp.exp(_binomial.log_pmf(nws, a, ps, qs)), 0.0)
    count_d = jnp.where(live, a - bot + 1.0, 0.0)  # terms a, a-1, ..., bot
    count_u = jnp.where(live, top - a, 0.0)  # terms a+1, ..., top

    def down(i):  # b(i-1)/b(i), 0 below the support
        return jnp.where(i >= 1.0, jnp.maximum(i, 1.0) / (nws - i + 1.0) * qp, 0.0)

    def up(i):  # b(i+1)/b(i), 0 above the support
        return jnp.maximum(nws - i, 0.0) / (i + 1.0) * pq

    def step(o, carry):
        td, tu, acc = carry  # td = b(a - o), tu = b(a + 1 + o)
        acc = acc + jnp.where(o < count_d, td, 0.0) + jnp.where(o < count_u, tu, 0.0)
        td = jnp.minimum(td * down(a - o), 1.0)  # a pmf is at most 1: a capped term never enters the sum
        tu = jnp.minimum(tu * up(a + 1.0 + o), 1.0)
        return td, tu, acc

    tu0 = jnp.minimum(b_a * up(a), 1.0)
    td, tu, acc = jax.lax.fori_loop(0, S, step, (b_a, tu0, jnp.zeros_like(b_a)))
    rel = jnp.full_like(b_a, REL_ERR + (8.0 * S + 8.0) * _ULP * 1.01)  # _ULP is 2 units of rounding: margin

    def rest(t_next, ratio, left):
        """What ``left`` terms from ``t_next`` on can add, ratios at most ``ratio`` each: geometric."""
        r_up = ratio * (1.0 + 16.0 * _ULP)
        geo = jnp.where(r_up < 1.0, 1.0 / jnp.maximum(1.0 - r_up, 1e-300), jnp.inf)
        bound = (t_next * (1.0 + rel) + _FLUSH) * jnp.minimum(left, geo) * (1.0 + 16.0 * _ULP)
        # past the mode the ratios fall below 1 within two steps; a ratio >= 1 still (S < 2) gives no
        # geometric bound, and then every left term is at most 1
        return jnp.where(left > 0, jnp.where(r_up < 1.0, bound, left), 0.0)

    rem = (rest(td, down(a - S), count_d - S) + rest(tu, up(a + 1.0 + S), count_u - S)
           + 2.0 * (2.0 * S + 2.0) * _FLUSH)
    point = jnp.where(p > 0, nw, 0.0)  # the one point of a level with p = 0 or q = 0
    exact = (point >= bot) & (point <= top)
    acc = jnp.where(mass, acc, jnp.where(exact, 1.0, 0.0))
    rem = jnp.where(mass, rem, 0.0)
    return acc, rel, rem
