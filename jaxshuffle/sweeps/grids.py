"""Which grid a sweep's spec makes (:func:`make_grid`): one place that knows every kind of grid.

It also names the types that span every grid (:data:`Grid`, :data:`ChunkPlan`, :data:`Bucket`): they are
defined here, above both :mod:`~jaxshuffle.sweeps.jobs` and :mod:`~jaxshuffle.sweeps.sampled`, so that
neither of the two imports the other's grid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from jaxshuffle.sweeps.jobs import MechanismPlan, RoundsGrid, RoundsPlan, SweepGrid
from jaxshuffle.sweeps.sampled import SampledGrid, SampledPlan

if TYPE_CHECKING:
    from jaxshuffle.engine.two_count.plan import Plan

__all__ = ["make_grid"]

#: A chunk's plan: a two-count window plan, or one of the plans of the searches each grid runs itself.
ChunkPlan: TypeAlias = "Plan | MechanismPlan | RoundsPlan | SampledPlan"
#: A bucket of jobs: its plan, the job ids and the window starts ``c_lo``.
Bucket: TypeAlias = "tuple[ChunkPlan, np.ndarray, np.ndarray]"
#: The grids of a sweep (one interface): one round, a rounds axis, a sample_rate axis.
Grid: TypeAlias = "SweepGrid | RoundsGrid | SampledGrid"


def make_grid(spec: dict, settings: dict) -> Grid:
    """The grid of a sweep from its spec and settings: :class:`~jaxshuffle.sweeps.jobs.RoundsGrid` with a
    rounds axis, else :class:`~jaxshuffle.sweeps.sampled.SampledGrid` with a sample_rate axis, else
    :class:`~jaxshuffle.sweeps.jobs.SweepGrid`."""
    if "rounds" in spec:
        r = settings.get("rounds") or {}
        return RoundsGrid(spec, r.get("blanket_points"), r.get("discretization"))
    if "sample_rate" in spec:
        return SampledGrid(spec, settings["lower"], settings.get("scaled_variant", False), settings["upper_from"])
    return SweepGrid(spec, settings["lower"], settings.get("scaled_variant", False), settings["upper_from"])
