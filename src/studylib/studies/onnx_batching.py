"""Study 03: ONNX Runtime vs PyTorch and TorchScript over a text data set, across batch sizes (with int8)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import runtimes
from ..bench import dataset, surprises
from ..bench.schemas import DataGrid
from ..claims import claims as seedclaims
from ..core import numbers
from ..core.config import REFERENCE, Config, is_aa, original_of, with_aa
from ..stats import speedups, verdicts
from ..stats.speedups import EQUIVALENCE, Comparison
from .base import Analysis, Study, register
from .common import (
    aa_finding,
    add_timing_columns,
    drift_lines,
    failures_and_noise,
    finish,
    ms,
    over_reference,
    ratio_claim,
    say,
    text_workloads,
    threshold_note,
)

NOTEBOOK = "03_onnx_batching"
Variant = runtimes.offered(NOTEBOOK)  # the variants whose registration offers them in this study
STRATEGY = "unsorted"  # the texts in the given order, as seed 003 fed them
# int8 variant → the fp32 variant it quantizes
INT8 = {"torch-int8": REFERENCE, "torchao-int8": REFERENCE, "ort-int8": "ort-optimized"}
# what each step is for, at the same batch size (surprises.py)
EXPECTATIONS = (surprises.Expectation("ort", REFERENCE), surprises.Expectation("ort-optimized", "ort"),
                surprises.Expectation("ort-dynamo", "ort", expect="equal"),
                *(surprises.Expectation(q, fp32) for q, fp32 in INT8.items()))


class OnnxBatching(DataGrid):
    """Section of study 03: ONNX Runtime vs PyTorch and TorchScript over the data set, across batch sizes."""

    variants: list[Variant]


def configs(section: OnnxBatching, *, device: str, threads: int) -> list[Config]:
    """Every model × dtype × batch size × variant, eager first, A/A copies after their originals."""
    variants = with_aa([REFERENCE] + [v for v in section.variants if v != REFERENCE], section.aa)
    tag = dataset.data_tag(section.corpus, section.max_length)
    return [Config(model, v, dtype, batch, device, threads, seq_len=section.max_length, strategy=STRATEGY, data=tag)
            for model in section.models for dtype in section.dtypes for batch in section.batch_sizes
            for v in variants]


def group_by(c: Config) -> tuple:
    """A model's runtimes and batch sizes over the same texts share rounds, so across batch sizes they pair too."""
    return (c.model, c.dtype, c.device, c.data)


# Rough per-token cost (s) of eager PyTorch on 2 CPU cores, by model, for `plan`.
_TOKEN_S = {"roberta-base-classifier": 0.7e-3, "distilroberta-classifier": 0.35e-3}


def estimate_s(c: Config, section: DataGrid, measure: dict, speed: float = 1.0, *, mean_tokens: float = 45.0,
               waste: float | None = None) -> float:
    """A rough wall-time guess for `plan`: passes (first + warm-up + minimum rounds) over the data set, per replicate."""
    n = section.corpus.n_texts
    waste = waste if waste is not None else min(0.8, 0.25 * np.log2(c.batch_size)) if c.batch_size > 1 else 0.0
    per_token = _TOKEN_S.get(c.model, 1e-5) * {"torch-int8": 0.7, "torchao-int8": 0.7, "ort-int8": 0.5, "ort": 0.8,
                                              "ort-dynamo": 0.8, "ort-optimized": 0.7}.get(original_of(c.variant), 1.0)
    per_pass = n * mean_tokens / (1 - waste) * per_token + n / c.batch_size * 0.005
    export = 10.0 if _is_ort(c.variant) and c.model in _TOKEN_S and not is_aa(c.variant) else 0.0  # a copy: cached
    return measure["replicates"] * (export + per_pass / speed * (1 + measure["warmup_calls"] + measure["min_rounds"]))


def _is_ort(variant: str) -> bool:
    return runtimes.family(variant) == "onnxruntime"


def per_sample(df: pd.DataFrame) -> pd.DataFrame:
    """Time per text (pass median ÷ texts) with its CI, and texts/s and real tokens/s, per configuration."""
    t = df.copy()
    for col in ("median_s", "ci_low_s", "ci_high_s"):
        t[col.replace("_s", "_ms_per_sample")] = t[col] / t.n_texts * 1e3
    return t


speedups_same_batch = over_reference  # each variant over eager PyTorch at the same batch size (common.over_reference)


def speedups_over_batch1(df: pd.DataFrame) -> pd.DataFrame:
    """Each variant at each batch size over eager PyTorch at batch 1: seed 003's "12× PyTorch at batch 1"."""
    if not len(df):
        return speedups.pair_table(df, None)
    first = int(df.batch_size.min())
    t = speedups.pair_table(speedups.without_aa(df), df.variant.unique(), REFERENCE,
                            baseline_where={"batch_size": first}, band=EQUIVALENCE)
    return t[~((t.variant == REFERENCE) & (t.batch_size == first))].reset_index(drop=True)


def _ms_ci(row) -> str:
    """ms per text with its CI, at the decimals the CI supports: '1.23 (1.20–1.26)'."""
    return numbers.fmt(row.median_ms_per_sample, row.ci_low_ms_per_sample, row.ci_high_ms_per_sample, unit="",
                       brief=True)


def best_batches(df: pd.DataFrame) -> pd.DataFrame:
    """Per variant (no A/A copies): ms per text at the smallest batch, and the batch size with the lowest."""
    t = per_sample(speedups.without_aa(df[df.status == "ok"]))
    rows = []
    for (model, dtype, variant), g in t.groupby(["model", "dtype", "variant"], sort=False):
        first, best = g.loc[g.batch_size.idxmin()], g.loc[g.median_ms_per_sample.idxmin()]
        rows.append({"model": model, "dtype": dtype, "variant": variant,
                     f"ms/text at batch {int(first.batch_size)}": _ms_ci(first),
                     "best batch": int(best.batch_size),
                     "ms/text at best": _ms_ci(best),
                     "texts/s at best": f"{best.throughput_samples_s:,.1f}",
                     "real tokens/s at best": f"{best.throughput_tokens_s:,.0f}"})
    return pd.DataFrame(rows)


def preparation_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per ONNX Runtime row: export, optimize and quantize time, the graph's size, and made or cached."""
    rows = []
    for _, r in df[df.variant.map(_is_ort) & ~df.variant.map(is_aa) & (df.status == "ok")].iterrows():
        steps = {s["step"]: s for s in r.prepare_steps} if isinstance(r.get("prepare_steps"), list) else {}
        last = list(steps.values())[-1] if steps else {}
        rows.append({"model": r.model, "variant": r.variant, "batch_size": r.batch_size,
                     "prepare (s)": f"{r.prepare_s:.2f}",
                     **{f"{k} (s)": f"{steps[k]['seconds']:.2f}" if k in steps else ""
                        for k in ("export", "optimize", "quantize")},
                     "graph nodes": f"{last['nodes']:,}" if last.get("nodes") is not None else "",
                     "graph MB": f"{last['bytes'] / 1e6:.3g}" if last.get("bytes") is not None else "",
                     "source": "made in this run" if any(not s["cached"] for s in steps.values()) else "cache",
                     "first pass": ms(r.first_call_s)})
    return pd.DataFrame(rows)


def latency_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: pass time, ms per text, throughput, parity, int8 label agreement."""
    return add_timing_columns(per_sample(df), "pass median", (
        ("ms/text", "median_ms_per_sample", ".3g"), ("texts/s", "throughput_samples_s", ",.1f"),
        ("tokens/s", "throughput_tokens_s", ",.0f"), ("padding", "padding_waste", ".0%"),
        ("labels agree", "label_agreement", ".1%")), [
        "model", "dtype", "batch_size", "variant", "status", "pass median", "95% CI (this run)", "95% CI (re-run here)",
        "CV", "n", "ms/text", "texts/s", "tokens/s", "padding", "max |Δ|", "parity_ok", "labels agree", "error"])


def findings(df: pd.DataFrame, same: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    lines = [aa_finding(df)]
    drift = drift_lines(df)
    df, same = speedups.without_aa(df), speedups.without_aa(same)
    ok = per_sample(df[df.status == "ok"])
    for (model, dtype), d in ok.groupby(["model", "dtype"], sort=False):
        first = d[d.batch_size == d.batch_size.min()].sort_values("median_s")
        lines.append(say(NOTEBOOK, "ranking", model, dtype, int(first.batch_size.iloc[0]),
                         list(zip(first.variant, first.median_ms_per_sample))))
    for (model, dtype, variant), g in ok.groupby(["model", "dtype", "variant"], sort=False):
        best = g.loc[g.median_ms_per_sample.idxmin()]
        lo, hi = g.loc[g.batch_size.idxmin()], g.loc[g.batch_size.idxmax()]
        lines.append(say(NOTEBOOK, "best_batch", variant, model, dtype, best, lo, hi, hi.median_s / lo.median_s))
    s = same[same.speedup.notna()]
    for (model, dtype, variant), g in s.groupby(["model", "dtype", "variant"], sort=False):
        lines.append(say(NOTEBOOK, "same_batch", variant, model, dtype, [r for _, r in g.iterrows()]))
    for variant in INT8:
        q = ok[ok.variant == variant]
        if len(q):
            lines.append(say(NOTEBOOK, "int8", variant, q.label_agreement.min(), q.label_agreement.max(),
                             q.max_abs_diff.max()))
    fp32 = ok[~ok.variant.isin(list(INT8))]
    if len(fp32):
        bad = fp32[fp32.parity_ok == False]  # noqa: E712
        lines.append(say(NOTEBOOK, "parity", fp32.max_abs_diff.max(),
                         [f"{r['variant']} b{r['batch_size']}" for _, r in bad.iterrows()]))
        lines.append(say(NOTEBOOK, "unbatched", ok.batched_vs_unbatched_max_diff.max(),
                         dataset.UNBATCHED_CHECK_TEXTS))
    return lines + failures_and_noise(df, lambda r: f"{r['variant']} b{r['batch_size']}") + drift


def _ok(df: pd.DataFrame, claim) -> pd.DataFrame:
    """The ok rows (no A/A copies) of the seed's model and precision, at batch sizes a pass fills at least once."""
    ok = seedclaims.matching(speedups.without_aa(df[df.status == "ok"]), claim, one_group=True)
    return ok[ok.n_texts >= ok.batch_size] if "n_texts" in ok else ok


def _batches(ok: pd.DataFrame, below: int | None = None, batch=None, at_least: int | None = None) -> list[int]:
    """The batch sizes a claim is read at: `batch` (smallest, largest, a size) or all below `below`, ≥ `at_least`."""
    sizes = sorted(int(b) for b in ok.batch_size.unique() if at_least is None or b >= at_least)
    if batch == "smallest":
        return sizes[:1]
    if batch == "largest":
        return sizes[-1:]
    if batch is not None:
        return [int(batch)] if int(batch) in sizes else []
    return [b for b in sizes if below is None or b < below]


def _rival(ok: pd.DataFrame, cand: str, over: list[str], batch: int):
    """`cand` over the faster of `over` (the stronger rival) at one batch size: (rival, (ratio, low, high)), or None."""
    vs = []
    for base in [x for x in over if x != cand]:
        c, b = speedups.paired(ok[ok.batch_size == batch], cand, base)
        if len(c):
            vs.append((base, tuple(speedups.speedup(b.iloc[0], c.iloc[0]))))
    return min(vs, key=lambda x: x[1][0]) if vs else None


def worst_gain(df: pd.DataFrame, tables: dict, claim, variants: list[str], over: list[str] | None = None,
               below: int | None = None, batch=None, at_least: int | None = None):
    """Each of `variants` over the faster of `over` (default eager) per batch read: the least favourable cell."""
    ok = _ok(df, claim)
    over = over or [REFERENCE]
    rivals = [(v, b, _rival(ok, v, over, b)) for b in _batches(ok, below, batch, at_least) for v in variants]
    cells = [(f"{v} over {x[0]} b{b}", x[1]) for v, b, x in rivals if x is not None]
    if not cells:
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_at_batches", variants, over, _batches(ok)))
    label, (v, lo, hi) = seedclaims.least_favourable(cells, claim)
    used = ok[ok.batch_size.isin(_batches(ok, below, batch, at_least)) & ok.variant.isin(variants + over)]
    return ratio_claim(df, (v, lo, hi), say(NOTEBOOK, "least_favourable", label, cells) + threshold_note(claim, lo, hi),
                       used)


def gain_trend(df: pd.DataFrame, tables: dict, claim, variants: list[str], over: list[str] | None = None):
    """The best of `variants` over the faster of `over`: gain at the smallest batch ÷ gain at the largest."""
    ok = _ok(df, claim)
    over = over or [REFERENCE]
    sizes = _batches(ok)
    ends = []
    for b in (sizes[0], sizes[-1]) if len(sizes) > 1 else ():
        vs = [(v, *x) for v in variants if (x := _rival(ok, v, over, b)) is not None]
        if vs:
            ends.append((b, max(vs, key=lambda x: x[2][0])))
    if len(ends) < 2:
        return seedclaims.NotAnswered("the variants were not measured at two batch sizes")
    (b1, s), (b2, large) = ends
    v, lo, hi = speedups.ratio_of(s[2], large[2])
    return ratio_claim(df, (v, lo, hi), say(NOTEBOOK, "trend", s, b1, large, b2), ok[ok.batch_size.isin([b1, b2])])


def over_batch1(df: pd.DataFrame, tables: dict, claim, variants: list[str], batches: list[int] | None = None):
    """The best of `variants` at `batches` (default: above the smallest) over eager at the smallest batch."""
    o = seedclaims.matching(tables["over batch 1"], claim, one_group=True)
    o = o[o.variant.isin(variants) & o.speedup.notna()]
    o = o[o.batch_size.isin(batches)] if batches else o[o.batch_size > o.baseline_batch_size]
    if not len(o):
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_at", variants, batches))
    best = o.loc[o.speedup.idxmax()]
    return ratio_claim(df, (best.speedup, best.ci_low, best.ci_high),
                       say(NOTEBOOK, "over_batch1", best, [r for _, r in o.iterrows()]),
                       _ok(df, claim)[lambda t: t.variant.isin(variants + [REFERENCE])])


def int8_accuracy(df: pd.DataFrame, tables: dict, claim):
    """Not answerable with random weights; says how far int8 moved the predicted labels all the same."""
    q = df[df.variant.isin(list(INT8)) & (df.status == "ok")]
    agree = (q.label_agreement.min(), q.label_agreement.max()) if len(q) else None
    return seedclaims.NotAnswered(say(NOTEBOOK, "int8_accuracy", agree))


def claims(df: pd.DataFrame, same: pd.DataFrame, over1: pd.DataFrame, peaks: dict | None = None, *,
           vt: verdicts.VerdictTable) -> pd.DataFrame:
    """The registry's claims this study tests, judged on these results and the run's verdict table `vt`."""
    return seedclaims.study_claims(NOTEBOOK, df, {"same batch": same, "over batch 1": over1}, peaks=peaks, vt=vt)


def analyse(df: pd.DataFrame, peaks: dict | None = None, *, vt: verdicts.VerdictTable) -> Analysis:
    """The study's tables, findings and claims, every decision as the run's verdict table `vt` has it."""
    same, over1 = speedups_same_batch(df), speedups_over_batch1(df)
    tables = {"same batch": same, "over batch 1": over1, "best batches": best_batches(df),
              "preparation": preparation_table(df)}
    return finish(NOTEBOOK, df, peaks, vt, tables, findings(df, same), claims(df, same, over1, peaks, vt=vt),
                  shape=["model", "dtype", "batch_size"])


STUDY = register(Study(
    NOTEBOOK, OnnxBatching, configs, estimate_s, analyse, group_by=group_by, workloads=text_workloads,
    comparisons=(
        Comparison("ONNX Runtime over eager PyTorch", "ort"),
        Comparison("ONNX Runtime optimized over eager", "ort-optimized"),
        Comparison("ONNX Runtime TensorRT over eager", "ort-tensorrt"),
        Comparison("ONNX Runtime int8 over eager fp32", "ort-int8"),
        Comparison("PyTorch int8 over eager fp32", "torch-int8"),
        Comparison("TorchScript over eager", "torchscript"),
        # the successors beside the deprecated paths they replace
        Comparison("ONNX Runtime on the dynamo export over eager", "ort-dynamo"),
        Comparison("dynamo ONNX export over the TorchScript export", "ort-dynamo", "ort",
                   replaces="torch.onnx.export's TorchScript-based exporter, dynamo=False, the default until "
                            "torch 2.13"),
        Comparison("torchao int8 over eager fp32", "torchao-int8"),
        Comparison("torchao int8 over torch.ao int8", "torchao-int8", "torch-int8",
                   replaces="torch.ao.quantization's dynamic int8, deprecated in favour of torchao"),
    ),
    runs="a RoBERTa classifier over the text set, a call one pass in batches",
    on_gpu=("ONNX Runtime's CUDA provider replaces its CPU kernels and int8 quantization mostly targets CPUs, so "
            "the int8 rows do not carry over; larger batches use a GPU better, so the best batch size grows."),
    expectations=EXPECTATIONS,
))


seedclaims.register_evaluators(NOTEBOOK, worst_gain, gain_trend, over_batch1, int8_accuracy)
