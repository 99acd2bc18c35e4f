"""Measure a group of configurations: build, prepare, first call, parity check, then interleaved rounds.

A group is what a study compares: the variants of one shape (or, in the data-set studies, every
runtime, strategy and batch size over the same texts). Its configurations are prepared one by one
(preparation and first call timed on their own), then timed together in rounds (timing.measure_rounds),
so their speed-ups pair round by round. A failure (out of memory, compile or export error, missing
runtime) is a row with its status and message. `replicates` runs groups in separate processes and
`combine`s their rows. What each configuration runs is workloads.py's; which configurations form a group, and
which still need measuring, grouping.py's.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gc
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .. import runtimes
from ..core.config import REFERENCE, Config
from ..machine import allocator, gpu
from ..runtimes.base import synced
from ..runtimes.pytorch import dynamo_counts, reset_compiled
from ..stats.results import MEASURED_COLUMNS, RUN_COLUMNS
from ..workloads import models
from . import surprises, warm
from .builder import Workloads
from .memory import PeakMemory
from .plan import Plan
from .timing import first_call, measure_rounds, row_statistics

# Out-of-memory as PyTorch (CPU, CUDA), TensorFlow and ONNX Runtime word it.
OOM_PATTERNS = ("out of memory", "can't allocate memory", "oom when allocating", "failed to allocate memory")


def classify_failure(exc: BaseException) -> tuple[str, str]:
    """(status, one-line message) for an exception raised while preparing or timing."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    message = f"{type(exc).__name__}: {first}"[:300]
    if isinstance(exc, runtimes.RuntimeUnavailable):
        return "skipped", first[:300]
    text_all = str(exc)
    if isinstance(exc, MemoryError) or any(p in text_all.lower() for p in OOM_PATTERNS) \
            or type(exc).__name__ == "ResourceExhaustedError":
        return "oom", message
    return "error", message


def parity(output: np.ndarray, reference: np.ndarray, rel_tolerance: float) -> dict[str, Any]:
    """Max abs difference to the eager reference, and whether it is within tolerance.

    The allowed difference is rel_tolerance × max(1, max |reference|), so it scales with the output.
    """
    if output.shape != reference.shape:
        return {"max_abs_diff": float("inf"), "parity_tol": None, "parity_ok": False, "label_agreement": None}
    diff = float(np.max(np.abs(output - reference))) if output.size else 0.0
    tol = rel_tolerance * max(1.0, float(np.max(np.abs(reference))) if reference.size else 1.0)
    # For classifier logits, the share of inputs whose predicted label is the reference's (what int8 must keep).
    labels = float(np.mean(output.argmax(-1) == reference.argmax(-1))) if output.ndim == 2 and output.size else None
    return {"max_abs_diff": diff, "parity_tol": tol, "parity_ok": bool(np.isfinite(diff) and diff <= tol),
            "label_agreement": labels}


def base_row(c: Config, plan: Plan, *, group_key: str, group_id: str, commit: str | None = None) -> dict[str, Any]:
    """A row with every column of results.COLUMNS, the measured ones None until measured (so a failed row
    still has them all, and tables and figures never miss a column). `commit`: the code it is measured at
    (default: the plan's environment's)."""
    spec = models.spec(c.model)
    return {
        "study": plan.study, "profile": plan.profile, "config_key": c.key, **asdict(c), "task": spec.kind,
        "group_key": group_key, "group_id": group_id, "settings_hash": plan.settings_hash(c),
        "git_commit": commit or plan.env.get("git_commit"),
        "status": "ok", "error": "", **dict.fromkeys(MEASURED_COLUMNS), **dict.fromkeys(RUN_COLUMNS),
        **plan.row_stamp(),
    }


@dataclass
class _Prepared:
    """A configuration of the group, ready for rounds: its call (sync inside) and what its preparation gave."""

    config: Config
    runtime: runtimes.Runtime
    workload: Any
    prepared: runtimes.Prepared
    call: Callable[[], Any]
    row: dict
    artifacts: bytes | None = None  # its cold compile's cache artifacts, for the next process (warm.py)


def _prepare(c: Config, row: dict, *, runtime: runtimes.Runtime, workloads: Workloads, tolerance: float,
             stack: contextlib.ExitStack, keep_cache: bool = False) -> _Prepared:
    """Prepare one configuration, time its first call alone and check its output against eager PyTorch; with
    `keep_cache`, keep a torch.compile's cache artifacts for the warm compile (warm.py).

    Memory is the configuration's own: the peak while it was prepared and first called, above the
    process's resident size just before (models and variants prepared earlier are not counted).
    """
    missing = gpu.unavailable(c.device, runtime)  # each framework the runtime needs must see the GPU itself
    if missing:
        raise runtimes.RuntimeUnavailable(missing)
    startup_s = runtime.warm_up()  # untimed, once per process
    w = workloads.workload(c, runtime.framework)
    # Eager's own first call gives the reference when it runs first on a shape, so that call stays cold.
    eager_is_reference = c.variant == REFERENCE and not workloads.has_reference(c)
    if not eager_is_reference:
        workloads.reference(c)  # computed now, outside this configuration's memory and timing
    stack.enter_context(runtime.context())  # held while the group is timed
    compiled = _dynamo_counts() if runtime.uses_dynamo else None
    extra = runtime.memory_warmup_calls(c.device)
    with PeakMemory(c.device, allocator_of(runtime)) as mem:
        t0 = time.perf_counter()
        prepared = runtime.prepare(w)
        call = synced(workloads.timed_call(prepared, c, w), prepared.sync)
        row["prepare_s"] = time.perf_counter() - t0
        out, row["first_call_s"] = first_call(workloads.first_call(prepared, c, w, runtime, call))
        if extra:  # a CUDA graph's next call frees this output: copied to the host before it (off the clock)
            out = workloads.as_array(out, runtime, c)
        for _ in range(extra):  # CUDA graphs are recorded in the calls after the first: their pool is counted too
            call()
    array = out if extra else workloads.as_array(out, runtime, c)
    del out
    artifacts = warm.artifacts(runtime, c.variant) if keep_cache else None  # outside the memory window
    if eager_is_reference:
        workloads.set_reference(c, array)
    row.update(parity(array, workloads.reference(c), tolerance))
    if prepared.compilations:
        row["compilations"] = prepared.compilations()
    if compiled is not None:  # what this configuration's cold compile built (first calls run one at a time)
        now = _dynamo_counts()
        row["compilations"] = now["graphs"] - compiled["graphs"]
        row["graph_breaks"] = max(0, now["breaks"] - compiled["breaks"])
        if now.get("cudagraph_skips", 0) > compiled.get("cudagraph_skips", 0):
            prepared.notes = (f"{prepared.notes}; CUDA graphs skipped {now['cudagraph_skips'] - compiled['cudagraph_skips']}"
                              f" time(s) (Inductor's cudagraph_skips: the graph ran without them)").strip("; ")
    if extra:
        prepared.notes = (f"{prepared.notes}; peak memory through {extra} warm-up call(s) after the first "
                          f"(the CUDA graph pool is recorded there)").strip("; ")
    cached_s = sum(s.seconds for s in prepared.steps if s.cached)  # made by an earlier process, paid there
    row.update(runtime_startup_s=startup_s, notes=prepared.notes, prepare_steps=[asdict(s) for s in prepared.steps],
               cold_prepare_s=row["prepare_s"] + cached_s,
               peak_mem_mb=mem.increase_mb, mem_kind=mem.kind)  # on a GPU, the runtime's own framework's memory
    _count_work(row, workloads, c)
    return _Prepared(c, runtime, w, prepared, call, row, artifacts)


def allocator_of(runtime: runtimes.Runtime) -> str:
    """The framework whose GPU allocator a runtime's memory lands in (bench.memory.PeakMemory reads that one)."""
    if runtime.family == "onnxruntime":
        return "onnxruntime"
    if runtime.family == "tensorflow":
        return "tensorflow"
    if runtime.family == "keras":  # its backend's (an A/A copy's: its original's)
        return getattr(getattr(runtime, "original", runtime), "backend", "torch")
    return "torch"


def _count_work(row: dict, workloads: Workloads, c: Config) -> None:
    """The configuration's work per call into its row; after the first call, so that call stays cold. A count
    that fails is a note, never a reason to drop the measurement."""
    try:
        row.update(workloads.work(c))
    except Exception as exc:  # noqa: BLE001
        row["notes"] = f"{row['notes'] or ''}; work per call not counted: {type(exc).__name__}: {exc}".strip("; ")[:500]


def _dynamo_counts() -> dict[str, int]:
    return dynamo_counts()


def _steady_recompilations(ready: list[_Prepared], before: dict[str, int] | None) -> None:
    """Graphs torch.compile built while the group was timed (a recompile in steady state) into the compiled
    rows: exact when none was built or one compiled variant ran; otherwise the count is the group's, noted."""
    if before is None:
        return
    built = _dynamo_counts()["graphs"] - before["graphs"]
    compiled = [p for p in ready if p.runtime.uses_dynamo and p.row["status"] == "ok"]
    for p in compiled:
        if built == 0 or len(compiled) == 1:
            p.row["recompilations"] = built
        else:
            p.row["notes"] = (f"{p.row['notes'] or ''}; {built} graphs compiled during the group's rounds, by one "
                              f"of its {len(compiled)} compiled variants").strip("; ")


def _fail(row: dict, exc: BaseException) -> dict:
    row["status"], row["error"] = classify_failure(exc)
    return row


def release_memory(device: str, *, between_groups: bool = False) -> None:
    """Collect what failed or finished configurations held, then, on a GPU, have each framework loaded in this process
    hand back what it can: torch's cached blocks (empty_cache); an ONNX Runtime session's arena goes with the session
    (collected). Between groups also JAX's compiled executables (clear_caches; its buffers go with their arrays) and
    Keras/TensorFlow's global state (clear_session; TensorFlow's allocator keeps what it grew, which memory growth,
    gpu.process_vars, holds to what was used). Never imports a framework just for this."""
    if device != "cuda":
        return

    gc.collect()
    if "torch" in sys.modules:
        sys.modules["torch"].cuda.empty_cache()
    if not between_groups:  # within a group prepared JAX and TensorFlow functions are still to be timed
        return
    if "jax" in sys.modules and hasattr(sys.modules["jax"], "clear_caches"):
        sys.modules["jax"].clear_caches()
    if "tensorflow" in sys.modules:
        sys.modules["tensorflow"].keras.backend.clear_session()
    gc.collect()


# A CUDA error other than out-of-memory is sticky: the context is lost and every later CUDA call of the process fails.
CUDA_ERROR_PATTERNS = ("cuda error", "cudaerror", "illegal memory access", "device-side assert", "launch failure",
                       "cublas_status", "cudnn_status", "illegal instruction", "cuda_error")


def spoils_process(row: dict) -> bool:
    """Whether a failed row leaves its process unfit to measure further groups: a CUDA error (sticky), or out of
    memory on a GPU (its allocators fragmented or holding what they grew). replicates._worker starts afresh."""
    if row["status"] == "oom":
        return row.get("device") == "cuda"
    return row["status"] == "error" and any(p in str(row.get("error", "")).lower() for p in CUDA_ERROR_PATTERNS)


def measure_group(configs: list[Config], plan: Plan, *, workloads: Workloads, group_key: str, group_id: str,
                  replicate: int, commit: str | None = None) -> list[dict]:
    """Prepare every configuration of a group, then time them together in interleaved rounds.

    Returns one row per configuration for this replicate (never raises for a failed configuration: a
    failure is a row with its status and message). The first configuration is the group's baseline.
    After the rounds, each of the plan's `expectations` that this replicate's paired speed-up contradicts
    has one steady-state call of both its configurations profiled into their rows (surprises.profile_surprises).
    """
    started = time.perf_counter()
    ready: list[_Prepared] = []
    rows: dict[str, dict] = {}
    if any(runtimes.get(c.variant).family == "compile" for c in configs):
        reset_compiled()  # every group compiles cold; variants within it share the (reset) dynamo cache
    with contextlib.ExitStack() as stack:
        lost = ""  # a sticky CUDA error in the group: the configurations after it cannot run in this process
        for c in configs:
            row = base_row(c, plan, group_key=group_key, group_id=group_id, commit=commit)
            rows[c.key] = row
            if lost:
                row.update(status="error", error=f"not measured: {lost}")
                continue
            try:
                ready.append(_prepare(c, row, runtime=runtimes.get(c.variant), workloads=workloads,
                                      tolerance=plan.tolerance(c), stack=stack, keep_cache=plan.warm_compile))
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # a failure is a result
                _fail(row, exc)
            if row["status"] != "ok":
                release_memory(c.device)  # the failed configuration's sessions and buffers, before the next one
                if row["status"] == "error" and spoils_process(row):
                    lost = (f"{c.variant}'s CUDA error before it ({row['error'][:120]}) leaves every later CUDA call "
                            f"of its process failing")
        calls = {p.config.key: p.call for p in ready}
        baseline = configs[0].key if configs[0].key in calls else None
        graphs = _dynamo_counts() if any(p.runtime.uses_dynamo for p in ready) else None
        with allocator.reused_memory():  # no call pays page faults for memory the last one freed
            rounds = measure_rounds(calls, baseline=baseline, seed=plan.seed * 1000 + replicate,
                                    **plan.rounds(len(calls))) if calls else None
        for p in ready:
            row, key = p.row, p.config.key
            if key in rounds.failed:
                _fail(row, rounds.failed.pop(key))  # popped: its traceback holds the call (sessions, buffers)
                continue
            xs = rounds.samples[key]
            row.update(row_statistics(xs), samples_s=xs, sample_rep=[replicate] * len(xs),
                       sample_round=list(range(len(xs))), block_calls=rounds.block[key], replicates=1,
                       warmup_calls=rounds.warmup_calls, stop_reason=rounds.stop_reason)
            if p.prepared.compilations:  # graphs built after the first call: a retrace in steady state
                row["recompilations"] = p.prepared.compilations() - row["compilations"]
            try:
                row.update(workloads.rates(p.config, p.workload, row["median_s"]))
            except Exception as exc:  # noqa: BLE001 - rates never drop a measurement
                row["notes"] = f"{row['notes']}; rates failed: {type(exc).__name__}: {exc}".strip("; ")
        calls.clear()  # the rounds are over; `ready` keeps what the surprises' profiles call
        if any(p.row["status"] != "ok" for p in ready):  # a configuration that failed in the rounds: let go of it
            ready = [p for p in ready if p.row["status"] == "ok"]
            p = None  # the loop's last configuration, possibly a failed one
            release_memory(configs[0].device)
        _steady_recompilations(ready, graphs)
        surprises.profile_surprises(ready, rows, plan.expectations, replicate)  # after the rounds: never in a sample
        if plan.warm_compile:  # after the profiles too: a compile from the cache an earlier process saved
            warm.measure(ready, workloads, plan, parity)
    elapsed = time.perf_counter() - started
    stamp = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    for row in rows.values():
        row.update(wall_s=elapsed / len(rows), timestamp=stamp)
    return [rows[c.key] for c in configs]


def combine(replicate_rows: list[list[dict]]) -> list[dict]:
    """One row per configuration from its rows of every replicate (same group, same order).

    Samples are pooled with their replicate and round ids; statistics are recomputed over all of them
    (the CIs hierarchical). Cold costs (prepare, cold prepare, first call) are the median over replicates (a warm compile's over
    those that had one, warm.combined), memory and parity differences the worst; a configuration that failed in any
    replicate is that failure. A surprise's profile (profile_top_ops, profile_note) is the first replicate's that has
    one.
    """
    out = []
    for reps in zip(*replicate_rows):
        row = dict(reps[0])
        failed = [r for r in reps if r["status"] != "ok"]
        if failed:
            row = {"profile_top_ops": None, "profile_note": None, **dict.fromkeys(warm.WARM_COLUMNS),
                   **failed[0]}  # parts written before profiles, or before the warm compile
            if len(reps) > 1:
                row["error"] = f"{row['error']} (in {len(failed)} of {len(reps)} replicates)"
            out.append(row)
            continue
        xs = [x for r in reps for x in r["samples_s"]]
        rep_ids = [i for r in reps for i in r["sample_rep"]]
        row.update(row_statistics(xs, rep_ids), samples_s=xs, sample_rep=rep_ids,
                   sample_round=[i for r in reps for i in r["sample_round"]], replicates=len(reps),
                   first_call_s=float(np.median([r["first_call_s"] for r in reps])),
                   prepare_s=float(np.median([r["prepare_s"] for r in reps])),
                   cold_prepare_s=float(np.median([r.get("cold_prepare_s") or r["prepare_s"] for r in reps])),
                   wall_s=sum(r["wall_s"] for r in reps), timestamp=reps[-1]["timestamp"],
                   stop_reason=",".join(dict.fromkeys(r["stop_reason"] for r in reps)),
                   git_commit=",".join(dict.fromkeys(str(r["git_commit"]) for r in reps)))
        for key, pick in (("max_abs_diff", max), ("peak_mem_mb", max), ("recompilations", sum),
                          ("compilations", max), ("graph_breaks", max), ("batched_vs_unbatched_max_diff", max)):
            values = [r[key] for r in reps if r.get(key) is not None]
            row[key] = pick(values) if values else None
        row.update(warm.combined(reps))  # the warm compile: replicates 2..k of a fresh cache
        row["parity_ok"] = all(r["parity_ok"] for r in reps)
        profiled = next((r for r in reps if r.get("profile_note")), None)  # the first replicate's profile is kept
        row["profile_top_ops"], row["profile_note"] = ((profiled.get("profile_top_ops"), profiled["profile_note"])
                                                       if profiled else (None, None))
        median = row["median_s"]
        for rate in ("throughput_samples_s", "throughput_tokens_s"):  # rates at the pooled median
            if reps[0].get(rate) is not None:
                row[rate] = reps[0][rate] * reps[0]["median_s"] / median
        out.append(row)
    return out
