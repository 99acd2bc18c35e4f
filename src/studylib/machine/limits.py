"""The machine's limits: a dense matmul's rate per dtype (GFLOP/s) and a STREAM-triad-like kernel's memory
bandwidth (GB/s), each a median over repeated calls with its order-statistic 95% CI, measured with the threads the
profile set, once per environment fingerprint (`cached_peaks`; kept in env.json under "peaks"). The roofline
(roofline.py) and compare read them back with `peak_gflops` and `peak_bandwidth`.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable

import numpy as np

from ..core import stats

METHOD = 1  # bump when the way limits are measured changes: cached limits of another method are re-measured
MIN_SAMPLES = 10  # timed calls per kernel at least (the order-statistic CI needs 6 at 95%)
MAX_SAMPLES = 200
MATMUL_SIZES = {"cpu": (256, 2048), "cuda": (1024, 8192)}  # smallest and largest square size tried
TRIAD_ELEMENTS = {"cpu": 1 << 24, "cuda": 1 << 26}  # fp32 elements per array: far beyond the last-level cache


def budget_s(measure: dict) -> float:
    """Seconds the limits may take: the profile's minimum timing per group (min_time_s), kept within 2–12 s,
    so the smoke profile spends about 2 s and the real profiles about 10 s, once per environment."""
    return float(min(12.0, max(2.0, measure.get("min_time_s", 0.0))))


def _timed_calls(fn: Callable[[], object], sync: Callable[[], object], budget: float) -> np.ndarray:
    """Seconds per call of `fn` (device wait inside the timed region), for `budget` seconds and at least
    MIN_SAMPLES calls, after one untimed call."""
    fn()
    sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < MAX_SAMPLES and (len(times) < MIN_SAMPLES or time.perf_counter() - start < budget):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return np.asarray(times)


def _rate(times: np.ndarray, work: float, unit: float) -> dict:
    """Median rate (work per second, in `unit`s) with its 95% CI, from per-call seconds."""
    rates = work / times / unit
    lo, hi, _ = stats.order_stat_ci(rates)
    return {"median": float(np.median(rates)), "ci_low": lo, "ci_high": hi, "n": len(rates)}


def _matmul(dtype: str, device: str):
    """(make(n) → call, kernel name) for a square n × n product in `dtype`; None where there is none."""
    import torch

    if dtype == "int8" and device == "cpu":
        # What torch-int8 runs: a dynamically quantized Linear (fbgemm / onednn), activations quantized per call.
        def make(n):
            import warnings

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
        # A Linear layer's product (x @ wᵀ), the models' dense kernel: on CPUs without native bf16, torch.mm
        # in bf16 takes a path ten times slower than the oneDNN one F.linear takes.
        x, w = (torch.randn(n, n, device=device).to(torch_dtype) for _ in range(2))
        return lambda: torch.nn.functional.linear(x, w)

    return make, "F.linear"


def _sized(make, sync, device: str, target_s: float):
    """The largest power-of-two size (within MATMUL_SIZES) whose call should take about `target_s` or less:
    doubled while eight times the last call's time (a doubling's cost) stays within it. (n, call)."""
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
    """Memory bandwidth (GB/s) with its CI: a = b + 2·c over fp32 arrays far larger than the caches
    (two arrays read, one written per call)."""
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


def measure_peaks(device: str = "cpu", *, budget: float = 2.0) -> dict:
    """The machine's limits with the threads now set: matmul rate per dtype and triad bandwidth, each with
    its 95% CI, within about `budget` seconds in all (shared evenly by the kernels)."""
    import torch

    started = time.perf_counter()
    dtypes = peak_dtypes(device)
    share = budget / (len(dtypes) + 1)
    matmul = {}
    for dtype in dtypes:
        try:
            matmul[dtype] = matmul_peak(dtype, device, share)
        except Exception as exc:  # noqa: BLE001 - a kernel the build lacks is recorded, not fatal
            matmul[dtype] = {"skipped": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
    return {"method": METHOD, "device": device, "threads": torch.get_num_threads(),
            "tf32": bool(device == "cuda" and torch.backends.cuda.matmul.allow_tf32),
            "measured_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "matmul": matmul,
            "bandwidth": triad_bandwidth(device, share), "seconds": time.perf_counter() - started}


def cached_peaks(env: dict, previous: dict | None, *, device: str, budget: float) -> dict:
    """The limits for `env`: `previous` env.json's when it is the same environment (fingerprint), device,
    threads and method — a resumed run does not measure them again — else measured now."""
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
    parts = []
    for dtype, m in peaks["matmul"].items():
        if "skipped" in m:
            parts.append(f"{dtype} matmul skipped ({m['skipped']})")
        else:
            unit = "GOP/s" if dtype == "int8" else "GFLOP/s"
            parts.append(f"{dtype} matmul {m['gflops']:,.1f} {unit} (95% CI {m['ci_low']:,.1f}–{m['ci_high']:,.1f}; "
                         f"{m['size']}², {m['kernel']})")
    bw = peaks["bandwidth"]
    parts.append(f"memory bandwidth {bw['gbs']:,.1f} GB/s (95% CI {bw['ci_low']:,.1f}–{bw['ci_high']:,.1f}; "
                 f"{bw['kernel']}, {bw['bytes'] / 1e6:,.0f} MB per call)")
    return (" · ".join(parts) + f" — {peaks['threads']} threads, measured in {peaks['seconds']:.1f} s at "
            f"{peaks['measured_at']}")


def peak_gflops(peaks: dict | None, key: str) -> float | None:
    """The measured matmul rate for `key` (a dtype, or int8), or None where it was not measured."""
    m = ((peaks or {}).get("matmul") or {}).get(key) or {}
    return m.get("gflops")


def peak_bandwidth(peaks: dict | None) -> float | None:
    """The measured memory bandwidth (GB/s), or None where it was not measured."""
    return ((peaks or {}).get("bandwidth") or {}).get("gbs")
