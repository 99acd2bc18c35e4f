"""Measure a group: prepare each configuration, then time them together in rounds; a failure is a row."""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import gc
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .. import runtimes
from ..core.config import REFERENCE, Config
from ..core.errors import first_line, said
from ..machine import allocator, gpu
from ..runtimes.base import REFERENCE_PROCESS, synced
from ..runtimes.pytorch import dynamo_counts, reset_compiled
from ..stats.measurement import MEASURED_COLUMNS, RUN_COLUMNS
from ..workloads import models
from . import memory, surprises, warm
from .builder import Workloads
from .memory import PeakMemory
from .plan import Plan
from .timing import first_call, row_statistics, run_rounds, time_block

# Out-of-memory as PyTorch (CPU, CUDA), TensorFlow and ONNX Runtime word it.
OOM_PATTERNS = ("out of memory", "can't allocate memory", "oom when allocating", "failed to allocate memory")
# A CUDA error other than out-of-memory is sticky: the context is lost and every later CUDA call of the process fails.
CUDA_ERROR_PATTERNS = ("cuda error", "cudaerror", "illegal memory access", "device-side assert", "launch failure",
                       "cublas_status", "cudnn_status", "illegal instruction", "cuda_error")


class RemoteFailure(Exception):
    """A failure in a worker process, as classify_failure worded it there."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message

    def __reduce__(self):
        return RemoteFailure, (self.status, self.message)


def classify_failure(exc: BaseException) -> tuple[str, str]:
    """(status, one-line message) for an exception raised while preparing or timing."""
    if isinstance(exc, RemoteFailure):
        return exc.status, exc.message
    message = said(exc)
    if isinstance(exc, runtimes.RuntimeUnavailable):
        return "skipped", first_line(exc)
    if isinstance(exc, MemoryError) or any(p in str(exc).lower() for p in OOM_PATTERNS) \
            or type(exc).__name__ == "ResourceExhaustedError":
        return "oom", message
    return "error", message


def _fail(row: dict, exc: BaseException) -> dict:
    row["status"], row["error"] = classify_failure(exc)
    return row


def _noted(notes: str | None, note: str) -> str:
    return f"{notes or ''}; {note}".strip("; ")


def spoils_process(row: dict) -> bool:
    """Whether a failed row leaves its process unfit for further groups: a CUDA error, or out of memory on a GPU."""
    if row["status"] == "oom":
        return row.get("device") == "cuda"
    return row["status"] == "error" and any(p in str(row.get("error", "")).lower() for p in CUDA_ERROR_PATTERNS)


def parity(output: np.ndarray, reference: np.ndarray, rel_tolerance: float) -> dict[str, Any]:
    """Max abs difference, within rel_tolerance × max(1, max |reference|) or not, and logits' label agreement."""
    if output.shape != reference.shape:
        return {"max_abs_diff": float("inf"), "parity_tol": None, "parity_ok": False, "label_agreement": None}
    diff = float(np.max(np.abs(output - reference))) if output.size else 0.0
    tol = rel_tolerance * max(1.0, float(np.max(np.abs(reference))) if reference.size else 1.0)
    labels = float(np.mean(output.argmax(-1) == reference.argmax(-1))) if output.ndim == 2 and output.size else None
    return {"max_abs_diff": diff, "parity_tol": tol, "parity_ok": bool(np.isfinite(diff) and diff <= tol),
            "label_agreement": labels}


def base_row(c: Config, plan: Plan, *, group_key: str, group_id: str, commit: str | None = None) -> dict[str, Any]:
    """A row with every column of results.COLUMNS, the measured ones None; `commit` defaults to the plan's."""
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
    """Prepare one configuration: first call timed alone, parity checked, memory recorded; `keep_cache`: for warm.py."""
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
    compiled = dynamo_counts() if runtime.uses_dynamo else None
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
        now = dynamo_counts()
        row["compilations"] = now["graphs"] - compiled["graphs"]
        row["graph_breaks"] = max(0, now["breaks"] - compiled["breaks"])
        if now.get("cudagraph_skips", 0) > compiled.get("cudagraph_skips", 0):
            prepared.notes = _noted(prepared.notes, f"CUDA graphs skipped "
                                    f"{now['cudagraph_skips'] - compiled['cudagraph_skips']} time(s) (Inductor's "
                                    f"cudagraph_skips: the graph ran without them)")
    if extra:
        prepared.notes = _noted(prepared.notes, f"peak memory through {extra} warm-up call(s) after the first "
                                                f"(the CUDA graph pool is recorded there)")
    cached_s = sum(s.seconds for s in prepared.steps if s.cached)  # made by an earlier process, paid there
    row.update(runtime_startup_s=startup_s, notes=prepared.notes, prepare_steps=[asdict(s) for s in prepared.steps],
               cold_prepare_s=row["prepare_s"] + cached_s, mem_kind=mem.kind,  # on a GPU, the runtime's own memory
               peak_mem_mb=_with_weights(mem.increase_mb, runtime, w, row))
    try:  # after the first call, so that call stays cold; a count that fails is a note
        row.update(workloads.work(c))
    except Exception as exc:  # noqa: BLE001
        row["notes"] = _noted(row["notes"], f"work per call not counted: {type(exc).__name__}: {exc}")[:500]
    return _Prepared(c, runtime, w, prepared, call, row, artifacts)


def _with_weights(increase_mb: float | None, runtime: runtimes.Runtime, w, row: dict) -> float | None:
    """The peak memory with the weights it runs on (added where the preparation did not copy them), or a note."""
    if increase_mb is None or runtime.copies_weights_of(w):
        return increase_mb
    weights = memory.weights_mb(getattr(w, "lm", None) or w.module)
    if weights is None:
        row["notes"] = _noted(row["notes"], "peak memory without the model's weights (not countable)")
        return increase_mb
    return increase_mb + weights


def allocator_of(runtime: runtimes.Runtime) -> str:
    """The framework whose GPU allocator a runtime's memory lands in (memory.PeakMemory reads that one)."""
    if runtime.family == "keras":  # its backend's (an A/A copy's: its original's)
        return getattr(getattr(runtime, "original", runtime), "backend", "torch")
    return runtime.family if runtime.family in ("onnxruntime", "tensorflow") else "torch"


def release_memory(device: str, *, between_groups: bool = False) -> None:
    """On a GPU: collect and empty torch's cache; between groups also JAX's and Keras' caches (imports nothing)."""
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


class Worker:
    """One framework's process for a group; a call that changes rows takes them and returns them updated."""

    def __init__(self, plan: Plan, workloads: Workloads):
        self.plan, self.workloads = plan, workloads
        self.ready: dict[str, _Prepared] = {}
        self.stack: contextlib.ExitStack | None = None
        self._graphs: dict[str, int] | None = None
        self._rounds: contextlib.ExitStack | None = None
        self.device = "cpu"

    def begin_group(self, configs: list[Config]) -> None:
        self.end_group(between_groups=False)  # what an interrupted group left
        self.stack = contextlib.ExitStack()
        self.device = configs[0].device if configs else "cpu"
        if any(runtimes.get(c.variant).family == "compile" for c in configs):
            reset_compiled()  # every group compiles cold; variants within it share the (reset) dynamo cache

    def has_reference(self, c: Config) -> bool:
        return self.workloads.has_reference(c)

    def reference(self, c: Config) -> np.ndarray:
        return self.workloads.reference(c)

    def set_reference(self, c: Config, output: np.ndarray) -> None:
        self.workloads.set_reference(c, output)

    def prepare(self, c: Config, row: dict) -> dict:
        """Prepare `c` (`_prepare`), its failure a row whose memory is handed back."""
        try:
            self.ready[c.key] = _prepare(c, row, runtime=runtimes.get(c.variant), workloads=self.workloads,
                                         tolerance=self.plan.tolerance(c), stack=self.stack,
                                         keep_cache=self.plan.warm_compile)
        except Exception as exc:  # a failure is a result
            _fail(row, exc)
        if row["status"] != "ok":
            self.ready.pop(c.key, None)
            try:  # the failed configuration's sessions and buffers, before the next one
                release_memory(c.device)
            except Exception as exc:  # noqa: BLE001 - a sticky CUDA error: a note on the row that already failed
                row["error"] = f"{row['error']}; memory not released: {type(exc).__name__}: {exc}"[:500]
        return row

    def block(self, key: str, calls: int) -> float:
        seconds = time_block(self.ready[key].call, calls, time.perf_counter)
        if self._rounds is not None:
            gc.collect(0)  # young objects collected between blocks, never inside one
        return seconds

    def begin_rounds(self) -> None:
        """Until `end_rounds`: the collector off, freed memory kept for reuse (allocator.py); dynamo's graphs noted."""
        self._graphs = dynamo_counts() if any(p.runtime.uses_dynamo for p in self.ready.values()) else None
        self._rounds = contextlib.ExitStack()
        self._rounds.enter_context(allocator.reused_memory())
        if gc.isenabled():
            gc.collect()
            gc.disable()
            self._rounds.callback(gc.enable)

    def end_rounds(self) -> None:
        if self._rounds is not None:
            self._rounds.close()
            self._rounds = None

    def drop(self, key: str) -> None:
        """Let go of a configuration that failed in the rounds (its sessions and buffers)."""
        p = self.ready.pop(key, None)
        if p is not None:
            device = p.config.device
            del p
            release_memory(device)

    def _take(self, rows: dict[str, dict]) -> list[_Prepared]:
        for key, row in rows.items():
            self.ready[key].row = row
        return [self.ready[key] for key in rows]

    def after_rounds(self, rows: dict[str, dict]) -> dict[str, dict]:
        """The rates at each timed configuration's median, and the graphs compiled in steady state (or a note)."""
        ready = self._take(rows)
        for p in ready:
            row = p.row
            if p.prepared.compilations:  # graphs built after the first call: a retrace in steady state
                row["recompilations"] = p.prepared.compilations() - row["compilations"]
            try:
                row.update(self.workloads.rates(p.config, p.workload, row["median_s"]))
            except Exception as exc:  # noqa: BLE001 - rates never drop a measurement
                row["notes"] = _noted(row["notes"], f"rates failed: {type(exc).__name__}: {exc}")
        if self._graphs is not None:
            built = dynamo_counts()["graphs"] - self._graphs["graphs"]
            compiled = [p for p in ready if p.runtime.uses_dynamo and p.row["status"] == "ok"]
            for p in compiled:
                if built == 0 or len(compiled) == 1:
                    p.row["recompilations"] = built
                else:
                    p.row["notes"] = _noted(p.row["notes"], f"{built} graphs compiled during the group's rounds, "
                                                            f"by one of its {len(compiled)} compiled variants")
        return rows

    def profile(self, key: str, why: list[str], replicate: int) -> dict:
        return surprises.profile(self.ready[key], why, replicate)

    def warm(self, rows: dict[str, dict]) -> dict[str, dict]:
        warm.measure(self._take(rows), self.workloads, self.plan, parity)
        return rows

    def end_group(self, between_groups: bool = True) -> None:
        self.end_rounds()
        self.ready.clear()
        if self.stack is not None:
            self.stack.close()
            self.stack = None
            release_memory(self.device, between_groups=between_groups)

    close = end_group


def process_of(c: Config) -> str:
    """The worker process a configuration is measured in (its runtime's `process`)."""
    return runtimes.get(c.variant).process


class LocalPool:
    """Every framework's worker in this process, one `Worker` for all (tests, debugging, `in_process` runs)."""

    separate = False

    def __init__(self, plan: Plan, workloads: Workloads):
        self._worker = Worker(plan, workloads)

    def get(self, name: str) -> Worker:
        return self._worker

    def settings(self, name: str) -> str:
        return "this process (in-process run: every framework shares it)"

    def close(self) -> None:
        self._worker.close()


def measure_group(configs: list[Config], plan: Plan, *, workloads: Workloads, group_key: str, group_id: str,
                  replicate: int, commit: str | None = None, pool=None) -> list[dict]:
    """One row per configuration of a group for this replicate (never raises); the first is the baseline."""
    own = pool is None
    pool = pool or LocalPool(plan, workloads)
    started = time.perf_counter()
    rows = {c.key: base_row(c, plan, group_key=group_key, group_id=group_id, commit=commit) for c in configs}
    worker = _begin(pool, configs, rows)
    try:
        lost: dict[str, str] = {}  # a sticky CUDA error in a worker: its configurations after it cannot run there
        for c in configs:
            row, n = rows[c.key], process_of(c)
            if row["status"] != "ok":  # its worker could not start
                continue
            if n in lost:
                row.update(status="error", error=f"not measured: {lost[n]}")
                continue
            try:
                _hand_reference(pool, n, c, workloads)
                rows[c.key] = row = worker[c.key].prepare(c, row)
            except Exception as exc:  # the worker itself failed (its process died): a result
                _fail(row, exc)
            if row["status"] == "error" and spoils_process(row):
                lost[n] = (f"{c.variant}'s CUDA error before it ({row['error'][:120]}) leaves every later CUDA call "
                           f"of its process failing")
        ready = [c for c in configs if rows[c.key]["status"] == "ok"]
        _time(worker, ready, rows, plan, replicate, baseline=configs[0].key)
        _after(worker, ready, rows, plan, replicate)
    finally:
        for w in _distinct(worker.values()):
            with contextlib.suppress(Exception):
                w.end_group()
        if own:
            pool.close()
    elapsed = time.perf_counter() - started
    stamp = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    for row in rows.values():
        row.update(wall_s=elapsed / len(rows), timestamp=stamp)
    return [rows[c.key] for c in configs]


def _distinct(ws) -> list:
    """Each worker once (a LocalPool gives one for every framework)."""
    return list({id(w): w for w in ws}.values())


def _begin(pool, configs: list[Config], rows: dict[str, dict]) -> dict:
    """Each configuration's worker, started side by side; a worker that cannot start fails its configurations' rows."""
    worker = {}
    for c in configs:  # every worker started before any is waited for
        try:
            worker[c.key] = pool.get(process_of(c))
        except Exception as exc:  # noqa: BLE001 - every configuration of that worker is a failed row
            _fail(rows[c.key], exc)
    for c in [c for c in configs if c.key in worker]:
        try:
            rows[c.key]["process"] = pool.settings(process_of(c))
        except Exception as exc:  # noqa: BLE001
            worker.pop(c.key)
            _fail(rows[c.key], exc)
    for w in _distinct(worker.values()):
        theirs = [c for c in configs if worker.get(c.key) is w]
        try:
            w.begin_group(theirs)
        except Exception as exc:  # noqa: BLE001
            for c in theirs:
                _fail(rows[c.key], exc)
    return worker


def _hand_reference(pool, n: str, c: Config, workloads: Workloads) -> None:
    """Hand eager's output from the PyTorch worker to the separate worker that checks `c` against it."""
    if not pool.separate or n == REFERENCE_PROCESS or not workloads.reference_is_eager(c):
        return
    w = pool.get(n)
    if not w.has_reference(c):
        w.set_reference(c, pool.get(REFERENCE_PROCESS).reference(c))


def _time(worker: dict, ready: list[Config], rows: dict[str, dict], plan: Plan, replicate: int, *,
          baseline: str) -> None:
    """The interleaved rounds, each block timed in its configuration's worker; their samples into the rows."""
    if not ready:
        return
    timers = {c.key: functools.partial(worker[c.key].block, c.key) for c in ready}
    timing = _distinct(worker[c.key] for c in ready)
    for w in timing:
        w.begin_rounds()
    try:
        rounds = run_rounds(timers, baseline=baseline if baseline in timers else None,
                            seed=plan.seed * 1000 + replicate, **plan.rounds(len(timers)))
    finally:
        for w in timing:
            with contextlib.suppress(Exception):
                w.end_rounds()
    for c in ready:
        row = rows[c.key]
        if c.key in rounds.failed:
            _fail(row, rounds.failed.pop(c.key))
            with contextlib.suppress(Exception):
                worker[c.key].drop(c.key)  # its sessions and buffers, before the next group
            continue
        xs = rounds.samples[c.key]
        row.update(row_statistics(xs), samples_s=xs, sample_rep=[replicate] * len(xs),
                   sample_round=list(range(len(xs))), block_calls=rounds.block[c.key], replicates=1,
                   warmup_calls=rounds.warmup_calls, stop_reason=rounds.stop_reason)


def _after(worker: dict, ready: list[Config], rows: dict[str, dict], plan: Plan, replicate: int) -> None:
    """After the rounds, in each worker: rates, profiles, warm compile; a failure here is a note on measured rows."""
    timed = [c for c in ready if rows[c.key]["status"] == "ok"]

    def each(step: str, run: Callable[[Any, dict[str, dict]], dict[str, dict]]) -> None:
        for w in _distinct(worker[c.key] for c in timed):
            theirs = {c.key: rows[c.key] for c in timed if worker[c.key] is w}
            try:
                rows.update(run(w, theirs))
            except Exception as exc:  # noqa: BLE001 - never costs a measured row
                for row in theirs.values():
                    row["notes"] = _noted(row["notes"], f"{step} failed: {type(exc).__name__}: {exc}")[:500]

    each("rates", lambda w, theirs: w.after_rounds(theirs))
    why = surprises.to_profile(plan.expectations, timed, rows, replicate)  # after the rounds: never in a sample
    for c in timed:
        if c.key in why:
            try:
                rows[c.key].update(worker[c.key].profile(c.key, why[c.key], replicate))
            except Exception as exc:  # noqa: BLE001 - a failed profile never drops the measurement
                rows[c.key]["profile_note"] = f"not profiled: {type(exc).__name__}: {exc}"[:2000]
    if plan.warm_compile:  # after the profiles too: a compile from the cache an earlier process saved
        each("warm compile", lambda w, theirs: w.warm(theirs))


def combine(replicate_rows: list[list[dict]]) -> list[dict]:
    """One row per configuration from its rows of every replicate (same group, same order; docs/method.md)."""
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
                   git_commit=",".join(dict.fromkeys(str(r["git_commit"]) for r in reps)),
                   process=" | ".join(dict.fromkeys(str(r["process"]) for r in reps if r.get("process"))) or None)
        for key, pick in (("max_abs_diff", max), ("peak_mem_mb", max), ("recompilations", sum),
                          ("compilations", max), ("graph_breaks", max), ("batched_vs_unbatched_max_diff", max)):
            values = [r[key] for r in reps if r.get(key) is not None]
            row[key] = pick(values) if values else None
        row.update(warm.combined(reps))  # the warm compile: replicates 2..k of a fresh cache
        row["parity_ok"] = all(r["parity_ok"] for r in reps)
        profiled = next((r for r in reps if r.get("profile_note")), None)
        row["profile_top_ops"], row["profile_note"] = ((profiled.get("profile_top_ops"), profiled["profile_note"])
                                                       if profiled else (None, None))
        median = row["median_s"]
        for rate in ("throughput_samples_s", "throughput_tokens_s"):  # rates at the pooled median
            if reps[0].get(rate) is not None:
                row[rate] = reps[0][rate] * reps[0]["median_s"] / median
        out.append(row)
    return out
