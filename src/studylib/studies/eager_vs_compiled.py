"""Study 01: PyTorch eager vs torch.compile — the grid, and the analysis the notebook shows."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from .. import claims as seedclaims
from .. import roofline, runtimes, surprises
from .. import speedups as speedups_layer
from ..models import MODELS
from ..schemas import SKIP_KEYS, Grid, Skip
from ..speedups import Comparison
from ..sweep import AA, REFERENCE, Config
from .base import Analysis, Study, register
from .common import (  # noqa: F401
    aa_finding,
    describe_ci,
    drift_finding,
    fmt_or_blank,
    fmt_x,
    latency_table,
    size_label,
)

NOTEBOOK = "01_eager_vs_compiled"
SHAPE_COLUMNS = ["model", "dtype", "batch_size", "seq_len", "image_size"]
NOISY_CV = 0.10  # above this coefficient of variation a configuration's timing is called unstable
# What a compiler is for: a replicate where one is slower than eager profiles a call of each (surprises.py).
EXPECTATIONS = tuple(surprises.Expectation(v, REFERENCE) for v in
                     ("compile-default", "compile-reduce-overhead", "compile-max-autotune",
                      "compile-default-channels-last"))
# Seed 001's layout and cuDNN questions: variants that only mean something for a model with image inputs (a text
# model's configurations leave them out), and the pairs that answer them, (candidate, baseline) on one shape.
VISION_ONLY = ("eager-channels-last", "compile-default-channels-last", "eager-cudnn-benchmark")
LAYOUT_PAIRS = (("eager-channels-last", "eager"), ("compile-default-channels-last", "compile-default"),
                ("eager-cudnn-benchmark", "eager"))


class EagerVsCompiled(Grid):
    """Section of study 01: PyTorch eager vs torch.compile."""

    variants: list[Literal["eager", "compile-default", "compile-reduce-overhead", "compile-max-autotune",
                           "eager-channels-last", "compile-default-channels-last", "eager-cudnn-benchmark"]]
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

    def variants_for(self, model: str, dtype: str, batch_size: int) -> list[str]:
        """The section's variants for one shape: eager and its A/A copy first; the image-only ones only for an image
        model, and not where `vision_only_skip` leaves them out."""
        variants = [REFERENCE, AA] + [v for v in self.variants if v not in (REFERENCE, AA)]
        if MODELS[model].kind != "vision" or any(k.matches(model, dtype, batch_size) for k in self.vision_only_skip):
            variants = [v for v in variants if v not in VISION_ONLY]
        return variants


def configs(section: EagerVsCompiled, *, device: str, threads: int) -> list[Config]:
    """Every configuration, grouped by model and dtype, eager first within each shape, then its A/A copy.

    Shapes matching one of the section's `skip` entries are left out; the image-only variants (channels-last,
    cudnn-benchmark) run on image models only (EagerVsCompiled.variants_for)."""
    return [Config(model, v, dtype, batch, device, threads, seq_len=seq,
                   image_size=None if seq is not None else section.image_size)
            for model, dtype, batch, seq in section.shapes() for v in section.variants_for(model, dtype, batch)]


# max-autotune's compile over default's, per device: on a CPU it adds little (measured 1.3x); on CUDA it benchmarks
# Triton kernel configurations and cuBLAS choices per matmul and convolution, which Inductor's own notes put at many
# times default's compile. The CUDA figure is a guess until a GPU has run the study (plan says times are rough).
_AUTOTUNE = {"cpu": 1.3, "cuda": 6.0}


def estimate_s(c: Config, section: EagerVsCompiled, measure: dict, speed: float = 1.0) -> float:
    """A rough wall-time guess for `plan`: per replicate, compile + first call, warm-up and the minimum rounds.

    Per-call costs are calibrated on 2 CPU cores; `speed` is the machine's guessed speed relative to that.
    """
    big = not c.model.endswith("tiny")
    vision = c.image_size is not None
    compiled = runtimes.get(c.variant).family == "compile"
    compile_s = ((25.0 if vision else 14.0) if big else 4.0) * _AUTOTUNE[c.device] ** ("autotune" in c.variant) \
        if compiled else 0.0
    per_call = (0.1 if big else 0.002) * c.batch_size * (1 if c.image_size is None and c.seq_len is None
                                                           else ((c.seq_len or 128) / 128))
    if c.dtype == "bf16" and c.device == "cpu":  # no native bf16 on most CPUs: eager ResNet-50 runs ~30x slower
        per_call *= 10 if compiled or not vision else 30
    if c.variant == "eager-cudnn-benchmark" and c.device != "cuda":
        return 0.0  # a skipped row
    calls = 1 + measure["warmup_calls"] + measure["min_rounds"]
    return measure["replicates"] * (compile_s + max(per_call / speed, measure["block_s"]) * calls
                                    + measure["min_time_s"] / 5)


def speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Speed-up of every non-eager row over eager on the same shape, with CIs (speedups.pair_table: paired by round).

    `df` needs raw samples (ResultsTable.frame(with_samples=True)). Rows whose variant or eager reference failed are
    kept with their status and no ratio. `compile_s` is the one-time cost (preparation and the cold first call beyond
    a steady one); break-even calls are given only where the variant is faster (∞ where it is slower, NaN where
    unclear).
    """
    t = speedups_layer.pair_table(df, None, REFERENCE, band=speedups_layer.band(df))
    t = t.rename(columns={"one_time_s": "compile_s", "break_even": "break_even_calls", "base_median_s": "eager_median_s"})
    t["significant"] = (t.ci_low > 1) | (t.ci_high < 1)
    t.loc[t.verdict == "slower", "break_even_calls"] = math.inf
    t.loc[t.speedup.notna() & (t.verdict != "faster") & (t.verdict != "slower"), "break_even_calls"] = math.nan
    return t


def _where(row) -> str:
    return f"{row['model']}, {row['dtype']}, batch {row['batch_size']}"


def findings(df: pd.DataFrame, sp: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    lines = [aa_finding(df)]
    sp = sp[sp.variant != AA]
    ok = sp[sp.speedup.notna()]
    for variant, g in ok.groupby("variant", sort=False):
        faster, slower = int((g.ci_low > 1).sum()), int((g.ci_high < 1).sum())
        geo = float(np.exp(np.log(g.speedup).mean()))
        best, worst = g.loc[g.speedup.idxmax()], g.loc[g.speedup.idxmin()]
        lines.append(
            f"**{variant}** vs eager over {len(g)} configurations: faster in {faster}, slower in {slower}, "
            f"no detectable difference in {len(g) - faster - slower} (95% CI includes 1). Geometric-mean speed-up "
            f"{fmt_x(geo)}; best {describe_ci(best)} ({_where(best)}), worst {describe_ci(worst)} ({_where(worst)})."
        )
    lines += layout_findings(df)
    ok = ok[ok.variant.map(runtimes.family) == "compile"]  # compile cost and break-even: compiled variants only
    if len(ok):
        pays = ok[np.isfinite(ok.break_even_calls)]
        never = int(np.isinf(ok.break_even_calls).sum())
        unclear = int(ok.break_even_calls.isna().sum())
        cost = (f"Compiling cost {ok.compile_s.min():.1f}–{ok.compile_s.max():.1f} s per configuration "
                f"(first call beyond one eager call)")
        if len(pays):
            lines.append(f"{cost}. Where compiled code is faster (CI above 1), it pays for itself after a median of "
                         f"{pays.break_even_calls.median():,.0f} calls (range {pays.break_even_calls.min():,.0f}–"
                         f"{pays.break_even_calls.max():,.0f}); it never does in the {never} configurations where it is "
                         f"slower, and {unclear} show no clear difference.")
        else:
            lines.append(f"{cost}, and it never paid for itself here: no compiled variant was faster with a CI above 1.")
        for (variant, model, dtype), g in ok.groupby(["variant", "model", "dtype"], sort=False):
            if g.batch_size.nunique() > 1:
                small, large = g.loc[g.batch_size.idxmin()], g.loc[g.batch_size.idxmax()]
                lines.append(f"{variant}, {model} {dtype}: {describe_ci(small)} at batch {small.batch_size} → "
                             f"{describe_ci(large)} at batch {large.batch_size}.")
    measured = df[df.status == "ok"]
    if len(measured):
        bad = measured[measured.parity_ok == False]  # noqa: E712
        lines.append(
            f"Parity with eager: largest max-abs difference {measured.max_abs_diff.max():.2e}; "
            + (f"**{len(bad)} configuration(s) exceed the tolerance**: "
               + ", ".join(f"{r['variant']} {_where(r)}" for _, r in bad.iterrows())
               if len(bad) else "every configuration is within tolerance.")
        )
    failed = df[df.status != "ok"]
    if len(failed):
        examples = "; ".join(f"{r['variant']} {_where(r)}: {r['error']}"
                             for _, r in failed.drop_duplicates("error").head(3).iterrows())
        lines.append(f"Failed or skipped configurations: {failed.status.value_counts().to_dict()} — {examples}")
    else:
        lines.append("No configuration failed.")
    if len(measured):
        noisy = measured.loc[measured.cv.astype(float).idxmax()]
        budget = int(measured.stop_reason.str.contains("budget").sum())
        lines.append(
            f"Noise: CV ranged {measured.cv.min():.1%}–{measured.cv.max():.1%} (noisiest: {noisy['variant']} "
            f"{_where(noisy)}); {budget} of {len(measured)} configurations hit their time budget before reaching "
            f"the precision target."
        )
        unstable = measured[measured.cv > NOISY_CV]
        if len(unstable):
            lines.append(f"**{len(unstable)} configuration(s) are unstable (CV above {NOISY_CV:.0%})**: "
                         + ", ".join(f"{r['variant']} {_where(r)}" for _, r in unstable.iterrows())
                         + ". The machine was likely busy; their medians and speed-ups carry wide CIs.")
    drift = drift_finding(df)
    return lines + ([drift] if drift else [])


def layout_speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Seed 001's questions per shape: channels-last over the default layout (eager, and compiled), paired by round,
    and cudnn.benchmark over eager (LAYOUT_PAIRS), which runs in a process of its own (the flag is set before its
    first convolution) and so is compared unpaired; a side that failed or was skipped keeps the row with its status
    and no ratio."""
    band = speedups_layer.band(df)
    parts = [speedups_layer.pair_table(df, cand, base, band=band).assign(pair=f"{cand} over {base}")
             for cand, base in LAYOUT_PAIRS if len(df) and (df.variant == cand).any() and (df.variant == base).any()]
    return pd.concat(parts, ignore_index=True) if parts else speedups_layer.pair_table(df.iloc[:0], "none").assign(pair="")


def layout_table(df: pd.DataFrame) -> pd.DataFrame:
    """layout_speedups as the notebook shows it: one line per shape and pair, the speed-up with its CI or why not."""
    t = layout_speedups(df)
    t["size"] = t.apply(size_label, axis=1) if len(t) else []
    t["speed-up (95% CI)"] = [describe_ci(r) if pd.notna(r["speedup"]) else f"{r['status']}: {r['error']}"
                              for _, r in t.iterrows()]
    return t[["model", "dtype", "size", "batch_size", "pair", "speed-up (95% CI)"]]


def layout_findings(df: pd.DataFrame) -> list[str]:
    """One line per layout/cuDNN pair that ran: geometric mean over shapes with its CI, and per-shape directions."""
    lines = []
    band = speedups_layer.band(df)
    sp = layout_speedups(df)
    for (cand, base), g in sp.groupby(["candidate", "baseline"], sort=False):
        ok = g[g.speedup.notna()]
        if not len(ok):
            lines.append(f"**{cand} over {base}** did not run: {g.status.iloc[0]} — {g.error.iloc[0]}")
            continue
        geo = _geo_pairs(df, cand, base)
        classes = [speedups_layer.verdict(lo, hi, band) for lo, hi in zip(ok.ci_low, ok.ci_high)]
        lines.append(f"**{cand} over {base}**: geometric mean {describe_ci(geo)} over {geo['n']} shape(s); faster in "
                     f"{classes.count('faster')}, slower in {classes.count('slower')}, within ±{band - 1:.0%} in "
                     f"{classes.count('equal')}, unclear in {classes.count('unclear')}.")
    return lines


def _geo_pairs(df: pd.DataFrame, cand: str, base: str) -> dict | None:
    """Geometric-mean speed-up of `cand` over `base` over the shapes where both ran, with its CI."""
    g = speedups_layer.geomean(df, cand, base)
    return None if g is None else {"speedup": g.ratio, "ci_low": g.ci_low, "ci_high": g.ci_high, "n": g.n}


def _cell(r) -> tuple[float, float, float]:
    return float(r["speedup"]), float(r["ci_low"]), float(r["ci_high"])


def _label(r) -> str:
    return f"{r['model']} {r['dtype']} b{int(r['batch_size'])}"


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
        return seedclaims.NotAnswered(f"{variant} was not measured at batch {' or '.join(map(str, batches))}")
    cells = [(_label(r), _cell(r)) for _, r in g.iterrows()]
    label, (v, lo, hi) = seedclaims.least_favourable(cells, claim)
    text = f"{variant} over eager, furthest from equal: {label}; all: " + "; ".join(
        f"{lab} {c[0]:.2f}×" for lab, c in cells)
    return seedclaims.Measurement(v, lo, hi, text, rows=g, band=speedups_layer.band(df))


def gain_trend(df: pd.DataFrame, tables: dict, claim, variant: str = "compile-default", large_above: int = 8,
               over: str = "large/small"):
    """How `variant`'s gain over eager changes from the smallest batch to the largest (above `large_above`), per
    model and precision, combined: gain at large ÷ gain at small (or the inverse, `over: small/large`)."""
    g = _gains(tables, claim, variant)
    cells, used = [], []
    for (model, dtype), h in g.groupby(["model", "dtype"], sort=False):
        small, large = h.loc[h.batch_size.idxmin()], h.loc[h.batch_size.idxmax()]
        if large.batch_size <= large_above or large.batch_size == small.batch_size:
            continue
        a, b = (large, small) if over == "large/small" else (small, large)
        cells.append(speedups_layer.ratio_of(_cell(a), _cell(b)))
        used.append(f"{model} {dtype}: {a['speedup']:.2f}× at b{int(a['batch_size'])} vs {b['speedup']:.2f}× at "
                    f"b{int(b['batch_size'])}")
    if not cells:
        return seedclaims.NotAnswered(f"no {variant} measured at a batch above {large_above} beside a smaller one "
                                      f"(batches here: {', '.join(map(str, sorted(set(g.batch_size.astype(int)))))})")
    v, lo, hi = speedups_layer.combine(cells)
    rows = g[g.groupby(["model", "dtype"]).batch_size.transform("nunique") > 1]
    return seedclaims.Measurement(v, lo, hi, "; ".join(used), rows=rows, band=speedups_layer.band(df))


def half_over_fp32(df: pd.DataFrame, tables: dict, claim, variant: str = "compile-default", large_above: int = 8):
    """Seed 004's 'at large batch, compiled fp16 beats compiled fp32': half over fp32 at the largest batch above
    `large_above` (fp16 on a GPU; bf16 where that is what the profile ran), per model, combined."""
    ok = df[(df.status == "ok") & (df.variant == variant)]
    half = "fp16" if "fp16" in set(ok.dtype) else "bf16"
    cells, used, rows = [], [], []
    models = claim.conditions.models
    for model, g in (ok[ok.model.isin(models)] if ok.model.isin(models).any() else ok).groupby("model", sort=False):
        both = g[g.dtype.isin(["fp32", half])]
        b = both.groupby("batch_size").dtype.nunique()
        b = b[(b == 2) & (b.index > large_above)]
        if not len(b):
            continue
        at = both[both.batch_size == b.index.max()].set_index("dtype")
        s = speedups_layer.speedup(at.loc["fp32"], at.loc[half])
        cells.append(tuple(s))
        used.append(f"{model} b{int(b.index.max())}: {half} {s.ratio:.2f}× fp32's speed")
        rows.append(at.reset_index())
    if not cells:
        return seedclaims.NotAnswered(f"no batch above {large_above} has both fp32 and {half} compiled here")
    v, lo, hi = speedups_layer.combine(cells)
    return seedclaims.Measurement(v, lo, hi, "; ".join(used), rows=pd.concat(rows), band=speedups_layer.band(df))


def mode_gain(df: pd.DataFrame, tables: dict, claim, candidate: str = "compile-reduce-overhead",
              baseline: str = "compile-default"):
    """`candidate` over `baseline` (two compile modes), geometric mean over the shapes both ran."""
    ok = df[df.status == "ok"]
    c = ok[ok.variant == candidate].set_index(SHAPE_COLUMNS)
    b = ok[ok.variant == baseline].set_index(SHAPE_COLUMNS)
    both = c.index.intersection(b.index)
    if not len(both):
        return seedclaims.NotAnswered(f"{candidate} and {baseline} were not both measured on any shape")
    s = speedups_layer.geomean_of([(b.loc[k], c.loc[k]) for k in both])
    where = "with CUDA graphs" if (df.device == "cuda").any() else "on CPU, where both compile the same code"
    return seedclaims.Measurement(s.ratio, s.ci_low, s.ci_high, f"{candidate} over {baseline} ({where}), geometric "
                                  f"mean over {len(both)} shapes", rows=ok[ok.variant.isin([candidate, baseline])],
                                  band=speedups_layer.band(df))


def first_call_cost(df: pd.DataFrame, tables: dict, claim):
    """Seed 002's 'the first step includes compilation and costs extra': each compiled configuration's first call
    over its steady call (CI from the steady median's); the least of them."""
    ok = df[(df.status == "ok") & (df.variant.map(lambda v: runtimes.get(v).family == "compile"))]
    if not len(ok):
        return seedclaims.NotAnswered("no compiled configuration ran")
    cold = ok.prepare_s.fillna(0) + ok.first_call_s
    ratio = cold / ok.median_s
    r = ok.loc[ratio.idxmin()]
    first = cold[ratio.idxmin()]
    return seedclaims.Measurement(first / r.median_s, first / r.ci_high_s, first / r.ci_low_s,
                                  f"least over {len(ok)} compiled configurations: {r['variant']} {_where(r)}; "
                                  f"largest {ratio.max():,.0f}×", rows=ok, band=speedups_layer.band(df))


def layout_gain(df: pd.DataFrame, tables: dict, claim, pairs=(("eager-channels-last", "eager"),
                                                               ("compile-default-channels-last", "compile-default"))):
    """Seed 001's 'NHWC beats NCHW': channels_last over the default (NCHW) layout, geometric mean over every shape
    and pair (eager and compiled) where both sides ran, of the seed's models and precisions where present."""
    ok = seedclaims.matching(df[df.status == "ok"], claim)
    cells, used, rows = [], [], []
    for cand, base in pairs:
        c = ok[ok.variant == cand].set_index(SHAPE_COLUMNS)
        b = ok[ok.variant == base].set_index(SHAPE_COLUMNS)
        both = c.index.intersection(b.index)
        cells += [(b.loc[k], c.loc[k]) for k in both]
        if len(both):
            used.append(f"{cand} over {base} on {len(both)} shape(s)")
            rows.append(ok[ok.variant.isin([cand, base])])
    if not cells:
        return seedclaims.NotAnswered("no channels-last variant ran beside its default-layout baseline "
                                      "(they run on image models only)")
    s = speedups_layer.geomean_of(cells)
    return seedclaims.Measurement(s.ratio, s.ci_low, s.ci_high, "geometric mean of " + "; ".join(used),
                                  rows=pd.concat(rows).drop_duplicates(subset=[*SHAPE_COLUMNS, "variant"]),
                                  band=speedups_layer.band(df))


def claims(df: pd.DataFrame, sp: pd.DataFrame) -> pd.DataFrame:
    """The registry's claims this study tests (seeds 001, 002 and 004), judged on these results (see studylib.claims)."""
    return seedclaims.study_claims(NOTEBOOK, df, {"speedups": sp})


def compile_table(sp: pd.DataFrame, df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Compile cost, speed-up and break-even calls per compiled configuration; with the results `df`, also the
    graphs each cold compile built, its graph breaks and the graphs rebuilt in steady state (dynamo's
    counters; blank for rows measured before they were recorded)."""
    t = sp[(sp.variant != AA) & (sp.variant.map(runtimes.family) == "compile")].copy()
    t["size"] = t.apply(size_label, axis=1) if len(t) else []
    t["compile (s)"] = fmt_or_blank(t.compile_s, ".1f")
    graphs = ["graphs", "graph breaks", "recompiled"]
    if df is not None and len(t):
        counts = df.reindex(columns=[*SHAPE_COLUMNS, "variant", "compilations", "graph_breaks", "recompilations"])
        counts = counts[counts.variant.map(runtimes.family) == "compile"].rename(columns=dict(zip(
            ["compilations", "graph_breaks", "recompilations"], graphs)))
        t = t.merge(counts, on=[*SHAPE_COLUMNS, "variant"], how="left")
        for col in graphs:
            t[col] = t[col].astype("Int64")
    else:
        t = t.assign(**dict.fromkeys(graphs, pd.NA))
    t["speed-up (95% CI)"] = [describe_ci(r) if pd.notna(r["speedup"]) else r["status"] for _, r in t.iterrows()]
    t["break-even calls"] = [
        "" if pd.isna(r["speedup"]) else
        "no clear gain (CI includes 1)" if pd.isna(r["break_even_calls"]) else
        "never (slower)" if np.isinf(r["break_even_calls"]) else f"{r['break_even_calls']:,.0f}"
        for _, r in t.iterrows()]
    return t[["model", "dtype", "size", "batch_size", "variant", "compile (s)", *graphs, "speed-up (95% CI)",
              "break-even calls"]]


def analyse(df: pd.DataFrame, peaks: dict | None = None) -> Analysis:
    """Speed-ups over eager and the compile cost table, the findings and the seed claims; and the roofline
    (roofline.attach) with `peaks`, the machine's limits (StudyRun.peaks; None: the roofline says unknown)."""
    sp = speedups(df)
    band = speedups_layer.band(df)
    analysis = roofline.attach(Analysis(tables={"speedups": sp, "compile": compile_table(sp, df),
                                                "layout": layout_table(df)},
                                        findings=findings(df, sp), claims=claims(df, sp)),
                               df, peaks, roofline_pairs(df), SHAPE_COLUMNS, band=band)
    return surprises.attach(analysis, df, EXPECTATIONS, band)


def roofline_pairs(df: pd.DataFrame) -> list[tuple[str, str]]:
    """Each compiled variant over eager, for the roofline's regime findings."""
    return [(v, REFERENCE) for v in dict.fromkeys(df.variant) if v not in (REFERENCE, AA)]


STUDY = register(Study(
    NOTEBOOK, EagerVsCompiled, configs, estimate_s, analyse,
    comparisons=(
        Comparison("torch.compile (default) over eager", "compile-default", "eager"),
        Comparison("torch.compile (max-autotune) over eager", "compile-max-autotune", "eager"),
        Comparison("torch.compile (reduce-overhead) over default", "compile-reduce-overhead", "compile-default"),
        Comparison("channels_last (NHWC) over the default layout, eager", "eager-channels-last", "eager"),
        Comparison("cudnn.benchmark (own process, unpaired) over eager", "eager-cudnn-benchmark", "eager"),
    ),
    on_gpu=("launch overhead per kernel dominates small shapes there, so fusion and CUDA graphs "
            "(`reduce-overhead`, which is the same code as `default` on a CPU) can gain more; "
            "run the t4, 3090ti, a100 or h100 profile to see."),
    expectations=EXPECTATIONS,
))
