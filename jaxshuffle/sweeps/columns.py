"""The columns of a sweep's results: names, meanings and order (the CSV, npz and JSON sidecar all use these)."""

from __future__ import annotations

import numpy as np

from jaxshuffle.accountant.amplify import UpperSource
from jaxshuffle.accountant.rounds import SOURCES as ROUND_SOURCES
from jaxshuffle.engine.two_count.search import Status
from jaxshuffle.randomizers.clone import CloneProof

STATUS_NAMES = tuple(s.label for s in Status)
SOURCE_NAMES = UpperSource.NAMES
CLONE_PROOF_NAMES = tuple(c.name.lower() for c in CloneProof)
MAX_ITER = 60

#: Result columns after the parameter columns, with their meaning (also in the JSON sidecar).
COLUMNS = {
    "index": "grid point number (row order of the cartesian product)",
    "randomizer": "catalog name (jaxshuffle.randomizers.CATALOG)",
    "n": "number of users",
    "delta_rule": "delta as given (a number or a rule in n)",
    "delta": "delta of the (eps, delta) guarantee",
    "lower": "lower bound on the shuffled mechanism's eps (Theorem 5.1 pairs, and for k-ary RR unless upper_from "
             "is worst-case the exact all-z / all-x0 datasets; 0 where has_lower is false)",
    "upper": "certified upper bound on eps, amplify's rule for upper_from (default best: the smallest of the "
             "worst-case-beta pair, the (u+v)-scaled pair if scaled_variant, and the blanket pair where the "
             "randomizer carries its mechanism; 0 if delta >= beta); with a rounds axis the certified eps of the T "
             "rounds at total delta (the smallest of pld, blanket_pld, basic, advanced)",
    "paper": "paper's Theorem 4.7 value at the randomizer's beta (NOT a guarantee unless paper_certified)",
    "certified": "upper is a sound (certified) upper bound",
    "status": "engine status of the search behind upper (" + ", ".join(STATUS_NAMES) + ")",
    "worst_case": "certified eps of the clone pair whose constant is proven for this randomizer (standard clone "
                  "r = 1/(2q) by default, stronger clone 1/(p+1) for k-ary RR; docs/math.md 3.1)",
    "clone_proof": "the proof behind worst_case (" + ", ".join(CLONE_PROOF_NAMES) + "): standard: r = 1/(2q), any "
                   "randomizer; stronger: r = 1/(p+1), k-ary RR and binary RR on two options; general: r* of the "
                   "mechanism's matrix; multi_message: r = 1/q (docs/math.md 3.1)",
    "blanket": "certified eps of the blanket (three-count) pair of the concrete mechanism (k-ary RR; inf where "
               "the randomizer carries none or upper_from is worst-case)",
    "upper_source": "which sound bound gave upper (" + ", ".join(SOURCE_NAMES) + "; with a rounds axis one of "
                    + ", ".join(ROUND_SOURCES) + ")",
    "paper_certified": "the paper's pair has w = 0 and a clone constant within the proven one (then paper is sound)",
    "has_lower": "lower comes from a Theorem 5.1 pair",
    "status_lower": "engine status of the best lower-bound search",
    "status_paper": "engine status of the paper-value search",
    "p": "variation-ratio parameter p (largest probability ratio)",
    "beta": "variation-ratio parameter beta (largest total variation)",
    "q": "variation-ratio blanket ratio q",
    "sample_rate": "probability g that each user takes part in a round (sample_rate axis: the point is amplify's, "
                   "or with a rounds axis composed_epsilon's, at that rate; g < 1 has no two-count pair, worst_case "
                   "inf, paper NaN; docs/math.md 12.10)",
    # a sweep with a rounds axis (jaxshuffle.accountant.rounds.composed_epsilon per point)
    "rounds": "number of rounds T on the same users (rounds axis: upper is then the certified eps of the T rounds "
              "at total delta)",
    "pld": "rounds axis: PLD composition of the worst-case pair over T rounds (certified upper bound)",
    "pld_lower": "rounds axis: the composed worst-case pair's eps from below (how tight pld is numerically; not a "
                 "lower bound on the mechanism)",
    "blanket_pld": "rounds axis: PLD composition of the k-RR blanket pair, or with clients sampled of any other "
                   "single-message randomizer's three-count pair (certified upper bound; inf where the "
                   "randomizer has none or blanket_points is 0)",
    "basic": "rounds axis: basic composition T eps_1(delta/T) of the certified one-round bound (upper bound)",
    "advanced": "rounds axis: advanced composition (Dwork, Rothblum and Vadhan 2010) of the certified one-round "
                "bound at delta/(2T), capped by basic (upper bound)",
    "discretization": "rounds axis: loss grid spacing of the PLD composition (one per (randomizer options, n))",
}
RESULT_ORDER = ("lower", "upper", "paper", "certified", "status", "worst_case", "clone_proof", "blanket",
                "upper_source", "paper_certified", "has_lower", "status_lower", "status_paper", "p", "beta", "q")
#: Result columns of a sweep with a rounds axis (one composed_epsilon cell per point; no single-round searches).
ROUNDS_RESULT_ORDER = ("upper", "upper_source", "certified", "pld", "pld_lower", "blanket_pld", "basic", "advanced",
                       "discretization", "p", "beta", "q")
#: The rounds columns a rounds job stores in its chunk file's ``extra`` array, in this order.
ROUNDS_EXTRA = ("pld", "pld_lower", "blanket_pld", "basic", "advanced", "discretization")
STRING_COLUMNS = {"randomizer", "delta_rule", "status", "upper_source", "status_lower", "status_paper", "clone_proof"}
BOOL_COLUMNS = {"certified", "paper_certified", "has_lower"}


def label_columns(out: dict) -> dict:
    """``out`` with its code columns as the names the files write (statuses, the upper source, the clone
    proof) and its flag columns as bools, in place; returns ``out``."""
    for k in ("status", "status_lower", "status_paper"):
        out[k] = np.asarray(STATUS_NAMES)[out[k].astype(np.int64)]
    out["upper_source"] = np.asarray(SOURCE_NAMES)[out["upper_source"].astype(np.int64)]
    out["clone_proof"] = np.asarray(CLONE_PROOF_NAMES)[out["clone_proof"].astype(np.int64)]
    for k in BOOL_COLUMNS:
        out[k] = out[k].astype(bool)
    return out
