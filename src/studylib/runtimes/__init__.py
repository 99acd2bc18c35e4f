"""Runtimes: each prepares a Workload once (compile, trace, export) and returns a ready call.

Preparation is separate from the call, so timing code never needs to know which runtime it times.
Adding a runtime is one class in a family file plus one line in _ORIGINALS; REGISTRY adds its A/A copy.
"""

from __future__ import annotations

from . import shared
from .aa import AACopy
from .base import Prepared, Runtime, RuntimeUnavailable
from .export_aoti import ExportAOTI
from .generation import StaticCacheCompiled, StaticCacheRuntime
from .keras import all_runtimes as keras_runtimes
from .onnxrt import OnnxRuntime
from .pytorch import (
    TorchaoDynamicInt8,
    TorchCompiled,
    TorchCompiledChannelsLast,
    TorchDynamicInt8,
    TorchEager,
    TorchEagerChannelsLast,
    TorchEagerCudnnBenchmark,
    TorchScript,
)
from .tensorflow import TFEager, TFFunction

_ORIGINALS: list[Runtime] = [
    TorchEager(),
    TorchCompiled("default"),
    TorchCompiled("reduce-overhead"),
    TorchCompiled("max-autotune"),
    TorchEagerChannelsLast(),
    TorchCompiledChannelsLast("default"),
    TorchEagerCudnnBenchmark(),
    TorchScript(),
    TorchScript(optimize=True),
    ExportAOTI(),
    TorchDynamicInt8(),
    TorchaoDynamicInt8(),
    TFEager(),
    TFFunction(jit_compile=False),
    TFFunction(jit_compile=True),
    OnnxRuntime("plain"),
    OnnxRuntime("optimized"),
    OnnxRuntime("int8"),
    OnnxRuntime("tensorrt"),
    OnnxRuntime("dynamo"),
    *keras_runtimes(),
    # study 07 (text generation): its phases on a static cache, and compiled (its ort and ort-int8 are OnnxRuntime's)
    StaticCacheRuntime(),
    StaticCacheCompiled(),
]
# every runtime, and its A/A copy `<name>-aa` (runtimes/aa.py: the same runtime prepared again on its own copy)
REGISTRY: dict[str, Runtime] = {r.name: r for o in _ORIGINALS for r in (o, AACopy(o))}
# eager PyTorch and tf.function in a process they share, with and without OMP_WAIT_POLICY=PASSIVE (runtimes/shared.py)
REGISTRY |= {r.name: r for name in ("eager", "tf-function") for r in shared.of(REGISTRY[name])}


def family(name: str) -> str | None:
    """The family of the runtime called `name` (Runtime.family), or None for a name no runtime has."""
    runtime = REGISTRY.get(name)
    return runtime.family if runtime is not None else None


def get(name: str) -> Runtime:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown runtime {name!r} (known: {', '.join(REGISTRY)})") from None


__all__ = ["REGISTRY", "Prepared", "Runtime", "RuntimeUnavailable", "family", "get"]
