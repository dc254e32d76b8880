"""A sweep's results as labelled data: a pandas DataFrame, an xarray Dataset, a Parquet file.

pandas, xarray and pyarrow are optional (``pip install "jaxshuffle[frames]"``); they are imported
only when one of these functions is called. Values are copied bit for bit: float64 columns stay
float64, booleans stay booleans, strings (randomizer names, delta rules, statuses) stay strings.

The grid axes of a sweep are its parameter columns other than those computed from the others:
``randomizer``, each randomizer option given as values (or taking its catalog default), ``n``,
``rounds`` (with a rounds axis) and ``delta_rule`` (the delta items as given, numbers or rules in
``n``). ``delta`` (a function of ``n`` and ``delta_rule``), options given as rules in other options
(``k="max(1, round(d/(exp(eps0)+1)))"``, recognised from the grid description in ``result.meta``)
and ``index`` are data like the results. Axes with one value are kept (``Dataset.squeeze`` drops them).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from jaxshuffle.sweeps.columns import COLUMNS, RESULT_ORDER, ROUNDS_RESULT_ORDER
from jaxshuffle.sweeps.files import fsync_dir
from jaxshuffle.sweeps.grid import MAX_GRID_POINTS

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr

_INSTALL = 'pip install "jaxshuffle[frames]"'
_MISSING = ("raise", "fill")


class _Result(Protocol):
    """What these functions read of a :class:`~jaxshuffle.sweeps.SweepResult` (whose methods call them, so this
    module does not import its class)."""

    columns: dict[str, np.ndarray]
    meta: dict

    @property
    def complete(self) -> bool: ...

    def __len__(self) -> int: ...


def _require(module: str, what: str):
    """Import an optional dependency, or raise a one-line ImportError naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{what} needs {module}, which is not installed: {_INSTALL}") from None


def to_pandas(result: _Result) -> pd.DataFrame:
    """The results as a DataFrame: one row per grid point, every column, in the result's order.

    Args:
      result: a :class:`~jaxshuffle.sweeps.SweepResult` (from ``sweep``, ``merge`` or ``load``;
        a ``select``-ed or partial one too).

    Returns:
      ``pandas.DataFrame`` with a default ``RangeIndex`` and the columns as stored: float64 and
      int64 (``index``) columns keep their dtype and every bit, booleans stay ``bool``, and string
      columns (``randomizer``, ``delta_rule``, ``status``, ...) get pandas' default string dtype
      (``object`` before pandas 3, ``str`` from pandas 3), not categorical.

    Raises:
      ImportError: pandas is not installed (the message names the ``frames`` extra).
    """
    pd = _require("pandas", "SweepResult.to_pandas")
    return pd.DataFrame({k: np.asarray(v) for k, v in result.columns.items()}, copy=True)


def axes(result: _Result) -> list[str]:
    """Names of the grid axes of a result, in the grid's order (the dimensions of :func:`to_xarray`).

    Args:
      result: a :class:`~jaxshuffle.sweeps.SweepResult`.

    Returns:
      The parameter columns (from ``randomizer`` to ``delta_rule``, before the results) other than
      ``delta`` and the options that the grid description in ``result.meta["grid"]`` gives as rules.
      A result loaded from a CSV without its JSON sidecar has no grid description: its rule-derived
      options then count as axes (pass ``dims=`` to :func:`to_xarray`).

    Raises:
      ValueError: the result has no ``randomizer`` or ``delta`` column (not a sweep's result).
    """
    names = list(result.columns)
    if "randomizer" not in names or "delta" not in names:
        raise ValueError("result: not a sweep's result (no 'randomizer' or 'delta' column); pass dims= to name "
                         f"the axes (columns: {', '.join(names[:12])})")
    block = names[names.index("randomizer"):names.index("delta")]
    spec = result.meta.get("grid") if isinstance(result.meta, dict) else None
    options = spec.get("options", {}) if isinstance(spec, dict) else {}
    results = set(RESULT_ORDER) | set(ROUNDS_RESULT_ORDER)
    return [k for k in block if k not in results and k != "index" and not isinstance(options.get(k), dict)]


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values in order of first appearance (NaN once) and each entry's position among them."""
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    return uniq[order], rank[np.asarray(inverse).ravel()]


def _where(dims, coords, cell) -> str:
    return ", ".join(f"{d}={coords[d][int(i)]!r}" for d, i in zip(dims, cell))


def _fill(column: np.ndarray, shape: tuple[int, ...], flat: np.ndarray) -> np.ndarray:
    """An array of ``shape`` with the column at the flat positions and a missing marker elsewhere."""
    kind = column.dtype.kind
    if kind == "f":
        out = np.full(shape, np.nan, dtype=column.dtype)
    elif kind in "iu":  # xarray's convention: integers with missing cells become float64
        out = np.full(shape, np.nan, dtype=np.float64)
    else:  # booleans and strings with missing cells: object arrays holding NaN there (xarray's convention)
        out = np.full(shape, np.nan, dtype=object)
    out.reshape(-1)[flat] = column
    return out


def to_xarray(result: _Result, *, missing: str = "raise", dims: Sequence[str] | None = None) -> xr.Dataset:
    """The results as a Dataset over the grid axes.

    Every grid axis (:func:`axes`) is a dimension whose coordinate holds its values in the order
    they first appear (the grid's order for a sweep's result); every other column (``index``,
    ``delta``, rule-derived options and the results) is a data variable over all the dimensions,
    with its meaning (``columns.COLUMNS``) as the ``description`` attribute. Only values present in
    the result become coordinates, so a ``select``-ed result has shorter axes.

    A result that is not a full product of its axes' values (a partial or interrupted sweep, one
    filtered on a result column, several randomizers whose options differ: an option a randomizer
    lacks is NaN in its rows) has combinations without a point. By default that raises, so no
    missing point can pass for a computed value; ``missing="fill"`` fills them as xarray does when
    reindexing: NaN in float64 variables, ``index`` becomes float64 (NaN where missing, so
    ``ds["index"].notnull()`` marks the points that exist), booleans and strings become ``object``
    arrays with NaN there.

    Args:
      result: a :class:`~jaxshuffle.sweeps.SweepResult`.
      missing: ``"raise"`` (default) or ``"fill"``, for combinations of axis values without a point.
      dims: the columns to use as dimensions, in order (default :func:`axes`); they must identify
        the points (no two rows with the same values).

    Returns:
      ``xarray.Dataset`` with ``dims`` as dimensions; ``attrs`` hold ``complete`` (0 or 1) and the
      sweep's ``fingerprint`` where known (numbers and strings only, so ``to_netcdf`` works).

    Raises:
      ImportError: xarray is not installed (the message names the ``frames`` extra).
      ValueError: ``missing`` or ``dims`` is invalid, two points share their axis values, or
        (``missing="raise"``) a combination of axis values has no point.
    """
    xr = _require("xarray", "SweepResult.to_xarray")
    if missing not in _MISSING:
        raise ValueError(f"missing: must be one of {', '.join(map(repr, _MISSING))}, got {missing!r}")
    dims = axes(result) if dims is None else list(dims)
    unknown = [d for d in dims if d not in result.columns]
    if unknown or len(set(dims)) != len(dims) or not dims:
        raise ValueError(f"dims: need distinct column names of the result, got {dims!r} (columns: "
                         f"{', '.join(result.columns)})")
    coords, codes = {}, []
    for d in dims:
        values, code = _codes(np.asarray(result.columns[d]))
        coords[d] = values
        codes.append(code)
    shape = tuple(len(coords[d]) for d in dims)
    total = math.prod(shape)
    order = np.lexsort(codes[::-1])  # rows in C order of their cells (the first dim varies slowest)
    cells = np.stack(codes)[:, order]
    same = np.all(cells[:, 1:] == cells[:, :-1], axis=0)
    if same.any():
        j = int(np.argmax(same))
        raise ValueError(f"dims: rows {order[j]} and {order[j + 1]} have the same axis values "
                         f"({_where(dims, coords, cells[:, j])}), so {dims} do not identify the points (a result "
                         "without its grid description, or a derived column as an axis? pass dims=)")
    absent = total - len(result)
    flat = np.ravel_multi_index(cells, shape) if absent and total <= MAX_GRID_POINTS else None
    if absent and missing == "raise":
        example = ""
        if flat is not None:  # the first cell without a point
            wrong = flat != np.arange(flat.size)  # flat is sorted and distinct
            k = int(np.argmax(wrong)) if wrong.any() else flat.size
            example = f" (e.g. {_where(dims, coords, np.unravel_index(k, shape))})"
        raise ValueError(f"result: {absent} of {total} combinations of the axes {dims} have no point{example}: a "
                         "partial or filtered sweep, or randomizers with different options; pass missing='fill' "
                         "for NaN there, select() a full product, or use to_pandas()")
    if absent and flat is None:
        raise ValueError(f"result: missing='fill' would make {total} cells for {len(result)} points (more than "
                         f"{MAX_GRID_POINTS}, JAXSHUFFLE_MAX_GRID); select() fewer randomizers or values first")
    data = {}
    for k, col in result.columns.items():
        if k in coords:
            continue
        col = np.asarray(col)
        arr = col[order].reshape(shape) if flat is None else _fill(col[order], shape, flat)  # flat: where absent
        attrs = {"description": COLUMNS[k]} if k in COLUMNS else {}
        data[k] = (dims, arr, attrs)
    ds_attrs: dict[str, int | str] = {"complete": int(result.complete)}
    if isinstance(result.meta.get("fingerprint"), str):
        ds_attrs["fingerprint"] = result.meta["fingerprint"]
    coord_vars = {d: (d, coords[d], {"description": COLUMNS[d]} if d in COLUMNS else {}) for d in dims}
    return xr.Dataset(data, coords=coord_vars, attrs=ds_attrs)


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def to_parquet(result: _Result, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the results (:func:`to_pandas`'s table) to one Parquet file, atomically.

    The table is written to a temporary file in the same directory and renamed onto ``path``, so
    ``path`` is either absent or complete; nothing else is created or left behind. The result's
    ``meta`` (grid, settings, environment) is kept as JSON in the file's schema metadata under the
    key ``jaxshuffle`` (``pyarrow.parquet.read_schema(path).metadata[b"jaxshuffle"]``).

    Args:
      result: a :class:`~jaxshuffle.sweeps.SweepResult`.
      path: the file to write; its directory must exist.
      overwrite: replace an existing file at ``path`` (default: refuse).

    Returns:
      The path written, as a ``Path``.

    Raises:
      ImportError: pandas or pyarrow is not installed (the message names the ``frames`` extra).
      FileExistsError: ``path`` exists and ``overwrite`` is False.
      IsADirectoryError: ``path`` is a directory.
      FileNotFoundError: ``path``'s directory does not exist.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"path: {path} is a directory; give a file name (e.g. {path / 'results.parquet'})")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"path: the directory {path.parent} does not exist")
    if path.exists() and not overwrite:
        raise FileExistsError(f"path: {path} exists; pass overwrite=True to replace it")
    frame = to_pandas(result)
    pa = _require("pyarrow", "SweepResult.to_parquet")
    pq = _require("pyarrow.parquet", "SweepResult.to_parquet")
    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = json.dumps(result.meta, default=_json_default, allow_nan=True)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"jaxshuffle": meta.encode()})
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(table, tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:  # a hard link fails if path appeared meanwhile: never clobbers a file written since the check
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise FileExistsError(f"path: {path} exists; pass overwrite=True to replace it") from None
            except OSError:  # a file system without hard links
                if path.exists():
                    raise FileExistsError(f"path: {path} exists; pass overwrite=True to replace it") from None
                os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return path
