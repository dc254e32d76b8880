"""Pair constructors: docs/math.md section 1's table, certification flags, validation."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxshuffle as js
import jaxshuffle.randomizers as R


def fields(pair):
    return np.array([float(x) for x in pair.arrays()])


def test_vr_pair_matches_the_table():
    p, beta, q = 3.0, 0.3, 2.0
    a = beta / (p - 1)
    np.testing.assert_allclose(fields(js.vr_pair(p, beta, q)), [p * a, a, 1 - (p + 1) * a, a * p / q, a * p / q],
                               rtol=1e-15)
    pair = js.vr_pair(p, beta, q0=1.0, q1=p)
    np.testing.assert_allclose(fields(pair), [p * a, a, 1 - (p + 1) * a, a * p, a], rtol=1e-15)
    assert pair.bound == "lower" and not bool(pair.certified)


def test_clone_pairs_and_worst_case_beta_are_certified():
    e0 = 1.3
    p = math.exp(e0)
    strong = js.stronger_clone_pair(e0)
    np.testing.assert_allclose(fields(strong), [p / (p + 1), 1 / (p + 1), 0, 1 / (p + 1), 1 / (p + 1)], rtol=1e-15)
    np.testing.assert_allclose(fields(js.vr_pair(p, (p - 1) / (p + 1), p)), fields(strong), rtol=1e-14)
    assert bool(strong.certified) and bool(js.vr_pair(p, (p - 1) / (p + 1), p).certified)
    std = js.standard_clone_pair(e0)
    np.testing.assert_allclose(fields(std), [p / (p + 1), 1 / (p + 1), 0, 0.5 / p, 0.5 / p], rtol=1e-15)
    assert bool(std.certified)
    assert not bool(js.vr_pair(p, 0.9 * (p - 1) / (p + 1), p).certified)


def test_one_snap_rule_for_upper_and_lower_pairs():
    """A beta within 1e-12 (relative) of the worst case is the worst case, for both sides: w == 0 exactly."""
    p = math.e
    worst = (p - 1) / (p + 1)
    for pair in (js.vr_pair(p, worst * (1 - 1e-14), p), js.vr_pair(p, worst * (1 - 1e-14), q0=1.0, q1=p),
                 js.vr_pair(p, worst * (1 + 1e-14), q0=1.0, q1=p)):
        assert float(pair.w) == 0.0
        assert float(pair.u) == p / (p + 1) and float(pair.v) == 1 / (p + 1)
    # away from the worst case nothing is snapped, and w is the exact algebra's 1 - (p+1) alpha
    beta = 0.5 * worst
    assert float(js.vr_pair(p, beta, q0=1.0, q1=p).w) == pytest.approx(1 - (p + 1) * beta / (p - 1), rel=1e-14)


@pytest.mark.slow
def test_rounding_level_w_never_rejects_a_lower_pair():
    """Reproducers of the VR-algebra seam: w came out as -3.5e-17 and the lower pair was rejected."""
    eps0 = np.linspace(0.01, 8.0, 800)
    for lp in (R.grr_lower(eps0, 2), R.laplace_lower(eps0), R.local_hash_lower(eps0, 2),
               R.subset_selection_lower(eps0, 2, 1), R.grr_lower(eps0, 3)):
        pair = lp.pair()
        w = np.asarray(pair.w)
        assert np.all(w >= 0) and np.all(np.isfinite(w))
    rep = js.amplify(R.grr(3.0, 2), 1000, 1e-6, lower_params=R.grr_lower(3.0, 2))
    assert 0 < float(rep.lower) <= float(rep.upper)


def test_p_inf_rows():
    pair = js.vr_pair(np.inf, 0.4, 5.0)
    np.testing.assert_allclose(fields(pair), [0.4, 0.0, 0.6, 0.08, 0.08], rtol=1e-15)
    assert not bool(pair.certified)
    assert bool(js.vr_pair(np.inf, 1.0, 5.0).certified)


def test_batches_broadcast():
    pair = js.vr_pair(np.array([2.0, 3.0])[:, None], np.array([0.1, 0.2, 0.3])[None, :], 4.0)
    assert pair.shape == (2, 3) and pair.certified.shape == (2, 3)


@pytest.mark.parametrize("args,kwargs,match", [
    ((0.5, 0.1, 2.0), {}, "^p"),
    ((np.nan, 0.1, 2.0), {}, "^p"),
    ((3.0, 0.6, 2.0), {}, "^beta"),
    ((3.0, -0.1, 2.0), {}, "^beta"),
    ((3.0, 0.3, 0.5), {}, "^q"),
    ((3.0, 0.5, 1.0), {}, "^q"),  # 2r = 1.5 > 1
    ((3.0, 0.3), {"q0": 0.5, "q1": 2.0}, "^q0"),
    ((3.0, 0.3), {}, "^q"),
    ((np.ones(2) * 3, np.ones(3) * 0.1, 2.0), {}, "shapes do not broadcast"),
])
def test_bad_parameters_raise_naming_them(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        js.vr_pair(*args, **kwargs)


def test_bad_eps0_and_custom_pairs():
    with pytest.raises(ValueError, match="^eps0"):
        js.stronger_clone_pair(-1.0)
    with pytest.raises(ValueError, match=r"^u\+v\+w"):
        js.two_count_pair(0.5, 0.5, 0.5, 0.1, 0.1)
    with pytest.raises(ValueError, match=r"^r0\+r1"):
        js.two_count_pair(0.5, 0.5, 0.0, 0.6, 0.6)


def test_under_jit_invalid_parameters_become_nan_fields():
    pair = jax.jit(lambda b: js.vr_pair(3.0, b, 2.0))(jnp.array([0.3, 0.9]))
    assert np.all(np.isfinite(np.asarray(pair.u)[:1])) and np.all(np.isnan(np.asarray(pair.u)[1:]))


def _compiles(fn) -> int:
    """Number of XLA programs compiled while ``fn()`` runs, JAX's copy-to-device programs aside."""
    from conftest import compiled_programs
    with compiled_programs() as names:
        fn()
    return sum(name != "stage" for name in names)


def test_pairs_from_plain_values_compile_no_program_and_match_the_traced_ones():
    """A pair built from plain values is computed in numpy: a first call compiles no small XLA
    program per operation (jnp did, about 11 for a clone pair). Under jit the same formulas run in
    jnp and give the same fields."""
    rng = np.random.default_rng(3)
    eps0 = rng.uniform(0.0, 8.0, 17)  # a shape no other test uses: nothing is cached
    p = np.exp(eps0)
    beta = rng.uniform(0.0, 1.0, 17) * (p - 1) / (p + 1)
    beta[::4] = (p[::4] - 1) / (p[::4] + 1)  # the snap to the worst case
    q0, q1 = p + 1.0, 2 * p + 1.0
    builders = {
        "stronger": lambda e, b: js.stronger_clone_pair(e),
        "standard": lambda e, b: js.standard_clone_pair(e),
        "paper": lambda e, b: js.vr_pair(jnp.exp(e), b, jnp.exp(e)),
        "lower": lambda e, b: js.vr_pair(jnp.exp(e), b, q0=jnp.asarray(q0), q1=jnp.asarray(q1)),
    }
    for name, build in builders.items():
        plain = {"stronger": lambda: js.stronger_clone_pair(eps0), "standard": lambda: js.standard_clone_pair(eps0),
                 "paper": lambda: js.vr_pair(p, beta, p), "lower": lambda: js.vr_pair(p, beta, q0=q0, q1=q1)}[name]
        assert _compiles(plain) == 0, name
        eager = plain()
        traced = jax.jit(lambda e, b, build=build: build(e, b).arrays())(eps0, beta)
        for f, (a, t) in enumerate(zip(eager.arrays(), traced)):
            assert isinstance(a, jax.Array) and a.dtype == jnp.float64
            np.testing.assert_allclose(np.asarray(a), np.asarray(t), rtol=4e-16, atol=0, err_msg=f"{name} field {f}")
