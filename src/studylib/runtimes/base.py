"""The small interface every runtime implements."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The worker process eager PyTorch runs in (bench/workers.py): the one that makes the reference outputs parity reads.
REFERENCE_PROCESS = "torch"
# A runtime family's worker process, where it is not PyTorch's: one per framework, as its users run it.
_PROCESS_OF_FAMILY = {"tensorflow": "tensorflow", "onnxruntime": "onnxruntime", "keras": "keras"}


class RuntimeUnavailable(Exception):
    """The runtime cannot run here (missing package, no device, unsupported shape): a 'skipped' row."""


def _same(inputs: tuple) -> tuple:
    return inputs


@dataclass(frozen=True)
class PrepareStep:
    """One step of making a runtime's model (export, optimize, quantize, ...): seconds it took when it was
    made, whether this preparation loaded it from the cache instead, its cache key, and the size of the graph it
    wrote (ONNX: nodes of the main graph, bytes on disk; None where not counted)."""

    step: str
    seconds: float
    cached: bool
    key: str = ""
    nodes: int | None = None
    bytes: int | None = None


SYNC_REMOVED_VAR = "STUDYLIB_SYNC_REMOVED"  # "1": a test hook (make gpu-proof) that takes every runtime's wait away


@contextlib.contextmanager
def sync_removed():
    """A test hook: runtimes prepared inside it time their calls without waiting for the device (device_sync gives
    None, Keras' direct calls skip their wait), so make gpu-proof shows, runtime by runtime, that a timed call with
    its wait measures much more than without (a missing wait would go unseen otherwise). Never used to measure."""
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
    """Where a runtime's output lies, as its framework reports it (the first of a tuple or list): a torch tensor's
    device, an OrtValue's device_name, a JAX array's devices, a TensorFlow tensor's device; "host" for numpy and
    other host values."""
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
    """What waits for the device inside the timed region, one call for every framework: on CUDA, one device
    synchronize (torch.cuda.synchronize, cudaDeviceSynchronize), which waits for every stream of the CUDA context
    torch, TensorFlow, ONNX Runtime's CUDA provider and TensorRT share in one process (each uses the device's primary
    context), so no framework's own, costlier wait (TensorFlow's sync_devices) times differently; None on a CPU,
    where these calls return when done. JAX is the exception: its dispatch is asynchronous on the host too, so its
    rows wait with block_until_ready on the output (keras.py). Inside `sync_removed` (a test hook), None."""
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
    """A prepared model: `fn(*native_inputs)` runs it once; `call()` runs it on the workload's inputs.

    `inputs` are the workload's inputs already converted to what `fn` takes (torch tensors, TF tensors,
    numpy arrays), so conversion is never timed. `adapt` converts other inputs of the same model (torch
    tensors, as `models.torch_inputs` makes them) the same way: studies that time a pass over a data set
    adapt every batch before timing and call `fn` on each.
    """

    fn: Callable[..., Any]
    inputs: tuple
    sync: Callable[[], Any] | None
    notes: str = ""  # e.g. what the runtime fell back to, or that an export came from the cache
    adapt: Callable[[tuple], tuple] = _same
    compilations: Callable[[], int] | None = None  # graphs compiled so far (XLA counts one per input shape)
    steps: list[PrepareStep] = field(default_factory=list)  # how the model was made (ONNX: export, ...)
    # the runtime's own profiler: (timed call, top n) -> (top operators, note), where torch.profiler would not see
    # inside the call (ONNX Runtime); None: profiling.profile_prepared picks by framework
    profile: Callable[[Callable[[], Any], int], tuple[list[dict] | None, str]] | None = None

    def call(self) -> Any:
        return self.fn(*self.inputs)


class Runtime:
    name: str = ""
    framework: str = "torch"  # which model the workload hands it: "torch" or "tensorflow"
    precision: str | None = None  # "int8" for quantized runtimes: parity uses that tolerance, not the dtype's
    family: str = "eager"  # what kind: eager, compile, export, torchscript, int8, tensorflow, onnxruntime or keras
    # whether its preparation makes its own copy of the model's weights (an ONNX Runtime session, an AOTInductor
    # package, an int8 model): its peak memory counts them there; else the workload's are added (bench/memory.py)
    copies_weights: bool = False

    @property
    def process(self) -> str:
        """The worker process it is measured in (bench/workers.py), one per framework as its users run it: 'torch'
        (eager, torch.compile, TorchScript, export, int8, the static caches), 'tensorflow', 'onnxruntime', or 'keras'
        (the group's backend, fixed per process)."""
        return _PROCESS_OF_FAMILY.get(self.family, REFERENCE_PROCESS)

    @property
    def uses_dynamo(self) -> bool:
        """Whether its first call compiles with torch.compile (dynamo's graphs and breaks are counted into its row)."""
        return self.family == "compile"

    def process_env(self, device: str) -> dict[str, str]:
        """Environment variables its process must start with (a setting fixed before the first kernel runs, such as
        cudnn.benchmark): a runtime that names any is measured in a process, and so a group, of its own, compared
        with its baseline unpaired (grouping.groups_to_measure, grouping.process_env). None by default."""
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
