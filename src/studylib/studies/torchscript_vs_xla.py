"""Study 02: PyTorch (eager, TorchScript, and its successor torch.export + AOTInductor) vs TensorFlow (eager, graph, XLA)
on the same weights."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, field_validator

from .. import runtimes
from ..bench import roofline, surprises
from ..bench.schemas import Grid, VariantSkips
from ..claims import claims as seedclaims
from ..core import numbers
from ..core.config import (
    REFERENCE,
    SHARED_SETTINGS,
    Config,
    aa_of,
    original_of,
    shape_columns,
    shape_label,
    shape_of,
    with_aa,
)
from ..stats import speedups as speedups_layer
from ..stats import verdicts
from ..stats.speedups import Comparison
from ..workloads.models import MODELS
from .base import Analysis, Study, register
from .common import aa_finding, aoti_prepare_s, aoti_steps, describe_ci, drift_finding, latency_table  # noqa: F401

NOTEBOOK = "02_torchscript_vs_xla"
Variant = runtimes.offered(NOTEBOOK)  # the variants whose registration offers them in this study
# How the findings and claims name a shape: model, batch and sequence ("bert-base b1 × s128"; config.shape_label).
LABEL_COLUMNS = ("model", "batch_size", "seq_len")
FRAMEWORK = {"eager": "PyTorch", "torchscript": "PyTorch", "torchscript-optimized": "PyTorch", "export-aoti": "PyTorch",
             "tf-eager": "TensorFlow", "tf-function": "TensorFlow", "tf-xla": "TensorFlow"}
FRAMEWORK |= {f"{v}-{s}": FRAMEWORK[v] for v in ("eager", "tf-function") for s in SHARED_SETTINGS}
FRAMEWORK |= {aa_of(v): fw for v, fw in FRAMEWORK.items()}  # an A/A copy runs in its original's framework

# (candidate, baseline): within each framework, the speed-up over its own eager (and XLA over the TF graph, and
# TorchScript's successor, torch.export + AOTInductor, over TorchScript); across frameworks, TensorFlow over eager PyTorch.
WITHIN = [("torchscript", "eager"), ("torchscript-optimized", "eager"), ("export-aoti", "eager"),
          ("export-aoti", "torchscript"), ("tf-function", "tf-eager"), ("tf-xla", "tf-eager"), ("tf-xla", "tf-function")]
ACROSS = [("tf-eager", "eager"), ("tf-function", "eager"), ("tf-xla", "torchscript")]
# What sharing one process with the other framework costs eager PyTorch and tf.function, with OpenMP's own wait policy
# and under PASSIVE (runtimes/shared.py): each over itself in a process of its own, paired in the same rounds.
SHARED = [Comparison(f"{name} in one process with {other}{under}, over its own process", f"{v}-{setting}", v)
          for v, name, other in (("eager", "eager PyTorch", "TensorFlow"), ("tf-function", "tf.function", "PyTorch"))
          for setting, under in (("shared", ""), ("shared-passive", " under OMP_WAIT_POLICY=PASSIVE"))]
PROCESS = [(c.candidate, c.baseline) for c in SHARED]
PAIRS = WITHIN + ACROSS + PROCESS
# Seed 001's "unusual ops": on single operations, PyTorch over TensorFlow (eager over TF eager and over its graph;
# compiled over compiled), so that below 1 PyTorch is the slower.
OP_PAIRS = [("eager", "tf-eager"), ("eager", "tf-function"), ("torchscript", "tf-function"), ("torchscript", "tf-xla")]
# Variants the micro-ops leave out: export-aoti would add a cold C++ compile (AOTInductor) per operation, size and
# replicate, and seed 001's question there is PyTorch against TensorFlow (OP_PAIRS), which it does not answer; the
# shared-process variants ask about whole models.
NOT_ON_OPS = ("export-aoti", *(f"{v}-{s}" for v in ("eager", "tf-function") for s in SHARED_SETTINGS))
# What each graph path is for (TorchScript's optimize_for_inference should change little on these encoders); a
# replicate that contradicts one profiles a call of each side (surprises.py; TensorFlow's are noted, not profiled).
EXPECTATIONS = (surprises.Expectation("torchscript", "eager"), surprises.Expectation("tf-function", "tf-eager"),
                surprises.Expectation("tf-xla", "tf-function"), surprises.Expectation("export-aoti", "eager"),
                surprises.Expectation("torchscript-optimized", "torchscript", expect="equal"))


class MicroOps(BaseModel):
    """Single operations (models of kind "op") timed in every variant of the section but export-aoti (NOT_ON_OPS), at
    their own sizes: a (batch, seq_len, hidden) fp32 tensor for each batch size × sequence length."""

    model_config = ConfigDict(extra="forbid", strict=True)
    models: list[str]
    batch_sizes: list[int]
    seq_lens: list[int]

    @field_validator("models")
    @classmethod
    def _ops_only(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError("must list at least one operation, each once")
        for name in v:
            if name not in MODELS or MODELS[name].kind != "op":
                ops = [n for n, m in MODELS.items() if m.kind == "op"]
                raise ValueError(f"{name!r} is not a single operation (known: {', '.join(ops)})")
        return v

    @field_validator("batch_sizes", "seq_lens")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        if not v or len(set(v)) != len(v) or min(v) < 1:
            raise ValueError("must list positive sizes, each once")
        return v

    @field_validator("seq_lens")
    @classmethod
    def _two_rows(cls, v: list[int]) -> list[int]:
        if min(v) < 2:
            raise ValueError("must be at least 2 (gather takes every second row)")
        return v


class TorchscriptVsXla(VariantSkips, Grid):  # Grid first in validation: eager and the grid before variant_skip
    """Section of study 02: PyTorch (eager, TorchScript, torch.export + AOTInductor) vs TensorFlow (eager, graph, XLA) on
    the same weights.

    Sequence lengths beyond a model's positions are allowed here, as in seed 000's grid (up to 1024 for
    every model): those cells become 'skipped' rows that the figures mark, rather than an invalid profile.
    """

    variants: list[Variant]
    micro_ops: MicroOps | None = None  # seed 001's single operations, at their own sizes (None: none)

    @field_validator("models")
    @classmethod
    def _text_only(cls, v: list[str]) -> list[str]:
        for name in v:
            if name in MODELS and MODELS[name].kind != "text":
                raise ValueError(f"{name!r} is not a text model (study 02 compares text encoders)")
        return v


def configs(section: TorchscriptVsXla, *, device: str, threads: int) -> list[Config]:
    """Every configuration, grouped by model, eager PyTorch first within each shape (its output is the reference).

    Each variant the section's `aa` names is followed by its A/A copy, on the whole models and the micro-ops alike.
    Shapes matching one of the section's `skip` entries are left out, and a variant where its `variant_skip` says so;
    the micro-ops run every variant but NOT_ON_OPS."""
    variants = with_aa([REFERENCE] + [v for v in section.variants if v != REFERENCE], section.aa)
    ops = section.micro_ops
    op_shapes = [(op, "fp32", b, s) for op in ops.models for s in ops.seq_lens for b in ops.batch_sizes] if ops else []
    return ([Config(model, v, dtype, batch, device, threads, seq_len=seq) for model, dtype, batch, seq in section.shapes()
             for v in variants if section.runs(v, model, dtype, batch, seq)]
            + [Config(model, v, dtype, batch, device, threads, seq_len=seq) for model, dtype, batch, seq in op_shapes
               for v in variants if original_of(v) not in NOT_ON_OPS])


def is_op(df: pd.DataFrame) -> pd.Series:
    """Which rows time a single operation (seed 001's micro-ops) rather than a whole model."""
    return df.model.map(lambda m: m in MODELS and MODELS[m].kind == "op").astype(bool)


def estimate_s(c: Config, section: TorchscriptVsXla, measure: dict, speed: float = 1.0) -> float:
    """A rough wall-time guess for `plan`, per replicate: graph build / XLA compile, warm-up, the minimum rounds."""
    tokens, variant = c.batch_size * c.seq_len, original_of(c.variant)  # an A/A copy costs what its original does
    if MODELS[c.model].kind == "op":  # memory-bound: ~1 GB/s over the tensor on 2 cores, plus per-call overhead
        per_call = (2e-4 if variant == "tf-eager" else 5e-5) + tokens * 768 * 4 / 1e9
        build = {"tf-function": 0.3, "tf-xla": 0.5, "torchscript": 0.1, "torchscript-optimized": 0.2}.get(variant, 0)
        calls = 1 + measure["warmup_calls"] + measure["min_rounds"]
        return measure["replicates"] * (build + max(per_call / speed, measure["block_s"]) * calls
                                        + measure["min_time_s"] / 7)
    big = not c.model.endswith("tiny")
    per_call = (0.015 + 0.0008 * tokens) * MODELS[c.model].cost if big else 0.002  # cost: relative to BERT-base
    per_call *= 2.5 if variant == "tf-eager" else 1.0
    build = {"tf-function": 2.5, "tf-xla": 2.0, "torchscript": 0.5, "torchscript-optimized": 1.0}.get(variant, 0.0)
    build = build * (1 if big else 0.2) + (aoti_prepare_s(c.model) if variant == "export-aoti" else 0.0)
    calls = 1 + measure["warmup_calls"] + measure["min_rounds"]
    return measure["replicates"] * (build + max(per_call / speed, measure["block_s"]) * calls + measure["min_time_s"] / 7)


# What a speed-up table holds beside the shape columns of the results (pair_table), where no pair ran.
SPEEDUP_COLUMNS = ["tokens", "pair", "candidate", "baseline", "kind", "status", "error", "speedup", "ci_low", "ci_high"]


def speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Speed-up of each pair's candidate over its baseline on every shape, with CIs (paired by round).

    `df` needs raw samples. A pair whose candidate or baseline failed keeps a row with that status and
    message (prefixed with which side failed) and no ratio, so heatmaps mark the cell. Whole models only: the
    micro-ops' rows are op_speedups'.
    """
    return _pair_speedups(df[~is_op(df)] if len(df) else df, PAIRS)


def op_speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Seed 001's micro-ops: PyTorch over TensorFlow (OP_PAIRS) on every operation and size, with CIs."""
    return _pair_speedups(df[is_op(df)] if len(df) else df, OP_PAIRS)


def _pair_speedups(df: pd.DataFrame, pairs) -> pd.DataFrame:
    """Each (candidate, baseline) of `pairs` at every shape where both have rows (speedups.pair_table)."""
    band = speedups_layer.band(df)
    parts = []
    for cand, base in pairs:
        if not (len(df) and (df.variant == cand).any() and (df.variant == base).any()):
            continue
        t = speedups_layer.pair_table(df, cand, base, band=band)
        t = t[t.status != "baseline missing"]
        kind = "within" if (cand, base) in WITHIN else "process" if (cand, base) in PROCESS else "across"
        parts.append(t.assign(tokens=(t.batch_size * t.seq_len).astype(int), pair=f"{cand} over {base}", kind=kind))
    if not parts:
        return pd.DataFrame(columns=[*shape_columns(df), *SPEEDUP_COLUMNS])
    return pd.concat(parts, ignore_index=True)


def _geo(df: pd.DataFrame, cand: str, base: str, mask=None) -> dict | None:
    """Geometric-mean speed-up of `cand` over `base` across shapes where both ran, with its CI (speedups.geomean)."""
    ok = df[df.status == "ok"]
    g = speedups_layer.geomean(ok[mask(ok)] if mask is not None else ok, cand, base)
    return None if g is None else {"speedup": g.ratio, "ci_low": g.ci_low, "ci_high": g.ci_high, "n": g.n}


def _describe_geo(r: dict) -> str:
    return f"{describe_ci(r)} over {r['n']} shape{'s' * (r['n'] != 1)}"


def findings(df: pd.DataFrame, sp: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    band = speedups_layer.band(df)
    lines = [aa_finding(df)]
    ok = sp[sp.speedup.notna()]
    for (cand, base), g in ok.groupby(["candidate", "baseline"], sort=False):
        if g.tokens.nunique() < 2:
            continue
        small, large = g[g.tokens == g.tokens.min()], g[g.tokens == g.tokens.max()]
        gm = lambda s: float(np.exp(np.log(s).mean()))  # noqa: E731
        lines.append(f"Input size, {cand} over {base}: {numbers.fmt(gm(small.speedup))} at the smallest input "
                     f"({int(small.tokens.iloc[0])} tokens per call) vs {numbers.fmt(gm(large.speedup))} at the largest "
                     f"({int(large.tokens.iloc[0])}), geometric means over models; Spearman correlation of speed-up "
                     f"with tokens per call {g[['speedup', 'tokens']].corr(method='spearman').iloc[0, 1]:+.2f}.")
    lines += op_findings(df, band)
    xla = df[(df.variant == "tf-xla") & (df.status == "ok")]
    if len(xla):
        build = xla.first_call_s - xla.median_s
        lines.append(f"XLA compiled {int(xla.compilations.sum())} graphs in the first calls of {len(xla)} "
                     f"configurations (one per input shape; {numbers.fmt_range(build.min(), build.max(), '.1f', ' s')} "
                     f"each beyond a steady "
                     f"call) and recompiled {int(xla.recompilations.sum())} times during steady-state timing.")
    aot = aoti_steps(df)
    if aot:
        lines.append(f"torch.export + AOTInductor, made once per configuration before its first call: {aot}; its one-time "
                     f"cost (these, and the first call beyond a steady one) is in the first-call table and the decision "
                     f"table.")
    measured = df[df.status == "ok"]
    if len(measured):
        bad = measured[measured.parity_ok == False]  # noqa: E712
        worst = measured.groupby(measured.variant.map(FRAMEWORK)).max_abs_diff.max()
        lines.append("Parity with eager PyTorch (same inputs): largest max-abs difference "
                     + ", ".join(f"{fw} {v:.1e}" for fw, v in worst.items()) + "; "
                     + (f"**{len(bad)} configuration(s) exceed the tolerance**: "
                        + ", ".join(f"{r['variant']} {shape_label(r, LABEL_COLUMNS, short=True)}"
                                    for _, r in bad.iterrows()) if len(bad) else "all within tolerance."))
    failed = df[df.status != "ok"]
    if len(failed):
        parts = [f"{v} ({', '.join(f'{n} {s}' for s, n in g.status.value_counts().items())}): {g.error.iloc[0]}"
                 for v, g in failed.groupby("variant", sort=False)]
        lines.append(f"{len(failed)} of {len(df)} configurations did not run; they are marked in the figures and "
                     f"left out of the averages above — " + "; ".join(parts))
    else:
        lines.append("Every configuration ran.")
    if len(measured):
        noisy = measured.loc[measured.cv.astype(float).idxmax()]
        lines.append(f"Noise: CV {numbers.fmt_range(measured.cv.min(), measured.cv.max(), '.1%')} (noisiest: {noisy['variant']} "
                     f"{shape_label(noisy, LABEL_COLUMNS, short=True)}); "
                     f"{int(measured.stop_reason.str.contains('budget').sum())} of {len(measured)} configurations hit their "
                     f"time budget before the precision target.")
    drift = drift_finding(df)
    return lines + ([drift] if drift else [])


def op_findings(df: pd.DataFrame, band: float) -> list[str]:
    """Seed 001's micro-ops, one line per PyTorch-over-TensorFlow pair: geometric mean per operation over its sizes
    (with CIs) and per-size readings against the A/A band `band`. Empty where no micro-op ran."""
    ops = df[is_op(df)] if len(df) else df
    sp = op_speedups(ops)
    lines = []
    for (cand, base), g in sp[sp.speedup.notna()].groupby(["candidate", "baseline"], sort=False):
        per_op = [(m, _geo(ops, cand, base, lambda t, m=m: t.model == m)) for m in dict.fromkeys(g.model)]
        classes = [verdicts.unlisted(lo, hi, band) for lo, hi in zip(g.ci_low, g.ci_high)]  # not in the table
        sizes = sorted({(int(b), int(s)) for b, s in zip(g.batch_size, g.seq_len)}, key=lambda x: x[0] * x[1])
        lines.append(f"**Single operations, {cand} over {base}** (below 1: PyTorch slower): "
                     + "; ".join(f"{m} {_describe_geo(r)}" for m, r in per_op if r)
                     + f". Per size (batch × sequence {', '.join(f'{b}×{s}' for b, s in sizes)}, hidden 768): PyTorch "
                       f"faster in {classes.count('faster')}, slower in {classes.count('slower')}, within ±{band - 1:.0%} "
                       f"in {classes.count('equal')}, undecided in {classes.count('undecided')} of {len(classes)}.")
    failed = sp[sp.speedup.isna()]
    if len(failed):
        lines.append(f"Single operations: {len(failed)} pair(s) did not run — " + "; ".join(
            dict.fromkeys(f"{r['model']} {r['error']}" for _, r in failed.iterrows())))
    return lines


def op_table(df: pd.DataFrame) -> pd.DataFrame:
    """The micro-ops as the notebook shows them: per operation, size and PyTorch-over-TensorFlow pair, both medians
    and the speed-up with its 95% CI (below 1: PyTorch slower), or which side did not run."""
    sp = op_speedups(df)
    ok = {(shape_of(r), r["variant"]): r["median_s"] for r in df[df.status == "ok"].to_dict("records")} if len(df) else {}

    def median_ms(r, side):  # each side's own median, also where the other did not run
        key = (shape_of(r), r[side])
        return f"{ok[key] * 1e3:.3g}" if key in ok else ""

    return pd.DataFrame([{
        "operation": r["model"], "batch × seq (× 768)": f"{int(r['batch_size'])} × {int(r['seq_len'])}",
        "pair": r["pair"], "PyTorch (ms)": median_ms(r, "candidate"), "TensorFlow (ms)": median_ms(r, "baseline"),
        "speed-up (95% CI)": describe_ci(r) if pd.notna(r["speedup"]) else f"{r['status']}: {r['error']}"}
        for _, r in sp.iterrows()], columns=["operation", "batch × seq (× 768)", "pair", "PyTorch (ms)",
                                             "TensorFlow (ms)", "speed-up (95% CI)"])


OP_EVALUATORS = ("op_gain",)  # claims judged on the micro-ops' rows; every other claim on the whole models'


def claims(df: pd.DataFrame, sp: pd.DataFrame, peaks: dict | None = None, *,
           vt: verdicts.VerdictTable) -> pd.DataFrame:
    """The registry's claims this study tests (seeds 000, 001 and 003), judged on these results (studylib.claims.claims):
    seed 001's single-operation claim on the micro-ops' rows, every other claim on the whole models'; `peaks` (the
    machine's limits) give verdicts over eager PyTorch their host caveat; `vt`, the run's verdict table, the
    decisions per shape and of TorchScript's successor."""
    mine = [c for c in seedclaims.registry() if c.study == NOTEBOOK]
    ops = is_op(df) if len(df) else pd.Series(False, index=df.index)
    tables = {"speedups": sp, "micro-ops": op_speedups(df)}
    parts = [seedclaims.study_claims(NOTEBOOK, df[ops] if c.evaluator in OP_EVALUATORS else df[~ops],
                                     tables | {"verdicts": vt}, claims=(c,), peaks=peaks, vt=vt) for c in mine]
    return pd.concat(parts, ignore_index=True) if parts else seedclaims.study_claims(NOTEBOOK, df, tables, claims=(),
                                                                                      vt=vt)


def first_call_table(df: pd.DataFrame) -> pd.DataFrame:
    """What each variant costs before steady state: preparation (trace and freeze; wrapping in tf.function)
    and the first call (graph build, XLA compile), per model, as the range over shapes. Building the
    TensorFlow twin (copying the weights) happens once per model and is not part of either. A/A copies left out."""
    ok = speedups_layer.without_aa(df[df.status == "ok"]).copy()
    ok["cold_s"] = ok.prepare_s + ok.first_call_s
    rows = []
    for (model, variant), g in ok.groupby(["model", "variant"], sort=False):
        rows.append({"model": model, "variant": variant, "framework": FRAMEWORK[variant],
                     "prepare (s)": numbers.fmt_range(g.prepare_s.min(), g.prepare_s.max(), ".2f"),
                     "first call (s)": numbers.fmt_range(g.first_call_s.min(), g.first_call_s.max(), ".2f"),
                     "first call ÷ steady call": f"{numbers.fmt((g.first_call_s / g.median_s).median(), digits=0)} (median)",
                     "graphs built": "" if g.compilations.isna().all() else int(g.compilations.sum()),
                     "rebuilt in steady state": "" if g.recompilations.isna().all() else int(g.recompilations.sum())})
    return pd.DataFrame(rows)


def process_findings(vt: verdicts.VerdictTable) -> list[str]:
    """What one process shared with the other framework costs each side, one bullet per setting measured, read from
    the verdict table at every shape it ran."""
    lines = []
    for c in SHARED:
        rows = [v for v in vt.of(c.label) if v.ok]
        if rows:
            at = "; ".join(f"{v.decision} {numbers.fmt(v.speedup, v.ci_low, v.ci_high, brief=True)} at {v.workload}"
                           for v in rows)
            lines.append(f"**Two frameworks in one process:** {c.label}: {at} (above 1: faster there).")
    return lines


def analyse(df: pd.DataFrame, peaks: dict | None = None, *, vt: verdicts.VerdictTable) -> Analysis:
    """Speed-ups within and across frameworks, first-call costs, the findings and the seed claims; and the
    roofline (roofline.attach) with `peaks`, the machine's limits (StudyRun.peaks; None: the roofline says unknown)."""
    sp = speedups(df)
    band = speedups_layer.band(df)
    analysis = roofline.attach(Analysis(tables={"speedups": sp, "first call": first_call_table(df),
                                                "micro-ops": op_table(df)},
                                        findings=findings(df, sp) + process_findings(vt),
                                        claims=claims(df, sp, peaks, vt=vt)),
                               df, peaks, PAIRS, vt)
    return surprises.attach(analysis, df, EXPECTATIONS, band)


STUDY = register(Study(
    NOTEBOOK, TorchscriptVsXla, configs, estimate_s, analyse, frameworks=("torch", "tensorflow"),
    comparisons=(
        Comparison("TensorFlow eager over PyTorch eager", "tf-eager", "eager"),
        Comparison("TorchScript over eager PyTorch", "torchscript", "eager"),
        Comparison("TorchScript optimized over eager PyTorch", "torchscript-optimized", "eager"),
        Comparison("torch.export + AOTInductor over eager PyTorch", "export-aoti", "eager"),
        Comparison("torch.export + AOTInductor over TorchScript", "export-aoti", "torchscript",
                   replaces="TorchScript (torch.jit.trace), deprecated in favour of torch.export from PyTorch 2.11"),
        Comparison("XLA over tf.function", "tf-xla", "tf-function"),
        Comparison("tf.function over eager PyTorch", "tf-function", "eager"),
        *SHARED,
    ),
    on_gpu=("XLA fuses elementwise work into fewer kernels and TensorFlow's GPU kernels differ from its CPU ones, so "
            "the ranking can change; seed 000's XLA figures were GPU auto-clustering, which this CPU run does not test."),
    expectations=EXPECTATIONS,
))
