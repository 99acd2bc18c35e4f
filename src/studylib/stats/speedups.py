"""The comparison layer: every speed-up paired, pooled, judged and priced here, once (docs/method.md)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as _st

from ..core import wording
from ..core.cells import key
from ..core.config import FIELDS, REFERENCE, is_aa, original_of, shape_columns, shape_label
from . import calibration, variance
from .measurement import Measurement
from .stats import CONFIDENCE, Speedup

EQUIVALENCE = 1.05  # the narrowest 'equal' band: ±5%
FDR = 0.05  # false-discovery rate over a page's family of verdicts (q of Benjamini–Hochberg and Yekutieli)
FASTER, SLOWER, EQUAL, UNDECIDED = "faster", "slower", "equal", "undecided"
_Z = float(_st.norm.ppf(0.975))

# What a pair table holds per candidate shape (the shape columns come first, then these).
PAIR_COLUMNS = ["candidate", "baseline", "status", "error", "speedup", "ci_low", "ci_high", "paired",
                "base_median_s", "median_s", "one_time_s", "break_even", "break_even_low", "break_even_high",
                "peak_mem_mb", "base_peak_mem_mb", "max_abs_diff", "parity_ok", "label_agreement", "p", "verdict",
                "detectable", "se", "df", "level"]


@dataclass(frozen=True)
class Comparison:
    """`candidate` over `baseline` (values of `column`), paired on the shape; `along`: the columns its answer may
    change along; `replaces`: for a successor, the deprecated path it replaces."""

    label: str
    candidate: str
    baseline: str = REFERENCE
    column: str = "variant"
    along: tuple[str, ...] = ("model", "dtype", "batch_size", "seq_len", "image_size")
    replaces: str = ""


def without_aa(df: pd.DataFrame, column: str = "variant") -> pd.DataFrame:
    """`df` without the rows of A/A copies (config.is_aa): what a page may offer as options or candidates."""
    if not len(df) or column not in df:
        return df
    return df[~df[column].map(is_aa)]


# --- the verdict rule and the false-discovery step -------------------------------------------------------------------


def verdict(ci_low: float, ci_high: float, band: float = EQUIVALENCE) -> str:
    """The one verdict rule: 'faster'/'slower' (CI wholly above/below the band), 'equal' (inside), else 'undecided'."""
    if not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return UNDECIDED
    if ci_low > band:
        return FASTER
    if ci_high < 1 / band:
        return SLOWER
    if 1 / band <= ci_low and ci_high <= band:
        return EQUAL
    return UNDECIDED


def interval(ratio, se, df, level: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """The speed-up's interval at `level`: ratio × exp(±t·se), t at its own degrees of freedom."""
    h = variance.half_width(se, df, level)
    return np.asarray(ratio, dtype=float) * np.exp(-h), np.asarray(ratio, dtype=float) * np.exp(h)


def p_beyond_band(ratio, se, df, band: float = EQUIVALENCE) -> np.ndarray:
    """Two-sided p-value that the speed-up lies beyond the band: t = (|log ratio| − log band)/se at its degrees of
    freedom. p < α exactly where `interval` at level 1 − α lies wholly beyond the band."""
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = (np.abs(np.log(np.asarray(ratio, dtype=float))) - np.log(band)) / np.asarray(se, dtype=float)
        p = np.minimum(1.0, 2 * _st.t.sf(stat, np.maximum(np.asarray(df, dtype=float), 1.0)))
    return np.where(np.isfinite(p), p, 1.0)


def se_of(ci_low, ci_high, se, df) -> tuple[np.ndarray, np.ndarray]:
    """A speed-up's log SE and degrees of freedom: its own where known, else read from its 95% CI (normal)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        read = (np.log(np.asarray(ci_high, dtype=float)) - np.log(np.asarray(ci_low, dtype=float))) / (2 * _Z)
        se, df = (np.broadcast_to(np.asarray(x, dtype=float), np.shape(read)) for x in (se, df))
        own = np.isfinite(se) & (se > 0) & ~np.isnan(df)
    return np.where(own, se, read), np.where(own, df, np.inf)


def judge(table: pd.DataFrame, band: float = EQUIVALENCE, q: float = FDR) -> pd.DataFrame:
    """A copy of a pair table judged as one family at level 1 − max(R, 1)·q/m (docs/method.md, "The decision rule")."""
    t = table.copy()
    t["p"], t["verdict"], t["level"] = np.nan, None, np.nan
    ok = t.speedup.notna() if "speedup" in t else pd.Series(False, index=t.index)
    if not ok.any():
        return t
    r = t[ok]
    ratio = r.speedup.astype(float).to_numpy()
    se = r.se.astype(float).to_numpy() if "se" in r else np.full(len(r), np.nan)
    df = r.df.astype(float).to_numpy() if "df" in r else np.full(len(r), np.nan)
    se, df = se_of(r.ci_low.astype(float).to_numpy(), r.ci_high.astype(float).to_numpy(), se, df)
    p = _st.false_discovery_control(p_beyond_band(ratio, se, df, band), method="bh")
    level = 1 - max(int(np.sum(p <= q)), 1) * q / len(p)
    lo, hi = interval(ratio, se, df, level)
    t.loc[ok, "p"], t.loc[ok, "se"], t.loc[ok, "df"], t.loc[ok, "level"] = p, se, df, level
    t.loc[ok, "ci_low"], t.loc[ok, "ci_high"] = lo, hi
    t.loc[ok, "detectable"] = variance.detectable(se, df, band, level)
    t.loc[ok, "verdict"] = [verdict(a, b, band) for a, b in zip(lo, hi)]
    return t


# --- the A/A controls ------------------------------------------------------------------------------------------------


def aa_pairs(df: pd.DataFrame) -> pd.DataFrame:
    """Every A/A copy over its original at every shape, with its unadjusted 95% CI; `significant`: it excludes 1."""
    columns = [*PAIR_COLUMNS, "runtime", "shape", "significant"]
    if not len(df) or "variant" not in df:
        return pd.DataFrame(columns=columns)
    tables = [pair_table(df, v, original_of(v), judged=False) for v in dict.fromkeys(df.variant)
              if is_aa(v) and (df.variant == original_of(v)).any()]
    t = pd.concat([x for x in tables if len(x)], ignore_index=True) if any(len(x) for x in tables) else None
    if t is None or not (t.status == "ok").any():
        return pd.DataFrame(columns=columns)
    t = t[t.status == "ok"].copy()
    t["runtime"] = t.baseline
    t["shape"] = [shape_label(r, shape_columns(t)) for _, r in t.iterrows()]
    t["significant"] = [verdict(lo, hi, 1.0) != UNDECIDED for lo, hi in zip(t.ci_low, t.ci_high)]
    return t.reset_index(drop=True)


@dataclass(frozen=True)
class AACalibration:
    """How well the CIs hold on the A/A pairs: false positives with a Clopper–Pearson CI, mean z² with a χ² CI."""

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
        return wording.say("stats/aa_calibration.j2", c=self)


def aa_calibration(df: pd.DataFrame, *, pairs: pd.DataFrame | None = None) -> AACalibration:
    """The A/A calibration of a results table (or of A/A `pairs` already made by `aa_pairs`)."""
    aa = aa_pairs(df) if pairs is None else pairs
    n = len(aa)
    k = int(aa.significant.sum()) if n else 0
    ci = _st.binomtest(k, n).proportion_ci(method="exact") if n else None  # Clopper–Pearson
    low, high = (float(ci.low), float(ci.high)) if ci else (float("nan"), float("nan"))
    z = np.array([])
    if n:
        ratio, lo, hi = (aa[c].astype(float).to_numpy() for c in ("speedup", "ci_low", "ci_high"))
        se, dof = se_of(lo, hi, *(aa[c].astype(float) if c in aa else np.nan for c in ("se", "df")))
        usable = (ratio > 0) & (lo > 0) & (hi > lo) & np.isfinite(se) & (se > 0)
        z = calibration.z_of(np.log(ratio[usable]) / se[usable], dof[usable])
    mean, z_low, z_high = calibration.mean_z2_ci(np.asarray(z, dtype=float))
    return AACalibration(n, k, k / n if n else float("nan"), low, high, len(z), mean, z_low, z_high)


# --- pairing ---------------------------------------------------------------------------------------------------------


def match_columns(df: pd.DataFrame, column: str) -> list[str]:
    """The configuration fields two rows of a comparison along `column` must share (every field `df` has but it)."""
    return [c for c in FIELDS if c in df and c != column]


def matched(df: pd.DataFrame, candidate: str | Iterable[str] | None, baseline: str, *, column: str = "variant",
            baseline_where: dict[str, Any] | None = None, on: Iterable[str] | None = None) -> list[tuple[Any, Any]]:
    """(candidate row, baseline row or None) for every candidate row: the baseline matches on `on` (default
    match_columns) but for what `baseline_where` fixes, an ok row first. `candidate` None: every non-A/A value."""
    if not len(df) or column not in df:
        return []
    on = match_columns(df, column) if on is None else list(on)
    if candidate is None:
        cands = df[(df[column] != baseline) & ~df[column].map(is_aa)]
    else:
        cands = df[df[column].isin([candidate] if isinstance(candidate, str) else list(candidate))]
    base = df[df[column] == baseline]
    if "status" in base:
        base = base.sort_values("status", key=lambda s: s != "ok", kind="stable")
    index: dict[tuple, Any] = {}
    for _, b in base.iterrows():
        index.setdefault(tuple(key(b[c]) for c in on), b)
    out = []
    for _, r in cands.iterrows():
        fixed = {k: (v(r) if callable(v) else v) for k, v in (baseline_where or {}).items()}
        want = {c: r[c] for c in on} | fixed
        out.append((r, index.get(tuple(key(want[c]) for c in on))))
    return out


def paired(df: pd.DataFrame, candidate: str, baseline: str, *, column: str = "variant",
           on: Iterable[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(candidate rows, baseline rows), indexed 0..n-1, at every shape where `matched` finds both."""
    if not len(df) or column not in df:
        return df.iloc[:0], df.iloc[:0]
    df = df.reset_index(drop=True)
    pairs = [(c.name, b.name) for c, b in matched(df, candidate, baseline, column=column, on=on) if b is not None]
    return tuple(df.iloc[[p[i] for p in pairs]].reset_index(drop=True) for i in (0, 1))


def speedup(base, cand) -> Speedup:
    """`cand` over `base` (two results rows of any kind) with its 95% CI: variance.speedup."""
    return variance.speedup(base, cand)


def break_even(one_time_s: float, base_median_s: float, s: Speedup) -> tuple[float, float, float]:
    """(calls, low, high) to pay the one-time cost back at base_median × (1 − 1/speed-up) a call; ∞ if none."""
    def calls(ratio: float) -> float:
        saved = base_median_s * (1 - 1 / ratio) if ratio > 0 else 0.0
        return float(max(1, np.ceil(max(one_time_s, 0.0) / saved))) if saved > 0 else np.inf

    return calls(s.ratio), calls(s.ci_high), calls(s.ci_low)


def pair_record(base, cand) -> dict:
    """A pair-table row's numbers for `cand` over `base` (two ok rows)."""
    b, c = Measurement.of(base), Measurement.of(cand)
    s = speedup(b, c)
    n, n_lo, n_hi = break_even(c.one_time_s, b.steady_median_s, s)
    return {"speedup": s.ratio, "ci_low": s.ci_low, "ci_high": s.ci_high, "paired": s.paired, "se": s.se, "df": s.df,
            "base_median_s": b.steady_median_s, "median_s": c.steady_median_s, "one_time_s": c.one_time_s,
            "break_even": n, "break_even_low": n_lo, "break_even_high": n_hi, "peak_mem_mb": c.peak_mem_mb,
            "max_abs_diff": c.max_abs_diff, "parity_ok": c.parity_ok, "label_agreement": c.label_agreement,
            "base_peak_mem_mb": b.peak_mem_mb}


def pair_table(df: pd.DataFrame, candidate: str | Iterable[str] | None, baseline: str = REFERENCE, *,
               column: str = "variant", baseline_where: dict[str, Any] | None = None,
               band: float = EQUIVALENCE, judged: bool = True) -> pd.DataFrame:
    """One PAIR_COLUMNS row per candidate shape, judged as one family (`judged` False: 95% CIs, no verdict)."""
    on = [c for c in match_columns(df, column) if c not in ("device", "threads")]
    out = []
    for cand, base in matched(df, candidate, baseline, column=column, baseline_where=baseline_where):
        status = cand.get("status", "ok")
        rec = {c: cand[c] for c in on} | {column: cand[column], "candidate": cand[column], "baseline": baseline,
                                           "status": status,
                                           "error": "" if status == "ok" else f"{cand[column]}: {cand.get('error', '')}"}
        rec |= {"baseline_" + k: base[k] for k in (baseline_where or {}) if base is not None}
        if base is None:
            rec |= {"status": "baseline missing", "error": f"no {baseline} row for this shape"} if status == "ok" else {}
        elif status == "ok" and base.get("status", "ok") != "ok":
            rec |= {"status": base.status, "error": f"{base[column]}: {base.get('error', '')}"}
        elif status == "ok":
            rec |= pair_record(base, cand)
        out.append(rec)
    t = pd.DataFrame(out)
    t = t.reindex(columns=[*on, column, *[c for c in t.columns if c.startswith("baseline_")], *PAIR_COLUMNS])
    return judge(t, band) if judged else t


# --- pooling ---------------------------------------------------------------------------------------------------------


def geomean(df: pd.DataFrame, candidate: str, baseline: str = REFERENCE, *, column: str = "variant",
            where: pd.Series | None = None) -> Speedup | None:
    """The geometric-mean speed-up over the shapes both ran ok, with its 95% CI; None where no shape has both."""
    d = df[where] if where is not None else df
    pairs = [(b, c) for c, b in matched(d, candidate, baseline, column=column)
             if b is not None and c.get("status", "ok") == "ok" and b.get("status", "ok") == "ok"]
    return geomean_of(pairs) if pairs else None


def geomean_of(pairs: Iterable[tuple[Any, Any]]) -> Speedup:
    """The geometric-mean speed-up over (baseline row, candidate row) pairs already matched, with its 95% CI."""
    return combine(speedup(b, c) for b, c in pairs)


def combine(cells: Iterable) -> Speedup:
    """The geometric mean of speed-ups (Speedups, verdicts or triples) with its 95% CI (docs/method.md)."""
    logs, parts, all_paired = [], [], True
    for c in cells:
        ratio, lo, hi = (c.speedup, c.ci_low, c.ci_high) if hasattr(c, "speedup") else tuple(c)[:3]
        if not (np.isfinite(ratio) and ratio > 0):
            continue
        se, df = (float(x) for x in se_of(lo, hi, getattr(c, "se", np.nan), getattr(c, "df", np.nan)))
        logs.append(np.log(ratio))
        parts.append((se, df))
        all_paired &= bool(getattr(c, "paired", True))
    n = len(logs)
    if not n:
        return Speedup(float("nan"), float("nan"), float("nan"), n=0)
    e = variance.Estimate(float(np.mean(logs)), float(np.sqrt(sum(s ** 2 for s, _ in parts))) / n,
                          variance.satterthwaite([(s ** 2 / n ** 2, d) for s, d in parts]))
    return variance.to_speedup(e, paired=all_paired, n=n)


def ratio_of(a: Speedup | tuple, b: Speedup | tuple) -> Speedup:
    """a ÷ b for speed-ups measured independently (in different processes): their log half-widths in quadrature."""
    (av, alo, ahi), (bv, blo, bhi) = tuple(a)[:3], tuple(b)[:3]
    v = av / bv
    lo = v * np.exp(-np.hypot(np.log(av / alo), np.log(bhi / bv)))
    hi = v * np.exp(np.hypot(np.log(ahi / av), np.log(bv / blo)))
    return Speedup(float(v), float(lo), float(hi), paired=False)
