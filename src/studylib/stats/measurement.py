"""One results row as a type: each column a `Measurement` field with its unit and meaning; a blank reads as None."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ..core import cells
from ..core.config import FIELDS as CONFIG_FIELDS
from ..core.config import Config, shape_of

IDENTITY, MEASURED, RUN, READ = "identity", "measured", "run", "read"


def _col(stored: str, unit: str, meaning: str, *, ok: bool = False):
    """A column's field: where it is `stored`, its `unit` ('' none), its `meaning`, whether an 'ok' row has it (`ok`)."""
    return field(default=None, metadata={"stored": stored, "unit": unit, "meaning": meaning, "ok": ok})


@dataclass(frozen=True)
class Measurement:
    """One configuration's newest results row, read by attribute (units in the names: _s seconds, _mb megabytes)."""

    study: str | None = _col(IDENTITY, "", "the study (notebook id)")
    profile: str | None = _col(IDENTITY, "", "the hardware profile")
    config_key: str | None = _col(IDENTITY, "", "the configuration in one string (config.Config.key)")
    # the configuration: config.Config's fields (`config` builds it)
    model: str | None = _col(IDENTITY, "", "the model")
    variant: str | None = _col(IDENTITY, "", "how it runs (runtime and its settings)")
    dtype: str | None = _col(IDENTITY, "", "the precision")
    batch_size: int | None = _col(IDENTITY, "inputs", "inputs per call")
    device: str | None = _col(IDENTITY, "", "cpu or cuda")
    threads: int | None = _col(IDENTITY, "threads", "the threads it may use")
    seq_len: int | None = _col(IDENTITY, "tokens", "the sequence length (data-set studies: the maximum)")
    image_size: int | None = _col(IDENTITY, "px", "the image size")
    strategy: str | None = _col(IDENTITY, "", "data-set studies: how texts are batched")
    data: str | None = _col(IDENTITY, "", "data-set studies: the corpus, sample and tokenizer")
    backend: str | None = _col(IDENTITY, "", "study 05: the Keras backend of its process")
    task: str | None = _col(IDENTITY, "", "the model's kind (text, image)")
    group_key: str | None = _col(IDENTITY, "", "the group timed in shared rounds")
    group_id: str | None = _col(IDENTITY, "", "the group's id")
    env_fingerprint: str | None = _col(IDENTITY, "", "the environment it was measured in")
    settings_hash: str | None = _col(IDENTITY, "", "the measurement settings it was measured with")
    git_commit: str | None = _col(IDENTITY, "", "the code it was measured at")
    status: str | None = _col(IDENTITY, "", "ok, oom, error or skipped (results.STATUSES)")
    error: str | None = _col(IDENTITY, "", "why it failed ('' when ok)")
    # the timing summary: calls per sample, the run's order-statistic CI of the median
    n: int | None = _col(MEASURED, "samples", "timed samples", ok=True)
    median_s: float | None = _col(MEASURED, "s", "the median steady call", ok=True)
    mean_s: float | None = _col(MEASURED, "s", "the mean steady call")
    p90_s: float | None = _col(MEASURED, "s", "the 90th percentile call")
    p99_s: float | None = _col(MEASURED, "s", "the 99th percentile call")
    iqr_s: float | None = _col(MEASURED, "s", "the interquartile range of the calls")
    cv: float | None = _col(MEASURED, "", "the coefficient of variation of the calls")
    ci_run_low_s: float | None = _col(MEASURED, "s", "the run's own 95% CI of the median, low", ok=True)
    ci_run_high_s: float | None = _col(MEASURED, "s", "the run's own 95% CI of the median, high", ok=True)
    first_call_s: float | None = _col(MEASURED, "s", "the first call", ok=True)
    warmup_calls: int | None = _col(MEASURED, "calls", "untimed calls after the first")
    stop_reason: str | None = _col(MEASURED, "", "why the rounds stopped")
    samples_s: tuple[float, ...] | None = _col(MEASURED, "s", "the raw samples, one call each", ok=True)
    sample_rep: tuple[int, ...] | None = _col(MEASURED, "", "each sample's replicate process", ok=True)
    sample_round: tuple[int, ...] | None = _col(MEASURED, "", "each sample's round", ok=True)
    block_calls: int | None = _col(MEASURED, "calls", "calls per sample of a short call")
    replicates: int | None = _col(MEASURED, "processes", "independent processes it was timed in", ok=True)
    drift: bool | None = _col(MEASURED, "", "whether the samples trend over the run (stats.drift)")
    drift_tau: float | None = _col(MEASURED, "", "Kendall's tau of the trend")
    drift_p: float | None = _col(MEASURED, "", "the trend's p-value")
    drift_pct: float | None = _col(MEASURED, "share", "the trend's size over the run, as a share of the median")
    # parity with eager
    max_abs_diff: float | None = _col(MEASURED, "", "the largest absolute difference of its output to eager's")
    parity_tol: float | None = _col(MEASURED, "", "the difference allowed")
    parity_ok: bool | None = _col(MEASURED, "", "whether the output matches eager's within the tolerance", ok=True)
    label_agreement: float | None = _col(MEASURED, "share", "the share of argmax labels equal to eager's")
    # one-time costs
    prepare_s: float | None = _col(MEASURED, "s", "preparation in this process (compile, trace, export)")
    cold_prepare_s: float | None = _col(MEASURED, "s", "preparation with nothing cached (older rows lack it)")
    prepare_steps: tuple | None = _col(MEASURED, "", "the preparation's steps, their seconds and whether cached")
    runtime_startup_s: float | None = _col(MEASURED, "s", "the runtime's start-up")
    compilations: int | None = _col(MEASURED, "", "compilations during the first call")
    recompilations: int | None = _col(MEASURED, "", "compilations after the first call")
    # memory and rates
    peak_mem_mb: float | None = _col(MEASURED, "MB", "the peak memory")
    mem_kind: str | None = _col(MEASURED, "", "what the peak memory counts")
    throughput_samples_s: float | None = _col(MEASURED, "inputs/s", "inputs per second at the median")
    throughput_tokens_s: float | None = _col(MEASURED, "tokens/s", "tokens per second at the median")
    notes: str | None = _col(MEASURED, "", "the runtime's notes")
    # data-set studies: what one timed pass covers
    n_texts: int | None = _col(MEASURED, "texts", "texts in a pass")
    n_batches: int | None = _col(MEASURED, "batches", "batches in a pass")
    real_tokens: int | None = _col(MEASURED, "tokens", "tokens of the texts")
    computed_tokens: int | None = _col(MEASURED, "tokens", "tokens computed, padding included")
    padding_waste: float | None = _col(MEASURED, "share", "the share of computed tokens that are padding")
    batched_vs_unbatched_max_diff: float | None = _col(MEASURED, "", "the largest difference, batched to one by one")
    # work per timed call (roofline: FLOPs on the eager model, bytes moved at least); older rows lack them
    flops_per_call: int | None = _col(MEASURED, "FLOP", "the work of a call")
    bytes_per_call: int | None = _col(MEASURED, "bytes", "the bytes a call moves at least")
    useful_flops_per_call: int | None = _col(MEASURED, "FLOP", "data-set passes: the work without padding")
    graph_breaks: int | None = _col(MEASURED, "", "torch.compile: where dynamo stopped tracing")
    # a surprise's profile (bench/surprises.py)
    profile_top_ops: tuple | None = _col(MEASURED, "", "one call's top operators by self time")
    profile_note: str | None = _col(MEASURED, "", "what was profiled and why (or why not)")
    # torch.compile in a later process, from the cache an earlier one saved (bench/warm.py)
    warm_prepare_s: float | None = _col(MEASURED, "s", "its preparation, where every cache lookup hit")
    warm_first_call_s: float | None = _col(MEASURED, "s", "its first call, where every cache lookup hit")
    warm_cache_hits: int | None = _col(MEASURED, "", "its cache lookups that hit")
    warm_cache_misses: int | None = _col(MEASURED, "", "its cache lookups that missed")
    warm_max_abs_diff: float | None = _col(MEASURED, "", "its output's largest absolute difference to eager's")
    warm_note: str | None = _col(MEASURED, "", "what the step did, or why not")
    # the run
    wall_s: float | None = _col(RUN, "s", "the configuration's wall time")
    timestamp: str | None = _col(RUN, "", "when it was measured")
    run_shift_sigma: float | None = _col(RUN, "log", "the SD of the shift between whole runs (run_shift.py)")
    run_shift_df: int | None = _col(RUN, "", "that SD's degrees of freedom")
    tf32: str | None = _col(RUN, "", "the precision policy: on, off or n/a (cpu)")
    process: str | None = _col(RUN, "", "the worker process and its threading (older rows lack it)")
    # what the variance model adds when a table is read (variance.with_reported_ci)
    median_pooled_s: float | None = _col(READ, "s", "the stored median of all samples")
    ci_low_s: float | None = _col(READ, "s", "the 95% CI of the median, its processes included, low")
    ci_high_s: float | None = _col(READ, "s", "the 95% CI of the median, its processes included, high")
    rerun_low_s: float | None = _col(READ, "s", "the CI of a re-run on this host, low")
    rerun_high_s: float | None = _col(READ, "s", "the CI of a re-run on this host, high")
    se_log: float | None = _col(READ, "log", "the median's standard error")
    df_log: float | None = _col(READ, "", "its degrees of freedom")
    heterogeneous: bool | None = _col(READ, "", "whether its replicates disagree beyond the table's τ²")
    process_tau2: float | None = _col(READ, "log²", "the table's τ² of medians between processes")
    process_df: int | None = _col(READ, "", "its degrees of freedom")
    process_spread_pct: float | None = _col(READ, "%", "the spread between processes")
    ratio_tau2: float | None = _col(READ, "log²", "the τ² of speed-ups of its runtime class")
    ratio_df: int | None = _col(READ, "", "its degrees of freedom")
    ratio_anchor: bool | None = _col(READ, "", "whether its shape's speed-ups were paired with it")

    @classmethod
    def of(cls, row: Any) -> Measurement:
        """The Measurement of a results row: a dict, a pandas row (NaN read as None) or a Measurement (itself)."""
        if isinstance(row, Measurement):
            return row
        if hasattr(row, "to_dict"):  # a pandas row: read as a dict, once
            row = row.to_dict()
        return cls(**{name: v for name in _NAMES if (v := _value(cells.of(row, name), name in _INTS)) is not None})

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
        """The one-time cost: the cold preparation (else this process's) and the first call, less one steady call."""
        median = self.steady_median_s
        prepare = self.cold_prepare_s if self.cold_prepare_s is not None else self.prepare_s
        return (prepare or 0.0) + (self.first_call_s or median) - median

    @property
    def warm_one_time_s(self) -> float:
        """The one-time cost of the warm compile, defined as the cold one is; NaN where none was measured."""
        if self.warm_first_call_s is None or self.median_s is None:
            return math.nan
        return (self.warm_prepare_s or 0.0) + self.warm_first_call_s - self.median_s


_NAMES = tuple(f.name for f in fields(Measurement))
_INTS = frozenset(f.name for f in fields(Measurement) if f.type.startswith("int"))
_TYPES = {"str": (str,), "int": (int,), "float": (float, int), "bool": (bool,), "tuple": (list,)}


def _columns(*stored: str) -> dict[str, tuple[type, ...]]:
    """The columns stored in those parts of a row, each with the types its value may take (None: not measured)."""
    return {f.name: _TYPES[f.type.split("[")[0].split(" ")[0]] for f in fields(Measurement)
            if f.metadata["stored"] in stored}


MEASURED_COLUMNS, RUN_COLUMNS = _columns(MEASURED), _columns(RUN)  # a row's measured ones are None until measured
COLUMNS = _columns(IDENTITY, MEASURED, RUN)  # every column a stored row has
OK_REQUIRES = tuple(f.name for f in fields(Measurement) if f.metadata["ok"])  # an 'ok' row has these, never None


def _value(v, whole: bool = False):
    """A column's value as a field holds it: blanks None, numpy scalars Python's, lists tuples, whole ints as int."""
    v, kind = cells.value(v), type(v)
    if kind is list or kind is np.ndarray:
        return tuple(v)
    if kind not in (str, int, float, bool) and hasattr(v, "item"):  # a numpy scalar
        return _value(v.item(), whole)
    return cells.whole(v) if whole else v
