"""Inverse calibration (jaxshuffle.accountant.calibrate): the k-RR two-stage search against a slow
reference bisection on amplify, and calibrate_n under composition against independent compositions."""
from __future__ import annotations

import numpy as np
import pytest

from jaxshuffle import randomizers as R
from jaxshuffle.accountant import amplify, calibrate_eps0, calibrate_n, composed_epsilon
from jaxshuffle.accountant import calibrate as cal_module
from jaxshuffle.accountant.amplify import UpperSource
from jaxshuffle.accountant.calibrate import CalibrationStatus


def _reference_eps0(k, target, n, delta, rtol):
    """Slow reference: plain geometric bisection of amplify(...).upper (default upper_from), one
    point per call, from the bracket [0, 30]; returns (largest feasible probe, smallest infeasible)."""
    up = lambda e: float(amplify(R.grr(np.array([e]), k), n, delta, with_paper=False).upper[0])  # noqa: E731
    lo, hi = 0.0, 30.0
    while hi - lo > rtol * hi:
        mid = 0.5 * hi if lo == 0 else np.sqrt(lo * hi)
        lo, hi = (mid, hi) if up(mid) <= target else (lo, mid)
    return lo, hi


@pytest.mark.slow
def test_krr_calibration_matches_a_reference_bisection_with_few_blanket_probes(monkeypatch):
    """The two-stage k-RR search (two-count first, then the blanket pair under one shared plan,
    ITP steps) lands where a plain bisection on amplify's upper does, never above the target,
    with at most two blanket plans and a handful of blanket probes."""
    k, target, n, delta, rtol = 3, 0.5, 12, 0.01, 1e-4
    plans, blanket_calls = [], []
    span_plan, blanket_upper = cal_module._span_plan, cal_module.blanket_upper
    monkeypatch.setattr(cal_module, "_span_plan", lambda *a, **kw: plans.append(1) or span_plan(*a, **kw))
    monkeypatch.setattr(cal_module, "blanket_upper",
                        lambda *a, **kw: blanket_calls.append(1) or blanket_upper(*a, **kw))
    c = calibrate_eps0("grr", target, n, delta, k=k, rtol=rtol)
    value, over = float(c.value), float(c.over)
    assert int(c.status) == CalibrationStatus.CONVERGED and 0 < over - value <= rtol * over
    # re-certified from scratch: amplify alone at value is the reported upper, at or below the target
    assert float(c.upper) == float(amplify(R.grr(np.array([value]), k), n, delta, with_paper=False).upper[0])
    assert float(c.upper) <= target
    ref_lo, ref_hi = _reference_eps0(k, target, n, delta, rtol)
    assert abs(value - ref_lo) <= 2 * rtol * ref_hi  # the same boundary, within the two brackets
    assert len(plans) <= 2 and len(blanket_calls) <= 8  # one plan, widened at most once by the expansion
    # the blanket pair is the smaller bound here: the calibrated eps0 exceeds the two-count one
    wc = calibrate_eps0("grr", target, n, delta, k=k, rtol=rtol, upper_from="worst-case")
    assert value > float(wc.over)


@pytest.mark.slow
def test_calibrate_n_under_composition():
    """rounds=T: the returned n's T-fold composition is certified <= target by the T-round rule
    (composed_epsilon, called independently) and n - 1's is not; T rounds need more users than one.
    Without the blanket pair's PLD (``blanket_points=0``): each probe's n would build its own
    profile program; the eps0 test below covers the rule with it."""
    eps0, k, target, delta, T, points = 2.0, 10, 1.0, 1e-6, 4, 0
    c = calibrate_n("grr", target, delta, eps0=eps0, k=k, rounds=T, n_max=2000, blanket_points=points)
    assert int(c.status) == CalibrationStatus.CONVERGED
    n = float(c.value)
    assert float(c.over) == n - 1
    up = [float(composed_epsilon(R.grr(eps0, k), m, T, delta, blanket_points=points).upper[0, 0]) for m in (n, n - 1)]
    assert up[0] <= target < up[1]
    assert float(c.upper) == up[0]
    one = calibrate_n("grr", target, delta, eps0=eps0, k=k, upper_from="worst-case")
    assert float(one.value) < n
    with pytest.raises(ValueError, match="^rounds"):
        calibrate_n("grr", target, delta, eps0=eps0, k=k, rounds=1.5)


@pytest.mark.slow
def test_calibrate_eps0_over_rounds_follows_the_composed_epsilon_rule():
    """rounds=T: the eps0 returned is where composed_epsilon (the smallest certified T-round bound,
    here the blanket pair's PLD for k-RR) crosses the target: <= target at value, > target 0.1 %
    above it; and it is larger than the answer without the blanket pair's PLD (the rule is tighter)."""
    k, n, target, delta, T, points = 10, 2000, 1.0, 1e-6, 20, 32
    c = calibrate_eps0("grr", target, n, delta, k=k, rounds=T, blanket_points=points, rtol=1e-4)
    assert int(c.status) == CalibrationStatus.CONVERGED
    value = float(c.value)
    at = composed_epsilon(R.grr(value, k), n, T, delta, blanket_points=points)
    above = composed_epsilon(R.grr(value * 1.001, k), n, T, delta, blanket_points=points)
    assert float(at.upper[0, 0]) <= target < float(above.upper[0, 0])
    assert float(c.upper) == float(at.upper[0, 0])  # the rule's own value, recomputed at the answer
    assert at.upper_source[0, 0] == "blanket PLD"
    # without the blanket pair's PLD the rule is above the target at value, so its own calibration (the
    # rule is nondecreasing in eps0) answers a smaller eps0: the blanket PLD buys the larger one
    without = composed_epsilon(R.grr(value, k), n, T, delta, blanket_points=0)
    assert float(without.upper[0, 0]) > target and without.upper_source[0, 0] != "blanket PLD"
    with pytest.raises(ValueError, match="^blanket_points"):
        calibrate_eps0("grr", target, n, delta, k=k, rounds=T, blanket_points=1)


@pytest.mark.slow
def test_krr_calibration_above_the_blanket_cost_cap_calibrates_the_worst_case_pair(monkeypatch):
    """Above amplify's automatic cost cap (k-RR at n = 1e10, eps0 <= 1 is: checked first), the
    calibration, like amplify, runs no blanket probe, and its answer is re-certified by amplify, whose
    upper there is the worst-case pair's. The calibration runs at n = 1e5 under a cap of 0 cells,
    above which every point lies (the rule is the same; n = 1e10's two-count windows took a minute)."""
    import jaxshuffle.blanket as bl
    k, target, n, delta = 10, 0.01, 1e5, 1e-8
    assert np.all(bl.point_cells(np.array([0.1, 0.5, 1.0]), np.full(3, 10.0), np.full(3, 1e10),
                                 np.full(3, 1e-8)) > bl.AUTO_MAX_CELLS)
    monkeypatch.setattr(bl, "AUTO_MAX_CELLS", 0)
    blanket_calls = []
    blanket_upper = cal_module.blanket_upper
    monkeypatch.setattr(cal_module, "blanket_upper",
                        lambda *a, **kw: blanket_calls.append(1) or blanket_upper(*a, **kw))
    c = calibrate_eps0("grr", target, n, delta, k=k)
    assert not blanket_calls
    assert int(c.status) == CalibrationStatus.CONVERGED and float(c.upper) <= target
    rep = amplify(R.grr(np.array([float(c.value)]), k), n, delta, with_paper=False)
    assert float(c.upper) == float(rep.upper[0]) == float(rep.worst_case[0])
    assert int(rep.upper_source[0]) != UpperSource.BLANKET
