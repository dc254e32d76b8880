"""The x64 decision (README, ``jaxshuffle._config``): on by default, or scoped with JAXSHUFFLE_ENABLE_X64=0."""
import os
import subprocess
import sys
import textwrap


def _run(code: str, **env) -> subprocess.CompletedProcess:
    full = {**os.environ, "JAX_PLATFORMS": "cpu", **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, timeout=300)


def test_opt_out_leaves_float32_default_and_refuses_outside_a_scoped_block():
    res = _run("""
        import jax, jax.numpy as jnp
        import jaxshuffle as js
        assert jnp.zeros(2).dtype == jnp.float32          # the process default is untouched
        try:
            js.stronger_clone_pair(1.0)
        except RuntimeError as e:
            assert "enable_x64" in str(e)
        else:
            raise SystemExit("computed a bound outside float64")
        with jax.enable_x64(True):
            pair = js.stronger_clone_pair(1.0)
            assert pair.u.dtype == jnp.float64
            r = js.epsilon(pair, 100, 1e-3)
            assert r.upper.dtype == jnp.float64 and 0 < float(r.upper) < 1.0
        print("ok")
    """, JAXSHUFFLE_ENABLE_X64="0")
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "ok"


def test_default_enables_x64_on_import():
    res = _run("""
        import jax.numpy as jnp
        import jaxshuffle
        print(jnp.zeros(2).dtype)
    """)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "float64"
