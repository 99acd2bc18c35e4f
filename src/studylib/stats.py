"""Statistics of timing samples: medians with CIs valid at small n, paired speed-ups, drift.

Samples come from interleaved rounds (see timing.measure_rounds), possibly in several independent
processes (replicates). A results row carries its per-round samples with two aligned lists,
`sample_rep` and `sample_round`, so two variants of one group pair round by round.

- The CI of a median within one run (`median_ci`, stored as `ci_run_low_s`/`ci_run_high_s`) is the
  distribution-free order-statistic interval (exact binomial coverage, valid at any n ≥ 6); with several
  replicates it is widened to the hierarchical bootstrap interval (replicates resampled, then rounds).
- The CI a median is reported with (`ci_low_s`/`ci_high_s`, see `with_reported_ci`) must also hold for
  a re-run, in other processes at other moments. On a shared machine two processes measuring the same
  group minutes apart differ by as much as 30%, alike for every variant of the group (the machine's
  phase, not the code). With two replicates a row cannot estimate that from its own samples, so the
  spread between processes is pooled over a table's rows (`between_process_spread`, degrees of freedom
  counted by groups, since a group's rows share their processes) and added to the run's interval.
  A whole run can also lie in a faster or slower phase than the next one, shifting every median alike:
  no interval built from one run's processes sees that. A profile states it (`run_shift_pct`, the SD of
  that shift as same-host re-runs measured it with `compare`); rows carry it and the reported interval
  adds it too (`run_shift_half_width`). Two medians of one run share that shift, so ratios leave it out.
  Speed-ups pair rounds within a process, so the machine's phase cancels in them. What can remain is a
  pair settling differently in each process (memory placement of a copy, thread pinning): its spread
  beyond sampling noise is estimated over the table's pairs (`between_process_ratio_spread`,
  DerSimonian–Laird) and added to each speed-up's CI the same way; it is usually far smaller.
- A speed-up is the median of the per-round ratios baseline/candidate: drift common to a round cancels.
  Its CI is built the same way on the log ratios. Rows that were not measured in the same rounds fall
  back to the ratio of the two medians, with the conservative CI from their 97.5% median CIs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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
    """(low, high, coverage): the distribution-free CI of the median from order statistics.

    For n values the interval [x_(j), x_(n+1-j)] covers the true median with probability
    1 - 2·P(Binomial(n, ½) < j), exactly, for any continuous distribution. j is the largest index that
    keeps that coverage at or above `confidence`; below n = 6 no such j exists at 95%, and the interval
    is [min, max] with its (lower) coverage reported.
    """
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        return float("nan"), float("nan"), 0.0
    if n == 1:
        return float(x[0]), float(x[0]), 0.0
    alpha = 1 - confidence
    # largest j with 2·P(B ≤ j-1) ≤ alpha
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


def _percentile_ci(draws: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(draws, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
    return float(lo), float(hi)


def median_ci(samples, replicates=None, *, confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """95% CI of the median of `samples`; `replicates` (aligned ids) makes it hierarchical.

    One replicate: the order-statistic interval. Several: the hull of that interval (over all values)
    and the hierarchical bootstrap interval, so it holds both within a process and across processes.
    """
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
class ProcessSpread:
    """How far a median moves between processes: the SD of log replicate medians around their row's mean."""

    sigma: float  # pooled SD of log(replicate median), per process
    df: float  # effective degrees of freedom behind sigma (see between_process_spread)
    rows: int  # rows it was pooled over
    common_share: float  # share of the squared deviations that is a group's common shift per replicate

    @property
    def pct(self) -> float:
        """sigma as a percentage of the median (one process's typical shift)."""
        return 100 * float(np.expm1(self.sigma))

    def half_width(self, replicates: int, confidence: float = CONFIDENCE) -> float:
        """Half-width (log scale) of the interval for a median pooled over `replicates` processes."""
        t = _st.t.ppf((1 + confidence) / 2, max(self.df, 1))
        return float(t * self.sigma / np.sqrt(max(replicates, 1)))


def between_process_spread(rows: Iterable[Any]) -> ProcessSpread | None:
    """The spread of medians between replicate processes, pooled over the 'ok' rows with ≥ 2 replicates.

    Per row, each replicate's median in logs minus the row's mean of them; the squared deviations are
    pooled over rows (one-way ANOVA: divided by the rows' replicates - 1). A group's rows share their
    processes, so part of each deviation is the group's common shift in that replicate (the machine's
    phase) and has only as many degrees of freedom as there are groups; the rest has the rows' remaining
    ones. The t quantile uses the Satterthwaite effective degrees of freedom of the two parts' sum.
    None where no row has two replicates.
    """
    ss, row_df, n_rows, devs = 0.0, 0, 0, {}
    for row in rows:
        if _field(row, "status") != "ok" or not _present(_field(row, "samples_s")):
            continue
        x, reps, _ = row_samples(row)
        ids = list(dict.fromkeys(reps.tolist()))
        medians = np.log([np.median(x[reps == r]) for r in ids])
        if len(medians) < 2 or not np.all(np.isfinite(medians)):
            continue
        d = medians - medians.mean()
        ss += float(np.sum(d ** 2))
        row_df += len(medians) - 1
        n_rows += 1
        devs.setdefault(_field(row, "group_id") or _field(row, "config_key"), []).append(dict(zip(ids, d)))
    if not row_df:
        return None
    common, group_df = 0.0, 0
    for group in devs.values():
        replicate_ids = {r for d in group for r in d}
        shift = {r: np.mean([d[r] for d in group if r in d]) for r in replicate_ids}
        common += sum(shift[r] ** 2 for d in group for r in d)
        group_df += len(replicate_ids) - 1
    a, b = common / row_df, (ss - common) / row_df  # the common and the row-specific parts of sigma²
    resid_df = row_df - group_df
    df = (a + b) ** 2 / (a ** 2 / group_df + (b ** 2 / resid_df if resid_df > 0 else 0.0)) if a + b > 0 else row_df
    return ProcessSpread(sigma=float(np.sqrt(ss / row_df)), df=float(min(df, row_df)), rows=n_rows,
                         common_share=float(common / ss) if ss > 0 else 0.0)


def run_shift_half_width(row: Any, confidence: float = CONFIDENCE) -> float:
    """Half-width (log scale) for the shift between whole runs that the row's profile states (`run_shift_pct`,
    stamped on the row when it was measured); 0 where it states none."""
    pct = _field(row, "run_shift_pct")
    if not _present(pct) or pct <= 0:
        return 0.0
    return float(_st.norm.ppf((1 + confidence) / 2) * np.log1p(pct / 100))


def reported_ci(row: Any, spread: ProcessSpread | None, confidence: float = CONFIDENCE, *,
                across_runs: bool = True) -> tuple[float, float]:
    """The CI a row's median is reported with: its samples' interval widened by the spread between processes
    and, `across_runs`, by the shift between whole runs its profile states.

    On each side the order-statistic half-width of all the row's samples (log scale), the between-process
    half-width for the row's replicate count and the run-to-run half-width add in quadrature; the result is
    never narrower than the run's own interval (where this row's replicates disagree more than the table's
    typical spread, that disagreement stays). Without either term: the run's interval. Two medians of one
    run share its shift, so a ratio between them leaves it out (`across_runs=False`).
    """
    lo, hi = _field(row, "ci_run_low_s"), _field(row, "ci_run_high_s")
    median = _field(row, "median_s")
    h_run = run_shift_half_width(row, confidence) if across_runs else 0.0
    if (spread is None and not h_run) or not (_present(lo) and _present(hi) and _present(median)) \
            or median <= 0 or lo <= 0 or not _present(_field(row, "samples_s")):
        return lo, hi
    x, reps, _ = row_samples(row)
    if confidence != CONFIDENCE:
        lo, hi = median_ci(x, reps, confidence=confidence)
    olo, ohi, _ = order_stat_ci(x, confidence)
    h = float(np.hypot(spread.half_width(len(np.unique(reps)), confidence) if spread is not None else 0.0, h_run))
    below, above = np.log(median / olo), np.log(ohi / median)
    return (min(lo, float(median * np.exp(-np.hypot(below, h)))),
            max(hi, float(median * np.exp(np.hypot(above, h)))))


def with_reported_ci(rows: list[dict]) -> list[dict]:
    """Copies of a table's rows with the reported CI (`ci_low_s`, `ci_high_s`), the run's own
    (`ci_run_low_s`, `ci_run_high_s`) and the table's between-process spread (`process_spread_pct`).

    Rows stored before the run's interval had its own name carry it as `ci_low_s`/`ci_high_s`."""
    out = []
    for row in rows:
        row = dict(row)
        if "ci_run_low_s" not in row:
            row["ci_run_low_s"], row["ci_run_high_s"] = row.get("ci_low_s"), row.get("ci_high_s")
        out.append(row)
    spread, ratios = between_process_spread(out), between_process_ratio_spread(out)
    for row in out:
        ok = row.get("status") == "ok"
        row["ci_low_s"], row["ci_high_s"] = reported_ci(row, spread) if ok else (row["ci_run_low_s"], row["ci_run_high_s"])
        row["process_spread_pct"] = spread.pct if spread is not None and ok else None
        # carried so that speed-ups between rows of this table (speedup, geomean_speedup) can add them
        row["process_sigma"], row["process_df"] = (spread.sigma, spread.df) if spread is not None and ok else (None, None)
        row["ratio_tau"], row["ratio_df"] = (ratios.tau, ratios.df) if ratios is not None and ok else (None, None)
    return out


@dataclass(frozen=True)
class RatioSpread:
    """How far a paired speed-up moves between processes beyond its sampling noise (log scale).

    Two copies of one model, or two runtimes, can settle differently in each process (memory placement,
    thread pinning): the per-round ratios then agree within a process and differ between processes."""

    tau: float  # SD of a pair's log speed-up between processes (DerSimonian–Laird, pooled over pairs)
    df: int  # the pairs' replicates - 1, summed
    pairs: int

    def half_width(self, replicates: int, confidence: float = CONFIDENCE) -> float:
        t = _st.t.ppf((1 + confidence) / 2, max(self.df, 1))
        return float(t * self.tau / np.sqrt(max(replicates, 1)))


def between_process_ratio_spread(rows: list[Any]) -> RatioSpread | None:
    """The between-process spread of paired speed-ups, pooled over a table's groups.

    In each group (rows sharing a group_id, 'ok'), every row is paired with the group's first (its
    baseline); each replicate gives a median log ratio and, from its order-statistic CI, a sampling
    variance. The DerSimonian–Laird estimate of the variance between replicates beyond that sampling
    noise, pooled over every pair (Q and its expectation summed), is tau² (0 when the replicates agree
    as well as their noise allows). None without a pair measured in two replicates.
    """
    groups: dict[Any, list] = {}
    for row in rows:
        if _field(row, "status") == "ok" and _present(_field(row, "samples_s")) and _field(row, "group_id"):
            groups.setdefault(_field(row, "group_id"), []).append(row)
    q = df = c = 0.0
    pairs = 0
    for members in groups.values():
        for cand in members[1:]:
            paired = paired_log_ratios(members[0], cand)
            if paired is None:
                continue
            logs, reps = paired
            ys, vs = [], []
            for r in dict.fromkeys(reps.tolist()):
                x = logs[reps == r]
                if len(x) < 2:
                    continue
                lo, hi, coverage = order_stat_ci(x)
                z = _st.norm.ppf((1 + coverage) / 2) if coverage > 0 else 1.0
                ys.append(float(np.median(x)))
                vs.append(max(((hi - lo) / (2 * z)) ** 2, 1e-12))
            if len(ys) < 2:
                continue
            w, y = 1 / np.array(vs), np.array(ys)
            mean = float(np.sum(w * y) / np.sum(w))
            q += float(np.sum(w * (y - mean) ** 2))
            df += len(y) - 1
            c += float(np.sum(w) - np.sum(w ** 2) / np.sum(w))
            pairs += 1
    if not pairs:
        return None
    tau2 = max(0.0, (q - df) / c) if c > 0 else 0.0
    return RatioSpread(tau=float(np.sqrt(tau2)), df=int(df), pairs=pairs)


def _table_spreads(row: Any) -> tuple[ProcessSpread | None, RatioSpread | None]:
    """The spreads `with_reported_ci` stamped on a row of its table (None where it was not read through it)."""
    sigma, sdf, tau, tdf = (_field(row, k) for k in ("process_sigma", "process_df", "ratio_tau", "ratio_df"))
    spread = ProcessSpread(float(sigma), float(sdf), 0, 0.0) if _present(sigma) and _present(sdf) else None
    ratios = RatioSpread(float(tau), int(tdf), 0) if _present(tau) and _present(tdf) else None
    return spread, ratios


@dataclass(frozen=True)
class Speedup:
    """baseline time / candidate time with its 95% CI; above 1 means the candidate is faster."""

    ratio: float
    ci_low: float
    ci_high: float
    paired: bool = True  # from per-round ratios (False: ratio of medians of rows measured apart)
    n: int = 0  # rounds paired (or the smaller sample count, unpaired)

    @property
    def significant(self) -> bool:
        """True when the CI excludes 1 (no difference)."""
        return self.ci_low > 1 or self.ci_high < 1

    def __iter__(self):  # ratio, low, high = speedup
        return iter((self.ratio, self.ci_low, self.ci_high))

    def __getitem__(self, i):  # speedup[0] is the ratio, [1] and [2] the CI's ends
        return (self.ratio, self.ci_low, self.ci_high)[i]


def _field(row: Any, name: str):
    """A field of a results row: a dict, a pandas row or a namedtuple."""
    return row.get(name) if hasattr(row, "get") else getattr(row, name, None)


def _present(v) -> bool:
    return v is not None and not (isinstance(v, float) and np.isnan(v))


def row_samples(row) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(samples, replicate ids, round ids) of a results row; rows without ids get one replicate, rounds 0…n-1."""
    x = np.asarray(_field(row, "samples_s"), dtype=float)
    reps, rounds = _field(row, "sample_rep"), _field(row, "sample_round")
    reps = np.asarray(reps) if _present(reps) and len(reps) == len(x) else np.zeros(len(x), dtype=int)
    rounds = np.asarray(rounds) if _present(rounds) and len(rounds) == len(x) else np.arange(len(x))
    return x, reps, rounds


def paired_log_ratios(base, cand) -> tuple[np.ndarray, np.ndarray] | None:
    """log(baseline/candidate) per shared round, with the replicate of each; None if the rows share no rounds."""
    bx, br, bn = row_samples(base)
    cx, cr, cn = row_samples(cand)
    if not (_present(_field(base, "sample_round")) and _present(_field(cand, "sample_round"))):
        return None
    if not (_present(_field(base, "group_id")) and _field(base, "group_id") == _field(cand, "group_id")):
        return None  # rounds of different groups (or runs) are not the same moments
    b = {(int(r), int(k)): v for r, k, v in zip(br, bn, bx)}
    c = {(int(r), int(k)): v for r, k, v in zip(cr, cn, cx)}
    keys = [k for k in b if k in c]
    if not keys:
        return None
    logs = np.log([b[k] for k in keys]) - np.log([c[k] for k in keys])
    return logs, np.array([k[0] for k in keys])


def _ratio_ci(logs: np.ndarray, reps: np.ndarray, seed: int,
              ratios: RatioSpread | None = None) -> tuple[float, float, float]:
    """Median per-round log ratio with its CI; with a between-process spread, its half-width added in quadrature."""
    median = float(np.median(logs))
    lo, hi = median_ci(logs, reps, seed=seed)
    if ratios is not None and ratios.tau > 0:
        h = ratios.half_width(len(np.unique(reps)))
        lo, hi = median - float(np.hypot(median - lo, h)), median + float(np.hypot(hi - median, h))
    return float(np.exp(median)), float(np.exp(lo)), float(np.exp(hi))


def speedup(base, cand, *, seed: int = 0) -> Speedup:
    """Speed-up of `cand` over `base` (two results rows, dicts or pandas rows), with its 95% CI.

    Paired when both were timed in the same rounds (the same group of the same run): the median of the
    per-round ratios, CI as in `median_ci` on the log ratios, widened by the table's between-process
    spread of speed-ups where the rows carry it (see with_reported_ci). Otherwise the ratio of the two
    medians, with the interval from each median's 97.5% CI (together at least 95% coverage), each
    including the spread between processes where the rows carry it: rows measured apart are in
    different processes.
    """
    spread, ratios = _table_spreads(base)
    paired = paired_log_ratios(base, cand)
    if paired is not None and len(paired[0]) >= 2:
        logs, reps = paired
        return Speedup(*_ratio_ci(logs, reps, seed, ratios), paired=True, n=len(logs))
    bx, br, _ = row_samples(base)
    cx, cr, _ = row_samples(cand)
    half = 1 - (1 - CONFIDENCE) / 2
    if spread is not None:
        blo, bhi = reported_ci(base, spread, half, across_runs=False)
        clo, chi = reported_ci(cand, _table_spreads(cand)[0] or spread, half, across_runs=False)
    else:
        blo, bhi = median_ci(bx, br, confidence=half, seed=seed)
        clo, chi = median_ci(cx, cr, confidence=half, seed=seed)
    return Speedup(float(np.median(bx) / np.median(cx)), blo / chi, bhi / clo, paired=False, n=min(len(bx), len(cx)))


def geomean_speedup(pairs: Iterable[tuple[Any, Any]], *, n_resamples: int = N_RESAMPLES, seed: int = 0) -> Speedup:
    """Geometric mean over shapes of each shape's speed-up (pairs of baseline and candidate rows), with a 95% CI.

    Each resample draws every shape's rounds again (hierarchically by replicate; both sides' samples
    independently where a pair is not paired) and averages the shapes' log speed-ups; where the rows
    carry their table's between-process spreads (with_reported_ci), each shape also draws its process
    effect (of the ratio where paired, of each median where not). The set of shapes is fixed: it is the
    grid, not a sample of one.
    """
    pairs = list(pairs)
    if not pairs:
        return Speedup(float("nan"), float("nan"), float("nan"), n=0)
    points, draws, all_paired = [], np.zeros(n_resamples), True
    effect = np.random.default_rng(seed + 20_000)
    z = _st.norm.ppf((1 + CONFIDENCE) / 2)
    for i, (base, cand) in enumerate(pairs):
        spread, ratios = _table_spreads(base)
        paired = paired_log_ratios(base, cand)
        if paired is not None and len(paired[0]) >= 2:
            logs, reps = paired
            points.append(np.median(logs))
            draws += hierarchical_median_draws(_by_replicate(logs, reps), n_resamples=n_resamples, seed=seed + i)
            if ratios is not None and ratios.tau > 0:
                draws += effect.normal(0, ratios.half_width(len(np.unique(reps))) / z, n_resamples)
        else:
            all_paired = False
            bx, br, _ = row_samples(base)
            cx, cr, _ = row_samples(cand)
            points.append(np.log(np.median(bx) / np.median(cx)))
            db = hierarchical_median_draws(_by_replicate(bx, br), n_resamples=n_resamples, seed=seed + 2 * i + 10_000)
            dc = hierarchical_median_draws(_by_replicate(cx, cr), n_resamples=n_resamples, seed=seed + 2 * i + 10_001)
            draws += np.log(db / dc)
            if spread is not None:
                for reps_of_side in (br, cr):
                    draws += effect.normal(0, spread.half_width(len(np.unique(reps_of_side))) / z, n_resamples)
    n = len(points)
    lo, hi = _percentile_ci(draws / n)
    return Speedup(float(np.exp(np.mean(points))), float(np.exp(lo)), float(np.exp(hi)), paired=all_paired, n=n)


def drift(samples, replicates=None) -> dict[str, float | bool]:
    """A monotone trend over the samples' order within each replicate (Kendall's tau against round order).

    Returns tau and p (the replicates' tests combined: the smallest p, Bonferroni-corrected), the trend's
    size over the run as a share of the median (Theil–Sen slope × rounds), and the flag (p < DRIFT_P).
    """
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
