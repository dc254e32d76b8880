"""A budget's queries and the smooth surrogate of their composed epsilon (docs/math.md section 16).

:class:`Query` / :func:`query` (one catalog randomizer with an ``eps0`` option, asked of ``n`` users
``count`` times), :func:`round_mu` (each query's round as approximately ``mu``-GDP) and
:func:`surrogate_epsilon` (the composition's GDP epsilon, with implicit gradients). The surrogate is not a
bound: :mod:`jaxshuffle.accountant.tune` uses it to choose a direction and certifies the answer from
scratch; its docstring derives the surrogate (step 1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._bisect import bisect_jax
from jaxshuffle._config import check, f64

__all__ = ["Query", "check_queries", "gdp_epsilon", "query", "round_mu", "surrogate_epsilon"]


@dataclasses.dataclass(frozen=True)
class Query:
    """One query of a budget: a catalog randomizer with an ``eps0`` option, its fixed options,
    ``n`` users, asked ``count`` times (``count`` composed rounds at the same eps0).

    ``options`` is a tuple of ``(name, value)`` pairs (hashable); :func:`query` builds one from
    keyword arguments: ``query("grr", n=1e5, k=10)``. ``sample_rate``: the probability ``g`` in
    (0, 1] that each of the ``n`` users takes part in a round (Poisson client sampling; ``n`` counts
    every user); below 1 only for k-ary RR (:func:`query` checks it).

    Attributes:
      family: the catalog randomizer's name (with an ``eps0`` option), e.g. ``"grr"``.
      n: number of users, an integer >= 2 (as a float).
      count: rounds of this query composed at the same eps0, an integer >= 1.
      options: the randomizer's fixed options, a tuple of ``(name, value)`` pairs (above).
      sample_rate: the probability ``g`` in (0, 1] that each user takes part in a round (above).
    """

    family: str
    n: float
    count: int = 1
    options: tuple = ()
    sample_rate: float = 1.0

    def randomizer(self, eps0):
        """The :class:`~jaxshuffle.randomizers.VRParams` of this query at local budget ``eps0``."""
        from jaxshuffle.randomizers import entry

        return entry(self.family).fn(eps0=eps0, **dict(self.options))


def query(family: str, *, n, count: int = 1, sample_rate=1.0, **options) -> Query:
    """A validated :class:`Query`.

    Args:
      family: a catalog randomizer with an ``eps0`` option (``"grr"``, ``"binary-rr"``, ...).
      n: users, an integer >= 2 (with ``sample_rate < 1``: every user, taking part or not).
      count: rounds of this query composed at the same eps0, an integer >= 1.
      sample_rate: the probability ``g`` in (0, 1] that each user takes part in a round (Poisson
        client sampling). Below 1 the round is certified by its own PLD
        (:func:`~jaxshuffle.pld.two_count.shuffled_round` with ``sample_rate``), for k-ary RR only so
        far (``grr``; the others' three-count round costs about a minute per probe); others are refused.
      **options: the randomizer's other options (``k=10``), numbers.

    Returns:
      The query, a :class:`Query` with its options checked against the catalog and sorted by name.

    Raises:
      ValueError: naming the parameter for bad input; ``"sample_rate: ..."`` for a rate outside
        (0, 1] or a randomizer whose sampled round has no certified PLD.
    """
    from jaxshuffle.accountant.subsampling import scalar_sample_rate
    from jaxshuffle.randomizers import check_options, entry

    row = entry(family)  # raises for an unknown family
    if "eps0" not in [a.name for a in row.args]:
        raise ValueError(f"family: {family!r} has no eps0 option; tuning needs a randomizer with one")
    if "eps0" in options:
        raise ValueError("eps0: tune solves for eps0; do not pass it as an option")
    check_options(family, options, skip=("eps0",))
    n_np = np.float64(n)
    check(np.isfinite(n_np) & (n_np >= 2) & (n_np == np.floor(n_np)), "n", "must be a finite integer >= 2",
          value=n_np)
    if isinstance(count, bool) or not float(count) == int(count) or int(count) < 1:
        raise ValueError(f"count: must be an integer >= 1, got {count!r}")
    opts = tuple(sorted((k, float(v)) for k, v in options.items()))
    params = row.fn(eps0=1.0, **dict(opts))  # the row's own range checks (e.g. k >= 2)
    g = scalar_sample_rate(sample_rate, "query")
    # other single-message randomizers have a sampled round PLD too (the three-count pair's), but its profile
    # costs about a minute per probe, and a tune certifies tens of probes
    if g < 1.0 and params.krr() is None:
        raise ValueError(f"sample_rate: tune certifies clients sampled for k-ary RR ('grr') only so far, not "
                         f"{family!r} (got {g:g}). Use sample_rate=1, an upper bound: a sampled round is a "
                         "post-processing of the full one")
    return Query(family, float(n_np), int(count), opts, g)


def check_queries(queries) -> tuple[Query, ...]:
    if isinstance(queries, Query) or not isinstance(queries, Sequence) or len(queries) == 0:
        raise ValueError("queries: expected a non-empty list of Query (jaxshuffle.accountant.tune.query)")
    for i, q in enumerate(queries):
        if not isinstance(q, Query):
            raise ValueError(f"queries[{i}]: expected a Query, got {type(q).__name__}")
    return tuple(queries)


# ----------------------------------------------------------------------------------------------
# Surrogate (smooth, JAX)
# ----------------------------------------------------------------------------------------------

def round_mu(queries: Sequence[Query], eps0: jax.Array, n: jax.Array | None = None) -> jax.Array:
    """Per-query GDP parameter ``mu_i`` of one round (:mod:`jaxshuffle.accountant.tune`'s docstring, step 1).

    An approximation (a CLT), **not** a bound on either side: it only steers the optimiser; the
    certified value is :func:`certified_epsilon`'s ``upper``.

    Clients sampled (``q.sample_rate = g < 1``): with the three-count pair (docs/math.md 12.10) the
    victim sends a clone-0 / clone-1 marker with probability ``g`` (``g u`` and ``g v`` under one
    hypothesis, swapped under the other) and nothing otherwise, and each of the ``N`` others sends
    a blanket marker of each clone with probability ``g r`` (``r = r0 = r1``). The clone-0 count's
    mean then moves by ``g (u - v)`` between the hypotheses (it was ``u - v``), and the noise
    variance of the clone counts is ``g N s h (1 - h)`` (``N`` replaced by ``g N``: the others'
    markers are thinned by ``g``). Linearising as in step 1::

        mu_g = g c_p / sqrt(g N s h (1 - h)) = sqrt(g) mu,   c_p = (u - v)/(u + v).

    The code multiplies ``c_p`` and ``N`` by ``g`` only where ``g < 1``, so ``g = 1`` runs the
    unsampled expression itself (bit for bit).

    Args:
      queries: the :class:`Query` list.
      eps0: per-query local budgets (differentiable).
      n: optional vector of user counts replacing the queries' own ``n`` (a continuous extension
        of the integer count, for ``d/dn``; every user, taking part or not).

    Returns:
      The vector of ``mu_i`` (float64).
    """
    eps0 = jnp.reshape(f64(eps0), (-1,))
    users = [q.n for q in queries] if n is None else jnp.reshape(f64(n), (-1,))
    mus = []
    for i, q in enumerate(queries):
        params = q.randomizer(eps0[i])
        p, qq = f64(params.p), f64(params.q)
        alpha = 1.0 / (p + 1.0)  # beta/(p-1) at the worst-case beta (p-1)/(p+1)
        u, v = p * alpha, alpha
        r = alpha * p / qq  # r0 = r1 (symmetric pair): h = 1/2
        s = 2.0 * r
        others = f64(params.n_blanket(users[i]))
        cp = (u - v) / (u + v)
        g = q.sample_rate
        if g != 1.0:  # clients sampled: shift g (u - v), others' variance g N s h(1-h) (docstring)
            others = others * g
            cp = g * (u - v) / (u + v)
        mus.append(cp / jnp.sqrt(others * s * 0.25))
    return jnp.stack(mus)


def _gdp_delta(eps, mu):
    Phi = jax.scipy.stats.norm.cdf
    return Phi(-eps / mu + mu / 2) - jnp.exp(eps) * Phi(-eps / mu - mu / 2)


@jax.custom_jvp
def gdp_epsilon(mu: jax.Array, delta: jax.Array) -> jax.Array:
    """Smallest ``eps >= 0`` with ``delta_mu(eps) <= delta`` for ``mu``-GDP (bisection, 200 steps)."""
    mu, delta = f64(mu), f64(delta)
    hi = mu * mu / 2 + mu * 40.0 + 1.0
    _, eps = bisect_jax(lambda e: _gdp_delta(e, mu) <= delta, jnp.zeros_like(mu), hi, steps=200)
    return eps


@gdp_epsilon.defjvp
def _gdp_epsilon_jvp(primals, tangents):
    mu, delta = primals
    dmu, ddelta = tangents
    eps = gdp_epsilon(mu, delta)
    a, b = -eps / mu + mu / 2, -eps / mu - mu / 2
    denom = jnp.exp(eps) * jax.scipy.stats.norm.cdf(b)  # -d delta/d eps
    return eps, (jax.scipy.stats.norm.pdf(a) * dmu - ddelta) / denom


def surrogate_epsilon(queries: Sequence[Query], eps0, delta, n=None) -> jax.Array:
    """Smooth surrogate of the composed epsilon: ``gdp_epsilon(sqrt(sum count_i mu_i^2), delta)``.

    An approximation, not a bound (module docstring); differentiable in ``eps0``, ``delta`` and
    ``n`` (optional per-query user counts replacing the queries' own, see :func:`round_mu`).
    """
    queries = check_queries(queries)
    counts = jnp.asarray([q.count for q in queries], jnp.float64)
    mu = jnp.sqrt(jnp.sum(counts * round_mu(queries, eps0, n) ** 2))
    return gdp_epsilon(mu, f64(delta))
