"""Ready-made utilities: the error of common estimators as differentiable functions of eps0.

Calling convention (what budget tuning and the plots take): a *utility* is a callable
``u(eps0) -> scalar`` (a float64 ``jax.Array`` of shape ``()``), pure JAX, so that ``jax.grad``
and ``jax.jit`` apply. ``eps0`` is a scalar or a vector; a factory's utility is the **sum over
the entries** of ``eps0`` (one entry per round or per mechanism using that estimator). Every
value is an error to be minimised (a mean squared error, in the data's units squared). A user's
own function with the same signature works in the same places; :func:`weighted_sum` combines
utilities, giving each its own slice of the eps0 vector.

Formulas (docs/math.md section "Utilities"; each checked by simulation or exact enumeration in
``tests/test_utility.py``), with ``e = e^{eps0}`` and ``n`` users; all are MSEs conditional on
the users' data (the estimators are unbiased, so MSE = variance):

* k-ary randomized response, estimate ``f_hat = (C/n - q)/(p - q)`` of an item's frequency ``f``,
  ``p = e/(e + k - 1)``, ``q = 1/(e + k - 1)``: the item's count is a sum of ``n f`` Bernoulli(p)
  and ``n (1 - f)`` Bernoulli(q), so::

      MSE_item = (f p (1-p) + (1-f) q (1-q)) / (n (p-q)^2) = q(1-q)/(n (p-q)^2) + f (1-p-q)/(n (p-q)),
      MSE_sum  = sum over the k items = k q(1-q)/(n (p-q)^2) + (1-p-q)/(n (p-q))   (sum f = 1).

* binary randomized response for a mean of ``x_i in [0, 1]`` (``x_i`` is first rounded to a bit
  ``B ~ Bernoulli(x_i)``, the bit is kept w.p. ``e/(e+1)``; estimate ``(y - q)/(p - q)``)::

      MSE = (e/(e-1)^2 + s) / n,    s = (1/n) sum x_i (1 - x_i)   (s = 0 for bits).

* Laplace mean estimation for ``x_i`` in an interval of width ``w`` (``w = 1`` for ``[0, 1]``,
  ``2b`` for ``[-b, b]``), noise ``Lap(w/eps0)``::

      MSE = 2 w^2 / (n eps0^2).

* WitchHat on ``[-b, b]`` (:mod:`jaxshuffle.randomizers.witchhat`)::

      MSE = (N K / c^2 + 2 e^{-m} (b + R) s2 / c) / n,   s2 = (1/n) sum x_i^2,

  as a function of ``(m, f, b, n, s2)`` (:func:`witchhat_mse`), and of eps0 through a
  parameterisation with ``min(m, 4b/f) = eps0`` (:func:`witchhat_mean_mse`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from jaxshuffle._bisect import golden_section
from jaxshuffle._config import f64

__all__ = [
    "Utility",
    "binary_rr_mean_mse",
    "grr_frequency_mse",
    "grr_frequency_mse_total",
    "laplace_mean_mse",
    "second_moment",
    "weighted_sum",
    "witchhat_eps0_params",
    "witchhat_mean_mse",
    "witchhat_mse",
]

#: A utility: ``u(eps0) -> scalar`` (an error to minimise), pure JAX.
Utility = Callable[[jax.Array], jax.Array]


def _grr_pq(eps0, k):
    e = jnp.exp(eps0)
    return e / (e + k - 1.0), 1.0 / (e + k - 1.0)


def grr_frequency_mse(k: ArrayLike, n: ArrayLike, freq: ArrayLike = 0.0) -> Utility:
    """MSE of the debiased k-RR frequency estimate of one item with true frequency ``freq``.

    ``q(1-q)/(n (p-q)^2) + freq (1-p-q)/(n (p-q))`` (module docstring), summed over eps0's entries.
    Equivalently ``(e + k - 2)/(n (e - 1)^2) + freq (k - 2)/(n (e - 1))``.
    """
    k, n, freq = f64(k), f64(n), f64(freq)

    def utility(eps0: ArrayLike) -> jax.Array:
        em1 = jnp.expm1(f64(eps0))
        mse = (em1 + k - 1.0) / (n * em1 * em1) + freq * (k - 2.0) / (n * em1)
        return jnp.sum(mse)

    return utility


def grr_frequency_mse_total(k: ArrayLike, n: ArrayLike) -> Utility:
    """MSE of the k-RR frequency estimates summed over the domain (independent of the data).

    ``k q(1-q)/(n (p-q)^2) + (1-p-q)/(n (p-q)) = (k (e + k - 2) + (k - 2)(e - 1)) / (n (e - 1)^2)``.
    """
    k, n = f64(k), f64(n)

    def utility(eps0: ArrayLike) -> jax.Array:
        em1 = jnp.expm1(f64(eps0))
        return jnp.sum((k * (em1 + k - 1.0) + (k - 2.0) * em1) / (n * em1 * em1))

    return utility


def binary_rr_mean_mse(n: ArrayLike, spread: ArrayLike = 0.0) -> Utility:
    """MSE of the binary-RR mean of ``x_i in [0, 1]``: ``(e/(e-1)^2 + spread)/n``.

    ``spread = (1/n) sum x_i (1 - x_i)`` (0 for bits; at most 1/4): the randomized rounding's
    own variance. Data on ``[0, 1]``.
    """
    n, s = f64(n), f64(spread)

    def utility(eps0: ArrayLike) -> jax.Array:
        eps0 = f64(eps0)
        em1 = jnp.expm1(eps0)
        return jnp.sum((jnp.exp(eps0) / (em1 * em1) + s) / n)

    return utility


def laplace_mean_mse(n: ArrayLike, width: ArrayLike = 1.0) -> Utility:
    """MSE of the Laplace-mechanism mean for data in an interval of ``width``: ``2 width^2/(n eps0^2)``.

    ``width = 1``: data on ``[0, 1]`` (the catalog's ``laplace`` row, scale ``1/eps0``);
    ``width = 2b``: data on ``[-b, b]``, the baseline of WitchHat at the same eps0.
    """
    n, w = f64(n), f64(width)

    def utility(eps0: ArrayLike) -> jax.Array:
        eps0 = f64(eps0)
        return jnp.sum(2.0 * w * w / (n * eps0 * eps0))

    return utility


def witchhat_mse(m: ArrayLike, f: ArrayLike, b: ArrayLike, n: ArrayLike, second_moment: ArrayLike) -> jax.Array:
    """MSE of the mean of ``n`` shuffled WitchHat reports (elementwise; differentiable in ``m, f``).

    ``(N K / c^2 + 2 e^{-m} (b + R) s2 / c) / n`` about the mean of the inputs, ``s2`` their
    second moment (:meth:`jaxshuffle.randomizers.witchhat.WitchHat.mean_mse`; no validation:
    use :func:`jaxshuffle.randomizers.witchhat` for that).
    """
    from jaxshuffle.randomizers.witchhat import WitchHat

    return WitchHat(f64(m), f64(f), f64(b)).mean_mse(n, second_moment)


def _branch(eps0, b, log_ratio, which):
    """(m, f) with min(m, 4b/f) = eps0: ``which = 0``: m = e^r eps0, f = 4b/eps0 (r >= 0);
    ``which = 1``: m = eps0, f = e^r 4b/eps0 (r <= 0)."""
    r = jnp.exp(log_ratio)
    if which == 0:
        return jnp.minimum(r * eps0, 700.0), 4.0 * b / eps0
    return eps0, r * 4.0 * b / eps0


def _best_branch_ratios(eps0, b, n, s2, steps=120):
    """Optimal log-ratios of both branches (golden section each; the MSE is unimodal within a branch
    on the grids of ``tests/test_utility.py``) and which branch wins."""
    def obj(which):
        return lambda lr: witchhat_mse(*_branch(eps0, b, lr, which), b, n, s2)

    hi0 = jnp.log(jnp.maximum(jnp.minimum(700.0 / eps0, 1e3), 1.0))
    r0 = golden_section(obj(0), jnp.zeros_like(eps0), hi0, steps=steps)
    r1 = golden_section(obj(1), jnp.full_like(eps0, math.log(1e-12)), jnp.zeros_like(eps0), steps=steps)
    first = obj(0)(r0) <= obj(1)(r1)
    return jax.lax.stop_gradient(r0), jax.lax.stop_gradient(r1), jax.lax.stop_gradient(first)


def witchhat_eps0_params(eps0: ArrayLike, b: ArrayLike, n: ArrayLike = 1.0, second_moment: ArrayLike = 0.0,
                         m_ratio: ArrayLike | None = None, f_ratio: ArrayLike | None = None):
    """WitchHat ``(m, f)`` with standard-DP budget ``min(m, 4b/f) = eps0`` (see :func:`witchhat_mean_mse`)."""
    eps0, b, n, s2 = f64(eps0), f64(b), f64(n), f64(second_moment)
    if m_ratio is not None and f_ratio is not None:
        raise ValueError("m_ratio, f_ratio: give at most one")
    if m_ratio is not None:
        return _branch(eps0, b, jnp.log(f64(m_ratio)), 0)
    if f_ratio is not None:
        return _branch(eps0, b, jnp.log(f64(f_ratio)), 1)
    r0, r1, first = _best_branch_ratios(eps0, b, n, s2)
    m0, f0 = _branch(eps0, b, r0, 0)
    m1, f1 = _branch(eps0, b, r1, 1)
    return jnp.where(first, m0, m1), jnp.where(first, f0, f1)


def witchhat_mean_mse(b: ArrayLike, n: ArrayLike, second_moment: ArrayLike,
                      m_ratio: ArrayLike | None = None, f_ratio: ArrayLike | None = None) -> Utility:
    """MSE of the WitchHat mean as a function of its standard-DP budget ``eps0 = min(m, 4b/f)``.

    The parameters with ``min(m, 4b/f) = eps0`` form two branches: ``f = 4b/eps0, m = m_ratio eps0``
    (``m_ratio >= 1``) and ``m = eps0, f = f_ratio 4b/eps0`` (``f_ratio <= 1``). Give one ratio to
    fix the branch; with neither, each eps0 takes the smallest MSE over both branches (golden
    section in each, ``m_ratio`` in ``[1, min(1000, 700/eps0)]``, ``f_ratio`` in ``[1e-12, 1]``);
    the gradient is then the envelope gradient (``d MSE/d eps0`` at the ratio found).

    Measured (``b = 1``, ``second_moment = 1/3``, ratio to Laplace at the same eps0,
    ``8 b^2/(n eps0^2)``): 0.82 at eps0 = 0.1, 0.996 at 1, 1.0 at 2, 0.66 at 4, 0.11 at 8, 1.3e-2
    at 12 (``tests/test_utility.py::test_witchhat_best_ratio_beats_or_matches_laplace``): the
    first branch (Laplace-like, large ``m``) wins for small eps0, the capped branch for large.
    """
    b, n, s2 = f64(b), f64(n), f64(second_moment)
    if m_ratio is not None and f_ratio is not None:
        raise ValueError("m_ratio, f_ratio: give at most one")

    def utility(eps0: ArrayLike) -> jax.Array:
        m, f = witchhat_eps0_params(eps0, b, n, s2, m_ratio, f_ratio)
        return jnp.sum(witchhat_mse(m, f, b, n, s2))

    return utility


def weighted_sum(utilities: Sequence[Utility], weights: ArrayLike | Sequence[float] | None = None,
                 sizes: Sequence[int] | None = None) -> Utility:
    """``u(eps0) = sum_i weights[i] * utilities[i](eps0[slice_i])``.

    The eps0 vector is cut into consecutive slices of ``sizes`` (default: one entry each), so
    utility ``i`` sees its own mechanisms' budgets. Weights default to 1.
    """
    utilities = list(utilities)
    sizes = [1] * len(utilities) if sizes is None else [int(s) for s in sizes]
    if len(sizes) != len(utilities):
        raise ValueError(f"sizes: must have one entry per utility ({len(utilities)}), got {len(sizes)}")
    if any(s < 1 for s in sizes):
        raise ValueError(f"sizes: entries must be integers >= 1, got {sizes}")
    w = jnp.ones(len(utilities)) if weights is None else f64(weights)
    if w.shape != (len(utilities),):
        raise ValueError(f"weights: must have shape ({len(utilities)},), got {w.shape}")
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    total = sum(sizes)

    def utility(eps0: ArrayLike) -> jax.Array:
        eps0 = jnp.reshape(f64(eps0), (-1,))
        if eps0.shape[0] != total:
            raise ValueError(f"eps0: must have {total} entries (the sizes {sizes}), got {eps0.shape[0]}")
        parts = [u(eps0[s:s + k]) for u, s, k in zip(utilities, starts, sizes)]
        return jnp.sum(w * jnp.stack(parts))

    return utility


def second_moment(values: ArrayLike, weights: ArrayLike | None = None) -> jax.Array:
    """``sum w_i x_i^2 / sum w_i``: the data's second moment (a sample, or a distribution's support)."""
    x = f64(values)
    w = jnp.ones_like(x) if weights is None else f64(weights)
    return jnp.sum(w * x * x) / jnp.sum(w)
