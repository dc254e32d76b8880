"""Catalog of local randomizers and their variation-ratio parameters ``(p, beta, q)``.

Definitions (Wang et al., "Privacy Amplification via Shuffling: Unified, Simplified, and
Tightened", VLDB 2024, Section 4, properties I and II), for a randomizer ``R`` with output
distributions ``R(x)``:

* ``p``    -- the largest probability ratio ``R(x)[y] / R(x')[y]`` over inputs ``x, x'``
  and outputs ``y`` (``(p, beta)``-variation property: ``D_p(R(x) || R(x')) = 0``);
* ``beta`` -- the largest total variation distance ``TV(R(x), R(x'))``
  (``D_1(R(x) || R(x')) <= beta``);
* ``q``    -- the blanket ratio: the largest ``R_1(x_1)[y] / R_i(x_i)[y]`` between the
  victim's message distribution and a blanket message's distribution (q-ratio property
  ``D_q(R_1(x_1) || R_i(x_i)) = 0``). For a single-message eps0-LDP randomizer the blanket
  is another user's message, so ``q = p``. For the metric-DP rows (Table 3) ``p = e^{d01}``
  concerns the victim's pair of inputs and ``q = e^{dmax}`` any other input. For the
  multi-message protocols (Table 4) the blanket messages are the input-independent
  messages, of which every user (the victim included) sends ``blanket_per_user``: the
  two-count pair then has ``n * blanket_per_user`` other messages instead of ``n - 1``
  (other users' input-dependent messages are dropped, a post-processing step).

Every function below returns a :class:`VRParams` (float64 arrays broadcast over the
function's arguments). Each one states its definition of the mechanism; the values are
derived from that definition and checked against the explicit probability matrix (or
numerical integration) in ``tests/test_randomizers.py``. Where the paper's table differs
from the definition, the docstring says so under "Discrepancy".

Lower-bound parameters (Theorem 5.1, Appendix H) are a separate object,
:class:`LowerParams` ``(p0, beta, q0, q1)``, given by the ``*_lower`` functions for the
discrete mechanisms (and Laplace) where the worst pair of inputs and the worst input
``x*`` of the other users are derived. For inputs ``x0, x1``, ``Y0 = {y: R(x0)[y] > R(x1)[y]}``,
``Y1 = {y: R(x1)[y] > R(x0)[y]}``::

    p0 = R(x1)(Y1) / R(x0)(Y1),   q0 = R(x0)(Y0) / R(x*)(Y0),   q1 = R(x1)(Y1) / R(x*)(Y1)

with ``x* = argmax_x min(q0(x), q1(x))``. The resulting pair (``LowerParams.pair()``) has
an epsilon that is a *lower* bound on the shuffled mechanism's epsilon.

Rows missing from the seed tables (Tables 2, 3, 4, 6 as shipped): pureDUMP and PCKV-GRR
are derived here from their original papers' definitions; the "collision" mechanism
(Wang et al. 2021/2023) is not cataloged because its definition is not available to this
project.

Rounding: ``p = e^eps0`` is the float ``exp(eps0)`` and ``beta`` is capped at
``(p-1)/(p+1)`` of that float (a rounding-level adjustment: for ``eps0 < 1.1e-16``, ``p``
rounds to 1 while an accurately computed ``beta ~ eps0/4`` would not be 0), so that every
returned triple is accepted by :func:`jaxshuffle.pair.vr_pair`.

Validation (package convention, ``_config``): called eagerly, an invalid option raises
``ValueError`` naming the parameter and its valid range; under ``jit``/``vmap`` invalid
points give NaN fields.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Literal

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import broadcast_shapes_or_raise, check, f64, is_concrete
from jaxshuffle.pair import TwoCountPair, vr_pair

__all__ = [
    "VRParams", "LowerParams", "Arg", "Entry", "CATALOG",
    "general", "laplace", "privunit", "grr", "binary_rr", "rappor", "subset_selection",
    "local_hash", "hadamard_response", "sampling_rappor", "wheel", "k_subset_exponential",
    "pckv_grr", "duchi", "harmony", "privkv", "collision",
    "metric_general", "metric_laplace", "planar_laplace", "planar_laplace_beta",
    "balcer_cheu", "balcer_uniform", "cheu_zhilyaev", "balls_into_bins", "pure_dump", "mix_dump",
    "grr_lower", "binary_rr_lower", "subset_selection_lower", "local_hash_lower",
    "hadamard_response_lower", "laplace_lower",
]


# --------------------------------------------------------------------------------------
# Parameter containers
# --------------------------------------------------------------------------------------

@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class VRParams:
    """Variation-ratio parameters of a randomizer (upper-bound side, Theorem 4.7).

    Attributes:
      p: largest probability ratio between two inputs' output distributions (>= 1; ``inf``
        for the multi-message rows whose input-dependent message is deterministic).
      beta: largest total variation distance between two inputs' output distributions,
        in ``[0, (p-1)/(p+1)]`` (``[0, 1]`` when ``p = inf``).
      q: blanket ratio (>= 1), see the module docstring.
      blanket_per_user: ``None`` for a single-message randomizer (the blanket is the other
        ``n - 1`` users' messages); for a multi-message protocol, the number of
        input-independent (blanket) messages each user sends.
    """

    p: jax.Array
    beta: jax.Array
    q: jax.Array
    blanket_per_user: jax.Array | None = None

    def n_blanket(self, n) -> jax.Array:
        """Number of blanket messages ("other users" of the two-count pair) among ``n`` users.

        ``n - 1`` for a single-message randomizer, ``n * blanket_per_user`` for a
        multi-message protocol (every user, the victim included, sends blanket messages).
        """
        n = f64(n)
        if self.blanket_per_user is None:
            return n - 1.0
        return n * self.blanket_per_user

    def pair(self) -> TwoCountPair:
        """The paper's Theorem 4.7 pair ``vr_pair(p, beta, q)`` (certified only at worst-case beta)."""
        return vr_pair(self.p, self.beta, self.q)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class LowerParams:
    """Lower-bound parameters ``(p0, beta, q0, q1)`` of Theorem 5.1 for one pair of inputs.

    Their pair (:meth:`pair`) is dominated by the shuffled mechanism: its epsilon is a
    lower bound. ``p0`` is the expected ratio on the differing outputs, ``q0, q1`` the
    ratios between the victim's and the worst other input's mass on them.
    """

    p0: jax.Array
    beta: jax.Array
    q0: jax.Array
    q1: jax.Array

    def pair(self) -> TwoCountPair:
        return vr_pair(self.p0, self.beta, q0=self.q0, q1=self.q1)


# --------------------------------------------------------------------------------------
# Argument specifications and validation
# --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Arg:
    """One mechanism option: name, kind (``"real"`` or ``"int"``), valid range, help, default.

    The range is ``low .. high`` with open or closed ends (``high = inf`` means finite
    values only); ``"int"`` options are float64 arrays holding integers.
    """

    name: str
    kind: Literal["real", "int"]
    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = True
    help: str = ""
    default: float | None = None  # None: required

    def range_text(self) -> str:
        if self.kind == "int":
            if self.high == math.inf:
                return f"an integer >= {self.low:g}"
            return f"an integer in [{self.low:g}, {self.high:g}]"
        lo = "(" if self.low_open else "["
        hi = ")" if (self.high_open or self.high == math.inf) else "]"
        return f"a number in {lo}{self.low:g}, {self.high:g}{hi}"

    def valid(self, x: jax.Array) -> jax.Array:
        """Boolean array; NaN is never valid."""
        ok = (x > self.low) if self.low_open else (x >= self.low)
        ok = ok & ((x < self.high) if (self.high_open or self.high == math.inf) else (x <= self.high))
        if self.kind == "int":
            ok = ok & (x == jnp.floor(x))
        return ok


class _Inputs:
    """Broadcast float64 arguments plus a validity mask (eager: raise; traced: mask)."""

    def __init__(self, *spec_values: tuple[Arg, object]):
        arrays = {a.name: f64(v) for a, v in spec_values}
        self.shape = broadcast_shapes_or_raise(**arrays)
        self.values = [jnp.broadcast_to(x, self.shape) for x in arrays.values()]
        self.concrete = is_concrete(*self.values)
        self.ok = jnp.ones(self.shape, dtype=bool)
        for (spec, _), x in zip(spec_values, self.values):
            self.require(spec.valid(x), spec.name, f"must be {spec.range_text()} (NaN is not)")

    def require(self, cond, name: str, message: str) -> None:
        cond = jnp.broadcast_to(cond, self.shape)
        if self.concrete:
            check(cond, name, message)
        self.ok = self.ok & cond

    def params(self, p, beta, q, blanket_per_user=None) -> VRParams:
        # beta <= (p-1)/(p+1) holds exactly; keep it so after rounding (p = e^eps0 rounds to 1
        # for eps0 < 1.1e-16 while beta ~ eps0/4 does not).
        p = jnp.asarray(p, dtype=jnp.float64)
        beta = jnp.minimum(beta, jnp.where(jnp.isinf(p), 1.0, (p - 1.0) / (p + 1.0)))
        fields = [p, beta, q] + ([] if blanket_per_user is None else [blanket_per_user])
        fields = [jnp.where(self.ok, jnp.broadcast_to(x, self.shape), jnp.nan) for x in fields]
        return VRParams(*fields)

    def lower(self, p0, beta, q0, q1) -> LowerParams:
        p0 = jnp.asarray(p0, dtype=jnp.float64)
        beta = jnp.minimum(beta, (p0 - 1.0) / (p0 + 1.0))
        # The others' marker probabilities r_i = alpha p0 / q_i sum to at most 1, with equality
        # when x* puts all its mass on Y0 and Y1 (GRR k = 2 with x* = x0, Laplace with x* = 1/2);
        # vr_pair accepts a rounding excess (r0 + r1 <= 1 + 1e-12) and clips it.
        return LowerParams(*(jnp.where(self.ok, jnp.broadcast_to(x, self.shape), jnp.nan)
                             for x in (p0, beta, q0, q1)))


_EPS0 = Arg("eps0", "real", 0.0, help="local budget eps0 (eps0-LDP; p = e^eps0)")
_EPS1 = Arg("eps1", "real", 0.0, help="key budget eps1")
_EPS2 = Arg("eps2", "real", 0.0, help="value budget eps2")
_D01 = Arg("d01", "real", 0.0, help="metric distance d_X(x1^0, x1^1) between the victim's inputs (p = e^d01)")
_DMAX = Arg("dmax", "real", 0.0, help="max over x of d_X(x1^0, x), d_X(x1^1, x) (q = e^dmax), >= d01")
_BLANKET = Arg("blanket_per_user", "int", 1.0, help="input-independent (blanket) messages sent by each user")


def _log_binom(n, k):
    """log C(n, k) for 0 <= k <= n (float arrays holding integers)."""
    return jax.scipy.special.gammaln(n + 1.0) - jax.scipy.special.gammaln(k + 1.0) - \
        jax.scipy.special.gammaln(n - k + 1.0)


# --------------------------------------------------------------------------------------
# eps0-LDP randomizers (Tables 2 and 6)
# --------------------------------------------------------------------------------------

def general(eps0) -> VRParams:
    """Any eps0-LDP randomizer (worst case). Table 2 / Table 6 row "general mechanisms".

    ``p = e^eps0``, ``beta = (e^eps0 - 1)/(e^eps0 + 1)``, ``q = e^eps0``.

    The worst-case total variation is attained by binary randomized response (Kairouz, Oh,
    Viswanath, "Extremal mechanisms for local differential privacy", 2014); with these
    parameters the Theorem 4.7 pair is the stronger clone (Feldman, McMillan, Talwar 2023).
    """
    inp = _Inputs((_EPS0, eps0))
    (eps0,) = inp.values
    p = jnp.exp(eps0)
    return inp.params(p, (p - 1.0) / (p + 1.0), p)


def laplace(eps0) -> VRParams:
    """Laplace mechanism on [0, 1] with scale 1/eps0. Table 2 row "Laplace mechanism for [0,1]".

    Original: Dwork, McSherry, Nissim, Smith, "Calibrating noise to sensitivity", 2006.
    ``R(x)`` has density ``(eps0/2) exp(-eps0 |y - x|)``, ``x in [0, 1]``.

    ``p = e^eps0``, ``beta = TV(Lap(0), Lap(1)) = 1 - e^{-eps0/2}``, ``q = e^eps0``.
    """
    inp = _Inputs((_EPS0, eps0))
    (eps0,) = inp.values
    p = jnp.exp(eps0)
    return inp.params(p, -jnp.expm1(-0.5 * eps0), p)


_C = Arg("c", "real", 0.0, 1.0, low_open=True, help="cap area c: fraction of the sphere covered by the cap")


def privunit(eps0, c) -> VRParams:
    """PrivUnit with cap area ``c``. Table 2 row "PrivUnit mechanism with cap area c".

    Original: Bhowmick, Duchi, Freudiger, Kapoor, Rogers, "Protection against reconstruction
    and its applications in private federated learning", 2018 (the table cites Bonawitz et
    al. 2017). Input ``x`` on the unit sphere; the output ``z`` is uniform on the cap
    ``{z: <z, x> >= gamma}`` (normalized area ``c``) with probability
    ``pi = c e^eps0 / (c e^eps0 + 1 - c)`` and uniform on its complement otherwise, so the
    density ratio between inputs is at most ``e^eps0``.

    ``p = e^eps0``, ``q = e^eps0``, and, attained by antipodal inputs,
    ``beta = min(c, 1 - c) (e^eps0 - 1) / (c e^eps0 + 1 - c)``.

    Discrepancy: the table gives ``c (e^eps0 - 1)/(c e^eps0 + 1 - c)``, which is correct only
    for ``c <= 1/2``; for ``c > 1/2`` two caps always overlap, the area of
    ``cap(x) minus cap(-x)`` is ``1 - c``, and the table value even exceeds the worst case
    ``(e^eps0-1)/(e^eps0+1)`` as ``c -> 1``.
    """
    inp = _Inputs((_EPS0, eps0), (_C, c))
    eps0, c = inp.values
    p = jnp.exp(eps0)
    return inp.params(p, jnp.minimum(c, 1.0 - c) * (p - 1.0) / (c * p + 1.0 - c), p)


_K2 = Arg("k", "int", 2.0, help="number of options (domain size)")


def grr(eps0, k) -> VRParams:
    """k-ary (generalized) randomized response. Table 2 row "general randomized response (GRR)".

    Original: Warner 1965; Kairouz, Bonawitz, Ramage, "Discrete distribution estimation under
    local privacy", 2016. ``R(x) = x`` with probability ``e^eps0/(e^eps0 + k - 1)``, any other
    option with probability ``1/(e^eps0 + k - 1)`` each.

    ``p = e^eps0``, ``beta = (e^eps0 - 1)/(e^eps0 + k - 1)``, ``q = e^eps0``.
    """
    inp = _Inputs((_EPS0, eps0), (_K2, k))
    eps0, k = inp.values
    p = jnp.exp(eps0)
    return inp.params(p, (p - 1.0) / (p + k - 1.0), p)


def grr_lower(eps0, k) -> LowerParams:
    """Theorem 5.1 parameters of :func:`grr` for inputs ``x0 = 0, x1 = 1``.

    ``p0 = e^eps0``; with ``k >= 3`` the others hold a third value: ``q0 = q1 = e^eps0``
    (the lower pair equals the upper pair); with ``k = 2``: ``x* = x0``, ``q0 = 1, q1 = e^eps0``.
    """
    inp = _Inputs((_EPS0, eps0), (_K2, k))
    eps0, k = inp.values
    p = jnp.exp(eps0)
    return inp.lower(p, (p - 1.0) / (p + k - 1.0), jnp.where(k >= 3.0, p, 1.0), p)


_D2 = Arg("d", "int", 2.0, help="number of options (domain size)")


def binary_rr(eps0, d) -> VRParams:
    """Binary randomized response on ``d`` options. Table 2 row "binary RR on d options".

    Original: Duchi, Jordan, Wainwright, "Local privacy and statistical minimax rates", 2013.
    ``x in [d]`` is one-hot encoded and every bit is reported truthfully with probability
    ``a = e^{eps0/2}/(e^{eps0/2} + 1)``, flipped otherwise (eps0/2 per bit: two bits differ).

    ``p = e^eps0``, ``beta = a^2 - (1-a)^2 = (e^{eps0/2} - 1)/(e^{eps0/2} + 1)``,
    ``q = e^eps0`` (``beta`` does not depend on ``d``).
    """
    inp = _Inputs((_EPS0, eps0), (_D2, d))
    eps0, d = inp.values
    p = jnp.exp(eps0)
    return inp.params(p, jnp.tanh(0.25 * eps0), p)


def rappor(eps0, d) -> VRParams:
    """Basic one-time RAPPOR (one hash function). Table 2 row "binary RR on d options".

    Original: Erlingsson, Pihur, Korolova, "RAPPOR: randomized aggregatable
    privacy-preserving ordinal response", 2014. Identical to :func:`binary_rr`:
    ``p = e^eps0``, ``beta = (e^{eps0/2} - 1)/(e^{eps0/2} + 1)``, ``q = e^eps0``.
    """
    return binary_rr(eps0, d)


def binary_rr_lower(eps0, d) -> LowerParams:
    """Theorem 5.1 parameters of :func:`binary_rr` for inputs ``e_0, e_1``.

    ``Y0 = {y0 = 1, y1 = 0}``: ``p0 = a^2/(1-a)^2 = e^eps0``. With ``d >= 3`` the others hold
    ``e_2``, whose mass on ``Y1`` is ``a(1-a)``: ``q0 = q1 = e^{eps0/2}`` (so binary RR is
    not exactly tight: the upper ``q`` is ``e^eps0``). With ``d = 2``: ``q0 = 1, q1 = e^eps0``.
    """
    inp = _Inputs((_EPS0, eps0), (_D2, d))
    eps0, d = inp.values
    p = jnp.exp(eps0)
    return inp.lower(p, jnp.tanh(0.25 * eps0), jnp.where(d >= 3.0, jnp.exp(0.5 * eps0), 1.0),
                     jnp.where(d >= 3.0, jnp.exp(0.5 * eps0), p))


_K1 = Arg("k", "int", 1.0, help="subset size, 1 <= k <= d - 1")


def subset_selection(eps0, d, k) -> VRParams:
    """k-subset selection on ``d`` options. Table 2 row "k-subset on d options".

    Original: Wang et al., "Local differential private data aggregation for discrete
    distribution estimation", TPDS 2019; Ye, Barg, "Optimal schemes for discrete
    distribution estimation under LDP", 2018. The output is a ``k``-subset ``S`` of ``[d]``
    with probability proportional to ``e^eps0`` if ``x in S``, 1 otherwise.

    ``p = e^eps0``, ``q = e^eps0``,
    ``beta = (e^eps0-1)(C(d-1,k-1) - C(d-2,k-2)) / (e^eps0 C(d-1,k-1) + C(d-1,k))
    = (e^eps0 - 1) k (d-k) / ((d-1)(k e^eps0 + d - k))``.
    """
    inp = _Inputs((_EPS0, eps0), (_D2, d), (_K1, k))
    eps0, d, k = inp.values
    inp.require(k <= d - 1.0, "k", "must be <= d - 1 (subset size in [1, d-1])")
    p = jnp.exp(eps0)
    return inp.params(p, (p - 1.0) * k * (d - k) / ((d - 1.0) * (k * p + d - k)), p)


def subset_selection_lower(eps0, d, k) -> LowerParams:
    """Theorem 5.1 parameters of :func:`subset_selection` for inputs ``x0 = 0, x1 = 1``.

    ``p0 = e^eps0``; with ``d >= 3`` the others hold a third option, whose mass on
    ``Y1 = {S: 1 in S, 0 not in S}`` gives ``q0 = q1 = e^eps0 (d-2)/((k-1) e^eps0 + d - k - 1)``
    (``= e^eps0`` for ``k = 1``). With ``d = 2``: ``q0 = 1, q1 = e^eps0``.
    """
    inp = _Inputs((_EPS0, eps0), (_D2, d), (_K1, k))
    eps0, d, k = inp.values
    inp.require(k <= d - 1.0, "k", "must be <= d - 1 (subset size in [1, d-1])")
    p = jnp.exp(eps0)
    beta = (p - 1.0) * k * (d - k) / ((d - 1.0) * (k * p + d - k))
    # q3 >= 1 exactly ((k-1) p + d-k-1 <= (d-2) p); at k = d - 1 it is 1 and rounds to 1 - ulp.
    q3 = jnp.maximum(p * (d - 2.0) / jnp.maximum((k - 1.0) * p + d - k - 1.0, 1e-300), 1.0)
    return inp.lower(p, beta, jnp.where(d >= 3.0, q3, 1.0), jnp.where(d >= 3.0, q3, p))


_L = Arg("l", "int", 2.0, help="hash range (length) l")
_COLLISION = Arg("collision", "real", 0.0, 1.0, default=0.0,
                 help="least P[H(x) = H(x')] over input pairs for the hash family (0: a family with a "
                      "never-colliding pair, the table's value; 1/l: uniformly random hash functions)")


def local_hash(eps0, l, collision=0.0) -> VRParams:
    """Local hashing (OLH) with hash range ``l``. Table 2 row "local hash with length l".

    Original: Wang, Blocki, Li, Jha, "Locally differentially private protocols for frequency
    estimation", 2017. A hash function ``H: [d] -> [l]`` is drawn from a family and
    published; ``y = H(x)`` with probability ``e^eps0/(e^eps0 + l - 1)``, any other value in
    ``[l]`` with probability ``1/(e^eps0 + l - 1)``; the output is ``(H, y)``.

    ``p = e^eps0``, ``q = e^eps0``,
    ``beta = (1 - collision) (e^eps0 - 1)/(e^eps0 + l - 1)`` where ``collision`` is the least
    collision probability ``P[H(x) = H(x')]`` over input pairs.

    Discrepancy: the table's ``(e^eps0 - 1)/(e^eps0 + l - 1)`` is the value for a hash family
    with a never-colliding pair (``collision = 0``, the default, valid for every family); for
    uniformly random hash functions (``collision = 1/l``) the exact value is smaller by the
    factor ``1 - 1/l``.
    """
    inp = _Inputs((_EPS0, eps0), (_L, l), (_COLLISION, collision))
    eps0, l, coll = inp.values
    p = jnp.exp(eps0)
    return inp.params(p, (1.0 - coll) * (p - 1.0) / (p + l - 1.0), p)


def local_hash_lower(eps0, l, collision=0.0) -> LowerParams:
    """Theorem 5.1 parameters of :func:`local_hash` (domain with at least 3 inputs).

    ``p0 = e^eps0``; the others hold a third input whose hash collides with ``H(x1)``
    with probability ``collision``, independently of ``H(x0) != H(x1)`` (true for the
    injective family, ``collision = 0``, and for uniformly random functions,
    ``collision = 1/l``): ``q0 = q1 = e^eps0 / (collision e^eps0 + 1 - collision)``.
    """
    inp = _Inputs((_EPS0, eps0), (_L, l), (_COLLISION, collision))
    eps0, l, coll = inp.values
    p = jnp.exp(eps0)
    qq = p / (coll * p + 1.0 - coll)
    return inp.lower(p, (1.0 - coll) * (p - 1.0) / (p + l - 1.0), qq, qq)


_BIGK = Arg("K", "int", 2.0, help="output domain size K")
_S_HR = Arg("s", "int", 1.0, help="size of each input's output set C_x (K/2 for B = 1)")
_B_HR = Arg("B", "int", 1.0, help="number of blocks B", default=1.0)


def hadamard_response(eps0, K, s, B=1) -> VRParams:
    """Hadamard response HR(K, s, B). Table 2 rows "Hadamard response (K, s, B=1)" and "(B>1)".

    Original: Acharya, Sun, Zhang, "Hadamard response: estimating distributions privately,
    efficiently, and with little communication", 2018. Each input ``x`` owns a set ``C_x``
    of ``s`` outputs in ``[K]``; ``y in C_x`` has probability ``e^eps0/(s e^eps0 + K - s)``,
    any other ``y`` probability ``1/(s e^eps0 + K - s)``. With ``B = 1`` the sets are rows
    of a Hadamard matrix (``|C_x & C_x'| = s/2``); with ``B > 1`` the output domain is split
    into ``B`` blocks of size ``K/B`` and sets in different blocks are disjoint.

    ``p = e^eps0``, ``q = e^eps0``, ``beta = |C_x minus C_x'| (e^eps0 - 1)/(s e^eps0 + K - s)``:
    ``(s/2)(e^eps0-1)/(s e^eps0 + K - s)`` for ``B = 1`` and ``s (e^eps0-1)/(s e^eps0 + K - s)``
    for ``B > 1``.
    """
    inp = _Inputs((_EPS0, eps0), (_BIGK, K), (_S_HR, s), (_B_HR, B))
    eps0, K, s, B = inp.values
    inp.require((s * B <= K) & (s < K), "s", "must satisfy s <= K/B and s < K")
    p = jnp.exp(eps0)
    diff = jnp.where(B == 1.0, 0.5 * s, s)
    return inp.params(p, diff * (p - 1.0) / (s * p + K - s), p)


def hadamard_response_lower(eps0, K, s, B=1) -> LowerParams:
    """Theorem 5.1 parameters of :func:`hadamard_response` (at least 3 inputs).

    ``B = 1``: inputs are Hadamard rows ``u, v`` and the others hold row ``u xor v``, which
    avoids both differing sets: ``p0 = q0 = q1 = e^eps0`` (exactly tight). ``B >= 3``: inputs
    in two blocks, the others in a third: ``p0 = q0 = q1 = e^eps0``. ``B = 2``: inputs in
    the two blocks, the others in ``x0``'s block (a different row):
    ``q0 = 2 e^eps0/(e^eps0 + 1)``, ``q1 = e^eps0``.
    """
    inp = _Inputs((_EPS0, eps0), (_BIGK, K), (_S_HR, s), (_B_HR, B))
    eps0, K, s, B = inp.values
    inp.require((s * B <= K) & (s < K), "s", "must satisfy s <= K/B and s < K")
    inp.require(K / B >= 4.0, "K", "must be >= 4 B (three inputs per Hadamard block)")
    p = jnp.exp(eps0)
    diff = jnp.where(B == 1.0, 0.5 * s, s)
    beta = diff * (p - 1.0) / (s * p + K - s)
    return inp.lower(p, beta, jnp.where(B == 2.0, 2.0 * p / (p + 1.0), p), p)


_S_SET = Arg("s", "int", 1.0, help="size of each user's item set, 1 <= s <= d - 1")


def _lazy_walk_mean_abs(j, rho):
    """E|S_j| for a walk with i.i.d. steps +1, -1 (probability rho each) and 0.

    ``E|S_j| = 2 rho sum_{m<j} P(S_m = 0)``; ``a_m = P(S_m = 0)`` follows the three-term
    recurrence ``m a_m = (1-2rho)(2m-1) a_{m-1} - (1-4rho)(m-1) a_{m-2}`` (generalized
    central trinomial coefficients; forward-stable since rho <= 1/4).
    """
    def cond(state):
        m, _, _, _ = state
        return m < jnp.max(j)

    def body(state):
        m, a_prev, a_cur, acc = state  # a_cur = a_m, a_prev = a_{m-1}
        acc = acc + jnp.where(m < j, a_cur, 0.0)
        m1 = m + 1.0
        a_next = ((1.0 - 2.0 * rho) * (2.0 * m1 - 1.0) * a_cur - (1.0 - 4.0 * rho) * (m1 - 1.0) * a_prev) / m1
        return m1, a_cur, a_next, acc

    zero = jnp.zeros_like(rho)
    init = (jnp.asarray(0.0, dtype=jnp.float64), zero, jnp.ones_like(rho), zero)
    _, _, _, acc = jax.lax.while_loop(cond, body, init)
    return 2.0 * rho * acc


def sampling_rappor(eps0, d, s) -> VRParams:
    """Sampling RAPPOR on sets of ``s`` items out of ``d``. Table 2 row "sampling RAPPOR".

    Original: Qin et al., "Heavy hitter estimation over set-valued data with local
    differential privacy", CCS 2016. The input is a set of exactly ``s`` items (pad short
    sets with dummy items counted in ``d``); one item is sampled uniformly from it and
    reported by :func:`binary_rr` (``eps0/2`` per bit). With ``t = e^{eps0/2}`` and
    ``j = min(s, d - s)`` (the largest ``|X minus X'|``)::

        p = (j e^eps0 + s - j)/s    (= e^eps0 when d >= 2s),    q = p,
        beta = (t - 1/t)/(2 s) E|M - M'|,   M, M' iid Binomial(j, 1/(1 + t)).

    (``R(X)[y] = base(y) (m t + (s - m)/t)/s`` with ``m`` the number of ones of ``y`` in
    ``X``.) For ``s = 1`` this is binary RR's ``(t - 1)/(t + 1)``.

    Discrepancy: the table gives ``s (e^{eps0/2} - 1)/(d (e^{eps0/2} + 1))``, which for
    ``s = 1`` is ``1/d`` times binary RR's value although the mechanism then *is* binary RR;
    the table value is below the true total variation (not a valid bound).

    ``E|M - M'|`` is summed by an O(j) ``while_loop``: differentiate with ``jax.jacfwd``
    (reverse mode does not pass through the loop).
    """
    inp = _Inputs((_EPS0, eps0), (_D2, d), (_S_SET, s))
    eps0, d, s = inp.values
    inp.require(s <= d - 1.0, "s", "must be <= d - 1")
    t = jnp.exp(0.5 * eps0)
    j = jnp.minimum(s, d - s)
    rho = t / (1.0 + t) ** 2
    beta = (t - 1.0 / t) / (2.0 * s) * _lazy_walk_mean_abs(jnp.where(inp.ok, j, 0.0), rho)
    p = (j * jnp.exp(eps0) + s - j) / s
    return inp.params(p, beta, p)


_ARC = Arg("arc", "real", 0.0, 1.0, low_open=True, high_open=False,
           help="arc length on the wheel (the paper's p), s * arc <= 1")


def wheel(eps0, d, s, arc) -> VRParams:
    """Wheel mechanism on sets of ``s`` items out of ``d`` with arc length ``arc``. Table 2 row "Wheel".

    Original: Wang et al., "Set-valued data publication with local privacy: tight error
    bounds and efficient mechanisms", VLDB 2020. Each item is hashed to a point of the unit
    circle and covers the arc of length ``arc`` after it; the output ``v`` has density
    ``e^eps0/Omega`` on the arcs of the user's set and ``1/Omega`` elsewhere,
    ``Omega = s arc e^eps0 + 1 - s arc``. Values assume non-overlapping arcs (the sup over
    hash realizations, which is what the table gives).

    ``p = e^eps0``, ``q = e^eps0``, ``beta = j arc (e^eps0 - 1)/Omega`` with
    ``j = min(s, d - s)`` (the table's ``s arc (e^eps0 - 1)/Omega`` assumes ``d >= 2s``).
    """
    inp = _Inputs((_EPS0, eps0), (_D2, d), (_S_SET, s), (_ARC, arc))
    eps0, d, s, arc = inp.values
    inp.require(s <= d - 1.0, "s", "must be <= d - 1")
    inp.require(s * arc <= 1.0, "arc", "must satisfy s * arc <= 1")
    p = jnp.exp(eps0)
    j = jnp.minimum(s, d - s)
    return inp.params(p, j * arc * (p - 1.0) / (s * arc * p + 1.0 - s * arc), p)


_K_EXP = Arg("k", "int", 1.0, help="output subset size, 1 <= k <= d - s")


def k_subset_exponential(eps0, d, k, s) -> VRParams:
    """k-subset exponential mechanism on sets of ``s`` items out of ``d``. Table 6 row.

    Original: Wang et al., "PrivSet: set-valued data analyses with local differential
    privacy", INFOCOM 2018. The input is a set ``X`` of ``s`` items; the output is a
    ``k``-subset ``S`` of ``[d]`` with probability proportional to ``e^eps0`` if ``S``
    meets ``X``, 1 otherwise. ``Omega = e^eps0 (C(d,k) - C(d-s,k)) + C(d-s,k)``.

    ``p = e^eps0``, ``q = e^eps0``, and with ``u = min(2s, d)`` (the largest ``|X or X'|``),
    ``beta = (e^eps0 - 1)(C(d-s,k) - C(d-u,k))/Omega`` (the table's formula for ``d >= 2s``;
    ``s = 1`` is :func:`subset_selection`).
    """
    inp = _Inputs((_EPS0, eps0), (_D2, d), (_K_EXP, k), (_S_SET, s))
    eps0, d, k, s = inp.values
    inp.require(s <= d - 1.0, "s", "must be <= d - 1")
    inp.require(k <= d - s, "k", "must be <= d - s")
    p = jnp.exp(eps0)
    u = jnp.minimum(2.0 * s, d)
    ok_k = inp.ok
    log_a = _log_binom(d - s, jnp.where(ok_k, k, 0.0)) - _log_binom(d, jnp.where(ok_k, k, 0.0))
    a = jnp.exp(log_a)  # C(d-s,k)/C(d,k)
    has_b = k <= d - u
    log_ratio = _log_binom(jnp.where(has_b, d - u, 1.0), jnp.where(has_b, k, 0.0)) - \
        _log_binom(d - s, jnp.where(ok_k, k, 0.0))
    frac = jnp.where(has_b, -jnp.expm1(log_ratio), 1.0)  # 1 - C(d-u,k)/C(d-s,k)
    return inp.params(p, (p - 1.0) * a * frac / (p - (p - 1.0) * a), p)


_KEYS = Arg("d", "int", 2.0, help="number of keys d (including PCKV's padding keys)")


def pckv_grr(eps1, eps2, d) -> VRParams:
    """PCKV-GRR perturbation of one key-value pair on ``d`` keys (not in the seed tables).

    Original: Gu, Li, Cheng, Xiong, Cao, "PCKV: locally differentially private correlated
    key-value data collection with optimized utility", USENIX Security 2020. The sampled
    pair ``<k, v>``, ``v in {1, -1}``, is reported as ``<k, v>`` w.p. ``a b``, ``<k, -v>``
    w.p. ``a (1-b)``, and ``<k', +-1>`` w.p. ``c = (1-a)/(2(d-1))`` each for ``k' != k``, with
    ``a = e^eps1/(e^eps1 + d - 1)``, ``b = e^eps2/(e^eps2 + 1)``. (Padding-and-sampling of a
    key-value set only mixes such distributions, which cannot raise ``p`` or ``beta``.)

    ``p = max(e^eps2, 2 e^{eps1+eps2}/(e^eps2 + 1))`` (PCKV's composed budget),
    ``q = p``, ``beta = (a b - c) + |a (1-b) - c|`` (two different keys; the same key with
    opposite values gives the smaller ``a (2b - 1)``).
    """
    inp = _Inputs((_EPS1, eps1), (_EPS2, eps2), (_KEYS, d))
    eps1, eps2, d = inp.values
    e1, e2 = jnp.exp(eps1), jnp.exp(eps2)
    a = e1 / (e1 + d - 1.0)
    b = e2 / (e2 + 1.0)
    c = (1.0 - a) / (2.0 * (d - 1.0))
    p = jnp.maximum(e2, 2.0 * e1 * b)
    return inp.params(p, (a * b - c) + jnp.abs(a * (1.0 - b) - c), p)


def duchi(eps0) -> VRParams:
    """Duchi et al.'s mechanism for ``[-1, 1]^dim``. Table 6 row "Duchi et al.".

    Original: Duchi, Jordan, Wainwright, "Local privacy and statistical minimax rates",
    2013. A vertex ``v`` of the cube is drawn with ``E v = x``; the output is uniform on
    ``{z in {-B, B}^dim: <z, v> > 0}`` w.p. ``e^eps0/(e^eps0 + 1)`` and on the opposite
    half otherwise.

    ``p = e^eps0``, ``beta = (e^eps0 - 1)/(e^eps0 + 1)`` (attained by opposite vertices for
    odd ``dim``; an upper bound otherwise), ``q = e^eps0``.
    """
    return general(eps0)


def harmony(eps0) -> VRParams:
    """Harmony for ``[-1, 1]^dim``. Table 6 row "Harmony mechanism".

    Original: Nguyen, Xiao, Yang, Hui, Shin, Shin, "Collecting and analyzing data from smart
    device users with local differential privacy", 2016. A coordinate ``j`` is sampled
    uniformly; the output is ``(j, +)`` w.p. ``(1 + x_j (e^eps0-1)/(e^eps0+1))/2``, else
    ``(j, -)``.

    ``p = e^eps0``, ``beta = (e^eps0 - 1)/(e^eps0 + 1)`` (inputs ``x = 1``, ``x' = -1``),
    ``q = e^eps0``.
    """
    return general(eps0)


_S_COL = Arg("s", "int", 1.0, help="items per user (padded), 1 <= s <= l - 1")


def collision(eps0, s, l) -> VRParams:
    """(d, s)-Collision with hash length ``l``. Table 2 row "(d,s)-Collision with length l".

    Original: Wang, Li, Qian, Du, Lin, Yang, "Hiding numerical vectors in local private and
    shuffled messages", IJCAI 2021 (extended: arXiv 2304.04410). A user's set ``X`` of ``s``
    items (padded) is hashed by a public per-user hash ``h`` into ``[l]``; the output
    ``z in [l]`` has probability ``e^eps0/Omega`` on ``C = h(X)`` and ``1/Omega`` elsewhere,
    ``Omega = s e^eps0 + l - s``. The domain size ``d`` does not enter.

    ``p = e^eps0``, ``q = e^eps0``, ``beta = min(s, l-s)(e^eps0 - 1)/Omega``: the sup over
    hash realizations (``h`` injective on ``X``, images as far apart as ``l`` allows), as
    the row in the paper authors' repository (wangsw/PrivacyAmplification) gives it.
    """
    inp = _Inputs((_EPS0, eps0), (_S_COL, s), (_L, l))
    eps0, s, l = inp.values
    inp.require(s <= l - 1.0, "s", "must be <= l - 1")
    p = jnp.exp(eps0)
    return inp.params(p, jnp.minimum(s, l - s) * (p - 1.0) / (s * p + l - s), p)


_S_KV = Arg("s", "int", 1.0, help="maximum number of keys a user holds, 1 <= s <= d")


def privkv(eps1, eps2, d, s) -> VRParams:
    """PrivKV on users holding at most ``s`` of ``d`` keys. Table 6 row "PrivKV".

    Original: Ye, Hu, Meng, Zheng, "PrivKV: key-value data collection with local
    differential privacy", IEEE S&P 2019. A key index ``j`` is sampled uniformly from
    ``[d]``. If the user holds key ``j`` with value ``v`` (discretized to ``v* = +-1``), the
    output is ``<1, v*>`` w.p. ``a b``, ``<1, -v*>`` w.p. ``a (1-b)``, ``<0, 0>`` w.p.
    ``1 - a``; otherwise ``<0, 0>`` w.p. ``a`` and ``<1, +-1>`` w.p. ``(1-a)/2`` each;
    ``a = e^eps1/(e^eps1 + 1)``, ``b = e^eps2/(e^eps2 + 1)``.

    Per key: ``T_pm = a (2b - 1)`` (present with opposite values),
    ``T_pa = (|a b - h| + |a (1-b) - h| + 2a - 1)/2`` with ``h = (1-a)/2`` (present vs absent).
    Maximizing over key sets (``o`` shared keys, ``m`` keys held by one user only)::

        beta = max(s T_pm, min(2s, d) T_pa, (2s - d) T_pm + 2(d - s) T_pa [if s <= d < 2s]) / d,
        p = max(e^eps1, e^eps2, 2 e^{eps1+eps2}/(e^eps2 + 1)),   q = p.

    Discrepancy: the table writes ``p = q = e^{eps1+eps2}`` (valid, but not the largest ratio)
    and ``beta = 2s max{e^eps1 (e^eps2-1)/(e^eps2+1), e^eps1 - 1 + (e^eps2-1)/(2(e^eps2+1))} /
    (d (e^eps1+1))`` (also printing ``e^{eps2+1}`` for ``e^eps2 + 1``). Its first term is
    ``2 s T_pm`` where one shared key contributes ``T_pm`` once, and its second term exceeds
    ``T_pa`` by ``(e^eps1 - 1)(1 - b)/(e^eps1 + 1)``: a valid but loose bound.
    """
    inp = _Inputs((_EPS1, eps1), (_EPS2, eps2), (_D2, d), (_S_KV, s))
    eps1, eps2, d, s = inp.values
    inp.require(s <= d, "s", "must be <= d")
    e1, e2 = jnp.exp(eps1), jnp.exp(eps2)
    a = e1 / (e1 + 1.0)
    b = e2 / (e2 + 1.0)
    h = 0.5 * (1.0 - a)
    t_pm = a * (2.0 * b - 1.0)
    t_pa = 0.5 * (jnp.abs(a * b - h) + jnp.abs(a * (1.0 - b) - h) + (2.0 * a - 1.0))
    mixed = jnp.where((d < 2.0 * s), (2.0 * s - d) * t_pm + 2.0 * (d - s) * t_pa, 0.0)
    beta = jnp.maximum(jnp.maximum(s * t_pm, jnp.minimum(2.0 * s, d) * t_pa), mixed) / d
    p = jnp.maximum(jnp.maximum(e1, e2), 2.0 * e1 * b)
    return inp.params(p, beta, p)


# --------------------------------------------------------------------------------------
# Local metric-DP randomizers (Table 3)
# --------------------------------------------------------------------------------------

def _metric_inputs(d01, dmax) -> _Inputs:
    inp = _Inputs((_D01, d01), (_DMAX, dmax))
    d01, dmax = inp.values
    inp.require(dmax >= d01, "dmax", "must be >= d01 (dmax includes the distance to x1^1)")
    return inp


def metric_general(d01, dmax) -> VRParams:
    """Any local d_X-private randomizer. Table 3 row "general mechanisms".

    Metric privacy: Chatzikokolakis, Andres, Bordenabe, Palamidessi, "Broadening the scope
    of differential privacy using metrics", 2013. ``p = e^{d01}``,
    ``beta = (e^{d01} - 1)/(e^{d01} + 1)``, ``q = e^{dmax}``.
    """
    inp = _metric_inputs(d01, dmax)
    d01, dmax = inp.values
    p = jnp.exp(d01)
    return inp.params(p, (p - 1.0) / (p + 1.0), jnp.exp(dmax))


def metric_laplace(d01, dmax) -> VRParams:
    """Laplace mechanism on R with the l1 metric. Table 3 row "Laplace mechanism".

    Original: Alvim, Chatzikokolakis, Palamidessi, Pazii, "Local differential privacy on
    metric spaces", 2018. Density ``exp(-|y - x|)/2`` (distances in units of the metric).

    ``p = e^{d01}``, ``beta = TV(Lap(0,1), Lap(d01,1)) = 1 - e^{-d01/2}``, ``q = e^{dmax}``.
    """
    inp = _metric_inputs(d01, dmax)
    d01, dmax = inp.values
    return inp.params(jnp.exp(d01), -jnp.expm1(-0.5 * d01), jnp.exp(dmax))


# Composite Gauss-Legendre rule on [0, 1]: 48 panels of 16 nodes.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(16)
_PANELS = 48
_QX = ((np.arange(_PANELS)[:, None] + 0.5 * (_GL_X[None, :] + 1.0)) / _PANELS).ravel()
_QW = (np.broadcast_to(0.5 * _GL_W[None, :], (_PANELS, 16)) / _PANELS).ravel()
_TAIL_W = 45.0  # beyond h cosh z = 45, 1 - F < 46 e^-45 ~ 1e-18: the tail integrates sech exactly


def _gamma2_cdf(w):
    """F(w) = P[Gamma(2, 1) <= w] = 1 - (1 + w) e^{-w}, accurate in relative terms for small w.

    For ``w < 1``: ``F(w) = w^2 sum_k (-w)^k / (k! (k + 2))`` (Horner, 23 terms); else direct.
    """
    small = w < 1.0
    ws = jnp.where(small, w, 0.0)
    series = jnp.full_like(ws, 1.0 / (math.factorial(22) * 24))
    for k in range(21, -1, -1):
        series = 1.0 / (math.factorial(k) * (k + 2)) - ws * series
    direct = -jnp.expm1(-w) - w * jnp.exp(-w)
    return jnp.where(small, ws * ws * series, direct)


def planar_laplace_beta(d01) -> jax.Array:
    """Total variation between planar Laplace densities ``e^{-||y - u||}/(2 pi)`` at distance ``d01``.

    Table 3's integral ``2 int_0^{d01/2} int_R e^{-sqrt((x - d01/2)^2 + y^2)}/(2 pi) dy dx``
    equals ``P[|X_1| <= h]``, ``h = d01/2``, for ``X`` planar Laplace at the origin; with the
    radius ``R ~ Gamma(2, 1)`` and a uniform angle, substituting ``r cos(theta) = h``, ``r =
    h cosh(z)``::

        beta = (2/pi) int_0^inf F(h cosh z) / cosh z dz,   F(w) = 1 - (1 + w) e^{-w},

    computed by a fixed composite Gauss-Legendre rule on ``[0, Z]``, ``h cosh Z = 45``, plus
    the exact tail ``int_Z^inf sech = 2 arctan(e^{-Z})``. Relative error ~1e-15 for every
    ``d01 >= 0`` (checked against mpmath in the tests).
    """
    h = 0.5 * f64(d01)
    hs = jnp.where(h > 0.0, h, 1.0)
    big_z = jnp.arccosh(jnp.maximum(1.0, _TAIL_W / hs))
    shape1 = (1,) * h.ndim + (-1,)
    z = big_z[..., None] * jnp.reshape(jnp.asarray(_QX), shape1)
    w = jnp.reshape(jnp.asarray(_QW), shape1)
    body = jnp.sum(w * _gamma2_cdf(hs[..., None] * jnp.cosh(z)) / jnp.cosh(z), axis=-1) * big_z
    beta = (2.0 / jnp.pi) * (body + 2.0 * jnp.arctan(jnp.exp(-big_z)))
    return jnp.where(h > 0.0, beta, 0.0)


def planar_laplace(d01, dmax) -> VRParams:
    """Planar Laplace on R^2 with the l2 metric. Table 3 row "planar Laplace".

    Original: Andres, Bordenabe, Chatzikokolakis, Palamidessi, "Geo-indistinguishability",
    CCS 2013. Density ``e^{-||y - x||_2}/(2 pi)``.

    ``p = e^{d01}``, ``q = e^{dmax}``, ``beta = 2 int_0^{d01/2} int_R
    e^{-sqrt((x - d01/2)^2 + y^2)}/(2 pi) dy dx = (2/pi)(int_0^h K_0 - h K_0(h))``, ``h = d01/2``,
    evaluated by :func:`planar_laplace_beta`.
    """
    inp = _metric_inputs(d01, dmax)
    d01, dmax = inp.values
    return inp.params(jnp.exp(d01), planar_laplace_beta(jnp.where(inp.ok, d01, 0.0)), jnp.exp(dmax))


# --------------------------------------------------------------------------------------
# Multi-message protocols (Table 4): p = inf rows, blanket messages per user
# --------------------------------------------------------------------------------------

_COIN = Arg("coin", "real", 0.0, 1.0, low_open=True, help="probability that a blanket bit is 1")
_F_CZ = Arg("f", "real", 0.0, 0.5, low_open=True, high_open=False, help="bit-flip probability, 0 < f <= 1/2")
_D_BINS = Arg("d", "int", 2.0, help="number of bins (domain size)")
_S_BINS = Arg("s", "int", 1.0, help="number of special bins per value, 1 <= s <= d - 1")
_F_MIX = Arg("f", "real", 0.0, 1.0, low_open=True, help="GRR flip probability, 0 < f <= (d-1)/d")


def balcer_cheu(coin, blanket_per_user) -> VRParams:
    """Binary summation with biased blanket coins. Table 4 row "Balcer et al. (Balcer and Cheu, 2020)".

    Original: Balcer, Cheu, "Separating local & shuffled differential privacy via
    histograms", ITC 2020. Each user sends its bit ``x`` and ``blanket_per_user`` bits
    ``~ Bernoulli(coin)``.

    ``p = inf``, ``beta = 1``, ``q = max(1/coin, 1/(1 - coin))``.
    """
    inp = _Inputs((_COIN, coin), (_BLANKET, blanket_per_user))
    coin, m = inp.values
    return inp.params(jnp.inf, 1.0, jnp.maximum(1.0 / coin, 1.0 / (1.0 - coin)), m)


def balcer_uniform(blanket_per_user) -> VRParams:
    """Binary summation with uniform blanket coins. Table 4 row "Balcer et al. (2021)".

    Original: Balcer, Cheu, Joseph, Mao, "Connecting robust shuffle privacy and
    pan-privacy", SODA 2021. Each user sends its bit and ``blanket_per_user`` uniform bits.

    ``p = inf``, ``beta = 1``, ``q = 2``.
    """
    inp = _Inputs((_BLANKET, blanket_per_user))
    (m,) = inp.values
    return inp.params(jnp.inf, 1.0, 2.0, m)


def cheu_zhilyaev(f, blanket_per_user) -> VRParams:
    """Histograms from fake users. Table 4 row "Cheu et al. (Cheu and Zhilyaev, 2022)".

    Original: Cheu, Zhilyaev, "Differentially private histograms in the shuffle model from
    fake users", IEEE S&P 2022. Each user flips every bit of its one-hot ``x in {0,1}^d``
    w.p. ``f`` and sends ``blanket_per_user`` (the paper's ``m - 1``) fake messages: the
    zero vector with bits flipped w.p. ``f``.

    ``p = (1-f)^2/f^2``, ``beta = 1 - 2f``, ``q = (1-f)/f``.
    """
    inp = _Inputs((_F_CZ, f), (_BLANKET, blanket_per_user))
    f, m = inp.values
    odds = (1.0 - f) / f
    return inp.params(odds * odds, 1.0 - 2.0 * f, odds, m)


def balls_into_bins(d, s, blanket_per_user) -> VRParams:
    """Balls into bins. Table 4 row "Balls-into-bins (Luo et al., 2022)".

    Original: Luo, Wang, Yi, "Frequency estimation in the shuffle model with almost a single
    message", CCS 2022. Each value owns ``s`` special bins out of ``d``; a user throws its
    ball into a uniform special bin of its value and ``blanket_per_user`` blanket balls into
    uniform bins (for a random number of blanket balls per user, model it as
    ``blanket_per_user`` slots each used w.p. ``rho`` and divide ``q`` by ``rho``).

    ``p = inf``, ``beta = min(s, d - s)/s`` (``= 1`` for ``d >= 2s``, the table's value),
    ``q = d/s``.
    """
    inp = _Inputs((_D_BINS, d), (_S_BINS, s), (_BLANKET, blanket_per_user))
    d, s, m = inp.values
    inp.require(s <= d - 1.0, "s", "must be <= d - 1")
    return inp.params(jnp.inf, jnp.minimum(s, d - s) / s, d / s, m)


def pure_dump(d, blanket_per_user) -> VRParams:
    """pureDUMP (not in the seed tables). Table 4 family, derived from the definition.

    Original: Li et al., "Privacy enhancement via dummy points in the shuffle model", IEEE
    TDSC 2023. Each user sends its value ``x in [d]`` unperturbed and ``blanket_per_user``
    dummy points uniform on ``[d]``.

    ``p = inf``, ``beta = 1``, ``q = d``.
    """
    inp = _Inputs((_D_BINS, d), (_BLANKET, blanket_per_user))
    d, m = inp.values
    return inp.params(jnp.inf, 1.0, d, m)


def mix_dump(f, d, blanket_per_user) -> VRParams:
    """mixDUMP. Table 4 row "mixDUMP (Li et al., 2023)".

    Original: Li et al., "Privacy enhancement via dummy points in the shuffle model", IEEE
    TDSC 2023. Each user reports ``x`` by GRR (kept w.p. ``1 - f``, else uniform among the
    other ``d - 1`` values) and sends ``blanket_per_user`` dummy points uniform on ``[d]``.

    ``p = (1-f)(d-1)/f``, ``beta = ((1-f)(d-1) - f)/(d-1)``, ``q = (1-f) d``.
    """
    inp = _Inputs((_F_MIX, f), (_D_BINS, d), (_BLANKET, blanket_per_user))
    f, d, m = inp.values
    inp.require(f <= (d - 1.0) / d, "f", "must be <= (d-1)/d")
    return inp.params((1.0 - f) * (d - 1.0) / f, ((1.0 - f) * (d - 1.0) - f) / (d - 1.0), (1.0 - f) * d, m)


def laplace_lower(eps0) -> LowerParams:
    """Theorem 5.1 parameters of :func:`laplace` for inputs 0 and 1, others at 1/2.

    ``Y1 = {y > 1/2}``: ``p0 = R(1)(Y1)/R(0)(Y1) = 2 e^{eps0/2} - 1``,
    ``beta = 1 - e^{-eps0/2}``, and ``x* = 1/2`` maximizes ``min(q0, q1)``:
    ``q0 = q1 = 2 - e^{-eps0/2}``.
    """
    inp = _Inputs((_EPS0, eps0))
    (eps0,) = inp.values
    hh = jnp.exp(-0.5 * eps0)
    return inp.lower(2.0 / hh - 1.0, -jnp.expm1(-0.5 * eps0), 2.0 - hh, 2.0 - hh)


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Entry:
    """A catalog row: how to build the mechanism's parameters from CLI-style options.

    ``fn(**kwargs)`` returns :class:`VRParams`; ``lower(**kwargs)`` (same options) returns
    :class:`LowerParams` where derived. ``example`` is a valid set of options.
    """

    fn: Callable[..., VRParams]
    args: tuple[Arg, ...]
    description: str
    source: str
    example: dict
    lower: Callable[..., LowerParams] | None = None
    constraints: str = ""

    @property
    def multi_message(self) -> bool:
        return any(a.name == "blanket_per_user" for a in self.args)


CATALOG: dict[str, Entry] = {
    "general": Entry(general, (_EPS0,), "any eps0-LDP randomizer (worst case, stronger clone)",
                     "Table 2/6 general mechanisms; Kairouz, Oh, Viswanath 2014", {"eps0": 1.0}),
    "laplace": Entry(laplace, (_EPS0,), "Laplace mechanism on [0, 1], scale 1/eps0",
                     "Table 2 Laplace; Dwork, McSherry, Nissim, Smith 2006", {"eps0": 1.0}, laplace_lower),
    "privunit": Entry(privunit, (_EPS0, _C), "PrivUnit on the unit sphere with cap area c",
                      "Table 2 PrivUnit; Bhowmick et al. 2018", {"eps0": 1.0, "c": 0.3}),
    "grr": Entry(grr, (_EPS0, _K2), "k-ary (generalized) randomized response",
                 "Table 2 GRR; Warner 1965, Kairouz, Bonawitz, Ramage 2016", {"eps0": 1.0, "k": 10},
                 grr_lower),
    "binary-rr": Entry(binary_rr, (_EPS0, _D2), "binary randomized response on one-hot d options",
                       "Table 2 binary RR; Duchi, Jordan, Wainwright 2013", {"eps0": 1.0, "d": 10},
                       binary_rr_lower),
    "rappor": Entry(rappor, (_EPS0, _D2), "basic one-time RAPPOR (= binary RR)",
                    "Table 2 binary RR; Erlingsson, Pihur, Korolova 2014", {"eps0": 1.0, "d": 10},
                    binary_rr_lower),
    "subset-selection": Entry(subset_selection, (_EPS0, _D2, _K1), "k-subset selection on d options",
                              "Table 2 k-subset; Wang et al. 2019, Ye and Barg 2018",
                              {"eps0": 1.0, "d": 10, "k": 3}, subset_selection_lower, "k <= d - 1"),
    "local-hash": Entry(local_hash, (_EPS0, _L, _COLLISION),
                        "local hashing (OLH) with hash range l",
                        "Table 2 local hash; Wang, Blocki, Li, Jha 2017",
                        {"eps0": 1.0, "l": 4, "collision": 0.0}, local_hash_lower),
    "hadamard-response": Entry(hadamard_response, (_EPS0, _BIGK, _S_HR, _B_HR),
                               "Hadamard response HR(K, s, B)",
                               "Table 2 Hadamard response (B=1, B>1); Acharya, Sun, Zhang 2018",
                               {"eps0": 1.0, "K": 16, "s": 8, "B": 1}, hadamard_response_lower,
                               "s <= K/B, s < K"),
    "sampling-rappor": Entry(sampling_rappor, (_EPS0, _D2, _S_SET), "sampling RAPPOR on s-item sets of d",
                             "Table 2 sampling RAPPOR; Qin et al. 2016", {"eps0": 1.0, "d": 10, "s": 2},
                             None, "s <= d - 1"),
    "wheel": Entry(wheel, (_EPS0, _D2, _S_SET, _ARC), "Wheel mechanism on s-item sets of d",
                   "Table 2 Wheel; Wang et al. 2020", {"eps0": 1.0, "d": 10, "s": 2, "arc": 0.1},
                   None, "s <= d - 1, s * arc <= 1"),
    "k-subset-exponential": Entry(k_subset_exponential, (_EPS0, _D2, _K_EXP, _S_SET),
                                  "k-subset exponential mechanism on s-item sets of d",
                                  "Table 6 k-subset exponential; Wang et al. 2018 (PrivSet)",
                                  {"eps0": 1.0, "d": 10, "k": 3, "s": 2}, None, "s <= d - 1, k <= d - s"),
    "pckv-grr": Entry(pckv_grr, (_EPS1, _EPS2, _KEYS), "PCKV-GRR key-value perturbation on d keys",
                      "derived (not in seed tables); Gu et al. 2020", {"eps1": 1.0, "eps2": 1.0, "d": 10}),
    "duchi": Entry(duchi, (_EPS0,), "Duchi et al. mechanism for [-1, 1]^dim",
                   "Table 6 Duchi et al.; Duchi, Jordan, Wainwright 2013", {"eps0": 1.0}),
    "harmony": Entry(harmony, (_EPS0,), "Harmony mechanism for [-1, 1]^dim",
                     "Table 6 Harmony; Nguyen et al. 2016", {"eps0": 1.0}),
    "privkv": Entry(privkv, (_EPS1, _EPS2, _D2, _S_KV), "PrivKV on users with at most s of d keys",
                    "Table 6 PrivKV; Ye et al. 2019", {"eps1": 1.0, "eps2": 1.0, "d": 10, "s": 2},
                    None, "s <= d"),
    "collision": Entry(collision, (_EPS0, _S_COL, _L), "(d, s)-Collision: s hashed items, output one of l",
                       "Table 2 (d,s)-Collision (paper repository's table); Wang et al. 2021",
                       {"eps0": 1.0, "s": 2, "l": 8}, None, "s <= l - 1"),
    "metric-general": Entry(metric_general, (_D01, _DMAX), "any local d_X-private randomizer",
                            "Table 3 general mechanisms; Chatzikokolakis et al. 2013",
                            {"d01": 1.0, "dmax": 2.0}, None, "dmax >= d01"),
    "metric-laplace": Entry(metric_laplace, (_D01, _DMAX), "Laplace mechanism on R, l1 metric",
                            "Table 3 Laplace; Alvim et al. 2018", {"d01": 1.0, "dmax": 2.0}, None,
                            "dmax >= d01"),
    "planar-laplace": Entry(planar_laplace, (_D01, _DMAX), "planar Laplace on R^2, l2 metric",
                            "Table 3 planar Laplace; Andres et al. 2013", {"d01": 1.0, "dmax": 2.0}, None,
                            "dmax >= d01"),
    "balcer-cheu": Entry(balcer_cheu, (_COIN, _BLANKET), "binary summation, blanket bits ~ Bernoulli(coin)",
                         "Table 4; Balcer, Cheu 2020", {"coin": 0.3, "blanket_per_user": 2}),
    "balcer-uniform": Entry(balcer_uniform, (_BLANKET,), "binary summation, uniform blanket bits",
                            "Table 4; Balcer, Cheu, Joseph, Mao 2021", {"blanket_per_user": 2}),
    "cheu-zhilyaev": Entry(cheu_zhilyaev, (_F_CZ, _BLANKET), "histograms from fake users (flip prob f)",
                           "Table 4; Cheu, Zhilyaev 2022", {"f": 0.2, "blanket_per_user": 3}),
    "balls-into-bins": Entry(balls_into_bins, (_D_BINS, _S_BINS, _BLANKET), "balls into d bins, s special",
                             "Table 4; Luo, Wang, Yi 2022", {"d": 10, "s": 2, "blanket_per_user": 1},
                             None, "s <= d - 1"),
    "pure-dump": Entry(pure_dump, (_D_BINS, _BLANKET), "pureDUMP: exact value plus uniform dummies",
                       "derived (not in seed tables); Li et al. 2023", {"d": 10, "blanket_per_user": 2}),
    "mix-dump": Entry(mix_dump, (_F_MIX, _D_BINS, _BLANKET), "mixDUMP: GRR value plus uniform dummies",
                      "Table 4 mixDUMP; Li et al. 2023", {"f": 0.5, "d": 10, "blanket_per_user": 2},
                      None, "f <= (d-1)/d"),
}
