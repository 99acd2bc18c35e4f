"""Rates from timed calls: per-call seconds within a budget, and the median rate with its 95% CI."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ..stats import stats

MIN_SAMPLES = 10  # timed calls per kernel at least (the order-statistic CI needs 6 at 95%)
MAX_SAMPLES = 200


def timed_calls(fn: Callable[[], object], sync: Callable[[], object], budget: float) -> np.ndarray:
    """Seconds per call of `fn` (device wait timed) for `budget` s and ≥ MIN_SAMPLES calls, after one untimed."""
    fn()
    sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < MAX_SAMPLES and (len(times) < MIN_SAMPLES or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return np.asarray(times)


def rate(times: np.ndarray, work: float, unit: float) -> dict:
    """Median rate (work per second, in `unit`s) with its 95% CI, from per-call seconds."""
    rates = work / times / unit
    lo, hi, _ = stats.order_stat_ci(rates)
    return {"median": float(np.median(rates)), "ci_low": lo, "ci_high": hi, "n": len(rates)}
