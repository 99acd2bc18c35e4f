"""Study 01: PyTorch eager vs torch.compile — the grid, and the analysis the notebook shows."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from .. import models, runtimes, stats
from ..models import MODELS
from ..profiles import Grid
from ..sweep import AA, REFERENCE, Config
from .base import Analysis, Comparison, Study, register
from .common import (  # noqa: F401
    aa_control,
    aa_finding,
    describe_ci,
    drift_finding,
    fmt_or_blank,
    fmt_x,
    latency_table,
    noise_band,
    size_label,
    speedup_verdict,
    verdict,
)

NOTEBOOK = "01_eager_vs_compiled"
SHAPE_COLUMNS = ["model", "dtype", "batch_size", "seq_len", "image_size"]
NOISY_CV = 0.10  # above this coefficient of variation a configuration's timing is called unstable


class EagerVsCompiled(Grid):
    """Section of study 01: PyTorch eager vs torch.compile."""

    variants: list[Literal["eager", "compile-default", "compile-reduce-overhead", "compile-max-autotune"]]
    image_size: int = Field(224, ge=8)

    @model_validator(mode="after")
    def _fits(self) -> EagerVsCompiled:
        for name in self.models:
            limit = MODELS[name].max_positions
            too_long = [n for n in self.seq_lens if limit and n > limit]
            if too_long:
                raise ValueError(f"seq_lens: {too_long[0]} exceeds {name}'s {limit} positions")
        return self


def configs(section: EagerVsCompiled, *, device: str, threads: int) -> list[Config]:
    """Every configuration, grouped by model and dtype, eager first within each shape, then its A/A copy.

    Shapes matching one of the section's `skip` entries are left out."""
    variants = [REFERENCE, AA] + [v for v in section.variants if v not in (REFERENCE, AA)]
    return [Config(model, v, dtype, batch, device, threads, seq_len=seq,
                   image_size=None if seq is not None else section.image_size)
            for model, dtype, batch, seq in section.shapes() for v in variants]


def estimate_s(c: Config, section: EagerVsCompiled, measure: dict, speed: float = 1.0) -> float:
    """A rough wall-time guess for `plan`: per replicate, compile + first call, warm-up and the minimum rounds.

    Per-call costs are calibrated on 2 CPU cores; `speed` is the machine's guessed speed relative to that.
    """
    big = not c.model.endswith("tiny")
    vision = c.image_size is not None
    compiled = runtimes.get(c.variant).family == "compile"
    compile_s = ((25.0 if vision else 14.0) if big else 4.0) * (1.3 if "autotune" in c.variant else 1) if compiled else 0.0
    per_call = (0.1 if big else 0.002) * c.batch_size * (1 if c.image_size is None and c.seq_len is None
                                                           else ((c.seq_len or 128) / 128))
    if c.dtype == "bf16" and c.device == "cpu":  # no native bf16 on most CPUs: eager ResNet-50 runs ~30x slower
        per_call *= 10 if compiled or not vision else 30
    calls = 1 + measure["warmup_calls"] + measure["min_rounds"]
    return measure["replicates"] * (compile_s + max(per_call / speed, measure["block_s"]) * calls
                                    + measure["min_time_s"] / 5)


SPEEDUP_COLUMNS = [*SHAPE_COLUMNS, "variant", "status", "error", "speedup", "ci_low", "ci_high", "significant",
                   "eager_median_s", "median_s", "compile_s", "break_even_calls", "max_abs_diff", "parity_ok"]


def _ratio(base: pd.Series, candidate: pd.Series) -> stats.Speedup:
    """Speed-up of `candidate` over `base` (two ok results rows), paired by round where they shared rounds."""
    return stats.speedup(base, candidate)


def break_even_calls(*, prepare_s: float, first_call_s: float, median_s: float, eager_median_s: float) -> float:
    """Smallest N for which N compiled calls (the first one cold) take no longer than N eager calls."""
    saving = eager_median_s - median_s
    if saving <= 0:
        return math.inf
    return float(max(1, math.ceil((prepare_s + first_call_s - median_s) / saving)))


def speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Speed-up of every non-eager row over eager on the same shape, with CIs (paired by round).

    `df` needs raw samples (ResultsTable.frame(with_samples=True)). Rows whose variant or eager
    reference failed are kept with their status and no ratio. Break-even is given only where the
    compiled variant is faster with a CI above 1 (∞ where it is clearly slower, NaN where unclear).
    """
    out = []
    for _, g in df.groupby(SHAPE_COLUMNS, dropna=False, sort=False):
        eager = g[g.variant == REFERENCE]
        base = eager.iloc[0] if len(eager) else None
        for _, r in g[g.variant != REFERENCE].iterrows():
            rec = {k: r[k] for k in SHAPE_COLUMNS} | {"variant": r.variant, "status": r.status, "error": r.error}
            if r.status == "ok" and base is not None and base.status == "ok":
                s = _ratio(base, r)
                faster, slower = s.ci_low > 1, s.ci_high < 1
                rec |= {"speedup": s.ratio, "ci_low": s.ci_low, "ci_high": s.ci_high, "significant": s.significant,
                        "eager_median_s": base.median_s, "median_s": r.median_s,
                        # Cold cost of compiling: what the first call took beyond one steady eager call.
                        "compile_s": r.prepare_s + r.first_call_s - base.median_s,
                        "break_even_calls": break_even_calls(prepare_s=r.prepare_s, first_call_s=r.first_call_s,
                                                             median_s=r.median_s, eager_median_s=base.median_s)
                        if faster else (math.inf if slower else math.nan),
                        "max_abs_diff": r.max_abs_diff, "parity_ok": r.parity_ok}
            elif r.status == "ok":
                rec |= {"status": f"eager {base.status if base is not None else 'missing'}",
                        "error": base.error if base is not None else "no eager row for this shape"}
            out.append(rec)
    return pd.DataFrame(out, columns=SPEEDUP_COLUMNS)


def _where(row) -> str:
    return f"{row['model']}, {row['dtype']}, batch {row['batch_size']}"


def findings(df: pd.DataFrame, sp: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    aa = aa_control(df, SHAPE_COLUMNS)
    lines = [aa_finding(aa)]
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


def _vision(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame.model.map(lambda m: models.spec(m).kind) == "vision"]


def claims(df: pd.DataFrame, sp: pd.DataFrame) -> pd.DataFrame:
    """Seed 004's (ResNet) and seed 002's claims beside what this run measured, with CI-based verdicts.

    'About equal' means a CI inside ±5%, or inside the A/A control's noise floor where that is wider."""
    rows = []
    band = noise_band(aa_control(df, SHAPE_COLUMNS))
    vis = _vision(sp[(sp.variant == "compile-default") & sp.speedup.notna()])
    for batch in (1, 8):
        g = vis[vis.batch_size == batch]
        rows.append({
            "seed": "004 (RTX 3090 Ti, ResNet)",
            "claim": f"eager and torch.compile run equally fast at batch {batch}",
            "this run": "; ".join(f"{r['model']} {r['dtype']}: {describe_ci(r)}" for _, r in g.iterrows())
                        or "not measured",
            "verdict": verdict(g, "≈ equal", band) if len(g) else "not measured in this profile",
        })

    trend = []
    for (model, dtype), g in vis.groupby(["model", "dtype"], sort=False):
        if g.batch_size.nunique() > 1:
            small, large = g.loc[g.batch_size.idxmin()], g.loc[g.batch_size.idxmax()]
            grows = large.ci_low > small.ci_high
            shrinks = large.ci_high < small.ci_low
            trend.append((f"{model} {dtype}: {fmt_x(small.speedup)} at b{small.batch_size} → "
                          f"{fmt_x(large.speedup)} at b{large.batch_size}",
                          "grows" if grows else "shrinks" if shrinks else "unclear"))
    if trend:
        counts = {k: sum(t[1] == k for t in trend) for k in ("grows", "shrinks", "unclear")}
        rows.append({"seed": "004", "claim": "torch.compile gains more over eager as batch size grows",
                     "this run": "; ".join(t[0] for t in trend),
                     "verdict": ("agrees" if counts["grows"] == len(trend) else
                                 "does not agree" if counts["grows"] == 0 else "mixed")
                                + f" (gain grows with non-overlapping CIs in {counts['grows']}, shrinks in "
                                  f"{counts['shrinks']}, unclear in {counts['unclear']} of {len(trend)})"})

    half = "fp16" if (df.device == "cuda").any() else "bf16"
    half_claim = f"at large batch, compiled {half} beats compiled fp32"
    comp = _vision(df[(df.status == "ok") & (df.variant == "compile-default")])
    pairs = []
    for model, g in comp.groupby("model", sort=False):
        b = g.batch_size.max()
        at = g[g.batch_size == b].set_index("dtype")
        if {"fp32", half} <= set(at.index):
            pairs.append((model, b, _ratio(at.loc["fp32"], at.loc[half])))
    if not pairs and half in set(comp.dtype) and "fp32" in set(comp.dtype):
        rows.append({"seed": "004", "claim": half_claim,
                     "this run": f"{half} was not measured at the largest batch (see the profile's left_out)",
                     "verdict": "not measured in this profile"})
    if pairs:
        rows.append({"seed": "004", "claim": half_claim,
                     "this run": "; ".join(f"{m} b{b}: {half} {s.ratio:.2f}× (95% CI {s.ci_low:.2f}–{s.ci_high:.2f}×) "
                                           f"the speed of fp32" for m, b, s in pairs),
                     "verdict": speedup_verdict([s for _, _, s in pairs], band)})

    ok = df[df.status == "ok"]
    ro, de = ok[ok.variant == "compile-reduce-overhead"], ok[ok.variant == "compile-default"]
    matched = [(_ratio(d, r)) for _, r in ro.iterrows() for _, d in de.iterrows()
               if all((pd.isna(r[k]) and pd.isna(d[k])) or r[k] == d[k] for k in SHAPE_COLUMNS)]
    if matched:
        on = "with CUDA graphs" if (df.device == "cuda").any() else "on CPU, where there are no CUDA graphs"
        rows.append({"seed": "002 (A100)", "claim": "use mode=\"reduce-overhead\" for inference",
                     "this run": f"reduce-overhead over default ({on}), per shape: "
                                 + ", ".join(f"{s.ratio:.2f}×" for s in matched),
                     "verdict": speedup_verdict(matched, band)})
    rows.append({"seed": "004", "claim": "ONNX Runtime is ahead of PyTorch 2.0 at small batch",
                 "this run": "not measured in this study", "verdict": "re-examined in study 03 (ONNX Runtime)"})
    return pd.DataFrame(rows)


def compile_table(sp: pd.DataFrame) -> pd.DataFrame:
    """Compile cost, speed-up and break-even calls per compiled configuration."""
    t = sp[sp.variant != AA].copy()
    t["size"] = t.apply(size_label, axis=1) if len(t) else []
    t["compile (s)"] = fmt_or_blank(t.compile_s, ".1f")
    t["speed-up (95% CI)"] = [describe_ci(r) if pd.notna(r["speedup"]) else r["status"] for _, r in t.iterrows()]
    t["break-even calls"] = [
        "" if pd.isna(r["speedup"]) else
        "no clear gain (CI includes 1)" if pd.isna(r["break_even_calls"]) else
        "never (slower)" if np.isinf(r["break_even_calls"]) else f"{r['break_even_calls']:,.0f}"
        for _, r in t.iterrows()]
    return t[["model", "dtype", "size", "batch_size", "variant", "compile (s)", "speed-up (95% CI)", "break-even calls"]]


def analyse(df: pd.DataFrame) -> Analysis:
    """Speed-ups over eager and the compile cost table, the findings and the seed claims."""
    sp = speedups(df)
    return Analysis(tables={"speedups": sp, "compile": compile_table(sp)}, findings=findings(df, sp),
                    claims=claims(df, sp))


STUDY = register(Study(
    NOTEBOOK, EagerVsCompiled, configs, estimate_s, analyse,
    comparisons=(
        Comparison("torch.compile (default) over eager", "compile-default", "eager"),
        Comparison("torch.compile (max-autotune) over eager", "compile-max-autotune", "eager"),
        Comparison("torch.compile (reduce-overhead) over default", "compile-reduce-overhead", "compile-default"),
    )))
