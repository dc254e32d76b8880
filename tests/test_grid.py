"""The one grid parser (jaxshuffle.sweeps.grid): syntax, float64 rules, sizes checked before allocation."""
import time

import numpy as np
import pytest

from jaxshuffle.cli import _build_parser, _cartesian
from jaxshuffle.sweeps import grid as G


def test_rules_are_float64_and_never_python_big_integers():
    t0 = time.perf_counter()
    assert float(G.eval_rule("1/n**(9**9**9)", np.array([10.0]))[0]) == 0.0
    assert float(G.eval_rule("2**10000", np.array([1.0]))[0]) == np.inf
    assert time.perf_counter() - t0 < 1.0
    np.testing.assert_allclose(G.eval_rule("min(1e-6, 1/n)", np.array([1e3, 1e7])), [1e-6, 1e-7])


@pytest.mark.parametrize("text", ["0.1:2:1000000000", "1e3..1e6:100000000000", "1:2:1e12"])
def test_huge_axes_are_refused_before_allocation(text):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"exceed the limit of .* per axis \(set JAXSHUFFLE_MAX_GRID"):
        G.parse_grid(text)
    assert time.perf_counter() - t0 < 0.5


def test_whole_grid_size_is_checked():
    spec = G.build_spec("general", "1..1e6:1000", 1e-6, {"eps0": "0.1:5:100000"})
    limit = r"grid: 76200000 points for randomizer .general. exceed the limit of 10000000"
    with pytest.raises(ValueError, match=limit):
        G.expand(spec)


def test_every_cli_command_reads_grids_through_the_one_parser():
    argv = ["epsilon", "--randomizer", "general", "--eps0", "1", "--n", "1e3..1e5:3", "--delta", "0.01/n,1e-6"]
    args = _build_parser(argv).parse_args(argv)
    assert args.n == pytest.approx([1e3, 1e4, 1e5]) and args.delta == ["0.01/n", 1e-6]
    _, cols = _cartesian({"eps0": args.opt_eps0, "n": args.n, "delta": args.delta})
    np.testing.assert_allclose(cols["delta"], [1e-5, 1e-6, 1e-6, 1e-6, 1e-7, 1e-6])
    argv = ["compare", "--randomizer", "grr", "--k", "3", "--eps0", "0.5:2:4", "--n", "1e3..1e4:2", "--delta", "1e-6"]
    args = _build_parser(argv).parse_args(argv)
    assert args.eps0 == pytest.approx([0.5, 1.0, 1.5, 2.0]) and len(args.n) == 2


def test_rounds_axis_grid_syntax():
    """--rounds takes the grid syntax, rounded to integers (duplicates dropped); anything below 1 is refused
    naming rounds and its range."""
    np.testing.assert_array_equal(G.parse_rounds("1..1000:4"), [1, 10, 100, 1000])
    np.testing.assert_array_equal(G.parse_rounds("1..3:5"), [1, 2, 3])  # 1, 1.32, 1.73, 2.28, 3 rounded
    np.testing.assert_array_equal(G.parse_rounds([5, 2.4]), [5, 2])
    assert G.parse_rounds("7").dtype == np.int64
    for bad in ("0", "0.4", "-1", "nan", "inf", "x", "", "1,,2"):
        with pytest.raises(ValueError, match=r"^rounds: must be integers >= 1"):
            G.parse_rounds(bad)
    with pytest.raises(ValueError, match="rounds: .* above the largest supported number of rounds"):
        G.parse_rounds("1e20")
