"""`make gpu-check`: before a GPU run, which frameworks see the GPU, with which CUDA and cuDNN, under which policy.

    python -m studylib.gpu_check [--profile gpu-smoke]

One table, a line per framework (torch, TensorFlow, JAX, ONNX Runtime's CUDA and TensorRT providers): sees the
GPU?, version, CUDA / cuDNN, and the precision policy of the profile as that framework reads it back after
gpu.apply. Exit 0 when every framework sees the GPU, 1 when one does not (its line says why: its rows would be
skipped rows), 2 on a machine without a GPU (one line). Nothing else is measured.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from .machine import gpu

COLUMNS = ("framework", "sees GPU", "version", "CUDA / cuDNN", "precision (read back)")


def _nvidia_smi() -> str | None:
    """The GPUs nvidia-smi lists (name, driver), or None without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    return "; ".join(lines) if out.returncode == 0 and lines else None


def _torch() -> tuple:
    import torch

    cudnn = torch.backends.cudnn.version() if torch.cuda.is_available() else None
    policy = (f"matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, cudnn.allow_tf32="
              f"{torch.backends.cudnn.allow_tf32}, float32_matmul_precision={torch.get_float32_matmul_precision()}")
    return torch.__version__, f"{torch.version.cuda} / {cudnn}", policy


def _tensorflow() -> tuple:
    import tensorflow as tf

    info = tf.sysconfig.get_build_info()
    return (tf.__version__, f"{info.get('cuda_version')} / {info.get('cudnn_version')}",
            f"tensor_float_32_execution={tf.config.experimental.tensor_float_32_execution_enabled()}")


def _jax() -> tuple:
    import jax

    plugin = ", ".join(sorted({d.platform for d in jax.devices()}))
    return jax.__version__, f"devices: {plugin}", f"jax_default_matmul_precision={jax.config.jax_default_matmul_precision}"


def _ort(provider: str) -> tuple:
    import onnxruntime as ort

    options = gpu.ort_cuda_options(gpu.current_precision()) if provider == "CUDAExecutionProvider" else {
        "NVIDIA_TF32_OVERRIDE": os.environ.get("NVIDIA_TF32_OVERRIDE", "unset (TensorRT's default: TF32 on)")}
    return ort.__version__, ", ".join(p for p in ort.get_available_providers() if p != "CPUExecutionProvider"), \
        ", ".join(f"{k}={v}" for k, v in options.items())


def _trt_sees() -> str | None:
    import onnxruntime as ort

    if "TensorrtExecutionProvider" in ort.get_available_providers():
        return None
    return "onnxruntime-gpu has no TensorrtExecutionProvider here (TensorRT 10 missing: requirements-gpu.txt says how)"


CHECKS = (  # (label, framework of gpu.SEES or a callable giving the reason, details)
    ("torch", "torch", _torch),
    ("TensorFlow", "tensorflow", _tensorflow),
    ("JAX", "jax", _jax),
    ("ONNX Runtime (CUDA EP)", "onnxruntime", lambda: _ort("CUDAExecutionProvider")),
    ("ONNX Runtime (TensorRT EP)", _trt_sees, lambda: _ort("TensorrtExecutionProvider")),
)


def rows() -> list[dict]:
    """One row per framework; an import or a query that fails is that row's reason, never a crash."""
    out = []
    for label, sees, details in CHECKS:
        try:
            reason = gpu.sees_gpu(sees) if isinstance(sees, str) else sees()
        except Exception as exc:  # noqa: BLE001 - the table says what failed
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        try:
            version, cuda, policy = details()
        except Exception as exc:  # noqa: BLE001
            version, cuda, policy = "—", "—", f"not read: {type(exc).__name__}"
        out.append(dict(zip(COLUMNS, (label, "yes" if reason is None else f"no: {reason}", version, cuda, policy))))
    return out


def table(found: list[dict]) -> str:
    widths = [max(len(c), *(len(str(r[c])) for r in found)) for c in COLUMNS]
    line = "  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths))
    return "\n".join([line, "  ".join("-" * w for w in widths)]
                     + ["  ".join(str(r[c]).ljust(w) for c, w in zip(COLUMNS, widths)) for r in found])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studylib.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="gpu-smoke", help="whose precision policy to apply (a cuda profile)")
    args = parser.parse_args(argv)
    from .measurement import profiles

    try:
        from . import studies  # noqa: F401 - registers the studies the profile's sections are read by

        loaded = profiles.load(args.profile)
    except profiles.ProfileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    smi = _nvidia_smi()
    if smi is None and gpu.sees_gpu("torch") is not None:
        print("gpu-check: no NVIDIA GPU on this machine (nvidia-smi lists none and PyTorch sees none): nothing to check",
              file=sys.stderr)
        return 2
    import importlib.util

    policy = gpu.policy(loaded.profile.tf32, "cuda")  # the GPU path is what is checked, whatever the profile's device
    has_tf = "tensorflow" in sys.modules or importlib.util.find_spec("tensorflow") is not None
    gpu.apply(policy, ("torch",) + (("tensorflow",) if has_tf else ()))
    found = rows()
    print(f"GPUs (nvidia-smi): {smi or 'nvidia-smi not found'}")
    print(f"profile {loaded.name}: tf32 {policy['label']}; XLA_PYTHON_CLIENT_PREALLOCATE="
          f"{os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE')}")
    print(table(found))
    missing = [r["framework"] for r in found if r["sees GPU"] != "yes"]
    if missing:
        print(f"not on the GPU: {', '.join(missing)} (their rows will be skipped rows with the reason above)")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
