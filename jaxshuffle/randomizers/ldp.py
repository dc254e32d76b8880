"""Single-message eps0-LDP randomizers of the paper's Tables 2 and 6, with their Theorem 5.1 lower parameters.

Each function states its mechanism's definition; values are derived from it and checked
against the explicit probability matrix (or numerical integration) in
``tests/test_randomizers.py``. Where the paper's table differs, the docstring says so under
"Discrepancy". Definitions of ``p, beta, q``: docs/math.md section 10.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

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
    LowerParams,
    RowMatrix,
    VRParams,
)


def _log_binom(xp, n, k):
    """log C(n, k) for 0 <= k <= n (float arrays holding integers); ``xp`` the array module."""
    if xp is np:
        from scipy.special import gammaln
    else:
        gammaln = jax.scipy.special.gammaln
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams`: float64 arrays broadcast over the arguments:
        the upper-bound side (Theorem 4.7), each parameter at least the mechanism's own value (docs/math.md
        section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), numpy=True)
    xp = inp.xp
    (eps0,) = inp.values
    p = xp.exp(eps0)
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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams`: float64 arrays broadcast over the arguments:
        the upper-bound side (Theorem 4.7), each parameter at least the mechanism's own value (docs/math.md
        section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), numpy=True)
    xp = inp.xp
    (eps0,) = inp.values
    p = xp.exp(eps0)
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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams`: float64 arrays broadcast over the arguments:
        the upper-bound side (Theorem 4.7), each parameter at least the mechanism's own value (docs/math.md
        section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (C, c), numpy=True)
    xp = inp.xp
    eps0, c = inp.values
    p = xp.exp(eps0)
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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams` (``mechanism``: :class:`KaryRR`): float64
        arrays broadcast over the arguments: the upper-bound side (Theorem 4.7), each parameter at least the
        mechanism's own value (docs/math.md section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (K2, k), numpy=True)
    xp = inp.xp
    eps0, k = inp.values
    p = xp.exp(eps0)
    return inp.params(p, (p - 1.0) / (p + k - 1.0), p, mechanism=KaryRR(eps0, k))


def grr_lower(eps0, k) -> LowerParams:
    """Theorem 5.1 parameters of :func:`grr` for inputs ``x0 = 0, x1 = 1``.

    ``p0 = e^eps0``; with ``k >= 3`` the others hold a third value: ``q0 = q1 = e^eps0``
    (the lower pair equals the upper pair); with ``k = 2``: ``x* = x0``, ``q0 = 1, q1 = e^eps0``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      k: number of options (domain size), an integer >= 2.

    Returns:
      The parameters ``(p0, beta, q0, q1)`` above, a :class:`LowerParams`: float64 arrays broadcast over the
        arguments: the lower side (Theorem 5.1; docs/math.md section 10): the epsilon of their pair
        (:meth:`LowerParams.pair`) is a lower bound (errs low) on the shuffled mechanism's epsilon.

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (K2, k), numpy=True)
    xp = inp.xp
    eps0, k = inp.values
    p = xp.exp(eps0)
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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams` (``mechanism``: :class:`RowMatrix`): float64
        arrays broadcast over the arguments: the upper-bound side (Theorem 4.7), each parameter at least the
        mechanism's own value (docs/math.md section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (D2, d), numpy=True)
    xp = inp.xp
    eps0, d = inp.values
    p = xp.exp(eps0)
    return inp.params(p, xp.tanh(0.25 * eps0), p, mechanism=RowMatrix("binary-rr", (eps0, d)))


def rappor(eps0, d) -> VRParams:
    """Basic one-time RAPPOR (one hash function). Table 2 row "binary RR on d options".

    Original: Erlingsson, Pihur, Korolova, "RAPPOR: randomized aggregatable
    privacy-preserving ordinal response", 2014. Identical to :func:`binary_rr`:
    ``p = e^eps0``, ``beta = (e^{eps0/2} - 1)/(e^{eps0/2} + 1)``, ``q = e^eps0``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      d: number of options (domain size), an integer >= 2.

    Returns:
      The parameters ``(p, beta, q)`` above, a :class:`VRParams` (those of :func:`binary_rr`): float64 arrays
        broadcast over the arguments: the upper-bound side (Theorem 4.7), each parameter at least the
        mechanism's own value (docs/math.md section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    return binary_rr(eps0, d)


def binary_rr_lower(eps0, d) -> LowerParams:
    """Theorem 5.1 parameters of :func:`binary_rr` for inputs ``e_0, e_1``.

    ``Y0 = {y0 = 1, y1 = 0}``: ``p0 = a^2/(1-a)^2 = e^eps0``. With ``d >= 3`` the others hold
    ``e_2``, whose mass on ``Y1`` is ``a(1-a)``: ``q0 = q1 = e^{eps0/2}`` (so binary RR is
    not exactly tight: the upper ``q`` is ``e^eps0``). With ``d = 2``: ``q0 = 1, q1 = e^eps0``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      d: number of options (domain size), an integer >= 2.

    Returns:
      The parameters ``(p0, beta, q0, q1)`` above, a :class:`LowerParams`: float64 arrays broadcast over the
        arguments: the lower side (Theorem 5.1; docs/math.md section 10): the epsilon of their pair
        (:meth:`LowerParams.pair`) is a lower bound (errs low) on the shuffled mechanism's epsilon.

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (D2, d), numpy=True)
    xp = inp.xp
    eps0, d = inp.values
    p = xp.exp(eps0)
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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams` (``mechanism``: :class:`RowMatrix`): float64
        arrays broadcast over the arguments: the upper-bound side (Theorem 4.7), each parameter at least the
        mechanism's own value (docs/math.md section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (D2, d), (K1, k), numpy=True)
    xp = inp.xp
    eps0, d, k = inp.values
    inp.require(k <= d - 1.0, "k", "must be <= d - 1 (subset size in [1, d-1])")
    p = xp.exp(eps0)
    return inp.params(p, (p - 1.0) * k * (d - k) / ((d - 1.0) * (k * p + d - k)), p,
                      mechanism=RowMatrix("subset-selection", (eps0, d, k)))


def subset_selection_lower(eps0, d, k) -> LowerParams:
    """Theorem 5.1 parameters of :func:`subset_selection` for inputs ``x0 = 0, x1 = 1``.

    ``p0 = e^eps0``; with ``d >= 3`` the others hold a third option, whose mass on
    ``Y1 = {S: 1 in S, 0 not in S}`` gives ``q0 = q1 = e^eps0 (d-2)/((k-1) e^eps0 + d - k - 1)``
    (``= e^eps0`` for ``k = 1``). With ``d = 2``: ``q0 = 1, q1 = e^eps0``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      d: number of options (domain size), an integer >= 2.
      k: subset size, an integer in [1, d - 1].

    Returns:
      The parameters ``(p0, beta, q0, q1)`` above, a :class:`LowerParams`: float64 arrays broadcast over the
        arguments: the lower side (Theorem 5.1; docs/math.md section 10): the epsilon of their pair
        (:meth:`LowerParams.pair`) is a lower bound (errs low) on the shuffled mechanism's epsilon.

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (D2, d), (K1, k), numpy=True)
    xp = inp.xp
    eps0, d, k = inp.values
    inp.require(k <= d - 1.0, "k", "must be <= d - 1 (subset size in [1, d-1])")
    p = xp.exp(eps0)
    beta = (p - 1.0) * k * (d - k) / ((d - 1.0) * (k * p + d - k))
    # q3 >= 1 exactly ((k-1) p + d-k-1 <= (d-2) p); at k = d - 1 it is 1 and rounds to 1 - ulp.
    q3 = xp.maximum(p * (d - 2.0) / xp.maximum((k - 1.0) * p + d - k - 1.0, 1e-300), 1.0)
    return inp.lower(p, beta, xp.where(d >= 3.0, q3, 1.0), xp.where(d >= 3.0, q3, p))


L = Arg("l", "int", 2.0, help="hash range (length) l")
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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams`: float64 arrays broadcast over the arguments:
        the upper-bound side (Theorem 4.7), each parameter at least the mechanism's own value (docs/math.md
        section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (L, l), (COLLISION, collision), numpy=True)
    xp = inp.xp
    eps0, l, coll = inp.values
    p = xp.exp(eps0)
    return inp.params(p, (1.0 - coll) * (p - 1.0) / (p + l - 1.0), p)


def local_hash_lower(eps0, l, collision=0.0) -> LowerParams:
    """Theorem 5.1 parameters of :func:`local_hash` (domain with at least 3 inputs).

    ``p0 = e^eps0``; the others hold a third input whose hash collides with ``H(x1)``
    with probability ``collision``, independently of ``H(x0) != H(x1)`` (true for the
    injective family, ``collision = 0``, and for uniformly random functions,
    ``collision = 1/l``): ``q0 = q1 = e^eps0 / (collision e^eps0 + 1 - collision)``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      l: hash range (length), an integer >= 2.
      collision: least collision probability ``P[H(x) = H(x')]`` over input pairs for the hash family, in
        [0, 1) (default 0: a family with a never-colliding pair, the table's value; ``1/l``: uniformly
        random hash functions).

    Returns:
      The parameters ``(p0, beta, q0, q1)`` above, a :class:`LowerParams`: float64 arrays broadcast over the
        arguments: the lower side (Theorem 5.1; docs/math.md section 10): the epsilon of their pair
        (:meth:`LowerParams.pair`) is a lower bound (errs low) on the shuffled mechanism's epsilon.

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (L, l), (COLLISION, collision), numpy=True)
    xp = inp.xp
    eps0, l, coll = inp.values
    p = xp.exp(eps0)
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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams` (``mechanism``: :class:`RowMatrix`): float64
        arrays broadcast over the arguments: the upper-bound side (Theorem 4.7), each parameter at least the
        mechanism's own value (docs/math.md section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (BIGK, K), (S_HR, s), (B_HR, B), numpy=True)
    xp = inp.xp
    eps0, K, s, B = inp.values
    inp.require((s * B <= K) & (s < K), "s", "must satisfy s <= K/B and s < K")
    p = xp.exp(eps0)
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
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].
      K: output domain size, an integer >= 2.
      s: size of each input's output set ``C_x``, an integer >= 1 with ``s <= K/B`` and ``s < K`` (``K/2``
        for ``B = 1``).
      B: number of blocks, an integer >= 1 (default 1). Also ``K >= 4 B`` (three inputs per Hadamard block).

    Returns:
      The parameters ``(p0, beta, q0, q1)`` above, a :class:`LowerParams`: float64 arrays broadcast over the
        arguments: the lower side (Theorem 5.1; docs/math.md section 10): the epsilon of their pair
        (:meth:`LowerParams.pair`) is a lower bound (errs low) on the shuffled mechanism's epsilon.

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (BIGK, K), (S_HR, s), (B_HR, B), numpy=True)
    xp = inp.xp
    eps0, K, s, B = inp.values
    inp.require((s * B <= K) & (s < K), "s", "must satisfy s <= K/B and s < K")
    inp.require(K / B >= 4.0, "K", "must be >= 4 B (three inputs per Hadamard block)")
    p = xp.exp(eps0)
    diff = xp.where(B == 1.0, 0.5 * s, s)
    beta = diff * (p - 1.0) / (s * p + K - s)
    return inp.lower(p, beta, xp.where(B == 2.0, 2.0 * p / (p + 1.0), p), p)


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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams`: float64 arrays broadcast over the arguments:
        the upper-bound side (Theorem 4.7), each parameter at least the mechanism's own value (docs/math.md
        section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams`: float64 arrays broadcast over the arguments:
        the upper-bound side (Theorem 4.7), each parameter at least the mechanism's own value (docs/math.md
        section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (D2, d), (S_SET, s), (ARC, arc), numpy=True)
    xp = inp.xp
    eps0, d, s, arc = inp.values
    inp.require(s <= d - 1.0, "s", "must be <= d - 1")
    inp.require(s * arc <= 1.0, "arc", "must satisfy s * arc <= 1")
    p = xp.exp(eps0)
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
    inp = Inputs((EPS0, eps0), (D2, d), (S_SET, s), (ARC, arc), numpy=True)
    xp = inp.xp
    eps0, d, s, arc = inp.values
    inp.require(d >= 3.0 * s, "d", "must be >= 3 s (three disjoint item sets)")
    inp.require(3.0 * s * arc <= 1.0, "arc", "must satisfy 3 s arc <= 1 (three sets' arcs without overlap)")
    p = xp.exp(eps0)
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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams`: float64 arrays broadcast over the arguments:
        the upper-bound side (Theorem 4.7), each parameter at least the mechanism's own value (docs/math.md
        section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (D2, d), (K_EXP, k), (S_SET, s), numpy=True)
    xp = inp.xp
    eps0, d, k, s = inp.values
    inp.require(s <= d - 1.0, "s", "must be <= d - 1")
    inp.require(k <= d - s, "k", "must be <= d - s")
    p = xp.exp(eps0)
    u = xp.minimum(2.0 * s, d)
    ok_k = inp.ok
    log_a = _log_binom(xp, d - s, xp.where(ok_k, k, 0.0)) - _log_binom(xp, d, xp.where(ok_k, k, 0.0))
    a = xp.exp(log_a)  # C(d-s,k)/C(d,k)
    has_b = k <= d - u
    log_ratio = _log_binom(xp, xp.where(has_b, d - u, 1.0), xp.where(has_b, k, 0.0)) - \
        _log_binom(xp, d - s, xp.where(ok_k, k, 0.0))
    frac = xp.where(has_b, -xp.expm1(log_ratio), 1.0)  # 1 - C(d-u,k)/C(d-s,k)
    return inp.params(p, (p - 1.0) * a * frac / (p - (p - 1.0) * a), p)


def duchi(eps0) -> VRParams:
    """Duchi et al.'s mechanism for ``[-1, 1]^dim``. Table 6 row "Duchi et al.".

    Original: Duchi, Jordan, Wainwright, "Local privacy and statistical minimax rates",
    2013. A vertex ``v`` of the cube is drawn with ``E v = x``; the output is uniform on
    ``{z in {-B, B}^dim: <z, v> > 0}`` w.p. ``e^eps0/(e^eps0 + 1)`` and on the opposite
    half otherwise.

    ``p = e^eps0``, ``beta = (e^eps0 - 1)/(e^eps0 + 1)`` (attained by opposite vertices for
    odd ``dim``; an upper bound otherwise), ``q = e^eps0``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].

    Returns:
      The parameters ``(p, beta, q)`` above, a :class:`VRParams` (those of :func:`general`): float64 arrays
        broadcast over the arguments: the upper-bound side (Theorem 4.7), each parameter at least the
        mechanism's own value (docs/math.md section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
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
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].

    Returns:
      The parameters ``(p, beta, q)`` above, a :class:`VRParams` (those of :func:`general`): float64 arrays
        broadcast over the arguments: the upper-bound side (Theorem 4.7), each parameter at least the
        mechanism's own value (docs/math.md section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    return general(eps0)


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
      The parameters ``(p, beta, q)`` above, a :class:`VRParams`: float64 arrays broadcast over the arguments:
        the upper-bound side (Theorem 4.7), each parameter at least the mechanism's own value (docs/math.md
        section 10).

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), (S_COL, s), (L, l), numpy=True)
    xp = inp.xp
    eps0, s, l = inp.values
    inp.require(s <= l - 1.0, "s", "must be <= l - 1")
    p = xp.exp(eps0)
    return inp.params(p, xp.minimum(s, l - s) * (p - 1.0) / (s * p + l - s), p)


def laplace_lower(eps0) -> LowerParams:
    """Theorem 5.1 parameters of :func:`laplace` for inputs 0 and 1, others at 1/2.

    ``Y1 = {y > 1/2}``: ``p0 = R(1)(Y1)/R(0)(Y1) = 2 e^{eps0/2} - 1``,
    ``beta = 1 - e^{-eps0/2}``, and ``x* = 1/2`` maximizes ``min(q0, q1)``:
    ``q0 = q1 = 2 - e^{-eps0/2}``.

    Args:
      eps0: local budget (the randomizer is eps0-LDP, ``p = e^eps0``), in [0, 700].

    Returns:
      The parameters ``(p0, beta, q0, q1)`` above, a :class:`LowerParams`: float64 arrays broadcast over the
        arguments: the lower side (Theorem 5.1; docs/math.md section 10): the epsilon of their pair
        (:meth:`LowerParams.pair`) is a lower bound (errs low) on the shuffled mechanism's epsilon.

    Raises:
      ValueError: naming the option and its valid range, for an invalid option (eager calls; under
        ``jit``/``vmap`` invalid points give NaN fields instead).
    """
    inp = Inputs((EPS0, eps0), numpy=True)
    xp = inp.xp
    (eps0,) = inp.values
    hh = xp.exp(-0.5 * eps0)
    return inp.lower(2.0 / hh - 1.0, -xp.expm1(-0.5 * eps0), 2.0 - hh, 2.0 - hh)


#: rows that moved to :mod:`jaxshuffle.randomizers.key_value` (two budgets), still importable from here
_MOVED = ("KEYS", "S_KV", "pckv_grr", "pckv_grr_lower", "privkv")


def __getattr__(name: str):
    if name in _MOVED:
        import warnings

        from jaxshuffle.randomizers import key_value

        warnings.warn(f"jaxshuffle.randomizers.ldp.{name} moved: import it from jaxshuffle.randomizers.key_value "
                      "(or jaxshuffle.randomizers)", DeprecationWarning, stacklevel=2)
        return getattr(key_value, name)
    raise AttributeError(f"module 'jaxshuffle.randomizers.ldp' has no attribute {name!r}")
