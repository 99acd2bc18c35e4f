"""Overrides of a profile, checked and written one way, so that the same changes name the same profile."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from ..core import study_registry
from .schemas import Profile, ProfileError, sections


def pairs(given) -> list[tuple[str, Any, str]]:
    """(key, value, name in errors) of each override: `--set KEY=VALUE` texts (VALUE is YAML) or a {KEY: value}."""
    if isinstance(given, Mapping):
        return [(str(k).strip(), v, f"overrides[{str(k)!r}]") for k, v in given.items()]
    if isinstance(given, str) or not isinstance(given, list | tuple):
        raise ProfileError(f"overrides: must be a mapping of keys to values, e.g. {{'batch_sizes': [1, 4]}} "
                           f"(got {given!r})")
    out = []
    for text in map(str, given):
        key, eq, value = text.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ProfileError(f"--set {text}: expected KEY=VALUE, e.g. --set 03.batch_sizes=[1,4] or --set threads=4")
        try:
            out.append((key, yaml.safe_load(value), f"--set {key}"))
        except yaml.YAMLError as e:
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise ProfileError(f"--set {key}: the value is not valid YAML: {problem}") from None
    return out


def normalised(given, raw: dict, notebook: str | None = None) -> dict[str, str]:
    """Each override as sorted `KEY=VALUE` → the key as given (the last set wins); `notebook`: owns bare fields."""
    studies = list(study_registry.studies())
    own = set(sections()[notebook].model_fields) if notebook in studies else set()
    out: dict[str, tuple[str, str]] = {}
    for key, parsed, label in pairs(given):
        head, _, rest = key.removeprefix("notebooks.").partition(".")
        study = next((s for s in studies if head in (s, s.split("_")[0])), None)
        if study is None and head in own:
            study, head, rest = notebook, notebook, key.removeprefix("notebooks.")
        if study is None and (head not in Profile.model_fields or head == "notebooks"):
            wide = ", ".join(k for k in Profile.model_fields if k not in ("notebooks", "description", "follows"))
            if own:
                raise ProfileError(f"{label}: unknown key {head!r}: not a field of {notebook}'s section "
                                   f"({', '.join(sorted(own))}), a study or a profile-wide key ({wide})")
            raise ProfileError(f"{label}: {head!r} is neither a study ({', '.join(studies)}, or their two-digit "
                               f"prefix) nor a profile-wide key ({wide})")
        if study is not None:
            if study not in (raw.get("notebooks") or {}):
                raise ProfileError(f"{label}: the profile has no section for {study} (it has: "
                                   f"{', '.join(raw.get('notebooks') or {})})")
            if not rest:
                raise ProfileError(f"{label}: name a field of {study}'s section, e.g. --set {head}.batch_sizes=[1]")
            key = f"{study}.{rest}"
        out[key] = (json.dumps(parsed, separators=(",", ":"), default=str), label)
    return {f"{k}={v}": label for k, (v, label) in sorted(out.items())}


def applied(raw: dict, texts: list[str]) -> dict:
    """The profile file's YAML with the normalised overrides merged in (as `extends:` merges a profile)."""
    for text in texts:
        key, _, value = text.partition("=")
        nested = json.loads(value)
        for part in reversed(full_key(key).split(".")):
            nested = {part: nested}
        raw = merged(raw, nested)
    return raw


def as_mapping(texts) -> dict[str, Any]:
    """Normalised overrides as a mapping {KEY: value} (a notebook's `overrides`), each key its study's full name."""
    return {key: json.loads(value) for key, _, value in (str(t).partition("=") for t in texts)}


def full_key(key: str) -> str:
    """An override's key as the profile file nests it: `03_onnx_batching.x` -> `notebooks.03_onnx_batching.x`."""
    return f"notebooks.{key}" if key.split(".")[0] in study_registry.studies() else key


def overlaps(key: str, at: str, problem: str) -> bool:
    """Whether a validation problem at `at` concerns the override of `key`."""
    return key == at or key.startswith(f"{at}.") or at.startswith(f"{key}.") or key in problem


def merged(base: dict, over: dict) -> dict:
    """`over` on top of `base`: mappings merged key by key (a section, `measure`), anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
