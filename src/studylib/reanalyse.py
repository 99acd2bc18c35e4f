"""`studylib reanalyse DIR`: every page written again from DIR's results, measuring nothing; bad input Refused."""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .bench import profiles
from .bench.profiles import RESERVED
from .core import paths, study_registry
from .core.files import read_json, write_json_atomic
from .report import render
from .run import environ, measuring_environment, papermill_entry, run_summary, shown
from .studies import STUDIES
from .study import REANALYSE_VAR

COMMIT = re.compile(r"[0-9a-f]{7,40}")  # a row of combined replicates may hold several, comma-separated


class Refused(Exception):
    """Results a re-analysis cannot read: one line naming the file and the problem (exit 2)."""


@dataclass(frozen=True)
class Target:
    root: Path  # the outputs root: index.html, summary/
    profiles: tuple[str, ...]


def target(path: Path | str) -> Target:
    """The outputs root and the profiles to re-analyse in `path` (a root, or one profile's folder)."""
    d = Path(path).resolve()
    if not d.is_dir():
        raise Refused(f"{path}: no such folder")
    if (d / "results").is_dir():
        return Target(d.parent, (d.name,))
    found = tuple(sorted(p.name for p in d.iterdir() if p.is_dir() and p.name not in RESERVED
                         and (p / "results").is_dir()))
    if not found:
        raise Refused(f"{path}: no results to re-analyse (neither {path}/results/ nor {path}/<profile>/results/)")
    return Target(d, found)


def _commit(value) -> bool:
    return isinstance(value, str) and all(COMMIT.fullmatch(c) for c in value.split(","))


def _check_env(path: Path) -> None:
    try:
        env = json.loads(path.read_text())
    except FileNotFoundError:
        raise Refused(f"{shown(path)}: missing: the environment the results were measured in is not recorded") from None
    except (OSError, ValueError) as e:
        raise Refused(f"{shown(path)}: not readable JSON ({e})") from None
    if not isinstance(env, dict) or not _commit(env.get("git_commit")):
        raise Refused(f"{shown(path)}: git_commit {env.get('git_commit') if isinstance(env, dict) else None!r} is "
                      f"not a commit: the study code version of these results cannot be read")
    if not isinstance(env.get("peaks"), dict):
        raise Refused(f"{shown(path)}: peaks: the machine's limits are not recorded (a re-analysis does not "
                      f"measure them)")


def _check_rows(path: Path, study: str) -> tuple[set[str], set[str]]:
    """(config keys, commits) of a results table whose every row names its study code version."""
    keys, commits = set(), set()
    lines = path.read_text().split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if number == len(lines):  # a torn last line, as the table's readers ignore it
                continue
            raise Refused(f"{shown(path)}: line {number}: not a JSON row") from None
        where = f"{shown(path)}: line {number} ({row.get('config_key')})"
        if not _commit(row.get("git_commit")):
            raise Refused(f"{where}: git_commit {row.get('git_commit')!r} is not a commit: the study code version "
                          f"that measured it cannot be read")
        if not isinstance(row.get("settings_hash"), str) or not row["settings_hash"]:
            raise Refused(f"{where}: settings_hash {row.get('settings_hash')!r}: the measurement settings it was "
                          f"measured with cannot be read")
        if row.get("study") != study:
            raise Refused(f"{where}: study {row.get('study')!r}, not {study!r}")
        keys.add(str(row.get("config_key")))
        commits |= set(COMMIT.findall(str(row["git_commit"])))
    return keys, commits


def check(profile: str) -> list[str]:
    """The studies of `profile` (under the current outputs root) to re-analyse, every input checked (Refused)."""
    results = paths.results_dir(profile)
    _check_env(results / "env.json")
    notebooks = [nb for nb in STUDIES if (results / f"{nb}.jsonl").exists()]
    if not notebooks:
        raise Refused(f"{shown(results)}: no study's results table (<study>.jsonl)")
    try:
        loaded = profiles.load(profile)
    except profiles.ProfileError as e:
        raise Refused(f"{shown(paths.profile_dir(profile))}: its profile does not load: {e}") from None
    for nb in notebooks:
        table = results / f"{nb}.jsonl"
        stored, commits = _check_rows(table, nb)
        if nb not in loaded.sections:
            raise Refused(f"{shown(table)}: profile {profile} no longer runs {nb}: its page cannot be written again")
        missing = [c.key for c in study_registry.grid(loaded, nb) if c.key not in stored]
        if missing and not profiles.added_since(profile, nb, missing, commits):
            raise Refused(f"{shown(table)}: {len(missing)} configuration(s) of profile {profile}'s grid are not in "
                          f"these results (first: {missing[0]}), and the grid the results were measured on had them: "
                          f"reanalyse measures nothing (`make report` measures them)")
    return notebooks


def _executed_dir(folder: Path, scratch: Path) -> Path:
    """The executed notebooks' folder of a profile (or the summary) where it keeps one, else one under `scratch`."""
    return folder / "executed" if (folder / "executed").is_dir() else scratch / folder.name / "executed"


def reanalyse(path: Path | str, say=print) -> int:
    """Re-analyse and re-render `path` (module docstring); 0 when every notebook ran, 1 otherwise. Refused first."""
    t = target(path)
    with tempfile.TemporaryDirectory(prefix="studylib-reanalyse-") as scratch, \
            environ(STUDYLIB_OUTPUTS=str(t.root), STUDYLIB_CACHE=str(Path(scratch) / "cache"), **{REANALYSE_VAR: "1"}):
        work = {p: check(p) for p in t.profiles}  # every refusal before anything is written
        failed = 0
        for profile, notebooks in work.items():
            loaded = profiles.load(profile)
            measuring_environment(loaded)  # the threads the kernels import their frameworks with, as a run's
            manifest = read_json(paths.manifest_path(profile), {}) or {}
            executed = _executed_dir(paths.profile_dir(profile), Path(scratch))
            for nb in notebooks:
                entry = papermill_entry(nb, executed, profiles.notebook_inputs(loaded))
                kept = {k: v for k, v in manifest.get(nb, {}).items() if k not in ("failed_cell", "error", "status")}
                manifest[nb] = {"notebook": nb, **kept, "status": entry["status"], "failed_cell": entry["failed_cell"],
                                "error": entry["error"], "reanalysed_at": entry["started_at"],
                                "reanalysis_s": entry["duration_s"]}
                if entry["status"] == "ok":
                    render.notebook_html(executed / f"{nb}.ipynb", paths.html_dir(profile) / f"{nb}.html")
                    say(f"{profile}/{nb}: analysed again in {entry['duration_s']:.0f} s")
                else:
                    failed += 1
                    say(f"{profile}/{nb}: FAILED at cell {entry['failed_cell']}: {entry['error']}")
            write_json_atomic(paths.manifest_path(profile), manifest)
        failed += _summary(Path(scratch), say)
        say(f"wrote {paths.display(render.index())} under {shown(t.root)}")
    return 1 if failed else 0


def _summary(scratch: Path, say) -> int:
    """The cross-hardware summary executed and rendered again; 1 where it failed."""
    executed = _executed_dir(paths.summary_dir(), scratch)
    if run_summary(say, executed=executed):
        return 1
    nb = paths.SUMMARY_NOTEBOOK
    render.notebook_html(executed / f"{nb}.ipynb", paths.summary_dir() / "html" / f"{nb}.html")
    return 0
