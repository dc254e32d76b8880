"""Brute-force references for the blanket sum forms (tests only; slow and obviously right).

``sum_form_delta`` enumerates every count vector ``(a, b, c, d)`` of a four-category multinomial
and sums ``(cA a + cB b + cC c + cD d)_+ / n`` with pmfs from exact log-factorials (float64:
relative error of each term about 1e-14, so of the sum too: every term is >= 0).
``krr_categories`` writes the four k-RR sum forms of docs/parts/blanket.md from scratch, as
probabilities and coefficients per category, independently of ``jaxshuffle.blanket``.
``multinomial_blanket_delta`` instead builds (B1) from the two hypotheses' pmfs of the observed
counts (the pair form: P/Q = (E0 a + b + c)/(a + E0 b + c)) without the sum-form identity.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln


def krr_categories(eps0: float, k: int, kind: str, t: float):
    """``(probs, coefs)`` of the four categories of ``kind`` at ``t`` (numpy, from the definitions)."""
    E0 = math.exp(eps0)
    r = 1.0 / (E0 + k - 1)
    if kind == "blanket":
        return [r, r, (k - 2) * r, (E0 - 1) * r], [E0 - t, 1 - t * E0, 1 - t, 0.0]
    if kind == "all_z":
        return [r, r, E0 * r, (k - 3) * r], [E0 - t, 1 - t * E0, (1 - t) / E0, 1 - t]
    if kind == "all_x0":
        return [E0 * r, r, (k - 2) * r, 0.0], [1 - t / E0, 1 - t * E0, 1 - t, 0.0]
    if kind == "all_x0_mirror":
        return [r, E0 * r, (k - 2) * r, 0.0], [E0 - t, 1 / E0 - t, 1 - t, 0.0]
    raise ValueError(kind)


def sum_form_delta(probs, coefs, n: int) -> float:
    """``(1/n) E[(sum_i coef_i * count_i)_+]``, counts ~ Multinomial(n, probs), by enumeration."""
    a = np.arange(n + 1)
    A, B, C = np.meshgrid(a, a, a, indexing="ij")
    D = n - A - B - C
    ok = D >= 0
    A, B, C, D = A[ok], B[ok], C[ok], D[ok]
    counts = (A, B, C, D)
    logp = gammaln(n + 1.0) - sum(gammaln(x + 1.0) for x in counts)
    for x, p in zip(counts, probs):
        if p == 0:
            logp = np.where(x > 0, -np.inf, logp)
        else:
            logp = logp + x * math.log(p)
    z = sum(c * x for c, x in zip(coefs, counts))
    return float(np.sum(np.exp(logp) * np.maximum(z, 0.0)) / n)


def krr_delta(eps0: float, k: int, n: int, eps: float, kind: str = "blanket") -> float:
    probs, coefs = krr_categories(eps0, k, kind, math.exp(eps))
    return sum_form_delta(probs, coefs, n)


def pair_blanket_delta(eps0: float, k: int, n: int, eps: float) -> float:
    """(B1) as a hockey-stick divergence of the blanket pair (victim + n-1 others), by enumeration.

    Victim: (x0, x1, z) with probabilities (E0, 1, k-2) r under P and (1, E0, k-2) r under Q;
    each other: x0, x1, z, null with (r, r, (k-2) r, (E0-1) r). Observation: counts of x0, x1, z.
    """
    E0, t = math.exp(eps0), math.exp(eps)
    r = 1.0 / (E0 + k - 1)
    m = n - 1
    probs = [r, r, (k - 2) * r, (E0 - 1) * r]
    a = np.arange(m + 2)
    A, B, C = np.meshgrid(a, a, a, indexing="ij")

    def others(A, B, C):
        D = m - A - B - C
        ok = (A >= 0) & (B >= 0) & (C >= 0) & (D >= 0)
        As, Bs, Cs, Ds = (np.where(ok, x, 0) for x in (A, B, C, D))
        lp = gammaln(m + 1.0) - sum(gammaln(x + 1.0) for x in (As, Bs, Cs, Ds))
        for x, p in zip((As, Bs, Cs, Ds), probs):
            lp = lp + (x * math.log(p) if p > 0 else np.where(x > 0, -np.inf, 0.0))
        return np.where(ok, np.exp(lp), 0.0)

    vp = [E0 * r, r, (k - 2) * r]
    vq = [r, E0 * r, (k - 2) * r]
    shifts = [(1, 0, 0), (0, 1, 0), (0, 0, 1)]
    P = sum(p * others(A - s[0], B - s[1], C - s[2]) for p, s in zip(vp, shifts))
    Q = sum(q * others(A - s[0], B - s[1], C - s[2]) for q, s in zip(vq, shifts))
    return float(max(np.sum(np.maximum(P - t * Q, 0.0)), np.sum(np.maximum(Q - t * P, 0.0))))
