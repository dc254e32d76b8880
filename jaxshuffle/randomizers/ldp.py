"""Single-message eps0-LDP randomizers of the paper's Tables 2 and 6, with their Theorem 5.1 lower parameters.

Each function states its mechanism's definition; values are derived from it and checked
against the explicit probability matrix (or numerical integration) in
``tests/test_randomizers.py``. Where the paper's table differs, the docstring says so under
"Discrepancy". Definitions of ``p, beta, q``: docs/math.md section 8.
Returned sides and errors: as :mod:`jaxshuffle.randomizers` states for every row.
"""

from __future__ import annotations

from jaxshuffle._config import moved_names
from jaxshuffle.randomizers.matrices import (  # noqa: F401  (re-exported: their home until the split)
    binary_rr_matrix,
    hadamard_response_matrix,
    local_hash_matrix,
    subset_selection_matrix,
)
from jaxshuffle.randomizers.params import (
    D2,
    EPS0,
    Arg,
    Inputs,
    KaryRR,
    L,
    LowerParams,
    RowMatrix,
    VRParams,
    eps0_inputs,
)

# --------------------------------------------------------------------------------------
# eps0-LDP randomizers (Tables 2 and 6)
# --------------------------------------------------------------------------------------

def general(eps0) -> VRParams:
    """Any eps0-LDP randomizer (worst case). Table 2 / Table 6 row "general mechanisms".

    ``p = e^eps0``, ``beta = (e^eps0 - 1)/(e^eps0 + 1)``, ``q = e^eps0``.

    The worst-case total variation is attained by binary randomized response (Kairouz, Oh,
    Viswanath, "Extremal mechanisms for local differential privacy", 2014); with these
    parameters the Theorem 4.7 pair is the stronger clone (Feldman, McMillan, Talwar 2023).

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp, p, (eps0,) = eps0_inputs(eps0)
    return inp.params(p, (p - 1.0) / (p + 1.0), p)


def laplace(eps0) -> VRParams:
    """Laplace mechanism on [0, 1] with scale 1/eps0. Table 2 row "Laplace mechanism for [0,1]".

    Original: Dwork, McSherry, Nissim, Smith, "Calibrating noise to sensitivity", 2006.
    ``R(x)`` has density ``(eps0/2) exp(-eps0 |y - x|)``, ``x in [0, 1]``.

    ``p = e^eps0``, ``beta = TV(Lap(0), Lap(1)) = 1 - e^{-eps0/2}``, ``q = e^eps0``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700]. The noise's scale is
        ``1/eps0``.

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp, p, (eps0,) = eps0_inputs(eps0)
    xp = inp.xp
    return inp.params(p, -xp.expm1(-0.5 * eps0), p)


C = Arg("c", "real", 0.0, 1.0, low_open=True, help="cap area c: fraction of the sphere covered by the cap")


def privunit(eps0, c) -> VRParams:
    """PrivUnit with cap area ``c``. Table 2 row "PrivUnit mechanism with cap area c".

    Original: Bhowmick, Duchi, Freudiger, Kapoor, Rogers, "Protection against reconstruction
    and its applications in private federated learning", 2018 (the table cites Bonawitz et
    al. 2017). Input ``x`` on the unit sphere; the output ``z`` is uniform on the cap
    ``{z: <z, x> >= gamma}`` (normalized area ``c``) with probability
    ``pi = c e^eps0 / (c e^eps0 + 1 - c)`` and uniform on its complement otherwise, so the
    density ratio between inputs is at most ``e^eps0``.

    ``p = e^eps0``, ``q = e^eps0``, and, attained by antipodal inputs,
    ``beta = min(c, 1 - c) (e^eps0 - 1) / (c e^eps0 + 1 - c)``.

    Discrepancy: the table gives ``c (e^eps0 - 1)/(c e^eps0 + 1 - c)``, which is correct only
    for ``c <= 1/2``; for ``c > 1/2`` two caps always overlap, the area of
    ``cap(x) minus cap(-x)`` is ``1 - c``, and the table value even exceeds the worst case
    ``(e^eps0-1)/(e^eps0+1)`` as ``c -> 1``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      c: cap area: the fraction of the sphere the cap covers, in (0, 1).

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp, p, (eps0, c) = eps0_inputs(eps0, (C, c))
    xp = inp.xp
    return inp.params(p, xp.minimum(c, 1.0 - c) * (p - 1.0) / (c * p + 1.0 - c), p)


K2 = Arg("k", "int", 2.0, help="number of options (domain size)")


def grr(eps0, k) -> VRParams:
    """k-ary (generalized) randomized response. Table 2 row "general randomized response (GRR)".

    Original: Warner 1965; Kairouz, Bonawitz, Ramage, "Discrete distribution estimation under
    local privacy", 2016. ``R(x) = x`` with probability ``e^eps0/(e^eps0 + k - 1)``, any other
    option with probability ``1/(e^eps0 + k - 1)`` each.

    ``p = e^eps0``, ``beta = (e^eps0 - 1)/(e^eps0 + k - 1)``, ``q = e^eps0``; carries the
    mechanism itself (:class:`KaryRR`), so that ``amplify`` adds the tight blanket bound.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      k: number of options (domain size), an integer >= 2.

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams` (``mechanism``: :class:`KaryRR`), upper side.
    """
    inp, p, (eps0, k) = eps0_inputs(eps0, (K2, k))
    return inp.params(p, (p - 1.0) / (p + k - 1.0), p, mechanism=KaryRR(eps0, k))


def grr_lower(eps0, k) -> LowerParams:
    """Theorem 5.1 parameters of :func:`grr` for inputs ``x0 = 0, x1 = 1``.

    ``p0 = e^eps0``; with ``k >= 3`` the others hold a third value: ``q0 = q1 = e^eps0``
    (the lower pair equals the upper pair); with ``k = 2``: ``x* = x0``, ``q0 = 1, q1 = e^eps0``.

    Args:
      eps0, k: as in :func:`grr`.

    Returns:
      ``(p0, beta, q0, q1)`` above as :class:`LowerParams`, lower side.
    """
    inp, p, (eps0, k) = eps0_inputs(eps0, (K2, k))
    xp = inp.xp
    return inp.lower(p, (p - 1.0) / (p + k - 1.0), xp.where(k >= 3.0, p, 1.0), p)


def binary_rr(eps0, d) -> VRParams:
    """Binary randomized response on ``d`` options. Table 2 row "binary RR on d options".

    Original: Duchi, Jordan, Wainwright, "Local privacy and statistical minimax rates", 2013.
    ``x in [d]`` is one-hot encoded and every bit is reported truthfully with probability
    ``a = e^{eps0/2}/(e^{eps0/2} + 1)``, flipped otherwise (eps0/2 per bit: two bits differ).

    ``p = e^eps0``, ``beta = a^2 - (1-a)^2 = (e^{eps0/2} - 1)/(e^{eps0/2} + 1)``,
    ``q = e^eps0`` (``beta`` does not depend on ``d``). Carries its matrix (:class:`RowMatrix`,
    :func:`~jaxshuffle.randomizers.matrices.binary_rr_matrix`, ``2^d`` columns) for ``d <= 11``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      d: number of options (domain size), an integer >= 2.

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams` (``mechanism``: :class:`RowMatrix`), upper side.
    """
    inp, p, (eps0, d) = eps0_inputs(eps0, (D2, d))
    xp = inp.xp
    return inp.params(p, xp.tanh(0.25 * eps0), p, mechanism=RowMatrix("binary-rr", (eps0, d)))


def rappor(eps0, d) -> VRParams:
    """Basic one-time RAPPOR (one hash function). Table 2 row "binary RR on d options".

    Original: Erlingsson, Pihur, Korolova, "RAPPOR: randomized aggregatable
    privacy-preserving ordinal response", 2014. Identical to :func:`binary_rr`:
    ``p = e^eps0``, ``beta = (e^{eps0/2} - 1)/(e^{eps0/2} + 1)``, ``q = e^eps0``.

    Args:
      eps0, d: as in :func:`binary_rr`.

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams` (those of :func:`binary_rr`), upper side.
    """
    return binary_rr(eps0, d)


def binary_rr_lower(eps0, d) -> LowerParams:
    """Theorem 5.1 parameters of :func:`binary_rr` for inputs ``e_0, e_1``.

    ``Y0 = {y0 = 1, y1 = 0}``: ``p0 = a^2/(1-a)^2 = e^eps0``. With ``d >= 3`` the others hold
    ``e_2``, whose mass on ``Y1`` is ``a(1-a)``: ``q0 = q1 = e^{eps0/2}`` (so binary RR is
    not exactly tight: the upper ``q`` is ``e^eps0``). With ``d = 2``: ``q0 = 1, q1 = e^eps0``.

    Args:
      eps0, d: as in :func:`binary_rr`.

    Returns:
      ``(p0, beta, q0, q1)`` above as :class:`LowerParams`, lower side.
    """
    inp, p, (eps0, d) = eps0_inputs(eps0, (D2, d))
    xp = inp.xp
    return inp.lower(p, xp.tanh(0.25 * eps0), xp.where(d >= 3.0, xp.exp(0.5 * eps0), 1.0),
                     xp.where(d >= 3.0, xp.exp(0.5 * eps0), p))


K1 = Arg("k", "int", 1.0, help="subset size, 1 <= k <= d - 1")


def subset_selection(eps0, d, k) -> VRParams:
    """k-subset selection on ``d`` options. Table 2 row "k-subset on d options".

    Original: Wang et al., "Local differential private data aggregation for discrete
    distribution estimation", TPDS 2019; Ye, Barg, "Optimal schemes for discrete
    distribution estimation under LDP", 2018. The output is a ``k``-subset ``S`` of ``[d]``
    with probability proportional to ``e^eps0`` if ``x in S``, 1 otherwise.

    ``p = e^eps0``, ``q = e^eps0``,
    ``beta = (e^eps0-1)(C(d-1,k-1) - C(d-2,k-2)) / (e^eps0 C(d-1,k-1) + C(d-1,k))
    = (e^eps0 - 1) k (d-k) / ((d-1)(k e^eps0 + d - k))``. Carries its matrix
    (:class:`RowMatrix`, :func:`~jaxshuffle.randomizers.matrices.subset_selection_matrix`), so that
    ``amplify`` adds the certified blanket bound where the matrix is small enough
    (:data:`~jaxshuffle.randomizers.matrices.ROW_MATRICES`).

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      d: number of options (domain size), an integer >= 2.
      k: subset size, an integer in [1, d - 1].

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams` (``mechanism``: :class:`RowMatrix`), upper side.
    """
    inp, p, (eps0, d, k) = eps0_inputs(eps0, (D2, d), (K1, k))
    inp.require(k <= d - 1.0, "k", "must be <= d - 1 (subset size in [1, d-1])")
    return inp.params(p, (p - 1.0) * k * (d - k) / ((d - 1.0) * (k * p + d - k)), p,
                      mechanism=RowMatrix("subset-selection", (eps0, d, k)))


def subset_selection_lower(eps0, d, k) -> LowerParams:
    """Theorem 5.1 parameters of :func:`subset_selection` for inputs ``x0 = 0, x1 = 1``.

    ``p0 = e^eps0``; with ``d >= 3`` the others hold a third option, whose mass on
    ``Y1 = {S: 1 in S, 0 not in S}`` gives ``q0 = q1 = e^eps0 (d-2)/((k-1) e^eps0 + d - k - 1)``
    (``= e^eps0`` for ``k = 1``). With ``d = 2``: ``q0 = 1, q1 = e^eps0``.

    Args:
      eps0, d, k: as in :func:`subset_selection`.

    Returns:
      ``(p0, beta, q0, q1)`` above as :class:`LowerParams`, lower side.
    """
    inp, p, (eps0, d, k) = eps0_inputs(eps0, (D2, d), (K1, k))
    xp = inp.xp
    inp.require(k <= d - 1.0, "k", "must be <= d - 1 (subset size in [1, d-1])")
    beta = (p - 1.0) * k * (d - k) / ((d - 1.0) * (k * p + d - k))
    # q3 >= 1 exactly ((k-1) p + d-k-1 <= (d-2) p); at k = d - 1 it is 1 and rounds to 1 - ulp.
    q3 = xp.maximum(p * (d - 2.0) / xp.maximum((k - 1.0) * p + d - k - 1.0, 1e-300), 1.0)
    return inp.lower(p, beta, xp.where(d >= 3.0, q3, 1.0), xp.where(d >= 3.0, q3, p))


COLLISION = Arg("collision", "real", 0.0, 1.0, default=0.0,
                 help="least P[H(x) = H(x')] over input pairs for the hash family (0: a family with a "
                      "never-colliding pair, the table's value; 1/l: uniformly random hash functions)")


def local_hash(eps0, l, collision=0.0) -> VRParams:
    """Local hashing (OLH) with hash range ``l``. Table 2 row "local hash with length l".

    Original: Wang, Blocki, Li, Jha, "Locally differentially private protocols for frequency
    estimation", 2017. A hash function ``H: [d] -> [l]`` is drawn from a family and
    published; ``y = H(x)`` with probability ``e^eps0/(e^eps0 + l - 1)``, any other value in
    ``[l]`` with probability ``1/(e^eps0 + l - 1)``; the output is ``(H, y)``.

    ``p = e^eps0``, ``q = e^eps0``,
    ``beta = (1 - collision) (e^eps0 - 1)/(e^eps0 + l - 1)`` where ``collision`` is the least
    collision probability ``P[H(x) = H(x')]`` over input pairs.

    Discrepancy: the table's ``(e^eps0 - 1)/(e^eps0 + l - 1)`` is the value for a hash family
    with a never-colliding pair (``collision = 0``, the default, valid for every family); for
    uniformly random hash functions (``collision = 1/l``) the exact value is smaller by the
    factor ``1 - 1/l``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      l: hash range (length), an integer >= 2.
      collision: least collision probability ``P[H(x) = H(x')]`` over input pairs for the hash family, in
        [0, 1) (default 0: a family with a never-colliding pair, the table's value; ``1/l``: uniformly
        random hash functions).

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams`, upper side.
    """
    inp, p, (eps0, l, coll) = eps0_inputs(eps0, (L, l), (COLLISION, collision))
    return inp.params(p, (1.0 - coll) * (p - 1.0) / (p + l - 1.0), p)


def local_hash_lower(eps0, l, collision=0.0) -> LowerParams:
    """Theorem 5.1 parameters of :func:`local_hash` (domain with at least 3 inputs).

    ``p0 = e^eps0``; the others hold a third input whose hash collides with ``H(x1)``
    with probability ``collision``, independently of ``H(x0) != H(x1)`` (true for the
    injective family, ``collision = 0``, and for uniformly random functions,
    ``collision = 1/l``): ``q0 = q1 = e^eps0 / (collision e^eps0 + 1 - collision)``.

    Args:
      eps0, l, collision: as in :func:`local_hash`.

    Returns:
      ``(p0, beta, q0, q1)`` above as :class:`LowerParams`, lower side.
    """
    inp, p, (eps0, l, coll) = eps0_inputs(eps0, (L, l), (COLLISION, collision))
    qq = p / (coll * p + 1.0 - coll)
    return inp.lower(p, (1.0 - coll) * (p - 1.0) / (p + l - 1.0), qq, qq)


BIGK = Arg("K", "int", 2.0, help="output domain size K")
S_HR = Arg("s", "int", 1.0, help="size of each input's output set C_x (K/2 for B = 1)")
B_HR = Arg("B", "int", 1.0, help="number of blocks B", default=1.0)


def hadamard_response(eps0, K, s, B=1) -> VRParams:
    """Hadamard response HR(K, s, B). Table 2 rows "Hadamard response (K, s, B=1)" and "(B>1)".

    Original: Acharya, Sun, Zhang, "Hadamard response: estimating distributions privately,
    efficiently, and with little communication", 2018. Each input ``x`` owns a set ``C_x``
    of ``s`` outputs in ``[K]``; ``y in C_x`` has probability ``e^eps0/(s e^eps0 + K - s)``,
    any other ``y`` probability ``1/(s e^eps0 + K - s)``. With ``B = 1`` the sets are rows
    of a Hadamard matrix (``|C_x & C_x'| = s/2``); with ``B > 1`` the output domain is split
    into ``B`` blocks of size ``K/B`` and sets in different blocks are disjoint.

    ``p = e^eps0``, ``q = e^eps0``, ``beta = |C_x minus C_x'| (e^eps0 - 1)/(s e^eps0 + K - s)``:
    ``(s/2)(e^eps0-1)/(s e^eps0 + K - s)`` for ``B = 1`` and ``s (e^eps0-1)/(s e^eps0 + K - s)``
    for ``B > 1``. Carries its matrix (:class:`RowMatrix`,
    :func:`~jaxshuffle.randomizers.matrices.hadamard_response_matrix`) where it is built: ``B = 1``,
    ``s = K/2``, ``K`` a power of two up to 64 (:data:`~jaxshuffle.randomizers.matrices.ROW_MATRICES`).

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      K: output domain size, an integer >= 2.
      s: size of each input's output set ``C_x``, an integer >= 1 with ``s <= K/B`` and ``s < K`` (``K/2``
        for ``B = 1``).
      B: number of blocks, an integer >= 1 (default 1).

    Returns:
      ``(p, beta, q)`` above as :class:`VRParams` (``mechanism``: :class:`RowMatrix`), upper side.
    """
    inp, p, (eps0, K, s, B) = eps0_inputs(eps0, (BIGK, K), (S_HR, s), (B_HR, B))
    xp = inp.xp
    inp.require((s * B <= K) & (s < K), "s", "must satisfy s <= K/B and s < K")
    diff = xp.where(B == 1.0, 0.5 * s, s)
    return inp.params(p, diff * (p - 1.0) / (s * p + K - s), p,
                      mechanism=RowMatrix("hadamard-response", (eps0, K, s, B)))


def hadamard_response_lower(eps0, K, s, B=1) -> LowerParams:
    """Theorem 5.1 parameters of :func:`hadamard_response` (at least 3 inputs).

    ``B = 1``: inputs are Hadamard rows ``u, v`` and the others hold row ``u xor v``, which
    avoids both differing sets: ``p0 = q0 = q1 = e^eps0`` (exactly tight). ``B >= 3``: inputs
    in two blocks, the others in a third: ``p0 = q0 = q1 = e^eps0``. ``B = 2``: inputs in
    the two blocks, the others in ``x0``'s block (a different row):
    ``q0 = 2 e^eps0/(e^eps0 + 1)``, ``q1 = e^eps0``.

    Args:
      eps0, K, s, B: as in :func:`hadamard_response`.

    Returns:
      ``(p0, beta, q0, q1)`` above as :class:`LowerParams`, lower side.
    """
    inp, p, (eps0, K, s, B) = eps0_inputs(eps0, (BIGK, K), (S_HR, s), (B_HR, B))
    xp = inp.xp
    inp.require((s * B <= K) & (s < K), "s", "must satisfy s <= K/B and s < K")
    inp.require(K / B >= 4.0, "K", "must be >= 4 B (three inputs per Hadamard block)")
    diff = xp.where(B == 1.0, 0.5 * s, s)
    beta = diff * (p - 1.0) / (s * p + K - s)
    return inp.lower(p, beta, xp.where(B == 2.0, 2.0 * p / (p + 1.0), p), p)


def duchi(eps0) -> VRParams:
    """Duchi et al.'s mechanism for ``[-1, 1]^dim``. Table 6 row "Duchi et al.".

    Original: Duchi, Jordan, Wainwright, "Local privacy and statistical minimax rates",
    2013. A vertex ``v`` of the cube is drawn with ``E v = x``; the output is uniform on
    ``{z in {-B, B}^dim: <z, v> > 0}`` w.p. ``e^eps0/(e^eps0 + 1)`` and on the opposite
    half otherwise.

    ``p = e^eps0``, ``beta = (e^eps0 - 1)/(e^eps0 + 1)`` (attained by opposite vertices for
    odd ``dim``; an upper bound otherwise), ``q = e^eps0``.

    Args:
      eps0: as in :func:`general`.

    Returns:
      :func:`general`'s :class:`VRParams`, upper side.
    """
    return general(eps0)


def harmony(eps0) -> VRParams:
    """Harmony for ``[-1, 1]^dim``. Table 6 row "Harmony mechanism".

    Original: Nguyen, Xiao, Yang, Hui, Shin, Shin, "Collecting and analyzing data from smart
    device users with local differential privacy", 2016. A coordinate ``j`` is sampled
    uniformly; the output is ``(j, +)`` w.p. ``(1 + x_j (e^eps0-1)/(e^eps0+1))/2``, else
    ``(j, -)``.

    ``p = e^eps0``, ``beta = (e^eps0 - 1)/(e^eps0 + 1)`` (inputs ``x = 1``, ``x' = -1``),
    ``q = e^eps0``.

    Args:
      eps0: as in :func:`general`.

    Returns:
      :func:`general`'s :class:`VRParams`, upper side.
    """
    return general(eps0)



def laplace_lower(eps0) -> LowerParams:
    """Theorem 5.1 parameters of :func:`laplace` for inputs 0 and 1, others at 1/2.

    ``Y1 = {y > 1/2}``: ``p0 = R(1)(Y1)/R(0)(Y1) = 2 e^{eps0/2} - 1``,
    ``beta = 1 - e^{-eps0/2}``, and ``x* = 1/2`` maximizes ``min(q0, q1)``:
    ``q0 = q1 = 2 - e^{-eps0/2}``.

    Args:
      eps0: as in :func:`laplace`.

    Returns:
      ``(p0, beta, q0, q1)`` above as :class:`LowerParams`, lower side.
    """
    inp = Inputs((EPS0, eps0), numpy=True)
    xp = inp.xp
    (eps0,) = inp.values
    hh = xp.exp(-0.5 * eps0)
    return inp.lower(2.0 / hh - 1.0, -xp.expm1(-0.5 * eps0), 2.0 - hh, 2.0 - hh)


#: rows that moved to :mod:`jaxshuffle.randomizers.key_value` (two budgets) and
#: :mod:`jaxshuffle.randomizers.set_valued` (item sets), still importable from here with a warning
__getattr__ = moved_names(__name__, {
    **dict.fromkeys(("KEYS", "S_KV", "pckv_grr", "pckv_grr_lower", "privkv"), "jaxshuffle.randomizers.key_value"),
    **dict.fromkeys(("S_SET", "ARC", "K_EXP", "S_COL", "sampling_rappor", "wheel", "wheel_lower",
                     "k_subset_exponential", "collision"), "jaxshuffle.randomizers.set_valued")},
    also=" (or jaxshuffle.randomizers)")
