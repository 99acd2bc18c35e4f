"""Study 07's tables (phases, one-time costs, the decode/prefill mechanism) and the findings read off them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from ..bench.roofline import above_roof, share_text
from ..core import numbers
from ..core.config import REFERENCE, is_aa
from ..core.variants import changes_outputs
from ..machine.limits import peak_bandwidth, peak_gflops
from ..stats import speedups, verdicts
from ..workloads import generation
from .common import fmt_or_blank, latency_table, say
from .text_generation_workloads import tokens_in

SHAPE = ["model", "dtype", "batch_size", "seq_len", "data"]
NOTEBOOK = "07_text_generation"


def shape_words(row, phase: bool = True) -> str:
    """'smollm2-135m fp32 batch 4 prompt 256' (and ' decode' with `phase`)."""
    words = f"{row['model']} {row['dtype']} batch {int(row['batch_size'])} prompt {int(row['seq_len'])}"
    return f"{words} {row['strategy']}" if phase and isinstance(row.get("strategy"), str) else words


def phase_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per shape and variant: TTFT, TPOT, tokens/s, end to end and its parts; blanks explained in `notes`."""
    if not len(df):
        return pd.DataFrame()
    out = []
    frame = df[~df.variant.map(is_aa)]
    for key, g in frame.groupby(SHAPE + ["variant"], sort=False, dropna=False):
        rec = dict(zip(SHAPE + ["variant"], key))
        phase = {r["strategy"]: r for _, r in g.iterrows()}
        ok = {p: r for p, r in phase.items() if r["status"] == "ok"}
        b, s, n = int(rec["batch_size"]), int(rec["seq_len"]), tokens_in(rec["data"]) or 0
        pre, dec, gen = (ok.get(p) for p in generation.PHASES)
        rec |= {"new_tokens": n,
                "ttft_ms": pre["median_s"] * 1e3 if pre is not None else np.nan,
                "tpot_ms": dec["median_s"] * 1e3 if dec is not None else np.nan,
                "tpot_p90_ms": dec["p90_s"] * 1e3 if dec is not None and pd.notna(dec.get("p90_s")) else np.nan,
                "decode_tok_s": b / dec["median_s"] if dec is not None else np.nan,
                "prompt_tok_s": b * s / pre["median_s"] if pre is not None else np.nan,
                "e2e_ms": gen["median_s"] * 1e3 if gen is not None else np.nan}
        rec["parts_ms"] = rec["ttft_ms"] + (n - 1) * rec["tpot_ms"]
        rec["e2e_over_parts"] = rec["e2e_ms"] / rec["parts_ms"]
        rec["peak_mem_mb"] = max((r["peak_mem_mb"] for r in ok.values() if pd.notna(r.get("peak_mem_mb"))),
                                 default=np.nan)
        rec["max_abs_diff"] = max((r["max_abs_diff"] for r in ok.values() if pd.notna(r.get("max_abs_diff"))),
                                  default=np.nan)
        rec["parity_ok"] = all(bool(r.get("parity_ok")) for r in ok.values()) if ok else None
        rec["notes"] = "; ".join(f"{p}: {r['status']} ({r['error']})" for p, r in phase.items() if r["status"] != "ok")
        out.append(rec)
    return pd.DataFrame(out)


def phase_view(t: pd.DataFrame) -> pd.DataFrame:
    """phase_table as a reader scans it: times in ms, rates rounded."""
    if not len(t):
        return t
    v = pd.DataFrame({"model": t.model, "dtype": t.dtype, "batch": t.batch_size, "prompt": t.seq_len,
                      "new tokens": t.new_tokens, "variant": t.variant})
    v["time to first token"] = t.ttft_ms.map(lambda x: numbers.fmt_ms(x, ""))
    v["per output token (median)"] = t.tpot_ms.map(lambda x: numbers.fmt_ms(x, ""))
    v["per output token (p90)"] = t.tpot_p90_ms.map(lambda x: numbers.fmt_ms(x, ""))
    v["decode tokens/s"] = fmt_or_blank(t.decode_tok_s, ",.1f")
    v["prompt tokens/s"] = fmt_or_blank(t.prompt_tok_s, ",.0f")
    v["end to end"] = t.e2e_ms.map(lambda x: numbers.fmt_ms(x, ""))
    v["end to end ÷ (TTFT + (n−1)·TPOT)"] = fmt_or_blank(t.e2e_over_parts, ".2f")
    v["peak MB"] = fmt_or_blank(t.peak_mem_mb, ",.0f")
    v["max |Δ| logits"] = fmt_or_blank(t.max_abs_diff, ".1e")
    v["notes"] = t.notes
    return v


def _cached_s(steps) -> float:
    """Seconds of the preparation steps loaded from the cache (made by an earlier configuration)."""
    return float(sum(s.get("seconds") or 0.0 for s in steps if s.get("cached"))) if isinstance(steps, list) else 0.0


def one_time_table(df: pd.DataFrame, sp: pd.DataFrame) -> pd.DataFrame:
    """Per candidate, shape and phase: the one-time cost, the time a call saves, the calls and tokens to repay it."""
    if not len(sp) or "speedup" not in sp:
        return pd.DataFrame()
    out = []
    for _, r in sp[sp.speedup.notna() & ~sp.variant.map(is_aa)].iterrows():
        match = df[(df.variant == r["variant"]) & (df.strategy == r["strategy"])
                   & np.logical_and.reduce([df[c] == r[c] for c in SHAPE if c in sp and c in df])]
        steps = match.prepare_steps.iloc[0] if len(match) and "prepare_steps" in match else None
        cached = _cached_s(steps)
        one_time = float(r["one_time_s"])
        s = SimpleNamespace(ratio=r["speedup"], ci_low=r["ci_low"], ci_high=r["ci_high"])
        calls, lo, hi = speedups.break_even(one_time, float(r["base_median_s"]), s)
        b, n = int(r["batch_size"]), tokens_in(r.get("data")) or 0
        per_call = {"prefill": b, "decode": b, "generate": b * n}.get(r["strategy"], b)
        out.append({**{c: r[c] for c in SHAPE if c in r}, "phase": r["strategy"], "variant": r["variant"],
                    "one_time_s": one_time, "cached_steps_s": cached, "saved_ms_per_call":
                    (float(r["base_median_s"]) - float(r["median_s"])) * 1e3,
                    "break_even_calls": calls, "break_even_tokens": calls * per_call,
                    "break_even_tokens_low": lo * per_call, "break_even_tokens_high": hi * per_call,
                    "verdict": r.get("verdict")})
    return pd.DataFrame(out)


def one_time_view(t: pd.DataFrame) -> pd.DataFrame:
    if not len(t):
        return t

    def count(x: float) -> str:
        return f"{x:,.0f}" if np.isfinite(x) else "∞"

    def tokens(r) -> str:
        if not np.isfinite(r.break_even_tokens):
            return "never (saves nothing per call)"
        return f"{count(r.break_even_tokens)} ({count(r.break_even_tokens_low)}–{count(r.break_even_tokens_high)})"

    return pd.DataFrame({"model": t.model, "batch": t.batch_size, "prompt": t.seq_len, "phase": t.phase,
                         "variant": t.variant, "one-time (s)": t.one_time_s.map(lambda x: f"{max(x, 0.0):,.1f}"),
                         "of it, cached export (s)": t.cached_steps_s.map(lambda x: f"{x:,.1f}" if x else ""),
                         "saved per call (ms)": t.saved_ms_per_call.map(lambda x: f"{x:,.2f}"),
                         "break-even: generated tokens (95% CI)": [tokens(r) for r in t.itertuples()],
                         "verdict": t.verdict})


def mechanism_table(df: pd.DataFrame, peaks: dict | None) -> pd.DataFrame:
    """Per ok row: GB/s against the bandwidth, GFLOP/s against the fp32 roof; blank for a quantized variant."""
    if not len(df):
        return pd.DataFrame()
    ok = df[(df.status == "ok") & ~df.variant.map(is_aa)].copy()
    bw, roof = peak_bandwidth(peaks), peak_gflops(peaks, "fp32")
    rows = []
    for _, r in ok.iterrows():
        n = tokens_in(r.get("data")) or 0
        ctx = int(r["seq_len"]) + (n // 2 if r["strategy"] == "decode" else 0)
        kv = generation.kv_cache_bytes(r["model"], batch_size=int(r["batch_size"]), positions=ctx, dtype=r["dtype"])
        moved, flops = (np.nan, np.nan) if changes_outputs(r["variant"]) else (r.get("bytes_per_call"),
                                                                              r.get("flops_per_call"))
        gbs = moved / r["median_s"] / 1e9 if pd.notna(moved) else np.nan
        gflops = flops / r["median_s"] / 1e9 if pd.notna(flops) else np.nan
        rows.append({**{c: r[c] for c in SHAPE}, "phase": r["strategy"], "variant": r["variant"],
                     "weights_mb": generation.weight_bytes(r["model"], r["dtype"]) / 1e6, "kv_cache_mb": kv / 1e6,
                     "gbs": gbs, "share_of_bandwidth": gbs / bw if bw else np.nan,
                     "gflops": gflops, "share_of_roof": gflops / roof if roof else np.nan})
    return pd.DataFrame(rows)


def mechanism_view(t: pd.DataFrame) -> pd.DataFrame:
    """mechanism_table as a reader scans it: MB, GB/s and GFLOP/s rounded, shares in percent."""
    if not len(t):
        return t
    return pd.DataFrame({"model": t.model, "batch": t.batch_size, "prompt": t.seq_len, "phase": t.phase,
                         "variant": t.variant, "weights (MB)": fmt_or_blank(t.weights_mb, ",.1f"),
                         "KV cache (MB)": fmt_or_blank(t.kv_cache_mb, ",.2f"),
                         "read (GB/s)": fmt_or_blank(t.gbs, ",.2f"),
                         "of the bandwidth": t.share_of_bandwidth.map(lambda x: share_text(x, "bandwidth")
                                                                      if pd.notna(x) else ""),
                         "GFLOP/s": fmt_or_blank(t.gflops, ",.1f"),
                         "of the fp32 roof": t.share_of_roof.map(lambda x: share_text(x) if pd.notna(x) else "")})


def mechanism_findings(mt: pd.DataFrame, peaks: dict | None) -> list[str]:
    """Decode's bytes against the bandwidth and prefill's FLOPs against the roof, for eager and the best variant."""
    if not len(mt):
        return []
    bw, roof = peak_bandwidth(peaks), peak_gflops(peaks, "fp32")
    lines = []
    quantized = sorted(set(mt.variant[mt.gbs.isna() & mt.variant.map(changes_outputs)]))
    dec = mt[(mt.phase == "decode") & mt.gbs.notna()]
    if len(dec):
        best = dec.loc[dec.gbs.idxmax()]
        eager = dec[dec.variant == REFERENCE]
        span = numbers.fmt_range(eager.gbs.min(), eager.gbs.max(), ".2f") if len(eager) else "?"
        lines.append(say(NOTEBOOK, "decode", best, dec.kv_cache_mb.min(), dec.kv_cache_mb.max(), span,
                         shape_words(dict(best), phase=False), bw, share_text(best.share_of_bandwidth, "bandwidth"),
                         above_roof(dec.share_of_bandwidth, "bandwidth")))
    pre = mt[(mt.phase == "prefill") & mt.gflops.notna()]
    if len(pre):
        best = pre.loc[pre.gflops.idxmax()]
        lines.append(say(NOTEBOOK, "prefill", best, shape_words(dict(best), phase=False), roof,
                         share_text(best.share_of_roof), above_roof(pre.share_of_roof)))
    if quantized and lines:
        lines.append(say(NOTEBOOK, "quantized_limits", quantized))
    return lines


def fastest_findings(df: pd.DataFrame, vt: verdicts.VerdictTable) -> list[str]:
    """Per phase and shape, the verdict table's lead, or else how its fastest option stands over eager."""
    if not len(df) or not (df.status == "ok").any():
        return []
    lines = []
    for workload in dict.fromkeys(v.workload for v in vt.options()):
        rows = sorted((v for v in vt.options() if v.workload == workload and v.ok), key=lambda v: v.ms_per_call)
        if not rows:
            continue
        lead = vt.lead(workload)
        top = rows[0]
        lines.append(say(NOTEBOOK, "fastest", workload, top,
                         lead if lead is not None and lead.candidate == top.candidate else None))
    return lines


def consistency_findings(phases: pd.DataFrame) -> list[str]:
    """Whether the end-to-end latency is its parts: generate's median over TTFT + (n − 1)·TPOT, per variant."""
    if not len(phases) or phases.e2e_over_parts.notna().sum() == 0:
        return []
    t = phases[phases.e2e_over_parts.notna()]
    parts = [(v, g.e2e_over_parts.min(), g.e2e_over_parts.max()) for v, g in t.groupby("variant", sort=False)]
    return [say(NOTEBOOK, "consistency", parts, len(t))]


def measurements(df: pd.DataFrame) -> pd.DataFrame:
    """The results, one row per configuration (common.latency_table), with the phase and tokens/s."""
    if not len(df):
        return latency_table(df)
    t = latency_table(df)
    t.insert(3, "phase", df.strategy.values)
    t.insert(t.columns.get_loc("samples/s") + 1, "tokens/s", fmt_or_blank(df.throughput_tokens_s, ",.1f").values)
    return t
