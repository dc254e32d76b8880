"""Closed forms of the shuffle model of metric DP (seed metric-shuffle-dp-supplement, Theorem 1, Corollaries 1, 2).

docs/math.md section 7.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxshuffle._config import check
from jaxshuffle.closed_forms.common import (
    check_delta,
    check_n,
    delta_domain,
    finish,
    n_domain,
    prep,
    safe,
)

# r_max may fall short of 1 + e^{d_ab} by this relative amount (rounding) eagerly.
_R_TOL = 1e-12

def _metric_common(n, d_ab, r_max, delta, concrete, r_name):
    if concrete:
        check_n(n)
        check_delta(delta)
        check((d_ab >= 0) & jnp.isfinite(d_ab), "d_ab", "must be finite and >= 0", value=d_ab)
        check(r_max >= (1 + jnp.exp(d_ab)) * (1 - _R_TOL), r_name,
              "must be >= 1 + e^{d_ab} (the maximum over c includes c = a)")
    return (n_domain(n) & delta_domain(delta) & (d_ab >= 0) & jnp.isfinite(d_ab)
            & (r_max >= (1 + jnp.exp(d_ab)) * (1 - _R_TOL)) & jnp.isfinite(r_max))


def _metric_thm1_core(n, d_ab, r_max, delta, dom):
    n = safe(dom, n, 2.0)
    delta = safe(dom, delta, 0.5)
    r_max = safe(dom, r_max, 2.0)
    d_ab = safe(dom, d_ab, 0.0)
    L = jnp.log(4 / delta)
    pc = 2 / r_max
    mu = (n - 1) * pc
    omega = mu - jnp.sqrt(3 * mu * L)
    valid = dom & (omega > 2 * L) & (mu >= 3 * L)
    om = safe(valid, omega, 4 * L + 1)
    s = jnp.sqrt(om * L / 2)
    ratio_m1 = (2 * s + 1) / (om / 2 - s)  # e^{eps'} - 1
    value = jnp.minimum(d_ab, jnp.log1p(jnp.tanh(d_ab / 2) * ratio_m1))
    return finish(value, valid)


def metric_theorem1(n, d_ab, r_max, delta):
    """Shuffle metric DP, Theorem 1 (Eq. 1), for one edge (a, b). Upper bound on eps.

    ``d_ab = D(a, b)`` is the local metric distance of the edge and
    ``r_max = max_c e^{D(a,c)} + e^{D(b,c)}`` ([MDP] Supplement A, Steps 1-3;
    docs/math.md section 7). With ``L = log(4/delta)``, ``pc = 2/r_max``::

        Omega   = (n-1) pc - sqrt(3 (n-1) pc L)
        e^eps'  = 1 + (2 sqrt(Omega L/2) + 1) / (Omega/2 - sqrt(Omega L/2))
        eps     = min(D(a,b), log(1 + (e^D - 1)/(e^D + 1) (e^eps' - 1)))

    The mixture factor is ``(e^D-1)/(e^D+1)`` (as in Corollary 2; advanced joint
    convexity of the victim's symmetric binary mixture); Step 3's text says
    ``e^D/(e^D+1)``, which is valid but looser. ``min`` with ``D(a,b)``: the pair's
    likelihood ratio never exceeds ``e^D``.

    Valid where ``Omega > 2L`` (positive denominator; the ratio bound then decreases in
    the clone count C) and ``(n-1) pc >= 3 L`` (multiplicative Chernoff with deviation
    below the mean). Bounds the pair ``u = e^D/(e^D+1), v = 1/(e^D+1), w = 0,
    r0 = r1 = 1/r_max``. Raises (eagerly) if ``r_max < 1 + e^{d_ab}``.
    """
    arrs, concrete = prep(n=n, d_ab=d_ab, r_max=r_max, delta=delta)
    n, d_ab, r_max, delta = (arrs[k] for k in ("n", "d_ab", "r_max", "delta"))
    dom = _metric_common(n, d_ab, r_max, delta, concrete, "r_max")
    return _metric_thm1_core(n, d_ab, r_max, delta, dom)


def metric_corollary1(n, d_ab, d_max, delta):
    """Shuffle metric DP, Corollary 1 (Eq. 2). Upper bound on eps.

    Theorem 1 with ``r_max`` replaced by its upper bound ``2 e^{D_max}`` (``D_max`` is
    the local metric's diameter): needs only ``d_max`` instead of the per-edge maximum.
    Same formula and conditions as :func:`metric_theorem1` with ``pc = e^{-D_max}``.
    Bounds the pair ``u = e^D/(e^D+1), v = 1/(e^D+1), w = 0, r0 = r1 = e^{-D_max}/2``.
    Requires ``d_max >= d_ab`` (ValueError eagerly).
    """
    arrs, concrete = prep(n=n, d_ab=d_ab, d_max=d_max, delta=delta)
    n, d_ab, d_max, delta = (arrs[k] for k in ("n", "d_ab", "d_max", "delta"))
    if concrete:
        check_n(n)
        check_delta(delta)
        check((d_ab >= 0) & jnp.isfinite(d_ab), "d_ab", "must be finite and >= 0", value=d_ab)
        check((d_max >= d_ab) & jnp.isfinite(d_max), "d_max", "must be finite and >= d_ab", value=d_max)
    r_max = 2 * jnp.exp(d_max)
    dom = _metric_common(n, d_ab, r_max, delta, False, "d_max") & (d_max >= d_ab)
    return _metric_thm1_core(n, d_ab, r_max, delta, dom)


def metric_corollary2(n, d_ab, r_max, delta):
    """Shuffle metric DP, Corollary 2 (Eq. 3, simplified). Upper bound on eps.

    ([MDP] Supplement A Step 4; docs/math.md section 7), ``L = log(4/delta)``::

        eps = min(D(a,b), log(1 + 8 (e^D - 1)/(e^D + 1) (sqrt(r_max L / (2(n-1))) + r_max/(2(n-1)))))

    Valid where ``n - 1 >= 8 L r_max`` (the supplement writes ``n > 8 L R``; with
    ``n - 1`` the Step-4 inequalities ``Omega/2 - sqrt(Omega L/2) >= Omega/4 >= (n-1)pc/8``
    hold). Bounds the same pair as :func:`metric_theorem1`. The ``min`` with ``D(a,b)``
    is added as in Theorem 1 (the pair's ratio never exceeds ``e^D``).
    """
    arrs, concrete = prep(n=n, d_ab=d_ab, r_max=r_max, delta=delta)
    n, d_ab, r_max, delta = (arrs[k] for k in ("n", "d_ab", "r_max", "delta"))
    dom = _metric_common(n, d_ab, r_max, delta, concrete, "r_max")
    n = safe(dom, n, 2.0)
    delta = safe(dom, delta, 0.5)
    r_max = safe(dom, r_max, 2.0)
    d_ab = safe(dom, d_ab, 0.0)
    L = jnp.log(4 / delta)
    valid = dom & (n - 1 >= 8 * L * r_max)
    tail = jnp.sqrt(r_max * L / (2 * (n - 1))) + r_max / (2 * (n - 1))
    value = jnp.minimum(d_ab, jnp.log1p(8 * jnp.tanh(d_ab / 2) * tail))
    return finish(value, valid)
