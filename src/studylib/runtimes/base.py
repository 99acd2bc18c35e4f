"""The small interface every runtime implements."""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The worker process eager PyTorch runs in (bench/workers.py): the one that makes the reference outputs parity reads.
REFERENCE_PROCESS = "torch"
# A runtime family's worker process, where it is not PyTorch's: one per framework, as its users run it.
_PROCESS_OF_FAMILY = {"tensorflow": "tensorflow", "onnxruntime": "onnxruntime", "keras": "keras"}


class RuntimeUnavailable(Exception):
    """The runtime cannot run here (missing package, no device, unsupported shape): a 'skipped' row."""


@functools.cache
def private_dir(prefix: str) -> Path:
    """A directory private to this process (one per prefix), removed at exit."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def short_hash(obj) -> str:
    """16 hex digits of the sha256 of `obj` as sorted JSON: a cache key."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def same_inputs(inputs: tuple) -> tuple:
    return inputs


@dataclass(frozen=True)
class PrepareStep:
    """One step of making a runtime's model: seconds when made, whether cached, its key, the graph's size."""

    step: str
    seconds: float
    cached: bool
    key: str = ""
    nodes: int | None = None
    bytes: int | None = None


SYNC_REMOVED_VAR = "STUDYLIB_SYNC_REMOVED"  # "1": a test hook (make gpu-proof) that takes every runtime's wait away


@contextlib.contextmanager
def sync_removed():
    """A test hook (make gpu-proof): runtimes prepared inside it do not wait for the device. Never used to measure."""
    before = os.environ.get(SYNC_REMOVED_VAR)
    os.environ[SYNC_REMOVED_VAR] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SYNC_REMOVED_VAR, None)
        else:
            os.environ[SYNC_REMOVED_VAR] = before


def sync_is_removed() -> bool:
    return os.environ.get(SYNC_REMOVED_VAR) == "1"


def output_device(output: Any) -> str:
    """Where a runtime's output (the first of a tuple or list) lies, as its framework reports it; "host" for numpy."""
    if isinstance(output, (list, tuple)) and output:
        return output_device(output[0])
    if hasattr(output, "is_cuda") and hasattr(output, "device"):  # torch
        return str(output.device)
    if callable(getattr(output, "device_name", None)):  # onnxruntime.OrtValue
        return str(output.device_name())
    if callable(getattr(output, "devices", None)):  # jax.Array
        return ", ".join(sorted(str(d) for d in output.devices()))
    if isinstance(getattr(output, "device", None), str):  # tensorflow
        return output.device or "host"
    return "host"


def on_gpu(device: str) -> bool:
    """Whether a device name (output_device) is a GPU's."""
    name = device.lower()
    return "cuda" in name or "gpu" in name


def device_sync(device: str) -> Callable[[], Any] | None:
    """The timed region's device wait: one synchronize on CUDA; None on a CPU and inside `sync_removed`."""
    if device == "cuda" and not sync_is_removed():
        import torch

        return torch.cuda.synchronize
    return None


def synced(call: Callable[[], Any], sync: Callable[[], Any] | None) -> Callable[[], Any]:
    """`call` followed by `sync` (waiting for the device inside the timed region); `call` itself where there is none."""
    if sync is None:
        return call

    def timed():
        out = call()
        sync()
        return out

    return timed


@dataclass
class Prepared:
    """A prepared model: `fn(*inputs)` runs it once on converted inputs; `adapt` converts other batches alike."""

    fn: Callable[..., Any]
    inputs: tuple
    sync: Callable[[], Any] | None
    notes: str = ""  # e.g. what the runtime fell back to, or that an export came from the cache
    adapt: Callable[[tuple], tuple] = same_inputs
    compilations: Callable[[], int] | None = None  # graphs compiled so far (XLA counts one per input shape)
    steps: list[PrepareStep] = field(default_factory=list)  # how the model was made (ONNX: export, ...)
    # the runtime's own profiler, (timed call, top n) -> (top operators, note); None: picked by framework
    profile: Callable[[Callable[[], Any], int], tuple[list[dict] | None, str]] | None = None

    def call(self) -> Any:
        return self.fn(*self.inputs)


class Runtime:
    name: str = ""
    framework: str = "torch"  # which model the workload hands it: "torch" or "tensorflow"
    precision: str | None = None  # "int8" for quantized runtimes: parity uses that tolerance, not the dtype's
    family: str = "eager"  # what kind: eager, compile, export, torchscript, int8, tensorflow, onnxruntime or keras
    # whether its preparation copies the weights (counted there); else the workload's are added (bench/memory.py)
    copies_weights: bool = False
    # its registration (`registered`): gloss, seaborn palette (None: near-black), the studies that offer it
    gloss: str = ""
    colours: str | None = None
    studies: tuple[str, ...] = ()

    @property
    def quantized(self) -> bool:
        """Whether it changes the outputs (a quantized model): decision tables set it apart."""
        return self.precision == "int8"

    @property
    def process(self) -> str:
        """The worker process it is measured in (bench/workers.py), one per framework as its users run it."""
        return _PROCESS_OF_FAMILY.get(self.family, REFERENCE_PROCESS)

    @property
    def uses_dynamo(self) -> bool:
        """Whether its first call compiles with torch.compile (dynamo's graphs and breaks are counted into its row)."""
        return self.family == "compile"

    def process_env(self, device: str) -> dict[str, str]:
        """Variables its process must start with; any makes it a process and group of its own (bench/grouping.py)."""
        return {}

    def copies_weights_of(self, workload) -> bool:
        """Whether preparing `workload` copies its weights (`copies_weights`; an A/A copy decides by the workload)."""
        return self.copies_weights

    def memory_warmup_calls(self, device: str) -> int:
        """Calls after the first that its peak memory includes (CUDA graphs are recorded there); 0 by default."""
        return 0

    def warm_up(self) -> float:
        """One-time, untimed start-up cost of the runtime in this process (seconds spent; 0 if none)."""
        return 0.0

    def prepare(self, workload) -> Prepared:
        """Build the call for `workload` (trace, compile or export here; the first call may do more)."""
        raise NotImplementedError

    def context(self):
        """Entered around preparation and timing (e.g. torch.inference_mode)."""
        return contextlib.nullcontext()

    @staticmethod
    def to_numpy(output) -> Any:
        """The output as a float64 numpy array, for parity checks."""
        raise NotImplementedError


def registered(runtime: Runtime, gloss: str, colours: str | None, studies: str) -> Runtime:
    """`runtime` with its gloss, palette and the studies that offer it ("01 05"), as its family file registers it."""
    runtime.gloss, runtime.colours, runtime.studies = gloss, colours, tuple(studies.split())
    return runtime
