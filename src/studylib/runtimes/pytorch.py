"""PyTorch eager (and its layouts), torch.compile (one cold Inductor compile per configuration) and TorchScript."""

from __future__ import annotations

import contextlib
import time
import warnings

from ..machine.gpu import CUDNN_BENCHMARK_VAR
from . import compile_cache
from .aa import module_copy
from .base import Prepared, Runtime, RuntimeUnavailable, device_sync, registered, same_inputs


class _Torch(Runtime):
    def context(self):
        import torch

        return torch.inference_mode()

    @staticmethod
    def to_numpy(output):
        return output.detach().float().cpu().numpy().astype("float64")


class TorchEager(_Torch):
    """Eager PyTorch; `channels_last`: the model and image inputs in channels_last (NHWC), converted once, untimed."""

    name = "eager"  # a subclass names itself in its class body
    channels_last = False

    def __init__(self, channels_last: bool = False):
        if channels_last:
            self.name, self.channels_last = "eager-channels-last", True

    def prepare(self, workload) -> Prepared:
        module, inputs, adapt = (_channels_last(workload) if self.channels_last
                                 else (workload.module, workload.inputs, same_inputs))
        return Prepared(module, inputs, device_sync(workload.device), adapt=adapt)


def reset_compiled() -> None:
    """Forget every compiled graph (dynamo's caches): the next torch.compile of any module starts cold."""
    import torch

    torch._dynamo.reset()


def dynamo_counts() -> dict[str, int]:
    """Dynamo's running totals in this process: graphs, graph breaks and CUDA graph skips."""
    from torch._dynamo.utils import counters

    return {"graphs": int(counters["stats"]["unique_graphs"]),
            "breaks": int(sum(counters["graph_break"].values()) + sum(counters["unimplemented"].values())),
            "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"])}


def fresh_inductor_cache():
    """Inductor with an empty cache directory and cleared in-memory code caches."""
    from torch._inductor.utils import fresh_cache

    return fresh_cache()


class TorchCompiled(_Torch):
    """torch.compile in one mode (of the channels_last model copy where asked), compiled cold in the first call."""

    _warmed = False  # Inductor's process start-up, paid untimed in `warm_up`

    def __init__(self, mode: str, channels_last: bool = False):
        self.mode, self.channels_last = mode, channels_last
        self.name = f"compile-{mode}" + ("-channels-last" if channels_last else "")
        self.family = "compile"

    def warm_up(self) -> float:
        if TorchCompiled._warmed:
            return 0.0
        import torch

        t0 = time.perf_counter()
        with fresh_inductor_cache():
            torch._dynamo.reset()
            for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):  # C++ and Triton back ends
                torch.compile(lambda x: torch.nn.functional.gelu(x) * 2 + 1)(torch.randn(64, device=device))
                torch._dynamo.reset()
        TorchCompiled._warmed = True
        return time.perf_counter() - t0

    def memory_warmup_calls(self, device: str) -> int:
        """reduce-overhead and max-autotune record CUDA graphs in the two calls after the first."""
        return 2 if device == "cuda" and self.mode in ("reduce-overhead", "max-autotune") else 0

    def context(self):
        stack = contextlib.ExitStack()
        stack.enter_context(super().context())
        stack.enter_context(fresh_inductor_cache())
        stack.enter_context(compile_cache.recording())  # this compile's cache artifacts apart (compile_cache.saved)
        return stack

    def prepare(self, workload) -> Prepared:
        import torch

        module, inputs, adapt = (_channels_last(workload) if self.channels_last
                                 else (workload.module, workload.inputs, same_inputs))
        compiled = torch.compile(module, mode=None if self.mode == "default" else self.mode)
        notes = ""
        if self.mode == "reduce-overhead" and workload.device != "cuda":
            notes = "CUDA graphs need a GPU: on CPU this mode compiles like default"
        return Prepared(compiled, inputs, device_sync(workload.device), notes, adapt)


class TorchScript(_Torch):
    """torch.jit.trace on the workload's inputs, then frozen; `optimize=True` adds optimize_for_inference."""

    def __init__(self, optimize: bool = False):
        self.optimize = optimize
        self.name = "torchscript-optimized" if optimize else "torchscript"
        self.family = "torchscript"

    def prepare(self, workload) -> Prepared:
        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            traced = torch.jit.trace(workload.module, workload.inputs, check_trace=False)
        # optimize_for_inference freezes too (and folds conv-bn, pre-packs weights for oneDNN where it can).
        scripted = torch.jit.optimize_for_inference(traced) if self.optimize else torch.jit.freeze(traced)
        return Prepared(scripted, workload.inputs, device_sync(workload.device))


def _channels_last(workload) -> tuple:
    """(module, inputs, adapt) in channels_last layout; raises RuntimeUnavailable without 4-D image inputs."""
    import torch

    if not any(x.dim() == 4 for x in workload.inputs):
        raise RuntimeUnavailable(f"channels_last needs 4-D image inputs; {workload.model_name} takes "
                                 f"{', '.join(f'{x.dim()}-D' for x in workload.inputs)} tensors")

    def adapt(batch: tuple) -> tuple:
        return tuple(x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x for x in batch)

    module = module_copy(workload.module).to(memory_format=torch.channels_last)  # eager keeps its NCHW module
    return module, adapt(workload.inputs), adapt


class TorchEagerCudnnBenchmark(_Torch):
    """Eager PyTorch in its own process started with cudnn.benchmark on, CUDA only (docs/method.md, "Runtimes")."""

    name = "eager-cudnn-benchmark"

    def process_env(self, device: str) -> dict[str, str]:
        return {CUDNN_BENCHMARK_VAR: "1"} if device == "cuda" else {}

    def prepare(self, workload) -> Prepared:
        import torch

        if workload.device != "cuda":
            raise RuntimeUnavailable("cudnn.benchmark is a CUDA setting (cuDNN picks convolution algorithms)")
        if not torch.backends.cudnn.benchmark:
            raise RuntimeUnavailable("cudnn.benchmark must be on from the process's start: this process was not "
                                     "started for it (a replicate process of its own sets it; in-process runs do not)")
        return Prepared(workload.module, workload.inputs, device_sync(workload.device),
                        notes="own process with cudnn.benchmark on from its first convolution; unpaired with eager")


RUNTIMES = [
    registered(TorchEager(), "PyTorch, run op by op as written (the baseline of most comparisons)", None,
               "01 02 03 04 05 07"),
    registered(TorchCompiled("default"), "torch.compile, default mode (Inductor)", "Blues", "01 05"),
    registered(TorchCompiled("reduce-overhead"), "torch.compile, mode reduce-overhead (CUDA graphs on a GPU; the same "
               "code as default on a CPU)", "Blues", "01"),
    registered(TorchCompiled("max-autotune"), "torch.compile, mode max-autotune (benchmarks kernel choices while "
               "compiling)", "Blues", "01"),
    registered(TorchEager(channels_last=True), "eager PyTorch with the model and image inputs in channels_last (NHWC) "
               "layout", "Purples", "01"),
    registered(TorchCompiled("default", channels_last=True), "torch.compile (default) of the channels_last model",
               "Blues", "01"),
    registered(TorchEagerCudnnBenchmark(), "eager PyTorch with cudnn.benchmark on, in a process of its own (GPU only)",
               "Purples", "01"),
    registered(TorchScript(), "torch.jit.trace, then frozen", "RdPu", "02 03 04"),
    registered(TorchScript(optimize=True), "TorchScript with optimize_for_inference", "RdPu", "02"),
]
