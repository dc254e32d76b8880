"""T rounds with clients sampled (Poisson, rate g) against the exact composition of the worst neighbouring pair.

A sampled round (docs/math.md 12.10): each of the n users takes part with probability ``g`` and a participant
sends ``R(x)``; the output is the histogram of the participants' messages (their number is visible). With a
"void" output for an absent user this is the histogram of the n outputs of ``R_g = [g R | (1 - g) 1]``.

The reference is enumerated here, independently of the package's engines: for each ordered pair of the
victim's inputs ``x != x'`` and each multiset ``y`` of the others' inputs, the two histogram laws ``(P, Q)``
of one round; the T-fold composition of the pair is ``(P^T, Q^T)`` (the same dataset in every round), whose
hockey-stick divergence

    delta_T(eps) = sum_o max(0, P^T(o) - e^eps Q^T(o))

is computed exactly from the pair's privacy-loss distribution (atoms: loss, P-mass, Q-mass; losses that agree
to 1e-12 relative merged, masses summed exactly). ``L = L_A + L_B`` splits the T rounds in two halves, so
``delta_T(eps) = sum_a [p_a P_B(L_B > eps - l_a) - e^eps q_a Q_B(L_B > eps - l_a)]`` with the half ``B``
sorted and its tail masses summed once (no mass is dropped or rounded; merging moves a loss by 1e-12
relative at most). Epsilon: the smallest eps >= 0 with ``delta_T(eps) <= delta``, bisected to 1e-12 (the upper
end of the bracket kept). The exact epsilon of the composed mechanism is the largest over the pairs, both
orders, and every dataset.

Checked: ``composed_epsilon(..., sample_rate=g).upper >= exact * (1 - 1e-9)`` (the slack covers the
bisection and float rounding only), and ``sample_rate=1`` is the call without it, bit for bit.
"""

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest
from test_sampled_rounds_exact import krr_matrix, ldp_randomizer, random_ldp_matrix, sampled, worst_exact

import jaxshuffle.randomizers as R
from jaxshuffle.accountant.rounds import composed_epsilon

SLACK = 1e-9  # relative: the bisections (1e-12) and float rounding of sums of products, never more
EPS_TOL = 1e-12  # bisection bracket of the exact epsilon
MERGE_RTOL = 1e-12  # losses this close are one atom (their masses summed exactly)


# ---------------------------------------------------------------------------------------------------------
# exact enumeration of one sampled round, and the exact composition of its pair


def _add_user(law: dict, row: np.ndarray) -> dict:
    """The law of the histogram after one more user whose output has law ``row``."""
    out = defaultdict(float)
    for h, p in law.items():
        for y, r in enumerate(row):
            if r > 0:
                h2 = list(h)
                h2[y] += 1
                out[tuple(h2)] += p * r
    return out


def histogram_laws(Mg: np.ndarray, x0: int, x1: int, others) -> tuple[np.ndarray, np.ndarray]:
    """``P``, ``Q``: the laws of the histogram of the n outputs of ``Mg`` (the victim's row ``x0``, resp.
    ``x1``; the others' rows ``others``), on a common list of histograms."""
    law = {(0,) * Mg.shape[1]: 1.0}
    for x in others:
        law = _add_user(law, Mg[x])
    P, Q = _add_user(law, Mg[x0]), _add_user(law, Mg[x1])
    keys = sorted(set(P) | set(Q))
    return np.array([P.get(h, 0.0) for h in keys]), np.array([Q.get(h, 0.0) for h in keys])


class Atoms:
    """A privacy-loss distribution as atoms ``(loss, P-mass, Q-mass)``, sorted by loss, equal losses merged."""

    def __init__(self, loss, p, q):
        order = np.argsort(loss, kind="stable")
        loss, p, q = loss[order], p[order], q[order]
        fin = np.isfinite(loss)  # loss is never -inf (atoms with P-mass 0 are dropped) or NaN
        lf = loss[fin]
        if lf.size:
            new = np.concatenate([[True], np.diff(lf) > MERGE_RTOL * np.maximum(1.0, np.abs(lf[1:]))])
            starts = np.flatnonzero(new)
            lf, pf, qf = lf[starts], np.add.reduceat(p[fin], starts), np.add.reduceat(q[fin], starts)
        else:
            pf = qf = lf
        if np.any(~fin):
            lf = np.append(lf, np.inf)
            pf, qf = np.append(pf, p[~fin].sum()), np.append(qf, q[~fin].sum())
        self.loss, self.p, self.q = lf, pf, qf

    @classmethod
    def of_pair(cls, P: np.ndarray, Q: np.ndarray) -> "Atoms":
        keep = P > 0
        P, Q = P[keep], Q[keep]
        with np.errstate(divide="ignore"):
            loss = np.where(Q > 0, np.log(P) - np.log(np.where(Q > 0, Q, 1.0)), np.inf)
        return cls(loss, P.copy(), Q.copy())

    def __mul__(self, other: "Atoms") -> "Atoms":
        """The composition of the two pairs (the product pair): losses add, masses multiply."""
        return Atoms(np.add.outer(self.loss, other.loss).ravel(), np.multiply.outer(self.p, other.p).ravel(),
                     np.multiply.outer(self.q, other.q).ravel())


ONE = Atoms(np.zeros(1), np.ones(1), np.ones(1))  # the pair of zero rounds


class Composed:
    """``delta_T(eps)`` of the T-fold product of one pair, split as ``A x B`` (``A``: floor(T/2) rounds, ``B``
    the other ceil(T/2), sorted, with its tail masses)."""

    def __init__(self, folds: dict, T: int):
        self.A, B = folds[T // 2], folds[(T + 1) // 2]
        self.lb = B.loss
        self.tail_p = np.append(np.cumsum(B.p[::-1])[::-1], 0.0)  # tail_p[i] = sum_{j >= i} p_j
        self.tail_q = np.append(np.cumsum(B.q[::-1])[::-1], 0.0)
        finite = np.concatenate([self.A.loss[np.isfinite(self.A.loss)], self.lb[np.isfinite(self.lb)], [0.0]])
        self.top = float(np.max(finite[finite > 0], initial=0.0)) * 2 + 1.0  # delta_T is its floor beyond

    def delta(self, eps: np.ndarray) -> np.ndarray:
        """``sum_o max(0, P^T(o) - e^eps Q^T(o))`` at each eps (1-d)."""
        eps = np.asarray(eps, np.float64)
        i = np.searchsorted(self.lb, eps[:, None] - self.A.loss[None, :], side="right")  # first l_b > eps - l_a
        terms = self.A.p * self.tail_p[i] - np.exp(eps)[:, None] * (self.A.q * self.tail_q[i])
        return np.sum(terms, axis=1)

    def epsilon(self, delta: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """The smallest eps >= 0 with ``delta_T(eps) <= delta`` (upper end of a 1e-12 bracket), where it is
        above ``lo``; ``lo`` itself elsewhere (``delta_T`` is non-increasing)."""
        delta, lo = np.asarray(delta, np.float64), np.asarray(lo, np.float64).copy()
        out = lo.copy()
        above = self.delta(lo) > delta
        if not above.any():
            return out
        d, lo = delta[above], lo[above]
        hi = np.maximum(lo, self.top)
        inf = self.delta(hi) > d  # mass at +inf above delta: no finite eps
        while np.any(hi - lo > EPS_TOL):
            mid = 0.5 * (lo + hi)
            big = self.delta(mid) > d
            lo, hi = np.where(big, mid, lo), np.where(big, hi, mid)
        out[above] = np.where(inf, np.inf, hi)
        return out


def datasets(K: int, m: int, krr: bool) -> list:
    """Every multiset of ``m`` inputs in ``range(K)``; for k-RR (``krr``) one per orbit of the permutations of
    the inputs ``2..K-1``, which leave the rows 0 and 1 and the histogram laws (up to relabelling) unchanged."""
    sets = itertools.combinations_with_replacement(range(K), m)
    if not krr:
        return list(sets)
    orbits = {}
    for y in sets:
        orbits.setdefault((y.count(0), y.count(1), tuple(sorted(y.count(v) for v in range(2, K)))), y)
    return list(orbits.values())


def exact_composed(Mg: np.ndarray, n: int, rounds, deltas, pairs, krr: bool = False) -> np.ndarray:
    """The exact epsilon of ``T`` rounds of the shuffled ``Mg`` on one dataset (the same in every round), the
    largest over the ordered pairs ``pairs`` and the reverse orders and every multiset of the others' inputs
    (``krr``: up to the symmetry of k-RR, with ``pairs = [(0, 1)]``); shape ``(len(rounds), len(deltas))``.
    ``T = 1`` is the single round."""
    rounds, deltas = list(rounds), np.asarray(deltas, np.float64)
    best = np.zeros((len(rounds), deltas.size))
    for (a, b), others in itertools.product(pairs, datasets(Mg.shape[0], n - 1, krr)):
        P, Q = histogram_laws(Mg, a, b, others)
        for X, Y in ((P, Q), (Q, P)):
            one = Atoms.of_pair(X, Y)
            folds = {0: ONE, 1: one}
            for j in range(2, (max(rounds) + 1) // 2 + 1):  # the halves of every T
                folds[j] = folds[j - 1] * one
            for t, T in enumerate(rounds):
                best[t] = Composed(folds, T).epsilon(deltas, best[t])
    return best


def all_pairs(K: int) -> list:
    return list(itertools.combinations(range(K), 2))


# ---------------------------------------------------------------------------------------------------------
# the enumerator against independent values


def test_one_round_is_the_exact_module_value():
    """T = 1: the largest over datasets equals ``jaxshuffle.exact``'s enumeration of the sampled round
    (tests/test_sampled_rounds_exact.py's reference), for k-RR and a random 3 x 3 matrix; and k-RR's orbits
    of datasets give the largest over every dataset (one and two rounds)."""
    for M, n, g, d, pairs in [(krr_matrix(1.5, 3), 3, 0.5, 1e-3, [(0, 1)]),
                              (krr_matrix(0.5, 2), 5, 0.1, 1e-2, [(0, 1)]),
                              (random_ldp_matrix(np.random.default_rng(7)), 3, 0.9, 1e-2, None)]:
        Mg = sampled(M, g)
        ours = exact_composed(Mg, n, [1], [d], pairs or all_pairs(3))[0, 0]
        ref = worst_exact(Mg, n, d, pairs=pairs)
        assert ours > 0.05 and abs(ours - ref) <= 1e-9, (M, n, g, d, ours, ref)
    # the k-RR orbits of datasets give the value of every dataset
    Mg = sampled(krr_matrix(1.0, 4), 0.5)
    orbits, every = (exact_composed(Mg, 4, [1, 2], [1e-3], [(0, 1)], krr=krr) for krr in (True, False))
    assert len(datasets(4, 3, True)) == 13 and np.allclose(orbits, every, rtol=1e-12, atol=0)


def test_hand_derived_values():
    """Binary RR at eps0 = 1. One round, n = 2, g = 0.5, the other user holding x0: docs/math.md 12.10's
    ``log(e - delta (e+1)^2/(g^2 e))``. Two rounds of the victim alone (n = 1, any g): its losses are
    ``+-eps0`` (P-mass ``p = g e/(e+1)`` at ``+eps0``) and 0 (void), so ``delta_2(eps) = p^2 (1 - e^{eps - 2 eps0})``
    for ``eps0 <= eps < 2 eps0``: ``eps = 2 eps0 + log(1 - delta/p^2)`` where that is at least ``eps0``."""
    e, d = math.e, 0.01
    Mg = sampled(krr_matrix(1.0, 2), 0.5)
    P, Q = histogram_laws(Mg, 0, 1, (0,))
    one = {0: ONE, 1: Atoms.of_pair(P, Q)}
    assert Composed(one, 1).epsilon([d], [0.0])[0] == pytest.approx(math.log(e - d * (e + 1) ** 2 / (0.25 * e)),
                                                                    abs=1e-11)
    assert Composed(one, 1).epsilon([d], [0.0])[0] == pytest.approx(0.922207, abs=5e-7)
    for g in (1.0, 0.5, 0.1):
        p = g * e / (e + 1)
        got = exact_composed(sampled(krr_matrix(1.0, 2), g), 1, [2], [1e-3, 1e-4], [(0, 1)])[0]
        want = [2 + math.log(1 - x / p**2) for x in (1e-3, 1e-4)]
        assert min(want) >= 1 and got == pytest.approx(want, abs=1e-11), (g, got, want)


def test_composition_is_the_sum_over_every_sequence_of_outputs():
    """``delta_T`` of the split-and-merge evaluation equals the hockey-stick sum over all ``|O|^T`` ordered
    output sequences (binary RR n = 2 and a random 3 x 3 matrix n = 2, g = 0.5, T = 2, 3), at eps on a grid."""
    for M in (krr_matrix(1.0, 2), random_ldp_matrix(np.random.default_rng(5))):
        P, Q = histogram_laws(sampled(M, 0.5), 0, 1, (M.shape[0] - 1,))
        one = Atoms.of_pair(P, Q)
        folds = {0: ONE, 1: one, 2: one * one}
        eps = np.linspace(0.0, 3.0, 13)
        for T in (2, 3):
            PT, QT = P, Q
            for _ in range(T - 1):
                PT, QT = np.multiply.outer(PT, P).ravel(), np.multiply.outer(QT, Q).ravel()
            brute = np.array([np.sum(np.maximum(0.0, PT - math.exp(x) * QT)) for x in eps])
            assert np.allclose(Composed(folds, T).delta(eps), brute, rtol=1e-11, atol=1e-16), T


# ---------------------------------------------------------------------------------------------------------
# the certified T-round epsilon against the exact composition


def _check(randomizer, M, pairs, points, rounds, deltas, seen):
    """At each ``(n, g)`` of ``points``: one ``composed_epsilon`` call for every ``T`` and ``delta``, never below
    the exact composition (``seen`` collects certified/exact)."""
    for n, g in points:
        cert = composed_epsilon(randomizer, n, rounds, deltas, sample_rate=g)
        assert cert.upper.shape == (len(rounds), len(deltas))
        exact = exact_composed(sampled(M, g), n, rounds, deltas, pairs, krr=pairs == [(0, 1)])
        assert np.all(exact > 0)
        for t, d in itertools.product(range(len(rounds)), range(len(deltas))):
            up, ex = float(cert.upper[t, d]), float(exact[t, d])
            seen.append(up / ex)
            assert up >= ex * (1 - SLACK), dict(n=n, g=g, T=rounds[t], delta=deltas[d], certified=up, exact=ex,
                                                source=str(cert.upper_source[t, d]))


ROUNDS, DELTAS = [2, 3, 5], [1e-2, 1e-3, 1e-6]  # every call: its default loss grid depends on max(ROUNDS)


@pytest.mark.slow
def test_binary_rr_composed_rounds_are_above_the_exact_composition():
    """Binary RR at eps0 = 1.5, n = 3, g = 0.5 (a point of the grid below, which then reuses its programs)."""
    seen = []
    _check(R.grr(1.5, 2), krr_matrix(1.5, 2), [(0, 1)], [(3, 0.5)], ROUNDS, DELTAS, seen)
    assert len(seen) == 9


def _matrices() -> list:
    rng = np.random.default_rng(11)
    return [random_ldp_matrix(rng), random_ldp_matrix(rng)]


@pytest.mark.slow
@pytest.mark.parametrize("family", ["krr", "matrix"])
def test_composed_sampled_rounds_are_above_the_exact_composition_on_the_grid(family):
    """T in {2, 3, 5} and delta in {1e-2, 1e-3, 1e-6} (one call), at the (n, g) below. k-RR: k = 2..4, eps0 in
    {0.5, 1.5} (the pair (0, 1) covers every pair: the inputs are interchangeable). Two random 3 x 3 eps0-LDP
    matrices, every pair. Thinned for time: each new (eps0, n, g) compiles the engines anew (k-RR's programs
    are then shared by every k), and a matrix point plans its forms in numpy (15-35 s each on 2 busy cores)."""
    seen = []
    if family == "krr":
        for k, eps0 in itertools.product((2, 3, 4), (0.5, 1.5)):
            _check(R.grr(eps0, k), krr_matrix(eps0, k), [(0, 1)], [(2, 1.0), (3, 0.5), (5, 0.1)], ROUNDS, DELTAS,
                   seen)
        assert len(seen) == 6 * 3 * 9
    else:
        for M, points in zip(_matrices(), ([(2, 1.0), (5, 0.1)], [(3, 0.5)])):
            _check(ldp_randomizer(M), M, all_pairs(3), points, ROUNDS, DELTAS, seen)
        assert len(seen) == 3 * 9


def _same(a, b):
    return all(np.array_equal(np.asarray(x), np.asarray(y), equal_nan=np.asarray(x).dtype.kind == "f")
               for x, y in zip(a, b))


@pytest.mark.slow
@pytest.mark.parametrize("matrix", [False, True])
def test_rate_one_is_the_call_without_a_rate(matrix):
    """``sample_rate=1`` is the call without it, every field bit for bit (NaN for NaN): binary RR at the fast
    test's point, a random matrix at the grid's n = 2."""
    V, n = (ldp_randomizer(_matrices()[0]), 2) if matrix else (R.grr(1.5, 2), 3)
    a = composed_epsilon(V, n, ROUNDS, DELTAS, sample_rate=1.0)
    b = composed_epsilon(V, n, ROUNDS, DELTAS)
    assert _same(a, b) and len(a) == len(b) == 11
