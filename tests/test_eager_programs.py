"""Eager pre- and post-processing of concrete inputs dispatches no XLA programs of its own (issue 19).

Every eager jnp operation on a new shape is one XLA program: traced, lowered and looked up in the
compilation cache even when the compiled program is cached (about 8 ms each for these few-element
operations on the project's 2-core machine). A warm ``jaxshuffle calibrate --randomizer grr --k 10
--target 0.1 --n 1e5 --delta 1e-6`` looked up 123 programs, 48 of them first dispatched by the
parameter containers (:mod:`jaxshuffle.randomizers.params`), the pair constructors
(:mod:`jaxshuffle.pair`) and the calibration loop; those now run in numpy for concrete inputs
(bit for bit the jnp values, checked here against the jnp code that committed arrays keep), and
the run looks up 92. The tests count the programs looked up (``compile_or_get_cached``, JAX's
entry to compilation and its caches) and attribute each to the innermost jaxshuffle frame.
"""

from __future__ import annotations

import collections
import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import compiler

import jaxshuffle
from jaxshuffle import randomizers
from jaxshuffle.pair import stronger_clone_pair, two_count_pair, vr_pair
from jaxshuffle.randomizers.params import blanket_messages

OWN = ("jaxshuffle/randomizers/params.py", "jaxshuffle/pair.py", "jaxshuffle/accountant/calibrate.py")


class ProgramCounter:
    """Counts the XLA programs looked up while active, by the innermost jaxshuffle frame calling."""

    def __init__(self, monkeypatch):
        self.sites = collections.Counter()
        original = compiler.compile_or_get_cached

        def counting(*args, **kwargs):
            site = "?"
            for frame in reversed(traceback.extract_stack()[:-1]):
                path = frame.filename.replace("\\", "/")
                if "/jaxshuffle/" in path and "/tests/" not in path:
                    site = "jaxshuffle/" + path.rsplit("/jaxshuffle/", 1)[1]
                    break
            self.sites[site] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(compiler, "compile_or_get_cached", counting)

    @property
    def total(self) -> int:
        return sum(self.sites.values())

    def own(self) -> dict:
        return {s: c for s, c in self.sites.items() if s in OWN}


def test_concrete_parameters_run_no_programs_of_their_own(monkeypatch):
    jax.clear_caches()  # every shape is new: each eager jnp operation would be a program
    count = ProgramCounter(monkeypatch)
    params = randomizers.grr(np.array([0.5, 1.0, 2.0]), 10)
    # before: 19 programs (params.py 15, pair.py 2, ldp.py 2); after: the 4 of grr's own formula (ldp.py)
    assert count.total <= 6, count.sites
    pair = params.pair()
    lower = randomizers.grr_lower(np.array([0.5, 1.0, 2.0]), np.array([[2.0], [10.0]]))
    lower_pair = lower.pair()
    vr = vr_pair(np.array([2.0, 3.0, 4.0, 5.0, 6.0]), 0.1, 2.0)  # before: 27 programs, after: none
    custom = two_count_pair(0.6, 0.3, 0.1, np.array([0.2, 0.4]), 0.1)
    certified = vr.certified
    others = blanket_messages(np.array([10.0, 100.0])), blanket_messages(1e4, np.array([2.0, 3.0]), True)
    assert count.own() == {}, count.sites
    clone = stronger_clone_pair(np.array([0.5, 1.5]))
    assert count.own() == {"jaxshuffle/pair.py": 1}, count.sites  # e^eps0 is XLA's (numpy's exp rounds differently)
    # results keep their jax types and dtypes
    for x in (*jax.tree_util.tree_leaves((params, pair, lower, lower_pair, vr, custom, clone)), certified, *others):
        assert isinstance(x, jax.Array) and not x.weak_type
    assert params.p.dtype == jnp.float64 and certified.dtype == bool and pair.u.shape == (3,)
    assert lower_pair.r0.shape == (2, 3) and custom.shape == (2,)


def test_host_values_are_the_jnp_values():
    """The numpy forms against the eager jnp forms, bit for bit, subnormals (XLA:CPU flushes them),
    signed zeros, infinities and NaN included. Arrays committed to a device keep the jnp code."""
    edge = np.array([0.0, -0.0, 5e-324, 1e-310, -1e-310, 1e-300, 2.3e-16, 1e-8, 0.3, 1.0, 1.0 + 2 ** -52, 2.0,
                     np.e, 1e10, 1e300, np.inf, np.nan, -1.0])
    p = np.concatenate([np.exp(np.linspace(0.0, 30.0, 40)), np.array([1.0, 1e300, np.inf])])
    worst = np.ones_like(p)
    worst[:-1] = (p[:-1] - 1.0) / (p[:-1] + 1.0)
    beta = np.concatenate([worst[:, None] * np.array([0.0, 0.3, 1 - 1e-13, 1.0, 1 + 1e-13]),
                           np.broadcast_to(np.array([1e-310, -1e-310, -0.0]), (p.size, 3))], axis=1)
    beta = np.minimum(beta, worst[:, None])
    q = np.maximum(p[:, None] * 0.7, 1.0)
    eps0 = np.concatenate([np.linspace(0.0, 40.0, 41), [1e-310, 1e-300, 1e-17, 699.9, 700.0]])
    cases = [
        (lambda p, b, q: vr_pair(p, b, q).arrays(), (p[:, None], beta, q)),
        (lambda p, b, q: vr_pair(p, b, q0=q, q1=p).arrays(), (p[:, None], beta, q)),
        (lambda p, b, q: vr_pair(p, b, q).certified, (p[:, None], beta, q)),
        (lambda e, k: randomizers.grr(e, k), (eps0, 10.0)),
        (lambda e, k: randomizers.grr_lower(e, k), (eps0, 2.0)),
        (lambda e: randomizers.laplace(e), (eps0,)),
        (lambda e: stronger_clone_pair(e), (eps0,)),
        (lambda x: (jaxshuffle.pair.worst_case_beta(x), *jaxshuffle.pair.clone_fields(x)), (edge,)),
        (lambda n, m: blanket_messages(n, m, True), (edge, np.array(3.0))),
        (lambda n: blanket_messages(n), (edge,)),
    ]
    device = jax.devices()[0]
    for fn, args in cases:
        host = fn(*(jax.device_put(np.asarray(a, np.float64)) for a in args))  # uncommitted: numpy
        reference = fn(*(jax.device_put(np.asarray(a, np.float64), device) for a in args))  # committed: jnp
        for h, r in zip(jax.tree_util.tree_leaves(host), jax.tree_util.tree_leaves(reference), strict=True):
            assert h.dtype == r.dtype and h.shape == r.shape
            h, r = np.asarray(h), np.asarray(r)
            assert np.array_equal(np.isnan(h), np.isnan(r))
            bits = (lambda x: x.view(np.uint64)) if h.dtype == np.float64 else (lambda x: x)
            np.testing.assert_array_equal(bits(h[~np.isnan(h)]), bits(r[~np.isnan(r)]))


@pytest.mark.slow  # compiles the k-RR engine programs (~50 s with a fresh cache), as test_calibrate's tests do
def test_warm_calibration_runs_no_programs_of_its_own(monkeypatch):
    """The issue's k-RR calibration (two-count stage, blanket probes, re-certification), repeated
    after dropping JAX's in-memory caches: what a new process with a warm persistent cache does."""
    calibrate = lambda: jaxshuffle.calibrate_eps0("grr", 0.1, 1e5, 1e-6, k=10)  # noqa: E731
    first = calibrate()
    jax.clear_caches()
    count = ProgramCounter(monkeypatch)
    again = calibrate()
    # before: 111 programs looked up, 43 of them from params.py (19), pair.py (22) and calibrate.py (2);
    # after: 81, none of them (the rest: blanket/kernel.py 28, amplify.py 26, blanket/search.py 13, ldp.py 8, ...)
    assert count.own() == {}, count.sites
    assert count.total <= 100, count.sites
    for a, b in zip(first, again):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert isinstance(again.value, jax.Array) and again.value.dtype == jnp.float64


@pytest.mark.parametrize("bad, message", [
    (dict(eps0=-1.0, k=10), "eps0: must be a number in [0, 700], got -1"),
    (dict(eps0=1.0, k=2.5), "k: must be an integer >= 2, got 2.5"),
    (dict(eps0=np.array([1.0, np.nan]), k=10), "eps0: must be a number in [0, 700], got nan (first bad index (1,))"),
])
def test_host_validation_messages(bad, message):
    with pytest.raises(ValueError) as info:
        randomizers.grr(**bad)
    assert str(info.value) == message
