"""Hardware profiles: params/<profile>.yaml loaded (cached) and validated whole; a problem is a one-line ProfileError."""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..core import paths, study_registry
from ..core.files import read_json, write_json_atomic
from ..machine.environment import detect_machine
from . import overrides as overrides_
from .schemas import AutoProfile, MeasureSettings, Profile, ProfileError, sections


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


def _validate(model: type[BaseModel], raw: Any, where: str, prefix: str = "") -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise ProfileError(f"{where}: {_describe(e, prefix)}") from None


def _validate_section(name: str, raw: dict[str, Any], where: str, prof: Profile):
    if isinstance(raw.get("measure"), dict):  # a section's measure overrides the common one key by key
        raw = raw | {"measure": prof.measure.model_dump() | raw["measure"]}
    section = _validate(sections()[name], raw, where, f"notebooks.{name}")
    needs = [(d, f"used by notebooks.{name}.dtypes") for d in getattr(section, "dtypes", [])]
    if prof.tf32:
        needs.append(("tf32", "the profile's fp32 rows run with tf32: true"))
    if any(v.endswith("-int8") for v in getattr(section, "variants", [])):
        needs.append(("int8", f"used by notebooks.{name}.variants"))
    for key, why in needs:
        if key not in prof.parity_tolerance:
            raise ProfileError(f"{where}: parity_tolerance: has no tolerance for {key} ({why})")
    return section


def _no_such(where: str, key: str, name: Any) -> ProfileError:
    return ProfileError(f"{where}: {key}: no such profile {name!r} (known: {', '.join(paths.known_profiles())})")


PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# Directories under outputs/ that are not profiles.
RESERVED = {"summary": "the cross-hardware summary under outputs/summary/",
            "screenshots": "the browser check's screenshots under outputs/screenshots/"}


class LoadedProfile:
    """A validated profile: name, file, sections, `picked` (an `auto` profile's choice), `overrides`, `files`."""

    def __init__(self, name: str, path: Path, profile: Profile, sections: dict[str, BaseModel],
                 picked: str | None = None, overrides: tuple[str, ...] = (), files: tuple[Path, ...] = ()):
        self.name, self.path, self.profile, self.sections, self.picked = name, path, profile, sections, picked
        self.overrides, self.files = overrides, files or (path,)

    def notebooks(self) -> list[str]:
        return list(self.sections)

    def measure_for(self, notebook: str) -> MeasureSettings:
        return getattr(self.sections[notebook], "measure", None) or self.profile.measure

    def settings_for(self, notebook: str) -> Profile:
        """The profile-wide settings as `notebook` measures with them: its section's `measure` where it has one."""
        if notebook not in self.sections:
            raise ProfileError(f"{self.path.name}: notebooks: has no section {notebook!r} (it has: "
                               f"{', '.join(self.sections)})")
        return self.profile.model_copy(update={"measure": self.measure_for(notebook)})


# (file, overrides, notebook, registered studies, notebooks folder) -> (the files' stamps, the validated profile)
_CACHE: dict[tuple, tuple[tuple, LoadedProfile]] = {}


def load(profile: str, *, overrides=(), machine=None, notebook: str | None = None) -> LoadedProfile:
    """Load and validate a profile by name or path (cached), with `overrides` (docs/profiles.md); raises ProfileError."""
    if not overrides and OVERRIDDEN_NAME.fullmatch(str(profile)) and not paths.profile_path(profile).is_file():
        return _load_recorded(profile)
    path = paths.profile_path(profile)
    key = (str(path.absolute()), _frozen(overrides), notebook if overrides else None, tuple(study_registry.REGISTRY),
           str(paths.NOTEBOOKS_DIR))  # the sections are checked against the registered studies and their notebooks
    hit = _CACHE.get(key) if machine is None else None
    if hit is not None and hit[0] == _stamp(hit[1].files):
        return hit[1]
    loaded = _load(path, overrides, machine, notebook)
    if machine is None:
        _CACHE[key] = (_stamp(loaded.files), loaded)
    return loaded


def _frozen(overrides) -> tuple:
    """Overrides as a cache key (a mapping's values may be lists)."""
    if isinstance(overrides, Mapping):
        return ("mapping", repr(sorted(overrides.items(), key=lambda kv: str(kv[0]))))
    return ("texts", *map(str, overrides)) if isinstance(overrides, list | tuple) else ("other", repr(overrides))


def _stamp(files) -> tuple:
    """Each file's modification time and size; once one is gone, a stamp that matches nothing."""
    try:
        return tuple((str(f), (st := Path(f).stat()).st_mtime_ns, st.st_size) for f in files)
    except OSError:
        return (object(),)


def _read_yaml(path: Path, where: str) -> Any:
    """A profile file's YAML; a ProfileError naming the file and line where it is not YAML."""
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ProfileError(f"{where}: not valid YAML: {line}{problem}") from None


def _load(path: Path, overrides, machine, notebook: str | None) -> LoadedProfile:
    try:
        where = str(path.relative_to(paths.ROOT))
    except ValueError:
        where = str(path)
    if not path.is_file():
        raise ProfileError(f"{where}: no such profile file (known profiles: {', '.join(paths.known_profiles())})")
    if not PLAIN_NAME.fullmatch(path.stem):
        raise ProfileError(f"{where}: the file name is the profile's name under outputs/: use letters, digits, "
                           f"'.', '_' and '-' only")
    raw = _read_yaml(path, where)
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: (top level): must be a mapping of keys to values")
    if path.stem in RESERVED:
        raise ProfileError(f"{where}: the name {path.stem!r} is reserved for {RESERVED[path.stem]}: rename the file")
    files = [path]
    if "extends" in raw:
        raw = _extended(raw, where, files)
    if "auto" in raw:
        if overrides:
            first = overrides_.pairs(overrides)[0][2]
            raise ProfileError(f"{first}: {where} is an auto profile; give --profile the profile it picks for "
                               f"this machine (`studylib plan --profile {path.stem}` names it) with your --set options")
        return _load_auto(raw, path, where, machine)
    prof, sections = _validated(raw, where)
    if not overrides:
        return LoadedProfile(path.stem, path, prof, sections, files=tuple(files))
    given = overrides_.normalised(overrides, raw, notebook)  # {the key written one way: the key as given}
    texts = list(given)
    try:
        prof, sections = _validated(overrides_.applied(raw, texts), where)
    except ProfileError as e:
        problem = str(e).removeprefix(f"{where}: ")
        at = problem.split(":")[0]
        named = [given[t] for t in texts if overrides_.overlaps(overrides_.full_key(t.partition("=")[0]), at, problem)]
        raise ProfileError(f"{', '.join(named or given.values())}: {problem}") from None
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:8]
    return LoadedProfile(f"{path.stem}+{digest}", path, prof, sections, overrides=tuple(texts), files=tuple(files))


def _validated(raw: dict, where: str) -> tuple[Profile, dict[str, BaseModel]]:
    """The profile and its notebook sections, validated; a ProfileError naming `where` otherwise."""
    prof = _validate(Profile, raw, where)
    sections = {}
    for name, section in prof.notebooks.items():
        notebook = study_registry.studies()[name].notebook_path
        if not notebook.is_file():
            raise ProfileError(f"{where}: notebooks.{name}: notebook file {notebook.name} is missing")
        sections[name] = _validate_section(name, section, where, prof)
    return prof, sections


# A profile with `--set` overrides: its file's name, '+', the first 8 hex digits of the overrides' SHA-256.
OVERRIDDEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\+[0-9a-f]{8}")
OVERRIDES_KEY = "overrides"  # where run.json records them: {"profile": the file, "set": [KEY=VALUE, ...]}


def override_record(loaded: LoadedProfile) -> dict:
    """What run.json records of a profile's overrides, so that its name loads again (`load`)."""
    params = paths.profile_path(loaded.path.stem)
    file = loaded.path.stem if params.is_file() and params.resolve() == loaded.path.resolve() else str(
        loaded.path.resolve())
    return {"profile": file, "set": list(loaded.overrides)}


def record_overrides(loaded: LoadedProfile) -> None:
    """Record an overridden profile's overrides in its run.json, so that its name loads again."""
    path = paths.manifest_path(loaded.name)
    manifest = read_json(path, {}) or {}
    record = override_record(loaded)
    if manifest.get(OVERRIDES_KEY) != record:
        write_json_atomic(path, manifest | {OVERRIDES_KEY: record})


def recorded_overrides(name: str) -> dict | None:
    """The overrides run.json recorded for a profile name with '+' (None where there are none)."""
    if not OVERRIDDEN_NAME.fullmatch(name):
        return None
    record = (read_json(paths.manifest_path(name), {}) or {}).get(OVERRIDES_KEY)
    return record if isinstance(record, dict) and "profile" in record and "set" in record else None


def describe_overrides(profile: str | LoadedProfile) -> str:
    """'smoke-fast with --set 03_onnx_batching.batch_sizes=[1]' for an overridden profile or its name; else ''."""
    if isinstance(profile, LoadedProfile):
        record = override_record(profile) if profile.overrides else None
    else:
        record = recorded_overrides(profile)
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


def _extended(raw: dict, where: str, files: list[Path]) -> dict:
    """`extends: <name>`: that plain profile's keys with this file's on top; its file is added to `files`."""
    name = raw["extends"]
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name) or not paths.profile_path(name).is_file():
        raise _no_such(where, "extends", name)
    files.append(paths.profile_path(name))
    base = _read_yaml(files[-1], f"{where}: extends: {name}")
    if not isinstance(base, dict) or "extends" in base or "auto" in base:
        raise ProfileError(f"{where}: extends: {name!r} must be a plain profile (not auto, not extending another)")
    return overrides_.merged(base, {k: v for k, v in raw.items() if k != "extends"})


def _load_auto(raw: dict, path: Path, where: str, machine) -> LoadedProfile:
    auto = _validate(AutoProfile, raw, where).auto
    files = [path]
    for kind, rules in (("cuda", auto.cuda), ("cpu", auto.cpu)):  # every rule must name a usable profile
        for i, rule in enumerate(rules):
            key = f"auto.{kind}.{i}.use"
            target = paths.profile_path(rule.use)
            if not PLAIN_NAME.fullmatch(rule.use) or not target.is_file():
                raise _no_such(where, key, rule.use)
            if target.resolve() == path.resolve() or "auto" in (_read_yaml(target, f"{where}: {key}") or {}):
                raise ProfileError(f"{where}: {key}: {rule.use!r} is itself an auto profile")
            try:
                used = load(rule.use)
            except ProfileError as e:
                raise ProfileError(f"{where}: {key}: profile {rule.use!r} is invalid: {e}") from None
            files += used.files
            if used.profile.device != kind:
                raise ProfileError(f"{where}: {key}: profile {rule.use!r} runs on {used.profile.device}, not {kind}")
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
    return LoadedProfile(path.stem, path, prof, chosen.sections, picked=rule.use, files=tuple(dict.fromkeys(files)))


_SHIPPED: dict[tuple, dict[str, LoadedProfile]] = {}  # shipped(), by its files' stamps and what `load` is keyed on


def shipped() -> dict[str, LoadedProfile]:
    """The profiles under params/ that run a grid of their own (not auto, not extending another, valid), by name."""
    files = [paths.profile_path(name) for name in paths.known_profiles()]
    key = (_stamp(files), tuple(study_registry.REGISTRY), str(paths.NOTEBOOKS_DIR))
    if key not in _SHIPPED:
        out = {}
        for path in files:
            try:
                raw = _read_yaml(path, path.name)
                if isinstance(raw, dict) and not {"auto", "extends"} & set(raw):
                    out[path.stem] = load(path.stem)
            except (ProfileError, OSError):
                continue
        _SHIPPED.clear()
        _SHIPPED[key] = out
    return _SHIPPED[key]


# the profile-wide values a notebook's "What ran" shows (beside `profile`, `force` and its section's keys)
COMMON_PARAMETERS = ("device", "threads", "seed", "run_shift", "measure", "parity_tolerance")


def notebook_parameters(loaded: LoadedProfile, notebook: str) -> dict[str, Any]:
    """A notebook's parameters as its profile resolves them (what the page's "What ran" lists)."""
    p = loaded.settings_for(notebook)
    section = loaded.sections[notebook].model_dump(exclude={"measure", "left_out"})
    common = p.model_dump(include=set(COMMON_PARAMETERS))
    return {"profile": loaded.name, **{k: common[k] for k in COMMON_PARAMETERS}, **section}


def notebook_inputs(loaded: LoadedProfile, *, force: bool = False) -> dict[str, Any]:
    """What `studylib run` injects into a notebook's parameters cell: profile, overrides (a mapping) and `force`."""
    return {"profile": override_record(loaded)["profile"], "overrides": overrides_.as_mapping(loaded.overrides),
            "force": bool(force)}


def load_at(profile: str, commit: str) -> LoadedProfile | None:
    """The profile as `commit` held it, validated by today's code; None where it cannot be read or validated."""
    rel = paths.profile_path(profile)
    try:
        rel = rel.resolve().relative_to(paths.ROOT.resolve())
        shown = subprocess.run(["git", "-C", str(paths.ROOT), "show", f"{commit.removesuffix('-dirty')}:{rel}"],
                               capture_output=True, text=True, timeout=30)
    except (ValueError, OSError, subprocess.SubprocessError):
        return None
    if shown.returncode != 0:
        return None
    with tempfile.TemporaryDirectory(prefix="studylib-profile-") as d:
        path = Path(d) / rel.name
        path.write_text(shown.stdout)
        try:
            return load(str(path))
        except ProfileError:
            return None


def added_since(profile: str, notebook: str, keys: list[str], commits: set[str]) -> bool:
    """Whether every key of `keys` is in today's grid and in none at `commits` (False where one cannot be read)."""
    try:
        now = {c.key for c in study_registry.grid(load(profile), notebook)}
    except (ProfileError, KeyError):
        return False
    if not set(keys) <= now:
        return False
    then: set[str] = set()
    for commit in commits:
        loaded = load_at(profile, commit)
        if loaded is None or notebook not in loaded.sections:
            return False
        then |= {c.key for c in study_registry.grid(loaded, notebook)}
    return bool(commits) and not then & set(keys)
