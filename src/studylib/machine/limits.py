"""The machine's limits (matmul, GEMMs, bandwidth), measured once per environment into env.json's "peaks"."""

from __future__ import annotations

import datetime as _dt
import time
import warnings

from ..core import wording
from ..core.errors import said
from . import gemm
from .rates import MIN_SAMPLES
from .rates import rate as _rate
from .rates import timed_calls as _timed_calls

METHOD = 3  # bump when the way limits are measured changes: cached limits of another method are re-measured
MATMUL_SIZES = {"cpu": (256, 2048), "cuda": (1024, 8192)}  # smallest and largest square size tried
TRIAD_ELEMENTS = {"cpu": 1 << 24, "cuda": 1 << 26}  # fp32 elements per array: far beyond the last-level cache


def budget_s(measure: dict) -> float:
    """Seconds the limits may take: the profile's min_time_s, kept within 2–12 s."""
    return float(min(12.0, max(2.0, measure.get("min_time_s", 0.0))))


def _matmul(dtype: str, device: str):
    """(make(n) → call, kernel name) for a square n × n product in `dtype`; None where there is none."""
    import torch

    if dtype == "int8" and device == "cpu":
        # what torch-int8 runs: a dynamically quantized Linear, activations quantized per call
        def make(n):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                layer = torch.ao.nn.quantized.dynamic.Linear(n, n, bias_=False)
            x = torch.randn(n, n)
            return lambda: layer(x)

        return make, f"dynamic int8 Linear ({torch.backends.quantized.engine})"
    if dtype == "int8":
        def make(n):
            a = torch.randint(-128, 127, (n, n), dtype=torch.int8, device=device)
            b = torch.randint(-128, 127, (n, n), dtype=torch.int8, device=device)
            return lambda: torch._int_mm(a, b)

        return make, "torch._int_mm"
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]

    def make(n):
        # a Linear layer's product, the models' dense kernel (torch.mm in bf16 can be ten times slower)
        x, w = (torch.randn(n, n, device=device).to(torch_dtype) for _ in range(2))
        return lambda: torch.nn.functional.linear(x, w)

    return make, "F.linear"


def _sized(make, sync, device: str, target_s: float):
    """(n, call): the largest power-of-two size within MATMUL_SIZES whose call takes about `target_s` or less."""
    n, largest = MATMUL_SIZES[device]
    while True:
        call = make(n)
        if n >= largest or _one_call(call, sync) * 8 > target_s:
            return n, call
        n *= 2


def _one_call(call, sync) -> float:
    """Seconds of one warm call."""
    call()
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    return time.perf_counter() - t0


def matmul_peak(dtype: str, device: str, budget: float) -> dict:
    """Dense matmul rate of `dtype` (GFLOP/s, int8: GOP/s) with its CI, sized to the budget."""
    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    make, kernel = _matmul(dtype, device)
    n, call = _sized(make, sync, device, budget / MIN_SAMPLES)
    rate = _rate(_timed_calls(call, sync, budget), 2.0 * n ** 3, 1e9)
    return {"gflops": rate.pop("median"), **rate, "size": n, "kernel": kernel}


def triad_bandwidth(device: str, budget: float) -> dict:
    """Memory bandwidth (GB/s) with its CI: a = b + 2·c over fp32 arrays far larger than the caches."""
    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    n = TRIAD_ELEMENTS[device]
    a, b, c = torch.empty(n, device=device), torch.rand(n, device=device), torch.rand(n, device=device)
    moved = 3 * n * a.element_size()
    rate = _rate(_timed_calls(lambda: torch.add(b, c, alpha=2.0, out=a), sync, budget), moved, 1e9)
    return {"gbs": rate.pop("median"), **rate, "bytes": moved, "kernel": "triad a = b + 2c (fp32)"}


def peak_dtypes(device: str) -> tuple[str, ...]:
    """The dtypes whose matmul rate is measured: those the studies run on the device, and int8."""
    return ("fp32", "fp16", "bf16", "int8") if device == "cuda" else ("fp32", "bf16", "int8")


def measure_peaks(device: str = "cpu", *, budget: float = 2.0, gemm_runner: gemm.Runner | None = None) -> dict:
    """The machine's limits with the threads now set, in about `budget` seconds; on a CPU every library's GEMMs too."""
    import torch

    started = time.perf_counter()
    dtypes = peak_dtypes(device)
    share = budget / (len(dtypes) + 1)
    matmul = {}
    for dtype in dtypes:
        try:
            matmul[dtype] = matmul_peak(dtype, device, share)
        except Exception as exc:  # noqa: BLE001 - a kernel the build lacks is recorded, not fatal
            matmul[dtype] = {"skipped": said(exc)}
    return {"method": METHOD, "device": device, "threads": torch.get_num_threads(),
            "tf32": bool(device == "cuda" and torch.backends.cuda.matmul.allow_tf32),
            "measured_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "matmul": matmul,
            "bandwidth": triad_bandwidth(device, share),
            **({"gemm": gemm.measure_libraries(torch.get_num_threads(), budget, runner=gemm_runner or gemm.run_child)}
               if device == "cpu" else {}),
            "seconds": time.perf_counter() - started}


def cached_peaks(env: dict, previous: dict | None, *, device: str, budget: float) -> dict:
    """`previous` env.json's limits where environment, device, threads and method are the same, else measured now."""
    import torch

    old = (previous or {}).get("peaks") or {}
    if ((previous or {}).get("fingerprint") == env["fingerprint"] and old.get("method") == METHOD
            and old.get("device") == device and old.get("threads") == torch.get_num_threads()):
        return old
    return measure_peaks(device, budget=budget)


def describe_peaks(peaks: dict | None) -> str:
    """The limits in one line, for the environment table."""
    if not peaks:
        return "not measured"
    roofs = [(dtype, best) for dtype in ("fp32", "bf16") if (best := roof(peaks, dtype))]
    return wording.macro("machine/limits.txt", "peaks", peaks["matmul"], roofs,
                         gemm.describe(peaks["gemm"]) if "gemm" in peaks else "", peaks["bandwidth"], peaks["threads"],
                         peaks["seconds"], peaks["measured_at"])


def roof(peaks: dict | None, key: str) -> dict | None:
    """The best rate measured for `key` (a dtype): the square matmul's or any library's GEMM; None where none."""
    found = gemm.best_rates((peaks or {}).get("gemm"), key)
    m = ((peaks or {}).get("matmul") or {}).get(key) or {}
    if isinstance(m.get("gflops"), (int, float)):
        found.append({"runner": "torch", "library": "PyTorch", "shape": "x".join([str(m.get("size"))] * 3), "gflops": m["gflops"],
                      "ci_low": m.get("ci_low"), "ci_high": m.get("ci_high")})
    return max(found, key=lambda r: r["gflops"], default=None)


def matmul_gflops(peaks: dict | None, key: str) -> float | None:
    """PyTorch's square matmul rate for `key` alone (the same in every METHOD), to compare two runs' machines."""
    return (((peaks or {}).get("matmul") or {}).get(key) or {}).get("gflops")


def peak_gflops(peaks: dict | None, key: str) -> float | None:
    """The roof for `key`: the best matmul rate any library reached (`roof`), or None."""
    best = roof(peaks, key)
    return best["gflops"] if best else None


def peak_bandwidth(peaks: dict | None) -> float | None:
    """The measured memory bandwidth (GB/s), or None where it was not measured."""
    return ((peaks or {}).get("bandwidth") or {}).get("gbs")
