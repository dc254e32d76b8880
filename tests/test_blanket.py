"""The blanket (three-count) sum forms of k-RR: certified divergence bands and epsilon brackets.

References: brute-force multinomial enumeration (tests/reference/blanket.py), the pair form of
(B1) enumerated from the two hypotheses' pmfs, and the exact shuffled epsilon of concrete
datasets (``jaxshuffle.exact``). docs/parts/blanket.md names the formula each test checks.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference.blanket import krr_delta, pair_blanket_delta

import jaxshuffle  # noqa: F401  (float64)
from jaxshuffle import blanket as bl
from jaxshuffle.exact import enumerate as exact
from jaxshuffle.exact.soundness import grr_matrix
from jaxshuffle.search import Status

# One plan for every small point below (n <= 60, eps0 <= 5, any eps <= eps0): one compile per kind.
SMALL = bl.BlanketPlan(window=64, block=8, lines=48, max_step=154, chunk=4)
# The reference sums non-negative float64 terms with relative error ~1e-14 each.
REF_REL = 1e-12


@functools.partial(jax.jit, static_argnames=("kind", "plan"))
def _div(eps0, k, n, eps, *, kind, plan=SMALL):
    f = bl.krr_sum_form(eps0, k, kind)
    return bl.point_divergence(f, n, eps, bl.window_start(n, f.pS, plan.window), plan)


def _band_contains(d, ref):
    lo, up = float(d.lower), float(d.upper)
    assert lo - REF_REL * ref <= ref <= up + REF_REL * ref, (lo, ref, up)
    assert up - lo <= 1e-4 * ref + 1e-12  # the band is tight, not just sound (REL_TAIL budgets dominate)


def test_pair_form_equals_sum_form():
    """MATH 10 / docs blanket "sum form": (B1) as a pair's hockey stick equals the sum form (n draws)."""
    for eps0, k, n, eps in [(1.0, 3, 2, 0.5), (0.7, 4, 6, 0.2), (2.0, 5, 5, 1.1), (1.0, 2, 7, 0.3)]:
        a, b = pair_blanket_delta(eps0, k, n, eps), krr_delta(eps0, k, n, eps)
        assert abs(a - b) <= 1e-12 * b


def test_dataset_sum_forms_equal_exact():
    """docs blanket "lower bounds": the all-z and all-x0 sum forms are the exact datasets' divergences."""
    for eps0, k, n, eps in [(1.0, 3, 4, 0.3), (0.5, 5, 6, 0.1), (2.0, 4, 5, 0.9), (1.0, 10, 3, 0.2), (1.5, 2, 6, 0.4)]:
        m = np.asarray(grr_matrix(k, eps0))
        ex_x0 = exact.delta_of_eps(m, 0, 1, [0] * (n - 1), eps)
        ours = max(krr_delta(eps0, k, n, eps, "all_x0"), krr_delta(eps0, k, n, eps, "all_x0_mirror"))
        assert abs(ours - ex_x0) <= 1e-10 * ex_x0
        if k >= 3:
            ex_z = exact.delta_of_eps(m, 0, 1, [2] * (n - 1), eps)
            assert abs(krr_delta(eps0, k, n, eps, "all_z") - ex_z) <= 1e-10 * ex_z


@pytest.mark.slow
@settings(derandomize=True, deadline=None, max_examples=40)
@given(eps0=st.floats(0.1, 5.0), k=st.sampled_from([2, 3, 4, 5, 10]), n=st.integers(1, 60),
       frac=st.floats(0.0, 1.0), kind=st.sampled_from(bl.KINDS))
def test_band_contains_enumeration(eps0, k, n, frac, kind):
    """Stretch kernel (docs blanket "per stretch", "recurrences", "certificate") vs enumeration."""
    if kind == "all_z" and k < 3:
        k = 3
    eps = frac * eps0
    d = _div(jnp.float64(eps0), jnp.float64(k), jnp.float64(n), jnp.float64(eps), kind=kind)
    ref = krr_delta(eps0, k, n, eps, kind)
    assert not bool(d.step_overflow)
    _band_contains(d, ref)
    # -dD/dt (right derivative) is the Q-mass of the region: compare with one-sided differences of the
    # reference; D is piecewise linear in t, so where they differ a kink lies within h and -q_mass
    # must lie between them.
    h = 1e-7
    t = math.exp(eps)
    if eps > 1e-6:
        fwd = (krr_delta(eps0, k, n, math.log(t + h), kind) - ref) / h
        bwd = (ref - krr_delta(eps0, k, n, math.log(t - h), kind)) / h
        slack = 1e-6 * max(abs(fwd), abs(bwd)) + 1e-8
        assert min(fwd, bwd) - slack <= -float(d.q_mass) <= max(fwd, bwd) + slack
        if abs(fwd - bwd) <= slack:
            assert abs(float(d.q_mass) + fwd) <= slack


@pytest.mark.slow
@settings(derandomize=True, deadline=None, max_examples=40)
@given(eps0=st.floats(0.1, 5.0), k=st.sampled_from([2, 3, 4, 5, 10]), n=st.integers(1, 60),
       frac=st.floats(0.05, 1.0), back=st.floats(0.0, 1.0), kind=st.sampled_from(bl.KINDS))
def test_tangent_is_below_the_divergence(eps0, k, n, frac, back, kind):
    """docs blanket "tangent": D(t') >= tangent_value + (t - t') tangent_slope for 1 <= t' <= t
    (the search's certified lower end), against enumeration; at t' = t it is tight."""
    if kind == "all_z" and k < 3:
        k = 3
    eps = frac * eps0
    d = _div(jnp.float64(eps0), jnp.float64(k), jnp.float64(n), jnp.float64(eps), kind=kind)
    t = math.exp(eps)
    t2 = 1.0 + back * (t - 1.0)
    line = float(d.tangent_value) + (t - t2) * float(d.tangent_slope)
    ref2 = krr_delta(eps0, k, n, math.log(t2), kind)
    assert line <= ref2 * (1 + REF_REL) + 1e-300, (line, ref2)
    ref = krr_delta(eps0, k, n, eps, kind)
    assert float(d.tangent_value) >= ref - 1e-4 * ref - 1e-12  # tight at t (a useful tangent, not only a sound one)


@pytest.mark.slow
def test_tangent_below_the_certified_band_at_large_n():
    """Large n (the float law's perturbation grows with sqrt(n)): the tangent at t lies below the certified
    upper end at smaller t' (D_true(t') <= upper(t')), and within the band's width of it at t. (n = 1e8,
    where the old linear charge cost 6 evaluations, passes too: 65 s, left out of CI's budget.)"""
    eps0, k, delta, n = 1.0, 10.0, 1e-6, 1e6
    plan = bl.plan_blanket(eps0, k, n, delta)
    f = bl.krr_sum_form(jnp.float64(eps0), jnp.float64(k), "blanket")
    s_lo = bl.window_start(jnp.float64(n), f.pS, plan.window)
    div = jax.jit(lambda e: bl.point_divergence(f, jnp.float64(n), e, s_lo, plan))
    eps = float(bl.blanket_epsilon(eps0, k, n, delta, plan=plan).upper)
    d = div(jnp.float64(eps))
    t = math.exp(eps)
    assert float(d.lower) - float(d.tangent_value) <= 2.0 * (float(d.upper) - float(d.lower))
    for frac in (1e-7, 1e-5, 1e-3):
        e2 = math.log(t - frac * (t - 1.0))
        line = float(d.tangent_value) + (t - math.exp(e2)) * float(d.tangent_slope)
        assert line <= float(div(jnp.float64(e2)).upper)


@pytest.mark.slow
def test_recurrence_matches_anchors():
    """docs blanket "recurrences": one-step blocks (a continued-fraction anchor at every s) agree with long ones."""
    plan = SMALL._replace(block=1)
    a = _div(jnp.float64(1.3), jnp.float64(5), jnp.float64(50), jnp.float64(0.4), kind="blanket", plan=plan)
    b = _div(jnp.float64(1.3), jnp.float64(5), jnp.float64(50), jnp.float64(0.4), kind="blanket")
    assert abs(float(a.value) - float(b.value)) <= 1e-12 * float(b.value)


@pytest.mark.slow
def test_edge_cases():
    """eps0 = 0 gives 0; k = 2 has no z category; a tiny plan charges the uncovered mass (still sound)."""
    r = bl.blanket_epsilon(0.0, 3, 10, 1e-3, plan=SMALL)
    assert float(r.upper) == 0.0 and int(r.status) == Status.ZERO
    d = _div(jnp.float64(1.0), jnp.float64(2), jnp.float64(30), jnp.float64(0.2), kind="blanket")
    _band_contains(d, krr_delta(1.0, 2, 30, 0.2))
    tiny = bl.BlanketPlan(window=64, block=8, lines=1, max_step=154, chunk=4)
    d = _div(jnp.float64(0.5), jnp.float64(10), jnp.float64(60), jnp.float64(0.05), kind="blanket", plan=tiny)
    ref = krr_delta(0.5, 10, 60, 0.05)
    assert float(d.lower) <= ref * (1 + REF_REL) and float(d.upper) >= ref * (1 - REF_REL)


@pytest.mark.slow
def test_bad_input():
    with pytest.raises(ValueError, match="eps0"):
        bl.blanket_epsilon(-1.0, 3, 10, 1e-3)
    with pytest.raises(ValueError, match="k"):
        bl.blanket_epsilon(1.0, 1, 10, 1e-3)
    with pytest.raises(ValueError, match="delta"):
        bl.blanket_epsilon(1.0, 3, 10, 1.5)
    with pytest.raises(ValueError, match="n"):
        bl.blanket_epsilon(1.0, 3, 2.5, 1e-3)
    out = bl.blanket_epsilon_with_plan(jnp.array([1.0]), jnp.array([3.0]), jnp.array([10.0]), jnp.array([2.0]),
                                       plan=SMALL)
    assert int(out.status[0]) == Status.INVALID and float(out.upper[0]) == np.inf and float(out.lower[0]) == 0.0


@pytest.mark.slow
def test_n2_equals_exact():
    """MATH 3/10: n = 2, k = 3, eps0 = 1, delta = 0.01: (B1) equals the exact shuffled 3-RR (0.9694082)."""
    m = np.asarray(grr_matrix(3, 1.0))
    ex = exact.epsilon(m, 0, 1, [0], 0.01)
    r = bl.blanket_epsilon(1.0, 3, 2, 0.01, plan=SMALL)
    assert float(r.lower) <= ex + 1e-10 and ex <= float(r.upper)
    assert abs(float(r.upper) - ex) <= 2e-6 * ex
    assert round(ex, 7) == 0.9694082  # MATH's printed value, as a cross-check only


def _datasets(k, n):
    z = 2 if k >= 3 else 0
    out = {"all_x0": [0] * (n - 1), "all_x1": [1] * (n - 1), "mixed": ([0, 1, z] * n)[: n - 1]}
    if k >= 3:
        out["all_z"] = [2] * (n - 1)
    return out


def _campaign(ks, eps0s, ns, plan):
    """Every tried dataset: blanket upper >= exact; dataset lower bounds <= that dataset's exact."""
    E, K, N = (x.ravel() for x in np.meshgrid(eps0s, ks, ns, indexing="ij"))
    delta = np.full(E.shape, 1e-3)
    up = bl.blanket_epsilon(E, K, N, delta, plan=plan)
    lows = {kind: bl.blanket_epsilon(E, np.maximum(K, 3) if kind == "all_z" else K, N, delta, kind=kind, plan=plan)
            for kind in ("all_z", "all_x0", "all_x0_mirror")}
    checked = violations = 0
    for i, (e0, k, n) in enumerate(zip(E, K.astype(int), N.astype(int))):
        m = np.asarray(grr_matrix(k, float(e0)))
        for name, others in _datasets(k, n).items():
            ex = exact.epsilon(m, 0, 1, others, 1e-3)
            checked += 1
            violations += int(float(up.upper[i]) < ex)
            if name == "all_x0":
                lo = max(float(lows["all_x0"].lower[i]), float(lows["all_x0_mirror"].lower[i]))
                checked += 1
                violations += int(lo > ex)
            if name == "all_z":
                checked += 1
                violations += int(float(lows["all_z"].lower[i]) > ex)
    return checked, violations


def test_campaign_upper_small():
    """CI part: blanket upper >= exact epsilon on every dataset tried (one point per call: one program)."""
    checked = 0
    for k in (3, 10):
        for e0 in (0.1, 1.0, 5.0):
            for n in (2, 7):
                r = bl.blanket_epsilon(e0, k, n, 1e-3, plan=SMALL)
                assert int(r.status) in (Status.CONVERGED, Status.ERROR_LIMITED)
                m = np.asarray(grr_matrix(k, e0))
                for others in _datasets(k, n).values():
                    assert float(r.upper) >= exact.epsilon(m, 0, 1, others, 1e-3)
                    checked += 1
    assert checked == 48


@pytest.mark.slow
def test_campaign_full():
    """Issue 16: k in {3,4,5,10}, eps0 in [0.1, 5], n <= 12: no upper below exact, no lower above it."""
    checked, violations = _campaign([3, 4, 5, 10], [0.1, 0.5, 1.0, 2.0, 3.5, 5.0], [2, 3, 5, 8, 12], SMALL)
    print(f"campaign: {checked} comparisons, {violations} violations")
    assert violations == 0


@pytest.mark.slow
def test_math_cross_check_large():
    """MATH 10: k = 10, eps0 = 1, n = 1e4, delta = 1e-6: upper 0.0232533, lower 0.0232526 (printed rounding)."""
    up = bl.blanket_epsilon(1.0, 10, 1e4, 1e-6)
    lo = bl.blanket_lower_epsilon(1.0, 10, 1e4, 1e-6)
    assert int(up.status) == Status.CONVERGED
    assert round(float(up.upper), 7) == 0.0232533
    assert round(float(lo.lower), 7) == 0.0232526
    assert float(lo.lower) <= float(up.upper)


@pytest.mark.slow
def test_gradients_match_finite_differences():
    """Implicit gradients of ``upper`` in eps0 and delta (custom_root) vs central differences."""
    plan = bl.plan_blanket(1.0, 10, 1e3, 1e-4)

    def up(e0, d):
        return bl.blanket_epsilon_with_plan(jnp.atleast_1d(e0), jnp.array([10.0]), jnp.array([1e3]), jnp.atleast_1d(d),
                                            plan=plan, rtol=1e-10, max_iter=60).upper[0]

    g0, gd = jax.grad(up, argnums=(0, 1))(1.0, 1e-4)
    h = 1e-4
    fd0 = (up(1.0 + h, 1e-4) - up(1.0 - h, 1e-4)) / (2 * h)
    fdd = (up(1.0, 1e-4 * (1 + h)) - up(1.0, 1e-4 * (1 - h))) / (2 * h * 1e-4)
    assert abs(g0 - fd0) <= 1e-3 * abs(fd0)
    assert abs(gd - fdd) <= 1e-3 * abs(fdd)


def _xla_temp_bytes(plan: bl.BlanketPlan, lanes: int) -> int:
    """Temporary bytes XLA's memory analysis gives for the compiled k-RR search of ``lanes`` lanes."""
    x = jnp.ones(lanes)
    code = jnp.zeros(lanes, dtype=jnp.int32)
    compiled = bl.coded_brackets.lower(x, 3.0 * x, 1e4 * x, 1e-6 * x, code, plan=plan, rtol=1e-6,
                                        max_iter=40).compile()
    return int(compiled.memory_analysis().temp_size_in_bytes)


def _xla_temp_bytes_matrix(plan: bl.BlanketPlan, lanes: int) -> int:
    """The same for the general-matrix engine's search (blanket_matrix._brackets), 8 categories."""
    from jaxshuffle import blanket_matrix as bm
    w = jnp.full((lanes, 8), 0.125)
    v = jnp.zeros((lanes, 2))
    x = jnp.ones(lanes)
    compiled = bm._brackets.lower(w, w, -w, v, v, x, x, x > 0, jnp.float64(1e4), jnp.float64(1e-6),
                                  plan=plan).compile()
    return int(compiled.memory_analysis().temp_size_in_bytes)


@pytest.mark.slow
def test_lane_memory_model_bounds_xla():
    """lanes_per_batch(plan) * lane_bytes(plan) bounds what XLA allocates for one batch of the search: the
    general-matrix program at the plan where its margin was smallest (XLA 249 MB, model 319 MB), the k-RR
    program at twice the cells (the model is linear in chunk x block x lines). One compile each (~25 s on
    2 cores). XLA's own numbers, not RSS, so the test does not depend on the allocator."""
    cases = ((_xla_temp_bytes_matrix, bl.BlanketPlan(window=1024, block=64, lines=16, max_step=8, chunk=8)),
             (_xla_temp_bytes, bl.BlanketPlan(window=1024, block=64, lines=64, max_step=8, chunk=4)))
    for measure, plan in cases:
        lanes = bl.lanes_per_batch(plan)
        measured = measure(plan, lanes)
        model = lanes * bl.lane_bytes(plan)
        print(measure.__name__, plan, "lanes", lanes, "XLA temp MB", measured / 2**20, "model MB", model / 2**20)
        assert measured <= model
        assert measured >= 0.25 * model  # the model is not vacuous either


def test_memory_budget_cuts_chunk_then_lanes_then_refuses():
    """fit_memory halves chunk until LANES_PER_BATCH lanes fit; lanes_per_batch then halves lanes;
    a lane over the budget alone is refused naming n (ValueError, before any allocation)."""
    plan = bl.BlanketPlan(window=1 << 16, block=64, lines=512, max_step=8, chunk=8)
    budget = 8 * bl.lane_bytes(plan._replace(chunk=2))
    fitted = bl.fit_memory(plan, 1e6, memory=budget)
    assert fitted.chunk == 2 and bl.lanes_per_batch(fitted, memory=budget) == bl.LANES_PER_BATCH
    one = bl.lane_bytes(plan._replace(chunk=1))
    assert bl.fit_memory(plan, 1e6, memory=2 * one).chunk == 1
    assert bl.lanes_per_batch(plan._replace(chunk=1), memory=2 * one) == 2
    with pytest.raises(bl.BlanketMemoryError, match=r"n: the blanket bound at n = 1e\+06 needs about"):
        bl.fit_memory(plan, 1e6, memory=0.5 * one)


def test_amplify_falls_back_when_the_blanket_plan_is_over_budget(monkeypatch):
    """A k-RR point whose blanket plan exceeds the budget keeps the worst-case pair's bound (amplify), or
    is refused by name when the blanket bound is asked for alone (upper_from='blanket')."""
    import jaxshuffle.plan as plan_mod
    from jaxshuffle.accountant.amplify import UpperSource, amplify
    from jaxshuffle.randomizers import grr
    monkeypatch.setattr(plan_mod, "DEFAULT_MEMORY_BYTES", 1 << 10)
    rep = amplify(grr(1.0, 10), 1e4, 1e-6)
    assert int(rep.upper_source) != UpperSource.BLANKET and float(rep.upper) == float(rep.worst_case)
    assert not np.isfinite(float(rep.blanket))
    with pytest.raises(ValueError, match="n: the blanket bound at n = 10000 needs"):
        amplify(grr(1.0, 10), 1e4, 1e-6, upper_from="blanket")


def _plan_cells(plan) -> float:
    """A plan's cells times its walk's length per cell: the outward walk's steps where the plan has one."""
    return plan.window * (plan.lines + 1) * (1.0 + (plan.walk or plan.max_step) / 1024.0)


@settings(derandomize=True, deadline=None, max_examples=30)
@given(eps0=st.floats(0.0, 12.0), k=st.sampled_from([2, 3, 10, 100]), n=st.sampled_from([300, 1e4, 1e6, 1e9]),
       delta=st.sampled_from([1e-4, 1e-8]))
def test_point_cells_is_the_cost_of_the_plans_amplify_runs(eps0, k, n, delta):
    """The cost model prices the plans the searches really get: one kind, plan_blanket's; the four
    k-RR forms, krr_bounds' merged plan (whose product of maxima can far exceed the blanket lane's)."""
    assert bl.point_cells(eps0, k, n, delta) == pytest.approx(_plan_cells(bl.plan_blanket(eps0, k, n, delta)))
    merged = bl.point_cells(eps0, k, n, delta, kinds=("blanket",) + bl.LOWER_KINDS)
    assert merged == pytest.approx(_plan_cells(bl.plan_krr_bounds(eps0, k, n, delta)))
    assert merged >= bl.point_cells(eps0, k, n, delta) * (1 - 1e-12)


@settings(derandomize=True, deadline=None, max_examples=20)
@given(eps0=st.lists(st.floats(0.0, 20.0), min_size=1, max_size=5), n=st.sampled_from([1.0, 300.0, 1e4, 1e8]),
       k=st.sampled_from([2.0, 3.0, 10.0]), kind=st.sampled_from(["blanket", "all_x0", "all_z"]))
def test_remembered_plan_numbers_are_the_computed_ones(eps0, n, k, kind):
    """The planner's memo returns what the planner computes, read-only (a caller cannot corrupt it), and
    a batch over PLAN_MEMO_MAX_POINTS is computed, not remembered."""
    from jaxshuffle.blanket import plan as bp
    e = np.array(eps0)
    args = (e, np.full_like(e, max(k, 3.0) if kind == "all_z" else k), np.full_like(e, n), np.full_like(e, 1e-6))
    first, again = bp._plan_numbers(*args, kind, 64), bp._plan_numbers(*args, kind, 64)
    fresh = bp._plan_numbers_uncached(*args, kind, 64)
    assert all(np.array_equal(a, b) and np.array_equal(a, c) for a, b, c in zip(first, again, fresh))
    with pytest.raises(ValueError):
        first[0][...] = 0.0
    big = tuple(np.resize(a, bp.PLAN_MEMO_MAX_POINTS + 1) for a in args)
    bp._PLAN_MEMO.clear()
    bp._plan_numbers(*big, kind, 64)
    assert not bp._PLAN_MEMO


@settings(derandomize=True, deadline=None, max_examples=15)
@given(eps0=st.lists(st.floats(0.2, 12.0), min_size=1, max_size=6), n=st.lists(st.sampled_from([300, 1e4, 1e6, 1e8]),
       min_size=1, max_size=4), k=st.sampled_from([2, 3, 10]), four=st.booleans())
def test_plan_groups_bound_the_cost_of_shared_plans(eps0, n, k, four):
    """Points that share a plan pay its window x lines x step on every lane: plan_groups splits a batch
    so that each group's real plan (plan_blanket, or krr_bounds' merged plan), times its points, costs at
    most GROUP_SLACK times the points' own plans (or GROUP_FREE_CELLS in all, where a second program
    would cost more than the work it saves); every point is in exactly one group. The grid eps0 in
    {0.5, 1, 2, 4, 8} x n in {1e4, 1e6, 1e8} under one plan costs over 100x its points' own plans."""
    kinds = ("blanket",) + bl.LOWER_KINDS if four else ("blanket",)
    e, nn = (x.ravel() for x in np.meshgrid(np.array(eps0), np.array(n, dtype=float)))
    groups = bl.plan_groups(e, k, nn, 1e-6, kinds=kinds)
    assert np.array_equal(np.sort(np.concatenate(groups)), np.arange(e.size))
    for ix in groups:
        plan = (bl.plan_krr_bounds if four else bl.plan_blanket)(e[ix], k, nn[ix], 1e-6)
        own = bl.point_cells(e[ix], k, nn[ix], 1e-6, kinds=kinds)
        assert len(ix) * _plan_cells(plan) <= max(bl.GROUP_SLACK * own.sum() * (1 + 1e-12), bl.GROUP_FREE_CELLS)
    e, nn = (x.ravel() for x in np.meshgrid([0.5, 1, 2, 4, 8], [1e4, 1e6, 1e8]))
    kinds = ("blanket",) + bl.LOWER_KINDS
    assert e.size * _plan_cells(bl.plan_krr_bounds(e, 10, nn, 1e-6)) > 100 * bl.point_cells(e, 10, nn, 1e-6,
                                                                                            kinds=kinds).sum()


@pytest.mark.slow
def test_a_batch_split_into_groups_gives_each_point_its_own_plans_values(monkeypatch):
    """Two points whose own plans differ (window 1024, 16 lines, step 7; window 256, 48 lines, step 153)
    form two groups once the free allowance is off (they are cheap: by default one program serves both),
    each run under its own plan, so the batch returns exactly what each point gets alone, in the inputs'
    order (a shared plan may move values within their certified bands)."""
    import jaxshuffle.blanket.plan as plan_mod
    monkeypatch.setattr(plan_mod, "GROUP_FREE_CELLS", 0.0)
    e, d = np.array([1.0, 5.0]), np.array([1e-6, 1e-8])
    assert sorted(int(g[0]) for g in bl.plan_groups(e, 10, 1e4, d)) == [0, 1]
    batch = bl.blanket_epsilon(e, 10, 1e4, d)
    for i in (0, 1):
        alone = bl.blanket_epsilon(e[i], 10, 1e4, d[i])
        assert all(float(np.asarray(b)[i]) == float(a) for b, a in zip(batch, alone))


def test_empty_batches_give_empty_results():
    """No points: empty arrays of the inputs' shape, no program (as jaxshuffle.epsilon), not an error from
    the planning of zero points."""
    kb = bl.krr_bounds(np.array([]), 10, 1e4, 1e-6)
    assert all(np.shape(x) == (0,) for x in kb) and kb.status.dtype == np.int8
    assert np.shape(bl.blanket_epsilon(np.zeros((0, 3)), 10, 1e4, 1e-6).upper) == (0, 3)
    assert np.shape(bl.blanket_lower_epsilon(np.array([]), 3, 1e4, 1e-6).lower) == (0,)


@pytest.mark.slow
def test_amplify_runs_the_exact_lower_lanes_only_within_the_cost_cap(monkeypatch):
    """Where the blanket lane is within AUTO_MAX_CELLS but the merged four-lane plan is not, amplify
    runs the blanket lane alone (its certified upper) and keeps the two-count lower bound, instead of
    running every lane at the merged plan's cost (eps0 = 10.24, k = 10, n = 1e10: minutes). A point
    within both caps in the same batch still gets krr_bounds' exact lower bound."""
    from jaxshuffle.accountant.amplify import UpperSource, amplify
    from jaxshuffle.randomizers import grr
    kinds = ("blanket",) + bl.LOWER_KINDS
    e, d = np.array([5.0, 1.0]), np.array([1e-8, 1e-6])
    alone, both = bl.point_cells(e, 10, 1e4, d), bl.point_cells(e, 10, 1e4, d, kinds=kinds)
    cap = 20000
    assert alone[0] <= cap < both[0] and both[1] <= cap  # 14418, 41600 and 17544 cells
    monkeypatch.setattr(bl, "AUTO_MAX_CELLS", cap)
    calls = []
    real = bl.krr_bounds
    monkeypatch.setattr(bl, "krr_bounds", lambda *a, **kw: calls.append(np.asarray(a[0]).copy()) or real(*a, **kw))
    rep = amplify(grr(e, 10), 1e4, d)
    two_count = amplify(grr(e, 10), 1e4, d, upper_from="worst-case")
    assert len(calls) == 1 and np.array_equal(calls[0], [1.0])
    src, up, low = (np.asarray(x) for x in (rep.upper_source, rep.upper, rep.lower))
    assert np.all(src == UpperSource.BLANKET)
    assert up[0] == float(bl.blanket_epsilon(5.0, 10, 1e4, 1e-8).upper) < float(np.asarray(two_count.upper)[0])
    assert low[0] == float(np.asarray(two_count.lower)[0])
    assert low[1] == max(float(bl.krr_bounds(1.0, 10, 1e4, 1e-6).lower), float(np.asarray(two_count.lower)[1]))


@pytest.mark.slow
def test_amplify_skips_the_blanket_above_its_cost_cap():
    """The automatic blanket source runs only points of bounded cost (plan.AUTO_MAX_CELLS; n = 1e10 at
    k = 10 would take minutes per point): in one batch, n = 1e4 gets the blanket bound and n = 1e10
    keeps the worst-case pair's, labelled so; the cost model grows with n."""
    from jaxshuffle.accountant.amplify import UpperSource, amplify
    from jaxshuffle.randomizers import grr
    cells = bl.point_cells(1.0, 10, np.array([1e4, 1e6, 1e8, 1e10]), 1e-6)
    assert np.all(np.diff(cells) > 0) and cells[2] <= bl.AUTO_MAX_CELLS < cells[3]
    # large eps0: a small window, but lines that move ~1e6 counts per step (a log-ratio walk that long
    # did not finish in 400 s); the outward walk's length follows C's spread instead, and the model
    # prices that walk: the point is within the cap, below a log-ratio walk's price
    big = bl.plan_blanket(20.0, 10, 1e6, 1e-8)
    assert 0 < big.walk < big.max_step
    assert bl.point_cells(20.0, 10, 1e6, 1e-8) <= bl.AUTO_MAX_CELLS < bl.plan_cells(big._replace(walk=0))
    rep = amplify(grr(1.0, 10), np.array([1e4, 1e10]), 1e-6)
    src, up, wc = (np.asarray(x) for x in (rep.upper_source, rep.upper, rep.worst_case))
    assert src[0] == UpperSource.BLANKET and up[0] < wc[0]
    assert src[1] != UpperSource.BLANKET and up[1] == wc[1] and not np.isfinite(np.asarray(rep.blanket)[1])


@settings(max_examples=120)
@given(nw=st.integers(0, 3000), p=st.sampled_from([0.0, 1e-22, 1e-12, 0.003, 0.3, 0.5, 0.77, 1 - 1e-9, 1.0]),
       lo_frac=st.floats(-0.05, 1.05), length=st.integers(-2, 64), M=st.sampled_from([8, 64, 256]))
def test_walk_sums_the_binomial_pmf_within_its_stated_error(nw, p, lo_frac, length, M):
    """The kernel's walk: sum of Bin(nw, p)'s pmf over [lo, hi] (hi - lo + 1 <= M) within its stated
    relative error plus the flush allowance, against the sum at 60 digits (mpmath), for intervals inside,
    across and outside the support, around the mode and deep in the tails, and p at 0, 1 (a level where a
    matrix's category has no mass: the capped log ratio gave 0 or inf there) and extremes (1e-22: a
    category of k-RR at eps0 = 50; Loader's pmf itself loses digits near 1e-300)."""
    import mpmath

    from jaxshuffle.engine.blanket import walks

    lo = math.floor(lo_frac * nw)
    hi = lo + min(length, M) - 1
    q = 1.0 - p
    total, rel, rem = walks.log_ratio_walk(jnp.float64(nw), jnp.float64(lo), jnp.float64(hi), jnp.float64(p),
                                           jnp.float64(q), M)
    assert float(rem) == 0.0  # it leaves no term out
    with mpmath.workdps(60):
        mp, mq = mpmath.mpf(p), mpmath.mpf(q)  # the float pair's own binomial, as the kernel's pmf uses it
        ref = mpmath.fsum(mpmath.binomial(nw, i) * mp ** i * mq ** (nw - i) for i in range(max(lo, 0), min(hi, nw) + 1))
    ref = float(ref)
    assert abs(float(total) - ref) <= float(rel) * ref + (M + 4) * 2.3e-308, (float(total), ref)


def _binomial_sum_60_digits(nw, p, lo, hi) -> float:
    import mpmath
    with mpmath.workdps(60):
        mp, mq = mpmath.mpf(p), mpmath.mpf(1.0 - p)  # the float pair's own binomial, as the kernel's pmf uses it
        return float(mpmath.fsum(mpmath.binomial(nw, i) * mp ** i * mq ** (nw - i)
                                 for i in range(max(lo, 0), min(hi, nw) + 1)))


@settings(max_examples=80)
@given(nw=st.integers(0, 3000), p=st.sampled_from([0.0, 1e-22, 1e-12, 0.003, 0.3, 0.5, 0.77, 1 - 1e-9, 1.0]),
       lo_frac=st.floats(-0.05, 1.05), length=st.integers(-2, 3100), S=st.sampled_from([1, 2, 3, 8, 64, 256]))
def test_outward_walk_sums_the_binomial_pmf_within_its_stated_error(nw, p, lo_frac, length, S):
    """The outward walk (docs/math.md section 10, "Recurrences along lines"): the sum of Bin(nw, p)'s pmf over
    [lo, hi] of any length lies within its stated relative error plus its charged remainder, against the sum
    at 60 digits, for walks too short to reach the ends (S = 1: the geometric bound does all the work) and
    long enough, intervals inside, across and outside the support, and p at 0, 1 and extremes."""
    from jaxshuffle.engine.blanket import walks

    lo = math.floor(lo_frac * nw)
    hi = lo + length - 1
    total, rel, rem = (float(x) for x in walks.outward_walk(
        jnp.float64(nw), jnp.float64(lo), jnp.float64(hi), jnp.float64(p), jnp.float64(1.0 - p), S))
    ref = _binomial_sum_60_digits(nw, p, lo, hi)
    assert total * (1.0 - rel) <= ref <= total * (1.0 + rel) + rem, (total, ref, rel, rem)


@settings(derandomize=True, deadline=None, max_examples=30)
@given(nw=st.sampled_from([1, 40, 3000, 10**5, 10**7, 10**10]), p=st.floats(1e-9, 1.0 - 1e-9),
       lo_frac=st.floats(-0.5, 1.5), width=st.floats(0.0, 80.0))
def test_the_planned_outward_walk_leaves_out_nothing_that_matters(nw, p, lo_frac, width):
    """At the planner's length (walk_steps of the binomial's standard deviation) the walk's charged
    remainder is negligible beside its sum: at most 1e-12 of it (or flush-sized), whether the interval
    holds the mode or lies in a tail, so the outward walk costs the band nothing (REL_ERR is 1e-10)."""
    from jaxshuffle.blanket import plan as bp
    from jaxshuffle.engine.blanket import walks

    sd = math.sqrt(nw * p * (1.0 - p))
    mean = nw * p
    lo = math.floor(mean + (lo_frac - 0.5) * 40.0 * (sd + 1.0))
    hi = lo + math.ceil(width * (sd + 1.0))
    S = int(bp.walk_steps(sd))
    total, _, rem = (float(x) for x in jax.jit(walks.outward_walk, static_argnums=5)(
        jnp.float64(nw), jnp.float64(lo), jnp.float64(hi), jnp.float64(p), jnp.float64(1.0 - p), S))
    assert rem <= 1e-12 * total + 1e-290, (S, total, rem)


@pytest.mark.slow
@settings(derandomize=True, deadline=None, max_examples=15)
@given(eps0=st.floats(0.1, 6.0), k=st.sampled_from([2, 3, 5, 10]), n=st.integers(1, 60),
       frac=st.floats(0.0, 1.0), kind=st.sampled_from(bl.KINDS))
def test_band_with_the_outward_walk_contains_enumeration(eps0, k, n, frac, kind):
    """The kernel with the outward walk (plan.walk > 0, max_step 1: no line move is refused) against
    enumeration: sound when the walk is too short to reach the ends (walk 2: the geometric remainders
    are charged), and as tight as the log-ratio walk's band when it is long enough (walk 64)."""
    if kind == "all_z" and k < 3:
        k = 3
    eps = frac * eps0
    ref = krr_delta(eps0, k, n, eps, kind)
    for walk in (2, 64):
        d = _div(jnp.float64(eps0), jnp.float64(k), jnp.float64(n), jnp.float64(eps), kind=kind,
                 plan=SMALL._replace(max_step=1, walk=walk))
        assert not bool(d.step_overflow)
        lo, up = float(d.lower), float(d.upper)
        assert lo - REF_REL * ref <= ref <= up + REF_REL * ref, (walk, lo, ref, up)
    _band_contains(d, ref)


@pytest.mark.slow
def test_both_walks_give_the_same_band_where_lines_move_far():
    """eps0 = 8, k = 10, n = 1e4: lines move about e^8 = 2981 counts per step. The planner gives the
    outward walk (fewer steps than max_step); its bands at three eps overlap the log-ratio walk's
    (max_step steps) and are no wider than them (within 1e-9 relative)."""
    plan = bl.plan_blanket(8.0, 10, 1e4, 1e-6)
    assert 0 < plan.walk < plan.max_step
    classic = plan._replace(walk=0)
    for eps in (0.5, 2.0, 4.0):
        d_out = _div(jnp.float64(8.0), jnp.float64(10), jnp.float64(1e4), jnp.float64(eps), kind="blanket", plan=plan)
        d_log = _div(jnp.float64(8.0), jnp.float64(10), jnp.float64(1e4), jnp.float64(eps), kind="blanket",
                     plan=classic)
        assert not bool(d_log.step_overflow)
        lo_o, up_o, lo_l, up_l = (float(x) for x in (d_out.lower, d_out.upper, d_log.lower, d_log.upper))
        assert lo_o <= up_l and lo_l <= up_o, (eps, lo_o, up_o, lo_l, up_l)
        assert up_o - lo_o <= (up_l - lo_l) * (1 + 1e-9) + 1e-300, (eps, up_o - lo_o, up_l - lo_l)


@pytest.mark.parametrize("eps0, n, outward", [(8.0, 1e5, True), (8.0, 1e3, True), (12.0, 1e6, True),
                                              (0.5, 1e5, False), (2.0, 1e7, False)])
def test_the_planner_walks_outward_where_that_is_shorter(eps0, n, outward):
    """plan_blanket and krr_bounds' merged plan take the outward walk exactly where its length (walk_steps of
    the largest binomial spread, on the quarter-octave ladder) is below max_step: at large eps0, where lines
    move about e^eps0 counts per step while C's binomial spreads over sqrt(n pC qC); never at small eps0."""
    from jaxshuffle.blanket import plan as bp
    for plan, kinds in ((bl.plan_blanket(eps0, 10, n, 1e-6), ("blanket",)),
                        (bl.plan_krr_bounds(eps0, 10, n, 1e-6), ("blanket",) + bl.LOWER_KINDS)):
        spread = max(bp.plan_with_spread(eps0, 10, n, 1e-6, kind=kind)[1] for kind in kinds)
        assert (plan.walk > 0) == outward
        if outward:
            assert bp.walk_steps(spread) <= plan.walk < plan.max_step
            assert plan.walk == bl.quarter_octave(plan.walk)


@settings(derandomize=True, deadline=None, max_examples=60)
@given(width=st.floats(1.0, 3e6), block=st.sampled_from([8, 16, 32, 64]))
def test_window_ladder_covers_the_width_in_whole_chunks(width, block):
    """The blanket window (plan.window_ladder) holds at least the counts asked for, in whole blocks; below 32
    blocks a power of two (as before: few programs where compiling dominates), from 32 blocks a quarter octave,
    at most 25 % above the blocks needed (a power of two wasted up to half the cells) and a multiple of 8 blocks,
    so every chunk up to 8 divides it (a chunk that does not would trace the block body twice)."""
    from jaxshuffle.blanket import plan as bp
    w = float(bp.window_ladder(width, block))
    blocks = w / (2 * block)
    needed = math.ceil(width / (2 * block))
    assert w >= width and blocks == int(blocks) and blocks >= needed
    if needed < bp.FINE_WINDOW_BLOCKS:
        assert blocks == 2 ** math.ceil(math.log2(needed))
    else:
        assert blocks % 8 == 0 and blocks <= 1.25 * needed


@settings(derandomize=True, deadline=None, max_examples=25)
@given(eps0=st.floats(0.1, 10.0), k=st.sampled_from([2, 3, 10, 100]), n=st.sampled_from([2, 300, 1e5, 1e7, 1e9]))
def test_planned_windows_divide_into_chunks(eps0, k, n):
    """Every planned window (one kind or krr_bounds' merged plan) is whole chunks of whole blocks."""
    for plan in (bl.plan_blanket(eps0, k, n, 1e-6), bl.plan_krr_bounds(eps0, k, n, 1e-6)):
        assert plan.window % (2 * plan.block * plan.chunk) == 0, plan


@pytest.mark.slow
def test_a_window_off_the_power_of_two_ladder_contains_enumeration():
    """The kernel with a window of 3 blocks (48 counts, n up to 60) against enumeration: any window is sound
    (the s-mass outside is charged), and one that holds the mass is as tight as before."""
    plan = SMALL._replace(window=48, chunk=1)
    for eps0, k, n, frac, kind in [(1.0, 3, 40, 0.5, "blanket"), (2.5, 10, 60, 0.3, "all_z"),
                                   (0.7, 2, 25, 0.9, "all_x0"), (4.0, 5, 60, 0.1, "all_x0_mirror")]:
        eps = frac * eps0
        d = _div(jnp.float64(eps0), jnp.float64(k), jnp.float64(n), jnp.float64(eps), kind=kind, plan=plan)
        _band_contains(d, krr_delta(eps0, k, n, eps, kind))


@pytest.mark.slow
def test_lanes_are_padded_to_whole_batches(monkeypatch):
    """A lane count above one batch that is not a whole number of batches is padded with copies of the last
    lane (lax.map would trace the search twice: whole batches and the rest); the padding is dropped, and each
    lane's bracket is what the same program gives it without the padding lanes' company."""
    from jaxshuffle import _programs
    from jaxshuffle.engine.blanket import search as bs
    assert [bs.whole_batches(p, 8) for p in (1, 5, 8, 9, 12, 16, 17)] == [1, 5, 8, 16, 16, 16, 24]
    seen = []
    real = _programs.run

    def spy(name, fn, static, arrays, **kw):
        seen.append(np.shape(arrays[0]))
        return real(name, fn, static, arrays, **kw)

    monkeypatch.setattr(_programs, "run", spy)
    plan = SMALL._replace(chunk=4)
    P = bl.lanes_per_batch(plan) + 3
    e = np.linspace(0.5, 2.0, P)
    args = (e, np.full(P, 5.0), np.full(P, 30.0), np.full(P, 1e-3), np.zeros(P, np.int32))
    res = bs.eager_brackets(*args, plan=plan)
    assert seen == [(bs.whole_batches(P, bl.lanes_per_batch(plan)),)] and np.shape(res.upper) == (P,)
    padded = [np.concatenate([a, a[:1].repeat(seen[0][0] - P)]) for a in args]  # other padding, same lanes
    again = bs.eager_brackets(*padded, plan=plan)
    for a, b in zip(res, again):
        assert np.array_equal(np.asarray(a), np.asarray(b)[:P])


def _least(plan):
    """The least program shape for ``plan``'s block (bucket_plan's raise), derived from the constants."""
    return (2 * bl.BUCKET_BLOCKS * plan.block, bl.BUCKET_LINES, bl.BUCKET_STEP)


@settings(derandomize=True, deadline=None, max_examples=60)
@given(eps0=st.floats(0.1, 12.0), k=st.sampled_from([2, 3, 10, 100]), n=st.sampled_from([2, 40, 300, 1e4, 1e6, 1e8]),
       lanes=st.sampled_from([1, 2, 4, 8, 64]), four=st.booleans())
def test_bucket_plans_cover_the_points_plan_on_the_ladder(eps0, k, n, lanes, four):
    """bucket_plan never shrinks a plan (a larger window, more lines and longer walks cover at least what the
    plan covered: soundness never depends on it, only cost), puts lines, max step and walk on powers of two,
    keeps the window in whole chunks of whole blocks, and raises a plan to at least the least shape exactly
    where that shape's lanes cost at most BUCKET_FREE_CELLS."""
    plan = (bl.plan_krr_bounds if four else bl.plan_blanket)(eps0, k, n, 1e-6)
    b = bl.bucket_plan(plan, n, lanes)
    assert b.block == plan.block and b.window >= plan.window and b.lines >= plan.lines
    assert b.max_step >= plan.max_step and (b.walk == 0) == (plan.walk == 0) and b.walk >= plan.walk
    for v in (b.lines, b.max_step) + ((b.walk,) if b.walk else ()):
        assert v & (v - 1) == 0, b
    assert b.window % (2 * b.block * b.chunk) == 0, b
    window, lines, step = _least(plan)
    least = plan._replace(window=max(plan.window, window), lines=max(bl.power_of_two(plan.lines), lines),
                          max_step=max(bl.power_of_two(plan.max_step), step),
                          walk=max(bl.power_of_two(plan.walk), step) if plan.walk else 0)
    if lanes * _plan_cells(least) <= bl.BUCKET_FREE_CELLS:
        assert (b.window, b.lines, b.max_step, b.walk) == tuple(least[i] for i in (0, 2, 3, 5))
    else:
        assert (b.window, b.lines, b.max_step) == (plan.window, bl.power_of_two(plan.lines),
                                                   bl.power_of_two(plan.max_step))


def test_nearby_points_run_one_program(monkeypatch):
    """Single calls at eight eps0 (k = 10, n = 1e4, each a point's own small plan) run under as many
    programs as their bucketed plans are distinct, fewer than their own plans (the engine searches under
    the bucketed plan); cheap lane counts are padded to powers of two. The programs are replaced by a
    stand-in that records their static keys and lane counts."""
    from jaxshuffle import _programs
    from jaxshuffle.engine.blanket import search as bs

    seen = []

    def fake_run(name, fn, static, args):
        seen.append((static[0], np.shape(args[0])))
        return tuple(np.ones(np.shape(args[0])) for _ in range(4))

    monkeypatch.setattr(_programs, "run", fake_run)
    monkeypatch.setattr(bs, "_RECENT", {})
    eps0 = np.geomspace(0.5, 4.0, 8)
    for e in eps0:
        bl.krr_bounds(e, 10, 1e4, 1e-6)
    own = {bl.plan_krr_bounds(e, 10, 1e4, 1e-6) for e in eps0}
    bucketed = {bl.bucket_plan(p, 1e4, 4) for p in own}
    assert {plan for plan, _ in seen} == bucketed and len(bucketed) < len(own)
    assert {shape for _, shape in seen} == {(4,)}
    seen.clear()
    bl.blanket_epsilon(eps0[:3], 10, 1e4, 1e-6)  # 3 lanes of a cheap plan: padded to 4
    assert [shape for _, shape in seen] == [(4,)]
    assert [bs.whole_batches(3, 8, c) for c in (1.0, math.inf)] == [4, 3]
    assert [bs.whole_batches(p, 8, 1.0) for p in (1, 2, 5, 9)] == [2, 2, 8, 16]
    assert [bs.whole_batches(1, 1, 1.0), bs.whole_batches(1, 8, bl.BUCKET_FREE_CELLS / 1.5)] == [1, 1]
    assert [bs.whole_batches(5, 8, bl.BUCKET_FREE_CELLS / d) for d in (8, 7)] == [8, 5]


@pytest.mark.slow
def test_a_bucketed_plan_contains_enumeration():
    """Plans raised to the least shape (windows far wider than the support, more lines, longer walks)
    against enumeration, for each sum form: any plan is sound, and the raised one as tight."""
    for eps0, k, n, frac, kind in [(1.0, 3, 40, 0.5, "blanket"), (2.5, 10, 60, 0.3, "all_z"),
                                   (0.7, 2, 25, 0.9, "all_x0"), (4.0, 5, 60, 0.1, "all_x0_mirror")]:
        plan = bl.bucket_plan(bl.plan_blanket(eps0, max(k, 3) if kind == "all_z" else k, n, 1e-6, kind=kind), n, 1)
        assert plan.window == 2 * bl.BUCKET_BLOCKS * plan.block > n + 1 and plan.lines >= bl.BUCKET_LINES
        eps = frac * eps0
        d = _div(jnp.float64(eps0), jnp.float64(k), jnp.float64(n), jnp.float64(eps), kind=kind, plan=plan)
        _band_contains(d, krr_delta(eps0, k, n, eps, kind))
