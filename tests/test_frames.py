"""A sweep's results as a pandas DataFrame, an xarray Dataset and a Parquet file (jaxshuffle.sweeps.frames).

One real sweep (general randomizer, n <= 16, 8 points: one small compiled program) checks that every
value comes back bit for bit; the other cases build their parameter columns with the grid expansion
itself (no search) and made-up result columns, which is all the conversions look at.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
xr = pytest.importorskip("xarray")

from jaxshuffle import sweeps as sw  # noqa: E402
from jaxshuffle.sweeps import frames  # noqa: E402
from jaxshuffle.sweeps import grid as grid_mod  # noqa: E402
from jaxshuffle.sweeps.store import SweepResult, write_results  # noqa: E402


@pytest.fixture(scope="module")
def res():
    # delta: a number and a rule in n, so delta (a data variable) differs along n within one delta_rule
    return sw.sweep("general", eps0="2,0.5", n="16,4", delta="1e-3,0.01/n", chunk_size=4, quiet=True)


def fake(randomizer, n, delta, options, seed=0, **kw) -> SweepResult:
    """A result over a real grid expansion (parameter columns as a sweep has them), results made up."""
    spec = grid_mod.build_spec(randomizer, n, delta, options, **kw)
    table, _, _ = grid_mod.expand(spec)
    size = len(table["n"])
    rng = np.random.default_rng(seed)
    cols = {"index": np.arange(size, dtype=np.int64), **table, "lower": rng.random(size),
            "upper": rng.random(size), "certified": rng.random(size) < 0.5,
            "status": np.asarray(["converged", "max_iter"] * size, dtype=str)[:size]}
    return SweepResult(cols, {"grid": spec, "fingerprint": "f00d", "complete": True})


def assert_same(a: np.ndarray, b: np.ndarray, key: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    if b.dtype.kind == "f":
        assert a.dtype == b.dtype == np.float64, key
        assert np.array_equal(a.view(np.uint64), b.view(np.uint64)), key  # bitwise, NaN included
    elif b.dtype.kind == "U":
        assert a.astype(str).tolist() == b.tolist(), key
    else:
        assert a.dtype == b.dtype, key
        assert np.array_equal(a, b), key


def test_to_pandas_keeps_every_column_bitwise(res):
    df = res.to_pandas()
    assert list(df.columns) == list(res.keys()) and len(df) == len(res) == 8
    for key in res.keys():
        assert_same(df[key].to_numpy(), res[key], key)
    assert df["upper"].dtype == np.float64 and df["index"].dtype == np.int64 and df["certified"].dtype == bool
    assert not isinstance(df["randomizer"].dtype, pd.CategoricalDtype)
    df.loc[0, "upper"] = -1.0  # a copy: the result is untouched
    assert res["upper"][0] != -1.0


def test_to_xarray_axes_are_dims_and_values_round_trip(res):
    ds = res.to_xarray()
    assert list(ds.dims) == ["randomizer", "eps0", "n", "delta_rule"]
    assert frames.axes(res) == list(ds.dims)
    # coordinates: the axis values in the grid's order
    assert ds["eps0"].values.tolist() == [2.0, 0.5] and ds["n"].values.tolist() == [16.0, 4.0]
    assert ds["delta_rule"].values.tolist() == ["0.001", "0.01/n"]
    assert ds["randomizer"].values.tolist() == ["general"]
    assert set(ds.data_vars) == set(res.keys()) - set(ds.dims)  # delta and index are data, not dims
    assert all(ds[k].dims == tuple(ds.dims) for k in ds.data_vars)
    assert ds.attrs["complete"] == 1 and ds.attrs["fingerprint"] == res.meta["fingerprint"]
    assert "certified upper bound" in ds["upper"].attrs["description"]
    # back to one row per point, reordered by the axes as the result is: every value bit for bit
    flat = ds.to_dataframe().reset_index()
    order = np.lexsort([res[d] for d in reversed(list(ds.dims))])  # result rows sorted like ...
    back = flat.sort_values(list(ds.dims), kind="stable").reset_index(drop=True)  # ... these rows
    for key in res.keys():
        assert_same(back[key].to_numpy(), res[key][order], key)
    # and pointwise: the cell at a row's coordinates holds that row's values
    for i in range(len(res)):
        cell = ds.sel(randomizer=res["randomizer"][i], eps0=res["eps0"][i], n=res["n"][i],
                      delta_rule=res["delta_rule"][i])
        for key in ds.data_vars:
            assert_same(cell[key].values.reshape(1), res[key][i:i + 1], key)
    # a complete sweep in index order is the C-order ravel of the dataset
    assert np.array_equal(ds["index"].values.ravel(), np.arange(len(res)))


def test_selected_result_is_a_smaller_product(res):
    ds = res.select(n=16).to_xarray()
    assert ds.sizes == {"randomizer": 1, "eps0": 2, "n": 1, "delta_rule": 2}
    assert_same(ds["upper"].values.ravel(), res.select(n=16)["upper"], "upper")


def test_rule_derived_option_is_a_data_variable(tmp_path):
    r = fake("grr", "4,16", "1e-3", {"eps0": "0.5,1,2", "k": "max(2, round(exp(eps0)))"})
    assert list(r.keys())[:4] == ["index", "randomizer", "eps0", "k"]
    ds = r.to_xarray()
    assert list(ds.dims) == ["randomizer", "eps0", "n", "delta_rule"]
    assert "k" in ds.data_vars and ds["k"].dims == tuple(ds.dims)
    assert np.array_equal(ds["k"].values.ravel(), r["k"])
    # loaded from the files (npz or CSV, with the JSON sidecar): the same dataset, bit for bit
    write_results(tmp_path, r, list(r.keys()))
    for loaded in (sw.load(tmp_path), sw.load(tmp_path / "results.csv")):
        assert loaded.to_xarray().identical(ds)
    # without its grid description (a bare CSV) k counts as an axis: not a full product, a clear error
    bare = SweepResult(r.columns)
    with pytest.raises(ValueError, match=r"of the axes \['randomizer', 'eps0', 'k', 'n', 'delta_rule'\] have no"):
        bare.to_xarray()
    assert list(bare.to_xarray(dims=["randomizer", "eps0", "n", "delta_rule"]).dims) == list(ds.dims)


def test_missing_combinations_raise_or_fill(res, monkeypatch):
    part = res.select(eps0=2)
    drop = SweepResult({k: np.concatenate([part[k][1:], res.select(eps0=0.5)[k]]) for k in res.keys()},
                       res.meta)  # 7 of 8 points (and rows out of order)
    with pytest.raises(ValueError, match=r"1 of 8 combinations .* have no point .*missing='fill'"):
        drop.to_xarray()
    ds = drop.to_xarray(missing="fill")
    assert ds.sizes == {"randomizer": 1, "eps0": 2, "n": 2, "delta_rule": 2}
    gone = dict(randomizer=part["randomizer"][0], eps0=2.0, n=part["n"][0], delta_rule=part["delta_rule"][0])
    cell = ds.sel(**gone)
    assert np.isnan(cell["upper"].item()) and np.isnan(cell["index"].item())
    assert ds["index"].dtype == np.float64 and ds["upper"].dtype == np.float64
    assert ds["certified"].dtype == object and ds["status"].dtype == object  # NaN marks the missing cell
    assert int(ds["index"].notnull().sum()) == 7
    for i in range(len(drop)):
        c = ds.sel(randomizer=drop["randomizer"][i], eps0=drop["eps0"][i], n=drop["n"][i],
                   delta_rule=drop["delta_rule"][i])
        for key in ("upper", "delta", "p"):
            assert_same(c[key].values.reshape(1), drop[key][i:i + 1], key)
        assert c["certified"].item() == drop["certified"][i] and c["status"].item() == drop["status"][i]
    with pytest.raises(ValueError, match="missing: must be one of"):
        drop.to_xarray(missing="nan")
    monkeypatch.setattr(frames, "MAX_GRID_POINTS", 7)  # fill allocates every cell: refused past the grid cap
    with pytest.raises(ValueError, match="missing='fill' would make 8 cells for 7 points"):
        drop.to_xarray(missing="fill")


def test_rounds_axis_is_a_dim():
    r = fake("general", "4,16", "0.01/n", {"eps0": "1,2"}, rounds="1,10,100")
    ds = r.to_xarray()
    assert ds.sizes == {"randomizer": 1, "eps0": 2, "n": 2, "rounds": 3, "delta_rule": 1}
    assert ds["rounds"].values.tolist() == [1.0, 10.0, 100.0]
    assert np.array_equal(ds["index"].values.ravel(), r["index"])  # grid order is the C order of the dims


def test_several_randomizers_options_they_lack_are_nan():
    r = fake(["general", "grr"], "8", "1e-3", {"eps0": "0.5,1", "k": "3,10"})
    with pytest.raises(ValueError, match="randomizers with different options"):
        r.to_xarray()
    ds = r.to_xarray(missing="fill")
    assert ds.sizes == {"randomizer": 2, "eps0": 2, "k": 3, "n": 1, "delta_rule": 1}
    assert np.isnan(ds["k"].values[0]) and ds["k"].values[1:].tolist() == [3.0, 10.0]
    assert int(ds["index"].notnull().sum()) == len(r) == 6
    assert ds["upper"].isel(randomizer=0, k=0).notnull().all()  # general: k = NaN
    assert ds["upper"].isel(randomizer=1, k=0).isnull().all()  # grr has no k = NaN


def test_duplicate_axis_values_and_bad_dims(res):
    with pytest.raises(ValueError, match=r"rows \d+ and \d+ have the same axis values"):
        res.to_xarray(dims=["eps0", "n"])
    with pytest.raises(ValueError, match="dims: need distinct column names"):
        res.to_xarray(dims=["eps0", "nope"])
    with pytest.raises(ValueError, match="not a sweep's result"):
        SweepResult({"upper": np.zeros(2)}).to_xarray()


def test_missing_optional_dependency_names_the_extra(res, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r'^SweepResult.to_pandas needs pandas.*pip install "jaxshuffle\[frames\]"$'):
        res.to_pandas()
    monkeypatch.setitem(sys.modules, "xarray", None)
    with pytest.raises(ImportError, match=r"to_xarray needs xarray.*jaxshuffle\[frames\]"):
        res.to_xarray()


def test_parquet_round_trip_and_file_rules(res, tmp_path, monkeypatch):
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "r.parquet"
    assert res.to_parquet(path) == path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.parquet"]  # only the path given, no leftovers
    back = pd.read_parquet(path)
    assert list(back.columns) == list(res.keys())
    for key in res.keys():
        assert_same(back[key].to_numpy(), res[key], key)
    meta = pq.read_schema(path).metadata[b"jaxshuffle"]
    assert res.meta["fingerprint"].encode() in meta
    with pytest.raises(FileExistsError, match="path: .* exists; pass overwrite=True"):
        res.to_parquet(path)
    res.select(n=4).to_parquet(path, overwrite=True)
    assert len(pd.read_parquet(path)) == 4
    with pytest.raises(IsADirectoryError, match="path: .* is a directory"):
        res.to_parquet(tmp_path)
    with pytest.raises(FileNotFoundError, match="path: the directory .* does not exist"):
        res.to_parquet(tmp_path / "no" / "r.parquet")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"to_parquet needs pyarrow.*jaxshuffle\[frames\]"):
        res.to_parquet(tmp_path / "other.parquet")
    assert sorted(os.listdir(tmp_path)) == ["r.parquet"]
