"""Why a variant is fast or slow: each call's work against the machine's limits, and its roofline regime."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from .. import runtimes
from ..core.config import shape_label
from ..core.wording import macro
from ..machine.limits import peak_bandwidth, peak_gflops, roof
from ..stats import speedups
from ..stats.verdicts import VerdictTable

OVERHEAD_SHARE = 0.25  # below this share of the attainable rate a call is overhead-bound
REGIMES = ("overhead-bound", "memory-bound", "compute-bound")
UNKNOWN = "unknown"


# --- regimes -------------------------------------------------------------------------------------------------

def regime(achieved: float, intensity: float, peak: float | None, bandwidth: float | None) -> str:
    """The roofline regime, or 'unknown' (GFLOP/s, FLOPs per byte, GB/s; docs/method.md, "Why, not only how fast")."""
    if not all(v is not None and np.isfinite(v) and v > 0 for v in (achieved, intensity, peak, bandwidth)):
        return UNKNOWN
    memory_roof = intensity * bandwidth
    if achieved < OVERHEAD_SHARE * min(peak, memory_roof):
        return "overhead-bound"
    return "memory-bound" if memory_roof < peak else "compute-bound"


ROOFLINE_COLUMNS = ["config_key", "model", "variant", "dtype", "batch_size", "seq_len", "image_size", "strategy",
                    "status", "median_s", "flops_per_call", "useful_flops_per_call", "bytes_per_call", "gflops",
                    "peak_of", "peak_gflops", "share_of_peak", "intensity", "attainable_gflops",
                    "share_of_attainable", "regime"]


def peak_key(variant: str, dtype: str) -> str:
    """Whose peak a row is held against: its runtime's precision (int8) where it has one, else its dtype."""
    runtime = runtimes.REGISTRY.get(variant)
    return (runtime.precision if runtime is not None else None) or dtype


def _column(df: pd.DataFrame, name: str) -> pd.Series:
    return df[name] if name in df else pd.Series([None] * len(df), index=df.index, dtype=object)


def roofline_table(df: pd.DataFrame, peaks: dict | None) -> pd.DataFrame:
    """Per configuration: achieved GFLOP/s, share of peak, intensity, attainable rate and regime (or 'unknown')."""
    t = pd.DataFrame({c: _column(df, c) for c in ROOFLINE_COLUMNS[:ROOFLINE_COLUMNS.index("gflops")]}, index=df.index)
    flops = pd.to_numeric(t.flops_per_call, errors="coerce").astype(float)
    moved = pd.to_numeric(t.bytes_per_call, errors="coerce").astype(float)
    seconds = pd.to_numeric(t.median_s, errors="coerce").astype(float).where(t.status == "ok")
    t["gflops"] = flops / seconds / 1e9
    t["peak_of"] = [peak_key(v, d) for v, d in zip(t.variant, t["dtype"])]
    t["peak_gflops"] = [peak_gflops(peaks, k) for k in t.peak_of]
    t["peak_gflops"] = pd.to_numeric(t.peak_gflops, errors="coerce").astype(float)
    t["share_of_peak"] = t.gflops / t.peak_gflops
    t["intensity"] = flops / moved
    bandwidth = peak_bandwidth(peaks)
    t["attainable_gflops"] = np.minimum(t.peak_gflops, t.intensity * bandwidth) if bandwidth else np.nan
    t["share_of_attainable"] = t.gflops / t.attainable_gflops
    t["regime"] = [regime(a, i, p, bandwidth) for a, i, p in zip(t.gflops, t.intensity, t.peak_gflops)]
    return t[ROOFLINE_COLUMNS].reset_index(drop=True)


def rule_text(peaks: dict | None) -> str:
    """How a regime is read off the roofline, in one sentence (with the limits, when known)."""
    return macro("bench/roofline.j2", "rule", OVERHEAD_SHARE, roof(peaks, "fp32"), peak_bandwidth(peaks))


def summary_finding(rt: pd.DataFrame, peaks: dict | None) -> str:
    """Where the configurations sit: how many in each regime, and the best share of the roof (`share_text`)."""
    ok = rt[rt.status == "ok"]
    if not peaks:
        return macro("bench/roofline.j2", "no_peaks", int(ok.gflops.notna().sum()), len(ok))
    counted = ok[ok.gflops.notna()]
    if not len(counted):
        return macro("bench/roofline.j2", "no_counts", len(ok))
    known = counted[counted.regime != UNKNOWN]
    counts = [(r, int((known.regime == r).sum())) for r in REGIMES]
    best = None
    if len(known):
        top = known.loc[known.share_of_peak.idxmax()]
        best = {"peak_of": top.peak_of, "share": share_text(top.share_of_peak), "gflops": top.gflops,
                "peak_gflops": top.peak_gflops, "variant": top.variant, "shape": _shape(top),
                "lowest": share_text(known.share_of_peak.min())}
    return macro("bench/roofline.j2", "summary", len(counted), len(ok), counts, best, rule_text(peaks),
                 above_roof(known.share_of_peak))


def _pct(share: float) -> str:
    """A share as a percentage: two significant digits below 10% (0.55%, 8.1%), whole percents above (12%, 104%)."""
    pct = 100 * share
    return f"{pct:.2g}%" if pct < 10 else f"{pct:.0f}%"


ABOVE = 1.005  # a share past this is no share: a flag that the FLOP count or the roof is wrong (`above_roof`)


def share_text(share: float, limit: str = "roof") -> str:
    """A share of a limit ("roof", "bandwidth") in words, never above 100%: "at the measured roof" around 100%,
    "above the measured roof" past it."""
    if share > ABOVE:
        return f"above the measured {limit}"
    return f"at the measured {limit}" if share >= 0.995 else _pct(share)


def above_roof(shares, limit: str = "roof") -> str:
    """The flag a page adds where a call's rate is above the limit (a share past ABOVE), else ""."""
    return macro("bench/roofline.j2", "above", limit) if (pd.Series(shares, dtype=float) > ABOVE).any() else ""


def _shape(row) -> str:
    return shape_label(row, ("model", "batch_size", "seq_len", "image_size", "strategy"), short=True)


def regime_findings(df: pd.DataFrame, rt: pd.DataFrame, pairs: Iterable[tuple[str, str]], vt: VerdictTable,
                    shape: list[str] | None = None, *, column: str = "variant", options: tuple[str, ...] = ("variant",),
                    kinds: tuple[str, ...] | None = None) -> list[str]:
    """Per pair, `vt`'s decisions counted by the baseline's regime; `rt` is roofline_table(df, …), row for row."""
    ok = df.assign(_regime=list(rt.regime))
    ok = ok[ok.status == "ok"]
    keys = None if shape is None else [c for c in shape if c in ok]
    lines = []
    for cand, base in pairs:
        c_rows, b_rows = speedups.paired(ok, cand, base, column=column, on=keys)
        tally: dict[str, list[str]] = {}
        for (_, c), (_, b) in zip(c_rows.iterrows(), b_rows.iterrows()):
            word = vt.decision(c, b, options, kinds)
            if word:
                tally.setdefault(b["_regime"], []).append(word)
        if not tally or set(tally) == {UNKNOWN}:
            continue
        parts = [f"faster in {v.count('faster')} of {len(v)} {r} shapes" + (
            " (" + ", ".join(f"{w} in {v.count(w)}" for w in ("slower", "equal", "undecided") if v.count(w)) + ")"
            if len(v) > v.count("faster") else "")
                 for r, v in sorted(tally.items(), key=lambda kv: (REGIMES + (UNKNOWN,)).index(kv[0]))]
        lines.append(f"**{cand} over {base} by regime** (the regime of {base}'s call; decisions from the verdict "
                     f"table): " + "; ".join(parts) + ".")
    return lines


def plottable(rt: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows with an achieved rate and an intensity, the others)."""
    ok = (rt.status == "ok") & rt.gflops.notna() & rt.intensity.notna() & (rt.gflops > 0)
    return rt[ok], rt[~ok]


def attach(analysis, df: pd.DataFrame, peaks: dict | None, pairs: Iterable[tuple[str, str]], vt: VerdictTable,
           shape: list[str] | None = None, *, column: str = "variant", options: tuple[str, ...] = ("variant",)):
    """A study's Analysis with tables["roofline"] and its findings (regime_findings of options and declared pairs)."""
    rt = roofline_table(df, peaks)
    analysis.tables["roofline"] = rt
    analysis.findings.append(summary_finding(rt, peaks))
    if peaks:
        analysis.findings.extend(regime_findings(df, rt, pairs, vt, shape, column=column, options=options,
                                                 kinds=("option", "declared")))
    return analysis
