"""Jobs: the two-count-pair searches behind each grid point (:func:`jaxshuffle.accountant.amplification_jobs`), deduplicated over the grid."""

from __future__ import annotations


import numpy as np

from jaxshuffle.sweeps.grid import catalog_rows, expand
from jaxshuffle.sweeps.store import BOOL_COLUMNS, RESULT_ORDER, SOURCE_NAMES, STATUS_NAMES


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
        rows = np.stack([col(x) for x in (*job.pair.arrays(), info.n_engine if job.n_engine is None
                                         else job.n_engine, job.delta)], axis=1)
        out[job.role] = (rows, np.broadcast_to(np.asarray(job.needed), shape))
    return PointInfo(*(np.broadcast_to(np.asarray(x), shape) for x in info)), out


class SweepGrid:
    """Points, their jobs (deduplicated) and the per-point combination."""

    def __init__(self, spec: dict, with_lower: bool, scaled_variant: bool = False):
        from jaxshuffle.accountant import JOB_ROLES

        self.spec = spec
        self.table, self.groups, self.option_names = expand(spec)
        self.size = len(self.table["n"])
        self.info: list = []  # per group: PointInfo (numpy)
        self.roles: list[list[str]] = []  # per group: the roles of its jobs, in amplification_jobs' order
        role_rows, role_point, role_name = [], [], []
        for g in self.groups:
            entry = catalog_rows()[g.name]
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
        for k in RESULT_ORDER:
            out[k] = np.concatenate(parts[k]) if k in parts else np.zeros(0)
        for k in ("status", "status_lower", "status_paper"):
            out[k] = np.asarray(STATUS_NAMES)[out[k].astype(np.int64)]
        out["upper_source"] = np.asarray(SOURCE_NAMES)[out["upper_source"].astype(np.int64)]
        for k in BOOL_COLUMNS:
            out[k] = out[k].astype(bool)
        return out
