"""Privacy-loss distributions of shuffled k-ary RR's blanket pair and of a sampled round's three-count pair.

Both pairs are symmetric and dominate their round (docs/math.md sections 10 and 12.10), so each round's
PLD is connected from its certified privacy profile (:mod:`jaxshuffle.pld.profile`,
docs/math.md section 12.8): the blanket engine's certified divergence for k-RR
(:func:`jaxshuffle.blanket.point_divergence`), the matrix engine's form divergence for the three-count
pair. ``h = 0`` from ``eps0`` (k-RR) or ``log p`` (three-count) on.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import check
from jaxshuffle.engine.blanket import (
    BlanketPlan,
    blanket_epsilon,
    bucket_plan,
    krr_sum_form,
    plan_blanket,
    point_divergence,
    window_start,
)
from jaxshuffle.pld.distribution import MIN_DISCRETIZATION, RoundPLD, default_discretization
from jaxshuffle.pld.profile import (  # noqa: F401  (some re-exported from their former home)
    DEFAULT_POINTS,
    EVAL_BATCH,
    KAPPA,
    MAX_INDEX,
    TAIL_DELTA,
    TAIL_REACH,
    connect_the_dots,
    profile_grid,
    round_from_profile,
)
from jaxshuffle.randomizers.clone import certified_clone, certified_worst_case_pair

#: largest n at which :func:`~jaxshuffle.accountant.rounds.composed_epsilon` builds the blanket pair's PLD by
#: default (each profile point's window, and so its cost, grows with n)
BLANKET_PLD_MAX_N = 1e6

#: above this n the default rule builds the blanket pair's PLD from at most :data:`LARGE_N_POINTS` profile
#: points: at n = 1e6 (k = 50, eps0 = 2, 365 rounds) 128 points gave a composed epsilon 0.02 % above 512
#: points' in a third of the time (benchmarks/compose.py)
LARGE_N_FROM = 1e5
LARGE_N_POINTS = 128


#: About this many evaluations make one search of the blanket engine: a profile of ``points`` evaluations
#: weighs as ``points / SEARCH_EVALUATIONS`` lanes in :func:`profile_plan`'s cost.
SEARCH_EVALUATIONS = 16


def profile_plan(eps0: float, k: float, n: float, points: int) -> BlanketPlan:
    """The plan of the blanket pair's profile at ``points`` values of eps and of its tail search: the point's
    own plan on the programs' ladder (:func:`~jaxshuffle.blanket.bucket_plan`), so that nearby eps0 and n (a
    calibration's or a tuning's probes, a sweep's axes) share its compiled programs. A plan never affects
    soundness, only cost (docs/math.md section 10)."""
    lanes = 1 + -(-int(points) // SEARCH_EVALUATIONS)
    return bucket_plan(plan_blanket(eps0, k, n, TAIL_DELTA), n, lanes)


def profile_upper(eps0: float, k: float, n: float, eps: np.ndarray, plan: BlanketPlan) -> np.ndarray:
    """Certified upper values of the blanket pair's ``H_{e^eps}(P||Q)`` at each ``eps >= 0`` (k-ary RR at
    ``eps0``, ``k`` (real where clients are sampled), ``n`` users; one program for every ``eps`` of ``plan``)."""
    f = krr_sum_form(eps0, k, "blanket")
    # the s window centred on the mean of Bin(n, pS); any start is sound (the mass outside is charged)
    s_lo = window_start(jnp.float64(n), f.pS, plan.window)
    return np.asarray(_profile_program(f, jnp.float64(n), s_lo, jnp.asarray(eps), plan=plan))


@functools.partial(jax.jit, static_argnames=("plan",))
def _profile_program(f, n, s_lo, eps, *, plan):
    return jax.lax.map(lambda e: point_divergence(f, n, e, s_lo, plan).upper, eps, batch_size=EVAL_BATCH)


def blanket_round(eps0, k, n, *, discretization: float | None = None, rounds: int = 1,
                  points: int = DEFAULT_POINTS, sample_rate: float = 1.0) -> RoundPLD:
    """Certified round PLD of ``n`` users' shuffled k-ary randomized response, from its blanket pair.

    Args:
      eps0: local budget, in (0, 50]. k: number of values, an integer >= 2.
      n: number of users, an integer in [2, 1e12].
      discretization: loss grid spacing; default that of the worst-case pair
        (:func:`~jaxshuffle.pld.distribution.default_discretization`) for ``rounds`` rounds, so both
        pairs share one grid.
      points: profile evaluations spread evenly over ``[0, eps_tail]`` (``eps_tail``: the blanket
        epsilon at ``TAIL_DELTA``), and ``points/8`` more up to ``min(eps0, TAIL_REACH eps_tail)``.
      sample_rate: the probability ``g`` in (0, 1] that a user takes part in the round (Poisson
        client sampling): the blanket pair is then k-RR's at the real ``k'`` of
        :func:`~jaxshuffle.accountant.subsampling.subsampled_krr_k` (docs/math.md 12.10), a
        dominating pair of the subsampled round. ``n`` counts every user, taking part or not.

    Returns a symmetric :class:`RoundPLD` (pessimistic only: ``lower_*`` are None). Composing it
    gives certified upper bounds (docs/math.md section 12.8); it never mixes with another pair's
    profile (compose each pair and keep the smaller final bound).
    """
    from jaxshuffle.engine.two_count.pair import vr_pair, worst_case_beta
    from jaxshuffle.randomizers import grr

    for name, value in (("eps0", eps0), ("k", k), ("n", n)):
        if np.ndim(value) != 0:
            raise ValueError(f"{name}: blanket_round takes a scalar, got shape {np.shape(value)}")
    eps0, k, n = (np.float64(x) for x in (eps0, k, n))
    check(np.isfinite(eps0) & (eps0 > 0) & (eps0 <= 50), "eps0", "must lie in (0, 50]", value=eps0)
    check((k >= 2) & (k == np.floor(k)) & (k < 1e12), "k", "must be an integer >= 2", value=k)
    check((n >= 2) & (n == np.floor(n)) & (n <= 1e12), "n", "must be an integer in [2, 1e12]", value=n)
    check((np.float64(points) >= 2) & (np.float64(points) <= 1 << 16), "points", "must lie in [2, 65536]",
          value=np.float64(points))
    from jaxshuffle.accountant.subsampling import scalar_sample_rate, subsampled_krr_k

    g = scalar_sample_rate(sample_rate, "blanket_round")
    k_form = np.float64(subsampled_krr_k(eps0, k, g))  # k itself at g = 1
    if discretization is None:
        vr = grr(float(eps0), float(k))
        pair = vr_pair(vr.p, worst_case_beta(vr.p), vr.q)
        discretization = default_discretization(pair, n, int(rounds))
    check(np.float64(discretization) >= MIN_DISCRETIZATION, "discretization",
          f"must be at least {MIN_DISCRETIZATION}", value=np.float64(discretization))
    delta_ = float(discretization)
    plan = profile_plan(eps0, k_form, n, points)
    tail = blanket_epsilon(eps0, k_form, n, TAIL_DELTA, plan=plan, real_k=g < 1)
    eps_tail = float(tail.upper) if float(tail.upper) < eps0 else float(tail.lower)  # only places the grid
    j, padded = profile_grid(float(eps0), eps_tail, delta_, int(points))
    upper = profile_upper(float(eps0), float(k_form), float(n), padded, plan)[:j.size]
    source = "blanket pair (k-ary RR)" if g == 1 else f"blanket pair (k-ary RR, clients sampled at {g:g})"
    return round_from_profile(j, upper, delta_, float(eps0), source)


@functools.partial(jax.jit, static_argnames=("plan",))
def _form_profile_program(w, a0, a1, v0, v1, n, eps, *, plan):
    from jaxshuffle.engine.matrix.search import form_divergence

    return jax.lax.map(lambda e: form_divergence(w, a0, a1, v0, v1, n, e, plan, True), eps, batch_size=EVAL_BATCH)


def three_count_round(p: float, r: float, g: float, n, *, discretization: float,
                      points: int = DEFAULT_POINTS) -> RoundPLD:
    """Certified round PLD of a round with clients sampled at rate ``g``, from its three-count pair.

    The three-count pair (:func:`~jaxshuffle.accountant.subsampling.three_count_forms`, docs/math.md
    12.10) dominates the sampled round of every single-message randomizer with ratio ``p`` and clone
    constant ``r`` (``r`` already rounded down). It is symmetric, so its PLD is built from its certified
    profile exactly as :func:`blanket_round` builds k-RR's (docs/math.md 12.8): upper profile values at
    points below ``j Delta`` from the matrix engine's certified form divergence, connected. ``h = 0`` from
    ``eps = log p`` on. Pessimistic only; composing it gives certified upper bounds.
    """
    from jaxshuffle.accountant.subsampling import three_count_forms
    from jaxshuffle.engine.matrix.search import plan_forms, search_forms

    n = float(n)
    delta_ = float(discretization)
    check(np.float64(delta_) >= MIN_DISCRETIZATION, "discretization", f"must be at least {MIN_DISCRETIZATION}",
          value=np.float64(delta_))
    forms = three_count_forms(float(p), float(r), float(g))
    eps_end = float(forms.eps_max[0])
    tail = search_forms(forms, n, TAIL_DELTA)
    eps_tail = float(tail.upper) if float(tail.upper) < eps_end else eps_end  # only places the grid
    j, padded = profile_grid(eps_end, eps_tail, delta_, int(points))
    # one plan for every profile point (a point beyond its reach is inf, the safe side: the running minimum
    # of the profile then keeps the value before it)
    plan, _ = plan_forms(forms, n, TAIL_DELTA)
    rows = [jnp.asarray(x[0]) for x in (forms.w, forms.a0, forms.a1, forms.v0, forms.v1)]
    upper = np.asarray(_form_profile_program(*rows, jnp.float64(n), jnp.asarray(padded), plan=plan))[:j.size]
    return round_from_profile(j, upper, delta_, eps_end, f"three-count pair (clients sampled at {g:g})")


def round_grid(randomizer, n, rounds: int, discretization: float | None, accuracy: float = 1e-3) -> float:
    """``discretization``, or the worst-case pair's default grid for ``rounds`` rounds at ``accuracy``
    (:func:`~jaxshuffle.pld.distribution.default_discretization`: what the full round composes on; a
    sampled round's losses are smaller, so the grid suits it too)."""
    if discretization is not None:
        return float(discretization)
    pair, _ = certified_worst_case_pair(randomizer)
    n_engine = float(np.asarray(randomizer.n_blanket(n))) + 1.0
    return float(default_discretization(pair, n_engine, rounds, accuracy))


def default_blanket_points(n, sample_rate: float = 1.0, points: int = DEFAULT_POINTS) -> np.ndarray:
    """The default rule for where, and from how many profile points, the T-round rule builds a blanket (or
    three-count) round PLD: ``points`` up to ``n = LARGE_N_FROM``, at most :data:`LARGE_N_POINTS` above it
    (the cost of a point grows with ``n``), up to ``n = BLANKET_PLD_MAX_N`` and at every ``n`` for a round
    with clients sampled (it has no other PLD); else 0 (int64, ``n``'s shape). Fewer points only loosen
    the certified bound (connecting the dots, docs/math.md 12.8)."""
    n = np.asarray(n, np.float64)
    per_n = np.where(n <= LARGE_N_FROM, points, min(points, LARGE_N_POINTS))
    build = (n <= BLANKET_PLD_MAX_N) | (sample_rate < 1.0)
    return np.where(build, per_n, 0).astype(np.int64)


def blanket_round_where_built(randomizer, n, discretization: float, blanket_points: int | None,
                              sample_rate: float = 1.0):
    """The blanket pair's round PLD (k-ary RR) on the loss grid ``discretization``, where
    :func:`~jaxshuffle.accountant.rounds.composed_epsilon` builds it (``blanket_points``: None for the
    default rule: up to the n cap, and at every n for a sampled round, which has no other PLD); for a
    sampled round of any other single-message randomizer its three-count pair's PLD
    (:func:`three_count_round`, the clone constant proven for it);
    None elsewhere."""
    mech = randomizer.krr()
    if blanket_points is None:
        blanket_points = int(default_blanket_points(float(n), sample_rate))
    if blanket_points == 0:
        return None
    if mech is None and sample_rate < 1.0:  # any other single-message randomizer: its three-count pair
        r, _ = certified_clone(randomizer, np)
        return three_count_round(float(np.asarray(randomizer.p)), float(np.asarray(r)), sample_rate, n,
                                 discretization=discretization, points=blanket_points)
    if mech is None:
        return None
    return blanket_round(float(np.asarray(mech.eps0)), float(np.asarray(mech.k)), n,
                         discretization=discretization, points=blanket_points, sample_rate=sample_rate)
