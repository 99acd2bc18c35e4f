"""PyTorch eager and torch.compile (one cold Inductor compile per configuration)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import time
import warnings

from ..machine.gpu import CUDNN_BENCHMARK_VAR
from ..workloads.models import TORCHAO_NOTICES, quiet_loggers
from . import compile_cache
from .base import Prepared, Runtime, RuntimeUnavailable, device_sync


class _Torch(Runtime):
    def context(self):
        import torch

        return torch.inference_mode()

    @staticmethod
    def to_numpy(output):
        return output.detach().float().cpu().numpy().astype("float64")


class TorchEager(_Torch):
    name = "eager"

    def prepare(self, workload) -> Prepared:
        return Prepared(workload.module, workload.inputs, device_sync(workload.device))


def reset_compiled() -> None:
    """Forget every compiled graph (dynamo's caches): the next torch.compile of any module starts cold."""
    import torch

    torch._dynamo.reset()


def dynamo_counts() -> dict[str, int]:
    """Dynamo's running totals in this process: graphs compiled, and graph breaks (places it stopped tracing:
    its `graph_break` and `unimplemented` counters). Differences between two readings attribute them."""
    from torch._dynamo.utils import counters

    return {"graphs": int(counters["stats"]["unique_graphs"]),
            "breaks": int(sum(counters["graph_break"].values()) + sum(counters["unimplemented"].values())),
            "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"])}  # CUDA graphs Inductor gave up on


def _fresh_inductor_cache():
    """Inductor with an empty cache directory and cleared in-memory code caches (named so since torch 2.7)."""
    from torch._inductor import utils

    fresh = getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache
    return fresh()


class TorchCompiled(_Torch):
    """torch.compile in one mode. Compilation happens in the first call, which `measure` times alone.

    Every configuration compiles cold: dynamo is reset at the start of each group (`reset_compiled`)
    and each compile gets an empty Inductor cache, so no kernel compiled for an earlier configuration
    is reused. Modes of one group compile side by side (dynamo keeps one entry per mode) and are timed
    interleaved. Inductor's one-time process start-up (imports,
    worker pool, toolchain checks) is paid once, untimed, in `warm_up`, so it does not land on
    whichever configuration happens to run first. The compile again from the cache an earlier process saved (the
    warm one-time cost) is compile_cache.py's.
    """

    _warmed = False

    def __init__(self, mode: str):
        self.mode = mode
        self.name = f"compile-{mode}"
        self.family = "compile"

    def warm_up(self) -> float:
        if TorchCompiled._warmed:
            return 0.0
        import torch

        t0 = time.perf_counter()
        with _fresh_inductor_cache():
            torch._dynamo.reset()
            for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):  # C++ and Triton back ends
                torch.compile(lambda x: torch.nn.functional.gelu(x) * 2 + 1)(torch.randn(64, device=device))
                torch._dynamo.reset()
        TorchCompiled._warmed = True
        return time.perf_counter() - t0

    def memory_warmup_calls(self, device: str) -> int:
        """reduce-overhead and max-autotune record CUDA graphs (cudagraph trees) in the calls after the first: two
        more calls inside the memory window count their pool."""
        return 2 if device == "cuda" and self.mode in ("reduce-overhead", "max-autotune") else 0

    def context(self):
        stack = contextlib.ExitStack()
        stack.enter_context(super().context())
        stack.enter_context(_fresh_inductor_cache())
        stack.enter_context(compile_cache.recording())  # this compile's cache artifacts apart (compile_cache.saved)
        return stack

    def prepare(self, workload) -> Prepared:
        import torch

        if not hasattr(torch, "compile"):
            raise RuntimeUnavailable(f"torch {torch.__version__} has no torch.compile")
        compiled = torch.compile(workload.module, mode=None if self.mode == "default" else self.mode)
        notes = ""
        if self.mode == "reduce-overhead" and workload.device != "cuda":
            notes = "CUDA graphs need a GPU: on CPU this mode compiles like default"
        return Prepared(compiled, workload.inputs, device_sync(workload.device), notes)


class TorchScript(_Torch):
    """torch.jit.trace on the workload's inputs, then frozen; `optimize=True` adds optimize_for_inference.

    Tracing records the ops run on the example inputs; the traced graph is reused for other shapes of the
    same model (batch and sequence length), which is how seed 003 ran TorchScript across batch sizes.
    """

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


class TorchDynamicInt8(_Torch):
    """PyTorch dynamic int8 quantization of every nn.Linear, on a copy of the module (CPU only).

    Weights are quantized once here; activations are quantized per call. `torch.ao.quantization` is
    deprecated upstream in favour of torchao but still works on torch 2.13; its warnings are silenced.
    """

    name = "torch-int8"
    precision = "int8"
    family = "int8"
    copies_weights = True  # the quantized copy of the module

    def prepare(self, workload) -> Prepared:

        import torch

        if workload.device != "cpu":
            raise RuntimeUnavailable("PyTorch dynamic int8 quantization runs on CPU only")
        if workload.dtype != "fp32":
            raise RuntimeUnavailable(f"torch-int8 quantizes an fp32 model, not {workload.dtype}")
        quantization = getattr(getattr(torch, "ao", None), "quantization", None)
        if not hasattr(quantization, "quantize_dynamic"):
            raise RuntimeUnavailable(f"torch {torch.__version__} has no torch.ao.quantization.quantize_dynamic")
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*")
            quantized = quantization.quantize_dynamic(copy.deepcopy(workload.module), {torch.nn.Linear},
                                                      dtype=torch.qint8)
        layers = sum(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in quantized.modules())
        notes = (f"quantize_s={time.perf_counter() - t0:.2f}; {layers} Linear layers int8 "
                 f"({torch.backends.quantized.engine} engine)")
        return Prepared(quantized, workload.inputs, None, notes)


def _torchao():
    """torchao's `quantize_` and its int8 dynamic-activation config, or RuntimeUnavailable naming why not: not
    installed, not importable with this torch, or (its own import-time check) built for another torch."""
    import torch

    try:
        with quiet_loggers(*TORCHAO_NOTICES):
            import torchao
            from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except ImportError as exc:
        if exc.name == "torchao":
            raise RuntimeUnavailable(f"torchao is not installed (torch {torch.__version__}; the lock pins a "
                                     f"release that supports it)") from None
        raise RuntimeUnavailable(f"torchao does not import with torch {torch.__version__}: "
                                 f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    version = getattr(torchao, "__version__", "unknown")
    reason = str(getattr(torchao, "_skip_reason", None) or "")
    if getattr(torchao, "skip_loading_so_files", False) and "incompatible" in reason.lower():
        raise RuntimeUnavailable(f"torchao {version} does not support torch {torch.__version__}: {reason}")
    return version, quantize_, Int8DynamicActivationInt8WeightConfig


class TorchaoDynamicInt8(_Torch):
    """torchao's int8 dynamic quantization (`quantize_` with Int8DynamicActivationInt8WeightConfig) of every
    nn.Linear, on a copy of the module (CPU here): weights int8 per output channel, made once here; activations
    int8 per token, quantized per call. The successor torch.ao.quantization's deprecation points to, beside
    `torch-int8` (whose weights are int8 per tensor). Without a torchao that supports this torch it is a skipped row
    that says so (`_torchao`)."""

    name = "torchao-int8"
    precision = "int8"
    family = "int8"
    copies_weights = True  # the quantized copy of the module

    def prepare(self, workload) -> Prepared:
        import torch

        if workload.device != "cpu":
            raise RuntimeUnavailable("torchao-int8 is measured on CPU only in this study (beside torch-int8)")
        if workload.dtype != "fp32":
            raise RuntimeUnavailable(f"torchao-int8 quantizes an fp32 model, not {workload.dtype}")
        version, quantize_, config = _torchao()
        t0 = time.perf_counter()
        quantized = copy.deepcopy(workload.module)
        quantize_(quantized, config())
        layers = sum(isinstance(m, torch.nn.Linear) and type(m.weight) is not torch.nn.Parameter
                     for m in quantized.modules())
        notes = (f"quantize_s={time.perf_counter() - t0:.2f}; {layers} Linear layers int8 "
                 f"(torchao {version}, Int8DynamicActivationInt8WeightConfig)")
        return Prepared(quantized, workload.inputs, None, notes)


def _channels_last(workload) -> tuple:
    """A copy of the workload's module and inputs in channels_last (NHWC in memory) layout; a model without
    4-D image inputs has no layout to change (RuntimeUnavailable)."""
    import torch

    if not any(x.dim() == 4 for x in workload.inputs):
        raise RuntimeUnavailable(f"channels_last needs 4-D image inputs; {workload.model_name} takes "
                                 f"{', '.join(f'{x.dim()}-D' for x in workload.inputs)} tensors")

    def nhwc(x):
        return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x

    params = list(workload.module.parameters())
    with torch.inference_mode(bool(params) and params[0].is_inference()):  # a copy: eager keeps its NCHW module
        module = copy.deepcopy(workload.module).to(memory_format=torch.channels_last)

    def adapt(batch: tuple) -> tuple:
        return tuple(nhwc(x) for x in batch)

    return module, adapt(workload.inputs), adapt


class TorchEagerChannelsLast(_Torch):
    """Eager PyTorch with the model and its image inputs in channels_last (NHWC) memory layout, converted once,
    untimed: seed 001's NHWC against PyTorch's default NCHW (`eager`)."""

    name = "eager-channels-last"

    def prepare(self, workload) -> Prepared:
        module, inputs, adapt = _channels_last(workload)
        return Prepared(module, inputs, device_sync(workload.device), adapt=adapt)


class TorchCompiledChannelsLast(TorchCompiled):
    """torch.compile (one mode) of the channels_last copy of the model, on channels_last inputs."""

    def __init__(self, mode: str):
        super().__init__(mode)
        self.name = f"compile-{mode}-channels-last"

    def prepare(self, workload) -> Prepared:
        module, inputs, adapt = _channels_last(workload)
        prepared = super().prepare(dataclasses.replace(workload, module=module, inputs=inputs))
        prepared.adapt = adapt
        return prepared


class TorchEagerCudnnBenchmark(_Torch):
    """Eager PyTorch in a process started with torch.backends.cudnn.benchmark on (gpu.CUDNN_BENCHMARK_VAR, set by
    gpu.apply before the process's first convolution): cuDNN times its convolution algorithms for each new input
    shape and keeps the fastest; CUDA only. Flipping the flag around the variant's own calls, beside `eager` in one
    process, measured nothing: cuDNN's plan cache does not key on the flag, and eager had already planned the
    shape. So it runs in a process (and group) of its own, and its speed-up over eager is unpaired (a ratio of
    medians measured in different processes, with a CI from both medians' CIs). The process's first
    convolution is the untimed eager reference of its shape, so the autotuning lands there, not in first_call_s."""

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
