"""Budget tuning with clients sampled per round (``Query.sample_rate``; jaxshuffle/accountant/tune.py).

Expected values come from independent computations: the surrogate's ``mu`` from the closed form of
k-RR's worst-case pair in numpy (``p = q = e^eps0``), the certified rounds from
:func:`shuffled_round` with ``sample_rate`` + :func:`compose` (not through ``tune``'s cache), and
``g = 1`` against queries built without a rate (bit for bit).
"""
from __future__ import annotations

import json
import math
import re

import jax.numpy as jnp
import numpy as np
import pytest

from jaxshuffle import randomizers as R
from jaxshuffle.accountant import compose, shuffled_round
from jaxshuffle.accountant.tune import (
    Query,
    TuneResult,
    certified_epsilon,
    query,
    round_mu,
    tune,
)

DELTA = 1e-6


def test_rate_one_is_the_unsampled_query_bit_for_bit():
    """``sample_rate=1`` (given or default, and a Query built positionally as before the field existed)
    gives the same Query, the same ``mu`` (hence the same surrogate) and the same certified bracket."""
    plain = [query("grr", n=2000, k=k) for k in (2, 10)]
    rated = [query("grr", n=2000, k=k, sample_rate=1.0) for k in (2, 10)]
    assert plain == rated
    assert Query("grr", 2000.0, 1, (("k", 2.0),)) == plain[0]
    eps0 = jnp.asarray([0.7, 3.1])
    assert np.array_equal(np.asarray(round_mu(plain, eps0)), np.asarray(round_mu(rated, eps0)))
    one = certified_epsilon(plain[:1], [2.0], DELTA, discretization=1e-3, cached=False)
    assert certified_epsilon(rated[:1], [2.0], DELTA, discretization=1e-3, cached=False) == one


def test_round_mu_sampled_against_numpy():
    """``mu_g = g c_p / sqrt(g N s h(1-h))`` with k-RR's worst-case pair (``p = q = e^eps0``: ``u = p/(p+1)``,
    ``v = 1/(p+1)``, ``s = 2/(p+1)``, ``h = 1/2``, ``N = n - 1``), written out here in numpy; it is
    ``sqrt(g)`` times the unsampled value."""
    n = 2000.0
    for k in (2, 10):
        for g in (0.01, 0.3, 0.9):
            qs = [query("grr", n=n, k=k, sample_rate=g) for _ in range(3)]
            eps0 = np.array([0.5, 2.0, 6.0])
            p = np.exp(eps0)
            u, v = p / (p + 1), 1 / (p + 1)
            s = 2 / (p + 1)
            ref = g * (u - v) / (u + v) / np.sqrt(g * (n - 1) * s * 0.25)
            got = np.asarray(round_mu(qs, jnp.asarray(eps0)))
            np.testing.assert_allclose(got, ref, rtol=1e-13)
            full = np.asarray(round_mu([query("grr", n=n, k=k)] * 3, jnp.asarray(eps0)))
            np.testing.assert_allclose(got, math.sqrt(g) * full, rtol=1e-13)


@pytest.mark.parametrize("kwargs, pattern", [
    (dict(family="binary-rr", d=4, sample_rate=0.5), r"^sample_rate: tune certifies clients sampled for k-ary RR"),
    (dict(family="laplace", sample_rate=0.5), r"^sample_rate: tune certifies .* not 'laplace'"),
    (dict(family="local-hash", l=4, collision=0, sample_rate=0.999), r"^sample_rate: tune .* not 'local-hash'"),
    (dict(family="grr", k=4, sample_rate=0.0), r"^sample_rate: .*\(0, 1\]"),
    (dict(family="grr", k=4, sample_rate=1.5), r"^sample_rate: .*\(0, 1\]"),
    (dict(family="grr", k=4, sample_rate=float("nan")), r"^sample_rate: .*\(0, 1\]"),
    (dict(family="grr", k=4, sample_rate=[0.5, 0.5]), r"^sample_rate: query takes a scalar"),
])
def test_refused_rates_and_randomizers_name_sample_rate(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        query(n=2000, **kwargs)


def test_non_krr_queries_keep_rate_one():
    """The refusal is for a rate below 1 only: other randomizers still tune at ``g = 1``; a family
    with no eps0 (a multi-message protocol) is refused before its rate is looked at."""
    assert query("binary-rr", n=2000, d=4, sample_rate=1.0).sample_rate == 1.0
    with pytest.raises(ValueError, match="^family: 'balcer-cheu'"):
        query("balcer-cheu", n=2000, sample_rate=0.5)


@pytest.mark.slow
def test_two_query_tune_with_one_sampled_query():
    """One grr query sampled at 0.1, one not: certified (upper <= target, equal to a from-scratch
    recomputation and to an independent compose of shuffled_round(..., sample_rate=0.1)), and the
    sampled query's eps0 larger than the same query's in the same tune at g = 1.

    Target 0.5 and rtol 2e-2 keep it to about 4 minutes on 2 busy cores: each sampled round PLD (k-RR's
    blanket pair at the real k' ~ 10^2..10^3) takes 10-40 s to build, and a tune builds about 20 rounds
    (measured: eps0 = 3.57 sampled and 2.63 not, against 2.29 for both at g = 1; upper 0.485)."""
    n, g, steps, target = 2000, 0.1, 20, 0.5
    qs = [query("grr", n=n, k=4, sample_rate=g), query("grr", n=n, k=4)]
    r = tune(qs, None, target, DELTA, steps=steps, rtol=2e-2)
    assert r.upper <= target and r.baseline_upper <= target
    assert math.isnan(r.lower)  # the sampled round's PLD has a pessimistic side only
    assert certified_epsilon(qs, r.eps0, DELTA, discretization=r.discretization, cached=False)[1] == r.upper
    rounds = [(shuffled_round(R.grr(float(r.eps0[0]), 4), n, discretization=r.discretization, sample_rate=g), 1),
              (shuffled_round(R.grr(float(r.eps0[1]), 4), n, discretization=r.discretization), 1)]
    assert float(compose(rounds, DELTA).upper) == r.upper
    assert r.sources == (f"blanket pair (k-ary RR, clients sampled at {g:g})", "stronger clone")
    both = tune([query("grr", n=n, k=4), query("grr", n=n, k=4)], None, target, DELTA, steps=steps, rtol=2e-2)
    assert r.eps0[0] > both.eps0[0]
    assert r.eps0[0] > r.eps0[1]  # within the tune too: the sampled round costs less per unit of eps0


def _fake_result(m, lower):
    return TuneResult(eps0=np.full(m, 2.0), lower=lower, upper=0.99, utility=1e-3, baseline_eps0=np.full(m, 1.9),
                      baseline_lower=lower, baseline_upper=0.98, baseline_utility=2e-3, history=np.zeros(3),
                      surrogate=0.95, scale=1.0, target=1.0, delta=DELTA, discretization=1e-3)


def test_cli_columns_and_json_fields(capsys, monkeypatch):
    """Formatting only (``tune`` replaced by a canned result): the rate column appears in the text
    table only when some query samples, and every JSON query carries ``sample_rate``; the global
    ``--sample-rate`` is the default and a query's own ``sample_rate=`` wins."""
    import sys

    from jaxshuffle.cli import main

    tune_module = sys.modules["jaxshuffle.accountant.tune"]  # the package re-exports the function as ``tune``

    seen = []

    def fake(queries, utility, target, delta, **kw):
        seen.append([q.sample_rate for q in queries])
        return _fake_result(len(queries), float("nan") if any(q.sample_rate < 1 for q in queries) else 0.9)

    monkeypatch.setattr(tune_module, "tune", fake)
    base = ["tune", "--n", "2000", "--target", "1", "--delta", "1e-6"]
    assert main(base + ["--query", "grr:k=4", "--query", "grr:k=8"]) == 0
    text = capsys.readouterr().out
    assert "sample rate" not in text and "[0.9000, 0.9900]" in text
    assert main(base + ["--query", "grr:k=4,sample_rate=0.2", "--query", "grr:k=8"]) == 0
    text = capsys.readouterr().out
    assert "sample rate" in text and "<= 0.9900" in text
    assert re.search(r"grr:k=4,sample_rate=0\.2\s+2000\s+1\s+0\.2\s+2\.0000", text)
    assert main(base + ["--sample-rate", "0.5", "--query", "grr:k=4,sample_rate=1", "--query", "grr:k=8",
                        "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [q["sample_rate"] for q in out["queries"]] == [1.0, 0.5]
    assert out["lower"] is None and out["equal_split_lower"] is None
    assert main(base + ["--query", "grr:k=4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"][0]["sample_rate"] == 1.0 and out["lower"] == 0.9
    assert seen == [[1.0, 1.0], [0.2, 1.0], [1.0, 0.5], [1.0]]


@pytest.mark.parametrize("extra, name", [
    (["--query", "grr:k=4,sample_rate=2"], "sample_rate= in query 0 ('grr:k=4,sample_rate=2'): "),
    (["--query", "grr:k=4", "--query", "grr:k=4,sample_rate=0"], "sample_rate= in query 1 "),
    (["--query", "grr:k=4,sample_rate=nan"], "sample_rate= in query 0 "),
    # the query's own rate is named as such even where --sample-rate is given too
    (["--query", "grr:k=4,sample_rate=2", "--sample-rate", "0.5"], "sample_rate= in query 0 "),
    (["--query", "binary-rr:d=4,sample_rate=0.5"], "sample_rate: tune certifies clients sampled for k-ary RR"),
    (["--query", "grr:k=4", "--sample-rate", "0"], "--sample-rate: "),
    (["--query", "grr:k=4", "--sample-rate", "1.5"], "--sample-rate: "),
    (["--query", "binary-rr:d=4", "--sample-rate", "0.5"], "--sample-rate: tune certifies"),
])
def test_cli_bad_sample_rate_is_one_line(capsys, extra, name):
    from jaxshuffle.cli import main

    assert main(["tune", "--n", "2000", "--target", "1", "--delta", "1e-6", "--steps", "1"] + extra) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith(f"jaxshuffle: error: {name}") and "\n" not in err
    assert captured.out == ""
