"""Table-driven bad inputs of the Python API: every one raises ValueError/TypeError naming the parameter.

Each case asserts the parameter's user-facing name and the offending value in the message (no
traceback from inside the engine, no NaN, no silently wrong value). The catalog part is generated
from the rows' own option specifications, so a new row is covered by adding it to the catalog.
The CLI's share of the table is in tests/test_cli*.py.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import jaxshuffle as js
import jaxshuffle.randomizers as R
from jaxshuffle import closed_forms as cf
from jaxshuffle import exact


def _bad_values(arg) -> list[float]:
    """Values outside an option's range: below, above, NaN, inf where not allowed, fractional ints."""
    out = [math.nan]
    out.append(arg.low - 1.0 if not arg.low_open else arg.low)
    if math.isfinite(arg.high):
        out.append(arg.high + 1.0 if not arg.high_open else arg.high)
        out.append(math.inf)
    else:
        out.append(math.inf)
    if arg.kind == "int":
        out.append(arg.low + 0.5)
    return out


def _catalog_cases():
    for name, entry in sorted(R.CATALOG.items()):
        for arg in entry.args:
            for bad in _bad_values(arg):
                opts = dict(entry.example)
                opts[arg.name] = bad
                yield pytest.param(name, opts, arg.name, bad, id=f"{name}-{arg.name}={bad}")


_CATALOG_CASES = list(_catalog_cases())


def _shown(value: float) -> str:
    return "nan" if math.isnan(value) else ("inf" if math.isinf(value) else f"{value:.17g}")


@pytest.mark.parametrize("name,opts,param,bad", _CATALOG_CASES)
def test_catalog_option_out_of_range(name, opts, param, bad):
    with pytest.raises(ValueError) as err:
        R.build(name, **opts)
    msg = str(err.value)
    assert msg.startswith(f"{param}: "), msg
    assert f"got {_shown(bad)}" in msg, msg


@functools.lru_cache(maxsize=1)
def _coarse_round():
    """A coarse round (k-RR at n = 1000 on a 0.01 grid): built once, in well under a second."""
    from jaxshuffle.accountant.pld import shuffled_round

    return shuffled_round(R.grr(1.0, 10), 1000, discretization=0.01)


def _engine_cases():
    from jaxshuffle import blanket_lattice as la
    from jaxshuffle.accountant.compose import compose, epsilon_over_rounds

    pair = js.stronger_clone_pair(1.0)
    form = ([0.5, 0.3, 0.2], [1.0, -0.5, 0.2])
    cases = [
        ("delta", lambda d: js.epsilon(pair, 100, d), [0.0, 1.0, -1e-3, 2.0, math.nan, math.inf]),
        ("n", lambda n: js.epsilon(pair, n, 1e-3), [0.0, -5.0, 1.5, math.nan, math.inf]),
        ("eps0", js.stronger_clone_pair, [-1.0, 701.0, math.nan, math.inf]),
        ("eps0", js.standard_clone_pair, [-0.5, 710.0, math.nan]),
        ("p", lambda p: js.vr_pair(p, 0.1, 2.0), [0.5, math.nan, -1.0]),
        ("beta", lambda b: js.vr_pair(2.0, b, 2.0), [-0.1, 0.5, math.nan]),
        ("q", lambda q: js.vr_pair(2.0, 0.1, q), [0.5, math.nan]),
        ("u", lambda u: js.two_count_pair(u, 0.5, 0.0, 0.1, 0.1), [-0.1, 1.5, math.nan]),
        ("r0", lambda r: js.two_count_pair(0.5, 0.5, 0.0, r, 0.1), [-0.1, 1.5, math.nan]),
        ("eps", lambda e: js.hockey_stick(pair, 100, e), [math.nan]),
        ("delta", lambda d: js.amplify(R.grr(1.0, 3), 100, d), [0.0, 1.0, math.nan]),
        ("n", lambda n: js.amplify(R.grr(1.0, 3), n, 1e-3), [0.0, 2.5, math.nan]),
        ("target_eps", lambda t: js.calibrate_eps0("grr", t, 100, 1e-3, k=3), [0.0, -1.0, math.nan, math.inf]),
        ("delta", lambda d: cf.fmt23_closed_form(1e4, 1.0, d), [0.0, 1.0, math.nan]),
        ("n", lambda n: cf.fmt23_closed_form(n, 1.0, 1e-6), [1.0, 2.5, math.nan]),
        ("eps0", lambda e: cf.efmrtt19(1e4, e, 1e-6), [-1.0, math.nan, math.inf]),
        ("delta", lambda d: exact.epsilon(exact.grr_matrix(3, 1.0), 0, 1, [0], d), [0.0, 1.0, math.nan]),
        # sizes, checked before allocating (tests/test_sizes_user_terms.py): 2^40 bins asked numpy for 8 TiB
        ("bins", lambda b: la.lattice_value(*form, 100, bins=b), [2.0 ** 40, 2.0 ** 27, 1000.0, 2.0, math.nan]),
        ("n", lambda n: la.lattice_value(*form, n), [2.5, 0.0, math.nan, math.inf]),
        ("sds", lambda x: la.lattice_value(*form, 100, sds=x), [-1.0, 0.0, math.nan]),
        ("counts", lambda T: epsilon_over_rounds(_coarse_round(), T, 1e-6), [1e20, 2.0 ** 53 + 2, 0.5]),
        ("rounds[0] count", lambda T: compose([(_coarse_round(), T)], 1e-6), [2 ** 53 + 2, 10 ** 20]),
    ]
    for param, fn, values in cases:
        for v in values:
            yield pytest.param(param, fn, v, id=f"{param}={v}-{getattr(fn, '__name__', 'call')}")


@pytest.mark.parametrize("param,fn,bad", list(_engine_cases()))
def test_engine_and_accountant_inputs(param, fn, bad):
    with pytest.raises(ValueError) as err:
        fn(bad)
    msg = str(err.value)
    assert msg.startswith(f"{param}: "), msg
    assert f"got {_shown(bad)}" in msg, msg


@pytest.mark.parametrize("call,param", [
    (lambda: js.epsilon("not a pair", 100, 1e-3), "pair"),
    (lambda: js.amplify("grr", 100, 1e-3), "randomizer"),
    (lambda: R.build("no-such-row", eps0=1.0), "randomizer"),
    (lambda: R.build("grr", eps0=1.0), "k"),
    (lambda: R.build("grr", eps0=1.0, k=3, zz=1), "zz"),
    (lambda: js.calibrate_eps0("metric-laplace", 0.5, 100, 1e-3), "randomizer"),
    (lambda: js.epsilon(js.stronger_clone_pair(np.ones(3)), np.ones(2), 1e-3), "shapes"),
    (lambda: js.configure(cache=3), "cache"),
])
def test_wrong_kinds_and_names(call, param):
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    assert str(err.value).startswith(param), str(err.value)


def _reproducers():
    """The silent-wrong and unclear-error reproducers found by trying the newer surfaces as a user would:
    ``(call, parameter, words the message must hold)``. Each once answered wrongly or with a traceback."""
    from jaxshuffle.accountant import composed_epsilon
    from jaxshuffle.blanket_matrix import matrix_bounds
    from jaxshuffle.pld.interop import from_dp_accounting
    from jaxshuffle.sweeps.grid import eval_rule

    complex_matrix = np.array([[0.5 + 1j, 0.5], [0.5, 0.5]])
    rows = [
        # a 5-input matrix on 3-input parameters: certified 0.1080, below grr(1, 3)'s own lower bound 0.13057
        (lambda: js.amplify(R.with_matrix(R.grr(1.0, 3), exact.grr_matrix(5, 1.0)), 1e3, 1e-6), "matrix",
         ["as many rows", "(3)", "5 rows"]),
        # a 5-LDP matrix on eps0 = 1 parameters: the eps0 = 1 worst case had been reported
        (lambda: R.with_matrix(R.grr(1.0, 3), exact.grr_matrix(3, 5.0)), "matrix", ["eps0 = 5", "eps0 = 1"]),
        # a complex matrix had its imaginary part dropped: a certified upper of 0.0
        (lambda: R.with_matrix(R.grr(1.0, 2), complex_matrix), "matrix", ["real numbers", "complex128"]),
        (lambda: matrix_bounds(complex_matrix, 1e3, 1e-6), "matrix", ["real numbers", "complex128"]),
        (lambda: matrix_bounds(np.array([[0.5, 0.5], [0.5, "a"]], dtype=object), 1e3, 1e-6), "matrix",
         ["real numbers", "object"]),
        # numpy's third positional argument is ``out``: rules wrote into the grid
        (lambda: eval_rule("floor(eps0,eps0)+3", env={"eps0": np.array([1.5, 2.5])}, what="k"), "k",
         ["floor()", "2 argument"]),
        (lambda: eval_rule("max(1e-9, 1e-6, n)", np.array([1e3, 2e3])), "delta", ["max()", "3 argument"]),
        # a valid T that asked XLA for 26.8 GB; a T that overflowed the int64 cast to -9.2e18
        (lambda: composed_epsilon(R.grr(1.0, 10), 1e4, 10 ** 7, 1e-6, blanket_points=0), "rounds",
         ["at most 4000 rounds"]),
        (lambda: composed_epsilon(R.grr(1.0, 10), 1e4, 1e20, 1e-6, blanket_points=0), "rounds",
         ["at most 2^53", "got 1e+20"]),
        # a NaN utility was blamed on eps0
        (lambda: js.tune([js.query("grr", n=1e3, k=3)], lambda e: float("nan"), 1.0, 1e-6, steps=0), "utility",
         ["finite value", "nan"]),
        (lambda: from_dp_accounting(object(), 1e-3), "pessimistic", ["PrivacyLossDistribution"]),
    ]
    return [pytest.param(*row, id=f"{row[1]}-{i}") for i, row in enumerate(rows)]


@pytest.mark.parametrize("call,param,words", _reproducers())
def test_the_reproducers_are_refused_naming_the_parameter(call, param, words):
    with pytest.raises((ValueError, TypeError)) as err:
        call()
    msg = str(err.value)
    assert msg.startswith(f"{param}: "), msg
    assert "\n" not in msg and all(w in msg for w in words), msg


def test_a_refused_rule_leaves_its_inputs_unchanged():
    from jaxshuffle.sweeps.grid import eval_rule

    n = np.array([1e3, 2e3])
    with pytest.raises(ValueError):
        eval_rule("max(1e-9, 1e-6, n)", n)
    assert n.tolist() == [1e3, 2e3]


def test_the_table_is_large():
    assert len(_CATALOG_CASES) + len(list(_engine_cases())) >= 250
