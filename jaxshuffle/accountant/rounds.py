"""Certified epsilon of T rounds of one shuffled randomizer: the smallest of several certified bounds.

For each number of rounds ``T`` and each total ``delta`` (docs/math.md section 13), each of these
is by itself a certified upper bound on the epsilon of the T-fold composition:

* ``pld``: the PLD composition (:mod:`~jaxshuffle.pld.composition`) of the worst-case two-count
  pair, a dominating pair of every round at every eps;
* ``blanket_pld``: for k-ary RR, the PLD composition of its blanket pair
  (:func:`~jaxshuffle.pld.blanket.blanket_round`, docs/math.md section 12.8), another
  dominating pair (composed on its own: never mixed with the worst-case pair's profile);
* ``basic``: ``T eps_1(delta/T)``, where ``eps_1(d)`` is the certified one-round bound of
  :func:`~jaxshuffle.accountant.amplify` (for k-ary RR the blanket pair's);
* ``advanced`` (Dwork, Rothblum and Vadhan 2010, Thm III.3): with ``e = eps_1(delta/(2T))``,
  ``sqrt(2 T log(2/delta)) e + T e (e^e - 1)`` (capped by ``basic``).

``upper`` is the smallest of these *final* numbers (ties go to the simpler rule); a pointwise
minimum of two privacy curves is never composed (it need not be any dominating pair's curve).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import numpy as np

from jaxshuffle._config import check
from jaxshuffle.pld.blanket import (  # noqa: F401  (BLANKET_PLD_MAX_N: re-exported, its former home)
    BLANKET_PLD_MAX_N,
    blanket_round_where_built,
    round_grid,
)
from jaxshuffle.pld.composition import MAX_COUNT, CompositionSizeError, compose, epsilon_over_rounds
from jaxshuffle.randomizers.clone import CloneProof, certified_worst_case_pair
from jaxshuffle.randomizers.params import MatrixMechanism, RowMatrix

#: ``upper_source`` values, in order of preference on ties.
SOURCES = ("basic", "advanced", "PLD", "blanket PLD")


class ComposedEpsilon(NamedTuple):
    """Certified epsilon of ``T`` rounds at total ``delta``; every array has shape ``(len(rounds), len(delta))``.

    The smallest of several certified bounds on T rounds: docs/math.md section 13.

    Attributes:
      rounds: the numbers of rounds (int64, shape ``(R,)``).
      delta: the total deltas (shape ``(D,)``).
      upper: the smallest of ``basic``, ``advanced``, ``pld`` and ``blanket_pld`` (an upper bound on the
        composed mechanism's epsilon; ``inf`` where none is finite).
      upper_source: which of :data:`SOURCES` gave ``upper`` (a str array).
      pld: PLD composition of the worst-case pair (upper bound).
      blanket_pld: PLD composition of the blanket pair (upper bound): k-ary RR's, or with clients sampled
        (``sample_rate < 1``) the three-count pair of any other single-message randomizer (the blanket
        pair of a sampled round, docs/math.md 12.10); ``inf`` for a randomizer without one, or with
        ``blanket_points=0``.
      lower: the composed worst-case *pair's* epsilon from below (how tight ``pld`` is numerically;
        not a lower bound on the mechanism).
      basic: basic composition of the certified one-round bound (upper bound).
      advanced: advanced composition of the certified one-round bound (upper bound).
      discretization: the loss grid of the PLD composition.
      clone_proof: the proof behind the worst-case pair of ``pld`` (and so of ``basic`` and ``advanced``,
        whose one-round bound is :func:`~jaxshuffle.amplify`'s): a
        :class:`~jaxshuffle.randomizers.clone.CloneProof` name, ``"standard"``, ``"stronger"``,
        ``"general"`` or ``"multi_message"`` (docs/math.md 3.1).
    """

    rounds: np.ndarray
    delta: np.ndarray
    upper: np.ndarray
    upper_source: np.ndarray
    pld: np.ndarray
    blanket_pld: np.ndarray
    lower: np.ndarray
    basic: np.ndarray
    advanced: np.ndarray
    discretization: float
    clone_proof: str = "standard"


def basic_composition(eps1, rounds):
    """``T eps_1``: T rounds that are each ``(eps_1, delta/T)``-DP are ``(T eps_1, delta)``-DP (upper bound)."""
    return np.asarray(rounds, np.float64) * np.asarray(eps1, np.float64)


def advanced_composition(eps1, rounds, delta):
    """``sqrt(2 T log(2/delta)) eps_1 + T eps_1 (e^{eps_1} - 1)``: T rounds that are each
    ``(eps_1, delta/(2T))``-DP are ``(that, delta)``-DP (Dwork, Rothblum and Vadhan 2010, Thm III.3,
    with ``delta' = delta/2``; an upper bound)."""
    eps1, T, delta = (np.asarray(x, np.float64) for x in (eps1, rounds, delta))
    return np.sqrt(2.0 * T * np.log(2.0 / delta)) * eps1 + T * eps1 * np.expm1(eps1)


def _check_rounds_delta(rounds, delta) -> tuple[np.ndarray, np.ndarray]:
    rounds = np.atleast_1d(np.asarray(rounds, np.float64))
    delta = np.atleast_1d(np.asarray(delta, np.float64))
    check((rounds.ndim == 1) & (delta.ndim == 1), "rounds, delta", "must be scalars or 1-d arrays")
    check(np.isfinite(rounds) & (rounds >= 1) & (rounds == np.floor(rounds)), "rounds",
          "must be integers >= 1", value=rounds)
    # before the int64 cast (1e20 became -9.2e18): counts are exact in float64 up to 2^53
    check(rounds <= MAX_COUNT, "rounds", f"must be at most 2^53 = {MAX_COUNT} (larger counts are not exact "
          "in float64)", value=rounds)
    check((delta > 0) & (delta < 1), "delta", "must lie in (0, 1)", value=delta)
    return rounds.astype(np.int64), delta


def _over_rounds(round_pld, rounds: np.ndarray, delta: np.ndarray):
    """:func:`~jaxshuffle.pld.composition.epsilon_over_rounds`, a composition too large for its grid
    refused naming ``rounds``."""
    try:
        return epsilon_over_rounds(round_pld, rounds, delta)
    except CompositionSizeError as err:
        raise err.renamed("rounds") from None


def checked_blanket_points(blanket_points) -> int | None:
    """``blanket_points`` as an int (None stays None: the default); ValueError naming it unless it is
    0 (skip the blanket pair's PLD) or an integer in [2, 65536] (``blanket_round``'s range)."""
    if blanket_points is None:
        return None
    bp = float(blanket_points)
    if not (bp == math.floor(bp) and (bp == 0 or 2 <= bp <= 1 << 16)):
        raise ValueError(f"blanket_points: must be 0 (skip the blanket pair's PLD) or an integer in [2, 65536], "
                         f"got {blanket_points!r}")
    return int(bp)


def composed_epsilon(randomizer, n, rounds, delta, *, discretization: float | None = None,
                     blanket_points: int | None = None, sample_rate: float = 1.0) -> ComposedEpsilon:
    """Certified epsilon of ``T`` rounds of ``n`` users' shuffled ``randomizer``, for each ``T`` and ``delta``.

    This is THE rule for the certified epsilon of ``T`` rounds:
    :func:`~jaxshuffle.accountant.calibrate.calibrate_eps0` and
    :func:`~jaxshuffle.accountant.calibrate.calibrate_n` with ``rounds = T`` search it (through
    :func:`composed_upper`), the sweep's rounds axis and the ``compose`` command report it.

    Args:
      randomizer: a scalar :class:`~jaxshuffle.randomizers.VRParams` (e.g. ``R.grr(1.0, 10)``).
      n: number of users (an integer >= 2); the same users take part in every round.
      rounds: numbers of rounds ``T`` (integers >= 1, scalar or 1-d).
      delta: total deltas of the ``T`` rounds, in (0, 1) (scalar or 1-d).
      discretization: loss grid of the PLD composition (default: about 1e-3 relative accuracy at
        ``max(rounds)``, :func:`~jaxshuffle.pld.distribution.default_discretization`).
      blanket_points: profile evaluations of the blanket pair's PLD (k-ary RR, and the three-count pair
        of a sampled round; 0 skips it).
        Default (:func:`~jaxshuffle.pld.blanket.default_blanket_points`):
        :data:`~jaxshuffle.pld.blanket.DEFAULT_POINTS` (512) up to ``n = 1e5``, 128 up to
        ``n = BLANKET_PLD_MAX_N`` (1e6) and 0 above, where each profile point's window, and so its
        cost, grows with ``n``: pass a count to build it there too.
      sample_rate: the probability ``g`` in (0, 1] that each user takes part in a round (Poisson
        client sampling; ``n`` counts every user). Below 1 the worst-case pair does not hold (``pld``
        is ``inf``, ``lower`` NaN, ``clone_proof`` ``"none"``); for k-ary RR the blanket pair is k-RR's
        at a real k (built at every ``n`` unless ``blanket_points=0``); basic and advanced composition
        use the sampled round's bound (:func:`~jaxshuffle.accountant.subsampling.subsampled_epsilon`:
        k-ary RR, or the matrix engine for a randomizer carrying its matrix; docs/math.md 12.10).

    A multi-message protocol's round (``p = inf``: its pair's ``v = 0``) has an infinite privacy loss with
    positive probability and so no PLD: ``pld`` is ``inf``, ``lower`` and ``discretization`` NaN, and
    ``upper`` the smaller of basic and advanced composition of :func:`~jaxshuffle.accountant.amplify`'s
    certified one-round bound (both hold for any ``(eps, delta)``-DP rounds).

    Returns:
      The bounds, a :class:`ComposedEpsilon`: ``upper`` is a certified upper bound (errs high; the smallest of
        the certified bounds, docs/math.md section 13); ``lower`` is the worst-case pair's composed epsilon
        from below (a numerical check, not a lower bound on the mechanism).

    Raises:
      ValueError: naming the parameter, for bad input (``rounds``, ``delta``, ``n``, ``blanket_points``,
        ``discretization``, ``sample_rate``, or a ``randomizer`` that is not one scalar ``VRParams``).
    """
    rounds, delta = _check_rounds_delta(rounds, delta)
    blanket_points = checked_blanket_points(blanket_points)
    g = _checked_rate(randomizer, sample_rate)
    parts = _two_count_bounds(randomizer, n, rounds, delta, discretization, g)
    blanket = _blanket_bound(randomizer, n, rounds, delta, parts.discretization, blanket_points, g)
    return _smallest(parts, blanket, rounds, delta)


def _checked_rate(randomizer, sample_rate) -> float:
    from jaxshuffle.accountant.subsampling import SAMPLED_SCOPE, sampled_route, scalar_sample_rate

    g = scalar_sample_rate(sample_rate, "the T-round rule")
    if g < 1.0 and sampled_route(randomizer) is None:
        raise ValueError(f"sample_rate: {SAMPLED_SCOPE}")
    return g


def composed_upper(randomizer, n, rounds: int, delta: float, *, discretization: float | None = None,
                   blanket_points: int | None = None, below: float | None = None, sample_rate: float = 1.0) -> float:
    """``composed_epsilon(randomizer, n, rounds, delta).upper`` at one ``(T, delta)``; less work with ``below``.

    With ``below``: where the worst-case pair's bounds (``pld``, ``basic``, ``advanced``) already
    give at most ``below``, their smallest is returned without building the blanket pair's PLD
    (for k-ary RR the costly part: hundreds of profile evaluations). The value is then a
    certified upper bound that is ``>= composed_epsilon(...).upper``, and is that value exactly
    whenever it is ``> below``: a calibration asking "is the rule's epsilon ``<= below``?" gets
    the rule's answer. Upper side.

    Without ``below`` (clients not sampled) the PLDs come first, and basic and advanced composition
    (for k-ary RR a one-round blanket engine search) are computed only where a certified lower bound
    on them (:func:`krr_epsilon_floor`'s at ``delta/T`` and ``delta/(2T)``, composed) does not exceed
    the PLDs' value by :data:`COMPOSITION_FLOOR_MARGIN`: the value is the rule's exactly either way
    (docs/math.md 13; ``tests/test_count_search.py``).
    """
    rounds_a, delta_a = _check_rounds_delta(rounds, delta)
    check((rounds_a.size == 1) & (delta_a.size == 1), "rounds, delta", "must be scalars here")
    blanket_points = checked_blanket_points(blanket_points)
    g = _checked_rate(randomizer, sample_rate)
    if below is None and g == 1.0:
        # the PLDs first: basic and advanced composition (a one-round blanket engine search for k-RR)
        # are computed only where a certified lower bound on them does not already exceed both PLDs'
        # value (then the rule's value is that of the PLDs, exactly)
        pld = _worst_case_pld(randomizer, n, rounds_a, delta_a, discretization)
        blanket = _blanket_bound(randomizer, n, rounds_a, delta_a, pld.discretization, blanket_points, g)
        value = float(np.fmin(pld.upper[0, 0], blanket[0, 0]))  # inf where neither is finite
        if _compositions_above(randomizer, n, int(rounds_a[0]), float(delta_a[0]), value):
            return value
        parts = _with_compositions(pld, randomizer, n, rounds_a, delta_a, g)
        return float(_smallest(parts, blanket, rounds_a, delta_a).upper[0, 0])
    parts = _two_count_bounds(randomizer, n, rounds_a, delta_a, discretization, g)
    cheap = float(np.min(np.stack([parts.basic, parts.advanced, parts.pld])))
    if below is not None and cheap <= below:
        return cheap
    blanket = _blanket_bound(randomizer, n, rounds_a, delta_a, parts.discretization, blanket_points, g)
    return float(_smallest(parts, blanket, rounds_a, delta_a).upper[0, 0])


#: relative margin by which a lower bound on basic and advanced composition must exceed the PLDs' value
#: before they are left uncomputed (their float evaluation is monotone in the one-round epsilon up to a
#: few roundings)
COMPOSITION_FLOOR_MARGIN = 1e-9


def krr_epsilon_floor(randomizer, n, delta, rtol: float = 1e-6) -> np.ndarray | None:
    """A certified *lower* bound on the epsilon of one round of ``n`` users' shuffled k-ary RR at each
    ``delta`` (numpy): the lower end of the certified bracket of the Theorem 5.1 pair of
    :func:`~jaxshuffle.randomizers.grr_lower` (one two-count search); 0 (no claim) where those
    parameters are not defined; None where ``randomizer`` is not k-ary RR. Lower side."""
    from jaxshuffle.engine.two_count.search import epsilon
    from jaxshuffle.randomizers import grr_lower

    mech = randomizer.krr()
    if mech is None:
        return None
    delta = np.asarray(delta, np.float64)
    try:
        lp = grr_lower(mech.eps0, mech.k)
    except ValueError:  # no Theorem 5.1 parameters (a k the catalog's k-RR does not take): no claim
        return np.zeros(np.broadcast_shapes(np.shape(n), delta.shape))
    n_engine = np.asarray(lp.n_blanket(np.asarray(n, np.float64)), np.float64) + 1.0  # as amplify searches a lower pair
    return np.asarray(epsilon(lp.pair(), n_engine, delta, rtol=rtol).lower, np.float64)


def _compositions_above(randomizer, n, rounds: int, delta: float, value: float) -> bool:
    """Whether basic and advanced composition of any certified one-round bound are certainly above
    ``value``: their one-round epsilons (at ``delta/T`` and ``delta/(2T)``) are at least the mechanism's
    own, which :func:`krr_epsilon_floor` bounds from below, and both compositions increase with it
    (k-ary RR only; False elsewhere, and wherever ``value`` is not finite)."""
    if not np.isfinite(value) or float(np.asarray(randomizer.n_blanket(n))) < 1:
        return False
    floor = krr_epsilon_floor(randomizer, n, np.array([delta / rounds, delta / (2.0 * rounds)]))
    if floor is None:
        return False
    least = min(float(basic_composition(floor[0], rounds)), float(advanced_composition(floor[1], rounds, delta)))
    return least > value * (1.0 + COMPOSITION_FLOOR_MARGIN)


def two_count_rules_upper(randomizer, n, rounds: int, delta: float, *, discretization: float | None = None) -> float:
    """The smallest of the worst-case pair's bounds over ``T`` rounds, with the one-round bound of basic
    and advanced composition from the two-count rules alone (``amplify(..., upper_from="worst-case")``:
    no blanket pair, so no blanket engine search), at one ``(T, delta)``; clients not sampled.

    Upper side, and never below :func:`composed_upper` (each of its three terms is at least its
    counterpart in the rule: the same PLD, and amplify's ``"worst-case"`` upper is never below its
    ``"best"``): a looser tier for :func:`~jaxshuffle.accountant.calibrate.calibrate_n`'s search that
    costs the worst-case pair's PLD only.
    """
    rounds_a, delta_a = _check_rounds_delta(rounds, delta)
    check((rounds_a.size == 1) & (delta_a.size == 1), "rounds, delta", "must be scalars here")
    parts = _two_count_bounds(randomizer, n, rounds_a, delta_a, discretization, one_round_from="worst-case")
    return float(np.min(np.stack([parts.basic, parts.advanced, parts.pld])))


class _TwoCountBounds(NamedTuple):
    """The worst-case pair's bounds of :func:`composed_epsilon`, each of shape ``(R, D)``."""

    pld: np.ndarray
    lower: np.ndarray
    basic: np.ndarray
    advanced: np.ndarray
    discretization: float
    clone_proof: str


class _WorstCasePLD(NamedTuple):
    """The worst-case pair's PLD composition, each of shape ``(R, D)`` (clients not sampled)."""

    upper: np.ndarray
    lower: np.ndarray
    discretization: float


def _worst_case_pld(randomizer, n, rounds: np.ndarray, delta: np.ndarray, discretization) -> _WorstCasePLD:
    """The worst-case pair's PLD composed over each ``T`` (``inf`` where the pair has infinite losses:
    multi-message protocols, ``p = inf``)."""
    from jaxshuffle.pld.two_count import has_finite_losses, shuffled_round

    pair, _ = certified_worst_case_pair(randomizer)
    shape = (rounds.size, delta.size)
    if has_finite_losses(pair):
        r = shuffled_round(randomizer, n, discretization=discretization, rounds=int(rounds.max()))
        comp = _over_rounds(r, rounds, delta)
        return _WorstCasePLD(np.asarray(comp.upper), np.asarray(comp.lower),
                             float(r.upper_forward.discretization))
    # p = inf (multi-message protocols): no PLD (infinite losses), basic and advanced composition remain
    return _WorstCasePLD(np.full(shape, np.inf), np.full(shape, np.nan),
                         np.nan if discretization is None else float(discretization))


def _two_count_bounds(randomizer, n, rounds: np.ndarray, delta: np.ndarray, discretization,
                      sample_rate: float = 1.0, one_round_from: str = "best") -> _TwoCountBounds:
    """The worst-case pair's PLD composition and basic and advanced composition of the certified
    one-round bound (amplify's upper under ``one_round_from``). With clients sampled
    (``sample_rate < 1``, k-RR) the worst-case pair does not hold: ``pld`` is ``inf`` (``lower``
    NaN) and the one-round bound is the sampled round's."""
    if sample_rate < 1.0:
        grid = round_grid(randomizer, n, int(rounds.max()), discretization)
        shape = (rounds.size, delta.size)
        pld = _WorstCasePLD(np.full(shape, np.inf), np.full(shape, np.nan), float(grid))
    else:
        pld = _worst_case_pld(randomizer, n, rounds, delta, discretization)
    return _with_compositions(pld, randomizer, n, rounds, delta, sample_rate, one_round_from)


def _with_compositions(pld: _WorstCasePLD, randomizer, n, rounds: np.ndarray, delta: np.ndarray,
                       sample_rate: float = 1.0, one_round_from: str = "best") -> _TwoCountBounds:
    """``pld`` with basic and advanced composition of the certified one-round bound (at ``delta/T`` and
    ``delta/(2T)``: amplify's upper under ``one_round_from``, or the sampled round's)."""
    from jaxshuffle.accountant.amplify import amplify

    _, proof = certified_worst_case_pair(randomizer)
    T, d = np.broadcast_arrays(rounds[:, None].astype(np.float64), delta[None, :])
    targets = np.concatenate([(d / T).ravel(), (d / (2 * T)).ravel()])
    if sample_rate < 1.0:
        from jaxshuffle.accountant.subsampling import subsampled_epsilon

        one = np.asarray(subsampled_epsilon(randomizer, n, targets, sample_rate=sample_rate).upper)
    else:
        # the round's certified upper alone: no paper value, no exact-dataset lanes beside the blanket's
        one = np.asarray(amplify(randomizer, n, targets, with_paper=False, with_lower=False,
                                 upper_from=one_round_from).upper)
    e_basic, e_adv = (x.reshape(T.shape) for x in np.split(one, 2))
    basic = basic_composition(e_basic, T)
    advanced = np.minimum(advanced_composition(e_adv, T, d), basic)
    proof = CloneProof.NONE if sample_rate < 1.0 else CloneProof(int(np.asarray(proof)))
    return _TwoCountBounds(pld.upper, pld.lower, basic, advanced, pld.discretization, proof.name.lower())


def _blanket_bound(randomizer, n, rounds: np.ndarray, delta: np.ndarray, discretization: float,
                   blanket_points: int | None, sample_rate: float = 1.0) -> np.ndarray:
    """The blanket pair's PLD composition (k-ary RR), on the worst-case pair's loss grid; ``inf`` elsewhere."""
    b = blanket_round_where_built(randomizer, n, discretization, blanket_points, sample_rate)
    if b is None:
        return np.full((rounds.size, delta.size), np.inf)
    return np.asarray(_over_rounds(b, rounds, delta).upper)


def curve_round(randomizer, n, rounds, *, discretization: float | None = None, blanket_points: int | None = None,
                sample_rate: float = 1.0):
    """The round PLD behind the privacy curve of ``T`` rounds: the pair :func:`composed_epsilon` composes.

    For k-ary RR the blanket pair's PLD (:func:`~jaxshuffle.pld.blanket.blanket_round`)
    wherever :func:`composed_epsilon` builds it (the same ``blanket_points`` rule, default included),
    else the worst-case pair's (:func:`~jaxshuffle.pld.two_count.shuffled_round`); built for
    ``max(rounds)`` on :func:`composed_epsilon`'s loss grid, so ``compose([(it, T)], delta).upper`` is
    its ``blanket_pld`` (resp. ``pld``) and :func:`~jaxshuffle.pld.composition.compose_delta` gives
    the certified delta at any eps (what ``jaxshuffle compose --curve`` writes). ``.source`` names the
    pair. Arguments as :func:`composed_epsilon`; bad input raises ValueError naming the parameter.
    """
    from jaxshuffle.pld.two_count import shuffled_round

    rounds, _ = _check_rounds_delta(rounds, 0.5)
    blanket_points = checked_blanket_points(blanket_points)
    g = _checked_rate(randomizer, sample_rate)
    if g < 1.0:  # the sampled round's only PLD is its blanket (k-RR) or three-count pair's, on the full round's grid
        grid = round_grid(randomizer, n, int(rounds.max()), discretization)
        b = blanket_round_where_built(randomizer, n, grid, blanket_points, g)
        if b is None:
            raise ValueError("blanket_points: 0 leaves a round with clients sampled no PLD (its only certified pair "
                             "is the blanket or three-count pair)")
        return b
    r = shuffled_round(randomizer, n, discretization=discretization, rounds=int(rounds.max()))
    b = blanket_round_where_built(randomizer, n, float(r.upper_forward.discretization), blanket_points)
    return r if b is None else b


def _smallest(parts: _TwoCountBounds, blanket: np.ndarray, rounds: np.ndarray, delta: np.ndarray) -> ComposedEpsilon:
    candidates = np.stack([parts.basic, parts.advanced, parts.pld, blanket])
    pick = np.argmin(np.where(np.isfinite(candidates), candidates, np.inf), axis=0)
    upper = np.take_along_axis(candidates, pick[None], axis=0)[0]
    return ComposedEpsilon(rounds, delta, upper, np.asarray(SOURCES)[pick], parts.pld, blanket, parts.lower,
                           parts.basic, parts.advanced, parts.discretization, parts.clone_proof)


def _one_round_uppers(queries, delta: float) -> list[float]:
    """Each query's certified one-round upper bound at ``delta`` (errs high): the sampled round's
    (:func:`~jaxshuffle.accountant.subsampling.subsampled_epsilon`) where ``sample_rate < 1``, else
    :func:`~jaxshuffle.accountant.amplify.amplify`'s upper.

    The full-participation queries whose randomizers stack (the same pytree of same-shaped leaves, no
    matrix: k-ary RR's at any ``k``, eps0 and ``n``) go through one batched ``amplify`` call, so that
    their blanket searches plan together and share compiled programs (one per cost group instead of one
    per query: docs/math.md section 10, "Programs"). Each value is a certified upper bound either way;
    its last digits may depend on which queries share the call, as for any batch.
    """
    from jaxshuffle.accountant.amplify import amplify
    from jaxshuffle.accountant.subsampling import subsampled_epsilon

    uppers = [math.nan] * len(queries)
    batches: dict = {}
    for i, (r, n, _, g) in enumerate(queries):
        if g < 1.0:
            uppers[i] = float(np.asarray(subsampled_epsilon(r, n, delta, sample_rate=g).upper))
        else:
            leaves, tree = jax.tree_util.tree_flatten(r)
            matrix = isinstance(r.mechanism, MatrixMechanism | RowMatrix)  # one concrete matrix per call
            batches.setdefault(i if matrix else (tree, tuple(np.shape(x) for x in leaves)), []).append(i)
    for members in batches.values():
        r, n = queries[members[0]][:2]
        if len(members) > 1:
            r = jax.tree_util.tree_map(lambda *xs: np.stack([np.asarray(x, np.float64) for x in xs]),
                                       *[queries[i][0] for i in members])
            n = np.asarray([queries[i][1] for i in members], np.float64)
        up = np.asarray(amplify(r, n, delta, with_paper=False, with_lower=False).upper).reshape(-1)
        for i, e in zip(members, up):
            uppers[i] = float(e)
    return uppers


class ReleaseEpsilon(NamedTuple):
    """Certified epsilon of one release of several shuffled queries (:func:`release_epsilon`).

    Attributes:
      upper: the smallest of the certified bounds below (an upper bound on the release's epsilon, errs high).
      upper_source: which gave it: one of :data:`SOURCES`.
      pld: every query's worst-case-pair (or sampled) round PLD, composed (upper bound).
      blanket_pld: every query's round PLD from its blanket pair where built (k-ary RR), else from its
        worst-case pair, composed (upper bound; ``inf`` where no query has a blanket pair).
      lower: the composed worst-case pairs' epsilon from below (a numerical check of ``pld``, not a lower
        bound on the mechanism; NaN where a query has clients sampled).
      basic: basic composition of each query's certified one-round bound at ``delta / T`` (upper bound).
      advanced: advanced composition (one query only; ``inf`` for several).
    """

    upper: float
    upper_source: str
    pld: float
    blanket_pld: float
    lower: float
    basic: float
    advanced: float


def release_epsilon(queries, delta: float, *, discretization: float, blanket_points=None,
                    worst_case=None) -> ReleaseEpsilon:
    """THE T-round rule for one release of several queries: the smallest of several certified bounds.

    ``queries`` is a sequence of ``(randomizer, n, count, sample_rate)``: query ``i``'s scalar
    :class:`~jaxshuffle.randomizers.VRParams`, its users, its rounds and its client sampling rate. With one
    query this is :func:`composed_epsilon` at ``(count, delta)`` on the grid ``discretization`` (the same
    numbers). With several, each candidate composes every query's rounds (a composition of mechanisms, each
    dominated by its own pair, is dominated by the composition of the pairs: docs/math.md section 13):

    * ``pld``: every query's worst-case pair (or its sampled round's pair);
    * ``blanket_pld``: k-ary RR queries through their blanket pair's round PLD (where
      :func:`~jaxshuffle.pld.blanket.blanket_round_where_built` builds it, ``blanket_points`` as for
      :func:`composed_epsilon`: one value for every query, or one per query), the others through their
      worst-case pair;
    * ``basic``: ``sum_i count_i eps_i(delta / T)`` with ``T = sum_i count_i`` and ``eps_i`` query ``i``'s
      certified one-round bound (basic composition, Dwork and Roth Theorem 3.16).

    ``worst_case``: the ``(lower, upper)`` of the ``pld`` candidate where the caller has just composed it
    on the same grid (it is not recomputed then). Upper side throughout.
    """
    from jaxshuffle.pld.two_count import shuffled_round

    queries = [(r, float(n), int(c), float(g)) for r, n, c, g in queries]
    points = [checked_blanket_points(b) for b in (blanket_points if isinstance(blanket_points, (list, tuple))
                                                  else [blanket_points] * len(queries))]
    check(len(points) == len(queries), "blanket_points", f"must be one value or one per query ({len(queries)})")
    if len(queries) == 1:
        r, n, c, g = queries[0]
        e = composed_epsilon(r, n, c, delta, discretization=discretization, blanket_points=points[0],
                             sample_rate=g)
        return ReleaseEpsilon(float(e.upper[0, 0]), str(e.upper_source[0, 0]), float(e.pld[0, 0]),
                              float(e.blanket_pld[0, 0]), float(e.lower[0, 0]), float(e.basic[0, 0]),
                              float(e.advanced[0, 0]))

    def own_round(r, n, g):  # at g = 1 the unsampled round
        return shuffled_round(r, n, discretization=discretization, sample_rate=g)

    if worst_case is None:
        b = compose([(own_round(r, n, g), c) for r, n, c, g in queries], delta)
        worst_case = (float(b.lower), float(b.upper))
    lower, pld = worst_case
    blanket_rounds = [blanket_round_where_built(r, n, discretization, bp) if g == 1.0 else None
                      for (r, n, _, g), bp in zip(queries, points)]
    blanket = np.inf
    if any(b is not None for b in blanket_rounds):
        b = compose([(own_round(r, n, g) if br is None else br, c)
                     for (r, n, c, g), br in zip(queries, blanket_rounds)], delta)
        blanket = float(b.upper)
    total = sum(c for _, _, c, _ in queries)
    basic = sum(c * e for (_, _, c, _), e in zip(queries, _one_round_uppers(queries, delta / total)))
    candidates = {"basic": basic, "PLD": pld, "blanket PLD": blanket}
    source = min(candidates, key=lambda s: (candidates[s] if np.isfinite(candidates[s]) else np.inf,
                                            SOURCES.index(s)))
    return ReleaseEpsilon(candidates[source], source, pld, blanket, lower, basic, np.inf)
