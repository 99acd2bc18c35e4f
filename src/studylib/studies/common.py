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


def failures_and_noise(df: pd.DataFrame, where) -> list[str]:
    """Two findings every data-set study ends with: what did not run (with why) and the spread of CVs.

    `where(row)` names a configuration for the reader, e.g. "ort b8".
    """
    failed, measured = df[df.status != "ok"], df[df.status == "ok"]
    lines = ["Every configuration ran." if not len(failed) else
             f"{len(failed)} configuration(s) did not run (marked in the figures): "
             + "; ".join(f"{where(r)}: {r['status']} — {r['error']}"
                         for _, r in failed.drop_duplicates(["variant", "error"]).iterrows())]
    if len(measured):
        lines.append(f"Noise: CV of pass times {measured.cv.min():.1%}–{measured.cv.max():.1%}.")
    return lines


def size_label(row) -> str:
    return f"seq {int(row['seq_len'])}" if pd.notna(row.get("seq_len")) else f"{int(row['image_size'])}px"


def fmt_or_blank(series: pd.Series, spec: str) -> pd.Series:
    """Each value formatted with `spec` ('.1%', ',.0f', …); a missing one as an empty cell."""
    return series.map(lambda v: format(v, spec) if pd.notna(v) else "")


def add_timing_columns(df: pd.DataFrame, median_label: str = "median") -> pd.DataFrame:
    """A copy of the results with the columns every results table shows, formatted: the median time,
    its 95% CI (blank for a failed row), CV, the sample count and the max |Δ| against eager."""
    t = df.copy()
    t[median_label] = t.median_s.map(fmt_ms)
    t["95% CI"] = [f"{fmt_ms(lo)}–{fmt_ms(hi)}" if s == "ok" else "" for lo, hi, s in zip(t.ci_low_s, t.ci_high_s, t.status)]
    t["CV"] = fmt_or_blank(t.cv, ".1%")
    t["n"] = t.n.astype("Int64")
    t["max |Δ|"] = fmt_or_blank(t.max_abs_diff, ".1e")
    return t


def latency_table(df: pd.DataFrame) -> pd.DataFrame:
    """The results as a reader scans them: one row per configuration, times in ms."""
    t = add_timing_columns(df)
    t["size"] = t.apply(size_label, axis=1)
    t["first call"] = t.first_call_s.map(lambda v: (fmt_ms(v) if v < 1 else f"{v:.1f} s") if pd.notna(v) else "")
    t["samples/s"] = fmt_or_blank(t.throughput_samples_s, ",.1f")
    t["peak MB"] = fmt_or_blank(t.peak_mem_mb, ",.0f")
    cols = ["model", "dtype", "size", "batch_size", "variant", "status", "median", "95% CI", "CV", "n",
            "first call", "samples/s", "peak MB", "max |Δ|", "parity_ok", "error"]
    return t[[c for c in cols if c in t]]
