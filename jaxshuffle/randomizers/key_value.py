"""Key-value randomizers (two budgets: ``eps1`` for the key, ``eps2`` for the value), with their lower parameters.

PCKV-GRR (not in the seed tables) and PrivKV (Table 6). As in :mod:`jaxshuffle.randomizers.ldp`, each
function states its mechanism's definition; values are checked against the explicit probability matrix in
``tests/test_randomizers.py``. Definitions of ``p, beta, q``: docs/math.md section 8.
Returned sides and errors: as :mod:`jaxshuffle.randomizers` states for every row.
"""

from __future__ import annotations

from jaxshuffle.randomizers.params import D2, EPS1, EPS2, Arg, Inputs, LowerParams, VRParams

__all__ = ["KEYS", "S_KV", "pckv_grr", "pckv_grr_lower", "privkv"]


KEYS = Arg("d", "int", 2.0, help="number of keys d (including PCKV's padding keys)")


def pckv_grr(eps1, eps2, d) -> VRParams:
    """PCKV-GRR perturbation of one key-value pair on ``d`` keys (not in the seed tables).

    Original: Gu, Li, Cheng, Xiong, Cao, "PCKV: locally differentially private correlated
    key-value data collection with optimized utility", USENIX Security 2020. The sampled
    pair ``<k, v>``, ``v in {1, -1}``, is reported as ``<k, v>`` w.p. ``a b``, ``<k, -v>``
    w.p. ``a (1-b)``, and ``<k', +-1>`` w.p. ``c = (1-a)/(2(d-1))`` each for ``k' != k``, with
    ``a = e^eps1/(e^eps1 + d - 1)``, ``b = e^eps2/(e^eps2 + 1)``. (Padding-and-sampling of a
    key-value set only mixes such distributions, which cannot raise ``p`` or ``beta``.)

    ``p = max(e^eps2, 2 e^{eps1+eps2}/(e^eps2 + 1))`` (PCKV's composed budget),
    ``q = p``, ``beta = (a b - c) + |a (1-b) - c|`` (two different keys; the same key with
    opposite values gives the smaller ``a (2b - 1)``).

    Args:
      eps1: the key's budget, in [0, 700].
      eps2: the value's budget, in [0, 700].
      d: number of keys (PCKV's padding keys included), an integer >= 2.

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp = Inputs((EPS1, eps1), (EPS2, eps2), (KEYS, d), numpy=True)
    xp = inp.xp
    eps1, eps2, d = inp.values
    e1, e2 = xp.exp(eps1), xp.exp(eps2)
    a = e1 / (e1 + d - 1.0)
    b = e2 / (e2 + 1.0)
    c = (1.0 - a) / (2.0 * (d - 1.0))
    p = xp.maximum(e2, 2.0 * e1 * b)
    return inp.params(p, (a * b - c) + xp.abs(a * (1.0 - b) - c), p)


def pckv_grr_lower(eps1, eps2, d) -> LowerParams:
    """Theorem 5.1 parameters of :func:`pckv_grr` (``d >= 3`` keys).

    ``x0 = <k0, +1>``, ``x1 = <k1, +1>``, the others hold a third key ``k*``. With ``a, b, c`` of
    :func:`pckv_grr`: if ``a (1-b) > c`` (``2 e^eps1 > e^eps2 + 1``), ``Y1 = {<k1, +1>, <k1, -1>}``:
    ``P1(Y1) = a``, ``P0(Y1) = 2c``, so ``p0 = a/(2c) = e^eps1``, ``beta = a - 2c``; otherwise
    ``Y1 = {<k1, +1>, <k0, -1>}``: ``P1(Y1) = a b + c``, ``P0(Y1) = c + a (1-b)``, ``beta = a (2b - 1)``.
    The others' key ``k*`` puts ``c`` on each pair of ``Y0`` and ``Y1``: ``R*(Y1) = R*(Y0) = 2c``,
    ``q0 = q1 = P1(Y1)/(2c)``. ``beta`` is the table's (two different keys); ``p0 < p`` in general.
    """
    inp = Inputs((EPS1, eps1), (EPS2, eps2), (KEYS, d), numpy=True)
    xp = inp.xp
    eps1, eps2, d = inp.values
    inp.require(d >= 3.0, "d", "must be >= 3 (a third key for the other users)")
    e1, e2 = xp.exp(eps1), xp.exp(eps2)
    a = e1 / (e1 + d - 1.0)
    b = e2 / (e2 + 1.0)
    c = (1.0 - a) / (2.0 * (d - 1.0))
    hi = a * (1.0 - b) > c
    p1y1 = xp.where(hi, a, a * b + c)
    p0y1 = xp.where(hi, 2.0 * c, c + a * (1.0 - b))
    q = p1y1 / (2.0 * c)
    return inp.lower(p1y1 / p0y1, p1y1 - p0y1, q, q)


S_KV = Arg("s", "int", 1.0, help="maximum number of keys a user holds, 1 <= s <= d")


def privkv(eps1, eps2, d, s) -> VRParams:
    """PrivKV on users holding at most ``s`` of ``d`` keys. Table 6 row "PrivKV".

    Original: Ye, Hu, Meng, Zheng, "PrivKV: key-value data collection with local
    differential privacy", IEEE S&P 2019. A key index ``j`` is sampled uniformly from
    ``[d]``. If the user holds key ``j`` with value ``v`` (discretized to ``v* = +-1``), the
    output is ``<1, v*>`` w.p. ``a b``, ``<1, -v*>`` w.p. ``a (1-b)``, ``<0, 0>`` w.p.
    ``1 - a``; otherwise ``<0, 0>`` w.p. ``a`` and ``<1, +-1>`` w.p. ``(1-a)/2`` each;
    ``a = e^eps1/(e^eps1 + 1)``, ``b = e^eps2/(e^eps2 + 1)``.

    Per key: ``T_pm = a (2b - 1)`` (present with opposite values),
    ``T_pa = (|a b - h| + |a (1-b) - h| + 2a - 1)/2`` with ``h = (1-a)/2`` (present vs absent).
    Maximizing over key sets (``o`` shared keys, ``m`` keys held by one user only)::

        beta = max(s T_pm, min(2s, d) T_pa, (2s - d) T_pm + 2(d - s) T_pa [if s <= d < 2s]) / d,
        p = max(e^eps1, e^eps2, 2 e^{eps1+eps2}/(e^eps2 + 1)),   q = p.

    Discrepancy: the table writes ``p = q = e^{eps1+eps2}`` (valid, but not the largest ratio)
    and ``beta = 2s max{e^eps1 (e^eps2-1)/(e^eps2+1), e^eps1 - 1 + (e^eps2-1)/(2(e^eps2+1))} /
    (d (e^eps1+1))`` (also printing ``e^{eps2+1}`` for ``e^eps2 + 1``). Its first term is
    ``2 s T_pm`` where one shared key contributes ``T_pm`` once, and its second term exceeds
    ``T_pa`` by ``(e^eps1 - 1)(1 - b)/(e^eps1 + 1)``: a valid but loose bound.

    Args:
      eps1: the key's budget, in [0, 700].
      eps2: the value's budget, in [0, 700].
      d: number of keys, an integer >= 2.
      s: largest number of keys a user holds, an integer in [1, d].

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp = Inputs((EPS1, eps1), (EPS2, eps2), (D2, d), (S_KV, s), numpy=True)
    xp = inp.xp
    eps1, eps2, d, s = inp.values
    inp.require(s <= d, "s", "must be <= d")
    e1, e2 = xp.exp(eps1), xp.exp(eps2)
    a = e1 / (e1 + 1.0)
    b = e2 / (e2 + 1.0)
    h = 0.5 * (1.0 - a)
    t_pm = a * (2.0 * b - 1.0)
    t_pa = 0.5 * (xp.abs(a * b - h) + xp.abs(a * (1.0 - b) - h) + (2.0 * a - 1.0))
    mixed = xp.where((d < 2.0 * s), (2.0 * s - d) * t_pm + 2.0 * (d - s) * t_pa, 0.0)
    beta = xp.maximum(xp.maximum(s * t_pm, xp.minimum(2.0 * s, d) * t_pa), mixed) / d
    p = xp.maximum(xp.maximum(e1, e2), 2.0 * e1 * b)
    return inp.params(p, beta, p)
