"""`make gpu-check`: before a GPU run, one tiny real operation per GPU path, and whether each ran on the GPU.

    python -m studylib.gpu_check [--profile gpu-smoke]

Exit 0 when every path ran on the GPU or is an expected, named skip, 1 when something is wrong, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

from . import studies  # noqa: F401 - registers the studies the profile's sections are read by
from .bench import profiles
from .machine import environment, gpu, gpu_probes


def _nvidia_smi() -> str | None:
    """The GPUs nvidia-smi lists (name, driver), or None without one."""
    return "; ".join(environment.nvidia_smi("name,driver_version")) or None


def no_gpu() -> str | None:
    """The one line a machine without a GPU gets, or None where there is one."""
    if _nvidia_smi() is None and gpu.sees_gpu("torch") is not None:
        return "no NVIDIA GPU on this machine (nvidia-smi lists none and PyTorch sees none): nothing to check"
    return None


def lines(found: list[gpu_probes.Probe]) -> list[str]:
    """One line per probe: path, status and device or reason, versions, the TF32 probe."""
    out = []
    for p in found:
        state = {"ok": f"ok on {p.device}", "skip": f"skipped{' (expected)' if p.expected else ''}: {p.detail}",
                 "fail": f"FAILED: {p.detail}"}[p.status]
        tf32 = f"; fp32 4096² matmul error vs fp64 {p.tf32_error:.2g}" if p.tf32_error is not None else ""
        out.append(f"{p.path:<24} {state}" + (f" [{p.versions}]" if p.versions else "") + tf32)
    return out


def check(tf32: bool) -> tuple[int, list[str]]:
    """Apply the policy, run every probe; (exit code, the report's lines)."""
    has_tf = "tensorflow" in sys.modules or importlib.util.find_spec("tensorflow") is not None
    gpu.apply(gpu.policy(tf32, "cuda"), ("torch",) + (("tensorflow",) if has_tf else ()))
    found = gpu_probes.probes(tf32)
    libraries = gpu_probes.loaded_cuda_libraries()
    code, problems = gpu_probes.verdict(found, tf32, libraries)
    report = lines(found) + [f"loaded {name}: {', '.join(sorted(files))}" for name, files in sorted(libraries.items())]
    report += [f"problem: {p}" for p in problems] or ["every path ran on the GPU or is an expected skip"]
    return code, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studylib.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="gpu-smoke", help="whose precision policy to apply (a cuda profile)")
    args = parser.parse_args(argv)

    try:
        loaded = profiles.load(args.profile)
    except profiles.ProfileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    missing = no_gpu()
    if missing:
        print(f"gpu-check: {missing}", file=sys.stderr)
        return 2
    print(f"GPUs (nvidia-smi): {_nvidia_smi() or 'nvidia-smi not found'}")
    print(f"profile {loaded.name}: tf32 {gpu.tf32_label(bool(loaded.profile.tf32), 'cuda')}")
    code, report = check(bool(loaded.profile.tf32))
    print("\n".join(report))
    return code


if __name__ == "__main__":
    sys.exit(main())
