"""A round-by-round accountant: shuffled rounds added as they happen, the certified total on demand.

:class:`RoundAccountant` is a small stateful object over the functional core (:func:`shuffled_round`,
:func:`~jaxshuffle.pld.composition.compose`), with the verbs of dp_accounting's and Flower's
accountants: ``compose(round, count)``, ``get_epsilon(delta)``, ``get_delta(epsilon)``,
``would_exceed(round, max_epsilon, delta)``, ``state_dict()`` / ``load_state_dict()``.

Cost. Each distinct round (randomizer, options, n) has its privacy-loss distribution built once and
cached; the ledger keeps a count per distinct round. An answer composes the cached PLDs with their
counts in one FFT (:func:`~jaxshuffle.pld.composition.compose_discrete`), so asking again after
one more round costs one composition, never a rebuild of every round.

Every answer is certified (upper side): each round's PLD comes from a pair that dominates the
shuffled round (docs/math.md section 12.1), the blanket pair for k-ary RR where it is built (12.8).
All rounds share one loss grid and one neighbouring relation (replace-one; docs/math.md 12.9).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from jaxshuffle.accountant.rounds import blanket_round_where_built, checked_blanket_points, round_grid
from jaxshuffle.pld.composition import compose, compose_delta
from jaxshuffle.pld.distribution import DiscretePLD, RoundPLD, neighboring_relation
from jaxshuffle.pld.two_count import shuffled_round

#: ``state_dict()["format"]``: what :meth:`RoundAccountant.load_state_dict` accepts.
STATE_FORMAT = "jaxshuffle.RoundAccountant/1"


class ShuffledRound(NamedTuple):
    """One shuffled round: ``n`` users each run the catalog randomizer ``randomizer`` with ``options``.

    ``ShuffledRound("grr", {"eps0": 2.0, "k": 50}, 1_000_000)`` is a round of 50-ary randomized
    response at eps0 = 2 among a million users (the catalog: ``jaxshuffle list-randomizers``).

    Attributes:
      randomizer: the catalog name (``jaxshuffle.randomizers.CATALOG``), e.g. ``"grr"``.
      options: the randomizer's options by name, e.g. ``{"eps0": 2.0, "k": 50}``.
      n: number of users, an integer in [2, 1e12].
      sample_rate: the probability that each user takes part (Poisson client sampling; ``n``
        counts every user). Below 1 it is certified for every single-message randomizer: k-ary RR
        through its blanket pair, the others through the three-count pair of their proven clone
        constant (docs/math.md 12.10); multi-message protocols are refused.
    """

    randomizer: str
    options: Mapping[str, float]
    n: int
    sample_rate: float = 1.0

    def key(self) -> str:
        """A canonical JSON text of the round (equal rounds, equal keys)."""
        d = {"randomizer": self.randomizer, "options": {k: float(v) for k, v in self.options.items()}, "n": int(self.n)}
        if self.sample_rate != 1.0:
            d["sample_rate"] = float(self.sample_rate)
        return json.dumps(d, sort_keys=True)


def checked_round(round_) -> ShuffledRound:
    """``round_`` (a :class:`ShuffledRound`, or an object with ``to_shuffled_round()``) with its catalog
    options, ``n`` and ``sample_rate`` checked; ValueError naming the field otherwise."""
    from jaxshuffle.randomizers.catalog import check_options

    if hasattr(round_, "to_shuffled_round"):  # jaxshuffle.interop.ShuffledDpEvent
        round_ = round_.to_shuffled_round()
    if not isinstance(round_, ShuffledRound):
        raise ValueError(f"round: expected a ShuffledRound (or a RoundPLD, or a jaxshuffle.interop.ShuffledDpEvent), "
                         f"got {type(round_).__name__}")
    if not isinstance(round_.options, Mapping):
        raise ValueError(f"round.options: expected a mapping of the randomizer's options, got {round_.options!r}")
    check_options(round_.randomizer, round_.options)
    n = float(round_.n) if isinstance(round_.n, int | float | np.integer | np.floating) else math.nan
    if not (math.isfinite(n) and n >= 2 and n == math.floor(n) and n <= 1e12):
        raise ValueError(f"round.n: must be an integer in [2, 1e12], got {round_.n!r}")
    from jaxshuffle.accountant.subsampling import check_sample_rate

    g = float(check_sample_rate(round_.sample_rate, "round.sample_rate"))
    return ShuffledRound(round_.randomizer, {k: float(v) for k, v in round_.options.items()}, int(n), g)


def _count(count) -> int:
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
        raise ValueError(f"count: must be an integer >= 1, got {count!r}")
    return int(count)


def _pld_state(p: DiscretePLD) -> dict:
    return {"probs": [float(x) for x in p.probs], "lower_index": int(p.lower_index),
            "discretization": float(p.discretization), "infinity_mass": float(p.infinity_mass),
            "pessimistic": bool(p.pessimistic)}


def _pld_from_state(d: Mapping) -> DiscretePLD:
    return DiscretePLD(np.asarray(d["probs"], np.float64), int(d["lower_index"]), float(d["discretization"]),
                       float(d["infinity_mass"]), bool(d["pessimistic"]))


def _round_pld_state(r: RoundPLD) -> dict:
    out: dict[str, Any] = {"upper_forward": _pld_state(r.upper_forward), "certified": bool(r.certified),
                           "source": r.source, "max_loss": float(r.max_loss),
                           "neighboring_relation": r.neighboring_relation,
                           "symmetric": r.upper_backward is r.upper_forward}
    if not out["symmetric"]:
        out["upper_backward"] = _pld_state(r.upper_backward)
    return out


def _round_pld_from_state(d: Mapping) -> RoundPLD:
    forward = _pld_from_state(d["upper_forward"])
    backward = forward if d["symmetric"] else _pld_from_state(d["upper_backward"])
    return RoundPLD(forward, backward, None, None, certified=bool(d["certified"]), source=str(d["source"]),
                    max_loss=float(d["max_loss"]),
                    neighboring_relation=neighboring_relation(d["neighboring_relation"], "state.neighboring_relation"))


class RoundAccountant:
    """Certified epsilon and delta of shuffled rounds composed one after another (upper side).

    Args:
      discretization: the loss grid every round shares. Default: fixed by the first round, as
        :func:`~jaxshuffle.pld.distribution.default_discretization` for ``expected_rounds`` rounds of it
        (about 1e-3 relative accuracy there), or the grid of a first round given as a ``RoundPLD``.
      expected_rounds: the number of rounds the default grid is chosen for (an integer >= 1).
      accuracy: relative accuracy the default grid aims at over ``expected_rounds`` rounds (in
        (0, 0.1]); 3e-3 keeps an answer over 365 rounds under a second on two CPU cores, within
        about 1e-4 relative of the 1e-3 grid's (docs/benchmarks.md).
      blanket_points: profile evaluations of the blanket pair's PLD for k-ary RR rounds (0: use the
        worst-case pair). Default: the blanket pair up to ``n = 1e6`` users, the worst-case pair
        above (:func:`~jaxshuffle.accountant.rounds.composed_epsilon`'s rule), and the blanket pair
        for a round with clients sampled (the only pair certified for it).

    Raises:
      ValueError: naming the parameter, for a ``discretization`` outside [1e-9, 1], an
        ``expected_rounds`` that is not an integer >= 1, an ``accuracy`` outside (0, 0.1] or a bad
        ``blanket_points``.

    Composition over rounds: docs/math.md section 12 (12.4 for the FFT, 12.8 for the blanket pair's PLD).
    A round is a :class:`ShuffledRound`, a certified :class:`~jaxshuffle.pld.distribution.RoundPLD`
    on the accountant's grid (say another mechanism's, from
    :func:`~jaxshuffle.pld.interop.from_dp_accounting` with the replace-one relation), or a
    :class:`jaxshuffle.interop.ShuffledDpEvent`. Example::

        acc = RoundAccountant()
        for day in range(365):
            acc.compose(ShuffledRound("grr", {"eps0": 2.0, "k": 50}, 1_000_000))
            if acc.get_epsilon(1e-6) > 1.0:
                break
    """

    def __init__(self, discretization: float | None = None, *, expected_rounds: int = 100,
                 accuracy: float = 3e-3, blanket_points: int | None = None):
        if discretization is not None:
            d = float(discretization)
            if not (math.isfinite(d) and 1e-9 <= d <= 1.0):
                raise ValueError(f"discretization: must lie in [1e-9, 1], got {discretization!r}")
            discretization = d
        self._discretization = discretization
        self._expected_rounds = _count(expected_rounds)
        accuracy = float(accuracy)
        if not 0.0 < accuracy <= 0.1:
            raise ValueError(f"accuracy: must lie in (0, 0.1], got {accuracy!r}")
        self._accuracy = accuracy
        self._blanket_points = checked_blanket_points(blanket_points)
        self._ledger: dict[str, int] = {}  # round key -> count, in first-composed order
        self._rounds: dict[str, ShuffledRound | RoundPLD] = {}
        self._plds: dict[str, RoundPLD] = {}

    # --- building rounds ---------------------------------------------------------------------

    def _key_and_round(self, round_) -> tuple[str, ShuffledRound | RoundPLD]:
        if isinstance(round_, RoundPLD):
            if not round_.certified:
                raise ValueError(f"round: the pair ({round_.source}) is not certified; only certified rounds compose")
            return "pld:" + str(id(round_)), round_
        spec = checked_round(round_)
        return spec.key(), spec

    def _pld(self, key: str, round_: ShuffledRound | RoundPLD) -> RoundPLD:
        if key in self._plds:
            return self._plds[key]
        if isinstance(round_, RoundPLD):
            grid = round_.upper_forward.discretization
            if self._discretization is None:
                self._discretization = grid
            elif not math.isclose(grid, self._discretization, rel_tol=1e-12):
                raise ValueError(f"round: its discretization {grid:.6g} differs from the accountant's "
                                 f"{self._discretization:.6g}; build it on that grid")
            built = round_
        else:
            built = self._shuffled_pld(round_)
        if self._plds:
            relation = next(iter(self._plds.values())).neighboring_relation
            if built.neighboring_relation != relation:
                raise ValueError(f"round: its neighbouring relation is {built.neighboring_relation}, the "
                                 f"accountant's is {relation}; a composition holds for one relation (import "
                                 "other mechanisms' PLDs built for replace-one, as shuffled rounds are)")
        # only the upper side is answered: the optimistic PLDs would double every composition
        built = built._replace(lower_forward=None, lower_backward=None)
        self._plds[key] = built
        return built

    def _shuffled_pld(self, spec: ShuffledRound) -> RoundPLD:
        from jaxshuffle.randomizers.catalog import build

        vr = build(spec.randomizer, **spec.options)
        # the worst-case pair's default grid, as composed_epsilon's
        self._discretization = round_grid(vr, spec.n, self._expected_rounds, self._discretization, self._accuracy)
        if spec.sample_rate < 1.0:
            from jaxshuffle.accountant.subsampling import SAMPLED_SCOPE, sampled_route

            if sampled_route(vr) is None:
                raise ValueError(f"round.sample_rate: {SAMPLED_SCOPE} (randomizer {spec.randomizer!r})")
            if self._blanket_points == 0:
                raise ValueError("round.sample_rate: blanket_points=0 turns off the only certified pair of a round "
                                 "with clients sampled (the blanket or three-count pair)")
        # the pair composed_epsilon composes: the blanket pair's where its rule builds it
        blanket = blanket_round_where_built(vr, spec.n, self._discretization, self._blanket_points, spec.sample_rate)
        return blanket if blanket is not None else shuffled_round(vr, spec.n, discretization=self._discretization)

    # --- the verbs -----------------------------------------------------------------------------

    def compose(self, round_, count: int = 1) -> RoundAccountant:
        """Add ``count`` rounds of ``round_`` (builds its PLD the first time it is seen). Returns self."""
        count = _count(count)
        key, spec = self._key_and_round(round_)
        self._pld(key, spec)  # build (and check) before recording
        self._rounds.setdefault(key, spec)
        self._ledger[key] = self._ledger.get(key, 0) + count
        return self

    def round_plds(self) -> list[tuple[RoundPLD, int]]:
        """The composed rounds as ``(round_pld, count)`` pairs, for :func:`~jaxshuffle.pld.composition.compose`."""
        return [(self._pld(key, self._rounds[key]), count) for key, count in self._ledger.items()]

    @property
    def rounds(self) -> list[tuple[ShuffledRound | RoundPLD, int]]:
        """The ledger: each distinct round with its count, in the order first composed."""
        return [(self._rounds[key], count) for key, count in self._ledger.items()]

    @property
    def discretization(self) -> float | None:
        """The loss grid shared by every round (None until the first round fixes it)."""
        return self._discretization

    def get_epsilon(self, delta: float) -> float:
        """Certified epsilon of everything composed so far at ``delta`` (upper side; 0 with no rounds)."""
        delta = _probability(delta, "delta")
        if not self._ledger or delta >= 1.0:
            return 0.0
        if delta == 0.0:  # pure DP is not certified here (the rounds' PLDs keep a tail at +inf)
            return math.inf
        return float(compose(self.round_plds(), delta).upper)

    def get_delta(self, epsilon: float) -> float:
        """Certified delta of everything composed so far at ``epsilon`` (upper side; 0 with no rounds)."""
        try:
            eps = float(epsilon)
        except (TypeError, ValueError):
            eps = math.nan
        if math.isnan(eps):
            raise ValueError("epsilon: must be a number, got nan")
        if not self._ledger:
            return 0.0
        # delta is non-increasing in eps, so its value at a large finite eps bounds it at +inf
        return float(compose_delta(self.round_plds(), min(eps, 1e3)))

    def would_exceed(self, round_, max_epsilon: float, delta: float, count: int = 1) -> bool:
        """True when composing ``count`` more rounds of ``round_`` would take the certified epsilon at
        ``delta`` above ``max_epsilon``; the ledger is left as it is."""
        count = _count(count)
        delta = _probability(delta, "delta")
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta: must lie in (0, 1), got {delta!r}")
        try:
            limit = float(max_epsilon)
        except (TypeError, ValueError):
            limit = math.nan
        if not limit >= 0.0:
            raise ValueError(f"max_epsilon: must be a number >= 0, got {max_epsilon!r}")
        key, spec = self._key_and_round(round_)
        pending = dict(self._ledger)
        pending[key] = pending.get(key, 0) + count
        plds = [(self._pld(k, self._rounds.get(k, spec)), c) for k, c in pending.items()]
        return bool(float(compose(plds, delta).upper) > limit)

    # --- state -----------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """A plain JSON-able dict from which :meth:`load_state_dict` restores the same answers.

        Shuffled rounds are stored as their description (rebuilt on load, deterministically);
        rounds given as a ``RoundPLD`` as their pessimistic PLDs' data.
        """
        rounds = []
        for key, count in self._ledger.items():
            r = self._rounds[key]
            if isinstance(r, RoundPLD):
                rounds.append({"kind": "pld", "pld": _round_pld_state(r), "count": count})
            else:
                rounds.append({"kind": "shuffled", "randomizer": r.randomizer, "options": dict(r.options),
                               "n": r.n, "sample_rate": r.sample_rate, "count": count})
        return {"format": STATE_FORMAT, "discretization": self._discretization,
                "expected_rounds": self._expected_rounds, "accuracy": self._accuracy,
                "blanket_points": self._blanket_points, "rounds": rounds}

    def load_state_dict(self, state: Mapping) -> None:
        """Replace this accountant's ledger and settings by ``state`` (from :meth:`state_dict`)."""
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            got = state.get("format") if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(f"state: expected a dict with format {STATE_FORMAT!r}, got {got!r}")
        missing = [k for k in ("discretization", "expected_rounds", "accuracy", "blanket_points", "rounds")
                   if k not in state]
        if missing:
            raise ValueError(f"state: missing {', '.join(missing)} (not a state_dict() of this version)")
        fresh = RoundAccountant(state["discretization"], expected_rounds=state["expected_rounds"],
                                accuracy=state["accuracy"], blanket_points=state["blanket_points"])
        for i, item in enumerate(state["rounds"]):
            if item.get("kind") == "pld":
                fresh.compose(_round_pld_from_state(item["pld"]), item["count"])
            elif item.get("kind") == "shuffled":
                spec = ShuffledRound(item["randomizer"], item["options"], item["n"], item.get("sample_rate", 1.0))
                fresh.compose(spec, item["count"])
            else:
                raise ValueError(f"state.rounds[{i}].kind: expected 'shuffled' or 'pld', got {item.get('kind')!r}")
        self.__dict__.update(fresh.__dict__)


def _probability(value, name: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    if not (0.0 <= x <= 1.0):
        raise ValueError(f"{name}: must lie in [0, 1], got {value!r}")
    return x
