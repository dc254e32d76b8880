"""The certified worst-case (clone) pair: the clone constant proven for each randomizer (docs/math.md 3.1)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import jaxshuffle as js
import jaxshuffle.randomizers as R
from jaxshuffle.exact.enumerate import epsilon as exact_epsilon
from jaxshuffle.randomizers.clone import CloneProof, certified_clone, matrix_clone_constant
from jaxshuffle.randomizers.matrices import binary_rr_matrix, hadamard_response_matrix, subset_selection_matrix


def _krr_matrix(eps0: float, k: int) -> np.ndarray:
    E0 = math.exp(eps0)
    return (np.full((k, k), 1.0) + np.eye(k) * (E0 - 1.0)) / (E0 + k - 1.0)


def test_general_randomizer_is_certified_by_the_standard_clone():
    rep = js.amplify(R.general(1.0), 1e4, 1e-6)
    std = js.epsilon(js.standard_clone_pair(1.0), 1e4, 1e-6)
    stronger = js.epsilon(js.stronger_clone_pair(1.0), 1e4, 1e-6)
    assert float(rep.upper) == pytest.approx(float(std.upper), rel=1e-12)
    assert round(float(rep.upper), 7) == 0.0530053
    assert float(rep.upper) > 1.2 * float(stronger.upper)  # the withdrawn constant is not used
    r, proof = certified_clone(R.general(1.0))
    assert proof == CloneProof.STANDARD and float(r) == pytest.approx(0.5 / math.e, rel=1e-15)
    assert float(r) < 0.5 / math.e  # rounded down, the safe side


def test_krr_keeps_the_stronger_clone():
    rep = js.amplify(R.grr(1.0, 10), 1e4, 1e-6, upper_from="worst-case")
    stronger = js.epsilon(js.stronger_clone_pair(1.0), 1e4, 1e-6)
    assert float(rep.upper) == pytest.approx(float(stronger.upper), rel=1e-9)
    r, proof = certified_clone(R.grr(np.array([0.5, 1.0]), 3))
    assert (np.asarray(proof) == CloneProof.STRONGER).all()
    r2, proof2 = certified_clone(R.binary_rr(1.0, np.array([2.0, 3.0])))
    assert list(np.asarray(proof2)) == [CloneProof.STRONGER, CloneProof.STANDARD]


@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.0])
def test_matrix_clone_constant_of_known_mechanisms(eps0):
    p = math.exp(eps0)
    # k-RR: exactly 1/(p+1); binary RR on 3 options, subset selection, Hadamard response: 1/(2p)
    assert matrix_clone_constant(_krr_matrix(eps0, 5)) == pytest.approx(1 / (p + 1), rel=1e-14)
    assert matrix_clone_constant(_krr_matrix(eps0, 5)) <= 1 / (p + 1)
    assert matrix_clone_constant(binary_rr_matrix(eps0, 3)) == pytest.approx(1 / (2 * p), rel=1e-12)
    assert matrix_clone_constant(subset_selection_matrix(eps0, 5, 2)) == pytest.approx(1 / (2 * p), rel=1e-12)
    assert matrix_clone_constant(hadamard_response_matrix(eps0, 8)) == pytest.approx(1 / (2 * p), rel=1e-12)
    # brute force over every (x, x0, x1, y) on a random LDP matrix
    rng = np.random.default_rng(int(eps0 * 10))
    M = rng.uniform(1.0, p, size=(4, 5))
    M /= M.sum(axis=1, keepdims=True)
    brute = min(M[x, y] / (M[a, y] + M[b, y]) for x in range(4) for a, b in itertools.combinations(range(4), 2)
                for y in range(5))
    assert matrix_clone_constant(M) <= brute and matrix_clone_constant(M) == pytest.approx(brute, rel=1e-14)


@pytest.mark.parametrize("builder", ["subset", "binary3", "random"])
def test_clone_pair_dominates_exact_enumeration(builder):
    """The certified clone pair of a mechanism is above the exact epsilon of every dataset of the
    others (n = 3, every pair of victim inputs), and its constant is the matrix's r*."""
    eps0, n, delta = 1.0, 3, 1e-3
    if builder == "subset":
        M = subset_selection_matrix(eps0, 4, 2)
    elif builder == "binary3":
        M = binary_rr_matrix(eps0, 3)
    else:
        rng = np.random.default_rng(7)
        M = rng.uniform(1.0, math.e, size=(3, 4))
        M /= M.sum(axis=1, keepdims=True)
    p = float(np.max(M[:, None, :] / M[None, :, :]))
    params = R.with_matrix(R.general(math.log(p)), M)
    r, proof = certified_clone(params)
    assert proof == CloneProof.GENERAL or float(r) == pytest.approx(0.5 / p, rel=1e-12)
    rep = js.amplify(params, n, delta, upper_from="worst-case")
    K = M.shape[0]
    worst = 0.0
    for x0, x1 in itertools.permutations(range(K), 2):
        for others in itertools.combinations_with_replacement(range(K), n - 1):
            worst = max(worst, exact_epsilon(M, x0, x1, list(others), delta))
    assert worst <= float(rep.upper)


def test_catalog_rows_name_their_proof():
    """Subset selection, Hadamard response and RAPPOR / binary RR on d >= 3 options are certified by the
    standard clone, k-RR and binary RR on two options by the stronger clone; amplify reports which."""
    cases = [(R.subset_selection(1.0, 6, 2), CloneProof.STANDARD),
             (R.hadamard_response(1.0, 16, 8), CloneProof.STANDARD),
             (R.rappor(1.0, 5), CloneProof.STANDARD), (R.rappor(1.0, 2), CloneProof.STRONGER),
             (R.grr(1.0, 4), CloneProof.STRONGER), (R.general(1.0), CloneProof.STANDARD)]
    for params, proof in cases:
        assert int(certified_clone(params)[1]) == proof
    rep = js.amplify(R.subset_selection(1.0, 6, 2), 1e3, 1e-6, upper_from="worst-case")
    assert int(rep.clone_proof) == CloneProof.STANDARD
    assert float(rep.worst_case) == pytest.approx(float(js.epsilon(js.standard_clone_pair(1.0), 1e3, 1e-6).upper),
                                                  rel=1e-9)
    assert not bool(rep.paper_certified)  # the paper's pair uses the stronger clone's constant: not proven here


@pytest.mark.slow
def test_hadamard_and_rappor_matrices_stay_below_their_certified_pair_at_small_n():
    """Exact enumeration (every dataset of the others, every ordered pair of inputs) of Hadamard response
    (K = 4, 8) and RAPPOR on 3 options at n = 3: below the certified clone pair of their catalog rows."""
    eps0, n, delta = 1.0, 3, 1e-3
    for params, M in [(R.hadamard_response(eps0, 4, 2), hadamard_response_matrix(eps0, 4)),
                      (R.hadamard_response(eps0, 8, 4), hadamard_response_matrix(eps0, 8)),
                      (R.rappor(eps0, 3), binary_rr_matrix(eps0, 3))]:
        rep = js.amplify(params, n, delta, upper_from="worst-case")
        K = M.shape[0]
        worst = max(exact_epsilon(M, x0, x1, list(o), delta)
                    for x0, x1 in itertools.permutations(range(K), 2)
                    for o in itertools.combinations_with_replacement(range(K), n - 1))
        assert worst <= float(rep.upper), (K, worst, float(rep.upper))


@pytest.mark.slow
def test_sweep_results_name_the_proof_of_their_worst_case_pair(tmp_path):
    """A sweep's ``clone_proof`` column: the standard clone for ``general``, the stronger one for k-ary RR,
    equal to ``amplify``'s ``clone_proof`` at the same points; ``worst_case`` is that proof's value."""
    from jaxshuffle.sweeps import sweep
    for name, options, proof in (("general", {}, CloneProof.STANDARD), ("grr", {"k": "3"}, CloneProof.STRONGER)):
        res = sweep(name, eps0="0.5,2", n="50", delta="1e-6", out=tmp_path / name, quiet=True, **options)
        assert res["clone_proof"].tolist() == [proof.name.lower()] * 2
        params = R.build(name, eps0=np.array([0.5, 2.0]), **{k: float(v) for k, v in options.items()})
        rep = js.amplify(params, 50, 1e-6)
        assert np.asarray(rep.clone_proof).tolist() == [int(proof)] * 2
        np.testing.assert_allclose(res["worst_case"], np.asarray(rep.worst_case), rtol=1e-9)


@pytest.mark.slow
def test_composed_rounds_name_the_proof_of_their_pair():
    """Composition over rounds says which proof certified its rounds' pair: the standard clone for
    ``general`` (T = 1 equals ``amplify``'s standard-clone bound), the stronger one for k-ary RR;
    ``compose`` lists each round's pair."""
    from jaxshuffle.accountant.compose import compose
    from jaxshuffle.accountant.pld import shuffled_round
    from jaxshuffle.accountant.rounds import composed_epsilon
    for params, proof in ((R.general(1.0), CloneProof.STANDARD), (R.grr(1.0, 10), CloneProof.STRONGER)):
        c = composed_epsilon(params, 1e4, [1, 4], 1e-6, blanket_points=0)
        assert c.clone_proof == proof.name.lower()
        one = float(js.amplify(params, 1e4, 1e-6).worst_case)
        assert c.pld[0, 0] >= one * (1 - 1e-3)  # the PLD composes the same pair, on a grid rounded up
        rounds = [(shuffled_round(params, 1e4, discretization=1e-4), 2),
                  (shuffled_round(R.grr(2.0, 3), 1e4, discretization=1e-4), 1)]
        assert compose(rounds, 1e-6).sources == (f"{proof.name.lower()} clone", "stronger clone")


def test_scaled_pair_certifies_only_where_proven():
    """The opt-in (u+v)-scaled pair is proven where every pair of inputs has total variation beta:
    k-ary RR, and a matrix whose rows' pairwise total variations are equal. Subset selection given only
    by its parameters gets ``certified = False`` where the scaled pair gives ``upper``; with its matrix
    (symmetric: equal pairwise TVs) the same value is certified. A matrix with unequal TVs is not."""
    from jaxshuffle.accountant.amplify import UpperSource
    from jaxshuffle.randomizers.clone import equal_pairwise_total_variation, scaled_pair_proven

    n = np.array([2.0, 5.0, 20.0])
    kw = dict(scaled_variant=True, upper_from="worst-case")
    grr = js.amplify(R.grr(1.0, 3), n, 0.01, **kw)
    assert (np.asarray(grr.upper_source) == UpperSource.SCALED).any() and np.asarray(grr.certified).all()
    # bare parameters (no mechanism): the scaled pair is not proven
    bare = R.VRParams(*(np.asarray(x) for x in (R.local_hash(2.0, 4).p, R.local_hash(2.0, 4).beta,
                                                R.local_hash(2.0, 4).q)))
    lh = js.amplify(bare, n, 0.01, **kw)
    scaled = np.asarray(lh.upper_source) == UpperSource.SCALED
    assert scaled.any()
    np.testing.assert_array_equal(np.asarray(lh.certified), ~scaled)
    assert np.asarray(js.amplify(bare, n, 0.01).certified).all()  # without scaled_variant: every point
    # the symmetric catalog rows: every pair of inputs at one total variation, checked on their matrices
    for params, matrix in ((R.subset_selection(1.0, 6, 2), R.subset_selection_matrix(1.0, 6, 2)),
                           (R.binary_rr(1.0, 4), R.binary_rr_matrix(1.0, 4)),
                           (R.hadamard_response(1.0, 8, 4), R.hadamard_response_matrix(1.0, 8))):
        assert equal_pairwise_total_variation(matrix)
        assert scaled_pair_proven(params) and scaled_pair_proven(R.with_matrix(params, matrix))
    assert not equal_pairwise_total_variation(np.array([[0.5, 0.3, 0.2], [0.3, 0.5, 0.2], [0.2, 0.3, 0.5]]))
    assert not scaled_pair_proven(R.hadamard_response(1.0, 8, 2))  # s != K/2: no proof here


def test_calibration_refuses_the_scaled_pair_where_it_is_not_proven():
    from jaxshuffle.accountant.calibrate import calibrate_eps0, calibrate_n
    with pytest.raises(ValueError, match="scaled_variant"):
        calibrate_eps0("local-hash", 0.5, 1e4, 1e-6, l=4, scaled_variant=True)
    with pytest.raises(ValueError, match="scaled_variant"):
        calibrate_n(R.general(1.0), 0.5, 1e-6, scaled_variant=True)


@pytest.mark.slow
def test_calibration_names_the_proof_of_its_pair():
    """A calibration says which clone proof certifies its answer: the standard clone for ``general``,
    the stronger one for k-ary RR, as ``amplify`` at the calibrated value."""
    from jaxshuffle.accountant.calibrate import calibrate_eps0, calibrate_n
    c = calibrate_n(R.general(1.0), 0.2, 1e-6)
    assert np.asarray(c.clone_proof).tolist() == int(CloneProof.STANDARD)
    c = calibrate_eps0("grr", 0.3, 1e3, 1e-6, k=4, upper_from="worst-case")
    assert np.asarray(c.clone_proof).tolist() == int(CloneProof.STRONGER)
    rep = js.amplify(R.grr(float(c.value), 4), 1e3, 1e-6)
    assert int(rep.clone_proof) == int(c.clone_proof)
