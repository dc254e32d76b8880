"""Matrix builders of catalog rows for the general finite-mechanism engine (docs/math.md 11.7).

``hadamard_response_matrix`` (HR(K, K/2, 1)) and ``local_hash_matrix`` (OLH, uniformly random hash,
outputs merged by pattern): row-stochastic, variation-ratio parameters equal to the catalog's, the
pattern merge against the unmerged ``l^(d+1)``-column matrix, and ``matrix_bounds`` bracketing the
exact epsilon from enumeration (``jaxshuffle.exact``), as tests/test_blanket_matrix.py does for random
matrices. Counts of the cases checked are asserted, so a test cannot pass vacuously.

Symmetry used to keep the enumeration small: every ordered pair of inputs is equivalent to ``(0, 1)``.
HR: GL(m, F2) (``K = 2^m``) acts on the nonzero Hadamard rows ``u`` by ``u -> A u`` and on the columns
by ``y -> A^-T y`` (``<Au, A^-T y> = <u, y>``), transitively on ordered pairs of distinct nonzero
vectors (any two are linearly independent). OLH: permuting the inputs and the pattern bits alike
(``c_b`` depends on ``|b|`` only). A dataset's exact epsilon is invariant under these relabelings.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import jaxshuffle  # noqa: F401  (float64)
from jaxshuffle import blanket as bl
from jaxshuffle import blanket_matrix as bm
from jaxshuffle import randomizers as RZ
from jaxshuffle.exact import enumerate as exact
from jaxshuffle.exact.soundness import matrix_vr_parameters

# The plan of tests/test_blanket_matrix.py (small n): the programs are shared with that module.
SMALL = bl.BlanketPlan(window=16, block=8, lines=16, max_step=16, chunk=1)


def _vr(params):
    return tuple(float(x) for x in (params.p, params.beta, params.q))


def test_hadamard_matrix_rows_and_vr_parameters():
    """11.7: HR(K, K/2, 1): (K-1) x K, two entry values, |C_x| = K/2, |C_x & C_x'| = K/4, rows sum to 1,
    and matrix_vr_parameters = hadamard_response(eps0, K, K/2, 1)'s (p, beta, q)."""
    checked = 0
    for K in (4, 8, 16, 64):
        s = K // 2
        for eps0 in (0.0, 0.5, 1.0, 2.0, 5.0):
            M = RZ.hadamard_response_matrix(eps0, K)
            assert M.shape == (K - 1, K) and M.dtype == np.float64
            assert np.max(np.abs(M.sum(axis=1) - 1.0)) <= 1e-14
            e = math.exp(eps0)
            inside = np.isclose(M, e / (s * e + K - s), rtol=1e-15, atol=0)
            outside = np.isclose(M, 1.0 / (s * e + K - s), rtol=1e-15, atol=0)
            assert np.all(inside | outside)
            if eps0 > 0:
                assert np.all(inside.sum(axis=1) == s)
                assert np.all(inside[:, 0])  # column 0: every nonzero Hadamard row is +1 there
                both = inside.astype(int) @ inside.T.astype(int)
                assert np.all(both[~np.eye(K - 1, dtype=bool)] == K // 4)
            got, want = matrix_vr_parameters(M), _vr(RZ.hadamard_response(eps0, K, s, 1))
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-16)
            checked += 1
    assert checked == 20
    # Sylvester convention: row u of H is (-1)^popcount(u & y); input x is row u = x + 1
    M = RZ.hadamard_response_matrix(1.0, 8)
    popc = np.array([[bin(u & y).count("1") % 2 == 0 for y in range(8)] for u in range(1, 8)])
    assert np.array_equal(M > M.min(), popc)


@pytest.mark.parametrize("eps0,d,k", [(1.0, 10, 3), (0.3, 5, 2), (6.0, 7, 1), (800.0, 6, 3)])
def test_subset_selection_matrix_is_exactly_symmetric(eps0, d, k):
    """Definition: R[x, S] proportional to e^(eps0 [x in S]) over the C(d, k) subsets. The builder's
    entries equal a row-by-row normalisation of those weights (to rounding; eps0 = 800 would overflow
    e^eps0) and take exactly two values, so every ordered pair of inputs gives one sum form of at most
    five categories (four kinds of subset plus the null one): one blanket form, not the 4 forms of 8
    categories that ulp differences between row sums left before."""
    M = RZ.subset_selection_matrix(eps0, d, k)
    subsets = list(itertools.combinations(range(d), k))
    assert M.shape == (d, len(subsets))
    if eps0 < 700:
        weight = np.array([[math.exp(eps0) if x in S else 1.0 for S in subsets] for x in range(d)])
        np.testing.assert_allclose(M, weight / weight.sum(axis=1, keepdims=True), rtol=1e-14)
    np.testing.assert_allclose(M.sum(axis=1), 1.0, rtol=1e-14)
    assert len(np.unique(M)) == (1 if eps0 == 0 else 2)
    forms = bm.pair_forms(M, "blanket")
    assert len(forms.w) == 1 and int(np.sum(forms.w[0] > 0)) <= 5


def test_local_hash_matrix_rows_and_vr_parameters():
    """11.7: OLH merged matrix: d x 2^d, rows sum to 1, c_b = l (1/l)^|b| (1-1/l)^(d-|b|); (p, beta, q) equal
    local_hash(eps0, l, collision=1/l)'s, and beta is the table's (collision = 0) times (1 - 1/l)."""
    checked = 0
    for ell, d in ((2, 2), (2, 3), (3, 3), (5, 4), (16, 6)):
        for eps0 in (0.0, 0.5, 1.0, 3.0):
            M = RZ.local_hash_matrix(eps0, ell, d)
            assert M.shape == (d, 2 ** d)
            assert np.max(np.abs(M.sum(axis=1) - 1.0)) <= 1e-14
            e = math.exp(eps0)
            for b in range(2 ** d):
                bits = np.array([(b >> x) & 1 for x in range(d)])
                c = ell * (1 / ell) ** bits.sum() * (1 - 1 / ell) ** (d - bits.sum())
                np.testing.assert_allclose(M[:, b], c * np.where(bits == 1, e, 1.0) / (e + ell - 1), rtol=1e-14)
            got = matrix_vr_parameters(M)
            np.testing.assert_allclose(got, _vr(RZ.local_hash(eps0, ell, collision=1.0 / ell)), rtol=1e-13, atol=1e-16)
            table_beta = float(RZ.local_hash(eps0, ell).beta)
            assert abs(got[1] - (1 - 1 / ell) * table_beta) <= 1e-14
            checked += 1
    assert checked == 20


def test_builders_reject_bad_input():
    for K in (2, 6, 12, 3.5, 8192, -4):
        with pytest.raises(ValueError, match=r"^K: must be a power of two in \[4, 4096\]"):
            RZ.hadamard_response_matrix(1.0, K)
    for eps0 in (-0.1, math.inf, math.nan):
        with pytest.raises(ValueError, match="^eps0: must be a finite scalar >= 0"):
            RZ.hadamard_response_matrix(eps0, 8)
        with pytest.raises(ValueError, match="^eps0: must be a finite scalar >= 0"):
            RZ.local_hash_matrix(eps0, 2, 3)
    for ell in (1, 0, 2.5):
        with pytest.raises(ValueError, match="^l: must be an integer >= 2"):
            RZ.local_hash_matrix(1.0, ell, 3)
    for d in (1, 13, 3.5):
        with pytest.raises(ValueError, match=r"^d: must be an integer in \[2, 12\]"):
            RZ.local_hash_matrix(1.0, 2, d)
    assert RZ.local_hash_matrix(1.0, 2.0, 12).shape == (12, 4096)  # integral floats are accepted
    assert RZ.hadamard_response_matrix(1.0, np.int64(4096)).shape == (4095, 4096)


def _unmerged_local_hash(eps0, ell, d):
    """``P((H, y) | x)`` over every function ``H: [d] -> [l]`` (explicit, ``l^d`` of them) and ``y in [l]``,
    with each column's pattern ``b = sum_x [H(x) = y] 2^x``."""
    e = math.exp(eps0)
    cols, patterns = [], []
    for H in itertools.product(range(ell), repeat=d):
        for y in range(ell):
            hit = np.array([H[x] == y for x in range(d)])
            cols.append(ell ** -d * np.where(hit, e, 1.0) / (e + ell - 1))
            patterns.append(int(np.sum(hit * 2 ** np.arange(d))))
    return np.array(cols).T, np.array(patterns)


def test_local_hash_merge_matches_unmerged():
    """11.7: summing the unmerged (H, y) columns by pattern gives the merged matrix; each unmerged column is
    proportional to its pattern's column with one factor for every row; exact epsilon of the shuffled
    histogram is the same for merged and unmerged matrices (n <= 6, several datasets). For l = 2, d = 2
    the enumeration also runs without lumping (raw outputs), independent of the lumping argument."""
    compared = 0
    for ell, d in ((2, 2), (2, 3), (3, 2), (3, 3)):
        eps0 = 1.0
        U, pat = _unmerged_local_hash(eps0, ell, d)
        M = RZ.local_hash_matrix(eps0, ell, d)
        assert U.shape == (d, ell ** (d + 1)) and np.max(np.abs(U.sum(axis=1) - 1.0)) <= 1e-14
        summed = np.stack([U[:, pat == b].sum(axis=1) for b in range(2 ** d)], axis=1)
        np.testing.assert_allclose(summed, M, rtol=1e-13)
        ratio = U / M[:, pat]  # one factor per column, the same in every row: l^-d / c_b
        np.testing.assert_allclose(ratio, np.broadcast_to(ratio[:1], ratio.shape), rtol=1e-13)
        for n in (2, 4, 6):
            for others in sorted({(0,) * (n - 1), (1,) * (n - 1), tuple(i % d for i in range(n - 1))}):
                for delta in (0.01, 0.2):
                    a = exact.epsilon(M, 0, 1, list(others), delta)
                    b = exact.epsilon(U, 0, 1, list(others), delta)
                    assert abs(a - b) <= 1e-9 * a + 1e-10, (ell, d, n, others, a, b)
                    compared += 1
    U, _ = _unmerged_local_hash(1.0, 2, 2)
    M = RZ.local_hash_matrix(1.0, 2, 2)
    for n, others in ((2, [1]), (3, [0, 1]), (4, [1, 1, 1])):
        a = exact.epsilon(M, 0, 1, others, 0.05, lump=False)
        b = exact.epsilon(U, 0, 1, others, 0.05, lump=False)
        assert abs(a - b) <= 1e-9 * a + 1e-10, (n, others, a, b)
        compared += 1
    assert compared == 4 * (2 + 3 + 3) * 2 + 3  # datasets per (l, d): 2 at n = 2, 3 at n = 4 and at n = 6


def _bracket(M, n, delta, every_dataset):
    """``matrix_bounds`` against exact enumeration: every dataset tried (pair (0, 1): all multisets of the
    others' inputs if ``every_dataset``; every pair with all-equal others) has exact eps <= certified upper,
    and certified lower <= the largest exact eps found (a lower bound on the worst case over all datasets)."""
    b = bm.matrix_bounds(M, n, delta, plan=SMALL)
    K = M.shape[0]
    worst, tried = 0.0, 0
    sets = itertools.combinations_with_replacement(range(K), n - 1) if every_dataset else ()
    for others in sets:
        ex = exact.epsilon(M, 0, 1, list(others), delta)
        assert ex <= b.upper * (1 + 1e-9) + 1e-12, (M, n, others, ex, b)
        worst, tried = max(worst, ex), tried + 1
    for x0, x1 in itertools.combinations(range(K), 2):  # exact.epsilon takes both directions
        for v in range(K):
            ex = exact.epsilon(M, x0, x1, [v] * (n - 1), delta)
            assert ex <= b.upper * (1 + 1e-9) + 1e-12, (M, n, x0, x1, v, ex, b)
            worst, tried = max(worst, ex), tried + 1
    assert b.lower <= worst * (1 + 1e-9) + 1e-12, (M, n, b, worst)
    return b, worst, tried


@pytest.mark.slow
@pytest.mark.parametrize("K", [4, 8])
def test_engine_brackets_exact_hadamard(K):
    """11.7 with 11.5: HR K = 4, 8 at eps0 in {0.5, 2}, n in {3, 5, 8}, delta = 0.01. Every dataset of the
    others for pair (0, 1) (all pairs are equivalent, module doc) except K = 8, n = 8 (1716 multisets,
    minutes): there all-equal datasets of every pair. K = 4 runs the exact kernel, K = 8 coarsens."""
    tried = 0
    for eps0, n in itertools.product((0.5, 2.0), (3, 5, 8)):
        b, worst, t = _bracket(RZ.hadamard_response_matrix(eps0, K), n, 0.01, every_dataset=not (K == 8 and n == 8))
        assert b.exact_kernel == (K == 4)
        print(f"HR K={K} eps0={eps0} n={n}: lower {b.lower:.6f} exact {worst:.6f} upper {b.upper:.6f} ({t} datasets)")
        tried += t
    assert tried > (150 if K == 4 else 1000)


@pytest.mark.slow
def test_engine_brackets_exact_local_hash():
    """11.7 with 11.5: OLH (l, d) = (2, 3), (3, 3) at eps0 = 1, n in {3, 5, 8}, delta = 0.01, every dataset
    of the others for pair (0, 1) and all-equal datasets of every pair."""
    tried = 0
    for (ell, d), n in itertools.product(((2, 3), (3, 3)), (3, 5, 8)):
        b, worst, t = _bracket(RZ.local_hash_matrix(1.0, ell, d), n, 0.01, every_dataset=True)
        print(f"OLH l={ell} d={d} n={n}: lower {b.lower:.6f} exact {worst:.6f} upper {b.upper:.6f} ({t} datasets)")
        tried += t
    assert tried > 100


@pytest.mark.slow
def test_hadamard_blanket_beats_the_stronger_clone():
    """11.7: HR K = 8, eps0 = 1, n = 1e4, delta = 1e-6 with its matrix attached: the matrix engine's
    certified upper is below the worst-case (stronger clone) upper, so amplify reports the blanket. The
    exact datasets' forms are over the matrix engine's cost cap here, so the lower bound is the row's
    Theorem 5.1 pair's."""
    from jaxshuffle import blanket_matrix as bm
    from jaxshuffle.accountant.amplify import UpperSource, amplify
    vr = RZ.with_matrix(RZ.hadamard_response(1.0, 8, 4, 1), RZ.hadamard_response_matrix(1.0, 8))
    assert bm.matrix_cells(vr.mechanism.matrix, 1e4, 1e-6) > bm.MATRIX_AUTO_MAX_CELLS
    rep = amplify(vr, 1e4, 1e-6, lower_params=RZ.hadamard_response_lower(1.0, 8, 4, 1))
    clone, blanket = float(rep.worst_case), float(rep.blanket)
    print(f"HR K=8 eps0=1 n=1e4 delta=1e-6: stronger clone {clone:.6f}, matrix blanket {blanket:.6f}, "
          f"lower {float(rep.lower):.6f}")
    assert blanket <= clone and float(rep.upper) == blanket
    assert int(rep.upper_source) == UpperSource.BLANKET
    assert 0.0 < float(rep.lower) <= blanket
