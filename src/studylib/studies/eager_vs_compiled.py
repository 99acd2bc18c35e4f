"""Study 01: PyTorch eager vs torch.compile and torch.export + AOTInductor: grid, analysis and seed claims."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from .. import runtimes
from ..bench import surprises
from ..bench.schemas import SKIP_KEYS, Grid, Skip, VariantSkips
from ..claims import claims as seedclaims
from ..core.config import REFERENCE, Config, is_aa, original_of, shape_columns, shape_label, with_aa
from ..stats import speedups as speedups_layer
from ..stats import verdicts
from ..stats.measurement import Measurement
from ..stats.speedups import EQUIVALENCE, Comparison
from ..workloads.models import MODELS
from .base import Analysis, Study, register
from .common import (  # noqa: F401 - latency_table and size_label: the notebook's
    aa_finding,
    aoti_prepare_s,
    aoti_steps,
    closing_findings,
    describe_ci,
    finish,
    fmt_or_blank,
    latency_table,
    over_reference,
    ratio_claim,
    replicates_s,
    say,
    size_label,
    triple,
)

NOTEBOOK = "01_eager_vs_compiled"
Variant = runtimes.offered(NOTEBOOK)  # the variants whose registration offers them in this study
NOISY_CV = 0.10  # above this coefficient of variation a configuration's timing is called unstable
# a compiler should not be slower than eager (surprises.py)
EXPECTATIONS = tuple(surprises.Expectation(v, REFERENCE) for v in
                     ("compile-default", "compile-reduce-overhead", "compile-max-autotune",
                      "compile-default-channels-last", "export-aoti"))
# seed 001's layout and cuDNN questions: image-model-only variants, and the (candidate, baseline) pairs answering them
VISION_ONLY = ("eager-channels-last", "compile-default-channels-last", "eager-cudnn-benchmark")
LAYOUT_PAIRS = (("eager-channels-last", "eager"), ("compile-default-channels-last", "compile-default"),
                ("eager-cudnn-benchmark", "eager"))
# what a compile from the cache an earlier process saved is read from (bench/warm.py; Measurement.warm_one_time_s)
_WARM = ["median_s", "warm_prepare_s", "warm_first_call_s", "warm_cache_hits", "warm_cache_misses", "warm_max_abs_diff",
         "parity_tol"]
# the families the compile table and one-time cost cover: torch.compile and torch.export + AOTInductor
COMPILED = ("compile", "export")


class EagerVsCompiled(VariantSkips, Grid):  # Grid first in validation: eager and the grid before variant_skip
    """Section of study 01: PyTorch eager vs torch.compile (and torch.export + AOTInductor ahead of time)."""

    variants: list[Variant]
    image_size: int = Field(224, ge=8)
    vision_only_skip: list[Skip] = Field(default_factory=list, description=(
        "shapes where the image-model-only variants (channels-last, cudnn-benchmark) are left out (say why in "
        "left_out)"))

    @model_validator(mode="after")
    def _fits(self) -> EagerVsCompiled:
        for name in self.models:
            if MODELS[name].kind == "op":
                raise ValueError(f"models: {name!r} is a single operation (micro-ops are study 02's)")
            limit = MODELS[name].max_positions
            too_long = [n for n in self.seq_lens if limit and n > limit]
            if too_long:
                raise ValueError(f"seq_lens: {too_long[0]} exceeds {name}'s {limit} positions")
        for i, k in enumerate(self.vision_only_skip):
            for key in SKIP_KEYS:
                value, allowed = getattr(k, key), getattr(self, f"{key}s")
                if value is not None and value not in allowed:
                    raise ValueError(f"vision_only_skip[{i}]: {key} {value!r} is not in {key}s {allowed}")
        return self

    def variants_for(self, model: str, dtype: str, batch_size: int, seq_len: int | None = None) -> list[str]:
        """The section's variants for one shape: eager first, A/A copies after their originals, skips applied."""
        variants = [v for v in with_aa([REFERENCE] + [x for x in self.variants if x != REFERENCE], self.aa)
                    if self.runs(v, model, dtype, batch_size, seq_len)]
        if MODELS[model].kind != "vision" or any(k.matches(model, dtype, batch_size) for k in self.vision_only_skip):
            variants = [v for v in variants if original_of(v) not in VISION_ONLY]
        return variants


def configs(section: EagerVsCompiled, *, device: str, threads: int) -> list[Config]:
    """Every configuration of the section's shapes, in measuring order (EagerVsCompiled.variants_for)."""
    return [Config(model, v, dtype, batch, device, threads, seq_len=seq,
                   image_size=None if seq is not None else section.image_size)
            for model, dtype, batch, seq in section.shapes() for v in section.variants_for(model, dtype, batch, seq)]


# `plan`'s calibration (docs/method.md, "Studies")
_AUTOTUNE = {"cpu": 1.3, "cuda": 6.0}
_WARM_SHARE = 0.55


def estimate_s(c: Config, section: EagerVsCompiled, measure: dict, speed: float = 1.0) -> float:
    """`plan`'s rough wall-time guess: per replicate, compile + first call, warm-up and the minimum rounds."""
    big = not c.model.endswith("tiny")
    vision = c.image_size is not None
    family = runtimes.get(c.variant).family
    compiled = family in COMPILED
    compile_s = ((25.0 if vision else 14.0) if big else 4.0) * _AUTOTUNE[c.device] ** ("autotune" in c.variant) \
        if family == "compile" else aoti_prepare_s(c.model) if family == "export" else 0.0
    per_call = (0.1 if big else 0.002) * c.batch_size * (1 if c.image_size is None and c.seq_len is None
                                                           else ((c.seq_len or 128) / 128))
    if c.dtype == "bf16" and c.device == "cpu":  # no native bf16 on most CPUs: eager ResNet-50 runs ~30x slower
        per_call *= 10 if compiled or not vision else 30
    if original_of(c.variant) == "eager-cudnn-benchmark" and c.device != "cuda":
        return 0.0  # a skipped row
    # replicates 2..k of a fresh cache compile once more, from the cache the one before saved (bench/warm.py)
    warm_s = (measure["replicates"] - 1) * compile_s * _WARM_SHARE if family == "compile" and not is_aa(c.variant) else 0.0
    return warm_s + replicates_s(measure, compile_s, per_call, speed, 5)


def speedups(df: pd.DataFrame, vt: verdicts.VerdictTable) -> pd.DataFrame:
    """over_reference with `compile_s` and break-even calls where `vt` decides faster (∞ slower, NaN neither)."""
    t = over_reference(df, vt)
    t = t.rename(columns={"one_time_s": "compile_s", "break_even": "break_even_calls", "base_median_s": "eager_median_s"})
    t["significant"] = (t.ci_low > 1) | (t.ci_high < 1)
    t.loc[t.verdict == "slower", "break_even_calls"] = math.inf
    t.loc[t.speedup.notna() & (t.verdict != "faster") & (t.verdict != "slower"), "break_even_calls"] = math.nan
    return t


def _where(row, short: bool = False) -> str:
    return shape_label(row, ("model", "dtype", "batch_size"), short=short)


def _label(r) -> str:
    return f"{r['variant']} {_where(r)}"


def findings(df: pd.DataFrame, sp: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    lines = [aa_finding(df)]
    # compile cost and break-even: compiled variants only
    ok = sp[~sp.variant.map(is_aa) & sp.speedup.notna() & sp.variant.map(runtimes.family).isin(COMPILED)]
    jit, aot = (ok[ok.variant.map(runtimes.family) == f] for f in COMPILED)
    if len(jit):
        lines.append(say(NOTEBOOK, "compile_cost", jit.compile_s.min(), jit.compile_s.max(), _warm_cost(df)))
    if len(aot):
        lines.append(say(NOTEBOOK, "aot_cost", aot.compile_s.min(), aot.compile_s.max(), aoti_steps(df)))
    for (variant, model, dtype), g in ok.groupby(["variant", "model", "dtype"], sort=False):
        if g.batch_size.nunique() > 1:
            lines.append(say(NOTEBOOK, "batch_trend", variant, model, dtype, g.loc[g.batch_size.idxmin()],
                             g.loc[g.batch_size.idxmax()]))
    failed, failed_line = df[df.status != "ok"], "No configuration failed."
    if len(failed):
        examples = [(_label(r), r["error"]) for _, r in failed.drop_duplicates("error").head(3).iterrows()]
        failed_line = say(NOTEBOOK, "failed", list(failed.status.value_counts().items()), examples)

    def unstable(measured: pd.DataFrame) -> list[str]:
        labels = [_label(r) for _, r in measured[measured.cv > NOISY_CV].iterrows()]
        return [say(NOTEBOOK, "unstable", labels, NOISY_CV)] if labels else []

    return lines + closing_findings(NOTEBOOK, df, _label, lambda m: (m.max_abs_diff.max(),), failed_line, unstable)


def _warm_cost(df: pd.DataFrame) -> dict:
    """Compiles from an earlier process's cache: their one-time costs, cache misses and outputs that differ."""
    rows = df[(df.status == "ok") & ~df.variant.map(is_aa) & (df.variant.map(runtimes.family) == "compile")]
    rows = [Measurement.of(r) for r in rows.reindex(columns=_WARM).to_dict("records")]
    costs = [c for r in rows if np.isfinite(c := r.warm_one_time_s)]
    return {"costs": len(costs), "rows": len(rows), "low": min(costs, default=0.0), "high": max(costs, default=0.0),
            "missed": sum((r.warm_cache_misses or 0) > 0 for r in rows),
            "differ": sum(None not in (r.warm_max_abs_diff, r.parity_tol) and r.warm_max_abs_diff > r.parity_tol
                          for r in rows)}


def layout_speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Seed 001's LAYOUT_PAIRS per shape (pair_table); a side that did not run keeps the row with no ratio."""
    parts = [speedups_layer.pair_table(df, cand, base, band=EQUIVALENCE).assign(pair=f"{cand} over {base}")
             for cand, base in LAYOUT_PAIRS if len(df) and (df.variant == cand).any() and (df.variant == base).any()]
    return pd.concat(parts, ignore_index=True) if parts else speedups_layer.pair_table(df.iloc[:0], "none").assign(pair="")


def layout_table(df: pd.DataFrame) -> pd.DataFrame:
    """layout_speedups as the notebook shows it: one line per shape and pair, the speed-up with its CI or why not."""
    t = layout_speedups(df)
    t["size"] = t.apply(size_label, axis=1) if len(t) else []
    t["speed-up (95% CI)"] = [describe_ci(r) if pd.notna(r["speedup"]) else f"{r['status']}: {r['error']}"
                              for _, r in t.iterrows()]
    return t[["model", "dtype", "size", "batch_size", "pair", "speed-up (95% CI)"]]


def claims(df: pd.DataFrame, sp: pd.DataFrame, *, vt: verdicts.VerdictTable) -> pd.DataFrame:
    """The registry's claims this study tests, judged on these results and the run's verdict table `vt`."""
    return seedclaims.study_claims(NOTEBOOK, df, {"speedups": sp}, vt=vt)


def compile_table(sp: pd.DataFrame, df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per compiled configuration: cold (with `df`, warm) compile, dynamo's counts, speed-up, break-even calls."""
    t = sp[~sp.variant.map(is_aa) & sp.variant.map(runtimes.family).isin(COMPILED)].copy()
    t["size"] = t.apply(size_label, axis=1) if len(t) else []
    t["compile cold (s)"] = fmt_or_blank(t.compile_s, ".1f")
    counted = {"compilations": "graphs", "graph_breaks": "graph breaks", "recompilations": "recompiled"}
    graphs = list(counted.values())
    warm = ["compile warm (s)", "cache hits / misses"]
    if df is not None and len(t):
        on = shape_columns(df)  # the shape columns these results fill
        counts = df.reindex(columns=[*on, "variant", *counted, *_WARM])
        counts = counts[~counts.variant.map(is_aa) & counts.variant.map(runtimes.family).isin(COMPILED)].copy()
        counts[warm[0]] = fmt_or_blank(pd.Series([Measurement.of(r).warm_one_time_s for r in counts.to_dict("records")],
                                                 index=counts.index, dtype=float), ".1f")
        counts[warm[1]] = [f"{h:.0f} / {m:.0f}" if pd.notna(h) and pd.notna(m) else ""
                           for h, m in zip(counts.warm_cache_hits, counts.warm_cache_misses)]
        t = t.merge(counts.drop(columns=_WARM).rename(columns=counted), on=[*on, "variant"], how="left")
        t[graphs] = t[graphs].astype("Int64")
        t[warm] = t[warm].fillna("")
    else:
        t = t.assign(**dict.fromkeys(graphs, pd.NA), **dict.fromkeys(warm, ""))
    t["speed-up (95% CI)"] = [describe_ci(r) if pd.notna(r["speedup"]) else r["status"] for _, r in t.iterrows()]
    t["break-even calls"] = [
        "" if pd.isna(r["speedup"]) else
        f"no gain ({r['verdict']})" if pd.isna(r["break_even_calls"]) else
        "never (slower)" if np.isinf(r["break_even_calls"]) else f"{r['break_even_calls']:,.0f}"
        for _, r in t.iterrows()]
    return t[["model", "dtype", "size", "batch_size", "variant", "compile cold (s)", *warm, *graphs,
              "speed-up (95% CI)", "break-even calls"]]


def analyse(df: pd.DataFrame, peaks: dict | None = None, *, vt: verdicts.VerdictTable) -> Analysis:
    """The study's tables, findings and claims, every decision as the run's verdict table `vt` has it."""
    sp = speedups(df, vt)
    return finish(NOTEBOOK, df, peaks, vt, {"speedups": sp, "compile": compile_table(sp, df),
                                            "layout": layout_table(df)}, findings(df, sp), claims(df, sp, vt=vt))


# --- seeds 001, 002 and 004's claims, measured on the study's results (studylib.claims.claims) ---


def _gains(tables: dict, claim, variant: str) -> pd.DataFrame:
    """`variant` over eager per shape (the speed-ups table), of the seed's models and precisions where present."""
    sp = tables["speedups"]
    return seedclaims.matching(sp[(sp.variant == variant) & sp.speedup.notna()], claim)


def equal_at_batches(df: pd.DataFrame, tables: dict, claim, variant: str = "compile-default",
                     batches: tuple[int, ...] = (1, 8)):
    """Seed 004's 'eager = compiled at batch 1 and 8': of those cells, the one furthest from equal."""
    g = _gains(tables, claim, variant)
    g = g[g.batch_size.isin(batches)]
    if not len(g):
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_at_batches", variant, list(batches)))
    cells = [(_where(r, short=True), triple(r)) for _, r in g.iterrows()]
    label, (v, lo, hi) = seedclaims.least_favourable(cells, claim)
    return ratio_claim(df, (v, lo, hi), say(NOTEBOOK, "furthest_from_equal", variant, label, cells), g)


def gain_trend(df: pd.DataFrame, tables: dict, claim, variant: str = "compile-default", large_above: int = 8,
               over: str = "large/small"):
    """`variant`'s gain over eager at the largest batch (above `large_above`) over the smallest (`over`), combined."""
    g = _gains(tables, claim, variant)
    cells, used = [], []
    for (model, dtype), h in g.groupby(["model", "dtype"], sort=False):
        small, large = h.loc[h.batch_size.idxmin()], h.loc[h.batch_size.idxmax()]
        if large.batch_size <= large_above or large.batch_size == small.batch_size:
            continue
        a, b = (large, small) if over == "large/small" else (small, large)
        cells.append(speedups_layer.ratio_of(triple(a), triple(b)))
        used.append(say(NOTEBOOK, "gain_at", model, dtype, a, b))
    if not cells:
        return seedclaims.NotAnswered(say(NOTEBOOK, "no_large_batch", variant, large_above,
                                          sorted(set(g.batch_size.astype(int)))))
    rows = g[g.groupby(["model", "dtype"]).batch_size.transform("nunique") > 1]
    return ratio_claim(df, speedups_layer.combine(cells), "; ".join(used), rows)


def half_over_fp32(df: pd.DataFrame, tables: dict, claim, variant: str = "compile-default", large_above: int = 8):
    """Compiled fp16 (or bf16) over fp32 at the largest batch above `large_above`, per model, combined."""
    ok = df[(df.status == "ok") & (df.variant == variant)]
    half = "fp16" if "fp16" in set(ok.dtype) else "bf16"
    cells, used, rows = [], [], []
    models = claim.conditions.models
    for _, g in (ok[ok.model.isin(models)] if ok.model.isin(models).any() else ok).groupby("model", sort=False):
        h, f = speedups_layer.paired(g, half, "fp32", column="dtype")  # each shape in both precisions
        large = h.batch_size[h.batch_size > large_above]
        if not len(large):
            continue
        i = large.idxmax()
        s = speedups_layer.speedup(f.iloc[i], h.iloc[i])
        cells.append(tuple(s))
        used.append(say(NOTEBOOK, "half_at", shape_label(h.iloc[i], ("model", "batch_size"), short=True), half,
                        s.ratio))
        rows.append(pd.concat([f.iloc[[i]], h.iloc[[i]]]))
    if not cells:
        return seedclaims.NotAnswered(say(NOTEBOOK, "no_half", large_above, half))
    return ratio_claim(df, speedups_layer.combine(cells), "; ".join(used), pd.concat(rows))


def mode_gain(df: pd.DataFrame, tables: dict, claim, candidate: str = "compile-reduce-overhead",
              baseline: str = "compile-default"):
    """`candidate` over `baseline` (two compile modes), geometric mean over the shapes both ran."""
    ok = df[df.status == "ok"]
    s = speedups_layer.geomean(ok, candidate, baseline)
    if s is None:
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_both", candidate, baseline))
    text = say(NOTEBOOK, "mode_gain", candidate, baseline, (df.device == "cuda").any(), s.n)
    return ratio_claim(df, s, text, ok[ok.variant.isin([candidate, baseline])])


def first_call_cost(df: pd.DataFrame, tables: dict, claim):
    """Each compiled configuration's cold first call over its steady call (CI from the median's); the least."""
    ok = df[(df.status == "ok") & ~df.variant.map(is_aa) & (df.variant.map(lambda v: runtimes.get(v).family == "compile"))]
    if not len(ok):
        return seedclaims.NotAnswered("no compiled configuration ran")
    cold = ok.prepare_s.fillna(0) + ok.first_call_s
    ratio = cold / ok.median_s
    r = ok.loc[ratio.idxmin()]
    first = cold[ratio.idxmin()]
    return ratio_claim(df, (first / r.median_s, first / r.ci_high_s, first / r.ci_low_s),
                    say(NOTEBOOK, "first_call", len(ok), _label(r), ratio.max()), ok)


def layout_gain(df: pd.DataFrame, tables: dict, claim, pairs=(("eager-channels-last", "eager"),
                                                               ("compile-default-channels-last", "compile-default"))):
    """channels_last over the default layout, geometric mean over the shapes and `pairs` where both ran."""
    ok = seedclaims.matching(df[df.status == "ok"], claim)
    cells, used, rows = [], [], []
    for cand, base in pairs:
        c, b = speedups_layer.paired(ok, cand, base)
        cells += zip(b.to_dict("records"), c.to_dict("records"))
        if len(c):
            used.append(say(NOTEBOOK, "layout_used", cand, base, len(c)))
            rows.append(ok[ok.variant.isin([cand, base])])
    if not cells:
        return seedclaims.NotAnswered("no channels-last variant ran beside its default-layout baseline "
                                      "(they run on image models only)")
    s = speedups_layer.geomean_of(cells)
    return ratio_claim(df, s, "geometric mean of " + "; ".join(used),
                    pd.concat(rows).drop_duplicates(subset=[*shape_columns(ok), "variant"]))


STUDY = register(Study(
    NOTEBOOK, EagerVsCompiled, configs, estimate_s, analyse,
    comparisons=(
        Comparison("torch.compile (default) over eager", "compile-default", "eager"),
        Comparison("torch.compile (max-autotune) over eager", "compile-max-autotune", "eager"),
        Comparison("torch.compile (reduce-overhead) over default", "compile-reduce-overhead", "compile-default"),
        Comparison("torch.export + AOTInductor over eager", "export-aoti", "eager"),
        Comparison("torch.export + AOTInductor (ahead of time) over torch.compile (just in time)", "export-aoti",
                   "compile-default"),
        Comparison("channels_last (NHWC) over the default layout, eager", "eager-channels-last", "eager"),
        Comparison("cudnn.benchmark (own process, unpaired) over eager", "eager-cudnn-benchmark", "eager"),
    ),
    runs="transformers' and torchvision's PyTorch models, eager in its own worker beside torch.compile and AOTInductor",
    on_gpu=("launch overhead per kernel dominates small shapes there, so fusion and CUDA graphs "
            "(`reduce-overhead`, which is the same code as `default` on a CPU) can gain more; "
            "run the t4, 3090ti, a100 or h100 profile to see."),
    expectations=EXPECTATIONS,
    warm_compile=True,  # every compiled configuration's one-time cost from an earlier process's cache too
))


seedclaims.register_evaluators(NOTEBOOK, equal_at_batches, gain_trend, half_over_fp32, mode_gain, first_call_cost,
                               layout_gain)
