"""Timing: the variants of one group are timed together, in interleaved rounds.

Machines drift (neighbours, turbo, thermals) over tens of seconds. Timing all of A, then all of B
confounds that drift with the difference between A and B. `measure_rounds` instead calls every variant
once per round, in a fresh random order each round, so drift common to a round cancels in the
per-round ratios that speed-ups are computed from (see variance.speedup).

- Only steady state is timed: the first call (compile, trace, XLA build) is timed on its own before
  (`first_call`), then `warmup_calls` untimed calls per variant.
- Each callable must wait for its device before returning (the caller wraps sync into it), so the wait
  is inside the timed region.
- A call shorter than `block_s` is repeated in a block within its turn; the sample is the block's time
  per call, so the clock's resolution and the harness's overhead stay small against what is measured.
  The block's size comes from the fastest of the warm-up calls (the last one alone is as noisy as any call),
  and a block of more than one call starts with one untimed lead-in call: the variants before it in the
  round evicted its weights and inputs from the caches, and a short call timed cold would charge that to
  whichever variant happened to get the smaller block (an A/A copy timed 5 calls a block came out 16% slower
  than its original timed 12 a block). Steady state is the warm loop; the lead-in costs under one block_s.
  It does not remove all of it: after a switch the calls settle over more than one call, so a block sized
  from slow warm-up calls (TorchScript's profiling runs) still came out slower per call (in the reference
  of 2e16ef4 a copy sized at 9 calls, 6-17% slower than its original at 31 in every process). So the blocks
  are sized again from one untimed block per variant at steady state (`_steady_blocks`), after the warm-up:
  every variant's block then holds about `block_s` of its warm calls, whatever its warm-up calls cost.
- Python's garbage collector is off while rounds run (young objects are collected between rounds).
- Rounds go on for at least `min_rounds` and `min_time_s`, then stop when every median and every
  speed-up over the baseline is within `target_ci_pct` (checked at growing round counts), when
  `budget_s` is spent, or at `max_rounds`.
"""

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
METHOD = 4  # how a sample is taken (4: each framework in a worker process of its own, with its own default threading,
# bench/workers.py; 3: every framework in one process under OMP_WAIT_POLICY=PASSIVE, blocks sized from an untimed
# steady-state block, each timed after an untimed lead-in call, the rounds run with freed memory kept for reuse,
# machine/allocator.py; 2 sized blocks by the fastest warm-up call and left glibc's defaults); part of every row's
# settings hash, so rows timed the older way are measured again rather than resumed or mixed


@dataclass
class Rounds:
    """Per-call seconds of every variant, one sample per round (a round's samples were taken together)."""

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
    """Seconds per call of `calls` calls of `fn` timed together, after one untimed lead-in call where calls > 1
    (the variants before it in the round evicted its data: the block is timed warm)."""
    if calls > 1:
        fn()
    t0 = clock()
    for _ in range(calls):
        fn()
    return (clock() - t0) / calls


def _steady_blocks(timers: dict[str, Callable[[int], float]], block: dict[str, int], block_s: float,
                   failed: dict[str, BaseException]) -> dict[str, int]:
    """The blocks sized again from one untimed block per variant (its warm-up's size, timed the way a sample is):
    warm-up calls can be far slower than steady state (TorchScript's profiling runs, a cold cache), and a block
    sized from them holds too few calls to settle. A variant that raises here goes to `failed`."""
    out = {}
    for name, timer in timers.items():
        try:
            out[name] = _block_size(block_s, timer(block[name]))
        except Exception as exc:  # noqa: BLE001 - a failure is a result
            failed[name] = exc
    return out


def local_timers(calls: dict[str, Callable[[], Any]],
                 clock: Callable[[], float] = time.perf_counter) -> dict[str, Callable[[int], float]]:
    """Each callable as a timer of `calls` calls in this process (`time_block`): what `run_rounds` takes."""
    return {name: (lambda n, fn=fn: time_block(fn, n, clock)) for name, fn in calls.items()}


def measure_rounds(calls: dict[str, Callable[[], Any]], *, clock: Callable[[], float] = time.perf_counter,
                   **settings) -> Rounds:
    """Time every callable of `calls` in this process, in interleaved rounds (`run_rounds` on `local_timers`)."""
    return run_rounds(local_timers(calls, clock), clock=clock, **settings)


def run_rounds(
    timers: dict[str, Callable[[int], float]],
    *,
    baseline: str | None = None,
    warmup_calls: int = 2,
    min_rounds: int = 10,
    max_rounds: int = 500,
    min_time_s: float = 0.0,
    target_ci_pct: float = 2.0,
    budget_s: float = 30.0,
    block_s: float = 0.0,
    seed: int = 0,
    clock: Callable[[], float] = time.perf_counter,
) -> Rounds:
    """Time every variant of `timers` in interleaved rounds (see the module's docstring).

    A timer takes a number of calls and returns the seconds per call of a block of them, timed where the variant
    lives (`time_block`: in this process, or in the variant's worker process, bench/workers.py); `clock` keeps
    the rounds' own time (budget, minimum time). `baseline` names the variant the others' speed-ups are taken over
    (for the precision rule). A timer that raises drops its variant from later rounds; it is reported in
    `Rounds.failed`.
    """
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
    if block_s > 0:
        block = _steady_blocks({n: timers[n] for n in live}, block, block_s, failed)
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
                for n in list(samples):
                    if n in failed:
                        del samples[n]
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
    """The statistics every results row stores, units in the names: median with its run's CI, spread, drift.

    The CI a table reports (`ci_low_s`/`ci_high_s`) is derived when it is read (variance.with_reported_ci)."""
    s = stats.summarize(samples)
    lo, hi = stats.median_ci(samples, replicates)
    return {"n": len(samples), "median_s": s["median"], "mean_s": s["mean"], "p90_s": s["p90"], "p99_s": s["p99"],
            "iqr_s": s["iqr"], "cv": s["cv"], "ci_run_low_s": lo, "ci_run_high_s": hi, **stats.drift(samples, replicates)}
