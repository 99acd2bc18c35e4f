"""Study 04: sorted-length batching — how batching strategy and batch size change throughput on real text."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from .. import runtimes
from ..bench import dataset, surprises
from ..bench.schemas import DataGrid
from ..claims import claims as seedclaims
from ..core import numbers
from ..core.config import REFERENCE, Config, shape_columns, with_aa
from ..stats import speedups, verdicts
from ..stats.speedups import Comparison
from ..workloads import batching
from .base import Analysis, Study, register
from .common import (
    aa_finding,
    add_timing_columns,
    describe_ci,
    drift_lines,
    failures_and_noise,
    finish,
    ratio_claim,
    say,
    text_workloads,
)
from .onnx_batching import estimate_s as _pass_estimate
from .onnx_batching import group_by  # a model's strategies, runtimes and batch sizes over the same texts share rounds

NOTEBOOK = "04_sorted_length_batching"
Variant = runtimes.offered(NOTEBOOK)  # the variants whose registration offers them in this study
BASELINE = "unsorted"
# sorting removes padding: faster wherever a batch holds two texts or more (surprises.py)
EXPECTATIONS = (surprises.Expectation("sorted", BASELINE, column="strategy", min_batch=2),)


class SortedBatching(DataGrid):
    """Section of study 04: batching strategies over the data set, across batch sizes and runtimes."""

    variants: list[Variant]
    strategies: list[Literal["unsorted", "sorted", "bucketed", "pad-to-max"]]
    bucket_batches: int = Field(8, ge=1, description="bucketed: batches per bucket (texts sorted within a bucket)")

    @model_validator(mode="after")
    def _baseline(self) -> SortedBatching:
        if "unsorted" not in self.strategies:
            raise ValueError("strategies must include 'unsorted', the baseline every gain is taken over")
        return self


def configs(section: SortedBatching, *, device: str, threads: int) -> list[Config]:
    """model × dtype × strategy × batch size × runtime, eager first; A/A copies with the baseline strategy only."""
    variants = [REFERENCE] + [v for v in section.variants if v != REFERENCE]
    tag = f"{dataset.data_tag(section.corpus, section.max_length)}:buckets{section.bucket_batches}"
    return [Config(model, v, dtype, batch, device, threads, seq_len=section.max_length, strategy=strategy, data=tag)
            for model in section.models for dtype in section.dtypes for strategy in section.strategies
            for batch in section.batch_sizes
            for v in (with_aa(variants, section.aa) if strategy == BASELINE else variants)]


def estimate_s(c: Config, section: SortedBatching, measure: dict, speed: float = 1.0) -> float:
    waste = {"sorted": 0.1, "bucketed": 0.4, "pad-to-max": 1 - 45 / c.seq_len}.get(c.strategy)
    if c.batch_size == 1 and c.strategy != "pad-to-max":
        waste = 0.0  # one text per batch: nothing to pad, whatever the order
    return _pass_estimate(c, section, measure, speed, waste=waste)


def planned_padding(data: dataset.TextDataset, strategies, batch_sizes, seed: int,
                    bucket_batches: int = batching.BUCKET_BATCHES) -> pd.DataFrame:
    """Padding each strategy costs at each batch size, computed from the token lengths alone."""
    rows = []
    for s in strategies:
        for b in batch_sizes:
            plan = batching.plan(data.lengths, b, s, max_length=data.max_length, seed=seed,
                                 bucket_batches=bucket_batches)
            rows.append({"strategy": s, "batch_size": b, "batches": len(plan), **batching.padding(plan, data.lengths)})
    return pd.DataFrame(rows)


def gains(df: pd.DataFrame) -> pd.DataFrame:
    """Every strategy over unsorted at the same runtime and shape, each row paired with its unsorted row."""
    on, out = [*shape_columns(df, without=("strategy",)), "variant"], []
    cols = ["model", "dtype", "variant", "batch_size", "strategy", "status", "error"]
    for r, base in speedups.matched(df, None, BASELINE, column="strategy", on=on):
        rec = {k: r[k] for k in cols}
        if r.status == "ok" and base is not None and base.status == "ok":
            rec |= dict(zip(("speedup", "ci_low", "ci_high"), speedups.speedup(base, r)))
        elif r.status == "ok":
            rec |= {"status": "baseline missing", "error": "no ok unsorted row at this batch size"}
        out.append(rec)
    return pd.DataFrame(out, columns=[*cols, "speedup", "ci_low", "ci_high"])


def throughput_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: texts/s and real tokens/s with the pass time's CI, and padding waste."""
    return add_timing_columns(df, "pass median", (
        ("texts/s", "throughput_samples_s", ",.1f"), ("real tokens/s", "throughput_tokens_s", ",.0f"),
        ("padding waste", "padding_waste", ".1%")), [
        "model", "variant", "strategy", "batch_size", "status", "pass median", "95% CI (this run)",
        "95% CI (re-run here)", "CV", "n", "texts/s", "real tokens/s", "padding waste", "max |Δ|", "parity_ok", "error"])


def with_throughput_ci(df: pd.DataFrame) -> pd.DataFrame:
    """texts/s with its CI (from the pass time's CI) for plotting."""
    return df.assign(texts_s=df.n_texts / df.median_s, texts_s_lo=df.n_texts / df.ci_high_s,
                     texts_s_hi=df.n_texts / df.ci_low_s)


def findings(df: pd.DataFrame, g: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    lines = [aa_finding(df)]
    drift = drift_lines(df)
    df = speedups.without_aa(df)
    ok = g[g.speedup.notna()]
    for (model, dtype, variant, strategy), h in ok.groupby(["model", "dtype", "variant", "strategy"], sort=False):
        largest = h.loc[h.batch_size.idxmax()]
        lines.append(say(NOTEBOOK, "at_largest", strategy, variant, model, dtype, largest))
    measured = df[df.status == "ok"]
    if len(measured):
        for (model, dtype, variant, strategy), h in measured.groupby(["model", "dtype", "variant", "strategy"],
                                                                     sort=False):
            best = h.loc[h.throughput_samples_s.idxmax()]
            lines.append(say(NOTEBOOK, "most_texts", variant, strategy, model, dtype, best))
        w = measured.groupby(["strategy", "batch_size"]).padding_waste.first().unstack()
        lines.append(say(NOTEBOOK, "waste", [(s, w.loc[s].iloc[0], w.loc[s].iloc[-1]) for s in w.index]))
        lines.append(say(NOTEBOOK, "order", measured.max_abs_diff.max(), int((measured.parity_ok == False).sum()),  # noqa: E712
                         measured.batched_vs_unbatched_max_diff.max()))
    return lines + failures_and_noise(df, lambda r: f"{r['variant']} {r['strategy']} b{r['batch_size']}") + drift


def batch_change(df: pd.DataFrame, tables: dict, claim, strategy: str, variant: str = REFERENCE,
                 small: int = 16, large: int = 64):
    """Throughput at `large` over `small` for one strategy and runtime (else the profile's two largest sizes)."""
    ok = seedclaims.matching(df[(df.status == "ok") & (df.variant == variant) & (df.strategy == strategy)], claim,
                             one_group=True)
    sizes = sorted(int(b) for b in ok.batch_size.unique())
    if len(sizes) < 2:
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_two_batches", variant, strategy))
    hi_b = large if large in sizes else sizes[-1]
    lo_b = small if small in sizes and small < hi_b else max(b for b in sizes if b < hi_b)
    at = ok.set_index("batch_size")
    ch = tuple(speedups.speedup(at.loc[lo_b], at.loc[hi_b]))  # throughput at batch hi_b over batch lo_b
    rows = ok[ok.batch_size.isin([lo_b, hi_b])]
    return ratio_claim(df, ch, say(NOTEBOOK, "batch_change", variant, strategy, hi_b, lo_b), rows)


def strategy_gain(df: pd.DataFrame, tables: dict, claim, strategy: str = "sorted", variant: str = REFERENCE):
    """Seed 003's 'batch texts of similar length together': `strategy` over unsorted at the largest batch."""
    g = tables["gains"]
    g = seedclaims.matching(g[(g.strategy == strategy) & (g.variant == variant) & g.speedup.notna()], claim,
                            one_group=True)
    if not len(g):
        return seedclaims.NotAnswered(say(NOTEBOOK, "no_gain", variant, strategy))
    r = g.loc[g.batch_size.idxmax()]
    rows = df[(df.status == "ok") & (df.variant == variant) & (df.batch_size == r.batch_size) & (df.model == r.model)
              & (df["dtype"] == r["dtype"]) & df.strategy.isin([strategy, BASELINE])]
    text = say(NOTEBOOK, "strategy_gain", variant, strategy, int(r.batch_size), list(g.itertuples()))
    return ratio_claim(df, (r.speedup, r.ci_low, r.ci_high), text, rows)


def claims(df: pd.DataFrame, g: pd.DataFrame, *, vt: verdicts.VerdictTable) -> pd.DataFrame:
    """The registry's claims this study tests, judged on these results and the run's verdict table `vt`."""
    return seedclaims.study_claims(NOTEBOOK, df, {"gains": g}, vt=vt)


def length_summary(data: dataset.TextDataset) -> pd.DataFrame:
    """The sample's token lengths: what padding works against."""
    L = data.lengths
    q = np.percentile(L, [50, 90, 99])
    return pd.DataFrame([{"texts": data.n, "median tokens": int(q[0]), "p90": int(q[1]), "p99": int(q[2]),
                          "max": int(L.max()), "truncated at max_length": int((L >= data.max_length).sum()),
                          "tokenizer": data.tokenizer, "corpus": data.source}])


def predicted_gains(df: pd.DataFrame, g: pd.DataFrame) -> pd.DataFrame:
    """Each measured gain over unsorted beside the gains computed tokens and FLOPs predict."""
    on = ["model", "dtype", "variant", "batch_size"]
    work = df.reindex(columns=[*on, "strategy", "computed_tokens", "flops_per_call"])
    base = work[work.strategy == BASELINE].drop(columns="strategy")
    t = g.merge(work, on=[*on, "strategy"], how="left").merge(base, on=on, how="left", suffixes=("", "_unsorted"))
    t["predicted_tokens"] = t.computed_tokens_unsorted / t.computed_tokens
    t["predicted_flops"] = pd.to_numeric(t.flops_per_call_unsorted, errors="coerce") / pd.to_numeric(
        t.flops_per_call, errors="coerce")
    return t[[*on, "strategy", "status", "speedup", "ci_low", "ci_high", "predicted_tokens", "predicted_flops"]]


def predicted_table(p: pd.DataFrame) -> pd.DataFrame:
    """predicted_gains for the page: the measured gain with its CI, the two predictions, and where the CI lies."""
    t = p[p.speedup.notna()].copy()
    t["measured gain (95% CI)"] = [describe_ci(r) for _, r in t.iterrows()]
    for name, source in (("predicted from tokens", t.predicted_tokens), ("predicted from FLOPs", t.predicted_flops)):
        t[name] = source.map(lambda v: numbers.fmt(v) if pd.notna(v) else "")
    t["measured vs prediction"] = [_against_prediction(r) for _, r in t.iterrows()]
    return t[["model", "dtype", "variant", "strategy", "batch_size", "measured gain (95% CI)", "predicted from tokens",
              "predicted from FLOPs", "measured vs prediction"]]


def _against_prediction(row) -> str:
    """Where the gain's CI lies against the prediction it is held against: FLOPs where counted, else computed tokens."""
    basis = "FLOPs" if pd.notna(row.get("predicted_flops")) else "computed tokens"
    predicted = float(row["predicted_flops" if basis == "FLOPs" else "predicted_tokens"])
    if pd.isna(predicted):
        return ""
    where = "inside" if row["ci_low"] <= predicted <= row["ci_high"] else "less" if predicted > row["ci_high"] else "more"
    return say(NOTEBOOK, "against", where, basis)


def prediction_findings(p: pd.DataFrame) -> list[str]:
    """Per runtime and strategy, at the largest batch: the measured gain against padding arithmetic's prediction."""
    lines = []
    ok = p[p.speedup.notna() & p.predicted_tokens.notna()]
    for (model, dtype, variant, strategy), h in ok.groupby(["model", "dtype", "variant", "strategy"], sort=False):
        r = h.loc[h.batch_size.idxmax()]
        flops = r.predicted_flops if pd.notna(r.predicted_flops) else None
        inside = sum(_against_prediction(x).startswith("as predicted") for _, x in h.iterrows())
        lines.append(say(NOTEBOOK, "prediction", strategy, variant, model, dtype, r, flops, _against_prediction(r),
                         inside, len(h)))
    return lines


def analyse(df: pd.DataFrame, peaks: dict | None = None, *, vt: verdicts.VerdictTable) -> Analysis:
    """The study's tables, findings and claims, every decision as the run's verdict table `vt` has it."""
    g = gains(df)
    predicted = predicted_gains(df, g)
    tables = {"gains": g, "throughput": throughput_table(df), "predicted gains": predicted_table(predicted)}
    return finish(NOTEBOOK, df, peaks, vt, tables, findings(df, g) + prediction_findings(predicted),
                  claims(df, g, vt=vt), pairs=[(s, BASELINE) for s in dict.fromkeys(df.strategy) if s != BASELINE],
                  shape=["model", "dtype", "variant", "batch_size"], column="strategy")


STUDY = register(Study(
    NOTEBOOK, SortedBatching, configs, estimate_s, analyse, group_by=group_by, workloads=text_workloads,
    comparisons=tuple(Comparison(f"{s} over unsorted batches", s, BASELINE, column="strategy",
                                 along=("variant", "batch_size", "model", "dtype"))
                      for s in ("sorted", "bucketed", "pad-to-max")),
    options=("variant", "strategy"),
    default=(("variant", REFERENCE), ("strategy", BASELINE)),
    runs="a RoBERTa classifier over the text set, a call one pass in batches",
    on_gpu=("padding costs arithmetic on any device, so sorting still helps where the GPU is busy; at small batches a "
            "GPU is launch-bound rather than compute-bound and the gain shrinks."),
    expectations=EXPECTATIONS,
))


seedclaims.register_evaluators(NOTEBOOK, batch_change, strategy_gain)
