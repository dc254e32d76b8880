"""jaxshuffle.interop: a shuffle event and a replace-one PLD accountant for dp_accounting."""

import math

import numpy as np
import pytest

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting import NeighboringRelation, dp_event  # noqa: E402
from dp_accounting import privacy_accountant_test as stock  # noqa: E402
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402
from dp_accounting.pld import privacy_loss_distribution as pldm  # noqa: E402

import jaxshuffle.randomizers as R  # noqa: E402
from jaxshuffle.accountant.compose import compose  # noqa: E402
from jaxshuffle.accountant.pld import shuffled_round  # noqa: E402
from jaxshuffle.interop import (  # noqa: E402
    LocalRandomizerDpEvent,
    ShuffledDpEvent,
    ShufflePLDAccountant,
    from_dp_accounting,
    krr_eps0,
    to_dp_accounting,
)

ONE = NeighboringRelation.REPLACE_ONE
K = 10
NOISE = K / (K + math.e - 1)  # dp_accounting's randomized response at eps0 = 1
EVENT = ShuffledDpEvent(dp_event.RandomizedResponseDpEvent(NOISE, num_buckets=K), num_users=10_000)


def gaussians_alone(count=10, sigma=20.0, relation=ONE):
    acc = pld_privacy_accountant.PLDAccountant(relation)
    acc.compose(dp_event.GaussianDpEvent(sigma), count)
    return acc.get_epsilon(1e-6)


def test_the_randomized_response_event_is_k_rr_at_its_local_epsilon():
    assert krr_eps0(NOISE, K) == pytest.approx(1.0, rel=1e-15)
    # direct: P(true bucket) / P(another) = (1 - p + p/k) / (p/k)
    p = 0.3
    assert krr_eps0(p, 4) == pytest.approx(math.log((1 - p + p / 4) / (p / 4)), rel=1e-14)
    spec = EVENT.to_shuffled_round()
    assert (spec.randomizer, spec.options["k"], spec.n) == ("grr", 10.0, 10_000)


@pytest.mark.slow
def test_ten_rounds_beside_ten_replace_one_gaussians_through_the_documented_path():
    """The worst-case pair (blanket_points=0): above the Gaussians alone, below 1.38, far above 0.670."""
    acc = ShufflePLDAccountant(blanket_points=0)
    for _ in range(10):
        acc.compose(EVENT)
        acc.compose(dp_event.GaussianDpEvent(20))
    eps = acc.get_epsilon(1e-6)
    assert gaussians_alone() < eps <= 1.38
    assert eps > 2 * gaussians_alone(relation=NeighboringRelation.ADD_OR_REMOVE_ONE)
    # nested events give the same total; so does jaxshuffle's own composition of the same rounds
    nested = ShufflePLDAccountant(blanket_points=0)
    nested.compose(dp_event.SelfComposedDpEvent(dp_event.ComposedDpEvent([EVENT, dp_event.GaussianDpEvent(20)]), 10))
    assert nested.get_epsilon(1e-6) == eps
    r = shuffled_round(R.grr(krr_eps0(NOISE, K), K), 10_000, discretization=1e-4)
    g = pldm.from_gaussian_mechanism(20.0, value_discretization_interval=1e-4, neighboring_relation=ONE)
    g10 = from_dp_accounting(g.self_compose(10), 1e-4, neighboring_relation=ONE)
    assert eps == float(compose([(r, 10), (g10, 1)], 1e-6).upper)


@pytest.mark.slow
def test_must_show_pipeline_with_the_default_blanket_pair():
    acc = ShufflePLDAccountant()
    acc.compose(dp_event.ComposedDpEvent([EVENT, dp_event.GaussianDpEvent(20)]), 10)
    eps = acc.get_epsilon(1e-6)
    worst = ShufflePLDAccountant(blanket_points=0).compose(
        dp_event.SelfComposedDpEvent(dp_event.ComposedDpEvent([EVENT, dp_event.GaussianDpEvent(20)]), 10))
    assert gaussians_alone() < eps <= 1.379 and eps < worst.get_epsilon(1e-6)


@pytest.mark.slow
def test_shuffle_alone_is_never_below_jaxshuffles_own_composition():
    acc = ShufflePLDAccountant(blanket_points=0)
    acc.compose(EVENT, 25)
    r = shuffled_round(R.grr(krr_eps0(NOISE, K), K), 10_000, discretization=1e-4)
    for d in (1e-9, 1e-6, 1e-3):
        assert acc.get_epsilon(d) >= float(compose([(r, 25)], d).upper)
    assert acc.get_delta(acc.get_epsilon(1e-6)) <= 1e-6


def test_add_remove_is_refused_where_it_would_undercount():
    r = shuffled_round(R.grr(1.0, 10), 10_000, discretization=1e-4)
    with pytest.raises(ValueError, match="neighboring_relation: add_or_remove_one asked, but the round is a "
                                         "replace_one guarantee"):
        to_dp_accounting(r, neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE)
    with pytest.raises(ValueError, match="neighboring_relation: required"):
        to_dp_accounting(r)
    exported = to_dp_accounting(r, neighboring_relation=ONE)
    assert exported.neighboring_relation == "replace_one"
    gauss = pldm.from_gaussian_mechanism(20.0, value_discretization_interval=1e-4)  # add/remove by default
    g = from_dp_accounting(gauss, 1e-4, neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE)
    with pytest.raises(ValueError, match="relation is add_or_remove_one, rounds\\[0\\]'s is replace_one"):
        compose([(r, 10), (g, 10)], 1e-6)
    with pytest.raises(ValueError, match="neighboring_relation: required"):
        from_dp_accounting(gauss, 1e-4)
    with pytest.raises(ValueError, match="add_or_remove_one given, but pessimistic was exported as a replace_one"):
        from_dp_accounting(exported, 1e-4, neighboring_relation="add_or_remove_one")
    with pytest.raises(ValueError, match="neighboring_relation: must be one of"):
        from_dp_accounting(gauss, 1e-4, neighboring_relation="replace_special")


@pytest.mark.parametrize("event", [
    EVENT,
    ShuffledDpEvent(LocalRandomizerDpEvent("subset-selection", {"eps0": 1.0, "d": 100.0, "k": 10.0}), num_users=5_000),
])
def test_named_tuple_round_trip(event):
    again = dp_event.DpEvent.from_named_tuple(event.to_named_tuple())
    assert again == event and type(again) is ShuffledDpEvent
    assert again.to_shuffled_round() == event.to_shuffled_round()
    with pytest.raises(TypeError):
        ShuffledDpEvent(event.event, event.num_users)  # num_users is keyword only


def test_what_is_supported():
    acc = ShufflePLDAccountant()
    assert acc.neighboring_relation == ONE
    assert acc.supports(EVENT)
    assert acc.supports(dp_event.ComposedDpEvent([EVENT, dp_event.GaussianDpEvent(3.0)]))
    assert acc.supports(dp_event.SelfComposedDpEvent(EVENT, 5))
    assert not acc.supports(dp_event.LaplaceDpEvent(1.0))  # dp_accounting refuses it under replace-one
    bad = ShuffledDpEvent(dp_event.GaussianDpEvent(1.0), num_users=100)
    err = acc._maybe_compose(bad, 1, False)
    assert err.invalid_event is bad and "RandomizedResponseDpEvent" in err.error_message
    assert not acc.supports(ShuffledDpEvent(dp_event.RandomizedResponseDpEvent(0.5, 4), num_users=1))
    assert not acc.supports(ShuffledDpEvent(LocalRandomizerDpEvent("grr", {"eps0": 1.0}), num_users=100))  # no k
    sampled_multi = ShuffledDpEvent(LocalRandomizerDpEvent("balcer-cheu", {"coin": 0.5, "blanket_per_user": 3}),
                                    num_users=100, sample_rate=0.5)
    err = acc._maybe_compose(sampled_multi, 1, False)
    assert err is not None and "certified for single-message randomizers" in err.error_message


def test_the_accountant_refuses_another_relation_and_a_bad_grid():
    with pytest.raises(ValueError, match="neighboring_relation: ShufflePLDAccountant is fixed to REPLACE_ONE"):
        ShufflePLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE)
    with pytest.raises(ValueError, match=r"value_discretization_interval: must lie in \[1e-9, 1\], got 0"):
        ShufflePLDAccountant(0)
    with pytest.raises(ValueError, match="blanket_points"):
        ShufflePLDAccountant(blanket_points=-1)


def test_trivial_and_non_private_local_randomizers():
    acc = ShufflePLDAccountant()
    acc.compose(ShuffledDpEvent(dp_event.RandomizedResponseDpEvent(1.0, 4), num_users=100))
    acc.compose(ShuffledDpEvent(dp_event.RandomizedResponseDpEvent(0.3, 1), num_users=100))
    assert acc.get_epsilon(1e-6) == 0.0
    acc.compose(ShuffledDpEvent(dp_event.RandomizedResponseDpEvent(0.0, 4), num_users=100))
    assert acc.get_epsilon(1e-6) == math.inf and acc.get_delta(10.0) == 1


class TestStockAccountantInterface(stock.PrivacyAccountantTest):
    """dp_accounting's own tests of the PrivacyAccountant interface, run on this accountant."""

    def _make_test_accountants(self):
        return [ShufflePLDAccountant()]


def test_the_stock_interface_tests_run_here():
    names = [n for n in dir(TestStockAccountantInterface) if n.startswith("test_")]
    for stem in ("test_no_events", "test_no_op", "test_non_private", "test_unsupported"):
        assert any(n.startswith(stem) for n in names), stem
    assert np.all([callable(getattr(TestStockAccountantInterface, n)) for n in names])
