"""Which grid a sweep's spec makes (:func:`make_grid`): one place that knows every kind of grid."""

from __future__ import annotations

from jaxshuffle.sweeps.jobs import RoundsGrid, SweepGrid
from jaxshuffle.sweeps.sampled import SampledGrid

__all__ = ["make_grid"]


def make_grid(spec: dict, settings: dict):
    """The grid of a sweep from its spec and settings: :class:`~jaxshuffle.sweeps.jobs.RoundsGrid` with a
    rounds axis, else :class:`~jaxshuffle.sweeps.sampled.SampledGrid` with a sample_rate axis, else
    :class:`~jaxshuffle.sweeps.jobs.SweepGrid`."""
    if "rounds" in spec:
        r = settings.get("rounds") or {}
        return RoundsGrid(spec, r.get("blanket_points"), r.get("discretization"))
    if "sample_rate" in spec:
        return SampledGrid(spec, settings["lower"], settings.get("scaled_variant", False), settings["upper_from"])
    return SweepGrid(spec, settings["lower"], settings.get("scaled_variant", False), settings["upper_from"])
