"""The committed reference report: `python -m studylib reference` (`make reference`) measures the `cpu` profile
from a clean commit and publishes what a reader needs under reference/; nothing else writes there.

The run itself happens under outputs/.reference/ (ignored by git, like all of outputs/): it holds the
executed notebooks, caches and part files, and lets an interrupted reference run resume while HEAD is
the same commit. Only when every notebook has run are the pages, results tables, environment and run
manifests copied into reference/, with REFERENCE.json recording the commit, the profile and the run's
times. A working tree with changes is refused before anything runs, and so is a run during which HEAD
moved, so the published numbers always belong to one commit that anyone can check out.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import subprocess
import time
from pathlib import Path

from .core import paths
from .core.files import read_json, write_json_atomic
from .core.results import ResultsTable
from .measurement import profiles

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


def staging_root() -> Path:
    """Where the reference run measures (under outputs/, so ignored by git); kept between runs of one commit."""
    return paths.ROOT / "outputs" / ".reference"


def publish(staging: Path, target: Path, record: dict) -> list[Path]:
    """Copy a finished run's reader-facing files from `staging` (an outputs root) into `target`, replacing
    what was there: index, each profile's HTML, results tables (JSON lines and CSV), env.json and run.json,
    the summary's HTML and run.json; then the record. Returns the files written."""
    written = []

    def copy(src: Path, dst: Path):
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        written.append(dst)

    for sub in (PROFILE, "summary"):
        shutil.rmtree(target / sub, ignore_errors=True)
    for jsonl in sorted((staging / PROFILE / "results").glob("*.jsonl")):
        ResultsTable(jsonl).write_csv()
    for pattern in (f"{PROFILE}/html/*.html", f"{PROFILE}/results/*.jsonl", f"{PROFILE}/results/*.csv",
                    f"{PROFILE}/results/env.json", f"{PROFILE}/run.json", "summary/html/*.html", "summary/run.json",
                    "index.html"):
        for src in sorted(staging.glob(pattern)):
            copy(src, target / src.relative_to(staging))
    write_json_atomic(target / RECORD, record)
    written.append(target / RECORD)
    return written


def make_reference() -> int:
    """Measure the `cpu` profile from a clean commit and publish it under reference/; the run's exit status."""
    from .report.render import report
    from .run import run

    commit = clean_head()
    staging = staging_root()
    started = read_json(staging / RECORD, {}) or {}
    if started.get("commit") != commit:  # another commit's rows must not be published as this one's
        shutil.rmtree(staging, ignore_errors=True)
        started = {"commit": commit, "profile": PROFILE,
                   "started_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
        write_json_atomic(staging / RECORD, started)
    else:
        print(f"resuming the reference run of commit {commit[:12]} begun {started['started_at']}")
    os.environ["STUDYLIB_OUTPUTS"] = str(staging)
    t0 = time.perf_counter()
    rc = run(PROFILE)
    report(PROFILE)
    if clean_head() != commit:
        raise NotClean(f"make reference: HEAD moved from {commit[:12]} while the reference ran; nothing published")
    if rc != 0:
        print("make reference: a notebook failed (see above); nothing published, the run resumes on the next "
              "`make reference` at this commit")
        return rc
    record = started | {"finished_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                        "last_session_s": round(time.perf_counter() - t0),
                        "command": "make reference (python -m studylib reference)"}
    written = publish(staging, paths.reference_root(), record)
    print(f"published {len(written)} files under {paths.display(paths.reference_root())}/ from commit {commit[:12]}; "
          f"commit them: git add {paths.display(paths.reference_root())} && git commit")
    return 0
