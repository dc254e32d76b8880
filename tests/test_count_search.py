"""calibrate_n's integer search (jaxshuffle.accountant.count_search.search_n) on made-up tiers: which
probes it asks for at the search limit, counted, with no engine run (fast); and the T-round tiers' order
on the real bounds (slow)."""
from __future__ import annotations

import numpy as np
import pytest

from jaxshuffle import randomizers as R
from jaxshuffle.accountant.count_search import NLanes, search_n


def _lanes(targets):
    t = np.asarray(targets, np.float64)
    params = R.grr(np.ones(t.size), 10)
    return NLanes(params, np.full(t.size, 1e-6), t)


def _tiers(calls):
    """Two tiers of ``eps(n) = c / sqrt(n)``: the cheap one 10 % above the rule (a looser upper bound)."""

    def tier(c, name):
        def at(x, active):
            calls.append((name, np.asarray(x, np.float64).copy(), np.asarray(active).copy()))
            return c / np.sqrt(np.asarray(x, np.float64))
        return at

    rule = tier(1.0, "rule")
    return [lambda hi: tier(1.1, "cheap"), lambda hi: rule], rule


def test_a_lower_bound_above_the_target_at_the_limit_refuses_without_the_rule():
    """Lane 0: the floor (a certified lower bound, here 0.95 of the rule) exceeds the target at the limit:
    unattainable with no rule probe, ``upper`` the cheap tier's bound there. Lane 1: the floor is below the
    target but the cheap tier misses: the rule decides there (unattainable with the rule's value). Lane 2:
    feasible at the limit, answered by the rule's own probes."""
    limit = 1e4
    calls: list = []
    floors: list = []

    def floor(x, active):
        floors.append(np.asarray(active).copy())
        return 0.95 / np.sqrt(np.asarray(x, np.float64))

    tiers, rule = _tiers(calls)
    # at the limit: floor 0.0095, rule 0.01, cheap tier 0.011
    lanes = _lanes([0.009, 0.0099, 0.02])
    found = search_n(tiers, rule, lanes, limit, 100, floor=floor)
    assert found.unattainable.tolist() == [True, True, False]
    assert len(floors) == 1 and floors[0].tolist() == [True, True, False]  # asked only where the cheap tier missed
    at_limit = [c for c in calls if c[0] == "rule" and np.all(c[1][c[2]] == limit)]
    assert len(at_limit) == 1 and at_limit[0][2].tolist() == [False, True, False]  # not lane 0
    assert found.upper[0] == 1.1 / np.sqrt(limit) and found.upper[1] == 1.0 / np.sqrt(limit)
    assert found.value[2] == np.ceil((1.0 / 0.02) ** 2) and found.done[2]  # the rule's smallest count: 2500
    assert found.probes == len(calls) + 1  # every tier probe and the floor, each counted once


def test_without_a_floor_the_rule_decides_at_the_limit():
    calls: list = []
    tiers, rule = _tiers(calls)
    found = search_n(tiers, rule, _lanes([0.009]), 1e4, 100)
    assert found.unattainable.tolist() == [True] and found.upper[0] == 1.0 / np.sqrt(1e4)
    assert [c[0] for c in calls] == ["cheap", "rule"] and found.probes == 2


def test_a_floor_equal_to_the_target_does_not_refuse():
    """Only a lower bound strictly above the target proves the rule misses it (feasible is ``<= target``)."""
    calls: list = []
    tiers, rule = _tiers(calls)
    found = search_n(tiers, rule, _lanes([0.01]), 1e4, 100, floor=lambda x, active: np.full(np.shape(x), 0.01))
    assert not found.unattainable[0] and found.value[0] == 1e4  # the rule meets it exactly at the limit
    assert [c[0] for c in calls][:2] == ["cheap", "rule"]


def test_quick_probes_accepts_the_cheap_calls_only():
    """calibrate_n's block of quick programs (count_search.quick_probes) accepts a two-count search of at
    most QUICK_SEARCH_COUNTS window counts x lanes and a blanket call of at most QUICK_BLANKET_CELLS cells;
    nothing else (a wide window's quick program evaluates 6-8x slower: its compilation saves less)."""
    from jaxshuffle import _programs
    from jaxshuffle.accountant import count_search as cs
    from jaxshuffle.engine.blanket import BlanketPlan
    from jaxshuffle.engine.two_count.plan import Plan

    def search(window, lanes):
        return cs._cheap_program("epsilon-search", (Plan(window, 512, 2, True, True), 1e-6, 60), [np.zeros(lanes)])

    def blanket(window, lines, lanes, max_step=7):
        return cs._cheap_program("blanket-lanes", (BlanketPlan(window, 64, lines, max_step, 8), 1e-6, 40),
                                 [np.zeros(lanes)])

    assert search(1024, 8) and search(cs.QUICK_SEARCH_COUNTS, 1)
    assert not search(131072, 2) and not search(cs.QUICK_SEARCH_COUNTS, 2)
    assert blanket(512, 24, 1) and blanket(256, 64, 8)  # calibrate_n("grr", 0.1, 1e-6, eps0=1, k=10)'s calls
    assert not blanket(16384, 12, 2) and not blanket(256, 64, 8, max_step=30000)
    assert not cs._cheap_program("another", (None,), [np.zeros(1)])
    with cs.quick_probes():
        assert _programs._scoped_quick("epsilon-search", (Plan(1024, 512, 2, True, True), 1e-6, 60), [np.zeros(8)])
    assert not _programs._scoped_quick("epsilon-search", (Plan(1024, 512, 2, True, True), 1e-6, 60), [np.zeros(8)])


@pytest.mark.slow
@pytest.mark.parametrize("eps0, k, n, rounds", [(1.0, 10, 3000, 10), (4.0, 3, 200, 4), (0.5, 50, 2, 2)])
def test_the_t_round_tiers_are_ordered_loosest_first(eps0, k, n, rounds):
    """Each tier of calibrate_n over T rounds is a certified bound at least the next one's, so a count a
    looser tier accepts the rule accepts: the two-count rules' basic/advanced composition >= the worst-case
    pair's bounds with the two-count one-round bound (two_count_rules_upper) >= the rule (composed_upper);
    each value checked against composed_epsilon's own columns, computed independently."""
    from jaxshuffle.accountant import composed_epsilon
    from jaxshuffle.accountant.count_search import round_tiers
    from jaxshuffle.accountant.rounds import composed_upper, two_count_rules_upper

    delta = 1e-6
    lanes = NLanes(R.grr(np.array([eps0]), k), np.array([delta]), np.array([0.1]))
    tiers, rule, _ = round_tiers(lanes, rounds, None, 16, 1.0, 1e-6)
    x, on = np.array([float(n)]), np.array([True])
    values = [float(t(x)(x, on)[0]) for t in tiers]
    assert len(values) == 3 and values[0] >= values[1] >= values[2]
    full = composed_epsilon(R.grr(eps0, k), n, rounds, delta, blanket_points=16)
    assert values[2] == composed_upper(R.grr(eps0, k), n, rounds, delta, blanket_points=16) == float(full.upper[0, 0])
    middle = two_count_rules_upper(R.grr(eps0, k), n, rounds, delta)
    assert values[1] == middle
    # the same worst-case PLD as the rule; basic and advanced from a one-round bound never below the rule's
    assert middle >= min(float(full.pld[0, 0]), float(full.basic[0, 0]), float(full.advanced[0, 0]))
    assert middle <= float(full.pld[0, 0])


@pytest.mark.slow
@pytest.mark.parametrize("eps0, k, n, rounds", [(1.0, 10, 3000, 10), (1.0, 10, 3000, 1), (6.0, 3, 50, 3),
                                                (0.5, 50, 2, 2), (2.0, 4, 400, 200)])
def test_composed_upper_is_the_rule_whether_or_not_it_composes_the_one_round_bound(monkeypatch, eps0, k, n, rounds):
    """composed_upper (below unset) leaves basic and advanced composition uncomputed where a certified
    lower bound on them (krr_epsilon_floor's one-round lower bound, composed) exceeds the PLDs' value; its
    value is composed_epsilon's upper exactly either way, and where it skips them they are indeed above."""
    from jaxshuffle.accountant import composed_epsilon
    from jaxshuffle.accountant import rounds as rounds_mod

    calls = []
    real = rounds_mod._with_compositions
    monkeypatch.setattr(rounds_mod, "_with_compositions", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    value = rounds_mod.composed_upper(R.grr(eps0, k), n, rounds, 1e-6, blanket_points=16)
    skipped = not calls
    full = composed_epsilon(R.grr(eps0, k), n, rounds, 1e-6, blanket_points=16)
    assert value == float(full.upper[0, 0])
    if skipped:
        assert min(float(full.basic[0, 0]), float(full.advanced[0, 0])) > value
        floor = rounds_mod.krr_epsilon_floor(R.grr(eps0, k), n, np.array([1e-6 / rounds]))
        assert 0 < float(floor[0]) <= float(full.basic[0, 0]) / rounds  # a lower bound on the one-round bound
    if (eps0, k, n, rounds) == (1.0, 10, 3000, 10):
        assert skipped  # the typical case: the PLDs win by far
