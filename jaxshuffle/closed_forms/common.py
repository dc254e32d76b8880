"""Shared conventions of the closed forms: broadcasting, the ``(value, valid)`` rule, input domains.

Every closed form returns ``(value, valid)``: an upper bound on epsilon where ``valid``, ``+inf``
elsewhere, never NaN (:func:`finish`). Eager calls raise ValueError for inputs outside the domain;
traced calls mask them (package convention, ``jaxshuffle._config``).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxshuffle._config import broadcast_shapes_or_raise, check, f64, is_concrete
from jaxshuffle.engine.two_count.pair import beta_valid, vr_fields, worst_case_beta


def prep(**named):
    """float64 arrays broadcast to a common shape; (dict, concrete?)."""
    arrs = {k: f64(v) for k, v in named.items()}
    shape = broadcast_shapes_or_raise(**arrs)
    arrs = {k: jnp.broadcast_to(v, shape) for k, v in arrs.items()}
    return arrs, is_concrete(*arrs.values())


def finish(value, valid):
    """Apply the (value, valid) convention: +inf where invalid, never NaN."""
    valid = valid & jnp.isfinite(value)
    return jnp.where(valid, value, jnp.inf), valid


def safe(mask, x, fill):
    """x where mask, else a harmless fill (double-where: keeps NaN out of every branch)."""
    return jnp.where(mask, x, fill)


def n_domain(n):
    return (n >= 2) & (n == jnp.floor(n)) & jnp.isfinite(n)


def check_n(n):
    check(n_domain(n), "n", "must be an integer >= 2 (finite)", value=n)


def delta_domain(delta):
    return (delta > 0) & (delta < 1)


def check_delta(delta):
    check(delta_domain(delta), "delta", "must lie in (0, 1)", value=delta)


def eps0_domain(eps0):
    return (eps0 >= 0) & jnp.isfinite(eps0)


def check_eps0(eps0):
    check(eps0_domain(eps0), "eps0", "must be finite and >= 0", value=eps0)


def vr_quantities(p, beta, q):
    """(alpha, alpha*p, (p-1)*alpha, w, r, domain_ok) of the VR pair, p = inf allowed.

    alpha = beta/(p-1) (0 for p = inf), alpha p = beta p/(p-1) (beta for p = inf),
    (p-1) alpha = beta, w = 1 - (p+1) alpha, r = alpha p / q; the one rounding rule of
    :func:`jaxshuffle.pair.vr_fields` (a worst-case beta gives w = 0 exactly).
    """
    dom = (p >= 1) & beta_valid(p, beta) & (q >= 1)
    beta = jnp.minimum(beta, worst_case_beta(p))
    u, v, w, alpha_p = vr_fields(p, beta)
    r = alpha_p / jnp.where(q >= 1, q, 1.0)
    dom = dom & (2 * r <= 1.0)
    return v, alpha_p, beta, w, r, dom


def check_vr(p, beta, q):
    check(p >= 1, "p", "must be >= 1 (p = e^eps0; inf allowed)", value=p)
    check(beta_valid(p, beta), "beta", "must lie in [0, (p-1)/(p+1)] (in [0, 1] when p = inf)", value=beta)
    check(q >= 1, "q", "must be >= 1", value=q)


def ldp_prelude(n, eps0, delta):
    """Shared start of the eps0-LDP closed forms: broadcast, validate (eagerly), domain mask.

    Returns ``(n, eps0, delta, dom)`` with harmless values off the domain (``n = 2``,
    ``eps0 = 0``, ``delta = 1/2``), so no branch computes a NaN.
    """
    arrs, concrete = prep(n=n, eps0=eps0, delta=delta)
    n, eps0, delta = arrs["n"], arrs["eps0"], arrs["delta"]
    if concrete:
        check_n(n)
        check_eps0(eps0)
        check_delta(delta)
    dom = n_domain(n) & eps0_domain(eps0) & delta_domain(delta)
    return safe(dom, n, 2.0), safe(dom, eps0, 0.0), safe(dom, delta, 0.5), dom
