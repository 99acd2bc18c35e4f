"""One results row as a type: a configuration's measurement, read by attribute.

A `Measurement` is built once from a stored row (a dict as results.ResultsTable reads it, a pandas row of
`ResultsTable.frame()`, or a Measurement) by `Measurement.of`: its configuration (config.Config), status and error, the
timing summary, the raw samples with their replicate and round ids, the one-time costs, parity, the work per call and
the rest of the stored columns (results.COLUMNS), each None where the row lacks it or leaves it blank (older rows,
failed rows, NaN in a table), which every reader treats as unknown. The columns the variance model adds when a table
is read (variance.with_reported_ci: the reported interval, the table's τ²) are fields too, None on a row not read
through it. What readers derive again and again is a method here, defined once: `ok`, `config`, `shape`, `samples`,
`steady_median_s`, `one_time_s`, `warm_one_time_s`. The stored format is results.py's; pages
read tables through `ResultsTable.frame()`, the code that computes (variance, speedups) reads Measurements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..core.config import FIELDS as CONFIG_FIELDS
from ..core.config import Config, shape_of


@dataclass(frozen=True)
class Measurement:
    """One configuration's newest results row (see the module's docstring); units in the names (_s seconds)."""

    # the configuration: config.Config's fields (`config` builds it), None where a row lacks one
    model: str | None = None
    variant: str | None = None
    dtype: str | None = None
    batch_size: int | None = None
    device: str | None = None
    threads: int | None = None
    seq_len: int | None = None
    image_size: int | None = None
    strategy: str | None = None
    data: str | None = None
    backend: str | None = None
    status: str | None = None
    error: str | None = None
    # what the row belongs to
    study: str | None = None
    profile: str | None = None
    config_key: str | None = None
    task: str | None = None
    group_key: str | None = None
    group_id: str | None = None
    env_fingerprint: str | None = None
    settings_hash: str | None = None
    git_commit: str | None = None
    # the timing summary: calls per sample, the run's order-statistic CI of the median
    n: int | None = None
    median_s: float | None = None
    mean_s: float | None = None
    p90_s: float | None = None
    p99_s: float | None = None
    iqr_s: float | None = None
    cv: float | None = None
    ci_run_low_s: float | None = None
    ci_run_high_s: float | None = None
    warmup_calls: int | None = None
    stop_reason: str | None = None
    block_calls: int | None = None
    replicates: int | None = None
    # the raw samples, each with its replicate process and its round
    samples_s: tuple[float, ...] | None = None
    sample_rep: tuple[int, ...] | None = None
    sample_round: tuple[int, ...] | None = None
    drift: bool | None = None
    drift_tau: float | None = None
    drift_p: float | None = None
    drift_pct: float | None = None
    # parity with eager
    max_abs_diff: float | None = None
    parity_tol: float | None = None
    parity_ok: bool | None = None
    label_agreement: float | None = None
    # one-time costs
    first_call_s: float | None = None
    prepare_s: float | None = None
    cold_prepare_s: float | None = None
    prepare_steps: tuple | None = None
    runtime_startup_s: float | None = None
    compilations: int | None = None
    recompilations: int | None = None
    graph_breaks: int | None = None
    warm_prepare_s: float | None = None
    warm_first_call_s: float | None = None
    warm_cache_hits: int | None = None
    warm_cache_misses: int | None = None
    warm_max_abs_diff: float | None = None
    warm_note: str | None = None
    # memory and rates
    peak_mem_mb: float | None = None
    mem_kind: str | None = None
    throughput_samples_s: float | None = None
    throughput_tokens_s: float | None = None
    notes: str | None = None
    # data-set studies: what one timed pass covers
    n_texts: int | None = None
    n_batches: int | None = None
    real_tokens: int | None = None
    computed_tokens: int | None = None
    padding_waste: float | None = None
    batched_vs_unbatched_max_diff: float | None = None
    # work per timed call (roofline)
    flops_per_call: int | None = None
    bytes_per_call: int | None = None
    useful_flops_per_call: int | None = None
    # a surprise's profile
    profile_top_ops: tuple | None = None
    profile_note: str | None = None
    # the run
    wall_s: float | None = None
    timestamp: str | None = None
    run_shift_sigma: float | None = None
    run_shift_df: int | None = None
    tf32: str | None = None
    process: str | None = None  # the worker process that measured it, and its threading
    # what the variance model adds when a table is read (variance.with_reported_ci); None on a row not read so
    median_pooled_s: float | None = None
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    rerun_low_s: float | None = None
    rerun_high_s: float | None = None
    se_log: float | None = None
    df_log: float | None = None
    heterogeneous: bool | None = None
    process_tau2: float | None = None
    process_df: int | None = None
    process_spread_pct: float | None = None
    ratio_tau2: float | None = None
    ratio_df: int | None = None
    ratio_anchor: bool | None = None

    @classmethod
    def of(cls, row: Any) -> Measurement:
        """The Measurement of a results row: a dict, a pandas row (NaN read as None) or a Measurement (itself)."""
        if isinstance(row, Measurement):
            return row
        if hasattr(row, "to_dict"):  # a pandas row: read as a dict, once
            row = row.to_dict()
        get = row.get if hasattr(row, "get") else lambda name: getattr(row, name, None)
        return cls(**{name: v for name in _NAMES if (v := _value(get(name), name in _INTS)) is not None})

    # --- what readers derive -------------------------------------------------------------------------------------

    @property
    def ok(self) -> bool:
        """Whether the configuration ran and was measured (an 'ok' row has its samples and summary)."""
        return self.status == "ok"

    @property
    def config(self) -> Config:
        """Its configuration (a TypeError names a field the row lacks)."""
        return Config(**{name: getattr(self, name) for name in CONFIG_FIELDS if getattr(self, name) is not None})

    @property
    def shape(self) -> tuple:
        """What it computes: config.shape_of it (model, precision, sizes, strategy, data, backend)."""
        return shape_of(self)

    def samples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(samples in seconds, replicate ids, round ids), aligned; without stored ids one replicate, rounds 0…n-1."""
        x = np.asarray(self.samples_s if self.samples_s is not None else (), dtype=float)
        reps, rounds = self.sample_rep, self.sample_round
        reps = np.asarray(reps) if reps is not None and len(reps) == len(x) else np.zeros(len(x), dtype=int)
        rounds = np.asarray(rounds) if rounds is not None and len(rounds) == len(x) else np.arange(len(x))
        return x, reps, rounds

    @property
    def steady_median_s(self) -> float:
        """The median steady call: the row's median, else the median of its samples."""
        return self.median_s or float(np.median(self.samples_s))

    @property
    def one_time_s(self) -> float:
        """The one-time cost: preparation (compile, trace, export) and the first call, less one steady call. The
        preparation is the cold one (steps an earlier process left in a cache count at what they cost it), where
        the row has it (older rows: the preparation this process paid)."""
        median = self.steady_median_s
        prepare = self.cold_prepare_s if self.cold_prepare_s is not None else self.prepare_s
        return (prepare or 0.0) + (self.first_call_s or median) - median

    @property
    def warm_one_time_s(self) -> float:
        """The one-time cost of a compile from the cache an earlier process saved, defined as the cold one is
        (preparation and first call less one steady call): NaN where no warm compile was measured."""
        if self.warm_first_call_s is None or self.median_s is None:
            return math.nan
        return (self.warm_prepare_s or 0.0) + self.warm_first_call_s - self.median_s


_NAMES = tuple(f.name for f in fields(Measurement))
_INTS = frozenset(f.name for f in fields(Measurement) if f.type.startswith("int"))


def _value(v, whole: bool = False):
    """A column's value as a field holds it: blanks (None, NaN) None, numpy scalars Python's, lists tuples, a whole
    number of an int column an int (a pandas column with blanks holds floats)."""
    kind = type(v)
    if v is None or kind is str or kind is int or kind is bool:
        return v
    if kind is list or kind is np.ndarray:
        return tuple(v)
    if hasattr(v, "item"):  # a numpy scalar
        return _value(v.item(), whole)
    if kind is float:
        return None if math.isnan(v) else int(v) if whole and v.is_integer() else v
    return v
