"""A seed claim's verdict from our measurement (docs/method.md, "Judging a seed claim", step 2)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..core import numbers, wording
from ..stats.speedups import EQUIVALENCE
from ..stats.verdicts import unlisted
from .claim_registry import Claim

AGREES_NUMBER, AGREES_DIRECTION = "agrees (number)", "agrees (direction)"
DISAGREES, DISAGREES_NUMBER = "does not agree", "does not agree (number)"
# the judgements of a claim judged on a measurement, in the order the totals name them
JUDGED = (AGREES_NUMBER, AGREES_DIRECTION, DISAGREES, DISAGREES_NUMBER, "inconclusive")
WORDS = "claims/judge.md.j2"


@dataclass(frozen=True)
class ClaimMeasurement:
    """Our answer to a claim: `value` with its 95% CI (or `holds`), its text and rows; `verdict` if already decided."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    text: str
    rows: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    band: float = EQUIVALENCE
    holds: bool | None = None
    unit: str = "×"
    verdict: str = ""


@dataclass(frozen=True)
class NotAnswered:
    """Why the results cannot answer a claim (computed from them: which sizes or variants are missing)."""

    reason: str


def least_favourable(cells: list[tuple[Any, tuple[float, float, float]]], claim: Claim):
    """The (label, (ratio, low, high)) cell least favourable to the claim (smallest, largest, or furthest from 1)."""
    if claim.expect == "higher":
        return min(cells, key=lambda c: c[1][0])
    if claim.expect == "lower":
        return max(cells, key=lambda c: c[1][0])
    return max(cells, key=lambda c: abs(math.log(c[1][0])))


def per_cell(cells: list[tuple[Any, tuple[float, float, float]]], claim: Claim, *, text: str = "",
             rows: pd.DataFrame | None = None, band: float = EQUIVALENCE, unit: str = "×") -> ClaimMeasurement:
    """One measurement from per-size cells: the least favourable, or 'does not agree' where directions differ."""
    if not cells:
        raise ValueError("per_cell needs at least one cell")
    rows = rows if rows is not None else pd.DataFrame()
    every = "; ".join(f"{label} {numbers.fmt(v, unit=unit)}" for label, (v, _, _) in cells)
    ways: dict[str, list] = {}
    for label, (_, lo, hi) in cells:
        ways.setdefault(unlisted(lo, hi, band), []).append(label)
    if "faster" in ways and "slower" in ways:
        split = "; ".join(f"{way} at {', '.join(map(str, labels))}" for way, labels in ways.items())
        return ClaimMeasurement(None, None, None, wording.macro(WORDS, "cells", text, every, split), rows=rows, band=band,
                           unit=unit, verdict=wording.macro(WORDS, "split", DISAGREES, split))
    label, (v, lo, hi) = least_favourable(cells, claim)
    return ClaimMeasurement(v, lo, hi, wording.macro(WORDS, "least", text, label, every), rows=rows, band=band, unit=unit)


def _beyond(claim: Claim, lo: float, hi: float, at: float) -> str:
    """'yes' when the CI lies wholly beyond ratio `at` in the claimed direction, 'no' when wholly short of it."""
    if claim.expect == "higher":
        return "yes" if lo >= at else "no" if hi < at else "unsure"
    return "yes" if hi <= 1 / at else "no" if lo > 1 / at else "unsure"


def judge(claim: Claim, m: ClaimMeasurement, use_number: bool = True) -> tuple[str, str]:
    """(judgement, verdict sentence) by docs/method.md's rules; `use_number` False: the number is another shape's."""
    if m.verdict:
        return DISAGREES, m.verdict

    def said(judgement: str, case: str, **data) -> tuple[str, str]:
        return judgement, wording.macro(WORDS, "verdict", case, judgement, **data)

    if claim.expect == "holds":
        if m.holds is None:
            return said("inconclusive", "cannot_say")
        return said(AGREES_DIRECTION, "holds") if m.holds else said(DISAGREES, "not_holds")
    lo, hi = m.ci_low, m.ci_high
    band = max(m.band, claim.tolerance or 1.0)
    source = "the seed's tolerance" if (claim.tolerance or 0) >= m.band else "A/A noise"
    ci = {"lo": lo, "hi": hi, "unit": m.unit, "band": band, "source": source,
          "both": lo < 1 / band and hi > band}  # an undecided CI across both edges of the band, or one
    if claim.expect == "equal":
        kind = AGREES_NUMBER if claim.tolerance else AGREES_DIRECTION
        if 1 / band <= lo and hi <= band:
            return said(kind, "inside", **ci)
        if lo > band or hi < 1 / band:
            return said(DISAGREES, "outside", **ci)
        return said("inconclusive", "edge", **ci)
    cls = unlisted(lo, hi, band)  # a claim's measurement is not a row of the verdict table
    want, other = ("faster", "slower") if claim.expect == "higher" else ("slower", "faster")
    n = claim.number if use_number else None
    if n is not None and lo <= n <= hi:  # (a) the seed's number first, before 'equal within noise'
        if (lo >= 1 / band) if claim.expect == "higher" else (hi <= band):
            return said(AGREES_NUMBER, "number_inside", n=n, **ci)
        return said("inconclusive", "number_both", n=n, **ci)
    short = n is not None and (hi < n if claim.expect == "higher" else lo > n)
    if short and cls in (want, "undecided"):  # (d) the seed's number beyond our CI in the claimed direction
        return said(DISAGREES_NUMBER, "number_short", n=n, way=want, decided=cls == want,
                    seed_side="below" if claim.expect == "higher" else "above", **ci)
    mag = claim.magnitude
    if mag and cls == want:  # (b) a magnitude word's threshold
        word = {"at": mag.at_least, "words": mag.words, "way": want}
        at = _beyond(claim, lo, hi, mag.at_least)
        if at == "yes":
            return said(AGREES_DIRECTION, "beyond_word", **word, **ci)
        if at == "no":
            return said(DISAGREES, "short_of_word", **word, **ci)
        return said("inconclusive", "crosses_word", **word, **ci)
    if cls == want:
        if n is None:
            return said(AGREES_DIRECTION, "direction", way=want, no_number=claim.number is None, **ci)
        return said(AGREES_DIRECTION, "larger", n=n, **ci)
    if cls == other:
        return said(DISAGREES, "reversed", way=other, **ci)
    if cls == "equal":
        return said(DISAGREES, "equal", **ci)
    return said("inconclusive", "edge", **ci)
