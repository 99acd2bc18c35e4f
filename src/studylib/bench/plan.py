"""The measurement plan: everything a study's measurement depends on, built once per notebook, pickled to replicates."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .. import runtimes
from ..core.config import Config
from ..stats import run_shift
from ..stats.run_shift import RunShift
from . import timing
from .schemas import MeasureSettings, Profile


@dataclass(frozen=True)
class Plan:
    """What a study measures with (frozen: built once by study.start, never edited on the way)."""

    study: str  # the notebook's name
    profile: str
    env: dict  # the captured environment (environment.capture): machine, software, precision policy, fingerprint
    measure: MeasureSettings  # rounds, budgets, replicates
    parity_tolerance: dict[str, float]  # relative tolerance vs eager PyTorch, per dtype and 'int8'
    seed: int
    threads: int
    frameworks: tuple[str, ...] = ("torch",)  # those whose thread pools and precision policy are set
    run_shift: RunShift | None = None  # the profile's shift between whole runs (None: unknown)
    peaks: dict | None = None  # the machine's measured limits (limits.measure_peaks), for the roofline
    expectations: tuple = ()  # the study's (surprises.Expectation): a contradicted one profiles both sides
    warm_compile: bool = False  # torch.compile configurations compiled again from an earlier process's cache

    @property
    def fingerprint(self) -> str:
        return self.env["fingerprint"]

    @property
    def replicates(self) -> int:
        return self.measure.replicates

    def tolerance(self, c: Config) -> float:
        """`c`'s parity tolerance: its runtime's precision (int8), 'tf32' for fp32 under tf32, else its dtype's."""
        runtime = runtimes.REGISTRY.get(c.variant)
        key = (runtime.precision if runtime is not None else None) or c.dtype
        tf32 = key == "fp32" and (self.env.get("precision") or {}).get("tf32")
        return self.parity_tolerance["tf32" if tf32 else key]

    def settings_hash(self, c: Config) -> str:
        """Identifies how `c` is measured: other settings, tolerance, seed or timing.METHOD measure it again."""
        key = json.dumps({"measure": self.measure.model_dump(), "tolerance": self.tolerance(c), "seed": self.seed,
                          "method": timing.METHOD}, sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:10]

    def rounds(self, n_configs: int) -> dict[str, Any]:
        """timing.measure_rounds' settings for a group of `n_configs`: the sampling budget is per configuration."""
        m = self.measure.model_dump(exclude={"replicates"})
        m["budget_s"] *= n_configs
        return m

    def row_stamp(self) -> dict[str, Any]:
        """What every row measured under this plan records of it besides its settings hash."""
        shift = self.run_shift
        return {"env_fingerprint": self.fingerprint, "run_shift_sigma": shift.sigma if shift else None,
                "run_shift_df": shift.df if shift else None,
                "tf32": (self.env.get("precision") or {}).get("label")}  # the precision policy (gpu.py) it ran under


def build(study: str, profile: str, settings: Profile, env: dict, *, frameworks: tuple[str, ...] = ("torch",),
          expectations: tuple = (), peaks: dict | None = None, warm_compile: bool = False) -> Plan:
    """The plan of a study's notebook from its settings (LoadedProfile.settings_for) and the captured environment."""
    return Plan(study, profile, env, settings.measure, dict(settings.parity_tolerance), settings.seed,
                settings.threads, tuple(frameworks), run_shift.for_profile(settings.run_shift), peaks,
                tuple(expectations), warm_compile)
