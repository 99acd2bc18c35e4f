"""Hardware profiles: load params/<profile>.yaml, validate it, hand each notebook its parameters.

A profile is checked completely before any notebook starts. Every problem becomes a ProfileError
whose message is one line naming the file, the key and what is wrong.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..core import paths, study_registry
from ..core.files import read_json
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

    `picked` is the profile an `auto` profile chose for this machine (None for any other profile). `overrides`: the
    `--set` options applied, as `override_record` writes them (its name is then `<file>+<their hash>`).
    """

    def __init__(self, name: str, path: Path, profile: Profile, sections: dict[str, BaseModel],
                 picked: str | None = None, overrides: tuple[str, ...] = ()):
        self.name, self.path, self.profile, self.sections, self.picked = name, path, profile, sections, picked
        self.overrides = overrides

    def notebooks(self) -> list[str]:
        return list(self.sections)

    def measure_for(self, notebook: str) -> MeasureSettings:
        return getattr(self.sections[notebook], "measure", None) or self.profile.measure


def load(profile: str, *, overrides=(), machine=None) -> LoadedProfile:
    """Load and fully validate a profile by name (params/<name>.yaml) or path.

    An `auto` profile (a file with an `auto:` section) detects the machine — or takes `machine`, an
    environment.Machine — and returns the profile its rules pick, under its own name.
    `overrides`: `--set KEY=VALUE` texts merged into the file before validation (docs/profiles.md);
    the profile is then named `<file>+<hash of the overrides>`, a folder of its own under outputs/. Such a name
    loads again from the overrides its run recorded (run.json).
    """
    if not overrides and OVERRIDDEN_NAME.fullmatch(str(profile)) and not paths.profile_path(profile).is_file():
        return _load_recorded(profile)
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
        if overrides:
            first = str(overrides[0]).partition("=")[0]
            raise ProfileError(f"--set {first}: {where} is an auto profile; give --profile the profile it picks for "
                               f"this machine (`studylib plan --profile {path.stem}` names it) with your --set options")
        return _load_auto(raw, path, where, machine)
    prof, sections = _validated(raw, where)
    if not overrides:
        return LoadedProfile(path.stem, path, prof, sections)
    given = _overrides(list(overrides), raw)  # {the key written one way: the key as given}
    texts = list(given)
    merged = raw
    for text in texts:
        key, _, value = text.partition("=")
        merged = _merged(merged, _nested(_full_key(key), json.loads(value)))
    try:
        prof, sections = _validated(merged, where)
    except ProfileError as e:
        problem = str(e).removeprefix(f"{where}: ")
        at = problem.split(":")[0]
        named = [given[t] for t in texts if _overlaps(_full_key(t.partition("=")[0]), at, problem)]
        raise ProfileError(f"--set {', --set '.join(named or given.values())}: {problem}") from None
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:8]
    return LoadedProfile(f"{path.stem}+{digest}", path, prof, sections, overrides=tuple(texts))


def _validated(raw: dict, where: str) -> tuple[Profile, dict[str, BaseModel]]:
    """The profile and its notebook sections, validated; a ProfileError naming `where` otherwise."""
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
    return prof, sections


# A profile with `--set` overrides: its file's name, '+', the first 8 hex digits of the overrides' SHA-256.
OVERRIDDEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\+[0-9a-f]{8}")
OVERRIDES_KEY = "overrides"  # where run.json records them: {"profile": the file, "set": [KEY=VALUE, ...]}


def _overrides(given: list[str], raw: dict) -> dict[str, str]:
    """Each `--set KEY=VALUE` checked and written one way (the study's full name, the value as compact JSON), to the
    key as given; sorted (so a whole mapping comes before a key inside it, which then wins) and, for a key set
    twice, the last."""
    studies = list(study_registry.studies())
    out: dict[str, tuple[str, str]] = {}
    for text in given:
        key, eq, value = text.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ProfileError(f"--set {text}: expected KEY=VALUE, e.g. --set 03.batch_sizes=[1,4] or --set threads=4")
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as e:
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise ProfileError(f"--set {key}: the value is not valid YAML: {problem}") from None
        head, _, rest = key.removeprefix("notebooks.").partition(".")
        study = next((s for s in studies if head in (s, s.split("_")[0])), None)
        if study is None and (head not in Profile.model_fields or head == "notebooks"):
            wide = ", ".join(k for k in Profile.model_fields if k not in ("notebooks", "description", "follows"))
            raise ProfileError(f"--set {key}: {head!r} is neither a study ({', '.join(studies)}, or their two-digit "
                               f"prefix) nor a profile-wide key ({wide})")
        as_given = key
        if study is not None:
            if study not in (raw.get("notebooks") or {}):
                raise ProfileError(f"--set {key}: the profile has no section for {study} (it has: "
                                   f"{', '.join(raw.get('notebooks') or {})})")
            if not rest:
                raise ProfileError(f"--set {key}: name a field of {study}'s section, e.g. --set {head}.batch_sizes=[1]")
            key = f"{study}.{rest}"
        out[key] = (json.dumps(parsed, separators=(",", ":"), default=str), as_given)
    return {f"{k}={v}": as_given for k, (v, as_given) in sorted(out.items())}


def _full_key(key: str) -> str:
    """An override's key as the profile file nests it: `03_onnx_batching.x` -> `notebooks.03_onnx_batching.x`."""
    return f"notebooks.{key}" if key.split(".")[0] in study_registry.studies() else key


def _nested(dotted: str, value: Any) -> dict:
    for part in reversed(dotted.split(".")):
        value = {part: value}
    return value


def _overlaps(key: str, at: str, problem: str) -> bool:
    """Whether a validation problem at `at` concerns the override of `key` (one contains the other, or the problem
    names it)."""
    return key == at or key.startswith(f"{at}.") or at.startswith(f"{key}.") or key in problem


def override_record(loaded: LoadedProfile) -> dict:
    """What run.json records of a profile's overrides, so that its name loads again (`load`)."""
    params = paths.profile_path(loaded.path.stem)
    file = loaded.path.stem if params.is_file() and params.resolve() == loaded.path.resolve() else str(
        loaded.path.resolve())
    return {"profile": file, "set": list(loaded.overrides)}


def recorded_overrides(name: str) -> dict | None:
    """The overrides run.json recorded for a profile name with '+' (None where there are none)."""
    if not OVERRIDDEN_NAME.fullmatch(name):
        return None
    record = (read_json(paths.manifest_path(name), {}) or {}).get(OVERRIDES_KEY)
    return record if isinstance(record, dict) and "profile" in record and "set" in record else None


def describe_overrides(name: str) -> str:
    """'smoke-fast with --set 03_onnx_batching.batch_sizes=[1]' for an overridden profile's name; '' otherwise."""
    record = recorded_overrides(name)
    if record is None:
        return ""
    return f"{Path(record['profile']).stem} with " + " ".join(f"--set {t}" for t in record["set"])


def _load_recorded(name: str) -> LoadedProfile:
    record = recorded_overrides(name)
    if record is None:
        raise ProfileError(f"{name}: no run recorded the overrides this name stands for "
                           f"({paths.display(paths.manifest_path(name))}); give the profile and its --set options")
    loaded = load(record["profile"], overrides=record["set"])
    if loaded.name != name:
        raise ProfileError(f"{paths.display(paths.manifest_path(name))}: {OVERRIDES_KEY}: the recorded overrides "
                           f"make {loaded.name}, not {name}")
    return loaded


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
    name = str(params.get("profile", ""))
    if not PLAIN_NAME.fullmatch(name) and not OVERRIDDEN_NAME.fullmatch(name):
        raise ProfileError(f"{where}: profile: must be a plain name such as 'smoke' (got {params.get('profile')!r})")
    try:
        prof = Profile.model_validate(
            {"description": f"parameters of {notebook}", **common, "notebooks": {notebook: section}}
        )
    except ValidationError as e:
        raise ProfileError(f"{where}: {_describe(e)}") from None
    return prof, _validate_section(notebook, section, where, prof)
