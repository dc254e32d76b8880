"""Parallel composition in the shuffle model (variation-ratio paper, Section 6, Theorem 6.1).

Algorithm 2 (parallel local randomizer): each user samples a query ``k ~ P_k`` (weights
``w_k``) and reports ``M_k(x)``. If every base randomizer ``M_k`` has variation-ratio
parameters ``(p_k, beta_k, q_k)``, the parallel randomizer ``R`` has

    p = max_k p_k,    q = max_k q_k,    beta_bar = sum_k w_k beta_k

(``R(x)[y] = sum_k w_k M_k(x)[y]``: ratios of mixtures are at most the largest ratio, and
``TV(R(x), R(x')) <= sum_k w_k TV(M_k(x), M_k(x'))`` by convexity -- the proof of
Theorem 6.1; the paper states it for ``p_k = e^eps0`` and ``q = e^eps0``).

Which number is on which side:

* ``basic`` -- the *basic* parallel composition (Section 6, display before Theorem 6.1): the
  worst-case clone pair of ``(p, q)`` with the clone constant proven for it (docs/math.md 3.1:
  the standard clone ``r = 1/(2q)``, since the composed randomizer carries no matrix).
  Certified upper bound.
* ``upper`` -- the certified upper bound of :func:`jaxshuffle.accountant.amplify` for
  ``(p, beta_bar, q)``: ``min(basic, (u+v)-scaled pair)`` (``<= basic``).
* ``paper`` -- the *advanced* composition, Theorem 6.1: the Theorem 4.7 pair at
  ``beta_bar``. It inherits the ``w > 0`` problem of Theorem 4.7 (docs/math.md
  section 3): reported as the paper's value, ``paper_certified`` False where
  ``beta_bar < (p-1)/(p+1)``.

:func:`hierarchical_range_query` is the example of Section 7.3.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import broadcast_shapes_or_raise, check, f64
from jaxshuffle.accountant.amplify import amplify
from jaxshuffle.engine.two_count.pair import worst_case_beta
from jaxshuffle.randomizers import VRParams
from jaxshuffle.randomizers.params import admit_beta

__all__ = ["ParallelReport", "RangeQueryReport", "parallel_params", "basic_parallel_params",
           "parallel_amplify", "hierarchical_betas", "hierarchical_range_query", "RangeQueryFigure",
           "range_query_figure"]


def _check_components(components: VRParams, weights, axis: int):
    if not isinstance(components, VRParams):
        raise ValueError("components: must be a VRParams whose arrays stack the base randomizers along `axis`")
    if components.blanket_per_user is not None:
        raise ValueError("components: parallel composition (Algorithm 2) is for single-message randomizers")
    p, beta, q, w = f64(components.p), f64(components.beta), f64(components.q), f64(weights)
    shape = broadcast_shapes_or_raise(p=p, beta=beta, q=q, weights=w)
    if len(shape) == 0:
        raise ValueError("weights: need a query axis (one weight per base randomizer)")
    b = lambda x: jnp.broadcast_to(x, shape)  # noqa: E731
    p, beta, q, w = b(p), b(beta), b(q), b(w)
    wn = np.asarray(w)
    check((wn >= 0) & np.isfinite(wn), "weights", "must be probabilities >= 0")
    check(np.abs(wn.sum(axis=axis) - 1.0) <= 1e-12, "weights", "must sum to 1 along the query axis")
    return p, beta, q, w


def parallel_params(components: VRParams, weights, *, axis: int = -1) -> VRParams:
    """Variation-ratio parameters of Algorithm 2 for Theorem 6.1 (the *advanced* form).

    ``components`` stacks the base randomizers' ``(p_k, beta_k, q_k)`` along ``axis``;
    ``weights`` are the query probabilities ``P[k]`` (summing to 1 along ``axis``). Returns
    ``VRParams(max_k p_k, sum_k w_k beta_k, max_k q_k)`` with ``axis`` reduced. Every
    component's ratio bound counts, also one with weight 0 (it costs nothing to be safe).
    """
    p, beta, q, w = _check_components(components, weights, axis)
    beta_bar = jnp.sum(w * beta, axis=axis)
    pm = admit_beta(jnp.max(p, axis=axis), beta_bar)  # rounding may break beta <= (p-1)/(p+1): p moves up
    return VRParams(pm, beta_bar, jnp.max(q, axis=axis))


def basic_parallel_params(components: VRParams, *, axis: int = -1) -> VRParams:
    """The *basic* parallel composition: ``VRParams(max_k p_k, (p-1)/(p+1), max_k q_k)`` (worst-case beta)."""
    if not isinstance(components, VRParams) or components.blanket_per_user is not None:
        raise ValueError("components: must be a single-message VRParams stacking the base randomizers along `axis`")
    p, q = f64(components.p), f64(components.q)
    shape = broadcast_shapes_or_raise(p=p, q=q)
    if len(shape) == 0:
        raise ValueError("components: need a query axis (one entry per base randomizer)")
    pm = jnp.max(jnp.broadcast_to(p, shape), axis=axis)
    return VRParams(pm, worst_case_beta(pm), jnp.max(jnp.broadcast_to(q, shape), axis=axis))


class ParallelReport(NamedTuple):
    """Result of :func:`parallel_amplify` (float64/bool arrays of the broadcast shape).

    Attributes:
      basic: certified upper bound of the basic parallel composition (worst-case pair).
      upper: certified upper bound with ``beta_bar`` (``min(basic, scaled pair)``, ``<= basic``).
      paper: Theorem 6.1 (advanced composition) as printed -- NOT certified unless
        ``paper_certified``.
      paper_certified: True where ``beta_bar`` is the worst case (then ``paper == basic``).
      beta_bar: the averaged total-variation bound ``sum_k w_k beta_k``.
    """

    basic: jax.Array
    upper: jax.Array
    paper: jax.Array
    paper_certified: jax.Array
    beta_bar: jax.Array


def parallel_amplify(components: VRParams, weights, n, delta, *, axis: int = -1,
                     rtol: float = 1e-6) -> ParallelReport:
    """Amplified epsilon of Algorithm 2 shuffled among ``n`` users: basic, certified and Theorem 6.1 values.

    One :func:`~jaxshuffle.accountant.amplify` call on :func:`parallel_params`; its
    worst-case pair is the basic composition, its ``upper`` the certified bound, its
    ``paper`` value Theorem 6.1. ``n`` and ``delta`` broadcast with the reduced shape.
    """
    params = parallel_params(components, weights, axis=axis)
    rep = amplify(params, n, delta, rtol=rtol)
    return ParallelReport(rep.worst_case, rep.upper, rep.paper, rep.paper_certified,
                          jnp.broadcast_to(params.beta, rep.upper.shape))


def hierarchical_betas(eps0, H: int) -> jax.Array:
    """Per-level GRR total variations of the Section 7.3 hierarchy, shape ``(..., H)``.

    Domain ``[1:d]``, ``d = 2^H``; level ``h in [0, H-1]`` reports the bucket
    ``V_{h,k} = [j in ((k-1) 2^h, k 2^h]]`` among ``d/2^h`` buckets by k-ary randomized
    response with full budget eps0: ``beta_h = (e^eps0 - 1)/(e^eps0 + d/2^h - 1)`` (Table 2
    GRR row). Level ``H-1`` has 2 buckets: the worst case ``(e^eps0-1)/(e^eps0+1)``.
    """
    if not (isinstance(H, (int, np.integer)) and H >= 1):
        raise ValueError("H: must be an integer >= 1 (domain size d = 2^H)")
    eps0 = f64(eps0)
    check((np.asarray(eps0) >= 0) & np.isfinite(np.asarray(eps0)), "eps0", "must be a finite number >= 0", value=eps0)
    p = jnp.exp(eps0)[..., None]
    buckets = jnp.reshape(jnp.asarray([2.0 ** (H - h) for h in range(H)]), (1,) * eps0.ndim + (H,))  # d / 2^h
    return (p - 1.0) / (p + buckets - 1.0)


class RangeQueryReport(NamedTuple):
    """Result of :func:`hierarchical_range_query` (Section 7.3, Figure 5 quantities).

    Attributes:
      beta_bar: ``(1/H) sum_h beta_h`` of the uniform level choice.
      basic: certified, basic parallel composition at ``n`` users (worst-case pair).
      upper: certified, amplify at ``(e^eps0, beta_bar, e^eps0)`` with ``n`` users.
      paper: Theorem 6.1 value (advanced composition, as in Figure 5) -- NOT certified.
      separate: certified, the separated approach: ``floor(n/H)`` users per level; the
        coarsest level (binary, worst-case beta) dominates, so this is the worst-case pair
        at ``floor(n/H)`` (the paper's "separate, worst").
      separate_best_paper: the paper's "separate, best" -- Theorem 4.7 with the finest
        level's ``beta = (e^eps0-1)/(e^eps0+d-1)`` at ``floor(n/H)`` users; NOT certified and
        not a bound for the separated protocol (its coarse levels have larger beta).
    """

    beta_bar: jax.Array
    basic: jax.Array
    upper: jax.Array
    paper: jax.Array
    separate: jax.Array
    separate_best_paper: jax.Array


def hierarchical_range_query(eps0, H: int, n, delta, *, rtol: float = 1e-6) -> RangeQueryReport:
    """Hierarchical range queries over ``[1:d]``, ``d = 2^H`` (paper Section 7.3), shuffled among ``n`` users.

    Each user picks a level ``h`` uniformly from ``[0, H-1]`` and reports its level-``h``
    bucket by GRR with budget eps0 (:func:`hierarchical_betas`). ``eps0``, ``n``, ``delta``
    broadcast; ``H`` is a Python int; ``n >= H``. All six quantities come from one batched
    :func:`~jaxshuffle.accountant.amplify` call.
    """
    betas = hierarchical_betas(eps0, H)
    eps0, n, delta = f64(eps0), f64(n), f64(delta)
    shape = broadcast_shapes_or_raise(eps0=eps0, n=n, delta=delta)
    nn = np.asarray(n)
    check((nn >= H) & (nn == np.floor(nn)), "n", f"must be an integer >= H = {H}", value=nn)
    beta_bar = jnp.broadcast_to(jnp.mean(betas, axis=-1), shape)
    p = admit_beta(jnp.broadcast_to(jnp.exp(eps0), shape), beta_bar)  # p moves up where rounding needs it
    beta_fine = jnp.broadcast_to(betas[..., 0], shape)
    n_sep = jnp.floor(jnp.broadcast_to(n, shape) / H)
    stack = lambda *xs: jnp.stack([jnp.broadcast_to(x, shape) for x in xs])  # noqa: E731
    params = VRParams(stack(p, p, p), stack(beta_bar, worst_case_beta(p), beta_fine), stack(p, p, p))
    rep = amplify(params, stack(n, n_sep, n_sep), stack(delta, delta, delta), rtol=rtol)
    return RangeQueryReport(beta_bar=beta_bar, basic=rep.worst_case[0], upper=rep.upper[0], paper=rep.paper[0],
                            separate=rep.upper[1], separate_best_paper=rep.paper[2])


class RangeQueryFigure(NamedTuple):
    """Data of the paper's Figure 5 (:func:`range_query_figure`), arrays of the broadcast shape.

    ``paper`` values are Theorem 4.7 numbers (the paper's numerical bound, not certified below
    the worst-case beta, docs/math.md section 3); ``certified`` ones are sound upper bounds.

    Attributes:
      H: the depth ``log2 d`` (float array).
      beta_bar: the printed advanced-composition beta, ``(1/H) sum_h (p-1)/(p + d/2^h - 1)`` --
        the exact largest total variation of the parallel randomizer.
      beta_script: ``(p-1)/(p+d-1)/H``, the value the authors' experiment script computes (its
        loop assigns each level's term instead of adding it, keeping the finest level's). It is
        the *smallest* total variation over input pairs (neighbours that differ only at the finest
        level), not the largest: not a total-variation bound of the randomizer.
      basic: certified, the basic parallel composition (worst-case pair) at ``n`` users.
      advanced_upper: certified, ``amplify`` at ``(p, beta_bar, p)`` with ``n`` users.
      advanced_paper: Theorem 6.1 as printed (Theorem 4.7 at ``beta_bar``), ``n`` users.
      advanced_script: Theorem 4.7 at ``beta_script``, ``n`` users: the curve that reproduces the
        printed savings; neither the printed formula nor a bound.
      separate_worst: certified (= the paper's "separate, worst"): worst-case pair at
        ``floor(n/H)`` users, which the coarsest (binary) level attains.
      separate_best_paper: the paper's "separate, best": Theorem 4.7 at the finest level's beta
        at ``floor(n/H)`` users; not a bound for the separated protocol.
    """

    H: np.ndarray
    beta_bar: np.ndarray
    beta_script: np.ndarray
    basic: np.ndarray
    advanced_upper: np.ndarray
    advanced_paper: np.ndarray
    advanced_script: np.ndarray
    separate_worst: np.ndarray
    separate_best_paper: np.ndarray

    def savings(self, against: str = "basic") -> dict[str, np.ndarray]:
        """Budget saved ``1 - eps/eps_against`` by each advanced-composition value against
        ``against`` (``"basic"``, ``"separate_worst"`` or ``"separate_best_paper"``)."""
        ref = getattr(self, against)
        return {k: 1.0 - getattr(self, k) / ref for k in ("advanced_upper", "advanced_paper", "advanced_script")}


def range_query_figure(eps0, d, n, delta=None, *, rtol: float = 1e-6) -> RangeQueryFigure:
    """Figure 5 of the paper: hierarchical range queries on ``[1:d]`` (Section 7.3), every curve.

    ``eps0``, ``d`` (a power of 2, ``>= 2``), ``n`` and ``delta`` broadcast; ``delta`` defaults
    to ``0.01/n`` (the paper's Table 5 convention, also the authors' script's). The paper's
    settings are ``d in {64, 2048}``, ``n in {1e4, 1e5}``. One batched
    :func:`~jaxshuffle.accountant.amplify` call. docs/math.md section 19.2.
    """
    e0, dd, nn = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (eps0, d, n)))
    dl = 0.01 / nn if delta is None else np.broadcast_to(np.asarray(delta, np.float64), e0.shape)
    H = np.log2(dd)
    check((dd >= 2) & (H == np.round(H)), "d", "must be a power of 2, >= 2", value=dd)
    check((e0 > 0) & np.isfinite(e0), "eps0", "must be a finite number > 0", value=e0)
    check((nn >= H) & (nn == np.floor(nn)), "n", "must be an integer >= log2(d)", value=nn)
    p = np.exp(e0)
    beta_bar = np.zeros(e0.shape)
    for h in range(int(H.max())):  # level h has d/2^h buckets; levels h >= H contribute nothing
        beta_bar += np.where(h < H, (p - 1.0) / (p + dd / 2.0 ** h - 1.0), 0.0)
    beta_bar = np.minimum(beta_bar / H, (p - 1.0) / (p + 1.0))
    beta_fine = (p - 1.0) / (p + dd - 1.0)
    beta_script = beta_fine / H
    n_sep = np.floor(nn / H)
    st = lambda *xs: jnp.asarray(np.stack(xs))  # noqa: E731
    params = VRParams(st(p, p, p), st(beta_bar, beta_script, beta_fine), st(p, p, p))
    rep = amplify(params, st(nn, nn, n_sep), st(dl, dl, dl), rtol=rtol)
    wc, paper = np.asarray(rep.worst_case), np.asarray(rep.paper)
    return RangeQueryFigure(H=H, beta_bar=beta_bar, beta_script=beta_script, basic=wc[0],
                            advanced_upper=np.asarray(rep.upper)[0], advanced_paper=paper[0],
                            advanced_script=paper[1], separate_worst=wc[2], separate_best_paper=paper[2])
