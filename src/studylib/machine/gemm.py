"""Every library's GEMM throughput, each in its own process, into peaks["gemm"]; a failure is a record too."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..core import numbers, wording
from .gemm_child import CHILDREN, DTYPES, MARK, shapes

# The instruction sets that decide a GEMM's code path (/proc/cpuinfo's names), in the order they are shown.
ISA_FLAGS = ("avx", "fma", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
             "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")
LIBRARIES = tuple(CHILDREN)  # one process each
MODULES = {"torch": "torch", "tensorflow": "tensorflow", "onnxruntime": "onnxruntime", "jax": "jax"}
START_UP_S = 120.0  # on top of 20 × the budget: a process that takes longer is stopped and recorded as such

Runner = Callable[[str, int, float], dict]  # (library, threads, budget_s) -> {runner key: record}


def _cpuinfo_line(prefixes: tuple[str, ...], cpuinfo: str | None) -> str | None:
    """The value of /proc/cpuinfo's first line starting with one of `prefixes` (of `cpuinfo` where given)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    line = next((ln for ln in cpuinfo.splitlines() if ln.startswith(prefixes)), None)
    return line.split(":", 1)[-1] if line is not None else None


def cpu_flags(cpuinfo: str | None = None) -> list[str]:
    """The ISA_FLAGS the CPU has (the first processor's flags); [] where they cannot be read."""
    have = set((_cpuinfo_line(("flags", "Features"), cpuinfo) or "").split())
    return [f for f in ISA_FLAGS if f in have]


def cpu_model(cpuinfo: str | None = None) -> str | None:
    """The CPU's model name in /proc/cpuinfo, or None."""
    line = _cpuinfo_line(("model name",), cpuinfo)
    return line.strip() if line is not None else None


def child_env(threads: int) -> dict[str, str]:
    """The environment of a library's process: apply_threads' thread settings, studylib importable."""
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _status(status: str, message: str) -> dict:
    return {"status": status, "message": message[:300]}


def run_child(library: str, threads: int, budget: float) -> dict:
    """Measure `library` in a process of its own (gemm_child): {runner key: record}."""
    if importlib.util.find_spec(MODULES[library]) is None:
        return {key: _status("not installed", f"{MODULES[library]} is not installed") for key in CHILDREN[library]}
    try:
        done = subprocess.run([sys.executable, "-m", "studylib.machine.gemm_child", library, str(threads),
                               f"{budget:.3f}"], capture_output=True, text=True, env=child_env(threads),
                              timeout=START_UP_S + 20 * budget)
    except subprocess.TimeoutExpired:
        return {key: _status("timeout", f"stopped after {START_UP_S + 20 * budget:.0f} s")
                for key in CHILDREN[library]}
    found = [ln for ln in done.stdout.splitlines() if ln.startswith(MARK)]
    if done.returncode == 0 and found:
        return json.loads(found[-1][len(MARK):])
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {key: _status("failed", f"exit {done.returncode}: {last}") for key in CHILDREN[library]}


def measure_libraries(threads: int, budget: float, *, runner: Runner = run_child,
                      libraries: tuple[str, ...] = LIBRARIES) -> dict:
    """Every library's GEMM record in `budget` seconds of timing: {..., "libraries": {runner key: record}}."""
    started = time.perf_counter()
    records: dict[str, dict] = {}
    for library in libraries:
        try:
            records.update(runner(library, threads, budget / len(libraries)))
        except Exception as exc:  # noqa: BLE001 - a runner that breaks is a result too
            records.update({key: _status("failed", f"{type(exc).__name__}: {exc}") for key in CHILDREN[library]})
    return {"cpu_model": cpu_model(), "cpu_flags": cpu_flags(), "threads": threads, "dtypes": list(DTYPES),
            "shapes": shapes(), "libraries": records, "seconds": time.perf_counter() - started}


def best_rates(gemm: dict | None, dtype: str) -> list[dict]:
    """Every measured rate of `dtype` in the record: [{"runner", "library", "shape", "gflops", "ci_low", "ci_high"}]."""
    out = []
    for key, record in ((gemm or {}).get("libraries") or {}).items():
        for shape, cell in ((record.get("rates") or {}).get(dtype) or {}).items():
            if isinstance(cell.get("gflops"), (int, float)):
                out.append({"runner": key, "library": record.get("library", key), "shape": shape,
                            "gflops": cell["gflops"], "ci_low": cell.get("ci_low"), "ci_high": cell.get("ci_high")})
    return out


def describe(gemm: dict | None) -> str:
    """Each library's best GEMM rate per dtype in one line, for the environment table."""
    if not gemm:
        return "GEMM per library not measured"
    return wording.macro("machine/limits.txt", "gemm", gemm.get("libraries") or {}, gemm.get("dtypes", DTYPES),
                         ", ".join(gemm.get("cpu_flags") or []))


# ----------------------------------------------------------------------- two libraries at the studies' shapes

GAP_RATIO = 1.3  # two libraries' GEMMs further apart than this explain a framework's gap (machine/gemm_why.py)


def _gemm(peaks: dict | None) -> dict:
    return (peaks or {}).get("gemm") or {}


def study_shapes(peaks: dict | None) -> list[str]:
    """The record's compute-bound study shapes (BERT-base's linear layers at the most tokens)."""
    return [key for key, s in (_gemm(peaks).get("shapes") or {}).items() if s.get("studies")]


def study_cells(peaks: dict | None, runner: str, dtype: str) -> dict[str, dict]:
    """`runner`'s measured cells of `dtype` by shape ({} where it did not run)."""
    record = (_gemm(peaks).get("libraries") or {}).get(runner) or {}
    rates = ((record.get("rates") or {}).get(dtype) or {}) if record.get("status") == "ok" else {}
    return {k: c for k, c in rates.items() if isinstance(c.get("gflops"), (int, float)) and c["gflops"] > 0}


def study_rates(peaks: dict | None, runner: str, dtype: str) -> list[float]:
    """`runner`'s GFLOP/s at each compute-bound study shape it measured."""
    cells = study_cells(peaks, runner, dtype)
    return [cells[k]["gflops"] for k in study_shapes(peaks) if k in cells]


def gemm_ratio(peaks: dict | None, a: str, b: str, dtype: str = "fp32") -> float | None:
    """`a`'s GEMM over `b`'s, geometric mean at the compute-bound study shapes both measured; None if none."""
    ca, cb = study_cells(peaks, a, dtype), study_cells(peaks, b, dtype)
    common = [k for k in study_shapes(peaks) if k in ca and k in cb]
    if not common:
        return None
    return math.exp(sum(math.log(ca[k]["gflops"] / cb[k]["gflops"]) for k in common) / len(common))


def rate_span(values: list[float]) -> str:
    """'1,200' or '1,100–1,300' (GFLOP/s)."""
    return numbers.fmt_range(min(values), max(values), ",.0f")
