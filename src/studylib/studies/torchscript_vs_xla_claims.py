"""Study 02's claim evaluators (studylib.claims.claims): each turns the study's results into our measurement of one seed
claim (seeds 000, 001 and 003), or says from the data why they cannot answer it. They register themselves with
claims.register_evaluators, beside the study module (torchscript_vs_xla)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..claims import claims as seedclaims
from ..core import cells, numbers
from ..core.config import shape_label, shape_of
from ..stats import speedups as speedups_layer
from ..stats import verdicts
from ..stats.verdict_lookup import Decisions
from .common import describe_ci
from .torchscript_vs_xla import FRAMEWORK, LABEL_COLUMNS, NOTEBOOK, is_op

_SIZES = ("batch_size", "seq_len")  # an input as the claims name it: "b1 × s128"


def _mean_of_medians(df: pd.DataFrame, a: str, b: str) -> tuple[float, float, int]:
    """Seed 000's metric (a plain mean of per-cell times), over the cells where both variants ran."""
    x, y = speedups_layer.paired(df[df.status == "ok"], a, b)
    return float(x.median_s.mean()), float(y.median_s.mean()), len(x)


def _at_shapes(rows: pd.DataFrame, like: pd.DataFrame) -> pd.DataFrame:
    """The rows of `rows` at the shapes of `like`'s rows (config.shape_of)."""
    shapes = {shape_of(r) for r in like.to_dict("records")}
    return rows[pd.Series([shape_of(r) in shapes for r in rows.to_dict("records")], index=rows.index, dtype=bool)]


def _rows(df: pd.DataFrame, claim, variants) -> pd.DataFrame:
    """The ok rows of `variants`, of the seed's models where these results have any, and of the seed's batch sizes
    where it names some and these results have any (a profile's sweep at another batch, such as seed 003's 64 beside
    seed 000's 1-8, stays out of a seed-000 claim)."""
    ok = seedclaims.matching(df[(df.status == "ok") & df.variant.isin(list(variants))], claim)
    seed = claim.conditions.batch_sizes
    return ok[ok.batch_size.isin(seed)] if seed and ok.batch_size.isin(seed).any() else ok


def _tokens(frame: pd.DataFrame) -> pd.Series:
    return frame.batch_size * frame.seq_len


def _at_input(frame: pd.DataFrame, which: str) -> pd.DataFrame:
    """The rows at the smallest or largest input (batch × sequence) of the frame."""
    t = _tokens(frame)
    return frame[t == (t.min() if which == "smallest" else t.max())]


def _geo_rows(rows: pd.DataFrame, cand: str, base: str):
    """Geometric-mean speed-up of `cand` over `base` over the shapes both ran in `rows`, or None."""
    c, b = speedups_layer.paired(rows, cand, base)
    return (speedups_layer.geomean_of(zip(b.to_dict("records"), c.to_dict("records"))), len(c)) if len(c) else (None, 0)


def framework_gain(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str, at: str = "all"):
    """`candidate` over `baseline`, geometric mean over every shape both ran (`at: all`) or over those at the
    smallest or largest input (batch × sequence) of the seed's models; with seed 000's own metric (the plain mean
    of per-shape times) beside it."""
    rows = _rows(df, claim, (candidate, baseline))
    rows = rows if at == "all" else _at_shapes(rows, _at_input(rows[rows.variant == candidate], at))
    s, n = _geo_rows(rows, candidate, baseline)
    if s is None:
        return seedclaims.NotAnswered(f"{candidate} and {baseline} were not both measured on any shape")
    pt, tf, _ = _mean_of_medians(rows, baseline, candidate)
    where = "" if at == "all" else f" at the {at} input ({int(_tokens(rows).iloc[0])} tokens per call)"
    return seedclaims.ClaimMeasurement(s.ratio, s.ci_low, s.ci_high,
                                  f"{candidate} over {baseline}{where}, geometric mean over {n} shape(s); mean of "
                                  f"per-shape medians {pt * 1e3:.3g} ms ({baseline}) vs {tf * 1e3:.3g} ms ({candidate})",
                                  rows=rows, band=speedups_layer.band(df))


def every_input_gain(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str):
    """Seed 000's 'a lasting gain on XLNet': `candidate` over `baseline` at each input (batch × sequence) of the
    seed's models, judged per input (claims.per_cell: the least favourable input, or the directions that differ)."""
    rows = _rows(df, claim, (candidate, baseline))
    cells = [(label, tuple(sp)) for label, sp in _cells(rows, candidate, baseline)]
    if not cells:
        return seedclaims.NotAnswered(f"{candidate} and {baseline} were not both measured on any shape")
    return seedclaims.per_cell(cells, claim, text=f"{candidate} over {baseline} at each of {len(cells)} input(s)",
                               rows=rows, band=speedups_layer.band(df))


def input_trend(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str, over: str = "small/large",
                gap: bool = False):
    """How `candidate` over `baseline` changes with the input: its geometric mean at the smallest input over that
    at the largest (`over: small/large`) or the inverse; `gap: true` measures the distance from 1 instead
    (seed 000's 'the larger the input, the larger the gap'), oriented by the large input's direction."""
    rows = _rows(df, claim, (candidate, baseline))
    ends = {}
    for which in ("smallest", "largest"):
        keep = _at_input(rows[rows.variant == candidate], which)
        ends[which] = _geo_rows(_at_shapes(rows, keep), candidate, baseline)[0]
    if ends["smallest"] is None or ends["largest"] is None or _tokens(rows).nunique() < 2:
        return seedclaims.NotAnswered(f"{candidate} over {baseline} was not measured at two input sizes")
    small, large = tuple(ends["smallest"]), tuple(ends["largest"])
    a, b = (small, large) if over == "small/large" else (large, small)
    if gap and large[0] < 1:
        a, b = b, a  # a gap in TensorFlow's disfavour widens as the ratio falls
    v, lo, hi = speedups_layer.ratio_of(a, b)
    t = _tokens(rows)
    return seedclaims.ClaimMeasurement(v, lo, hi, f"{candidate} over {baseline}: {numbers.fmt(small[0])} at the smallest input "
                                  f"({int(t.min())} tokens per call) vs {numbers.fmt(large[0])} at the largest ({int(t.max())})",
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
    return seedclaims.ClaimMeasurement(v, lo, hi, "; ".join(f"{m} {describe_ci(_as_row(s))}" for m, s in per.items()),
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
    return seedclaims.ClaimMeasurement(*per[worst], f"least gain: {worst}; all: " + "; ".join(
        f"{m} {numbers.fmt(s.ratio)}" for m, s in per.items()), rows=rows, band=speedups_layer.band(df))


def best_cell(df: pd.DataFrame, tables: dict, claim, candidate: str = "tf-xla", baseline: str = "tf-function"):
    """Seed 000's 'XLA cut time by up to 70%, mostly on small inputs': the largest per-shape gain (an extreme, as
    the seed's was), and whether it is at the smallest input."""
    sp = tables["speedups"]
    cells = seedclaims.matching(sp[(sp.candidate == candidate) & (sp.baseline == baseline) & sp.speedup.notna()], claim)
    if not len(cells):
        return seedclaims.NotAnswered(f"{candidate} over {baseline} was not measured")
    best = cells.loc[cells.speedup.idxmax()]
    where = "the smallest input" if best.tokens == cells.tokens.min() else "not the smallest input"
    return seedclaims.ClaimMeasurement(best.speedup, best.ci_low, best.ci_high,
                                  f"largest cut {1 - 1 / best.speedup:.0%} at {shape_label(best, _SIZES, short=True)} "
                                  f"({best.model}; {where})", rows=cells, band=speedups_layer.band(df))


def seq_exponent(df: pd.DataFrame, tables: dict, claim, variant: str = "eager", batch: str = "largest"):
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
        used.append(f"{model}: time {numbers.fmt(r.ratio)} from seq {short.seq_len} to {long.seq_len}, k = {k[0]:.2f}")
    if not cells:
        return seedclaims.NotAnswered(f"no model has two sequence lengths at batch {b}")
    k = np.asarray(cells)
    point = k[:, 0].mean()
    lo = point - np.sqrt(((k[:, 0] - k[:, 1]) ** 2).sum()) / len(k)
    hi = point + np.sqrt(((k[:, 2] - k[:, 0]) ** 2).sum()) / len(k)
    return seedclaims.ClaimMeasurement(float(point), float(lo), float(hi), f"batch {b}; k CI {numbers.fmt_ci(lo, hi, unit='')}; " +
                                  "; ".join(used), rows=at, band=1.0, unit="")


def _or_median(row, column: str) -> float:
    v = cells.value(row.get(column))
    return row.median_s if v is None else v


def seq_curvature(df: pd.DataFrame, tables: dict, claim, variant: str = "eager", batch: int = 1,
                  band: float = 1.25):
    """Seed 003's 'not linear for single samples': whether time bends with sequence length at one batch size. Two
    lengths always lie on a straight line (and give an exponent below 1 wherever a call has a fixed cost), so three
    are needed: the time each added token costs between the middle and the longest length over that between the
    shortest and the middle, per model, geometric mean (1: a straight line, with or without a fixed cost per
    call); its CI from the medians' CIs at the three lengths, interval arithmetic. Holds where the CI lies outside
    1/`band`–`band`, does not where it lies inside, else stays open (holds None: inconclusive)."""
    ok = df[(df.status == "ok") & (df.variant == variant)]
    at = ok[ok.batch_size == int(batch)]
    cells, used = [], []
    for model, g in at.groupby("model", sort=False):
        lengths = sorted(g.seq_len.unique())
        if len(lengths) < 3:
            continue
        picked = [g[g.seq_len == s].iloc[0] for s in (lengths[0], lengths[len(lengths) // 2], lengths[-1])]
        t = [(_or_median(r, "ci_low_s"), r.median_s, _or_median(r, "ci_high_s")) for r in picked]
        (s1, s2, s3) = (int(r.seq_len) for r in picked)
        short = [(t[1][i] - t[0][j]) / (s2 - s1) for i, j in ((0, 2), (1, 1), (2, 0))]  # low, mid, high
        long = [(t[2][i] - t[1][j]) / (s3 - s2) for i, j in ((0, 2), (1, 1), (2, 0))]
        if min(short) <= 0 or min(long) <= 0:
            used.append(f"{model}: time does not rise clearly between seq {s1}, {s2} and {s3}")
            continue
        cells.append((long[1] / short[1], long[0] / short[2], long[2] / short[0]))
        used.append(f"{model}: {numbers.fmt(long[1] / short[1])} the time per added token between seq {s2} → {s3} as "
                    f"between {s1} → {s2}")
    if not cells:
        return seedclaims.NotAnswered(f"no model has three sequence lengths with rising times at batch {batch} (two "
                                      f"lengths always lie on a straight line){': ' + '; '.join(used) if used else ''}")
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
        return seedclaims.NotAnswered(f"neither framework ran out of memory (largest input here "
                                      f"{shape_label(largest, _SIZES, short=True)})")
    return seedclaims.ClaimMeasurement(None, None, None, f"out of memory: PyTorch in {pt} cells, TensorFlow in {tf}",
                                  rows=df, holds=pt > tf)


def op_gain(df: pd.DataFrame, tables: dict, claim, candidate: str = "eager", baseline: str = "tf-function",
            op: str | None = None):
    """Seed 001's 'PyTorch is much slower on unusual ops': `candidate` (PyTorch) over `baseline` (TensorFlow) on one
    single operation (`op`, a model id such as op-argmax: each op is judged apart) or on all of them, judged per
    size (claims.per_cell: the size least favourable to the claim, or the directions that differ; never an
    average over sizes that go opposite ways)."""
    rows = df[(df.status == "ok") & df.variant.isin([candidate, baseline])]
    rows = rows[is_op(rows)] if len(rows) else rows
    if op is not None:
        rows = rows[rows.model == op]
    cells = [(label, tuple(sp)) for label, sp in _cells(rows, candidate, baseline)]
    if not cells:
        return seedclaims.NotAnswered(f"no single operation{f' {op}' if op else ''} ran in both {candidate} and "
                                      f"{baseline} (the profile's micro_ops)")
    return seedclaims.per_cell(cells, claim, text=f"{candidate} over {baseline} per operation and size", rows=rows,
                               band=speedups_layer.band(df))


def _cells(rows: pd.DataFrame, cand: str, base: str) -> list[tuple[str, object]]:
    """(the shape's label, paired speed-up of `cand` over `base`) at every shape both ran in `rows`."""
    c, b = speedups_layer.paired(rows, cand, base)
    return [(shape_label(x, LABEL_COLUMNS, short=True), speedups_layer.speedup(y, x))
            for x, y in zip(c.to_dict("records"), b.to_dict("records"))]


def _decided(rows: pd.DataFrame, cand: str, base: str, tables: dict, band: float) -> list[str]:
    """Per shape both ran in `rows`, `cand` over `base` decided as the study's verdict table (tables["verdicts"])
    decides it (read the other way round where it holds `base` over `cand`); the one verdict rule on the pair's CI
    only at a shape the table does not compare (verdicts.unlisted)."""
    decisions, (c, b) = Decisions(tables.get("verdicts")), speedups_layer.paired(rows, cand, base)

    def own(x, y) -> str:
        s = speedups_layer.speedup(y, x)
        return verdicts.unlisted(s.ci_low, s.ci_high, band)

    return [decisions.of(x, y) or own(x, y) for x, y in zip(c.to_dict("records"), b.to_dict("records"))]


def share_equal(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str):
    """Seed 000's 'similar results in most cases': holds when more than half of the shapes are decided equal (the
    verdict table's decisions, _decided)."""
    rows = _rows(df, claim, (candidate, baseline))
    band = speedups_layer.band(df)
    words = pd.Series(_decided(rows, candidate, baseline, tables, band), dtype=object)
    if not len(words):
        return seedclaims.NotAnswered(f"{candidate} and {baseline} were not both measured on any shape")
    counts = ", ".join(f"{n} {v}" for v, n in words.value_counts().items())
    return seedclaims.ClaimMeasurement(None, None, None, f"{candidate} over {baseline} per shape: {counts} of "
                                  f"{len(words)} (band ±{band - 1:.0%})", rows=rows,
                                  holds=bool((words == "equal").sum() * 2 > len(words)))


def some_shape_faster(df: pd.DataFrame, tables: dict, claim, candidate: str, baseline: str):
    """Seed 001's 'sometimes even faster': holds when `candidate` is decided faster on at least one shape (the verdict
    table's decisions, _decided)."""
    rows = _rows(df, claim, (candidate, baseline))
    words = _decided(rows, candidate, baseline, tables, speedups_layer.band(df))
    if not words:
        return seedclaims.NotAnswered(f"{candidate} and {baseline} were not both measured on any shape")
    return seedclaims.ClaimMeasurement(None, None, None, f"{candidate} faster than {baseline} on {words.count('faster')} of "
                                  f"{len(words)} shape(s)", rows=rows, holds="faster" in words)


def memory_lower(df: pd.DataFrame, tables: dict, claim, candidate: str = "tf-xla", baseline: str = "tf-function"):
    """Seed 000's 'XLA improved memory use': holds when `candidate`'s peak memory is below `baseline`'s on more than
    half the shapes where both recorded one (one peak per shape: counted, no CI)."""
    rows = _rows(df, claim, (candidate, baseline)).dropna(subset=["peak_mem_mb"])
    c, b = speedups_layer.paired(rows, candidate, baseline)
    if not len(c):
        return seedclaims.NotAnswered(f"no shape has peak memory of both {candidate} and {baseline}")
    lower = int((c.peak_mem_mb < b.peak_mem_mb).sum())
    return seedclaims.ClaimMeasurement(None, None, None, f"{candidate}'s peak memory below {baseline}'s on {lower} of "
                                  f"{len(c)} shape(s)", rows=rows, holds=lower * 2 > len(c))


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
    return seedclaims.ClaimMeasurement(None, None, None, f"{variant}: the largest {int(big.sum())} of {len(rows)} inputs "
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
            used.append(f"{model}: batch {big} gains {numbers.fmt(gain[0].ratio)} at seq {ends[0]}, {numbers.fmt(gain[1].ratio)} at "
                        f"seq {ends[1]}")
    if not cells:
        return seedclaims.NotAnswered("no model ran batch 1 and a larger batch at two sequence lengths")
    s = speedups_layer.combine(cells)
    return seedclaims.ClaimMeasurement(s.ratio, s.ci_low, s.ci_high, "; ".join(used), rows=ok, band=speedups_layer.band(df))


# the claim evaluators claims.yaml names for this study, registered where claims.evaluator finds them
seedclaims.register_evaluators(NOTEBOOK, framework_gain, every_input_gain, input_trend, model_spread,
                               least_model_gain, best_cell, seq_exponent, seq_curvature, oom_count, op_gain,
                               share_equal, some_shape_faster, memory_lower, input_weight, batching_by_length)
