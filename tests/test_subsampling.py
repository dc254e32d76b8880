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


@pytest.mark.slow
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


@pytest.mark.slow
def test_rate_one_is_todays_blanket_bound_and_a_smaller_rate_is_more_private():
    from jaxshuffle.blanket import blanket_epsilon

    full = subsampled_epsilon(R.grr(1.0, 10), 10_000, 1e-6, sample_rate=1.0)
    assert float(full.upper) == float(blanket_epsilon(1.0, 10, 10_000, 1e-6).upper)
    assert float(full.k_blanket) == 10.0
    part = subsampled_epsilon(R.grr(1.0, 10), 10_000, 1e-6, sample_rate=np.array([0.5, 0.1, 0.01]))
    assert np.all(np.diff(np.concatenate([[float(full.upper)], part.upper])) < 0)


@pytest.mark.slow
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
    (lambda: subsampled_epsilon(R.balcer_cheu(0.5, 3), 100, 1e-6, sample_rate=0.5), "^randomizer: clients sampled"),
    (lambda: __import__("jaxshuffle.accountant.blanket_pld").accountant.blanket_pld.blanket_round(
        1.0, 4, 100, sample_rate=[0.5, 0.5]), r"sample_rate: blanket_round takes a scalar, got shape \(2,\)"),
    # a real k only on request (k-RR's own k is an integer)
    (lambda: __import__("jaxshuffle.blanket").blanket.blanket_epsilon(1.0, 10.5, 100, 1e-6), "k: must be an integer"),
    (lambda: __import__("jaxshuffle.blanket").blanket.blanket_epsilon(1.0, 2.5, 100, 1e-6, kind="all_z", real_k=True),
     r"k: must be a real number in \[3, 1e12\)"),
    (lambda: __import__("jaxshuffle.blanket").blanket.krr_bounds(1.0, 3, 100, 1e-6, k_forms=2.5),
     r"k_forms: must be a real number in \[k, 1e12\)"),
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
    with pytest.raises(ValueError, match="round.sample_rate: clients sampled per round are certified for single"):
        RoundAccountant(1e-3).compose(ShuffledRound("balcer-cheu", {"coin": 0.5, "blanket_per_user": 3}, 500,
                                                    sample_rate=0.2))
    with pytest.raises(ValueError, match="blanket_points=0 turns off the only certified pair"):
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
    with pytest.raises(ValueError, match="sample_rate: clients sampled per round are certified for single-message"):
        composed_epsilon(R.balcer_cheu(0.5, 3), 500, 4, 1e-6, sample_rate=0.2)
    capsys.readouterr()
    assert cli.main(["compose", "--randomizer", "grr", "--eps0", "1", "--k", "4", "--n", "500", "--rounds", "1,4",
                     "--delta", "1e-6", "--blanket-points", "64", "--sample-rate", "0.2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["upper"] for row in rows] == [float(x) for x in c.upper[:, 0]]
    assert {row["sample_rate"] for row in rows} == {0.2}
    code = cli.main(["compose", "--randomizer", "balcer-cheu", "--coin", "0.5", "--blanket_per_user", "3", "--n", "500",
                     "--rounds", "4", "--delta", "1e-6", "--sample-rate", "0.2"])
    err = capsys.readouterr().err
    assert code != 0 and "--sample-rate: clients sampled per round" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_shuffled_round_with_clients_sampled_is_the_sampled_blanket_round():
    """shuffled_round(sample_rate=g) is k-RR's blanket round at the real k' (no two-count pair applies); other
    randomizers and pairs are refused, g = 1 is the worst-case pair's round as before."""
    from jaxshuffle.accountant.blanket_pld import blanket_round

    got = js.shuffled_round(R.grr(1.0, 4), 500, discretization=1e-3, sample_rate=0.2)
    ref = blanket_round(1.0, 4, 500, discretization=1e-3, sample_rate=0.2)
    assert got.source == ref.source and "clients sampled at 0.2" in got.source
    assert np.array_equal(got.upper_forward.probs, ref.upper_forward.probs)
    full = js.shuffled_round(R.grr(1.0, 4), 500, discretization=1e-3, sample_rate=1.0)
    assert "clients sampled" not in full.source
    with pytest.raises(ValueError, match="^sample_rate: clients sampled per round are certified for single"):
        js.shuffled_round(R.balcer_cheu(0.5, 3), 500, sample_rate=0.2)
    with pytest.raises(ValueError, match=r"^sample_rate: shuffled_round takes a scalar"):
        js.shuffled_round(R.grr(1.0, 4), 500, sample_rate=[0.2])


@pytest.mark.slow
def test_calibrations_and_their_commands_take_a_sample_rate(capsys):
    """calibrate_eps0 / calibrate_n with clients sampled: the answer is certified by amplify(sample_rate=g)
    from scratch (<= target), the next probe is not, sampling buys a larger eps0 than full participation, and
    the clone proof says no two-count pair was used. The commands pass --sample-rate through."""
    import json

    from jaxshuffle import cli
    from jaxshuffle.accountant.calibrate import calibrate_eps0, calibrate_n
    from jaxshuffle.randomizers.clone import CloneProof

    n, target, delta, g, k = 2000, 0.5, 1e-6, 0.2, 4
    c = calibrate_eps0("grr", target, n, delta, k=k, sample_rate=g, rtol=1e-2)
    value = float(c.value)
    up = float(js.amplify(R.grr(value, k), n, delta, sample_rate=g).upper)
    assert up <= target and float(c.upper) == up
    assert float(c.over) - value <= 1e-2 * float(c.over)
    assert int(c.clone_proof) == CloneProof.NONE
    # full participation would not meet it (its blanket lanes alone: a certified upper, the cheaper program)
    assert float(js.amplify(R.grr(value, k), n, delta, with_lower=False, with_paper=False).upper) > target

    m = calibrate_n("grr", target, delta, eps0=2.0, k=k, sample_rate=g, n_max=200)  # n = 94: few probes
    ups = [float(js.amplify(R.grr(2.0, k), x, delta, sample_rate=g).upper) for x in (m.value, m.over)]
    assert ups[0] <= target < ups[1] and float(m.over) == float(m.value) - 1

    capsys.readouterr()
    assert cli.main(["calibrate", "--randomizer", "grr", "--k", str(k), "--n", str(n), "--target", str(target),
                     "--delta", str(delta), "--rtol", "1e-2", "--sample-rate", str(g), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["value"] == value and row["upper"] == up and row["sample_rate"] == g
    assert cli.main(["epsilon", "--randomizer", "grr", "--eps0", "2", "--k", str(k), "--n", str(float(m.value)),
                     "--delta", str(delta), "--sample-rate", str(g)]) == 0
    out = capsys.readouterr().out
    assert "sample rate=0.2" in out and "no two-count pair is an upper bound" in out and "paper" not in out
    assert f"eps <= {ups[0]:.6g}"[:12] in out


@pytest.mark.parametrize("call,pattern", [
    (lambda: js.amplify(R.grr(1.0, 4), 100, 1e-6, sample_rate=0.5, upper_from="worst-case"),
     "^upper_from: 'worst-case' has no bound with clients sampled"),
    (lambda: js.amplify(R.balcer_cheu(0.5, 3), 100, 1e-6, sample_rate=0.5), "^randomizer: clients sampled per round"),
    (lambda: __import__("jaxshuffle.accountant.calibrate").accountant.calibrate.calibrate_eps0(
        "grr", 0.5, 100, 1e-6, k=4, sample_rate=[0.5, 0.2]), r"^sample_rate: a calibration takes a scalar"),
    (lambda: __import__("jaxshuffle.accountant.calibrate").accountant.calibrate.calibrate_n(
        "grr", 0.5, 1e-6, eps0=1.0, k=4, sample_rate=0.5, upper_from="worst-case"), "^upper_from: 'worst-case'"),
])
def test_sampled_entry_points_name_what_is_wrong(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_cli_sample_rate_errors_are_one_line(capsys):
    from jaxshuffle import cli

    for argv, needle in [(["epsilon", "--randomizer", "grr", "--eps0", "1", "--k", "4", "--n", "100", "--delta", "1e-6",
                           "--sample-rate", "0"], "--sample-rate: the probability that a user takes part"),
                         (["epsilon", "--randomizer", "balcer-cheu", "--coin", "0.5", "--blanket_per_user", "3", "--n",
                           "100", "--delta", "1e-6", "--sample-rate", "0.5"], "randomizer: clients sampled per round"),
                         (["calibrate", "--randomizer", "grr", "--k", "4", "--n", "100", "--target", "0.5",
                           "--delta", "1e-6", "--sample-rate", "0.5", "--upper-from", "worst-case"],
                          "--upper-from: 'worst-case' has no bound with clients sampled")]:
        capsys.readouterr()
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, err


def _three_count_divergence(p, r, g, n, t):
    """(1/n) E[(c_A A + c_B B + (1 - t) V)_+] by direct summation over the multinomial (docs/math.md 12.10)."""
    cA, cB, cV = (p - t) / ((p + 1) * r), (1 - t * p) / ((p + 1) * r), 1 - t
    probs = (g * r, g * r, 1 - g, g * (1 - 2 * r))
    total = 0.0
    for a in range(n + 1):
        for b in range(n + 1 - a):
            for v in range(n + 1 - a - b):
                o = n - a - b - v
                ways = math.comb(n, a) * math.comb(n - a, b) * math.comb(n - a - b, v)
                mass = ways * probs[0] ** a * probs[1] ** b * probs[2] ** v * probs[3] ** o
                total += mass * max(0.0, cA * a + cB * b + cV * v)
    return total / n


@pytest.mark.slow
@pytest.mark.parametrize("eps0,g,n,delta,r_of_p", [
    (1.0, 0.5, 4, 1e-3, "stronger"), (2.0, 0.3, 8, 1e-6, "stronger"), (1.0, 0.5, 2, 1e-2, "stronger"),
    (1.0, 0.3, 5, 1e-3, "standard"), (0.5, 0.9, 6, 1e-6, "standard")])
def test_three_count_pair_is_evaluated_on_the_safe_side(eps0, g, n, delta, r_of_p):
    """The matrix engine's search of the three-count form holds its epsilon from above: the pair's own
    divergence (direct multinomial sum) is <= delta at the certified eps, and within 1e-5 relative of it."""
    from jaxshuffle.accountant.subsampling import three_count_forms
    from jaxshuffle.blanket_matrix import search_forms

    p = math.exp(eps0)
    r = (1 / (p + 1) if r_of_p == "stronger" else 1 / (2 * p)) * (1 - 4e-16)
    up = search_forms(three_count_forms(p, r, g), n, delta).upper
    assert _three_count_divergence(p, r, g, n, math.exp(up)) <= delta
    assert _three_count_divergence(p, r, g, n, math.exp(up * (1 - 1e-5))) > delta


def _random_ldp_matrix(rng, eps0, K=3):
    """A random K x K matrix whose column ratios are at most e^eps0 (entries in [1, e^eps0], rows normalised)."""
    M = np.exp(eps0 * rng.uniform(size=(K, K)))
    return M / M.sum(axis=1, keepdims=True)


@pytest.mark.slow
def test_three_count_pair_bounds_random_ldp_matrices_sampled():
    """A randomizer known only by its eps0 (``R.general``) gets the three-count pair with the standard clone
    r = 1/(2p); it bounds the sampled round of every eps0-LDP matrix (random 3 x 3 ones here, every dataset
    of the others enumerated exactly), and it is reported as such."""
    from jaxshuffle.accountant.amplify import UpperSource

    rng = np.random.default_rng(40)
    for eps0, g, n, delta in [(1.0, 0.3, 3, 1e-3), (2.0, 0.5, 4, 1e-2), (0.5, 0.9, 5, 1e-6)]:
        rep = js.amplify(R.general(eps0), n, delta, sample_rate=g)
        assert int(rep.upper_source) == UpperSource.THREE_COUNT and np.isinf(rep.worst_case)
        for _ in range(2):
            M = _random_ldp_matrix(rng, eps0)
            Mg = subsampled(M, g)
            worst = max(exact.epsilon(Mg, a, b, list(o), delta) for a, b in itertools.combinations(range(3), 2)
                        for o in itertools.combinations_with_replacement(range(3), n - 1))
            assert worst <= float(rep.upper) + 1e-9, (eps0, g, n, delta, M, worst, rep.upper)


@pytest.mark.slow
def test_three_count_round_pld_dominates_the_pairs_profile():
    """The three-count pair's round PLD (connect the dots on its certified profile, docs/math.md 12.8 and
    12.10) has, at every eps, a delta at least the pair's own divergence by direct multinomial summation
    (independent of the engine), for the standard and the stronger clone constant; it is what
    shuffled_round, the T-round rule and the round accountant use for a sampled non-k-RR round."""
    from jaxshuffle.accountant.blanket_pld import three_count_round
    from jaxshuffle.accountant.compose import compose_delta
    from jaxshuffle.accountant.rounds import composed_epsilon

    n = 4  # one n: the three rounds share their profile program
    for eps0, g, r_of_p in [(1.0, 0.3, "standard"), (2.0, 0.5, "stronger"), (0.5, 0.9, "standard")]:
        p = math.exp(eps0)
        r = (1 / (p + 1) if r_of_p == "stronger" else 1 / (2 * p)) * (1 - 4e-16)
        rnd = three_count_round(p, r, g, n, discretization=1e-3, points=16)
        assert "three-count pair" in rnd.source and rnd.certified
        eps = np.linspace(0.0, eps0 * 1.1, 23)
        got = np.asarray(compose_delta([(rnd, 1)], eps))
        want = np.array([_three_count_divergence(p, r, g, n, math.exp(e)) for e in eps])
        assert np.all(got >= want), (eps0, g, n, eps[got < want], got[got < want], want[got < want])
        assert np.all(got[eps >= eps0 * 1.0001] == 0.0)  # the pair's divergence vanishes from t = p on
    c = composed_epsilon(R.general(1.0), 300, [1, 8], 1e-6, discretization=1e-2, sample_rate=0.2, blanket_points=16)
    assert c.upper_source[1, 0] == "blanket PLD" and c.upper[1, 0] < c.basic[1, 0]


def test_shuffled_round_with_clients_sampled_builds_the_rules_round(monkeypatch):
    """shuffled_round(g < 1) of any single-message randomizer is the round the T-round rule builds
    (blanket_round_where_built on the worst-case pair's grid): k-RR's blanket pair, else the three-count pair."""
    from jaxshuffle.accountant import blanket_pld

    calls = []
    monkeypatch.setattr(blanket_pld, "blanket_round_where_built", lambda *a: calls.append(a) or "built")
    assert js.shuffled_round(R.general(1.0), 300, discretization=1e-2, rounds=8, sample_rate=0.2) == "built"
    randomizer, n, grid, points, g = calls[0]
    assert (n, grid, points, g) == (300, 1e-2, None, 0.2) and float(randomizer.p) == math.e
