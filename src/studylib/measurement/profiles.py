"""Hardware profiles: load params/<profile>.yaml, validate it, hand each notebook its parameters.

A profile is checked completely before any notebook starts. Every problem becomes a ProfileError
whose message is one line naming the file, the key and what is wrong.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..core import paths, study_registry
from .schemas import AutoProfile, MeasureSettings, Profile, sections


class ProfileError(Exception):
    """A bad profile or parameter: the message is one line naming file, key and problem."""


def _describe(err: ValidationError, prefix: str = "") -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in (prefix, *first["loc"]) if p != "")
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    elif first["type"] == "missing":
        msg = "required key is missing"
    got = first.get("input")
    if first["type"].endswith("_type") and not isinstance(got, (dict, list)):
        msg += f" (got {got!r})"
    more = len(err.errors()) - 1
    return f"{loc or '(top level)'}: {msg}" + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")


def _validate_section(name: str, raw: dict[str, Any], where: str, prof: Profile):
    if isinstance(raw.get("measure"), dict):  # a section's measure overrides the common one key by key
        raw = raw | {"measure": prof.measure.model_dump() | raw["measure"]}
    try:
        section = sections()[name].model_validate(raw)
    except ValidationError as e:
        raise ProfileError(f"{where}: {_describe(e, f'notebooks.{name}')}") from None
    missing = [d for d in getattr(section, "dtypes", []) if d not in prof.parity_tolerance]
    if missing:
        raise ProfileError(f"{where}: parity_tolerance: has no tolerance for {missing[0]} "
                           f"(used by notebooks.{name}.dtypes)")
    if "int8" not in prof.parity_tolerance and any(v.endswith("-int8") for v in getattr(section, "variants", [])):
        raise ProfileError(f"{where}: parity_tolerance: has no tolerance for int8 (used by notebooks.{name}.variants)")
    return section


PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# Directories under outputs/ that are not profiles.
RESERVED = {"summary": "the cross-hardware summary under outputs/summary/",
            "screenshots": "the browser check's screenshots under outputs/screenshots/"}


class LoadedProfile:
    """A validated profile with its name, file and validated notebook sections.

    `picked` is the profile an `auto` profile chose for this machine (None for any other profile).
    """

    def __init__(self, name: str, path: Path, profile: Profile, sections: dict[str, BaseModel],
                 picked: str | None = None):
        self.name, self.path, self.profile, self.sections, self.picked = name, path, profile, sections, picked

    def notebooks(self) -> list[str]:
        return list(self.sections)

    def measure_for(self, notebook: str) -> MeasureSettings:
        return getattr(self.sections[notebook], "measure", None) or self.profile.measure


def load(profile: str, *, machine=None) -> LoadedProfile:
    """Load and fully validate a profile by name (params/<name>.yaml) or path.

    An `auto` profile (a file with an `auto:` section) detects the machine — or takes `machine`, an
    environment.Machine — and returns the profile its rules pick, under its own name.
    """
    path = paths.profile_path(profile)
    try:
        where = str(path.relative_to(paths.ROOT))
    except ValueError:
        where = str(path)
    if not path.is_file():
        known = ", ".join(paths.known_profiles())
        raise ProfileError(f"{where}: no such profile file (known profiles: {known})")
    if not PLAIN_NAME.fullmatch(path.stem):
        raise ProfileError(f"{where}: the file name is the profile's name under outputs/: use letters, digits, "
                           f"'.', '_' and '-' only")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ProfileError(f"{where}: not valid YAML: {line}{problem}") from None
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: (top level): must be a mapping of keys to values")
    if path.stem in RESERVED:
        raise ProfileError(f"{where}: the name {path.stem!r} is reserved for {RESERVED[path.stem]}: rename the file")
    if "extends" in raw:
        raw = _extended(raw, where)
    if "auto" in raw:
        return _load_auto(raw, path, where, machine)
    try:
        prof = Profile.model_validate(raw)
    except ValidationError as e:
        raise ProfileError(f"{where}: {_describe(e)}") from None
    sections = {}
    for name, section in prof.notebooks.items():
        notebook = study_registry.studies()[name].notebook_path
        if not notebook.is_file():
            raise ProfileError(f"{where}: notebooks.{name}: notebook file {notebook.name} is missing")
        if not isinstance(section, dict):
            raise ProfileError(f"{where}: notebooks.{name}: must be a mapping of keys to values")
        sections[name] = _validate_section(name, section, where, prof)
    return LoadedProfile(path.stem, path, prof, sections)


def _merged(base: dict, over: dict) -> dict:
    """`over` on top of `base`: mappings merged key by key (a section, `measure`), anything else replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _extended(raw: dict, where: str) -> dict:
    """A profile with `extends: <name>`: that profile's keys with this file's on top (params/cpu-precise.yaml is the
    cpu profile with five processes). The base must be a plain profile: not auto, not itself extending another."""
    name = raw["extends"]
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name) or not paths.profile_path(name).is_file():
        raise ProfileError(f"{where}: extends: no such profile {name!r} (known: {', '.join(paths.known_profiles())})")
    base = yaml.safe_load(paths.profile_path(name).read_text())
    if not isinstance(base, dict) or "extends" in base or "auto" in base:
        raise ProfileError(f"{where}: extends: {name!r} must be a plain profile (not auto, not extending another)")
    return _merged(base, {k: v for k, v in raw.items() if k != "extends"})


def _load_auto(raw: dict, path: Path, where: str, machine) -> LoadedProfile:
    from ..machine.environment import detect_machine

    try:
        auto = AutoProfile.model_validate(raw).auto
    except ValidationError as e:
        raise ProfileError(f"{where}: {_describe(e)}") from None
    for kind, rules in (("cuda", auto.cuda), ("cpu", auto.cpu)):  # every rule must name a usable profile
        for i, rule in enumerate(rules):
            key = f"auto.{kind}.{i}.use"
            target = paths.profile_path(rule.use)
            if not PLAIN_NAME.fullmatch(rule.use) or not target.is_file():
                raise ProfileError(f"{where}: {key}: no such profile {rule.use!r} "
                                   f"(known: {', '.join(paths.known_profiles())})")
            if target.resolve() == path.resolve() or "auto" in (yaml.safe_load(target.read_text()) or {}):
                raise ProfileError(f"{where}: {key}: {rule.use!r} is itself an auto profile")
            try:
                device = load(rule.use).profile.device
            except ProfileError as e:
                raise ProfileError(f"{where}: {key}: profile {rule.use!r} is invalid: {e}") from None
            if device != kind:
                raise ProfileError(f"{where}: {key}: profile {rule.use!r} runs on {device}, not {kind}")
    m = machine or detect_machine()
    if m.cuda:
        rule = next(r for r in auto.cuda if m.gpu_memory_gib >= r.min_gpu_memory_gib and m.cores >= r.min_cores)
    else:
        rule = next(r for r in auto.cpu if m.cores >= r.min_cores)
    chosen = load(rule.use)
    threads = m.cores if auto.threads == "cores" else auto.threads
    description = (f"auto: picked {rule.use} for this machine ({m.describe()}), with {threads} threads. "
                   + chosen.profile.description)
    # the shift between runs was recorded on the development machine, not on this one
    prof = chosen.profile.model_copy(update={"threads": threads, "description": description, "run_shift": "unknown"})
    return LoadedProfile(path.stem, path, prof, chosen.sections, picked=rule.use)


# the profile-wide values every notebook takes as parameters (beside `profile`, `force` and its section's keys)
COMMON_PARAMETERS = ("device", "threads", "seed", "run_shift", "measure", "parity_tolerance")
# profile-wide values a notebook may pass but need not (study.start takes them from the profile file otherwise)
PROCESS_PARAMETERS = ("tf32",)


def notebook_parameters(loaded: LoadedProfile, notebook: str) -> dict[str, Any]:
    """The values papermill injects into a notebook's parameters cell."""
    if notebook not in loaded.sections:
        raise ProfileError(
            f"{loaded.path.name}: notebooks: has no section {notebook!r} (it has: {', '.join(loaded.sections)})"
        )
    p = loaded.profile
    section = loaded.sections[notebook].model_dump(exclude={"measure", "left_out"})
    common = p.model_dump(include=set(COMMON_PARAMETERS)) | {"measure": loaded.measure_for(notebook).model_dump()}
    return {"profile": loaded.name, **{k: common[k] for k in COMMON_PARAMETERS}, **section}


def check_parameters(notebook: str, params: dict[str, Any]) -> tuple[Profile, BaseModel]:
    """Validate a notebook's parameters (injected or edited by hand) with the profile schema."""
    common = {k: params[k] for k in COMMON_PARAMETERS if k in params}
    common |= {k: params[k] for k in PROCESS_PARAMETERS if k in params}
    section = {k: v for k, v in params.items() if k not in common and k not in ("profile", "force")}
    where = f"{notebook} parameters"
    if not PLAIN_NAME.fullmatch(str(params.get("profile", ""))):
        raise ProfileError(f"{where}: profile: must be a plain name such as 'smoke' (got {params.get('profile')!r})")
    try:
        prof = Profile.model_validate(
            {"description": f"parameters of {notebook}", **common, "notebooks": {notebook: section}}
        )
    except ValidationError as e:
        raise ProfileError(f"{where}: {_describe(e)}") from None
    return prof, _validate_section(notebook, section, where, prof)
