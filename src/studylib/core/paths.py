"""Where things live. The one module that knows the project's layout."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PARAMS_DIR = ROOT / "params"
NOTEBOOKS_DIR = ROOT / "notebooks"


def outputs_root() -> Path:
    """outputs/ of the project, or STUDYLIB_OUTPUTS when set (tests write elsewhere)."""
    return Path(os.environ.get("STUDYLIB_OUTPUTS", ROOT / "outputs")).resolve()


def reference_root() -> Path:
    """reference/: the committed reference report (an outputs root of its own), written only by `make reference`."""
    return ROOT / "reference"


def display(path: Path | str) -> str:
    """A path as a page may show it: relative to the outputs root, else to the project; never absolute."""
    p = Path(path).resolve()
    for base in (outputs_root(), ROOT):
        if p.is_relative_to(base):
            return str(p.relative_to(base))
    return p.name


def profile_dir(profile: str) -> Path:
    return outputs_root() / profile


def manifest_path(profile: str) -> Path:
    """A profile's run manifest: per notebook, its status, time, failing cell and error (written by `run`)."""
    return profile_dir(profile) / "run.json"


def executed_dir(profile: str) -> Path:
    return profile_dir(profile) / "executed"


def html_dir(profile: str) -> Path:
    return profile_dir(profile) / "html"


def results_dir(profile: str) -> Path:
    return profile_dir(profile) / "results"


def parts_dir(profile: str, notebook: str) -> Path:
    """Replicates' rows of groups not yet combined into the results table (see replicates)."""
    return results_dir(profile) / f"{notebook}.parts"


def cache_dir(profile: str) -> Path:
    """The profile's cache of exported models and tokenizers; under STUDYLIB_CACHE where that is set."""
    elsewhere = os.environ.get("STUDYLIB_CACHE")
    return Path(elsewhere) / profile if elsewhere else profile_dir(profile) / "cache"


def summary_dir() -> Path:
    """outputs/summary/: the cross-hardware summary (executed notebook, HTML, run.json); not a profile."""
    return outputs_root() / "summary"


def notebook_path(notebook: str) -> Path:
    return NOTEBOOKS_DIR / f"{notebook}.ipynb"


SUMMARY_NOTEBOOK = "06_summary"
# smoke cut to one shape per study, for `make test` only: never named to a reader as a profile
FAST_SMOKE = "smoke-fast"


def profile_path(profile: str) -> Path:
    """A profile name (params/<name>.yaml) or a path to a YAML file."""
    p = Path(profile)
    if p.suffix in (".yaml", ".yml"):
        return p
    return PARAMS_DIR / f"{profile}.yaml"


def known_profiles() -> list[str]:
    return sorted(p.stem for p in PARAMS_DIR.glob("*.yaml"))
