"""Append-only, resumable results table: one JSON line per configuration, written as it finishes.

Each row is one `write` of a whole line to a file opened for appending, then fsync'd. A crash can
only leave a torn last line; readers ignore it and the next append cuts it off. Re-runs skip
configurations already measured successfully in the same environment with the same settings; a
re-measured configuration appends a row, and the newest row per configuration wins.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.files import write_text_atomic
from . import variance
from .measurement import Measurement

STATUSES = ("ok", "oom", "error", "skipped")

_S, _I, _F, _B, _L = (str,), (int,), (float, int), (bool,), (list,)
# Every column a stored row has, with the types its value may take (units in the names: _s seconds,
# _mb megabytes, _pct percent). A failed row leaves the measured columns None.
IDENTITY_COLUMNS = {
    "study": _S, "profile": _S, "config_key": _S, "model": _S, "variant": _S, "dtype": _S, "batch_size": _I,
    "device": _S, "threads": _I, "seq_len": _I, "image_size": _I, "strategy": _S, "data": _S, "backend": _S, "task": _S,
    "group_key": _S, "group_id": _S, "env_fingerprint": _S, "settings_hash": _S, "git_commit": _S, "status": _S,
    "error": _S,
}
MEASURED_COLUMNS = {
    "n": _I, "median_s": _F, "mean_s": _F, "p90_s": _F, "p99_s": _F, "iqr_s": _F, "cv": _F,
    "ci_run_low_s": _F, "ci_run_high_s": _F, "first_call_s": _F, "warmup_calls": _I, "stop_reason": _S,
    "samples_s": _L, "sample_rep": _L, "sample_round": _L, "block_calls": _I, "replicates": _I,
    "drift": _B, "drift_tau": _F, "drift_p": _F, "drift_pct": _F,
    "max_abs_diff": _F, "parity_tol": _F, "parity_ok": _B, "label_agreement": _F,
    "prepare_s": _F, "cold_prepare_s": _F, "prepare_steps": _L, "runtime_startup_s": _F, "compilations": _I, "recompilations": _I,
    "peak_mem_mb": _F, "mem_kind": _S, "throughput_samples_s": _F, "throughput_tokens_s": _F, "notes": _S,
    # cold_prepare_s: the preparation a process that finds no cache pays: prepare_s plus what the steps it loaded
    # from a cache (ONNX export, optimize, quantize: prepare_steps' "cached") took when they were made; older rows
    # lack it (readers fall back to prepare_s)
    # data-set studies: what one timed pass covers
    "n_texts": _I, "n_batches": _I, "real_tokens": _I, "computed_tokens": _I, "padding_waste": _F,
    "batched_vs_unbatched_max_diff": _F,
    # work per timed call (see roofline): FLOPs counted on the eager model, bytes moved at least (weights read
    # once, outputs written once); data-set passes also the FLOPs without padding. Rows stored before these
    # were counted lack them: readers treat a missing column as unknown.
    "flops_per_call": _I, "bytes_per_call": _I, "useful_flops_per_call": _I,
    "graph_breaks": _I,  # torch.compile: places dynamo stopped tracing while the first call compiled
    # a surprise (surprises.py): one steady-state call's top operators by self time ({op, self_ms, calls, self_pct}),
    # and what was profiled and why (or why not); None where the configuration was not part of a surprise
    "profile_top_ops": _L, "profile_note": _S,
    # torch.compile again in a later process, from the cache an earlier one saved (bench/warm.py): its preparation
    # (loading the artifacts, torch.compile) and first call, only where every cache lookup hit; the lookups' hits and
    # misses; its output's max abs difference to eager; what the step did or why not. None where not measured (older
    # rows lack them: readers treat a missing column as unknown)
    "warm_prepare_s": _F, "warm_first_call_s": _F, "warm_cache_hits": _I, "warm_cache_misses": _I,
    "warm_max_abs_diff": _F, "warm_note": _S,
}
# the SD (log scale) of the shift between whole runs and its degrees of freedom (run_shift.py), which a median's
# re-run CI adds (variance.with_reported_ci); None where the profile does not know it
RUN_COLUMNS = {"wall_s": _F, "timestamp": _S, "run_shift_sigma": _F, "run_shift_df": _I,
               "tf32": _S,  # the precision policy (gpu.py): "on", "off" or "n/a (cpu)"
               # the worker process that measured it and the threading in force there (bench/workers.py); older
               # rows, measured with every framework in one process, lack it
               "process": _S}
COLUMNS = IDENTITY_COLUMNS | MEASURED_COLUMNS | RUN_COLUMNS
# An 'ok' row has these measured, never None.
OK_REQUIRES = ("n", "median_s", "ci_run_low_s", "ci_run_high_s", "first_call_s", "samples_s", "sample_rep",
               "sample_round", "replicates", "parity_ok")


def validated(row: dict[str, Any]) -> dict[str, Any]:
    """The row checked against COLUMNS once, as it is stored: every column present and no other, each value of
    its column's type (numpy scalars become Python's), an 'ok' row measured. A ValueError names the column."""
    if row.get("status") not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {row.get('status')!r}")
    unknown = sorted(set(row) - set(COLUMNS))
    missing = sorted(set(COLUMNS) - set(row))
    if unknown or missing:
        raise ValueError(f"results row {row.get('config_key')}: " + "; ".join(
            part for part in (unknown and f"unknown column(s) {unknown}", missing and f"missing column(s) {missing}")
            if part))
    out = {}
    for name, value in row.items():
        if hasattr(value, "item") and not isinstance(value, (list, str)):  # a numpy scalar
            value = value.item()
        types = COLUMNS[name]
        if value is not None and (not isinstance(value, types) or (types != _B and isinstance(value, bool))):
            raise ValueError(f"results row {row.get('config_key')}: column {name} must be "
                             f"{' or '.join(t.__name__ for t in types)}, got {type(value).__name__} {value!r:.60}")
        out[name] = value
    if out["status"] == "ok":
        blank = [name for name in OK_REQUIRES if out[name] is None]
        if blank:
            raise ValueError(f"results row {row.get('config_key')}: an 'ok' row without {blank}")
    return out


class ResultsTable:
    def __init__(self, path: Path):
        self.path = Path(path)

    def _lines(self) -> tuple[list[str], bool]:
        """Complete lines, and whether a torn (unterminated) last line was found."""
        if not self.path.exists():
            return [], False
        text = self.path.read_text()
        torn = bool(text) and not text.endswith("\n")
        lines = text.split("\n")
        return [ln for ln in lines[:-1] if ln.strip()], torn

    def latest(self) -> dict[str, dict[str, Any]]:
        """The newest row of each configuration, by configuration key, in the order of their newest rows."""
        latest: dict[str, dict] = {}
        for line in self._lines()[0]:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            latest.pop(row["config_key"], None)
            latest[row["config_key"]] = row
        return latest

    def rows(self) -> list[dict[str, Any]]:
        """The newest row of each configuration as reported: medians with CIs that hold across processes.

        The stored interval is the run's own order-statistic one (`ci_run_low_s`/`ci_run_high_s`); `ci_low_s`/
        `ci_high_s` and the re-run interval come from the table's variance model (variance.with_reported_ci).
        """
        return variance.with_reported_ci(list(self.latest().values()))

    def measurements(self) -> list[Measurement]:
        """The newest row of each configuration as reported (`rows`), typed: what the code that computes reads."""
        return [Measurement.of(row) for row in self.rows()]

    def append(self, row: dict[str, Any]) -> None:
        """Store one row (checked by `validated`) as one whole line, fsync'd."""
        row = validated(row)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._cut_torn_tail()
        data = (json.dumps(row, allow_nan=True, default=str) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _cut_torn_tail(self) -> None:
        """Cut an unterminated last line (a crash mid-write) off; reads only the tail, not the table."""
        if not self.path.exists():
            return
        with open(self.path, "r+b") as f:
            end = f.seek(0, os.SEEK_END)
            if end == 0:
                return
            f.seek(end - 1)
            if f.read(1) == b"\n":
                return
            pos, chunk = end, 1 << 16
            while pos > 0:  # find the last newline, reading backwards
                start = max(0, pos - chunk)
                f.seek(start)
                cut = f.read(pos - start).rfind(b"\n")
                if cut >= 0:
                    f.truncate(start + cut + 1)
                    return
                pos = start
            f.truncate(0)

    def frame(self, *, with_samples: bool = False):
        """The table as a pandas DataFrame (raw samples dropped unless asked for): the door for pages and analyses."""
        df = pd.DataFrame(self.rows())
        if not with_samples and "samples_s" in df:
            df = df.drop(columns="samples_s")
        return df

    def write_csv(self, path: Path | None = None) -> Path:
        """A tidy CSV beside the JSONL (no raw samples), replaced atomically."""
        return write_text_atomic(Path(path or self.path.with_suffix(".csv")), self.frame().to_csv(index=False))


def measured_alike(row: dict[str, Any] | None, env_fingerprint: str, settings_hash: str) -> bool:
    """Whether a configuration's newest row is 'ok' and from this environment and these settings."""
    return (row is not None and row["status"] == "ok" and row.get("env_fingerprint") == env_fingerprint
            and row.get("settings_hash") == settings_hash)
