"""Test configuration: float64, and JAX's strictest promotion rules, for every test."""
import jax
import pytest

import jaxshuffle  # noqa: F401  (enables float64)

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")


@pytest.fixture(autouse=True)
def _float64_guard():
    assert jax.config.read("jax_enable_x64")
    yield
