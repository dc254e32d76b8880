"""Sizes checked before allocation: rounds beyond what the default grid can compose are refused at once,
naming ``rounds`` (the argument the user gave) and the largest supported count."""

from __future__ import annotations

import time

import pytest

from jaxshuffle import randomizers as R
from jaxshuffle.accountant import composed_epsilon
from jaxshuffle.cli import main
from jaxshuffle.pld.distribution import MAX_DEFAULT_ROUNDS


def test_composed_epsilon_refuses_ten_million_rounds_in_under_a_second():
    R.grr(1.0, 10)  # the catalog's own first call is not the refusal's cost
    start = time.perf_counter()
    with pytest.raises(ValueError, match=rf"^rounds: 1e\+07 rounds .* at most {MAX_DEFAULT_ROUNDS} rounds"):
        composed_epsilon(R.grr(1.0, 10), 1e4, 10 ** 7, 1e-6)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("rounds,message", [("1e20", "above 4000"), ("4001", "above 4000")])
def test_cli_compose_refuses_rounds_beyond_the_default_grid(capsys, rounds, message):
    code = main(["compose", "--randomizer", "grr", "--k", "10", "--eps0", "1", "--n", "1e4", "--rounds", rounds,
                 "--delta", "1e-6"])
    err = capsys.readouterr().err
    assert code == 2 and "rounds:" in err and message in err and "Traceback" not in err


def test_cli_compose_refuses_counts_past_integer_precision_with_a_discretization(capsys):
    code = main(["compose", "--randomizer", "grr", "--k", "10", "--eps0", "1", "--n", "1e4", "--rounds", "1e20",
                 "--delta", "1e-6", "--discretization", "0.01"])
    err = capsys.readouterr().err
    assert code == 2 and "rounds: 1e+20 is above 2^53" in err and "-9.2e" not in err
