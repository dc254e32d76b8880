"""Clients sampled per round: the certified bound against exact enumeration of the subsampled shuffled mechanism.

The subsampled mechanism is the shuffled ``R_g = [g R | (1 - g) 1]`` (a K x (K + 1) matrix whose last
column is "did not take part"): the multiset of the participants' messages and the full multiset of
R_g's outputs determine each other when n is known. Enumerated here with jaxshuffle.exact (the
engine-independent histogram enumeration), every dataset of the others.
"""

import itertools
import math

import numpy as np
import pytest

import jaxshuffle as js
import jaxshuffle.randomizers as R
from jaxshuffle import exact
from jaxshuffle.accountant.subsampling import check_sample_rate, subsampled_epsilon, subsampled_krr_k


def krr(eps0, k):
    e = math.exp(eps0)
    return (np.ones((k, k)) + (e - 1) * np.eye(k)) / (e + k - 1)


def subsampled(matrix, g):
    return np.hstack([g * matrix, np.full((matrix.shape[0], 1), 1 - g)])


def exact_epsilon(matrix, others, delta):
    """Smallest eps with max(delta(P||Q), delta(Q||P)) <= delta, inputs 0 vs 1, by bisection on the exact pmfs."""
    log_p, log_q = exact.histogram_log_pmfs(matrix, 0, 1, list(others))
    P, Q = np.exp(log_p), np.exp(log_q)

    def d(e):
        t = math.exp(e)
        return max(np.sum(np.maximum(P - t * Q, 0)), np.sum(np.maximum(Q - t * P, 0)))

    if d(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 60.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if d(mid) <= delta else (mid, hi)
    return hi


def test_the_counterexample_table():
    """binary RR at eps0 = 1, g = 0.5, n = 2, delta = 0.01: exact 0.922207 (the other user holds x0); the
    wrong two-count pair (w = 1 - g) is below it, the certified bound is not."""
    eps0, g, n, delta = 1.0, 0.5, 2, 1e-2
    worst = max(exact_epsilon(subsampled(krr(eps0, 2), g), others, delta) for others in ([0], [1]))
    assert worst == pytest.approx(math.log(math.e - delta * (math.e + 1) ** 2 / (g * g * math.e)), abs=1e-9)
    assert worst == pytest.approx(0.922207, abs=1e-6)
    p = math.e
    wrong = js.epsilon(js.two_count_pair(g * p / (p + 1), g / (p + 1), 1 - g, g / (p + 1), g / (p + 1)), n, delta)
    assert float(wrong.upper) < worst - 0.1  # 0.772539: not an upper bound
    ours = float(subsampled_epsilon(R.grr(eps0, 2), n, delta, sample_rate=g).upper)
    assert worst <= ours <= worst + 1e-5


@pytest.mark.slow
def test_certified_upper_is_above_every_enumerated_dataset():
    """k-RR k = 2..4, eps0 in {0.5, 2}, n in {2, 3, 5, 8}, g in {0.1, 0.3, 0.5, 0.9, 1}, delta in
    {1e-2, 1e-3, 1e-6}: every dataset of the others (inputs 2..k-1 are interchangeable for k-RR)."""
    ks, eps0s, ns, gs, deltas = (2, 3, 4), (0.5, 2.0), (2, 3, 5, 8), (0.1, 0.3, 0.5, 0.9, 1.0), (1e-2, 1e-3, 1e-6)
    grid = list(itertools.product(ks, eps0s, ns, gs, deltas))
    k_, e_, n_, g_, d_ = (np.array(x, np.float64) for x in zip(*grid))
    # one batch of certified bounds (the engine broadcasts), then enumeration point by point
    from jaxshuffle.blanket import blanket_epsilon

    certified = np.asarray(blanket_epsilon(e_, subsampled_krr_k(e_, k_, g_), n_, d_, real_k=True).upper)
    checked = 0
    for (k, eps0, n, g, delta), upper in zip(grid, certified):
        matrix = subsampled(krr(eps0, k), g)
        for others in itertools.combinations_with_replacement(range(min(k, 3)), n - 1):
            assert exact_epsilon(matrix, others, delta) <= upper + 1e-12, (k, eps0, n, g, delta, others, upper)
            checked += 1
    assert checked > 1000


def test_rate_one_is_todays_blanket_bound_and_a_smaller_rate_is_more_private():
    from jaxshuffle.blanket import blanket_epsilon

    full = subsampled_epsilon(R.grr(1.0, 10), 10_000, 1e-6, sample_rate=1.0)
    assert float(full.upper) == float(blanket_epsilon(1.0, 10, 10_000, 1e-6).upper)
    assert float(full.k_blanket) == 10.0
    part = subsampled_epsilon(R.grr(1.0, 10), 10_000, 1e-6, sample_rate=np.array([0.5, 0.1, 0.01]))
    assert np.all(np.diff(np.concatenate([[float(full.upper)], part.upper])) < 0)


def test_large_n_binary_rr_at_ten_percent():
    """binary RR (k-RR with k = 2), eps0 = 1, n = 1e4, delta = 1e-6, g = 0.1: certified at most 0.01244."""
    res = subsampled_epsilon(R.grr(1.0, 2), 10_000, 1e-6, sample_rate=0.1)
    assert float(res.upper) <= 0.01244 and int(res.status) == int(js.Status.CONVERGED)


def test_k_prime_formula_and_its_rounding():
    eps0, k, g = 1.0, 10.0, 0.25
    exact_k = k + (1 - g) * (math.e + k - 1) / g
    got = float(subsampled_krr_k(eps0, k, g))
    assert got < exact_k and exact_k - got <= 1e-13 * exact_k
    # 1/(e^eps0 + k' - 1) = g/(e^eps0 + k - 1): each blanket category at its subsampled probability
    assert 1 / (math.e + exact_k - 1) == pytest.approx(g / (math.e + k - 1), rel=1e-14)


@pytest.mark.parametrize("call,pattern", [
    (lambda: check_sample_rate(0.0),
     r"sample_rate: the probability that a user takes part in a round must lie in \(0, 1\], got 0.0"),
    (lambda: check_sample_rate([0.5, 1.5]), r"sample_rate: .* got 1.5"),
    (lambda: check_sample_rate(float("nan")), "sample_rate"),
    (lambda: subsampled_epsilon(R.general(1.0), 100, 1e-6, sample_rate=0.5), "k-ary randomized response"),
    (lambda: __import__("jaxshuffle.accountant.blanket_pld").accountant.blanket_pld.blanket_round(
        1.0, 4, 100, sample_rate=[0.5, 0.5]), r"sample_rate: blanket_round takes a scalar, got shape \(2,\)"),
    # a real k only on request, and only for the blanket form: the exact datasets need an integer k
    (lambda: __import__("jaxshuffle.blanket").blanket.blanket_epsilon(1.0, 10.5, 100, 1e-6), "k: must be an integer"),
    (lambda: __import__("jaxshuffle.blanket").blanket.blanket_epsilon(1.0, 10.5, 100, 1e-6, kind="all_z", real_k=True),
     "real_k: only the blanket form"),
    (lambda: __import__("jaxshuffle.blanket").blanket.blanket_epsilon(1.0, 1.5, 100, 1e-6, real_k=True),
     r"k: must be a real number in \[2, 1e12\)"),
])
def test_bad_input_names_the_parameter(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


@pytest.mark.slow
@pytest.mark.parametrize("k,eps0,g,others,T", [(2, 1.0, 0.5, (0,), 3), (3, 1.0, 0.3, (0, 2, 2), 2),
                                               (3, 2.0, 0.9, (2, 2, 2, 2), 2)])
def test_composed_subsampled_rounds_are_above_the_exact_composition(k, eps0, g, others, T):
    """The subsampled blanket round's PLD composed T times bounds the exact T-fold composition of the
    subsampled shuffled mechanism on these datasets (both orders), at every eps of a grid."""
    from test_compose import composed_delta

    from jaxshuffle.accountant.blanket_pld import blanket_round
    from jaxshuffle.accountant.compose import compose_delta

    n = len(others) + 1
    log_p, log_q = exact.histogram_log_pmfs(subsampled(krr(eps0, k), g), 0, 1, list(others))
    P, Q = np.exp(log_p), np.exp(log_q)
    r = blanket_round(eps0, k, n, discretization=1e-3, points=64, sample_rate=g)
    assert r.source == f"blanket pair (k-ary RR, clients sampled at {g:g})"
    eps = np.linspace(0.0, T * eps0, 25)
    ours = compose_delta([(r, T)], eps)
    for A, B in ((P, Q), (Q, P)):
        assert np.all(composed_delta(A, B, T, eps) <= ours * (1 + 1e-9) + 1e-15)


@pytest.mark.slow
def test_round_accountant_and_the_shuffle_event_take_a_sample_rate():
    """A sampled round in the round accountant is the subsampled blanket round's composition, its state
    keeps the rate, and the dp_accounting event carries it (named-tuple round trip included)."""
    from jaxshuffle.accountant.blanket_pld import blanket_round
    from jaxshuffle.accountant.compose import compose
    from jaxshuffle.accountant.round_accountant import RoundAccountant, ShuffledRound

    spec = ShuffledRound("grr", {"eps0": 1.0, "k": 4}, 500, sample_rate=0.2)
    acc = RoundAccountant(1e-3, blanket_points=64).compose(spec, 3)
    r = blanket_round(1.0, 4, 500, discretization=1e-3, points=64, sample_rate=0.2)
    assert acc.get_epsilon(1e-6) == float(compose([(r, 3)], 1e-6).upper)
    again = RoundAccountant()
    again.load_state_dict(acc.state_dict())
    assert again.rounds[0][0].sample_rate == 0.2 and again.get_epsilon(1e-6) == acc.get_epsilon(1e-6)
    with pytest.raises(ValueError, match="round.sample_rate: clients sampled per round are certified for k-ary RR"):
        RoundAccountant(1e-3).compose(ShuffledRound("general", {"eps0": 1.0}, 500, sample_rate=0.2))
    with pytest.raises(ValueError, match="blanket_points=0 turns that pair off"):
        RoundAccountant(1e-3, blanket_points=0).compose(spec)
    with pytest.raises(ValueError, match="round.sample_rate: the probability"):
        RoundAccountant(1e-3).compose(spec._replace(sample_rate=0.0))

    dp_event = pytest.importorskip("dp_accounting.dp_event")
    from jaxshuffle.interop import ShuffledDpEvent

    event = ShuffledDpEvent(dp_event.RandomizedResponseDpEvent(0.5, 4), num_users=500, sample_rate=0.2)
    assert dp_event.DpEvent.from_named_tuple(event.to_named_tuple()) == event
    assert event.to_shuffled_round().sample_rate == 0.2


@pytest.mark.slow
def test_composed_epsilon_and_the_compose_command_take_a_sample_rate(capsys):
    """rounds = T with clients sampled: the rule is the sampled blanket pair's PLD against basic and
    advanced composition of the sampled round's bound (no worst-case pair), and the command says so."""
    import json

    from jaxshuffle import cli
    from jaxshuffle.accountant.blanket_pld import blanket_round
    from jaxshuffle.accountant.compose import compose
    from jaxshuffle.accountant.rounds import composed_epsilon

    c = composed_epsilon(R.grr(1.0, 4), 500, [1, 4], 1e-6, sample_rate=0.2, blanket_points=64)
    assert np.all(np.isinf(c.pld)) and np.all(np.isnan(c.lower))
    r = blanket_round(1.0, 4, 500, discretization=c.discretization, points=64, sample_rate=0.2)
    assert float(c.blanket_pld[1, 0]) == float(compose([(r, 4)], 1e-6).upper)
    one = subsampled_epsilon(R.grr(1.0, 4), 500, 1e-6, sample_rate=0.2).upper
    assert float(c.basic[0, 0]) == float(one)  # T = 1: the sampled round's own bound
    assert np.all(c.upper <= np.minimum(c.basic, c.blanket_pld))
    with pytest.raises(ValueError, match="sample_rate: clients sampled per round are certified for k-ary"):
        composed_epsilon(R.general(1.0), 500, 4, 1e-6, sample_rate=0.2)
    capsys.readouterr()
    assert cli.main(["compose", "--randomizer", "grr", "--eps0", "1", "--k", "4", "--n", "500", "--rounds", "1,4",
                     "--delta", "1e-6", "--blanket-points", "64", "--sample-rate", "0.2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["upper"] for row in rows] == [float(x) for x in c.upper[:, 0]]
    assert {row["sample_rate"] for row in rows} == {0.2}
    code = cli.main(["compose", "--randomizer", "general", "--eps0", "1", "--n", "500", "--rounds", "4",
                     "--delta", "1e-6", "--sample-rate", "0.2"])
    err = capsys.readouterr().err
    assert code != 0 and "--sample-rate: clients sampled per round" in err and len(err.strip().splitlines()) == 1
