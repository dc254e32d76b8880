"""The privacy blanket bounds of Balle, Bell, Gascon, Nissim (CRYPTO 2019), generic and randomizer-specific (gamma).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxshuffle._bisect import bisect_jax
from jaxshuffle._config import check, f64
from jaxshuffle.closed_forms.common import (
    check_delta,
    check_eps0,
    check_n,
    delta_domain,
    eps0_domain,
    finish,
    n_domain,
    prep,
    safe,
)

# Bisection steps of the blanket epsilon search (interval [0, eps0] halves each step).
_BLANKET_STEPS = 80

def blanket_l_bounds(eps, eps0, gamma=None):
    """Bounds on the privacy amplification random variable of [BBGN19].

    The blanket decomposition ``mu_x = g omega + (1-g) nu_x`` and
    ``L = (mu_x(W) - e^eps mu_x'(W)) / omega(W)``, ``W ~ omega``, ``E[L] = -(e^eps - 1)``.
    With ``rho_x = mu_x/omega`` confined to ``[lo, hi]`` (and ``E[rho_x] = 1``)::

        b_plus = max L        <= hi - e^eps lo
        b      = range of L   <= (hi - lo)(1 + e^eps)
        c      = E[L^2]       <= (1 + e^{2 eps})(lo + hi - lo hi) - 2 e^eps (2 lo - lo^2)

    (``E[rho^2] <= lo + hi - lo hi`` from ``(rho-lo)(hi-rho) >= 0``;
    ``E[rho_x rho_x'] >= 2 lo - lo^2`` from ``(rho_x-lo)(rho_x'-lo) >= 0``.)

    * ``gamma`` given (randomizer-specific): ``gamma`` must be the randomizer's exact
      total variation similarity ``sum_y min_x mu_x(y)``; ``omega`` is the normalised
      pointwise minimum, ``g = gamma``, ``[lo, hi] = [gamma, gamma e^eps0]``.
    * ``gamma=None`` (generic eps0-LDP, [BBGN19]'s generic choice): ``omega = mu_{x0}``
      for a reference input, ``g = e^-eps0``, ``[lo, hi] = [e^-eps0, e^eps0]``. These
      ``b_plus`` and ``b`` are [BBGN19]'s generic values; ``c`` is a little tighter
      than theirs (``e^eps0 (e^{2eps}+1) - 2 e^{eps-3eps0}``), by the same argument.

    Returns ``(g, b_plus, b, c)`` (arrays, no validation: internal building block).
    """
    eps, eps0 = f64(eps), f64(eps0)
    e0 = jnp.exp(eps0)
    if gamma is None:
        g = jnp.exp(-eps0)
        lo, hi = g, e0
    else:
        g = f64(gamma)
        lo, hi = g, g * e0
    t = jnp.exp(eps)
    b_plus = hi - t * lo
    b = (hi - lo) * (1 + t)
    c = (1 + t * t) * (lo + hi - lo * hi) - 2 * t * (2 * lo - lo * lo)
    return g, b_plus, b, c


def _h(u):
    """Bennett's h(u) = (1+u) log(1+u) - u, accurate for small u."""
    small = u < 1e-3
    us = safe(small, u, 0.0)
    ul = safe(small, 1.0, u)
    series = us * us / 2 - us ** 3 / 6 + us ** 4 / 12
    return jnp.where(small, series, (1 + ul) * jnp.log1p(ul) - ul)


def _log_diff_pow(n, g, k):
    """log[(1 - g + g e^-k)^n - (1 - g)^n] for k > 0, 0 < g <= 1."""
    a1 = n * jnp.log1p(-g * (-jnp.expm1(-k)))
    a0 = n * jnp.log1p(-g)  # -inf when g = 1
    return a1 + jnp.log(-jnp.expm1(a0 - a1))


def _blanket_log_delta(kind, eps, n, eps0, gamma):
    g, b_plus, b, c = blanket_l_bounds(eps, eps0, gamma)
    a = jnp.expm1(eps)
    if kind == "hoeffding":
        x = 2 * a * a / (b * b)
        return (2 * jnp.log(b) - jnp.log(4 * a) - jnp.log(g * n)
                + n * jnp.log1p(-g * (-jnp.expm1(-x))))
    beta = a * b_plus / c
    k = c / (b_plus * b_plus) * _h(beta)
    return jnp.log(b_plus) - jnp.log(g * n) - jnp.log(jnp.log1p(beta)) + _log_diff_pow(n, g, k)


def _blanket_validate(n, eps0, delta, gamma, concrete):
    if concrete:
        check_n(n)
        check_eps0(eps0)
        check_delta(delta)
        if gamma is not None:
            check((gamma <= 1) & (gamma >= jnp.exp(-eps0) * (1 - 1e-12)), "gamma",
                  "must lie in [e^-eps0, 1]: the total variation similarity of an eps0-LDP "
                  "randomizer")
    dom = n_domain(n) & eps0_domain(eps0) & delta_domain(delta)
    if gamma is not None:
        dom = dom & (gamma <= 1) & (gamma >= jnp.exp(-eps0) * (1 - 1e-12))
    return dom


def _blanket_inputs(n, eps0, delta, gamma):
    named = dict(n=n, eps0=eps0, delta=delta)
    if gamma is not None:
        named["gamma"] = gamma
    arrs, concrete = prep(**named)
    return arrs["n"], arrs["eps0"], arrs["delta"], arrs.get("gamma"), concrete


def _blanket_delta(kind, eps, n, eps0, gamma):
    arrs, concrete = prep(eps=eps, **dict(n=n, eps0=eps0), **({} if gamma is None else {"gamma": gamma}))
    eps, n, eps0 = arrs["eps"], arrs["n"], arrs["eps0"]
    gamma = arrs.get("gamma")
    if concrete:
        check((eps >= 0) & jnp.isfinite(eps), "eps", "must be finite and >= 0", value=eps)
    dom = _blanket_validate(n, eps0, jnp.full_like(n, 0.5), gamma, concrete) & (eps >= 0)
    inside = dom & (eps > 0) & (eps < eps0)
    eps_s = safe(inside, eps, 0.5)
    eps0_s = safe(inside, eps0, 1.0)
    n_s = safe(inside, n, 2.0)
    g_s = None if gamma is None else safe(inside, gamma, 1.0)
    logd = _blanket_log_delta(kind, eps_s, n_s, eps0_s, g_s)
    d = jnp.exp(logd)
    # eps >= eps0: the shuffle is eps0-DP, delta = 0. eps = 0 (< eps0): no claim, delta = 1.
    d = jnp.where(inside, jnp.minimum(d, 1.0), jnp.where(dom & (eps >= eps0), 0.0, 1.0))
    return jnp.where(dom, d, jnp.inf)


def blanket_delta_hoeffding(eps, n, eps0, gamma=None):
    """Privacy-blanket delta(eps), Hoeffding form ([BBGN19], Section 5, Hoeffding bound).

    Defining inequality (``a = e^eps - 1``, ``(g, b)`` from :func:`blanket_l_bounds`)::

        delta <= 1/(g n) * E_{M ~ Bin(n, g)} [ b^2/(4a) exp(-2 M a^2 / b^2) ]
               = b^2/(4 a g n) * (1 - g (1 - exp(-2 a^2/b^2)))^n

    from ``delta <= E_{M'~Bin(n-1,g)}[E(sum_{i<=M'+1} L_i)_+ / (M'+1)]`` (blanket
    argument) ``= 1/(g n) E_{M~Bin(n,g)} E(sum_{i<=M} L_i)_+`` and Hoeffding's
    ``E(S_M)_+ <= int_0^inf exp(-2 (t + M a)^2/(M b^2)) dt <= b^2/(4a) exp(-2 M a^2/b^2)``
    (the ``M = 0`` term is kept: conservative). Returns the bound on delta (an upper
    bound), clipped to 1; ``0`` for ``eps >= eps0``; ``+inf`` for bad input (traced).
    """
    return _blanket_delta("hoeffding", eps, n, eps0, gamma)


def blanket_delta_bennett(eps, n, eps0, gamma=None):
    """Privacy-blanket delta(eps), Bennett form ([BBGN19], Section 5, Bennett bound).

    Defining inequality (``(g, b_plus, c)`` from :func:`blanket_l_bounds`,
    ``a = e^eps - 1``, ``beta = a b_plus/c``, ``h(u) = (1+u) log(1+u) - u``)::

        delta <= 1/(g n) * sum_{M=1}^{n} Bin(M; n, g) * exp(-M c/b_plus^2 h(beta)) * b_plus / log(1+beta)
               = b_plus / (g n log(1+beta)) * [(1 - g + g e^{-c h(beta)/b_plus^2})^n - (1-g)^n]

    from Bennett's inequality (``L <= b_plus``, ``E L^2 <= c``):
    ``P[S_M > t] <= exp(-(M c/b_plus^2) h(b_plus (t + M a)/(M c)))``, integrated over
    ``t > 0`` with the tangent ``h(beta + y) >= h(beta) + log(1+beta) y``.

    Discrepancy: Balle et al.'s released code uses ``1/(M eta log(1+beta))`` with
    ``eta = a/b_plus`` in place of ``b_plus/log(1+beta)``, i.e. a factor ``1/(M a)``
    smaller; that is not an upper bound on ``E(S_M)_+`` once ``M a > 1`` (a two-point L
    with mean -0.1, max 2, M = 100: exact 1.02 vs 0.79). This function uses the derived,
    sound form.
    """
    return _blanket_delta("bennett", eps, n, eps0, gamma)


def _blanket_eps(kind, n, eps0, delta, gamma):
    n, eps0, delta, gamma, concrete = _blanket_inputs(n, eps0, delta, gamma)
    _blanket_validate(n, eps0, delta, gamma, concrete)  # raises eagerly on bad input
    return _blanket_eps_core(kind, n, eps0, delta, gamma)


@jax.jit(static_argnames=("kind",))
def _blanket_eps_core(kind, n, eps0, delta, gamma):
    dom = _blanket_validate(n, eps0, delta, gamma, False)
    n_s = safe(dom, n, 2.0)
    eps0_s = safe(dom, eps0, 1.0)
    delta_s = safe(dom, delta, 0.5)
    g_s = None if gamma is None else safe(dom, gamma, 1.0)
    log_delta = jnp.log(delta_s)

    def ok(eps):  # delta(eps) <= delta ; eps strictly inside (0, eps0)
        inside = (eps > 0) & (eps < eps0_s)
        e = safe(inside, eps, 0.5 * eps0_s)
        ld = _blanket_log_delta(kind, e, n_s, eps0_s, g_s)
        return inside & (ld <= log_delta)

    # hi is eps0 (no claim) or a point where delta(hi) <= delta was verified (sound whether
    # or not delta(eps) is monotone); comparing hi with eps0 records the verification itself
    # (re-evaluating at the end could flip by one ulp at the crossing).
    _, hi = bisect_jax(ok, jnp.zeros_like(eps0_s), eps0_s, steps=_BLANKET_STEPS)
    found = hi < eps0_s
    valid = dom & found & (hi < eps0_s)
    return finish(hi, valid)


def blanket_hoeffding(n, eps0, delta, gamma=None):
    """Privacy blanket [BBGN19], Hoeffding form: smallest eps with delta_H(eps) <= delta.

    Upper bound on the epsilon of the shuffled eps0-LDP protocol. ``gamma=None`` is the
    "Hoeffding, generic" bound; a randomizer's total variation similarity ``gamma``
    (e.g. ``k/(e^eps0+k-1)`` for k-RR, ``l/(e^eps0+l-1)`` for OLH) gives the specific
    one. The defining inequality is :func:`blanket_delta_hoeffding`; eps is found by
    bisection on ``(0, eps0)`` keeping a point that satisfies it (so the value always
    satisfies the inequality). Valid where such ``eps < eps0`` exists (an amplified
    bound); otherwise ``+inf``/invalid, never eps0.
    """
    return _blanket_eps("hoeffding", n, eps0, delta, gamma)


def blanket_bennett(n, eps0, delta, gamma=None):
    """Privacy blanket [BBGN19], Bennett form: smallest eps with delta_B(eps) <= delta.

    As :func:`blanket_hoeffding` with the Bennett inequality
    :func:`blanket_delta_bennett` (see there for the corrected constant).
    """
    return _blanket_eps("bennett", n, eps0, delta, gamma)


# --------------------------------------------------------------------------------------
# Total variation similarities (the randomizer-specific gamma of [BBGN19]) of catalog rows
# --------------------------------------------------------------------------------------

def gamma_grr(eps0, k):
    """k-ary randomized response: ``gamma = sum_y min_x mu_x(y) = k/(e^eps0 + k - 1)`` (each output's
    least probability is ``1/(e^eps0 + k - 1)``, attained by any input other than ``y``; ``k >= 2``)."""
    e = jnp.exp(f64(eps0))
    return f64(k) / (e + f64(k) - 1.0)


def gamma_subset_selection(eps0, d, k):
    """k-subset selection on ``d`` options (``1 <= k <= d - 1``): ``gamma = d/(k e^eps0 + d - k)``.

    ``P(S | x) = e^eps0/Z`` for ``x in S``, ``1/Z`` otherwise, ``Z = e^eps0 C(d-1, k-1) + C(d-1, k)``.
    Every ``S`` misses some input (``k < d``), so its least probability is ``1/Z`` and
    ``gamma = C(d, k)/Z = d/(k e^eps0 + d - k)`` (the paper's Section 7.1 expression, divided
    through by ``C(d-1, k-1)``).
    """
    e, d, k = jnp.exp(f64(eps0)), f64(d), f64(k)
    return d / (k * e + d - k)


def gamma_local_hash(eps0, l):  # noqa: E741  (the catalog option name)
    """Local hashing with range ``l``: ``gamma = l/(e^eps0 + l - 1)`` (Section 7.1).

    Output ``(H, y)``: ``P = P(H) e^eps0/(e^eps0 + l - 1)`` if ``y = H(x)``, else
    ``P(H)/(e^eps0 + l - 1)``. For a hash ``H`` that is not constant every ``y`` is missed by some
    input, so its least probability is ``P(H)/(e^eps0 + l - 1)``; summed over ``y`` and ``H`` this is
    the value above. (A constant ``H`` in the family would raise gamma, and a constant hash carries no
    information: families used in practice have none.)
    """
    e = jnp.exp(f64(eps0))
    return f64(l) / (e + f64(l) - 1.0)


#: Catalog rows with a derived total variation similarity: ``name -> (function, its option names)``.
BLANKET_GAMMA: dict[str, tuple[Callable[..., jax.Array], tuple[str, ...]]] = {
    "grr": (gamma_grr, ("eps0", "k")),
    "subset-selection": (gamma_subset_selection, ("eps0", "d", "k")),
    "local-hash": (gamma_local_hash, ("eps0", "l")),
}


def blanket_specific(n, eps0, delta, gamma):
    """The paper's "privacy blanket, specific" curve: the smaller of the Hoeffding and Bennett bounds at
    the randomizer's ``gamma`` (Section 7.1). Returns ``(value, valid)`` like every closed form."""
    vh, okh = blanket_hoeffding(n, eps0, delta, gamma)
    vb, okb = blanket_bennett(n, eps0, delta, gamma)
    vh = jnp.where(okh, vh, jnp.inf)
    vb = jnp.where(okb, vb, jnp.inf)
    return jnp.minimum(vh, vb), okh | okb
