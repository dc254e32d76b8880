"""Clients sampled per round: each of ``n`` users takes part with probability ``g`` (Poisson sampling).

A participant sends ``R(x)``; the shuffler releases the participants' messages, so their number is
visible. Neighbouring datasets replace one user's input (docs/math.md section 12.10).

A user who does not take part sends a "void" message, so the round is the shuffled randomizer
``R_g = [g R | (1 - g) 1]`` (one more output column; docs/math.md 12.10). What is certified here:

* **k-ary randomized response**: k-RR's sum forms at the real ``k' = k + (1 - g)(e^eps0 + k - 1)/g``.
  A non-participant is one more "other value" message that no one counts as x0 or x1, and
  ``1/(e^eps0 + k' - 1) = g/(e^eps0 + k - 1)`` puts every category at its subsampled probability.
  The blanket form (B1) at ``k'`` is the certified upper bound; the exact all-x0 and all-z datasets'
  forms at ``k'`` are the exact divergences of those datasets of the sampled round, so their certified
  lower ends are lower bounds (:func:`jaxshuffle.blanket.krr_bounds` with ``k_forms``).
* **a finite mechanism given by its matrix** (:class:`~jaxshuffle.randomizers.MatrixMechanism`, or a
  catalog row that builds its matrix: subset selection, Hadamard response, binary RR): the matrix
  engine (docs/math.md 11) on ``R_g`` itself, upper and exact-dataset lower bounds, or the three-count
  pair below where it is smaller;
* **every other single-message randomizer** with a finite ratio ``p``: the three-count pair
  (:func:`three_count_forms`) with the clone constant proven for it (docs/math.md 3.1, 12.10), an
  upper bound only.

Multi-message protocols (and ``p = inf``) are refused with ``sample_rate < 1`` for now.

What is NOT an upper bound, and is never used: the two-count pair with ``w = 1 - g`` (it merges the
non-participants into the others' null marker, but the mechanism reveals how many there are), and
``log(1 + g (e^eps - 1))`` (the add/remove amplification by subsampling).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from jaxshuffle._config import check
from jaxshuffle._numerics import UNIT_ROUNDOFF

#: relative margin by which the computed ``k'`` is lowered: a few roundings (exp, sum, product,
#: division) each of at most one unit roundoff, with room to spare
K_MARGIN = 16 * UNIT_ROUNDOFF


def check_sample_rate(sample_rate, name: str = "sample_rate") -> np.ndarray:
    """``sample_rate`` as float64, ValueError naming it unless every value lies in (0, 1]."""
    g = np.asarray(sample_rate, np.float64)
    bad = ~((g > 0) & (g <= 1))
    if np.any(bad):
        got = float(g[bad].flat[0]) if g.ndim else float(g)
        raise ValueError(f"{name}: the probability that a user takes part in a round must lie in (0, 1], got {got!r}")
    return g


def scalar_sample_rate(sample_rate, taker: str) -> float:
    """``sample_rate`` as a float in (0, 1] for an entry point that takes one rate (``taker`` names it in
    the error: ``"sample_rate: <taker> takes a scalar"``); ValueError naming the parameter otherwise."""
    if np.ndim(sample_rate) != 0:
        raise ValueError(f"sample_rate: {taker} takes a scalar, got shape {np.shape(sample_rate)}")
    return float(check_sample_rate(sample_rate))


def subsampled_krr_k(eps0, k, sample_rate) -> np.ndarray:
    """The real ``k'`` whose k-RR blanket form is k-RR's with clients sampled at rate ``g``.

    ``k' = k + (1 - g)(e^eps0 + k - 1)/g`` (docs/math.md 12.10), lowered by :data:`K_MARGIN`
    relative where ``g < 1`` and exactly ``k`` at ``g = 1``. Lowering is the safe side: ``k'`` at a
    smaller value is the form of a larger rate ``g' >= g``, and the mechanism at rate ``g`` is a
    post-processing of the one at ``g'`` (drop each message with probability ``1 - g/g'``), so its
    epsilon is at most that one's.
    """
    eps0, k, g = np.broadcast_arrays(np.asarray(eps0, np.float64), np.asarray(k, np.float64),
                                     check_sample_rate(sample_rate))
    with np.errstate(over="ignore"):
        extra = (1.0 - g) * (np.exp(eps0) + k - 1.0) / g
    lowered = np.maximum((k + extra) * (1.0 - K_MARGIN), k)
    return np.where(g == 1.0, k, lowered)


class SubsampledEpsilon(NamedTuple):
    """Certified epsilon of one round with clients sampled at ``sample_rate`` (arrays of the points' shape).

    Clients sampled per round: docs/math.md section 12.10.

    Attributes:
      upper: certified upper bound on the round's epsilon at ``delta``.
      status: the blanket search's status (:class:`jaxshuffle.Status`).
      k_blanket: the real ``k'`` the blanket form was evaluated at (NaN for other randomizers).
      source: the proof behind ``upper`` (k-RR: :data:`KRR_SOURCE`; others: one per point, as
        :attr:`SubsampledBounds.source`).
    """

    upper: np.ndarray
    status: np.ndarray
    k_blanket: np.ndarray
    source: str | np.ndarray  # one string for k-RR, one per point for the others


def subsampled_epsilon(randomizer, n, delta, *, sample_rate) -> SubsampledEpsilon:
    """Certified epsilon of ``n`` users' shuffled ``randomizer`` when each takes part with probability ``sample_rate``.

    Args:
      randomizer: a :class:`~jaxshuffle.randomizers.VRParams` of k-ary randomized response
        (``R.grr(eps0, k)``), or any other single-message randomizer (:func:`subsampled_bounds`'s
        upper without its lower lanes; ``k_blanket`` NaN, ``source`` then per point); multi-message
        rows are refused.
      n: the number of users (each may or may not take part), integers in [2, 1e12].
      delta: target delta(s) in (0, 1).
      sample_rate: ``g``, the probability that a user takes part in the round, in (0, 1].

    Arrays broadcast. At ``sample_rate = 1`` it is
    ``jaxshuffle.blanket.blanket_epsilon(eps0, k, n, delta).upper`` exactly (docs/math.md 12.10).

    Returns:
      The bound, a :class:`SubsampledEpsilon`: ``upper`` is certified (upper side, errs high): the blanket
        form of k-RR at the real ``k'`` of :func:`subsampled_krr_k` (other randomizers:
        :func:`subsampled_bounds`'s ``upper``).

    Raises:
      ValueError: naming the parameter, for a ``randomizer`` that is not a ``VRParams`` (or a
        multi-message one), or a bad ``n``, ``delta`` or ``sample_rate``.
    """
    from jaxshuffle.engine.blanket import blanket_epsilon
    from jaxshuffle.randomizers.params import VRParams

    if not isinstance(randomizer, VRParams):
        raise ValueError(f"randomizer: expected VRParams (jaxshuffle.randomizers), got {type(randomizer).__name__}")
    mech = randomizer.krr()
    if mech is None:  # a matrix or the three-count pair: the upper side of subsampled_bounds
        b = subsampled_bounds(randomizer, n, delta, sample_rate=sample_rate, lower=False)
        return SubsampledEpsilon(b.upper, b.status, np.full(np.shape(b.upper), np.nan), b.source)
    g = check_sample_rate(sample_rate)
    eps0, k = np.asarray(mech.eps0, np.float64), np.asarray(mech.k, np.float64)
    k_blanket = subsampled_krr_k(eps0, k, g)
    res = blanket_epsilon(eps0, k_blanket, n, delta, real_k=True)
    return SubsampledEpsilon(np.asarray(res.upper), np.asarray(res.status), np.asarray(k_blanket), KRR_SOURCE)



def sampled_matrix(matrix, sample_rate: float) -> np.ndarray:
    """``R_g = [g R | (1 - g) 1]``: the ``K x (K' + 1)`` matrix of a user who takes part with probability
    ``g`` and otherwise sends the void message (last column). Entries are float64 products, as exact as
    the matrix itself (each rounded once)."""
    R = np.asarray(matrix, np.float64)
    g = float(sample_rate)
    return np.hstack([g * R, np.full((R.shape[0], 1), 1.0 - g)])


class SubsampledBounds(NamedTuple):
    """Both sides for a round with clients sampled (:func:`subsampled_bounds`), arrays of the points' shape.

    Clients sampled per round: docs/math.md section 12.10.

    Attributes:
      upper: certified upper bound on the round's epsilon.
      lower: certified lower bound (the largest certified lower end over exact datasets of the sampled
        round; ``0`` where ``has_lower`` is False).
      status: the upper search's :class:`~jaxshuffle.Status` code.
      status_lower: the lower search's :class:`~jaxshuffle.Status` code.
      has_lower: where ``lower`` comes from a dataset's search.
      source: the bound behind each point's ``upper`` (an array of :data:`KRR_SOURCE`,
        :data:`MATRIX_SOURCE` or :data:`PAIR_SOURCE`).
    """

    upper: np.ndarray
    lower: np.ndarray
    status: np.ndarray
    status_lower: np.ndarray
    has_lower: np.ndarray
    source: np.ndarray


#: the proofs behind :attr:`SubsampledBounds.source`
KRR_SOURCE = "blanket pair of k-ary RR, clients sampled (real k)"
MATRIX_SOURCE = "matrix engine on [g R | (1 - g) 1]"
PAIR_SOURCE = "three-count pair, clients sampled"


def sampled_route(randomizer) -> str | None:
    """How a round of ``randomizer`` with clients sampled is certified: ``"krr"`` (k-RR's forms at the
    real ``k'``), ``"matrix"`` (the matrix engine on ``R_g``, and the three-count pair with the matrix's
    clone constant), ``"pair"`` (the three-count pair with the clone constant proven for the randomizer),
    or None (multi-message protocols and ``p = inf``: not certified here)."""
    from jaxshuffle.randomizers.params import MatrixMechanism, RowMatrix, VRParams

    if not isinstance(randomizer, VRParams) or randomizer.blanket_per_user is not None:
        return None
    if randomizer.krr() is not None:
        return "krr"
    if isinstance(randomizer.mechanism, (MatrixMechanism, RowMatrix)):
        return "matrix"
    return "pair" if np.all(np.isfinite(np.asarray(randomizer.p, np.float64))) else None


#: what a refused randomizer is told (sample_rate < 1)
SAMPLED_SCOPE = ("clients sampled per round are certified for single-message randomizers with a finite ratio p "
                 "(eps0-LDP); this one (a multi-message protocol, or p = inf) has no certified subsampled bound "
                 "here yet")


def subsampled_bounds(randomizer, n, delta, *, sample_rate, rtol: float = 1e-6, lower: bool = True) -> SubsampledBounds:
    """Certified ``[lower, upper]`` of a round of ``n`` users, each taking part with probability ``sample_rate``.

    Args:
      randomizer: a single-message :class:`~jaxshuffle.randomizers.VRParams` that carries its
        mechanism: k-ary RR (``R.grr``), a catalog row with a matrix (subset selection, Hadamard
        response, binary RR), or any matrix attached with ``randomizers.with_matrix``; any other
        single-message randomizer gets the three-count pair (below). Multi-message protocols and
        ``p = inf``: ValueError.
      n: the number of users (each may or may not take part), integers in [2, 1e12].
      delta: target delta(s) in (0, 1).
      sample_rate: ``g`` in (0, 1].
      rtol: relative width of every epsilon bracket (k-RR's searches).
      lower: also run the exact datasets (the lower bound); ``False``: the upper bound alone, cheaper.

    Arrays broadcast. k-RR: :func:`jaxshuffle.blanket.krr_bounds` at ``k' =``
    :func:`subsampled_krr_k` (upper: the blanket pair; lower: the exact datasets, where the merged plan
    costs at most :data:`jaxshuffle.blanket.AUTO_MAX_CELLS`, else the blanket lane alone and
    ``has_lower`` False). A matrix: the smaller of the matrix engine on :func:`sampled_matrix` (its exact
    datasets beside it within :data:`jaxshuffle.blanket_matrix.MATRIX_AUTO_MAX_CELLS`) and the
    three-count pair with the matrix's clone constant, point by point. Any other single-message
    randomizer: the three-count pair (:func:`three_count_forms`) with the clone constant proven for it
    (the standard clone ``1/(2q)``), no lower bound. ``upper`` errs high and ``lower`` low
    (docs/math.md 11, 12.10). ``source`` names the bound behind each point's ``upper``.

    Returns:
      Both sides, a :class:`SubsampledBounds`: ``upper`` a certified upper bound (errs high), ``lower`` a
        certified lower bound (errs low; 0 where ``has_lower`` is False), their statuses and ``source``.

    Raises:
      ValueError: naming the parameter, for a ``randomizer`` that is not a ``VRParams``, a
        multi-message one or one with ``p = inf``, or a bad ``n``, ``delta`` or ``sample_rate``.
    """
    from jaxshuffle.randomizers.params import VRParams

    if not isinstance(randomizer, VRParams):
        raise ValueError(f"randomizer: expected VRParams (jaxshuffle.randomizers), got {type(randomizer).__name__}")
    g = check_sample_rate(sample_rate)
    route = sampled_route(randomizer)
    if route == "krr":
        return _krr_bounds(randomizer.mechanism, n, delta, g, rtol, lower)
    if route is None:
        raise ValueError(f"randomizer: {SAMPLED_SCOPE}")
    pair = _pair_bounds(randomizer, n, delta, g)
    if route == "pair":
        return pair
    matrix = _matrix_bounds(randomizer.mechanism, np.shape(randomizer.p), n, delta, g, lower)
    use = pair.upper < matrix.upper  # both certified: the smaller wins, and says so
    return matrix._replace(upper=np.where(use, pair.upper, matrix.upper),
                           status=np.where(use, pair.status, matrix.status).astype(np.int8),
                           source=np.where(use, pair.source, matrix.source))


def _krr_bounds(mech, n, delta, g, rtol: float, with_datasets: bool = True) -> SubsampledBounds:
    from jaxshuffle.engine.blanket import AUTO_MAX_CELLS, LOWER_KINDS, blanket_epsilon, krr_bounds, point_cells

    eps0, k, n, delta, g = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (mech.eps0, mech.k, n, delta, g)))
    k_forms = subsampled_krr_k(eps0, k, g)
    shape = eps0.shape
    upper, lower = np.full(shape, np.inf), np.zeros(shape)
    status, status_lower = np.zeros(shape, np.int8), np.full(shape, 1, np.int8)  # Status.ZERO: no lower claim
    with np.errstate(invalid="ignore"):
        sized = (eps0 >= 0) & (eps0 <= 50) & (n >= 1) & (n == np.floor(n)) & (n <= 1e12) & (delta > 0) & (delta < 1) \
            & (k_forms >= 2) & (k_forms < 1e12)
    both = np.zeros(shape, bool)
    if with_datasets and sized.any():
        both[sized] = point_cells(eps0[sized], k_forms[sized], n[sized], delta[sized],
                                  kinds=("blanket",) + LOWER_KINDS) <= AUTO_MAX_CELLS
    if both.any():
        b = krr_bounds(eps0[both], k[both], n[both], delta[both], rtol=rtol, k_forms=k_forms[both])
        upper[both], lower[both] = np.asarray(b.upper), np.asarray(b.lower)
        status[both], status_lower[both] = np.asarray(b.status), np.asarray(b.status_lower)
    alone = ~both
    if alone.any():  # the blanket lane alone (its own checks name a bad parameter)
        b = blanket_epsilon(eps0[alone], k_forms[alone], n[alone], delta[alone], rtol=rtol, real_k=True)
        upper[alone], status[alone] = np.asarray(b.upper), np.asarray(b.status)
    return SubsampledBounds(upper, lower, status, status_lower, both, np.full(shape, KRR_SOURCE))


def _matrix_bounds(mech, shape, n, delta, g, with_datasets: bool = True) -> SubsampledBounds:
    from jaxshuffle.accountant.mechanism import matrix_point
    from jaxshuffle.randomizers.matrices import ROW_MATRICES, row_matrix
    from jaxshuffle.randomizers.params import MatrixMechanism

    shape = np.broadcast_shapes(shape, np.shape(n), np.shape(delta), np.shape(g))
    nn, dd, gg = (np.broadcast_to(np.asarray(x, np.float64), shape).ravel() for x in (n, delta, g))
    matrices: list[np.ndarray | None]
    if isinstance(mech, MatrixMechanism):
        matrices = [np.asarray(mech.matrix)] * nn.size
    else:
        matrices = [row_matrix(mech.builder, *o) for o in mech.points(shape)]
        if any(M is None for M in matrices):
            raise ValueError(f"randomizer: clients sampled per round need the mechanism's matrix at every point; "
                             f"{mech.builder} builds it for {ROW_MATRICES[mech.builder][2]} (eps0 <= 50)")
    # only=True: the blanket forms at any cost within memory (there is no cheaper certified bound to fall back on)
    res = [matrix_point(sampled_matrix(M, c), a, b, True, with_datasets) for M, a, b, c in zip(matrices, nn, dd, gg)]
    upper = np.array([r[0].upper for r in res], np.float64).reshape(shape)
    has_lower = np.array([r[1] for r in res], bool).reshape(shape)
    lower = np.where(has_lower, np.array([r[0].lower for r in res], np.float64).reshape(shape), 0.0)
    status = np.array([r[0].status for r in res], np.int8).reshape(shape)
    status_lower = np.where(has_lower, np.array([r[0].status_lower for r in res], np.int8).reshape(shape), 1)
    return SubsampledBounds(upper, lower, status, status_lower.astype(np.int8), has_lower,
                            np.full(shape, MATRIX_SOURCE))


def three_count_forms(p: float, r: float, g: float):
    """The three-count pair of a round with clients sampled, as one sum form of the matrix engine.

    ``delta(t) <= (1/n) E[(c_A A + c_B B + (1 - t) V)_+]`` with ``c_A = (p - t)/((p + 1) r)``,
    ``c_B = (1 - t p)/((p + 1) r)`` and ``(A, B, V, O) ~ Multinomial(n; g r, g r, 1 - g, g (1 - 2 r))``
    (docs/math.md 12.10): a dominating pair of the sampled round of every single-message randomizer
    whose probability ratios are at most ``p`` and which satisfies the clone condition
    ``R(x, y) >= r (R(x0, y) + R(x1, y))``. It is the form (11.1) with ``omega = (g r, g r, 1 - g)``,
    so the matrix engine's certified search evaluates it. The coefficients are raised by 8 units of
    roundoff (the safe side: the sum form is nondecreasing in each coefficient); ``r`` should already
    be rounded down (a smaller ``r`` keeps the condition). Symmetric in ``x0, x1``: one form covers
    both directions.
    """
    from jaxshuffle.engine.matrix import search as bm

    raise_ = 1.0 + 8.0 * UNIT_ROUNDOFF
    scale = 1.0 / ((p + 1.0) * r)
    w = np.array([[g * r, g * r, 1.0 - g, max(0.0, g * (1.0 - 2.0 * r))]])
    a0 = np.array([[p * scale * raise_, scale * raise_, 1.0, 0.0]])
    a1 = np.array([[-scale / raise_, -p * scale / raise_, -1.0, 0.0]])
    eps_max = math.log(p) * raise_ + 8.0 * UNIT_ROUNDOFF  # every coefficient <= 0 from t = p on
    return bm.PairForms(w, a0, a1, np.zeros((1, 1)), np.zeros((1, 1)), np.array([eps_max]), np.zeros(1),
                        np.array([[0, 1]], np.int64), np.array([-1], np.int64))


def _pair_bounds(randomizer, n, delta, g) -> SubsampledBounds:
    """The three-count pair's certified epsilon at every point (its clone constant from
    :func:`~jaxshuffle.randomizers.clone.certified_clone`), no lower bound."""
    from jaxshuffle.engine.matrix import search as bm
    from jaxshuffle.randomizers.clone import certified_clone

    r, _ = certified_clone(randomizer, np)
    shape = np.broadcast_shapes(np.shape(r), np.shape(n), np.shape(delta), np.shape(g))
    p, r, nn, dd, gg = (np.broadcast_to(np.asarray(x, np.float64), shape).ravel()
                        for x in (randomizer.p, r, n, delta, g))
    check(np.isfinite(p) & (p >= 1), "randomizer", "needs a finite ratio p >= 1", value=p)
    check((nn >= 1) & (nn == np.floor(nn)) & (nn <= 1e12), "n", "must be an integer in [1, 1e12]", value=nn)
    check((dd > 0) & (dd < 1), "delta", "must lie in (0, 1)", value=dd)
    upper, status = np.empty(nn.size), np.empty(nn.size, np.int8)
    for i in range(nn.size):
        res = bm.search_forms(three_count_forms(float(p[i]), float(r[i]), float(gg[i])), nn[i], dd[i])
        upper[i], status[i] = res.upper, res.status
    zeros = np.zeros(shape)
    return SubsampledBounds(upper.reshape(shape), zeros, status.reshape(shape), np.full(shape, 1, np.int8),
                            np.zeros(shape, bool), np.full(shape, PAIR_SOURCE))
