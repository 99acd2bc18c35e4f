"""The registry of studies, by notebook id, in reading order.

Each study module fills it when it is imported (`studies.register`); whoever needs the studies reads it:
profiles validate their sections against it, `plan` and `run` take configurations from it, the report takes each
study's comparisons from it. It imports nothing, so the modules the studies stand on (profiles, claims) can read it
without importing the studies package: the entry points (the command line, a notebook's `study.start`, the summary)
import `studylib.studies` first, which registers the built-in studies.
"""

from __future__ import annotations

from typing import Any

REGISTRY: dict[str, Any] = {}  # notebook id -> studies.base.Study


def register(study: Any) -> Any:
    """Add a study to the registry (a second one with the same id replaces the first); returns it.

    The registry stays in reading order: notebook ids sort as the notebooks are numbered."""
    REGISTRY[study.notebook] = study
    for name in sorted(REGISTRY):
        REGISTRY[name] = REGISTRY.pop(name)
    return study


def unregister(notebook: str) -> None:
    REGISTRY.pop(notebook, None)


def grid(loaded: Any, notebook: str) -> list:
    """Every configuration of a notebook's section in a loaded profile (profiles.LoadedProfile), in the study's order."""
    p = loaded.profile
    return studies()[notebook].configs(loaded.sections[notebook], device=p.device, threads=p.threads)


def studies() -> dict[str, Any]:
    """The registered studies; a clear error where none is (the caller has not imported `studylib.studies`)."""
    if not REGISTRY:
        raise LookupError("no study is registered: import studylib.studies (the built-in studies) before reading "
                          "profiles or claims")
    return REGISTRY
