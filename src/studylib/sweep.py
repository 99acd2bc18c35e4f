"""Run a grid of configurations: build, prepare, parity-check, measure, and write one row each.

A failure (out of memory, compile error, missing runtime) is a row with its status and message; the
sweep goes on. Rows are appended as each configuration finishes, and configurations already
measured in the same environment are skipped unless forced.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from . import models, paths, runtimes
from .memory import PeakMemory
from .results import ResultsTable, measured_alike
from .timing import measure

REFERENCE = "eager"  # every variant's output is compared with eager PyTorch on the same inputs


@dataclass(frozen=True)
class Config:
    """One configuration of a sweep: what is run, on what, at which size."""

    model: str
    variant: str
    dtype: str
    batch_size: int
    device: str
    threads: int
    seq_len: int | None = None  # fixed-shape studies: the sequence length; data-set studies: the maximum
    image_size: int | None = None
    strategy: str | None = None  # data-set studies: how texts are batched (see batching.STRATEGIES)
    data: str | None = None  # data-set studies: which data (corpus, sample, tokenizer; see dataset.data_tag)

    @property
    def key(self) -> str:
        size = f"s{self.seq_len}" if self.seq_len is not None else f"i{self.image_size}"
        key = f"{self.model}|{self.variant}|{self.device}|{self.dtype}|b{self.batch_size}|{size}|t{self.threads}"
        return key + "".join(f"|{v}" for v in (self.strategy, self.data) if v is not None)

    @property
    def shape_key(self) -> tuple:
        """Configurations sharing this key time the same model on the same inputs."""
        return (self.model, self.dtype, self.batch_size, self.seq_len, self.image_size, self.strategy, self.data)


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


def tolerance_key(c: Config) -> str:
    """Which parity tolerance applies: 'int8' for quantized runtimes, else the configuration's dtype."""
    runtime = runtimes.REGISTRY.get(c.variant)
    return (runtime.precision if runtime is not None else None) or c.dtype


def _device_available(device: str) -> str | None:
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            return "CUDA is not available on this machine"
    return None


class Workloads:
    """Builds each model once per dtype (and its TensorFlow twin when asked) and each eager reference once per shape."""

    def __init__(self, seed: int, cache_dir=None):
        self.seed = seed
        self.cache_dir = cache_dir
        self._modules: dict[tuple, Any] = {}
        self._tf_modules: dict[tuple, Any] = {}
        self._references: dict[tuple, np.ndarray] = {}

    def _torch_module(self, c: Config):
        mkey = (c.model, c.dtype, c.device)
        if mkey not in self._modules:
            self._release()  # one model in memory at a time
            self._modules[mkey] = models.build_torch(c.model, seed=self.seed, dtype=c.dtype, device=c.device)
        return self._modules[mkey]

    def _release(self) -> None:
        self._modules.clear()
        self._references.clear()
        if self._tf_modules:
            self._tf_modules.clear()
            import tensorflow as tf

            tf.keras.backend.clear_session()

    def workload(self, c: Config, framework: str = "torch") -> models.Workload:
        """The configuration's model and inputs, as the runtime's framework takes them."""
        spec = models.spec(c.model)
        if c.seq_len is not None and spec.max_positions and c.seq_len > spec.max_positions:
            raise runtimes.RuntimeUnavailable(f"sequence length {c.seq_len} exceeds {c.model}'s "
                                              f"{spec.max_positions} positions")
        w = models.torch_workload(c.model, batch_size=c.batch_size, seq_len=c.seq_len, image_size=c.image_size,
                                  dtype=c.dtype, device=c.device, seed=self.seed, module=self._torch_module(c))
        w.cache_dir = self.cache_dir
        if framework == "torch":
            return w
        if framework != "tensorflow":
            raise ValueError(f"unknown framework {framework!r}")
        if c.dtype != "fp32":
            raise runtimes.RuntimeUnavailable(f"TensorFlow variants run in fp32 only in this study (asked {c.dtype})")
        try:
            import tensorflow  # noqa: F401
        except ImportError:
            raise runtimes.RuntimeUnavailable("tensorflow is not installed") from None
        mkey = (c.model, c.dtype, c.device)
        if mkey not in self._tf_modules:
            self._tf_modules[mkey] = models.build_tf_from_torch(c.model, w.module)
        return models.tf_workload(w, self._tf_modules[mkey])

    def timed_call(self, prepared: runtimes.Prepared, c: Config, w: models.Workload):
        """What `measure` times: one call on the workload's inputs."""
        return prepared.call

    def as_array(self, output: Any, runtime: runtimes.Runtime, c: Config) -> np.ndarray:
        return runtime.to_numpy(output)

    def rates(self, c: Config, w: models.Workload, median_s: float) -> dict[str, Any]:
        return {"throughput_samples_s": c.batch_size / median_s,
                "throughput_tokens_s": (w.tokens_per_call / median_s) if w.tokens_per_call else None}

    def has_reference(self, c: Config) -> bool:
        return c.shape_key in self._references

    def set_reference(self, c: Config, output: np.ndarray) -> None:
        self._references[c.shape_key] = output

    def reference(self, c: Config) -> np.ndarray:
        """Eager PyTorch output on the configuration's inputs, in its dtype."""
        if c.shape_key not in self._references:
            w = self.workload(c)
            eager = runtimes.get(REFERENCE)
            with eager.context():
                self._references[c.shape_key] = eager.to_numpy(w.module(*w.inputs))
        return self._references[c.shape_key]


# Every row carries every column, failed ones with None, so tables and figures never miss a column.
MEASURED_FIELDS = (
    "n", "median_s", "mean_s", "p90_s", "p99_s", "iqr_s", "cv", "ci_low_s", "ci_high_s", "first_call_s",
    "warmup_calls", "stop_reason", "samples_s", "max_abs_diff", "parity_tol", "parity_ok", "prepare_s",
    "runtime_startup_s", "peak_mem_mb", "mem_kind", "throughput_samples_s", "throughput_tokens_s", "notes",
    "compilations", "recompilations", "label_agreement",
    # data-set studies: what one timed pass covers
    "n_texts", "n_batches", "real_tokens", "computed_tokens", "padding_waste", "batched_vs_unbatched_max_diff",
)


def settings_hash(measure_settings: dict, parity_tolerance: float, seed: int) -> str:
    """Identifies how a configuration was measured: a re-run with other settings measures it again."""
    key = json.dumps({"measure": measure_settings, "tolerance": parity_tolerance, "seed": seed}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:10]


def _base_row(c: Config, study: str, profile: str, env: dict, settings: str) -> dict[str, Any]:
    spec = models.spec(c.model)
    return {
        "study": study, "profile": profile, "config_key": c.key, **asdict(c), "task": spec.kind,
        "env_fingerprint": env["fingerprint"], "settings_hash": settings, "git_commit": env.get("git_commit"),
        "status": "ok", "error": "", **dict.fromkeys(MEASURED_FIELDS),
    }


def run_one(c: Config, *, study: str, profile: str, env: dict, measure_settings: dict,
            parity_tolerance: dict[str, float], workloads: Workloads) -> dict[str, Any]:
    """Measure one configuration and return its results row (never raises for a failed run)."""
    tolerance = parity_tolerance[tolerance_key(c)]
    row = _base_row(c, study, profile, env, settings_hash(measure_settings, tolerance, workloads.seed))
    started = time.perf_counter()
    try:
        missing = _device_available(c.device)
        if missing:
            raise runtimes.RuntimeUnavailable(missing)
        runtime = runtimes.get(c.variant)
        startup_s = runtime.warm_up()  # untimed, once per process
        w = workloads.workload(c, runtime.framework)
        checked: dict[str, Any] = {}
        # Eager's own first call gives the reference when it runs first on a shape, so that call stays cold.
        eager_is_reference = c.variant == REFERENCE and not workloads.has_reference(c)
        if not eager_is_reference:
            workloads.reference(c)  # computed now, outside this configuration's memory and timing

        def check(output) -> None:
            out = workloads.as_array(output, runtime, c)
            if eager_is_reference:
                workloads.set_reference(c, out)
            checked.update(parity(out, workloads.reference(c), tolerance))
            if prepared.compilations:
                checked["compilations"] = prepared.compilations()

        with runtime.context(), PeakMemory(c.device) as mem:
            t0 = time.perf_counter()
            prepared = runtime.prepare(w)
            call = workloads.timed_call(prepared, c, w)
            prepare_s = time.perf_counter() - t0
            m = measure(call, sync=prepared.sync, after_first=check, **measure_settings)
        row.update(m.to_row())
        row.update(checked)
        if prepared.compilations:  # graphs built after the first call: a retrace in steady state
            row["recompilations"] = prepared.compilations() - checked["compilations"]
        torch_allocator = mem.kind != "cuda_max_allocated" or (runtime.framework == "torch"
                                                               and not c.variant.startswith("ort"))
        row.update(
            prepare_s=prepare_s,
            runtime_startup_s=startup_s,
            # On a GPU only PyTorch's allocator is read: TF and ONNX Runtime allocate outside it.
            peak_mem_mb=mem.peak_mb if torch_allocator else None,
            mem_kind=mem.kind if torch_allocator else "not tracked (allocator outside PyTorch)",
            notes=prepared.notes,
            **workloads.rates(c, w, m.median),
        )
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a failure is a result
        row["status"], row["error"] = classify_failure(exc)
        if c.device == "cuda" and row["status"] == "oom":
            import torch

            torch.cuda.empty_cache()  # let the next configuration start from a clean allocator
    row["wall_s"] = time.perf_counter() - started
    row["timestamp"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return row


def _progress(total: int, desc: str):
    from tqdm import tqdm

    # Under `studylib run` the terminal shows the bar (run.py watches the results table), so the executed
    # notebook is not filled with progress lines; in JupyterLab the bar shows in the cell.
    return tqdm(total=total, desc=desc, file=sys.stdout, ascii=True, mininterval=2.0, ncols=110, leave=True,
                disable=os.environ.get("STUDYLIB_RUNNER") == "papermill")


def pending(configs: list[Config], *, table: ResultsTable, env: dict, measure_settings: dict,
            parity_tolerance: dict[str, float], seed: int, force: bool = False) -> list[Config]:
    """The configurations a run would measure: all when forced, else those without a matching 'ok' row."""
    if force:
        return list(configs)
    latest = table.latest()
    return [c for c in configs if not measured_alike(
        latest.get(c.key), env["fingerprint"], settings_hash(measure_settings, parity_tolerance[tolerance_key(c)], seed))]


def run(configs: list[Config], *, study: str, profile: str, env: dict, table: ResultsTable,
        measure_settings: dict, parity_tolerance: dict[str, float], seed: int = 0, force: bool = False,
        on_row: Callable[[dict], None] | None = None, workloads: Workloads | None = None) -> list[dict]:
    """Measure every configuration not yet measured alike (all of them when forced); return the new rows.

    A configuration counts as measured when the table holds an 'ok' row for it from the same environment
    and the same measurement settings; failed rows are tried again.
    """
    todo = pending(configs, table=table, env=env, measure_settings=measure_settings,
                   parity_tolerance=parity_tolerance, seed=seed, force=force)
    workloads = workloads or Workloads(seed, cache_dir=paths.cache_dir(profile))
    new_rows = []
    bar = _progress(len(todo), f"{study} [{profile}]")
    try:
        for c in todo:
            bar.set_postfix_str(f"{c.model} {c.variant} {c.dtype} b{c.batch_size}", refresh=False)
            row = run_one(c, study=study, profile=profile, env=env, measure_settings=measure_settings,
                          parity_tolerance=parity_tolerance, workloads=workloads)
            table.append(row)
            table.write_csv()
            new_rows.append(row)
            if on_row:
                on_row(row)
            bar.update(1)
    finally:
        bar.close()
    return new_rows
