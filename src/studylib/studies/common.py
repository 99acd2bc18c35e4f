"""Formatting and verdict helpers shared by the studies' findings and claim tables."""

from __future__ import annotations

import pandas as pd

from ..bench import roofline, surprises
from ..claims import claims as seedclaims
from ..core import numbers, wording
from ..core.config import REFERENCE, is_aa, shape_label
from ..core.study_registry import REGISTRY
from ..stats import run_shift, speedups, stats, variance, verdicts
from ..stats.speedups import EQUIVALENCE
from ..workloads.models import MODELS
from .base import Analysis


def finish(notebook: str, df: pd.DataFrame, peaks: dict | None, vt: verdicts.VerdictTable, tables: dict,
           findings: list[str], claims: pd.DataFrame, pairs=None, shape=None, column: str = "variant",
           later=()) -> Analysis:
    """A study's Analysis with the roofline (`pairs`: default each variant over eager), `later` and the surprises."""
    study = REGISTRY[notebook]
    if pairs is None:
        pairs = [(v, REFERENCE) for v in dict.fromkeys(df.get("variant", [])) if v != REFERENCE and not is_aa(v)]
    analysis = roofline.attach(Analysis(tables=tables, findings=findings, claims=claims), df, peaks, pairs, vt, shape,
                               column=column, options=study.options)
    analysis.findings.extend(later)
    return surprises.attach(analysis, df, study.expectations, EQUIVALENCE)


def replicates_s(measure: dict, one_time: float, per_call: float, speed: float, share: float, extra_calls: float = 0):
    """`plan`'s guess over the replicates: `one_time`, every call at `per_call` ÷ `speed`, min_time_s ÷ `share`."""
    calls = 1 + measure["warmup_calls"] + measure["min_rounds"] + extra_calls
    return measure["replicates"] * (one_time + max(per_call / speed, measure["block_s"]) * calls
                                    + measure["min_time_s"] / share)


def text_workloads(run):
    """The data-set studies' workloads (StudyRun -> dataset.DatasetWorkloads): passes over the profile's corpus."""
    return run.text_data()[1]


def say(template: str, name: str, /, *args, **kwargs) -> str:
    """The macro `name` of templates/studies/<template>.md.j2: a study's sentence, from the data it is given."""
    return wording.macro(f"studies/{template}.md.j2", name, *args, **kwargs)


def threshold_note(claim, lo: float, hi: float) -> str:
    """A clause for a claim decided in its direction but not beyond its magnitude word's threshold; else ''."""
    m = claim.magnitude
    if m is None or claim.expect not in ("higher", "lower"):
        return ""
    want = "faster" if claim.expect == "higher" else "slower"
    beyond = lo >= m.at_least if claim.expect == "higher" else hi <= 1 / m.at_least
    if verdicts.unlisted(lo, hi, EQUIVALENCE) != want or beyond:
        return ""
    return " " + say("common", "threshold_note", want, m.words, m.at_least)


def triple(r) -> tuple[float, float, float]:
    """A row's (speedup, ci_low, ci_high) as floats."""
    return float(r["speedup"]), float(r["ci_low"]), float(r["ci_high"])


def ratio_claim(df: pd.DataFrame, cell, text: str, rows: pd.DataFrame, **kwargs) -> seedclaims.ClaimMeasurement:
    """A claim's measurement of the ratio `cell` (value, low, high), judged against the results' A/A band."""
    return seedclaims.ClaimMeasurement(*cell, text, rows=rows, band=EQUIVALENCE, **kwargs)


def count_claim(text: str, rows: pd.DataFrame, holds: bool) -> seedclaims.ClaimMeasurement:
    """A claim answered by counting (no ratio, no CI): whether it `holds`, and the rows it read."""
    return seedclaims.ClaimMeasurement(None, None, None, text, rows=rows, holds=holds)


def over_reference(df: pd.DataFrame, vt: verdicts.VerdictTable | None = None) -> pd.DataFrame:
    """Every variant over eager on the same shape, paired by round; with `vt`, each decision in `verdict`."""
    t = speedups.pair_table(df, None, REFERENCE, band=EQUIVALENCE)
    if vt is not None:
        t["verdict"] = [verdicts.decision_at(vt, r.candidate, r.baseline, r) if pd.notna(r.speedup)
                        else None for r in t.itertuples()] if len(t) else []
    return t


def closing_findings(notebook: str, df: pd.DataFrame, label, worst, failed: str, after_noise=None) -> list[str]:
    """A study's last findings: parity (`worst(ok rows)`'s differences), `failed`, noise, `after_noise`, drift_lines."""
    measured = df[df.status == "ok"]
    if not len(measured):
        return [failed] + drift_lines(df)
    bad = measured[measured.parity_ok == False]  # noqa: E712
    noisy = measured.loc[measured.cv.astype(float).idxmax()]
    return [say(notebook, "parity", *worst(measured), [label(r) for _, r in bad.iterrows()]), failed,
            say(notebook, "noise", measured.cv.min(), measured.cv.max(), label(noisy),
                int(measured.stop_reason.str.contains("budget").sum()), len(measured)),
            *(after_noise(measured) if after_noise else ()), *drift_lines(df)]


def count_of(values: pd.Series, how: str = "sum"):
    """A count column's total (or `how`: max, …) as an int; blank where nothing was recorded."""
    return "" if values.isna().all() else int(getattr(values, how)())


def per_model_variant(df: pd.DataFrame, cells) -> pd.DataFrame:
    """One row per model and variant of the ok rows (A/A copies left out): `cells(variant, rows)`'s columns."""
    ok = speedups.without_aa(df[df.status == "ok"])
    return pd.DataFrame([{"model": model, "variant": variant, **cells(variant, g)}
                         for (model, variant), g in ok.groupby(["model", "variant"], sort=False)])


def describe_ci(row) -> str:
    """'1.23× (95% CI 1.20–1.26)' from a row with speedup, ci_low, ci_high (numbers.fmt)."""
    return numbers.fmt(row["speedup"], row["ci_low"], row["ci_high"])


def aa_finding(df: pd.DataFrame) -> str:
    """The A/A controls in one sentence: what ran, false positives by runtime, the CIs' calibration, the noise floor."""
    aa = speedups.aa_pairs(df)
    if not len(aa):
        return say("common", "no_aa")
    per = [(r, int(g.significant.sum()), len(g)) for r, g in aa.groupby("runtime", sort=False)]
    return say("common", "aa_finding", list(dict.fromkeys(aa.runtime)), per, speedups.aa_calibration(df, pairs=aa),
               EQUIVALENCE, aa.speedup.min(), aa.speedup.max(), aa.ci_low.min(),
               aa.ci_high.max())


def rerun_line(ok: pd.DataFrame) -> str:
    """What a re-run on this host may add to the medians' CIs: the recorded shift between whole runs, or unknown."""
    stamped = ok[["run_shift_sigma", "run_shift_df"]].dropna() if "run_shift_df" in ok else pd.DataFrame()
    if not len(stamped):
        return run_shift.describe(None)
    # the shift these rows were measured with (the record may have grown since)
    shift = run_shift.of(*stamped.iloc[-1])
    half = (ok.rerun_high_s / ok.median_s - 1) if "rerun_high_s" in ok else pd.Series(dtype=float)
    if not half.notna().any():
        return run_shift.describe(shift)
    return run_shift.describe(shift) + " " + say("common", "rerun_widths", half.min(), half.max())


def drift_lines(df: pd.DataFrame) -> list[str]:
    """How the machine drifts within a process and between replicate processes: one finding, none without the column."""
    ok = df[df.status == "ok"]
    if "drift" not in ok or not len(ok):
        return []
    flagged = ok[ok.drift.fillna(False).astype(bool)]
    line = say("common", "drift", len(flagged), len(ok), stats.DRIFT_P, flagged.drift_pct.min(),
               flagged.drift_pct.max())
    records = ok.to_dict("records") if "samples_s" in ok else []
    medians = variance.medians_between(records) if records else None
    if medians is not None:
        odd = int(ok.heterogeneous.fillna(False).astype(bool).sum()) if "heterogeneous" in ok else 0
        half = ok.ci_high_s / ok.median_s - 1
        line += " " + say("common", "between", medians, half.min(), half.max(), odd, variance.HETEROGENEITY_P,
                          variance.ratios_between(records)) + " " + rerun_line(ok)
    return [line]


def failures_and_noise(df: pd.DataFrame, where) -> list[str]:
    """What did not run (`where(row)` names a configuration, e.g. "ort b8") and the spread of CVs."""
    failed, measured = df[df.status != "ok"], df[df.status == "ok"]
    parts = [(where(r), r["status"], r["error"]) for _, r in failed.drop_duplicates(["variant", "error"]).iterrows()]
    lines = [say("common", "failed", len(failed), parts) if len(failed) else "Every configuration ran."]
    if len(measured):
        lines.append(say("common", "noise_cv", measured.cv.min(), measured.cv.max()))
    return lines


def ms(seconds: float) -> str:
    """Seconds as a page prints milliseconds (numbers.fmt_ms); blank where missing."""
    return numbers.fmt_ms(seconds * 1e3 if seconds is not None else None, "")


def failed_by_variant(df: pd.DataFrame, averages: bool = False) -> str:
    """What did not run, per variant: its statuses and first message (`averages`: said to be left out of them)."""
    failed = df[df.status != "ok"]
    if not len(failed):
        return "Every configuration ran."
    parts = [(v, list(g.status.value_counts().items()), g.error.iloc[0]) for v, g in failed.groupby("variant", sort=False)]
    return say("common", "failed_variants", len(failed), len(df), parts, averages)


def first_call_cells(g: pd.DataFrame) -> dict[str, str]:
    """A first-call table's cells: the first call's range over shapes and its median over the steady call."""
    return {"first call (s)": numbers.fmt_range(g.first_call_s.min(), g.first_call_s.max(), ".2f"),
            "first call ÷ steady call": f"{numbers.fmt((g.first_call_s / g.median_s).median(), digits=0)} (median)"}


def size_label(row) -> str:
    """The input size of a row's shape: 'seq 128' or '224px' (config.shape_label)."""
    return shape_label(row, ("seq_len", "image_size"))


def fmt_or_blank(series: pd.Series, spec: str) -> pd.Series:
    """Each value formatted with `spec` ('.1%', ',.0f', …); a missing one as an empty cell."""
    return series.map(lambda v: format(v, spec) if pd.notna(v) else "")


def add_timing_columns(df: pd.DataFrame, median_label: str = "median", formats=(), columns=None) -> pd.DataFrame:
    """The results with the timing columns formatted, and `formats` ((column, source, spec)); `columns`: only those."""
    t = df.copy()
    t[median_label] = t.median_s.map(ms)
    t["95% CI (this run)"] = [f"{ms(lo)}–{ms(hi)}" if s == "ok" else ""
                              for lo, hi, s in zip(t.ci_low_s, t.ci_high_s, t.status)]
    rerun = zip(t.get("rerun_low_s", pd.Series(dtype=float)).reindex(t.index),
                t.get("rerun_high_s", pd.Series(dtype=float)).reindex(t.index), t.status)
    t["95% CI (re-run here)"] = [f"{ms(lo)}–{ms(hi)}" if s == "ok" and pd.notna(lo) else
                                 ("unknown" if s == "ok" else "") for lo, hi, s in rerun]
    t["CV"] = fmt_or_blank(t.cv, ".1%")
    t["n"] = t.n.astype("Int64")
    t["max |Δ|"] = fmt_or_blank(t.max_abs_diff, ".1e")
    t["drift"] = [("↗" if p > 0 else "↘") + f" {p:+.0%}" if d is True else "" for d, p in
                  zip(t.get("drift", pd.Series([None] * len(t), index=t.index)),
                      t.get("drift_pct", pd.Series([0.0] * len(t), index=t.index)).fillna(0.0))]
    for name, source, spec in formats:
        t[name] = fmt_or_blank(t[source], spec)
    return t if columns is None else t[[c for c in columns if c in t]]


def latency_table(df: pd.DataFrame) -> pd.DataFrame:
    """The results as a reader scans them: one row per configuration, times in ms."""
    t = add_timing_columns(df, formats=(("samples/s", "throughput_samples_s", ",.1f"),
                                        ("peak MB", "peak_mem_mb", ",.0f")))
    t["size"] = t.apply(size_label, axis=1)
    t["first call"] = t.first_call_s.map(lambda v: numbers.fmt_seconds(v, "") if pd.notna(v) and v >= 1 else ms(v))
    cols = ["model", "dtype", "size", "batch_size", "variant", "status", "median", "95% CI (this run)",
            "95% CI (re-run here)", "CV", "n", "drift",
            "first call", "samples/s", "peak MB", "max |Δ|", "parity_ok", "error"]
    return t[[c for c in cols if c in t]]


# export-aoti's preparation per configuration, for `plan` only (calibration: docs/method.md, "Studies")
AOTI_PREPARE_S = {"text": 23.0, "vision": 21.5, "tiny": 9.0}


def aoti_prepare_s(model: str) -> float:
    """`plan`'s guess of export-aoti's preparation for `model` (AOTI_PREPARE_S; XLM and XLNet by their cost)."""
    if model.endswith("tiny"):
        return AOTI_PREPARE_S["tiny"]
    spec = MODELS[model]
    return AOTI_PREPARE_S["vision"] if spec.kind == "vision" else AOTI_PREPARE_S["text"] * spec.cost


def aoti_steps(df: pd.DataFrame) -> str:
    """export-aoti's preparation steps (export, compile, package size, load) as ranges over its rows; '' if none."""
    ok = df[(df.variant == "export-aoti") & (df.status == "ok")] if len(df) else df
    steps = [{s["step"]: s for s in r} for r in ok.get("prepare_steps", []) if isinstance(r, list)]
    if not steps:
        return ""

    def span(step: str, key: str = "seconds", scale: float = 1.0, spec: str = ".1f") -> str:
        values = [s[step][key] * scale for s in steps if s.get(step, {}).get(key) is not None]
        return numbers.fmt_range(min(values), max(values), spec) if values else "?"

    return say("common", "aoti_steps", span("torch.export", spec=".2f"), span("aoti_compile_and_package"),
               span("aoti_compile_and_package", "bytes", 1e-6, ".3g"), span("load", spec=".2f"), len(steps))
