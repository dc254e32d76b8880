"""Set-valued randomizers (each user holds a set of items), with their lower parameters (Table 6).

Sampling RAPPOR, the Wheel mechanism, k-subset exponential and the collision mechanism. As in
:mod:`jaxshuffle.randomizers.ldp`, each function states its mechanism's definition; values are checked
against the explicit probability matrix (or numerical integration) in ``tests/test_randomizers.py``.
Definitions of ``p, beta, q``: docs/math.md section 8.
Returned sides and errors: as :mod:`jaxshuffle.randomizers` states for every row.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle.randomizers.params import D2, EPS0, Arg, Inputs, L, LowerParams, VRParams, eps0_inputs

__all__ = ["ARC", "K_EXP", "S_COL", "S_SET", "collision", "k_subset_exponential", "sampling_rappor", "wheel",
           "wheel_lower"]


def _log_binom(xp, n, k):
    """log C(n, k) for 0 <= k <= n (float arrays holding integers); ``xp`` the array module."""
    if xp is np:
        from scipy.special import gammaln
    else:
        gammaln = jax.scipy.special.gammaln
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


S_SET = Arg("s", "int", 1.0, help="size of each user's item set, 1 <= s <= d - 1")


def _lazy_walk_mean_abs(j, rho):
    """E|S_j| for a walk with i.i.d. steps +1, -1 (probability rho each) and 0.

    ``E|S_j| = 2 rho sum_{m<j} P(S_m = 0)``; ``a_m = P(S_m = 0)`` follows the three-term
    recurrence ``m a_m = (1-2rho)(2m-1) a_{m-1} - (1-4rho)(m-1) a_{m-2}`` (generalized
    central trinomial coefficients; forward-stable since rho <= 1/4).
    """
    def cond(state):
        m, _, _, _ = state
        return m < jnp.max(j)

    def body(state):
        m, a_prev, a_cur, acc = state  # a_cur = a_m, a_prev = a_{m-1}
        acc = acc + jnp.where(m < j, a_cur, 0.0)
        m1 = m + 1.0
        a_next = ((1.0 - 2.0 * rho) * (2.0 * m1 - 1.0) * a_cur - (1.0 - 4.0 * rho) * (m1 - 1.0) * a_prev) / m1
        return m1, a_cur, a_next, acc

    zero = jnp.zeros_like(rho)
    init = (jnp.asarray(0.0, dtype=jnp.float64), zero, jnp.ones_like(rho), zero)
    _, _, _, acc = jax.lax.while_loop(cond, body, init)
    return 2.0 * rho * acc


def sampling_rappor(eps0, d, s) -> VRParams:
    """Sampling RAPPOR on sets of ``s`` items out of ``d``. Table 2 row "sampling RAPPOR".

    Original: Qin et al., "Heavy hitter estimation over set-valued data with local
    differential privacy", CCS 2016. The input is a set of exactly ``s`` items (pad short
    sets with dummy items counted in ``d``); one item is sampled uniformly from it and
    reported by :func:`binary_rr` (``eps0/2`` per bit). With ``t = e^{eps0/2}`` and
    ``j = min(s, d - s)`` (the largest ``|X minus X'|``)::

        p = (j e^eps0 + s - j)/s    (= e^eps0 when d >= 2s),    q = p,
        beta = (t - 1/t)/(2 s) E|M - M'|,   M, M' iid Binomial(j, 1/(1 + t)).

    (``R(X)[y] = base(y) (m t + (s - m)/t)/s`` with ``m`` the number of ones of ``y`` in
    ``X``.) For ``s = 1`` this is binary RR's ``(t - 1)/(t + 1)``.

    Discrepancy: the table gives ``s (e^{eps0/2} - 1)/(d (e^{eps0/2} + 1))``, which for
    ``s = 1`` is ``1/d`` times binary RR's value although the mechanism then *is* binary RR;
    the table value is below the true total variation (not a valid bound).

    ``E|M - M'|`` is summed by an O(j) ``while_loop``: differentiate with ``jax.jacfwd``
    (reverse mode does not pass through the loop).

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      d: number of items (domain size, padding items included), an integer >= 2.
      s: size of each user's item set, an integer in [1, d - 1].

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp = Inputs((EPS0, eps0), (D2, d), (S_SET, s), numpy=True)
    xp = inp.xp
    eps0, d, s = inp.values
    inp.require(s <= d - 1.0, "s", "must be <= d - 1")
    t = xp.exp(0.5 * eps0)
    j = xp.minimum(s, d - s)
    rho = t / (1.0 + t) ** 2
    beta = (t - 1.0 / t) / (2.0 * s) * _lazy_walk_mean_abs(xp.where(inp.ok, j, 0.0), rho)
    p = (j * xp.exp(eps0) + s - j) / s
    return inp.params(p, beta, p)


ARC = Arg("arc", "real", 0.0, 1.0, low_open=True, high_open=False,
           help="arc length on the wheel (the paper's p), s * arc <= 1")


def wheel(eps0, d, s, arc) -> VRParams:
    """Wheel mechanism on sets of ``s`` items out of ``d`` with arc length ``arc``. Table 2 row "Wheel".

    Original: Wang et al., "Set-valued data publication with local privacy: tight error
    bounds and efficient mechanisms", VLDB 2020. Each item is hashed to a point of the unit
    circle and covers the arc of length ``arc`` after it; the output ``v`` has density
    ``e^eps0/Omega`` on the arcs of the user's set and ``1/Omega`` elsewhere,
    ``Omega = s arc e^eps0 + 1 - s arc``. Values assume non-overlapping arcs (the sup over
    hash realizations, which is what the table gives).

    ``p = e^eps0``, ``q = e^eps0``, ``beta = j arc (e^eps0 - 1)/Omega`` with
    ``j = min(s, d - s)`` (the table's ``s arc (e^eps0 - 1)/Omega`` assumes ``d >= 2s``).

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      d: number of items (domain size, padding items included), an integer >= 2.
      s: size of each user's item set, an integer in [1, d - 1].
      arc: arc length on the wheel (the paper's ``p``), in (0, 1] with ``s * arc <= 1``.

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp, p, (eps0, d, s, arc) = eps0_inputs(eps0, (D2, d), (S_SET, s), (ARC, arc))
    xp = inp.xp
    inp.require(s <= d - 1.0, "s", "must be <= d - 1")
    inp.require(s * arc <= 1.0, "arc", "must satisfy s * arc <= 1")
    j = xp.minimum(s, d - s)
    return inp.params(p, j * arc * (p - 1.0) / (s * arc * p + 1.0 - s * arc), p)


def wheel_lower(eps0, d, s, arc) -> LowerParams:
    """Theorem 5.1 parameters of :func:`wheel` (``d >= 3s`` and ``3 s arc <= 1``).

    A hash realization where the arcs of three disjoint sets ``X0, X1, X*`` do not overlap (the
    realization the upper bound's values assume): ``Y0, Y1`` are the arcs of ``X0, X1``,
    ``P0(Y0) = s arc e^eps0/Omega``, ``P0(Y1) = s arc/Omega``, and ``X*`` puts ``s arc/Omega`` on
    each: ``p0 = q0 = q1 = e^eps0``, ``beta = s arc (e^eps0 - 1)/Omega``, the upper parameters
    (exactly tight, Section 5).
    """
    inp, p, (eps0, d, s, arc) = eps0_inputs(eps0, (D2, d), (S_SET, s), (ARC, arc))
    inp.require(d >= 3.0 * s, "d", "must be >= 3 s (three disjoint item sets)")
    inp.require(3.0 * s * arc <= 1.0, "arc", "must satisfy 3 s arc <= 1 (three sets' arcs without overlap)")
    return inp.lower(p, s * arc * (p - 1.0) / (s * arc * p + 1.0 - s * arc), p, p)


K_EXP = Arg("k", "int", 1.0, help="output subset size, 1 <= k <= d - s")


def k_subset_exponential(eps0, d, k, s) -> VRParams:
    """k-subset exponential mechanism on sets of ``s`` items out of ``d``. Table 6 row.

    Original: Wang et al., "PrivSet: set-valued data analyses with local differential
    privacy", INFOCOM 2018. The input is a set ``X`` of ``s`` items; the output is a
    ``k``-subset ``S`` of ``[d]`` with probability proportional to ``e^eps0`` if ``S``
    meets ``X``, 1 otherwise. ``Omega = e^eps0 (C(d,k) - C(d-s,k)) + C(d-s,k)``.

    ``p = e^eps0``, ``q = e^eps0``, and with ``u = min(2s, d)`` (the largest ``|X or X'|``),
    ``beta = (e^eps0 - 1)(C(d-s,k) - C(d-u,k))/Omega`` (the table's formula for ``d >= 2s``;
    ``s = 1`` is :func:`subset_selection`).

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      d: number of items (domain size), an integer >= 2.
      k: output subset size, an integer in [1, d - s].
      s: size of each user's item set, an integer in [1, d - 1].

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp, p, (eps0, d, k, s) = eps0_inputs(eps0, (D2, d), (K_EXP, k), (S_SET, s))
    xp = inp.xp
    inp.require(s <= d - 1.0, "s", "must be <= d - 1")
    inp.require(k <= d - s, "k", "must be <= d - s")
    u = xp.minimum(2.0 * s, d)
    ok_k = inp.ok
    log_a = _log_binom(xp, d - s, xp.where(ok_k, k, 0.0)) - _log_binom(xp, d, xp.where(ok_k, k, 0.0))
    a = xp.exp(log_a)  # C(d-s,k)/C(d,k)
    has_b = k <= d - u
    log_ratio = _log_binom(xp, xp.where(has_b, d - u, 1.0), xp.where(has_b, k, 0.0)) - \
        _log_binom(xp, d - s, xp.where(ok_k, k, 0.0))
    frac = xp.where(has_b, -xp.expm1(log_ratio), 1.0)  # 1 - C(d-u,k)/C(d-s,k)
    return inp.params(p, (p - 1.0) * a * frac / (p - (p - 1.0) * a), p)


S_COL = Arg("s", "int", 1.0, help="items per user (padded), 1 <= s <= l - 1")


def collision(eps0, s, l) -> VRParams:
    """(d, s)-Collision with hash length ``l``. Not a row of the seed's Table 2: the row
    "(d,s)-Collision with length l" of the paper authors' repository table (wangsw/PrivacyAmplification).

    Original: Wang, Li, Qian, Du, Lin, Yang, "Hiding numerical vectors in local private and
    shuffled messages", IJCAI 2021 (extended: arXiv 2304.04410). A user's set ``X`` of ``s``
    items (padded) is hashed by a public per-user hash ``h`` into ``[l]``; the output
    ``z in [l]`` has probability ``e^eps0/Omega`` on ``C = h(X)`` and ``1/Omega`` elsewhere,
    ``Omega = s e^eps0 + l - s``. The domain size ``d`` does not enter.

    ``p = e^eps0``, ``q = e^eps0``, ``beta = min(s, l-s)(e^eps0 - 1)/Omega``: the sup over
    hash realizations (``h`` injective on ``X``, images as far apart as ``l`` allows), as
    the row in the paper authors' repository (wangsw/PrivacyAmplification) gives it.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      s: items per user (padded), an integer in [1, l - 1].
      l: hash range (length), an integer >= 2.

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp, p, (eps0, s, l) = eps0_inputs(eps0, (S_COL, s), (L, l))
    xp = inp.xp
    inp.require(s <= l - 1.0, "s", "must be <= l - 1")
    return inp.params(p, xp.minimum(s, l - s) * (p - 1.0) / (s * p + l - s), p)
