"""Formatting and verdict helpers shared by the studies' findings and claim tables."""

from __future__ import annotations

import pandas as pd

# A speed-up whose whole 95% CI lies within [1/EQUIVALENCE, EQUIVALENCE] counts as "about equal".
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
    return f"{row['speedup']:.2f}× (95% CI {row['ci_low']:.2f}–{row['ci_high']:.2f}×)"


def classify(ci_low: float, ci_high: float) -> str:
    """'equal' (CI inside ±5%), 'faster' or 'slower' (CI beyond 1 and not inside the band), else 'unclear'."""
    if 1 / EQUIVALENCE <= ci_low and ci_high <= EQUIVALENCE:
        return "equal"
    if ci_low > 1:
        return "faster"
    if ci_high < 1:
        return "slower"
    return "unclear"


def _counts(classes: list[str]) -> str:
    n = len(classes)
    return (f"equal within ±5% in {classes.count('equal')}, faster in {classes.count('faster')}, "
            f"slower in {classes.count('slower')}, unclear in {classes.count('unclear')} of {n}")


def verdict(speedups: pd.DataFrame, claim: str) -> str:
    """Whether measured speed-ups (ci_low, ci_high columns) support '≈ equal' or 'faster'."""
    classes = [classify(lo, hi) for lo, hi in zip(speedups.ci_low, speedups.ci_high)]
    want = {"≈ equal": "equal", "faster": "faster"}[claim]
    hits = classes.count(want)
    if hits == len(classes):
        word = "agrees"
    elif hits == 0 and classes.count("unclear") < len(classes):
        word = "does not agree"
    elif hits == 0:
        word = "inconclusive"
    else:
        word = "mixed"
    return f"{word} ({_counts(classes)})"


def speedup_verdict(speedups: list) -> str:
    """Verdict on a claim that the candidate is faster, from Speedup objects."""
    return verdict(pd.DataFrame({"ci_low": [s.ci_low for s in speedups], "ci_high": [s.ci_high for s in speedups]}),
                   "faster")
