"""The registry of studies by notebook id, filled as each study module is imported; it imports nothing."""

from __future__ import annotations

from typing import Any

REGISTRY: dict[str, Any] = {}  # notebook id -> studies.base.Study


def register(study: Any) -> Any:
    """Add a study (replacing one with the same id), keeping notebook-id order; returns it."""
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
