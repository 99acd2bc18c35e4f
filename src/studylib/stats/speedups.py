"""The comparison layer: every speed-up the study reports is paired, pooled, judged and priced here, once.

- Pairing: a candidate row and its baseline row agree on every shape column (config.SHAPE, the configuration's
  fields that say what is computed) except the ones a comparison varies (`column`, and any the baseline is fixed
  at, e.g. eager at batch 1). `pair_table` gives one row per candidate shape: the paired speed-up with its 95% CI
  (variance.speedup: per-round ratios where both sides shared rounds), or the failing side's status and message.
  `matched` pairs the rows; `paired` gives both sides' rows aligned, for a comparison that reads them itself.
- Pooling: `geomean` over the shapes both sides ran (variance.geomean_speedup). It is shown only where the
  per-shape verdicts agree; otherwise an answer gives the range by regime (`conditional`).
- Judging, one rule for every page, claim and comparison (`verdict`): the equality band is a fixed ±5% (`band`);
  how well the CIs hold on the A/A controls (every `<x>-aa` over `<x>`) is `aa_calibration`. A speed-up is **faster** only when its
  whole 95% CI lies above the band, **slower** only when it lies wholly below it, **equal** when the CI lies
  inside the band, else **unclear**. Where a page judges many shapes at once (`judge`), faster/slower also need
  the Benjamini–Hochberg adjusted p-value (false-discovery rate 5% over that family) below 0.05; the p-value is the
  t statistic's at the speed-up's own SE and degrees of freedom. A study's verdicts are computed once, over one
  family, in verdicts.py, and every page reads them from there.
- Pricing: `break_even` turns a one-time cost (compile, trace, export) and the paired speed-up into the calls after
  which the candidate has paid for itself, with the interval the speed-up's CI implies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as _st

from ..core import numbers
from ..core.config import FIELDS, REFERENCE, is_aa, original_of, shape_columns, shape_label
from . import calibration, variance
from .measurement import Measurement
from .stats import Speedup

EQUIVALENCE = 1.05  # the narrowest 'equal' band: ±5%
FDR = 0.05  # false-discovery rate over a page's family of verdicts (Benjamini–Hochberg)
VERDICTS = ("faster", "slower", "equal", "unclear")
_Z = float(_st.norm.ppf(0.975))

# What a pair table holds per candidate shape (the shape columns come first, then these).
PAIR_COLUMNS = ["candidate", "baseline", "status", "error", "speedup", "ci_low", "ci_high", "paired",
                "base_median_s", "median_s", "one_time_s", "break_even", "break_even_low", "break_even_high",
                "peak_mem_mb", "base_peak_mem_mb", "max_abs_diff", "parity_ok", "label_agreement", "p", "verdict",
                "detectable", "se", "df"]


@dataclass(frozen=True)
class Comparison:
    """A speed-up a study answers with: `candidate` over `baseline` (values of `column`), paired on the shape.

    `along` names the shape columns along which the answer may change (model, batch, sequence, dtype, backend):
    an answer reads its regimes from them. `label` is how pages name it. `replaces`, for a successor over the
    deprecated path it replaces (the baseline), names that path and its status: the page says where the successor
    matches or beats it."""

    label: str
    candidate: str
    baseline: str = REFERENCE
    column: str = "variant"
    along: tuple[str, ...] = ("model", "dtype", "batch_size", "seq_len", "image_size")
    replaces: str = ""


def match_columns(df: pd.DataFrame, column: str) -> list[str]:
    """The configuration fields two rows of a comparison along `column` must share (every field `df` has but it)."""
    return [c for c in FIELDS if c in df and c != column]


def varying(table: pd.DataFrame, columns: Iterable[str]) -> list[str]:
    """Those of `columns` that take more than one value in `table` (what tells its shapes apart)."""
    return [c for c in columns if c in table and table[c].nunique(dropna=False) > 1]


# --- the equality band and the verdict ---------------------------------------------------------------------------


def without_aa(df: pd.DataFrame, column: str = "variant") -> pd.DataFrame:
    """`df` without the rows of A/A copies (config.is_aa): what a page may offer as options or candidates."""
    if not len(df) or column not in df:
        return df
    return df[~df[column].map(is_aa)]


def aa_pairs(df: pd.DataFrame) -> pd.DataFrame:
    """Every A/A pair: at every shape, each A/A copy `<x>-aa` (an independent copy of `<x>`, config.is_aa) over its
    original `<x>`, with its CI; `runtime` names `<x>`. Both run the same code, so a CI that excludes 1 is a false
    positive of the method."""
    columns = [*PAIR_COLUMNS, "runtime", "shape", "significant"]
    if not len(df) or "variant" not in df:
        return pd.DataFrame(columns=columns)
    tables = [pair_table(df, v, original_of(v), band=EQUIVALENCE)
              for v in dict.fromkeys(df.variant) if is_aa(v) and (df.variant == original_of(v)).any()]
    t = pd.concat([x for x in tables if len(x)], ignore_index=True) if any(len(x) for x in tables) else None
    if t is None or not (t.status == "ok").any():
        return pd.DataFrame(columns=columns)
    t = t[t.status == "ok"].copy()
    t["runtime"] = t.baseline
    t["shape"] = [shape_label(r, shape_columns(t)) for _, r in t.iterrows()]
    t["significant"] = (t.ci_low > 1) | (t.ci_high < 1)
    return t.reset_index(drop=True)


def band(df: pd.DataFrame | None = None, *, pairs: pd.DataFrame | None = None) -> float:
    """The 'equal' band: a fixed ±5% (EQUIVALENCE), stated once. (It was the largest A/A ratio, an extreme value
    that grows with the number of controls; the A/A pairs now calibrate the intervals, aa_calibration, and do not
    move the band.) The arguments are kept for callers that pass a results table."""
    return EQUIVALENCE


@dataclass(frozen=True)
class AACalibration:
    """How well the method's CIs hold on its A/A pairs (`aa_calibration`).

    `false_pos` of `n` pairs had a 95% CI excluding 1 (5% expected), `rate` with its exact (Clopper–Pearson) 95%
    interval. `mean_z2` is the mean of z² over the `n_z` pairs with a finite CI, z the normal quantile of the t
    statistic log ratio / SE at its degrees of freedom (calibration.z_of), SE the speed-up's own (variance.py; from
    its CI where a table lacks it): about 1 where the CIs are as wide as the noise,
    above 1 where they are too narrow; `z2_low`–`z2_high` is its 95% interval (n_z·mean/χ² quantiles with n_z degrees of freedom)."""

    n: int
    false_pos: int
    rate: float
    rate_low: float
    rate_high: float
    n_z: int
    mean_z2: float
    z2_low: float
    z2_high: float

    def sentence(self) -> str:
        """The calibration in words, for a page."""
        if not self.n:
            return "no A/A pair ran"
        z2_ci = numbers.fmt_range(self.z2_low, self.z2_high, ".2f", collapse=False)
        z = (f"; mean z² of the A/A log ratios {self.mean_z2:.2f} (95% CI {z2_ci}; 1 where the CIs are as wide as the "
             f"noise)" if self.n_z else "")
        return (f"{self.false_pos} of {self.n} A/A pairs called different (false-positive rate {self.rate:.0%}, exact "
                f"95% CI {numbers.fmt_range(self.rate_low, self.rate_high, '.0%', collapse=False)}; 5% expected){z}")


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper–Pearson) interval of a proportion k/n."""
    if n <= 0:
        return float("nan"), float("nan")
    a = 1 - level
    low = float(_st.beta.ppf(a / 2, k, n - k + 1)) if k > 0 else 0.0
    high = float(_st.beta.ppf(1 - a / 2, k + 1, n - k)) if k < n else 1.0
    return low, high


def aa_calibration(df: pd.DataFrame, *, pairs: pd.DataFrame | None = None) -> AACalibration:
    """The A/A calibration of a results table (or of A/A `pairs` already made by `aa_pairs`): number of pairs,
    false positives and their rate with its Clopper–Pearson 95% interval, and the mean z² with its χ² 95% interval."""
    aa = aa_pairs(df) if pairs is None else pairs
    n = len(aa)
    k = int(aa.significant.sum()) if n else 0
    low, high = clopper_pearson(k, n)
    ratio, lo, hi = (aa[c].astype(float).to_numpy() for c in ("speedup", "ci_low", "ci_high")) if n else ([],) * 3
    ses, dfs = (aa[c].astype(float).to_numpy() if n and c in aa else np.full(len(ratio), np.nan) for c in ("se", "df"))
    z = []
    for r, a, b, se, df in zip(ratio, lo, hi, ses, dfs):
        if r > 0 and a > 0 and b > a and np.isfinite([r, a, b]).all():
            # the speed-up's own standard error and degrees of freedom (variance.py); from its CI where a table
            # lacks them; z is the normal quantile of the t statistic's probability (calibration.z_of)
            if not (np.isfinite(se) and se > 0 and np.isfinite(df)):
                se, df = (np.log(b) - np.log(a)) / 2 / _Z, np.inf
            z.append(float(calibration.z_of(np.log(r) / se, df)))
    mean, z_low, z_high = calibration.mean_z2_ci(np.asarray(z, dtype=float))
    return AACalibration(n, k, k / n if n else float("nan"), low, high, len(z), mean, z_low, z_high)


def verdict(ci_low: float, ci_high: float, band: float = EQUIVALENCE) -> str:
    """The one verdict rule: 'faster' (CI wholly above the band), 'slower' (wholly below it), 'equal' (inside it),
    else 'unclear'."""
    if not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return "unclear"
    if ci_low > band:
        return "faster"
    if ci_high < 1 / band:
        return "slower"
    if 1 / band <= ci_low and ci_high <= band:
        return "equal"
    return "unclear"


def p_beyond_band(ratio: float, ci_low: float, ci_high: float, band: float = EQUIVALENCE, *,
                  se: float | None = None, df: float | None = None) -> float:
    """Two-sided p-value that the speed-up lies beyond the band (above it or below it): the t statistic
    (|log ratio| − log band) / se at the speed-up's own degrees of freedom `df` (variance.py). Without se, the SE is
    read from the 95% CI with the normal quantile (tables that lack it)."""
    if not all(np.isfinite([ratio, ci_low, ci_high])) or ratio <= 0 or ci_low <= 0:
        return 1.0
    if se is None or not np.isfinite(se) or se <= 0:
        se, df = max((np.log(ci_high) - np.log(ci_low)) / (2 * _Z), 1e-12), np.inf
    stat = (abs(np.log(ratio)) - np.log(band)) / se
    dist = _st.t(df) if df is not None and np.isfinite(df) and df > 0 else _st.norm
    return float(min(1.0, 2 * dist.sf(stat)))


def bh_adjust(p: Iterable[float]) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (step-up, monotone)."""
    p = np.asarray(list(p), dtype=float)
    if not len(p):
        return p
    order = np.argsort(p)
    m = len(p)
    ranked = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def judge(table: pd.DataFrame, band: float = EQUIVALENCE) -> pd.DataFrame:
    """A copy of a pair table with `p` (BH-adjusted over the table's ok rows, its family) and `verdict`: the one rule
    (verdict), where faster or slower also needs the adjusted p below FDR."""
    t = table.copy()
    t["p"], t["verdict"] = np.nan, None
    ok = t.speedup.notna() if "speedup" in t else pd.Series(False, index=t.index)
    if not ok.any():
        return t
    raw = [p_beyond_band(r.speedup, r.ci_low, r.ci_high, band, se=getattr(r, "se", None), df=getattr(r, "df", None))
           for r in t[ok].itertuples()]
    t.loc[ok, "p"] = bh_adjust(raw)
    words = []
    for r in t[ok].itertuples():
        w = verdict(r.ci_low, r.ci_high, band)
        words.append("unclear" if w in ("faster", "slower") and r.p >= FDR else w)
    t.loc[ok, "verdict"] = words
    return t


# --- pairing ------------------------------------------------------------------------------------------------------


def _fixed(where: dict[str, Any] | None, row) -> dict[str, Any]:
    return {} if not where else {k: (v(row) if callable(v) else v) for k, v in where.items()}


def matched(df: pd.DataFrame, candidate: str | Iterable[str] | None, baseline: str, *, column: str = "variant",
            baseline_where: dict[str, Any] | None = None, on: Iterable[str] | None = None) -> list[tuple[Any, Any]]:
    """(candidate row, baseline row or None) for every candidate row of `df`: the baseline is the row whose `column`
    is `baseline` and whose columns `on` (default: every configuration field `df` has but `column`) equal the
    candidate's, except those `baseline_where` fixes (a value, or a function of the candidate row); an ok row first.
    `candidate` None: every value of `column` but the baseline and the A/A copies."""
    if not len(df) or column not in df:
        return []
    on = match_columns(df, column) if on is None else list(on)
    if candidate is None:
        cands = df[(df[column] != baseline) & ~df[column].map(is_aa)]
    else:
        cands = df[df[column].isin([candidate] if isinstance(candidate, str) else list(candidate))]
    base = df[df[column] == baseline]
    if "status" in base:  # an ok baseline row wins over a failed one of the same shape
        base = base.sort_values("status", key=lambda s: s != "ok", kind="stable")
    index: dict[tuple, Any] = {}
    for _, b in base.iterrows():
        index.setdefault(tuple(_key(b[c]) for c in on), b)
    out = []
    for _, r in cands.iterrows():
        want = {c: r[c] for c in on} | _fixed(baseline_where, r)
        out.append((r, index.get(tuple(_key(want[c]) for c in on))))
    return out


def paired(df: pd.DataFrame, candidate: str, baseline: str, *, column: str = "variant",
           on: Iterable[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(candidate rows, baseline rows) at every shape where `candidate` and `baseline` (values of `column`) both have a
    row in `df`, aligned (the i-th rows share the shape, in the candidate's order, indexed 0..n-1), matched as `matched`
    matches them: on `on`, by default every configuration field but `column` (as pair_table pairs). Every comparison
    that reads the two sides' rows itself (claims, findings, regimes, compare) pairs them here."""
    if not len(df) or column not in df:
        return df.iloc[:0], df.iloc[:0]
    df = df.reset_index(drop=True)
    pairs = [(c.name, b.name) for c, b in matched(df, candidate, baseline, column=column, on=on) if b is not None]
    return tuple(df.iloc[[p[i] for p in pairs]].reset_index(drop=True) for i in (0, 1))


def _key(v):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    return int(v) if isinstance(v, (float, np.floating)) and float(v).is_integer() else v


def speedup(base, cand) -> Speedup:
    """`cand` over `base` (two results rows of any kind, read as measurement.Measurement): variance.speedup, paired
    by round where they shared rounds."""
    return variance.speedup(base, cand)


def break_even(one_time_s: float, base_median_s: float, s: Speedup) -> tuple[float, float, float]:
    """(calls, low, high): the fewest calls N after which N candidate calls, the first one cold, take no longer than
    N baseline calls: the one-time cost (beyond a steady candidate call) over the time each call saves,
    base_median × (1 − 1/speed-up), rounded up; the interval is what the speed-up's CI gives; ∞ where it saves
    nothing."""
    def calls(ratio: float) -> float:
        saved = base_median_s * (1 - 1 / ratio) if ratio > 0 else 0.0
        return float(max(1, np.ceil(max(one_time_s, 0.0) / saved))) if saved > 0 else np.inf

    return calls(s.ratio), calls(s.ci_high), calls(s.ci_low)


def pair_table(df: pd.DataFrame, candidate: str | Iterable[str] | None, baseline: str = REFERENCE, *,
               column: str = "variant", baseline_where: dict[str, Any] | None = None,
               band: float = EQUIVALENCE) -> pd.DataFrame:
    """One row per candidate shape: the shape, the paired speed-up over its baseline with the CI, the one-time cost
    (the candidate's preparation and first call beyond one steady baseline call) and its break-even calls, memory,
    parity, and the verdict (judge, BH over this table). A side that failed keeps its status and message."""
    on = [c for c in match_columns(df, column) if c not in ("device", "threads")]
    out = []
    for cand, base in matched(df, candidate, baseline, column=column, baseline_where=baseline_where):
        status = cand.get("status", "ok")
        rec = {c: cand[c] for c in on} | {column: cand[column], "candidate": cand[column], "baseline": baseline,
                                           "status": status,
                                           "error": "" if status == "ok" else f"{cand[column]}: {cand.get('error', '')}"}
        rec |= {"baseline_" + k: base[k] for k in (baseline_where or {}) if base is not None}
        if base is None:
            rec |= {"status": "baseline missing", "error": f"no {baseline} row for this shape"} if rec["status"] == "ok" else {}
        elif rec["status"] == "ok" and base.get("status", "ok") != "ok":
            rec |= {"status": base.status, "error": f"{base[column]}: {base.get('error', '')}"}
        elif rec["status"] == "ok":
            b, c = Measurement.of(base), Measurement.of(cand)
            s = speedup(b, c)
            n, n_lo, n_hi = break_even(c.one_time_s, b.steady_median_s, s)
            rec |= {"speedup": s.ratio, "ci_low": s.ci_low, "ci_high": s.ci_high, "paired": s.paired,
                    "detectable": variance.detectable(s.se, s.df, band), "se": s.se, "df": s.df,
                    "base_median_s": b.steady_median_s, "median_s": c.steady_median_s, "one_time_s": c.one_time_s,
                    "break_even": n, "break_even_low": n_lo, "break_even_high": n_hi,
                    "peak_mem_mb": c.peak_mem_mb, "max_abs_diff": c.max_abs_diff, "parity_ok": c.parity_ok,
                    "label_agreement": c.label_agreement, "base_peak_mem_mb": b.peak_mem_mb}
        out.append(rec)
    t = pd.DataFrame(out)
    t = t.reindex(columns=[*on, column, *[c for c in t.columns if c.startswith("baseline_")], *PAIR_COLUMNS])
    return judge(t, band)


def geomean(df: pd.DataFrame, candidate: str, baseline: str = REFERENCE, *, column: str = "variant",
            where: pd.Series | None = None) -> Speedup | None:
    """The geometric-mean speed-up of `candidate` over `baseline` over the shapes both ran ok (restricted to the rows
    `where` selects), with its CI (variance.geomean_speedup); None where no shape has both."""
    d = df[where] if where is not None else df
    pairs = [(b, c) for c, b in matched(d, candidate, baseline, column=column)
             if b is not None and c.get("status", "ok") == "ok" and b.get("status", "ok") == "ok"]
    return geomean_of(pairs) if pairs else None


def geomean_of(pairs: Iterable[tuple[Any, Any]]) -> Speedup:
    """The geometric-mean speed-up over (baseline row, candidate row) pairs already matched (rows of any kind), with
    its CI."""
    return variance.geomean_speedup(pairs)


def combine(cells: Iterable[Speedup | tuple[float, float, float]]) -> Speedup:
    """The geometric mean of speed-ups already computed (each with its CI), with a CI from their log half-widths
    added in quadrature (cells from different groups are independent)."""
    cells = [tuple(c) for c in cells]
    logs = np.log(np.array(cells, dtype=float))
    n = len(cells)
    mid = float(np.mean(logs[:, 0]))
    lo = mid - float(np.sqrt(np.sum((logs[:, 0] - logs[:, 1]) ** 2))) / n
    hi = mid + float(np.sqrt(np.sum((logs[:, 2] - logs[:, 0]) ** 2))) / n
    return Speedup(float(np.exp(mid)), float(np.exp(lo)), float(np.exp(hi)), n=n)


def ratio_of(a: Speedup | tuple, b: Speedup | tuple) -> Speedup:
    """a ÷ b for speed-ups measured independently (in different processes): their log half-widths in quadrature."""
    (av, alo, ahi), (bv, blo, bhi) = tuple(a), tuple(b)
    v = av / bv
    lo = v * np.exp(-np.hypot(np.log(av / alo), np.log(bhi / bv)))
    hi = v * np.exp(np.hypot(np.log(ahi / av), np.log(bv / blo)))
    return Speedup(float(v), float(lo), float(hi), paired=False)
