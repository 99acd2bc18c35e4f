"""Statistics of timing samples: summaries, a median's CI, pairing by round, drift (docs/method.md, "Timing samples")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

CONFIDENCE = 0.95
N_RESAMPLES = 2000
DRIFT_P = 0.01  # a monotone trend over the samples' order with p below this is flagged


def summarize(samples) -> dict[str, float]:
    """median, mean, p90, p99, iqr (seconds) and cv (std/mean) of per-call samples."""
    x = np.asarray(samples, dtype=float)
    q25, q50, q75, q90, q99 = np.percentile(x, [25, 50, 75, 90, 99])
    mean = float(x.mean())
    cv = float(x.std(ddof=1) / mean) if len(x) > 1 and mean > 0 else 0.0
    return {"median": float(q50), "mean": mean, "p90": float(q90), "p99": float(q99), "iqr": float(q75 - q25), "cv": cv}


def order_stat_ci(values, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, coverage): the distribution-free CI of the median, [x_(j), x_(n+1-j)], j the largest index whose
    exact coverage 1 − 2·P(Binomial(n, ½) < j) is at least `confidence` (below n = 6: [min, max], its coverage)."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        return float("nan"), float("nan"), 0.0
    if n == 1:
        return float(x[0]), float(x[0]), 0.0
    alpha = 1 - confidence
    j = int(_st.binom.ppf(alpha / 2, n, 0.5))  # smallest k with cdf(k) ≥ alpha/2
    while j >= 1 and 2 * _st.binom.cdf(j - 1, n, 0.5) > alpha:
        j -= 1
    j = max(j, 1)
    coverage = 1 - 2 * _st.binom.cdf(j - 1, n, 0.5)
    return float(x[j - 1]), float(x[n - j]), float(coverage)


def _by_replicate(values, reps) -> list[np.ndarray]:
    values = np.asarray(values, dtype=float)
    if reps is None:
        return [values]
    reps = np.asarray(reps)
    return [values[reps == r] for r in dict.fromkeys(reps.tolist())]


def hierarchical_median_draws(groups: list[np.ndarray], *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> np.ndarray:
    """Bootstrap medians: replicates drawn with replacement, then values within each drawn replicate."""
    rng = np.random.default_rng(seed)
    k = len(groups)
    sizes = np.array([len(g) for g in groups])
    width = int(sizes.max())
    padded = np.full((k, width), np.nan)
    for i, g in enumerate(groups):
        padded[i, :len(g)] = g
    pick = rng.integers(0, k, (n_resamples, k))  # which replicate fills each slot
    n_of = sizes[pick]  # (B, k)
    idx = (rng.random((n_resamples, k, width)) * n_of[..., None]).astype(int)
    drawn = padded[pick[..., None], idx]  # (B, k, width)
    drawn[np.arange(width)[None, None, :] >= n_of[..., None]] = np.nan
    return np.nanmedian(drawn.reshape(n_resamples, -1), axis=1)


def median_ci(samples, replicates=None, *, confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """95% CI of the median: order-statistic, with several `replicates` its hull with the hierarchical bootstrap's."""
    x = np.asarray(samples, dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan")
    lo, hi, _ = order_stat_ci(x, confidence)
    groups = _by_replicate(x, replicates)
    if len(groups) > 1:
        draws = hierarchical_median_draws(groups, seed=seed)
        q = [100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2]
        blo, bhi = np.percentile(draws, q)
        lo, hi = min(lo, float(blo)), max(hi, float(bhi))
    return lo, hi


@dataclass(frozen=True)
class Speedup:
    """baseline time / candidate time with its 95% CI; above 1 means the candidate is faster."""

    ratio: float
    ci_low: float
    ci_high: float
    paired: bool = True  # from per-round ratios (False: ratio of medians of rows measured apart)
    n: int = 0  # rounds paired (or the smaller sample count, unpaired)
    se: float = float("nan")  # standard error of the log speed-up (variance.py)
    df: float = float("nan")  # its degrees of freedom

    def __iter__(self):  # ratio, low, high = speedup
        return iter((self.ratio, self.ci_low, self.ci_high))

    def __getitem__(self, i):  # speedup[0] is the ratio, [1] and [2] the CI's ends
        return (self.ratio, self.ci_low, self.ci_high)[i]


def paired_log_ratios(base, cand) -> tuple[np.ndarray, np.ndarray] | None:
    """log(baseline/candidate) per shared round, with each one's replicate; None if the rows share no rounds."""
    if base.sample_round is None or cand.sample_round is None:
        return None
    if base.group_id is None or base.group_id != cand.group_id:
        return None  # rounds of different groups (or runs) are not the same moments
    bx, br, bn = base.samples()
    cx, cr, cn = cand.samples()
    b = {(int(r), int(k)): v for r, k, v in zip(br, bn, bx)}
    c = {(int(r), int(k)): v for r, k, v in zip(cr, cn, cx)}
    keys = [k for k in b if k in c]
    if not keys:
        return None
    logs = np.log([b[k] for k in keys]) - np.log([c[k] for k in keys])
    return logs, np.array([k[0] for k in keys])


def drift(samples, replicates=None) -> dict[str, float | bool]:
    """A trend within each replicate: Kendall's tau, Bonferroni p, its Theil–Sen size as a share, the flag."""
    x = np.asarray(samples, dtype=float)
    groups = [g for g in _by_replicate(x, replicates) if len(g) >= 4]
    if not groups or np.median(x) <= 0:
        return {"drift_tau": None, "drift_p": None, "drift_pct": None, "drift": False}
    taus, ps, changes = [], [], []
    for g in groups:
        if np.all(g == g[0]):
            taus.append(0.0), ps.append(1.0), changes.append(0.0)
            continue
        t = _st.kendalltau(np.arange(len(g)), g)
        slope = _st.theilslopes(g).slope
        taus.append(float(t.statistic)), ps.append(float(t.pvalue)), changes.append(slope * (len(g) - 1) / np.median(g))
    worst = int(np.argmin(ps))
    p = min(1.0, ps[worst] * len(groups))
    return {"drift_tau": taus[worst], "drift_p": p, "drift_pct": float(changes[worst]), "drift": bool(p < DRIFT_P)}


def common_share(deviations: list[dict]) -> float:
    """ρ from each unit's {replicate: deviation}; 0 with fewer than two units or replicates (docs/method.md)."""
    devs = [d for d in deviations if len(d) >= 2]
    reps = sorted({rep for d in devs for rep in d}, key=str)
    if len(devs) < 2 or len(reps) < 2:
        return 0.0
    g = len(devs)
    total = float(np.mean([np.sum(np.square(list(d.values()))) / (len(d) - 1) for d in devs]))
    common = np.array([np.mean([d[rep] for d in devs if rep in d]) for rep in reps])
    shared = (float(np.sum(common ** 2)) / (len(reps) - 1) - total / g) / (1 - 1 / g)
    return float(np.clip(shared / total, 0.0, 1.0)) if total > 0 else 0.0
