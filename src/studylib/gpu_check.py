"""`make gpu-check`: before a GPU run, one tiny real operation per GPU path (a `Probe` each), and where it ran."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from . import studies  # noqa: F401 - registers the studies the profile's sections are read by
from .bench import profiles
from .core.errors import said
from .machine import environment, gpu

TF32_LEVEL = 1e-4  # relative error of an fp32 4096² matmul: TF32 gives ~1e-3, full FP32 ~1e-6
TF32_SIZE = 4096


@dataclass
class Probe:
    """What one path did: `status` ok / skip / fail; `on_gpu`: whether its real output lies on the GPU."""

    path: str
    status: str
    detail: str = ""  # a skip's or failure's reason; for ok, what ran
    device: str = ""  # where the output lies, as the framework names it
    on_gpu: bool = False
    versions: str = ""  # the framework's version, CUDA / cuDNN as it reports them
    cuda_major: int | None = None
    expected: bool = False  # a skip that is expected here (TensorRT is not in the overlay)
    on_device: bool = True  # whether the probe runs an operation (False: a toolkit looked for, no output to place)
    tf32_error: float | None = None  # the 4096² fp32 matmul's max relative error against fp64


def _major(version) -> int | None:
    m = re.match(r"\s*(\d+)", str(version or ""))
    return int(m.group(1)) if m else None


def _fp32_operands() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((TF32_SIZE, TF32_SIZE)).astype("float32") for _ in range(2))


def _rel_err(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """The largest error of the fp32 product `c` against fp64's, relative to its largest value."""
    exact = a.astype("float64") @ b.astype("float64")
    return float(np.abs(c - exact).max() / np.abs(exact).max())


def torch_eager() -> Probe:
    import torch

    if not torch.cuda.is_available():
        return Probe("torch eager", "fail", f"PyTorch {torch.__version__} sees no CUDA GPU")
    a, b = (torch.randn(TF32_SIZE, TF32_SIZE, device="cuda") for _ in range(2))
    c = a @ b
    exact = a.double() @ b.double()
    err = float(((c.double() - exact).abs().max() / exact.abs().max()).item())
    cudnn = torch.backends.cudnn.version()
    return Probe("torch eager", "ok", "fp32 matmul", str(c.device), c.is_cuda,
                 f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {cudnn}", _major(torch.version.cuda),
                 tf32_error=err)


def torch_compile() -> Probe:
    import torch

    try:
        triton = metadata.version("triton")
    except metadata.PackageNotFoundError:
        return Probe("torch.compile (Triton)", "fail", "triton is not installed: torch.compile has no GPU back end")
    x = torch.randn(4096, device="cuda")
    fn = torch.compile(lambda t: torch.nn.functional.gelu(t) * 2 + 1)
    y = fn(x)
    diff = float((y - (torch.nn.functional.gelu(x) * 2 + 1)).abs().max())
    if diff > 1e-4:
        return Probe("torch.compile (Triton)", "fail", f"compiled output differs from eager by {diff:.3g}")
    return Probe("torch.compile (Triton)", "ok", "Inductor/Triton kernel, matches eager", str(y.device), y.is_cuda,
                 f"triton {triton}", _major(torch.version.cuda))


def tensorflow_xla() -> Probe:
    try:
        import tensorflow as tf
    except ImportError:
        return Probe("TensorFlow + XLA", "skip", "TensorFlow is not installed")
    if not tf.config.list_physical_devices("GPU"):
        return Probe("TensorFlow + XLA", "fail", f"TensorFlow {tf.__version__} sees no GPU")

    a, b = _fp32_operands()
    with tf.device("/GPU:0"):
        c = tf.function(jit_compile=True)(tf.matmul)(tf.constant(a), tf.constant(b))
    err = _rel_err(c.numpy(), a, b)
    info = tf.sysconfig.get_build_info()
    return Probe("TensorFlow + XLA", "ok", "XLA-compiled fp32 matmul", c.device, "GPU" in c.device.upper(),
                 f"tensorflow {tf.__version__}, built for CUDA {info.get('cuda_version')} / cuDNN "
                 f"{info.get('cudnn_version')}", _major(info.get("cuda_version")), tf32_error=err)


def jax_probe() -> Probe:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return Probe("JAX", "skip", "JAX is not installed")

    a, b = _fp32_operands()
    c = jax.jit(jnp.matmul)(a, b)
    device = next(iter(c.devices()))
    err = _rel_err(np.asarray(c), a, b)
    version = getattr(device.client, "platform_version", "")  # e.g. "cuda 12080"
    cuda = re.search(r"cuda\D*(\d+)", str(version).lower())
    major = int(cuda.group(1)) // 1000 if cuda and len(cuda.group(1)) >= 4 else None
    return Probe("JAX", "ok", "jit fp32 matmul", str(device), device.platform in ("gpu", "cuda"),
                 f"jax {jax.__version__}, {version}", major, tf32_error=err)


@functools.cache
def max_ir_version(make=None) -> int:
    """The highest ONNX IR version the installed onnxruntime reads, asked of it once; `make`: for tests."""
    import onnx
    from onnx import helper

    maker = make or __import__("onnxruntime").InferenceSession

    def refusal(ir: int) -> str | None:
        model = helper.make_model(helper.make_graph([], "ir", [], []))
        model.ir_version = ir
        try:
            maker(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - what refused it is read from the message
            return str(exc)
        return None

    named = re.search(r"max supported IR version:\s*(\d+)", refusal(1000) or "")
    return int(named.group(1)) if named else next(
        (ir for ir in range(onnx.IR_VERSION, 3, -1) if refusal(ir) is None), 3)


def _tiny_onnx(max_ir: int | None = None) -> bytes:
    """An 8×8 MatMul at opset 17, stamped with the lower of onnx's IR version and the one onnxruntime reads."""
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 8], [0.5] * 64)
    graph = helper.make_graph([node], "probe", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = min(onnx.IR_VERSION, max_ir if max_ir is not None else max_ir_version())
    return model.SerializeToString()


def ort_session(provider: str, options: dict | None = None, *, make=None, tensorrt=None) -> Probe:
    """A session with `provider` first, its output bound on the GPU; TensorRT not installed is an expected skip."""
    trt = provider.startswith("Tensorrt")
    path = "ONNX Runtime " + ("TensorRT" if trt else "CUDA")
    try:
        import onnxruntime as ort
    except ImportError:
        return Probe(path, "skip", "ONNX Runtime is not installed")
    built = ort.get_available_providers()
    if provider not in built:
        why = "a build without its TensorRT provider" if trt else "the CPU package onnxruntime instead of onnxruntime-gpu?"
        return Probe(path, "skip" if trt else "fail", f"onnxruntime {ort.__version__} has no {provider} ({why})",
                     expected=trt)
    libraries = None
    if trt:
        major = gpu.tensorrt_major(ort.__version__)
        if major is None:
            return Probe(path, "fail", f"which TensorRT major onnxruntime {ort.__version__} links is not known here "
                                       f"(gpu.ORT_TENSORRT_MAJOR)")
        libraries = (tensorrt or gpu.preload_tensorrt)(major)
        if libraries.state == "not installed":
            return Probe(path, "skip", f"{libraries.detail}; ort-tensorrt rows are skipped", expected=True)
        if libraries.state != "loaded":
            return Probe(path, "fail", f"installed but not loadable: {libraries.detail}")
    providers = [(provider, options or {})] + ([] if provider == "CUDAExecutionProvider" else
                                               ["CUDAExecutionProvider"]) + ["CPUExecutionProvider"]
    session = (make or ort.InferenceSession)(_tiny_onnx(), providers=providers)
    used = session.get_providers()
    if used[0] != provider:
        return Probe(path, "fail", f"{provider} is in the build but the session runs on {', '.join(used)} ("
                     + (f"{libraries.detail} loaded, yet the provider did not start" if trt else
                        "its libraries did not load") + ")")

    binding = session.io_binding()
    binding.bind_cpu_input("x", np.ones((4, 8), dtype="float32"))
    binding.bind_output("y", "cuda", 0)
    session.run_with_iobinding(binding)
    out = binding.get_outputs()[0]
    if not np.allclose(out.numpy(), 4.0):
        return Probe(path, "fail", f"wrong output on {provider}")
    device = out.device_name()
    return Probe(path, "ok", f"MatMul on {used[0]}", device, device.lower() == "cuda", f"onnxruntime {ort.__version__}")


def aoti_toolkit(find=None) -> Probe:
    """Whether export-aoti can compile on CUDA here (gpu.cuda_toolkit); without a toolkit an expected skip."""
    home, line = gpu.cuda_toolkit(find)
    if home is None:
        return Probe("export-aoti (CUDA toolkit)", "skip", f"{line}; its rows are skipped", expected=True,
                     on_device=False)
    return Probe("export-aoti (CUDA toolkit)", "ok", line, "n/a (a compile-time toolkit)", on_device=False)


def probes(tf32: bool) -> list[Probe]:
    """Every path's probe, in order; one that raises is that path's failure, never a crash."""
    out = []
    for path, run in (("torch eager", torch_eager), ("torch.compile (Triton)", torch_compile),
                      ("TensorFlow + XLA", tensorflow_xla), ("JAX", jax_probe),
                      ("ONNX Runtime CUDA", lambda: ort_session("CUDAExecutionProvider",
                                                                gpu.ort_cuda_options(gpu.policy(tf32, "cuda")))),
                      ("ONNX Runtime TensorRT", lambda: ort_session("TensorrtExecutionProvider")),
                      ("export-aoti (CUDA toolkit)", aoti_toolkit)):
        try:
            out.append(run())
        except Exception as exc:  # noqa: BLE001 - the table says what failed
            out.append(Probe(path, "fail", said(exc)))
    return out


def loaded_cuda_libraries(maps: str | None = None) -> dict[str, set[str]]:
    """The CUDA libraries this process loaded (/proc/self/maps): library name → its files (two: two copies)."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            return {}
    found: dict[str, set[str]] = {}
    for line in maps.splitlines():
        path = line.split()[-1] if line.split() else ""
        m = re.search(r"/(lib(?:cudnn|cudart|cublas|cublasLt|nvinfer|nvrtc|nvJitLink))\.so[.\d]*$", path)
        if m:
            found.setdefault(m.group(1), set()).add(path)
    return found


def verdict(found: list[Probe], tf32: bool, libraries: dict[str, set[str]] | None = None) -> tuple[int, list[str]]:
    """(exit code, problems): 0 when every path ran on the GPU or skipped as expected, on policy; else 1."""
    problems = []
    for p in found:
        if p.status == "fail":
            problems.append(f"{p.path}: {p.detail}")
        elif p.status == "skip" and not p.expected:
            problems.append(f"{p.path}: skipped: {p.detail}")
        elif p.status == "ok" and p.on_device and not p.on_gpu:
            problems.append(f"{p.path}: its output lies on {p.device or 'an unknown device'}, not the GPU")
        if p.status == "ok" and p.tf32_error is not None and not tf32 and p.tf32_error > TF32_LEVEL:
            problems.append(f"{p.path}: fp32 matmul error {p.tf32_error:.2g} against fp64 is TF32's, and the "
                            f"policy is tf32 off")
    majors = {p.path: p.cuda_major for p in found if p.status == "ok" and p.cuda_major is not None}
    if len(set(majors.values())) > 1:
        problems.append("more than one CUDA major: " + ", ".join(f"{k} {v}" for k, v in majors.items()))
    for name, files in sorted((libraries or {}).items()):
        if len(files) > 1:
            problems.append(f"{len(files)} copies of {name} in one process: {', '.join(sorted(files))}")
    return (1 if problems else 0), problems


def _nvidia_smi() -> str | None:
    """The GPUs nvidia-smi lists (name, driver), or None without one."""
    return "; ".join(environment.nvidia_smi("name,driver_version")) or None


def no_gpu() -> str | None:
    """The one line a machine without a GPU gets, or None where there is one."""
    if _nvidia_smi() is None and gpu.sees_gpu("torch") is not None:
        return "no NVIDIA GPU on this machine (nvidia-smi lists none and PyTorch sees none): nothing to check"
    return None


def lines(found: list[Probe]) -> list[str]:
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
    found = probes(tf32)
    libraries = loaded_cuda_libraries()
    code, problems = verdict(found, tf32, libraries)
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
