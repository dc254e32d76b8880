"""Differentiable budget tuning: split one certified (eps, delta) budget across shuffled queries.

Problem. ``m`` queries, query ``i`` a catalog randomizer with local budget ``eps0_i``, asked of
``n_i`` users through a shuffler ``count_i`` times; every answer is composed into one release.
Minimise a differentiable utility (an error, :mod:`jaxshuffle.utility`) ``U(eps0)`` subject to
``eps_composed(eps0; delta) <= target``.

Method (docs/math.md section "Budget tuning"):

1. **Surrogate of the composed epsilon** (smooth, JAX, implicit gradients). The stronger-clone
   form of query ``i``'s worst-case pair (``u = p/(p+1)``, ``v = 1/(p+1)``, ``r0 = r1 = p/((p+1) q)``,
   :func:`~jaxshuffle.pair.vr_pair`; only a direction finder here, the certificate in step 3 uses the
   pair proven for the randomizer, docs/math.md 3.1) has a privacy loss
   ``L = log((u rho + v)/(v rho + u))`` with
   ``log rho`` approximately normal, sd ``1/sqrt(N s h(1-h))`` (``N`` blanket messages,
   ``s = r0 + r1``, ``h = r0/s``). Linearising ``L`` at ``rho = 1`` gives a Gaussian loss of sd::

       mu_i = c_p / sqrt(N_i s_i h_i (1 - h_i)),   c_p = (u - v)/(u + v),

   i.e. round ``i`` is approximately ``mu_i``-GDP, and the composition is ``mu``-GDP with
   ``mu = sqrt(sum_i count_i mu_i^2)``. The surrogate epsilon solves the GDP curve::

       delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),

   with ``d eps/d mu = phi(a) / (e^eps Phi(b))`` (``a, b`` the two arguments; ``phi(a) = e^eps phi(b)``)
   and ``d eps/d delta = -1/(e^eps Phi(b))`` (implicit function theorem). The surrogate is
   **not** a bound (it is a CLT approximation, about 0.9-1.0 of the certified value at the
   sizes tested); it is only used to choose the *direction* of the allocation.

2. **Projection onto the constraint along a ray** (a differentiable ``calibrate``). Parameters
   ``theta`` (unconstrained, ``eps0 proportional to exp(theta)``) map to the allocation
   ``eps0(theta) = s(theta) exp(theta)`` where ``s(theta)`` solves ``surrogate(s exp(theta)) = target``
   (bisection in ``log s``; gradient from the implicit function theorem,
   ``ds/dtheta_j = -s e^{theta_j} g_j / sum_k e^{theta_k} g_k``, ``g = d surrogate / d eps0``).
   ``U(eps0(theta))`` is minimised without constraint by an optax optimizer. At a stationary point
   ``grad U`` is parallel to ``g``: the KKT condition (equal ratios of marginal utility to marginal
   composed eps). The same ray is what the certification step scales along, so the optimiser and
   the certificate work on one family of allocations.

3. **Certified at the end, always.** The optimiser's allocation ``eps0*`` is scaled by a common
   factor ``c``, found by a bisection whose feasible end is always a verified probe:
   ``compose([(shuffled_round(R_i(c eps0*_i), n_i), count_i)], delta).upper <= target``
   (every round on one ``discretization``). The returned bound is recomputed from scratch at the
   returned allocation. The equal split (one common eps0) is certified by the same bisection.

Clients sampled per round (``Query.sample_rate = g < 1``, Poisson sampling: each of the ``n``
users takes part with probability ``g``). The surrogate's round is ``sqrt(g) mu`` (derived in
:func:`round_mu`; still not a bound), and the certificate is the sampled round's own PLD,
:func:`~jaxshuffle.pld.two_count.shuffled_round` with ``sample_rate=g`` (k-ary RR's blanket pair at
the real ``k'``, docs/math.md 12.10; k-ary RR only so far, other randomizers are refused by
:func:`query`). At ``g = 1`` every step is exactly the unsampled one (same surrogate, same rounds).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._bisect import bisect_jax
from jaxshuffle._config import check
from jaxshuffle.accountant.count_search import CALIBRATION_BLANKET_POINTS, effective_points  # noqa: F401  (named in the docs)
from jaxshuffle.accountant.queries import (  # Query, query and the surrogate: re-exported, tune's inputs
    Query,
    check_queries,
    gdp_epsilon,
    query,
    round_mu,
    surrogate_epsilon,
)
from jaxshuffle.accountant.rounds import ReleaseEpsilon, checked_blanket_points, release_epsilon
from jaxshuffle.pld.composition import compose
from jaxshuffle.pld.two_count import shuffled_round
from jaxshuffle.randomizers.clone import certified_clone, clone_source

__all__ = ["Query", "TuneResult", "ParetoFront", "tune", "pareto_front", "surrogate_epsilon",
           "certified_epsilon", "default_utility", "query", "gdp_epsilon", "round_mu"]


def _project(queries, theta, target, delta, log_s_range=(-12.0, 6.0)):
    """``s(theta) exp(theta)`` with ``surrogate(s exp(theta)) = target`` (implicit gradient)."""
    direction = jnp.exp(theta - jax.lax.stop_gradient(jnp.max(theta)))

    def g(log_s, d):
        return surrogate_epsilon(queries, jnp.exp(log_s) * d, delta)

    d0 = jax.lax.stop_gradient(direction)
    lo, hi = jnp.float64(log_s_range[0]), jnp.float64(log_s_range[1]) + jnp.log(30.0)
    _, log_s = bisect_jax(lambda ls: g(ls, d0) >= target, lo, hi, steps=80)
    log_s = jax.lax.stop_gradient(log_s)
    slope = jax.lax.stop_gradient(jax.grad(g)(log_s, d0))
    # one implicit-function step: value log_s (g = target there), gradient -(dg/dtheta)/(dg/dlog_s)
    log_s_diff = log_s - (g(log_s, direction) - jax.lax.stop_gradient(g(log_s, d0))) / slope
    return jnp.exp(log_s_diff) * direction


# ----------------------------------------------------------------------------------------------
# Certified composition (numpy + FFT, not differentiable)
# ----------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=512)
def _round(family: str, options: tuple, n: float, eps0: float, discretization: float, sample_rate: float = 1.0):
    """The certified round PLD of one query at ``eps0`` (cached on every argument, the rate included).

    ``sample_rate`` below 1: the sampled round's PLD (``shuffled_round(..., sample_rate=g)``, k-ary RR's
    blanket pair at the real ``k'``; pessimistic side only). At 1 ``shuffled_round`` builds the unsampled round.
    """
    params = Query(family, n, 1, options).randomizer(eps0)
    return shuffled_round(params, n, discretization=discretization, sample_rate=sample_rate)


def certified_epsilon(queries: Sequence[Query], eps0, delta, *, discretization: float, cached: bool = True):
    """Certified composed ``(lower, upper)`` of the queries at ``eps0`` (:func:`compose`, from scratch).

    ``upper`` is an upper bound on the composed release's epsilon at ``delta``; ``lower`` the
    composed pairs' epsilon from below (how tight ``upper`` is numerically; NaN when a query has
    ``sample_rate < 1``: the sampled round's PLD has no optimistic side). Each query's round is
    built at its own ``sample_rate``. ``cached=False`` rebuilds every round PLD (no reuse of
    earlier probes).
    """
    queries = check_queries(queries)
    eps0 = np.asarray(eps0, np.float64).reshape(-1)
    build = _round if cached else _round.__wrapped__
    rounds = [(build(q.family, q.options, q.n, float(e), float(discretization), q.sample_rate), q.count)
              for q, e in zip(queries, eps0)]
    b = compose(rounds, delta)
    return float(b.lower), float(b.upper)


def _largest_feasible(upper_at, target, rtol, *, at: str, c: float = 1.0, max_probes: int = 40):
    """Largest verified ``c`` with ``upper_at(c) <= target``: growing (or shrinking) steps from ``c``, then
    bisection; the feasible end is always a probed point. Returns ``(c, probes)``; ``at`` (e.g. the
    delta) completes the error where none is feasible."""
    lo, hi, probes, step = None, None, 0, 1.02  # lo feasible, hi infeasible (verified)
    while probes < max_probes:
        feasible = upper_at(c) <= target
        probes += 1
        if feasible:
            lo = c
        else:
            hi = c
        if lo is not None and hi is not None and hi - lo <= rtol * hi:
            break
        if hi is None:
            c, step = c * step, step * step
        elif lo is None:
            c, step = c / step, step * step
            if c < 1e-6:
                raise ValueError(f"target_eps: {target:g} is not attainable by these queries{at} (even tiny eps0 "
                                 "exceeds it)")
        else:
            c = 0.5 * (lo + hi)
    if lo is None:
        raise ValueError(f"target_eps: no feasible scale found for {target:g} in {max_probes} probes")
    return lo, probes


def _certify_scale(queries, direction, target, delta, discretization, rtol, max_probes=40):
    """Largest verified ``c`` with the composed worst-case pairs' certified upper of ``c * direction``
    ``<= target``. Returns ``(c, lower, upper, probes)``."""
    direction = np.asarray(direction, np.float64)
    cache: dict = {}

    def upper_at(c):
        if c not in cache:
            cache[c] = certified_epsilon(queries, c * direction, delta, discretization=discretization)
        return cache[c][1]

    c, probes = _largest_feasible(upper_at, target, rtol, at=f" at delta = {delta:g}", max_probes=max_probes)
    return c, *cache[c], probes


def _rule_parts(queries, eps0, blanket_points):
    """``release_epsilon``'s queries at ``eps0`` and each one's blanket-pair profile points: the caller's
    ``blanket_points`` where it gave them (0 where a query has no blanket pair), else 0 for a query whose
    users all take part (:func:`tune`'s cost cap) and calibration's points for a sampled round, whose only
    PLD is its blanket or three-count pair's (:func:`~jaxshuffle.accountant.count_search.effective_points`)."""
    params = [q.randomizer(float(e)) for q, e in zip(queries, eps0)]
    points = [0 if blanket_points is None and q.sample_rate == 1.0
              else int(effective_points(r, q.n, blanket_points, q.sample_rate)) for r, q in zip(params, queries)]
    return [(r, q.n, q.count, q.sample_rate) for r, q in zip(params, queries)], points


def _secant_feasible(upper_at, target, rtol, c0: float, max_probes: int = 16) -> float:
    """Largest verified ``c`` with ``upper_at(c) <= target``, starting at ``c0``, for a smooth increasing
    ``upper_at``: secant steps on ``g = log(upper / target)`` against ``log c``, each aimed a quarter of
    ``rtol`` past the predicted root on the side the bracket still lacks, so that a good model closes the
    bracket ``hi - lo <= rtol hi`` in two or three probes after the first; bisection where the secant
    leaves the bracket. Soundness never depends on the model: the returned ``c`` is a probed point with
    ``upper_at(c) <= target``, else ValueError."""
    lo, hi, g_lo, g_hi = 0.0, math.inf, -math.inf, math.inf  # lo = 0: nothing feasible probed yet
    c, probes, slope = c0, 0, 1.0  # slope of g in log c: 1 until two probes measure it (eps roughly ~ eps0)
    while probes < max_probes:
        g = math.log(max(upper_at(c), 1e-300) / target)
        probes += 1
        if g <= 0:
            lo, g_lo = c, g
        else:
            hi, g_hi = c, g
        both = lo > 0 and math.isfinite(hi)
        if both:
            if hi - lo <= rtol * hi:
                return lo
            if g_lo > g_hi - 1e-12:  # not increasing here: the secant means nothing, bisect
                c = 0.5 * (lo + hi)
                continue
            slope = (g_hi - g_lo) / math.log(hi / lo)
        side = 1.0 if g <= 0 else -1.0  # after a feasible probe aim above the root, else below it
        nxt = math.exp(math.log(c) - g / slope + side * 0.25 * rtol)
        if both and not lo < nxt < hi:
            nxt = 0.5 * (lo + hi)
        elif not math.isfinite(hi):  # still unbounded above: at least a step of rtol, at most doubling
            nxt = min(max(nxt, lo * (1.0 + rtol)), 2.0 * lo)
        elif lo == 0:
            nxt = max(min(nxt, hi / (1.0 + rtol)), 0.5 * hi)
        c = nxt
    if lo == 0:
        raise ValueError(f"target_eps: no feasible scale found for {target:g} in {max_probes} probes")
    return lo


def _worst_case(queries, eps0, delta, discretization, cached: bool = True):
    """The ``pld`` candidate :func:`~jaxshuffle.accountant.rounds.release_epsilon` can take ready-made:
    tune's own composition of the worst-case pairs, for several queries (with one, the rule is
    ``composed_epsilon``, which builds its own and would not read it)."""
    if len(queries) == 1:
        return None
    return certified_epsilon(queries, eps0, delta, discretization=discretization, cached=cached)


def _certify_scale_by_rule(queries, direction, target, delta, discretization, rtol, blanket_points):
    """Largest verified ``c`` with the T-round rule's upper of ``c * direction`` ``<= target``
    (:func:`~jaxshuffle.accountant.rounds.release_epsilon`), searched from the worst-case pairs' scale
    (cheap: their rounds are cached across probes), where the rule is usually already feasible, by
    :func:`_secant_feasible` (each of the rule's probes builds blanket-pair PLDs). Returns ``c``."""
    direction = np.asarray(direction, np.float64)
    c_wc = _certify_scale(queries, direction, target, delta, discretization, rtol)[0]

    def rule_at(c):
        parts, points = _rule_parts(queries, c * direction, blanket_points)
        return release_epsilon(parts, delta, discretization=discretization, blanket_points=points,
                               worst_case=_worst_case(queries, c * direction, delta, discretization))

    first = rule_at(c_wc)
    others = min(first.blanket_pld, first.basic, first.advanced)
    if first.upper <= target and first.upper_source == "PLD" and not others <= target:
        # The rule is the worst-case pairs' composition here and its other bounds already miss the target:
        # growing c only raises them, so the rule's boundary is the worst-case pairs' one, which the
        # bisection above bracketed within rtol (its next probe above c_wc failed).
        return c_wc
    return _secant_feasible(lambda c: first.upper if c == c_wc else rule_at(c).upper, target, rtol, c_wc)


# ----------------------------------------------------------------------------------------------
# tune
# ----------------------------------------------------------------------------------------------

def default_utility(queries: Sequence[Query]) -> Callable[[jax.Array], jax.Array]:
    """Sum over queries of each family's ready utility (:mod:`jaxshuffle.utility`), times ``count``:
    ``grr``: the k-RR frequency MSE summed over the domain (:func:`grr_frequency_mse_total`);
    ``binary-rr``: the binary-RR mean MSE; ``laplace``: the Laplace mean MSE on [0, 1]."""
    from jaxshuffle import utility as U

    queries = check_queries(queries)
    parts = []
    for i, q in enumerate(queries):
        opts = dict(q.options)
        if q.family == "grr":
            parts.append(U.grr_frequency_mse_total(opts.get("k", 2.0), q.n))
        elif q.family == "binary-rr":
            parts.append(U.binary_rr_mean_mse(q.n))
        elif q.family == "laplace":
            parts.append(U.laplace_mean_mse(q.n))
        else:
            raise ValueError(f"queries[{i}]: no ready utility for family {q.family!r}; pass utility=")
    return U.weighted_sum(parts, weights=[float(q.count) for q in queries])


class TuneResult(NamedTuple):
    """Result of :func:`tune` (numpy arrays / floats).

    Certified at the end: docs/math.md section 16.3.

    Attributes:
      eps0: per-query local budgets (certified: the composed release is ``(upper, delta)``-DP).
      lower: lower end of the composed bracket of the worst-case pairs at ``eps0`` (recomputed from
        scratch): a bound from below on the pairs' composed epsilon, not on the mechanism's;
        NaN when a query samples its clients (the sampled round's PLD is pessimistic only).
      upper: upper end of the certified composed bracket at ``eps0`` (``upper <= target``; recomputed
        from scratch).
      utility: ``utility(eps0)`` (an error: lower is better).
      baseline_eps0: the equal split's eps0 (one common eps0 for every query, certified by the same
        bisection).
      baseline_lower: the equal split's ``lower``.
      baseline_upper: the equal split's ``upper``.
      baseline_utility: the equal split's ``utility``.
      history: the objective ``utility(eps0(theta_t))`` at each optimiser step (on the surrogate constraint).
      surrogate: the surrogate composed epsilon at the returned ``eps0``.
      scale: the certified factor ``c`` applied to the optimiser's allocation.
      target: the ``target_eps`` asked.
      delta: the composed release's delta.
      discretization: the common loss grid of the certified composition.
      sources: each query's round pair, in the queries' order: the proof that certifies it
        (``"stronger clone"``, ``"standard clone"``, ...; docs/math.md 3.1; a query with
        ``sample_rate < 1``: its sampled round's source, ``"blanket pair (k-ary RR, clients sampled at g)"``).
      upper_source: which of the T-round rule's bounds gave ``upper`` (``"PLD"``, ``"blanket PLD"``,
        ``"basic"``, ``"advanced"``; :data:`~jaxshuffle.accountant.rounds.SOURCES`).
      worst_case_upper: the composed worst-case pairs' certified epsilon at ``eps0`` (``upper`` is at most
        this; it may exceed the target where the rule's blanket pair certifies a larger eps0).
      blanket_points: per query, the blanket pair's profile evaluations in the final certificate (0: not
        built), so that ``release_epsilon(..., blanket_points=that)`` is exactly the rule certified.
      baseline_upper_source: which of the rule's bounds gave ``baseline_upper``.
    """

    eps0: np.ndarray
    lower: float
    upper: float
    utility: float
    baseline_eps0: np.ndarray
    baseline_lower: float
    baseline_upper: float
    baseline_utility: float
    history: np.ndarray
    surrogate: float
    scale: float
    target: float
    delta: float
    discretization: float
    sources: tuple = ()
    upper_source: str = "PLD"
    worst_case_upper: float = float("nan")
    blanket_points: tuple = ()
    baseline_upper_source: str = "PLD"

    @property
    def gain(self) -> float:
        """``baseline_utility / utility``: how many times smaller the tuned error is than equal split's."""
        return self.baseline_utility / self.utility


def _check_common(target_eps, delta, steps):
    t = np.float64(target_eps)
    check(np.isfinite(t) & (t > 0), "target_eps", "must be a finite number > 0", value=t)
    d = np.float64(delta)
    check((d > 0) & (d < 1), "delta", "must lie in (0, 1)", value=d)
    if isinstance(steps, bool) or int(steps) != steps or int(steps) < 0:
        raise ValueError(f"steps: must be an integer >= 0, got {steps!r}")


def _default_discretization(queries, target):
    total = sum(q.count for q in queries)
    return float(max(1e-4, 2e-3 * target / total))


def _optimiser(queries, utility, delta, optimizer, steps):
    """A jitted ``(targets, theta0s) -> (theta, eps0, history)``: ``steps`` optax updates of ``theta``
    for each surrogate target (vmapped over targets), in one scan."""
    import optax

    if optimizer is None:  # Adam with a decaying step: a constant one keeps circling the optimum
        optimizer = optax.adam(optax.cosine_decay_schedule(0.1, max(steps, 1), alpha=1e-3))

    def objective(theta, target):
        return utility(_project(queries, theta, target, delta))

    def run(target, theta0):
        state = optimizer.init(theta0)

        def step(carry, _):
            theta, st = carry
            val, grad = jax.value_and_grad(objective)(theta, target)
            upd, st = optimizer.update(grad, st, theta)
            return (optax.apply_updates(theta, upd), st), val

        (theta, _), hist = jax.lax.scan(step, (theta0, state), None, length=steps)
        return theta, _project(queries, theta, target, delta), hist

    compiled = jax.jit(jax.vmap(run))

    def call(targets, theta0s):
        # optax mixes Python floats with int32 step counts (bias correction): trace it under the
        # standard promotion rules whatever the caller's setting (float64 everywhere else)
        with jax.numpy_dtype_promotion("standard"):
            return compiled(jnp.asarray(targets, jnp.float64), jnp.asarray(theta0s, jnp.float64))

    return call


def tune(queries: Sequence[Query], utility: Callable[[jax.Array], jax.Array] | None, target_eps, delta, *,
         optimizer=None, steps: int = 200, discretization: float | None = None, rtol: float = 2e-3,
         init=None, refine: int = 1, blanket_points: int | None = None) -> TuneResult:
    """Per-query eps0 minimising ``utility`` with certified composed epsilon ``<= target_eps``.

    Size: a public entry point; its keywords are the user's options for the optimiser (``optimizer``,
    ``steps``, ``init``, ``refine``) and for the certificate (``discretization``, ``rtol``,
    ``blanket_points``).

    Args:
      queries: :class:`Query` list (:func:`query`), e.g. ``[query("grr", n=1e5, k=2), ...]``.
      utility: ``u(eps0_vector) -> scalar`` error to minimise, pure JAX (:mod:`jaxshuffle.utility`);
        ``None``: :func:`default_utility`.
      target_eps: the composed release's epsilon, > 0.
      delta: its delta, in (0, 1).
      optimizer: an ``optax.GradientTransformation`` (default Adam, step 0.1 cosine-decayed to 1e-4
        over ``steps``) on the
        unconstrained ``theta`` (``eps0 ~ exp(theta)``, projected onto the surrogate constraint).
      steps: optimiser steps, an integer >= 0.
      discretization: the common loss grid of the certified composition, at least 1e-9
        (default ``max(1e-4, 2e-3 target / total rounds)``).
      rtol: relative width of the certified bisection on the common scale factor.
      init: initial eps0 direction (default equal split).
      refine: re-aiming passes: the allocation is certified (coarsely), the surrogate's value at the
        certified point becomes the surrogate's target, and the optimiser runs again from where it
        stopped (so the final common scale factor is close to 1 and the allocation close to KKT
        for the certified constraint). ``history`` holds every pass's steps.
      blanket_points: profile evaluations of k-ary RR's blanket pair's round PLD in the T-round rule that
        scales and certifies the allocation (:func:`~jaxshuffle.accountant.rounds.release_epsilon`), e.g.
        :data:`~jaxshuffle.accountant.count_search.CALIBRATION_BLANKET_POINTS` (64) as calibration's.
        Unset: not built for queries whose users all take part, a cost cap: the rule's search builds
        every query's blanket PLD at several scales, and one build took 12-22 s at ``n = 1e5``, ``eps0``
        5-7.5 on a 2-core CPU against 0.2 s for the worst-case pair's round
        (``benchmarks/tune.py --rule``); a sampled query's round is its blanket pair's either way.

    Returns:
      The allocation, a :class:`TuneResult`. The optimisation uses a smooth surrogate (module docstring;
        docs/math.md section 16); the returned ``eps0`` is then scaled by a certified bisection on the
        T-round rule (:func:`~jaxshuffle.accountant.rounds.release_epsilon`: the smallest certified bound,
        which for one query is :func:`~jaxshuffle.accountant.rounds.composed_epsilon`'s, the rule
        ``calibrate_eps0(..., rounds=T)`` searches) so that ``upper <= target_eps``, ``upper`` recomputed from
        scratch at the returned eps0 (a certified upper bound, errs high).

    Raises:
      ValueError: naming the parameter, for bad ``queries``, a ``utility`` that is not a callable
        returning a finite scalar with a finite gradient, a ``target_eps`` not finite and > 0, a
        ``delta`` outside (0, 1), a bad ``steps``, ``init``, ``discretization`` or ``rtol``.
    """
    return _tune_many(queries, utility, [target_eps], delta, optimizer=optimizer, steps=steps,
                      discretization=discretization, rtol=rtol, init=init, refine=refine,
                      blanket_points=blanket_points)[0]


def _final_certificate(queries, eps0, delta, disc, blanket_points) -> tuple[ReleaseEpsilon, tuple]:
    """The T-round rule at ``eps0``, from scratch (the worst-case pairs' rounds rebuilt, no cached round):
    :func:`~jaxshuffle.accountant.rounds.release_epsilon`'s smallest certified bound, and the blanket-pair
    profile points of each query it used."""
    parts, points = _rule_parts(queries, eps0, blanket_points)
    return release_epsilon(parts, delta, discretization=disc, blanket_points=points,
                           worst_case=_worst_case(queries, eps0, delta, disc, cached=False)), tuple(points)


def _tune_many(queries, utility, targets, delta, *, optimizer, steps, discretization, rtol, init, refine=1,
               blanket_points=None):
    """:func:`tune` and :func:`pareto_front` over a list of targets: checks, one vmapped optimisation, then
    each target's allocation scaled and certified by the T-round rule. Size: it takes :func:`tune`'s
    keywords as they are (both public entry points pass them through)."""
    queries = check_queries(queries)
    for t in targets:
        _check_common(t, delta, steps)
    if utility is None:
        utility = default_utility(queries)
    if not callable(utility):
        raise ValueError("utility: must be a callable eps0 -> scalar (jaxshuffle.utility)")
    m = len(queries)
    if init is None:
        theta0 = jnp.zeros(m)
    else:
        init = np.asarray(init, np.float64)
        check((init.shape == (m,)) & np.all(np.isfinite(init) & (init > 0)), "init",
              f"must hold {m} finite eps0 > 0", value=init.reshape(-1)[:1] if init.size else None)
        theta0 = jnp.log(jnp.asarray(init))
    if discretization is not None:
        check(np.float64(discretization) >= 1e-9, "discretization", "must be at least 1e-9",
              value=np.float64(discretization))
    r = float(rtol)
    check(np.float64(r) > 0, "rtol", "must be > 0", value=np.float64(r))
    blanket_points = checked_blanket_points(blanket_points)
    delta = float(delta)
    start = jnp.exp(theta0)
    val, grad = jax.value_and_grad(lambda e: jnp.asarray(utility(e), jnp.float64))(start)
    if jnp.shape(val) != ():
        raise ValueError(f"utility: must return a scalar, got shape {jnp.shape(val)}")
    if not (np.isfinite(float(val)) and np.all(np.isfinite(np.asarray(grad)))):
        raise ValueError(f"utility: must return a finite value with a finite gradient, got {float(val)!r} "
                         f"(gradient {np.asarray(grad).tolist()}) at eps0 = {np.asarray(start).tolist()}")
    optimise = _optimiser(queries, utility, delta, optimizer, int(steps))
    targets = [float(t) for t in targets]
    discs = [_default_discretization(queries, t) if discretization is None else float(discretization)
             for t in targets]
    theta, alloc, hist = optimise(targets, jnp.tile(theta0, (len(targets), 1)))
    if not np.all(np.isfinite(np.asarray(alloc))):
        raise ValueError("utility: the optimiser reached a non-finite eps0 (the utility or its gradient is not "
                         "finite somewhere along the way); check it for NaN or inf over eps0 > 0")
    hist = np.asarray(hist)
    for _ in range(int(refine)):
        # re-aim the surrogate at the certified boundary: the surrogate's value there becomes its target
        s_targets = []
        for j, target in enumerate(targets):
            c = _certify_scale(queries, np.asarray(alloc[j]), target, delta, discs[j], r)[0]
            s_targets.append(float(surrogate_epsilon(queries, jnp.asarray(c * np.asarray(alloc[j])), delta)))
        theta, alloc, more = optimise(s_targets, theta)
        hist = np.concatenate([hist, np.asarray(more)], axis=1)
    out = []
    for j, target in enumerate(targets):
        disc = discs[j]
        direction = np.asarray(alloc[j])
        c = _certify_scale_by_rule(queries, direction, target, delta, disc, r, blanket_points)
        eps0 = c * direction
        final, points = _final_certificate(queries, eps0, delta, disc, blanket_points)
        if not final.upper <= target:  # the probe at c was feasible: the same computation again must be
            raise RuntimeError(f"recomputed certified upper {final.upper} exceeds the target {target} (a bug)")
        equal = np.full(m, float(np.mean(direction)))
        if np.array_equal(equal, direction):  # one query, or no step taken: the baseline is this very search
            cb, base = c, final
        else:
            cb = _certify_scale_by_rule(queries, equal, target, delta, disc, r, blanket_points)
            base, _ = _final_certificate(queries, cb * equal, delta, disc, blanket_points)
        out.append(TuneResult(
            eps0=eps0, lower=final.lower, upper=final.upper, utility=float(utility(jnp.asarray(eps0))),
            baseline_eps0=cb * equal, baseline_lower=base.lower, baseline_upper=base.upper,
            baseline_utility=float(utility(jnp.asarray(cb * equal))), history=hist[j],
            surrogate=float(surrogate_epsilon(queries, jnp.asarray(eps0), delta)), scale=c,
            target=target, delta=delta, discretization=disc,
            sources=tuple(_source(q, float(e), disc) for q, e in zip(queries, eps0)),
            upper_source=final.upper_source, worst_case_upper=final.pld, blanket_points=points,
            baseline_upper_source=base.upper_source))
    return out


def _source(q: Query, eps0: float, disc: float) -> str:
    """The label of the proof that certifies query ``q``'s round at ``eps0``."""
    if q.sample_rate < 1.0:  # the sampled round's own label (the probe at this eps0 is cached)
        return _round(q.family, q.options, q.n, eps0, disc, q.sample_rate).source
    # the round pair's label, from the proof alone (no round PLD is rebuilt for it)
    return clone_source(certified_clone(q.randomizer(eps0))[1])


class ParetoFront(NamedTuple):
    """Tuned and equal-split utility against the certified composed epsilon, one entry per target.

    Attributes:
      targets: the target epsilons, in the order given.
      upper: each target's certified composed epsilon of the tuned allocation (``<= target``).
      utility: each target's tuned utility (an error: lower is better).
      baseline_upper: each target's certified composed epsilon of the equal split.
      baseline_utility: each target's equal-split utility.
      eps0: the tuned per-query budgets, shape ``(targets, queries)``.
      results: each target's :class:`TuneResult`.
    """

    targets: np.ndarray
    upper: np.ndarray
    utility: np.ndarray
    baseline_upper: np.ndarray
    baseline_utility: np.ndarray
    eps0: np.ndarray  # (targets, queries)
    results: tuple


def pareto_front(queries: Sequence[Query], utility, targets, delta, *, optimizer=None, steps: int = 200,
                 discretization: float | None = None, rtol: float = 2e-3,
                 blanket_points: int | None = None) -> ParetoFront:
    """:func:`tune` over a list of targets: the optimisation is vmapped over targets (one compiled
    scan), each allocation then certified (docs/math.md section 16).

    Args:
      queries: :class:`Query` list (:func:`query`), as :func:`tune`.
      utility: ``u(eps0_vector) -> scalar`` error to minimise, pure JAX; ``None``: :func:`default_utility`.
      targets: the composed release's target epsilons, each finite and > 0 (at least one).
      delta: the composed release's delta, in (0, 1).
      optimizer: an ``optax.GradientTransformation``, as :func:`tune`.
      steps: optimiser steps, an integer >= 0.
      discretization: the common loss grid of the certified composition, as :func:`tune`.
      rtol: relative width of the certified bisection on the common scale factor.
      blanket_points: the blanket pair's profile evaluations in each final certificate, as :func:`tune`.

    Returns:
      The front, a :class:`ParetoFront`: per target, the certified composed epsilon (an upper bound, errs
        high) and utility of the tuned allocation and of the equal split.

    Raises:
      ValueError: naming the parameter, for an empty ``targets`` or bad input, as :func:`tune`.
    """
    targets = np.asarray(targets, np.float64).reshape(-1)
    if targets.size == 0:
        raise ValueError("targets: need at least one target epsilon")
    res = _tune_many(queries, utility, list(targets), delta, optimizer=optimizer, steps=steps,
                     discretization=discretization, rtol=rtol, init=None, blanket_points=blanket_points)
    return ParetoFront(targets, np.array([r.upper for r in res]), np.array([r.utility for r in res]),
                       np.array([r.baseline_upper for r in res]), np.array([r.baseline_utility for r in res]),
                       np.stack([r.eps0 for r in res]), tuple(res))
