"""The verdict table's decision of one pair of results rows: how an element that tallies or states a comparison row by
row (the roofline's regimes, a claim's shapes) reads it from the table instead of judging the two rows' CI itself.

A verdict is found by what pages call its two sides (verdicts.option_name: 'ort · sorted', 'keras-jax-jit (jax
process)') and the candidate's shape, so that it matches whatever the compared column (variant, strategy) and
whichever kind of row (option, declared, lead) the table holds it as. The same comparison read the other way round
(eager over tf.function where the table holds tf.function over eager) is its decision mirrored.
"""

from __future__ import annotations

from ..core import cells
from .speedups import _key
from .verdicts import SHAPE_FIELDS, VerdictTable, option_name

MIRROR = {"faster": "slower", "slower": "faster", "equal": "equal", "undecided": "undecided", "": ""}


def _shape(get) -> tuple:
    """The shape fields a Verdict carries (verdicts.SHAPE_FIELDS), blanks (None, NaN, NA, '') as None."""
    return tuple(_key(v) if cells.present(v) else None for v in (get(c) for c in SHAPE_FIELDS))


class Decisions:
    """A verdict table's decisions by (candidate, baseline, shape); `options` are the study's (Study.options), which
    name an option as the table names it; `kinds`, the kinds of row read (Verdict.kind; None: every kind)."""

    def __init__(self, vt: VerdictTable | None, options: tuple[str, ...] = ("variant",),
                 kinds: tuple[str, ...] | None = None):
        self.options = tuple(options)
        self._by = {}
        for v in vt or ():
            if kinds is None or v.kind in kinds:
                self._by.setdefault((v.candidate, v.baseline, _shape(lambda c, v=v: getattr(v, c))), v.decision)

    def _name(self, row) -> str:
        return option_name(row, self.options)

    def of(self, candidate_row, baseline_row) -> str:
        """The decision of `candidate_row` over `baseline_row` (results rows, or pair-table rows with the same
        columns): faster, slower, equal, undecided; '' where the table does not compare them."""
        cand, base = self._name(candidate_row), self._name(baseline_row)
        word = self._by.get((cand, base, _shape(lambda c: _get(candidate_row, c))))
        if word is None:  # the table may hold it the other way round, at the baseline's shape
            word = MIRROR.get(self._by.get((base, cand, _shape(lambda c: _get(baseline_row, c)))) or "", "")
        return word


def _get(row, name: str):
    return row.get(name) if hasattr(row, "get") else getattr(row, name, None)
