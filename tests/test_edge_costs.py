"""k-ary RR points with essentially no blanket among the others skip the blanket engine (a cost rule, never a
soundness one): amplify and calibrate_eps0 answer with the worst-case pair there, and say so."""
import numpy as np
import pytest

import jaxshuffle as js
from jaxshuffle import randomizers as R
from jaxshuffle.accountant import mechanism
from jaxshuffle.accountant.amplify import UpperSource
from jaxshuffle.engine import blanket as bl


def _expected_blanket(eps0, k, n):
    return n * k / (np.exp(eps0) + k - 1.0)  # n k / (e^eps0 + k - 1): the others' expected blanket messages


@pytest.mark.slow
def test_amplify_skips_the_blanket_engine_where_no_blanket_is_expected(monkeypatch):
    """grr(50, 10) at n = 1e4 expects about 2e-17 blanket messages: no blanket lane runs (it took half a
    minute and gave eps0 itself), upper is the worst-case pair's and upper_source says so; a point in the
    same batch with blanket messages to spare still gets the blanket pair."""
    assert _expected_blanket(50.0, 10, 1e4) < mechanism.MIN_BLANKET_MESSAGES <= _expected_blanket(1.0, 10, 1e4)
    seen = []
    real = bl.krr_bounds
    monkeypatch.setattr(bl, "krr_bounds", lambda e, *a, **kw: seen.append(np.array(e)) or real(e, *a, **kw))
    rep = js.amplify(R.grr(np.array([50.0, 1.0]), 10), 1e4, 1e-6, with_paper=False)
    assert [list(s) for s in seen] == [[1.0]]
    assert int(rep.upper_source[0]) == UpperSource.WORST_CASE and float(rep.upper[0]) == float(rep.worst_case[0])
    assert float(rep.upper[0]) <= 50.0 and np.isinf(float(rep.blanket[0]))
    assert int(rep.upper_source[1]) == UpperSource.BLANKET


def test_blanket_by_name_still_runs_it():
    """upper_from='blanket' asks for the blanket pair by name: the cost rule does not apply."""
    rep = js.amplify(R.grr(25.0, 3), 20, 1e-3, with_paper=False, upper_from="blanket", with_lower=False)
    assert _expected_blanket(25.0, 3, 20) < mechanism.MIN_BLANKET_MESSAGES
    assert int(rep.upper_source) == UpperSource.BLANKET and np.isfinite(float(rep.upper))


@pytest.mark.parametrize("sample_rate", [1.0])
def test_calibration_capped_far_above_the_blanket_needs_no_blanket_probe(monkeypatch, sample_rate):
    """A target no eps0 <= eps0_max misses (100 at n = 1e4): every k-RR probe above about eps0 = 18 expects
    no blanket message, so the calibration runs no blanket evaluation there and ends CAPPED at eps0_max,
    its answer re-certified by amplify."""
    from jaxshuffle.accountant import calibrate as cal

    probes = []
    real = cal.blanket_upper
    monkeypatch.setattr(cal, "blanket_upper", lambda e, *a, **kw: probes.append(np.array(e)) or real(e, *a, **kw))
    c = cal.calibrate_eps0("grr", 100.0, 1e4, 1e-6, k=10, eps0_max=30.0, sample_rate=sample_rate)
    assert int(c.status) == cal.CalibrationStatus.CAPPED and float(c.value) == 30.0
    assert all(_expected_blanket(p, 10, 1e4).min() >= mechanism.MIN_BLANKET_MESSAGES for p in probes)
    assert float(c.upper) == float(js.amplify(R.grr(30.0, 10), 1e4, 1e-6, with_paper=False).upper) <= 100.0
