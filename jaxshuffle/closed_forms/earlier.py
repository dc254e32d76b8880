"""Earlier closed forms for eps0-LDP randomizers: EFMRTT'19, the clone bounds FMT'21 and FMT'23.

Written from the public statements; labelled ``reference`` by :func:`jaxshuffle.compare`, never certified.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxshuffle.closed_forms.common import finish, ldp_prelude


def efmrtt19(n, eps0, delta):
    """Erlingsson et al. (SODA 2019) amplification by shuffling. Upper bound on eps.

    For any eps0-LDP local randomizer, the shuffled (or uniformly permuted,
    sequentially adaptive) protocol is ``(eps, delta)``-DP with::

        eps = 12 eps0 sqrt(log(1/delta) / n)

    ([EFMRTT19], amplification-by-shuffling theorem for eps0 < 1/2; the VR paper quotes
    it as ``(eps0 sqrt(144 log(1/delta)/n), delta)``.) Valid in the theorem's regime
    ``eps0 <= 1/2``, ``n >= 1000``, ``delta <= 1/100`` (the regime encoded in Balle et
    al.'s reference implementation of [EFMRTT19]). No other simplification: where the
    regime fails the result is ``+inf``/invalid, never eps0.
    """
    n, eps0, delta, dom = ldp_prelude(n, eps0, delta)
    valid = dom & (eps0 <= 0.5) & (n >= 1000) & (delta <= 0.01)
    value = 12 * eps0 * jnp.sqrt(jnp.log(1 / delta) / n)
    return finish(value, valid)


def fmt21_closed_form(n, eps0, delta):
    """Feldman-McMillan-Talwar 2021 ("hiding among the clones") closed form. Upper bound.

    [FMT21] Theorem 3.1: for eps0-LDP randomizers and ``eps0 <= log(n / (16 log(2/delta)))``::

        eps = log(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 log(4/delta) / n) + 8 e^eps0 / n))

    Derivation (re-checked): the standard clone pair (``standard_clone_pair``: each other
    user is a clone w.p. ``e^-eps0``) reduces to ``(A+1, C-A)`` vs ``(A, C-A+1)``,
    ``C ~ Bin(n-1, e^-eps0)``, which [FMT21] Lemma A.3 shows
    ``(log(1 + 8 sqrt(log(4/delta)/(p n)) + 8/(p n)), delta)``-indistinguishable for clone
    probability ``p >= 16 log(2/delta)/n``; the victim's binary mixture then scales
    ``e^eps' - 1`` by ``(e^eps0-1)/(e^eps0+1)`` (advanced joint convexity).

    Note: FMT's released code uses the more conservative factor
    ``(1 - e^-eps0)/(1 + e^-(eps0+eps'))`` and regime ``log(4/delta)``; this function
    follows the theorem statement. Where the regime fails: ``+inf``, invalid.
    """
    n, eps0, delta, dom = ldp_prelude(n, eps0, delta)
    valid = dom & (eps0 <= jnp.log(n / (16 * jnp.log(2 / delta))))
    e0 = jnp.exp(eps0)
    tail = 8 * jnp.sqrt(e0 * jnp.log(4 / delta) / n) + 8 * e0 / n
    value = jnp.log1p(jnp.tanh(eps0 / 2) * tail)  # tanh(eps0/2) = (e^eps0-1)/(e^eps0+1)
    return finish(value, valid)


def fmt23_closed_form(n, eps0, delta):
    """Feldman-McMillan-Talwar 2023 ("stronger clones") closed form. Upper bound on eps.

    [FMT23] (approximate-DP corollary of the stronger clone reduction, Theorem 3.2 in the
    arXiv version): for eps0-LDP randomizers and ``eps0 <= log(n / (8 log(2/delta)) - 1)``::

        eps = log(1 + (e^eps0 - 1) * (4 sqrt(2 log(4/delta) / ((e^eps0 + 1) n)) + 4/n))

    Derivation (re-checked): the stronger clone pair (``stronger_clone_pair``: clone
    probability ``2/(e^eps0+1)``) with [FMT21] Lemma A.3 at ``p = 2/(e^eps0+1)`` and the
    ``(e^eps0-1)/(e^eps0+1)`` mixture factor gives exactly this expression; the lemma's
    condition ``p >= 16 log(2/delta)/n`` is the regime above.
    """
    n, eps0, delta, dom = ldp_prelude(n, eps0, delta)
    ratio = n / (8 * jnp.log(2 / delta))
    valid = dom & (ratio > 1) & (eps0 <= jnp.log(jnp.maximum(ratio - 1, 1e-300)))
    e0 = jnp.exp(eps0)
    tail = 4 * jnp.sqrt(2 * jnp.log(4 / delta) / ((e0 + 1) * n)) + 4 / n
    value = jnp.log1p(jnp.expm1(eps0) * tail)
    return finish(value, valid)
