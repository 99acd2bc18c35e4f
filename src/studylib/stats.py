"""Statistics of timing samples: summaries, bootstrap CIs of the median, speed-up ratios with CIs."""

from __future__ import annotations

import numpy as np
from scipy import stats as _st

CONFIDENCE = 0.95


def summarize(samples) -> dict[str, float]:
    """median, mean, p90, p99, iqr (seconds) and cv (std/mean) of per-call samples."""
    x = np.asarray(samples, dtype=float)
    q25, q50, q75, q90, q99 = np.percentile(x, [25, 50, 75, 90, 99])
    mean = float(x.mean())
    cv = float(x.std(ddof=1) / mean) if len(x) > 1 and mean > 0 else 0.0
    return {"median": float(q50), "mean": mean, "p90": float(q90), "p99": float(q99), "iqr": float(q75 - q25), "cv": cv}


def _median(x, axis=-1):
    return np.median(x, axis=axis)


def median_ci(samples, *, n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap CI of the median (scipy.stats.bootstrap)."""
    x = np.asarray(samples, dtype=float)
    if len(x) < 2 or np.all(x == x[0]):
        m = float(np.median(x))
        return m, m
    res = _st.bootstrap((x,), _median, confidence_level=CONFIDENCE, n_resamples=n_resamples,
                        method="percentile", vectorized=True, rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _ratio_of_medians(base, new, axis=-1):
    return np.median(base, axis=axis) / np.median(new, axis=axis)


def speedup_ci(baseline, candidate, *, n_resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Speed-up median(baseline)/median(candidate) with its 95% bootstrap CI (independent samples)."""
    b, c = np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float)
    ratio = float(np.median(b) / np.median(c))
    if len(b) < 2 or len(c) < 2:
        return ratio, ratio, ratio
    res = _st.bootstrap((b, c), _ratio_of_medians, confidence_level=CONFIDENCE, n_resamples=n_resamples,
                        method="percentile", vectorized=True, paired=False, rng=np.random.default_rng(seed))
    return ratio, float(res.confidence_interval.low), float(res.confidence_interval.high)


def geomean_speedup_ci(pairs, *, n_resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Geometric mean over configurations of median(baseline)/median(candidate), with a 95% bootstrap CI.

    `pairs` is a list of (baseline_samples, candidate_samples). Each resample draws every configuration's
    two sample sets with replacement, so the CI carries each configuration's timing noise (the set of
    configurations is fixed: it is the grid, not a sample of one).
    """
    rng = np.random.default_rng(seed)
    point, draws = [], np.zeros(n_resamples)
    for base, cand in pairs:
        b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
        point.append(np.log(np.median(b) / np.median(c)))
        rb = b[rng.integers(0, len(b), (n_resamples, len(b)))]
        rc = c[rng.integers(0, len(c), (n_resamples, len(c)))]
        draws += np.log(np.median(rb, axis=1) / np.median(rc, axis=1))
    n = len(point)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    lo, hi = np.percentile(draws / n, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
    return float(np.exp(np.mean(point))), float(np.exp(lo)), float(np.exp(hi))
