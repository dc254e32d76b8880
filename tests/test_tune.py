"""Budget tuning (jaxshuffle/accountant/tune.py): certified at the end, better than equal split,
near a brute-force grid, first-order optimal, surrogate gradients vs finite differences.

Expected values come from independent computations: the certified composition is rebuilt here
from :func:`shuffled_round` + :func:`compose` (not through ``tune``'s cache), the grid search runs
its own bisection, and the GDP curve is checked against scipy.
"""
from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import jaxshuffle as js
from jaxshuffle import randomizers as R
from jaxshuffle.accountant import compose, shuffled_round
from jaxshuffle.accountant.tune import certified_epsilon, default_utility, gdp_epsilon, query, surrogate_epsilon, tune
from jaxshuffle.utility import grr_frequency_mse_total, weighted_sum

N = 100_000
DELTA = 1e-6


def _three():
    return [query("grr", n=N, k=k) for k in (2, 10, 100)]


@pytest.mark.slow
def test_three_query_example():
    """One tune (the most expensive call of this file), three groups of checks (below)."""
    r = tune(_three(), None, 1.0, DELTA, steps=400)
    _check_certified_and_recomputed(r)
    _check_beats_equal_split(r)
    _check_first_order_optimality(r)


def _independent_upper(ks, n, eps0, delta, disc):
    rounds = [(shuffled_round(R.grr(float(e), k), n, discretization=disc), 1) for e, k in zip(eps0, ks)]
    b = compose(rounds, delta)
    return float(b.lower), float(b.upper)


def _check_certified_and_recomputed(r):
    assert r.upper <= 1.0 and r.baseline_upper <= 1.0
    lo, up = _independent_upper((2, 10, 100), N, r.eps0, DELTA, r.discretization)
    assert up == r.upper and lo == r.lower
    assert lo <= up
    # the bisection is tight: within a few grid steps of the target
    assert r.upper >= 1.0 - 0.03


def _check_beats_equal_split(r):
    # measured: tuned total MSE 1.55e-6 vs equal split 2.53e-6 (ratio 0.61, gain 1.63)
    assert r.utility < r.baseline_utility
    assert r.gain > 1.5
    u = default_utility(_three())
    assert r.utility == pytest.approx(float(u(jnp.asarray(r.eps0))), rel=1e-12)
    # larger domains get more budget (their MSE falls fastest with eps0)
    assert r.eps0[0] < r.eps0[1] < r.eps0[2]
    # the loss curve went down
    assert r.history[-1] < r.history[0]


def _check_first_order_optimality(r):
    """lambda_i = -dU/deps0_i / dE/deps0_i equal across queries (KKT) at the returned eps0.

    With E the surrogate: within 2 % (measured 0.6 %, after the re-aiming pass; the common scale
    factor is 0.9988). With E the certified upper (central differences, step 0.1, grid 2e-4) the
    spread was measured once at 36 % and is NOT asserted (a limitation, not a property): the
    surrogate (a CLT) underestimates the certified marginal cost at the largest eps0 (7.5, about
    180 blanket messages) by about 20 %, so the allocation is KKT for the surrogate, not exactly
    for the certified bound (the 2-query grid test bounds what that costs in utility)."""
    qs = _three()
    gu = np.asarray(jax.grad(default_utility(qs))(jnp.asarray(r.eps0)))
    gs = np.asarray(jax.grad(lambda e: surrogate_epsilon(qs, e, DELTA))(jnp.asarray(r.eps0)))
    lam = -gu / gs
    assert lam.max() / lam.min() - 1 < 0.02  # measured 0.6 %


@pytest.mark.slow
def test_two_queries_within_one_percent_of_grid():
    """Brute force: for each ratio eps0_2/eps0_1 on a grid, the largest certified common scale (own
    bisection on compose of the worst-case pairs), the best total MSE over the grid; tune on the same
    pairs must be within 1 % of it."""
    n = 10_000
    ks = (2, 100)
    qs = [query("grr", n=n, k=k) for k in ks]
    u = weighted_sum([grr_frequency_mse_total(k, n) for k in ks])
    r = tune(qs, u, 1.0, DELTA, steps=400)
    disc = r.discretization

    def best_scale(direction):
        lo, hi = 0.0, None
        c = float(r.eps0[0] / direction[0])
        for _ in range(30):
            ok = _independent_upper(ks, n, c * direction, DELTA, disc)[1] <= 1.0
            lo, hi = (c, hi) if ok else (lo, c)
            if hi is not None and hi - lo <= 2e-3 * hi:
                break
            c = c * 1.02 if hi is None else (0.5 * (lo + hi) if lo > 0 else c / 1.02)
        return lo

    best = math.inf
    for ratio in np.linspace(1.2, 2.0, 9):
        direction = np.array([1.0, ratio])
        c = best_scale(direction)
        best = min(best, float(u(jnp.asarray(c * direction))))
    assert r.upper <= 1.0
    assert r.utility <= 1.01 * best


def test_gdp_epsilon_matches_scipy_and_its_gradient():
    for mu, delta in ((0.3, 1e-6), (1.0, 1e-5), (2.0, 1e-3)):
        ref = brentq(lambda e, mu=mu, delta=delta: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2)
                     - delta, 0, 60)
        assert float(gdp_epsilon(jnp.float64(mu), jnp.float64(delta))) == pytest.approx(ref, rel=1e-9)
        g = jax.grad(gdp_epsilon, argnums=(0, 1))(jnp.float64(mu), jnp.float64(delta))
        h = 1e-6 * mu
        fd_mu = (float(gdp_epsilon(mu + h, delta)) - float(gdp_epsilon(mu - h, delta))) / (2 * h)
        fd_d = (float(gdp_epsilon(mu, delta * (1 + 1e-5)))
                - float(gdp_epsilon(mu, delta * (1 - 1e-5)))) / (2e-5 * delta)
        assert float(g[0]) == pytest.approx(fd_mu, rel=1e-6)
        assert float(g[1]) == pytest.approx(fd_d, rel=1e-5)


@pytest.mark.slow
def test_surrogate_gradients_vs_finite_differences_of_certified():
    """d surrogate/d eps0 vs central differences (step 0.1) of the certified upper on a 2e-4 grid.
    One round at eps0 = 3, 5: within 3 % (measured 1 %); composed (eps0 = 4, 5, 6): within 15 %.
    d/d delta of the composed bound: within 20 % (measured 13 %)."""
    qs = _three()
    h, d = 0.1, 2e-4
    one = qs[1:2]
    for e0 in (3.0, 5.0):
        gs = float(jax.grad(lambda e: surrogate_epsilon(one, e, DELTA))(jnp.array([e0]))[0])
        fd = (certified_epsilon(one, [e0 + h], DELTA, discretization=d)[1]
              - certified_epsilon(one, [e0 - h], DELTA, discretization=d)[1]) / (2 * h)
        assert gs == pytest.approx(fd, rel=0.03)
    eps0 = np.array([4.0, 5.0, 6.0])
    gs = np.asarray(jax.grad(lambda e: surrogate_epsilon(qs, e, DELTA))(jnp.asarray(eps0)))
    for i in range(3):
        ep, em = eps0.copy(), eps0.copy()
        ep[i] += h
        em[i] -= h
        fd = (certified_epsilon(qs, ep, DELTA, discretization=d)[1]
              - certified_epsilon(qs, em, DELTA, discretization=d)[1]) / (2 * h)
        assert gs[i] == pytest.approx(fd, rel=0.15)
    gd = float(jax.grad(lambda dd: surrogate_epsilon(qs, jnp.asarray(eps0), dd))(DELTA))
    fdd = (certified_epsilon(qs, eps0, 1.2 * DELTA, discretization=d)[1]
           - certified_epsilon(qs, eps0, 0.8 * DELTA, discretization=d)[1]) / (0.4 * DELTA)
    assert gd == pytest.approx(fdd, rel=0.2)


@pytest.mark.slow
def test_surrogate_n_gradient_vs_finite_differences_of_certified():
    """d surrogate/d n_i (three queries, eps0 = 4, 5, 6) vs central differences (n +- 10 %) of the
    certified composed upper. Allowed error: the FD's grid resolution (each certified value is on a
    grid of ``d``: ``d/h``) plus 5 % for the surrogate's CLT approximation (measured 0.3-4 %)."""
    ks, eps0, d, h = (2, 10, 100), np.array([4.0, 5.0, 6.0]), 2e-4, 10_000
    qs = [query("grr", n=N, k=k) for k in ks]
    g = np.asarray(jax.grad(lambda n: surrogate_epsilon(qs, jnp.asarray(eps0), DELTA, n=n))(jnp.full(3, float(N))))
    for i in range(3):
        up = [query("grr", n=N + h * (j == i), k=k) for j, k in enumerate(ks)]
        dn = [query("grr", n=N - h * (j == i), k=k) for j, k in enumerate(ks)]
        fd = (certified_epsilon(up, eps0, DELTA, discretization=d)[1]
              - certified_epsilon(dn, eps0, DELTA, discretization=d)[1]) / (2 * h)
        assert fd < 0
        assert abs(g[i] - fd) <= d / h + 0.05 * abs(fd)


@pytest.mark.slow
def test_custom_utility_and_optimizer():
    import optax

    qs = _three()[:2]
    u = weighted_sum([grr_frequency_mse_total(k, N) for k in (2, 10)], weights=[1.0, 3.0])
    r = tune(qs, u, 0.8, DELTA, optimizer=optax.sgd(1e5), steps=20)
    assert r.upper <= 0.8
    assert r.history.shape == (40,)  # two passes of 20 steps (refine=1)
    assert r.sources == ("stronger clone", "stronger clone")  # k-ary RR rounds: the pointwise clone proof


@pytest.mark.parametrize("kwargs, name", [
    (dict(target_eps=0.0), "target_eps"),
    (dict(target_eps=float("nan")), "target_eps"),
    (dict(delta=1.5), "delta"),
    (dict(steps=-1), "steps"),
    (dict(queries=[]), "queries"),
    (dict(queries=[("grr", 10)]), "queries[0]"),
    (dict(utility=3), "utility"),
])
def test_bad_inputs_name_the_parameter(kwargs, name):
    args = dict(queries=_three(), utility=None, target_eps=1.0, delta=DELTA, steps=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match="^" + re.escape(name)):
        tune(args.pop("queries"), args.pop("utility"), args.pop("target_eps"), args.pop("delta"), **args)


@pytest.mark.parametrize("call, name", [
    (lambda: query("nope", n=10), "randomizer"),
    (lambda: query("grr", n=1.5, k=3), "n"),
    (lambda: query("grr", n=100, k=3, count=0), "count"),
    (lambda: query("grr", n=100, k=3, eps0=1.0), "eps0"),
    (lambda: query("grr", n=100, k=1), "k"),
])
def test_bad_query_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"^{name}"):
        call()


def test_exported():
    assert js.tune is tune
    assert "tune" in js.__all__ and "TuneResult" in js.__all__


@pytest.mark.slow
def test_cli_tune_json_and_errors(capsys):
    from jaxshuffle.cli import main

    assert main(["tune", "--query", "grr:k=2", "--query", "grr:k=50,n=5e4", "--n", "1e5", "--target", "1",
                 "--delta", "1e-6", "--steps", "50", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["certified"] and out["upper"] <= 1.0 and out["gain"] > 1.0
    assert [q["n"] for q in out["queries"]] == [1e5, 5e4]
    for argv, name in ((["--target", "0"], "target"), (["--delta", "2"], "delta"),
                       (["--query", "grr:k"], "query"), (["--query", "grr:k=1"], "k")):
        base = {"--query": "grr:k=2", "--n": "1e5", "--target": "1", "--delta": "1e-6"}
        base[argv[0]] = argv[1]
        assert main(["tune"] + [x for kv in base.items() for x in kv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"jaxshuffle: error: {name}") and "\n" not in err


@pytest.mark.slow
def test_calibrate_eps0_under_composition():
    """rounds=T: the returned eps0's T-fold composition is certified <= target by the T-round rule
    (composed_epsilon, here without the blanket pair's PLD: test_calibrate.py covers it), the reported
    infeasible neighbour's is not; the rule is never above the worst-case pair's own composition
    (independent shuffled_round + compose); and T rounds need a smaller eps0 than one."""
    from jaxshuffle.accountant import calibrate_eps0, composed_epsilon

    c = calibrate_eps0("grr", 1.0, 10_000, DELTA, k=10, rounds=5, rtol=1e-2, blanket_points=0)
    assert int(c.status) == 0
    v, o = float(c.value), float(c.over)
    assert o - v <= 1e-2 * o
    up_v, up_o = (float(composed_epsilon(R.grr(e, 10), 10_000, 5, DELTA, blanket_points=0).upper[0, 0])
                  for e in (v, o))
    assert up_v <= 1.0 < up_o
    assert float(c.upper) == up_v
    assert up_v <= float(compose([(shuffled_round(R.grr(v, 10), 10_000, rounds=5), 5)], DELTA).upper)
    one = calibrate_eps0("grr", 1.0, 10_000, DELTA, k=10, rtol=1e-2, upper_from="worst-case")
    assert v < float(one.value)
    with pytest.raises(ValueError, match="^rounds"):
        calibrate_eps0("grr", 1.0, 10_000, DELTA, k=10, rounds=0)


def test_a_utility_that_returns_nan_is_named_not_eps0():
    """A utility whose value or gradient is NaN at the start gets one ValueError naming ``utility`` (not
    a complaint about eps0 later), before any optimisation or certification runs."""
    queries = [query("grr", n=1e4, count=2, k=10), query("grr", n=1e4, count=2, k=5)]
    for utility in (lambda e: jnp.nan * jnp.sum(e), lambda e: jnp.sum(jnp.sqrt(e - 1.5))):
        with pytest.raises(ValueError, match=r"^utility: must return a finite value with a finite gradient"):
            tune(queries, utility, 1.0, 1e-6, steps=3)


@pytest.mark.slow
def test_tune_by_the_t_round_rule():
    """tune scales and certifies by the T-round rule: with one k-RR query over T rounds its certificate is
    composed_epsilon's at the returned eps0 (<= target) and 2 rtol more eps0 exceeds the target under that
    rule; with two queries it is release_epsilon's, recomputed here; with k-RR's blanket pair asked for
    (blanket_points=16: few profile points keep the test short; any count is the same rule) both give more
    eps0 than the default's worst-case pairs, the smaller bound at this n."""
    from jaxshuffle.accountant import composed_epsilon
    from jaxshuffle.accountant.rounds import release_epsilon

    n, T, target, rtol = 2000, 20, 1.0, 2e-3
    r = tune([query("grr", n=n, k=10, count=T)], None, target, DELTA, steps=0, rtol=rtol, blanket_points=16)
    e, (points,) = float(r.eps0[0]), r.blanket_points
    assert points == 16 and r.upper_source == "blanket PLD"
    at = composed_epsilon(R.grr(e, 10), n, T, DELTA, discretization=r.discretization, blanket_points=points)
    assert float(at.upper[0, 0]) == r.upper <= target
    over = composed_epsilon(R.grr(e * (1 + 2 * rtol), 10), n, T, DELTA, discretization=r.discretization,
                            blanket_points=points)
    assert float(over.upper[0, 0]) > target
    worst = tune([query("grr", n=n, k=10, count=T)], None, target, DELTA, steps=0, rtol=rtol)  # default: no blanket
    assert worst.blanket_points == (0,) and worst.eps0[0] < e

    qs = [query("grr", n=n, k=10, count=T), query("grr", n=n, k=3, count=T // 2)]
    r2 = tune(qs, None, target, DELTA, steps=0, rtol=1e-2, blanket_points=16)  # the rule, not the optimiser
    parts = [(R.grr(float(x), k), n, q.count, 1.0) for x, k, q in zip(r2.eps0, (10, 3), qs)]
    again = release_epsilon(parts, DELTA, discretization=r2.discretization, blanket_points=list(r2.blanket_points))
    assert again.upper == r2.upper <= target and again.upper_source == r2.upper_source == "blanket PLD"
    assert again.pld == r2.worst_case_upper > target  # the worst-case pairs alone would not certify this eps0


@pytest.mark.slow
def test_release_epsilon_runs_the_stackable_queries_one_round_bounds_in_one_call(monkeypatch):
    """The rule's basic composition needs each query's one-round bound: the k-RR queries (any k, eps0, n) go
    through one batched amplify call, the randomizer of another pytree through its own, and each value is
    the query's own amplify call's (the same certified bracket, within two brackets' rtol)."""
    import importlib

    from jaxshuffle.accountant import rounds

    amplify_module = importlib.import_module("jaxshuffle.accountant.amplify")  # the package's name is the function

    queries = [(R.grr(1.0, 3), 200.0, 20, 1.0), (R.general(1.5), 300.0, 2, 1.0),
               (R.grr(1.2, 10), 500.0, 10, 1.0), (R.grr(2.0, 100), 1000.0, 1, 1.0)]
    delta = DELTA / 33
    own = [float(np.asarray(amplify_module.amplify(r, n, delta, with_paper=False, with_lower=False).upper))
           for r, n, _, _ in queries]
    calls = []
    real = amplify_module.amplify

    def recorded(r, n, *args, **kwargs):
        calls.append(np.shape(n))
        return real(r, n, *args, **kwargs)

    monkeypatch.setattr(amplify_module, "amplify", recorded)
    got = rounds._one_round_uppers(queries, delta)
    assert sorted(calls) == [(), (3,)]
    np.testing.assert_allclose(got, own, rtol=2e-6)
