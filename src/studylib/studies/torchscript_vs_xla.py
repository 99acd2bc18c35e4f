"""Study 02: PyTorch (eager, TorchScript) vs TensorFlow (eager, graph, XLA) on the same weights."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, field_validator

from .. import claims as seedclaims
from .. import roofline, surprises
from .. import speedups as speedups_layer
from ..models import MODELS
from ..profiles import Grid
from ..speedups import Comparison
from ..sweep import AA, REFERENCE, Config
from .base import Analysis, Study, register
from .common import (  # noqa: F401
    aa_finding,
    describe_ci,
    drift_finding,
    fmt_x,
    latency_table,
)

NOTEBOOK = "02_torchscript_vs_xla"
SHAPE_COLUMNS = ["model", "dtype", "batch_size", "seq_len"]
FRAMEWORK = {"eager": "PyTorch", AA: "PyTorch", "torchscript": "PyTorch", "torchscript-optimized": "PyTorch",
             "tf-eager": "TensorFlow", "tf-function": "TensorFlow", "tf-xla": "TensorFlow"}

# (candidate, baseline): within each framework, the speed-up over its own eager (and XLA over the TF graph);
# across frameworks, TensorFlow over eager PyTorch.
WITHIN = [("torchscript", "eager"), ("torchscript-optimized", "eager"), ("tf-function", "tf-eager"),
          ("tf-xla", "tf-eager"), ("tf-xla", "tf-function")]
ACROSS = [("tf-eager", "eager"), ("tf-function", "eager"), ("tf-xla", "torchscript")]
PAIRS = WITHIN + ACROSS
# Seed 001's "unusual ops": on single operations, PyTorch over TensorFlow (eager over TF eager and over its graph;
# compiled over compiled), so that below 1 PyTorch is the slower.
OP_PAIRS = [("eager", "tf-eager"), ("eager", "tf-function"), ("torchscript", "tf-function"), ("torchscript", "tf-xla")]
# What each graph path is for (TorchScript's optimize_for_inference should change little on these encoders); a
# replicate that contradicts one profiles a call of each side (surprises.py; TensorFlow's are noted, not profiled).
EXPECTATIONS = (surprises.Expectation("torchscript", "eager"), surprises.Expectation("tf-function", "tf-eager"),
                surprises.Expectation("tf-xla", "tf-function"),
                surprises.Expectation("torchscript-optimized", "torchscript", expect="equal"))


class MicroOps(BaseModel):
    """Single operations (models of kind "op") timed in every variant of the section, at their own sizes: a
    (batch, seq_len, hidden) fp32 tensor for each batch size × sequence length."""

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


class TorchscriptVsXla(Grid):
    """Section of study 02: PyTorch (eager, TorchScript) vs TensorFlow (eager, graph, XLA) on the same weights.

    Sequence lengths beyond a model's positions are allowed here, as in seed 000's grid (up to 1024 for
    every model): those cells become 'skipped' rows that the figures mark, rather than an invalid profile.
    """

    variants: list[Literal["eager", "torchscript", "torchscript-optimized", "tf-eager", "tf-function", "tf-xla"]]
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

    Shapes matching one of the section's `skip` entries are left out."""
    variants = [REFERENCE, AA] + [v for v in section.variants if v not in (REFERENCE, AA)]
    ops = section.micro_ops
    op_shapes = [(op, "fp32", b, s) for op in ops.models for s in ops.seq_lens for b in ops.batch_sizes] if ops else []
    return [Config(model, v, dtype, batch, device, threads, seq_len=seq)
            for model, dtype, batch, seq in section.shapes() + op_shapes for v in variants]


def is_op(df: pd.DataFrame) -> pd.Series:
    """Which rows time a single operation (seed 001's micro-ops) rather than a whole model."""
    return df.model.map(lambda m: m in MODELS and MODELS[m].kind == "op").astype(bool)


def estimate_s(c: Config, section: TorchscriptVsXla, measure: dict, speed: float = 1.0) -> float:
    """A rough wall-time guess for `plan`, per replicate: graph build / XLA compile, warm-up, the minimum rounds."""
    tokens = c.batch_size * c.seq_len
    if MODELS[c.model].kind == "op":  # memory-bound: ~1 GB/s over the tensor on 2 cores, plus per-call overhead
        per_call = (2e-4 if c.variant == "tf-eager" else 5e-5) + tokens * 768 * 4 / 1e9
        build = {"tf-function": 0.3, "tf-xla": 0.5, "torchscript": 0.1, "torchscript-optimized": 0.2}.get(c.variant, 0)
        calls = 1 + measure["warmup_calls"] + measure["min_rounds"]
        return measure["replicates"] * (build + max(per_call / speed, measure["block_s"]) * calls
                                        + measure["min_time_s"] / 7)
    big = not c.model.endswith("tiny")
    per_call = (0.015 + 0.0008 * tokens) if big else 0.002
    per_call *= 2.5 if c.variant == "tf-eager" else 1.0
    build = {"tf-function": 2.5, "tf-xla": 2.0, "torchscript": 0.5, "torchscript-optimized": 1.0}.get(c.variant, 0.0)
    calls = 1 + measure["warmup_calls"] + measure["min_rounds"]
    return measure["replicates"] * (build * (1 if big else 0.2) + max(per_call / speed, measure["block_s"]) * calls
                                    + measure["min_time_s"] / 7)


SPEEDUP_COLUMNS = [*SHAPE_COLUMNS, "tokens", "pair", "candidate", "baseline", "kind", "status", "error", "speedup",
                   "ci_low", "ci_high"]


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
        parts.append(t.assign(tokens=(t.batch_size * t.seq_len).astype(int), pair=f"{cand} over {base}",
                              kind="within" if (cand, base) in WITHIN else "across"))
    if not parts:
        return pd.DataFrame(columns=SPEEDUP_COLUMNS)
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
    whole = df[~is_op(df)] if len(df) else df  # the micro-ops have findings of their own (op_findings)
    models = list(dict.fromkeys(whole.model))
    for cand, base in PAIRS:
        overall = _geo(whole, cand, base)
        if overall is None:
            continue
        per_model = [(m, _geo(whole, cand, base, lambda t, m=m: t.model == m)) for m in models]
        cells = sp[(sp.candidate == cand) & (sp.baseline == base) & sp.speedup.notna()]
        classes = [speedups_layer.verdict(lo, hi, band) for lo, hi in zip(cells.ci_low, cells.ci_high)]
        lines.append(
            f"**{cand} over {base}**: geometric mean {_describe_geo(overall)}; "
            + "; ".join(f"{m} {describe_ci(r)}" for m, r in per_model if r)
            + f". Per shape: faster in {classes.count('faster')}, slower in {classes.count('slower')}, within "
              f"±{band - 1:.0%} in "
              f"{classes.count('equal')}, unclear in {classes.count('unclear')} of {len(classes)}.")
    ok = sp[sp.speedup.notna()]
    for (cand, base), g in ok.groupby(["candidate", "baseline"], sort=False):
        if g.tokens.nunique() < 2:
            continue
        small, large = g[g.tokens == g.tokens.min()], g[g.tokens == g.tokens.max()]
        gm = lambda s: float(np.exp(np.log(s).mean()))  # noqa: E731
        lines.append(f"Input size, {cand} over {base}: {fmt_x(gm(small.speedup))} at the smallest input "
                     f"({int(small.tokens.iloc[0])} tokens per call) vs {fmt_x(gm(large.speedup))} at the largest "
                     f"({int(large.tokens.iloc[0])}), geometric means over models; Spearman correlation of speed-up "
                     f"with tokens per call {g[['speedup', 'tokens']].corr(method='spearman').iloc[0, 1]:+.2f}.")
    lines += op_findings(df, band)
    xla = df[(df.variant == "tf-xla") & (df.status == "ok")]
    if len(xla):
        build = xla.first_call_s - xla.median_s
        lines.append(f"XLA compiled {int(xla.compilations.sum())} graphs in the first calls of {len(xla)} "
                     f"configurations (one per input shape; {build.min():.1f}–{build.max():.1f} s each beyond a steady "
                     f"call) and recompiled {int(xla.recompilations.sum())} times during steady-state timing.")
    measured = df[df.status == "ok"]
    if len(measured):
        bad = measured[measured.parity_ok == False]  # noqa: E712
        worst = measured.groupby(measured.variant.map(FRAMEWORK)).max_abs_diff.max()
        lines.append("Parity with eager PyTorch (same inputs): largest max-abs difference "
                     + ", ".join(f"{fw} {v:.1e}" for fw, v in worst.items()) + "; "
                     + (f"**{len(bad)} configuration(s) exceed the tolerance**: "
                        + ", ".join(f"{r['variant']} {r['model']} b{r['batch_size']} s{r['seq_len']}"
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
        lines.append(f"Noise: CV {measured.cv.min():.1%}–{measured.cv.max():.1%} (noisiest: {noisy['variant']} "
                     f"{noisy['model']} b{noisy['batch_size']} s{noisy['seq_len']}); "
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
        classes = [speedups_layer.verdict(lo, hi, band) for lo, hi in zip(g.ci_low, g.ci_high)]
        sizes = sorted({(int(b), int(s)) for b, s in zip(g.batch_size, g.seq_len)}, key=lambda x: x[0] * x[1])
        lines.append(f"**Single operations, {cand} over {base}** (below 1: PyTorch slower): "
                     + "; ".join(f"{m} {_describe_geo(r)}" for m, r in per_op if r)
                     + f". Per size (batch × sequence {', '.join(f'{b}×{s}' for b, s in sizes)}, hidden 768): PyTorch "
                       f"faster in {classes.count('faster')}, slower in {classes.count('slower')}, within ±{band - 1:.0%} "
                       f"in {classes.count('equal')}, unclear in {classes.count('unclear')} of {len(classes)}.")
    failed = sp[sp.speedup.isna()]
    if len(failed):
        lines.append(f"Single operations: {len(failed)} pair(s) did not run — " + "; ".join(
            dict.fromkeys(f"{r['model']} {r['error']}" for _, r in failed.iterrows())))
    return lines


def op_table(df: pd.DataFrame) -> pd.DataFrame:
    """The micro-ops as the notebook shows them: per operation, size and PyTorch-over-TensorFlow pair, both medians
    and the speed-up with its 95% CI (below 1: PyTorch slower), or which side did not run."""
    sp = op_speedups(df)
    ok = df[df.status == "ok"].set_index([*SHAPE_COLUMNS, "variant"]).median_s if len(df) else pd.Series(dtype=float)

    def median_ms(r, side):
        key = (r["model"], r["dtype"], r["batch_size"], r["seq_len"], r[side])
        return f"{ok[key] * 1e3:.3g}" if key in ok.index else ""

    return pd.DataFrame([{
        "operation": r["model"], "batch × seq (× 768)": f"{int(r['batch_size'])} × {int(r['seq_len'])}",
        "pair": r["pair"], "PyTorch (ms)": median_ms(r, "candidate"), "TensorFlow (ms)": median_ms(r, "baseline"),
        "speed-up (95% CI)": describe_ci(r) if pd.notna(r["speedup"]) else f"{r['status']}: {r['error']}"}
        for _, r in sp.iterrows()], columns=["operation", "batch × seq (× 768)", "pair", "PyTorch (ms)",
                                             "TensorFlow (ms)", "speed-up (95% CI)"])


def _mean_of_medians(df: pd.DataFrame, a: str, b: str) -> tuple[float, float, int]:
    """Seed 000's metric (a plain mean of per-cell times), over the cells where both variants ran."""
    ok = df[df.status == "ok"]
    x = ok[ok.variant == a].set_index(SHAPE_COLUMNS).median_s
    y = ok[ok.variant == b].set_index(SHAPE_COLUMNS).median_s
    both = x.index.intersection(y.index)
    return float(x[both].mean()), float(y[both].mean()), len(both)




def _rows(df: pd.DataFrame, claim, variants) -> pd.DataFrame:
    """The ok rows of `variants`, of the seed's models where these results have any."""
    ok = df[(df.status == "ok") & df.variant.isin(list(variants))]
    return seedclaims.matching(ok, claim)


def _tokens(frame: pd.DataFrame) -> pd.Series:
    return frame.batch_size * frame.seq_len


def _at_input(frame: pd.DataFrame, which: str) -> pd.DataFrame:
    """The rows at the smallest or largest input (batch × sequence) of the frame."""
    t = _tokens(frame)
    return frame[t == (t.min() if which == "smallest" else t.max())]


def _geo_rows(rows: pd.DataFrame, cand: str, base: str):
    """Geometric-mean speed-up of `cand` over `base` over the shapes both ran in `rows`, or None."""
    c = rows[rows.variant == cand].set_index(SHAPE_COLUMNS)
    b = rows[rows.variant == base].set_index(SHAPE_COLUMNS)
    both = c.index.intersection(b.index)
    return (speedups_layer.geomean_of([(b.loc[k], c.loc[k]) for k in both]), len(both)) if len(both) else (None, 0)


def framework_gain(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str, at: str = "all"):
    """`candidate` over `baseline`, geometric mean over every shape both ran (`at: all`) or over those at the
    smallest or largest input (batch × sequence) of the seed's models; with seed 000's own metric (the plain mean
    of per-shape times) beside it."""
    rows = _rows(df, claim, (candidate, baseline))
    rows = rows if at == "all" else _at_input(rows[rows.variant == candidate], at).pipe(
        lambda c: rows[rows.set_index(SHAPE_COLUMNS).index.isin(c.set_index(SHAPE_COLUMNS).index)])
    s, n = _geo_rows(rows, candidate, baseline)
    if s is None:
        return seedclaims.NotAnswered(f"{candidate} and {baseline} were not both measured on any shape")
    pt, tf, _ = _mean_of_medians(rows, baseline, candidate)
    where = "" if at == "all" else f" at the {at} input ({int(_tokens(rows).iloc[0])} tokens per call)"
    return seedclaims.Measurement(s.ratio, s.ci_low, s.ci_high,
                                  f"{candidate} over {baseline}{where}, geometric mean over {n} shape(s); mean of "
                                  f"per-shape medians {pt * 1e3:.3g} ms ({baseline}) vs {tf * 1e3:.3g} ms ({candidate})",
                                  rows=rows, band=speedups_layer.band(df))


def input_trend(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str, over: str = "small/large",
                gap: bool = False):
    """How `candidate` over `baseline` changes with the input: its geometric mean at the smallest input over that
    at the largest (`over: small/large`) or the inverse; `gap: true` measures the distance from 1 instead
    (seed 000's 'the larger the input, the larger the gap'), oriented by the large input's direction."""
    rows = _rows(df, claim, (candidate, baseline))
    ends = {}
    for which in ("smallest", "largest"):
        keep = _at_input(rows[rows.variant == candidate], which).set_index(SHAPE_COLUMNS).index
        ends[which] = _geo_rows(rows[rows.set_index(SHAPE_COLUMNS).index.isin(keep)], candidate, baseline)[0]
    if ends["smallest"] is None or ends["largest"] is None or _tokens(rows).nunique() < 2:
        return seedclaims.NotAnswered(f"{candidate} over {baseline} was not measured at two input sizes")
    small, large = tuple(ends["smallest"]), tuple(ends["largest"])
    a, b = (small, large) if over == "small/large" else (large, small)
    if gap and large[0] < 1:
        a, b = b, a  # a gap in TensorFlow's disfavour widens as the ratio falls
    v, lo, hi = speedups_layer.ratio_of(a, b)
    t = _tokens(rows)
    return seedclaims.Measurement(v, lo, hi, f"{candidate} over {baseline}: {small[0]:.2f}× at the smallest input "
                                  f"({int(t.min())} tokens per call) vs {large[0]:.2f}× at the largest ({int(t.max())})",
                                  rows=rows, band=speedups_layer.band(df))


def model_spread(df: pd.DataFrame, tables: dict, claim, candidate: str = "torchscript", baseline: str = "eager"):
    """Seed 000's 'TorchScript depends on the model': the largest per-model geometric-mean gain over the smallest."""
    rows = _rows(df, claim, (candidate, baseline))
    per = {m: _geo_rows(g, candidate, baseline)[0] for m, g in rows.groupby("model", sort=False)}
    per = {m: s for m, s in per.items() if s is not None}
    if len(per) < 2:
        return seedclaims.NotAnswered(f"{candidate} was measured on fewer than two models")
    hi_m, lo_m = max(per, key=lambda m: per[m].ratio), min(per, key=lambda m: per[m].ratio)
    v, lo, hi = speedups_layer.ratio_of(tuple(per[hi_m]), tuple(per[lo_m]))
    return seedclaims.Measurement(v, lo, hi, "; ".join(f"{m} {describe_ci(_as_row(s))}" for m, s in per.items()),
                                  rows=rows, band=speedups_layer.band(df))


def _as_row(s) -> dict:
    return {"speedup": s.ratio, "ci_low": s.ci_low, "ci_high": s.ci_high}


def least_model_gain(df: pd.DataFrame, tables: dict, claim, candidate: str = "tf-xla", baseline: str = "tf-function"):
    """Seed 000's 'XLA improved every model': the smallest per-model geometric-mean gain."""
    rows = _rows(df, claim, (candidate, baseline))
    per = {m: _geo_rows(g, candidate, baseline)[0] for m, g in rows.groupby("model", sort=False)}
    per = {m: s for m, s in per.items() if s is not None}
    if not per:
        return seedclaims.NotAnswered(f"{candidate} and {baseline} were not both measured")
    worst = min(per, key=lambda m: per[m].ratio)
    return seedclaims.Measurement(*per[worst], f"least gain: {worst}; all: " + "; ".join(
        f"{m} {s.ratio:.2f}×" for m, s in per.items()), rows=rows, band=speedups_layer.band(df))


def best_cell(df: pd.DataFrame, tables: dict, claim, candidate: str = "tf-xla", baseline: str = "tf-function"):
    """Seed 000's 'XLA cut time by up to 70%, mostly on small inputs': the largest per-shape gain (an extreme, as
    the seed's was), and whether it is at the smallest input."""
    sp = tables["speedups"]
    cells = seedclaims.matching(sp[(sp.candidate == candidate) & (sp.baseline == baseline) & sp.speedup.notna()], claim)
    if not len(cells):
        return seedclaims.NotAnswered(f"{candidate} over {baseline} was not measured")
    best = cells.loc[cells.speedup.idxmax()]
    where = "the smallest input" if best.tokens == cells.tokens.min() else "not the smallest input"
    return seedclaims.Measurement(best.speedup, best.ci_low, best.ci_high,
                                  f"largest cut {1 - 1 / best.speedup:.0%} at b{best.batch_size} × s{best.seq_len} "
                                  f"({best.model}; {where})", rows=cells, band=speedups_layer.band(df))


def seq_exponent(df: pd.DataFrame, tables: dict, claim, variant: str = "eager", batch: str = "largest",
                 nonlinear: float | None = None):
    """Seed 003's 'time grows linearly with sequence length for large batches, not for single samples': the
    exponent k of time ∝ seq^k between the shortest and longest sequence at one batch size, per model, averaged
    (1 = linear), its CI from the time ratio's."""
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
        used.append(f"{model}: time ×{r.ratio:.2f} for seq {short.seq_len} → {long.seq_len}, k = {k[0]:.2f}")
    if not cells:
        return seedclaims.NotAnswered(f"no model has two sequence lengths at batch {b}")
    k = np.asarray(cells)
    point = k[:, 0].mean()
    lo = point - np.sqrt(((k[:, 0] - k[:, 1]) ** 2).sum()) / len(k)
    hi = point + np.sqrt(((k[:, 2] - k[:, 0]) ** 2).sum()) / len(k)
    holds = None if nonlinear is None else bool(lo > nonlinear or hi < 1 / nonlinear)  # 'not linear'
    return seedclaims.Measurement(float(point), float(lo), float(hi), f"batch {b}; k CI {lo:.2f}–{hi:.2f}; " +
                                  "; ".join(used), rows=at, band=1.0, unit="", holds=holds)


def oom_count(df: pd.DataFrame, tables: dict, claim):
    """Seed 000's 'PyTorch runs out of memory more often than TensorFlow': out-of-memory cells per framework."""
    oom = df[df.status == "oom"]
    per = oom.variant.map(FRAMEWORK).value_counts()
    pt, tf = int(per.get("PyTorch", 0)), int(per.get("TensorFlow", 0))
    largest = df.loc[_tokens(df).idxmax()]
    if pt == tf == 0:
        return seedclaims.NotAnswered(f"neither framework ran out of memory (largest input here b{largest.batch_size} "
                                      f"× s{largest.seq_len})")
    return seedclaims.Measurement(None, None, None, f"out of memory: PyTorch in {pt} cells, TensorFlow in {tf}",
                                  rows=df, holds=pt > tf)


def op_gain(df: pd.DataFrame, tables: dict, claim, candidate: str = "eager", baseline: str = "tf-function",
            op: str | None = None):
    """Seed 001's 'PyTorch is much slower on unusual ops': `candidate` (PyTorch) over `baseline` (TensorFlow) on one
    single operation (`op`, a model id such as op-argmax: each op is judged apart) or on all of them, geometric
    mean over sizes (and operations), with each operation's own beside it."""
    rows = df[(df.status == "ok") & df.variant.isin([candidate, baseline])]
    rows = rows[is_op(rows)] if len(rows) else rows
    if op is not None:
        rows = rows[rows.model == op]
    s, n = _geo_rows(rows, candidate, baseline)
    if s is None:
        return seedclaims.NotAnswered(f"no single operation{f' {op}' if op else ''} ran in both {candidate} and "
                                      f"{baseline} (the profile's micro_ops)")
    per = [(m, _geo_rows(g, candidate, baseline)[0]) for m, g in rows.groupby("model", sort=False)]
    return seedclaims.Measurement(s.ratio, s.ci_low, s.ci_high, f"{candidate} over {baseline} over {n} operation × size "
                                  "cell(s); " + "; ".join(f"{m} {s.ratio:.2f}×" for m, s in per if s is not None),
                                  rows=rows, band=speedups_layer.band(df))


def _cells(rows: pd.DataFrame, cand: str, base: str) -> list[tuple[tuple, object]]:
    """(shape, paired speed-up of `cand` over `base`) at every shape both ran in `rows`."""
    c = rows[rows.variant == cand].set_index(SHAPE_COLUMNS)
    b = rows[rows.variant == base].set_index(SHAPE_COLUMNS)
    return [(k, speedups_layer.speedup(b.loc[k], c.loc[k])) for k in c.index.intersection(b.index)]


def share_equal(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str):
    """Seed 000's 'similar results in most cases': holds when more than half of the shapes are judged equal (the one
    verdict rule, the A/A band)."""
    rows = _rows(df, claim, (candidate, baseline))
    cells, band = _cells(rows, candidate, baseline), speedups_layer.band(df)
    if not cells:
        return seedclaims.NotAnswered(f"{candidate} and {baseline} were not both measured on any shape")
    verdicts = pd.Series([speedups_layer.verdict(s.ci_low, s.ci_high, band) for _, s in cells])
    counts = ", ".join(f"{n} {v}" for v, n in verdicts.value_counts().items())
    return seedclaims.Measurement(None, None, None, f"{candidate} over {baseline} per shape: {counts} of "
                                  f"{len(cells)} (band ±{band - 1:.0%})", rows=rows,
                                  holds=bool((verdicts == "equal").sum() * 2 > len(cells)))


def some_shape_faster(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str):
    """Seed 001's 'sometimes even faster': holds when `candidate` is judged faster on at least one shape."""
    rows = _rows(df, claim, (candidate, baseline))
    cells, band = _cells(rows, candidate, baseline), speedups_layer.band(df)
    if not cells:
        return seedclaims.NotAnswered(f"{candidate} and {baseline} were not both measured on any shape")
    faster = [k for k, s in cells if speedups_layer.verdict(s.ci_low, s.ci_high, band) == "faster"]
    return seedclaims.Measurement(None, None, None, f"{candidate} faster than {baseline} on {len(faster)} of "
                                  f"{len(cells)} shape(s)", rows=rows, holds=bool(faster))


def memory_lower(df: pd.DataFrame, tables: dict, claim, candidate: str = "tf-xla", baseline: str = "tf-function"):
    """Seed 000's 'XLA improved memory use': holds when `candidate`'s peak memory is below `baseline`'s on more than
    half the shapes where both recorded one (one peak per shape: counted, no CI)."""
    rows = _rows(df, claim, (candidate, baseline)).dropna(subset=["peak_mem_mb"])
    c = rows[rows.variant == candidate].set_index(SHAPE_COLUMNS).peak_mem_mb
    b = rows[rows.variant == baseline].set_index(SHAPE_COLUMNS).peak_mem_mb
    both = c.index.intersection(b.index)
    if not len(both):
        return seedclaims.NotAnswered(f"no shape has peak memory of both {candidate} and {baseline}")
    lower = int((c.loc[both] < b.loc[both]).sum())
    return seedclaims.Measurement(None, None, None, f"{candidate}'s peak memory below {baseline}'s on {lower} of "
                                  f"{len(both)} shape(s)", rows=rows, holds=lower * 2 > len(both))


def input_weight(df: pd.DataFrame, tables: dict, claim, variant: str = "eager", top: float = 0.25):
    """Seed 000's 'the larger the input, the larger its influence on the averages': the share of the plain mean of
    per-shape median times (the seed's metric) that the largest `top` of inputs (batch × sequence) contribute;
    holds above one half."""
    rows = _rows(df, claim, (variant,))
    if len(rows) < 4:
        return seedclaims.NotAnswered(f"{variant} ran on {len(rows)} shape(s); four are needed for a top quarter")
    tokens = _tokens(rows)
    big = tokens >= tokens.quantile(1 - top)
    share = float(rows.median_s[big].sum() / rows.median_s.sum())
    return seedclaims.Measurement(None, None, None, f"{variant}: the largest {int(big.sum())} of {len(rows)} inputs "
                                  f"carry {share:.0%} of the summed per-shape medians", rows=rows, holds=share > 0.5)


def batching_by_length(df: pd.DataFrame, tables: dict, claim, variant: str = "eager"):
    """Seed 003's 'long texts gain less from batching': batching's gain (time per sample at batch 1 over that at the
    largest batch) at the longest sequence over that at the shortest, per model, geometric mean (below 1: less)."""
    ok = df[(df.status == "ok") & (df.variant == variant)]
    cells, used = [], []
    for model, g in ok.groupby("model", sort=False):
        big = int(g.batch_size.max())
        both = sorted(set(g.seq_len[g.batch_size == 1]) & set(g.seq_len[g.batch_size == big]))
        ends = [both[0], both[-1]] if both else []
        if big == 1 or len(both) < 2:
            continue
        gain = []
        for s in ends:
            one, many = g[(g.seq_len == s) & (g.batch_size == 1)], g[(g.seq_len == s) & (g.batch_size == big)]
            if not (len(one) and len(many)):
                break
            per_call = speedups_layer.speedup(one.iloc[0], many.iloc[0])  # time(batch 1) / time(batch big)
            gain.append(speedups_layer.ratio_of(per_call, (1 / big,) * 3))  # per sample: × big
        if len(gain) == 2:
            cells.append(speedups_layer.ratio_of(gain[1], gain[0]))
            used.append(f"{model}: batch {big} gains {gain[0].ratio:.2f}× at seq {ends[0]}, {gain[1].ratio:.2f}× at "
                        f"seq {ends[1]}")
    if not cells:
        return seedclaims.NotAnswered("no model ran batch 1 and a larger batch at two sequence lengths")
    s = speedups_layer.combine(cells)
    return seedclaims.Measurement(s.ratio, s.ci_low, s.ci_high, "; ".join(used), rows=ok, band=speedups_layer.band(df))


OP_EVALUATORS = ("op_gain",)  # claims judged on the micro-ops' rows; every other claim on the whole models'


def claims(df: pd.DataFrame, sp: pd.DataFrame) -> pd.DataFrame:
    """The registry's claims this study tests (seeds 000, 001 and 003), judged on these results (studylib.claims):
    seed 001's single-operation claim on the micro-ops' rows, every other claim on the whole models'."""
    mine = [c for c in seedclaims.registry() if c.study == NOTEBOOK]
    ops = is_op(df) if len(df) else pd.Series(False, index=df.index)
    tables = {"speedups": sp, "micro-ops": op_speedups(df)}
    parts = [seedclaims.study_claims(NOTEBOOK, df[ops] if c.evaluator in OP_EVALUATORS else df[~ops], tables,
                                     claims=(c,)) for c in mine]
    return pd.concat(parts, ignore_index=True) if parts else seedclaims.study_claims(NOTEBOOK, df, tables, claims=())


def first_call_table(df: pd.DataFrame) -> pd.DataFrame:
    """What each variant costs before steady state: preparation (trace and freeze; wrapping in tf.function)
    and the first call (graph build, XLA compile), per model, as the range over shapes. Building the
    TensorFlow twin (copying the weights) happens once per model and is not part of either."""
    ok = df[df.status == "ok"].copy()
    ok["cold_s"] = ok.prepare_s + ok.first_call_s
    rows = []
    for (model, variant), g in ok.groupby(["model", "variant"], sort=False):
        rows.append({"model": model, "variant": variant, "framework": FRAMEWORK[variant],
                     "prepare (s)": f"{g.prepare_s.min():.2f}–{g.prepare_s.max():.2f}",
                     "first call (s)": f"{g.first_call_s.min():.2f}–{g.first_call_s.max():.2f}",
                     "first call ÷ steady call": f"{(g.first_call_s / g.median_s).median():.0f}× (median)",
                     "graphs built": "" if g.compilations.isna().all() else int(g.compilations.sum()),
                     "rebuilt in steady state": "" if g.recompilations.isna().all() else int(g.recompilations.sum())})
    return pd.DataFrame(rows)


def analyse(df: pd.DataFrame, peaks: dict | None = None) -> Analysis:
    """Speed-ups within and across frameworks, first-call costs, the findings and the seed claims; and the
    roofline (roofline.attach) with `peaks`, the machine's limits (StudyRun.peaks; None: the roofline says unknown)."""
    sp = speedups(df)
    band = speedups_layer.band(df)
    analysis = roofline.attach(Analysis(tables={"speedups": sp, "first call": first_call_table(df),
                                                "micro-ops": op_table(df)},
                                        findings=findings(df, sp), claims=claims(df, sp)),
                               df, peaks, PAIRS, SHAPE_COLUMNS, band=band)
    return surprises.attach(analysis, df, EXPECTATIONS, band)


STUDY = register(Study(
    NOTEBOOK, TorchscriptVsXla, configs, estimate_s, analyse, frameworks=("torch", "tensorflow"),
    comparisons=(
        Comparison("TensorFlow eager over PyTorch eager", "tf-eager", "eager"),
        Comparison("TorchScript over eager PyTorch", "torchscript", "eager"),
        Comparison("TorchScript optimized over eager PyTorch", "torchscript-optimized", "eager"),
        Comparison("XLA over tf.function", "tf-xla", "tf-function"),
        Comparison("tf.function over eager PyTorch", "tf-function", "eager"),
    ),
    on_gpu=("XLA fuses elementwise work into fewer kernels and TensorFlow's GPU kernels differ from its CPU ones, so "
            "the ranking can change; seed 000's XLA figures were GPU auto-clustering, which this CPU run does not test."),
    expectations=EXPECTATIONS,
))
