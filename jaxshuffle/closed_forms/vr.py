"""Closed forms of the variation-ratio paper: Theorem 4.2 (corrected, docs/math.md section 7) and Theorem 4.3.

They bound the epsilon of the Theorem 4.7 pair ``vr_pair(p, beta, q)``, which is a certified
upper bound on the shuffled mechanism only at the worst-case beta (docs/math.md section 3).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxshuffle._config import check
from jaxshuffle.closed_forms.common import (
    check_delta,
    check_n,
    check_vr,
    delta_domain,
    finish,
    n_domain,
    prep,
    safe,
    vr_quantities,
)


def _vr_prelude(n, delta, p, beta, q):
    """Shared start of the variation-ratio closed forms: broadcast, validate (eagerly), derive
    ``(alpha, alpha p, (p-1) alpha, w, r)``, and the domain mask with ``n, delta`` made safe off it."""
    arrs, concrete = prep(n=n, delta=delta, p=p, beta=beta, q=q)
    n, delta, p, beta, q = (arrs[k] for k in ("n", "delta", "p", "beta", "q"))
    if concrete:
        check_n(n)
        check_delta(delta)
        check_vr(p, beta, q)
    alpha, alpha_p, pm1_alpha, w, r, dom_vr = vr_quantities(p, beta, q)
    if concrete:
        check(dom_vr, "q", "too small: the others' marker probability 2 alpha p/q must be <= 1")
    dom = n_domain(n) & delta_domain(delta) & dom_vr
    return safe(dom, n, 2.0), safe(dom, delta, 0.5), p, beta, q, (alpha, alpha_p, pm1_alpha, w, r), dom


def vr_theorem42(n, delta, p, beta, q):
    """Variation-ratio Theorem 4.2 ("analytic" bound), corrected form. Upper bound on eps.

    Bounds the epsilon at ``delta`` of the Theorem 4.7 pair ``vr_pair(p, beta, q)``
    ([VR] Theorem 4.2, proof in Appendix F; docs/math.md section 7). With
    ``alpha = beta/(p-1)``, ``r = alpha p/q``, ``L = log(4/delta)``, ``m = sqrt(L/2)``::

        Omega = 2 r (n-1) - sqrt(min(6 r, 1/2) (n-1) L)
        K     = (1 - alpha - alpha p) r / (1 - 2 r)          (0 when w = 1-(p+1)alpha = 0)
        A     = (p+1) alpha / 2 - K
        Den   = alpha Omega + beta (Omega/2 - sqrt(Omega L/2)) + K (n-1-Omega)
        eps   = log(1 + beta (2 sqrt(Omega L/2) + 1) / Den)

    The paper prints ``1 + [beta(2s+1) + beta(Omega/2 - s)]/(alpha Omega) + ...``: a
    typo; the formula above is the last line of its proof, ``1 + F(Omega)``.

    Valid (``valid == True``) where all of these hold:

    * ``p > 1`` (or ``p = inf``), ``beta > 0``, ``2 r < 1`` or ``w = 0``;
    * ``Omega > 0``;
    * ``A >= 0`` and ``2 m A Omega + 2 A sqrt(Omega) > 2 m K (n-1) + beta m``: F(C)
      decreases for every ``C >= Omega`` (docs/math.md section 7; re-derived: with
      ``x = sqrt(C)``, ``dF/dx`` has the sign of ``-2mAx^2 - 2Ax + 2mK(n-1) + beta m``);
    * ``Den > 0``. The shared reference's condition omitted this; without it the conditions above
      admit a negative denominator, i.e. a negative or NaN "bound" (e.g. ``p = e^3``,
      worst-case beta, ``q = p``, ``delta = 1e-4``, ``n = 400``: ``Den = -2.1``). With
      ``Den(sqrt(Omega)) > 0`` and F decreasing, the denominator stays positive for all
      ``C >= Omega`` (F would otherwise blow up to +inf before a root).

    ``p = inf`` (multi-message rows) uses ``alpha = 0``, ``alpha p = beta``.
    """
    n, delta, p, beta, q, (alpha, alpha_p, pm1_alpha, w, r), dom = _vr_prelude(n, delta, p, beta, q)

    L = jnp.log(4.0 / delta)
    m = jnp.sqrt(L / 2)
    nm1 = n - 1
    r_ok = (2 * r < 1) | (w == 0)
    one_m2r = jnp.where(2 * r < 1, 1 - 2 * r, 1.0)
    K = jnp.where(w == 0, 0.0, w * r / one_m2r)
    A = (alpha_p + alpha) / 2 - K
    omega = 2 * r * nm1 - jnp.sqrt(jnp.minimum(6 * r, 0.5) * nm1 * L)
    pos = omega > 0
    omega_s = safe(pos, omega, 1.0)
    sq = jnp.sqrt(omega_s)
    s = m * sq  # sqrt(Omega L / 2)
    den = alpha * omega_s + pm1_alpha * (omega_s / 2 - s) + K * (nm1 - omega_s)
    decreasing = (A >= 0) & (2 * m * A * omega_s + 2 * A * sq > 2 * m * K * nm1 + pm1_alpha * m)
    valid = dom & ((p > 1) | jnp.isinf(p)) & (beta > 0) & r_ok & pos & decreasing & (den > 0)
    value = jnp.log1p(pm1_alpha * (2 * s + 1) / safe(valid, den, 1.0))
    return finish(value, valid)


def vr_theorem43(n, delta, p, beta, q):
    """Variation-ratio Theorem 4.3 ("asymptotic" bound). Upper bound on eps.

    Bounds the epsilon at ``delta`` of ``vr_pair(p, beta, q)`` ([VR] Theorem 4.3, proof
    in Appendix G; docs/math.md section 7)::

        r   = p beta / ((p-1) q),    X = beta (1+p)/(p-1) = (p+1) alpha
        c_r = max(0, 4 (1 - 3r) / (9 (1 - 2r)))
        eps = log(1 + beta / (X + (1 - X) c_r) * (sqrt(32 log(4/delta) / (r (n-1))) + 4/(r n)))

    (the paper's ``beta/((1-v)(1+p)beta/(p-1) + v)`` with ``v = c_r``; the appendix's
    last line ``(1-beta)(1+p)/(p-1) c_r`` is a typo of ``(1 - X) c_r``.)

    Valid where ``p > 1`` (or ``p = inf``), ``beta > 0``, ``r < 1/2`` and the theorem's
    condition ``n >= 8 log(2/delta) / r`` hold. ``p = inf`` uses ``X = beta``, ``r = beta/q``.
    """
    n, delta, p, beta, q, (alpha, alpha_p, pm1_alpha, w, r), dom = _vr_prelude(n, delta, p, beta, q)
    rpos = (r > 0) & (2 * r < 1)
    r_s = safe(rpos, r, 0.25)
    X = alpha_p + alpha
    c_r = jnp.maximum(0.0, 4 * (1 - 3 * r_s) / (9 * (1 - 2 * r_s)))
    valid = dom & ((p > 1) | jnp.isinf(p)) & (beta > 0) & rpos & (n * r_s >= 8 * jnp.log(2 / delta))
    tail = jnp.sqrt(32 * jnp.log(4 / delta) / (r_s * (n - 1))) + 4 / (r_s * n)
    value = jnp.log1p(pm1_alpha / (X + (1 - X) * c_r) * tail)
    return finish(value, valid)
