"""Is a re-run consistent with the reference's intervals? `compare --check`, calibrated (docs/method.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as _st

from ..core import cells, wording
from . import variance

Z = float(_st.norm.ppf(0.975))
TOST_ALPHA = 0.05  # each of the two one-sided tests at 5%: the 90% CI of the difference
TOLERANCE = 0.10  # two runs' speed-ups "agree" within ±10% (a difference of two ±3–4% CIs is ±5–6% wide)
CHECK_ALPHA = 0.01  # the binomial tests' level: each fails a calibrated pair about once in a hundred
# What --check requires: (low, high) of each summary figure; None: no bound on that side.
LIMITS = {
    "speedup_mean_z2": (0.5, 1.5),
    "speedup_share_z_over_1_96": (None, 0.10),
    "reversed": (None, 0),
    "reproduced_below_expected_p": (CHECK_ALPHA, None),
    "not_reproduced_beyond_chance_p": (CHECK_ALPHA, None),
}


def combined(se_a, df_a, se_b, df_b) -> tuple[np.ndarray, np.ndarray]:
    """The SE of a difference of two independent estimates and its Satterthwaite degrees of freedom."""
    va, vb = np.asarray(se_a, dtype=float) ** 2, np.asarray(se_b, dtype=float) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (va + vb) ** 2 / (va ** 2 / np.asarray(df_a, dtype=float) + vb ** 2 / np.asarray(df_b, dtype=float))
    return np.sqrt(va + vb), df


def z_of(t, df) -> np.ndarray:
    """The standard normal quantile of a t statistic's probability at `df` degrees of freedom (from the tail)."""
    t, df = np.asarray(t, dtype=float), np.maximum(np.asarray(df, dtype=float), 1.0)
    return np.sign(t) * _st.norm.isf(_st.t.sf(np.abs(t), df))


def median_z(medians: pd.DataFrame, ref_rows: dict, new_rows: dict) -> pd.DataFrame:
    """Per configuration: the change of log median beyond the common shift, and its z."""
    t = medians.copy()
    d = np.log(t.new_median_s.astype(float) / t.ref_median_s.astype(float))
    shift = float(d.mean()) if len(d) else 0.0

    def se_df(rows, keys):
        return [cells.number(rows[k].se_log) for k in keys], [cells.number(rows[k].df_log) for k in keys]

    keys = list(zip(t.notebook, t.config_key))
    se, df = combined(*se_df(ref_rows, keys), *se_df(new_rows, keys))
    t["d_log"] = d - shift
    t["z"] = z_of(t.d_log / se, df) if len(t) else []
    t.attrs["shift_log"] = shift
    t.attrs["shift_z"] = shift / (float(d.std(ddof=1)) / np.sqrt(len(d))) if len(d) > 1 and d.std(ddof=1) > 0 else 0.0
    return t


def speedup_z(pairs: pd.DataFrame, tolerance: float = TOLERANCE) -> pd.DataFrame:
    """Per comparison: z of the log speed-up difference, inside the reference's CI or not, the TOST verdict."""
    t = pairs.copy()
    diff = np.log(t.new_ratio.astype(float)) - np.log(t.ref_ratio.astype(float))
    se, df = combined(t.ref_se, t.ref_df, t.new_se, t.new_df)
    t["d_log"], t["se_log"], t["df"] = diff, se, df
    t["z"] = z_of(diff / se, df)
    t["new_in_ref_ci"] = (t.ref_ci_low <= t.new_ratio) & (t.new_ratio <= t.ref_ci_high)
    edge = np.log1p(tolerance)
    h = _tost_half(se, df)
    lo, hi = diff - h, diff + h
    t["reproduction"] = np.where((lo >= -edge) & (hi <= edge), "reproduced",
                                 np.where((lo > edge) | (hi < -edge), "not reproduced", "undecided"))
    t["reproduction_expected"] = reproduction_probability(se, df, tolerance)
    t["not_reproduced_chance"] = not_reproduced_probability(se, df, tolerance)
    return t


def _tost_half(se, df) -> np.ndarray:
    """Half the width of the TOST's interval of a difference (its 1 − 2α interval)."""
    return variance.half_width(se, df, 1 - 2 * TOST_ALPHA)


def reproduction_probability(se, df, tolerance: float = TOLERANCE) -> np.ndarray:
    """P(called reproduced) when nothing changed: d ~ N(0, se²) passes the TOST when |d| + t·se < log(1 + tolerance)."""
    se = np.asarray(se, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.maximum(np.log1p(tolerance) - _tost_half(se, df), 0.0) / se
        return np.where(np.isfinite(room), 2 * _st.norm.cdf(room) - 1, np.nan)


def not_reproduced_probability(se, df, tolerance: float = TOLERANCE) -> np.ndarray:
    """P(called not reproduced) when nothing changed: d ~ N(0, se²) beyond ±tolerance by more than t·se."""
    se = np.asarray(se, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        beyond = (np.log1p(tolerance) + _tost_half(se, df)) / se
        return np.where(np.isfinite(beyond), 2 * _st.norm.sf(beyond), np.nan)


def effective_comparisons(pairs: pd.DataFrame) -> int:
    """How many independent speed-ups `pairs` rest on: per group, min(pairs, configurations − 1)."""
    if not len(pairs) or not {"notebook", "group", "a", "b"} <= set(pairs.columns):
        return len(pairs)
    return int(sum(min(len(g), len(set(g.a) | set(g.b)) - 1) for _, g in pairs.groupby(["notebook", "group"])))


def binomial_tests(decided: pd.DataFrame) -> dict:
    """The two one-sided binomial tests of `decided`, counts scaled to effective_comparisons."""
    n = len(decided)
    if not n:
        return {"reproduced_below_expected_p": np.nan, "not_reproduced_beyond_chance_p": np.nan, "effective": 0}
    n_eff = max(1, min(n, effective_comparisons(decided)))
    scale = n_eff / n
    reproduced = int(round(float((decided.reproduction == "reproduced").sum()) * scale))
    bad = int((decided.reproduction == "not reproduced").sum())
    bad_eff = int(np.ceil(bad * scale)) if bad else 0
    expected = float(np.clip(np.nanmean(decided.reproduction_expected), 0.0, 1.0))
    chance = float(np.clip(np.nanmean(decided.not_reproduced_chance), 0.0, 1.0))
    return {"reproduced_below_expected_p": float(_st.binomtest(reproduced, n_eff, expected, "less").pvalue),
            "not_reproduced_beyond_chance_p": float(_st.binomtest(bad_eff, n_eff, chance, "greater").pvalue),
            "effective": n_eff}


def mean_z2_ci(z: np.ndarray) -> tuple[float, float, float]:
    """Mean z² with its 95% interval (chi-square with len(z) degrees of freedom, as for calibrated z)."""
    z = z[np.isfinite(z)]
    n = len(z)
    if not n:
        return np.nan, np.nan, np.nan
    m = float(np.mean(z ** 2))
    return m, m * n / _st.chi2.ppf(0.975, n), m * n / _st.chi2.ppf(0.025, n)


@dataclass
class Calibration:
    """compare's figures as a calibrated test: per-configuration and per-comparison z, and their summaries."""

    medians: pd.DataFrame
    pairs: pd.DataFrame
    summary: dict

    def failures(self, limits: dict = LIMITS) -> list[str]:
        """The summary figures outside `limits`, each as one line; [] when every figure is inside."""
        out = []
        for key, (lo, hi) in limits.items():
            v = self.summary.get(key)
            if cells.value(v) is None:
                out.append(f"{key}: not measured (no comparison in both runs)")
            elif (lo is not None and v < lo) or (hi is not None and v > hi):
                out.append(f"{key} = {v:.3g}, outside [{'-' if lo is None else lo}, {'-' if hi is None else hi}]")
        return out


def calibrate(medians: pd.DataFrame, pairs: pd.DataFrame, ref_rows: dict, new_rows: dict,
              tolerance: float = TOLERANCE) -> Calibration:
    """The calibration of a compare (its `medians` and `pairs`; the two runs' rows by (notebook, config_key))."""
    m = median_z(medians, ref_rows, new_rows)
    p = speedup_z(pairs, tolerance)
    mz, mz_lo, mz_hi = mean_z2_ci(m.z.to_numpy(dtype=float)) if len(m) else (np.nan,) * 3
    sz, sz_lo, sz_hi = mean_z2_ci(p.z.to_numpy(dtype=float)) if len(p) else (np.nan,) * 3
    decided = p[p.ref_verdict != "unclear"] if len(p) else p
    summary = {
        "shift_pct": 100 * float(np.expm1(m.attrs.get("shift_log", 0.0))), "shift_z": m.attrs.get("shift_z", 0.0),
        "median_mean_z2": mz, "median_mean_z2_ci": (mz_lo, mz_hi),
        "median_share_z_over_1_96": float((m.z.abs() > Z).mean()) if len(m) else np.nan,
        "speedup_mean_z2": sz, "speedup_mean_z2_ci": (sz_lo, sz_hi),
        "speedup_share_z_over_1_96": float((p.z.abs() > Z).mean()) if len(p) else np.nan,
        "new_speedup_in_ref_ci_share": float(p.new_in_ref_ci.mean()) if len(p) else np.nan,
        "same_share_of_decided": float((decided.outcome == "same").mean()) if len(decided) else np.nan,
        "reversed": int((p.outcome == "reversed").sum()) if len(p) else 0,
        "reproduced_share_of_decided": float((decided.reproduction == "reproduced").mean()) if len(decided) else np.nan,
        "reproduced_expected_of_decided": float(decided.reproduction_expected.mean()) if len(decided) else np.nan,
        "not_reproduced_of_decided": int((decided.reproduction == "not reproduced").sum()) if len(decided) else 0,
        "not_reproduced_chance_of_decided": float(decided.not_reproduced_chance.mean()) if len(decided) else np.nan,
        **{k if k != "effective" else "effective_decided": v for k, v in binomial_tests(decided).items()},
        "comparisons": len(p), "decided": len(decided), "tolerance": tolerance,
        **{f"reproduction_{k.replace(' ', '_')}": int((p.reproduction == k).sum())
           for k in ("reproduced", "not reproduced", "undecided")},
    }
    return Calibration(m, p, summary)


def format_calibration(c: Calibration) -> str:
    """The calibration as text: what each figure means, its value, and (with --check) which are outside limits."""
    return wording.block("stats/calibration.txt.j2", s=c.summary, bad=c.failures(), alpha=CHECK_ALPHA)


def rerun_interval(ratio: float, se: float, df: float) -> tuple[float, float]:
    """95% prediction interval of a same-host re-run's speed-up (the two estimates differ by N(0, 2·se²))."""
    if not (np.isfinite(ratio) and ratio > 0 and np.isfinite(se) and se > 0):
        return float("nan"), float("nan")
    half = float(variance.half_width(np.sqrt(2) * se, df if df > 0 else np.inf))
    return float(ratio * np.exp(-half)), float(ratio * np.exp(half))
