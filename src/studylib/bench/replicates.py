"""Replicates: a study's groups measured in k independent processes, one after another, then combined.

A CI built from one burst of samples in one process cannot see what changes between runs (where the
process's memory landed, which phase the machine was in). So each replicate is a fresh Python
process (`python -m studylib.bench.replicates TASK`) that measures every pending group, and replicate r+1
starts only when replicate r has finished the whole grid: the replicates of a group lie minutes apart.
`studylib run` spreads them further: before any notebook runs, it measures replicates 0 … k-2 of every
notebook it was asked for, pass by pass (`only_replicate`; study.measure_replicate), and each notebook then
measures its last replicate and combines. A group's replicates then lie about a k-th of the whole run apart,
so the spread between them (the reported CIs' between-process term, variance.medians_between) also
sees the slower phases of a shared machine that come and go over tens of minutes.
Groups that need a process environment of their own (grouping.process_env: study 05's Keras backend) run in
one process per environment, one after another, within each replicate. A replicate process imports no framework:
each framework of a group is measured in a worker process of its own (workers.py), kept for the replicate's groups.

Each replicate writes one part file per group as the group finishes (`<notebook>.parts/`, atomically).
When a group has its k parts, its rows are combined (sweep.combine) and appended to the results table
and the parts are removed. An interruption loses at most the group in flight: a re-run keeps the parts
already written (same environment and settings) and measures only what is missing. A forced run measures
everything anew but keeps the parts written earlier in the same `studylib run` (its id, RUN_ID_VAR, is in
every part), which are its own early passes. A replicate
process that dies (a crash, the kernel's out-of-memory killer) leaves error rows for the group it was
measuring, and the next process goes on with the rest. A CUDA error or a GPU out-of-memory is recorded in its own
row; the process then ends with FRESH_PROCESS_EXIT and a fresh one measures the groups left, with no rows for them.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.config import Config
from ..core.files import read_json, write_json_atomic
from ..machine import gpu
from ..machine.environment import git_commit
from ..stats.results import ResultsTable
from . import grouping, sweep, workers
from .builder import Workloads
from .plan import Plan

RUN_ID_VAR = "STUDYLIB_RUN_ID"  # set by `studylib run` for the whole run; its processes inherit it


@dataclass
class Task:
    """What one replicate process measures (pickled to a file the process reads)."""

    plan: Plan
    groups: list[tuple[str, str, list[Config]]]  # (group key, group id, configurations)
    replicate: int
    workloads: Workloads
    parts_dir: str
    env_vars: dict | None = None  # what the process starts with (grouping.process_env: study 05's Keras backend)


def _part_path(parts_dir: Path, group_key: str, replicate: int) -> Path:
    digest = hashlib.sha256(group_key.encode()).hexdigest()[:16]
    return Path(parts_dir) / f"{digest}.r{replicate}.json"


def _in_flight_path(parts_dir: Path, replicate: int) -> Path:
    return Path(parts_dir) / f"in-flight.r{replicate}.json"


def read_parts(parts_dir: Path, group_key: str, k: int, *, fingerprint: str, settings: set[str]) -> dict[int, dict]:
    """The usable parts of a group: replicate → part (same environment, same settings, same group id)."""
    parts = {}
    for r in range(k):
        part = read_json(_part_path(parts_dir, group_key, r))
        if part and part.get("env_fingerprint") == fingerprint and set(part.get("settings", [])) == settings:
            parts[r] = part
    ids = {p["group_id"] for p in parts.values()}
    if len(ids) > 1:  # parts of two runs: keep the newest run's
        newest = max(parts.values(), key=lambda p: p["written_at"])["group_id"]
        parts = {r: p for r, p in parts.items() if p["group_id"] == newest}
    return parts


def _write_part(parts_dir: Path, group_key: str, group_id: str, replicate: int, rows: list[dict],
                fingerprint: str) -> None:
    write_json_atomic(_part_path(parts_dir, group_key, replicate), {
        "group_key": group_key, "group_id": group_id, "replicate": replicate, "env_fingerprint": fingerprint,
        "settings": sorted({r["settings_hash"] for r in rows}), "written_at": time.time(),
        "run_id": os.environ.get(RUN_ID_VAR), "rows": rows})


def _of_this_run(part: dict) -> bool:
    """Whether a part was written within the current `studylib run` (never outside one)."""
    run_id = os.environ.get(RUN_ID_VAR)
    return run_id is not None and part.get("run_id") == run_id


FRESH_PROCESS_EXIT = 75  # a replicate process's own exit code: a failure spoiled it, the rest needs a fresh one


def _worker(task: Task, *, own_process: bool = True, after_group: Callable[[], None] | None = None) -> int:
    """Measure the task's groups, writing a part per group as it finishes. In its own process this one coordinates
    and imports no framework: each framework is measured in a worker process of its own (workers.ProcessPool, kept
    for all the task's groups); otherwise (`in_process`) every framework runs here (sweep.LocalPool). 0 when every
    group was measured; FRESH_PROCESS_EXIT when a CUDA error or a GPU out-of-memory (sweep.spoils_process) ended a
    group with groups left: its rows are written, and the parent starts a fresh process for the rest."""

    plan = task.plan
    pool = workers.ProcessPool(plan, task.workloads) if own_process else sweep.LocalPool(plan, task.workloads)
    parts_dir = Path(task.parts_dir)
    try:
        for i, (group_key, group_id, configs) in enumerate(task.groups):
            write_json_atomic(_in_flight_path(parts_dir, task.replicate), {"group_key": group_key})
            rows = sweep.measure_group(configs, plan, workloads=task.workloads, group_key=group_key,
                                       group_id=group_id, replicate=task.replicate, commit=git_commit(), pool=pool)
            _write_part(parts_dir, group_key, group_id, task.replicate, rows, plan.fingerprint)
            if after_group:
                after_group()
            if i + 1 < len(task.groups) and any(sweep.spoils_process(r) for r in rows):
                _in_flight_path(parts_dir, task.replicate).unlink(missing_ok=True)
                return FRESH_PROCESS_EXIT
    finally:
        pool.close()
    _in_flight_path(parts_dir, task.replicate).unlink(missing_ok=True)
    return 0


def _start_vars(task: Task) -> dict[str, str]:
    """What the process starts with before any framework loads: the precision policy's variables and JAX's
    no-preallocation (gpu.process_vars)."""
    return gpu.process_vars(task.plan.env.get("precision"))


def _died_rows(configs: list[Config], task: Task, group_key: str, group_id: str, rc: int) -> list[dict]:
    rows = []
    for c in configs:
        row = sweep.base_row(c, task.plan, group_key=group_key, group_id=group_id)
        signal = f" (signal {-rc})" if rc < 0 else ""
        row.update(status="oom" if rc in (-9, 137) else "error", wall_s=0.0, timestamp="",
                   error=f"the replicate's process died with exit code {rc}{signal} while measuring this group"
                         + ("; the kernel's out-of-memory killer is the likely cause" if rc in (-9, 137) else ""))
        rows.append(row)
    return rows


def _run_process(task: Task, poll: Callable[[], None], in_process: bool = False) -> int:
    """Run one replicate process on `task`; call `poll` every second while it runs; its exit code.

    `in_process` measures in this process instead (tests, debugging): quicker to start, no isolation, and the
    task's environment variables are not applied (a Keras backend other than this process's is a skipped row)."""
    if in_process:
        return _worker(task, own_process=False, after_group=poll)
    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
        pickle.dump(task, f)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "studylib.bench.replicates", f.name],
                                env=os.environ | _start_vars(task) | (task.env_vars or {}))
        try:
            while proc.poll() is None:
                time.sleep(1.0)
                poll()
        except BaseException:  # an interrupted kernel stops its measuring process too
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
        return proc.returncode
    finally:
        os.unlink(f.name)


def measure(groups: dict[str, list[Config]], plan: Plan, *, table: ResultsTable, workloads: Workloads,
        parts_dir: Path, force: bool = False, on_group: Callable[[list[dict]], None] | None = None,
        in_process: bool = False, only_replicate: int | None = None) -> list[dict]:
    """Measure `groups` in the plan's `replicates` processes and append their combined rows.

    `only_replicate` measures that replicate only (an early pass of `studylib run`): its parts wait for the
    others, and a group is combined once all k are there. `force` drops the parts of earlier runs, not those
    of this one. The plan's `expectations` (the study's, surprises.Expectation) are checked on each replicate's
    rounds; see measure_group."""
    k = plan.replicates
    parts_dir = Path(parts_dir)
    parts_dir.mkdir(parents=True, exist_ok=True)

    settings = {key: {plan.settings_hash(c) for c in configs} for key, configs in groups.items()}  # once, not per poll

    def parts_of(key: str) -> dict[int, dict]:
        return read_parts(parts_dir, key, k, fingerprint=plan.fingerprint, settings=settings[key])

    parts: dict[str, dict[int, dict]] = {}
    for key in groups:
        parts[key] = parts_of(key)
        if force:
            parts[key] = {r: p for r, p in parts[key].items() if _of_this_run(p)}
            for r in set(range(k)) - set(parts[key]):
                _part_path(parts_dir, key, r).unlink(missing_ok=True)
    ids = {key: next(iter(p.values()))["group_id"] if p else uuid.uuid4().hex[:12] for key, p in parts.items()}
    new_rows: list[dict] = []

    def finalize() -> None:
        for key in groups:
            if key in parts and len(parts[key]) < k:
                parts[key] = parts_of(key)
            if key in parts and len(parts[key]) == k:
                rows = sweep.combine([parts[key][r]["rows"] for r in range(k)])
                for row in rows:
                    table.append(row)
                table.write_csv()
                new_rows.extend(rows)
                for r in range(k):
                    _part_path(parts_dir, key, r).unlink(missing_ok=True)
                del parts[key]
                if on_group:
                    on_group(rows)

    finalize()
    for r in range(k) if only_replicate is None else [only_replicate]:
        while True:
            need = [(key, ids[key], groups[key]) for key in groups if key in parts and r not in parts[key]]
            if not need:
                break
            # one process per environment (study 05: per Keras backend), in the order the groups come
            env_vars = grouping.process_env(need[0][2])
            need = [g for g in need if grouping.process_env(g[2]) == env_vars]
            task = Task(plan, need, r, workloads, str(parts_dir), env_vars)
            rc = _run_process(task, finalize, in_process)
            finalize()
            if rc != 0:
                key = _died_group(need, parts, r, read_json(_in_flight_path(parts_dir, r)) or {})
                if key is None:
                    continue  # it measured some groups and none was left half done: a fresh process for the rest
                _write_part(parts_dir, key, ids[key], r, _died_rows(groups[key], task, key, ids[key], rc),
                            plan.fingerprint)
                finalize()
    return new_rows


def _died_group(need: list, parts: dict, r: int, flight: dict) -> str | None:
    """The group a replicate process that ended with a non-zero code leaves "died" rows for: the one it was measuring
    (its in-flight mark) when that group has no part; when it measured nothing at all, the first it was given (so the
    next process moves on); else none (a fresh process measures the groups that never ran: FRESH_PROCESS_EXIT)."""
    missing = [key for key, _, _ in need if key in parts and r not in parts[key]]
    if flight.get("group_key") in missing:
        return flight["group_key"]
    if len(missing) == len(need):
        return missing[0] if missing else None
    return None


def pending_parts(parts_dir: Path) -> int:
    """Configurations measured in part files not yet combined (for progress bars)."""
    n = 0
    for p in Path(parts_dir).glob("*.r*.json"):
        if p.name.startswith("in-flight"):
            continue
        n += len((read_json(p) or {}).get("rows", []))
    return n


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as fh:
        _task: Any = pickle.load(fh)
    sys.exit(_worker(_task))
