"""A paired speed-up's variance parts projected to k' processes of m times the rounds (docs/method.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import calibration, variance


@dataclass(frozen=True)
class Parts:
    """A paired speed-up's variance parts: SE² = (v + tau2)/k; df_within and tau_df their degrees of freedom."""

    v: float
    tau2: float
    k: int
    df_within: float
    tau_df: float


def speedup_parts(base: Any, cand: Any) -> Parts | None:
    """The variance parts of the paired speed-up of `cand` over `base`; None where they shared no rounds."""
    u = variance.pair_unit(base, cand)
    if u is None:
        return None
    tau2, tau_df, _ = variance.tau2_for(u, variance.pair_between(base, cand))
    return Parts(float(np.mean(u.v)), tau2, len(u.y), float(u.df_within), float(tau_df))


def projected(parts: list[Parts], k: int, m: float) -> tuple[np.ndarray, np.ndarray]:
    """(SE, degrees of freedom) of each speed-up in a design of k processes of m times the rounds measured."""
    se, df = [], []
    for p in parts:
        within = (p.v / (m * k), max((p.df_within + p.k) * m * k / p.k - k, 1.0))
        between = (p.tau2 / k, p.tau_df * (k - 1) / (p.k - 1) if p.k > 1 else 0.0)  # df 0: none known
        terms = [within] + ([between] if between[0] > 0 else [])
        se.append(np.sqrt(sum(a for a, _ in terms)))
        df.append(variance.satterthwaite(terms))
    return np.array(se, dtype=float), np.array(df, dtype=float)


def rerun_reproduced(parts: list[Parts], k: int, m: float, tolerance: float = calibration.TOLERANCE) -> float:
    """The share of these speed-ups a same-host re-run of the design would call reproduced had nothing changed."""
    se, df = projected(parts, k, m)
    return float(np.mean(calibration.reproduction_probability(*calibration.combined(se, df, se, df), tolerance)))
