"""Which clone constant is proven for which randomizer: the certified worst-case pair.

The clone pair with constant ``r`` (docs/math.md 3.1) is the two-count pair
``(u, v, w, r0, r1) = (p/(p+1), 1/(p+1), 0, r, r)``. It dominates the shuffled mechanism, for every
dataset of the others, whenever the *pointwise clone condition* holds::

    R(x, y) >= r (R(x0, y) + R(x1, y))   for every input x, victim inputs x0 != x1 and output y.   (D_r)

Proof in short (docs/math.md 3.1): write ``R(x0) = (p Q0 + Q1)/(p+1)`` and ``R(x1) = (Q0 + p Q1)/(p+1)``
with ``Q0 = (p R(x0) - R(x1))/(p-1) >= 0`` and ``Q1`` likewise; then ``Q0 + Q1 = R(x0) + R(x1)``, and
(D_r) writes every other user's ``R(x_i) = r Q0 + r Q1 + (1 - 2r) L_i`` with ``L_i`` a distribution.
Counting who drew ``Q0`` and who drew ``Q1`` gives the pair; the rest is a post-processing the same
under both hypotheses. Which ``r`` each randomizer has (:func:`certified_clone`):

* ``1/(2q)`` (the *standard clone*, Feldman, McMillan, Talwar 2021): every randomizer whose blanket
  ratio is ``q`` (``R(x, y) >= R(x_v, y)/q`` for the victim's ``x_v``), so every eps0-LDP randomizer
  with ``q = p = e^eps0``;
* ``1/(p+1)`` (the *stronger clone*, FMT 2023): k-ary randomized response (``R(x, y) >= 1/(E0+k-1)``
  and ``R(x0, y) + R(x1, y) <= (E0+1)/(E0+k-1)``), and binary RR on two options;
* ``r* = min R(x, y)/(R(x0, y) + R(x1, y))`` over the matrix, capped at ``1/(p+1)`` (the *general
  clone*): a mechanism given by its matrix.

The stronger clone for *every* eps0-LDP randomizer was claimed by FMT 2023 and withdrawn in its
erratum (the proof of its Lemma 3.5 fails when the victim's distinguishing weight is below
``1/(e^eps0+1)``); no proof is known, so jaxshuffle does not certify it for other randomizers
(``jaxshuffle.stronger_clone_pair`` still computes it, and ``amplify`` reports it only where proven).
Multi-message rows (``p = inf``) keep their own pair ``u = 1, v = 0, r = 1/q`` (docs/math.md 3).
"""

from __future__ import annotations

import enum

import numpy as np

from jaxshuffle._config import array_module, as_float64

__all__ = ["CloneProof", "certified_clone", "matrix_clone_constant"]


class CloneProof(enum.IntEnum):
    """The proof behind a certified worst-case (clone) pair: the constant ``r`` and why it holds."""

    STANDARD = 0  #: r = 1/(2q): every randomizer with blanket ratio q (FMT 2021; q = p for eps0-LDP)
    STRONGER = 1  #: r = 1/(p+1): the pointwise clone condition of k-ary RR / binary RR on two options
    GENERAL = 2  #: r = r* from the mechanism's matrix (capped at 1/(p+1))
    MULTI_MESSAGE = 3  #: p = inf multi-message rows: u = 1, v = 0, r = 1/q
    NONE = 4  #: no two-count pair is an upper bound: clients sampled per round (docs/math.md 12.10)

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    CloneProof.STANDARD: "standard clone, r = 1/(2q) (any randomizer with blanket ratio q)",
    CloneProof.STRONGER: "stronger clone, r = 1/(p+1) (pointwise clone condition of k-ary RR)",
    CloneProof.GENERAL: "general clone, r = r* of the matrix",
    CloneProof.MULTI_MESSAGE: "multi-message pair, r = 1/q",
    CloneProof.NONE: "none: with clients sampled no two-count pair is an upper bound",
}


def matrix_clone_constant(matrix) -> float:
    """``r* = min over x, x0 != x1, y of R(x, y) / (R(x0, y) + R(x1, y))`` (outputs that neither
    victim input produces impose nothing), the largest ``r`` for which (D_r) holds. numpy, exact up
    to one rounding per ratio, rounded down (the safe side)."""
    R = np.asarray(matrix, dtype=np.float64)
    K = R.shape[0]
    if K < 2:
        return 0.5
    low = R.min(axis=0)  # the worst x for each y
    best = np.inf
    for a in range(K):
        for b in range(a + 1, K):
            s = R[a] + R[b]
            live = s > 0
            if np.any(live):
                best = min(best, float(np.min(low[live] / s[live])))
    return float(np.nextafter(best, 0.0)) if np.isfinite(best) else 0.5


def certified_clone(randomizer, xp=None):
    """``(r, proof)``: the clone constant proven for ``randomizer`` (a :class:`VRParams`) and its
    :class:`CloneProof` code, as arrays of the fields' broadcast shape (docs/math.md 3.1).

    The largest proven ``r`` wins; ``r <= 1/(p+1)`` always (larger would contradict ``p``). Rounding:
    ``1/(2q)`` and ``1/(p+1)`` are computed in float64 and lowered by a relative 4e-16 (a smaller ``r``
    is the safe side: fewer clones).
    """
    from jaxshuffle.randomizers.params import KaryRR, MatrixMechanism, RowMatrix
    xp = xp or array_module(randomizer.p, randomizer.q)
    p, q = as_float64(randomizer.p, xp), as_float64(randomizer.q, xp)
    p, q = xp.broadcast_arrays(p, q)
    shrink = 1.0 - 4e-16
    inf = xp.isinf(p)
    r_std = 0.5 / xp.where(inf, 1.0, q) * shrink
    r_strong = 1.0 / xp.where(inf, 2.0, p + 1.0) * shrink
    r, proof = r_std, xp.full(p.shape, CloneProof.STANDARD, dtype=np.int8)
    mech = randomizer.mechanism
    strong = None
    if isinstance(mech, KaryRR):
        strong = xp.ones(p.shape, dtype=bool)
    elif isinstance(mech, RowMatrix) and mech.builder == "binary-rr":
        d = np.broadcast_to(np.asarray(mech.options[1], np.float64), p.shape)
        strong = xp.asarray(d == 2)
    if strong is not None:
        use = strong & (r_strong > r)
        r = xp.where(use, r_strong, r)
        proof = xp.where(use, np.int8(CloneProof.STRONGER), proof).astype(np.int8)
    if isinstance(mech, MatrixMechanism):
        r_star = min(matrix_clone_constant(np.asarray(mech.matrix)), float(np.max(r_strong)))
        use = r_star > r
        r = xp.where(use, r_star, r)
        proof = xp.where(use, np.int8(CloneProof.GENERAL), proof).astype(np.int8)
    r = xp.where(inf, 1.0 / xp.where(inf, q, 1.0), r)
    proof = xp.where(inf, np.int8(CloneProof.MULTI_MESSAGE), proof).astype(np.int8)
    return r, proof


def certified_worst_case_pair(randomizer, xp=None):
    """``(pair, proof)``: the clone pair ``(p/(p+1), 1/(p+1), 0, r, r)`` with the constant of
    :func:`certified_clone` (``(1, 0, 0, 1/q, 1/q)`` at ``p = inf``), certified for ``randomizer``."""
    import jax.numpy as jnp

    from jaxshuffle.engine.two_count.pair import TwoCountPair, clone_fields
    xp = xp or array_module(randomizer.p, randomizer.q)
    r, proof = certified_clone(randomizer, xp)
    cu, cv = clone_fields(xp.broadcast_to(as_float64(randomizer.p, xp), r.shape), xp)
    fields = (cu, cv, xp.zeros_like(cu), r, r)
    if xp is not jnp:
        fields = tuple(jnp.asarray(x) for x in fields)
    return TwoCountPair(*fields, bound="upper", source=clone_source(proof)), proof


def clone_source(proof) -> str:
    """The ``source`` label of a certified clone pair: ``"<proof> clone"`` (``"standard clone"``, ...)
    when every point has one proof, ``"clone (per-point proof)"`` when a batch mixes them."""
    codes = np.unique(np.asarray(proof))
    if codes.size == 1:
        return f"{CloneProof(int(codes[0])).name.lower()} clone"
    return "clone (per-point proof)"


def equal_pairwise_total_variation(matrix) -> bool:
    """True when every pair of the matrix's rows has the same total variation (each computed as an
    exactly rounded ``math.fsum`` of ``|R(x0, y) - R(x1, y)| / 2``, so a permutation of the same
    entries gives the same float)."""
    import math

    R = np.asarray(matrix, dtype=np.float64)
    tvs = {math.fsum(np.abs(R[a] - R[b]).tolist()) for a in range(len(R)) for b in range(a + 1, len(R))}
    return len(tvs) <= 1


#: catalog rows (:class:`RowMatrix` builders) whose every pair of inputs has the same total variation, for
#: every option value: the mechanism commutes with every permutation of the d options (relabelling the
#: outputs alike), and permutations map any pair of distinct options to any other, so
#: ``TV(R(x0), R(x1))`` is one number (``tests/test_clone.py`` checks the built matrices)
SYMMETRIC_ROWS = ("binary-rr", "subset-selection")


def scaled_pair_proven(randomizer, shape=()) -> np.ndarray:
    """Where the ``(u+v)``-scaled pair is proven for ``randomizer`` (bool, broadcast to ``shape``).

    The scaled pair bounds the victim pair whose total variation is ``beta`` itself; covering input
    pairs of smaller total variation is tested, not proven (docs/math.md 3, item 3). It is proven when
    every pair of inputs has total variation ``beta``: k-ary RR; binary RR and subset selection
    (:data:`SYMMETRIC_ROWS`); Hadamard response where its matrix is built (``B = 1``, ``s = K/2``: two
    distinct Hadamard rows differ in exactly ``K/2`` columns); a matrix whose rows' pairwise total
    variations are all equal (:func:`equal_pairwise_total_variation`).
    """
    from jaxshuffle.randomizers.params import KaryRR, MatrixMechanism, RowMatrix

    mech = randomizer.mechanism
    if isinstance(mech, KaryRR):
        return np.ones(shape, dtype=bool)
    if isinstance(mech, RowMatrix) and mech.builder in SYMMETRIC_ROWS:
        return np.ones(shape, dtype=bool)
    if isinstance(mech, RowMatrix) and mech.builder == "hadamard-response":
        from jaxshuffle.randomizers.matrices import row_covers
        return np.array([row_covers(mech.builder, *o) for o in mech.points(shape)], dtype=bool).reshape(shape)
    if isinstance(mech, MatrixMechanism):
        return np.full(shape, equal_pairwise_total_variation(mech.matrix))
    return np.zeros(shape, dtype=bool)
