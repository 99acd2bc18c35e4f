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
    # (results with samples, peaks, *, vt) -> Analysis; every decision it states is read from the verdict table `vt`
    analyse: Callable[..., Analysis]
    group_by: Callable[[Config], tuple] | None = None  # which configurations share rounds (default: the shape)
    workloads: Callable[..., Workloads] | None = None  # (StudyRun) -> sweep.Workloads; default: fixed-shape inputs
    frameworks: tuple[str, ...] = ("torch",)  # whose threads the study sets (and records)
    comparisons: tuple[Comparison, ...] = ()  # the speed-ups its Answer box gives by regime (speedups.py)
    # the columns a reader chooses between, and the default every option's speed-up is over (stats/verdicts.py)
    options: tuple[str, ...] = ("variant",)
    default: tuple[tuple[str, str], ...] = (("variant", "eager"),)
    notebook_file: Path | None = None  # where its notebook is (default: notebooks/<notebook>.ipynb)
    runs: str = ""  # how the study builds and runs its models, for the index's rows of workloads several studies share
    on_gpu: str = ""  # one sentence for the page's Answer box: what a GPU is expected to change, and why
    expectations: tuple[Expectation, ...] = ()  # what should hold (surprises.py)
    warm_compile: bool = False  # measure the warm compile of each torch.compile configuration (bench/warm.py)

    @property
    def notebook_path(self) -> Path:
        return self.notebook_file or paths.notebook_path(self.notebook)
