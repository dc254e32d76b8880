"""Parameter containers of the randomizer catalog, option specifications and their validation.

:class:`VRParams` ``(p, beta, q)`` (upper side, Theorem 4.7) and :class:`LowerParams`
``(p0, beta, q0, q1)`` (Theorem 5.1) are what every catalog function returns; :class:`Arg` is
one option with its valid range, and :class:`Inputs` broadcasts and validates a row's options
with the package convention (eager: ValueError naming the option, its value and its range;
traced: NaN fields, engine status INVALID). Definitions: docs/math.md section 8.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from jaxshuffle._config import array_module, as_float64, broadcast_shapes_or_raise, check, is_concrete
from jaxshuffle.engine.two_count.pair import TwoCountPair, vr_pair, worst_case_beta

# --------------------------------------------------------------------------------------
# Parameter containers
# --------------------------------------------------------------------------------------

def blanket_messages(n, blanket_per_user=None, others_join: bool = False) -> jax.Array:
    """Blanket messages ("other users" of a two-count pair) among ``n`` users.

    ``n - 1`` other users' messages for a single-message randomizer (``blanket_per_user`` None);
    for a multi-message protocol ``n m`` (every user, the victim included, sends ``m``), plus the
    ``n - 1`` others' own messages where they join the blanket (``others_join``: a lower pair whose
    others' messages are distributed like blanket messages on its marker sets).
    """
    n = as_float64(n, array_module(n, blanket_per_user))
    if blanket_per_user is None:
        return n - 1.0
    return n * blanket_per_user + ((n - 1.0) if others_join else 0.0)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class KaryRR:
    """The k-ary randomized response itself, not only its variation-ratio parameters.

    A :class:`VRParams` that carries one (``mechanism``) describes exactly this mechanism:
    ``R(x) = x`` with probability ``e^eps0/(e^eps0 + k - 1)``, each other option ``1/(e^eps0 + k - 1)``.
    :func:`jaxshuffle.amplify` then adds the tight blanket (three-count) bound and the exact
    lower bounds of :func:`jaxshuffle.blanket.krr_bounds` (docs/math.md section 10).

    Attributes:
      eps0: the local budget (float64 array, the parameters' shape).
      k: the number of options, integer-valued (float64 array, the parameters' shape).
    """

    eps0: jax.Array
    k: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class MatrixMechanism:
    """A finite randomizer given by its matrix ``matrix[x, y] = P(R(x) = y)`` (one point, concrete).

    A :class:`VRParams` that carries one (``mechanism``) describes exactly this mechanism;
    :func:`jaxshuffle.amplify` then adds the certified blanket bound and the exact datasets' lower
    bound of :func:`jaxshuffle.blanket_matrix.matrix_bounds` (docs/math.md section 11).

    Attributes:
      matrix: the ``K x K'`` row-stochastic matrix (float64), one point (checked by :func:`with_matrix`).
    """

    matrix: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RowMatrix:
    """A catalog row's finite mechanism, point by point: its matrix builder's name and options.

    The mechanism at point ``i`` is the matrix
    :func:`jaxshuffle.randomizers.matrices.row_matrix` ``(builder, *(option.ravel()[i] for option in
    options))`` (``None`` where the builder does not cover the point); :func:`jaxshuffle.amplify` then
    adds the certified blanket bound of that matrix (:func:`jaxshuffle.blanket_matrix.matrix_bounds`,
    docs/math.md section 11), as for a :class:`MatrixMechanism`. ``options`` broadcast to the
    :class:`VRParams` fields' shape (NaN where the point is invalid).

    Attributes:
      builder: the row's builder name, a key of
        :data:`~jaxshuffle.randomizers.matrices.ROW_MATRICES` (static in the pytree).
      options: the row's options, in its builder's order (arrays broadcasting to the fields' shape).
    """

    builder: str = dataclasses.field(metadata=dict(static=True))
    options: tuple

    def points(self, shape) -> list[tuple]:
        """Each point's options (float64 scalars), the options broadcast to ``shape``, in ravel order."""
        return list(zip(*(np.broadcast_to(np.asarray(o, np.float64), shape).ravel() for o in self.options)))


#: relative slack of :func:`with_matrix`'s comparisons of the matrix's ``p``, ``q`` with the parameters'
#: (float64 rounding of ``e^eps0`` and of the matrix entries; a few ulps)
MATRIX_RATIO_REL = 1e-12
#: absolute slack of :func:`with_matrix`'s comparison of the matrix's total variation with ``beta``
#: (the rows' rounding, as the row-sum tolerance)
MATRIX_TV_ABS = 1e-9
#: largest ``K^2 K'`` for which :func:`with_matrix` computes the matrix's total variation (about 0.5 s)
MATRIX_TV_MAX_WORK = 1 << 27


def matrix_ratio(R: np.ndarray) -> float:
    """The matrix's largest probability ratio ``max_{y, x, x'} R(x, y) / R(x', y)`` (its ``p``, so
    ``log`` of it is its LDP epsilon): ``inf`` where a column holds both a zero and a nonzero entry,
    columns of zeros ignored; 1 for a matrix with no nonzero column (not row-stochastic)."""
    hi, lo = R.max(axis=0), R.min(axis=0)
    live = hi > 0
    if not live.any():
        return 1.0
    if (lo[live] == 0).any():
        return math.inf
    return float(np.max(hi[live] / lo[live]))


def matrix_total_variation(R: np.ndarray) -> float:
    """The matrix's largest total variation between two rows, ``max_{x, x'} (1/2) sum_y |R(x, y) - R(x', y)|``
    (its ``beta``); ``O(K^2 K')`` time, ``O(K K')`` memory."""
    return max(float(np.max(0.5 * np.abs(R - R[x]).sum(axis=1))) for x in range(R.shape[0]))


def _input_count(mechanism, shape) -> int | None:
    """The number of inputs the parameters' own mechanism has, where it says (one point), else None."""
    if isinstance(mechanism, KaryRR) and is_concrete(mechanism.k):
        k = np.unique(np.asarray(mechanism.k, np.float64))
        k = k[np.isfinite(k)]
        return int(k[0]) if k.size == 1 else None
    if isinstance(mechanism, MatrixMechanism) and is_concrete(mechanism.matrix):
        return int(np.shape(mechanism.matrix)[0])
    if isinstance(mechanism, RowMatrix) and all(is_concrete(o) for o in mechanism.options):
        points = {tuple(pt) for pt in mechanism.points(shape)}
        if len(points) == 1:
            from jaxshuffle.randomizers.matrices import row_matrix
            M = row_matrix(mechanism.builder, *points.pop())
            return None if M is None else int(M.shape[0])
    return None


def with_matrix(params: VRParams, matrix) -> VRParams:
    """``params`` carrying :class:`MatrixMechanism` ``matrix``, once the matrix is checked against them.

    ``amplify`` then folds in the matrix engine's bounds as bounds *of the randomizer the parameters
    describe*, so a matrix that is not that randomizer would give a wrong certified answer. Checked:

    * the matrix itself (:func:`jaxshuffle.exact.enumerate.validate_matrix`): a real numeric 2-D array
      (complex, boolean, object and string dtypes refused, not cast), finite, entries ``>= 0``, every
      row summing to 1 within ``1e-9`` (absolute), and at least 2 rows (inputs);
    * its input count against the parameters' own mechanism where they carry one at a single point
      (:class:`KaryRR`'s ``k``, a :class:`RowMatrix`'s built matrix, a previously attached
      :class:`MatrixMechanism`); plain ``VRParams`` carry no input count, so none is checked there;
    * its largest probability ratio ``p_matrix = max_{y, x, x'} R(x, y) / R(x', y)`` (``inf`` where a
      column holds both a zero and a nonzero entry) is at most ``p (1 + 1e-12)``;
    * its largest total variation between two rows is at most ``beta + 1e-9`` (for ``K^2 K' <= 2^27``
      only: above, this ``O(K^2 K')`` check is skipped);
    * for a single-message randomizer (``blanket_per_user`` None) the blanket ratio of the matrix,
      ``max R(x1, y) / R(x, y)`` over every pair of inputs, is ``p_matrix``: at most ``q (1 + 1e-12)``.

    The definitions of ``p, beta, q`` (docs/math.md section 8) make each an upper bound on the
    matrix's own value, so a matrix above any of them is not the mechanism. Parameter points that are
    NaN (invalid options) or traced are not compared. The matrix engine takes every pair of rows as a
    possible pair of the victim's inputs, so the metric rows, whose ``p`` and ``beta`` describe only the
    victim's two inputs (0 and 1), accept their matrix only where no other pair of rows is further apart
    (``metric_exponential(1, 1, 1)``'s yes, ``metric_exponential(0.1, 5, 5)``'s no).

    Args:
      params: the randomizer's :class:`VRParams`.
      matrix: array-like ``K x K'`` matrix, ``matrix[x, y] = P(R(x) = y)``.

    Returns:
      ``params`` with ``mechanism = MatrixMechanism(matrix)`` (float64).

    Raises:
      ValueError: one line naming ``matrix``, the property it breaks and the allowed range.
    """
    from jaxshuffle.exact.enumerate import validate_matrix

    R = validate_matrix(matrix)
    check(np.array(R.shape[0] >= 2), "matrix", "must have at least 2 rows (inputs)", value=R.shape[0])
    k = _input_count(params.mechanism, np.shape(params.p))
    if k is not None:
        check(np.array(R.shape[0] == k), "matrix",
              f"must have as many rows as the randomizer has inputs ({k}), got {R.shape[0]} rows")
    ratio = matrix_ratio(R)
    # O(K^2 K'): skipped (no beta check) above MATRIX_TV_MAX_WORK, where it would cost seconds
    tv = matrix_total_variation(R) if R.shape[0] ** 2 * R.shape[1] <= MATRIX_TV_MAX_WORK else None

    def compare(field, value: float, name: str, what: str, slack) -> None:
        if not is_concrete(field):
            return
        bound = np.asarray(field, np.float64)
        ok = np.isnan(bound) | (value <= slack(bound))
        if not ok.all():
            b = float(bound[~ok].flat[0]) if bound.ndim else float(bound)
            eps = lambda x: f" (eps0 = {math.log(x):.6g})" if name != "beta" and x > 0 else ""  # noqa: E731
            raise ValueError(f"matrix: its {what} is {value:.6g}{eps(value)}, above the parameters' "
                             f"{name} = {b:.6g}{eps(b)}; it must be at most {name}")

    compare(params.p, ratio, "p", "largest probability ratio", lambda b: b * (1.0 + MATRIX_RATIO_REL))
    if tv is not None:
        compare(params.beta, tv, "beta", "largest total variation between two rows", lambda b: b + MATRIX_TV_ABS)
    if params.blanket_per_user is None:
        compare(params.q, ratio, "q", "blanket ratio (largest probability ratio)",
                lambda b: b * (1.0 + MATRIX_RATIO_REL))
    return dataclasses.replace(params, mechanism=MatrixMechanism(jnp.asarray(R, dtype=jnp.float64)))


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
      mechanism: ``None``, or the concrete mechanism (:class:`KaryRR`; :class:`MatrixMechanism` for
        a small finite one; :class:`RowMatrix` for a catalog row whose matrix is built point by
        point) where a tighter certified engine exists for it; the parameters above then describe
        that mechanism exactly.
    """

    p: jax.Array
    beta: jax.Array
    q: jax.Array
    blanket_per_user: jax.Array | None = None
    mechanism: KaryRR | MatrixMechanism | RowMatrix | None = None

    def krr(self) -> KaryRR | None:
        """The k-ary RR this randomizer is, where k-RR's blanket engine covers it (a single-message
        randomizer whose ``mechanism`` is :class:`KaryRR`); None otherwise."""
        return self.mechanism if isinstance(self.mechanism, KaryRR) and self.blanket_per_user is None else None

    def n_blanket(self, n) -> jax.Array:
        """Number of blanket messages ("other users" of the two-count pair) among ``n`` users.

        ``n - 1`` for a single-message randomizer, ``n * blanket_per_user`` for a
        multi-message protocol (every user, the victim included, sends blanket messages).
        """
        return blanket_messages(n, self.blanket_per_user)

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

    For a multi-message protocol, ``blanket_per_user`` is its ``m`` and ``others_join_blanket``
    says whether the other users' own messages are distributed like blanket messages on the
    marker sets (then they count in the lower pair's blanket; docs/math.md section 19.4).
    Definitions: docs/math.md section 8 ("Theorem 5.1 lower parameters").

    Attributes:
      p0: the expected ratio ``P1(Y1) / P0(Y1)`` on the differing outputs (>= 1).
      beta: the total variation ``P1(Y1) - P0(Y1)`` of the pair of inputs, in ``[0, (p0-1)/(p0+1)]``.
      q0: ``P0(Y0) / R*(Y0)``, the victim's mass on ``Y0`` against the worst other input's (>= 1).
      q1: ``P1(Y1) / R*(Y1)``, the same on ``Y1`` (>= 1).
      blanket_per_user: ``None`` for a single-message randomizer; for a multi-message protocol its ``m``.
      others_join_blanket: whether the other users' own messages join the lower pair's blanket (above;
        static in the pytree).
    """

    p0: jax.Array
    beta: jax.Array
    q0: jax.Array
    q1: jax.Array
    blanket_per_user: jax.Array | None = None
    others_join_blanket: bool = dataclasses.field(default=False, metadata=dict(static=True))

    def pair(self) -> TwoCountPair:
        return vr_pair(self.p0, self.beta, q0=self.q0, q1=self.q1)

    def n_blanket(self, n) -> jax.Array:
        """Blanket messages of the lower pair among ``n`` users: ``n - 1`` others (single message),
        or ``n m`` plus, where they join it, the ``n - 1`` others' own messages (multi-message)."""
        return blanket_messages(n, self.blanket_per_user, self.others_join_blanket)


# --------------------------------------------------------------------------------------
# Argument specifications and validation
# --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Arg:
    """One mechanism option: name, kind (``"real"`` or ``"int"``), valid range, help, default.

    The range is ``low .. high`` with open or closed ends (``high = inf`` means finite
    values only); ``"int"`` options are float64 arrays holding integers.

    Attributes:
      name: the option's name, as the builder's keyword and the CLI's ``--name``.
      kind: ``"real"`` or ``"int"``.
      low: the range's lower end.
      high: the range's upper end (default ``inf``: finite values only).
      low_open: whether ``low`` itself is excluded (default False).
      high_open: whether ``high`` itself is excluded (default True).
      help: one line on the option, as the CLI's help prints it.
      default: the option's default value, or ``None`` for a required option.
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

    def valid(self, x: jax.Array, xp=jnp) -> jax.Array:
        """Boolean array; NaN is never valid. ``xp``: the array module of ``x``."""
        ok = (x > self.low) if self.low_open else (x >= self.low)
        ok = ok & ((x < self.high) if (self.high_open or self.high == math.inf) else (x <= self.high))
        if self.kind == "int":
            ok = ok & (x == xp.floor(x))
        return ok


def admit_beta(p, beta, xp=jnp, steps: int = 4):
    """``p`` raised, where rounding left ``beta > (p-1)/(p+1)``, to a float whose bound admits ``beta``.

    The mechanism has ``beta <= (p-1)/(p+1)`` exactly; the two floats may break it by rounding (Laplace
    at ``eps0 = 2.3e-16``: ``p = e^eps0`` rounds to ``1 + 2.2e-16``, whose bound ``1.11e-16`` is below
    ``beta = 1.15e-16``). The upper pair must not lower ``beta`` (nor ``p``) below the mechanism's, so
    ``p`` moves up: to ``(1 + beta)/(1 - beta)``, then by ulps until the bound admits ``beta`` (a larger
    ``p`` only weakens the claim). Under tracing the raised lanes keep ``p``'s derivative. Four ulp steps
    leave no ``beta`` short over ``beta`` from 1e-17 to ``1 - 1e-14`` with ``p`` up to 11 ulps low
    (``tests/test_randomizers.py::test_admit_beta_never_leaves_beta_short``), so callers do not cap after it.
    """
    p0, b0 = (jax.lax.stop_gradient(p), jax.lax.stop_gradient(beta)) if xp is jnp else (p, beta)
    inf = xp.asarray(np.inf, dtype=p0.dtype)
    short = lambda x: b0 > worst_case_beta(x, xp)  # noqa: E731
    below_one = b0 < 1.0
    need = xp.where(below_one, (1.0 + b0) / xp.where(below_one, 1.0 - b0, 1.0), inf)
    raised = xp.where(short(p0), xp.maximum(p0, need), p0)
    for _ in range(steps):
        raised = xp.where(short(raised), xp.nextafter(raised, inf), raised)
    if xp is not jnp:
        return raised
    return xp.where(raised == p0, p, p + (raised - p0))  # p = inf stays inf (inf - inf is NaN)


class Inputs:
    """Broadcast float64 arguments plus a validity mask (eager: raise; traced: mask).

    ``xp`` is the array module the row computes in: ``jax.numpy``, or, for a row written with ``xp``
    that asks for it (``numpy=True``), numpy where every value is plain (no small XLA program per
    eager operation; :func:`~jaxshuffle._config.array_module`). Rows that compute in ``jnp`` keep
    ``jnp`` values: XLA flushes subnormal numbers to zero and numpy does not, so a row validated in
    one module and computed in the other could accept a value it then turns into NaN. The row's
    parameters come back as jax arrays either way.

    Args:
      *spec_values: ``(Arg, value)`` pairs, one per option, in the row's order; the values are
        broadcast together as float64 and checked against each :class:`Arg`'s range.
      numpy: compute in numpy where every value is plain (above; default False: ``jnp``).

    Raises:
      ValueError: naming the option, its value and its range, for an invalid value or shapes that do not
        broadcast (eager: concrete values; traced values are masked instead, NaN fields).
    """

    def __init__(self, *spec_values: tuple[Arg, object], numpy: bool = False):
        self.xp = xp = array_module([v for _, v in spec_values]) if numpy else jnp
        arrays = {a.name: as_float64(v, xp) for a, v in spec_values}
        self.shape = broadcast_shapes_or_raise(**arrays)
        self.values = [xp.broadcast_to(x, self.shape) for x in arrays.values()]
        self.concrete = is_concrete(*self.values)
        self.ok = xp.ones(self.shape, dtype=bool)
        for (spec, _), x in zip(spec_values, self.values):
            self.require(spec.valid(x, xp), spec.name, f"must be {spec.range_text()}", x)

    def _jax(self, tree):
        """The row's output as jax arrays (one copy to the device from numpy)."""
        return tree if self.xp is jnp else jax.tree.map(jnp.asarray, tree)

    def require(self, cond, name: str, message: str, value=None) -> None:
        cond = self.xp.broadcast_to(cond, self.shape)
        if self.concrete:
            check(cond, name, message, value=value)
        self.ok = self.ok & cond

    def params(self, p, beta, q, blanket_per_user=None, mechanism: KaryRR | RowMatrix | None = None) -> VRParams:
        xp = self.xp
        p = admit_beta(xp.asarray(p, dtype=xp.float64), xp.asarray(beta, dtype=xp.float64), xp)
        fields = [p, beta, q] + ([] if blanket_per_user is None else [blanket_per_user])
        mask = lambda x: xp.where(self.ok, xp.broadcast_to(x, self.shape), xp.nan)  # noqa: E731
        fields = [mask(x) for x in fields]
        if mechanism is not None:
            mechanism = jax.tree.map(mask, mechanism)
            return self._jax(VRParams(fields[0], fields[1], fields[2],
                                      blanket_per_user=None if blanket_per_user is None else fields[3],
                                      mechanism=mechanism))
        return self._jax(VRParams(*fields))

    def lower(self, p0, beta, q0, q1) -> LowerParams:
        xp = self.xp
        p0 = xp.asarray(p0, dtype=xp.float64)
        beta = xp.minimum(beta, worst_case_beta(p0, xp))
        # The others' marker probabilities r_i = alpha p0 / q_i sum to at most 1, with equality
        # when x* puts all its mass on Y0 and Y1 (GRR k = 2 with x* = x0, Laplace with x* = 1/2);
        # vr_pair accepts a rounding excess (r0 + r1 <= 1 + 1e-12) and clips it.
        return self._jax(LowerParams(*(xp.where(self.ok, xp.broadcast_to(x, self.shape), xp.nan)
                                       for x in (p0, beta, q0, q1))))


EPS0 = Arg("eps0", "real", 0.0, 700.0, high_open=False, help="local budget eps0 (eps0-LDP; p = e^eps0)")
EPS1 = Arg("eps1", "real", 0.0, 700.0, high_open=False, help="key budget eps1")
EPS2 = Arg("eps2", "real", 0.0, 700.0, high_open=False, help="value budget eps2")
D2 = Arg("d", "int", 2.0, help="number of options (domain size)")
L = Arg("l", "int", 2.0, help="hash range (length) l")
D01 = Arg("d01", "real", 0.0, help="metric distance d_X(x1^0, x1^1) between the victim's inputs (p = e^d01)")
DMAX = Arg("dmax", "real", 0.0, help="max over x of d_X(x1^0, x), d_X(x1^1, x) (q = e^dmax), >= d01")
D01_EXP = Arg("d01", "real", 0.0, 700.0, high_open=False, help="distance between the victim's inputs 0 and 1")
D02_EXP = Arg("d02", "real", 0.0, 700.0, high_open=False, help="distance from input 0 to the third option 2")
D12_EXP = Arg("d12", "real", 0.0, 700.0, high_open=False, help="distance from input 1 to the third option 2")
BLANKET = Arg("blanket_per_user", "int", 1.0, help="input-independent (blanket) messages sent by each user")


def eps0_inputs(eps0, *others: tuple[Arg, object]):
    """Validated inputs of an eps0-LDP row: ``(inputs, e^eps0, values)``.

    ``values`` are the broadcast float64 arguments in the row's order, ``eps0`` first; ``e^eps0`` is
    the row's ``p`` (every eps0-LDP row has ``p = e^eps0``, docs/math.md section 8). The row computes
    in numpy where every value is plain (:class:`Inputs`, ``numpy=True``).
    """
    inp = Inputs((EPS0, eps0), *others, numpy=True)
    return inp, inp.xp.exp(inp.values[0]), inp.values
