"""Append-only results table: a fsync'd JSON line per row (a torn last line ignored); the newest row wins."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.files import write_text_atomic
from . import variance
from .measurement import COLUMNS, OK_REQUIRES, Measurement

STATUSES = ("ok", "oom", "error", "skipped")


def validated(row: dict[str, Any]) -> dict[str, Any]:
    """The row checked against COLUMNS as stored; raises ValueError naming the column."""
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
        if value is not None and (not isinstance(value, types) or (bool not in types and isinstance(value, bool))):
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

    def latest(self) -> dict[str, dict[str, Any]]:
        """The newest row of each configuration, by configuration key, in the order of their newest rows."""
        latest: dict[str, dict] = {}
        lines = self.path.read_text().split("\n")[:-1] if self.path.exists() else []  # a torn last line left out
        for line in lines:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            latest.pop(row["config_key"], None)
            latest[row["config_key"]] = row
        return latest

    def rows(self) -> list[dict[str, Any]]:
        """The newest row of each configuration with the variance model's columns (variance.with_reported_ci)."""
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
