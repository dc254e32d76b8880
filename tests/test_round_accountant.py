"""The round-by-round accountant: same answers as the functional core, a faithful state, no surprises."""

import json
import math

import numpy as np
import pytest

from jaxshuffle import randomizers as R
from jaxshuffle.accountant import round_accountant as ra
from jaxshuffle.accountant.compose import compose, compose_delta
from jaxshuffle.accountant.pld import ADD_OR_REMOVE_ONE, shuffled_round
from jaxshuffle.accountant.round_accountant import RoundAccountant, ShuffledRound

GRID = 1e-4
A = ShuffledRound("grr", {"eps0": 1.0, "k": 10}, 10_000)
B = ShuffledRound("general", {"eps0": 2.0}, 5_000)


def upper_only(r):
    return r._replace(lower_forward=None, lower_backward=None)


def test_answers_are_the_functional_cores_on_the_same_rounds():
    acc = RoundAccountant(GRID, blanket_points=0)
    acc.compose(A, 3).compose(B).compose(A, 2)
    assert acc.rounds == [(A._replace(options={"eps0": 1.0, "k": 10.0}), 5), (B._replace(options={"eps0": 2.0}), 1)]
    a = upper_only(shuffled_round(R.grr(1.0, 10), 10_000, discretization=GRID))
    b = upper_only(shuffled_round(R.general(2.0), 5_000, discretization=GRID))
    assert acc.get_epsilon(1e-6) == float(compose([(a, 5), (b, 1)], 1e-6).upper)
    assert acc.get_delta(0.5) == float(compose_delta([(a, 5), (b, 1)], 0.5))


def test_each_distinct_round_is_built_once(monkeypatch):
    built = []
    real = ra.shuffled_round
    monkeypatch.setattr(ra, "shuffled_round", lambda *a, **k: built.append(a) or real(*a, **k))
    acc = RoundAccountant(GRID, blanket_points=0)
    for _ in range(4):
        acc.compose(A)
        acc.get_epsilon(1e-6)
    acc.would_exceed(B, 10.0, 1e-6)
    acc.compose(B)
    assert len(built) == 2 and acc.rounds[0][1] == 4


@pytest.mark.slow
def test_state_dict_round_trip_through_json_gives_identical_answers():
    import jaxshuffle as js
    from jaxshuffle.accountant.pld import round_pld

    other = round_pld(js.two_count_pair(0.7, 0.3, 0.0, 0.2, 0.35), 50, discretization=GRID)  # asymmetric
    acc = RoundAccountant(GRID, blanket_points=0).compose(A, 7).compose(other, 2)
    state = json.loads(json.dumps(acc.state_dict()))
    again = RoundAccountant()
    again.load_state_dict(state)
    for d in (1e-9, 1e-6, 1e-3):
        assert again.get_epsilon(d) == acc.get_epsilon(d)
    assert again.get_delta(0.3) == acc.get_delta(0.3)
    assert [c for _, c in again.rounds] == [7, 2]
    with pytest.raises(ValueError, match="state: expected a dict with format"):
        again.load_state_dict({"format": "something else"})


def test_would_exceed_agrees_with_composing_and_asking_and_leaves_the_ledger():
    acc = RoundAccountant(GRID, blanket_points=0).compose(A, 5)
    before = acc.get_epsilon(1e-6)
    after = RoundAccountant(GRID, blanket_points=0).compose(A, 8).get_epsilon(1e-6)
    assert acc.would_exceed(A, before, 1e-6, count=3) is (after > before)
    assert acc.would_exceed(A, after, 1e-6, count=3) is False
    assert acc.would_exceed(A, math.nextafter(after, 0), 1e-6, count=3) is True
    assert acc.get_epsilon(1e-6) == before and acc.rounds[0][1] == 5


def test_delta_at_the_epsilon_it_answers_is_within_the_target():
    acc = RoundAccountant(GRID, blanket_points=0).compose(A, 20)
    for d in np.geomspace(1e-10, 1e-2, 5):
        assert acc.get_delta(acc.get_epsilon(d)) <= d
    assert acc.get_delta(math.inf) <= acc.get_delta(5.0) <= acc.get_delta(0.1) <= acc.get_delta(-1.0) == 1.0


def test_empty_and_degenerate_targets():
    acc = RoundAccountant(blanket_points=0)
    assert acc.get_epsilon(1e-6) == 0.0 and acc.get_delta(0.0) == 0.0 and acc.discretization is None
    acc.compose(A)
    assert acc.get_epsilon(1.0) == 0.0 and acc.get_epsilon(0.0) == math.inf


@pytest.mark.slow
def test_the_blanket_pair_is_used_for_k_rr_by_default_and_is_tighter():
    default = RoundAccountant(GRID).compose(A, 10)
    worst = RoundAccountant(GRID, blanket_points=0).compose(A, 10)
    assert default.round_plds()[0][0].source.startswith("blanket")
    assert default.get_epsilon(1e-6) < worst.get_epsilon(1e-6)


@pytest.mark.parametrize("call,pattern", [
    (lambda a: a.compose(A, 0), "count: must be an integer >= 1"),
    (lambda a: a.compose(A, 1.5), "count: must be an integer >= 1"),
    (lambda a: a.compose(ShuffledRound("nope", {}, 10)), "randomizer: unknown name 'nope'"),
    (lambda a: a.compose(ShuffledRound("grr", {"eps0": 1.0}, 10)), "k: required option"),
    (lambda a: a.compose(ShuffledRound("grr", {"eps0": 1.0, "k": 4}, 1)),
     r"round.n: must be an integer in \[2, 1e12\]"),
    (lambda a: a.compose("grr"), "round: expected a ShuffledRound"),
    (lambda a: a.get_epsilon(2.0), r"delta: must lie in \[0, 1\], got 2.0"),
    (lambda a: a.get_delta(float("nan")), "epsilon: must be a number"),
    (lambda a: a.would_exceed(A, 1.0, 0.0), r"delta: must lie in \(0, 1\)"),
    (lambda a: a.would_exceed(A, float("nan"), 1e-6), "max_epsilon: must be a number >= 0"),
    (lambda a: a.load_state_dict({"format": ra.STATE_FORMAT, "rounds": []}), "state: missing discretization"),
    (lambda a: RoundAccountant(0.0), r"discretization: must lie in \[1e-9, 1\]"),
    (lambda a: RoundAccountant(accuracy=1.0), r"accuracy: must lie in \(0, 0.1\]"),
    (lambda a: RoundAccountant(blanket_points=1), "blanket_points"),
])
def test_bad_input_names_the_parameter(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call(RoundAccountant(GRID, blanket_points=0))


def test_a_round_on_another_grid_or_relation_is_refused():
    acc = RoundAccountant(GRID, blanket_points=0).compose(A)
    with pytest.raises(ValueError, match="discretization 0.001 differs from the accountant's 0.0001"):
        acc.compose(shuffled_round(R.grr(1.0, 4), 100, discretization=1e-3))
    other = shuffled_round(R.grr(1.0, 4), 100, discretization=GRID)._replace(neighboring_relation=ADD_OR_REMOVE_ONE)
    first = RoundAccountant(GRID, blanket_points=0).compose(other)
    with pytest.raises(ValueError, match="neighbouring relation is replace_one, the accountant's is add_or_remove_one"):
        first.compose(A)  # a shuffled round after an add/remove one
    with pytest.raises(ValueError, match="neighbouring relation is add_or_remove_one, the accountant's is replace_one"):
        acc.compose(other)
    assert acc.rounds == [(A._replace(options={"eps0": 1.0, "k": 10.0}), 1)]
