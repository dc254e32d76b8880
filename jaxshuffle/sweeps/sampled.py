"""A sweep with a ``sample_rate`` axis (clients sampled per round): every point is one :func:`amplify` call.

A point of such a sweep is ``(randomizer options, n, g, delta)`` with ``g`` the probability that each
user takes part in the round (Poisson client sampling). Its values are exactly those of
:func:`jaxshuffle.accountant.amplify` with ``sample_rate=g`` on the chunk the point is evaluated in:
the sampled round's certified bounds where ``g < 1`` (docs/math.md 12.10), amplify's own rule at
``g = 1``. There are no deduplicated two-count searches here (a sampled round has no two-count pair),
so identical points are one job and the jobs are evaluated a few at a time, bucketed by randomizer,
by ``g = 1`` or not (amplify evaluates a mixed batch twice) and by the band ``ceil(log2 n)`` (the
engines' plans are maxima over a batch). A sweep that has both a ``sample_rate`` and a ``rounds``
axis is a rounds sweep (:class:`~jaxshuffle.sweeps.jobs.RoundsGrid`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxshuffle.sweeps.columns import (
    RESULT_ORDER,
    label_columns,
)
from jaxshuffle.sweeps.grid import catalog_rows, expand
from jaxshuffle.sweeps.jobs import (
    MECHANISM_COST,
    SweepGrid,
    catalog_lower_params,
    one_job_per_point,
    option_block,
    point_table,
)

#: Report columns a sampled chunk stores in its chunk file's ``extra`` array (codes as float64), in this order;
#: ``lower``, ``upper``, ``status`` and ``status_lower`` are its four ordinary arrays.
SAMPLED_EXTRA = ("paper", "certified", "worst_case", "clone_proof", "blanket", "upper_source", "paper_certified",
                 "has_lower", "status_paper")


class SampledPlan(NamedTuple):
    """A bucket of sampled points: one catalog randomizer's ``(options, n, g, delta)`` rows (hashable, picklable).

    ``options`` name the leading columns of the rows; ``lower``, ``scaled_variant`` and ``upper_from``
    are the sweep's settings, passed to :func:`~jaxshuffle.accountant.amplify`; ``window`` is a cost
    weight for progress and ETA only.
    """

    randomizer: str
    options: tuple
    lower: bool = True
    scaled_variant: bool = False
    upper_from: str = "best"
    window: int = MECHANISM_COST


def evaluate_sampled(plan: SampledPlan, rows: np.ndarray, size: int,
                     rtol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One chunk of sampled points through ONE :func:`~jaxshuffle.accountant.amplify` call.

    ``rows`` (shape ``(m, len(plan.options) + 3)``: options, ``n``, ``g``, ``delta``) are padded to
    ``size`` by repeating the first row (a fixed shape; amplify's plans are maxima over rows, so
    padding changes no value). Returns ``(lower, upper, status, status_lower, extra)``: amplify's
    ``lower`` (errs low), ``upper`` (certified, errs high), the two statuses, and ``extra`` the
    :data:`SAMPLED_EXTRA` columns as float64 codes.
    """
    import jax.numpy as jnp

    from jaxshuffle.accountant.amplify import amplify

    m = len(rows)
    rows = np.asarray(rows, np.float64)[np.concatenate([np.arange(m), np.zeros(size - m, dtype=np.int64)])]
    entry = catalog_rows()[plan.randomizer]
    opts = {k: rows[:, i] for i, k in enumerate(plan.options)}
    params = entry.fn(**{k: jnp.asarray(v) for k, v in opts.items()})
    lp = catalog_lower_params(entry, params, opts, plan.lower)
    n, g, delta = rows[:, -3], rows[:, -2], rows[:, -1]
    rep = amplify(params, n, delta, lower_params=lp, rtol=rtol, scaled_variant=plan.scaled_variant,
                  upper_from=plan.upper_from, sample_rate=g)
    extra = np.stack([np.asarray(getattr(rep, k), np.float64) for k in SAMPLED_EXTRA], axis=1)[:m]
    return (np.asarray(rep.lower, np.float64)[:m], np.asarray(rep.upper, np.float64)[:m],
            np.asarray(rep.status).astype(np.int8)[:m], np.asarray(rep.status_lower).astype(np.int32)[:m], extra)


class SampledGrid:
    """The points of a sweep with a ``sample_rate`` axis (no rounds axis) and their jobs (the interface of
    :class:`~jaxshuffle.sweeps.jobs.SweepGrid`): identical points are one job, evaluated by
    :func:`evaluate_sampled`, bucketed in ``mechanism_buckets``; there are no two-count searches."""

    result_order = RESULT_ORDER
    extra_width = len(SAMPLED_EXTRA)

    def __init__(self, spec: dict, with_lower: bool, scaled_variant: bool = False, upper_from: str = "best"):
        import jax.numpy as jnp

        from jaxshuffle.accountant.amplify import check_upper_from
        from jaxshuffle.accountant.subsampling import SAMPLED_SCOPE, sampled_route

        if "sample_rate" not in spec or "rounds" in spec:
            raise ValueError("internal: SampledGrid needs a spec with a sample_rate axis and no rounds axis")
        self.spec = spec
        self.table, self.groups, self.option_names = expand(spec)
        self.size = len(self.table["n"])
        check_upper_from(upper_from, sampled=bool(np.any(self.table["sample_rate"] < 1)))
        self.jobs = np.zeros((0, 7))
        self.point_job = np.full(self.size, -1, dtype=np.int64)
        self.pqb = np.full((self.size, 3), np.nan)  # the randomizer's p, beta, q per point
        self.mechanism_buckets: list = []
        width = max([len(catalog_rows()[g.name].args) for g in self.groups], default=0) + 3
        blocks, next_id = [], 0
        for grp in self.groups:
            entry = catalog_rows()[grp.name]
            sl = slice(grp.start, grp.stop)
            names = tuple(a.name for a in entry.args)
            params = entry.fn(**{k: jnp.asarray(grp.options[k]) for k in names})  # checks the options
            if np.any(self.table["sample_rate"][sl] < 1) and sampled_route(params) is None:
                raise ValueError(f"sample_rate: {SAMPLED_SCOPE} (randomizer {grp.name!r}: give it sample_rate 1 "
                                 "only, or leave it out)")
            shape = (grp.stop - grp.start,)
            self.pqb[sl] = np.stack([np.broadcast_to(np.asarray(x, dtype=np.float64), shape)
                                     for x in (params.p, params.beta, params.q)], axis=1)
            rows = np.stack([grp.options[k] for k in names]
                            + [self.table[k][sl] for k in ("n", "sample_rate", "delta")], axis=1)
            distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
            # buckets: g = 1 or not (amplify runs a mixed batch twice), then the band of n (alike engine plans)
            key = np.stack([distinct[:, -2] < 1, np.ceil(np.log2(distinct[:, -3]))], axis=1)
            order = np.lexsort((key[:, 1], key[:, 0]))
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order))
            ids = next_id + np.arange(len(distinct))
            self.point_job[sl] = ids[rank[inverse.ravel()]]
            key = key[order]
            plan = SampledPlan(grp.name, names, bool(with_lower), bool(scaled_variant), upper_from)
            for band in np.unique(key, axis=0):
                sel = ids[np.all(key == band, axis=1)]
                self.mechanism_buckets.append((plan, sel, np.zeros(len(sel))))
            blocks.append(option_block(distinct[order], len(names), width, 3))
            next_id += len(distinct)
        self.rows = np.concatenate(blocks) if blocks else np.zeros((0, width))
        self.n_jobs = next_id
        self.pending0, self._job_points, self._job_ptr = one_job_per_point(self.point_job, self.n_jobs)

    def job_rows(self, plan: SampledPlan, ids: np.ndarray) -> np.ndarray:
        """The rows of a sampled chunk: its randomizer's options, then ``n``, ``sample_rate``, ``delta``."""
        rows = self.rows[np.asarray(ids)]
        return np.concatenate([rows[:, :len(plan.options)], rows[:, -3:]], axis=1)

    points_of_jobs = SweepGrid.points_of_jobs
    pending = SweepGrid.pending

    def combine(self, lower: np.ndarray, upper: np.ndarray, status: np.ndarray, aux: np.ndarray,
                points: np.ndarray | None = None, extra: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Result columns for ``points`` (all by default) from the job arrays (``aux``: the lower bound's
        status; ``extra``: the :data:`SAMPLED_EXTRA` columns)."""
        points, out = point_table(self.table, self.size, points)
        j = self.point_job[points]
        if extra is None:
            extra = np.full((self.n_jobs, self.extra_width), np.nan)
        cols = {"lower": np.asarray(lower, np.float64)[j], "upper": np.asarray(upper, np.float64)[j],
                "status": np.asarray(status)[j], "status_lower": np.asarray(aux)[j]}
        cols.update({key: np.asarray(extra, np.float64)[j, c] for c, key in enumerate(SAMPLED_EXTRA)})
        for c, key in enumerate(("p", "beta", "q")):
            cols[key] = self.pqb[points, c]
        for k in RESULT_ORDER:
            out[k] = cols[k]
        return label_columns(out)
