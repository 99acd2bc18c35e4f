"""requirements.lock is the one source of versions; environment.yml mirrors it exactly."""

import ast
import importlib.metadata
import re
import sys
import tomllib

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from studylib import paths


def _lock():
    lines = (paths.ROOT / "requirements.lock").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def test_every_lock_line_is_an_exact_pin():
    for line in _lock():
        assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[A-Za-z0-9_.+\-]+", line), line


def test_environment_yml_mirrors_the_lock():
    env = yaml.safe_load((paths.ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip == _lock()
    assert "python=3.11" in env["dependencies"]


def test_the_gpu_overlay_pins_the_cpu_locks_versions():
    """requirements-gpu.txt: exact pins, each of a locked package (or its -gpu build) at the locked version."""
    pins = {canonicalize_name(k): v for k, v in (line.split("==") for line in _lock())}
    lines = [ln.strip() for ln in (paths.ROOT / "requirements-gpu.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    assert lines
    names = set()
    for line in lines:
        req = Requirement(line)
        [spec] = req.specifier
        base = canonicalize_name(req.name).removesuffix("-gpu")
        assert spec.operator == "==" and base in pins, line
        assert spec.version == pins[base], f"{line}: the CPU lock has {base}=={pins[base]}"
        names.add(base)
    assert {"torch", "onnxruntime", "tensorflow"} <= names
    assert "requirements-gpu.txt" in (paths.ROOT / "Makefile").read_text()


def _declared():
    """pyproject's requirements: the core dependencies and every extra's."""
    project = tomllib.loads((paths.ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra]
    return reqs


def test_the_lock_satisfies_every_declared_range():
    pins = {canonicalize_name(k): v for k, v in (line.split("==") for line in _lock())}
    for req in _declared():
        assert canonicalize_name(req.name) in pins, f"{req.name} is declared in pyproject.toml but not pinned in the lock"
        assert req.specifier.contains(pins[canonicalize_name(req.name)], prereleases=True), (req, pins[canonicalize_name(req.name)])
    assert "torch" in pins  # pinned, never left to pip: an unpinned torch pulls a multi-GB CUDA build


def _third_party_imports():
    found = set()
    for path in (paths.ROOT / "src" / "studylib").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in ("studylib", "pydoc_data")}


def test_every_module_the_code_imports_is_declared():
    declared = {canonicalize_name(r.name) for r in _declared()}
    owners = importlib.metadata.packages_distributions()
    for module in sorted(_third_party_imports()):
        dists = {canonicalize_name(d) for d in owners.get(module, [])}
        assert dists & declared, f"studylib imports {module} (from {sorted(dists)}) but pyproject.toml does not declare it"


def test_every_locked_package_is_needed_by_a_declared_one():
    """The lock is the closure of pyproject's requirements (with their own extras): nothing unused."""
    pins = {canonicalize_name(k) for k, _ in (line.split("==") for line in _lock())}
    todo = [(r, r.extras) for r in _declared()]
    needed, seen = set(), set()
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        if (name, frozenset(extras)) in seen:
            continue
        seen.add((name, frozenset(extras)))
        needed.add(name)
        try:
            requires = importlib.metadata.requires(req.name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            dep = Requirement(text)
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if dep.marker is None or any(dep.marker.evaluate(e) for e in envs):
                todo.append((dep, dep.extras))
    unused = sorted(pins - needed)
    assert not unused, f"locked but required by nothing pyproject.toml declares: {unused}"
