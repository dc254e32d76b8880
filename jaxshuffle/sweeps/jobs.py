"""Jobs: the searches behind each grid point, deduplicated over the grid.

Two kinds: the two-count-pair searches of :func:`jaxshuffle.accountant.amplification_jobs`, and, for
points whose randomizer carries its concrete mechanism (k-ary RR, a row's matrix), one *mechanism search* per
distinct point: the blanket-pair upper bound and the exact-dataset lower bound of
:func:`jaxshuffle.accountant.with_mechanism_bounds` (the hook ``amplify(..., upper_from="best")``
uses). :meth:`SweepGrid.combine` folds them in by ``amplify``'s rule.

A sweep with a ``rounds`` axis has a third kind only (:class:`RoundsGrid`): one *rounds job* per
distinct ``(randomizer options, n, T, delta)`` point, bucketed by ``(randomizer options, n)``; a
bucket is one chunk, evaluated by ONE call of :func:`jaxshuffle.accountant.rounds.composed_epsilon`
over all its ``T`` and ``delta`` (one round PLD built per bucket, composed for every cell).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

from jaxshuffle.sweeps.columns import (
    RESULT_ORDER,
    ROUND_SOURCES,
    ROUNDS_EXTRA,
    ROUNDS_RESULT_ORDER,
    label_columns,
)
from jaxshuffle.sweeps.grid import catalog_rows, expand

if TYPE_CHECKING:
    from jaxshuffle.engine.two_count.plan import Plan
    from jaxshuffle.randomizers.catalog import Entry
    from jaxshuffle.randomizers.params import LowerParams, VRParams


def point_table(table: dict[str, np.ndarray], size: int,
                points: np.ndarray | None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``points`` as sorted int64 (all ``size`` points when None) and a result's first columns there:
    ``index`` and the grid's parameter columns."""
    points = np.arange(size) if points is None else np.sort(np.asarray(points, dtype=np.int64))
    return points, {"index": points, **{k: v[points] for k, v in table.items()}}


# ----------------------------------------------------------------------------------------
# Jobs: the two-count-pair searches behind each point (accountant.amplification_jobs)


#: Mechanism searches per chunk unless ``chunk_size`` is given. The blanket engine's working set
#: grows with the batch (measured at n = 1e4 on CPU: 8 k-RR points 1.9 GB peak RSS, 64 points 9 GB),
#: so chunks are small, and a bucket holds the points of one n band (``ceil(log2 n)``), whose
#: engine plans are alike (mixing n = 100 with n = 1e4 in one batch asked for 8 GB).
MECHANISM_CHUNK = 4
#: Cost of one mechanism search in the progress display's units (two-count window counts): what the ETA
#: guesses a k-RR sweep's mechanism chunks cost from its two-count chunks before one of them ran
#: (measured on 2 CPU cores, n = 1e5..1e7: a two-count chunk of 32 x 32768 counts ~7 s, a chunk of 4
#: mechanism searches 60-110 s; once one ran, the ETA prices them by their own time).
MECHANISM_COST = 1 << 21


def option_block(distinct: np.ndarray, n_options: int, width: int, n_tail: int) -> np.ndarray:
    """Rows ``(options..., tail...)`` of one randomizer laid out ``width`` wide: its ``n_options`` option
    values first, the ``n_tail`` shared columns (n, rounds, delta) last, NaN between (other randomizers
    have more options)."""
    block = np.full((len(distinct), width), np.nan)
    block[:, :n_options], block[:, width - n_tail:] = distinct[:, :-n_tail], distinct[:, -n_tail:]
    return block


def one_job_per_point(point_job: np.ndarray, n_jobs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(pending0, job_points, job_ptr)`` of a grid whose every point waits for one job ``point_job[i]``
    (the index :meth:`SweepGrid.points_of_jobs` reads)."""
    order = np.argsort(point_job, kind="stable")
    return (np.ones(len(point_job), dtype=np.int64), order,
            np.searchsorted(point_job[order], np.arange(n_jobs + 1)))


class _JobIndex(Protocol):
    """What :meth:`SweepGrid.points_of_jobs` and :meth:`SweepGrid.pending` read of a grid (every grid class
    shares the two methods)."""

    size: int
    pending0: np.ndarray
    _job_points: np.ndarray
    _job_ptr: np.ndarray

    def points_of_jobs(self, jobs: np.ndarray) -> np.ndarray: ...


class MechanismPlan(NamedTuple):
    """A bucket of mechanism searches: the points of one catalog randomizer (hashable, picklable).

    ``options`` name the leading columns of the bucket's rows (then ``n``, ``delta``); ``window``
    is a cost weight for progress and ETA only.
    """

    randomizer: str
    options: tuple
    window: int = MECHANISM_COST


def carries_mechanism(params: VRParams) -> bool:
    """True when :func:`~jaxshuffle.accountant.with_mechanism_bounds` has a mechanism to evaluate."""
    return params.mechanism is not None and params.blanket_per_user is None


def evaluate_mechanisms(plan: MechanismPlan, rows: np.ndarray, size: int,
                        rtol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One chunk of mechanism searches through :func:`jaxshuffle.accountant.with_mechanism_bounds`.

    ``rows`` (shape ``(m, len(plan.options) + 2)``: options, ``n``, ``delta``) are padded to
    ``size`` (repeating the first row: a fixed shape, and the engine's plan is a maximum over rows,
    so padding changes no value). The hook is applied to a report that claims nothing (``upper =
    inf``, ``lower = 0``), so it returns the mechanism's own certified values. Returns
    ``(lower, upper, status, aux)`` as the two-count runner does: ``lower`` the exact datasets'
    certified lower bound (errs low), ``upper`` the blanket pair's certified upper bound (errs
    high; ``inf`` where the engine does not cover the point), ``status`` the blanket search's
    status and ``aux`` the lower bound's status, or ``-1`` where the engine does not cover the point.
    """
    import jax.numpy as jnp

    from jaxshuffle.accountant.amplify import AmplificationReport, with_mechanism_bounds
    from jaxshuffle.engine.two_count.search import Status

    m = len(rows)
    pad = np.concatenate([np.arange(m), np.zeros(size - m, dtype=np.int64)])
    rows = rows[pad]
    entry = catalog_rows()[plan.randomizer]
    params = entry.fn(**{k: jnp.asarray(rows[:, i]) for i, k in enumerate(plan.options)})
    n, delta = rows[:, -2], rows[:, -1]
    full = lambda x, dtype=np.float64: jnp.full(size, x, dtype=dtype)  # noqa: E731
    claims_nothing = AmplificationReport(
        upper=full(np.inf), worst_case=full(np.inf), blanket=full(np.inf), lower=full(0.0), paper=full(np.nan),
        certified=full(True, bool), paper_certified=full(False, bool), has_lower=full(False, bool),
        upper_source=full(0, np.int8), status=full(Status.INVALID, np.int8),
        status_lower=full(Status.ZERO, np.int8), status_paper=full(Status.INVALID, np.int8),
        clone_proof=full(0, np.int8))
    rep = with_mechanism_bounds(claims_nothing, params, n, delta, rtol=rtol)
    covered = np.asarray(rep.has_lower)
    aux = np.where(covered, np.asarray(rep.status_lower), -1)
    return (np.asarray(rep.lower)[:m], np.asarray(rep.blanket)[:m], np.asarray(rep.status).astype(np.int8)[:m],
            aux.astype(np.int32)[:m])


def catalog_lower_params(entry: Entry, params: VRParams, opts: dict, with_lower: bool) -> LowerParams | None:
    """The catalog's Theorem 5.1 parameters at ``opts`` as the CLI passes them (None where the row has none,
    ``with_lower`` is False, the row is multi-message, or the construction needs more inputs)."""
    import jax.numpy as jnp

    if not (with_lower and entry.lower is not None and params.blanket_per_user is None):
        return None
    try:  # some lower-bound constructions need more inputs (Hadamard K >= 4B)
        return entry.lower(**{k: jnp.asarray(v) for k, v in opts.items()})
    except ValueError:
        return None


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

    from jaxshuffle.accountant.amplify import PointInfo, amplification_jobs

    params = entry.fn(**{k: jnp.asarray(v) for k, v in opts.items()})
    lp = catalog_lower_params(entry, params, opts, with_lower)
    info, jobs = amplification_jobs(params, n, delta, lp, scaled_variant=scaled_variant)
    shape = np.shape(n)

    def col(x):
        return np.broadcast_to(np.asarray(x, dtype=np.float64), shape)

    out = {}
    for job in jobs:
        rows = np.stack([col(x) for x in (*job.pair.arrays(), info.n_engine if job.n_engine is None
                                         else job.n_engine, job.delta)], axis=1)
        out[job.role] = (rows, np.broadcast_to(np.asarray(job.needed), shape))
    # PointInfo declares jax.Array fields; the sweep keeps numpy arrays there, which combine_amplification reads
    # with xp=numpy (the declaration in accountant/amplify.py is narrower than its use)
    return (PointInfo(*(np.broadcast_to(np.asarray(x), shape) for x in info)),  # type: ignore[arg-type]
            out, carries_mechanism(params))


def _builds_every_matrix(entry, options: dict[str, np.ndarray]) -> bool:
    """False where a row that carries a matrix point by point (RowMatrix) does not build it at some
    distinct point of the grid (True for every other mechanism)."""
    import jax.numpy as jnp

    from jaxshuffle.randomizers.matrices import row_covers
    from jaxshuffle.randomizers.params import RowMatrix

    names = [a.name for a in entry.args]
    distinct = np.unique(np.stack([np.asarray(options[k], np.float64) for k in names], 1), axis=0)
    mech = entry.fn(**{k: jnp.asarray(distinct[:, i]) for i, k in enumerate(names)}).mechanism
    return not isinstance(mech, RowMatrix) or all(row_covers(mech.builder, *o) for o in mech.points(len(distinct)))


class SweepGrid:
    """Points, their jobs (deduplicated) and the per-point combination.

    ``jobs`` are the distinct two-count searches (rows ``(u, v, w, r0, r1, n_engine, delta)``, ids
    ``0 .. len(jobs) - 1``); with ``upper_from`` other than ``"worst-case"`` the distinct mechanism
    searches follow (ids ``len(jobs) .. n_jobs - 1``, one :class:`MechanismPlan` bucket per
    randomizer in ``mechanism_buckets``, rows in ``mechanism_rows``).
    """

    result_order = RESULT_ORDER  #: result columns after the parameter columns
    extra_width = 0  #: columns of a chunk's ``extra`` array (none: two-count and mechanism searches)

    def __init__(self, spec: dict, with_lower: bool, scaled_variant: bool = False, upper_from: str = "worst-case"):
        from jaxshuffle.accountant.amplify import JOB_ROLES, check_upper_from

        check_upper_from(upper_from)
        self.spec = spec
        self.upper_from = upper_from
        self.table, self.groups, self.option_names = expand(spec)
        self.size = len(self.table["n"])
        self.info: list = []  # per group: PointInfo (numpy)
        self.roles: list[list[str]] = []  # per group: the roles of its jobs, in amplification_jobs' order
        role_rows, role_point, role_name = [], [], []
        mech_groups = []  # (group, its option names, distinct rows, point -> row)
        for g in self.groups:
            entry = catalog_rows()[g.name]
            sl = slice(g.start, g.stop)
            info, jobs, mech = _point_jobs(entry, g.options, self.table["n"][sl], self.table["delta"][sl],
                                           with_lower, scaled_variant)
            if upper_from == "blanket" and not (mech and _builds_every_matrix(entry, g.options)):
                raise ValueError(f"upper_from: 'blanket' needs randomizers that carry their mechanism at every "
                                 f"point (k-ary RR: grr; subset-selection, hadamard-response, binary-rr where they "
                                 f"build their matrix); {g.name!r} does not (use 'best' or 'worst-case')")
            if mech and upper_from != "worst-case":
                names = tuple(a.name for a in entry.args)
                rows = np.stack([g.options[k] for k in names] + [self.table["n"][sl], self.table["delta"][sl]], 1)
                distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
                order = np.argsort(distinct[:, -2], kind="stable")  # by n: a chunk's engine plan stays small
                rank = np.empty_like(order)
                rank[order] = np.arange(len(order))
                mech_groups.append((g, names, distinct[order], rank[inverse.ravel()]))

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
        # mechanism searches: ids after the two-count jobs; point -> id (-1: none)
        self.mechanism_job = np.full(self.size, -1, dtype=np.int64)
        self.mechanism_buckets: list = []
        width = max([len(names) for _, names, _, _ in mech_groups], default=0) + 2
        blocks = []
        next_id = len(self.jobs)
        for g, names, distinct, point_row in mech_groups:
            ids = next_id + np.arange(len(distinct))
            self.mechanism_job[g.start:g.stop] = ids[point_row]
            band = np.ceil(np.log2(distinct[:, -2]))  # sorted by n: bands are consecutive
            for b in np.unique(band):
                sel = ids[band == b]
                self.mechanism_buckets.append((MechanismPlan(g.name, names), sel, np.zeros(len(sel))))
            blocks.append(option_block(distinct, len(names), width, 2))
            next_id += len(distinct)
        self.mechanism_rows = np.concatenate(blocks) if blocks else np.zeros((0, width))
        self.n_jobs = next_id
        if mech_groups:  # every point with a mechanism search also waits for it
            has = np.nonzero(self.mechanism_job >= 0)[0]
            self.pending0 = self.pending0 + (self.mechanism_job >= 0)
            pts = np.concatenate([pairs[:, 0], has])
            jbs = np.concatenate([pairs[:, 1], self.mechanism_job[has]])
            order = np.argsort(jbs, kind="stable")
            self._job_points = pts[order]
            self._job_ptr = np.searchsorted(jbs[order], np.arange(self.n_jobs + 1))

    def job_rows(self, plan: Plan | MechanismPlan, ids: np.ndarray) -> np.ndarray:
        """The rows a chunk's runner needs: two-count pairs, or (for a :class:`MechanismPlan`) the
        mechanism rows (its options, then ``n``, ``delta``)."""
        if isinstance(plan, MechanismPlan):
            rows = self.mechanism_rows[np.asarray(ids) - len(self.jobs)]
            return np.concatenate([rows[:, :len(plan.options)], rows[:, -2:]], axis=1)
        return self.jobs[ids]

    def points_of_jobs(self: _JobIndex, jobs: np.ndarray) -> np.ndarray:
        """Points waiting on each of ``jobs`` (one entry per distinct (point, job) pair)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        starts, stops = self._job_ptr[jobs], self._job_ptr[jobs + 1]
        lens = stops - starts
        if lens.sum() == 0:
            return np.zeros(0, np.int64)
        offs = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
        return self._job_points[np.arange(lens.sum()) + offs]

    def pending(self: _JobIndex, job_done: np.ndarray) -> np.ndarray:
        """Number of unfinished distinct jobs per point."""
        return self.pending0 - np.bincount(self.points_of_jobs(np.nonzero(job_done)[0]), minlength=self.size)

    def combine(self, lower: np.ndarray, upper: np.ndarray, status: np.ndarray, aux: np.ndarray,
                points: np.ndarray | None = None, extra: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Result columns for ``points`` (all by default); job arrays indexed by job id (``aux``: the
        runner's fourth array, read for mechanism searches only; ``extra`` is not used)."""
        from jaxshuffle.accountant.amplify import JOB_ROLES, PointInfo, combine_amplification, fold_mechanism_columns

        points, out = point_table(self.table, self.size, points)
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
            mj = self.mechanism_job[sel]
            if (mj >= 0).any():
                has = mj >= 0
                jj = np.where(has, mj, 0)
                part = {k: v[has] for k, v in cols.items()}
                # aux: the exact datasets' status, < 0 where the mechanism engine does not cover the point
                a = aux[jj[has]]
                part.update(fold_mechanism_columns(part, upper[jj[has]], lower[jj[has]], status[jj[has]], a,
                                                   a >= 0, self.upper_from == "blanket"))
                for k, v in part.items():
                    cols[k] = np.asarray(cols[k]).copy()
                    cols[k][has] = v
            for k, v in cols.items():
                parts.setdefault(k, []).append(v)
        for k in RESULT_ORDER:
            out[k] = np.concatenate(parts[k]) if k in parts else np.zeros(0)
        return label_columns(out)


# ----------------------------------------------------------------------------------------
# Rounds: composed epsilon over T rounds (accountant.rounds.composed_epsilon), one call per (options, n)


#: Cost of one rounds bucket in the progress display's units (two-count window counts).
ROUNDS_COST = 1 << 16


class RoundsPlan(NamedTuple):
    """A bucket of rounds jobs: the ``(T, delta)`` cells of ONE ``(randomizer options, n)`` (hashable, picklable).

    ``options`` name the leading columns of the bucket's rows (then ``n``, ``rounds``, ``delta``);
    ``blanket_points`` and ``discretization`` are :func:`~jaxshuffle.accountant.rounds.composed_epsilon`'s
    (None: its defaults); ``window`` is a cost weight for progress and ETA only.
    """

    randomizer: str
    options: tuple
    blanket_points: int | None = None
    discretization: float | None = None
    window: int = ROUNDS_COST
    sampled: bool = False  #: the rows carry a sample_rate column after ``n``


def evaluate_rounds(plan: RoundsPlan, rows: np.ndarray,
                    size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One rounds bucket through ONE :func:`~jaxshuffle.accountant.rounds.composed_epsilon` call.

    ``rows`` (shape ``(m, len(plan.options) + 3)``: options, ``n``, ``rounds``, ``delta``; with
    ``plan.sampled`` a ``sample_rate`` column after ``n``) share their options, ``n`` (and ``g``); the
    call covers every distinct ``T`` and ``delta`` among them (one round PLD, composed for all), so a
    point's values are those of ``composed_epsilon(randomizer, n, Ts, deltas, sample_rate=g)`` with the
    bucket's ``Ts`` and ``deltas``. Returns ``(lower, upper, status, aux, extra)``: ``lower`` 0
    (no lower bound on the mechanism), ``upper`` the certified composed epsilon, ``status`` the index of
    its source in :data:`jaxshuffle.accountant.rounds.SOURCES`, ``aux`` 0, ``extra`` the
    :data:`~jaxshuffle.sweeps.store.ROUNDS_EXTRA` columns. ``size`` is not used (no padding).
    """
    from jaxshuffle.accountant.rounds import SOURCES, composed_epsilon

    rows = np.asarray(rows, dtype=np.float64)
    k = len(plan.options)
    shared = k + 1 + int(plan.sampled)  # options, n (and g)
    m = len(rows)
    if m == 0 or not np.array_equal(rows[:, :shared], np.broadcast_to(rows[0, :shared], (m, shared))):
        raise ValueError("internal: a rounds chunk must hold the points of one (randomizer options, n)")
    params = catalog_rows()[plan.randomizer].fn(**{name: float(rows[0, i]) for i, name in enumerate(plan.options)})
    T, delta = rows[:, -2], rows[:, -1]
    rate = {"sample_rate": float(rows[0, k + 1])} if plan.sampled else {}
    c = composed_epsilon(params, float(rows[0, k]), np.unique(T), np.unique(delta),
                         discretization=plan.discretization, blanket_points=plan.blanket_points, **rate)
    i = np.searchsorted(c.rounds, T.astype(np.int64))
    j = np.searchsorted(c.delta, delta)
    if not (np.array_equal(c.rounds[i], T) and np.array_equal(c.delta[j], delta)):
        raise ValueError("internal: composed_epsilon returned other rounds or deltas than asked")
    source = np.asarray([SOURCES.index(str(x)) for x in c.upper_source[i, j]], dtype=np.int8)
    values = {"pld": c.pld, "pld_lower": c.lower, "blanket_pld": c.blanket_pld, "basic": c.basic,
              "advanced": c.advanced}
    extra = np.stack([values[key][i, j] if key in values else np.full(m, c.discretization)
                      for key in ROUNDS_EXTRA], axis=1).astype(np.float64)
    return np.zeros(m), np.asarray(c.upper, np.float64)[i, j], source, np.zeros(m, np.int32), extra


class RoundsGrid:
    """The points of a sweep with a rounds axis and their rounds jobs (the same interface as :class:`SweepGrid`).

    Every point is one ``(randomizer options, n, T, delta)`` cell; identical cells are one job. Jobs
    are bucketed by ``(randomizer options, n)``: a bucket is one chunk (:func:`evaluate_rounds`), in
    ``mechanism_buckets`` (the name :func:`~jaxshuffle.sweeps.run.sweep` reads extra buckets under);
    there are no two-count searches (``jobs`` is empty).
    """

    result_order = ROUNDS_RESULT_ORDER
    extra_width = len(ROUNDS_EXTRA)

    def __init__(self, spec: dict, blanket_points: int | None = None, discretization: float | None = None):
        import jax.numpy as jnp

        if "rounds" not in spec:
            raise ValueError("internal: RoundsGrid needs a spec with a rounds axis")
        self.spec = spec
        self.table, self.groups, self.option_names = expand(spec)
        self.size = len(self.table["n"])
        self.jobs = np.zeros((0, 7))
        self.point_job = np.full(self.size, -1, dtype=np.int64)
        self.pqb = np.full((self.size, 3), np.nan)  # the randomizer's p, beta, q per point
        self.mechanism_buckets: list = []
        blocks, next_id = [], 0
        widths = [len(catalog_rows()[g.name].args) for g in self.groups]
        sampled = "sample_rate" in spec
        tail = ("n", "sample_rate", "rounds", "delta") if sampled else ("n", "rounds", "delta")
        self.tail = len(tail)
        width = max(widths, default=0) + self.tail
        for g in self.groups:
            entry = catalog_rows()[g.name]
            sl = slice(g.start, g.stop)
            names = tuple(a.name for a in entry.args)
            params = entry.fn(**{k: jnp.asarray(g.options[k]) for k in names})  # checks the options
            shape = (g.stop - g.start,)
            self.pqb[sl] = np.stack([np.broadcast_to(np.asarray(x, dtype=np.float64), shape)
                                     for x in (params.p, params.beta, params.q)], axis=1)
            rows = np.stack([g.options[k] for k in names] + [self.table[k][sl] for k in tail], axis=1)
            distinct, inverse = np.unique(rows, axis=0, return_inverse=True)  # sorted: one bucket's rows adjacent
            ids = next_id + np.arange(len(distinct))
            self.point_job[sl] = ids[inverse.ravel()]
            _, first = np.unique(distinct[:, :-2], axis=0, return_index=True)  # one bucket per (options, n[, g])
            stops = np.append(np.sort(first)[1:], len(distinct))
            for a, b in zip(np.sort(first), stops):
                plan = RoundsPlan(g.name, names, blanket_points, discretization, sampled=sampled)
                self.mechanism_buckets.append((plan, ids[a:b], np.zeros(b - a)))
            blocks.append(option_block(distinct, len(names), width, self.tail))
            next_id += len(distinct)
        self.rounds_rows = np.concatenate(blocks) if blocks else np.zeros((0, width))
        self.n_jobs = next_id
        self.pending0, self._job_points, self._job_ptr = one_job_per_point(self.point_job, self.n_jobs)

    def job_rows(self, plan: RoundsPlan, ids: np.ndarray) -> np.ndarray:
        """The rows of a rounds chunk: its randomizer's options, then ``n``, (``sample_rate``,) ``rounds``,
        ``delta``."""
        rows = self.rounds_rows[np.asarray(ids)]
        return np.concatenate([rows[:, :len(plan.options)], rows[:, -self.tail:]], axis=1)

    points_of_jobs = SweepGrid.points_of_jobs
    pending = SweepGrid.pending

    def combine(self, lower: np.ndarray, upper: np.ndarray, status: np.ndarray, aux: np.ndarray,
                points: np.ndarray | None = None, extra: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Result columns for ``points`` (all by default): job arrays indexed by job id; ``status`` holds the
        index of the composed bound's source, ``extra`` the :data:`~jaxshuffle.sweeps.store.ROUNDS_EXTRA`
        columns (``lower`` and ``aux`` are not used)."""
        points, out = point_table(self.table, self.size, points)
        j = self.point_job[points]
        if extra is None:
            extra = np.full((self.n_jobs, self.extra_width), np.nan)
        out["upper"] = np.asarray(upper, dtype=np.float64)[j]
        out["upper_source"] = np.asarray(ROUND_SOURCES)[np.asarray(status)[j].astype(np.int64)]
        out["certified"] = np.ones(points.size, dtype=bool)  # every candidate is a certified upper bound
        for c, key in enumerate(ROUNDS_EXTRA):
            out[key] = np.asarray(extra, dtype=np.float64)[j, c]
        for c, key in enumerate(("p", "beta", "q")):
            out[key] = self.pqb[points, c]
        return out
