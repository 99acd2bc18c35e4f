"""PyTorch eager and torch.compile (one cold Inductor compile per configuration)."""

from __future__ import annotations

import contextlib
import time

from .base import Prepared, Runtime, RuntimeUnavailable


def torch_sync(device: str):
    """What waits for the device inside the timed region: CUDA synchronize on GPU, nothing on CPU."""
    if device == "cuda":
        import torch

        return torch.cuda.synchronize
    return None


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
        module, inputs = workload.module, workload.inputs
        return Prepared(lambda: module(*inputs), torch_sync(workload.device))


def _fresh_inductor_cache():
    """Inductor with an empty cache directory and cleared in-memory code caches (named so since torch 2.7)."""
    from torch._inductor import utils

    fresh = getattr(utils, "fresh_cache", None) or getattr(utils, "fresh_inductor_cache")
    return fresh()


class TorchCompiled(_Torch):
    """torch.compile in one mode. Compilation happens in the first call, which `measure` times alone.

    Every configuration compiles cold: dynamo is reset and Inductor gets an empty cache, so no kernel
    compiled for an earlier configuration is reused. Inductor's one-time process start-up (imports,
    worker pool, toolchain checks) is paid once, untimed, in `warm_up`, so it does not land on
    whichever configuration happens to run first.
    """

    _warmed = False

    def __init__(self, mode: str):
        self.mode = mode
        self.name = f"compile-{mode}"

    def warm_up(self) -> float:
        if TorchCompiled._warmed:
            return 0.0
        import torch

        t0 = time.perf_counter()
        with _fresh_inductor_cache():
            torch._dynamo.reset()
            torch.compile(lambda x: torch.nn.functional.gelu(x) * 2 + 1)(torch.randn(64))
            torch._dynamo.reset()
        TorchCompiled._warmed = True
        return time.perf_counter() - t0

    def context(self):
        stack = contextlib.ExitStack()
        stack.enter_context(super().context())
        stack.enter_context(_fresh_inductor_cache())
        return stack

    def prepare(self, workload) -> Prepared:
        import torch

        if not hasattr(torch, "compile"):
            raise RuntimeUnavailable(f"torch {torch.__version__} has no torch.compile")
        torch._dynamo.reset()
        compiled = torch.compile(workload.module, mode=None if self.mode == "default" else self.mode)
        inputs = workload.inputs
        notes = ""
        if self.mode == "reduce-overhead" and workload.device != "cuda":
            notes = "CUDA graphs need a GPU: on CPU this mode compiles like default"
        return Prepared(lambda: compiled(*inputs), torch_sync(workload.device), notes)
