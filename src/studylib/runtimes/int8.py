"""PyTorch's dynamic int8 quantization (torch.ao's and torchao's) of every nn.Linear: runtimes that change the outputs."""

from __future__ import annotations

import copy
import time
import warnings

from ..core.errors import said
from ..workloads.models import TORCHAO_NOTICES, quiet_loggers
from .base import Prepared, RuntimeUnavailable, registered
from .pytorch import _Torch


class _DynamicInt8(_Torch):
    """Dynamic int8 of every nn.Linear on a module copy, on CPU: `quantizer()` found untimed, then `quantize` timed."""

    precision = "int8"
    family = "int8"
    copies_weights = True  # the quantized copy of the module

    def prepare(self, workload) -> Prepared:
        if workload.device != "cpu":
            raise RuntimeUnavailable(f"{self.name} is measured on CPU only in this study")
        if workload.dtype != "fp32":
            raise RuntimeUnavailable(f"{self.name} quantizes an fp32 model, not {workload.dtype}")
        quantizer = self.quantizer()
        t0 = time.perf_counter()
        quantized, layers, how = self.quantize(workload.module, quantizer)
        notes = f"quantize_s={time.perf_counter() - t0:.2f}; {layers} Linear layers int8 ({how})"
        return Prepared(quantized, workload.inputs, None, notes)


class TorchDynamicInt8(_DynamicInt8):
    """torch.ao.quantization.quantize_dynamic (deprecated upstream for torchao; its warnings silenced)."""

    name = "torch-int8"

    def quantizer(self):
        import torch

        quantization = getattr(getattr(torch, "ao", None), "quantization", None)
        if not hasattr(quantization, "quantize_dynamic"):
            raise RuntimeUnavailable(f"torch {torch.__version__} has no torch.ao.quantization.quantize_dynamic")
        return quantization

    def quantize(self, module, quantization):
        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*")
            quantized = quantization.quantize_dynamic(copy.deepcopy(module), {torch.nn.Linear}, dtype=torch.qint8)
        layers = sum(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in quantized.modules())
        return quantized, layers, f"{torch.backends.quantized.engine} engine"


class TorchaoDynamicInt8(_DynamicInt8):
    """torchao's `quantize_` with Int8DynamicActivationInt8WeightConfig; skipped where no torchao fits this torch."""

    name = "torchao-int8"

    def quantizer(self):
        """torchao's version, `quantize_` and its int8 config; raises RuntimeUnavailable naming why not."""
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
                                     f"{said(exc)}") from None
        version = getattr(torchao, "__version__", "unknown")
        reason = str(getattr(torchao, "_skip_reason", None) or "")
        if getattr(torchao, "skip_loading_so_files", False) and "incompatible" in reason.lower():
            raise RuntimeUnavailable(f"torchao {version} does not support torch {torch.__version__}: {reason}")
        return version, quantize_, Int8DynamicActivationInt8WeightConfig

    def quantize(self, module, torchao):
        import torch

        version, quantize_, config = torchao
        quantized = copy.deepcopy(module)
        quantize_(quantized, config())
        layers = sum(isinstance(m, torch.nn.Linear) and type(m.weight) is not torch.nn.Parameter
                     for m in quantized.modules())
        return quantized, layers, f"torchao {version}, Int8DynamicActivationInt8WeightConfig"


RUNTIMES = [
    registered(TorchDynamicInt8(), "PyTorch dynamic int8 quantization of every Linear (changes the outputs)",
               "Purples", "03"),
    registered(TorchaoDynamicInt8(), "torchao's int8 dynamic quantization of every Linear (quantize_ with "
               "Int8DynamicActivationInt8WeightConfig), the successor of torch-int8's deprecated torch.ao (changes the "
               "outputs)", "Purples", "03"),
]
