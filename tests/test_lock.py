"""requirements.lock is the one source of versions; environment.yml mirrors it exactly."""

import ast
import importlib.metadata
import re
import sys
import tomllib

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from studylib.core import paths


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


def _overlay():
    return [Requirement(ln.strip()) for ln in (paths.ROOT / "requirements-gpu.txt").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def test_the_gpu_overlay_pins_the_cpu_locks_versions_or_says_where_it_differs():
    """requirements-gpu.txt: exact pins, each of a locked package (or its -gpu build) at the locked version, a CUDA
    package the lock has none of, or a version its header declares as differing from the CPU lock (torch)."""
    pins = {canonicalize_name(k): v for k, v in (line.split("==") for line in _lock())}
    text = (paths.ROOT / "requirements-gpu.txt").read_text()
    reqs = _overlay()
    assert reqs
    names = set()
    for req in reqs:
        [spec] = req.specifier
        base = canonicalize_name(req.name).removesuffix("-gpu")
        assert spec.operator == "==", req
        if base not in pins:
            assert base.startswith("nvidia-") and CUDA_SUFFIX.search(base), f"{req}: neither locked nor a CUDA package"
        elif spec.version != pins[base]:
            assert re.search(rf"{base}(?:-gpu)? {re.escape(spec.version)}\b[^\n]*DIFFERS FROM THE CPU LOCK\s+#?\s*\({base} "
                             rf"{re.escape(pins[base])}\)", text), f"{req}: the CPU lock has {pins[base]}, undeclared"
        names.add(base)
    assert {"torch", "onnxruntime", "jax"} <= names
    makefile = (paths.ROOT / "Makefile").read_text()
    assert "requirements-gpu.txt" in makefile and "-c requirements-gpu.resolved.txt" in makefile


def test_every_framework_of_the_gpu_stack_shares_one_cudnn():
    """One cuDNN distribution in the resolution, and TensorFlow at the lock's version (its CUDA from torch's packages)."""
    resolved = _resolved()
    assert [n for n in resolved if n.startswith("nvidia-cudnn")] == ["nvidia-cudnn-cu12"]
    assert resolved["tensorflow"] == dict(line.split("==") for line in _lock())["tensorflow"]


CUDA_SUFFIX = re.compile(r"-cu(\d+)(?:-|$)")


def _resolved() -> dict[str, str]:
    lines = (paths.ROOT / "requirements-gpu.resolved.txt").read_text().splitlines()
    return {canonicalize_name(k): v for k, v in (ln.split("==") for ln in lines if ln.strip() and not ln.startswith("#"))}


def test_the_resolved_gpu_overlay_is_on_one_cuda_major():
    """What pip resolved for the overlay (requirements-gpu.resolved.txt, from `pip install --dry-run --report`): every
    CUDA package of one major, the one the overlay's header names, for torch, ONNX Runtime and JAX alike."""
    resolved = _resolved()
    major = re.search(r"One CUDA major,[\s#]+(\d+)", (paths.ROOT / "requirements-gpu.txt").read_text()).group(1)
    suffixed = {name: m.group(1) for name in resolved if (m := CUDA_SUFFIX.search(name))}
    assert suffixed and set(suffixed.values()) == {major}, suffixed  # nvidia-cudnn-cu13, jax-cuda13-plugin, ...
    jax_plugins = [n for n in resolved if n.startswith("jax-cuda")]
    assert jax_plugins and all(n.startswith(f"jax-cuda{major}-") for n in jax_plugins), jax_plugins
    # CUDA 13's own wheels have no suffix: the runtime's version is the CUDA version
    runtime = resolved.get("nvidia-cuda-runtime") or resolved.get(f"nvidia-cuda-runtime-cu{major}")
    assert runtime and runtime.split(".")[0] == major, runtime
    for req in _overlay():  # the frameworks themselves resolved at the overlay's pins
        assert resolved[canonicalize_name(req.name)] == next(iter(req.specifier)).version, req


def test_a_second_cuda_major_would_be_caught():
    """The check above on a resolution that mixes majors (tensorflow[and-cuda] 2.21 brings CUDA 12 wheels)."""
    mixed = {"nvidia-cudnn-cu13": "9.20.0.48", "nvidia-cusparse-cu12": "12.5.10.65", "jax-cuda13-plugin": "0.10.2"}
    majors = {m.group(1) for name in mixed if (m := CUDA_SUFFIX.search(name))}
    assert majors == {"12", "13"}


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


def test_tensorrt_is_pinned_to_the_major_the_overlays_onnxruntime_links():
    """requirements-gpu-tensorrt.txt pins TensorRT's libraries at the major onnxruntime-gpu's TensorRT provider loads
    (PyPI's newest tensorrt-cu12 is 11.x, libnvinfer.so.11, which onnxruntime-gpu 1.26 cannot load: every
    ort-tensorrt row was a skip), for the overlay's CUDA major, and make setup-tensorrt installs it."""
    from studylib.machine import gpu

    lines = [ln.strip() for ln in (paths.ROOT / "requirements-gpu-tensorrt.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    reqs = [Requirement(ln) for ln in lines if not ln.startswith("--")]
    [trt] = [r for r in reqs if canonicalize_name(r.name).startswith("tensorrt")]
    [spec] = trt.specifier
    ort = next(r for r in _overlay() if canonicalize_name(r.name) == "onnxruntime-gpu")
    major = gpu.tensorrt_major(next(iter(ort.specifier)).version)
    assert spec.operator == "==" and major is not None and int(spec.version.split(".")[0]) == major, (trt, major)
    cuda = re.search(r"One CUDA major,[\s#]+(\d+)", (paths.ROOT / "requirements-gpu.txt").read_text()).group(1)
    assert CUDA_SUFFIX.search(canonicalize_name(trt.name)).group(1) == cuda
    assert "-r requirements-gpu-tensorrt.txt" in (paths.ROOT / "Makefile").read_text()
