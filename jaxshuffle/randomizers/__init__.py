"""Catalog of local randomizers and their variation-ratio parameters ``(p, beta, q)``.

Definitions (Wang et al., "Privacy Amplification via Shuffling: Unified, Simplified, and
Tightened", VLDB 2024, Section 4, properties I and II), for a randomizer ``R`` with output
distributions ``R(x)``:

* ``p``    -- the largest probability ratio ``R(x)[y] / R(x')[y]`` over inputs ``x, x'``
  and outputs ``y`` (``(p, beta)``-variation property: ``D_p(R(x) || R(x')) = 0``);
* ``beta`` -- the largest total variation distance ``TV(R(x), R(x'))``
  (``D_1(R(x) || R(x')) <= beta``);
* ``q``    -- the blanket ratio: the largest ``R_1(x_1)[y] / R_i(x_i)[y]`` between the
  victim's message distribution and a blanket message's distribution (q-ratio property
  ``D_q(R_1(x_1) || R_i(x_i)) = 0``). For a single-message eps0-LDP randomizer the blanket
  is another user's message, so ``q = p``. For the metric-DP rows (Table 3) ``p = e^{d01}``
  concerns the victim's pair of inputs and ``q = e^{dmax}`` any other input. For the
  multi-message protocols (Table 4) the blanket messages are the input-independent
  messages, of which every user (the victim included) sends ``blanket_per_user``: the
  two-count pair then has ``n * blanket_per_user`` other messages instead of ``n - 1``
  (other users' input-dependent messages are dropped, a post-processing step).

Every function below returns a :class:`VRParams` (float64 arrays broadcast over the
function's arguments) on the upper-bound side of Theorem 4.7: each parameter is at least the
mechanism's own value (docs/math.md section 8). An invalid argument raises ``ValueError`` naming
it, its value and its valid range (eager calls; under ``jit``/``vmap`` an invalid point gives NaN
fields instead). Each function states its definition of the mechanism; the values are
derived from that definition and checked against the explicit probability matrix (or
numerical integration) in ``tests/test_randomizers.py``. Where the paper's table differs
from the definition, the docstring says so under "Discrepancy".

Lower-bound parameters (Theorem 5.1, Appendix H) are a separate object,
:class:`LowerParams` ``(p0, beta, q0, q1)``, given by the ``*_lower`` functions for the
discrete mechanisms (and Laplace) where the worst pair of inputs and the worst input
``x*`` of the other users are derived. For inputs ``x0, x1``, ``Y0 = {y: R(x0)[y] > R(x1)[y]}``,
``Y1 = {y: R(x1)[y] > R(x0)[y]}``::

    p0 = R(x1)(Y1) / R(x0)(Y1),   q0 = R(x0)(Y0) / R(x*)(Y0),   q1 = R(x1)(Y1) / R(x*)(Y1)

with ``x* = argmax_x min(q0(x), q1(x))``. The resulting pair (``LowerParams.pair()``) has
an epsilon that is a *lower* bound on the shuffled mechanism's epsilon.

Rows missing from the seed tables (Tables 2, 3, 4, 6 as shipped): pureDUMP and PCKV-GRR
are derived here from their original papers' definitions; the (d, s)-Collision row comes from
the paper authors' repository table (Wang et al., IJCAI 2021), not from Table 2.

Modules: :mod:`~jaxshuffle.randomizers.params` (containers, option specs, validation),
:mod:`~jaxshuffle.randomizers.ldp` (Tables 2 and 6), :mod:`~jaxshuffle.randomizers.metric`
(Table 3), :mod:`~jaxshuffle.randomizers.multi_message` (Table 4),
:mod:`~jaxshuffle.randomizers.matrices` (finite mechanism matrices for ``with_matrix``),
:mod:`~jaxshuffle.randomizers.catalog` (the registry and the name resolver :func:`build`).

Rounding: ``p = e^eps0`` is the float ``exp(eps0)`` and ``beta`` is capped at
``(p-1)/(p+1)`` of that float (a rounding-level adjustment: for ``eps0 < 1.1e-16``, ``p``
rounds to 1 while an accurately computed ``beta ~ eps0/4`` would not be 0), so that every
returned triple is accepted by :func:`jaxshuffle.pair.vr_pair`.

Validation (package convention, ``_config``): called eagerly, an invalid option raises
``ValueError`` naming the parameter and its valid range; under ``jit``/``vmap`` invalid
points give NaN fields.
"""

from jaxshuffle.randomizers.catalog import CATALOG, Entry, build, build_lower, check_options, entry
from jaxshuffle.randomizers.key_value import pckv_grr, privkv
from jaxshuffle.randomizers.ldp import (
    binary_rr,
    binary_rr_lower,
    duchi,
    general,
    grr,
    grr_lower,
    hadamard_response,
    hadamard_response_lower,
    harmony,
    laplace,
    laplace_lower,
    local_hash,
    local_hash_lower,
    privunit,
    rappor,
    subset_selection,
    subset_selection_lower,
)
from jaxshuffle.randomizers.matrices import (
    binary_rr_matrix,
    hadamard_response_matrix,
    local_hash_matrix,
    row_matrix,
    subset_selection_matrix,
)
from jaxshuffle.randomizers.metric import metric_general, metric_laplace, planar_laplace, planar_laplace_beta
from jaxshuffle.randomizers.multi_message import (
    balcer_cheu,
    balcer_uniform,
    balls_into_bins,
    cheu_zhilyaev,
    mix_dump,
    pure_dump,
)
from jaxshuffle.randomizers.params import (
    Arg,
    Inputs,
    KaryRR,
    LowerParams,
    MatrixMechanism,
    RowMatrix,
    VRParams,
    with_matrix,
)
from jaxshuffle.randomizers.set_valued import collision, k_subset_exponential, sampling_rappor, wheel
from jaxshuffle.randomizers.witchhat import (
    WitchHat,
    witchhat,
    witchhat_from_candidates,
    witchhat_from_local_metric,
    witchhat_params,
)
