"""Shuffled rounds in Google's dp_accounting: a shuffle event and an accountant that supports it.

Needs the optional extra (``pip install 'jaxshuffle[interop]'``, dp_accounting >= 0.4).

* :class:`ShuffledDpEvent` ``(event, num_users=n)``: ``n`` users each apply the local randomizer
  ``event`` and a shuffler releases the multiset of their messages. ``event`` is dp_accounting's
  ``RandomizedResponseDpEvent(noise_parameter, num_buckets)`` (k-ary randomized response) or a
  :class:`LocalRandomizerDpEvent` naming a jaxshuffle catalog randomizer.
* :class:`ShufflePLDAccountant`: a dp_accounting ``PLDAccountant`` fixed to the replace-one
  relation (the relation of a shuffled round) that supports shuffle events, alone, self-composed and
  inside ``ComposedDpEvent`` beside the events dp_accounting supports under replace-one (Gaussian,
  randomized response, ...). A shuffled round enters through jaxshuffle's certified round PLD (the
  blanket pair's for k-ary RR where it is built, else the worst-case pair's); the other events go
  through dp_accounting as in its ``PLDAccountant``; the total is composed by jaxshuffle's FFT with
  every error on the safe side (docs/math.md section 12.9). Upper side only.

The relation matters: dp_accounting's default is add/remove, under which a Gaussian event is
counted at sensitivity 1; under replace-one (this accountant) the same ``GaussianDpEvent(20)`` is a
sum of vectors clipped to norm 1 with sensitivity 2. Mixing the two understates the total.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

try:
    import attr
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.privacy_accountant import NeighboringRelation
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("jaxshuffle.interop needs dp_accounting: pip install 'jaxshuffle[interop]'") from e

from jaxshuffle.accountant.round_accountant import RoundAccountant, ShuffledRound, checked_round
from jaxshuffle.accountant.subsampling import SAMPLED_SCOPE, sampled_route
from jaxshuffle.pld.composition import compose, compose_delta
from jaxshuffle.pld.interop import from_dp_accounting, to_dp_accounting
from jaxshuffle.randomizers.catalog import build

__all__ = ["LocalRandomizerDpEvent", "ShuffledDpEvent", "ShufflePLDAccountant", "from_dp_accounting",
           "krr_eps0", "to_dp_accounting"]


def _catalog_name(value):
    # dp_accounting's to_named_tuple and from_named_tuple rebuild every Sequence field with
    # type(value)(elements), which turns a str into the text of its list of characters
    # ("['g', 'r', 'r']"), once each way; undo that here (no catalog name starts with "[")
    import ast

    while isinstance(value, str) and value.startswith("["):
        value = "".join(ast.literal_eval(value))
    return value


@attr.s(frozen=True, slots=True, auto_attribs=True)
class LocalRandomizerDpEvent(dp_event.DpEvent):
    """A jaxshuffle catalog randomizer as a local randomizer: ``randomizer`` is its catalog name and
    ``options`` its options, e.g. ``LocalRandomizerDpEvent("subset", {"eps0": 1.0, "k": 100, "d": 10})``
    (the catalog: ``jaxshuffle list-randomizers``). Only meaningful inside a :class:`ShuffledDpEvent`."""

    randomizer: str = attr.ib(converter=_catalog_name)
    options: Mapping[str, float] = attr.ib()


@attr.s(frozen=True, slots=True, auto_attribs=True)
class ShuffledDpEvent(dp_event.DpEvent):
    """``num_users`` users each apply the local randomizer ``event``; a shuffler releases their messages.

    ``event``: dp_accounting's ``RandomizedResponseDpEvent(noise_parameter, num_buckets)`` (with
    probability ``1 - noise_parameter`` the true bucket, else a uniform one: k-ary randomized
    response at ``eps0 = log(1 + k (1 - noise_parameter) / noise_parameter)``) or a
    :class:`LocalRandomizerDpEvent`. ``num_users``: the number of users ``n`` (an integer >= 2),
    keyword only. ``sample_rate``: the probability that each user takes part (Poisson client
    sampling, keyword only, default 1; below 1 certified for single-message randomizers: k-ary RR
    through its blanket pair, the others through their three-count pair). The guarantee is
    replace-one: one user's input replaced by another.
    """

    event: dp_event.DpEvent
    num_users: int = attr.ib(kw_only=True)
    sample_rate: float = attr.ib(default=1.0, kw_only=True)

    def to_shuffled_round(self) -> ShuffledRound:
        """The round as :class:`~jaxshuffle.accountant.round_accountant.ShuffledRound` (ValueError if
        the local randomizer is not one this package accounts, or is non-private or trivial)."""
        n = self.num_users
        if isinstance(n, bool) or not isinstance(n, int | float) or not (n >= 2 and n == math.floor(n) and n <= 1e12):
            raise ValueError(f"num_users: must be an integer in [2, 1e12], got {n!r}")
        inner = self.event
        if isinstance(inner, dp_event.RandomizedResponseDpEvent):
            return ShuffledRound("grr", {"eps0": krr_eps0(inner.noise_parameter, inner.num_buckets),
                                         "k": float(inner.num_buckets)}, int(n), self.sample_rate)
        if isinstance(inner, LocalRandomizerDpEvent):
            return ShuffledRound(inner.randomizer, dict(inner.options), int(n), self.sample_rate)
        raise ValueError(f"event: the local randomizer of a ShuffledDpEvent must be a RandomizedResponseDpEvent or a "
                         f"jaxshuffle.interop.LocalRandomizerDpEvent, got {type(inner).__name__}")


def krr_eps0(noise_parameter: float, num_buckets: int) -> float:
    """Local epsilon of dp_accounting's randomized response: ``log(1 + k (1 - p) / p)`` for ``p`` the
    noise parameter in (0, 1) and ``k >= 2`` buckets (ValueError naming the field otherwise)."""
    p, k = noise_parameter, num_buckets
    if isinstance(k, bool) or not isinstance(k, int | float) or not (k >= 2 and k == math.floor(k)):
        raise ValueError(f"num_buckets: must be an integer >= 2 here, got {k!r}")
    if not isinstance(p, int | float) or not 0.0 < p < 1.0:
        raise ValueError(f"noise_parameter: must lie in (0, 1) here (0 is not private, 1 releases nothing), got {p!r}")
    return math.log1p(k * (1.0 - p) / p)


def _trivial(inner) -> bool | None:
    """True for a local randomizer that releases nothing, False for a non-private one, None otherwise."""
    if isinstance(inner, dp_event.RandomizedResponseDpEvent):
        if inner.num_buckets == 1 or inner.noise_parameter == 1:
            return True
        if inner.noise_parameter == 0:
            return False
    return None


class ShufflePLDAccountant(pld_privacy_accountant.PLDAccountant):
    """dp_accounting's ``PLDAccountant``, replace-one, that also accounts :class:`ShuffledDpEvent`.

    Args:
      value_discretization_interval: the loss grid of every PLD (dp_accounting's default 1e-4).
      blanket_points: profile evaluations of the blanket pair's PLD for k-ary RR rounds (0: the
        worst-case pair). Default: the blanket pair up to 1e6 users, the worst-case pair above
        (:func:`~jaxshuffle.pld.blanket.default_blanket_points`).

    ``get_epsilon`` and ``get_delta`` are certified upper bounds given dp_accounting's pessimistic
    PLDs of the other events: the shuffled rounds' PLDs and the others' composed PLD are composed by
    :func:`~jaxshuffle.pld.composition.compose`, so with shuffled rounds alone the answer is
    jaxshuffle's own composition. Events dp_accounting refuses under replace-one (Laplace, for one)
    are refused here too.
    """

    def __init__(self, value_discretization_interval: float = 1e-4, *, blanket_points: int | None = None):
        if isinstance(value_discretization_interval, NeighboringRelation):
            raise ValueError("neighboring_relation: ShufflePLDAccountant is fixed to REPLACE_ONE, the relation of a "
                             f"shuffled round; got {value_discretization_interval} where value_discretization_interval "
                             "goes (use dp_accounting's PLDAccountant for other relations, without shuffled rounds)")
        d = value_discretization_interval
        if isinstance(d, bool) or not isinstance(d, int | float) or not 1e-9 <= d <= 1.0:
            raise ValueError(f"value_discretization_interval: must lie in [1e-9, 1], got {d!r}")
        super().__init__(NeighboringRelation.REPLACE_ONE, value_discretization_interval)
        self._shuffled = RoundAccountant(value_discretization_interval, blanket_points=blanket_points)

    def _maybe_compose(self, event, count: int, do_compose: bool):
        if not isinstance(event, ShuffledDpEvent):
            return super()._maybe_compose(event, count, do_compose)
        trivial = _trivial(event.event)
        if trivial is None:
            try:
                shuffled = checked_round(event.to_shuffled_round())  # catalog options and n, checked
                if shuffled.sample_rate < 1.0 and sampled_route(build(shuffled.randomizer, **shuffled.options)) is None:
                    raise ValueError(f"sample_rate: {SAMPLED_SCOPE} (randomizer {shuffled.randomizer!r})")
            except ValueError as e:
                return self.CompositionErrorDetails(invalid_event=event, error_message=str(e))
        if do_compose and count > 0:
            if trivial is False:
                self._contains_non_dp_event = True
            elif trivial is None:
                self._shuffled.compose(shuffled, count)
        return None

    def _rounds(self):
        others = from_dp_accounting(self._pld, self._value_discretization_interval,
                                    neighboring_relation=NeighboringRelation.REPLACE_ONE, source="dp_accounting")
        return self._shuffled.round_plds() + [(others, 1)]

    def get_epsilon(self, target_delta: float) -> float:
        if self._contains_non_dp_event or not self._shuffled.rounds:
            return super().get_epsilon(target_delta)
        if target_delta >= 1:
            return 0.0
        if target_delta <= 0:
            return math.inf
        return float(compose(self._rounds(), target_delta).upper)

    def get_delta(self, target_epsilon: float) -> float:
        if self._contains_non_dp_event or not self._shuffled.rounds:
            return super().get_delta(target_epsilon)
        # delta is non-increasing in eps: its value at a large finite eps bounds it at +inf
        return float(compose_delta(self._rounds(), min(float(target_epsilon), 1e3)))
