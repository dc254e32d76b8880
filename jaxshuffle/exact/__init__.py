"""Ground truth for the shuffle model: exact epsilon by enumerating output histograms.

Setting. A finite local randomizer is a ``K x Y`` row-stochastic matrix ``M``
(``M[x, y] = P[R(x) = y]``). ``n`` users hold ``(x0, x_2, ..., x_n)`` or
``(x1, x_2, ..., x_n)``; each applies ``R`` independently and the shuffler releases
the multiset of the ``n`` outputs, i.e. the histogram ``h`` (``h_y`` = number of
outputs equal to ``y``, ``sum h = n``). With ``P``, ``Q`` the histogram laws under
the two datasets, ``D_t(P||Q) = sum_h max(0, P(h) - t Q(h))`` and

    epsilon = min{eps >= 0 : max(D_{e^eps}(P||Q), D_{e^eps}(Q||P)) <= delta}.

Lumping (why a few outputs suffice). Let ``R`` be the rows involved (``x0``, ``x1``
and the others' inputs) and ``G`` a set of outputs whose columns are proportional on
those rows: ``M[r, y] = lam_y * c_r`` for ``r in R, y in G`` (identical columns are
the special case ``lam_y = 1/|G|``). For every user, given that the output lies in
``G`` it equals ``y`` with probability ``lam_y / sum_G lam``, whatever the input.
So, given the lumped histogram ``z`` (counts per group), the split of each group
count is a fixed multinomial ``K(h | z)`` that is the same under both datasets:
``P(h) = P_lumped(z) K(h|z)`` and ``Q(h) = Q_lumped(z) K(h|z)``. Hence
``sum_h max(0, P(h) - t Q(h)) = sum_z max(0, P_lumped(z) - t Q_lumped(z))``: the
lumped histogram is a sufficient statistic and every divergence is unchanged.
Columns that are zero on every involved row are dropped (they never occur).
k-ary randomized response with all others equal lumps to 3 or 4 outputs for any k.

Enumeration. Everything lives on a dense grid of the first ``L - 1`` lumped counts (the
last is ``n`` minus their sum), in float64 log space, with no Python loop over
histograms. If the others all hold one value ``v`` (row ``pi > 0``), the identity
``Mult(h - e_y; n-1, pi) = Mult(h; n, pi) h_y / (n pi_y)`` gives the closed form

    P(h) = sum_y alpha_y Mult(h - e_y; n-1, pi) = Mult(h; n, pi) * sum_y (alpha_y/pi_y) h_y / n

(``alpha`` the victim's row). Otherwise the others' law (a convolution of multinomials,
one per input value) is built from the largest group in closed form and one log-space
convolution step per further user; the victim is one more step.

PEM and the half-space reduction (``pem_lower``). With the others all holding ``c``
(row ``pi``) and the victim row ``alpha`` (``beta`` under the neighbour), the identity
above gives

    P(h) - t Q(h) = Mult(h; n, pi) / n * S(h),   S(h) = sum_y c_y h_y,   c_y = (alpha_y - t beta_y) / pi_y,

so ``P/Q`` is linear-fractional in the counts, ``{P > tQ} = {S > 0}`` is a half-space,
and ``D_t(P||Q) = E[max(0, S(H))] / n`` with ``H ~ Mult(n, pi)``. Fixing the fibre
``(H_a, H_b) = (i, j)`` leaves ``K = H_c ~ Bin(m, rho)``, ``m = n - i - j``,
``rho = pi_c / (pi_c + pi_bot)``, and ``S`` is linear in ``K``: the half-space meets the
fibre in a binomial tail ``R``, and per output category (``E[K 1_R] = m rho
P[Bin(m-1, rho) in R - 1]``, ``E[(m-K) 1_R] = m (1-rho) P[Bin(m-1, rho) in R]``)

    E[S 1_R] = (c_a i + c_b j) P[K in R] + c_c m rho P[K' in R - 1] + c_bot m (1-rho) P[K' in R].

With all binomial tails tabulated once (``O(n^2)``), one divergence costs ``O(n^2)``
(far fewer after dropping negligible fibres) instead of the ``O(n^3)`` loop of the
supplement's Algorithm 2.

Sides. ``epsilon`` returns the upper end of a bisection bracket of width 1e-11 (the
computed divergence is ``<= delta`` there) by default, ``side="lower"`` the lower end;
rounding in the divergence (relative ~1e-12) is not budgeted, so both are the exact value
to about 1e-10. ``pem_lower`` errs low, as a lower bound must: an imperfect boundary
only lowers ``E[S 1_R] <= E[max(0, S)]``, dropped fibres only lower a sum of
non-negative terms, float64 rounding is subtracted as an explicit allowance, and the
result is the lower end of its bisection bracket.
"""

from jaxshuffle.exact.enumerate import (
    EPS_TOL,
    WorstCase,
    delta_of_eps,
    epsilon,
    histogram_log_pmfs,
    lower_bound_parameters,
    lump_outputs,
    validate_matrix,
    worst_case_epsilon,
)
from jaxshuffle.exact.pem import pem_lower, pem_matrix
from jaxshuffle.exact.soundness import OrderViolation, SandwichReport, grr_matrix, matrix_vr_parameters, sandwich
