"""compare(): every bound side by side; certified ones above the lower bound; tidy table."""
import csv

import numpy as np
import pytest

from jaxshuffle.comparison import compare

pytestmark = pytest.mark.slow  # module fixtures enumerate and compile for ~30-70 s


@pytest.fixture(scope="module")
def table():
    return compare("grr", np.array([0.5, 1.0, 3.0])[:, None], np.array([1e3, 1e4])[None, :], 1e-6, k=4)


def test_certified_bounds_lie_above_the_lower_bound(table):
    lower = table.bounds["lower bound (Thm 5.1, exact datasets)"].value  # k-RR: the exact datasets are folded in
    best = table.bounds["certified upper (jaxshuffle)"].value
    for name, b in table.bounds.items():
        assert not np.any(np.isnan(b.value)), name
        assert np.all(b.value[~b.valid] == np.inf), name
        if b.kind == "certified":
            assert np.all(b.value[b.certified] >= lower[b.certified] * (1 - 1e-9)), name
            assert np.all(b.value[b.certified] >= best[b.certified] * (1 - 1e-6)), name
    assert np.all(table.bounds["certified upper (jaxshuffle)"].certified)
    assert not np.any(table.bounds["paper Thm 4.7 (numerical)"].certified)  # 4-ary RR: beta below worst case


def test_rows_and_csv(table, tmp_path):
    rows = table.rows()
    assert len(rows) == table.eps0.size * len(table.bounds)
    assert {"eps0", "n", "delta", "bound", "kind", "epsilon", "valid", "certified", "ratio", "k"} <= set(rows[0])
    path = tmp_path / "cmp.csv"
    table.to_csv(path)
    with open(path) as fh:
        assert len(list(csv.DictReader(fh))) == len(rows)


def test_bad_randomizer_name():
    with pytest.raises(ValueError, match="^randomizer"):
        compare("no-such-thing", 1.0, 1e4, 1e-6)


@pytest.mark.parametrize("upper_from", ["best", "worst-case", "blanket"])
def test_upper_from_picks_amplifys_source(upper_from):
    """compare's certified row is amplify's upper under the same rule; with the mechanism in play
    (k-RR, not worst-case) the worst-case and blanket pairs get their own rows, upper = their minimum."""
    from jaxshuffle.accountant import amplify
    from jaxshuffle.randomizers import CATALOG

    e0, n = np.array([[0.5], [2.0]]), np.array([[20.0]])
    table = compare("grr", e0, n, 1e-3, k=3, upper_from=upper_from)
    entry = CATALOG["grr"]
    rep = amplify(entry.fn(eps0=e0, k=3), n, 1e-3, lower_params=entry.lower(eps0=e0, k=3), upper_from=upper_from)
    upper = table.bounds["certified upper (jaxshuffle)"].value
    np.testing.assert_array_equal(upper, np.asarray(rep.upper))
    if upper_from == "worst-case":
        assert "blanket pair (jaxshuffle)" not in table.bounds
        np.testing.assert_array_equal(table.bounds["lower bound (Thm 5.1)"].value, np.asarray(rep.lower))
    else:
        wc = table.bounds["worst-case pair (jaxshuffle)"].value
        bl = table.bounds["blanket pair (jaxshuffle)"].value
        np.testing.assert_array_equal(bl, np.asarray(rep.blanket))
        np.testing.assert_array_equal(upper, np.minimum(wc, bl) if upper_from == "best" else bl)
        low = table.bounds["lower bound (Thm 5.1, exact datasets)"].value
        assert np.all(low <= bl) and np.all(low <= wc)


def test_upper_from_bad_values():
    with pytest.raises(ValueError, match="^upper_from"):
        compare("grr", 1.0, 20, 1e-3, k=3, upper_from="smallest")
    with pytest.raises(ValueError, match="^upper_from: 'blanket' needs"):
        compare("general", 1.0, 20, 1e-3, upper_from="blanket")


def test_cli_upper_from(tmp_path, capsys):
    from jaxshuffle import cli

    base = ["compare", "--randomizer", "grr", "--k", "3", "--eps0", "0.5,2", "--n", "20", "--delta", "1e-3",
            "--out", str(tmp_path)]
    assert cli.main([*base, "--upper-from", "worst-case", "--json"]) == 0
    rows = __import__("json").loads(capsys.readouterr().out)
    names = {r["bound"] for r in rows}
    assert "certified upper (jaxshuffle)" in names and "blanket pair (jaxshuffle)" not in names
    assert cli.main([*base, "--upper-from", "nope"]) == 2
    err = capsys.readouterr().err
    assert "jaxshuffle: error:" in err and "--upper-from" in err and "Traceback" not in err


@pytest.mark.slow
def test_sampled_rows_bracket_the_exact_counterexample_and_flag_the_pitfalls(tmp_path, capsys):
    """sample_rate < 1: binary RR at eps0 = 1, g = 0.5, n = 2, delta = 0.01, whose exact epsilon (the other
    user holding x0) is log(e - delta (e + 1)^2 / (g^2 e)) = 0.922207 (docs/math.md 12.10; enumerated in
    tests/test_subsampling.py). The certified rows (at g and at full participation) are not below it, the
    lower bound not above it, and both pitfalls are below it: neither is an upper bound."""
    import json
    import math

    from jaxshuffle import cli
    from jaxshuffle.comparison import PITFALL_FORMULA, PITFALL_PAIR, SAMPLED_FULL

    g, delta = 0.5, 1e-2
    exact = math.log(math.e - delta * (math.e + 1) ** 2 / (g * g * math.e))
    t = compare("grr", np.array([[1.0]]), np.array([[2.0]]), delta, k=2, sample_rate=g)
    value = {name: float(b.value[0, 0]) for name, b in t.bounds.items()}
    assert exact <= value["certified upper (jaxshuffle)"] <= exact + 1e-5
    assert exact <= value[SAMPLED_FULL]
    assert value["lower bound (exact datasets)"] <= exact
    assert value[PITFALL_PAIR] < exact - 0.1 and value[PITFALL_FORMULA] < exact - 0.1
    assert {t.bounds[k].kind for k in (PITFALL_PAIR, PITFALL_FORMULA)} == {"pitfall"}
    assert not any(b.certified.any() for k, b in t.bounds.items() if b.kind != "certified")
    assert "paper Thm 4.7 (numerical)" not in t.bounds  # full participation's rows are left out

    capsys.readouterr()
    assert cli.main(["compare", "--randomizer", "grr", "--k", "2", "--eps0", "1", "--n", "2", "--delta", "0.01",
                     "--sample-rate", "0.5", "--out", str(tmp_path / "c"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["bound"]: r["kind"] for r in rows}[PITFALL_PAIR] == "pitfall"
    assert cli.main(["compare", "--randomizer", "grr", "--k", "2", "--eps0", "1", "--n", "2", "--delta", "0.01",
                     "--sample-rate", "0", "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "--sample-rate: the probability that a user takes part" in err and len(err.strip().splitlines()) == 1
