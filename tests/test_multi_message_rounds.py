"""Rounds of a multi-message protocol (p = inf: the pair's v = 0, an infinite privacy loss with positive
probability) have no privacy-loss distribution; composed_epsilon composes their certified one-round bound by
basic and advanced composition (valid for any (eps, delta)-DP rounds), and shuffled_round says why it refuses."""
import json

import numpy as np
import pytest

import jaxshuffle as js
from jaxshuffle import randomizers as R
from jaxshuffle.accountant.rounds import advanced_composition, basic_composition, composed_epsilon


def test_multi_message_rounds_compose_by_basic_and_advanced_composition():
    b = R.balcer_cheu(0.5, 3)
    T, delta, n = np.array([1, 10, 100]), 1e-6, 100
    c = composed_epsilon(b, n, T, delta)
    one = lambda d: float(js.amplify(b, n, d, with_paper=False, with_lower=False).upper)  # noqa: E731
    basic = np.array([t * one(delta / t) for t in T])
    advanced = np.minimum([float(advanced_composition(one(delta / (2 * t)), t, delta)) for t in T], basic)
    np.testing.assert_array_equal(c.basic[:, 0], basic_composition(np.array([one(delta / t) for t in T]), T))
    np.testing.assert_allclose(c.upper[:, 0], np.minimum(basic, advanced), rtol=0)
    assert np.all(np.isinf(c.pld)) and np.all(np.isnan(c.lower)) and np.all(np.isinf(c.blanket_pld))
    assert float(c.upper[0, 0]) == one(delta)  # one round: amplify's certified bound itself
    assert set(c.upper_source.ravel()) <= {"basic", "advanced"}


def test_shuffled_round_refuses_p_inf_naming_the_randomizer():
    with pytest.raises(ValueError, match=r"^randomizer: p = inf .*no privacy-loss distribution.*composed_epsilon"):
        js.shuffled_round(R.balcer_cheu(0.5, 3), 100)


def test_compose_command_prints_and_writes_json_for_multi_message_rounds(capsys):
    from jaxshuffle import cli

    argv = ["compose", "--randomizer", "balcer-cheu", "--coin", "0.5", "--blanket_per_user", "3", "--n", "100",
            "--rounds", "1,10", "--delta", "1e-6"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "basic" in out and "Traceback" not in out
    assert cli.main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["rounds"] for r in rows] == [1, 10] and all(r["pld"] is None and r["discretization"] is None
                                                          for r in rows)
    assert rows[0]["upper"] == float(js.amplify(R.balcer_cheu(0.5, 3), 100, 1e-6, with_paper=False,
                                                with_lower=False).upper)
