"""Replicates: a study's groups measured in k fresh processes, a part file per group, then combined (docs/method.md)."""

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
    """The usable parts of a group: replicate → part (same environment and settings; the newest run's group id)."""
    parts = {}
    for r in range(k):
        part = read_json(_part_path(parts_dir, group_key, r))
        if part and part.get("env_fingerprint") == fingerprint and set(part.get("settings", [])) == settings:
            parts[r] = part
    if len({p["group_id"] for p in parts.values()}) > 1:
        newest = max(parts.values(), key=lambda p: p["written_at"])["group_id"]
        parts = {r: p for r, p in parts.items() if p["group_id"] == newest}
    return parts


def _write_part(parts_dir: Path, group_key: str, group_id: str, replicate: int, rows: list[dict],
                fingerprint: str) -> None:
    write_json_atomic(_part_path(parts_dir, group_key, replicate), {
        "group_key": group_key, "group_id": group_id, "replicate": replicate, "env_fingerprint": fingerprint,
        "settings": sorted({r["settings_hash"] for r in rows}), "written_at": time.time(),
        "run_id": os.environ.get(RUN_ID_VAR), "rows": rows})


FRESH_PROCESS_EXIT = 75  # a replicate process's own exit code: a failure spoiled it, the rest needs a fresh one


def _worker(task: Task, *, own_process: bool = True, after_group: Callable[[], None] | None = None) -> int:
    """Measure the task's groups, a part each; 0, or FRESH_PROCESS_EXIT where a failure spoiled the process."""
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
    """What the process starts with before any framework loads (gpu.process_vars)."""
    return gpu.process_vars(task.plan.env.get("precision"))


def _died_rows(configs: list[Config], task: Task, group_key: str, group_id: str, rc: int) -> list[dict]:
    error = workers.died("the replicate's process", rc, "while measuring this group")
    return [sweep.base_row(c, task.plan, group_key=group_key, group_id=group_id)
            | {"status": "oom" if rc in (-9, 137) else "error", "wall_s": 0.0, "timestamp": "", "error": error}
            for c in configs]


def _run_process(task: Task, poll: Callable[[], None], in_process: bool = False) -> int:
    """Run one replicate process on `task`, calling `poll` every second; its exit code. `in_process`: here, unisolated."""
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
            workers.ended(proc, 10)
            raise
        return proc.returncode
    finally:
        os.unlink(f.name)


def measure(groups: dict[str, list[Config]], plan: Plan, *, table: ResultsTable, workloads: Workloads,
        parts_dir: Path, force: bool = False, on_group: Callable[[list[dict]], None] | None = None,
        in_process: bool = False, only_replicate: int | None = None) -> list[dict]:
    """Measure `groups` in the plan's replicates and append the combined rows; `force` drops earlier runs' parts."""
    k = plan.replicates
    parts_dir = Path(parts_dir)
    parts_dir.mkdir(parents=True, exist_ok=True)

    settings = {key: {plan.settings_hash(c) for c in configs} for key, configs in groups.items()}  # once, not per poll

    def parts_of(key: str) -> dict[int, dict]:
        return read_parts(parts_dir, key, k, fingerprint=plan.fingerprint, settings=settings[key])

    run_id = os.environ.get(RUN_ID_VAR)
    parts: dict[str, dict[int, dict]] = {}
    for key in groups:
        parts[key] = parts_of(key)
        if force:  # only parts written within the current `studylib run` are kept
            parts[key] = {r: p for r, p in parts[key].items() if run_id is not None and p.get("run_id") == run_id}
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
    """The group a failed replicate leaves "died" rows for (in flight, else the first if none measured), or None."""
    missing = [key for key, _, _ in need if key in parts and r not in parts[key]]
    if flight.get("group_key") in missing:
        return flight["group_key"]
    if len(missing) == len(need):
        return missing[0] if missing else None
    return None


def pending_parts(parts_dir: Path) -> int:
    """Configurations measured in part files not yet combined (for progress bars)."""
    return sum(len((read_json(p) or {}).get("rows", [])) for p in Path(parts_dir).glob("*.r*.json")
               if not p.name.startswith("in-flight"))


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as fh:
        _task: Any = pickle.load(fh)
    sys.exit(_worker(_task))
