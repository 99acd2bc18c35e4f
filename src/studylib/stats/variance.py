"""One variance model for every interval the study reports (docs/method.md, "The variance model")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _st

from .measurement import Measurement
from .stats import CONFIDENCE, Speedup, common_share, paired_log_ratios

HETEROGENEITY_P = 0.001  # a median whose replicates' Q test gives p below this keeps its own between-process variance
MIN_CLASS_DF = 4  # a runtime's own τ² of speed-ups needs this many degrees of freedom, else the table's is used
POWER = 0.80  # the minimum detectable effect is the speed-up detected with this probability
_MAD = 1.4826  # MAD × this is the SD of a normal distribution


@dataclass(frozen=True)
class Unit:
    """One row's (or pair's) replicates: log medians y, sampling variances v, degrees of freedom; estimate mean(y)."""

    y: np.ndarray
    v: np.ndarray
    df_within: int
    estimate: float
    reps: tuple = ()


def unit_of(values, reps) -> Unit | None:
    """The replicate medians and their sampling variances of log values `values` with replicate ids `reps`."""
    values, reps = np.asarray(values, dtype=float), np.asarray(reps)
    if len(values) < 2 or not np.all(np.isfinite(values)):
        return None
    ids = list(dict.fromkeys(reps.tolist()))
    parts = [values[reps == r] for r in ids]
    y, n = np.array([np.median(p) for p in parts]), np.array([len(p) for p in parts])
    resid = np.concatenate([p - m for p, m in zip(parts, y)])
    df = int(len(values) - len(parts))
    if df < 1:
        return None
    s2 = (_MAD * np.median(np.abs(resid))) ** 2 * len(values) / df
    if s2 <= 0:  # more than half the values tie with their medians (a coarse clock): fall back on the plain SD
        s2 = float(np.sum(resid ** 2) / df)
    return Unit(y, np.maximum(np.pi / 2 * s2 / n, 1e-14), df, float(np.mean(y)), tuple(ids))


@dataclass(frozen=True)
class Between:
    """The variance between processes beyond sampling noise (τ², log scale) pooled over a table's units."""

    tau2: float
    df: int
    units: int
    common: float = 0.0  # medians: the share of τ² + v common to a replicate's groups (stats.common_share)

    @property
    def pct(self) -> float:
        return 100 * float(np.expm1(np.sqrt(self.tau2)))


def _own(u: Unit) -> float:
    """A unit's own between-process variance beyond its sampling noise (0 where the replicates agree better)."""
    return max(0.0, float(np.var(u.y, ddof=1) - u.v.mean()))


def pool(units: Iterable[Unit], df: int | None = None) -> Between | None:
    """DerSimonian–Laird τ² over units with ≥ 2 replicates; `df` overrides the degrees of freedom."""
    q = c = 0.0
    k_df = n = 0
    units = [u for u in units if u is not None and len(u.y) >= 2]
    for u in units:
        w = 1 / u.v
        mean = float(np.sum(w * u.y) / np.sum(w))
        q += float(np.sum(w * (u.y - mean) ** 2))
        c += float(np.sum(w) - np.sum(w ** 2) / np.sum(w))
        k_df += len(u.y) - 1
        n += 1
    if not n:
        return None
    return Between(max(0.0, (q - k_df) / c) if c > 0 else 0.0, int(df if df is not None else k_df), n)


@dataclass(frozen=True)
class Estimate:
    """A log-scale estimate with its standard error and degrees of freedom."""

    value: float
    se: float
    df: float
    heterogeneous: bool = False

    def interval(self) -> tuple[float, float]:
        h = float(half_width(self.se, self.df))
        return self.value - h, self.value + h

    def plus(self, sigma: float, df: float) -> Estimate:
        """The estimate with an independent term of SD `sigma` (df degrees of freedom) added."""
        se2 = self.se ** 2 + sigma ** 2
        return Estimate(self.value, float(np.sqrt(se2)), satterthwaite([(self.se ** 2, self.df), (sigma ** 2, df)]),
                        self.heterogeneous)


def half_width(se, df, level: float = CONFIDENCE):
    """Half an interval's width at `level` (log scale): t at `df` degrees of freedom (at least 1; ∞: normal) × se."""
    return _st.t.ppf((1 + level) / 2, np.maximum(np.asarray(df, dtype=float), 1.0)) * np.asarray(se, dtype=float)


def satterthwaite(parts: list[tuple[float, float]]) -> float:
    total = sum(a for a, _ in parts)
    denom = sum(a ** 2 / d for a, d in parts if d > 0 and a > 0)
    return float(total ** 2 / denom) if denom > 0 else float(max((d for _, d in parts), default=1.0))


def tau2_for(u: Unit, between: Between | None) -> tuple[float, float, bool]:
    """(τ², df, own): the pooled τ², or the unit's own where Cochran's Q has p < HETEROGENEITY_P."""
    k = len(u.y)
    tau2, tau_df, odd = (between.tau2, between.df, False) if between is not None else (0.0, 1, False)
    if k >= 2:
        qu = float(np.sum((u.y - u.y.mean()) ** 2 / (u.v + tau2)))
        if _st.chi2.sf(qu, k - 1) < HETEROGENEITY_P:
            tau2, tau_df, odd = max(tau2, _own(u)), k - 1, True
    return tau2, tau_df, odd


def estimate(u: Unit, between: Between | None) -> Estimate:
    """The unit's estimate with its SE: Σ(v_r + τ²)/k², τ² the one given (or the unit's own where it stands out)."""
    k = len(u.y)
    tau2, tau_df, odd = tau2_for(u, between)
    parts = [(float(np.sum(u.v)) / k ** 2, u.df_within)] + ([(tau2 / k, tau_df)] if tau2 > 0 else [])
    return Estimate(u.estimate, float(np.sqrt(sum(a for a, _ in parts))), satterthwaite(parts), odd)


# --- a table's rows (results rows of any kind, read as measurement.Measurement) ------------------------------------


def row_unit(row: Any) -> Unit | None:
    m = Measurement.of(row)
    if m.status not in (None, "ok") or m.samples_s is None:
        return None
    x, reps, _ = m.samples()
    if len(x) < 2 or np.any(x <= 0):
        return None
    return unit_of(np.log(x), reps)


def _group(m: Measurement):
    return m.group_id or m.config_key


def medians_between(rows: list[Any], units: dict[int, Unit | None] | None = None) -> Between | None:
    """τ² of medians pooled over a table's rows, df divided by the design effect; `units`: made already, by id."""
    rows = [Measurement.of(r) for r in rows]
    units = units if units is not None else {id(r): row_unit(r) for r in rows}
    ks: dict[Any, int] = {}
    devs: dict[Any, dict[Any, list[float]]] = {}
    for r in rows:
        u = units[id(r)]
        if u is not None and len(u.y) >= 2:
            ks[_group(r)] = max(ks.get(_group(r), 0), len(u.y) - 1)
            for rep, d in zip(u.reps, u.y - u.y.mean()):
                devs.setdefault(_group(r), {}).setdefault(rep, []).append(float(d))
    if not ks:
        return None
    rho = common_share([{rep: float(np.mean(d)) for rep, d in g.items()} for g in devs.values()])
    b = pool(units.values(), df=max(round(sum(ks.values()) / (1 + (len(ks) - 1) * rho ** 2)), max(ks.values())))
    return Between(b.tau2, b.df, b.units, rho)  # a group with two replicates: pool found a unit


def pair_unit(base: Any, cand: Any) -> Unit | None:
    paired = paired_log_ratios(Measurement.of(base), Measurement.of(cand))
    return None if paired is None else unit_of(*paired)


def _groups(rows: list[Measurement]) -> dict[Any, list[Measurement]]:
    groups: dict[Any, list] = {}
    for m in rows:
        if m.ok and m.samples_s is not None and m.group_id:
            groups.setdefault(m.group_id, []).append(m)
    return groups


def runtime_class(m: Measurement) -> tuple[Any, Any]:
    """What a row's τ² of speed-ups is pooled over: its runtime (`variant`) and its task (a model, an operation)."""
    return m.variant, m.task


def _anchors(rows: list[Measurement]) -> dict[tuple, Measurement]:
    """Each shape's first row in a group's order: what the shape's speed-ups are estimated against."""
    out: dict[tuple, Measurement] = {}
    for m in rows:
        out.setdefault(m.shape, m)
    return out


def _pair_units(groups: dict[Any, list]) -> list[tuple[Any, Unit | None]]:
    """(runtime class, pair unit) of every row against its shape's anchor, and of each anchor against the first."""
    out = []
    for m in groups.values():
        anchors = _anchors(m)
        for c in m[1:]:
            a = anchors[c.shape]
            out.append((runtime_class(c), pair_unit(m[0] if a is c else a, c)))
    return out


def ratios_between(rows: list[Any]) -> Between | None:
    """τ² of paired speed-ups pooled over a table's pairs: every row of a group against the group's first."""
    return pool(u for _, u in _pair_units(_groups([Measurement.of(r) for r in rows])))


def _by_runtime(pairs: list[tuple[Any, Unit | None]]) -> dict[Any, Between]:
    by: dict[Any, list] = {}
    for key, unit in pairs:
        by.setdefault(key, []).append(unit)
    out = {}
    for key, units in by.items():
        b = pool(units)
        if b is not None and b.df >= MIN_CLASS_DF:
            out[key] = b
    return out


def ratios_between_by_runtime(rows: list[Any]) -> dict[Any, Between]:
    """τ² of paired speed-ups per runtime class, pooled over the table's shapes (at least MIN_CLASS_DF)."""
    return _by_runtime(_pair_units(_groups([Measurement.of(r) for r in rows])))


def _stamped(m: Measurement, prefix: str) -> Between | None:
    tau2, df = getattr(m, f"{prefix}_tau2"), getattr(m, f"{prefix}_df")
    return Between(float(tau2), int(df), 0) if tau2 is not None and df is not None else None


def _around(median: float, e: Estimate) -> tuple[float, float]:
    """The 95% interval of `e` (log scale) as seconds around the row's `median`."""
    lo, hi = e.interval()
    return median * float(np.exp(lo - e.value)), median * float(np.exp(hi - e.value))


def _report_estimate(row: dict, m: Measurement, u: Unit) -> float:
    """The row's reported median: its estimate over replicates (stored one: `median_pooled_s`), else the stored."""
    stored = row["median_pooled_s"] = row.get("median_s")
    if len(u.y) < 2 or not stored:
        return float(stored or np.exp(u.estimate))
    row["median_s"] = median = float(np.exp(u.estimate))
    for rate in ("throughput_samples_s", "throughput_tokens_s"):  # per second at the median: rescaled with it
        if getattr(m, rate) is not None:
            row[rate] = float(row[rate]) * float(stored) / median
    return median


def with_reported_ci(rows: list[dict]) -> list[dict]:
    """Copies of a table's rows with Measurement's READ columns (reported median, CIs, SE, τ²s)."""
    out = [dict(r) for r in rows]
    ms = [Measurement.of(r) for r in out]
    units = {id(m): row_unit(m) for m in ms}  # each row's and each pair's unit made once
    groups = _groups(ms)
    pairs = _pair_units(groups)
    medians, ratios, by_runtime = medians_between(ms, units), pool(u for _, u in pairs), _by_runtime(pairs)
    anchors = {id(a) for g in groups.values() for a in _anchors(g).values()}
    for row, m in zip(out, ms):
        ok = m.ok
        u = units[id(m)] if ok else None
        row["process_tau2"], row["process_df"] = (medians.tau2, medians.df) if medians and ok else (None, None)
        own = by_runtime.get(runtime_class(m), ratios)  # its runtime class's τ² of speed-ups, else the table's
        row["ratio_tau2"], row["ratio_df"] = (own.tau2, own.df) if own and ok else (None, None)
        row["ratio_anchor"] = id(m) in anchors  # the row its shape's speed-ups were paired with
        row["process_spread_pct"] = medians.pct if medians and ok else None
        row["rerun_low_s"] = row["rerun_high_s"] = row["se_log"] = row["df_log"] = None
        row["heterogeneous"] = False
        if u is None:
            row["ci_low_s"], row["ci_high_s"] = row.get("ci_run_low_s"), row.get("ci_run_high_s")
            continue
        e = estimate(u, medians)
        row["se_log"], row["df_log"], row["heterogeneous"] = e.se, e.df, e.heterogeneous
        median = _report_estimate(row, m, u)
        row["ci_low_s"], row["ci_high_s"] = _around(median, e)
        sigma, df = m.run_shift_sigma, m.run_shift_df
        if sigma is not None and df is not None:
            row["rerun_low_s"], row["rerun_high_s"] = _around(median, e.plus(float(sigma), float(df)))
    return out


# --- speed-ups -----------------------------------------------------------------------------------------------------


def _median_estimate(m: Measurement) -> Estimate | None:
    u = row_unit(m)
    return None if u is None else estimate(u, _stamped(m, "process"))


def pair_between(base: Any, cand: Any) -> Between | None:
    """The τ² of a pair's speed-up: the non-anchor side's runtime's, else the mean of the two runtimes'."""
    base, cand = Measurement.of(base), Measurement.of(cand)
    a, b = _stamped(base, "ratio"), _stamped(cand, "ratio")
    same = base.shape == cand.shape
    if (same and base.ratio_anchor) or a is None:
        return b
    if (same and cand.ratio_anchor) or b is None:
        return a
    return Between((a.tau2 + b.tau2) / 2, min(a.df, b.df), 0)


def speedup_estimate(base: Any, cand: Any) -> tuple[Estimate, bool, int] | None:
    """(estimate of log(baseline/candidate), paired, n); None where a side has too few samples."""
    base, cand = Measurement.of(base), Measurement.of(cand)
    u = pair_unit(base, cand)
    if u is not None:
        return estimate(u, pair_between(base, cand)), True, len(base.samples()[0])
    b, c = _median_estimate(base), _median_estimate(cand)
    if b is None or c is None:
        return None
    parts = [(b.se ** 2, b.df), (c.se ** 2, c.df)]
    e = Estimate(b.value - c.value, float(np.hypot(b.se, c.se)), satterthwaite(parts), b.heterogeneous or c.heterogeneous)
    return e, False, min(len(base.samples()[0]), len(cand.samples()[0]))


def to_speedup(e: Estimate, *, paired: bool = True, n: int = 0) -> Speedup:
    lo, hi = e.interval()
    return Speedup(float(np.exp(e.value)), float(np.exp(lo)), float(np.exp(hi)), paired=paired, n=n, se=e.se,
                   df=e.df)


def speedup(base: Any, cand: Any) -> Speedup:
    """Speed-up of `cand` over `base` (two results rows) with its 95% CI; above 1 the candidate is faster."""
    got = speedup_estimate(base, cand)
    if got is None:
        return Speedup(float("nan"), float("nan"), float("nan"), paired=False, n=0)
    e, paired, n = got
    return to_speedup(e, paired=paired, n=n)


def detectable(se, df, band: float, level: float = CONFIDENCE):
    """The speed-up this SE calls 'faster' with probability POWER (element-wise; NaN where SE ≤ 0)."""
    se = np.asarray(se, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.where(np.isfinite(se) & (se > 0), band * np.exp(half_width(se, df, level) + _st.norm.ppf(POWER) * se),
                       np.nan)
    return float(out) if out.ndim == 0 else out
