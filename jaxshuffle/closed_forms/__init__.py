"""Closed-form (analytic) amplification bounds, vectorised and jit-compatible.

Every public function here returns ``(value, valid)``:

* ``value``: float64 array, an **upper bound on epsilon** (at the given ``delta``)
  wherever ``valid`` is True; ``+inf`` wherever ``valid`` is False. Never NaN.
* ``valid``: boolean array, True exactly where the bound's stated conditions hold
  (and the inputs lie in the domain). A bound that does not apply is never
  replaced by the local epsilon: it is ``+inf`` with ``valid == False``.

Inputs broadcast against each other (numpy rules). Called eagerly, inputs outside
the domain (e.g. ``delta`` not in (0, 1), ``p < 1``) raise ``ValueError`` naming the
parameter; under ``jit``/``vmap`` such points give ``valid == False`` and
``value == +inf``. Being *in* the domain but outside a theorem's conditions (e.g.
``n`` too small) is not an error: it is ``valid == False``.

Which pair each bound bounds (docs/math.md section 1): the variation-ratio
theorems bound the epsilon of the Theorem 4.7 pair ``vr_pair(p, beta, q)`` (that
pair is itself a certified upper bound on the shuffled mechanism only when
``beta`` is the worst case, docs/math.md section 3); the clone closed forms bound the
standard / stronger clone pairs; the metric bounds bound the pair
``u = e^D/(e^D+1), v = 1/(e^D+1), w = 0, r0 = r1 = 1/R``; EFMRTT and the privacy
blanket bound the shuffled mechanism directly.

References:
  [VR]  Wang et al., "Privacy Amplification via Shuffling: Unified, Simplified, and
        Tightened", VLDB 2024 (seed: variation-ratio-paper / -appendix).
  [EFMRTT19] Erlingsson, Feldman, Mironov, Raghunathan, Talwar, Thakurta,
        "Amplification by shuffling", SODA 2019.
  [BBGN19] Balle, Bell, Gascon, Nissim, "The privacy blanket of the shuffle model",
        CRYPTO 2019.
  [FMT21] Feldman, McMillan, Talwar, "Hiding among the clones", FOCS 2021.
  [FMT23] Feldman, McMillan, Talwar, "Stronger privacy amplification by shuffling
        for Renyi and approximate differential privacy", SODA 2023.
  [MDP] seed metric-shuffle-dp-supplement (shuffle model of metric DP), Supplementary
        Material A (Theorem 1, Corollaries 1 and 2).
"""

from jaxshuffle.closed_forms.blanket import (
    BLANKET_GAMMA,
    blanket_bennett,
    blanket_delta_bennett,
    blanket_delta_hoeffding,
    blanket_hoeffding,
    blanket_l_bounds,
    blanket_specific,
    gamma_grr,
    gamma_local_hash,
    gamma_subset_selection,
)
from jaxshuffle.closed_forms.earlier import efmrtt19, fmt21_closed_form, fmt23_closed_form
from jaxshuffle.closed_forms.metric import metric_corollary1, metric_corollary2, metric_theorem1
from jaxshuffle.closed_forms.registry import CLOSED_FORMS, ClosedForm, evaluate
from jaxshuffle.closed_forms.vr import vr_theorem42, vr_theorem43

__all__ = [
    "CLOSED_FORMS",
    "ClosedForm",
    "evaluate",
    "vr_theorem42",
    "vr_theorem43",
    "efmrtt19",
    "blanket_delta_hoeffding",
    "blanket_delta_bennett",
    "blanket_hoeffding",
    "blanket_bennett",
    "blanket_l_bounds",
    "blanket_specific",
    "BLANKET_GAMMA",
    "gamma_grr",
    "gamma_subset_selection",
    "gamma_local_hash",
    "fmt21_closed_form",
    "fmt23_closed_form",
    "metric_theorem1",
    "metric_corollary1",
    "metric_corollary2",
]
