"""The one bisection helper (jaxshuffle._bisect): jit twin, numpy twin, and the calibrations' bracket."""
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxshuffle._bisect import BracketSettings, bisect_fixed, bisect_jax, bisect_numpy, bracket_monotone, itp_step


@settings(derandomize=True, deadline=None, max_examples=40)
@given(root=st.floats(1e-6, 1e6), geometric=st.booleans())
def test_twins_agree_and_keep_the_verified_side(root, geometric):
    """Both twins bracket the root of x >= root with hi always a point where the predicate held."""
    lo0, hi0 = np.array([0.0, 1e-7]), np.array([2e6, 2e6])
    lo_n, hi_n = bisect_numpy(lambda m, _: m >= root, lo0, hi0, steps=80, geometric=geometric)
    lo_j, hi_j = jax.jit(lambda lo, hi: bisect_jax(lambda m: m >= root, lo, hi, steps=80, geometric=geometric))(
        jnp.asarray(lo0), jnp.asarray(hi0))
    for lo, hi in ((lo_n, hi_n), (np.asarray(lo_j), np.asarray(hi_j))):
        assert np.all(hi >= root) and np.all(lo < root)
        assert np.all(hi - lo <= 1e-9 * hi + 1e-300)
    np.testing.assert_array_equal(hi_n, np.asarray(hi_j))


@settings(derandomize=True, deadline=None, max_examples=40)
@given(root=st.floats(1e-6, 1e6), geometric=st.booleans(), steps=st.integers(1, 80))
def test_fixed_step_twins_agree_bit_for_bit(root, geometric, steps):
    """bisect_fixed (numpy, whole arrays, shapes kept) takes the same steps as bisect_jax: the planners'
    first guesses and the searches' start from one step."""
    lo0, hi0 = np.array([[0.0, 1e-7], [0.0, 3.0]]), np.array([[2e6, 2e6], [1e6, 4e6]])
    lo_n, hi_n = bisect_fixed(lambda m: m >= root, lo0, hi0, steps=steps, geometric=geometric)
    lo_j, hi_j = jax.jit(lambda lo, hi: bisect_jax(lambda m: m >= root, lo, hi, steps=steps, geometric=geometric))(
        jnp.asarray(lo0), jnp.asarray(hi0))
    assert lo_n.shape == lo0.shape and hi_n.shape == hi0.shape
    np.testing.assert_array_equal(lo_n, np.asarray(lo_j))
    np.testing.assert_array_equal(hi_n, np.asarray(hi_j))
    assert np.all((hi_n >= root) | (hi_n == hi0)) and np.all((lo_n < root) | (lo_n == lo0))
    assert lo0[0, 0] == 0.0 and hi0[0, 0] == 2e6  # the inputs are not moved in place


def test_numpy_twin_integer_mode_and_done():
    lo, hi = bisect_numpy(lambda m, _: 100.0 / m <= 3.0, np.array([0.0]), np.array([1000.0]), steps=100, integer=True)
    assert hi[0] == 34 and lo[0] == 33
    calls = []

    def ok(m, open_):
        calls.append(int(open_.sum()))
        return m >= np.array([0.5, 7.0])[open_]

    lo, hi = bisect_numpy(ok, np.zeros(2), np.full(2, 10.0), steps=100, done=lambda lo, hi: hi - lo <= 1e-3 * hi)
    assert np.all(hi - lo <= 1e-3 * hi) and len(calls) < 100


def test_bisect_monotone_both_directions():
    """The calibrations' shared loop on closed-form functions: increasing (eps0) and decreasing (n)."""
    target = np.array([0.37, 5.0])
    lo, hi, up, at_limit, done, probes = bracket_monotone(
        lambda x: x.copy(), target, np.minimum(target, 2.0), BracketSettings(
            feasible_below=True, limit=2.0, up_init=0.0, grow=lambda x: np.minimum(2.0 * np.maximum(x, 1e-3), 2.0),
            mid=lambda lo, hi: np.where(lo == 0, 0.5 * hi, np.where(hi > 2.0 * lo, np.sqrt(lo * hi), 0.5 * (lo + hi))),
            narrow=lambda lo, hi: np.isfinite(hi) & (hi - lo <= 1e-6 * hi)), max_probes=200)
    assert done.all() and at_limit.tolist() == [False, True] and probes < 200
    assert lo[0] <= 0.37 < hi[0] and hi[0] - lo[0] <= 1e-6 * hi[0] and up[0] == lo[0]
    assert lo[1] == 2.0 and np.isinf(hi[1]) and up[1] == 2.0  # feasible at the limit
    lo, hi, up, at_limit, done, _ = bracket_monotone(
        lambda x: 100.0 / x, np.array([3.0, 1e-3]), np.ones(2), BracketSettings(
            feasible_below=False, limit=1e3, up_init=np.inf, grow=lambda x: np.minimum(8.0 * x, 1e3),
            mid=lambda lo, hi: np.clip(np.floor(np.sqrt(np.maximum(lo, 1.0) * hi)), lo + 1, hi - 1),
            narrow=lambda lo, hi: hi - lo <= 1), max_probes=200)
    assert done.all() and at_limit.tolist() == [False, True]
    assert hi[0] == 34 and lo[0] == 33 and up[0] == 100.0 / 34  # smallest n with 100/n <= 3
    assert lo[1] == 1e3 and np.isinf(hi[1]) and np.isinf(up[1])  # infeasible at the limit




def _bisect_only(f, target, rtol, log_width):
    mid = lambda lo, hi: np.where(lo == 0, 0.5 * hi, np.where(hi > 2.0 * lo, np.sqrt(lo * hi), 0.5 * (lo + hi)))  # noqa: E731
    return bracket_monotone(
        f, target, np.minimum(target, 30.0), BracketSettings(
            feasible_below=True, limit=30.0, up_init=0.0, grow=lambda x: np.minimum(2.0 * np.maximum(x, 1e-3), 30.0),
            mid=mid, narrow=lambda lo, hi: np.isfinite(hi) & (hi - lo <= rtol * hi), log_width=log_width),
        max_probes=200)


@settings(derandomize=True, deadline=None, max_examples=60)
@given(power=st.floats(0.3, 4.0), scale=st.floats(1e-3, 1.0), jump=st.floats(0.05, 20.0), kink=st.booleans(),
       target=st.floats(0.01, 0.9), rtol=st.sampled_from([1e-3, 1e-6, 1e-9]))
def test_itp_steps_never_overshoot_and_beat_bisection(power, scale, jump, kink, target, rtol):
    """Secant expansion + ITP (log_width) on increasing curves, smooth or with a jump: the feasible
    end is a probed point at or below the target, the bracket closes to rtol, and the probe count
    never exceeds plain bisection's by more than 3 (ITP's bound: one probe once bracketed, plus
    the expansion's secant misses); on smooth curves it is smaller."""
    def f(x):
        y = scale * x ** power
        return np.where(x > jump, y + 0.5, y) if kink else y

    probed = []

    def record(x):
        probed.append(np.array(x))
        return f(x)

    t = np.array([target])
    lo, hi, up, at_limit, done, itp = _bisect_only(record, t, rtol, -np.log1p(-rtol))
    *_, plain = _bisect_only(f, t, rtol, None)
    assert done.all()
    assert up[0] <= target and up[0] == f(lo)[0] and any(p[0] == lo[0] for p in probed)  # a verified probe
    if not at_limit[0]:
        assert f(hi)[0] > target and hi[0] - lo[0] <= rtol * hi[0]
        assert any(p[0] == hi[0] for p in probed)
    assert itp <= plain + 3
    if not kink and not at_limit[0]:
        assert itp < plain


def test_itp_step_projects_and_nudges():
    """One ITP step: the regula-falsi point where it is inside the projection's radius, the
    midpoint minus sigma r where it is not, and a point within 1.8 eps of an end moved inwards."""
    a, b, eps = np.array([0.0]), np.array([1.0]), 1e-3
    # linear y = x - 0.3: regula falsi is exact (0.3), truncation kappa1 (b - a)^2 moves it towards 0.5
    x = itp_step(a, b, np.array([-0.3]), np.array([0.7]), eps, np.array([20.0]), np.array([0.01]))
    assert x[0] == 0.3 + 0.01
    # no room left (steps_left = log2 of the current width / (2 eps)): the midpoint exactly
    x = itp_step(a, b, np.array([-0.3]), np.array([0.7]), eps, np.log2(np.array([0.5 / eps])), np.array([0.01]))
    assert abs(x[0] - 0.5) < 1e-12
    # a root next to an end: the point moves 1.8 eps inwards from that end
    x = itp_step(a, b, np.array([-1e-7]), np.array([1.0]), eps, np.array([20.0]), np.array([0.0]))
    assert x[0] == 1.8 * eps
    # NaN at an end: no interpolation, the midpoint
    x = itp_step(a, b, np.array([np.nan]), np.array([1.0]), eps, np.array([20.0]), np.array([0.0]))
    assert x[0] == 0.5
