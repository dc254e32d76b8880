"""Finite mechanism matrices ``R[x, y] = P(R(x) = y)`` of catalog randomizers (float64, numpy).

For :func:`jaxshuffle.randomizers.with_matrix`, which lets ``amplify`` fold in the general
finite-mechanism blanket bound (:func:`jaxshuffle.blanket_matrix.matrix_bounds`, docs/math.md
section 11). Each builder is exact up to float64 rounding; its variation-ratio parameters are its
catalog row's (tests/test_randomizer_matrices.py, tests/test_blanket_matrix.py). Binary RR, subset
selection and Hadamard response attach theirs point by point (:class:`~jaxshuffle.randomizers.params.RowMatrix`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from jaxshuffle._config import check


def binary_rr_matrix(eps0: float, d: int) -> np.ndarray:
    """``R[x, b]`` of :func:`binary_rr`: ``b in {0,1}^d`` (column index = bits), each bit kept w.p. ``a``.

    Args:
      eps0: local budget, a finite number >= 0 (not validated).
      d: number of options, an integer >= 2 (the matrix has ``2^d`` columns; not validated).

    Returns:
      The ``d x 2^d`` float64 matrix ``R[x, y] = P(R(x) = y)``, exact up to float64 rounding: the mechanism
        itself, whose ``(p, beta, q)`` are :func:`binary_rr`'s (docs/math.md section 11.6).
    """
    a = math.exp(eps0 / 2) / (math.exp(eps0 / 2) + 1.0)
    bits = (np.arange(2 ** d)[:, None] >> np.arange(d)[None, :]) & 1  # (2^d, d)
    onehot = np.eye(d, dtype=np.int64)  # (d, d)
    agree = (bits[None, :, :] == onehot[:, None, :]).sum(axis=2)  # (d, 2^d)
    return a ** agree * (1.0 - a) ** (d - agree)


def subset_selection_matrix(eps0: float, d: int, k: int) -> np.ndarray:
    """``R[x, S]`` of :func:`subset_selection` over the ``C(d, k)`` subsets (lexicographic columns).

    ``R[x, S] = e^eps0 / Z`` for ``x in S``, ``1 / Z`` otherwise, ``Z = C(d-1, k-1) e^eps0 + C(d-1, k)``
    (the same for every row). The two entries are computed once, so rows that are permutations of
    each other are so bit for bit: the engine's pair forms then merge equal categories and
    identical forms (normalising each row by its own float sum left ulp-level differences that kept
    8 categories and 4 forms apart where there are 5 and 1, and cost 10x more lines).

    Args:
      eps0: local budget, a finite number >= 0 (not validated).
      d: number of options, an integer >= 2 (not validated).
      k: subset size, an integer in [1, d - 1] (not validated).

    Returns:
      The ``d x C(d, k)`` float64 matrix ``R[x, y] = P(R(x) = y)``, exact up to float64 rounding: the
        mechanism itself, whose ``(p, beta, q)`` are :func:`subset_selection`'s (docs/math.md section 11.6).
    """
    subsets = np.array(list(itertools.combinations(range(d), k)))
    inside = (subsets[None, :, :] == np.arange(d)[:, None, None]).any(axis=2)
    e_in = 1.0 / (math.comb(d - 1, k - 1) + math.comb(d - 1, k) * math.exp(-eps0))  # e^eps0 / Z, no overflow
    return np.where(inside, e_in, e_in * math.exp(-eps0))


#: largest Hadamard order / hash domain accepted by the matrix builders (the matrix engine's limits:
#: ``blanket_matrix.MAX_INPUTS`` rows; ``2^12`` pattern columns for local hashing)
HR_MATRIX_MAX_K = 4096
LH_MATRIX_MAX_D = 12


def _check_eps0_scalar(eps0) -> float:
    e = np.asarray(eps0, dtype=np.float64)
    check(e.ndim == 0 and np.isfinite(e) and e >= 0, "eps0", "must be a finite scalar >= 0", value=e)
    return float(e)


def _check_int_scalar(value, name: str, lo: int, hi: int | None, what: str) -> int:
    v = np.asarray(value)
    ok = v.ndim == 0 and v.dtype.kind in "iuf" and np.isfinite(v) and v == np.round(v) and v >= lo
    ok = bool(ok) and (hi is None or v <= hi)
    check(ok, name, what, value=v if v.ndim == 0 and v.dtype.kind in "iufb" else None)
    return int(v)


def hadamard_response_matrix(eps0: float, K: int) -> np.ndarray:
    """``R[x, y]`` of :func:`hadamard_response` with ``s = K/2, B = 1``: ``(K - 1) x K``, float64.

    Conventions (Acharya, Sun, Zhang 2018): ``H`` is the Sylvester Hadamard matrix of order ``K``,
    ``H[u, y] = (-1)^{popcount(u & y)}`` (``H_1 = [1]``, ``H_{2m} = [[H_m, H_m], [H_m, -H_m]]``).
    Input ``x`` (matrix row ``x = 0..K-2``) is Hadamard row ``u = x + 1``: row 0 is all ones and
    is not used. ``C_x = {y : H[x + 1, y] = +1}`` has ``s = K/2`` elements and::

        R[x, y] = e^eps0 / (s e^eps0 + K - s)  for y in C_x,     1 / (s e^eps0 + K - s)  otherwise.

    Any two rows ``u != v`` (both nonzero) agree on ``K/2`` columns, and ``H[u] H[v] = H[u xor v]``
    has ``K/2`` ones, so ``|C_x & C_x'| = K/4`` and ``|C_x minus C_x'| = s/2``: the matrix's
    ``(p, beta, q)`` are :func:`hadamard_response` ``(eps0, K, K/2, 1)``'s,
    ``p = q = e^eps0``, ``beta = (s/2)(e^eps0 - 1)/(s e^eps0 + K - s)`` (checked by
    ``tests/test_randomizer_matrices.py::test_hadamard_matrix_rows_and_vr_parameters``). Exact
    up to float64 rounding of the two entries (rows sum to 1 within a few ulps); no approximation.

    ``K``: a power of two in ``[4, 4096]`` (``K = 2`` would leave a single input); ``eps0``: a
    finite scalar ``>= 0``. Otherwise ValueError naming the parameter.

    Args:
      eps0: local budget, a finite scalar >= 0.
      K: output domain size, a power of two in [4, 4096].

    Returns:
      The ``(K - 1) x K`` float64 matrix above (docs/math.md section 11.7).

    Raises:
      ValueError: naming ``eps0`` or ``K``, for a value outside its range.
    """
    eps0 = _check_eps0_scalar(eps0)
    allowed = f"must be a power of two in [4, {HR_MATRIX_MAX_K}] (4, 8, 16, ...)"
    K = _check_int_scalar(K, "K", 4, HR_MATRIX_MAX_K, allowed)
    check(K & (K - 1) == 0, "K", allowed, value=K)
    H = np.ones((1, 1), dtype=np.int8)
    while H.shape[0] < K:
        H = np.block([[H, H], [H, -H]])
    s = K // 2
    inside = 1.0 / (s + (K - s) * math.exp(-eps0))  # e^eps0/(s e^eps0 + K - s), no overflow at large eps0
    return np.where(H[1:] > 0, inside, inside * math.exp(-eps0))


def local_hash_matrix(eps0: float, l: int, d: int) -> np.ndarray:  # noqa: E741  (the catalog's name for the hash range)
    """``R[x, b]`` of :func:`local_hash` (OLH) with a uniformly random hash, outputs merged by pattern.

    Mechanism (Wang, Blocki, Li, Jha 2017, ``collision = 1/l``): ``H: [d] -> [l]`` uniform over all
    ``l^d`` functions, ``y = H(x)`` w.p. ``e^eps0/(e^eps0 + l - 1)``, any other value w.p.
    ``1/(e^eps0 + l - 1)``; the message is ``(H, y)``, ``P((H, y) | x) = l^-d e^{eps0 [H(x) = y]} /
    (e^eps0 + l - 1)``: ``l^(d+1)`` outputs.

    Merge: the *pattern* of ``(H, y)`` is ``b in {0,1}^d``, ``b_x = [H(x) = y]``; column ``b``
    (index ``sum_x b_x 2^x``) is the sum of the columns ``(H, y)`` with that pattern::

        R[x, b] = c_b e^{eps0 b_x} / (e^eps0 + l - 1),      c_b = l (1/l)^{|b|} (1 - 1/l)^{d - |b|}

    (for each of the ``l`` values ``y``, ``(l-1)^{d-|b|}`` of the ``l^d`` functions hit ``y``
    exactly on ``b``). ``c_b > 0`` for every ``b`` when ``l >= 2``: all ``2^d`` patterns are
    kept. A column whose entries all underflow to 0 in float64 is dropped (only ``b = 0`` for
    ``eps0 > ~745``, or large ``|b|`` for astronomically large ``l``): a change below 1e-300 in
    total variation, not budgeted.
    Rows sum to 1 (``sum_{b_x = 1} c_b = 1``, ``sum_{b_x = 0} c_b = l - 1``).

    Exactness: every ``(H, y)`` column with pattern ``b`` equals ``l^-d / c_b`` times column
    ``b`` in *every* row (same factor for all inputs), so given a user's pattern, its full
    message is drawn from a law that does not depend on its input. The shuffled histogram of
    patterns is a function of the full histogram, and the full histogram is the pattern
    histogram refined by that input-free kernel: each is a post-processing of the other, so
    every hockey-stick divergence, for every dataset, is the same (a sufficient statistic;
    docs/math.md 11.7; the same argument as ``jaxshuffle.exact.enumerate.lump_outputs``).
    Checked against the unmerged ``l^(d+1)``-column matrix (explicit enumeration of the hash
    functions) in ``tests/test_randomizer_matrices.py::test_local_hash_merge_matches_unmerged``.
    The two constant patterns ``b = 0`` and ``b = 1`` are proportional to each other as well;
    they are left separate (the matrix engine's pair forms merge them as equal coefficients).

    VR parameters: ``p = q = e^eps0`` (for ``d >= 2``), ``beta = (1 - 1/l)(e^eps0 - 1) /
    (e^eps0 + l - 1)``: they agree with :func:`local_hash` ``(eps0, l, collision=1/l)`` (not with
    the table's default ``collision = 0``, whose ``beta`` is larger by ``l/(l-1)``). No
    approximation beyond float64 rounding (rows sum to 1 within a few ulps).

    ``l``: an integer ``>= 2``; ``d`` (the input domain size): an integer in ``[2, 12]``
    (``2^d`` columns); ``eps0``: a finite scalar ``>= 0``. Otherwise ValueError naming it.

    Args:
      eps0: local budget, a finite scalar >= 0.
      l: hash range, an integer >= 2.
      d: input domain size, an integer in [2, 12] (``2^d`` columns).

    Returns:
      The ``d x 2^d`` float64 matrix above (pattern columns; all-zero columns dropped; docs/math.md section
        11.7).

    Raises:
      ValueError: naming ``eps0``, ``l`` or ``d``, for a value outside its range.
    """
    eps0 = _check_eps0_scalar(eps0)
    ell = _check_int_scalar(l, "l", 2, None, "must be an integer >= 2 (hash range)")
    d = _check_int_scalar(d, "d", 2, LH_MATRIX_MAX_D,
                          f"must be an integer in [2, {LH_MATRIX_MAX_D}] (the matrix has 2^d pattern columns)")
    bits = (np.arange(2 ** d)[None, :] >> np.arange(d)[:, None]) & 1  # (d, 2^d): bits[x, b] = b_x
    ones = bits.sum(axis=0)
    c = ell * (1.0 / ell) ** ones * (1.0 - 1.0 / ell) ** (d - ones)  # (2^d,)
    hit = 1.0 / (1.0 + (ell - 1.0) * math.exp(-eps0))  # e^eps0/(e^eps0 + l - 1), no overflow at large eps0
    R = c[None, :] * np.where(bits == 1, hit, hit * math.exp(-eps0))
    return np.ascontiguousarray(R[:, R.sum(axis=0) > 0])


#: largest ``pairs x columns`` (``K (K - 1) K'``) of a matrix that a catalog row builds on its own
#: (:func:`row_matrix`): the matrix engine's pair forms cost about 0.4 s at this size (Hadamard
#: K = 64: 63 x 62 pairs x 64 columns, timed once on the 2-core CPU, ad hoc); a larger one is attached by hand
#: (:func:`jaxshuffle.randomizers.with_matrix`)
ROW_MATRIX_MAX_WORK = 1 << 19


def _subset_selection_covers(eps0: float, d: float, k: float) -> bool:  # d (d-1) first: no C(d, k) of a huge d
    return d * (d - 1) <= ROW_MATRIX_MAX_WORK and d * (d - 1) * math.comb(int(d), int(k)) <= ROW_MATRIX_MAX_WORK


def _binary_rr_covers(eps0: float, d: float) -> bool:
    return d <= 64 and d * (d - 1) * 2.0 ** d <= ROW_MATRIX_MAX_WORK


def _hadamard_covers(eps0: float, K: float, s: float, B: float) -> bool:
    power_of_two = K >= 4 and not int(K) & (int(K) - 1)
    return K == 2 * s and B == 1 and power_of_two and (K - 1) * (K - 2) * K <= ROW_MATRIX_MAX_WORK


#: catalog rows whose mechanism :func:`row_matrix` builds, by builder name (a
#: :class:`~jaxshuffle.randomizers.params.RowMatrix`'s ``builder``): which points each covers (a cheap
#: test of the options, :func:`row_covers`), how it builds one point's matrix, and those points in words
ROW_MATRICES: dict[str, tuple[Callable[..., bool], Callable[..., np.ndarray], str]] = {
    "binary-rr": (_binary_rr_covers, lambda e, d: binary_rr_matrix(e, int(d)), "d <= 11 (2^d columns)"),
    "subset-selection": (_subset_selection_covers, lambda e, d, k: subset_selection_matrix(e, int(d), int(k)),
                         "every (eps0, d, k) with d (d-1) C(d, k) <= 2^19"),
    "hadamard-response": (_hadamard_covers, lambda e, K, s, B: hadamard_response_matrix(e, int(K)),
                          "B = 1, s = K/2, K a power of two in [4, 64]"),
}


def row_covers(builder: str, *options) -> bool:
    """Whether :func:`row_matrix` builds a matrix at this point of a catalog row (no matrix is built):
    False for NaN options (an invalid point), ``eps0 > 50`` (as k-RR's engine), shapes the builder does
    not make (e.g. Hadamard response with ``B > 1``) and matrices above :data:`ROW_MATRIX_MAX_WORK`."""
    values = [float(np.asarray(o, np.float64)) for o in options]
    return all(math.isfinite(v) for v in values) and values[0] <= 50.0 and ROW_MATRICES[builder][0](*values)


def row_matrix(builder: str, *options) -> np.ndarray | None:
    """The matrix of one point of a catalog row (:data:`ROW_MATRICES`), or ``None`` where the row's
    builder does not cover the point (:func:`row_covers`).

    Exact up to float64 rounding, as the builders themselves (``subset_selection_matrix``,
    ``hadamard_response_matrix``, ``binary_rr_matrix``).

    Args:
      builder: the row's builder name, a key of :data:`ROW_MATRICES` (``"binary-rr"``,
        ``"subset-selection"``, ``"hadamard-response"``).
      *options: the row's options at one point, in the row's order (``eps0`` first), scalars.

    Returns:
      The point's float64 matrix ``R[x, y] = P(R(x) = y)`` (docs/math.md section 11.6), or ``None`` where the
        builder does not cover the point.

    Raises:
      KeyError: for a ``builder`` that is not in :data:`ROW_MATRICES`.
    """
    if not row_covers(builder, *options):
        return None
    return ROW_MATRICES[builder][1](*(float(np.asarray(o, np.float64)) for o in options))
