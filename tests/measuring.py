"""Measuring in a test as a notebook does (a plan, its pending groups, replicates.measure), in this process by default."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from studylib.bench import grouping, replicates
from studylib.bench.builder import Workloads
from studylib.bench.plan import Plan
from studylib.bench.schemas import MeasureSettings
from studylib.core import paths
from studylib.machine import environment

FAST = {"warmup_calls": 1, "min_rounds": 6, "max_rounds": 20, "min_time_s": 0.0, "target_ci_pct": 50.0,
        "budget_s": 0.05, "block_s": 0.0, "replicates": 1}
TOLERANCE = {"fp32": 1e-3, "bf16": 0.1, "fp16": 0.02, "int8": 0.1}


def plan(measure: dict = FAST, tolerance: dict = TOLERANCE, *, env: dict | None = None, study: str = "t",
         profile: str = "t", seed: int = 0, threads: int = 1, frameworks=("torch",), expectations=(),
         run_shift=None, peaks=None, warm_compile=False) -> Plan:
    """A plan with these settings (`env`: a fake environment, else this machine's)."""
    return Plan(study, profile, env if env is not None else environment.capture(profile), MeasureSettings(**measure),
                dict(tolerance), seed, threads, tuple(frameworks), run_shift, peaks, tuple(expectations), warm_compile)


def measure(configs, *, table, workloads=None, group_by=None, force=False, in_process=True, only_replicate=None,
            parts_dir=None, on_group=None, **plan_kw) -> list[dict]:
    """Measure what `table` lacks of `configs` (all when forced) under plan(**plan_kw); the new rows."""
    p = plan(**plan_kw)
    groups = grouping.pending_groups(configs, p, table=table, force=force, group_by=group_by)
    return replicates.measure(groups, p, table=table,
                              workloads=workloads or Workloads(p.seed, paths.cache_dir(p.profile)),
                              parts_dir=parts_dir or Path(table.path).with_suffix(".parts"), force=force,
                              in_process=in_process, only_replicate=only_replicate, on_group=on_group)


def at_reference(path: str) -> str:
    """A file as it was at the committed reference's commit (REFERENCE.json), from git; the test is skipped where
    this clone lacks that commit."""
    commit = json.loads((paths.ROOT / "reference" / "REFERENCE.json").read_text())["commit"]
    got = subprocess.run(["git", "-C", str(paths.ROOT), "show", f"{commit}:{path}"], capture_output=True, text=True)
    if got.returncode != 0:
        pytest.skip(f"the reference's commit {commit[:12]} is not in this clone's history")
    return got.stdout


def reference_method() -> int:
    """The timing method the committed reference was measured with (timing.METHOD at its commit): part of every
    row's settings hash."""
    return int(re.search(r"^METHOD = (\d+)", at_reference("src/studylib/bench/timing.py"), re.M).group(1))
