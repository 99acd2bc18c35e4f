"""PyTorch eager and torch.compile (one Inductor compile per configuration)."""

from __future__ import annotations

from .base import Prepared, Runtime, RuntimeUnavailable


def torch_sync(device: str):
    """What waits for the device inside the timed region: CUDA synchronize on GPU, nothing on CPU."""
    if device == "cuda":
        import torch

        return torch.cuda.synchronize
    return None


class _Torch(Runtime):
    framework = "torch"

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


class TorchCompiled(_Torch):
    """torch.compile in one mode. Compilation happens in the first call, which `measure` times alone."""

    def __init__(self, mode: str):
        self.mode = mode
        self.name = f"compile-{mode}"

    def prepare(self, workload) -> Prepared:
        import torch

        if not hasattr(torch, "compile"):
            raise RuntimeUnavailable(f"torch {torch.__version__} has no torch.compile")
        # A fresh compile per configuration: its cost lands in this configuration's first call.
        torch._dynamo.reset()
        compiled = torch.compile(workload.module, mode=None if self.mode == "default" else self.mode)
        inputs = workload.inputs
        notes = ""
        if self.mode == "reduce-overhead" and workload.device != "cuda":
            notes = "CUDA graphs need a GPU: on CPU this mode compiles like default"
        return Prepared(lambda: compiled(*inputs), torch_sync(workload.device), notes)
