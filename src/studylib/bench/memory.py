"""Memory a block adds at its peak: RSS on CPU, the framework's allocator on CUDA (`PeakMemory.kind`)."""

from __future__ import annotations

import math
import resource
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_mb(field: str) -> float | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_rss_peak() -> bool:
    """Linux resets the process's peak RSS (VmHWM) when 5 is written to clear_refs."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def _device_used_mb() -> float:
    """Memory in use on GPU 0 by every allocator (cudaMemGetInfo: total minus free)."""
    import torch

    free, total = torch.cuda.mem_get_info(0)
    return (total - free) / 2**20


# bytes per element of the dtypes a model's weights come in, by name (numpy has no bfloat16 of its own)
_ITEM_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "int8": 1, "uint8": 1, "int32": 4, "int64": 8}


def weights_mb(model) -> float | None:
    """A torch, TensorFlow or Keras model's weights in MiB; None where there is no model to count."""
    model = getattr(model, "model", model)
    if hasattr(model, "parameters") and hasattr(model, "buffers"):
        tensors = {id(t): t for t in (*model.parameters(), *model.buffers())}  # tied weights once
        return sum(t.numel() * t.element_size() for t in tensors.values()) / 2**20
    variables = getattr(model, "weights", None)
    if variables is None:
        return None
    total = 0
    for v in variables:
        name = str(getattr(v.dtype, "name", v.dtype)).split(".")[-1]
        total += math.prod(int(d) for d in v.shape) * _ITEM_BYTES[name]
    return total / 2**20


class PeakMemory:
    """`with PeakMemory(device) as pm: ...` then `pm.peak_mb`, `pm.increase_mb` and `pm.kind` (what was measured)."""

    def __init__(self, device: str = "cpu", framework: str = "torch"):
        self.device, self.framework = device, framework
        self.peak_mb: float | None = None
        self.start_mb: float | None = None
        self.kind = ""

    @property
    def increase_mb(self) -> float | None:
        """Peak minus the memory in use when the block started (None where the peak is not resettable)."""
        if self.peak_mb is None or self.start_mb is None:
            return None
        return max(0.0, self.peak_mb - self.start_mb)

    def _tf_start(self) -> bool:
        """TensorFlow's allocator statistics reset and read, where this TensorFlow has them for GPU:0."""
        import tensorflow as tf

        try:
            tf.config.experimental.reset_memory_stats("GPU:0")
            self.start_mb = tf.config.experimental.get_memory_info("GPU:0")["current"] / 2**20
        except (AttributeError, ValueError, RuntimeError):
            return False
        return True

    def __enter__(self) -> PeakMemory:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            if self.framework == "tensorflow" and self._tf_start():
                self.kind = "tf_peak_bytes"
            elif self.framework in ("jax", "onnxruntime", "tensorflow"):
                self.start_mb = _device_used_mb()
                self.kind = "cuda_device_used"
            else:
                torch.cuda.reset_peak_memory_stats()
                self.start_mb = torch.cuda.memory_allocated() / 2**20
                self.kind = "cuda_max_allocated"
        elif _reset_rss_peak() and _status_mb("VmHWM") is not None:
            self.start_mb = _status_mb("VmRSS")
            self.kind = "rss_peak"
        else:
            # No resettable peak here: the process-lifetime peak is an upper bound, labelled as such.
            self.kind = "rss_peak_since_start"
        return self

    def __exit__(self, *exc) -> None:
        if self.kind == "cuda_max_allocated":
            import torch

            torch.cuda.synchronize()
            self.peak_mb = torch.cuda.max_memory_allocated() / 2**20
        elif self.kind == "tf_peak_bytes":
            import tensorflow as tf

            self.peak_mb = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**20
        elif self.kind == "cuda_device_used":
            import torch

            torch.cuda.synchronize()
            self.peak_mb = _device_used_mb()
        elif self.kind == "rss_peak":
            self.peak_mb = _status_mb("VmHWM")
        else:
            self.peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
