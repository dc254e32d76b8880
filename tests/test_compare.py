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
    lower = table.bounds["lower bound (Thm 5.1)"].value
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
