"""Timing: `measure(fn)` runs a callable to steady state and returns a Measurement.

The first call is timed on its own (compile, trace and export land there, never in steady state).
Every timed call runs `sync` inside the timed region, so asynchronous devices are waited for.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import stats

STOP_PRECISION = "precision"  # CI half-width reached the target share of the median
STOP_BUDGET = "budget"  # the configuration's time budget was spent
STOP_MAX_SAMPLES = "max_samples"


@dataclass(frozen=True)
class Speedup:
    """median(baseline)/median(candidate) with its 95% bootstrap CI; above 1 means faster."""

    ratio: float
    ci_low: float
    ci_high: float

    @property
    def significant(self) -> bool:
        """True when the CI excludes 1 (no difference)."""
        return self.ci_low > 1 or self.ci_high < 1


@dataclass
class Measurement:
    """Every steady-state sample (seconds), the cold first call, and the statistics derived from them."""

    samples: list[float]
    first_call: float
    warmup_calls: int
    stop_reason: str
    ci_low: float = field(init=False)
    ci_high: float = field(init=False)

    def __post_init__(self):
        if not self.samples:
            raise ValueError("a Measurement needs at least one sample")
        self._summary = stats.summarize(self.samples)
        self.ci_low, self.ci_high = stats.median_ci(self.samples)

    n = property(lambda self: len(self.samples))
    median = property(lambda self: self._summary["median"])
    mean = property(lambda self: self._summary["mean"])
    p90 = property(lambda self: self._summary["p90"])
    p99 = property(lambda self: self._summary["p99"])
    iqr = property(lambda self: self._summary["iqr"])
    cv = property(lambda self: self._summary["cv"])

    def speedup_over(self, baseline: Measurement) -> Speedup:
        """How many times faster this is than `baseline`, with a CI."""
        return Speedup(*stats.speedup_ci(baseline.samples, self.samples))

    def to_row(self) -> dict[str, Any]:
        """Flat statistics for a results row, units in the names."""
        return {
            "n": self.n, "median_s": self.median, "mean_s": self.mean, "p90_s": self.p90, "p99_s": self.p99,
            "iqr_s": self.iqr, "cv": self.cv, "ci_low_s": self.ci_low, "ci_high_s": self.ci_high,
            "first_call_s": self.first_call, "warmup_calls": self.warmup_calls, "stop_reason": self.stop_reason,
            "samples_s": list(self.samples),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Measurement:
        return cls(list(row["samples_s"]), row["first_call_s"], row["warmup_calls"], row["stop_reason"])

    def __repr__(self) -> str:
        return (f"Measurement(median={self.median * 1e3:.4g} ms, 95% CI [{self.ci_low * 1e3:.4g}, "
                f"{self.ci_high * 1e3:.4g}] ms, cv={self.cv:.1%}, n={self.n}, first_call={self.first_call:.4g} s, "
                f"stopped on {self.stop_reason})")


def measure(
    fn: Callable[[], Any],
    *,
    sync: Callable[[], Any] | None = None,
    warmup_calls: int = 3,
    min_samples: int = 10,
    max_samples: int = 2000,
    target_ci_pct: float = 2.0,
    budget_s: float = 5.0,
    after_first: Callable[[Any], Any] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Time `fn` to steady state.

    The first call is timed alone; `after_first(output)` then runs untimed (the parity check), then
    `warmup_calls` untimed calls. Samples are taken until the median's 95% CI half-width is within
    `target_ci_pct` of the median (checked at growing sample counts), `budget_s` of sampling is spent,
    or `max_samples` is reached; never fewer than `min_samples`.
    """
    t0 = clock()
    out = fn()
    if sync is not None:
        sync()
    first_call = clock() - t0
    if after_first is not None:
        after_first(out)
    del out
    for _ in range(warmup_calls):
        fn()
        if sync is not None:
            sync()

    samples: list[float] = []
    next_check = min_samples
    loop_start = clock()
    while True:
        t0 = clock()
        fn()
        if sync is not None:
            sync()
        t1 = clock()
        samples.append(t1 - t0)
        n = len(samples)
        if n < min_samples:
            continue
        at_limit = n >= max_samples or t1 - loop_start >= budget_s
        if at_limit or n >= next_check:
            # The same CI as the Measurement will report, so 'precision' always means the target was met.
            lo, hi = stats.median_ci(samples)
            if (hi - lo) / 2 <= target_ci_pct / 100 * float(np.median(samples)):
                reason = STOP_PRECISION
                break
            if at_limit:
                reason = STOP_MAX_SAMPLES if n >= max_samples else STOP_BUDGET
                break
            next_check = max(n + 1, math.ceil(n * 1.25))
    return Measurement(samples, first_call, warmup_calls, reason)


def harness_overhead(budget_s: float = 0.2) -> Measurement:
    """Time a no-op: the per-call cost the harness itself adds to every sample."""
    return measure(lambda: None, warmup_calls=10, min_samples=1000, max_samples=5000, target_ci_pct=1.0,
                   budget_s=budget_s)
