"""Certified privacy accountant for a shuffled local randomizer: :func:`amplify`.

Setting: ``n`` users each apply a local randomizer ``R`` with variation-ratio parameters
``(p, beta, q)`` (:class:`~jaxshuffle.randomizers.VRParams`) and a shuffler releases the
multiset of messages; neighbouring datasets differ in one user's input (replace-one). For a
multi-message protocol (Table 4) each user also sends ``m = blanket_per_user``
input-independent blanket messages.

Which number is on which side
-----------------------------
``upper`` (certified upper bound) comes **only** from sound pairs (docs/math.md section 3);
the paper's Theorem 4.7 pair is not a valid upper bound when ``w = 1 - (p+1) alpha > 0``.
With ``alpha = beta/(p-1)``, ``t = e^eps`` and ``D_t`` the hockey-stick divergence of the
two-count pair (docs/math.md section 1; ``jaxshuffle.search.epsilon``), ``upper`` is the smallest of

1. the clone pair whose constant ``r`` is proven for the randomizer
   (:func:`jaxshuffle.randomizers.clone.certified_worst_case_pair`, docs/math.md 3.1: the standard
   clone ``r = 1/(2q)`` for any randomizer, the stronger clone ``1/(p+1)`` for k-ary RR and binary
   RR on two options, ``r*`` of a matrix; for ``p = inf`` the Table 4 pair ``u = 1, v = 0, r = 1/q``;
   ``AmplificationReport.clone_proof`` names it)::

       delta >= D_t(P_wc || Q_wc),   (u, v, w, r0, r1) = (p/(p+1), 1/(p+1), 0, r, r);

2. the ``(u+v)``-scaled pair (docs/math.md section 3; only where ``w > 0``). Decompose
   ``R(x^0) = p alpha mu_0 + alpha mu_1 + w mu_c``, ``R(x^1) = alpha mu_0 + p alpha mu_1 + w mu_c``
   with ``mu_0, mu_1`` on the disjoint sets ``{R(x^0) > R(x^1)}``, ``{R(x^1) > R(x^0)}``; every
   other message contains ``r = alpha p/q`` of each of ``mu_0, mu_1``. Conditioning on the
   victim's component and joint convexity of ``D_t`` (the ``mu_c`` branch gives identical
   laws) give::

       delta >= (u + v) D_t(clone),  clone: (u, v, w) -> (p/(p+1), 1/(p+1), 0), same r0 = r1 = alpha p/q,

   i.e. the clone's epsilon at ``delta/(u+v)`` (``u + v = (p+1) alpha``; ``= beta`` at
   ``p = inf``);
3. ``0`` where ``delta >= beta``: the shuffled outputs are a post-processing of the victim's
   message, so ``D_1 <= TV(R(x^0), R(x^1)) <= beta``.

Soundness scope. (1) is proved in docs/math.md 3.1 for every pair of victim inputs (the
pointwise clone condition). (2) is proved above for a pair of victim inputs at its *own* total
variation ``TV = (p-1) alpha``. Covering a smaller-TV pair by (2) evaluated at ``beta = max TV`` needs
``g(a) = (p+1) a D_t(clone, r = p a/q)`` not to exceed ``min(g(alpha), D_t(P_wc||Q_wc))`` on
``a < alpha``: ``g`` is *not* monotone in ``a`` (it peaks near ``a ~ q/(n p)``), but it is
unimodal on every grid tested (``tests/test_accountant.py``), and unimodality suffices (if
``g(alpha)`` is below the worst-case value, ``alpha`` lies on ``g``'s increasing branch).
Empirically (exact enumeration, n = 2, 3, 5, random 3-4-input mechanisms): no violation of
``exact <= min(1, 2)`` in 1700 cases with pair TVs below beta and 1488 cases with ``q > p``
(largest exact/bound 0.99998). Because that covering step is tested, not proven, (2) is
**opt-in**: ``scaled_variant=True`` adds it. It is proven when every pair of inputs has total
variation exactly ``beta`` (k-ary randomized response, binary RR on two options, a matrix with equal
pairwise total variations: :func:`~jaxshuffle.randomizers.clone.scaled_pair_proven`); elsewhere a
point whose ``upper`` it gives has ``certified = False``. By default ``upper`` uses (1) and (3) only.

``lower`` (numerical lower bound): the Theorem 5.1 pair ``vr_pair(p0, beta, q0=, q1=)`` of
the given :class:`~jaxshuffle.randomizers.LowerParams` (others all holding ``x*``), and
always also the choice ``x* = x^0`` (``q0 = 1, q1 = p0``, valid for any mechanism with
``P0(Y0) = P1(Y1)``); the lower end of each certified bracket, the largest taken. ``0``
(``has_lower = False``) without lower parameters.

``paper``: the paper's Theorem 4.7 value ``eps(vr_pair(p, beta, q))`` for the randomizer's
own ``beta`` (upper end of its bracket). ``paper_certified`` is True only where ``w = 0``
(then ``paper`` equals the worst-case pair's value); elsewhere it is reported for
comparison, never as a guarantee (counterexample: n = 2, 3-ary RR, eps0 = 1, delta = 0.01:
exact 0.969408 > paper 0.914553).

Messages: the pair engine's "number of users" is ``n_blanket + 1`` with
``n_blanket = VRParams.n_blanket(n)``: ``n - 1`` other users' messages (single message), or
``n m`` blanket messages of all users, the victim included (multi-message).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import array_module, as_float64, broadcast_shapes_or_raise, check, require_x64
from jaxshuffle.accountant.mechanism import fold_mechanism_columns, with_mechanism_bounds  # noqa: F401  (re-exported)
from jaxshuffle.accountant.report import (  # re-exported: the report's home is accountant.report
    REPORT_DTYPES,
    UPPER_FROM,
    AmplificationReport,
    UpperSource,
    check_upper_from,
)
from jaxshuffle.accountant.subsampling import PAIR_SOURCE, check_sample_rate, subsampled_bounds
from jaxshuffle.engine.two_count.pair import TwoCountPair, clone_fields, vr_pair
from jaxshuffle.engine.two_count.search import Status, epsilon
from jaxshuffle.randomizers import LowerParams, VRParams
from jaxshuffle.randomizers.clone import CloneProof, certified_worst_case_pair, scaled_pair_proven

__all__ = ["AmplificationReport", "UPPER_FROM", "UpperSource", "amplify", "with_mechanism_bounds",
           "JOB_ROLES", "PairJob", "PointInfo", "amplification_jobs", "combine_amplification"]


def _as_lower_list(lower_params) -> list[LowerParams]:
    if lower_params is None:
        return []
    if isinstance(lower_params, LowerParams):
        return [lower_params]
    out = list(lower_params)
    for lp in out:
        if not isinstance(lp, LowerParams):
            raise ValueError("lower_params: must be a LowerParams or a sequence of them")
    return out


def amplify(randomizer: VRParams, n, delta, *,
            lower_params: LowerParams | Sequence[LowerParams] | None = None,
            rtol: float = 1e-6, scaled_variant: bool = False, with_paper: bool = True,
            upper_from: str = "best", sample_rate=1.0, with_lower: bool = True) -> AmplificationReport:
    """Certified amplified epsilon of a shuffled randomizer, with a lower bound and the paper's value.

    Which number is on which side, and why: the module docstring (docs/math.md sections 3 and 10).

    Size: a public entry point whose keywords are the user's options: the point (``randomizer``, ``n``,
    ``delta``), which bounds run (``lower_params``, ``with_paper``, ``with_lower``, ``scaled_variant``,
    ``upper_from``), ``rtol`` and ``sample_rate``.

    Args:
      randomizer: variation-ratio parameters (e.g. ``jaxshuffle.randomizers.grr(1.0, 3)``);
        any batch shape; or a mechanism object with a ``vr_params()`` method
        (``jaxshuffle.randomizers.witchhat(m, f, b)``).
      n: number of users (integer >= 1), broadcast against the randomizer and ``delta``.
      delta: target delta in (0, 1).
      lower_params: Theorem 5.1 parameters (``*_lower`` functions of the catalog), or a
        sequence of candidates; for a multi-message row its own (``multi_message.*_lower``,
        searched with their blanket count :meth:`LowerParams.n_blanket`).
      rtol: relative width of every epsilon bracket.
      scaled_variant: also use the (u+v)-scaled pair in ``upper`` (opt-in: proven only when
        every pair of inputs has total variation exactly beta; ``certified`` is False where it gives
        ``upper`` for another randomizer; see the module docstring).
      with_paper: also compute the paper's Theorem 4.7 value (one more search per point);
        ``False`` leaves ``paper`` NaN with status ``INVALID``.
      with_lower: also run the concrete mechanism's exact datasets (its lower bound) beside its blanket
        bound; ``False`` runs the blanket lanes alone, cheaper where only ``upper`` is read (``lower``
        then comes from ``lower_params`` alone, ``has_lower`` where it does). ``upper`` stays certified
        either way (its plan, and so its last digits, may differ).
      upper_from: ``"best"`` (default): the smallest certified value over every sound source;
        ``"worst-case"``: the two-count rules only (worst-case pair, scaled pair if asked,
        delta >= beta), the bound for any randomizer with this ``p``, ``q``; ``"blanket"``: the
        blanket pair only (and delta >= beta), for randomizers that carry their mechanism.
      sample_rate: the probability ``g`` in (0, 1] that each user takes part (Poisson client
        sampling; ``n`` counts every user, taking part or not), broadcast with the rest. Points with
        ``g = 1`` are today's, bit for bit. At ``g < 1`` no two-count pair is an upper bound (the number of
        messages is visible; docs/math.md 12.10): ``upper`` and ``blanket`` are the sampled round's
        certified bound (:func:`~jaxshuffle.accountant.subsampling.subsampled_bounds`: k-ary RR's
        blanket pair, a matrix's engine, or the three-count pair of any single-message randomizer;
        multi-message rows ValueError), ``lower`` its exact datasets' lower bound (k-RR and matrices),
        ``worst_case`` ``inf`` (no claim), ``paper`` NaN, ``upper_source`` BLANKET or THREE_COUNT,
        ``clone_proof`` NONE. ``upper_from="worst-case"`` is refused there.

    Returns:
      The report, an :class:`AmplificationReport`. ``upper`` = min(worst-case pair, scaled pair, blanket pair,
        0 if delta >= beta) -- certified upper bound (errs high); ``lower`` <= the mechanism's epsilon (the
        largest certified lower end of the lower pairs and exact datasets: errs low); ``paper`` = Theorem 4.7
        at the randomizer's beta (labelled by ``paper_certified``: not certified elsewhere). The two-count
        searches run as one batched engine call, the blanket searches (k-ary RR: ``randomizer.mechanism``) as
        another (eager only: the engines plan static windows from concrete values).

    Raises:
      ValueError: naming the parameter for invalid input (n not an integer >= 1, delta
        outside (0, 1), parameters outside their ranges, single-message lower parameters for a
        multi-message randomizer or the reverse).
    """
    if not isinstance(randomizer, VRParams) and hasattr(randomizer, "vr_params"):
        randomizer = randomizer.vr_params()  # a mechanism object, e.g. randomizers.witchhat(m, f, b)
    check_upper_from(upper_from)
    g = check_sample_rate(sample_rate)
    if np.all(g == 1.0):
        rep = _amplify(randomizer, n, delta, _as_lower_list(lower_params), rtol, scaled_variant, with_paper)
        if upper_from == "worst-case":
            return rep
        return with_mechanism_bounds(rep, randomizer, n, delta, rtol=rtol, only=upper_from == "blanket",
                                     lower=with_lower)
    check_upper_from(upper_from, sampled=True)
    return _sampled(randomizer, n, delta, g, rtol, with_lower, lambda: amplify(
        randomizer, n, delta, lower_params=lower_params, rtol=rtol, scaled_variant=scaled_variant,
        with_paper=with_paper, upper_from=upper_from, with_lower=with_lower))


def _sampled(randomizer: VRParams, n, delta, g: np.ndarray, rtol: float, with_lower: bool,
             full_participation) -> AmplificationReport:
    """amplify's report where some points have clients sampled (``g < 1``): those points from the sampled
    round's bounds, the others (if any) from ``full_participation()``, amplify's own rule at ``g = 1``."""
    _check_randomizer(randomizer)
    if not 0 < rtol < 1:
        raise ValueError("rtol: must lie in (0, 1)")
    shape = broadcast_shapes_or_raise(randomizer=np.empty(np.shape(randomizer.p)), n=np.empty(np.shape(n)),
                                      delta=np.empty(np.shape(delta)), sample_rate=g)
    sampled = np.broadcast_to(g < 1.0, shape)
    b = subsampled_bounds(randomizer, n, delta, sample_rate=g, rtol=rtol, lower=with_lower)  # g = 1 points: unread
    cols = {"upper": b.upper, "worst_case": np.inf, "blanket": b.upper, "lower": b.lower, "paper": np.nan,
            "certified": True, "paper_certified": False, "has_lower": b.has_lower,
            "upper_source": np.where(b.source == PAIR_SOURCE, UpperSource.THREE_COUNT, UpperSource.BLANKET),
            "status": b.status, "status_lower": b.status_lower,
            "status_paper": Status.INVALID, "clone_proof": CloneProof.NONE}
    full = full_participation()._asdict() if not sampled.all() else None
    out = {}
    for name, value in cols.items():
        value = np.broadcast_to(np.asarray(value), shape)
        out[name] = value if full is None else np.where(sampled, value, np.broadcast_to(np.asarray(full[name]), shape))
    return AmplificationReport(**{name: jnp.asarray(v, dtype=REPORT_DTYPES[name]) for name, v in out.items()})


# --------------------------------------------------------------------------------------
# The rules of amplify, in two halves that a caller may run its own searches between
# (jaxshuffle.sweeps deduplicates the searches of a whole grid and controls their shapes).
# --------------------------------------------------------------------------------------

#: Roles of the epsilon searches behind a report (:attr:`PairJob.role`), see :func:`amplification_jobs`.
JOB_ROLES = ("worst_case", "scaled", "paper", "lower", "lower_x0")


class PairJob(NamedTuple):
    """One epsilon search behind an :class:`AmplificationReport` (from :func:`amplification_jobs`).

    Attributes:
      role: one of :data:`JOB_ROLES`: ``worst_case`` (pair 1 of the module docstring),
        ``scaled`` (pair 2), ``paper`` (Theorem 4.7 pair), ``lower`` / ``lower_x0`` (the
        Theorem 5.1 pair with the given ``x*``, and with ``x* = x^0``; one of each per
        lower-parameter candidate, in that order).
      pair: the two-count pair, broadcast to the points' shape.
      delta: the delta to search it at (``delta/(u+v)`` for the scaled pair where used).
      needed: bool array: :func:`combine_amplification` reads this search's result only where
        True (elsewhere any value will do, so a caller may skip those points).
      n_engine: the engine's count for this search when it differs from the points'
        ``PointInfo.n_engine`` (a multi-message lower pair's own blanket), else ``None``.
    """

    role: str
    pair: TwoCountPair
    delta: jax.Array
    needed: jax.Array
    n_engine: jax.Array | None = None


class PointInfo(NamedTuple):
    """Per-point quantities of :func:`amplification_jobs` that :func:`combine_amplification` needs.

    Arrays of the broadcast shape: the randomizer's ``p``, ``beta``, ``q``; ``delta``;
    ``n_engine`` (the pair engine's count ``n_blanket + 1``, shared by every job without its own); ``uv``
    (``u + v`` of the paper's pair); ``use_scaled`` (the scaled pair takes part in ``upper``);
    ``paper_certified`` (the paper's pair has ``w = 0`` and a clone constant within the proven one);
    ``has_lower`` (lower-bound jobs exist);
    ``clone_proof`` (:class:`~jaxshuffle.randomizers.clone.CloneProof` of the worst-case job's pair);
    ``scaled_proven`` (the scaled pair is proven for the randomizer here).
    """

    p: jax.Array
    beta: jax.Array
    q: jax.Array
    delta: jax.Array
    n_engine: jax.Array
    uv: jax.Array
    use_scaled: jax.Array
    paper_certified: jax.Array
    has_lower: jax.Array
    clone_proof: jax.Array
    scaled_proven: jax.Array


def _check_randomizer(randomizer) -> None:
    require_x64()
    if not isinstance(randomizer, VRParams):
        raise ValueError("randomizer: must be a VRParams (e.g. jaxshuffle.randomizers.grr(eps0, k))")


def amplification_jobs(randomizer: VRParams, n, delta,
                       lower_params: LowerParams | Sequence[LowerParams] | None = None, *,
                       scaled_variant: bool = False, with_paper: bool = True) -> tuple[PointInfo, list[PairJob]]:
    """The epsilon searches (jobs) behind :func:`amplify`, and the per-point quantities to combine them.

    Arguments as :func:`amplify` (``with_paper=False`` leaves out the paper's pair: the report's
    ``paper`` is then NaN with status ``INVALID``). Validates the input (ValueError naming the
    parameter). Returns ``(info, jobs)``: search each ``job.pair`` for ``n = info.n_engine``
    at ``job.delta`` (:func:`jaxshuffle.search.epsilon` or the same engine batched another way,
    at least where ``job.needed``) and pass the results to :func:`combine_amplification`.
    ``amplify(...)`` is exactly ``combine_amplification(info, roles, lower, upper, status)``
    with the brackets of one batched :func:`~jaxshuffle.search.epsilon` call over every job.
    """
    return _jobs(randomizer, n, delta, _as_lower_list(lower_params), scaled_variant, with_paper)


def _jobs(randomizer: VRParams, n, delta, lowers: list[LowerParams], scaled_variant: bool,
          with_paper: bool) -> tuple[PointInfo, list[PairJob]]:
    _check_randomizer(randomizer)
    multi = randomizer.blanket_per_user is not None
    for i, lp in enumerate(lowers):
        if (lp.blanket_per_user is not None) != multi:
            raise ValueError(f"lower_params[{i}]: " + (
                "single-message lower parameters for a multi-message randomizer; use the row's own "
                "(randomizers.multi_message.*_lower, which count its blanket)" if multi else
                "multi-message lower parameters for a single-message randomizer"))
    xp = array_module(randomizer, n, delta, lowers)  # plain values: numpy (no small XLA programs)
    F = lambda x: as_float64(x, xp)  # noqa: E731
    p, beta, q = F(randomizer.p), F(randomizer.beta), F(randomizer.q)
    n, delta = F(n), F(delta)
    arrays = dict(p=p, beta=beta, q=q, n=n, delta=delta)
    if randomizer.blanket_per_user is not None:
        arrays["blanket_per_user"] = F(randomizer.blanket_per_user)
    for i, lp in enumerate(lowers):
        for name in ("p0", "beta", "q0", "q1") + (("blanket_per_user",) if multi else ()):
            arrays[f"lower_params[{i}].{name}"] = F(getattr(lp, name))
    shape = broadcast_shapes_or_raise(**arrays)
    n_np, d_np = np.asarray(n), np.asarray(delta)
    check((n_np >= 1) & (n_np == np.floor(n_np)) & np.isfinite(n_np), "n", "must be a finite integer >= 1", value=n_np)
    check((d_np > 0) & (d_np < 1), "delta", "must lie in (0, 1)", value=d_np)
    if randomizer.blanket_per_user is not None:
        m = np.asarray(arrays["blanket_per_user"])
        check((m >= 1) & (m == np.floor(m)) & np.isfinite(m), "blanket_per_user", "must be an integer >= 1")

    b = lambda x: xp.broadcast_to(xp.asarray(x), shape)  # noqa: E731
    p, beta, q, delta = b(p), b(beta), b(q), b(delta)
    n_engine = b(randomizer.n_blanket(n) + 1.0)

    paper_pair = vr_pair(p, beta, q)  # validates p, beta, q (ValueError naming the parameter)
    # the clone pair whose constant is proven for this randomizer (randomizers.clone, docs/math.md 3.1)
    wc_pair, clone_proof = certified_worst_case_pair(dataclasses.replace(randomizer, p=p, q=q), xp)
    uv = xp.asarray(paper_pair.u) + xp.asarray(paper_pair.v)  # (p+1) alpha; beta at p = inf
    cu, cv = clone_fields(p, xp)
    scaled_pair = TwoCountPair(cu, cv, xp.zeros_like(cu), paper_pair.r0, paper_pair.r1)
    safe_uv = xp.where(uv > 0, uv, 1.0)
    use_scaled = scaled_variant & (xp.asarray(paper_pair.w) > 0) & (uv > 0) & (delta < uv)
    delta_scaled = xp.where(use_scaled, delta / safe_uv, delta)

    everywhere = xp.ones(shape, dtype=bool)
    jobs = [PairJob("worst_case", wc_pair, delta, everywhere), PairJob("scaled", scaled_pair, delta_scaled, use_scaled)]
    if with_paper:
        jobs.append(PairJob("paper", paper_pair, delta, everywhere))
    for lp in lowers:
        p0, lb = b(F(lp.p0)), b(F(lp.beta))
        pair = vr_pair(p0, lb, q0=b(F(lp.q0)), q1=b(F(lp.q1)))
        if multi:  # its own blanket count; no x* = x^0 variant (the others' and the fake messages differ)
            jobs.append(PairJob("lower", pair, delta, everywhere, b(lp.n_blanket(n) + 1.0)))
            continue
        jobs.append(PairJob("lower", pair, delta, everywhere))
        jobs.append(PairJob("lower_x0", vr_pair(p0, lb, q0=xp.ones(shape), q1=p0), delta, everywhere))  # x* = x^0
    # paper_pair.certified (an upper pair: w == 0), in xp
    info = PointInfo(p=p, beta=beta, q=q, delta=delta, n_engine=n_engine, uv=uv, use_scaled=use_scaled,
                     # the paper's pair is sound where w = 0 and its clone constant is within the proven one
                     paper_certified=b((xp.asarray(paper_pair.w) == 0.0)
                                       & (xp.asarray(paper_pair.r0) <= xp.asarray(wc_pair.r0))),
                     has_lower=xp.full(shape, bool(lowers)),
                     clone_proof=b(clone_proof),
                     scaled_proven=b(xp.asarray(scaled_pair_proven(randomizer, shape))))
    return info, jobs


def combine_amplification(info: PointInfo, roles: Sequence[str], lower, upper, status, *,
                          xp=jnp) -> AmplificationReport:
    """The :class:`AmplificationReport` from the searches of :func:`amplification_jobs`.

    ``roles`` are the jobs' roles, in order; ``lower``, ``upper``, ``status`` their epsilon
    brackets and statuses (stacked arrays of shape ``(len(roles), *shape)`` or sequences of
    arrays), only read where the job is ``needed``. ``xp`` is the array module of the
    computation (``jax.numpy``, differentiable, as :func:`amplify` uses it; or ``numpy``):
    the combination only selects values, so both give the same numbers.
    """
    roles = list(roles)
    wc, sc = roles.index("worst_case"), roles.index("scaled")
    uv, delta, beta = info.uv, info.delta, info.beta
    shape = xp.shape(uv)
    eps_wc, eps_sc = upper[wc], xp.where(info.use_scaled, upper[sc], xp.inf)
    eps_sc = xp.where(uv == 0, 0.0, eps_sc)  # identical victim laws: eps = 0
    trivial = delta >= beta  # D_1(shuffled) <= TV(victim) <= beta
    source = xp.where(trivial, UpperSource.TV, xp.where(eps_sc < eps_wc, UpperSource.SCALED,
                                                         UpperSource.WORST_CASE)).astype(xp.int8)
    upper_eps = xp.where(trivial, 0.0, xp.minimum(eps_wc, eps_sc))
    status_sc = xp.where(uv == 0, xp.int8(Status.ZERO), status[sc])
    status_up = xp.where(source == UpperSource.TV, xp.int8(Status.ZERO),
                         xp.where(source == UpperSource.SCALED, status_sc, status[wc])).astype(xp.int8)

    low_jobs = [i for i, r in enumerate(roles) if r in ("lower", "lower_x0")]
    if low_jobs:
        lows = xp.stack([lower[i] for i in low_jobs])
        best = xp.argmax(lows, axis=0)
        lower_eps = xp.max(lows, axis=0)
        status_lower = xp.take_along_axis(xp.stack([status[i] for i in low_jobs]), best[None], axis=0)[0]
    else:
        lower_eps = xp.zeros(shape)
        status_lower = xp.full(shape, Status.ZERO, dtype=xp.int8)
    if "paper" in roles:
        paper, status_paper = upper[roles.index("paper")], status[roles.index("paper")]
    else:
        paper, status_paper = xp.full(shape, xp.nan), xp.full(shape, Status.INVALID, dtype=xp.int8)
    return AmplificationReport(
        upper=upper_eps,
        worst_case=eps_wc,
        blanket=xp.full(shape, xp.inf),
        lower=lower_eps,
        paper=paper,
        certified=(source != UpperSource.SCALED) | info.scaled_proven,
        paper_certified=info.paper_certified,
        has_lower=info.has_lower,
        upper_source=source,
        status=status_up,
        status_lower=status_lower,
        status_paper=status_paper,
        clone_proof=xp.asarray(info.clone_proof).astype(xp.int8),
    )


def _amplify(randomizer: VRParams, n, delta, lowers: list[LowerParams], rtol: float,
             scaled_variant: bool, with_paper: bool) -> AmplificationReport:
    _check_randomizer(randomizer)
    if not 0 < rtol < 1:
        raise ValueError("rtol: must lie in (0, 1)")
    info, jobs = _jobs(randomizer, n, delta, lowers, scaled_variant, with_paper)
    xp = array_module(info, [j.pair for j in jobs])  # numpy for plain values (as _jobs), jnp under tracing
    shape = np.shape(info.uv)
    stacked = TwoCountPair(*(xp.stack([xp.broadcast_to(xp.asarray(getattr(j.pair, f)), shape) for j in jobs])
                             for f in ("u", "v", "w", "r0", "r1")))
    res = epsilon(stacked, xp.stack([xp.broadcast_to(info.n_engine if j.n_engine is None else j.n_engine, shape)
                                     for j in jobs]),
                  xp.stack([j.delta for j in jobs]), rtol=rtol)
    brackets = (res.lower, res.upper, res.status) if xp is jnp else (np.asarray(x) for x in res[:3])
    rep = combine_amplification(info, [j.role for j in jobs], *brackets, xp=xp)
    return rep if xp is jnp else AmplificationReport(*(jnp.asarray(x) for x in rep))
