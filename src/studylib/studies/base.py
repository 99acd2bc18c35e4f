"""What a study is (`Study`: its section schema, grid, `plan` estimate and `analyse`), and the registry it joins."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..bench.builder import Workloads
from ..bench.surprises import Expectation
from ..claims.claims import CLAIM_COLUMNS  # noqa: F401 - a study's claims table has these columns
from ..core import paths
from ..core.config import Config
from ..core.study_registry import REGISTRY, register, unregister  # noqa: F401 - the studies register through here
from ..stats.speedups import Comparison


@dataclass
class Analysis:
    """What a study's results say: its notebook's tables, its findings and its claims (CLAIM_COLUMNS and more)."""

    tables: dict[str, pd.DataFrame]
    findings: list[str]
    claims: pd.DataFrame


@dataclass(frozen=True)
class Study:
    """One study, as the rest of the code sees it (see the module's docstring)."""

    notebook: str  # its id: the notebook's file stem and the profile section's name
    section: type  # pydantic schema of its profile section
    configs: Callable[..., list[Config]]  # (section, *, device, threads) -> configurations, in measuring order
    estimate_s: Callable[..., float]  # (config, section, measure settings, speed) -> seconds, for `plan`
    # (results with raw samples, peaks, *, vt) -> tables, findings, claims: `vt` is the run's verdict table (StudyRun.verdicts,
    # or the saved one: summary.verdicts_of), every decision it states is read from it; `peaks` (the machine's limits,
    # StudyRun.peaks) adds the roofline (roofline.attach), and without it the roofline says they are unknown
    analyse: Callable[..., Analysis]
    group_by: Callable[[Config], tuple] | None = None  # which configurations share rounds (default: the shape)
    # (StudyRun) -> what each configuration runs (sweep.Workloads); default: fixed-shape inputs per configuration
    workloads: Callable[..., Workloads] | None = None
    frameworks: tuple[str, ...] = ("torch",)  # whose threads the study sets (and records)
    comparisons: tuple[Comparison, ...] = ()  # the speed-ups its Answer box gives by regime (speedups.py)
    # the configuration columns a reader chooses between (a workload is the shape less these), and the default
    # choice every option's speed-up is taken over (stats/verdicts.py); a choice the default leaves open is matched
    options: tuple[str, ...] = ("variant",)
    default: tuple[tuple[str, str], ...] = (("variant", "eager"),)
    notebook_file: Path | None = None  # where its notebook is (default: notebooks/<notebook>.ipynb)
    on_gpu: str = ""  # one sentence for the page's Answer box: what a GPU is expected to change, and why
    # what should hold (a candidate faster than, or equal to, its baseline): a replicate that contradicts one profiles
    # one call of each side after its rounds (surprises.py)
    expectations: tuple[Expectation, ...] = ()
    # compile each torch.compile configuration again from the cache an earlier process saved, after its rounds: the warm
    # one-time cost beside the cold one (bench/warm.py)
    warm_compile: bool = False

    @property
    def notebook_path(self) -> Path:
        return self.notebook_file or paths.notebook_path(self.notebook)
