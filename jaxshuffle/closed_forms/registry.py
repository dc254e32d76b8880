"""The registry of closed forms that the comparison and the plots both read.

One line per bound: its legend label, the function, which inputs it takes (``"ldp"``:
``(n, eps0, delta)`` for any eps0-LDP randomizer; ``"vr"``: ``(n, delta, p, beta, q)``), and its
kind: ``"reference"`` (earlier literature, written from the public statements, never certified
here) or ``"vr"`` (a bound on the Theorem 4.7 pair: sound only where beta is the worst case).
A new closed form is one function plus one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

import numpy as np

from jaxshuffle.closed_forms.blanket import blanket_bennett, blanket_hoeffding
from jaxshuffle.closed_forms.earlier import efmrtt19, fmt21_closed_form, fmt23_closed_form
from jaxshuffle.closed_forms.vr import vr_theorem42, vr_theorem43


class ClosedForm(NamedTuple):
    label: str
    fn: Callable
    inputs: Literal["ldp", "vr"]
    kind: Literal["reference", "vr"]
    source: str


CLOSED_FORMS: tuple[ClosedForm, ...] = (
    ClosedForm("FMT'23 closed form", fmt23_closed_form, "ldp", "reference", "Feldman, McMillan, Talwar, SODA 2023"),
    ClosedForm("FMT'21 closed form", fmt21_closed_form, "ldp", "reference", "Feldman, McMillan, Talwar, FOCS 2021"),
    ClosedForm("EFMRTT'19", efmrtt19, "ldp", "reference", "Erlingsson et al., SODA 2019"),
    ClosedForm("blanket Hoeffding (generic)", blanket_hoeffding, "ldp", "reference", "Balle et al., CRYPTO 2019"),
    ClosedForm("blanket Bennett (generic)", blanket_bennett, "ldp", "reference", "Balle et al., CRYPTO 2019"),
    ClosedForm("VR Thm 4.2 (analytic)", vr_theorem42, "vr", "vr", "Wang et al., VLDB 2024, Theorem 4.2 (corrected)"),
    ClosedForm("VR Thm 4.3 (asymptotic)", vr_theorem43, "vr", "vr", "Wang et al., VLDB 2024, Theorem 4.3"),
)


def evaluate(eps0, n, delta, p=None, beta=None, q=None, *,
             kinds: tuple[str, ...] = ("reference", "vr")) -> dict[str, tuple[np.ndarray, np.ndarray, ClosedForm]]:
    """Every registered closed form at the broadcast inputs: ``{label: (value, valid, form)}``.

    ``value`` is ``inf`` where ``valid`` is False. The ``"vr"`` forms need ``(p, beta, q)`` and are
    skipped without them.
    """
    out = {}
    for form in CLOSED_FORMS:
        if form.kind not in kinds or (form.inputs == "vr" and p is None):
            continue
        value, valid = form.fn(n, eps0, delta) if form.inputs == "ldp" else form.fn(n, delta, p, beta, q)
        valid = np.asarray(valid, bool)
        out[form.label] = (np.where(valid, np.asarray(value, np.float64), np.inf), valid, form)
    return out
