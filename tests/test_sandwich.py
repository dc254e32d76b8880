"""Sandwich: lower <= exact <= certified upper on k-ary RR, and the paper's counterexample."""
import math

import numpy as np
import pytest

from jaxshuffle import exact
from jaxshuffle.exact import OrderViolation, grr_matrix, matrix_vr_parameters, sandwich
from jaxshuffle.exact import soundness as S


@pytest.mark.slow
def test_paper_counterexample_is_reported_not_certified():
    r = sandwich(grr_matrix(3, 1.0), 0, 1, 2, 0.01)
    assert r.exact == pytest.approx(0.969408, abs=1e-6)
    assert r.paper == pytest.approx(0.914553, abs=1e-6)
    assert not r.paper_certified and r.paper_below_exact
    assert r.upper >= 0.969408 and r.lower <= r.exact
    assert any("NOT an upper bound" in line for line in r.lines())


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("n", [2, 5, 12])
def test_order_holds_for_k_ary_rr(k, n):
    r = sandwich(grr_matrix(k, 1.0), 0, 1, n, 0.01)
    assert r.lower <= r.exact * (1 + 1e-9) + 1e-10 <= r.upper * (1 + 1e-9) + 2e-10
    if k == 2:  # binary RR is extremal: worst-case beta, the paper's pair is the clone pair, and the
        # certified upper (the clone constant r* of its matrix, docs/math.md 3.1) attains its value
        assert not r.paper_below_exact and r.upper <= r.paper * (1 + 1e-12)


@pytest.mark.slow
def test_paper_value_falls_below_exact_in_known_cases():
    below = [sandwich(grr_matrix(k, 1.0), 0, 1, n, 0.01).paper_below_exact for k, n in [(3, 2), (3, 5), (4, 2), (4, 5)]]
    assert all(below)


def test_matrix_parameters_of_rr():
    p, beta, q = matrix_vr_parameters(grr_matrix(3, 1.0))
    e = math.e
    assert p == pytest.approx(e, rel=1e-14) and q == p
    assert beta == pytest.approx((e - 1) / (e + 2), rel=1e-14)


def test_asymmetric_randomizer_has_no_theorem_51_lower_bound():
    m = np.array([[0.5, 0.1, 0.4], [0.2, 0.7, 0.1], [0.3, 0.4, 0.3]])
    r = sandwich(m, 0, 1, 4, 0.01)
    assert not r.lower_applies and r.lower == 0.0 and r.exact <= r.upper


def test_a_wrong_upper_bound_would_be_caught(monkeypatch):
    real = S.amplify

    def too_small(*args, **kwargs):
        res = real(*args, **kwargs)
        return res._replace(upper=res.upper * 0.5)

    monkeypatch.setattr(S, "amplify", too_small)
    with pytest.raises(OrderViolation):
        sandwich(grr_matrix(3, 1.0), 0, 1, 2, 0.01)
    assert exact.epsilon(grr_matrix(3, 1.0), 0, 1, [0], 0.01) == pytest.approx(0.969408, abs=1e-6)
