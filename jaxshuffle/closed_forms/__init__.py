"""Closed-form (analytic) amplification bounds, vectorised and jit-compatible.

Every public function here returns ``(value, valid)``:

* ``value``: float64 array, an **upper bound on epsilon** (at the given ``delta``)
  wherever ``valid`` is True; ``+inf`` wherever ``valid`` is False. Never NaN.
* ``valid``: boolean array, True exactly where the bound's stated conditions hold
  (and the inputs lie in the domain). A bound that does not apply is never
  replaced by the local epsilon: it is ``+inf`` with ``valid == False``.

Inputs broadcast against each other (numpy rules). Called eagerly, inputs outside
the domain (e.g. ``delta`` not in (0, 1), ``p < 1``) raise ``ValueError`` naming the
parameter; under ``jit``/``vmap`` such points give ``valid == False`` and
``value == +inf``. Being *in* the domain but outside a theorem's conditions (e.g.
``n`` too small) is not an error: it is ``valid == False``.

Which pair each bound bounds (``shared/MATH.md`` section 1): the variation-ratio
theorems bound the epsilon of the Theorem 4.7 pair ``vr_pair(p, beta, q)`` (that
pair is itself a certified upper bound on the shuffled mechanism only when
``beta`` is the worst case, MATH.md section 5); the clone closed forms bound the
standard / stronger clone pairs; the metric bounds bound the pair
``u = e^D/(e^D+1), v = 1/(e^D+1), w = 0, r0 = r1 = 1/R``; EFMRTT and the privacy
blanket bound the shuffled mechanism directly.

References:
  [VR]  Wang et al., "Privacy Amplification via Shuffling: Unified, Simplified, and
        Tightened", VLDB 2024 (seed: variation-ratio-paper / -appendix).
  [EFMRTT19] Erlingsson, Feldman, Mironov, Raghunathan, Talwar, Thakurta,
        "Amplification by shuffling", SODA 2019.
  [BBGN19] Balle, Bell, Gascon, Nissim, "The privacy blanket of the shuffle model",
        CRYPTO 2019.
  [FMT21] Feldman, McMillan, Talwar, "Hiding among the clones", FOCS 2021.
  [FMT23] Feldman, McMillan, Talwar, "Stronger privacy amplification by shuffling
        for Renyi and approximate differential privacy", SODA 2023.
  [MDP] seed metric-shuffle-dp-supplement (shuffle model of metric DP), Supplementary
        Material A (Theorem 1, Corollaries 1 and 2).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxshuffle._config import broadcast_shapes_or_raise, check, f64, is_concrete

__all__ = [
    "vr_theorem42",
    "vr_theorem43",
    "efmrtt19",
    "blanket_delta_hoeffding",
    "blanket_delta_bennett",
    "blanket_hoeffding",
    "blanket_bennett",
    "blanket_l_bounds",
    "fmt21_closed_form",
    "fmt23_closed_form",
    "metric_theorem1",
    "metric_corollary1",
    "metric_corollary2",
]

# beta within this relative distance above the worst case (p-1)/(p+1) is accepted
# (rounding); same tolerance as jaxshuffle.pair.
_WORST_CASE_SNAP = 1e-12
# r_max may fall short of 1 + e^{d_ab} by this relative amount (rounding) eagerly.
_R_TOL = 1e-12
# Bisection steps of the blanket epsilon search (interval [0, eps0] halves each step).
_BLANKET_STEPS = 80


# ----------------------------------------------------------------------------- helpers


def _prep(**named):
    """float64 arrays broadcast to a common shape; (dict, concrete?)."""
    arrs = {k: f64(v) for k, v in named.items()}
    shape = broadcast_shapes_or_raise(**arrs)
    arrs = {k: jnp.broadcast_to(v, shape) for k, v in arrs.items()}
    return arrs, is_concrete(*arrs.values())


def _finish(value, valid):
    """Apply the (value, valid) convention: +inf where invalid, never NaN."""
    valid = valid & jnp.isfinite(value)
    return jnp.where(valid, value, jnp.inf), valid


def _safe(mask, x, fill):
    """x where mask, else a harmless fill (double-where: keeps NaN out of every branch)."""
    return jnp.where(mask, x, fill)


def _n_domain(n):
    return (n >= 2) & (n == jnp.floor(n)) & jnp.isfinite(n)


def _check_n(n):
    check(_n_domain(n), "n", "must be an integer >= 2 (finite; NaN is not)")


def _delta_domain(delta):
    return (delta > 0) & (delta < 1)


def _check_delta(delta):
    check(_delta_domain(delta), "delta", "must lie in (0, 1) (NaN is not)")


def _eps0_domain(eps0):
    return (eps0 >= 0) & jnp.isfinite(eps0)


def _check_eps0(eps0):
    check(_eps0_domain(eps0), "eps0", "must be finite and >= 0 (NaN is not)")


def _vr_quantities(p, beta, q):
    """(alpha, alpha*p, (p-1)*alpha, w, r, domain_ok) of the VR pair, p = inf allowed.

    alpha = beta/(p-1) (0 for p = inf), alpha p = beta p/(p-1) (beta for p = inf),
    (p-1) alpha = beta, w = 1 - (p+1) alpha, r = alpha p / q.
    """
    inf_p = jnp.isinf(p)
    worst = jnp.where(inf_p, 1.0, (p - 1) / (p + 1))
    dom = (p >= 1) & (beta >= 0) & (beta <= worst * (1 + _WORST_CASE_SNAP)) & (q >= 1)
    beta = jnp.minimum(beta, worst)
    pm1 = jnp.where(inf_p | (p <= 1), 1.0, p - 1)
    alpha = jnp.where(inf_p | (beta == 0), 0.0, beta / pm1)
    alpha_p = jnp.where(inf_p, beta, alpha * jnp.where(inf_p, 1.0, p))
    w = jnp.maximum(1.0 - alpha_p - alpha, 0.0)
    w = jnp.where(beta == worst, 0.0, w)  # worst case: exactly w = 0 (stronger clone)
    r = alpha_p / jnp.where(q >= 1, q, 1.0)
    dom = dom & (2 * r <= 1.0)
    return alpha, alpha_p, beta, w, r, dom


def _check_vr(p, beta, q):
    check(p >= 1, "p", "must be >= 1 (p = e^eps0; inf allowed; NaN is not)")
    worst = jnp.where(jnp.isinf(p), 1.0, (p - 1) / (p + 1))
    check((beta >= 0) & (beta <= worst * (1 + _WORST_CASE_SNAP)), "beta",
          "must lie in [0, (p-1)/(p+1)] (in [0, 1] when p = inf)")
    check(q >= 1, "q", "must be >= 1 (NaN is not)")


# ------------------------------------------------------------- variation-ratio theorems


def _vr_prelude(n, delta, p, beta, q):
    """Shared start of the variation-ratio closed forms: broadcast, validate (eagerly), derive
    ``(alpha, alpha p, (p-1) alpha, w, r)``, and the domain mask with ``n, delta`` made safe off it."""
    arrs, concrete = _prep(n=n, delta=delta, p=p, beta=beta, q=q)
    n, delta, p, beta, q = (arrs[k] for k in ("n", "delta", "p", "beta", "q"))
    if concrete:
        _check_n(n)
        _check_delta(delta)
        _check_vr(p, beta, q)
    alpha, alpha_p, pm1_alpha, w, r, dom_vr = _vr_quantities(p, beta, q)
    if concrete:
        check(dom_vr, "q", "too small: the others' marker probability 2 alpha p/q must be <= 1")
    dom = _n_domain(n) & _delta_domain(delta) & dom_vr
    return _safe(dom, n, 2.0), _safe(dom, delta, 0.5), p, beta, q, (alpha, alpha_p, pm1_alpha, w, r), dom


def vr_theorem42(n, delta, p, beta, q):
    """Variation-ratio Theorem 4.2 ("analytic" bound), corrected form. Upper bound on eps.

    Bounds the epsilon at ``delta`` of the Theorem 4.7 pair ``vr_pair(p, beta, q)``
    ([VR] Theorem 4.2, proof in Appendix F; ``shared/MATH.md`` section 3). With
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
      decreases for every ``C >= Omega`` (MATH.md section 3; re-derived: with
      ``x = sqrt(C)``, ``dF/dx`` has the sign of ``-2mAx^2 - 2Ax + 2mK(n-1) + beta m``);
    * ``Den > 0``. MATH.md's condition omits this; without it the conditions above
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
    omega_s = _safe(pos, omega, 1.0)
    sq = jnp.sqrt(omega_s)
    s = m * sq  # sqrt(Omega L / 2)
    den = alpha * omega_s + pm1_alpha * (omega_s / 2 - s) + K * (nm1 - omega_s)
    decreasing = (A >= 0) & (2 * m * A * omega_s + 2 * A * sq > 2 * m * K * nm1 + pm1_alpha * m)
    valid = dom & ((p > 1) | jnp.isinf(p)) & (beta > 0) & r_ok & pos & decreasing & (den > 0)
    value = jnp.log1p(pm1_alpha * (2 * s + 1) / _safe(valid, den, 1.0))
    return _finish(value, valid)


def vr_theorem43(n, delta, p, beta, q):
    """Variation-ratio Theorem 4.3 ("asymptotic" bound). Upper bound on eps.

    Bounds the epsilon at ``delta`` of ``vr_pair(p, beta, q)`` ([VR] Theorem 4.3, proof
    in Appendix G; ``shared/MATH.md`` section 3)::

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
    r_s = _safe(rpos, r, 0.25)
    X = alpha_p + alpha
    c_r = jnp.maximum(0.0, 4 * (1 - 3 * r_s) / (9 * (1 - 2 * r_s)))
    valid = dom & ((p > 1) | jnp.isinf(p)) & (beta > 0) & rpos & (n * r_s >= 8 * jnp.log(2 / delta))
    tail = jnp.sqrt(32 * jnp.log(4 / delta) / (r_s * (n - 1))) + 4 / (r_s * n)
    value = jnp.log1p(pm1_alpha / (X + (1 - X) * c_r) * tail)
    return _finish(value, valid)


# -------------------------------------------------------------------- earlier bounds


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
    arrs, concrete = _prep(n=n, eps0=eps0, delta=delta)
    n, eps0, delta = arrs["n"], arrs["eps0"], arrs["delta"]
    if concrete:
        _check_n(n)
        _check_eps0(eps0)
        _check_delta(delta)
    dom = _n_domain(n) & _eps0_domain(eps0) & _delta_domain(delta)
    delta = _safe(dom, delta, 0.5)
    n = _safe(dom, n, 2.0)
    valid = dom & (eps0 <= 0.5) & (n >= 1000) & (delta <= 0.01)
    value = 12 * eps0 * jnp.sqrt(jnp.log(1 / delta) / n)
    return _finish(value, valid)


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
    arrs, concrete = _prep(n=n, eps0=eps0, delta=delta)
    n, eps0, delta = arrs["n"], arrs["eps0"], arrs["delta"]
    if concrete:
        _check_n(n)
        _check_eps0(eps0)
        _check_delta(delta)
    dom = _n_domain(n) & _eps0_domain(eps0) & _delta_domain(delta)
    delta = _safe(dom, delta, 0.5)
    n = _safe(dom, n, 2.0)
    eps0 = _safe(dom, eps0, 0.0)
    valid = dom & (eps0 <= jnp.log(n / (16 * jnp.log(2 / delta))))
    e0 = jnp.exp(eps0)
    tail = 8 * jnp.sqrt(e0 * jnp.log(4 / delta) / n) + 8 * e0 / n
    value = jnp.log1p(jnp.tanh(eps0 / 2) * tail)  # tanh(eps0/2) = (e^eps0-1)/(e^eps0+1)
    return _finish(value, valid)


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
    arrs, concrete = _prep(n=n, eps0=eps0, delta=delta)
    n, eps0, delta = arrs["n"], arrs["eps0"], arrs["delta"]
    if concrete:
        _check_n(n)
        _check_eps0(eps0)
        _check_delta(delta)
    dom = _n_domain(n) & _eps0_domain(eps0) & _delta_domain(delta)
    delta = _safe(dom, delta, 0.5)
    n = _safe(dom, n, 2.0)
    eps0 = _safe(dom, eps0, 0.0)
    ratio = n / (8 * jnp.log(2 / delta))
    valid = dom & (ratio > 1) & (eps0 <= jnp.log(jnp.maximum(ratio - 1, 1e-300)))
    e0 = jnp.exp(eps0)
    tail = 4 * jnp.sqrt(2 * jnp.log(4 / delta) / ((e0 + 1) * n)) + 4 / n
    value = jnp.log1p(jnp.expm1(eps0) * tail)
    return _finish(value, valid)


# ------------------------------------------------------------------- privacy blanket


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
    us = _safe(small, u, 0.0)
    ul = _safe(small, 1.0, u)
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
        _check_n(n)
        _check_eps0(eps0)
        _check_delta(delta)
        if gamma is not None:
            check((gamma <= 1) & (gamma >= jnp.exp(-eps0) * (1 - 1e-12)), "gamma",
                  "must lie in [e^-eps0, 1]: the total variation similarity of an eps0-LDP "
                  "randomizer (NaN is not)")
    dom = _n_domain(n) & _eps0_domain(eps0) & _delta_domain(delta)
    if gamma is not None:
        dom = dom & (gamma <= 1) & (gamma >= jnp.exp(-eps0) * (1 - 1e-12))
    return dom


def _blanket_inputs(n, eps0, delta, gamma):
    named = dict(n=n, eps0=eps0, delta=delta)
    if gamma is not None:
        named["gamma"] = gamma
    arrs, concrete = _prep(**named)
    return arrs["n"], arrs["eps0"], arrs["delta"], arrs.get("gamma"), concrete


def _blanket_delta(kind, eps, n, eps0, gamma):
    arrs, concrete = _prep(eps=eps, **dict(n=n, eps0=eps0), **({} if gamma is None else {"gamma": gamma}))
    eps, n, eps0 = arrs["eps"], arrs["n"], arrs["eps0"]
    gamma = arrs.get("gamma")
    if concrete:
        check((eps >= 0) & jnp.isfinite(eps), "eps", "must be finite and >= 0 (NaN is not)")
    dom = _blanket_validate(n, eps0, jnp.full_like(n, 0.5), gamma, concrete) & (eps >= 0)
    inside = dom & (eps > 0) & (eps < eps0)
    eps_s = _safe(inside, eps, 0.5)
    eps0_s = _safe(inside, eps0, 1.0)
    n_s = _safe(inside, n, 2.0)
    g_s = None if gamma is None else _safe(inside, gamma, 1.0)
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
    n_s = _safe(dom, n, 2.0)
    eps0_s = _safe(dom, eps0, 1.0)
    delta_s = _safe(dom, delta, 0.5)
    g_s = None if gamma is None else _safe(dom, gamma, 1.0)
    log_delta = jnp.log(delta_s)

    def ok(eps):  # delta(eps) <= delta ; eps strictly inside (0, eps0)
        inside = (eps > 0) & (eps < eps0_s)
        e = _safe(inside, eps, 0.5 * eps0_s)
        ld = _blanket_log_delta(kind, e, n_s, eps0_s, g_s)
        return inside & (ld <= log_delta)

    # Invariant: hi is eps0 (no claim yet) or a point where delta(hi) <= delta was
    # verified (sound for any such hi, monotone or not). ``found`` records the
    # verification itself: re-evaluating at the end could flip by one ulp at the crossing.
    def body(_, state):
        lo, hi, found = state
        mid = 0.5 * (lo + hi)
        good = ok(mid)
        return jnp.where(good, lo, mid), jnp.where(good, mid, hi), found | good

    lo0 = jnp.zeros_like(eps0_s)
    _, hi, found = jax.lax.fori_loop(0, _BLANKET_STEPS, body, (lo0, eps0_s, jnp.zeros(eps0_s.shape, bool)))
    valid = dom & found & (hi < eps0_s)
    return _finish(hi, valid)


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


# ------------------------------------------------------------------- metric shuffle DP


def _metric_common(n, d_ab, r_max, delta, concrete, r_name):
    if concrete:
        _check_n(n)
        _check_delta(delta)
        check((d_ab >= 0) & jnp.isfinite(d_ab), "d_ab", "must be finite and >= 0 (NaN is not)")
        check(r_max >= (1 + jnp.exp(d_ab)) * (1 - _R_TOL), r_name,
              "must be >= 1 + e^{d_ab} (the maximum over c includes c = a; NaN is not)")
    return (_n_domain(n) & _delta_domain(delta) & (d_ab >= 0) & jnp.isfinite(d_ab)
            & (r_max >= (1 + jnp.exp(d_ab)) * (1 - _R_TOL)) & jnp.isfinite(r_max))


def _metric_thm1_core(n, d_ab, r_max, delta, dom):
    n = _safe(dom, n, 2.0)
    delta = _safe(dom, delta, 0.5)
    r_max = _safe(dom, r_max, 2.0)
    d_ab = _safe(dom, d_ab, 0.0)
    L = jnp.log(4 / delta)
    pc = 2 / r_max
    mu = (n - 1) * pc
    omega = mu - jnp.sqrt(3 * mu * L)
    valid = dom & (omega > 2 * L) & (mu >= 3 * L)
    om = _safe(valid, omega, 4 * L + 1)
    s = jnp.sqrt(om * L / 2)
    ratio_m1 = (2 * s + 1) / (om / 2 - s)  # e^{eps'} - 1
    value = jnp.minimum(d_ab, jnp.log1p(jnp.tanh(d_ab / 2) * ratio_m1))
    return _finish(value, valid)


def metric_theorem1(n, d_ab, r_max, delta):
    """Shuffle metric DP, Theorem 1 (Eq. 1), for one edge (a, b). Upper bound on eps.

    ``d_ab = D(a, b)`` is the local metric distance of the edge and
    ``r_max = max_c e^{D(a,c)} + e^{D(b,c)}`` ([MDP] Supplement A, Steps 1-3;
    ``shared/MATH.md`` section 3). With ``L = log(4/delta)``, ``pc = 2/r_max``::

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
    arrs, concrete = _prep(n=n, d_ab=d_ab, r_max=r_max, delta=delta)
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
    arrs, concrete = _prep(n=n, d_ab=d_ab, d_max=d_max, delta=delta)
    n, d_ab, d_max, delta = (arrs[k] for k in ("n", "d_ab", "d_max", "delta"))
    if concrete:
        _check_n(n)
        _check_delta(delta)
        check((d_ab >= 0) & jnp.isfinite(d_ab), "d_ab", "must be finite and >= 0 (NaN is not)")
        check((d_max >= d_ab) & jnp.isfinite(d_max), "d_max", "must be finite and >= d_ab (NaN is not)")
    r_max = 2 * jnp.exp(d_max)
    dom = _metric_common(n, d_ab, r_max, delta, False, "d_max") & (d_max >= d_ab)
    return _metric_thm1_core(n, d_ab, r_max, delta, dom)


def metric_corollary2(n, d_ab, r_max, delta):
    """Shuffle metric DP, Corollary 2 (Eq. 3, simplified). Upper bound on eps.

    ([MDP] Supplement A Step 4; ``shared/MATH.md`` section 3), ``L = log(4/delta)``::

        eps = min(D(a,b), log(1 + 8 (e^D - 1)/(e^D + 1) (sqrt(r_max L / (2(n-1))) + r_max/(2(n-1)))))

    Valid where ``n - 1 >= 8 L r_max`` (the supplement writes ``n > 8 L R``; with
    ``n - 1`` the Step-4 inequalities ``Omega/2 - sqrt(Omega L/2) >= Omega/4 >= (n-1)pc/8``
    hold). Bounds the same pair as :func:`metric_theorem1`. The ``min`` with ``D(a,b)``
    is added as in Theorem 1 (the pair's ratio never exceeds ``e^D``).
    """
    arrs, concrete = _prep(n=n, d_ab=d_ab, r_max=r_max, delta=delta)
    n, d_ab, r_max, delta = (arrs[k] for k in ("n", "d_ab", "r_max", "delta"))
    dom = _metric_common(n, d_ab, r_max, delta, concrete, "r_max")
    n = _safe(dom, n, 2.0)
    delta = _safe(dom, delta, 0.5)
    r_max = _safe(dom, r_max, 2.0)
    d_ab = _safe(dom, d_ab, 0.0)
    L = jnp.log(4 / delta)
    valid = dom & (n - 1 >= 8 * L * r_max)
    tail = jnp.sqrt(r_max * L / (2 * (n - 1))) + r_max / (2 * (n - 1))
    value = jnp.minimum(d_ab, jnp.log1p(8 * jnp.tanh(d_ab / 2) * tail))
    return _finish(value, valid)
