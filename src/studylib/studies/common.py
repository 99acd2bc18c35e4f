"""Formatting and verdict helpers shared by the studies' findings and claim tables."""

from __future__ import annotations

import pandas as pd

# A speed-up whose 95% CI reaches into [1/EQUIVALENCE, EQUIVALENCE] is counted as "about equal".
EQUIVALENCE = 1.05


def fmt_ms(seconds: float) -> str:
    if seconds is None or pd.isna(seconds):
        return ""
    ms = seconds * 1e3
    return f"{ms:.3g} ms" if ms < 100 else f"{ms:,.0f} ms"


def fmt_x(ratio: float) -> str:
    return f"{ratio:.2f}×"


def describe_ci(row) -> str:
    """'1.23× (95% CI 1.20–1.26×)' from a row with speedup, ci_low, ci_high."""
    return f"{row.speedup:.2f}× (95% CI {row.ci_low:.2f}–{row.ci_high:.2f}×)"


def verdict(speedups: pd.DataFrame, claim: str) -> str:
    """Whether measured speed-ups support a claim of equality ('≈ equal') or of a gain ('faster')."""
    equal = (speedups.ci_high >= 1 / EQUIVALENCE) & (speedups.ci_low <= EQUIVALENCE)
    faster = speedups.ci_low > EQUIVALENCE
    slower = speedups.ci_high < 1 / EQUIVALENCE
    n = len(speedups)
    detail = f"equal within ±5% in {int(equal.sum())}, faster in {int(faster.sum())}, slower in {int(slower.sum())} of {n}"
    if claim == "≈ equal":
        ok = bool(equal.all())
    elif claim == "faster":
        ok = bool(faster.all())
    else:
        raise ValueError(f"unknown claim kind {claim!r}")
    if ok:
        return f"agrees ({detail})"
    if claim == "≈ equal" and not equal.any() or claim == "faster" and not faster.any():
        return f"does not agree ({detail})"
    return f"mixed ({detail})"
