"""Timing: a group's variants called in interleaved rounds, each in a fresh random order (docs/method.md, "Timing")."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..stats import stats

STOP_PRECISION = "precision"  # every median's and every speed-up's CI half-width reached the target
STOP_BUDGET = "budget"  # the group's time budget was spent
STOP_MAX_ROUNDS = "max_rounds"
MAX_BLOCK = 10_000
METHOD = 5  # how a sample is taken (docs/method.md, "Timing"); in the settings hash, so other rows are not resumed


@dataclass
class Rounds:
    """Per-call seconds of every variant, one sample per round."""

    samples: dict[str, list[float]]
    block: dict[str, int]  # calls per sample
    stop_reason: str
    elapsed_s: float
    warmup_calls: int
    failed: dict[str, BaseException] = field(default_factory=dict)  # variants whose call raised during timing

    @property
    def rounds(self) -> int:
        return max((len(s) for s in self.samples.values()), default=0)


def first_call(fn: Callable[[], Any], *, clock: Callable[[], float] = time.perf_counter) -> tuple[Any, float]:
    """Run `fn` once, cold, and time it: (output, seconds). Compile, trace and XLA builds land here."""
    t0 = clock()
    out = fn()
    return out, clock() - t0


def _half_width_ok(values: np.ndarray, target: float) -> bool:
    lo, hi, _ = stats.order_stat_ci(values)
    return (hi - lo) / 2 <= target


def precise_enough(samples: dict[str, list[float]], baseline: str | None, target_ci_pct: float) -> bool:
    """Whether every median's CI, and every variant's per-round speed-up CI over `baseline`, is within target."""
    target = target_ci_pct / 100
    for name, xs in samples.items():
        x = np.asarray(xs)
        if not _half_width_ok(x / np.median(x), target):
            return False
        if baseline is not None and name != baseline:
            logs = np.log(np.asarray(samples[baseline])) - np.log(x)
            if not _half_width_ok(logs, math.log1p(target)):
                return False
    return True


def _block_size(block_s: float, per_call_s: float) -> int:
    """Calls a block needs to last `block_s` at `per_call_s` a call (1 where no block is asked for)."""
    if block_s <= 0 or per_call_s <= 0:
        return 1
    return min(MAX_BLOCK, max(1, math.ceil(block_s / per_call_s)))


def time_block(fn: Callable[[], Any], calls: int, clock: Callable[[], float]) -> float:
    """Seconds per call of `calls` calls of `fn` timed together, after one untimed lead-in call where calls > 1."""
    if calls > 1:
        fn()
    t0 = clock()
    for _ in range(calls):
        fn()
    return (clock() - t0) / calls


def measure_rounds(calls: dict[str, Callable[[], Any]], *, clock: Callable[[], float] = time.perf_counter,
                   **settings) -> Rounds:
    """Time every callable of `calls` in this process, in interleaved rounds (`run_rounds` on `time_block`)."""
    timers = {name: (lambda n, fn=fn: time_block(fn, n, clock)) for name, fn in calls.items()}
    return run_rounds(timers, clock=clock, **settings)


def run_rounds(timers: dict[str, Callable[[int], float]], *, baseline: str | None = None, warmup_calls: int = 2,
               min_rounds: int = 10, max_rounds: int = 500, min_time_s: float = 0.0, target_ci_pct: float = 2.0,
               budget_s: float = 30.0, block_s: float = 0.0, seed: int = 0,
               clock: Callable[[], float] = time.perf_counter) -> Rounds:
    """Time `timers` (calls → s per call) in interleaved rounds until precise; a timer that raises is dropped."""
    names = list(timers)
    failed: dict[str, BaseException] = {}
    per_call: dict[str, float] = {}
    for name in names:  # untimed warm-up; the fastest call calibrates the block size
        try:
            for _ in range(max(warmup_calls, 1 if block_s > 0 else 0)):
                per_call[name] = min(timers[name](1), per_call.get(name, math.inf))
        except Exception as exc:  # noqa: BLE001 - a failure is a result
            failed[name] = exc
    live = [n for n in names if n not in failed]
    block = {n: _block_size(block_s, per_call.get(n, 0.0)) for n in live}
    if block_s > 0:  # the blocks sized again from one untimed block per variant
        for name in live:
            try:
                block[name] = _block_size(block_s, timers[name](block[name]))
            except Exception as exc:  # noqa: BLE001 - a failure is a result
                failed[name] = exc
                del block[name]
        live = [n for n in live if n not in failed]
    samples: dict[str, list[float]] = {n: [] for n in live}
    rng = np.random.default_rng(seed)
    reason = STOP_MAX_ROUNDS
    next_check = min_rounds
    gc_was_on = gc.isenabled()
    gc.collect()
    gc.disable()
    start = clock()
    try:
        while live:
            for i in rng.permutation(len(live)):
                name = live[i]
                try:
                    samples[name].append(timers[name](block[name]))
                except Exception as exc:  # noqa: BLE001
                    failed[name] = exc
            if any(n in failed for n in live):
                live = [n for n in live if n not in failed]
                samples = {n: samples[n] for n in live}
            gc.collect(0)
            rounds, elapsed = len(samples[live[0]]) if live else 0, clock() - start
            if rounds < min_rounds or elapsed < min_time_s:
                if elapsed >= budget_s * 4 and rounds >= min(min_rounds, 6):
                    reason = STOP_BUDGET  # far beyond budget: a call is much slower than planned
                    break
                continue
            if rounds >= next_check or elapsed >= budget_s:
                base = baseline if baseline in samples else None
                if precise_enough(samples, base, target_ci_pct):
                    reason = STOP_PRECISION
                    break
                next_check = max(rounds + 1, math.ceil(rounds * 1.25))
            if elapsed >= budget_s:
                reason = STOP_BUDGET
                break
            if rounds >= max_rounds:
                reason = STOP_MAX_ROUNDS
                break
    finally:
        if gc_was_on:
            gc.enable()
    return Rounds(samples, block, reason, clock() - start, warmup_calls, failed)


@dataclass(frozen=True)
class Overhead:
    """The harness's own cost per timed sample (a no-op timed in rounds): median and its 95% CI."""

    median: float
    ci_low: float
    ci_high: float
    n: int


def harness_overhead(budget_s: float = 0.2) -> Overhead:
    """Time a no-op the way every sample is timed: the cost the harness adds to each."""
    r = measure_rounds({"no-op": lambda: None}, warmup_calls=10, min_rounds=200, max_rounds=2000,
                       target_ci_pct=1.0, budget_s=budget_s)
    x = r.samples["no-op"]
    lo, hi = stats.median_ci(x)
    return Overhead(float(np.median(x)), lo, hi, len(x))


def row_statistics(samples, replicates=None) -> dict[str, Any]:
    """The statistics every results row stores, units in the names: median with its run's CI, spread, drift."""
    s = stats.summarize(samples)
    lo, hi = stats.median_ci(samples, replicates)
    return {"n": len(samples), "median_s": s["median"], "mean_s": s["mean"], "p90_s": s["p90"], "p99_s": s["p99"],
            "iqr_s": s["iqr"], "cv": s["cv"], "ci_run_low_s": lo, "ci_run_high_s": hi, **stats.drift(samples, replicates)}
