"""Certified divergence of the blanket (three-count) sum form, for k-ary RR and its exact lower bounds.

docs/math.md section "Tight sound bounds for a concrete randomizer: the blanket pair" (and "The
blanket engine"). One module per concept:

* :mod:`jaxshuffle.blanket.kernel`: the sum form (B1) of k-RR and its exact datasets, and its
  certified evaluation at one point (:func:`point_divergence`; the derivation and the certificate
  are in that module's docstring).
* :mod:`jaxshuffle.engine.blanket.walks`: the sums of a binomial's pmf over an interval that the kernel's
  recurrences take (the log-ratio and the outward walk).
* :mod:`jaxshuffle.blanket.plan`: static shapes (:class:`BlanketPlan`, :func:`plan_blanket`) and
  the memory model (:func:`fit_memory`, :func:`lanes_per_batch`).
* :mod:`jaxshuffle.blanket.search`: the certified bracketing search and the public entry points.

Public API: :func:`blanket_epsilon` (certified upper bound for shuffled k-RR, or a dataset's
bracket with ``kind=``), :func:`blanket_lower_epsilon` (certified lower bound),
:func:`plan_blanket` and the jittable :func:`blanket_epsilon_with_plan`, :func:`point_divergence`
(one sum form's certified divergence), :func:`krr_sum_form`.
"""

from jaxshuffle.engine.blanket.kernel import (
    KINDS,
    SumForm,
    coded_sum_form,
    coefficients,
    gaussian_delta,
    krr_sum_form,
    point_divergence,
    window_start,
)
from jaxshuffle.engine.blanket.plan import (
    AUTO_MAX_CELLS,
    BUCKET_BLOCKS,
    BUCKET_FREE_CELLS,
    BUCKET_LINES,
    BUCKET_STEP,
    BYTES_PER_CELL,
    GROUP_FREE_CELLS,
    GROUP_SLACK,
    LANES_PER_BATCH,
    LOWER_KINDS,
    BlanketMemoryError,
    BlanketPlan,
    bucket_plan,
    fit_memory,
    lane_bytes,
    lanes_per_batch,
    plan_blanket,
    plan_cells,
    plan_geometry,
    plan_groups,
    point_cells,
    power_of_two,
    quarter_octave,
    shared_plan,
)
from jaxshuffle.engine.blanket.search import (
    KaryRRBounds,
    blanket_epsilon,
    blanket_epsilon_with_plan,
    blanket_lower_epsilon,
    eager_brackets,
    krr_bounds,
    plan_krr_bounds,
)
from jaxshuffle.engine.blanket.search import (
    coded_brackets as coded_brackets,
)

__all__ = [
    "AUTO_MAX_CELLS",
    "BYTES_PER_CELL",
    "KINDS",
    "BUCKET_BLOCKS",
    "BUCKET_FREE_CELLS",
    "BUCKET_LINES",
    "BUCKET_STEP",
    "GROUP_FREE_CELLS",
    "GROUP_SLACK",
    "LANES_PER_BATCH",
    "LOWER_KINDS",
    "BlanketMemoryError",
    "BlanketPlan",
    "KaryRRBounds",
    "SumForm",
    "blanket_epsilon",
    "blanket_epsilon_with_plan",
    "blanket_lower_epsilon",
    "coded_sum_form",
    "coefficients",
    "eager_brackets",
    "fit_memory",
    "gaussian_delta",
    "krr_bounds",
    "krr_sum_form",
    "lane_bytes",
    "lanes_per_batch",
    "plan_blanket",
    "plan_geometry",
    "plan_krr_bounds",
    "plan_groups",
    "plan_cells",
    "point_cells",
    "point_divergence",
    "power_of_two",
    "quarter_octave",
    "shared_plan",
    "bucket_plan",
    "window_start",
]
