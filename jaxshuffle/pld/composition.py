"""Composition of shuffled rounds: privacy-loss distributions convolved by FFT, with every error on the safe side.

The composition of rounds with PLDs ``p_1, ..., p_R`` (each repeated ``T_r`` times) has the PLD of
the *sum* of independent losses: the convolution ``p_1^{*T_1} * ... * p_R^{*T_R}``, computed here as
``IFFT(prod_r FFT(p_r)^{T_r})`` on a circular grid of ``N`` (a power of two) bins, on device (jit).
Then (docs/math.md section 12.4)::

    delta(eps) = 1 - prod_r (1 - inf_r)^{T_r} + sum_j p_j (1 - e^{eps - l_j})_+

Errors, each bounded and added on the safe side (docs/math.md section 12.5):

* **wrap-around**: the window ``[x_lo, x_hi]`` of the composed index holds all but ``tail`` of the
  mass on each side (Chernoff bounds ``P[J >= x] <= exp(sum_r T_r K_r(lam) - lam x)`` with the
  rounds' exact log-MGFs ``K_r``); mass outside wraps around. The upper bound adds ``2 tail``
  to delta; the lower bound subtracts ``2 tail`` (the wrapped mass it may have counted);
* **float error of the FFT**: ``|sum_j (p^_j - p_j) g_j| <= ||p^ - p||_2 ||g||_2`` with
  ``0 <= g_j <= 1``, and ``||p^ - p||_2 <= C u log2(N) (sum_r T_r ||p_r||_2 + 1) + ||e_pow||_2/sqrt(N)``
  (Higham, *Accuracy and Stability of Numerical Algorithms*, Thm 24.2, ``C = 8``; ``e_pow`` the
  elementwise rounding of the powers, bounded from the data); it is added to the upper delta and
  subtracted from the lower one;
* **suffix sums**: relative error at most ``N u`` (sums of non-negative terms), applied outward.

Where several sound pairs exist for a round, compose each and keep the smaller *final* bound; the
pointwise minimum of two PLDs or privacy profiles is not a dominating pair and is never composed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.special  # noqa: F401  (logsumexp)
import numpy as np

from jaxshuffle._config import check
from jaxshuffle._fft import MAX_FFT, fft_error, power_convolve
from jaxshuffle._fft import U as _U
from jaxshuffle.pld.distribution import DiscretePLD, RoundPLD, grid_losses

#: Default composed mass allowed outside the FFT window, per side (wrap-around; added to delta by the
#: upper bound, subtracted by the lower). Not :data:`jaxshuffle.pld.two_count.CELL_TAIL`: that one is
#: one round's mass outside its evaluated cells, moved to +inf before composing.
WRAP_TAIL = 1e-15
DEFAULT_TAIL = WRAP_TAIL  # the former name
#: largest repeat count of a round: counts are float64 in the FFT's powers, exact up to 2^53
MAX_COUNT = 1 << 53


class CompositionSizeError(ValueError):
    """A composition whose window needs more than :data:`jaxshuffle._fft.MAX_FFT` bins, refused before
    allocating: ``size`` the bins it needs, ``count`` the repeat count blamed (entry ``index`` of the
    rounds), ``largest`` the largest count of that entry that fits on this grid (the others unchanged;
    0: none), ``discretization`` the grid. :meth:`named` words it for the caller's own argument."""

    def __init__(self, index: int, count: int, size: int, largest: int, discretization: float, several: bool,
                 argument: str | None = None):
        self.index, self.count, self.size, self.largest = index, count, size, largest
        self.discretization, self.several = discretization, several
        super().__init__(self.named(argument or f"rounds[{index}] count"))

    def renamed(self, argument: str) -> CompositionSizeError:
        """The same error, naming the caller's ``argument`` (e.g. ``counts``, ``rounds``)."""
        return CompositionSizeError(self.index, self.count, self.size, self.largest, self.discretization,
                                    self.several, argument)

    def named(self, argument: str) -> str:
        others = " (with the other rounds as given)" if self.several else ""
        fits = (f"at most {self.largest} rounds{others} fit on this grid" if self.largest >= 1 else
                "the other rounds alone do not fit on this grid")
        return (f"{argument}: composing {self.count:.6g} rounds needs about {self.size:.3g} bins of the composed "
                f"grid (discretization {self.discretization:.3g}), more than {MAX_FFT}; {fits}. Compose fewer "
                "rounds, or build the round PLDs on a coarser discretization (a looser bound)")


#: Compositions of at most this many bins (rounds x window) pad their rounds to the window on the host
#: (:func:`compose_discrete`); larger ones leave the padding to the FFT (no second copy in memory).
PAD_TO_WINDOW = 1 << 22


class ComposedPLD(NamedTuple):
    """A composed privacy-loss distribution over a window, with its error terms.

    probs: composed masses on ``loss = (lower_index + j) * discretization`` (a float64 device array,
      clamped >= 0).
    lower_index, discretization: the grid.
    infinity_mass: ``1 - prod_r (1 - inf_r)^{T_r}``.
    tail: bound on the mass outside the window, per side.
    fft_error: bound on ``||p^ - p||_2`` (multiply by ``sqrt(#bins counted)`` for a delta error).
    pessimistic: which side this composition bounds.
    """

    probs: jax.Array
    lower_index: int
    discretization: float
    infinity_mass: float
    tail: float
    fft_error: float
    pessimistic: bool

    def losses(self) -> np.ndarray:
        return grid_losses(self.lower_index, len(self.probs), self.discretization)

    def delta(self, eps) -> np.ndarray:
        """Delta at ``eps`` (array): an upper bound if pessimistic, else a lower bound (>= 0)."""
        eps = np.asarray(eps, np.float64)
        return np.asarray(_delta_at(self.probs, *self._scalars(), jnp.asarray(eps.ravel()))).reshape(eps.shape)

    def epsilon(self, delta) -> np.ndarray:
        """Epsilon at ``delta`` (array) on the grid: for a pessimistic composition the smallest grid
        loss (or 0) with ``delta(eps) <= delta`` (``inf`` where none); otherwise the largest grid loss
        with ``delta(eps) > delta`` (0 where none). So ``[lower, upper]`` brackets the pair's value."""
        delta = np.asarray(delta, np.float64)
        out = _epsilon_at(self.probs, *self._scalars(), jnp.asarray(delta.ravel()))
        return np.asarray(out).reshape(delta.shape)

    def _scalars(self):
        return (jnp.float64(self.lower_index), jnp.float64(self.discretization), jnp.float64(self.infinity_mass),
                jnp.float64(self.tail), jnp.float64(self.fft_error), jnp.bool_(self.pessimistic))


@jax.jit
def _suffix_decay(probs, decay):
    """``out[k] = sum_{i >= k} probs_i decay^(i - k)``: ``out[k] = probs_k + decay out[k+1]``, one
    associative scan of the affine maps ``x -> decay x + probs_k`` (nothing overflows: ``decay <= 1``)."""
    def combine(earlier, later):
        return later[0] * earlier[0], later[0] * earlier[1] + later[1]

    _, out = jax.lax.associative_scan(combine, (jnp.full_like(probs, decay)[::-1], probs[::-1]))
    return out[::-1]


def _delta_table(probs, lower_index, discretization, infinity_mass, tail, fft_error, pessimistic):
    """``(eps_j, delta(eps_j))`` at the candidate epsilons ``eps_j = max(l_j, 0)`` (non-decreasing),
    with every error term on the requested side; ``delta`` is non-increasing in ``j``.

    ``delta(eps_j) = r1 - e^{eps_j - l_f} r2`` with ``f`` the first bin of loss above ``eps_j``,
    ``r1 = sum_{i >= f} p_i`` and ``r2 = sum_{i >= f} p_i e^{-(i - f) Delta}``: every exponent is at most
    0, so composed losses far above 709 (where ``e^{eps}`` overflows and ``e^{-l}`` underflows) are
    evaluated like small ones (docs/math.md 12.4)."""
    size = probs.shape[0]
    ell = (lower_index + jnp.arange(size, dtype=jnp.float64)) * discretization
    eps = jnp.maximum(ell, 0.0)
    r1 = jnp.concatenate([jnp.cumsum(probs[::-1])[::-1], jnp.zeros(1)])
    r2 = jnp.concatenate([_suffix_decay(probs, jnp.exp(-discretization)), jnp.zeros(1)])
    # first bin with loss > eps_j: j + 1 where l_j >= 0, else the first bin with a positive loss
    idx = jnp.arange(size)
    first = jnp.where(ell >= 0, idx + 1, jnp.sum(ell <= 0))
    # eps_j - l_f: exactly -Delta where l_j >= 0 (f = j + 1); else -l_f, the first positive loss
    ell_first = (lower_index + first.astype(jnp.float64)) * discretization
    gap = jnp.where(ell >= 0, -discretization, -ell_first)
    slack = size * _U * 1.01  # relative error of a suffix sum of non-negative terms
    # r2's relative error: decay = fl(e^{-Delta}) (4u) raised to powers below ``size`` by the scan's
    # products (5u per power step), and at most ``size`` sums (2u each): 7 size u; the computed eps_j
    # is l_j (1 + theta), |theta| <= 2u, which moves e^{eps_j - l_f} by 2 |eps_j| u
    slack2 = (8.0 * size + 16.0) * _U * 1.01 + 4.0 * _U * eps
    sign = jnp.where(pessimistic, 1.0, -1.0)
    body = r1[first] * (1 + sign * slack) - jnp.exp(gap + jnp.log1p(-sign * slack2)) * r2[first]
    err = 2 * tail + fft_error * jnp.sqrt(jnp.maximum(size - first, 0).astype(jnp.float64))
    delta = jnp.maximum(body, 0.0) + infinity_mass + sign * err
    delta = jnp.clip(delta, 0.0, 1.0)
    # the true delta is non-increasing, so an upper bound at eps_i also bounds every later eps_j, and
    # a lower bound at eps_k every earlier one: the tightest monotone tables
    upper = jax.lax.cummin(delta)
    lower = jax.lax.cummax(delta, reverse=True)
    return eps, jnp.where(pessimistic, upper, lower)


@jax.jit
def _delta_at(probs, lower_index, discretization, infinity_mass, tail, fft_error, pessimistic, eps):
    grid, table = _delta_table(probs, lower_index, discretization, infinity_mass, tail, fft_error, pessimistic)
    # delta is non-increasing: an upper bound at eps is the table's value at the largest grid eps <= eps
    i = jnp.searchsorted(grid, eps, side="right") - 1
    below = jnp.where(pessimistic, 1.0, table[0])
    up = jnp.where(i >= 0, table[jnp.maximum(i, 0)], below)
    # a lower bound at eps: the value at the smallest grid eps >= eps
    k = jnp.searchsorted(grid, eps, side="left")
    lo = jnp.where(k < grid.shape[0], table[jnp.minimum(k, grid.shape[0] - 1)], infinity_mass)
    return jnp.where(pessimistic, up, lo)


@jax.jit
def _epsilon_at(probs, lower_index, discretization, infinity_mass, tail, fft_error, pessimistic, delta):
    grid, table = _delta_table(probs, lower_index, discretization, infinity_mass, tail, fft_error, pessimistic)
    size = grid.shape[0]
    i = jnp.searchsorted(-table, -delta, side="left")  # first j with table[j] <= delta
    upper = jnp.where(i < size, grid[jnp.minimum(i, size - 1)], jnp.inf)
    lower = jnp.where(i > 0, grid[jnp.maximum(i - 1, 0)], 0.0)
    return jnp.where(pessimistic, upper, lower)


class _Window(NamedTuple):
    lo: int  # composed index (sum of per-round array indices) of the window's first bin
    size: int  # N, a power of two
    whole: bool  # the window holds the whole support: nothing wraps around


def _log_mgf(pld: DiscretePLD, lam: np.ndarray) -> np.ndarray:
    """``log sum_j p_j e^{lam j}`` over the PLD's array index ``j`` (finite part), for each ``lam``,
    rounded up (it only places the window)."""
    size = int(2 ** math.ceil(math.log2(max(len(pld.probs), 16))))
    probs = np.zeros(size)
    probs[:len(pld.probs)] = pld.probs
    k = np.asarray(_log_mgf_padded(jnp.asarray(probs), jnp.asarray(lam)))
    return k + np.abs(k) * 1e-12 + 1e-12


@jax.jit
def _log_mgf_padded(probs, lam):
    # one lam at a time (lax.map): memory stays one row of probs however wide the PLD (2^26 bins:
    # 0.5 GB per row instead of 26 GB for all 49 lams at once)
    j = jnp.arange(probs.shape[0], dtype=jnp.float64)
    logp = jnp.log(probs)
    return jax.lax.map(lambda la: jax.scipy.special.logsumexp(logp + la * j), lam)


def _window(rounds: Sequence[tuple[DiscretePLD, int]], tail: float) -> _Window:
    """Chernoff window of the composed index holding all but ``tail`` of the mass on each side.

    Sized before anything is allocated: a window of more than :data:`~jaxshuffle._fft.MAX_FFT` bins
    raises :class:`CompositionSizeError` (blaming the largest count, with the largest that fits)."""
    total_len = sum(T * (len(p.probs) - 1) for p, T in rounds)
    if total_len + 1 <= 1 << 12:
        return _Window(0, int(2 ** math.ceil(math.log2(total_len + 1))) if total_len else 1, True)
    # lam in index units, from tiny to large relative to the spread of one round
    scale = max(len(p.probs) for p, _ in rounds)
    lam = np.geomspace(1e-3, 1e3, 49) / scale * 16.0
    log_tol = math.log(tail)
    mgf = [(_log_mgf(p, lam), _log_mgf(p, -lam), len(p.probs) - 1) for p, _ in rounds]

    def window(counts) -> tuple[int, int, int]:
        total = sum(T * width for T, (_, _, width) in zip(counts, mgf))
        up = sum(T * k_up for T, (k_up, _, _) in zip(counts, mgf))
        dn = sum(T * k_dn for T, (_, k_dn, _) in zip(counts, mgf))
        x_hi = np.min((up - log_tol) / lam)
        x_lo = np.max((log_tol - dn) / lam)
        lo_bin, hi_bin = max(0, math.floor(x_lo)), min(total, math.ceil(x_hi))
        return lo_bin, int(2 ** math.ceil(math.log2(max(hi_bin - lo_bin + 1, 16)))), total

    counts = [T for _, T in rounds]
    lo_bin, size, total_len = window(counts)
    if size > MAX_FFT:
        i = int(np.argmax(counts))

        def fits(T: int) -> bool:
            return window(counts[:i] + [T] + counts[i + 1:])[1] <= MAX_FFT

        good, bad = 0, counts[i]  # the largest count of entry i that fits (bisection; the window grows with it)
        while bad - good > 1:
            mid = (good + bad) // 2
            good, bad = (mid, bad) if fits(mid) else (good, mid)
        raise CompositionSizeError(i, counts[i], size, good, rounds[i][0].discretization, len(rounds) > 1)
    return _Window(lo_bin, size, lo_bin == 0 and size > total_len)


def compose_discrete(rounds: Sequence[tuple[DiscretePLD, int]], *, tail: float = WRAP_TAIL) -> ComposedPLD:
    """Compose discrete PLDs (each with a repeat count) on one grid: see the module docstring.

    All PLDs must share the discretization and the side (all pessimistic or all optimistic).
    """
    if not rounds:
        raise ValueError("rounds: need at least one (pld, count)")
    grid = rounds[0][0].discretization
    side = rounds[0][0].pessimistic
    for i, (p, T) in enumerate(rounds):
        if not math.isclose(p.discretization, grid, rel_tol=1e-12):
            raise ValueError(f"rounds[{i}]: discretization {p.discretization:.6g} differs from {grid:.6g}; "
                             "build every round on one grid")
        if p.pessimistic != side:
            raise ValueError(f"rounds[{i}]: mixes pessimistic and optimistic PLDs")
        check(np.float64(T) >= 1, f"rounds[{i}] count", "must be an integer >= 1", value=np.float64(T))
        if int(T) != T:
            raise ValueError(f"rounds[{i}] count: must be an integer >= 1, got {T}")
        _check_count(T, f"rounds[{i}] count")
    rounds = [(p, int(T)) for p, T in rounds]
    window = _window(rounds, tail)
    width = max(len(p.probs) for p, _ in rounds)
    # small compositions hold their rounds zero-padded to the window, as the FFT pads them anyway: the
    # program then depends on the window's size (a power of two) alone, not on each round's width
    to_window = width <= window.size and len(rounds) * window.size <= PAD_TO_WINDOW
    padded = np.zeros((len(rounds), window.size if to_window else max(width, 1)))
    for i, (p, _) in enumerate(rounds):
        padded[i, :len(p.probs)] = p.probs
    if width > window.size:  # a round wider than the composed window: fold it (mass is kept, aliasing bounded by tail)
        padded = np.pad(padded, ((0, 0), (0, (-width) % window.size))).reshape(len(rounds), -1, window.size).sum(1)
    counts = np.array([T for _, T in rounds], np.float64)
    composed, e_pow = power_convolve(jnp.asarray(padded), jnp.asarray(counts), jnp.asarray(window.lo % window.size),
                                   size=window.size)
    norms = sum(T * float(np.linalg.norm(p.probs)) for p, T in rounds)
    fft_err = fft_error(window.size, norms, e_pow)
    log_finite = sum(T * math.log1p(-min(p.infinity_mass, 1.0)) if p.infinity_mass < 1 else -math.inf
                     for p, T in rounds)
    infinity = -math.expm1(log_finite)
    offset = sum(T * p.lower_index for p, T in rounds) + window.lo
    return ComposedPLD(composed, offset, grid, infinity, 0.0 if window.whole else tail, fft_err, side)


class CompositionBound(NamedTuple):
    """Composed epsilon brackets of a sequence of shuffled rounds.

    Composition by FFT and its safe-side errors: docs/math.md sections 12.4 and 12.5.

    Attributes:
      upper: certified epsilon at each delta (``inf`` where none can be claimed): every round's pair
        dominates its shuffled mechanism, so the composition is ``(upper, delta)``-DP.
      lower: the composed *pairs'* epsilon from below (NaN when a round has no optimistic PLD): it
        shows how tight ``upper`` is numerically; it is not a lower bound for the mechanism.
      delta: the deltas asked for.
      sources: each round's pair, in the order given (``RoundPLD.source``: for a shuffled round the
        proof that certified it, e.g. ``"standard clone"``, ``"stronger clone"``, ``"blanket"``).
    """

    upper: np.ndarray
    lower: np.ndarray
    delta: np.ndarray
    sources: tuple[str, ...] = ()


def _check_rounds(rounds) -> list[tuple[RoundPLD, int]]:
    if isinstance(rounds, RoundPLD) or not len(rounds):
        raise ValueError("rounds: expected a non-empty list of (round_pld, count) pairs")
    out = []
    for i, item in enumerate(rounds):
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], RoundPLD)):
            raise ValueError(f"rounds[{i}]: expected (RoundPLD, count), got {type(item).__name__}")
        r, T = item
        if not r.certified:
            raise ValueError(f"rounds[{i}]: the pair ({r.source}) is not certified (not a dominating pair); "
                             "only certified rounds are composed")
        if isinstance(T, bool) or not float(T) == int(T) or int(T) < 1:
            raise ValueError(f"rounds[{i}] count: must be an integer >= 1, got {T!r}")
        _check_count(T, f"rounds[{i}] count")
        out.append((r, int(T)))
    relation = out[0][0].neighboring_relation
    for i, (r, _) in enumerate(out):
        if r.neighboring_relation != relation:
            raise ValueError(f"rounds[{i}]: its neighbouring relation is {r.neighboring_relation}, rounds[0]'s is "
                             f"{relation}; a composition holds for one relation (a shuffled round is replace_one: "
                             "import other mechanisms' PLDs built for replace-one, e.g. a Gaussian of sensitivity 2 C)")
    return out


def _check_count(count, name: str) -> None:
    """ValueError naming ``name`` for a repeat count above :data:`MAX_COUNT` (2^53: beyond it float64
    counts are not exact, so the FFT's powers would compose another number of rounds)."""
    check(np.asarray(count, np.float64) <= MAX_COUNT, name,
          f"must be at most 2^53 = {MAX_COUNT} (larger counts are not exact in float64)", value=np.float64(count))


def _directions(rounds: list[tuple[RoundPLD, int]]):
    """``(upper_of, lower_of)`` accessors of each direction to compose: ``P||Q`` and ``Q||P``, or the
    first alone when every round is symmetric (its two directions are one object)."""
    both = ((lambda r: r.upper_forward, lambda r: r.lower_forward),
            (lambda r: r.upper_backward, lambda r: r.lower_backward))
    symmetric = all(r.upper_forward is r.upper_backward for r, _ in rounds)
    return both[:1] if symmetric else both


def compose(rounds: Sequence[tuple[RoundPLD, int]], delta, *, tail: float = WRAP_TAIL) -> CompositionBound:
    """Epsilon bracket at ``delta`` of the composition of shuffled rounds.

    Args:
      rounds: ``(round_pld, count)`` pairs, ``count`` repetitions of each round (heterogeneous
        rounds: several entries; a user-supplied round from
        :func:`~jaxshuffle.pld.interop.from_dp_accounting`). Every round must share one
        discretization.
      delta: target delta(s), in (0, 1).
      tail: composed mass allowed outside the FFT window, per side (added to delta), in (0, 1e-3).

    Both directions of the neighbouring relation are composed (``P||Q`` and ``Q||P`` round by
    round) and the larger epsilon is reported (docs/math.md sections 12.4-12.5).

    Returns:
      The bracket, a :class:`CompositionBound` of ``delta``'s shape: ``upper`` is certified (an upper bound on
        the composed shuffled mechanism's epsilon, errs high), ``lower`` bounds the composed pairs' epsilon
        from below (a numerical check of ``upper``'s tightness, not a lower bound for the mechanism).

    Raises:
      ValueError: naming the parameter, for ``rounds`` that are not a non-empty list of
        ``(RoundPLD, count)`` pairs (a count an integer from 1 to 2^53, every round certified, one
        neighbouring relation), or ``delta``, ``tail`` outside their ranges;
        :class:`CompositionSizeError` (a ValueError naming ``rounds[i] count``, with the largest count
        that fits) where the composed grid would need more than 2^26 bins, before allocating it.
    """
    rounds = _check_rounds(rounds)
    delta = np.asarray(delta, np.float64)
    check((delta > 0) & (delta < 1), "delta", "must lie in (0, 1)", value=delta)
    check((np.float64(tail) > 0) & (np.float64(tail) < 1e-3), "tail", "must lie in (0, 1e-3)", value=np.float64(tail))
    has_lower = all(r.lower_forward is not None for r, _ in rounds)
    ups, los = [], []
    for upper_of, lower_of in _directions(rounds):
        ups.append(compose_discrete([(upper_of(r), T) for r, T in rounds], tail=tail).epsilon(delta))
        if has_lower:
            los.append(compose_discrete([(lower_of(r), T) for r, T in rounds], tail=tail).epsilon(delta))
    lower = np.maximum.reduce(los) if has_lower else np.full(delta.shape, np.nan)
    return CompositionBound(np.maximum.reduce(ups), lower, delta, tuple(r.source for r, _ in rounds))


def compose_delta(rounds: Sequence[tuple[RoundPLD, int]], eps, *, tail: float = WRAP_TAIL) -> np.ndarray:
    """Certified delta at each ``eps`` of the composition of shuffled rounds: the privacy curve, upper side.

    Args:
      rounds: ``(round_pld, count)`` pairs, as :func:`compose`.
      eps: epsilons (any shape, each finite; below 0 the bound is the trivial 1).
      tail: composed mass allowed outside the FFT window, per side (added to delta), in (0, 1e-3).

    Returns:
      An array of ``eps``'s shape: a certified upper bound (errs high) on the composed mechanism's delta at
        each ``eps`` (the larger of both directions of the relation), non-increasing in ``eps``. It agrees
        with :func:`compose` on the safe side: at ``eps = compose(rounds, delta).upper`` it is ``<= delta``
        (docs/math.md section 12.4).

    Raises:
      ValueError: naming the parameter, for bad ``rounds`` (as :func:`compose`), a non-finite ``eps``
        or ``tail`` outside (0, 1e-3).
    """
    rounds = _check_rounds(rounds)
    eps = np.asarray(eps, np.float64)
    check(np.isfinite(eps), "eps", "must be finite", value=eps)
    check((np.float64(tail) > 0) & (np.float64(tail) < 1e-3), "tail", "must lie in (0, 1e-3)", value=np.float64(tail))
    deltas = [compose_discrete([(upper_of(r), T) for r, T in rounds], tail=tail).delta(eps)
              for upper_of, _ in _directions(rounds)]
    return np.maximum.reduce(deltas)


def epsilon_over_rounds(round_pld: RoundPLD, counts, delta, *, tail: float = WRAP_TAIL) -> CompositionBound:
    """Composed epsilon of ``T`` identical rounds for each ``T`` in ``counts`` and each ``delta``.

    Build ``round_pld`` for the largest count (``rounds=max(counts)``) so the grid suits it.
    Composition by FFT: docs/math.md section 12.4.

    Args:
      round_pld: one round's :class:`~jaxshuffle.pld.distribution.RoundPLD` (certified).
      counts: numbers of rounds ``T``, integers >= 1 (any shape).
      delta: target delta(s), in (0, 1) (any shape).
      tail: composed mass allowed outside the FFT window, per side (added to delta), in (0, 1e-3).

    Returns:
      The brackets, a :class:`CompositionBound` whose arrays have shape ``counts.shape + delta.shape``:
        ``upper`` certified (errs high), ``lower`` the composed pairs' epsilon from below (as
        :func:`compose`).

    Raises:
      ValueError: naming the parameter, for ``counts`` that are not integers from 1 to 2^53, or a bad
        ``round_pld``, ``delta`` or ``tail`` (as :func:`compose`); :class:`CompositionSizeError` naming
        ``counts``, with the largest count that fits, where the composed grid would need more than
        2^26 bins (before allocating it).
    """
    counts = np.asarray(counts)
    delta = np.asarray(delta, np.float64)
    check((counts >= 1) & (counts == np.floor(counts)), "counts", "must be integers >= 1", value=counts)
    _check_count(counts, "counts")
    ups = np.empty(counts.shape + delta.shape)
    los = np.empty(counts.shape + delta.shape)
    for idx in np.ndindex(counts.shape):  # one FFT per count: each has its own window
        try:
            b = compose([(round_pld, int(counts[idx]))], delta, tail=tail)
        except CompositionSizeError as err:  # the caller's argument is ``counts``
            raise err.renamed("counts") from None
        ups[idx], los[idx] = b.upper, b.lower
    return CompositionBound(ups, los, np.broadcast_to(delta, counts.shape + delta.shape), (round_pld.source,))
