"""Study 02: PyTorch (eager, TorchScript, torch.export + AOTInductor) vs TensorFlow (eager, graph, XLA)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, field_validator

from .. import runtimes
from ..bench import surprises
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
from ..stats.speedups import EQUIVALENCE, Comparison
from ..workloads.models import MODELS
from .base import Analysis, Study, register
from .common import (  # noqa: F401
    aa_finding,
    aoti_prepare_s,
    aoti_steps,
    closing_findings,
    count_claim,
    count_of,
    describe_ci,
    failed_by_variant,
    finish,
    first_call_cells,
    latency_table,
    per_model_variant,
    ratio_claim,
    replicates_s,
    say,
)

NOTEBOOK = "02_torchscript_vs_xla"
Variant = runtimes.offered(NOTEBOOK)  # the variants whose registration offers them in this study
LABEL_COLUMNS = ("model", "batch_size", "seq_len")
FRAMEWORK = {"eager": "PyTorch", "torchscript": "PyTorch", "torchscript-optimized": "PyTorch", "export-aoti": "PyTorch",
             "tf-eager": "TensorFlow", "tf-function": "TensorFlow", "tf-xla": "TensorFlow"}
FRAMEWORK |= {f"{v}-{s}": FRAMEWORK[v] for v in ("eager", "tf-function") for s in SHARED_SETTINGS}
FRAMEWORK |= {aa_of(v): fw for v, fw in FRAMEWORK.items()}  # an A/A copy runs in its original's framework

# (candidate, baseline): within each framework over its own eager; across frameworks, TensorFlow over PyTorch
WITHIN = [("torchscript", "eager"), ("torchscript-optimized", "eager"), ("export-aoti", "eager"),
          ("export-aoti", "torchscript"), ("tf-function", "tf-eager"), ("tf-xla", "tf-eager"), ("tf-xla", "tf-function")]
ACROSS = [("tf-eager", "eager"), ("tf-function", "eager"), ("tf-xla", "torchscript")]
# what sharing a process with the other framework costs (runtimes/shared.py): each over itself in its own process
SHARED = [Comparison(f"{name} in one process with {other}{under}, over its own process", f"{v}-{setting}", v)
          for v, name, other in (("eager", "eager PyTorch", "TensorFlow"), ("tf-function", "tf.function", "PyTorch"))
          for setting, under in (("shared", ""), ("shared-passive", " under OMP_WAIT_POLICY=PASSIVE"))]
PROCESS = [(c.candidate, c.baseline) for c in SHARED]
PAIRS = WITHIN + ACROSS + PROCESS
# seed 001's "unusual ops": PyTorch over TensorFlow on single operations (below 1 PyTorch is the slower)
OP_PAIRS = [("eager", "tf-eager"), ("eager", "tf-function"), ("torchscript", "tf-function"), ("torchscript", "tf-xla")]
# variants the micro-ops leave out (docs/method.md, "Study 02's grid")
NOT_ON_OPS = ("export-aoti", *(f"{v}-{s}" for v in ("eager", "tf-function") for s in SHARED_SETTINGS))
# what each graph path is for (surprises.py)
EXPECTATIONS = (surprises.Expectation("torchscript", "eager"), surprises.Expectation("tf-function", "tf-eager"),
                surprises.Expectation("tf-xla", "tf-function"), surprises.Expectation("export-aoti", "eager"),
                surprises.Expectation("torchscript-optimized", "torchscript", expect="equal"))


class MicroOps(BaseModel):
    """Single operations timed in every variant but NOT_ON_OPS, as (batch, seq_len, hidden) fp32 tensors."""

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
    def _sizes(cls, v: list[int], info) -> list[int]:
        if not v or len(set(v)) != len(v) or min(v) < 1:
            raise ValueError("must list positive sizes, each once")
        if info.field_name == "seq_lens" and min(v) < 2:
            raise ValueError("must be at least 2 (gather takes every second row)")
        return v


class TorchscriptVsXla(VariantSkips, Grid):  # Grid first in validation: eager and the grid before variant_skip
    """Section of study 02; a sequence beyond a model's positions is a skipped row, not an invalid profile."""

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
    """Every configuration, eager PyTorch first within each shape, A/A copies after their originals, skips applied."""
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
        return replicates_s(measure, build, per_call, speed, 7)
    big = not c.model.endswith("tiny")
    per_call = (0.015 + 0.0008 * tokens) * MODELS[c.model].cost if big else 0.002  # cost: relative to BERT-base
    per_call *= 2.5 if variant == "tf-eager" else 1.0
    build = {"tf-function": 2.5, "tf-xla": 2.0, "torchscript": 0.5, "torchscript-optimized": 1.0}.get(variant, 0.0)
    build = build * (1 if big else 0.2) + (aoti_prepare_s(c.model) if variant == "export-aoti" else 0.0)
    return replicates_s(measure, build, per_call, speed, 7)


# What a speed-up table holds beside the shape columns of the results (pair_table), where no pair ran.
SPEEDUP_COLUMNS = ["tokens", "pair", "candidate", "baseline", "kind", "status", "error", "speedup", "ci_low", "ci_high"]


def speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Each PAIRS speed-up on every whole-model shape (_pair_speedups); a side that failed keeps a row with no ratio."""
    return _pair_speedups(df[~is_op(df)] if len(df) else df, PAIRS)


def op_speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Seed 001's micro-ops: PyTorch over TensorFlow (OP_PAIRS) on every operation and size, with CIs."""
    return _pair_speedups(df[is_op(df)] if len(df) else df, OP_PAIRS)


def _pair_speedups(df: pd.DataFrame, pairs) -> pd.DataFrame:
    """Each (candidate, baseline) of `pairs` at every shape where both have rows (speedups.pair_table)."""
    parts = []
    for cand, base in pairs:
        if not (len(df) and (df.variant == cand).any() and (df.variant == base).any()):
            continue
        t = speedups_layer.pair_table(df, cand, base, band=EQUIVALENCE)
        t = t[t.status != "baseline missing"]
        kind = "within" if (cand, base) in WITHIN else "process" if (cand, base) in PROCESS else "across"
        parts.append(t.assign(tokens=(t.batch_size * t.seq_len).astype(int), pair=f"{cand} over {base}", kind=kind))
    if not parts:
        return pd.DataFrame(columns=[*shape_columns(df), *SPEEDUP_COLUMNS])
    return pd.concat(parts, ignore_index=True)


def _label(r) -> str:
    return f"{r['variant']} {shape_label(r, LABEL_COLUMNS, short=True)}"


def findings(df: pd.DataFrame, sp: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    lines = [aa_finding(df)]
    ok = sp[sp.speedup.notna()]
    for (cand, base), g in ok.groupby(["candidate", "baseline"], sort=False):
        if g.tokens.nunique() < 2:
            continue
        small, large = g[g.tokens == g.tokens.min()], g[g.tokens == g.tokens.max()]
        gm = lambda s: float(np.exp(np.log(s).mean()))  # noqa: E731
        rho = g[["speedup", "tokens"]].corr(method="spearman").iloc[0, 1]
        lines.append(say(NOTEBOOK, "input_size", cand, base, gm(small.speedup), int(small.tokens.iloc[0]),
                         gm(large.speedup), int(large.tokens.iloc[0]), rho))
    lines += op_findings(df)
    xla = df[(df.variant == "tf-xla") & (df.status == "ok")]
    if len(xla):
        build = xla.first_call_s - xla.median_s
        lines.append(say(NOTEBOOK, "xla", int(xla.compilations.sum()), len(xla), build.min(), build.max(),
                         int(xla.recompilations.sum())))
    aot = aoti_steps(df)
    if aot:
        lines.append(say(NOTEBOOK, "aoti", aot))
    return lines + closing_findings(NOTEBOOK, df, _label, lambda m: (
        list(m.groupby(m.variant.map(FRAMEWORK)).max_abs_diff.max().items()),), failed_by_variant(df, averages=True))


def op_findings(df: pd.DataFrame) -> list[str]:
    """Per micro-op pair: the geometric mean per operation and the per-size readings against the 'equal' band."""
    ops = df[is_op(df)] if len(df) else df
    sp, ok = op_speedups(ops), ops[ops.status == "ok"]
    lines = []
    for (cand, base), g in sp[sp.speedup.notna()].groupby(["candidate", "baseline"], sort=False):
        per_op = [(m, speedups_layer.geomean(ok[ok.model == m], cand, base)) for m in dict.fromkeys(g.model)]
        classes = [verdicts.unlisted(lo, hi, EQUIVALENCE) for lo, hi in zip(g.ci_low, g.ci_high)]  # not in the table
        sizes = sorted({(int(b), int(s)) for b, s in zip(g.batch_size, g.seq_len)}, key=lambda x: x[0] * x[1])
        lines.append(say(NOTEBOOK, "ops", cand, base, [(m, r) for m, r in per_op if r], sizes, classes, EQUIVALENCE))
    failed = sp[sp.speedup.isna()]
    if len(failed):
        lines.append(say(NOTEBOOK, "ops_failed", len(failed),
                         list(dict.fromkeys(f"{r['model']} {r['error']}" for _, r in failed.iterrows()))))
    return lines


def op_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per operation, size and pair: both medians and the speed-up with its CI, or which side did not run."""
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
    """The registry's claims this study tests: op_gain on the micro-ops' rows, every other on the whole models'."""
    mine = [c for c in seedclaims.registry() if c.study == NOTEBOOK]
    ops = is_op(df) if len(df) else pd.Series(False, index=df.index)
    tables = {"speedups": sp, "micro-ops": op_speedups(df)}
    parts = [seedclaims.study_claims(NOTEBOOK, df[ops] if c.evaluator in OP_EVALUATORS else df[~ops],
                                     tables | {"verdicts": vt}, claims=(c,), peaks=peaks, vt=vt) for c in mine]
    return pd.concat(parts or [seedclaims.study_claims(NOTEBOOK, df, tables, claims=(), vt=vt)], ignore_index=True)


def first_call_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per model and variant: preparation and the first call as ranges over shapes, and graphs built and rebuilt."""
    return per_model_variant(df, lambda variant, g: {
        "framework": FRAMEWORK[variant], "prepare (s)": numbers.fmt_range(g.prepare_s.min(), g.prepare_s.max(), ".2f"),
        **first_call_cells(g), "graphs built": count_of(g.compilations),
        "rebuilt in steady state": count_of(g.recompilations)})


def process_findings(vt: verdicts.VerdictTable) -> list[str]:
    """What sharing one process with the other framework costs each side, read from the verdict table."""
    return [say(NOTEBOOK, "shared", c.label, rows) for c in SHARED if (rows := [v for v in vt.of(c.label) if v.ok])]


def analyse(df: pd.DataFrame, peaks: dict | None = None, *, vt: verdicts.VerdictTable) -> Analysis:
    """The study's tables, findings and claims, every decision as the run's verdict table `vt` has it."""
    sp = speedups(df)
    return finish(NOTEBOOK, df, peaks, vt, {"speedups": sp, "first call": first_call_table(df), "micro-ops": op_table(df)},
                  findings(df, sp) + process_findings(vt), claims(df, sp, peaks, vt=vt), pairs=PAIRS)


# --- seeds 000, 001 and 003's claims, measured on the study's results (studylib.claims.claims) ---

_SIZES = ("batch_size", "seq_len")  # an input as the claims name it: "b1 × s128"


def _rows(df: pd.DataFrame, claim, variants) -> pd.DataFrame:
    """The ok rows of `variants`, of the seed's models and batch sizes where these results have any."""
    ok = seedclaims.matching(df[(df.status == "ok") & df.variant.isin(list(variants))], claim)
    seed = claim.conditions.batch_sizes
    return ok[ok.batch_size.isin(seed)] if seed and ok.batch_size.isin(seed).any() else ok


def _tokens(frame: pd.DataFrame) -> pd.Series:
    return frame.batch_size * frame.seq_len


def _at_input(rows: pd.DataFrame, candidate: str, which: str) -> pd.DataFrame:
    """The rows at the shapes of `candidate`'s smallest or largest input (batch × sequence; config.shape_of)."""
    c = rows[rows.variant == candidate]
    t = _tokens(c)
    shapes = {shape_of(r) for r in c[t == (t.min() if which == "smallest" else t.max())].to_dict("records")}
    return rows[pd.Series([shape_of(r) in shapes for r in rows.to_dict("records")], index=rows.index, dtype=bool)]


def framework_gain(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str, at: str = "all"):
    """`candidate` over `baseline`, geometric mean over all shapes or one end of the inputs, with seed 000's mean."""
    rows = _rows(df, claim, (candidate, baseline))
    rows = rows if at == "all" else _at_input(rows, candidate, at)
    s = speedups_layer.geomean(rows, candidate, baseline)
    if s is None:
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_both", candidate, baseline))
    pt, tf = speedups_layer.paired(rows, baseline, candidate)  # seed 000's metric: a plain mean of per-cell times
    text = say(NOTEBOOK, "framework_gain", candidate, baseline, at, int(_tokens(rows).iloc[0]), s.n,
               pt.median_s.mean() * 1e3, tf.median_s.mean() * 1e3)
    return ratio_claim(df, s, text, rows)


def every_input_gain(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str):
    """`candidate` over `baseline` at each input of the seed's models, judged per input (claims.per_cell)."""
    rows = _rows(df, claim, (candidate, baseline))
    cells = _cells(rows, candidate, baseline)
    if not cells:
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_both", candidate, baseline))
    return seedclaims.per_cell(cells, claim, text=say(NOTEBOOK, "each_input", candidate, baseline, len(cells)),
                               rows=rows, band=EQUIVALENCE)


def input_trend(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str, over: str = "small/large",
                gap: bool = False):
    """`candidate` over `baseline` at the smallest input over the largest (`over`), or its distance from 1 (`gap`)."""
    rows = _rows(df, claim, (candidate, baseline))
    ends = {w: speedups_layer.geomean(_at_input(rows, candidate, w), candidate, baseline) for w in ("smallest", "largest")}
    if ends["smallest"] is None or ends["largest"] is None or _tokens(rows).nunique() < 2:
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_two_inputs", candidate, baseline))
    small, large = tuple(ends["smallest"]), tuple(ends["largest"])
    a, b = (small, large) if over == "small/large" else (large, small)
    if gap and large[0] < 1:
        a, b = b, a  # a gap in TensorFlow's disfavour widens as the ratio falls
    v, lo, hi = speedups_layer.ratio_of(a, b)
    t = _tokens(rows)
    text = say(NOTEBOOK, "input_trend", candidate, baseline, small[0], int(t.min()), large[0], int(t.max()))
    return ratio_claim(df, (v, lo, hi), text, rows)


def _per_model(rows: pd.DataFrame, candidate: str, baseline: str) -> dict:
    """Each model's geometric-mean speed-up of `candidate` over `baseline`, where both ran."""
    per = {m: speedups_layer.geomean(g, candidate, baseline) for m, g in rows.groupby("model", sort=False)}
    return {m: s for m, s in per.items() if s is not None}


def model_spread(df: pd.DataFrame, tables: dict, claim, candidate: str = "torchscript", baseline: str = "eager"):
    """Seed 000's 'TorchScript depends on the model': the largest per-model geometric-mean gain over the smallest."""
    rows = _rows(df, claim, (candidate, baseline))
    per = _per_model(rows, candidate, baseline)
    if len(per) < 2:
        return seedclaims.NotAnswered(say(NOTEBOOK, "few_models", candidate))
    hi_m, lo_m = max(per, key=lambda m: per[m].ratio), min(per, key=lambda m: per[m].ratio)
    v, lo, hi = speedups_layer.ratio_of(tuple(per[hi_m]), tuple(per[lo_m]))
    return ratio_claim(df, (v, lo, hi), say(NOTEBOOK, "per_model", list(per.items())), rows)


def least_model_gain(df: pd.DataFrame, tables: dict, claim, candidate: str = "tf-xla", baseline: str = "tf-function"):
    """Seed 000's 'XLA improved every model': the smallest per-model geometric-mean gain."""
    rows = _rows(df, claim, (candidate, baseline))
    per = _per_model(rows, candidate, baseline)
    if not per:
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_both_run", candidate, baseline))
    worst = min(per, key=lambda m: per[m].ratio)
    return ratio_claim(df, per[worst], say(NOTEBOOK, "least_gain", worst, list(per.items())), rows)


def best_cell(df: pd.DataFrame, tables: dict, claim, candidate: str = "tf-xla", baseline: str = "tf-function"):
    """The largest per-shape gain of `candidate` over `baseline`, and whether it is at the smallest input."""
    sp = tables["speedups"]
    cells = seedclaims.matching(sp[(sp.candidate == candidate) & (sp.baseline == baseline) & sp.speedup.notna()], claim)
    if not len(cells):
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_measured", candidate, baseline))
    best = cells.loc[cells.speedup.idxmax()]
    text = say(NOTEBOOK, "best_cell", 1 - 1 / best.speedup, shape_label(best, _SIZES, short=True), best.model,
               best.tokens == cells.tokens.min())
    return ratio_claim(df, (best.speedup, best.ci_low, best.ci_high), text, cells)


def seq_exponent(df: pd.DataFrame, tables: dict, claim, variant: str = "eager", batch: str = "largest"):
    """The exponent k of time ∝ seq^k between the shortest and longest sequence at one batch, averaged over models."""
    ok = df[(df.status == "ok") & (df.variant == variant)]
    b = int(ok.batch_size.max()) if batch == "largest" else int(batch)
    at = ok[ok.batch_size == b]
    cells, used = [], []
    for model, g in at.groupby("model", sort=False):
        if g.seq_len.nunique() < 2:
            continue
        short, long = g.loc[g.seq_len.idxmin()], g.loc[g.seq_len.idxmax()]
        r = speedups_layer.speedup(long, short)  # time(long) / time(short)
        span = np.log(long.seq_len / short.seq_len)
        k = tuple(float(np.log(x) / span) for x in r)
        cells.append(k)
        used.append(say(NOTEBOOK, "seq_time", model, r.ratio, short.seq_len, long.seq_len, k[0]))
    if not cells:
        return seedclaims.NotAnswered(say(NOTEBOOK, "no_two_lengths", b))
    k = np.asarray(cells)
    point = k[:, 0].mean()
    lo = point - np.sqrt(((k[:, 0] - k[:, 1]) ** 2).sum()) / len(k)
    hi = point + np.sqrt(((k[:, 2] - k[:, 0]) ** 2).sum()) / len(k)
    return seedclaims.ClaimMeasurement(float(point), float(lo), float(hi), say(NOTEBOOK, "seq_exponent", b, lo, hi, used),
                                  rows=at, band=1.0, unit="")


def seq_curvature(df: pd.DataFrame, tables: dict, claim, variant: str = "eager", batch: int = 1,
                  band: float = 1.25):
    """Per-token cost, middle to longest length over shortest to middle, geometric mean over models."""
    at = df[(df.status == "ok") & (df.variant == variant) & (df.batch_size == int(batch))]
    cells, used = [], []
    for model, g in at.groupby("model", sort=False):
        lengths = sorted(g.seq_len.unique())
        if len(lengths) < 3:
            continue
        picked = [g[g.seq_len == s].iloc[0] for s in (lengths[0], lengths[len(lengths) // 2], lengths[-1])]
        t = [tuple(r.median_s if pd.isna(r.get(c)) else r[c] for c in ("ci_low_s", "median_s", "ci_high_s"))
             for r in picked]  # a bound not recorded: the median
        (s1, s2, s3) = (int(r.seq_len) for r in picked)
        short = [(t[1][i] - t[0][j]) / (s2 - s1) for i, j in ((0, 2), (1, 1), (2, 0))]  # low, mid, high
        long = [(t[2][i] - t[1][j]) / (s3 - s2) for i, j in ((0, 2), (1, 1), (2, 0))]
        if min(short) <= 0 or min(long) <= 0:
            used.append(say(NOTEBOOK, "not_rising", model, s1, s2, s3))
            continue
        cells.append((long[1] / short[1], long[0] / short[2], long[2] / short[0]))
        used.append(say(NOTEBOOK, "per_token", model, long[1] / short[1], s1, s2, s3))
    if not cells:
        return seedclaims.NotAnswered(say(NOTEBOOK, "no_three_lengths", batch, used))
    s = speedups_layer.combine(cells)
    bent = s.ci_low > band or s.ci_high < 1 / band
    straight = 1 / band <= s.ci_low and s.ci_high <= band
    return seedclaims.ClaimMeasurement(s.ratio, s.ci_low, s.ci_high, f"batch {batch}; " + "; ".join(used), rows=at,
                                  band=1.0, holds=True if bent else False if straight else None)


def oom_count(df: pd.DataFrame, tables: dict, claim):
    """Seed 000's 'PyTorch runs out of memory more often than TensorFlow': out-of-memory cells per framework."""
    oom = df[df.status == "oom"]
    per = oom.variant.map(FRAMEWORK).value_counts()
    pt, tf = int(per.get("PyTorch", 0)), int(per.get("TensorFlow", 0))
    largest = df.loc[_tokens(df).idxmax()]
    if pt == tf == 0:
        return seedclaims.NotAnswered(say(NOTEBOOK, "no_oom", shape_label(largest, _SIZES, short=True)))
    return count_claim(say(NOTEBOOK, "oom", pt, tf), df, pt > tf)


def op_gain(df: pd.DataFrame, tables: dict, claim, candidate: str = "eager", baseline: str = "tf-function",
            op: str | None = None):
    """`candidate` over `baseline` on one single operation (`op`) or all, judged per size (claims.per_cell)."""
    rows = df[(df.status == "ok") & df.variant.isin([candidate, baseline])]
    rows = rows[is_op(rows)] if len(rows) else rows
    if op is not None:
        rows = rows[rows.model == op]
    cells = _cells(rows, candidate, baseline)
    if not cells:
        return seedclaims.NotAnswered(say(NOTEBOOK, "no_op", op, candidate, baseline))
    return seedclaims.per_cell(cells, claim, text=say(NOTEBOOK, "per_op", candidate, baseline), rows=rows,
                               band=EQUIVALENCE)


def _cells(rows: pd.DataFrame, cand: str, base: str) -> list[tuple[str, tuple]]:
    """(the shape's label, paired speed-up of `cand` over `base`) at every shape both ran in `rows`."""
    c, b = speedups_layer.paired(rows, cand, base)
    return [(shape_label(x, LABEL_COLUMNS, short=True), tuple(speedups_layer.speedup(y, x)))
            for x, y in zip(c.to_dict("records"), b.to_dict("records"))]


def _decided(rows: pd.DataFrame, cand: str, base: str, tables: dict) -> list[str]:
    """Per shape both ran, `cand` over `base` as the verdict table decides it (verdicts.unlisted where it has none)."""
    vt = tables.get("verdicts") or verdicts.VerdictTable(NOTEBOOK, ())
    c, b = speedups_layer.paired(rows, cand, base)
    return [vt.decision(x, y) or verdicts.unlisted(*speedups_layer.speedup(y, x)[1:], EQUIVALENCE)
            for x, y in zip(c.to_dict("records"), b.to_dict("records"))]


def share_equal(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str):
    """Holds when more than half of the shapes are decided equal (_decided)."""
    rows = _rows(df, claim, (candidate, baseline))
    words = pd.Series(_decided(rows, candidate, baseline, tables), dtype=object)
    if not len(words):
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_both", candidate, baseline))
    text = say(NOTEBOOK, "share_equal", candidate, baseline, list(words.value_counts().items()), len(words),
               EQUIVALENCE)
    return count_claim(text, rows, bool((words == "equal").sum() * 2 > len(words)))


def some_shape_faster(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str):
    """Holds when `candidate` is decided faster on at least one shape (_decided)."""
    rows = _rows(df, claim, (candidate, baseline))
    words = _decided(rows, candidate, baseline, tables)
    if not words:
        return seedclaims.NotAnswered(say(NOTEBOOK, "not_both", candidate, baseline))
    text = say(NOTEBOOK, "some_faster", candidate, baseline, words.count("faster"), len(words))
    return count_claim(text, rows, "faster" in words)


def memory_lower(df: pd.DataFrame, tables: dict, claim, candidate: str = "tf-xla", baseline: str = "tf-function"):
    """Holds when `candidate`'s peak memory is below `baseline`'s on more than half the shapes both recorded."""
    rows = _rows(df, claim, (candidate, baseline)).dropna(subset=["peak_mem_mb"])
    c, b = speedups_layer.paired(rows, candidate, baseline)
    if not len(c):
        return seedclaims.NotAnswered(say(NOTEBOOK, "no_memory", candidate, baseline))
    lower = int((c.peak_mem_mb < b.peak_mem_mb).sum())
    return count_claim(say(NOTEBOOK, "memory_lower", candidate, baseline, lower, len(c)), rows, lower * 2 > len(c))


def input_weight(df: pd.DataFrame, tables: dict, claim, variant: str = "eager", top: float = 0.25):
    """The share of seed 000's mean of per-shape times that the largest `top` of inputs contribute; holds above half."""
    rows = _rows(df, claim, (variant,))
    if len(rows) < 4:
        return seedclaims.NotAnswered(say(NOTEBOOK, "few_shapes", variant, len(rows)))
    tokens = _tokens(rows)
    big = tokens >= tokens.quantile(1 - top)
    share = float(rows.median_s[big].sum() / rows.median_s.sum())
    return count_claim(say(NOTEBOOK, "input_weight", variant, int(big.sum()), len(rows), share), rows, share > 0.5)


def batching_by_length(df: pd.DataFrame, tables: dict, claim, variant: str = "eager"):
    """Batching's per-sample gain at the longest sequence over the shortest, per model, geometric mean."""
    ok = df[(df.status == "ok") & (df.variant == variant)]
    cells, used = [], []
    for model, g in ok.groupby("model", sort=False):
        big = int(g.batch_size.max())
        both = sorted(set(g.seq_len[g.batch_size == 1]) & set(g.seq_len[g.batch_size == big]))
        if big == 1 or len(both) < 2:
            continue
        gain = []
        for s in (both[0], both[-1]):  # both batch sizes ran at each (`both`)
            one, many = g[(g.seq_len == s) & (g.batch_size == 1)], g[(g.seq_len == s) & (g.batch_size == big)]
            per_call = speedups_layer.speedup(one.iloc[0], many.iloc[0])  # time(batch 1) / time(batch big)
            gain.append(speedups_layer.ratio_of(per_call, (1 / big,) * 3))  # per sample: × big
        cells.append(speedups_layer.ratio_of(gain[1], gain[0]))
        used.append(say(NOTEBOOK, "batching_gain", model, big, gain[0].ratio, both[0], gain[1].ratio, both[-1]))
    if not cells:
        return seedclaims.NotAnswered("no model ran batch 1 and a larger batch at two sequence lengths")
    s = speedups_layer.combine(cells)
    return ratio_claim(df, s, "; ".join(used), ok)


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
    runs="transformers' PyTorch and TensorFlow twins on the same weights, each framework in its own worker",
    on_gpu=("XLA fuses elementwise work into fewer kernels and TensorFlow's GPU kernels differ from its CPU ones, so "
            "the ranking can change; seed 000's XLA figures were GPU auto-clustering, which this CPU run does not test."),
    expectations=EXPECTATIONS,
))


seedclaims.register_evaluators(NOTEBOOK, framework_gain, every_input_gain, input_trend, model_spread,
                               least_model_gain, best_cell, seq_exponent, seq_curvature, oom_count, op_gain,
                               share_equal, some_shape_faster, memory_lower, input_weight, batching_by_length)
