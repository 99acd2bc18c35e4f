"""Study 01's claim evaluators (studylib.claims.claims): each turns the study's results into our measurement of one seed
claim (seeds 001, 002 and 004), or says from the data why they cannot answer it. They register themselves with
claims.register_evaluators, beside the study module (eager_vs_compiled)."""

from __future__ import annotations

import pandas as pd

from .. import runtimes
from ..claims import claims as seedclaims
from ..core import numbers
from ..core.config import is_aa, shape_columns, shape_label
from ..stats import speedups as speedups_layer
from .eager_vs_compiled import NOTEBOOK, _where


def _cell(r) -> tuple[float, float, float]:
    return float(r["speedup"]), float(r["ci_low"]), float(r["ci_high"])


def _label(r) -> str:
    return shape_label(r, ("model", "dtype", "batch_size"), short=True)


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
        f"{lab} {numbers.fmt(c[0])}" for lab, c in cells)
    return seedclaims.ClaimMeasurement(v, lo, hi, text, rows=g, band=speedups_layer.band(df))


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
        used.append(f"{model} {dtype}: {numbers.fmt(a['speedup'])} at b{int(a['batch_size'])} vs {numbers.fmt(b['speedup'])} at "
                    f"b{int(b['batch_size'])}")
    if not cells:
        return seedclaims.NotAnswered(f"no {variant} measured at a batch above {large_above} beside a smaller one "
                                      f"(batches here: {', '.join(map(str, sorted(set(g.batch_size.astype(int)))))})")
    v, lo, hi = speedups_layer.combine(cells)
    rows = g[g.groupby(["model", "dtype"]).batch_size.transform("nunique") > 1]
    return seedclaims.ClaimMeasurement(v, lo, hi, "; ".join(used), rows=rows, band=speedups_layer.band(df))


def half_over_fp32(df: pd.DataFrame, tables: dict, claim, variant: str = "compile-default", large_above: int = 8):
    """Seed 004's 'at large batch, compiled fp16 beats compiled fp32': half over fp32 at the largest batch above
    `large_above` (fp16 on a GPU; bf16 where that is what the profile ran), per model, combined."""
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
        used.append(f"{shape_label(h.iloc[i], ('model', 'batch_size'), short=True)}: {half} {numbers.fmt(s.ratio)} "
                    f"fp32's speed")
        rows.append(pd.concat([f.iloc[[i]], h.iloc[[i]]]))
    if not cells:
        return seedclaims.NotAnswered(f"no batch above {large_above} has both fp32 and {half} compiled here")
    v, lo, hi = speedups_layer.combine(cells)
    return seedclaims.ClaimMeasurement(v, lo, hi, "; ".join(used), rows=pd.concat(rows), band=speedups_layer.band(df))


def mode_gain(df: pd.DataFrame, tables: dict, claim, candidate: str = "compile-reduce-overhead",
              baseline: str = "compile-default"):
    """`candidate` over `baseline` (two compile modes), geometric mean over the shapes both ran."""
    ok = df[df.status == "ok"]
    c, b = speedups_layer.paired(ok, candidate, baseline)
    if not len(c):
        return seedclaims.NotAnswered(f"{candidate} and {baseline} were not both measured on any shape")
    s = speedups_layer.geomean_of(zip(b.to_dict("records"), c.to_dict("records")))
    where = "with CUDA graphs" if (df.device == "cuda").any() else "on CPU, where both compile the same code"
    return seedclaims.ClaimMeasurement(s.ratio, s.ci_low, s.ci_high, f"{candidate} over {baseline} ({where}), geometric "
                                  f"mean over {len(c)} shapes", rows=ok[ok.variant.isin([candidate, baseline])],
                                  band=speedups_layer.band(df))


def first_call_cost(df: pd.DataFrame, tables: dict, claim):
    """Seed 002's 'the first step includes compilation and costs extra': each compiled configuration's first call
    over its steady call (CI from the steady median's); the least of them."""
    ok = df[(df.status == "ok") & ~df.variant.map(is_aa) & (df.variant.map(lambda v: runtimes.get(v).family == "compile"))]
    if not len(ok):
        return seedclaims.NotAnswered("no compiled configuration ran")
    cold = ok.prepare_s.fillna(0) + ok.first_call_s
    ratio = cold / ok.median_s
    r = ok.loc[ratio.idxmin()]
    first = cold[ratio.idxmin()]
    return seedclaims.ClaimMeasurement(first / r.median_s, first / r.ci_high_s, first / r.ci_low_s,
                                  f"least over {len(ok)} compiled configurations: {r['variant']} {_where(r)}; "
                                  f"largest {numbers.fmt(ratio.max(), digits=0)}", rows=ok, band=speedups_layer.band(df))


def layout_gain(df: pd.DataFrame, tables: dict, claim, pairs=(("eager-channels-last", "eager"),
                                                               ("compile-default-channels-last", "compile-default"))):
    """Seed 001's 'NHWC beats NCHW': channels_last over the default (NCHW) layout, geometric mean over every shape
    and pair (eager and compiled) where both sides ran, of the seed's models and precisions where present."""
    ok = seedclaims.matching(df[df.status == "ok"], claim)
    cells, used, rows = [], [], []
    for cand, base in pairs:
        c, b = speedups_layer.paired(ok, cand, base)
        cells += zip(b.to_dict("records"), c.to_dict("records"))
        if len(c):
            used.append(f"{cand} over {base} on {len(c)} shape(s)")
            rows.append(ok[ok.variant.isin([cand, base])])
    if not cells:
        return seedclaims.NotAnswered("no channels-last variant ran beside its default-layout baseline "
                                      "(they run on image models only)")
    s = speedups_layer.geomean_of(cells)
    return seedclaims.ClaimMeasurement(s.ratio, s.ci_low, s.ci_high, "geometric mean of " + "; ".join(used),
                                  rows=pd.concat(rows).drop_duplicates(subset=[*shape_columns(ok), "variant"]),
                                  band=speedups_layer.band(df))


# the claim evaluators claims.yaml names for this study, registered where claims.evaluator finds them
seedclaims.register_evaluators(NOTEBOOK, equal_at_batches, gain_trend, half_over_fp32, mode_gain, first_call_cost,
                               layout_gain)
