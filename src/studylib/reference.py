"""`studylib reference [--profile NAME]`: a profile measured from a clean commit and published under reference/."""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import subprocess
import time
from pathlib import Path

from .bench import profiles
from .core import paths
from .core.files import read_json, write_json_atomic
from .report.render import report
from .run import run
from .stats.results import ResultsTable

PROFILE = "cpu"
RECORD = "REFERENCE.json"


class NotClean(profiles.ProfileError):
    """The working tree has changes, or HEAD moved while the reference ran (exit 2, one line)."""


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(paths.ROOT), *args], capture_output=True, text=True,
                          check=True, timeout=30).stdout


def clean_head() -> str:
    """HEAD's full commit, or NotClean naming what is changed (untracked files count: a run would use them)."""
    changed = _git("status", "--porcelain").splitlines()
    if changed:
        shown = ", ".join(line[3:] for line in changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise NotClean(f"make reference: the working tree has changes ({shown}); the reference is measured only "
                       f"from a clean commit: commit or stash them first")
    return _git("rev-parse", "HEAD").strip()


def staging_root(profile: str = PROFILE) -> Path:
    """Where the reference run of `profile` measures (under outputs/), kept between runs of one commit."""
    return paths.ROOT / "outputs" / (".reference" if profile == PROFILE else f".reference-{profile}")


def record_path(target: Path, profile: str = PROFILE) -> Path:
    """The record of a published profile: reference/REFERENCE.json for cpu, reference/<profile>/REFERENCE.json else."""
    return target / RECORD if profile == PROFILE else target / profile / RECORD


def carry_committed(target: Path, staging: Path, profile: str) -> list[str]:
    """Copy every other profile published under `target` into `staging`; their names."""
    carried = []
    for d in sorted(p for p in target.iterdir() if p.is_dir()) if target.is_dir() else []:
        if d.name in (profile, "summary") or not (d / "results").is_dir() or (staging / d.name).exists():
            continue
        shutil.copytree(d, staging / d.name, ignore=shutil.ignore_patterns(RECORD))
        carried.append(d.name)
    return carried


def publish(staging: Path, target: Path, record: dict, profile: str = PROFILE) -> list[Path]:
    """Copy a finished run's reader-facing files from `staging` into `target`, then the record; the files."""
    written = []
    for sub in (profile, "summary"):
        shutil.rmtree(target / sub, ignore_errors=True)
    for jsonl in sorted((staging / profile / "results").glob("*.jsonl")):
        ResultsTable(jsonl).write_csv()
    for pattern in (f"{profile}/html/*.html", f"{profile}/results/*.jsonl", f"{profile}/results/*.csv",
                    f"{profile}/results/env.json", f"{profile}/run.json", "summary/html/*.html", "summary/run.json",
                    "index.html"):
        for src in sorted(staging.glob(pattern)):
            written.append(target / src.relative_to(staging))
            written[-1].parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, written[-1])
    write_json_atomic(record_path(target, profile), record)
    written.append(record_path(target, profile))
    return written


def make_reference(profile: str = PROFILE) -> int:
    """Measure `profile` (default cpu) from a clean commit and publish it under reference/; the run's exit status."""

    profiles.load(profile)  # a bad or unknown profile stops here (ProfileError: one line, exit 2)
    commit = clean_head()
    staging = staging_root(profile)
    started = read_json(staging / RECORD, {}) or {}
    if started.get("commit") != commit:  # another commit's rows must not be published as this one's
        shutil.rmtree(staging, ignore_errors=True)
        started = {"commit": commit, "profile": profile,
                   "started_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
        write_json_atomic(staging / RECORD, started)
    else:
        print(f"resuming the reference run of commit {commit[:12]} begun {started['started_at']}")
    carried = carry_committed(paths.reference_root(), staging, profile)
    if carried:
        started["beside"] = {name: (read_json(record_path(paths.reference_root(), name), {}) or {}).get("commit")
                             for name in carried}  # the committed profiles its summary and index include
    os.environ["STUDYLIB_OUTPUTS"] = str(staging)
    t0 = time.perf_counter()
    rc = run(profile)
    report(profile)
    if clean_head() != commit:
        raise NotClean(f"make reference: HEAD moved from {commit[:12]} while the reference ran; nothing published")
    if rc != 0:
        print("make reference: a notebook failed (see above); nothing published, the run resumes on the next "
              "`make reference` at this commit")
        return rc
    make_flag, cli_flag = (f" PROFILE={profile}", f" --profile {profile}") if profile != PROFILE else ("", "")
    record = started | {"finished_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                        "last_session_s": round(time.perf_counter() - t0),
                        "command": f"make reference{make_flag} (python -m studylib reference{cli_flag})"}
    written = publish(staging, paths.reference_root(), record, profile)
    print(f"published {len(written)} files under {paths.display(paths.reference_root())}/ from commit {commit[:12]}; "
          f"commit them: git add {paths.display(paths.reference_root())} && git commit")
    return 0
