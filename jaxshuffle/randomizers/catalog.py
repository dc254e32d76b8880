"""The catalog: one row per randomizer name, and the one resolver from a name and options to parameters.

:data:`CATALOG` maps a name (the CLI's ``--randomizer``) to an :class:`Entry`: the function,
its options (:class:`~jaxshuffle.randomizers.params.Arg`, with valid ranges), a description,
the source, a valid example, and the lower-parameter function where derived. :func:`build`
and :func:`build_lower` resolve a name and keyword options (ValueError naming an unknown name
or option); the accountant, calibration, comparison, sweeps and the CLI go through them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from jaxshuffle.randomizers.key_value import *  # noqa: F401,F403  (the key-value rows and their option specs)
from jaxshuffle.randomizers.ldp import *  # noqa: F401,F403  (the rows' functions and option specs)
from jaxshuffle.randomizers.metric import *  # noqa: F401,F403
from jaxshuffle.randomizers.multi_message import *  # noqa: F401,F403
from jaxshuffle.randomizers.params import (
    BLANKET,
    D01,
    D01_EXP,
    D02_EXP,
    D12_EXP,
    DMAX,
    EPS0,
    EPS1,
    EPS2,
    Arg,
    LowerParams,
    VRParams,
)
from jaxshuffle.randomizers.set_valued import *  # noqa: F401,F403  (the set-valued rows and their option specs)
from jaxshuffle.randomizers.witchhat import B_ARG, F_ARG, M_ARG, witchhat_params


@dataclasses.dataclass(frozen=True)
class Entry:
    """A catalog row: how to build the mechanism's parameters from CLI-style options.

    ``fn(**kwargs)`` returns :class:`VRParams`; ``lower(**kwargs)`` (same options) returns
    :class:`LowerParams` where derived. ``example`` is a valid set of options.

    Attributes:
      fn: the row's builder (e.g. :func:`grr`): options as keyword arguments, :class:`VRParams` out.
      args: the row's options (:class:`Arg`: name, kind, valid range, help, default), in ``fn``'s order.
      description: one line on the mechanism, as ``jaxshuffle list-randomizers`` prints it.
      source: where the row comes from (the paper's table and the original work).
      example: a valid set of options, by name.
      lower: the row's Theorem 5.1 builder (:class:`LowerParams` out), or None where none is derived.
      constraints: the options' joint constraints in words (e.g. ``"k <= d - 1"``), or ``""``.
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
    "general": Entry(general, (EPS0,), "any eps0-LDP randomizer (worst case, standard clone)",
                     "Table 2/6 general mechanisms; Kairouz, Oh, Viswanath 2014", {"eps0": 1.0}),
    "laplace": Entry(laplace, (EPS0,), "Laplace mechanism on [0, 1], scale 1/eps0",
                     "Table 2 Laplace; Dwork, McSherry, Nissim, Smith 2006", {"eps0": 1.0}, laplace_lower),
    "privunit": Entry(privunit, (EPS0, C), "PrivUnit on the unit sphere with cap area c",
                      "Table 2 PrivUnit; Bhowmick et al. 2018", {"eps0": 1.0, "c": 0.3}),
    "grr": Entry(grr, (EPS0, K2), "k-ary (generalized) randomized response",
                 "Table 2 GRR; Warner 1965, Kairouz, Bonawitz, Ramage 2016", {"eps0": 1.0, "k": 10},
                 grr_lower),
    "binary-rr": Entry(binary_rr, (EPS0, D2), "binary randomized response on one-hot d options",
                       "Table 2 binary RR; Duchi, Jordan, Wainwright 2013", {"eps0": 1.0, "d": 10},
                       binary_rr_lower),
    "rappor": Entry(rappor, (EPS0, D2), "basic one-time RAPPOR (= binary RR)",
                    "Table 2 binary RR; Erlingsson, Pihur, Korolova 2014", {"eps0": 1.0, "d": 10},
                    binary_rr_lower),
    "subset-selection": Entry(subset_selection, (EPS0, D2, K1), "k-subset selection on d options",
                              "Table 2 k-subset; Wang et al. 2019, Ye and Barg 2018",
                              {"eps0": 1.0, "d": 10, "k": 3}, subset_selection_lower, "k <= d - 1"),
    "local-hash": Entry(local_hash, (EPS0, L, COLLISION),
                        "local hashing (OLH) with hash range l",
                        "Table 2 local hash; Wang, Blocki, Li, Jha 2017",
                        {"eps0": 1.0, "l": 4, "collision": 0.0}, local_hash_lower),
    "hadamard-response": Entry(hadamard_response, (EPS0, BIGK, S_HR, B_HR),
                               "Hadamard response HR(K, s, B)",
                               "Table 2 Hadamard response (B=1, B>1); Acharya, Sun, Zhang 2018",
                               {"eps0": 1.0, "K": 16, "s": 8, "B": 1}, hadamard_response_lower,
                               "s <= K/B, s < K"),
    "sampling-rappor": Entry(sampling_rappor, (EPS0, D2, S_SET), "sampling RAPPOR on s-item sets of d",
                             "Table 2 sampling RAPPOR; Qin et al. 2016", {"eps0": 1.0, "d": 10, "s": 2},
                             None, "s <= d - 1"),
    "wheel": Entry(wheel, (EPS0, D2, S_SET, ARC), "Wheel mechanism on s-item sets of d",
                   "Table 2 Wheel; Wang et al. 2020", {"eps0": 1.0, "d": 10, "s": 2, "arc": 0.1},
                   wheel_lower, "s <= d - 1, s * arc <= 1 (lower parameters: d >= 3 s, 3 s arc <= 1)"),
    "k-subset-exponential": Entry(k_subset_exponential, (EPS0, D2, K_EXP, S_SET),
                                  "k-subset exponential mechanism on s-item sets of d",
                                  "Table 6 k-subset exponential; Wang et al. 2018 (PrivSet)",
                                  {"eps0": 1.0, "d": 10, "k": 3, "s": 2}, None, "s <= d - 1, k <= d - s"),
    "pckv-grr": Entry(pckv_grr, (EPS1, EPS2, KEYS), "PCKV-GRR key-value perturbation on d keys",
                      "derived (not in seed tables); Gu et al. 2020", {"eps1": 1.0, "eps2": 1.0, "d": 10},
                      pckv_grr_lower, "d >= 3 for the lower parameters"),
    "duchi": Entry(duchi, (EPS0,), "Duchi et al. mechanism for [-1, 1]^dim",
                   "Table 6 Duchi et al.; Duchi, Jordan, Wainwright 2013", {"eps0": 1.0}),
    "harmony": Entry(harmony, (EPS0,), "Harmony mechanism for [-1, 1]^dim",
                     "Table 6 Harmony; Nguyen et al. 2016", {"eps0": 1.0}),
    "privkv": Entry(privkv, (EPS1, EPS2, D2, S_KV), "PrivKV on users with at most s of d keys",
                    "Table 6 PrivKV; Ye et al. 2019", {"eps1": 1.0, "eps2": 1.0, "d": 10, "s": 2},
                    None, "s <= d"),
    "collision": Entry(collision, (EPS0, S_COL, L), "(d, s)-Collision: s hashed items, output one of l",
                       "not in the seed's Table 2: the paper authors' repository table; Wang et al., IJCAI 2021",
                       {"eps0": 1.0, "s": 2, "l": 8}, None, "s <= l - 1"),
    "metric-general": Entry(metric_general, (D01, DMAX), "any local d_X-private randomizer",
                            "Table 3 general mechanisms; Chatzikokolakis et al. 2013",
                            {"d01": 1.0, "dmax": 2.0}, None, "dmax >= d01"),
    "metric-laplace": Entry(metric_laplace, (D01, DMAX), "Laplace mechanism on R, l1 metric",
                            "Table 3 Laplace; Alvim et al. 2018", {"d01": 1.0, "dmax": 2.0}, None,
                            "dmax >= d01"),
    "metric-exponential": Entry(metric_exponential, (D01_EXP, D02_EXP, D12_EXP),
                                "exponential mechanism on 3 options (metric LDP)",
                                "Appendix I; McSherry and Talwar 2007, Alvim et al. 2018",
                                {"d01": 0.5, "d02": 2.0, "d12": 2.0}, None, "triangle inequality"),
    "planar-laplace": Entry(planar_laplace, (D01, DMAX), "planar Laplace on R^2, l2 metric",
                            "Table 3 planar Laplace; Andres et al. 2013", {"d01": 1.0, "dmax": 2.0}, None,
                            "dmax >= d01"),
    "witchhat": Entry(witchhat_params, (M_ARG, F_ARG, B_ARG), "WitchHat for a number in [-b, b] (local metric DP)",
                      "metric-DP supplement, sections D and E", {"m": 2.0, "f": 0.5, "b": 1.0}, None,
                      "eps0 = min(m, 4b/f); metric D(a, b) = min(m, 2|a-b|/f)"),
    "balcer-cheu": Entry(balcer_cheu, (COIN, BLANKET), "binary summation, blanket bits ~ Bernoulli(coin)",
                         "Table 4; Balcer, Cheu 2020", {"coin": 0.3, "blanket_per_user": 2}),
    "balcer-uniform": Entry(balcer_uniform, (BLANKET,), "binary summation, uniform blanket bits",
                            "Table 4; Balcer, Cheu, Joseph, Mao 2021", {"blanket_per_user": 2}),
    "cheu-zhilyaev": Entry(cheu_zhilyaev, (F_CZ, BLANKET), "histograms from fake users (flip prob f)",
                           "Table 4; Cheu, Zhilyaev 2022", {"f": 0.2, "blanket_per_user": 3}),
    "balls-into-bins": Entry(balls_into_bins, (D_BINS, S_BINS, BLANKET), "balls into d bins, s special",
                             "Table 4; Luo, Wang, Yi 2022", {"d": 10, "s": 2, "blanket_per_user": 1},
                             None, "s <= d - 1"),
    "pure-dump": Entry(pure_dump, (D_BINS, BLANKET), "pureDUMP: exact value plus uniform dummies",
                       "derived (not in seed tables); Li et al. 2023", {"d": 10, "blanket_per_user": 2}),
    "mix-dump": Entry(mix_dump, (F_MIX, D_BINS, BLANKET), "mixDUMP: GRR value plus uniform dummies",
                      "Table 4 mixDUMP; Li et al. 2023", {"f": 0.5, "d": 10, "blanket_per_user": 2},
                      None, "f <= (d-1)/d"),
}


def entry(name: str) -> Entry:
    """The catalog row ``name`` (ValueError listing the valid names otherwise).

    Args:
      name: a catalog name, a key of ``CATALOG`` (e.g. ``"grr"``, ``"subset-selection"``).

    Returns:
      The row's :class:`Entry`.

    Raises:
      ValueError: naming ``randomizer`` and listing the valid names, for an unknown name.
    """
    if not isinstance(name, str) or name not in CATALOG:
        raise ValueError(f"randomizer: unknown name {name!r}; choose one of {', '.join(sorted(CATALOG))}")
    return CATALOG[name]


def check_options(name: str, options: Mapping, skip: tuple[str, ...] = ()) -> Entry:
    """Validate option names of row ``name`` (unknown or missing required ones raise ValueError).

    Only names are checked here; values are checked by the row's builder when it is called.

    Args:
      name: a catalog name (``CATALOG``).
      options: the options given, by name (values are not read).
      skip: option names the caller supplies itself (e.g. ``("eps0",)`` for a calibration): neither
        accepted in ``options`` nor required.

    Returns:
      The row's :class:`Entry`.

    Raises:
      ValueError: naming the option, for an unknown or skipped option or a missing required one (or
        ``randomizer``, for an unknown name).
    """
    row = entry(name)
    names = [a.name for a in row.args]
    for key in options:
        if key not in names or key in skip:
            valid = ", ".join(a for a in names if a not in skip) or "none"
            raise ValueError(f"{key}: not an option of randomizer {name!r} (its options: {valid})")
    for a in row.args:
        if a.name not in skip and a.name not in options and a.default is None:
            raise ValueError(f"{a.name}: required option of randomizer {name!r} ({a.help}; {a.range_text()})")
    return row


def build(name: str, **options) -> VRParams:
    """``VRParams`` of catalog row ``name`` with keyword options, e.g. ``build("grr", eps0=1.0, k=10)``.

    Args:
      name: a catalog name (``CATALOG``).
      **options: the row's options (``eps0=1.0, k=10``), numbers or arrays (they broadcast).

    Returns:
      The row's :class:`VRParams` (upper-bound side, Theorem 4.7; docs/math.md section 8).

    Raises:
      ValueError: naming the option, for an unknown name, an unknown or missing option, or a value
        outside its range (eager calls).
    """
    return check_options(name, options).fn(**options)


def build_lower(name: str, **options) -> LowerParams | None:
    """Theorem 5.1 ``LowerParams`` of row ``name`` (``None`` where the row has none derived).

    Args:
      name: a catalog name (``CATALOG``).
      **options: the row's options, as :func:`build`.

    Returns:
      The row's :class:`LowerParams` (their pair's epsilon is a lower bound, errs low; docs/math.md section
        8), or ``None`` where the row has none derived.

    Raises:
      ValueError: naming the option, as :func:`build` (and for the lower parameters' own constraints).
    """
    row = check_options(name, options)
    return None if row.lower is None else row.lower(**options)
