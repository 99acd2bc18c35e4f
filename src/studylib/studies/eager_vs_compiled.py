"""Study 01: PyTorch eager vs torch.compile — the grid, and the analysis the notebook shows."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import models
from ..sweep import Config
from ..timing import Measurement
from .common import describe_ci, fmt_ms, fmt_x, verdict

NOTEBOOK = "01_eager_vs_compiled"
REFERENCE = "eager"
SHAPE_COLUMNS = ["model", "dtype", "batch_size", "seq_len", "image_size"]
NOISY_CV = 0.10  # above this coefficient of variation a configuration's timing is called unstable


def configs(section, *, device: str, threads: int) -> list[Config]:
    """Every configuration, grouped by model and dtype, eager first within each shape."""
    variants = [REFERENCE] + [v for v in section.variants if v != REFERENCE]
    out = []
    for model in section.models:
        kind = models.spec(model).kind
        sizes = [dict(seq_len=s) for s in section.seq_lens] if kind == "text" else [dict(image_size=section.image_size)]
        for dtype in section.dtypes:
            for size in sizes:
                for batch in section.batch_sizes:
                    out += [Config(model, v, dtype, batch, device, threads, **size) for v in variants]
    return out


def estimate_s(c: Config, measure: dict) -> float:
    """A rough wall-time guess for `plan`: compile + warm-up + sampling budget."""
    big = not c.model.endswith("tiny")
    compile_s = 0.0 if c.variant == REFERENCE else (12.0 if big else 3.0) * (2 if "autotune" in c.variant else 1)
    per_call = (0.15 if big else 0.002) * c.batch_size * (1 if c.image_size is None and c.seq_len is None
                                                           else ((c.seq_len or 128) / 128))
    return compile_s + per_call * (1 + measure["warmup_calls"] + measure["min_samples"]) + measure["budget_s"]


def size_label(row) -> str:
    return f"seq {int(row['seq_len'])}" if pd.notna(row.get("seq_len")) else f"{int(row['image_size'])}px"


def speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Speed-up of every non-eager row over eager on the same shape, with bootstrap CIs.

    `df` needs raw samples (ResultsTable.frame(with_samples=True)). Rows whose variant or eager
    reference failed are kept with their status and no ratio.
    """
    out = []
    for _, g in df.groupby(SHAPE_COLUMNS, dropna=False, sort=False):
        eager = g[g.variant == REFERENCE]
        base = eager.iloc[0] if len(eager) else None
        for _, r in g[g.variant != REFERENCE].iterrows():
            rec = {k: r[k] for k in SHAPE_COLUMNS} | {"variant": r.variant, "status": r.status, "error": r.error}
            if r.status == "ok" and base is not None and base.status == "ok":
                s = Measurement.from_row(r).speedup_over(Measurement.from_row(base))
                saving = base.median_s - r.median_s
                # Cold cost of compiling: everything the first call took beyond one steady call of eager.
                compile_s = r.prepare_s + r.first_call_s - base.median_s
                rec |= {"speedup": s.ratio, "ci_low": s.ci_low, "ci_high": s.ci_high, "significant": s.significant,
                        "eager_median_s": base.median_s, "median_s": r.median_s, "compile_s": compile_s,
                        "break_even_calls": math.ceil(compile_s / saving) if saving > 0 else math.inf,
                        "max_abs_diff": r.max_abs_diff, "parity_ok": r.parity_ok}
            elif r.status == "ok":
                rec |= {"status": f"eager {base.status if base is not None else 'missing'}",
                        "error": base.error if base is not None else "no eager row for this shape"}
            out.append(rec)
    return pd.DataFrame(out)


def _where(row) -> str:
    return f"{row['model']}, {row['dtype']}, batch {row['batch_size']}"


def findings(df: pd.DataFrame, sp: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    lines = []
    ok = sp[sp.get("speedup").notna()] if "speedup" in sp else sp.iloc[0:0]
    for variant, g in ok.groupby("variant", sort=False):
        faster = int(((g.ci_low > 1)).sum())
        slower = int(((g.ci_high < 1)).sum())
        same = len(g) - faster - slower
        geo = float(np.exp(np.log(g.speedup).mean()))
        best, worst = g.loc[g.speedup.idxmax()], g.loc[g.speedup.idxmin()]
        lines.append(
            f"**{variant}** vs eager over {len(g)} configurations: faster in {faster}, slower in {slower}, "
            f"no detectable difference in {same} (95% CI includes 1). Geometric-mean speed-up {fmt_x(geo)}; "
            f"best {describe_ci(best)} ({_where(best)}), worst {describe_ci(worst)} ({_where(worst)})."
        )
    if len(ok):
        finite = ok[np.isfinite(ok.break_even_calls)]
        never = len(ok) - len(finite)
        cost = f"Compiling cost {ok.compile_s.min():.1f}–{ok.compile_s.max():.1f} s per configuration (first call beyond one eager call)"
        if len(finite):
            lines.append(f"{cost}. Where compiled code is faster it pays for itself after a median of "
                         f"{finite.break_even_calls.median():,.0f} calls (range {finite.break_even_calls.min():,.0f}–"
                         f"{finite.break_even_calls.max():,.0f}); in {never} of {len(ok)} configurations it never does.")
        else:
            lines.append(f"{cost}, and it never pays for itself here: no compiled variant had a lower median than eager.")
        # How batch size changes the picture, per mode and model/dtype.
        for (variant, model, dtype), g in ok.groupby(["variant", "model", "dtype"], sort=False):
            if g.batch_size.nunique() > 1:
                small, large = g.loc[g.batch_size.idxmin()], g.loc[g.batch_size.idxmax()]
                lines.append(f"{variant}, {model} {dtype}: {describe_ci(small)} at batch {small.batch_size} → "
                             f"{describe_ci(large)} at batch {large.batch_size}.")
    bad = df[(df.status == "ok") & (df.parity_ok == False)]  # noqa: E712 (NaN-safe)
    max_diff = df.loc[df.status == "ok", "max_abs_diff"].max() if "max_abs_diff" in df else float("nan")
    lines.append(
        f"Parity with eager: largest max-abs difference {max_diff:.2e}; "
        + (f"**{len(bad)} configuration(s) exceed the tolerance**: "
           + ", ".join(f"{r.variant} {r.model} {r.dtype} b{r.batch_size}" for r in bad.itertuples())
           if len(bad) else "every configuration is within tolerance.")
    )
    failed = df[df.status != "ok"]
    if len(failed):
        counts = failed.status.value_counts().to_dict()
        examples = "; ".join(f"{r.variant} {r.model} {r.dtype} b{r.batch_size}: {r.error}"
                             for r in failed.drop_duplicates("error").head(3).itertuples())
        lines.append(f"Failed or skipped configurations: {counts} — {examples}")
    else:
        lines.append("No configuration failed.")
    measured = df[df.status == "ok"]
    if len(measured):
        noisy = measured.loc[measured.cv.idxmax()]
        noisy_at = f"{noisy['variant']} {_where(noisy)}"
        budget = int((measured.stop_reason == "budget").sum())
        lines.append(
            f"Noise: CV ranged {measured.cv.min():.1%}–{measured.cv.max():.1%} (noisiest: {noisy_at}); {budget} of {len(measured)} configurations hit "
            f"their time budget before reaching the precision target."
        )
        unstable = measured[measured.cv > NOISY_CV]
        if len(unstable):
            lines.append(f"**{len(unstable)} configuration(s) are unstable (CV above {NOISY_CV:.0%})**: "
                         + ", ".join(f"{r['variant']} {_where(r)}" for _, r in unstable.iterrows())
                         + ". The machine was likely busy; their medians and speed-ups carry wide CIs.")
    return lines


def _at(sp: pd.DataFrame, variant: str, model_kind: str | None = None, batch: int | None = None) -> pd.DataFrame:
    g = sp[(sp.variant == variant) & sp.speedup.notna()] if "speedup" in sp else sp.iloc[0:0]
    if model_kind:
        g = g[g.model.map(lambda m: models.spec(m).kind) == model_kind]
    if batch is not None:
        g = g[g.batch_size == batch]
    return g


def claims(df: pd.DataFrame, sp: pd.DataFrame) -> pd.DataFrame:
    """The seeds' claims beside what this run measured, with a computed verdict."""
    rows = []
    for batch in (1, 8):
        g = _at(sp, "compile-default", "vision", batch)
        ours = "; ".join(f"{r.model} {r.dtype}: {describe_ci(r)}" for r in g.itertuples()) or "not measured"
        rows.append({
            "seed": "004 (RTX 3090 Ti, ResNet)",
            "claim": f"eager and torch.compile run equally fast at batch {batch}",
            "this run": ours,
            "verdict": verdict(g, "≈ equal") if len(g) else "not measured in this profile",
        })
    g = _at(sp, "compile-default")
    if len(g) and g.batch_size.nunique() > 1:
        trend = g.groupby("batch_size").speedup.apply(lambda s: float(np.exp(np.log(s).mean())))
        grows = trend.iloc[-1] > trend.iloc[0]
        ours = ", ".join(f"batch {b}: {fmt_x(v)}" for b, v in trend.items())
        rows.append({"seed": "004", "claim": "torch.compile gains more over eager as batch size grows",
                     "this run": f"geometric-mean speed-up {ours}",
                     "verdict": "agrees" if grows else "does not agree"})
    half = "fp16" if (df.device == "cuda").any() else "bf16"
    comp = df[(df.status == "ok") & (df.variant == "compile-default")]
    pairs = comp.pivot_table(index=["model", "batch_size"], columns="dtype", values="median_s")
    if {"fp32", half} <= set(pairs.columns):
        largest = pairs.reset_index().groupby("model").batch_size.max()
        sel = [(m, b) for m, b in largest.items()]
        ratio = [pairs.loc[k, "fp32"] / pairs.loc[k, half] for k in sel]
        ours = "; ".join(f"{m} b{b}: {half} {fmt_x(r)} faster than fp32" for (m, b), r in zip(sel, ratio))
        rows.append({"seed": "004", "claim": f"at large batch, compiled {half} beats compiled fp32",
                     "this run": ours, "verdict": "agrees" if all(r > 1 for r in ratio) else "mixed / does not agree"})
    ro, de = _at(sp, "compile-reduce-overhead"), _at(sp, "compile-default")
    if len(ro) and len(de):
        m = ro.merge(de, on=SHAPE_COLUMNS, suffixes=("_ro", "_de"))
        wins = int((m.ci_low_ro > m.ci_high_de).sum())
        loses = int((m.ci_high_ro < m.ci_low_de).sum())
        geo = float(np.exp(np.log(m.speedup_ro / m.speedup_de).mean()))
        on = "CUDA graphs active" if (df.device == "cuda").any() else "on CPU, where there are no CUDA graphs"
        rows.append({"seed": "002 (A100)", "claim": "use mode=\"reduce-overhead\" for inference",
                     "this run": f"reduce-overhead vs default ({on}): {fmt_x(geo)} geometric mean; clearly faster "
                                 f"in {wins}, clearly slower in {loses} of {len(m)} shapes",
                     "verdict": "agrees" if wins > loses else ("no advantage here" if wins == loses else "does not agree")})
    rows.append({"seed": "004", "claim": "ONNX Runtime is ahead of PyTorch 2.0 at small batch",
                 "this run": "not measured in this study", "verdict": "re-examined in study 03 (ONNX Runtime)"})
    return pd.DataFrame(rows)


def compile_table(sp: pd.DataFrame) -> pd.DataFrame:
    """Compile cost, speed-up and break-even calls per compiled configuration."""
    if "speedup" not in sp:
        return sp
    t = sp.copy()
    t["size"] = t.apply(size_label, axis=1)
    t["compile (s)"] = t.compile_s.map(lambda v: f"{v:.1f}" if pd.notna(v) else "")
    t["speed-up (95% CI)"] = [describe_ci(r) if pd.notna(r.speedup) else r.status for r in t.itertuples()]
    t["break-even calls"] = t.break_even_calls.map(
        lambda v: "" if pd.isna(v) else ("never" if not np.isfinite(v) else f"{v:,.0f}"))
    return t[["model", "dtype", "size", "batch_size", "variant", "compile (s)", "speed-up (95% CI)", "break-even calls"]]


def latency_table(df: pd.DataFrame) -> pd.DataFrame:
    """The results as a reader scans them: one row per configuration, times in ms."""
    t = df.copy()
    t["size"] = t.apply(size_label, axis=1)
    t["median"] = t.median_s.map(fmt_ms)
    t["95% CI"] = [f"{fmt_ms(lo)}–{fmt_ms(hi)}" if r == "ok" else "" for lo, hi, r in zip(t.ci_low_s, t.ci_high_s, t.status)]
    t["CV"] = t.cv.map(lambda v: f"{v:.1%}" if pd.notna(v) else "")
    t["first call"] = t.first_call_s.map(lambda v: (fmt_ms(v) if v < 1 else f"{v:.1f} s") if pd.notna(v) else "")
    t["samples/s"] = t.throughput_samples_s.map(lambda v: f"{v:,.1f}" if pd.notna(v) else "")
    t["peak MB"] = t.peak_mem_mb.map(lambda v: f"{v:,.0f}" if pd.notna(v) else "")
    t["max |Δ|"] = t.max_abs_diff.map(lambda v: f"{v:.1e}" if pd.notna(v) else "")
    cols = ["model", "dtype", "size", "batch_size", "variant", "status", "median", "95% CI", "CV", "n",
            "first call", "samples/s", "peak MB", "max |Δ|", "parity_ok", "error"]
    return t[[c for c in cols if c in t]]
