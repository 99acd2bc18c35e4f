"""The shift of every median between two whole runs on one host, from run_shifts.yaml (docs/method.md)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml
from scipy import stats as _st

from ..core import wording

RECORD = Path(__file__).with_name("run_shifts.yaml")
RECORDED, UNKNOWN = "recorded", "unknown"
CHOICES = (RECORDED, UNKNOWN)


@dataclass(frozen=True)
class RunShift:
    """The SD of a whole run's common shift (log scale) with its degrees of freedom and 95% interval."""

    sigma: float
    df: int
    low: float
    high: float

    @property
    def pct(self) -> float:
        return 100 * float(np.expm1(self.sigma))

    @property
    def interval_pct(self) -> tuple[float, float]:
        return 100 * float(np.expm1(self.low)), 100 * float(np.expm1(self.high))


def of(sigma: float, df: int) -> RunShift:
    """The run shift of a log-scale SD with `df` degrees of freedom, with its chi-square 95% interval."""
    df = int(df)
    return RunShift(float(sigma), df, float(sigma * np.sqrt(df / _st.chi2.ppf(0.975, df))),
                    float(sigma * np.sqrt(df / _st.chi2.ppf(0.025, df))))


def estimate(shifts_pct) -> RunShift:
    """The per-run SD from same-host pairs' common shifts (%), with its chi-square 95% interval."""
    d = np.log1p(np.asarray(shifts_pct, dtype=float) / 100)
    if len(d) == 0:
        raise ValueError("no same-host pair to estimate the shift between runs from")
    return of(float(np.sqrt(np.sum(d ** 2) / (2 * len(d)))), len(d))


def pairs(path: Path = RECORD) -> list[dict]:
    """The recorded same-host pairs (first, second, host, hours_apart, studies, shift_pct, note)."""
    return list(yaml.safe_load(path.read_text())["pairs"])


@lru_cache(maxsize=1)
def recorded() -> RunShift:
    """The estimate from every pair in run_shifts.yaml."""
    return estimate([p["shift_pct"] for p in pairs()])


def for_profile(choice: str) -> RunShift | None:
    """The run shift a profile's `run_shift` names: the record's estimate, or None (unknown)."""
    if choice not in CHOICES:
        raise ValueError(f"run_shift must be one of {', '.join(CHOICES)}, not {choice!r}")
    return recorded() if choice == RECORDED else None


def describe(shift: RunShift | None) -> str:
    """One line for the pages: what the re-run interval adds, or that it is unknown."""
    return wording.say("stats/run_shift.j2", shift=shift)
