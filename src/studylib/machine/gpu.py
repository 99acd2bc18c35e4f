"""What a measuring process sets and checks on a GPU: the precision policy, start-up variables, each framework's view."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import first_line
from .threads import tensorflow_start_up_log

PRECISION_VAR = "STUDYLIB_TF32"  # "1" / "0": the policy, as the replicates' processes inherit it
CUDNN_BENCHMARK_VAR = "STUDYLIB_CUDNN_BENCHMARK"  # "1": torch.backends.cudnn.benchmark on from process start


def policy(tf32: bool, device: str) -> dict:
    """The precision policy as env.json records it: what holds on this device and what each framework is told."""
    on = bool(tf32) and device == "cuda"
    return {
        "tf32": on, "device": device, "label": tf32_label(on, device),
        "settings": {
            "torch": {"backends.cuda.matmul.allow_tf32": on, "backends.cudnn.allow_tf32": on,
                      "float32_matmul_precision": "high" if on else "highest"},
            "tensorflow": {"enable_tensor_float_32_execution": on},
            "jax": {"jax_default_matmul_precision": "tensorfloat32" if on else "float32"},
            "onnxruntime": {"CUDAExecutionProvider.use_tf32": int(on)},
            "tensorrt": {"NVIDIA_TF32_OVERRIDE": None if on else "0"},
        },
    }


def tf32_label(on: bool, device: str) -> str:
    """The `tf32` column: "on", "off", or "n/a (cpu)"."""
    return ("on" if on else "off") if device == "cuda" else "n/a (cpu)"


def process_vars(precision: dict | None) -> dict[str, str]:
    """Environment variables a measuring process starts with (before any framework is imported)."""
    out = {"XLA_PYTHON_CLIENT_PREALLOCATE": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),
           "TF_FORCE_GPU_ALLOW_GROWTH": os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH", "true")}
    if precision is not None and precision["device"] == "cuda":  # on a CPU nothing is set (the defaults are FP32)
        on = bool(precision["tf32"])
        out[PRECISION_VAR] = "1" if on else "0"
        out["JAX_DEFAULT_MATMUL_PRECISION"] = precision["settings"]["jax"]["jax_default_matmul_precision"]
        if not on:
            out["NVIDIA_TF32_OVERRIDE"] = "0"
    return out


def apply(precision: dict, frameworks: Iterable[str] = ("torch",)) -> dict[str, str]:
    """Apply the policy in this process (variables, torch's, TensorFlow's and JAX's flags); the variables set."""
    frameworks = tuple(frameworks)
    env = process_vars(precision)
    os.environ.update(env)
    if env.get(PRECISION_VAR) == "1":  # a kernel that ran the policy off before must not pass the override on
        os.environ.pop("NVIDIA_TF32_OVERRIDE", None)
    s = precision["settings"]
    import torch

    torch.backends.cuda.matmul.allow_tf32 = s["torch"]["backends.cuda.matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = s["torch"]["backends.cudnn.allow_tf32"]
    torch.set_float32_matmul_precision(s["torch"]["float32_matmul_precision"])
    torch.backends.cudnn.benchmark = os.environ.get(CUDNN_BENCHMARK_VAR) == "1"
    if precision["device"] != "cuda":  # torch's flags above are its CPU defaults; TensorFlow and JAX are left alone
        return env
    if "tensorflow" in frameworks or "tensorflow" in sys.modules:
        with tensorflow_start_up_log():
            import tensorflow as tf
        tf.config.experimental.enable_tensor_float_32_execution(s["tensorflow"]["enable_tensor_float_32_execution"])
        for device in tf.config.list_physical_devices("GPU"):  # the variable came too late where TF ran already
            try:
                tf.config.experimental.set_memory_growth(device, True)
            except (RuntimeError, ValueError):  # initialised already: its variable at start-up did it, or nothing can
                pass
    if "jax" in sys.modules:  # imported already: the variable came too late, the config still applies
        sys.modules["jax"].config.update("jax_default_matmul_precision", s["jax"]["jax_default_matmul_precision"])
    return env


def ort_cuda_options(precision: dict | None) -> dict[str, str]:
    """CUDAExecutionProvider options: the policy's use_tf32, and an arena grown by what each call asks for."""
    on = bool(precision and precision["tf32"])
    return {"use_tf32": "1" if on else "0", "arena_extend_strategy": "kSameAsRequested"}


def current_precision() -> dict | None:
    """The policy this process was started with (PRECISION_VAR), as a `policy` dict for the CUDA device."""
    flag = os.environ.get(PRECISION_VAR)
    return None if flag is None else policy(flag == "1", "cuda")


def frameworks_of(runtime) -> tuple[str, ...]:
    """The frameworks a runtime's rows need on the GPU: PyTorch always, then the runtime's own."""
    own = {"onnxruntime": "onnxruntime", "tensorflow": "tensorflow"}.get(runtime.family)
    if runtime.family == "keras":
        own = {"torch": None}.get(runtime.backend, runtime.backend)
    return ("torch",) + ((own,) if own else ())


CUDA_HEADER = "include/cuda_runtime_api.h"  # what AOTInductor's CUDA wrapper includes from the toolkit (export-aoti)


def cuda_toolkit(find: Callable[[], str | None] | None = None) -> tuple[str | None, str]:
    """(the CUDA toolkit AOTInductor compiles against, or None; where it was looked for). `find`: for tests."""
    if find is None:
        from torch.utils.cpp_extension import _find_cuda_home as find
    home = find()
    if home and (Path(home) / CUDA_HEADER).is_file():
        return home, f"CUDA toolkit at {home}"
    where = f"{home} has no {CUDA_HEADER}" if home else "CUDA_HOME and CUDA_PATH unset, no nvcc on PATH, no /usr/local/cuda"
    return None, (f"AOTInductor on CUDA compiles its C++ wrapper against a CUDA toolkit and finds none here ({where}): "
                  f"install the CUDA 12 toolkit (nvcc and headers, README's GPU prerequisites) or set CUDA_HOME")


# The TensorRT major each onnxruntime-gpu release's TensorRT provider links (microsoft/onnxruntime#20557)
ORT_TENSORRT_MAJOR = {(1, minor): 10 for minor in range(18, 27)}
TENSORRT_LIBRARIES = ("libnvinfer", "libnvinfer_plugin", "libnvonnxparser")


def tensorrt_major(ort_version: str) -> int | None:
    """The TensorRT major an onnxruntime-gpu version's TensorRT provider loads, or None where not known here."""
    parts = ort_version.split(".")
    try:
        return ORT_TENSORRT_MAJOR.get((int(parts[0]), int(parts[1])))
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True)
class TensorRT:
    """Whether TensorRT's libraries are in this process: `state` "loaded", "not installed" or "not loadable"."""

    state: str
    detail: str
    files: tuple[str, ...] = ()


_tensorrt: TensorRT | None = None


def preload_tensorrt(major: int = 10, folder: str | Path | None = None, load=None) -> TensorRT:
    """Load tensorrt_libs' libraries globally, once, before a session asks for TensorRT; `folder`, `load`: tests."""
    global _tensorrt
    real = folder is None and load is None
    if real and _tensorrt is not None:
        return _tensorrt
    import ctypes
    import importlib.util

    if folder is None:
        spec = importlib.util.find_spec("tensorrt_libs")
        folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations \
            else None
    load = load or (lambda path: ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
    files = [Path(folder) / f"{name}.so.{major}" for name in TENSORRT_LIBRARIES] if folder is not None else []
    if not files or not any(f.is_file() for f in files):
        got = TensorRT("not installed", f"TensorRT {major} is not installed (no tensorrt_libs package with "
                                        f"libnvinfer.so.{major}: requirements-gpu-tensorrt.txt, make setup-tensorrt)")
    else:
        missing = [f.name for f in files if not f.is_file()]
        got = TensorRT("not loadable", f"TensorRT {major} in {folder} lacks {', '.join(missing)}") if missing else None
        for f in files if got is None else ():
            try:
                load(str(f))
            except OSError as exc:
                got = TensorRT("not loadable", f"{f.name} in {folder} did not load: {first_line(exc, 200)}")
                break
        got = got or TensorRT("loaded", f"TensorRT {major} from {folder}", tuple(str(f) for f in files))
    if real:
        _tensorrt = got
    return got


def _torch_sees() -> str | None:
    import torch

    if not torch.cuda.is_available():
        if torch.version.cuda is None:
            return f"PyTorch {torch.__version__} is a CPU-only build (install the CUDA build: make setup-gpu)"
        return (f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA GPU: no GPU, or the NVIDIA "
                f"driver is missing or older than CUDA {torch.version.cuda} needs")
    major, minor = torch.cuda.get_device_capability(0)  # no kernels for GPU 0 where no arch covers its capability
    archs = torch.cuda.get_arch_list()
    for kind, _, digits in (arch.partition("_") for arch in archs):
        built = (int(digits[:-1]), int(digits[-1])) if digits.isdigit() else None
        if built and ((kind == "sm" and built[0] == major and built[1] <= minor) or (kind == "compute" and built <= (
                major, minor))):
            return None
    return (f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}) has no kernels for this GPU (sm_{major}{minor}; "
            f"built for {', '.join(archs)})")


def _tensorflow_sees() -> str | None:
    try:
        with tensorflow_start_up_log():
            import tensorflow as tf
    except ImportError:
        return "TensorFlow is not installed"
    if tf.config.list_physical_devices("GPU"):
        return None
    built = tf.test.is_built_with_cuda()
    return (f"TensorFlow {tf.__version__} sees no GPU: " + (
        "its CUDA 12 libraries are not there or did not load (make setup-gpu installs them with torch's CUDA 12 "
        "packages; make gpu-check lists the libraries a process loaded)"
        if built else "a build without CUDA"))


def _jax_sees() -> str | None:
    try:
        import jax
    except ImportError:
        return "JAX is not installed"
    try:
        platforms = {d.platform for d in jax.devices()}
    except RuntimeError as e:
        return f"JAX {jax.__version__} could not start: {first_line(e, 200)}"
    if "gpu" in platforms or "cuda" in platforms:
        return None
    return (f"JAX {jax.__version__} sees no GPU (devices: {', '.join(sorted(platforms))}): the CUDA plugin "
            f"(jax[cuda12]: make setup-gpu) is missing or could not load")


def _onnxruntime_sees() -> str | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return "ONNX Runtime is not installed"
    providers = ort.get_available_providers()
    if "CUDAExecutionProvider" in providers:
        return None
    return (f"ONNX Runtime {ort.__version__} has no CUDAExecutionProvider (the CPU package onnxruntime is installed "
            f"instead of onnxruntime-gpu: make setup-gpu); available: {', '.join(providers)}")


SEES = {"torch": _torch_sees, "tensorflow": _tensorflow_sees, "jax": _jax_sees, "onnxruntime": _onnxruntime_sees}
_seen: dict[str, str | None] = {}


def sees_gpu(framework: str) -> str | None:
    """None when `framework` sees a CUDA GPU in this process, else why not (one line naming it). Asked once."""
    if framework not in _seen:
        _seen[framework] = SEES[framework]()
    return _seen[framework]


def unavailable(device: str, runtime) -> str | None:
    """Why `runtime` cannot run on `device` here (the first of its frameworks that sees no GPU), or None."""
    if device != "cuda":
        return None
    return next((reason for reason in map(sees_gpu, frameworks_of(runtime)) if reason), None)
