"""Profiling one steady-state call: its top operators by self time (TensorFlow and JAX: not profiled)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..core import wording
from .threads import PROFILER_NOISE, filtered_stderr

TOP = 10  # operators kept per profiled call


def top_ops(totals: dict[str, list[float]], top: int = TOP) -> list[dict]:
    """{op: [self seconds, calls]} → the `top` operators by self time, as rows store them."""
    whole = sum(v[0] for v in totals.values())
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]
    return [{"op": op, "self_ms": 1e3 * s, "calls": int(n), "self_pct": 100 * s / whole if whole > 0 else 0.0}
            for op, (s, n) in ranked]


def torch_profile(call: Callable[[], Any], device: str = "cpu", top: int = TOP, family: str = "") -> tuple[list[dict], str]:
    """One call under torch.profiler: its `top` operators by self time (device time on a GPU), and a note."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with filtered_stderr(PROFILER_NOISE), profile(activities=activities) as prof:  # its start/stop markers kept out
        t0 = time.perf_counter()
        call()
        wall = time.perf_counter() - t0
    totals: dict[str, list[float]] = {}
    for ev in prof.key_averages():
        if ev.key.startswith("[memory]"):
            continue
        us = ev.self_device_time_total if cuda else ev.self_cpu_time_total
        if us > 0:
            totals[ev.key] = [us / 1e6, ev.count]
    ops = top_ops(totals, top)
    # torch.compile, and AOTInductor's package (the same Inductor ahead of time)
    return ops, wording.macro("machine/profiling.txt", "torch", cuda, wall * 1e3,
                              sum(v[0] for v in totals.values()) * 1e3, len(totals), len(ops),
                              family in ("compile", "export"))


def profile_prepared(runtime, prepared, call: Callable[[], Any], device: str, top: int = TOP) -> tuple[list[dict] | None, str]:
    """Profile one steady-state call of a prepared configuration; (None, why) where it cannot be profiled."""
    if prepared.profile is not None:
        return prepared.profile(call, top)
    backend = getattr(runtime, "backend", None)  # Keras runtimes (study 05)
    if runtime.framework == "torch" or backend == "torch":
        return torch_profile(call, device, top, "compile" if runtime.uses_dynamo else runtime.family)
    return None, wording.macro("machine/profiling.txt", "not_profiled", "jax" if backend == "jax" else "tensorflow")
