"""What machine and software produced a result: captured once per run, saved beside the results."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata

from ..core import paths, wording
from . import allocator, gemm

LIBRARIES = ("torch", "transformers", "tokenizers", "tensorflow", "tf-keras", "keras", "jax", "jaxlib", "onnx",
             "onnxruntime", "onnxscript", "torchao", "numpy", "scipy", "pandas", "papermill", "nbconvert", "studylib")
# GPU builds and CUDA libraries (requirements-gpu.txt), recorded where installed
GPU_LIBRARIES = ("onnxruntime-gpu", "jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin", "jax-cuda12-pjrt",
                 "tensorrt", "tensorrt-cu13", "tensorrt-cu12", "tensorrt-cu13-libs", "tensorrt-cu12-libs",
                 "cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-cudnn-cu13",
                 "nvidia-cudnn-cu12", "nvidia-cublas", "nvidia-cublas-cu12", "nvidia-nccl-cu13",
                 "nvidia-nccl-cu12", "nvidia-cuda-nvcc-cu12", "triton")
# The fields that decide whether an earlier measurement still stands (a re-run skips it).
TEMPLATE = "machine/environment.txt"
FINGERPRINT_KEYS = ("python", "os", "cpu_model", "logical_cpus", "gpu_name", "cuda", "libraries")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    return gemm.cpu_model() or platform.processor() or platform.machine()


def git_commit() -> str | None:
    """The checkout's commit (12 hex digits, "-dirty" if tracked files outside outputs/ and reference/ changed, the
    folders runs write); None outside git."""
    try:
        out = subprocess.run(["git", "-C", str(paths.ROOT), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(paths.ROOT), "status", "--porcelain", "--untracked-files=no",
                                "--", ".", ":(exclude)outputs", ":(exclude)reference"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _gpu() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {}
    return {"gpu_name": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
            "gpu_driver": next(iter(nvidia_smi("driver_version")), None)}


def nvidia_smi(query: str) -> list[str]:
    """nvidia-smi's lines for `query` (--query-gpu, CSV without a header); [] without it or where it fails."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    return [ln.strip() for ln in out.stdout.splitlines() if ln.strip()] if out.returncode == 0 else []


def thread_settings() -> dict:
    """The thread settings of this process: the variables, and torch's and (where imported) TensorFlow's counts."""
    import torch

    t = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")}
    t.update(torch_intra_op=torch.get_num_threads(), torch_inter_op=torch.get_num_interop_threads())
    if "tensorflow" in sys.modules:  # only studies that run TensorFlow import it
        tf = sys.modules["tensorflow"]
        t.update(tf_intra_op=tf.config.threading.get_intra_op_parallelism_threads(),
                 tf_inter_op=tf.config.threading.get_inter_op_parallelism_threads())
    return t


@dataclass(frozen=True)
class Machine:
    """What the `auto` profile looks at: a CUDA GPU and its memory, and the usable CPU cores."""

    cuda: bool
    gpu_memory_gib: float
    cores: int
    gpu_name: str | None = None

    def describe(self) -> str:
        gpu = f"{self.gpu_name or 'a CUDA GPU'} with {self.gpu_memory_gib:g} GiB" if self.cuda else "no CUDA GPU"
        return f"{gpu}, {self.cores} CPU cores"


def detect_machine() -> Machine:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    gpu = _gpu()
    return Machine(bool(gpu), gpu.get("gpu_memory_gib", 0.0), cores, gpu.get("gpu_name"))


def capture(profile: str | None = None, precision: dict | None = None) -> dict:
    """Versions, Python, OS, CPU, memory, threads, GPU, commit, profile and the precision policy."""
    import psutil

    env = {
        "profile": profile,
        "captured_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "gpu_name": None,
        "cuda": None,
        "threads": thread_settings(),
        "allocator": allocator.policy(),
        "git_commit": git_commit(),
        "libraries": {lib: _version(lib) for lib in LIBRARIES},
        "gpu_libraries": {lib: v for lib in GPU_LIBRARIES if (v := _version(lib))},
    }
    env.update(_gpu())
    if precision is not None:
        env["precision"] = precision
    env["fingerprint"] = fingerprint(env)
    return env


def fingerprint(env: dict) -> str:
    """A short hash of the fields that make measurements comparable."""
    fields = {k: env.get(k) for k in FINGERPRINT_KEYS}
    # GPU builds and the precision policy count where there are any (a CPU run's fingerprint stays as it was)
    if env.get("gpu_libraries"):
        fields["gpu_libraries"] = env["gpu_libraries"]
    if (env.get("precision") or {}).get("device") == "cuda":
        fields["tf32"] = env["precision"]["tf32"]
    key = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def machine(env: dict) -> str:
    """The machine alone (CPU, usable CPUs, GPU): what an Answer holds for; versions are in `one_line`."""
    gpu = f"{env['gpu_name']} (CUDA {env.get('cuda')})" if env.get("gpu_name") else "no GPU"
    return f"{env.get('cpu_model')} · {env.get('usable_cpus')} CPUs · {gpu}"


def locked_version(dist: str) -> str | None:
    """`dist`'s version in requirements.lock (the CPU lock), or None."""
    try:
        lines = (paths.ROOT / "requirements.lock").read_text().splitlines()
    except OSError:
        return None
    return next((ln.split("==", 1)[1].strip() for ln in lines if ln.split("==", 1)[0].strip().lower() == dist), None)


def torch_note(env: dict) -> str:
    """On a GPU run whose torch is not the CPU lock's: which torch ran and why; else ""."""
    ran = (env.get("libraries") or {}).get("torch")
    locked = locked_version("torch")
    if not env.get("gpu_name") or not ran or not locked or ran.split("+")[0] == locked.split("+")[0]:
        return ""
    return wording.macro(TEMPLATE, "torch_note", ran, locked)


def one_line(env: dict) -> str:
    """The environment in one line, for the index page and notebook headers (with torch_note where there is one)."""
    libs, note = env.get("libraries", {}), torch_note(env)
    return (f"{machine(env)} · Python {env.get('python')} · torch {libs.get('torch')}"
            + (f" ({note})" if note else "") + f" · commit {env.get('git_commit') or 'unknown'}")
