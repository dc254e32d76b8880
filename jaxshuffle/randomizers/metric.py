"""Local metric-DP randomizers of the paper's Table 3 (``p = e^d01``, ``q = e^dmax``).

Returned sides and errors: as :mod:`jaxshuffle.randomizers` states for every row.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import jax.scipy.special  # noqa: F401  (logsumexp)
import numpy as np

from jaxshuffle._config import f64
from jaxshuffle.randomizers.params import (
    D01,
    D01_EXP,
    D02_EXP,
    D12_EXP,
    DMAX,
    Inputs,
    VRParams,
)


def _metric_inputs(d01, dmax) -> tuple[Inputs, jax.Array, jax.Array]:
    """Validated ``(inputs, d01, q)`` of a metric row, ``q = e^dmax`` for every row of Table 3."""
    inp = Inputs((D01, d01), (DMAX, dmax))
    d01, dmax = inp.values
    inp.require(dmax >= d01, "dmax", "must be >= d01 (dmax includes the distance to x1^1)")
    return inp, d01, jnp.exp(dmax)


def metric_general(d01, dmax) -> VRParams:
    """Any local d_X-private randomizer. Table 3 row "general mechanisms".

    Metric privacy: Chatzikokolakis, Andres, Bordenabe, Palamidessi, "Broadening the scope
    of differential privacy using metrics", 2013. ``p = e^{d01}``,
    ``beta = (e^{d01} - 1)/(e^{d01} + 1)``, ``q = e^{dmax}``.

    Args:
      d01: metric distance ``d_X(x1^0, x1^1)`` between the victim's two inputs (``p = e^d01``), a finite
        number >= 0.
      dmax: largest distance from either of the victim's inputs to any input (``q = e^dmax``), finite and
        at least ``d01``.

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp, d01, q = _metric_inputs(d01, dmax)
    p = jnp.exp(d01)
    return inp.params(p, (p - 1.0) / (p + 1.0), q)


def metric_laplace(d01, dmax) -> VRParams:
    """Laplace mechanism on R with the l1 metric. Table 3 row "Laplace mechanism".

    Original: Alvim, Chatzikokolakis, Palamidessi, Pazii, "Local differential privacy on
    metric spaces", 2018. Density ``exp(-|y - x|)/2`` (distances in units of the metric).

    ``p = e^{d01}``, ``beta = TV(Lap(0,1), Lap(d01,1)) = 1 - e^{-d01/2}``, ``q = e^{dmax}``.

    Args:
      d01, dmax: as in :func:`metric_general`.

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp, d01, q = _metric_inputs(d01, dmax)
    return inp.params(jnp.exp(d01), -jnp.expm1(-0.5 * d01), q)


def metric_exponential_log_matrix(d01, d02, d12) -> jax.Array:
    """``log P(y | x)`` of the 3-option exponential mechanism, shape ``(..., 3, 3)`` (rows x, columns y).

    ``P(y | x) = exp(-D(x, y)/2) / Z_x`` with ``D`` the metric given by the three distances
    (McSherry and Talwar 2007; for metric LDP, Alvim et al. 2018); computed in log space.
    """
    d01, d02, d12 = (f64(x) for x in (d01, d02, d12))
    zero = jnp.zeros_like(d01 + d02 + d12)
    D = jnp.stack([jnp.stack([zero, d01 + zero, d02 + zero], -1),
                   jnp.stack([d01 + zero, zero, d12 + zero], -1),
                   jnp.stack([d02 + zero, d12 + zero, zero], -1)], -2)
    return -0.5 * D - jax.scipy.special.logsumexp(-0.5 * D, axis=-1, keepdims=True)


def metric_exponential(d01, d02, d12) -> VRParams:
    """The exponential mechanism for metric LDP on 3 options {0, 1, 2}; the victim's inputs are 0 and 1.

    Not a row of the seed tables: the paper's Appendix I example, in the metric framework of Table 3.

    ``P(y | x) = exp(-D(x, y)/2) / Z_x`` (:func:`metric_exponential_log_matrix`), D-private: each
    factor changes by at most ``e^{D(x, x')/2}``. Read off the matrix (docs/math.md section 19.7):
    ``p = max_y max(P(y|0)/P(y|1), P(y|1)/P(y|0))`` (at most ``e^{d01}``),
    ``beta = TV(P(.|0), P(.|1))`` and the blanket ratio
    ``q = max over v in {0, 1}, x, y of P(y|v)/P(y|x)`` (another user may hold any option).
    The distances must satisfy the triangle inequality.
    """
    inp = Inputs((D01_EXP, d01), (D02_EXP, d02), (D12_EXP, d12))
    d01, d02, d12 = inp.values
    for a, b, c, name in ((d01, d02, d12, "d01"), (d02, d01, d12, "d02"), (d12, d01, d02, "d12")):
        inp.require(a <= b + c, name, "must be at most the sum of the other two distances (triangle inequality)",
                    value=a)
    logm = metric_exponential_log_matrix(d01, d02, d12)
    log_p = jnp.max(jnp.abs(logm[..., 0, :] - logm[..., 1, :]), axis=-1)
    m = jnp.exp(logm)
    beta = 0.5 * jnp.sum(jnp.abs(m[..., 0, :] - m[..., 1, :]), axis=-1)
    log_q = jnp.max(logm[..., :2, None, :] - logm[..., None, :, :], axis=(-3, -2, -1))
    out = inp.params(jnp.exp(log_p), beta, jnp.exp(log_q))
    return out


# Composite Gauss-Legendre rule on [0, 1]: 48 panels of 16 nodes.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(16)
_PANELS = 48
_QX = ((np.arange(_PANELS)[:, None] + 0.5 * (_GL_X[None, :] + 1.0)) / _PANELS).ravel()
_QW = (np.broadcast_to(0.5 * _GL_W[None, :], (_PANELS, 16)) / _PANELS).ravel()
_TAIL_W = 45.0  # beyond h cosh z = 45, 1 - F < 46 e^-45 ~ 1e-18: the tail integrates sech exactly


def _gamma2_cdf(w):
    """F(w) = P[Gamma(2, 1) <= w] = 1 - (1 + w) e^{-w}, accurate in relative terms for small w.

    For ``w < 1``: ``F(w) = w^2 sum_k (-w)^k / (k! (k + 2))`` (Horner, 23 terms); else direct.
    """
    small = w < 1.0
    ws = jnp.where(small, w, 0.0)
    series = jnp.full_like(ws, 1.0 / (math.factorial(22) * 24))
    for k in range(21, -1, -1):
        series = 1.0 / (math.factorial(k) * (k + 2)) - ws * series
    direct = -jnp.expm1(-w) - w * jnp.exp(-w)
    return jnp.where(small, ws * ws * series, direct)


def planar_laplace_beta(d01) -> jax.Array:
    """Total variation between planar Laplace densities ``e^{-||y - u||}/(2 pi)`` at distance ``d01``.

    Table 3's integral ``2 int_0^{d01/2} int_R e^{-sqrt((x - d01/2)^2 + y^2)}/(2 pi) dy dx``
    equals ``P[|X_1| <= h]``, ``h = d01/2``, for ``X`` planar Laplace at the origin; with the
    radius ``R ~ Gamma(2, 1)`` and a uniform angle, substituting ``r cos(theta) = h``, ``r =
    h cosh(z)``::

        beta = (2/pi) int_0^inf F(h cosh z) / cosh z dz,   F(w) = 1 - (1 + w) e^{-w},

    computed by a fixed composite Gauss-Legendre rule on ``[0, Z]``, ``h cosh Z = 45``, plus
    the exact tail ``int_Z^inf sech = 2 arctan(e^{-Z})``. Relative error ~1e-15 for every
    ``d01 >= 0`` (checked against mpmath in the tests).

    Args:
      d01: distance between the two centres, >= 0 (any shape; not validated).

    Returns:
      The total variation ``beta`` (float64, ``d01``'s shape), to about 1e-15 relative: an accurate evaluation
        of the integral, not a certified bound.
    """
    h = 0.5 * f64(d01)
    hs = jnp.where(h > 0.0, h, 1.0)
    big_z = jnp.arccosh(jnp.maximum(1.0, _TAIL_W / hs))
    shape1 = (1,) * h.ndim + (-1,)
    z = big_z[..., None] * jnp.reshape(jnp.asarray(_QX), shape1)
    w = jnp.reshape(jnp.asarray(_QW), shape1)
    body = jnp.sum(w * _gamma2_cdf(hs[..., None] * jnp.cosh(z)) / jnp.cosh(z), axis=-1) * big_z
    beta = (2.0 / jnp.pi) * (body + 2.0 * jnp.arctan(jnp.exp(-big_z)))
    return jnp.where(h > 0.0, beta, 0.0)


def planar_laplace(d01, dmax) -> VRParams:
    """Planar Laplace on R^2 with the l2 metric. Table 3 row "planar Laplace".

    Original: Andres, Bordenabe, Chatzikokolakis, Palamidessi, "Geo-indistinguishability",
    CCS 2013. Density ``e^{-||y - x||_2}/(2 pi)``.

    ``p = e^{d01}``, ``q = e^{dmax}``, ``beta = 2 int_0^{d01/2} int_R
    e^{-sqrt((x - d01/2)^2 + y^2)}/(2 pi) dy dx = (2/pi)(int_0^h K_0 - h K_0(h))``, ``h = d01/2``,
    evaluated by :func:`planar_laplace_beta`.

    Args:
      d01, dmax: as in :func:`metric_general`.

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp, d01, q = _metric_inputs(d01, dmax)
    return inp.params(jnp.exp(d01), planar_laplace_beta(jnp.where(inp.ok, d01, 0.0)), q)
