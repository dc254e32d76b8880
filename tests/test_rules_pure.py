"""Grid rules are pure: no rule writes into an array it is given, and every function takes its own arity.

numpy ufuncs accept ``out`` as a positional argument, so ``floor(eps0, eps0)`` or ``max(a, b, n)``
would write into a grid axis; the rules refuse any other number of arguments and any keyword
before evaluation, and evaluate on read-only copies.
"""
from __future__ import annotations

import argparse
import re

import numpy as np
import pytest

from jaxshuffle.cli import sweep as cli_sweep
from jaxshuffle.sweeps import grid as G


def test_max_with_three_arguments_is_refused_and_n_unchanged():
    n = np.array([1e3, 1e4])
    with pytest.raises(ValueError, match=r"^delta: rule 'max\(1e-9, 1e-6, n\)' calls max\(\) with 3 argument\(s\); "
                                         r"max\(\) takes exactly 2 positional arguments and no keywords$"):
        G.eval_rule("max(1e-9, 1e-6, n)", n)
    np.testing.assert_array_equal(n, [1e3, 1e4])
    # nested, the intended maximum of three is allowed
    np.testing.assert_array_equal(G.eval_rule("max(1e-9, max(1e-6, 1/n))", n), [1e-3, 1e-4])
    np.testing.assert_array_equal(n, [1e3, 1e4])


def test_floor_with_out_argument_is_refused_by_eval_rule():
    eps0 = np.array([1.5, 2.5])
    with pytest.raises(ValueError, match=r"^k: rule 'floor\(eps0,eps0\)\+3' calls floor\(\) with 2 argument\(s\); "
                                         r"floor\(\) takes exactly 1 positional argument"):
        G.eval_rule("floor(eps0,eps0)+3", env={"eps0": eps0}, what="k")
    np.testing.assert_array_equal(eps0, [1.5, 2.5])


def test_floor_trap_refused_when_the_sweep_grid_is_built():
    """build_spec (what sweep() and the CLI call first) refuses the rule; a valid one keeps the eps0 axis."""
    with pytest.raises(ValueError, match=r"^k: rule 'floor\(eps0,eps0\)\+3' calls floor\(\) with 2 argument"):
        G.build_spec("grr", "1e3", "1e-6", {"eps0": "1.5,2.5", "k": "floor(eps0,eps0)+3"})
    table, groups, _ = G.expand(G.build_spec("grr", "1e3", "1e-6", {"eps0": "1.5,2.5", "k": "floor(eps0)+3"}))
    np.testing.assert_array_equal(table["eps0"], [1.5, 2.5])
    np.testing.assert_array_equal(table["k"], [4.0, 5.0])
    np.testing.assert_array_equal(groups[0].options["eps0"], [1.5, 2.5])


def test_sweep_command_refuses_the_floor_trap_before_computing(tmp_path):
    parser = argparse.ArgumentParser()
    cli_sweep.add_sweep_parser(parser.add_subparsers())
    out = tmp_path / "D"
    args = parser.parse_args(["sweep", "--randomizer", "grr", "--eps0", "1.5,2.5", "--k", "floor(eps0,eps0)+3",
                              "--n", "1e3", "--delta", "1e-6", "--out", str(out), "--quiet"])
    with pytest.raises(ValueError, match=r"^k: rule 'floor\(eps0,eps0\)\+3' calls floor\(\) with 2 argument"):
        args.func(args)
    assert not out.exists()  # refused before anything is written or computed


def test_delta_trap_refused_by_parse_delta():
    with pytest.raises(ValueError, match=r"^delta: rule 'max\(1e-9, 1e-6, n\)' calls max\(\)"):
        G.parse_delta("1e-8,max(1e-9, 1e-6, n)")


@pytest.mark.parametrize("name", sorted(G._ARITY))
def test_every_function_refuses_an_extra_argument_and_keywords(name):
    """One argument too many (the ufunc's positional ``out``), ``out=`` and ``where=`` are ValueErrors, statically
    and at call time, and the writable array handed in is unchanged."""
    k = G._ARITY[name][1]
    x = np.array([2.7, 3.2])
    saved = x.copy()
    args = ", ".join(["x"] * k)
    for rule, why in ((f"{name}({args}, x)", rf"calls {name}\(\) with {k + 1} argument"),
                      (f"{name}({args}, out=x)", rf"passes keyword\(s\) out= to {name}\(\)"),
                      (f"{name}({args}, where=x)", rf"passes keyword\(s\) where= to {name}\(\)"),
                      (f"{name}(*x)", r"unpacks arguments"),
                      (f"{name} + x", rf"uses the function '{name}' without calling it")):
        allowed = rf"{name}\(\) takes exactly {k} positional argument"
        with pytest.raises(ValueError, match=rf"^opt: rule {re.escape(repr(rule))} {why}.*{allowed}"):
            G.eval_rule(rule, env={"x": x}, what="opt")
        np.testing.assert_array_equal(x, saved)
        assert x.flags.writeable
    # the callables themselves check their arity too (a second line of defence behind check_rule)
    fn = G._FUNCS[name]
    with pytest.raises(ValueError, match=allowed):
        fn(*([x] * (k + 1)))
    with pytest.raises(ValueError, match=allowed):
        fn(*([x] * k), out=x)
    with pytest.raises(ValueError, match=allowed):
        fn(*([x] * k), where=x > 3)
    np.testing.assert_array_equal(x, saved)
    # the documented arity works
    assert np.all(np.isfinite(G.eval_rule(f"{name}({args})", env={"x": x}, what="opt")))
    np.testing.assert_array_equal(x, saved)


@pytest.mark.parametrize("rule", ["n", "-n", "floor(n)", "round(n/3)", "min(1e-6, 1/n)", "max(1, log(n))",
                                  "sqrt(n) + exp(-n) + ceil(log10(n))"])
def test_valid_rules_leave_their_inputs_unchanged(rule):
    n = np.array([10.5, 1e3])
    other = np.array([[0.5], [2.0]])
    value = G.eval_rule(rule, n)
    np.testing.assert_array_equal(n, [10.5, 1e3])
    assert n.flags.writeable  # the caller's array keeps its flags
    assert value.shape == n.shape
    assert G.eval_rule(rule, env={"n": n, "e": other}).shape == (2, 2)  # broadcast with another axis
    np.testing.assert_array_equal(n, [10.5, 1e3])
    np.testing.assert_array_equal(other, [[0.5], [2.0]])


def test_rule_result_cannot_write_back_into_the_input():
    """A rule that is just a name returns a read-only copy, never the caller's array."""
    n = np.array([1e3, 1e4])
    value = G.eval_rule("n", n)
    assert not np.shares_memory(value, n)
    with pytest.raises(ValueError):
        value[0] = 0.0
    np.testing.assert_array_equal(n, [1e3, 1e4])
