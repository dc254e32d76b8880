"""Sandwich reports: lower bound <= exact epsilon <= certified upper bound, for a finite mechanism.

For a local randomizer given as a ``K x Y`` row-stochastic matrix, a victim input pair
``(x0, x1)`` and a small ``n``, :func:`sandwich` computes

* ``lower``: the numerical lower bound of Theorem 5.1 (the pair ``vr_pair(p0, beta,
  q0=, q1=)`` with parameters read off the matrix by :func:`exact.lower_bound_parameters`,
  others all ``x_star``); its *lower* bracket end. Only defined for randomizers with
  ``P[R(x0) in Y0] = P[R(x1) in Y1]`` (otherwise that pair is not a lower bound); then 0.
* ``exact``: the exact epsilon of the shuffled outputs (:func:`exact.epsilon`), the worst
  over candidate datasets of the other users (all-equal, optionally two-value mixtures);
* ``upper``: :func:`~jaxshuffle.accountant.amplify`'s certified upper bound for the mechanism
  given by its matrix (``with_matrix``): the smaller of the clone pair with the matrix's clone
  constant ``r*`` (docs/math.md 3.1) and the matrix engine's bound, or 0 where ``delta >= beta``;
* ``paper``: the variation-ratio paper's Theorem 4.7 value for the matrix's own
  ``(p, beta, q = p)``, certified only when ``beta`` is the worst case.

and checks ``lower <= exact <= upper``; a violation of a certified side raises
:class:`OrderViolation`. The paper value falling below ``exact`` is reported, not raised:
that is the documented unsoundness of Theorem 4.7 (docs/math.md section 3), e.g.
3-ary RR, ``eps0 = 1``, ``n = 2``, ``delta = 0.01``: exact 0.969408 > paper 0.914553.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from jaxshuffle.accountant.amplify import amplify
from jaxshuffle.exact.enumerate import lower_bound_parameters, validate_matrix, worst_case_epsilon
from jaxshuffle.randomizers.params import LowerParams, VRParams, matrix_ratio, matrix_total_variation, with_matrix

# exact.epsilon resolves eps to 1e-11 and leaves float rounding (~1e-12 relative) out.
_ORDER_SLACK_REL, _ORDER_SLACK_ABS = 1e-9, 1e-10


class OrderViolation(AssertionError):
    """A certified bound is on the wrong side of the exact epsilon: a bug, never expected."""


class SandwichReport(NamedTuple):
    n: int
    delta: float
    lower: float  #: Theorem 5.1 lower bound (0 where the theorem does not apply)
    lower_applies: bool
    exact: float  #: exact epsilon, worst over the candidate datasets searched
    exact_others: tuple[int, ...]  #: the other users' inputs achieving ``exact``
    upper: float  #: certified upper bound: amplify on the matrix (clone constant r*, the matrix engine)
    paper: float  #: Theorem 4.7 with the matrix's own beta (not a guarantee unless certified)
    paper_certified: bool
    paper_below_exact: bool  #: the paper's value is not an upper bound here

    def lines(self) -> list[str]:
        flag = "  <-- below exact: NOT an upper bound" if self.paper_below_exact else ""
        cert = "certified" if self.paper_certified else "not certified"
        lower = f"{self.lower:.6f}" if self.lower_applies else "n/a (Thm 5.1 needs P0(Y0) = P1(Y1))"
        return [
            f"n = {self.n}, delta = {self.delta:g}",
            f"  lower (Thm 5.1 pair)        {lower}",
            f"  exact (worst of candidates) {self.exact:.6f}   others = {_short(self.exact_others)}",
            f"  certified upper             {self.upper:.6f}",
            f"  paper Thm 4.7 ({cert})  {self.paper:.6f}{flag}",
        ]


def _short(others: tuple[int, ...]) -> str:
    if not others:
        return "()"
    values, counts = np.unique(np.asarray(others), return_counts=True)
    return " + ".join(f"{c} x input {v}" for v, c in zip(values.tolist(), counts.tolist()))


def matrix_vr_parameters(matrix: ArrayLike) -> tuple[float, float, float]:
    """``(p, beta, q)`` of a finite randomizer: largest probability ratio, largest total
    variation between rows, and ``q = p`` (single message, no separate blanket)."""
    m = np.asarray(matrix, dtype=np.float64)
    p = matrix_ratio(m)
    return p, matrix_total_variation(m), p


def sandwich(matrix: ArrayLike, x0: int, x1: int, n: int, delta: float, *, candidates: str = "all-equal",
             rtol: float = 1e-9) -> SandwichReport:
    """Lower, exact, certified upper and paper epsilon for a finite mechanism (see module doc).

    Exact enumeration: docs/math.md section 9; the upper side's clone constant ``r*``: section 3.1.

    Args:
      matrix: the mechanism, a ``K x Y`` row-stochastic matrix, ``matrix[x, y] = P(R(x) = y)``.
      x0: the victim's input under the first hypothesis (a row index).
      x1: the victim's input under the second hypothesis (a row index).
      n: number of users, an integer >= 1 (small: the exact side enumerates the shuffled outputs).
      delta: target delta in (0, 1).
      candidates: the other users' datasets the exact side searches: ``"all-equal"`` (default; every
        ``others = (v,) * (n-1)``) or ``"mixtures"`` (also every two-value mixture).
      rtol: relative width of :func:`~jaxshuffle.accountant.amplify`'s brackets (upper, paper, lower).

    Returns:
      The report, a :class:`SandwichReport`: ``lower`` (Theorem 5.1, errs low; 0 where the theorem does not
        apply), ``exact`` (the worst exact epsilon over the candidate datasets: exact for each, a lower bound
        on the worst case over every dataset), ``upper`` (certified upper bound, errs high) and ``paper``
        (Theorem 4.7, not certified unless ``paper_certified``).

    Raises:
      OrderViolation: if ``lower > exact`` or ``exact > upper`` beyond the
        resolution of the exact search (1e-9 relative + 1e-10), or ``exact > paper`` where the paper
        value is certified.
      ValueError: naming the parameter (``matrix``, ``n``, ``delta``, ``candidates``, ...) for bad input.
    """
    m = validate_matrix(matrix)
    worst = worst_case_epsilon(m, x0, x1, n, delta, candidates=candidates)
    p, beta, q = matrix_vr_parameters(m)
    try:
        p0, b0, q0, q1 = lower_bound_parameters(m, x0, x1, x_star=x0)
        lower_applies = math.isfinite(p0)
    except ValueError:
        lower_applies = False
    if math.isinf(p):
        upper = paper = math.inf
        paper_certified, lower = True, 0.0
    else:
        # the parameters' fields are jax arrays (as the catalog's rows give them): float64 scalars, as before
        f64 = lambda x: jnp.asarray(np.float64(x))  # noqa: E731
        lp = LowerParams(f64(p0), f64(b0), f64(q0), f64(q1)) if lower_applies else None
        params = VRParams(f64(p), f64(min(beta, (p - 1) / (p + 1))), f64(q))
        # the mechanism is known: its matrix certifies the clone constant r* (docs/math.md 3.1)
        rep = amplify(with_matrix(params, m), float(n), delta, rtol=rtol)
        upper, paper, paper_certified = float(rep.upper), float(rep.paper), bool(rep.paper_certified)
        # the Theorem 5.1 pair alone (the matrix engine's lower bound also covers datasets that are not
        # among the exact search's candidates, so it may exceed their worst)
        lower = (float(amplify(params, float(n), delta, lower_params=lp, rtol=rtol, with_paper=False).lower)
                 if lower_applies else 0.0)
    report = SandwichReport(int(n), float(delta), lower, lower_applies, worst.epsilon, worst.others,
                            upper, paper, paper_certified,
                            paper < worst.epsilon * (1 - _ORDER_SLACK_REL) - _ORDER_SLACK_ABS)
    slack = _ORDER_SLACK_REL * worst.epsilon + _ORDER_SLACK_ABS
    if lower > worst.epsilon + slack:
        raise OrderViolation(f"lower bound {lower!r} exceeds exact {worst.epsilon!r}: " + "; ".join(report.lines()))
    if worst.epsilon > upper + slack:
        raise OrderViolation(f"exact {worst.epsilon!r} exceeds certified upper {upper!r}: " + "; ".join(report.lines()))
    if paper_certified and worst.epsilon > paper + slack:
        raise OrderViolation(f"exact {worst.epsilon!r} exceeds certified paper value {paper!r}")
    return report


def grr_matrix(k: int, eps0: float) -> np.ndarray:
    """k-ary randomized response: keep the input w.p. e^eps0/(e^eps0+k-1)."""
    e = math.exp(eps0)
    m = np.full((k, k), 1.0 / (e + k - 1))
    np.fill_diagonal(m, e / (e + k - 1))
    return m
