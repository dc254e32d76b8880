"""Grid sweeps at scale: certified amplified epsilon over cartesian parameter grids.

:func:`sweep` evaluates every combination of a randomizer's options (``eps0``, ``k``, ...),
the number of users ``n`` and ``delta`` (a number or a rule in ``n`` such as ``0.01/n``)
and returns, per grid point, the same numbers as :func:`jaxshuffle.accountant.amplify` (with
the catalog's lower-bound parameters, as the CLI passes them): ``upper`` (certified upper
bound), ``lower`` (Theorem 5.1 lower bound where the catalog has lower-bound parameters,
else 0), ``paper`` (the paper's Theorem 4.7 value: a guarantee only where
``paper_certified``), ``certified`` and ``status``. The package exports it as
``jaxshuffle.sweep``; this module (``jaxshuffle.sweeps``) also has :func:`merge`, :func:`load`
and the grid parsers::

    from jaxshuffle import sweep
    res = sweep("grr", k=10, eps0="0.5..8:16", n="1e3..1e6:7", delta="0.01/n", out="runs/grr")
    res["upper"], res["lower"], res["paper"]          # numpy columns, one entry per grid point

How it runs
-----------
Each grid point needs a few epsilon searches on two-count pairs ("jobs": the worst-case-beta
pair, the (u+v)-scaled pair, the paper's pair, the lower-bound pairs), exactly those of
:func:`jaxshuffle.accountant.amplify`: the sweep takes them from
:func:`~jaxshuffle.accountant.amplification_jobs` and combines their results with
:func:`~jaxshuffle.accountant.combine_amplification`, running the searches itself. Identical
jobs are computed once (for a worst-case randomizer such as ``general`` the paper's pair *is*
the worst-case pair). Jobs are grouped over the whole
grid into window-size buckets (:func:`jaxshuffle.plan.bucket_plans`), each bucket is cut
into fixed-size chunks (padded), so each bucket is ONE compiled XLA program; small buckets are
merged into the next larger window when that is cheaper than compiling another program
(the larger window is still certified; ``merge_buckets=False`` reproduces ``amplify`` exactly).
With several devices each chunk is sharded over a 1-D mesh (``jax.shard_map``): the results
are identical to the single-device run.

Files (``out=DIR``)
-------------------
* ``DIR/sweep.json``      manifest: the grid, settings, fingerprint and chunk layout.
* ``DIR/chunks/cNNNNNN.npz`` one file per finished chunk, written to a temporary name, fsync'd
  and renamed (atomic): a chunk file is either complete or absent, so a SIGKILL at any moment
  loses at most the chunk in flight. Rerunning the same command skips finished chunks.
* ``DIR/results.csv``     long format, one row per grid point; rows of finished points are
  appended (and fsync'd) while the sweep runs, and the file is rewritten sorted by ``index``
  (atomically) when the sweep completes. On a rerun it is rebuilt from the chunk files first.
* ``DIR/results.npz``     the same columns as arrays (written when complete).
* ``DIR/results.json``    sidecar: library/JAX versions, methods, tolerances, devices,
  float64 flag, grid, layout, timing, ``complete``.

Grid syntax (CLI and string arguments)
--------------------------------------
* ``1,2,5``          a list;
* ``0.5:4:8``        8 evenly spaced values from 0.5 to 4 (``numpy.linspace``, ends included);
* ``1e3..1e6:7``     7 log-spaced values from 1e3 to 1e6 (``numpy.geomspace``, ends included);
* pieces combine: ``0.1,1:5:5,1e2..1e3:3``. ``n`` and integer options are rounded to integers
  and duplicates dropped (order kept).
* an option may instead be a rule in the randomizer's other (grid) options, evaluated per point:
  ``k="max(1, round(d/(exp(eps0)+1)))"`` (the optimal subset size), ``l="round(exp(eps0)+1)"``;
  integer options are rounded.
* ``delta`` also accepts rules in ``n``: ``0.01/n``, ``1/n**1.1``, ``min(1e-6, 1/n)``
  (numbers, ``n``, ``+ - * / **``, ``log``, ``log10``, ``exp``, ``sqrt``, ``min``, ``max``),
  and lists mixing both (``1e-6,0.01/n``); the CSV has both ``delta_rule`` and ``delta``.

Multi-host recipe
-----------------
Run the same command on every host with ``--shard i/N`` (``i = 0..N-1``)::

    host i:  jaxshuffle sweep --randomizer grr --k 10 --eps0 0.5..8:64 --n 1e3..1e8:64 \\
                 --delta 0.01/n --shard i/N --out run-i        # or one shared --out directory
    then:    jaxshuffle sweep merge run-0 run-1 ... run-(N-1) --out merged

Process ``i`` takes every N-th chunk of the global layout (interleaved, so large and small
windows are spread evenly), uses all of its local devices, and on completion writes its shard
file ``shard-i-of-N.npz`` (job results + manifest). With ``--shard`` the buckets and chunks are
derived from the grid alone (a CPU cost model and 1 GiB chunks), so every host, CPU or GPU,
cuts the grid the same way; give the same ``--chunk-size``/``--memory`` on every host if you
set them. A shared ``--out`` directory works too (chunk files are written atomically); the
process that completes the last chunk also writes ``results.*``. ``merge`` checks that the inputs are
shards of the same sweep (fingerprint), that every job is present exactly once (or with
identical values), and writes ``results.csv/.npz/.json``. Inputs may be sweep directories
(finished or not: ``--allow-partial`` writes the points finished so far) or shard files.

Progress goes to stderr (``chunk i/N``, points done, points/s, ETA); ``quiet=True`` silences it.
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import datetime
import hashlib
import io
import itertools
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

__all__ = [
    "SweepResult", "sweep", "merge", "load", "parse_grid", "parse_delta", "default_grid",
    "add_sweep_parser", "add_plot_parser", "main", "COLUMNS",
]

STATUS_NAMES = ("converged", "zero", "infinite", "max-iter", "error-limited", "invalid", "unbounded")
SOURCE_NAMES = ("worst-case", "scaled", "tv")
_MAX_ITER = 60

#: Result columns after the parameter columns, with their meaning (also in the JSON sidecar).
COLUMNS = {
    "index": "grid point number (row order of the cartesian product)",
    "randomizer": "catalog name (jaxshuffle.randomizers.CATALOG)",
    "n": "number of users",
    "delta_rule": "delta as given (a number or a rule in n)",
    "delta": "delta of the (eps, delta) guarantee",
    "lower": "lower bound on the shuffled mechanism's eps (Theorem 5.1 pair; 0 where has_lower is false)",
    "upper": "certified upper bound on eps: worst-case-beta pair (and the (u+v)-scaled pair if scaled_variant), "
             "0 if delta >= beta",
    "paper": "paper's Theorem 4.7 value at the randomizer's beta (NOT a guarantee unless paper_certified)",
    "certified": "upper is a sound (certified) upper bound",
    "status": "engine status of the search behind upper (" + ", ".join(STATUS_NAMES) + ")",
    "worst_case": "certified eps of the worst-case-beta pair (bound for any randomizer with this p, q)",
    "upper_source": "which sound bound gave upper (" + ", ".join(SOURCE_NAMES) + ")",
    "paper_certified": "the paper's pair has w = 0 (then paper is sound and equals worst_case)",
    "has_lower": "lower comes from a Theorem 5.1 pair",
    "status_lower": "engine status of the best lower-bound search",
    "status_paper": "engine status of the paper-value search",
    "p": "variation-ratio parameter p (largest probability ratio)",
    "beta": "variation-ratio parameter beta (largest total variation)",
    "q": "variation-ratio blanket ratio q",
}
_RESULT_ORDER = ("lower", "upper", "paper", "certified", "status", "worst_case", "upper_source",
                 "paper_certified", "has_lower", "status_lower", "status_paper", "p", "beta", "q")
_STRING_COLUMNS = {"randomizer", "delta_rule", "status", "upper_source", "status_lower", "status_paper"}
_BOOL_COLUMNS = {"certified", "paper_certified", "has_lower"}


# ----------------------------------------------------------------------------------------
# Grid syntax


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"invalid number {text!r} (grid syntax: 1,2,5 | 0.5:4:8 | 1e3..1e6:7)") from None


def _count(text: str, piece: str) -> int:
    try:
        k = int(float(text))
    except ValueError:
        k = -1
    if k < 1 or float(text) != k:
        raise ValueError(f"invalid grid {piece!r}: the count after ':' must be an integer >= 1")
    return k


def parse_grid(text, *, integer: bool = False) -> np.ndarray:
    """Values of a grid: ``"1,2,5"``, ``"0.5:4:8"`` (linspace), ``"1e3..1e6:7"`` (geomspace), or a mix.

    Numbers and sequences are accepted as they are. ``integer=True`` rounds to integers.
    Exact duplicates are dropped, order kept. Raises ValueError on bad syntax.
    """
    if isinstance(text, str):
        values: list[float] = []
        for piece in text.split(","):
            piece = piece.strip()
            if not piece:
                raise ValueError(f"invalid grid {text!r}: empty item")
            if ".." in piece:
                head, _, k = piece.rpartition(":")
                if not head or ".." not in head:
                    raise ValueError(f"invalid grid {piece!r}: a log grid is A..B:K (e.g. 1e3..1e6:7)")
                a, b = head.split("..", 1)
                a, b, k = _number(a), _number(b), _count(k, piece)
                if not (a > 0 and b > 0):
                    raise ValueError(f"invalid grid {piece!r}: a log grid needs positive ends")
                values.extend(np.geomspace(a, b, k).tolist() if k > 1 else [a])
            elif ":" in piece:
                parts = piece.split(":")
                if len(parts) != 3:
                    raise ValueError(f"invalid grid {piece!r}: a linear grid is A:B:K (e.g. 0.5:4:8)")
                a, b, k = _number(parts[0]), _number(parts[1]), _count(parts[2], piece)
                values.extend(np.linspace(a, b, k).tolist() if k > 1 else [a])
            else:
                values.append(_number(piece))
        arr = np.asarray(values, dtype=np.float64)
    else:
        arr = np.atleast_1d(np.asarray(text, dtype=np.float64)).ravel()
    if integer:
        arr = np.round(arr)
    _, first = np.unique(arr, return_index=True)
    return arr[np.sort(first)]


_FUNCS = {"log": np.log, "log10": np.log10, "exp": np.exp, "sqrt": np.sqrt, "min": np.minimum, "max": np.maximum,
          "round": np.round, "floor": np.floor, "ceil": np.ceil}


def _check_rule(node: ast.AST, text: str, names=("n",), what: str = "delta") -> None:
    ok = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow,
          ast.USub, ast.UAdd, ast.Load, ast.Call)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, (int, float)):
            continue
        if isinstance(sub, ast.Name) and (sub.id in names or sub.id in _FUNCS):
            continue
        if isinstance(sub, ast.Name):
            raise ValueError(f"{what}: rule {text!r} uses {sub.id!r} (allowed names: {', '.join(names)})")
        if isinstance(sub, ast.Call) and not (isinstance(sub.func, ast.Name) and sub.func.id in _FUNCS):
            raise ValueError(f"{what}: rule {text!r} calls an unknown function (allowed: {', '.join(_FUNCS)})")
        if not isinstance(sub, ok):
            raise ValueError(f"{what}: rule {text!r} is not an arithmetic expression "
                             f"(numbers, {', '.join(names)}, + - * / **, {', '.join(_FUNCS)})")


def _eval_rule(text: str, n: np.ndarray | None = None, *, env: dict | None = None, what: str = "delta") -> np.ndarray:
    env = {"n": n} if env is None else env
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"{what}: rule {text!r} does not parse") from None
    _check_rule(tree, text, tuple(env), what)
    shape = np.broadcast_shapes(*(np.shape(v) for v in env.values()))
    with np.errstate(all="ignore"):
        value = eval(compile(tree, f"<{what} rule>", "eval"), {"__builtins__": {}}, {**_FUNCS, **env})  # noqa: S307
    return np.broadcast_to(np.asarray(value, dtype=np.float64), shape)


def _is_rule(text) -> bool:
    return isinstance(text, str) and any(not (c.isdigit() or c in "eE.+-:, ") for c in text)


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (``min(1e-6, 1/n),1e-8`` has two items)."""
    parts, depth, cur = [], 0, []
    for c in text:
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += (c == "(") - (c == ")")
        cur.append(c)
    parts.append("".join(cur))
    return parts


def parse_delta(text) -> list:
    """Items of a delta axis: floats and rule strings in ``n`` (``"1e-6,0.01/n"``), or as given.

    Accepts a string (grid syntax plus rules), a number, a callable ``f(n) -> delta``, or a
    sequence of those. Rules are checked (a whitelist of arithmetic) and kept as strings.
    """
    if callable(text):
        return [text]
    if isinstance(text, str):
        items: list = []
        for piece in _split_top(text):
            piece = piece.strip()
            if _is_rule(piece):
                _eval_rule(piece, np.ones(1))  # checks it
                items.append(piece)
            else:
                try:
                    items.extend(parse_grid(piece).tolist())
                except ValueError as exc:
                    raise ValueError(f"delta: {exc}") from None
        return items
    if isinstance(text, (list, tuple)):
        out: list = []
        for t in text:
            out.extend(parse_delta(t) if isinstance(t, str) or callable(t) else [float(t)])
        return out
    return [float(x) for x in np.atleast_1d(np.asarray(text, dtype=np.float64)).ravel()]


# ----------------------------------------------------------------------------------------
# The grid


def default_grid() -> dict:
    """The embedded default grid (``jaxshuffle sweep`` with no axes): about a minute on 2 CPU cores.

    Any eps0-LDP randomizer (``general``: the certified bound of the stronger clone),
    eps0 from 0.25 to 6 (12 log-spaced values), n from 100 to 10^4 (9 log-spaced values),
    delta = 1e-6: a privacy surface and the amplification ratio, 108 points.
    """
    return dict(randomizer="general", eps0="0.2..8:16", n="1e2..1e5:13", delta="1e-6")


def _catalog():
    from jaxshuffle.randomizers import CATALOG

    return CATALOG


def _option_kinds() -> dict[str, str]:
    kinds: dict[str, str] = {}
    for e in _catalog().values():
        for a in e.args:
            kinds.setdefault(a.name, a.kind)
    return kinds


def _delta_label(rule) -> str:
    if isinstance(rule, str):
        return rule
    if isinstance(rule, dict):
        return rule["name"]
    return repr(float(rule))


def _build_spec(randomizer, n, delta, axes: Mapping) -> dict:
    """A JSON-serializable description of the grid (what the fingerprint covers)."""
    catalog = _catalog()
    names = [randomizer] if isinstance(randomizer, str) else list(randomizer)
    names = [s.strip() for name in names for s in name.split(",")] if names else []
    if not names:
        raise ValueError("randomizer: give at least one catalog name")
    for name in names:
        if name not in catalog:
            raise ValueError(f"randomizer: unknown name {name!r}; choose one of {', '.join(sorted(catalog))}")
    kinds = _option_kinds()
    used = set()
    for name in names:
        used |= {a.name for a in catalog[name].args}
    grids: dict[str, list[float] | dict] = {}
    for key, value in axes.items():
        if value is None:
            continue
        if key not in kinds or key not in used:
            valid = sorted(used)
            raise ValueError(f"{key}: not an option of randomizer(s) {', '.join(names)} (options: {', '.join(valid)})")
        if _is_rule(value):  # derived option: a rule in the other options
            _eval_rule(value, env={k: np.ones(1) for k in used if k != key}, what=key)  # syntax and names
            grids[key] = {"rule": value.strip()}
            continue
        grids[key] = parse_grid(value, integer=kinds[key] == "int").tolist()
        if not grids[key]:
            raise ValueError(f"{key}: empty grid")
    if n is None:
        raise ValueError("n: required (e.g. n='1e3,1e4' or --n 1e3..1e6:7)")
    if delta is None:
        raise ValueError("delta: required (e.g. delta=1e-6, '0.01/n' or --delta 1e-8,0.01/n)")
    n_vals = parse_grid(n, integer=True)
    if not np.all(np.isfinite(n_vals) & (n_vals >= 1)):
        raise ValueError("n: must be integers >= 1")
    rules = []
    for item in parse_delta(delta):
        if callable(item):
            vals = np.asarray(item(n_vals.copy()), dtype=np.float64)
            vals = np.broadcast_to(vals, n_vals.shape)
            rules.append({"name": getattr(item, "__name__", "delta(n)"), "n": n_vals.tolist(), "values": vals.tolist()})
        else:
            rules.append(item)
    return {"randomizers": names, "options": grids, "n": n_vals.tolist(), "delta": rules}


def _rule_values(rule, n: np.ndarray) -> np.ndarray:
    if isinstance(rule, str):
        return _eval_rule(rule, n)
    if isinstance(rule, dict):
        table = dict(zip(rule["n"], rule["values"]))
        return np.asarray([table[float(x)] for x in n], dtype=np.float64)
    return np.full(n.shape, float(rule))


@dataclasses.dataclass
class _Group:
    """One randomizer's block of consecutive grid points."""

    name: str
    start: int
    stop: int
    options: dict[str, np.ndarray]


def _expand(spec: dict) -> tuple[dict[str, np.ndarray], list[_Group], list[str]]:
    """Grid points (parameter columns) of a spec, in index order; groups per randomizer."""
    catalog = _catalog()
    n_vals = np.asarray(spec["n"], dtype=np.float64)
    rules = spec["delta"]
    option_names: list[str] = []
    kinds = _option_kinds()
    for name in spec["randomizers"]:
        for a in catalog[name].args:
            if a.name not in option_names:
                option_names.append(a.name)
    cols: dict[str, list] = {k: [] for k in ("randomizer", *option_names, "n", "delta_rule", "delta")}
    groups: list[_Group] = []
    start = 0
    for name in spec["randomizers"]:
        entry = catalog[name]
        axes, free, derived = [], [], {}
        for a in entry.args:
            given = spec["options"].get(a.name)
            if isinstance(given, dict):
                derived[a.name] = given["rule"]
            elif given is not None:
                axes.append(given)
                free.append(a.name)
            elif a.default is not None:
                axes.append([float(a.default)])
                free.append(a.name)
            else:
                raise ValueError(f"{a.name}: required option of randomizer {name!r} ({a.help}; {a.range_text()})")
        combos = list(itertools.product(*axes, range(len(n_vals)), range(len(rules))))
        size = len(combos)
        opts = {k: np.asarray([c[i] for c in combos], dtype=np.float64) for i, k in enumerate(free)}
        for k, rule in derived.items():
            val = _eval_rule(rule, env=dict(opts), what=k)
            if kinds[k] == "int":
                val = np.round(val)
            opts[k] = np.array(val, dtype=np.float64)
        opts = {a.name: opts[a.name] for a in entry.args}
        n_idx = np.asarray([c[-2] for c in combos], dtype=np.int64)
        r_idx = np.asarray([c[-1] for c in combos], dtype=np.int64)
        n_pts = n_vals[n_idx]
        delta = np.empty(size)
        for j, rule in enumerate(rules):
            sel = r_idx == j
            delta[sel] = _rule_values(rule, n_pts[sel])
        if not np.all((delta > 0) & (delta < 1)):
            bad = int(np.argmax(~((delta > 0) & (delta < 1))))
            raise ValueError(f"delta: must lie in (0, 1); rule {_delta_label(rules[r_idx[bad]])} "
                             f"gives {delta[bad]!r} at n = {n_pts[bad]:g}")
        cols["randomizer"].extend([name] * size)
        for k in option_names:
            cols[k].extend(opts[k].tolist() if k in opts else [math.nan] * size)
        cols["n"].extend(n_pts.tolist())
        cols["delta_rule"].extend(_delta_label(rules[j]) for j in r_idx)
        cols["delta"].extend(delta.tolist())
        groups.append(_Group(name, start, start + size, opts))
        start += size
    table = {k: (np.asarray(v, dtype=str) if k in ("randomizer", "delta_rule") else np.asarray(v, dtype=np.float64))
             for k, v in cols.items()}
    return table, groups, option_names


# ----------------------------------------------------------------------------------------
# Jobs: the two-count-pair searches behind each point (accountant.amplification_jobs)


def _point_jobs(entry, opts: dict[str, np.ndarray], n: np.ndarray, delta: np.ndarray, with_lower: bool,
                scaled_variant: bool = False):
    """Per-point quantities and the epsilon searches (jobs) of one randomizer's grid points.

    The searches and how they combine are :func:`jaxshuffle.accountant.amplify`'s own
    (:func:`~jaxshuffle.accountant.amplification_jobs`); this adds only the catalog's
    lower-bound parameters, as the CLI passes them. Returns ``(info, jobs)``: ``info`` the
    :class:`~jaxshuffle.accountant.PointInfo` as numpy arrays, ``jobs[role] = (rows, mask)``
    with ``rows`` of shape ``(P, 7)`` = ``(u, v, w, r0, r1, n_engine, delta)`` and ``mask``
    the points whose combination reads that search.
    """
    import jax.numpy as jnp

    from jaxshuffle.accountant import PointInfo, amplification_jobs

    params = entry.fn(**{k: jnp.asarray(v) for k, v in opts.items()})
    lp = None
    if with_lower and entry.lower is not None and params.blanket_per_user is None:
        try:  # as the CLI: some lower-bound constructions need more inputs (Hadamard K >= 4B)
            lp = entry.lower(**{k: jnp.asarray(v) for k, v in opts.items()})
        except ValueError:
            lp = None
    info, jobs = amplification_jobs(params, n, delta, lp, scaled_variant=scaled_variant)
    shape = np.shape(n)

    def col(x):
        return np.broadcast_to(np.asarray(x, dtype=np.float64), shape)

    out = {}
    for job in jobs:
        rows = np.stack([col(x) for x in (*job.pair.arrays(), info.n_engine, job.delta)], axis=1)
        out[job.role] = (rows, np.broadcast_to(np.asarray(job.needed), shape))
    return PointInfo(*(np.broadcast_to(np.asarray(x), shape) for x in info)), out


class _Grid:
    """Points, their jobs (deduplicated) and the per-point combination."""

    def __init__(self, spec: dict, with_lower: bool, scaled_variant: bool = False):
        from jaxshuffle.accountant import JOB_ROLES

        self.spec = spec
        self.table, self.groups, self.option_names = _expand(spec)
        self.size = len(self.table["n"])
        self.info: list = []  # per group: PointInfo (numpy)
        self.roles: list[list[str]] = []  # per group: the roles of its jobs, in amplification_jobs' order
        role_rows, role_point, role_name = [], [], []
        for g in self.groups:
            entry = _catalog()[g.name]
            sl = slice(g.start, g.stop)
            info, jobs = _point_jobs(entry, g.options, self.table["n"][sl], self.table["delta"][sl], with_lower,
                                     scaled_variant)
            self.info.append(info)
            self.roles.append(list(jobs))
            for role, (rows, mask) in jobs.items():
                idx = np.nonzero(mask)[0]
                role_rows.append(rows[idx])
                role_point.append(idx + g.start)
                role_name.append(np.full(idx.size, JOB_ROLES.index(role), dtype=np.int8))
        all_rows = np.concatenate(role_rows) if role_rows else np.zeros((0, 7))
        if all_rows.size and not np.all(np.isfinite(all_rows[:, :6])):
            raise ValueError("internal: non-finite pair parameters in the grid")
        self.jobs, inverse = np.unique(all_rows, axis=0, return_inverse=True)
        self.ref_point = np.concatenate(role_point)
        self.ref_role = np.concatenate(role_name)
        self.ref_job = inverse.ravel()
        # point -> number of distinct jobs it waits for
        pairs = np.unique(np.stack([self.ref_point, self.ref_job], 1), axis=0)
        self.pending0 = np.bincount(pairs[:, 0], minlength=self.size)
        order = np.argsort(pairs[:, 1], kind="stable")
        self._job_points = pairs[order, 0]
        self._job_ptr = np.searchsorted(pairs[order, 1], np.arange(len(self.jobs) + 1))
        # role -> job id per point (-1: the point has no job in that role)
        self.role_job = np.full((len(JOB_ROLES), self.size), -1, dtype=np.int64)
        self.role_job[self.ref_role, self.ref_point] = self.ref_job

    def points_of_jobs(self, jobs: np.ndarray) -> np.ndarray:
        """Points waiting on each of ``jobs`` (one entry per distinct (point, job) pair)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        starts, stops = self._job_ptr[jobs], self._job_ptr[jobs + 1]
        lens = stops - starts
        if lens.sum() == 0:
            return np.zeros(0, np.int64)
        offs = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
        return self._job_points[np.arange(lens.sum()) + offs]

    def pending(self, job_done: np.ndarray) -> np.ndarray:
        """Number of unfinished distinct jobs per point."""
        return self.pending0 - np.bincount(self.points_of_jobs(np.nonzero(job_done)[0]), minlength=self.size)

    def combine(self, lower: np.ndarray, upper: np.ndarray, status: np.ndarray,
                points: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Result columns for ``points`` (all by default); job arrays indexed by job id."""
        from jaxshuffle.accountant import JOB_ROLES, PointInfo, combine_amplification

        if points is None:
            points = np.arange(self.size)
        points = np.sort(np.asarray(points, dtype=np.int64))
        out: dict[str, np.ndarray] = {"index": points}
        for k, v in self.table.items():
            out[k] = v[points]
        parts: dict[str, list] = {}
        for g, info, roles in zip(self.groups, self.info, self.roles):
            sel = points[(points >= g.start) & (points < g.stop)]
            if sel.size == 0:
                continue
            local = sel - g.start
            lo_r, up_r, st_r = [], [], []
            for role in roles:  # where a job is not needed (-1) the combination ignores the filler
                j = self.role_job[JOB_ROLES.index(role), sel]
                ok = j >= 0
                jj = np.where(ok, j, 0)
                lo_r.append(np.where(ok, lower[jj], 0.0))
                up_r.append(np.where(ok, upper[jj], np.inf))
                st_r.append(np.where(ok, status[jj], 5).astype(np.int8))
            sub = PointInfo(*(v[local] for v in info))
            rep = combine_amplification(sub, roles, lo_r, up_r, st_r, xp=np)
            cols = {**rep._asdict(), "p": sub.p, "beta": sub.beta, "q": sub.q}
            for k, v in cols.items():
                parts.setdefault(k, []).append(v)
        for k in _RESULT_ORDER:
            out[k] = np.concatenate(parts[k]) if k in parts else np.zeros(0)
        for k in ("status", "status_lower", "status_paper"):
            out[k] = np.asarray(STATUS_NAMES)[out[k].astype(np.int64)]
        out["upper_source"] = np.asarray(SOURCE_NAMES)[out["upper_source"].astype(np.int64)]
        for k in _BOOL_COLUMNS:
            out[k] = out[k].astype(bool)
        return out


# ----------------------------------------------------------------------------------------
# Planning: window buckets over the whole grid, merged when a compile costs more, and chunks

# Rough cost model: one search costs about 2e-7 s per window count on one CPU device
# (benchmarks/sweep.py: ~2 divergence evaluations of ~0.1 us per count; GPU/TPU figures are
# guesses, no accelerator measured yet); one program compiles in ~5 s.
_COST_PER_COUNT = {"cpu": 2e-7, "gpu": 2e-8, "tpu": 2e-8}
_COMPILE_S = 5.0
_CHUNK_TARGET_S = 20.0  # a chunk should finish within this (durability, progress)
_MAX_CHUNK = 4096
_MIN_CHUNK = 32


def _plan_jobs(jobs: np.ndarray, merge: bool, platform_name: str) -> list:
    """Window plan per job (search.plan_epsilon, as search.epsilon plans it), bucketed.

    Returns ``[(Plan, job ids, c_lo)]``, symmetric buckets first, by window.
    """
    from jaxshuffle.plan import R_FLOOR, bucket_plans, plan_epsilon

    u, v, w, r0, r1, n, d = jobs.T
    L, c_lo, M = plan_epsilon(u, v, w, r0, r1, n, d)
    sym = r0 == r1
    if merge:
        L = _merge_windows(L, sym, _COST_PER_COUNT.get(platform_name, 1e-6))
        # Recentre each window of a merged job (plan_windows' rule for the larger length).
        N = n - 1.0
        pi = np.clip(np.maximum(r0, R_FLOOR) + np.maximum(r1, R_FLOOR), 2 * R_FLOOR, 1.0)
        c_lo = np.clip(np.floor(N * pi) - L // 2, 0, np.maximum(n - L, 0))
    buckets = bucket_plans(L, M, r0, r1, n)
    order = sorted(buckets, key=lambda pl: (not pl.symmetric, pl.window))
    return [(pl, buckets[pl], c_lo[buckets[pl]]) for pl in order]


def _merge_windows(L: np.ndarray, sym: np.ndarray, cost: float) -> np.ndarray:
    """Group window sizes (per symmetry) to minimise compiles + compute; each group takes its largest window.

    Model: one compile costs ``_COMPILE_S``; a search over a window of length L costs ``cost * L``.
    Optimal contiguous partition of the sorted sizes by dynamic programming.
    """
    L = L.copy()
    for s in (True, False):
        sel = sym == s
        if not sel.any():
            continue
        sizes, counts = np.unique(L[sel], return_counts=True)
        S = len(sizes)
        best = np.full(S + 1, np.inf)
        best[0] = 0.0
        cut = np.zeros(S + 1, dtype=np.int64)
        for j in range(1, S + 1):  # groups sizes[i:j] use window sizes[j-1]
            for i in range(j):
                c = best[i] + _COMPILE_S + cost * counts[i:j].sum() * sizes[j - 1]
                if c < best[j]:
                    best[j], cut[j] = c, i
        j = S
        while j > 0:
            i = cut[j]
            L[sel & np.isin(L, sizes[i:j])] = sizes[j - 1]
            j = i
    return L


def _chunk_size(plan, n_jobs: int, ndev: int, platform_name: str, memory: float, fixed: int | None) -> int:
    if fixed:
        size = int(fixed)
    else:
        per_job = 8.0 * plan.window * (2 * plan.max_step + 16) * 12 * (1 if plan.symmetric else 2)
        by_mem = memory * ndev / per_job
        by_time = _CHUNK_TARGET_S * ndev / (plan.window * _COST_PER_COUNT.get(platform_name, 1e-6))
        size = int(2 ** math.floor(math.log2(max(min(by_mem, by_time, _MAX_CHUNK), 1.0))))
        # Small buckets are padded to at least _MIN_CHUNK lanes (cheap for the small windows where it
        # applies) so that successive small sweeps in one process reuse the same compiled shapes.
        size = min(size, max(int(2 ** math.ceil(math.log2(max(n_jobs, 1)))), _MIN_CHUNK))
    size = max(size, ndev)
    return int(math.ceil(size / ndev) * ndev)


def _layout(buckets, ndev: int, platform_name: str, memory: float, fixed: int | None) -> list[dict]:
    """Global chunk list: each entry {bucket, jobs (ids), size}."""
    chunks = []
    for bi, (plan, ids, _) in enumerate(buckets):
        size = _chunk_size(plan, len(ids), ndev, platform_name, memory, fixed)
        for s in range(0, len(ids), size):
            chunks.append({"bucket": bi, "start": s, "stop": min(s + size, len(ids)), "size": size})
    return chunks


# ----------------------------------------------------------------------------------------
# Running chunks (one compiled program per bucket; sharded over a 1-D device mesh)


_SHARDED_KERNELS: dict = {}  # (plan, rtol, device ids) -> jitted shard_map program (reused across sweeps)
_PROGRAMS_RUN: set = set()  # (plan, chunk size, rtol, device ids) run in this process (the first run compiles)


def _single_device_kernel(plan, rtol):
    from jaxshuffle.search import epsilon_with_plan

    def run(u, v, w, r0, r1, n, delta, c_lo):  # epsilon_with_plan is jitted: one program per (plan, shape)
        res = epsilon_with_plan((u, v, w, r0, r1), n, delta, c_lo, plan, rtol=rtol, max_iter=_MAX_ITER)
        return res.lower, res.upper, res.status, res.iterations

    return run


def _sharded_kernel(plan, rtol, mesh):
    import jax

    key = (plan, rtol, tuple(d.id for d in mesh.devices.flat))
    if key not in _SHARDED_KERNELS:
        spec = jax.sharding.PartitionSpec("points")
        f = _single_device_kernel(plan, rtol)
        _SHARDED_KERNELS[key] = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=(spec,) * 8, out_specs=(spec,) * 4,
                                                      check_vma=False))
    return _SHARDED_KERNELS[key]


class _Runner:
    """Runs one chunk of searches: jitted per (plan, chunk size); sharded over a 1-D mesh when ndev > 1."""

    def __init__(self, rtol: float, devices):
        import jax

        self.rtol = rtol
        self.devices = devices
        self.mesh = jax.sharding.Mesh(np.asarray(devices), ("points",)) if len(devices) > 1 else None
        self.compiled: set = set()  # (plan, size) compiled by this runner
        self._ids = tuple(d.id for d in devices)

    def is_compiled(self, plan, size: int) -> bool:
        return (plan, size, self.rtol, self._ids) in _PROGRAMS_RUN

    def run(self, plan, jobs: np.ndarray, c_lo: np.ndarray, size: int):
        import jax

        m = len(jobs)
        nd = len(self.devices)
        size = -(-size // nd) * nd  # a resumed layout may come from another device count
        pad = np.concatenate([np.arange(m), np.zeros(size - m, dtype=np.int64)])
        cols = [jobs[pad, i] for i in range(7)] + [c_lo[pad]]
        if self.mesh is not None:
            sh = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec("points"))
            cols = [jax.device_put(c, sh) for c in cols]
            kernel = _sharded_kernel(plan, self.rtol, self.mesh)
        else:
            cols = [jax.device_put(c, self.devices[0]) for c in cols]
            kernel = _single_device_kernel(plan, self.rtol)
        out = jax.block_until_ready(kernel(*cols))
        lower, upper, status, iters = (np.asarray(x)[:m] for x in out)
        if not self.is_compiled(plan, size):
            self.compiled.add((plan, size))
            _PROGRAMS_RUN.add((plan, size, self.rtol, self._ids))
        return lower, upper, status.astype(np.int8), iters.astype(np.int32)


# ----------------------------------------------------------------------------------------
# Storage: manifest, atomic chunk files, CSV


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _fmt_cell(key: str, x) -> str:
    if key in _BOOL_COLUMNS:
        return "true" if x else "false"
    if isinstance(x, (str, np.str_)):
        return str(x)
    x = float(x)
    if math.isnan(x):
        return ""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if key in ("index", "n") and x == int(x):
        return str(int(x))
    return repr(x)


def _csv_text(columns: dict[str, np.ndarray], order: Sequence[str], header: bool) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if header:
        w.writerow(order)
    cols = [columns[k] for k in order]
    for i in range(len(cols[0]) if cols else 0):
        w.writerow([_fmt_cell(k, c[i]) for k, c in zip(order, cols)])
    return buf.getvalue()


def read_csv(path) -> dict[str, np.ndarray]:
    """Columns of a results CSV (floats, strings and booleans restored; empty cells are NaN)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise ValueError(f"{path}: empty CSV")
    header, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    out: dict[str, np.ndarray] = {}
    for j, key in enumerate(header):
        vals = [r[j] for r in body]
        if key in _STRING_COLUMNS:
            out[key] = np.asarray(vals, dtype=str)
        elif key in _BOOL_COLUMNS:
            out[key] = np.asarray([v == "true" for v in vals], dtype=bool)
        else:
            out[key] = np.asarray([float(v) if v else math.nan for v in vals], dtype=np.float64)
    if "index" in out:
        out["index"] = out["index"].astype(np.int64)
    return out


class SweepResult:
    """Long-format results: ``columns`` (name -> numpy array, one entry per grid point) and ``meta``.

    ``result["upper"]`` gives a column; ``len(result)`` the number of points; ``select(n=1e4)``
    filters rows; ``complete`` is False for a partial view (interrupted sweep, partial merge).
    """

    def __init__(self, columns: dict[str, np.ndarray], meta: dict | None = None, path: Path | None = None):
        self.columns = dict(columns)
        self.meta = dict(meta or {})
        self.path = path

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def __getitem__(self, key: str) -> np.ndarray:
        return self.columns[key]

    def __contains__(self, key: str) -> bool:
        return key in self.columns

    def keys(self):
        return self.columns.keys()

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete", True))

    def select(self, **conditions) -> "SweepResult":
        """Rows where each named column equals the value (floats compared with a 1e-9 relative tolerance)."""
        keep = np.ones(len(self), dtype=bool)
        for k, v in conditions.items():
            col = self.columns[k]
            if col.dtype.kind in "fc":
                keep &= np.isclose(col, float(v), rtol=1e-9, atol=0.0)
            else:
                keep &= col == v
        return SweepResult({k: c[keep] for k, c in self.columns.items()}, self.meta, self.path)

    def unique(self, key: str) -> np.ndarray:
        col = self.columns[key]
        _, first = np.unique(col, return_index=True)
        return col[np.sort(first)]

    def to_csv(self, path) -> None:
        _atomic_write(Path(path), _csv_text(self.columns, list(self.columns), True).encode())

    def __repr__(self) -> str:
        return f"SweepResult({len(self)} points, columns={list(self.columns)}, complete={self.complete})"


def load(path) -> SweepResult:
    """Load sweep results from a directory (``results.npz`` or ``results.csv``), a ``.npz`` or a ``.csv``."""
    path = Path(path)
    meta: dict = {}
    if path.is_dir():
        side = path / "results.json"
        if side.exists():
            meta = json.loads(side.read_text())
        path = path / "results.npz" if (path / "results.npz").exists() else path / "results.csv"
    elif path.with_suffix(".json").exists():
        meta = json.loads(path.with_suffix(".json").read_text())
    if not path.exists():
        raise ValueError(f"results: {path} does not exist")
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            cols = {k: z[k] for k in z.files}
    else:
        cols = read_csv(path)
    return SweepResult(cols, meta, path)


def _environment(devices) -> dict:
    import jax

    import jaxshuffle
    from jaxshuffle.divergence import REL_ERR, REL_TAIL

    return {
        "library": "jaxshuffle", "version": jaxshuffle.__version__, "jax": jax.__version__,
        "jaxlib": getattr(jax.lib, "__version__", jax.__version__) if hasattr(jax, "lib") else jax.__version__,
        "numpy": np.__version__, "python": platform.python_version(), "machine": platform.machine(),
        "float64": bool(jax.config.read("jax_enable_x64")),
        "devices": [{"platform": d.platform, "kind": d.device_kind, "id": d.id} for d in devices],
        "process_count": jax.process_count(),
        "engine": {"pmf_rel_err_budget": REL_ERR, "tail_rel_err_budget": REL_TAIL},
    }


_METHODS = {
    "upper": "certified: eps(worst-case-beta pair vr_pair(p,(p-1)/(p+1),q)) at delta; 0 where delta >= beta; "
             "with scaled_variant also min with eps(clone pair with the paper pair's r) at delta/(u+v) where w > 0 "
             "(jaxshuffle.accountant.amplify; shared/MATH.md section 5)",
    "lower": "lower end of the certified bracket of the Theorem 5.1 pair(s) (catalog lower parameters and x* = x0)",
    "paper": "upper end of the bracket of the paper's Theorem 4.7 pair vr_pair(p, beta, q): not a guarantee when w > 0",
    "engine": "jaxshuffle.search.epsilon_with_plan: safeguarded Newton bracketing on the certified hockey-stick "
              "divergence band (jaxshuffle.divergence), float64",
}


# ----------------------------------------------------------------------------------------
# The sweep


class _Progress:
    """Progress lines on stderr; the ETA separates compile time (first chunk of a program) from compute."""

    def __init__(self, quiet: bool, total_chunks: int, total_points: int, done_points: int):
        self.quiet = quiet
        self.total_chunks = total_chunks
        self.total_points = total_points
        self.start_points = done_points
        self.t0 = time.perf_counter()
        self.steady_s = 0.0  # time of chunks whose program was already compiled
        self.steady_work = 0.0
        self.first_s: list[float] = []  # chunks that compiled their program

    def update(self, i: int, chunk_desc: str, done_points: int, work: float, dt: float, compiled: bool,
               work_left: float, programs_left: int):
        if compiled:
            self.first_s.append(dt)
        else:
            self.steady_s += dt
            self.steady_work += work
        if self.quiet:
            return
        el = time.perf_counter() - self.t0
        rate = (done_points - self.start_points) / el if el > 0 else 0.0
        if self.steady_work > 0:
            per_work = self.steady_s / self.steady_work
        else:  # only compiling chunks so far: an upper estimate
            per_work = sum(self.first_s) / max(work, 1.0) / max(len(self.first_s), 1)
        compile_s = float(np.mean(self.first_s)) if self.first_s else 0.0
        eta = work_left * per_work + programs_left * compile_s
        eta_s = str(datetime.timedelta(seconds=int(eta))) if math.isfinite(eta) else "?"
        print(f"[sweep] chunk {i}/{self.total_chunks} ({chunk_desc}, {dt:.1f} s{', new program' if compiled else ''}): "
              f"{done_points}/{self.total_points} points, {rate:.1f} points/s, ETA {eta_s}",
              file=sys.stderr, flush=True)


def _devices(devices):
    import jax

    local = jax.local_devices()
    if devices is None:
        return local
    if isinstance(devices, int):
        if not 1 <= devices <= len(local):
            raise ValueError(f"devices: must be between 1 and {len(local)} (local devices)")
        return local[:devices]
    return list(devices)


def _parse_shard(shard) -> tuple[int, int]:
    if shard is None:
        return 0, 1
    if isinstance(shard, str):
        try:
            i, n = (int(x) for x in shard.split("/"))
        except ValueError:
            raise ValueError(f"shard: {shard!r} is not of the form i/N (e.g. 0/4)") from None
    else:
        i, n = shard
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"shard: need 0 <= i < N, got {i}/{n}")
    return int(i), int(n)


def _fingerprint(spec: dict, settings: dict) -> str:
    import jaxshuffle

    text = json.dumps({"spec": spec, "settings": settings, "version": jaxshuffle.__version__}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def sweep(randomizer="general", *, n=None, delta=None, out=None, rtol: float = 1e-6, lower: bool = True,
          scaled_variant: bool = False, merge_buckets: bool = True, shard=None, devices=None, chunk_size: int | None = None,
          memory: float | None = None, quiet: bool = False, overwrite: bool = False,
          **options) -> SweepResult:
    """Certified amplification over the cartesian product of parameter axes.

    Args:
      randomizer: catalog name (``jaxshuffle.randomizers.CATALOG``), a comma list or a list of
        names; every option axis applies to the randomizers that have that option.
      n: number of users: grid string (``"1e3..1e6:7"``), number or sequence (rounded to integers).
      delta: number, rule in ``n`` (``"0.01/n"``), callable ``f(n)``, grid string, or a list.
      **options: randomizer options (``eps0="0.5:4:8"``, ``k=[3, 10]``); omitted options with a
        catalog default take it.
      out: directory for the files (``None``: in memory only, nothing written, no resume).
      rtol: relative width of every epsilon bracket (``search.epsilon``'s rtol).
      lower: compute the Theorem 5.1 lower bound where the catalog has its parameters.
      scaled_variant: also use the (u+v)-scaled pair in ``upper`` (opt-in, as in
        :func:`~jaxshuffle.accountant.amplify`: proven when every pair of inputs has total
        variation exactly beta, e.g. k-ary randomized response).
      merge_buckets: merge small window buckets into larger ones when that is cheaper than a
        compile (still certified; ``False`` gives exactly ``amplify``'s windows).
      shard: ``"i/N"`` or ``(i, N)``: run only every N-th chunk starting at i (multi-host).
      devices: ``None`` (all local devices), a count, or a list of devices; more than one shards
        each chunk over a 1-D mesh.
      chunk_size: jobs per chunk (default: from ``memory`` and a time target, power of two).
      memory: bytes of working memory per device for a chunk (default 1 GiB on CPU, a quarter of
        the device memory on accelerators).
      quiet: no progress on stderr.
      overwrite: discard an existing sweep of a *different* grid in ``out`` (same grid: resume).

    Returns:
      :class:`SweepResult` with one row per grid point (``complete`` False for a shard).

    Raises:
      ValueError naming the parameter for a bad grid, randomizer or option value.
    """
    spec = _build_spec(randomizer, n, delta, options)
    return _run(spec, out=out, rtol=rtol, lower=lower, scaled_variant=scaled_variant,
                merge_buckets=merge_buckets, shard=shard,
                devices=devices, chunk_size=chunk_size, memory=memory, quiet=quiet, overwrite=overwrite)


def _run(spec, *, out, rtol, lower, scaled_variant, merge_buckets, shard, devices, chunk_size, memory, quiet, overwrite):
    from jaxshuffle._config import require_x64

    require_x64()
    if not 0 < rtol < 1:
        raise ValueError("rtol: must lie in (0, 1)")
    shard_i, shard_n = _parse_shard(shard)
    devs = _devices(devices)
    # With --shard every host must derive the same buckets and chunk layout from the grid alone:
    # plan for a CPU-like cost model and 1 GiB chunks (or the given chunk_size) whatever the local devices.
    platform_name = devs[0].platform if shard_n == 1 else "cpu"
    settings = {"rtol": float(rtol), "lower": bool(lower), "scaled_variant": bool(scaled_variant),
                "merge_buckets": bool(merge_buckets),
                "platform": platform_name if merge_buckets else "any"}
    fingerprint = _fingerprint(spec, settings)
    if out is not None and (Path(out) / "sweep.json").exists() and merge_buckets:
        # Resuming on another platform: keep the bucket merging (hence the values) of the original run.
        old_platform = json.loads((Path(out) / "sweep.json").read_text()).get("settings", {}).get("platform")
        if old_platform and old_platform != settings["platform"]:
            alt = {**settings, "platform": old_platform}
            if _fingerprint(spec, alt) == json.loads((Path(out) / "sweep.json").read_text())["fingerprint"]:
                settings, fingerprint, platform_name = alt, _fingerprint(spec, alt), old_platform
    t_plan = time.perf_counter()
    grid = _Grid(spec, lower, scaled_variant)
    buckets = _plan_jobs(grid.jobs, merge_buckets, platform_name)
    if memory is None:
        memory = 2.0 ** 30
        if platform_name != "cpu":
            try:
                memory = 0.25 * float(devs[0].memory_stats()["bytes_limit"])
            except Exception:  # pragma: no cover - backends without memory_stats
                memory = 2.0 ** 32
    layout_settings = {"ndev": len(devs) if shard_n == 1 else 1, "memory": float(memory),
                       "chunk_size": chunk_size, "platform": platform_name}

    out_dir = Path(out) if out is not None else None
    done_chunks: dict[int, dict] = {}
    manifest = None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        mpath = out_dir / "sweep.json"
        if mpath.exists():
            old = json.loads(mpath.read_text())
            if old.get("fingerprint") != fingerprint:
                if not overwrite:
                    raise ValueError(f"out: {out_dir} holds a different sweep (fingerprint {old.get('fingerprint')} "
                                     f"!= {fingerprint}); use another --out or --overwrite")
                _clear(out_dir)
            else:
                manifest = old
                layout_settings = old["layout_settings"]
        chunk_dir = out_dir / "chunks"
        chunk_dir.mkdir(exist_ok=True)
    chunks = _layout(buckets, int(layout_settings["ndev"]), layout_settings.get("platform", platform_name),
                     float(layout_settings["memory"]), layout_settings["chunk_size"])
    if out_dir is not None:
        if manifest is None:
            manifest = {"fingerprint": fingerprint, "spec": spec, "settings": settings,
                        "layout_settings": layout_settings, "chunks": len(chunks), "points": grid.size,
                        "jobs": int(len(grid.jobs)), "created": _now()}
            _atomic_write(out_dir / "sweep.json", json.dumps(manifest, indent=1).encode())
        done_chunks = _load_chunks(out_dir / "chunks", len(chunks), fingerprint)
    plan_s = time.perf_counter() - t_plan

    J = len(grid.jobs)
    lower_j, upper_j = np.zeros(J), np.full(J, np.inf)
    status_j, iter_j = np.full(J, 5, np.int8), np.zeros(J, np.int32)
    job_done = np.zeros(J, dtype=bool)
    for ci, data in done_chunks.items():
        ids = data["jobs"]
        lower_j[ids], upper_j[ids], status_j[ids], iter_j[ids] = data["lower"], data["upper"], data["status"], data["iterations"]
        job_done[ids] = True
    chunk_ids = lambda ci: buckets[chunks[ci]["bucket"]][1][chunks[ci]["start"]:chunks[ci]["stop"]]  # noqa: E731
    mine = [ci for ci in range(len(chunks)) if ci % shard_n == shard_i]
    todo = [ci for ci in mine if not job_done[chunk_ids(ci)].all()]  # by coverage, not by file name

    # Points finished so far (for the progressive CSV): every job of the point done.
    pending = grid.pending(job_done)
    csv_cols = ["index", *grid.table.keys(), *_RESULT_ORDER]
    csv_path = out_dir / "results.csv" if out_dir is not None and shard_n == 1 else None
    csv_file = None
    if csv_path is not None:
        done_pts = np.nonzero(pending == 0)[0]
        cols = grid.combine(lower_j, upper_j, status_j, done_pts)
        _atomic_write(csv_path, _csv_text(cols, csv_cols, True).encode())
        csv_file = open(csv_path, "a", newline="")

    env = _environment(devs)
    runner = _Runner(rtol, devs)
    work = lambda ci: chunks[ci]["size"] * buckets[chunks[ci]["bucket"]][0].window  # noqa: E731
    work_left = float(sum(work(ci) for ci in todo))
    remaining: dict = {}
    for ci in todo:
        kk = (buckets[chunks[ci]["bucket"]][0], chunks[ci]["size"])
        remaining[kk] = remaining.get(kk, 0) + 1
    progress = _Progress(quiet, len(mine), grid.size, int((pending == 0).sum()))
    if not quiet:
        print(f"[sweep] {grid.size} points, {J} distinct searches in {len(buckets)} window buckets, "
              f"{len(chunks)} chunks ({len(mine) - len(todo)} of this {'shard' if shard_n > 1 else 'sweep'}'s "
              f"{len(mine)} already done), {len(devs)} {devs[0].platform} device(s)", file=sys.stderr, flush=True)
    sleep = float(os.environ.get("JAXSHUFFLE_SWEEP_CHUNK_SLEEP", "0") or 0)  # test aid: slow chunks down
    t0 = time.perf_counter()
    try:
        for k_pos, ci in enumerate(todo):
            k = len(mine) - len(todo) + 1 + k_pos
            ch = chunks[ci]
            plan, ids_all, clo_all = buckets[ch["bucket"]]
            ids, clo = ids_all[ch["start"]:ch["stop"]], clo_all[ch["start"]:ch["stop"]]
            t = time.perf_counter()
            compiled = not runner.is_compiled(plan, ch["size"])
            lo, up, st, it = runner.run(plan, grid.jobs[ids], clo, ch["size"])
            dt = time.perf_counter() - t
            lower_j[ids], upper_j[ids], status_j[ids], iter_j[ids] = lo, up, st, it
            fresh = ids[~job_done[ids]]
            job_done[ids] = True
            if out_dir is not None:
                _atomic_write(out_dir / "chunks" / f"c{ci:06d}.npz",
                              _npz_bytes(jobs=ids, lower=lo, upper=up, status=st, iterations=it,
                                         fingerprint=np.asarray(fingerprint)))
            touched = grid.points_of_jobs(fresh)
            pending -= np.bincount(touched, minlength=grid.size)
            touched = np.unique(touched)
            fin = touched[pending[touched] == 0]
            if csv_file is not None and fin.size:
                cols = grid.combine(lower_j, upper_j, status_j, fin)
                csv_file.write(_csv_text(cols, csv_cols, False))
                csv_file.flush()
                os.fsync(csv_file.fileno())
            work_left -= work(ci)
            key = (plan, ch["size"])
            remaining[key] -= 1
            programs_left = sum(1 for kk, cnt in remaining.items() if cnt > 0 and not runner.is_compiled(*kk))
            progress.update(k, f"window {plan.window}, {len(ids)} searches", int((pending == 0).sum()),
                            work(ci), dt, compiled, work_left, programs_left)
            if sleep:
                time.sleep(sleep)
    finally:
        if csv_file is not None:
            csv_file.close()
    elapsed = time.perf_counter() - t0

    all_done = bool(job_done.all())
    from jaxshuffle.plan import TRUNC_FRACTION

    meta = {**env, "methods": _METHODS, "columns": COLUMNS, "fingerprint": fingerprint, "grid": spec,
            "settings": settings,
            "tolerances": {"rtol": float(rtol), "max_iter": _MAX_ITER,
                           "window_truncation": f"{TRUNC_FRACTION:g} * delta of binomial mass (Chernoff bound, "
                                                "added to the certified divergence band)"},
            "buckets": [{"window": pl.window, "max_step": pl.max_step, "symmetric": pl.symmetric,
                         "searches": int(len(ids))} for pl, ids, _ in buckets],
            "points": grid.size, "searches": J, "chunks": len(chunks),
            "shard": [shard_i, shard_n], "complete": all_done,
            "timing": {"plan_s": plan_s, "run_s": elapsed, "chunks_run": len(todo),
                       "programs_compiled": len(runner.compiled)},
            "written": _now()}
    if out_dir is not None and shard_n > 1:
        mine_ids = np.concatenate([buckets[chunks[ci]["bucket"]][1][chunks[ci]["start"]:chunks[ci]["stop"]]
                                   for ci in mine]) if mine else np.zeros(0, np.int64)
        _atomic_write(out_dir / f"shard-{shard_i}-of-{shard_n}.npz",
                      _npz_bytes(jobs=mine_ids, lower=lower_j[mine_ids], upper=upper_j[mine_ids],
                                 status=status_j[mine_ids], iterations=iter_j[mine_ids],
                                 manifest=np.asarray(json.dumps(manifest))))
        if not quiet:
            print(f"[sweep] shard {shard_i}/{shard_n} done -> {out_dir / f'shard-{shard_i}-of-{shard_n}.npz'}; "
                  f"join the shards with: jaxshuffle sweep merge DIR_OR_SHARD... --out DIR", file=sys.stderr)
    if all_done or shard_n == 1:
        points = np.arange(grid.size) if all_done else np.nonzero(pending == 0)[0]
        cols = grid.combine(lower_j, upper_j, status_j, points)
        result = SweepResult({k: cols[k] for k in csv_cols}, meta, out_dir)
        if out_dir is not None and (all_done or shard_n == 1):
            _write_results(out_dir, result, csv_cols)
        return result
    points = np.nonzero(pending == 0)[0]
    cols = grid.combine(lower_j, upper_j, status_j, points)
    return SweepResult({k: cols[k] for k in csv_cols}, meta, out_dir)


def _write_results(out_dir: Path, result: SweepResult, order: Sequence[str]) -> None:
    cols = result.columns
    _atomic_write(out_dir / "results.csv", _csv_text(cols, order, True).encode())
    if result.complete:
        _atomic_write(out_dir / "results.npz", _npz_bytes(**cols))
    _atomic_write(out_dir / "results.json", json.dumps(result.meta, indent=1, default=_json_default).encode())


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(type(x))


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _clear(out_dir: Path) -> None:
    for name in ("sweep.json", "results.csv", "results.npz", "results.json"):
        (out_dir / name).unlink(missing_ok=True)
    for p in out_dir.glob("shard-*-of-*.npz"):
        p.unlink()
    if (out_dir / "chunks").is_dir():
        for p in (out_dir / "chunks").iterdir():
            p.unlink()


def _load_chunks(chunk_dir: Path, n_chunks: int, fingerprint: str | None = None) -> dict[int, dict]:
    """Finished chunks; leftovers of a killed write (temporary files) and unreadable files are removed."""
    done: dict[int, dict] = {}
    for p in sorted(chunk_dir.iterdir()):
        if p.name.startswith("."):  # temporary file of an interrupted atomic write
            p.unlink(missing_ok=True)
            continue
        if not (p.name.startswith("c") and p.suffix == ".npz"):
            continue
        try:
            ci = int(p.stem[1:])
            with np.load(p, allow_pickle=False) as z:
                data = {k: z[k] for k in ("jobs", "lower", "upper", "status", "iterations")}
                ok = fingerprint is None or str(z["fingerprint"]) == fingerprint
            ok = ok and 0 <= ci < n_chunks and len({len(v) for v in data.values()}) == 1
        except Exception:  # truncated or corrupt: recompute this chunk
            ok = False
        if ok:
            done[ci] = data
        else:
            p.unlink(missing_ok=True)
    return done


# ----------------------------------------------------------------------------------------
# Merge


def merge(inputs: Sequence, out, *, allow_partial: bool = False, quiet: bool = False) -> SweepResult:
    """Join shard files / sweep directories of ONE sweep into ``out/results.{csv,npz,json}``.

    Each input is a sweep directory (its finished chunks are used) or a ``shard-i-of-N.npz``.
    Raises ValueError if the inputs belong to different sweeps, disagree on a value, or (unless
    ``allow_partial``) do not cover every point.
    """
    if not inputs:
        raise ValueError("inputs: give at least one shard file or sweep directory")
    manifest = None
    parts: list[dict] = []
    for inp in inputs:
        p = Path(inp)
        if p.is_dir():
            if not (p / "sweep.json").exists():
                raise ValueError(f"inputs: {p} is not a sweep directory (no sweep.json)")
            m = json.loads((p / "sweep.json").read_text())
            parts.extend(_load_chunks(p / "chunks", int(m["chunks"]), m["fingerprint"]).values())
            for sh in sorted(p.glob("shard-*-of-*.npz")):
                parts.append(_read_shard(sh)[1])
        elif p.suffix == ".npz":
            m, data = _read_shard(p)
            parts.append(data)
        else:
            raise ValueError(f"inputs: {p} is neither a sweep directory nor a shard .npz")
        if manifest is None:
            manifest = m
        elif m["fingerprint"] != manifest["fingerprint"]:
            raise ValueError(f"inputs: {p} belongs to a different sweep (fingerprint {m['fingerprint']} "
                             f"!= {manifest['fingerprint']})")
    spec, settings = manifest["spec"], manifest["settings"]
    grid = _Grid(spec, settings["lower"], settings.get("scaled_variant", False))
    J = len(grid.jobs)
    if J != manifest["jobs"]:
        raise ValueError("inputs: the grid does not rebuild to the recorded number of searches "
                         "(different jaxshuffle version?)")
    lower_j, upper_j = np.zeros(J), np.full(J, np.inf)
    status_j = np.full(J, 5, np.int8)
    seen = np.zeros(J, dtype=bool)
    for data in parts:
        ids = data["jobs"]
        again = seen[ids]
        if again.any():
            same = (np.array_equal(lower_j[ids[again]], data["lower"][again])
                    and np.array_equal(upper_j[ids[again]], data["upper"][again])
                    and np.array_equal(status_j[ids[again]], data["status"][again]))
            if not same:
                raise ValueError("inputs: two shards disagree on a value of the same search")
        lower_j[ids], upper_j[ids], status_j[ids] = data["lower"], data["upper"], data["status"]
        seen[ids] = True
    pending = grid.pending(seen)
    points = np.nonzero(pending == 0)[0]
    if points.size < grid.size and not allow_partial:
        raise ValueError(f"inputs: {grid.size - points.size} of {grid.size} points are missing "
                         "(run the remaining shards, or pass --allow-partial)")
    import jax

    order = ["index", *grid.table.keys(), *_RESULT_ORDER]
    cols = grid.combine(lower_j, upper_j, status_j, points)
    meta = {**_environment(jax.local_devices()), "methods": _METHODS, "columns": COLUMNS,
            "fingerprint": manifest["fingerprint"], "grid": spec, "settings": settings,
            "tolerances": {"rtol": settings["rtol"], "max_iter": _MAX_ITER},
            "points": grid.size, "searches": J, "complete": bool(points.size == grid.size),
            "merged_from": [str(x) for x in inputs], "written": _now()}
    result = SweepResult({k: cols[k] for k in order}, meta, Path(out))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_results(out, result, order)
    if not quiet:
        print(f"[sweep merge] {points.size}/{grid.size} points -> {out / 'results.csv'}", file=sys.stderr)
    return result


def _read_shard(path: Path) -> tuple[dict, dict]:
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in ("jobs", "lower", "upper", "status", "iterations")}
            manifest = json.loads(str(z["manifest"]))
    except Exception as exc:
        raise ValueError(f"inputs: {path} is not a readable shard file ({exc})") from None
    return manifest, data


# ----------------------------------------------------------------------------------------
# Command line: `jaxshuffle sweep`, `jaxshuffle sweep merge`, `jaxshuffle plot`

_SWEEP_EPILOG = """\
grid values:  1,2,5 (list) | 0.5:4:8 (8 linear) | 1e3..1e6:7 (7 log-spaced) | mixes: 0.1,1:5:5
delta rules:  0.01/n, 1/n**1.1, min(1e-6, 1/n) (also in lists: 1e-6,0.01/n)
option rules: an option may be a formula in the other options, e.g. --k 'max(1, round(d/(exp(eps0)+1)))'
              (functions: log log10 exp sqrt min max round floor ceil; integer options are rounded)
examples:
  jaxshuffle sweep                                   # default grid -> jaxshuffle-sweep/results.csv + sweep.png
  jaxshuffle sweep --randomizer general --eps0 1,2 --n 1e3,1e4 --delta 1e-6 --out DIR
  jaxshuffle sweep --randomizer grr --k 3,10 --eps0 0.5..8:16 --n 1e3..1e6:7 --delta 0.01/n --out DIR
resume:       rerun the same command: finished chunks are skipped (a killed sweep loses nothing done).
multi-host:   host i runs the same command with --shard i/N --out run-i; then
              jaxshuffle sweep merge run-0 ... run-(N-1) --out merged
"""


class _MergeSubcommand(argparse._SubParsersAction):
    """The optional ``merge`` subcommand; a stray word is reported as such, not as a bad subcommand."""

    class _Names(dict):
        def __contains__(self, key) -> bool:  # argparse's choice check passes; __call__ reports strays
            return True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.choices = self._Names()  # argparse checks choices before calling the action

    def __call__(self, parser, namespace, values, option_string=None):
        if values and values[0] not in self._name_parser_map:
            raise argparse.ArgumentError(None, f"unrecognized arguments: {' '.join(values)} (options start with --; "
                                               "the only subcommand is `sweep merge`)")
        super().__call__(parser, namespace, values, option_string)


def add_sweep_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``sweep`` (with its ``merge`` subcommand) to an argparse subparsers object.

    The handler is stored as ``func`` (``args.func(args)`` returns the exit status).
    """
    p = subparsers.add_parser(
        "sweep", help="certified amplification over a parameter grid (CSV/npz/JSON, resumable, sharded)",
        description="Certified amplification over the cartesian grid of randomizer options, n and delta,\n"
                    "evaluated in chunks with one compiled program per window bucket. Writes\n"
                    "OUT/results.csv (one row per point: parameters, lower, upper, paper, certified,\n"
                    "status), results.npz, results.json (versions, methods, tolerances, device) and, with\n"
                    "matplotlib installed, OUT/sweep.png. With no axes it runs the embedded default grid\n"
                    "(general randomizer, eps0 0.2..8, n 1e2..1e5, delta 1e-6; under a minute on 2 cores).",
        epilog=_SWEEP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--randomizer", default=None, metavar="NAME[,NAME]",
                   help="catalog name(s) (see `jaxshuffle randomizers`; default general)")
    kinds = _option_kinds()
    users: dict[str, list[str]] = {}
    helps: dict[str, set] = {}
    for rname, e in _catalog().items():
        for a in e.args:
            users.setdefault(a.name, []).append(rname)
            helps.setdefault(a.name, set()).add(a.help)
    for name in sorted(kinds, key=lambda s: (s != "eps0", s.lower())):
        flags = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
        who = users[name] if len(users[name]) <= 4 else users[name][:4] + ["..."]
        text = ("local budget eps0 (p = e^eps0)" if name == "eps0" else next(iter(helps[name]))
                if len(helps[name]) == 1 else f"option {name}, meaning per randomizer (`jaxshuffle randomizers`)")
        p.add_argument(*flags, dest=f"opt_{name}", default=None, metavar="GRID",
                       help=f"{text} [{', '.join(who)}]" if name != "eps0" else f"{text}")
    p.add_argument("--n", default=None, metavar="GRID", help="number of users (grid; rounded to integers)")
    p.add_argument("--delta", default=None, metavar="GRID|RULE", help="delta: numbers and/or rules in n (0.01/n)")
    p.add_argument("--out", default=None, metavar="DIR", help="output directory (default jaxshuffle-sweep)")
    p.add_argument("--rtol", type=float, default=1e-6, help="relative width of every epsilon bracket (default 1e-6)")
    p.add_argument("--no-lower", action="store_true", help="skip the Theorem 5.1 lower bounds")
    p.add_argument("--scaled", action="store_true",
                   help="also use the (u+v)-scaled pair for the upper bound (proven only when every pair of "
                        "inputs has total variation exactly beta, e.g. k-ary RR; see jaxshuffle.accountant)")
    p.add_argument("--no-merge-buckets", action="store_true",
                   help="one program per natural window size (exactly amplify's windows; more compiles)")
    p.add_argument("--shard", default=None, metavar="i/N", help="run only shard i of N (multi-host); merge later")
    p.add_argument("--devices", type=int, default=None, metavar="K", help="use the first K local devices (default all)")
    p.add_argument("--chunk-size", type=int, default=None, metavar="C", help="searches per chunk (default: automatic)")
    p.add_argument("--memory", type=float, default=None, metavar="BYTES", help="working memory per device for a chunk")
    p.add_argument("--plot", default=None, metavar="PNG", help="figure path (default OUT/sweep.png)")
    p.add_argument("--no-plot", action="store_true", help="do not draw the figure")
    p.add_argument("--overwrite", action="store_true", help="replace a different sweep found in --out")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_cmd_sweep, sweep_command=None)
    sub = p.add_subparsers(dest="sweep_command", metavar="{merge}", action=_MergeSubcommand)
    pm = sub.add_parser("merge", help="join shard files / sweep directories of one sweep",
                        description="Join the shards of one sweep (directories or shard-i-of-N.npz files) into "
                                    "OUT/results.csv, results.npz, results.json.", allow_abbrev=False)
    pm.add_argument("inputs", nargs="+", metavar="DIR_OR_SHARD")
    pm.add_argument("--out", required=True, metavar="DIR")
    pm.add_argument("--allow-partial", action="store_true", help="write the finished points even if some are missing")
    pm.add_argument("--quiet", action="store_true")
    pm.set_defaults(func=_cmd_merge)
    return p


def _cmd_sweep(args) -> int:
    kinds = _option_kinds()
    opts = {k: getattr(args, f"opt_{k}") for k in kinds if getattr(args, f"opt_{k}", None) is not None}
    default = args.randomizer is None and not opts and args.n is None and args.delta is None
    if default:
        g = default_grid()
        name, n, delta = g.pop("randomizer"), g.pop("n"), g.pop("delta")
        opts = g
    else:
        name, n, delta = args.randomizer or "general", args.n, args.delta
        if n is None:
            raise ValueError("n: required (e.g. --n 1e3,1e4 or --n 1e3..1e6:7)")
        if delta is None:
            raise ValueError("delta: required (e.g. --delta 1e-6 or --delta 0.01/n)")
    out = args.out or "jaxshuffle-sweep"
    res = sweep(name, n=n, delta=delta, out=out, rtol=args.rtol, lower=not args.no_lower, scaled_variant=args.scaled,
                merge_buckets=not args.no_merge_buckets, shard=args.shard, devices=args.devices,
                chunk_size=args.chunk_size, memory=args.memory, quiet=args.quiet, overwrite=args.overwrite,
                **opts)
    msg = f"{len(res)} points -> {Path(out) / 'results.csv'}"
    if res.complete and not args.no_plot and _shard_n(args.shard) == 1:
        png = Path(args.plot) if args.plot else Path(out) / "sweep.png"
        try:
            from jaxshuffle import plot as jplot

            jplot.summary_figure(res, png)
            msg += f", {png}"
        except ImportError as exc:
            if args.plot:
                raise ValueError(f"plot: {exc}") from None
            print(f"[sweep] no figure: {exc}", file=sys.stderr)
    print(msg)
    return 0


def _shard_n(shard) -> int:
    return _parse_shard(shard)[1]


def _cmd_merge(args) -> int:
    res = merge(args.inputs, args.out, allow_partial=args.allow_partial, quiet=args.quiet)
    print(f"{len(res)} points -> {Path(args.out) / 'results.csv'}")
    return 0


def add_plot_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``plot`` (``jaxshuffle plot RESULTS.csv -o out.png``) to an argparse subparsers object."""
    p = subparsers.add_parser(
        "plot", help="plot sweep results (amplification ratio, privacy-utility surface)",
        description="Draw a figure from a sweep's results (results.csv, results.npz or the sweep directory). "
                    "kind auto: the privacy-utility surface over (n, eps0) and the amplification ratio when the "
                    "grid has several n and eps0, else the ratio only. Needs matplotlib (pip install "
                    "'jaxshuffle[plot]').", allow_abbrev=False)
    p.add_argument("results", metavar="RESULTS", help="results.csv / results.npz / sweep directory")
    p.add_argument("-o", "--output", required=True, metavar="PNG", help="output image (png, pdf, svg)")
    p.add_argument("--kind", choices=("auto", "ratio", "surface", "both"), default="auto")
    p.add_argument("--n", type=float, default=None, help="ratio plot: this n only (default: one line per n)")
    p.add_argument("--delta-rule", default=None, help="use the points with this delta_rule (default: the first)")
    p.add_argument("--randomizer", default=None, help="use the points of this randomizer (default: the first)")
    p.add_argument("--targets", default="0.1,0.3,1", metavar="EPS[,EPS]", help="contour levels of amplified eps")
    p.add_argument("--utility-k", type=float, default=None, metavar="K",
                   help="overlay the std of the k-ary RR frequency estimator (default: the grid's k, else 10; 0: none)")
    p.add_argument("--dpi", type=int, default=150)
    p.set_defaults(func=_cmd_plot)
    return p


def _cmd_plot(args) -> int:
    try:
        from jaxshuffle import plot as jplot

        jplot._require_matplotlib()
    except ImportError as exc:
        raise ValueError(f"plot: {exc}") from None
    res = load(args.results)
    targets = [float(x) for x in parse_grid(args.targets)]
    jplot.summary_figure(res, args.output, kind=args.kind, n=args.n, delta_rule=args.delta_rule,
                         randomizer=args.randomizer, targets=targets, utility_k=args.utility_k, dpi=args.dpi)
    print(args.output)
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m jaxshuffle.sweeps [ARGS]`` = ``jaxshuffle sweep [ARGS]``; ``... plot ARGS`` = ``jaxshuffle plot``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _Parser(prog="jaxshuffle", allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    add_sweep_parser(sub)
    add_plot_parser(sub)
    if not argv or argv[0] not in ("sweep", "plot"):
        argv = ["sweep", *argv]
    try:
        from jaxshuffle._config import enable_compilation_cache

        enable_compilation_cache()
        args = parser.parse_args(argv)
        return args.func(args)
    except ValueError as exc:
        print(f"jaxshuffle: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
