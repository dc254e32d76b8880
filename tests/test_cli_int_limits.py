"""Single-integer options have a stated range, both ends: ``sweep --chunk-size``, ``tune --steps``,
``plot --dpi`` and ``sandwich --grr``. A value outside it, not an integer, or huge (``1e30``,
``99999999999999999999999``, read as ``--rounds`` reads them: as a float, so nothing overflows or is
allocated) is refused with one line naming the option, the value and the range (exit 2); ``1e3`` is 1000.
"""
from __future__ import annotations

import pytest

from jaxshuffle import cli
from jaxshuffle.cli import sweep as cli_sweep
from jaxshuffle.cli import tune as cli_tune
from jaxshuffle.engine.matrix.forms import MAX_INPUTS

#: option -> (a command line taking it, the option's attribute, lowest, highest)
OPTIONS = {
    "chunk-size": (["sweep", "--randomizer", "general", "--eps0", "1", "--n", "10", "--delta", "1e-3"],
                   "chunk_size", 1, cli_sweep.MAX_CHUNK_SIZE),
    "steps": (["tune", "--query", "grr:k=2", "--n", "1e4", "--target", "1", "--delta", "1e-6"], "steps",
              0, cli_tune.MAX_STEPS),
    "dpi": (["plot", "results.csv", "-o", "figure.png"], "dpi", 1, cli_sweep.MAX_DPI),
    "grr": (["sandwich", "--eps0", "1", "--n", "3", "--delta", "1e-3"], "grr", 2, MAX_INPUTS),
}


def _parse(option: str, value: str):
    argv, _, _, _ = OPTIONS[option]
    argv = [*argv, f"--{option}", value]
    return cli._build_parser(argv).parse_args(argv)


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_limits_are_sensible(option):
    _, _, low, high = OPTIONS[option]
    assert 0 <= low < high <= 1 << 20


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_both_ends_and_float_notation_are_accepted(option):
    _, attr, low, high = OPTIONS[option]
    for text, want in ((str(low), low), (str(high), high), (f"{high:.6e}", high), ("1e1", 10)):
        value = getattr(_parse(option, text), attr)
        assert value == want and type(value) is int, (text, value)


BAD = ["{below}", "{above}", "1e30", "99999999999999999999999", "-99999999999999999999999", "1e400", "inf", "nan",
       "2.5", "ten", "0x10", ""]


@pytest.mark.parametrize("template", BAD)
@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_out_of_range_is_one_line_naming_option_value_and_range(capsys, option, template):
    argv, _, low, high = OPTIONS[option]
    value = template.format(below=low - 1, above=high + 1)
    status = cli.main([*argv, f"--{option}", value])
    out, err = capsys.readouterr()
    assert status == 2, err
    assert out == "" and "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"jaxshuffle: error: --{option}: must be an integer in [{low}, {high}]"), err
    assert err.rstrip().endswith(f"got {value!r}"), err
