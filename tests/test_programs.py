"""Exported engine programs (jaxshuffle._programs): same numbers as jit, reused by a later process."""
import pytest
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

import jaxshuffle as js
from jaxshuffle.plan import bucket_plans, plan_epsilon
from jaxshuffle.search import epsilon_with_plan


def test_exported_program_gives_the_jitted_numbers_bit_for_bit():
    pair = js.stronger_clone_pair(jnp.array([1.0, 1.0 + 1e-9, 1.0 - 1e-9]))  # one bucket: one program
    n, d = np.full(3, 1e4), np.full(3, 1e-6)
    via_export = js.epsilon(pair, n, d)  # eager: through _programs
    fields = [np.asarray(x) for x in pair.broadcast().arrays()]
    L, c_lo, M = plan_epsilon(*fields, n, d)
    for plan, ix in bucket_plans(L, M, fields[3], fields[4], n).items():
        pad = int(2 ** np.ceil(np.log2(ix.size)))  # run_buckets pads a bucket to a power of two
        take = np.concatenate([ix, np.repeat(ix[:1], pad - ix.size)])
        direct = epsilon_with_plan(tuple(jnp.asarray(f[take]) for f in fields), jnp.asarray(n[take]),
                                   jnp.asarray(d[take]), jnp.asarray(c_lo[take]), plan)
        for a, b in zip(via_export, direct):
            np.testing.assert_array_equal(np.asarray(a)[ix], np.asarray(b)[:ix.size])


@pytest.mark.slow
def test_a_second_process_reuses_the_program_files(tmp_path):
    code = textwrap.dedent("""
        import os, jaxshuffle as js
        r = js.epsilon(js.stronger_clone_pair(1.0), 1e4, 1e-6)
        print(repr(float(r.upper)), len(os.listdir(os.path.join(os.environ["JAXSHUFFLE_CACHE"], "programs"))))
    """)
    env = {**os.environ, "JAXSHUFFLE_CACHE": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    assert first.stdout == second.stdout  # same value, no new program written
    assert int(first.stdout.split()[1]) >= 1


def test_blanket_brackets_through_the_exported_program_equal_the_jitted_ones_bit_for_bit(monkeypatch):
    """Eager blanket searches (every kind as lanes of one batch) run as one exported program with
    the jitted program's numbers; under jit and grad the plain function runs (gradients unchanged)."""
    from jaxshuffle import _programs
    from jaxshuffle import blanket as bl

    plan = bl.BlanketPlan(window=64, block=8, lines=48, max_step=154, chunk=4)
    e, k, n, d = (jnp.array(x) for x in ([0.5, 1.0, 2.0, 1.0], [3.0, 10.0, 4.0, 3.0], [12.0, 30.0, 7.0, 12.0],
                                          [1e-3, 1e-2, 1e-3, 1e-3]))
    code = jnp.array([0, 1, 2, 3], dtype=jnp.int32)
    calls = []
    run = _programs.run
    monkeypatch.setattr(_programs, "run", lambda name, fn, static, arrays: calls.append(
        (name, any(isinstance(a, jax.core.Tracer) for a in arrays))) or run(name, fn, static, arrays))
    via_export = bl._brackets(e, k, n, d, code, plan=plan, rtol=1e-6, max_iter=40)
    direct = bl._coded_brackets(e, k, n, d, code, plan=plan, rtol=1e-6, max_iter=40)
    for a, b in zip(via_export, direct):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert calls == [("blanket_brackets", False)]
    # krr_bounds (amplify's k-RR bounds) takes the same route: one exported program for its four lanes
    calls.clear()
    bl.krr_bounds(1.0, 3, 12, 1e-3, plan=plan)
    assert calls == [("blanket_brackets", False)]
    # traced: the plain function (the exported program is not differentiated), same value
    calls.clear()

    def up(x):
        return bl.blanket_epsilon_with_plan(x, k[:1], n[:1], d[:1], plan=plan).upper[0]

    x = jnp.array([1.0])
    np.testing.assert_allclose(float(jax.jit(up)(x)), float(up(x)), rtol=1e-12)
    g = jax.grad(up)(x)
    assert np.isfinite(float(g[0])) and float(g[0]) > 0
    assert ("blanket_brackets", True) in calls


@pytest.mark.slow
def test_a_second_process_runs_the_blanket_program_without_tracing_it(tmp_path):
    """A later process deserializes the k-RR bounds program instead of tracing it (the blanket
    point search is never traced there), with the same numbers and no new program file."""
    code = textwrap.dedent("""
        import os
        import jaxshuffle as js
        from jaxshuffle import blanket as bl
        traced = []
        search = bl._point_search
        bl._point_search = lambda *a, **kw: traced.append(1) or search(*a, **kw)
        plan = bl.BlanketPlan(window=64, block=8, lines=48, max_step=154, chunk=4)
        r = js.krr_bounds(1.0, 3, 12, 1e-3, plan=plan)
        files = len(os.listdir(os.path.join(os.environ["JAXSHUFFLE_CACHE"], "programs")))
        print(repr(float(r.upper)), repr(float(r.lower)), files, int(bool(traced)))
    """)
    env = {**os.environ, "JAXSHUFFLE_CACHE": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    up1, lo1, files1, traced1 = first.stdout.split()
    up2, lo2, files2, traced2 = second.stdout.split()
    assert (up1, lo1, files1) == (up2, lo2, files2)
    assert traced1 == "1" and traced2 == "0"
