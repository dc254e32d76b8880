"""A matrix is checked against what it claims: ``randomizers.with_matrix`` and the matrix engine's entry
points refuse a matrix that is not a real row-stochastic array, or that is not the randomizer whose
parameters it is attached to (more inputs, a larger probability ratio), with one ValueError line naming
``matrix`` and the offending value; matched matrices are accepted."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxshuffle.blanket_matrix as bm
from jaxshuffle import randomizers as R
from jaxshuffle.exact.soundness import grr_matrix
from jaxshuffle.randomizers.params import VRParams, matrix_ratio


def _vr(p, beta=None, q=None):
    p = float(p)
    beta = (p - 1.0) / (p + 1.0) if beta is None and math.isfinite(p) else (1.0 if beta is None else beta)
    return VRParams(np.float64(p), np.float64(beta), np.float64(p if q is None else q))


def test_more_inputs_than_the_krr_is_refused():
    with pytest.raises(ValueError, match=r"^matrix: .*inputs \(3\), got 5 rows"):
        R.with_matrix(R.grr(1.0, 3), grr_matrix(5, 1.0))
    R.with_matrix(R.grr(1.0, 3), grr_matrix(3, 1.0))  # the randomizer's own matrix


def test_a_larger_ldp_ratio_is_refused_naming_both_values():
    with pytest.raises(ValueError) as err:
        R.with_matrix(R.grr(1.0, 5), grr_matrix(5, 5.0))
    msg = str(err.value)
    assert msg.startswith("matrix: its largest probability ratio is 148.413 (eps0 = 5)")
    assert "p = 2.71828 (eps0 = 1)" in msg and "\n" not in msg


def test_a_zero_beside_a_nonzero_entry_is_an_infinite_ratio():
    with pytest.raises(ValueError, match=r"^matrix: its largest probability ratio is inf"):
        R.with_matrix(R.general(5.0), [[1.0, 0.0], [0.5, 0.5]])
    assert matrix_ratio(np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]])) == math.inf
    assert matrix_ratio(np.array([[0.5, 0.5, 0.0], [0.25, 0.75, 0.0]])) == 2.0  # zero column ignored


def test_a_larger_total_variation_than_beta_is_refused():
    M = [[0.6, 0.4], [0.4, 0.6]]  # p = 1.5, TV = 0.2
    with pytest.raises(ValueError, match=r"^matrix: its largest total variation .* is 0.2, above .*beta = 0.1"):
        R.with_matrix(_vr(1.5, beta=0.1), M)
    R.with_matrix(_vr(1.5, beta=0.2), M)


def test_a_larger_ratio_than_the_blanket_ratio_q_is_refused():
    with pytest.raises(ValueError, match=r"^matrix: its blanket ratio .* is 1.5 .* q = 1.2"):
        R.with_matrix(_vr(1.5, q=1.2), [[0.6, 0.4], [0.4, 0.6]])


def test_a_metric_row_accepts_its_matrix_only_where_the_victims_pair_is_the_farthest():
    """The engine takes every pair of rows as the victim's; a metric row's ``p`` covers inputs 0 and 1."""
    from jaxshuffle.randomizers.metric import metric_exponential, metric_exponential_log_matrix

    R.with_matrix(metric_exponential(1.0, 1.0, 1.0), np.exp(np.asarray(metric_exponential_log_matrix(1.0, 1.0, 1.0))))
    with pytest.raises(ValueError, match=r"^matrix: its largest probability ratio is 21.27"):
        R.with_matrix(metric_exponential(0.1, 5.0, 5.0),
                      np.exp(np.asarray(metric_exponential_log_matrix(0.1, 5.0, 5.0))))


BAD = [
    ("complex", [[0.5 + 1j, 0.5], [0.5, 0.5]], r"real numbers .*complex128"),
    ("object", np.array([[0.5, 0.5], [0.5, 0.5]], dtype=object), r"real numbers .*object"),
    ("bool", np.eye(2, dtype=bool), r"real numbers .*bool"),
    ("string", [["0.5", "0.5"], ["0.5", "0.5"]], r"real numbers .*<U3"),
    ("nan", [[np.nan, 0.5], [0.5, 0.5]], r"finite, got nan"),
    ("inf", [[np.inf, 0.5], [0.5, 0.5]], r"finite, got inf"),
    ("negative", [[-0.25, 1.25], [0.5, 0.5]], r">= 0, got -0.25"),
    ("row sum", [[0.5, 0.6], [0.5, 0.5]], r"sum to 1 within 1e-09 .*got 1.1"),
    ("1-D", [0.5, 0.5], r"2-D .*shape \(2,\)"),
    ("ragged", [[0.5, 0.5], [1.0]], r"2-D array of real numbers"),
    ("one row", [[0.5, 0.5]], r"at least 2 rows"),
]


@pytest.mark.parametrize("name,matrix,pattern", BAD, ids=[b[0] for b in BAD])
def test_with_matrix_refuses_what_is_not_a_real_stochastic_matrix(name, matrix, pattern):
    with pytest.raises(ValueError, match=r"^matrix: .*" + pattern) as err:
        R.with_matrix(R.general(1.0), matrix)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name,matrix,pattern", BAD[:9], ids=[b[0] for b in BAD[:9]])
def test_the_matrix_engine_refuses_them_too(name, matrix, pattern):
    for call in (lambda: bm.matrix_bounds(matrix, 1e3, 1e-6), lambda: bm.plan_matrix(matrix, 1e3, 1e-6),
                 lambda: bm.pair_forms(matrix)):
        with pytest.raises(ValueError, match=r"^matrix: .*" + pattern):
            call()


def test_rounding_of_the_parameters_is_within_the_slack():
    """``general(log p)`` rounds ``p`` by an ulp or so: the matrix whose ratio is ``p`` is accepted."""
    M = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    p = matrix_ratio(M)
    R.with_matrix(R.general(math.log(p)), M)
    R.with_matrix(_vr(p * (1.0 - 1e-13)), M)
    with pytest.raises(ValueError, match="largest probability ratio"):
        R.with_matrix(_vr(p * (1.0 - 1e-9)), M)


@st.composite
def stochastic(draw):
    K = draw(st.integers(2, 5))
    Kp = draw(st.integers(2, 5))
    cells = draw(st.lists(st.floats(0.05, 1.0), min_size=K * Kp, max_size=K * Kp))
    M = np.array(cells).reshape(K, Kp)
    return M / M.sum(axis=1, keepdims=True)


@settings(deadline=None, max_examples=25)
@given(stochastic(), st.floats(1e-6, 0.9), st.integers(1, 3), st.booleans())
def test_mismatched_parameters_are_refused_matched_accepted(M, shrink, extra, by_shape):
    p = matrix_ratio(M)
    K = M.shape[0]
    R.with_matrix(_vr(p), M)  # p (and beta, q) set from the matrix itself: accepted
    R.with_matrix(R.general(math.log(p)), M)
    if by_shape or p < 1.0 + 1e-6:  # a k-RR whose input count differs from the matrix's rows (no p < 1)
        with pytest.raises(ValueError, match=rf"^matrix: .*inputs \({K + extra}\), got {K} rows"):
            R.with_matrix(R.grr(math.log(p), K + extra), M)
    else:  # parameters whose p is too small for the matrix
        small = 1.0 + (p - 1.0) * (1.0 - shrink)
        with pytest.raises(ValueError, match=r"^matrix: its largest probability ratio is .* above the parameters' p"):
            R.with_matrix(_vr(small, q=p), M)
