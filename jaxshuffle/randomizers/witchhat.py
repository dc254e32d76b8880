"""WitchHat: the local metric-DP randomizer for a bounded number (metric-DP supplement, D and E).

Mechanism (parameters ``m > 0``, ``f > 0``, ``b > 0``; input ``x in [-b, b]``). With
``R = m f / 2`` the output ``z`` lives on ``[-b - R, b + R]`` with density::

    p(z | x) = exp(-(2/f) min(|z - x|, R)) / N,      N = f (1 - e^{-m}) + 2 b e^{-m}

(a Laplace-shaped "hat" of half-width ``R`` around ``x`` on a flat floor ``e^{-m}``). The
unbiased estimator is ``x_hat = N z / c`` with ``c = f (1 - e^{-m} - m e^{-m}) = f P(2, m)``
(``P`` the regularized lower incomplete gamma function).

Exact variance (derived in docs/math.md section "WitchHat"; checked against quadrature in
``tests/test_witchhat.py::test_variance_matches_quadrature``)::

    Var[x_hat | x] = N K / c^2 + 2 e^{-m} (b + R) x^2 / c,
    K = (2/3) e^{-m} b (b^2 + 3 b R + 3 R^2) + (f^3 / 2) P(3, m).

Privacy. ``log p(z|a) - log p(z|b') = (2/f)(min(|z-b'|, R) - min(|z-a|, R))`` is at most
``(2/f) min(|a - b'|, R)``, attained at ``z = a``: the local metric is
``D(a, b') = min(m, 2 |a - b'| / f)`` (tight). Standard-DP view: ``eps0 = max D = min(m, 4b/f)``;
total variation between inputs at distance ``d`` (largest at ``d = 2b``), ``s = min(d/2, R)``::

    TV(d) = (f (1 - e^{-2 s / f}) - 2 s e^{-m}) / N.

Variation-ratio parameters (:meth:`WitchHat.vr_params`): ``p = e^{eps0}``, ``beta = TV(2b)``,
``q = e^{eps0}`` (the blanket ratio ``max_{x1, x, z} p(z|x1)/p(z|x)`` is ``e^{max D}``, the same
number). :func:`jaxshuffle.amplify`'s certified ``upper`` is the standard clone at ``eps0``
(``r = 1/(2q)``, proven for every randomizer with blanket ratio ``q``; docs/math.md 3.1): the
stronger clone's constant ``1/(p+1)`` is proven for k-ary RR, not for WitchHat. The paper's value at
``beta = TV(2b)`` has ``w > 0`` and stays labelled uncertified.

The supplement's printed variance bound (:meth:`WitchHat.variance_bound`) has a term
``3 m^2 f`` where its own derivation gives ``3 m^2 f^2`` (lengths cubed next to lengths
squared); :meth:`WitchHat.variance_bound_corrected` uses ``f^2`` and is provably ``>=`` the exact
variance. The printed one is below the exact variance exactly where ``f > 1`` and the scale is
large enough (at ``x = 0``: ``b m^2 (f - 1) > f^2 (1 + m + m^2/2)``); see the tests.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammainc
from jax.typing import ArrayLike

from jaxshuffle._bisect import golden_section
from jaxshuffle._config import (
    broadcast_shapes_or_raise,
    check,
    f64,
    is_concrete,
    require_x64,
)
from jaxshuffle.randomizers.params import Arg, Inputs, VRParams

__all__ = [
    "B_ARG",
    "F_ARG",
    "M_ARG",
    "WitchHat",
    "best_f",
    "witchhat",
    "witchhat_from_candidates",
    "witchhat_from_local_metric",
    "witchhat_params",
]

M_ARG = Arg("m", "real", 0.0, 700.0, low_open=True, high_open=False,
           help="WitchHat cap m: the metric min(m, 2|a-b|/f) never exceeds m")
F_ARG = Arg("f", "real", 0.0, low_open=True, help="WitchHat width f (units of x): slope 2/f of the metric")
B_ARG = Arg("b", "real", 0.0, low_open=True, help="WitchHat input bound b: inputs x in [-b, b]")


def _inputs(m, f, b) -> Inputs:
    return Inputs((M_ARG, m), (F_ARG, f), (B_ARG, b))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class WitchHat:
    """WitchHat with cap ``m``, width ``f`` and input bound ``b`` (float64 arrays, one shape).

    Build it with :func:`witchhat` (validates). Invalid points built under ``jit`` hold NaN.
    Every method broadcasts its argument against the parameters. The mechanism, its estimator and
    its privacy: docs/math.md section 17.

    Attributes:
      m: the cap, in (0, 700]: the metric ``min(m, 2|a - b'|/f)`` never exceeds ``m``.
      f: the width (units of ``x``), > 0: the metric's slope is ``2/f``.
      b: the input bound, > 0: inputs ``x`` lie in ``[-b, b]``.
    """

    m: jax.Array
    f: jax.Array
    b: jax.Array

    # ---- derived constants -----------------------------------------------------------
    @property
    def half_width(self) -> jax.Array:
        """``R = m f / 2``: the hat's half-width; outputs lie in ``[-b - R, b + R]``."""
        return 0.5 * self.m * self.f

    @property
    def reach(self) -> jax.Array:
        """Alias of :attr:`half_width` (``R = m f / 2``)."""
        return self.half_width

    @property
    def floor(self) -> jax.Array:
        """``e^{-m}``: the unnormalised density outside the hat."""
        return jnp.exp(-self.m)

    @property
    def normaliser(self) -> jax.Array:
        """``N = f (1 - e^{-m}) + 2 b e^{-m}``."""
        return -self.f * jnp.expm1(-self.m) + 2.0 * self.b * self.floor

    @property
    def slope(self) -> jax.Array:
        """``c = f (1 - e^{-m} - m e^{-m})``: ``N E[z | x] = c x``."""
        return self.f * gammainc(2.0, self.m)

    @property
    def eps0(self) -> jax.Array:
        """Local DP budget ``min(m, 4 b / f)`` (the diameter of the metric on ``[-b, b]``)."""
        return jnp.minimum(self.m, 4.0 * self.b / self.f)

    # ---- density, sampling, estimation -----------------------------------------------
    def _check_x(self, x: jax.Array, name: str = "x") -> jax.Array:
        ok = jnp.abs(x) <= self.b
        if is_concrete(x, self.b):
            bv = np.asarray(self.b)
            where = f" = [{-float(bv):g}, {float(bv):g}]" if bv.ndim == 0 else ""
            check(ok, name, f"must lie in [-b, b]{where}", value=x)
        return ok

    def density(self, z: ArrayLike, x: ArrayLike) -> jax.Array:
        """``p(z | x)`` (0 outside ``[-b - R, b + R]``)."""
        z, x = f64(z), f64(x)
        ok = self._check_x(x)
        R = self.half_width
        val = jnp.exp(-(2.0 / self.f) * jnp.minimum(jnp.abs(z - x), R)) / self.normaliser
        val = jnp.where(jnp.abs(z) <= self.b + R, val, 0.0)
        return jnp.where(ok, val, jnp.nan)

    def cdf(self, z: ArrayLike, x: ArrayLike) -> jax.Array:
        """``P[Z <= z | x]``, piecewise: floor, rising hat side, falling hat side, floor."""
        z, x = f64(z), f64(x)
        ok = self._check_x(x)
        f, b, R, em, N = self.f, self.b, self.half_width, self.floor, self.normaliser
        zc = jnp.clip(z, -b - R, b + R)
        u = zc - x
        left = em * (zc + b + R)
        rise = em * (x + b) + 0.5 * f * (jnp.exp(-(2.0 / f) * jnp.minimum(-u, R)) - em)
        fall = em * (x + b) + 0.5 * f * (1.0 - em) - 0.5 * f * jnp.expm1(-(2.0 / f) * jnp.minimum(u, R))
        right = em * (x + b) + f * (1.0 - em) + em * (zc - x - R)
        mass = jnp.where(u <= -R, left, jnp.where(u <= 0, rise, jnp.where(u <= R, fall, right)))
        return jnp.where(ok, jnp.clip(mass / N, 0.0, 1.0), jnp.nan)

    def sample(self, key: jax.Array, x: ArrayLike) -> jax.Array:
        """One output per input, independent, by the exact inverse CDF (``x`` any shape).

        ``t = U N`` with ``U ~ Uniform[0, 1)`` falls in one of four pieces of masses
        ``e^{-m}(x + b)``, ``f(1 - e^{-m})/2`` (twice) and ``e^{-m}(b - x)``; each piece's CDF
        is inverted in closed form. Invalid ``x`` (traced) gives NaN.
        """
        x = f64(x)
        shape = broadcast_shapes_or_raise(x=x, m=self.m, f=self.f, b=self.b)
        x = jnp.broadcast_to(x, shape)
        ok = self._check_x(x)
        u = jax.random.uniform(key, shape, dtype=jnp.float64)
        return jnp.where(ok, self._quantile(u, x), jnp.nan)

    def quantile(self, u: ArrayLike, x: ArrayLike) -> jax.Array:
        """Inverse CDF ``z(u)`` of ``p(. | x)`` for ``u in [0, 1)`` (what :meth:`sample` applies)."""
        u, x = f64(u), f64(x)
        ok = self._check_x(x)
        return jnp.where(ok, self._quantile(u, x), jnp.nan)

    def _quantile(self, u, x):
        f, b, R, em, N = self.f, self.b, self.half_width, self.floor, self.normaliser
        t = u * N
        m1 = em * (x + b)
        m2 = 0.5 * f * (-jnp.expm1(-self.m))
        s2 = jnp.clip(t - m1, 0.0, m2)
        s3 = jnp.clip(t - m1 - m2, 0.0, m2)
        s4 = jnp.maximum(t - m1 - 2.0 * m2, 0.0)
        z1 = -b - R + t / em
        z2 = x + 0.5 * f * jnp.log(2.0 * s2 / f + em)
        z3 = x - 0.5 * f * jnp.log1p(-2.0 * s3 / f)
        z4 = x + R + s4 / em
        z = jnp.where(t < m1, z1, jnp.where(t < m1 + m2, z2, jnp.where(t < m1 + 2.0 * m2, z3, z4)))
        return jnp.clip(z, -b - R, b + R)

    def estimate(self, z: ArrayLike) -> jax.Array:
        """Unbiased estimate ``x_hat = N z / c`` of one report's input."""
        return f64(z) * (self.normaliser / self.slope)

    def mean_estimate(self, z: ArrayLike, axis: int | None = -1) -> jax.Array:
        """Mean of ``x_hat`` over a (shuffled) batch of reports along ``axis`` (order-free)."""
        return jnp.mean(self.estimate(z), axis=axis)

    # ---- error -------------------------------------------------------------------------
    def _k(self) -> jax.Array:
        b, R, f = self.b, self.half_width, self.f
        return (2.0 / 3.0) * self.floor * b * (b * b + 3.0 * b * R + 3.0 * R * R) + 0.5 * f ** 3 * gammainc(3.0, self.m)

    def variance(self, x: ArrayLike) -> jax.Array:
        """Exact ``Var[x_hat | x] = N K / c^2 + 2 e^{-m} (b + R) x^2 / c`` (module docstring)."""
        x = f64(x)
        ok = self._check_x(x)
        c, N = self.slope, self.normaliser
        val = N * self._k() / (c * c) + 2.0 * self.floor * (self.b + self.half_width) * x * x / c
        return jnp.where(ok, val, jnp.nan)

    def variance_bound(self, x: ArrayLike) -> jax.Array:
        """The supplement's printed bound (Supplementary E), as printed -- a bound, NOT always one.

        ``N (e^{-m} b (8 b^2 + 12 m f b + 6 m^2 f) + 6 f^3 + 3 N x^2) / (12 f^2 (1 - e^{-m} - m e^{-m})^2)``.
        Its ``6 m^2 f`` should be ``6 m^2 f^2`` (units); it is below the exact variance for large
        ``b`` with ``f > 1``. Use :meth:`variance_bound_corrected` for a guaranteed upper bound.
        """
        return self._bound(x, self.f)

    def variance_bound_corrected(self, x: ArrayLike) -> jax.Array:
        """Upper bound on ``Var[x_hat | x]``: the supplement's bound with ``6 m^2 f^2`` (always >= exact).

        Equals the exact variance plus ``(N/c^2)(f^3/2)(1 - P(3, m)) + (N/(2c) - 1)^2 x^2 >= 0``.
        """
        return self._bound(x, self.f * self.f)

    def _bound(self, x, f_or_f2):
        x = f64(x)
        ok = self._check_x(x)
        m, f, b, N, em = self.m, self.f, self.b, self.normaliser, self.floor
        g = gammainc(2.0, m)
        num = N * (em * b * (8.0 * b * b + 12.0 * m * f * b + 6.0 * m * m * f_or_f2) + 6.0 * f ** 3 + 3.0 * N * x * x)
        return jnp.where(ok, num / (12.0 * f * f * g * g), jnp.nan)

    def mean_mse(self, n: ArrayLike, second_moment: ArrayLike) -> jax.Array:
        """MSE of the mean of ``n`` reports' estimates about the mean of the ``n`` inputs.

        ``(N K / c^2 + 2 e^{-m} (b + R) s2 / c) / n`` with ``s2 = (1/n) sum x_i^2``, the data's
        second moment (exact: the reports are independent given the data; shuffling does not
        change the mean). Add ``Var(data)/n`` for the error about a population mean.
        """
        n, s2 = f64(n), f64(second_moment)
        c, N = self.slope, self.normaliser
        return (N * self._k() / (c * c) + 2.0 * self.floor * (self.b + self.half_width) * s2 / c) / n

    # ---- privacy views ---------------------------------------------------------------
    def metric(self, a: ArrayLike, b: ArrayLike) -> jax.Array:
        """Local metric ``D(a, b) = min(m, 2 |a - b| / f)``: ``p(z|a) <= e^{D(a,b)} p(z|b)`` (tight)."""
        a, b = f64(a), f64(b)
        self._check_x(a, "a")
        self._check_x(b, "b")
        return jnp.minimum(self.m, 2.0 * jnp.abs(a - b) / self.f)

    def total_variation(self, d: ArrayLike | None = None) -> jax.Array:
        """TV between the outputs of two inputs at distance ``d`` (default ``2b``: inputs ``-b, +b``).

        ``(f (1 - e^{-2 s/f}) - 2 s e^{-m}) / N`` with ``s = min(d/2, R)``; increasing in ``d``.
        """
        d = 2.0 * self.b if d is None else f64(d)
        s = jnp.minimum(0.5 * d, self.half_width)
        return (-self.f * jnp.expm1(-2.0 * s / self.f) - 2.0 * s * self.floor) / self.normaliser

    def vr_params(self) -> VRParams:
        """``VRParams(p = e^{eps0}, beta = TV(-b, +b), q = e^{eps0})`` for :func:`jaxshuffle.amplify`."""
        return witchhat_params(self.m, self.f, self.b)


def witchhat(m: ArrayLike, f: ArrayLike, b: ArrayLike) -> WitchHat:
    """WitchHat with cap ``m`` in ``(0, 700]``, width ``f > 0``, input bound ``b > 0`` (broadcast).

    Eager: ValueError naming ``m``, ``f`` or ``b`` with its value and range. Traced: NaN fields.
    The mechanism: docs/math.md section 17.

    Args:
      m: the cap, in (0, 700].
      f: the width, > 0 (finite).
      b: the input bound, > 0 (finite).

    Returns:
      The mechanism, a :class:`WitchHat` (float64 arrays of the broadcast shape).

    Raises:
      ValueError: naming ``m``, ``f`` or ``b`` with its value and range (eager calls).
    """
    require_x64()
    inp = _inputs(m, f, b)
    m, f, b = (jnp.where(inp.ok, v, jnp.nan) for v in inp.values)
    return WitchHat(m, f, b)


def witchhat_params(m: ArrayLike, f: ArrayLike, b: ArrayLike) -> VRParams:
    """Catalog row ``witchhat`` (not in the seed tables: the metric-DP supplement, sections D and E):
    ``p = q = e^{min(m, 4b/f)}``, ``beta = TV(-b, +b)`` (module docstring; docs/math.md section 17).

    Args:
      m: the cap, in (0, 700].
      f: the width, > 0 (finite).
      b: the input bound, > 0 (finite).

    Returns:
      The parameters ``(p, beta, q)`` above, a :class:`VRParams`: float64 arrays broadcast over the arguments:
        the upper-bound side (Theorem 4.7), each parameter the mechanism's own value (docs/math.md section
        8).
    """
    inp = _inputs(m, f, b)
    m, f, b = inp.values
    w = WitchHat(*(jnp.where(inp.ok, v, 1.0) for v in (m, f, b)))
    p = jnp.exp(w.eps0)
    return inp.params(p, w.total_variation(), p)


# --------------------------------------------------------------------------------------
# From the local-metric solver (jaxshuffle.metric) to WitchHat parameters
# --------------------------------------------------------------------------------------



def best_f(m: ArrayLike, b: ArrayLike, second_moment: ArrayLike = 0.0, steps: int = 200) -> jax.Array:
    """The width ``f`` minimising ``mean_mse`` at cap ``m`` (golden section on ``log(f/b)``).

    ``f/b`` is searched in ``[1e-4, 1e4]`` (the variance is unimodal in ``f`` there on every
    grid tested: ``tests/test_witchhat.py::test_best_f_is_a_minimum``).
    """
    m, b, s2 = f64(m), f64(b), f64(second_moment)

    def obj(lf):
        return WitchHat(m, b * jnp.exp(lf), b).mean_mse(1.0, s2)

    lo = jnp.full(jnp.broadcast_shapes(m.shape, b.shape, s2.shape), math.log(1e-4))
    hi = jnp.full_like(lo, math.log(1e4))

    return b * jnp.exp(golden_section(obj, lo, hi, steps=steps))


def witchhat_from_local_metric(points: ArrayLike, local: ArrayLike, b: ArrayLike,
                               second_moment: ArrayLike = 0.0) -> tuple[jax.Array, jax.Array]:
    """WitchHat ``(m, f)`` whose metric on ``points`` is ``<= local`` entrywise (one or a batch).

    Args:
      points: ``(k,)`` inputs in ``[-b, b]`` (the domain on which the target metric is given).
      local: ``(..., k, k)`` local semi-metrics, e.g. ``local_metric_candidates(...).local``.
      b: input bound.
      second_moment: data second moment for choosing ``f`` (see below; default 0).

    ``m`` is the candidate's diameter ``max local``; edges with ``local < m`` need
    ``2 |a - b'| / f <= local(a, b')``, i.e. ``f >= f_min = max 2 |a - b'| / local``; among those
    ``f`` the one with the smallest :meth:`WitchHat.mean_mse` is taken
    (``max(f_min, best_f(m))``; the MSE is unimodal in ``f``). Then ``min(m, 2|a-b'|/f) <= local``
    on every edge and the WitchHat's diameter on ``[-b, b]`` is ``min(m, 4b/f) <= max local``
    when ``points`` include ``-b`` and ``b`` (otherwise compare ``eps0`` with ``max local``), so
    an amplified bound that increases in the distances and the diameter (Corollaries 1, 2)
    stays below the candidate's (docs/math.md section 17, "From the local-metric solver to WitchHat").

    Returns:
      ``(m, f)``: float64 arrays of ``local``'s batch shape (``local.shape[:-2]``); NaN where a candidate has
        no positive diameter or a zero local distance between distinct points. Not validated further: nothing
        raises.
    """
    pts, L, b = f64(points), f64(local), f64(b)
    d = jnp.broadcast_to(jnp.abs(pts[:, None] - pts[None, :]), L.shape)
    edge = d > 0
    m = jnp.max(jnp.where(edge, L, 0.0), axis=(-2, -1))
    below = edge & (L < m[..., None, None])
    need = jnp.where(below, 2.0 * d / jnp.where(below, L, 1.0), 0.0)
    f_min = jnp.max(need, axis=(-2, -1))
    f = jnp.maximum(f_min, best_f(jnp.maximum(m, 1e-300), b, second_moment))
    bad = ~(m > 0) | jnp.any(edge & ~(L > 0), axis=(-2, -1))
    return jnp.where(bad, jnp.nan, m), jnp.where(bad, jnp.nan, f)


def witchhat_from_candidates(candidates, points: ArrayLike, b: ArrayLike, n, delta, corollary: Literal[1, 2],
                             second_moment: ArrayLike = 0.0):
    """WitchHat parameters for each of the solver's candidates, with their amplified distances.

    ``candidates`` is a :class:`jaxshuffle.metric.LocalMetricCandidates` for a target on
    ``points`` (a ``(k, k)`` matrix). Returns ``(m, f, amplified)``: ``(M,)`` caps and widths
    (:func:`witchhat_from_local_metric`) and the ``(M, k, k)`` amplified distances of the
    WitchHat's own metric with diameter ``eps0`` (:func:`jaxshuffle.metric.amplified_distance`),
    which are ``<=`` the candidate's amplified distances, hence ``<=`` the target (docs/math.md
    section 17, "From the local-metric solver to WitchHat").

    Args:
      candidates: a :class:`jaxshuffle.metric.LocalMetricCandidates` (its ``local``, ``(M, k, k)``).
      points: the ``(k,)`` points the target metric is given on, in ``[-b, b]``.
      b: the input bound.
      n: number of users.
      delta: target delta, in (0, 1).
      corollary: which amplification corollary gives the amplified distances, 1 or 2.
      second_moment: data second moment for choosing ``f`` (default 0), as
        :func:`witchhat_from_local_metric`.

    Returns:
      ``(m, f, amplified)`` as above: the amplified distances are the corollary's closed form (docs/math.md
        section 7; an upper bound by that corollary, not certified by the numerical engine).
    """
    from jaxshuffle.metric import (
        amplified_distance,  # lazy: keeps the randomizers package light
    )

    pts = f64(points)
    m, f = witchhat_from_local_metric(pts, candidates.local, b, second_moment)
    w = WitchHat(m, f, f64(b) * jnp.ones_like(m))
    dist = jnp.minimum(m[:, None, None], 2.0 * jnp.abs(pts[:, None] - pts[None, :])[None] / f[:, None, None])
    amp = amplified_distance(dist, w.eps0[:, None, None], n, delta, corollary)
    return m, f, jnp.where(dist > 0, amp, 0.0)
