"""The two-count pair: the one object every numerical bound in jaxshuffle runs on.

``n`` users. The victim emits a marker ``(1,0)``, ``(0,1)`` or ``(0,0)`` with
probabilities ``(u, v, w)`` under hypothesis P and ``(v, u, w)`` under Q. Each of
the ``n - 1`` other users independently emits ``(1,0)`` w.p. ``r0``, ``(0,1)``
w.p. ``r1`` and ``(0,0)`` otherwise. The observation is the total count ``(a, b)``::

    M(a,b) = (n-1)!/(a! b! (n-1-a-b)!) r0^a r1^b (1-r0-r1)^(n-1-a-b)
    P(a,b) = u M(a-1,b) + v M(a,b-1) + w M(a,b)
    Q(a,b) = v M(a-1,b) + u M(a,b-1) + w M(a,b)

(docs/math.md section 1.) The constructors below produce the pairs of the
variation-ratio paper (Wang et al., VLDB 2024) and of the clone reductions.

Soundness: only pairs with ``w == 0`` give certified *upper* bounds. The paper's
Theorem 4.7 pair with ``beta`` below the worst case ``(p-1)/(p+1)`` has ``w > 0``
and is **not** a valid upper bound (docs/math.md section 3: n = 2, 3-ary RR,
eps0 = 1, delta = 0.01 has exact eps 0.969408 > 0.914553). Such pairs are
computed, labelled ``certified = False``, never reported as a guarantee.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import array_module, as_float64, broadcast_shapes_or_raise, check, concrete, f64, is_concrete

Bound = Literal["upper", "lower"]

# A beta within this relative distance of the worst case (p-1)/(p+1) is snapped to it:
# rounding must not make a worst-case randomizer look like w > 0 (uncertified). Raising
# beta is the safe side: the worst-case pair dominates every beta.
_WORST_CASE_SNAP = 1e-12
# Largest local budget: beyond it 1/(e^eps0 + 1) leaves the normal float64 range (and no
# amplified eps above 700 can be certified anyway).
EPS0_MAX = 700.0
# u + v + w must equal 1 up to this absolute slack in a custom pair.
_SUM_TOL = 1e-12


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TwoCountPair:
    """Probabilities of the two-count pair; fields broadcast over any batch shape.

    Attributes:
      u: the victim's probability of marker (1,0) under P (of (0,1) under Q: u <-> v swapped).
      v: the victim's probability of marker (0,1) under P (of (1,0) under Q).
      w: the victim's probability of marker (0,0), under P and Q alike.
      r0: each other user's probability of marker (1,0).
      r1: each other user's probability of marker (0,1).
      bound: ``"upper"`` if the pair dominates the shuffled mechanism (its epsilon
        is an upper bound when ``w == 0``), ``"lower"`` if the mechanism dominates
        the pair (Theorem 5.1: its epsilon is a lower bound).
      source: short label of the theorem or reduction that produced the pair.
    """

    u: jax.Array
    v: jax.Array
    w: jax.Array
    r0: jax.Array
    r1: jax.Array
    bound: Bound = dataclasses.field(default="upper", metadata=dict(static=True))
    source: str = dataclasses.field(default="custom", metadata=dict(static=True))

    @property
    def shape(self) -> tuple[int, ...]:
        return jnp.broadcast_shapes(*(jnp.shape(x) for x in self.arrays()))

    def arrays(self) -> tuple[jax.Array, ...]:
        return (self.u, self.v, self.w, self.r0, self.r1)

    @property
    def certified(self) -> jax.Array:
        """Boolean array: True where the pair's epsilon is a *sound* upper bound.

        That needs an upper-bound pair with ``w == 0`` (docs/math.md section 3).
        """
        if self.bound != "upper":
            return jnp.zeros(self.shape, dtype=bool)
        return jnp.broadcast_to(self.w == 0.0, self.shape)

    def max_ratio(self) -> jax.Array:
        """Largest likelihood ratio max(P/Q, Q/P) over outcomes: ``max(u/v, v/u)`` (inf if one is 0).

        ``D_t = 0`` in both directions for ``t >= max_ratio``, so ``log`` of it bounds epsilon.
        """
        hi = jnp.maximum(self.u, self.v)
        lo = jnp.minimum(self.u, self.v)
        return jnp.where(hi == 0.0, 1.0, jnp.where(lo == 0.0, jnp.inf, hi / jnp.where(lo == 0.0, 1.0, lo)))

    def broadcast(self) -> TwoCountPair:
        shape = self.shape
        arrays: dict[str, Any] = {k: jnp.broadcast_to(getattr(self, k), shape) for k in ("u", "v", "w", "r0", "r1")}
        return dataclasses.replace(self, **arrays)


def fields_valid(u, v, w, r0, r1) -> jax.Array:
    """Boolean array, True where ``(u, v, w, r0, r1)`` is a probability model (jit-safe)."""
    ok = (u >= 0) & (v >= 0) & (w >= 0) & (r0 >= 0) & (r1 >= 0)
    return ok & (jnp.abs(u + v + w - 1.0) <= _SUM_TOL) & (r0 + r1 <= 1.0)


def check_fields(u, v, w, r0, r1) -> None:
    """Eager form of :func:`fields_valid`: ValueError naming the first offending field."""
    # numpy (no small XLA programs); the primal values under grad/jvp
    u, v, w, r0, r1 = (concrete(x, "check_fields") for x in (u, v, w, r0, r1))
    for name, x in zip(("u", "v", "w", "r0", "r1"), (u, v, w, r0, r1)):
        check((x >= 0) & (x <= 1), name, "must be a probability in [0, 1]", value=x)
    check(np.abs(u + v + w - 1.0) <= _SUM_TOL, "u+v+w", "must equal 1", value=u + v + w)
    check(r0 + r1 <= 1.0, "r0+r1", "must be at most 1", value=r0 + r1)


def pair_validity(pair: TwoCountPair) -> jax.Array:
    """Boolean array, True where the pair's fields are a probability model (jit-safe)."""
    return jnp.broadcast_to(fields_valid(*pair.arrays()), pair.shape)


def two_count_pair(u, v, w, r0, r1, *, bound: Bound = "upper", source: str = "custom") -> TwoCountPair:
    """A pair from raw probabilities, validated when called eagerly.

    Requirements: ``u, v, w >= 0`` with ``u + v + w = 1``; ``r0, r1 >= 0`` with
    ``r0 + r1 <= 1``. Definitions of the fields: docs/math.md section 1.

    Args:
      u: the victim's probability of marker (1,0) under P (of (0,1) under Q), in [0, 1].
      v: the victim's probability of marker (0,1) under P (of (1,0) under Q), in [0, 1].
      w: the victim's probability of marker (0,0), in [0, 1]; ``u + v + w = 1``.
      r0: each other user's probability of marker (1,0), in [0, 1].
      r1: each other user's probability of marker (0,1), in [0, 1]; ``r0 + r1 <= 1``.
      bound: ``"upper"`` (default) if the pair dominates the mechanism it stands for (its epsilon
        is an upper bound, certified only where ``w == 0``), ``"lower"`` if the mechanism dominates it.
      source: short label of the theorem or reduction that produced the pair (default ``"custom"``).

    Returns:
      The pair, a :class:`TwoCountPair` with float64 fields broadcast together. Which side its epsilon is on
        is what ``bound`` says; the pair itself is no bound until a search evaluates it.

    Raises:
      ValueError: naming the field (``u``, ..., ``"u+v+w"``, ``"r0+r1"``) for a value that is not a
        probability model, or shapes that do not broadcast (eager calls only; traced points are not checked).
    """
    u, v, w, r0, r1 = (f64(x) for x in (u, v, w, r0, r1))
    broadcast_shapes_or_raise(u=u, v=v, w=w, r0=r0, r1=r1)
    pair = TwoCountPair(u, v, w, r0, r1, bound=bound, source=source)
    if is_concrete(pair):
        check_fields(u, v, w, r0, r1)
    return pair


# ----------------------------------------------------------------------------------------
# The variation-ratio algebra: the one place that turns (p, beta) into marker probabilities.


def worst_case_beta(p, xp=jnp):
    """``(p-1)/(p+1)``: the largest total variation an ``(p, beta)`` randomizer can have (1 at ``p = inf``)."""
    inf = xp.isinf(p)
    return xp.where(inf, 1.0, (p - 1.0) / xp.where(inf, 1.0, p + 1.0))


def clone_fields(p, xp=jnp):
    """``(u, v) = (p/(p+1), 1/(p+1))`` of the ``w = 0`` clone with ratio ``p``; ``(1, 0)`` at ``p = inf``."""
    inf = xp.isinf(p)
    return xp.where(inf, 1.0, p / xp.where(inf, 1.0, p + 1.0)), xp.where(inf, 0.0, 1.0 / (p + 1.0))


def beta_valid(p, beta, xp=jnp):
    """Boolean array: ``0 <= beta <= (p-1)/(p+1)`` up to the snap tolerance."""
    return (beta >= 0) & (beta <= worst_case_beta(p, xp) * (1 + _WORST_CASE_SNAP))


def vr_fields(p, beta, xp=jnp):
    """``(u, v, w, alpha p)`` of the variation-ratio pair: THE rounding rule of the package.

    ``alpha = beta/(p-1)``, ``u = p alpha``, ``v = alpha``, ``w = 1 - (p+1) alpha``
    (docs/math.md section 1); ``p = inf`` gives ``u = beta, v = 0, w = 1 - beta``. ``xp``: ``jnp``,
    or ``np`` for plain values (the same operations; no XLA programs for an eager first call).

    Snap rule (one, for upper and lower pairs alike): a ``beta`` within relative ``1e-12`` of
    the worst case ``(p-1)/(p+1)`` is the worst case, written as the exact clone
    ``(p/(p+1), 1/(p+1), 0)``, so that ``w == 0`` holds exactly (certified) and ``w`` is never a
    rounding-level negative number (``w = -3.5e-17`` used to reject GRR k = 2's lower
    parameters) or a rounding-level positive one (``w = 5.6e-17`` with ``r0 + r1 = 1`` planned a
    threshold step of 1e6 counts). For an upper pair raising beta is the safe side (the worst
    case dominates every beta); for a lower pair the change is of the order of the float
    rounding of the randomizer's own parameters. Elsewhere ``w`` is clipped at 0.
    """
    inf_p = xp.isinf(p)
    worst = worst_case_beta(p, xp)
    snap = beta >= worst * (1 - _WORST_CASE_SNAP)
    safe_pm1 = xp.where(inf_p | (p == 1), 1.0, p - 1)
    alpha = xp.where(inf_p | (beta == 0), 0.0, beta / safe_pm1)
    alpha_p = xp.where(inf_p, beta, alpha * xp.where(inf_p, 1.0, p))  # beta p/(p-1)
    cu, cv = clone_fields(p, xp)
    u = xp.where(snap, cu, alpha_p)
    v = xp.where(snap, cv, alpha)
    w = xp.where(snap, 0.0, xp.maximum(1.0 - alpha_p - alpha, 0.0))
    return u, v, w, u


def _validate_vr(p, beta, qs: dict, xp=jnp) -> None:
    check(p >= 1, "p", "must be >= 1 (p = e^eps0; inf allowed for multi-message protocols)", value=p)
    check(beta_valid(p, beta, xp), "beta", "must lie in [0, (p-1)/(p+1)] (in [0, 1] when p = inf)", value=beta)
    for name, q in qs.items():
        check(q >= 1, name, "must be >= 1", value=q)


def vr_pair(p, beta, q=None, *, q0=None, q1=None) -> TwoCountPair:
    """Variation-ratio pair of a local randomizer with parameters ``(p, beta, q)``.

    With ``q``: the paper's Theorem 4.7 reduction, ``alpha = beta/(p-1)``::

        u = p alpha, v = alpha, w = 1 - (p+1) alpha, r0 = r1 = alpha p / q.

    Only sound (``certified``) when ``beta = (p-1)/(p+1)`` (then ``w = 0``); for
    smaller beta it is the paper's bound, reported but not certified (docs/math.md section 3).

    With ``q0=..., q1=...`` (and ``p`` read as the Theorem 5.1 ratio ``p0``): the
    lower-bound pair of Theorem 5.1, ``r0 = alpha p/q0``, ``r1 = alpha p/q1``; its
    epsilon is a lower bound on the shuffled mechanism's epsilon.

    ``p = inf`` (multi-message rows of Table 4) gives ``alpha = 0``, ``alpha p = beta``:
    ``u = beta, v = 0, w = 1 - beta, r = beta/q``. Rounding: :func:`vr_fields`.

    Under tracing, invalid points become NaN fields (engine status INVALID).

    Args:
      p: probability ratio ``e^eps0`` (>= 1; ``inf`` for the multi-message rows); with ``q0, q1``,
        the Theorem 5.1 ratio ``p0``.
      beta: total variation, in ``[0, (p-1)/(p+1)]`` (in ``[0, 1]`` when ``p = inf``).
      q: blanket ratio (>= 1) of the Theorem 4.7 upper pair; give either ``q`` or both ``q0`` and ``q1``.
      q0: Theorem 5.1 ratio (>= 1) of the victim's ``x0`` mass on ``Y0`` to the other users' (lower pair).
      q1: Theorem 5.1 ratio (>= 1) of the victim's ``x1`` mass on ``Y1`` to the other users' (lower pair).

    Returns:
      The pair, a :class:`TwoCountPair`: with ``q``, the upper pair (``bound="upper"``, source
        ``"vr-thm4.7"``): its epsilon is a certified upper bound (errs high) only where ``certified``
        (``w == 0``), elsewhere the paper's value, not certified; with ``q0, q1``, the lower pair
        (``bound="lower"``, source ``"vr-thm5.1"``): its epsilon is a lower bound (errs low).

    Raises:
      ValueError: naming the parameter (eagerly) if ``p < 1``, ``beta`` is outside
        ``[0, (p-1)/(p+1)]``, any ``q < 1``, the others' marker probabilities exceed 1
        in total, or neither (or both) of ``q`` and ``(q0, q1)`` is given.
    """
    lower = q is None
    if lower and (q0 is None or q1 is None):
        raise ValueError("q: give q (Theorem 4.7 upper pair) or both q0 and q1 (Theorem 5.1 lower pair)")
    if not lower and (q0 is not None or q1 is not None):
        raise ValueError("q: give either q or (q0, q1), not both")
    xp = array_module(p, beta, q, q0, q1)  # plain values: numpy (no small XLA programs)
    p, beta = as_float64(p, xp), as_float64(beta, xp)
    qs = {"q0": as_float64(q0, xp), "q1": as_float64(q1, xp)} if lower else {"q": as_float64(q, xp)}
    broadcast_shapes_or_raise(p=p, beta=beta, **qs)
    eager = is_concrete(p, beta, *qs.values())
    if eager:
        _validate_vr(p, beta, qs, xp)
    u, v, w, alpha_p = vr_fields(p, beta, xp)
    if lower:
        r0, r1 = alpha_p / qs["q0"], alpha_p / qs["q1"]
    else:
        r0 = r1 = alpha_p / qs["q"]
    if eager:
        check(r0 + r1 <= 1.0 + _SUM_TOL, "q" if not lower else "q0, q1",
              "too small: the others' marker probability alpha p (1/q0 + 1/q1) must be <= 1", value=r0 + r1)
    else:
        bad = ~((p >= 1) & beta_valid(p, beta) & (r0 + r1 <= 1.0 + _SUM_TOL))
        for q_ in qs.values():
            bad = bad | ~(q_ >= 1)
        u, v, w, r0, r1 = (jnp.where(bad, jnp.nan, x) for x in (u, v, w, r0, r1))
    # r0 + r1 = 1 exactly is legitimate (e.g. the binary-RR lower pair); rounding may overshoot it.
    excess = xp.maximum(r0 + r1, 1.0)
    r0, r1 = r0 / excess, r1 / excess
    u, v, w, r0, r1 = (jnp.asarray(x) for x in (u, v, w, r0, r1))
    if lower:
        return TwoCountPair(u, v, w, r0, r1, bound="lower", source="vr-thm5.1")
    return TwoCountPair(u, v, w, r0, r1, bound="upper", source="vr-thm4.7")


def _clone_pair(eps0, r_of_p, source: str) -> TwoCountPair:
    xp = array_module(eps0)  # plain values: numpy (no small XLA programs)
    eps0 = as_float64(eps0, xp)
    if is_concrete(eps0):
        check((eps0 >= 0) & (eps0 <= EPS0_MAX), "eps0",
              f"must lie in [0, {EPS0_MAX:g}] (e^-eps0 must stay a normal float64)", value=eps0)
    else:
        eps0 = jnp.where((eps0 >= 0) & (eps0 <= EPS0_MAX), eps0, jnp.nan)
    p = xp.exp(eps0)
    u, v = clone_fields(p, xp)
    r = r_of_p(p)
    u_, v_, w_, r0_, r1_ = (jnp.asarray(x) for x in (u, v, xp.zeros_like(u), r, r))
    return TwoCountPair(u_, v_, w_, r0_, r1_, bound="upper", source=source)


def stronger_clone_pair(eps0) -> TwoCountPair:
    """Stronger clone (Feldman, McMillan, Talwar 2023) for an eps0-LDP randomizer.

    ``u = p/(p+1), v = 1/(p+1), w = 0, r0 = r1 = 1/(p+1)`` with ``p = e^eps0``; equal
    to ``vr_pair(p, (p-1)/(p+1), p)``. An upper bound for randomizers that satisfy the pointwise
    clone condition with ``r = 1/(p+1)`` (k-ary RR, binary RR on two options; docs/math.md 3.1); its
    general proof for every eps0-LDP randomizer was withdrawn by its authors, so for other
    randomizers use :func:`standard_clone_pair` (``amplify`` picks the proven one).

    Args:
      eps0: local budget, in [0, 700] (any shape).

    Returns:
      The pair, a :class:`TwoCountPair` (``bound="upper"``, ``w = 0``): its epsilon is a certified upper bound
        (errs high) for the randomizers named above; for other eps0-LDP randomizers, not certified.

    Raises:
      ValueError: naming ``eps0``, for a value outside [0, 700] (eager calls; traced: NaN fields).
    """
    return _clone_pair(eps0, lambda p: 1.0 / (p + 1), "stronger-clone")


def standard_clone_pair(eps0) -> TwoCountPair:
    """Standard clone (Feldman, McMillan, Talwar 2021) for an eps0-LDP randomizer.

    ``u = p/(p+1), v = 1/(p+1), w = 0, r0 = r1 = e^-eps0 / 2``. Sound upper bound,
    looser than the stronger clone (docs/math.md 3.1).

    Args:
      eps0: local budget, in [0, 700] (any shape).

    Returns:
      The pair, a :class:`TwoCountPair` (``bound="upper"``, ``w = 0``): its epsilon is a certified upper bound
        (errs high) for every eps0-LDP randomizer.

    Raises:
      ValueError: naming ``eps0``, for a value outside [0, 700] (eager calls; traced: NaN fields).
    """
    return _clone_pair(eps0, lambda p: 0.5 / p, "standard-clone")


def as_numpy(pair: TwoCountPair) -> tuple[np.ndarray, ...]:
    """The broadcast fields as float64 numpy arrays (for eager planning and references)."""
    return tuple(np.asarray(x, dtype=np.float64) for x in pair.broadcast().arrays())
