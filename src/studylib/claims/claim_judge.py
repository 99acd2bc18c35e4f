"""A seed claim's verdict from our measurement (claims.py step 2): what an evaluator returns (`ClaimMeasurement`,
`NotAnswered`), how per-size cells become one measurement (`least_favourable`, `per_cell`), and `judge`.

Every verdict sentence says what our CI shows ("our CI 1.03–1.09× crosses the edge of the ±5% band"), so a reader
never has to guess why a claim agrees, does not or stays open.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..core import numbers
from ..stats.speedups import EQUIVALENCE
from ..stats.verdicts import unlisted
from .claim_registry import Claim

AGREES_NUMBER, AGREES_DIRECTION = "agrees (number)", "agrees (direction)"
DISAGREES, DISAGREES_NUMBER = "does not agree", "does not agree (number)"
# the judgements of a claim judged on a measurement, in the order the totals name them
JUDGED = (AGREES_NUMBER, AGREES_DIRECTION, DISAGREES, DISAGREES_NUMBER, "inconclusive")
SIDE = {"faster": "above", "slower": "below"}  # where a decided CI lies against the band


@dataclass(frozen=True)
class ClaimMeasurement:
    """Our answer to a claim: `value` with its 95% CI on the claim's scale, a sentence saying what was measured,
    and the results rows it used (their conditions are compared with the seed's). `holds` answers a yes/no
    claim (expect: holds) instead; `band` is the study's A/A noise band for 'equal'; `verdict`, where set, is a
    verdict the cells already decided (per_cell: they go opposite ways), which `judge` returns as 'does not agree'."""

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
    """Of (label, (ratio, low, high)) cells that must all bear a claim out, the one least favourable to it: the
    smallest for 'higher', the largest for 'lower', the furthest from 1 for 'equal'."""
    if claim.expect == "higher":
        return min(cells, key=lambda c: c[1][0])
    if claim.expect == "lower":
        return max(cells, key=lambda c: c[1][0])
    return max(cells, key=lambda c: abs(math.log(c[1][0])))


def per_cell(cells: list[tuple[Any, tuple[float, float, float]]], claim: Claim, *, text: str = "",
             rows: pd.DataFrame | None = None, band: float = EQUIVALENCE, unit: str = "×") -> ClaimMeasurement:
    """One measurement from per-size (label, (ratio, low, high)) cells, never an average over sizes whose
    directions differ. Each cell's direction is the one verdict rule's (verdicts.unlisted with `band`): where no
    cell is decided faster while another is decided slower, the cell least favourable to the claim
    (`least_favourable`), its label and every cell in the text; where some are decided faster and others
    slower, a measurement without a value whose text names each direction with its sizes and whose verdict is
    'does not agree' (the claim does not hold across the sizes). `text` opens the sentence, `rows` and `band`
    pass through."""
    if not cells:
        raise ValueError("per_cell needs at least one cell")
    rows = rows if rows is not None else pd.DataFrame()
    every = "; ".join(f"{label} {numbers.fmt(v, unit=unit)}" for label, (v, _, _) in cells)
    ways: dict[str, list] = {}
    for label, (_, lo, hi) in cells:
        ways.setdefault(unlisted(lo, hi, band), []).append(label)
    lead = f"{text}: " if text else ""
    if "faster" in ways and "slower" in ways:
        split = "; ".join(f"{way} at {', '.join(map(str, labels))}" for way, labels in ways.items())
        return ClaimMeasurement(None, None, None, f"{lead}{split} ({every})", rows=rows, band=band, unit=unit,
                           verdict=f"{DISAGREES}: the claim does not hold across the sizes — {split}")
    label, (v, lo, hi) = least_favourable(cells, claim)
    return ClaimMeasurement(v, lo, hi, f"{lead}least favourable: {label}; all: {every}", rows=rows, band=band, unit=unit)


def ci_text(lo: float, hi: float, unit: str = "×") -> str:
    """'our CI 1.03–1.09×'."""
    return f"our CI {numbers.fmt_ci(lo, hi, unit=unit)}"


def _beyond(claim: Claim, lo: float, hi: float, at: float) -> str:
    """'yes' when the CI lies wholly beyond ratio `at` in the claimed direction, 'no' when wholly short of it."""
    if claim.expect == "higher":
        return "yes" if lo >= at else "no" if hi < at else "unsure"
    return "yes" if hi <= 1 / at else "no" if lo > 1 / at else "unsure"


def _edge(lo: float, hi: float, band: float) -> str:
    """How a CI the verdict rule leaves undecided lies against the band: across one edge or past both."""
    return "reaches past both edges of" if lo < 1 / band and hi > band else "crosses the edge of"


def judge(claim: Claim, m: ClaimMeasurement, use_number: bool = True) -> tuple[str, str]:
    """(judgement, verdict sentence) from our measurement, by the rules in claims.py's docstring; `use_number`
    False where the seed's number belongs to another model or shape than the one measured."""
    if m.verdict:
        return DISAGREES, m.verdict
    if claim.expect == "holds":
        if m.holds is None:
            return "inconclusive", "inconclusive: the measurement cannot say whether it holds"
        return ((AGREES_DIRECTION, f"{AGREES_DIRECTION}: it holds here") if m.holds
                else (DISAGREES, f"{DISAGREES}: it does not hold here"))
    lo, hi = m.ci_low, m.ci_high
    ours = ci_text(lo, hi, m.unit)
    band = max(m.band, claim.tolerance or 1.0)
    source = "the seed's tolerance" if (claim.tolerance or 0) >= m.band else "A/A noise"
    within = f"the ±{band - 1:.0%} band ({source})"
    if claim.expect == "equal":
        kind = AGREES_NUMBER if claim.tolerance else AGREES_DIRECTION
        if 1 / band <= lo and hi <= band:
            return kind, f"{kind}: {ours} lies inside {within}"
        if lo > band or hi < 1 / band:
            return DISAGREES, f"{DISAGREES}: {ours} lies wholly outside {within}"
        return "inconclusive", f"inconclusive: {ours} {_edge(lo, hi, band)} {within}"
    cls = unlisted(lo, hi, band)  # a claim's measurement is not a row of the verdict table
    want, other = ("faster", "slower") if claim.expect == "higher" else ("slower", "faster")
    n = claim.number if use_number else None
    if n is not None and lo <= n <= hi:  # (a) the seed's number first, before 'equal within noise'
        if (lo >= 1 / band) if claim.expect == "higher" else (hi <= band):
            return AGREES_NUMBER, f"{AGREES_NUMBER}: the seed's {n:.3g} lies inside {ours}"
        return "inconclusive", f"inconclusive: {ours} holds both the seed's {n:.3g} and the other direction"
    short = n is not None and (hi < n if claim.expect == "higher" else lo > n)
    if short and cls in (want, "undecided"):  # (d) the seed's number beyond our CI in the claimed direction
        how = f"lies {SIDE[want]} {within}" if cls == want else f"{_edge(lo, hi, band)} {within}"
        side = "below" if claim.expect == "higher" else "above"
        return DISAGREES_NUMBER, f"{DISAGREES_NUMBER}: {ours} lies {side} the seed's {n:.3g}, and {how}"
    mag = claim.magnitude
    if mag and cls == want:  # (b) a magnitude word's threshold
        at, word = _beyond(claim, lo, hi, mag.at_least), f"the {numbers.fmt_factor(mag.at_least)} that «{mag.words}» implies"
        if at == "yes":
            return AGREES_DIRECTION, f"{AGREES_DIRECTION}: {ours} lies beyond {word}"
        if at == "no":
            return DISAGREES, f"{DISAGREES}: {ours} lies {SIDE[want]} {within}, but short of {word}"
        return "inconclusive", f"inconclusive: {ours} crosses {word}"
    if cls == want:
        if claim.number is None:
            return AGREES_DIRECTION, f"{AGREES_DIRECTION}: {ours} lies {SIDE[want]} {within} (the seed gives no number)"
        if n is None:
            return AGREES_DIRECTION, f"{AGREES_DIRECTION}: {ours} lies {SIDE[want]} {within}"
        return AGREES_DIRECTION, f"{AGREES_DIRECTION}, not the number: {ours}, our effect larger than the seed's {n:.3g}"
    if cls == other:
        return DISAGREES, f"{DISAGREES}: the direction differs ({ours} lies {SIDE[other]} {within})"
    if cls == "equal":
        return DISAGREES, f"{DISAGREES}: equal within noise ({ours} lies inside {within})"
    return "inconclusive", f"inconclusive: {ours} {_edge(lo, hi, band)} {within}"
