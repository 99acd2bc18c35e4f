"""Study 03: ONNX Runtime vs PyTorch and TorchScript over a text data set, across batch sizes (with int8)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from .. import dataset, runtimes, stats
from ..profiles import DataGrid
from ..sweep import AA, REFERENCE, Config
from .base import Analysis, Comparison, Study, register
from .common import (
    aa_control,
    aa_finding,
    add_timing_columns,
    classify,
    describe_ci,
    drift_finding,
    failures_and_noise,
    fmt_ms,
    fmt_or_blank,
    fmt_x,
    noise_band,
)

NOTEBOOK = "03_onnx_batching"
STRATEGY = "unsorted"  # the texts in the given order, as seed 003 fed them
INT8 = {"torch-int8": REFERENCE, "ort-int8": "ort-optimized"}  # int8 variant → the fp32 variant it quantizes
EQUAL_WITHIN = 0.10  # seed 003: "within 10%"
SEED_T4_ONNX = 12.0  # seed 003: ONNX at batch 8 on a T4, over PyTorch at batch 1
MAGNITUDE = 1.10  # a CI overlapping claim/1.1 … claim×1.1 counts as the same size of gain


class OnnxBatching(DataGrid):
    """Section of study 03: ONNX Runtime vs PyTorch and TorchScript over the data set, across batch sizes."""

    variants: list[Literal["eager", "torchscript", "ort", "ort-optimized", "torch-int8", "ort-int8", "ort-tensorrt"]]


def configs(section: OnnxBatching, *, device: str, threads: int) -> list[Config]:
    """Every configuration: model × dtype × batch size × variant, eager and its A/A copy first at each batch size."""
    variants = [REFERENCE, AA] + [v for v in section.variants if v not in (REFERENCE, AA)]
    tag = dataset.data_tag(section.corpus, section.max_length)
    return [Config(model, v, dtype, batch, device, threads, seq_len=section.max_length, strategy=STRATEGY, data=tag)
            for model in section.models for dtype in section.dtypes for batch in section.batch_sizes
            for v in variants]


def group_by(c: Config) -> tuple:
    """Every runtime at every batch size over the same texts is timed in the same rounds: comparisons across
    batch sizes (each variant over eager at batch 1) pair round by round too."""
    return (c.model, c.dtype, c.device, c.data)


# Rough per-token cost (s) of eager PyTorch on 2 CPU cores, by model, for `plan`.
_TOKEN_S = {"roberta-base-classifier": 0.7e-3, "distilroberta-classifier": 0.35e-3}


def estimate_s(c: Config, section: DataGrid, measure: dict, speed: float = 1.0, *, mean_tokens: float = 45.0,
               waste: float | None = None) -> float:
    """A rough wall-time guess for `plan`: passes (first + warm-up + minimum rounds) over the data set, per replicate."""
    n = section.corpus.n_texts
    waste = waste if waste is not None else min(0.8, 0.25 * np.log2(c.batch_size)) if c.batch_size > 1 else 0.0
    per_token = _TOKEN_S.get(c.model, 1e-5) * {"torch-int8": 0.7, "ort-int8": 0.5, "ort": 0.8,
                                              "ort-optimized": 0.7}.get(c.variant, 1.0)
    per_pass = n * mean_tokens / (1 - waste) * per_token + n / c.batch_size * 0.005
    export = 10.0 if _is_ort(c.variant) and c.model in _TOKEN_S else 0.0
    return measure["replicates"] * (export + per_pass / speed * (1 + measure["warmup_calls"] + measure["min_rounds"]))


def _is_ort(variant: str) -> bool:
    return runtimes.family(variant) == "onnxruntime"


def per_sample(df: pd.DataFrame) -> pd.DataFrame:
    """Time per text (pass median ÷ texts) with its CI, and texts/s and real tokens/s, per configuration."""
    t = df.copy()
    for col in ("median_s", "ci_low_s", "ci_high_s"):
        t[col.replace("_s", "_ms_per_sample")] = t[col] / t.n_texts * 1e3
    return t


def prepare_steps(row: pd.Series) -> dict[str, dict]:
    """The export / optimize / quantize steps an ONNX runtime's row records, by step name."""
    steps = row.get("prepare_steps")
    return {s["step"]: s for s in steps} if isinstance(steps, list) else {}


def _pairs(df: pd.DataFrame, baseline, candidate_filter=None) -> pd.DataFrame:
    """Speed-up of every row over the row `baseline(row)` names (same model, dtype), with CIs."""
    ok = df[df.status == "ok"].set_index(["model", "dtype", "variant", "batch_size"])
    out = []
    for _, r in df.iterrows():
        if candidate_filter is not None and not candidate_filter(r):
            continue
        base_key = baseline(r)
        rec = {k: r[k] for k in ("model", "dtype", "variant", "batch_size", "status", "error")}
        if r.status == "ok" and base_key in ok.index:
            b = ok.loc[base_key]
            ratio, lo, hi = stats.speedup(b, r)
            rec |= {"speedup": ratio, "ci_low": lo, "ci_high": hi, "baseline": base_key[2], "baseline_batch": base_key[3]}
        elif r.status == "ok":
            rec |= {"status": "baseline missing", "error": f"no ok {base_key[2]} row at batch {base_key[3]}"}
        out.append(rec)
    return pd.DataFrame(out, columns=["model", "dtype", "variant", "batch_size", "status", "error", "speedup",
                                      "ci_low", "ci_high", "baseline", "baseline_batch"])


def speedups_same_batch(df: pd.DataFrame) -> pd.DataFrame:
    """Each variant over eager PyTorch at the same batch size."""
    return _pairs(df, lambda r: (r.model, r["dtype"], REFERENCE, r.batch_size), lambda r: r.variant != REFERENCE)


def speedups_over_batch1(df: pd.DataFrame) -> pd.DataFrame:
    """Each variant at each batch size over eager PyTorch at batch 1: seed 003's "12× PyTorch at batch 1"."""
    first = int(df.batch_size.min())
    return _pairs(df, lambda r: (r.model, r["dtype"], REFERENCE, first))


def best_batches(df: pd.DataFrame) -> pd.DataFrame:
    """Per variant: ms per text at the smallest batch, and the batch size with the lowest median ms per text."""
    t = per_sample(df[df.status == "ok"])
    rows = []
    for (model, dtype, variant), g in t.groupby(["model", "dtype", "variant"], sort=False):
        first, best = g.loc[g.batch_size.idxmin()], g.loc[g.median_ms_per_sample.idxmin()]
        rows.append({"model": model, "dtype": dtype, "variant": variant,
                     f"ms/text at batch {int(first.batch_size)}": f"{first.median_ms_per_sample:.3g} "
                                                                  f"({first.ci_low_ms_per_sample:.3g}–"
                                                                  f"{first.ci_high_ms_per_sample:.3g})",
                     "best batch": int(best.batch_size),
                     "ms/text at best": f"{best.median_ms_per_sample:.3g} ({best.ci_low_ms_per_sample:.3g}–"
                                        f"{best.ci_high_ms_per_sample:.3g})",
                     "texts/s at best": f"{best.throughput_samples_s:,.1f}",
                     "real tokens/s at best": f"{best.throughput_tokens_s:,.0f}"})
    return pd.DataFrame(rows)


def preparation_table(df: pd.DataFrame) -> pd.DataFrame:
    """Export, optimization and quantization time, and whether this run made the model or found it cached."""
    rows = []
    for _, r in df[df.variant.map(_is_ort) & (df.status == "ok")].iterrows():
        steps = prepare_steps(r)
        rows.append({"model": r.model, "variant": r.variant, "batch_size": r.batch_size,
                     "prepare (s)": f"{r.prepare_s:.2f}",
                     **{f"{k} (s)": f"{steps[k]['seconds']:.2f}" if k in steps else ""
                        for k in ("export", "optimize", "quantize")},
                     "source": "made in this run" if any(not s["cached"] for s in steps.values()) else "cache",
                     "first pass": fmt_ms(r.first_call_s)})
    return pd.DataFrame(rows)


def latency_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: pass time, ms per text, throughput, parity, int8 label agreement."""
    t = add_timing_columns(per_sample(df), "pass median")
    t["ms/text"] = fmt_or_blank(t.median_ms_per_sample, ".3g")
    t["texts/s"] = fmt_or_blank(t.throughput_samples_s, ",.1f")
    t["tokens/s"] = fmt_or_blank(t.throughput_tokens_s, ",.0f")
    t["padding"] = fmt_or_blank(t.padding_waste, ".0%")
    t["labels agree"] = fmt_or_blank(t.label_agreement, ".1%")
    cols = ["model", "dtype", "batch_size", "variant", "status", "pass median", "95% CI", "CV", "n", "ms/text",
            "texts/s", "tokens/s", "padding", "max |Δ|", "parity_ok", "labels agree", "error"]
    return t[cols]


def findings(df: pd.DataFrame, same: pd.DataFrame, over1: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    aa = aa_control(df, ["model", "dtype", "batch_size"])
    band = noise_band(aa)
    lines = [aa_finding(aa)]
    drift = drift_finding(df)
    df, same = df[df.variant != AA], same[same.variant != AA]
    ok = per_sample(df[df.status == "ok"])
    if len(ok):
        for (model, dtype), d in ok.groupby(["model", "dtype"], sort=False):
            first = d[d.batch_size == d.batch_size.min()].sort_values("median_s")
            lines.append(f"{model} {dtype}, batch {int(first.batch_size.iloc[0])}, fastest to slowest (ms per text): "
                         + ", ".join(f"{r['variant']} {r['median_ms_per_sample']:.3g}" for _, r in first.iterrows())
                         + ".")
        for (model, dtype, variant), g in ok.groupby(["model", "dtype", "variant"], sort=False):
            best = g.loc[g.median_ms_per_sample.idxmin()]
            lo, hi = g.loc[g.batch_size.idxmin()], g.loc[g.batch_size.idxmax()]
            lines.append(f"{variant} ({model} {dtype}): lowest time per text at batch {int(best.batch_size)} "
                         f"({best.median_ms_per_sample:.3g} ms); from batch {int(lo.batch_size)} to "
                         f"{int(hi.batch_size)} its time per text changes {fmt_x(hi.median_s / lo.median_s)} "
                         f"(padding waste {lo.padding_waste:.0%} → {hi.padding_waste:.0%}).")
    s = same[same.speedup.notna()]
    for (model, dtype, variant), g in s.groupby(["model", "dtype", "variant"], sort=False):
        classes = [classify(a, b, band) for a, b in zip(g.ci_low, g.ci_high)]
        lines.append(f"**{variant} over eager** ({model} {dtype}) at the same batch size: "
                     + ", ".join(f"b{int(r['batch_size'])} {describe_ci(r)}" for _, r in g.iterrows())
                     + f" — faster in {classes.count('faster')}, slower in {classes.count('slower')} of {len(g)}.")
    for variant in INT8:
        q = df[(df.variant == variant) & (df.status == "ok")]
        if len(q):
            lines.append(f"{variant}: predicted labels agree with eager fp32 PyTorch on "
                         f"{q.label_agreement.min():.1%}–{q.label_agreement.max():.1%} of texts "
                         f"(max abs logit difference up to {q.max_abs_diff.max():.2g}); with random weights the "
                         f"logit margins are small, so this shows how far int8 moves the outputs, not a trained "
                         f"model's accuracy.")
    measured = df[df.status == "ok"]
    fp32 = measured[~measured.variant.isin(list(INT8))]
    if len(fp32):
        bad = fp32[fp32.parity_ok == False]  # noqa: E712
        lines.append(f"Parity of fp32 variants with eager PyTorch: largest max-abs difference {fp32.max_abs_diff.max():.1e}; "
                     + (f"**{len(bad)} exceed the tolerance**: " + ", ".join(f"{r['variant']} b{r['batch_size']}"
                                                                           for _, r in bad.iterrows())
                        if len(bad) else "all within tolerance."))
        unb = measured.batched_vs_unbatched_max_diff.max()
        lines.append(f"Batching does not change outputs: eager PyTorch's batched pass and the same texts run one at "
                     f"a time differ by at most {unb:.1e} (sample of {dataset.UNBATCHED_CHECK_TEXTS} texts per batch "
                     f"size); outputs are put back in the given order before every comparison.")
    return lines + failures_and_noise(df, lambda r: f"{r['variant']} b{r['batch_size']}") + ([drift] if drift else [])


def _versus(df: pd.DataFrame, cand: str, base: str, batch: int):
    """(ratio, ci_low, ci_high) of `cand` over `base` at one batch size (one model and dtype), or None."""
    ok = df[(df.status == "ok") & (df.batch_size == batch)].set_index("variant")
    if cand not in ok.index or base not in ok.index:
        return None
    return tuple(stats.speedup(ok.loc[base], ok.loc[cand]))


def claims(df: pd.DataFrame, same: pd.DataFrame, over1: pd.DataFrame) -> pd.DataFrame:
    """Seed 003's claims (and seed 004's about ONNX Runtime) beside this run, per model and dtype."""
    df, same, over1 = df[df.variant != AA], same[same.variant != AA], over1[over1.variant != AA]
    groups = list(df.groupby(["model", "dtype"], sort=False))
    rows = []
    for (model, dtype), d in groups:
        label = f" — {model} {dtype}" if len(groups) > 1 else ""
        pick = lambda t, model=model, dtype=dtype: t[(t.model == model) & (t["dtype"] == dtype)  # noqa: E731
                                                      & t.speedup.notna()]
        rows += [r | {"seed": r["seed"] + label} for r in _claims(d, pick(same), pick(over1))]
    return pd.DataFrame(rows, columns=["seed", "claim", "this run", "verdict"])


def _claims(df: pd.DataFrame, s: pd.DataFrame, over1: pd.DataFrame) -> list[dict]:
    rows = []
    gpu = (df.device == "cuda").any()
    onnx = ["ort", "ort-optimized"]
    small = s[s.variant.isin(onnx) & (s.batch_size < 32)]
    if not gpu:
        if len(small):
            wins, notes = [], []
            for b, g in small.groupby("batch_size"):
                best = g.loc[g.speedup.idxmax()]
                over_ts = _versus(df, best.variant, "torchscript", b)
                beats_ts = over_ts is None or over_ts[1] > 1  # CI of ONNX over TorchScript above 1
                wins.append(bool(best.ci_low > 1 and beats_ts))
                notes.append(f"b{int(b)} {best['variant']} {describe_ci(best)} over eager"
                             + (f", {over_ts[0]:.2f}× (95% CI {over_ts[1]:.2f}–{over_ts[2]:.2f}×) over TorchScript"
                                if over_ts else ""))
            rows.append({"seed": "003 (CPU)", "claim": "below batch 32, ONNX Runtime is the clear winner",
                         "this run": "; ".join(notes),
                         "verdict": ("agrees" if all(wins) else "does not agree" if not any(wins) else "mixed")
                                    + f" (ONNX ahead of eager and TorchScript with CIs above 1 at {sum(wins)} of "
                                      f"{len(wins)} batch sizes)"})
        top = int(s.batch_size.max()) if len(s) else 0
        if top >= 32:
            three = s[(s.batch_size == top) & s.variant.isin(["torchscript", "ort"])]
            inside = [1 - EQUAL_WITHIN <= r.ci_low and r.ci_high <= 1 + EQUAL_WITHIN for r in three.itertuples()]
            outside = [r.ci_low > 1 + EQUAL_WITHIN or r.ci_high < 1 - EQUAL_WITHIN for r in three.itertuples()]
            rows.append({"seed": "003 (CPU)", "claim": "at batch 64, PyTorch, TorchScript and ONNX are within 10%",
                         "this run": f"batch {top}: "
                                     + "; ".join(f"{r['variant']} {describe_ci(r)} over eager" for _, r in three.iterrows()),
                         "verdict": "agrees" if inside and all(inside) else
                                    "does not agree" if any(outside) else "inconclusive (CIs cross the ±10% band)"})
        else:
            rows.append({"seed": "003 (CPU)", "claim": "at batch 64, PyTorch, TorchScript and ONNX are within 10%",
                         "this run": "no batch of 32 or more in this profile", "verdict": "not measured"})
        rows.append({"seed": "003 (T4, V100)", "claim": "on GPU, ONNX at batch 8 is about 12× PyTorch at batch 1; "
                                                        "batch 32/64 reaches 28× the GPU baseline",
                     "this run": "no GPU in this profile", "verdict": "not measured here (GPU profiles)"})
    else:
        o1 = over1[over1.variant.isin(onnx)]
        if len(o1):
            best = o1.loc[o1.speedup.idxmax()]
            near = best.ci_low <= SEED_T4_ONNX * MAGNITUDE and best.ci_high >= SEED_T4_ONNX / MAGNITUDE
            rows.append({"seed": "003 (T4)", "claim": "best is ONNX at batch 8, about 12× PyTorch at batch 1",
                         "this run": f"best ONNX: {best['variant']} at batch {int(best['batch_size'])}, "
                                     f"{describe_ci(best)} over eager at batch 1",
                         "verdict": ("agrees" if near and best.batch_size == 8 else
                                     "same size of gain, other batch" if near else "differs")
                                    + f" (CI {'overlaps' if near else 'misses'} 12× ± 10%)"})
    q = df[df.variant.isin(list(INT8)) & (df.status == "ok")]
    if len(q):
        qs = s[s.variant.isin(list(INT8))]
        rows.append({"seed": "003", "claim": "next step: dynamic int8 quantization",
                     "this run": "; ".join(f"{r['variant']} b{int(r['batch_size'])} {describe_ci(r)} over eager"
                                           for _, r in qs.iterrows())
                                 + f"; labels agree with fp32 on {q.label_agreement.min():.1%}–"
                                   f"{q.label_agreement.max():.1%} of texts (random weights)",
                     "verdict": "measured (the seed gives no number)"})
    b1 = s[(s.batch_size == s.batch_size.min()) & s.variant.isin(onnx)] if len(s) else s
    if len(b1):
        rows.append({"seed": "004", "claim": "ONNX Runtime is ahead of PyTorch at small batch",
                     "this run": "; ".join(f"{r['variant']} b{int(r['batch_size'])} {describe_ci(r)}"
                                           for _, r in b1.iterrows()),
                     "verdict": "agrees" if (b1.ci_low > 1).all() else
                                "does not agree" if (b1.ci_high < 1).all() else "mixed or inconclusive"})
    return rows


def analyse(df: pd.DataFrame) -> Analysis:
    """Speed-ups at the same batch size and over eager at batch 1, best batches, preparation costs, the
    findings and the seed claims."""
    same, over1 = speedups_same_batch(df), speedups_over_batch1(df)
    return Analysis(tables={"same batch": same, "over batch 1": over1, "best batches": best_batches(df),
                            "preparation": preparation_table(df)},
                    findings=findings(df, same, over1), claims=claims(df, same, over1))


_DATA_SHAPE = ("model", "dtype", "batch_size", "data", "strategy")
STUDY = register(Study(
    NOTEBOOK, OnnxBatching, configs, estimate_s, analyse, group_by=group_by,
    comparisons=(
        Comparison("ONNX Runtime over eager PyTorch", "ort", "eager", shape=_DATA_SHAPE),
        Comparison("ONNX Runtime optimized over eager", "ort-optimized", "eager", shape=_DATA_SHAPE),
        Comparison("ONNX Runtime TensorRT over eager", "ort-tensorrt", "eager", shape=_DATA_SHAPE),
        Comparison("ONNX Runtime int8 over eager fp32", "ort-int8", "eager", shape=_DATA_SHAPE),
        Comparison("PyTorch int8 over eager fp32", "torch-int8", "eager", shape=_DATA_SHAPE),
    )))
