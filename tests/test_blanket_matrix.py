"""General finite mechanisms: the blanket sum form (11.1) of a K x K' matrix (docs/math.md section 11).

References: the shuffled histogram enumerated exactly (``jaxshuffle.exact``) for every dataset of the
others (multisets of inputs), and (11.1) itself enumerated over the multinomial counts of its
categories (``_sum_form_delta``, numpy, from the definition). Counts of the cases checked are
asserted, so a test cannot pass vacuously.
"""

from __future__ import annotations

import importlib
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import gammaln

import jaxshuffle  # noqa: F401  (float64)
from jaxshuffle import blanket as bl
from jaxshuffle import blanket_matrix as bm
from jaxshuffle.engine.matrix import forms as matrix_forms
from jaxshuffle.exact import enumerate as exact
from jaxshuffle.exact.soundness import grr_matrix

# One plan for every small point below (n <= 5): one compiled program for all engine tests.
SMALL = bl.BlanketPlan(window=16, block=8, lines=16, max_step=16, chunk=1)


def _random_matrix(rng, K, Kp, zeros=True):
    R = rng.exponential(size=(K, Kp)) * (rng.random((K, Kp)) > (0.3 if zeros else -1.0))
    R[:, 0] += 1e-3 * (R.sum(axis=1) == 0)  # no empty row
    return R / R.sum(axis=1, keepdims=True)


def _sum_form_delta(w, c, n):
    """``(1/n) E[(sum_j c_j N_j)_+]``, ``N ~ Multinomial(n, w)`` (every count vector, exact log-factorials)."""
    w, c = np.asarray(w, float), np.asarray(c, float)
    total = 0.0
    for counts in itertools.product(range(n + 1), repeat=len(w) - 1):
        last = n - sum(counts)
        if last < 0:
            continue
        h = np.array(counts + (last,))
        if np.any((w == 0) & (h > 0)):
            continue
        x = float(np.dot(c, h))
        if x <= 0:
            continue
        lp = gammaln(n + 1) - np.sum(gammaln(h + 1)) + np.sum(np.where(h > 0, h * np.log(np.where(w > 0, w, 1)), 0))
        total += np.exp(lp) * x
    return total / n


def _form_delta(R, x0, x1, ref, n, t):
    """(11.1) from its definition: categories per column (no merging) plus the victim-only term."""
    live = ref > 0
    c = np.concatenate([(R[x0, live] - t * R[x1, live]) / ref[live], [0.0]])
    w = np.concatenate([ref[live], [max(0.0, 1.0 - ref[live].sum())]])
    return _sum_form_delta(w, c, n) + np.sum(np.maximum(R[x0, ~live] - t * R[x1, ~live], 0.0))


def _datasets(K, m):
    return list(itertools.combinations_with_replacement(range(K), m))


def test_sum_form_is_exact_for_datasets_and_bounds_every_dataset():
    """11.1-11.2: (11.1) with w = R(x*, .) is the exact divergence of "others all hold x*"; with
    w = omega it is >= the exact divergence of every dataset of the others (random matrices with zeros)."""
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(25):
        K, Kp = int(rng.integers(2, 5)), int(rng.integers(2, 5))
        R = _random_matrix(rng, K, Kp)
        n = int(rng.integers(1, 5))
        t = float(np.exp(rng.uniform(0.0, 1.5)))
        omega = R.min(axis=0)
        for x0, x1 in itertools.combinations(range(K), 2):  # exact: max of both directions = both orders
            up = max(_form_delta(R, x0, x1, omega, n, t), _form_delta(R, x1, x0, omega, n, t))
            for xs in range(K):
                ex = exact.delta_of_eps(R, x0, x1, [xs] * (n - 1), np.log(t))
                ours = max(_form_delta(R, x0, x1, R[xs], n, t), _form_delta(R, x1, x0, R[xs], n, t))
                assert abs(ours - ex) <= 1e-10 * max(ex, 1e-300) + 1e-15
            for others in _datasets(K, n - 1):
                ex = exact.delta_of_eps(R, x0, x1, list(others), np.log(t))
                assert ex <= up * (1 + 1e-10) + 1e-15, (R, x0, x1, others, ex, up)
                checked += 1
    assert checked > 150


@pytest.mark.slow
def test_victim_only_mass_is_needed():
    """MATH 11.2: R = [[1/2, 1/2, 0], [0, 1/2, 1/2]] has exact delta 1/2 at every eps; the victim-only term gives it."""
    R = np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    forms = bm.pair_forms(R)
    assert np.all(forms.v_inf == 0.5)
    for n in (1, 3):
        assert abs(_form_delta(R, 0, 1, R.min(axis=0), n, 5.0) - 0.5) <= 1e-15
        assert abs(exact.delta_of_eps(R, 0, 1, [0] * (n - 1), np.log(5.0)) - 0.5) <= 1e-12
    assert bm.matrix_bounds(R, 3, 0.1, plan=SMALL).upper == np.inf


@pytest.mark.slow
def test_coarsening_rounds_to_the_right_side():
    """11.3: coarsening more than four categories rounds E[(sum)_+] up (upper) or down (lower); exact at <= 4."""
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(40):
        C = int(rng.integers(3, 7))
        w = rng.dirichlet(np.ones(C))
        c = rng.normal(size=C)
        n = int(rng.integers(1, 5))
        ref = _sum_form_delta(w, c, n)
        for upper in (True, False):
            f = bm.coarsen(jnp.asarray(w), jnp.asarray(c), upper)
            probs = np.array([f.pS * f.pA, f.pS * f.qA, f.qS * f.pC, f.qS * f.qC], float)
            coef = np.array([f.a0, f.b0, f.c0, f.d0], float)
            got = _sum_form_delta(probs, coef, n)
            if C <= 4:
                assert abs(got - ref) <= 1e-12 * max(ref, 1e-300)
            elif upper:
                assert got >= ref * (1 - 1e-12)
            else:
                assert got <= ref * (1 + 1e-12)
            checked += 1
    assert checked == 80


def _check_engine(R, n, delta, counts):
    b = bm.matrix_bounds(R, n, delta, plan=SMALL)
    K = R.shape[0]
    worst = 0.0
    for x0, x1 in itertools.combinations(range(K), 2):  # exact.epsilon takes both directions
        for others in _datasets(K, n - 1):
            ex = exact.epsilon(R, x0, x1, list(others), delta)
            worst = max(worst, ex)
            assert ex <= b.upper * (1 + 1e-9) + 1e-12, (R, x0, x1, others, ex, b)
            counts["datasets"] += 1
    assert b.lower <= worst * (1 + 1e-9) + 1e-12, (R, b, worst)
    counts["mechanisms"] += 1
    return b, worst


@pytest.mark.slow
def test_engine_brackets_exact_on_random_matrices():
    """11.5: certified lower <= exact (worst dataset) and every dataset's exact eps <= certified upper."""
    rng = np.random.default_rng(2)
    counts = {"datasets": 0, "mechanisms": 0}
    for _ in range(6):
        K, Kp = int(rng.integers(2, 5)), int(rng.integers(2, 5))
        R = _random_matrix(rng, K, Kp, zeros=bool(rng.random() < 0.5))
        _check_engine(R, int(rng.integers(1, 6)), float(10 ** rng.uniform(-4, -1)), counts)
    print("random matrices checked:", counts)
    assert counts["mechanisms"] == 6 and counts["datasets"] > 60


@pytest.mark.slow
@settings(deadline=None, max_examples=10)
@given(seed=st.integers(0, 10 ** 6), n=st.integers(1, 5), log_delta=st.floats(-5, -1))
def test_engine_property(seed, n, log_delta):
    """Property (11.5): lower <= exact worst-dataset eps, and every dataset's eps <= upper (3 x 3 matrices)."""
    R = _random_matrix(np.random.default_rng(seed), 3, 3)
    _check_engine(R, n, 10 ** log_delta, {"datasets": 0, "mechanisms": 0})


@pytest.mark.slow
def test_search_keeps_certified_ends_and_converges():
    """11.5: the bracket search (ITP steps). On every lane of 8 random 3 x 4 matrices, both sides: the kept
    end is certified by a fresh evaluation (upper lanes: the certified upper value at ``hi`` is ``<= delta``;
    lower lanes: the certified lower value at ``lo`` exceeds it), and every lane converged to ``rtol``
    within ITP's worst case: the probes at eps_top and 0, then bisection's step count from ``[0, eps_max]``
    to that width, plus two (ITP's n0 = 1, and its tolerance is relative to half the first bracket's top).
    This small plan's certified values are not monotone near eps_max, where ITP falls back to bisection;
    the plans of ``plan_forms`` take 8-15 probes (docs/math.md 11.5)."""
    rng = np.random.default_rng(5)
    n, delta = 5.0, 1e-3
    forms = []
    for _ in range(8):
        R = _random_matrix(rng, 3, 4, zeros=False)
        forms.append(bm._lanes(bm.pair_forms(R, "blanket"), bm.pair_forms(R, "datasets")))
        assert len(forms[-1].w) == 6 + 18  # ordered pairs: blanket forms, and every x* for the datasets
    both = bm.PairForms(*(np.concatenate(x) for x in zip(*forms)))
    side = np.tile(np.arange(24) < 6, 8)
    _, eps_top = bm.plan_forms(both, n, delta)
    lanes = [jnp.asarray(a) for a in (both.w, both.a0, both.a1, both.v0, both.v1)]
    lo, hi, it = (np.asarray(x) for x in bm._brackets(
        *lanes, *(jnp.asarray(a) for a in (both.eps_max, eps_top, side)), jnp.float64(n), jnp.float64(delta),
        plan=SMALL))
    value = jax.jit(jax.vmap(bm.form_divergence, in_axes=(0, 0, 0, 0, 0, None, 0, None, 0)), static_argnums=7)
    end = np.where(side, hi, lo)
    v = np.asarray(value(*lanes, jnp.float64(n), jnp.asarray(end), SMALL, jnp.asarray(side)))
    at_max = hi >= both.eps_max  # eps_max itself is certified analytically (v_inf, compared by the caller)
    assert np.all(v[side & ~at_max] <= delta)
    assert np.all(v[~side & (lo > 0)] > delta)
    assert np.all((0 <= lo) & (lo <= hi) & (hi - lo <= bm.SEARCH_RTOL * hi))
    bisection = np.ceil(np.log2(both.eps_max / (bm.SEARCH_RTOL * np.where(hi > 0, hi, 1.0))))
    assert np.all(it <= 2 + bisection + 2), (it, bisection)
    assert (side & ~at_max).sum() >= 8 and (~side & (lo > 0)).sum() >= 8
    print("steps per lane:", np.bincount(it))


@pytest.mark.slow
def test_krr_through_the_general_path():
    """11.5: k-RR's matrix through the general engine agrees with krr_bounds within the certified bands;
    MATH 10's cross-check (n = 2, k = 3, eps0 = 1, delta = 0.01: 0.9694082, the exact value)."""
    b = bm.matrix_bounds(np.asarray(grr_matrix(3, 1.0)), 2, 0.01, plan=SMALL)
    assert b.exact_kernel
    assert b.lower <= 0.96940824 <= b.upper and b.upper - b.lower <= 1e-6
    k = bl.krr_bounds(1.0, 3, 2, 0.01, plan=bl.BlanketPlan(window=16, block=8, lines=16, max_step=16, chunk=1))
    assert b.lower <= float(k.upper) * (1 + 1e-6) and float(k.lower) <= b.upper * (1 + 1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="matrix: rows must sum to 1"):
        bm.matrix_bounds([[0.5, 0.4], [0.5, 0.5]], 3, 0.1)
    with pytest.raises(ValueError, match="matrix: must be a 2-D"):
        bm.matrix_bounds([0.5, 0.5], 3, 0.1)
    with pytest.raises(ValueError, match="n: must be an integer"):
        bm.matrix_bounds([[0.5, 0.5], [0.2, 0.8]], 2.5, 0.1)
    with pytest.raises(ValueError, match="delta: must lie in"):
        bm.matrix_bounds([[0.5, 0.5], [0.2, 0.8]], 3, 1.5)
    with pytest.raises(ValueError, match="reference: must be"):
        bm.pair_forms([[0.5, 0.5], [0.2, 0.8]], "other")


@pytest.mark.slow
def test_amplify_uses_the_matrix_blanket_for_catalog_rows():
    """11.6: the subset-selection row carries its matrix point by point (RowMatrix); amplify's upper is
    min(stronger clone, blanket), its lower the exact datasets' bound, exact enumeration (n = 5, every
    dataset) lies between, and the values are those of the same matrix attached by hand (with_matrix)."""
    from jaxshuffle import randomizers as RZ
    from jaxshuffle.accountant.amplify import UpperSource, amplify
    from jaxshuffle.randomizers import catalog
    row = catalog.build("subset-selection", eps0=1.0, d=4, k=2)
    assert isinstance(row.mechanism, RZ.RowMatrix) and row.mechanism.builder == "subset-selection"
    vr = RZ.with_matrix(RZ.subset_selection(1.0, 4, 2), RZ.subset_selection_matrix(1.0, 4, 2))
    R = np.asarray(vr.mechanism.matrix)
    assert R.shape == (4, 6) and np.allclose(R.sum(axis=1), 1.0)
    rep, by_hand = amplify(row, 5, 0.05), amplify(vr, 5, 0.05)
    print("subset selection d=4 k=2 n=5 delta=0.05: clone", float(rep.worst_case), "blanket", float(rep.blanket))
    assert all(float(getattr(rep, f)) == float(getattr(by_hand, f)) for f in ("upper", "blanket", "lower"))
    assert float(rep.upper) == min(float(rep.worst_case), float(rep.blanket))
    assert (int(rep.upper_source) == UpperSource.BLANKET) == (float(rep.blanket) < float(rep.worst_case))
    assert np.isfinite(float(rep.blanket))  # at n = 5 the blanket (0.567) is below the clone (0.726)
    worst = max(exact.epsilon(R, 0, 1, list(o), 0.05) for o in _datasets(4, 4))
    assert float(rep.lower) <= worst * (1 + 1e-9) <= float(rep.upper) * (1 + 1e-9)
    assert catalog.build("metric-exponential", d01=0.5, d02=2.0, d12=2.0).mechanism is None
    # Hadamard response K = 8 (7 inputs), n = 3: every dataset of the 2 others
    hr = catalog.build("hadamard-response", eps0=1.0, K=8, s=4)
    H = RZ.hadamard_response_matrix(1.0, 8)
    rep = amplify(hr, 3, 0.05)
    exacts = [exact.epsilon(H, 0, 1, list(o), 0.05) for o in _datasets(7, 2)]
    assert len(exacts) == 28 and np.isfinite(float(rep.blanket))
    assert float(rep.lower) <= max(exacts) * (1 + 1e-9) <= float(rep.upper) * (1 + 1e-9)


def test_catalog_rows_build_their_matrices_point_by_point():
    """row_matrix gives the builders' own matrices (bit for bit) at each point of a batch, and None
    where the row does not cover the point: Hadamard B = 2 or s != K/2, eps0 > 50, a matrix above
    ROW_MATRIX_MAX_WORK, and an invalid point (NaN options, under jit too)."""
    from jaxshuffle import randomizers as RZ
    from jaxshuffle.randomizers import matrices as MX
    ss = RZ.subset_selection(jnp.array([0.5, 2.0]), 10, jnp.array([[3.0], [1.0]]))  # (2, 2) batch
    opts = [np.broadcast_to(np.asarray(o), (2, 2)) for o in ss.mechanism.options]
    for i, j in itertools.product(range(2), range(2)):
        M = RZ.row_matrix("subset-selection", *(o[i, j] for o in opts))
        assert np.array_equal(M, RZ.subset_selection_matrix([0.5, 2.0][j], 10, [3, 1][i]))
    hr = RZ.hadamard_response(1.0, 16, 8, 1).mechanism
    assert np.array_equal(RZ.row_matrix("hadamard-response", *hr.options), RZ.hadamard_response_matrix(1.0, 16))
    for eps0, K, s, B in ((1.0, 16, 4, 2), (1.0, 16, 4, 1), (51.0, 16, 8, 1), (1.0, 128, 64, 1)):
        assert RZ.row_matrix("hadamard-response", *RZ.hadamard_response(eps0, K, s, B).mechanism.options) is None
    assert 12 * 11 * 924 <= MX.ROW_MATRIX_MAX_WORK < 14 * 13 * 3432  # 6-subsets of 12 built, 7 of 14 not
    assert RZ.row_matrix("subset-selection", 1.0, 14, 7) is None
    assert RZ.row_matrix("subset-selection", 1.0, 12, 6) is not None
    for builder, opts in (("subset-selection", (1.0, 14, 7)), ("subset-selection", (1.0, 12, 6)),
                          ("binary-rr", (1.0, 11)), ("binary-rr", (1.0, 12)), ("hadamard-response", (1.0, 64, 32, 1)),
                          ("subset-selection", (1.0, 1e6, 5e5)), ("binary-rr", (1.0, 1e6))):  # the last two: no matrix
        assert MX.row_covers(builder, *opts) == (RZ.row_matrix(builder, *opts) is not None)
    traced = jax.jit(lambda e, k: RZ.subset_selection(e, 10, k))(jnp.array([1.0, 1.0]), jnp.array([3.0, 10.0]))
    opts = [np.asarray(o) for o in traced.mechanism.options]
    assert RZ.row_matrix("subset-selection", *(o[0] for o in opts)) is not None
    assert np.isnan(opts[0][1]) and RZ.row_matrix("subset-selection", *(o[1] for o in opts)) is None  # k = d


@settings(deadline=None, max_examples=50)
@given(seed=st.integers(0, 10 ** 6), upper=st.booleans())
def test_snap_merges_float_noise_on_the_side_of_the_bound(seed, upper):
    """_snap moves every value only up (upper) or only down, by at most a relative 2^-40 per merged
    neighbour, makes values within SNAP_REL of each other equal, and leaves well-separated values alone."""
    rng = np.random.default_rng(seed)
    base = rng.choice([-2.5, -1.0, 0.0, 1.0, np.e], size=12)
    noisy = base * (1.0 + rng.integers(-4, 5, size=12) * 2.0 ** -52)
    out = matrix_forms._snap(noisy, upper)
    assert np.all(out >= noisy) if upper else np.all(out <= noisy)
    assert np.all(np.abs(out - noisy) <= 1e-14 * np.abs(noisy))
    for b in np.unique(base):  # each true value ends as one float
        assert len(np.unique(out[base == b])) == 1
    apart = np.array([1.0, 1.0 + 1e-9, 2.0])
    assert np.array_equal(matrix_forms._snap(apart, upper), apart)


@pytest.mark.slow
def test_binary_rr_forms_merge_to_five_categories_and_stay_sound():
    """Binary RR's entries agree only up to ulps (e^eps0 as 2.7182818284590455 and ...046): unsnapped, a
    pair's blanket form has 8 categories, snapped 5 (the 4 bit patterns of (y_x0, y_x1) and the null
    one). The catalog row (which now carries the matrix) is bracketed by exact enumeration: d = 3, n = 3,
    every dataset of the 2 others."""
    from jaxshuffle import randomizers as RZ
    from jaxshuffle.accountant.amplify import amplify
    R = RZ.binary_rr_matrix(1.0, 4)
    omega = R.min(axis=0)
    raw = {(a, b) for a, b in zip(R[0] / omega, R[1] / omega)}
    assert len(raw) > 4 and bm.pair_forms(R).w.shape == (1, 5)
    R3 = RZ.binary_rr_matrix(1.0, 3)
    rep = amplify(RZ.binary_rr(1.0, 3), 3, 0.05)
    exacts = [exact.epsilon(R3, 0, 1, list(o), 0.05) for o in _datasets(3, 2)]
    assert len(exacts) == 6 and np.isfinite(float(rep.blanket))
    assert float(rep.lower) <= max(exacts) * (1 + 1e-9) <= float(rep.upper) * (1 + 1e-9)


def test_amplify_keeps_the_two_count_bound_where_a_row_builds_no_matrix():
    """Hadamard response with B = 2 carries the row's descriptor but no matrix: amplify's default keeps
    the two-count values (no blanket value, source not blanket); asking for the blanket source names
    upper_from and the points the row covers; calibration refuses it and probes the two-count bound."""
    from jaxshuffle import randomizers as RZ
    from jaxshuffle.accountant import calibrate
    from jaxshuffle.accountant.amplify import UpperSource, amplify
    vr = RZ.hadamard_response(1.0, 16, 4, 2)
    # a process's first call of a program shape may run its quick program, which may differ from the
    # optimised one by a few ulps (jaxshuffle._programs): that call is made here, so both compared run the same
    amplify(vr, 100, 1e-6, upper_from="worst-case")
    rep, two_count = amplify(vr, 100, 1e-6), amplify(vr, 100, 1e-6, upper_from="worst-case")
    assert float(rep.upper) == float(two_count.upper) and int(rep.upper_source) != UpperSource.BLANKET
    assert not np.isfinite(float(rep.blanket))
    with pytest.raises(ValueError, match=r"upper_from: 'blanket'.*B = 1, s = K/2"):
        amplify(vr, 100, 1e-6, upper_from="blanket")
    with pytest.raises(ValueError, match="upper_from: 'blanket' calibration covers k-ary RR"):
        calibrate.calibrate_eps0("subset-selection", 0.5, 100, 1e-6, d=10, k=3, upper_from="blanket")
    assert calibrate._probed_source(RZ.subset_selection(1.0, 10, 3), "best") == "worst-case"
    assert calibrate._probed_source(RZ.grr(1.0, 10), "best") == "best"


@pytest.mark.slow
def test_amplify_skips_the_matrix_engine_above_its_cost_cap():
    """Hadamard response K = 8: with the exact datasets' forms, n = 1e5 would take the matrix engine over
    a minute (matrix_cells about 16 times MATRIX_AUTO_MAX_CELLS); its blanket forms alone, under their
    own plan, are within the cap there and at n = 1e6 are not: amplify keeps the worst-case pair's bound
    at n = 1e6, labelled so, without running it. k-RR's 10 x 10 matrix at n = 1e4 and n = 1e5 is under
    the cap with both sides."""
    from jaxshuffle import randomizers as R
    from jaxshuffle.accountant.amplify import UpperSource, amplify
    M, cap = R.hadamard_response_matrix(1.0, 8), bm.MATRIX_AUTO_MAX_CELLS
    assert bm.matrix_cells(M, 1e5, 1e-6) > 10 * cap >= cap >= bm.matrix_cells(grr_matrix(10, 1.0), 1e5, 1e-6)
    assert bm.matrix_cells(M, 1e5, 1e-6, lower=False) <= cap < bm.matrix_cells(M, 1e6, 1e-6, lower=False)
    assert bm.matrix_cells(grr_matrix(10, 1.0), 1e4, 1e-6) < bm.matrix_cells(grr_matrix(10, 1.0), 1e5, 1e-6)
    rep = amplify(R.with_matrix(R.hadamard_response(1.0, 8, 4), M), 1e6, 1e-6)
    assert int(rep.upper_source) != UpperSource.BLANKET and float(rep.upper) == float(rep.worst_case)
    assert not np.isfinite(float(rep.blanket))


@pytest.mark.slow
def test_amplify_runs_the_matrix_upper_alone_where_the_datasets_cost_too_much(monkeypatch):
    """Hadamard response K = 8 at n = 1e3: the blanket forms alone cost 1.3e5 cells, with the exact
    datasets' forms 2.7e5. With the cap between the two, amplify runs the upper forms alone (the value
    of matrix_bounds(..., lower=False)) and keeps the two-count lower bound. Each plan is made once: the
    search runs on the plan that was priced (matrix_cells and matrix_bounds planned it again)."""
    from jaxshuffle import randomizers as R
    from jaxshuffle.accountant.amplify import amplify
    mechanism_module = importlib.import_module("jaxshuffle.accountant.mechanism")
    M = R.hadamard_response_matrix(1.0, 8)
    alone, both = bm.matrix_cells(M, 1e3, 1e-6, lower=False), bm.matrix_cells(M, 1e3, 1e-6)
    assert alone < 2e5 < both
    monkeypatch.setattr(bm, "MATRIX_AUTO_MAX_CELLS", 2e5)
    vr = R.with_matrix(R.hadamard_response(1.0, 8, 4), M)
    monkeypatch.setattr(mechanism_module, "_MATRIX_POINTS", {})  # nothing remembered from other tests
    plans = []
    real = bm.plan_forms
    monkeypatch.setattr(bm, "plan_forms", lambda *a, **kw: plans.append(len(a[0].w)) or real(*a, **kw))
    rep = amplify(vr, 1e3, 1e-6)
    assert len(plans) == 2 and plans[0] > plans[1]  # each side planned once: priced, then searched on that plan
    two_count = amplify(vr, 1e3, 1e-6, upper_from="worst-case")
    assert float(rep.blanket) == bm.matrix_bounds(M, 1e3, 1e-6, lower=False).upper
    assert float(rep.upper) == min(float(rep.blanket), float(two_count.upper))
    assert float(rep.lower) == float(two_count.lower)


@pytest.mark.slow
def test_matrix_bounds_report_their_search_status():
    """The matrix engine's statuses come from each search's own bracket, and amplify passes them on."""
    import jaxshuffle as js
    import jaxshuffle.randomizers as R
    from jaxshuffle.accountant import UpperSource
    from jaxshuffle.search import Status

    st = bm._lane_status(np.array([1.0, 1.0, np.inf, 0.0]), np.array([1.0 - 1e-10, 0.5, 0.0, 0.0]),
                         np.array([1.0, 1.0, np.inf, 0.0]), Status.UNBOUNDED)
    assert [Status(int(x)) for x in st] == [Status.CONVERGED, Status.MAX_ITER, Status.UNBOUNDED, Status.ZERO]
    M = np.asarray(grr_matrix(3, 1.0))
    b = bm.matrix_bounds(M, 5, 1e-3)
    assert b.status == Status.CONVERGED and b.status_lower == Status.CONVERGED
    rep = js.amplify(R.with_matrix(R.grr(1.0, 3), M), 5, 1e-3)
    if int(rep.upper_source) == UpperSource.BLANKET:
        assert int(rep.status) == b.status
    assert int(rep.status_lower) in (Status.CONVERGED, Status.MAX_ITER)
