"""Local metric solvers for shuffle metric DP ([MDP] Algorithms 1 and 3).

Problem. A global (shuffled) privacy target is given as a metric ``D#`` on the data
domain: after shuffling ``n`` reports, each edge ``(a, b)`` must satisfy
``(D#(a,b), delta)``-indistinguishability. A *local* semi-metric ``D`` (the metric the
local randomizer satisfies) is **feasible** when its amplified distance does not exceed
the target on every edge::

    amplified_D(a, b) = min(D(a,b), F(D(a,b), diam D)) <= D#(a, b)

where ``F`` is the closed-form amplification of Corollary 1 (Algorithm 1) or
Corollary 2 (Algorithm 3), both of which only need the local diameter
``diam D = max D`` (through ``max_c e^{D(a,c)} + e^{D(b,c)} <= 2 e^{diam D}``), and
``F(v, m) = v`` (no amplification) where the corollary's condition fails for
diameter ``m``. Larger local distances mean less local noise, so the solver returns
the Pareto set (elementwise-maximal) of feasible local semi-metrics.

Algorithm (supplement Algorithm 3, and Algorithm 1 "following similar procedures"
with Corollary 1; Algorithm 1's listing is not in the seed, it is reconstructed from
its Pareto-optimality proof in Supplementary Material C). For a candidate diameter
``m``::

    D^m(a,b) = min(m, max(D#(a,b), Solve[F(v, m) <= D#(a,b), v]))   if F amplifies at m
    D^m(a,b) = D#(a,b)                                              otherwise

``Solve[F(v, m) <= x, v]`` is the largest such ``v`` (F increases in v), in closed form:
``F(v, m) = log(1 + tanh(v/2) K_m)`` so ``v = 2 artanh(min(1, (e^x - 1)/K_m))``
(``+inf`` when every ``v`` amplifies below ``x``; then the cap ``m`` applies).
Candidate diameters run over ``[low, high]``::

    low  = max(D#_min, min(Solve[F(v, v) <= D#_min, v], m_cond))
    high = max(D#_max, min(Solve[F(v, v) <= D#_max, v], m_cond))

with ``m_cond`` the largest diameter at which the corollary amplifies
(Corollary 2: ``n - 1 >= 16 e^m log(4/delta)``; Corollary 1: ``Omega_m > 2 log(4/delta)``).
Diameters below ``low`` are dominated by ``D^low``; above ``high`` an edge at distance
``m`` would exceed ``D#_max``.

Input/output format (batched over edges):

* ``d_target``: float64 array of any shape (e.g. the full symmetric ``(k, k)``
  matrix with zero diagonal, or a flat vector of edge distances). Entries are the
  target global distances ``D#(a, b) >= 0``; zero entries (self-distances) stay zero.
  ``D#_min`` / ``D#_max`` are taken over the positive entries.
* Output :class:`LocalMetricCandidates` with ``M = num`` candidates:
  ``m`` ``(M,)`` diameters (ascending), ``local`` ``(M, *d_target.shape)`` the local
  semi-metrics, ``amplified`` ``(M, *d_target.shape)`` their amplified distances
  (``<= d_target`` entrywise, up to rounding), ``pareto`` ``(M,)`` True for candidates
  not dominated by another candidate (duplicates keep the first). Fixed shapes, so the
  solver is jit-compatible; :meth:`LocalMetricCandidates.front` lists the Pareto set.

[MDP] seed metric-shuffle-dp-supplement: Supplementary Material A (Corollaries 1, 2),
C (Pareto optimality of Algorithm 1), F (Algorithm 3, Theorem 6).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._bisect import bisect_jax
from jaxshuffle._config import check, f64, is_concrete
from jaxshuffle.closed_forms import metric_corollary1, metric_corollary2

Corollary = Literal[1, 2]

__all__ = [
    "LocalMetricCandidates",
    "amplified_distance",
    "amplification_diameter_limit",
    "solve_local_distance",
    "local_metric_candidates",
    "local_metrics_algorithm1",
    "local_metrics_algorithm3",
]

_BISECT_STEPS = 100


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class LocalMetricCandidates:
    """Candidate local semi-metrics for a global metric target (see module docstring).

    Attributes:
      m: ``(M,)`` candidate diameters, ascending.
      local: ``(M, *edge_shape)`` local distances of each candidate.
      amplified: ``(M, *edge_shape)`` amplified (shuffled) distance of each edge.
      pareto: ``(M,)`` bool, True for non-dominated candidates.
    """

    m: jax.Array
    local: jax.Array
    amplified: jax.Array
    pareto: jax.Array

    def front(self) -> list[np.ndarray]:
        """The Pareto set as a list of numpy arrays (eager use only), in ascending ``m``."""
        mask = np.asarray(self.pareto)
        return [np.asarray(x) for x, keep in zip(self.local, mask) if keep]


def _log4d(delta):
    return jnp.log(4 / delta)


def amplification_diameter_limit(n, delta, corollary: Corollary):
    """Largest local diameter ``m`` at which the corollary amplifies (may be negative).

    Corollary 2: ``n - 1 >= 16 e^m L`` => ``m_cond = log((n-1)/(16 L))``.
    Corollary 1: ``Omega_m = (n-1)e^-m - sqrt(3 (n-1) e^-m L) > 2L`` => with
    ``y = sqrt((n-1) e^-m)``: ``y > sqrt(L)(sqrt(3) + sqrt(11))/2``, so
    ``m_cond = log((n-1)/y^2)`` (the boundary itself is excluded: strict inequality).
    """
    n, delta = f64(n), f64(delta)
    L = _log4d(delta)
    if corollary == 2:
        return jnp.log((n - 1) / (16 * L))
    y2 = L * ((np.sqrt(3.0) + np.sqrt(11.0)) / 2) ** 2
    return jnp.log((n - 1) / y2)


def _gain(m, n, delta, corollary: Corollary):
    """(K_m, amplifies): F(v, m) = log(1 + tanh(v/2) K_m) where ``amplifies``."""
    L = _log4d(delta)
    if corollary == 2:
        R = 2 * jnp.exp(m)
        ok = n - 1 >= 8 * L * R
        K = 8 * (jnp.sqrt(R * L / (2 * (n - 1))) + R / (2 * (n - 1)))
        return K, ok
    mu = (n - 1) * jnp.exp(-m)
    omega = mu - jnp.sqrt(3 * mu * L)
    ok = (omega > 2 * L) & (mu >= 3 * L)
    om = jnp.where(ok, omega, 4 * L + 1)
    s = jnp.sqrt(om * L / 2)
    return (2 * s + 1) / (om / 2 - s), ok


def amplified_distance(v, m, n, delta, corollary: Corollary):
    """Amplified distance of an edge at local distance ``v`` in a metric of diameter ``m``.

    ``min(v, F(v, m))`` where the corollary applies at diameter ``m`` (the value of
    :func:`jaxshuffle.closed_forms.metric_corollary1` /
    ``metric_corollary2(n, v, 2 e^m, delta)``), else ``v`` itself. Requires ``v <= m``.
    """
    v, m, n, delta = (f64(x) for x in (v, m, n, delta))
    if corollary == 1:
        val, ok = metric_corollary1(n, v, m, delta)
    else:
        val, ok = metric_corollary2(n, v, 2 * jnp.exp(m), delta)
    return jnp.where(ok, val, v)


def solve_local_distance(target, m, n, delta, corollary: Corollary):
    """``min(m, max(target, Solve[F(v, m) <= target, v]))`` if F amplifies at ``m``, else ``target``.

    The largest local distance (capped at the diameter ``m``) whose amplified distance
    is at most ``target``. Broadcasts over ``target`` and ``m``.
    """
    target, m, n, delta = (f64(x) for x in (target, m, n, delta))
    K, ok = _gain(m, n, delta, corollary)
    z = jnp.expm1(target) / K
    below = z < 1
    v = jnp.where(below, 2 * jnp.arctanh(jnp.where(below, z, 0.0)), jnp.inf)
    v = jnp.minimum(m, jnp.maximum(target, v))
    return jnp.where(ok, v, target)


def _solve_diag(x, n, delta, corollary: Corollary, m_cond):
    """sup{v in [0, m_cond] : F(v, v) <= x} (0 if none; F(v, v) increases in v)."""
    hi0 = jnp.maximum(m_cond, 0.0)

    def f(v):
        K, ok = _gain(v, n, delta, corollary)
        return ok & (jnp.log1p(jnp.tanh(v / 2) * K) <= x)

    # the feasible side is below: bisect on "infeasible", so lo stays a verified-feasible point (or 0)
    lo, _ = bisect_jax(lambda v: ~f(v), jnp.zeros_like(hi0), hi0, steps=_BISECT_STEPS)
    return jnp.where(f(hi0), hi0, lo)


def local_metric_candidates(d_target, n, delta, corollary: Corollary, num: int = 64):
    """Feasible local semi-metrics for the global target ``d_target`` (module docstring).

    Args:
      d_target: target global distances, any shape, entries ``>= 0``, at least one > 0.
      n: number of users (integer >= 2).
      delta: the global delta in (0, 1).
      corollary: 1 (Algorithm 1, Corollary 1) or 2 (Algorithm 3, Corollary 2).
      num: number of candidate diameters on ``[low, high]`` (static).

    Returns:
      :class:`LocalMetricCandidates`.

    Raises ValueError (eagerly) for bad input; under tracing, invalid input yields NaN
    fields (no claim).
    """
    if corollary not in (1, 2):
        raise ValueError("corollary: must be 1 (Algorithm 1) or 2 (Algorithm 3)")
    if num < 1:
        raise ValueError("num: must be >= 1")
    d = f64(d_target)
    n, delta = f64(n), f64(delta)
    if np.ndim(n) or np.ndim(delta):
        raise ValueError("n, delta: must be scalars (batch over edges through d_target)")
    if is_concrete(d, n, delta):
        check((d >= 0) & jnp.isfinite(d), "d_target", "entries must be finite and >= 0")
        check(jnp.any(d > 0), "d_target", "needs at least one positive distance")
        check((n >= 2) & (n == jnp.floor(n)) & jnp.isfinite(n), "n", "must be an integer >= 2", value=n)
        check((delta > 0) & (delta < 1), "delta", "must lie in (0, 1)", value=delta)
    return _candidates_core(d, n, delta, corollary, num)


@jax.jit(static_argnames=("corollary", "num"))
def _candidates_core(d, n, delta, corollary, num):
    bad = (~jnp.all((d >= 0) & jnp.isfinite(d)) | ~jnp.any(d > 0) | ~(n >= 2) | ~(n == jnp.floor(n))
           | ~((delta > 0) & (delta < 1)))
    n_s = jnp.where(bad, 2.0, n)
    delta_s = jnp.where(bad, 0.5, delta)
    pos = d > 0
    d_min = jnp.min(jnp.where(pos, d, jnp.inf))
    d_max = jnp.max(jnp.where(pos, d, 0.0))
    m_cond = amplification_diameter_limit(n_s, delta_s, corollary)
    low = jnp.maximum(d_min, jnp.minimum(_solve_diag(d_min, n_s, delta_s, corollary, m_cond), m_cond))
    high = jnp.maximum(d_max, jnp.minimum(_solve_diag(d_max, n_s, delta_s, corollary, m_cond), m_cond))
    frac = jnp.linspace(0.0, 1.0, num) if num > 1 else jnp.zeros((1,))
    ms = low + (high - low) * frac
    mb = ms.reshape((num,) + (1,) * d.ndim)
    local = solve_local_distance(d[None], mb, n_s, delta_s, corollary)
    local = jnp.where(pos[None], local, 0.0)
    # Check feasibility with each candidate's actual diameter (<= m where F amplifies;
    # = D#_max where it does not and the candidate is the target itself).
    diam = jnp.max(local.reshape(num, -1), axis=1).reshape(mb.shape)
    amp = amplified_distance(local, diam, n_s, delta_s, corollary)
    amp = jnp.where(pos[None], amp, 0.0)
    flat = local.reshape(num, -1)
    ge = jnp.all(flat[:, None, :] >= flat[None, :, :], axis=-1)  # ge[j, i]: j >= i
    gt = jnp.any(flat[:, None, :] > flat[None, :, :], axis=-1)
    idx = jnp.arange(num)
    dup_before = ge & ~gt & (idx[:, None] < idx[None, :])  # equal and earlier
    dominated = jnp.any((ge & gt) | dup_before, axis=0)
    out = LocalMetricCandidates(ms, local, amp, ~dominated)
    nan = jnp.nan  # invalid (traced) input: no claim
    out = LocalMetricCandidates(
        jnp.where(bad, nan, out.m), jnp.where(bad, nan, out.local),
        jnp.where(bad, nan, out.amplified), out.pareto & ~bad)
    return out


def local_metrics_algorithm1(d_target, n, delta, num: int = 64) -> LocalMetricCandidates:
    """Algorithm 1: feasible local semi-metrics with respect to Corollary 1."""
    return local_metric_candidates(d_target, n, delta, 1, num)


def local_metrics_algorithm3(d_target, n, delta, num: int = 64) -> LocalMetricCandidates:
    """Algorithm 3: feasible local semi-metrics with respect to Corollary 2.

    The seed's condition ``n >= 16 e^m log(4/delta)`` is used as ``n - 1 >= ...``
    (Corollary 2's ``n - 1 >= 8 L R`` with ``R = 2 e^m``), one user stricter.
    """
    return local_metric_candidates(d_target, n, delta, 2, num)
