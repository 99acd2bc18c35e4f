"""onnxrt.py's ONNX files: `torch.onnx.export` ("torchscript" or "dynamo"), fp32, dynamic axes; graph sizes."""

from __future__ import annotations

import copy
import importlib.util
import inspect
import warnings
from pathlib import Path

from ..workloads.models import quiet_loggers

OPSET = 17  # the TorchScript exporter's: first opset with LayerNormalization, which it then emits as one node
# hashed into the export's cache key (onnxrt.export_key): a change makes older files unused
SETTINGS = {
    "torchscript": {"exporter": "torchscript", "opset": OPSET, "constant_folding": True, "dynamic": "batch,seq"},
    "dynamo": {"exporter": "dynamo", "opset": "torch default", "optimize": True, "dynamic": "batch,seq",
               "external_data": False},
}


def default_exporter() -> str:
    """The exporter the installed torch's `torch.onnx.export` uses when `dynamo` is not given."""
    import torch

    param = inspect.signature(torch.onnx.export).parameters.get("dynamo")
    return "dynamo" if param is not None and param.default is True else "torchscript"


def available(exporter: str) -> str:
    """'' where `exporter` can run here, else why not (one line: a skipped row's message)."""
    if exporter == "dynamo" and importlib.util.find_spec("onnxscript") is None:
        import torch

        return (f"the dynamo ONNX exporter needs onnxscript, which is not installed (torch {torch.__version__} imports "
                f"it for torch.onnx.export(dynamo=True))")
    return ""


def export(exporter: str, workload, path: Path, input_names: tuple[str, ...], output_name: str) -> None:
    """Export `workload.module` to `path` with `exporter` ("torchscript" or "dynamo"); errors propagate."""
    import torch

    module, inputs = workload.module, workload.inputs
    if workload.dtype != "fp32":  # fp16 on CUDA: export fp32 (same values), convert the graph later
        module = copy.deepcopy(module).float()
    axes = {0: "batch", 1: "seq"} if workload.kind == "text" else {0: "batch"}
    with torch.no_grad(), warnings.catch_warnings():
        if exporter == "torchscript":
            warnings.simplefilter("ignore", DeprecationWarning)  # "legacy TorchScript-based ONNX export"
            warnings.simplefilter("ignore", torch.jit.TracerWarning)  # constants in transformers' mask code
            torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=OPSET,
                              do_constant_folding=True, input_names=list(input_names), output_names=[output_name],
                              dynamic_axes={**{n: axes for n in input_names}, output_name: {0: "batch"}})
        else:  # dynamo: its notices are not results; a failed export raises
            for category in (FutureWarning, UserWarning, DeprecationWarning):
                warnings.simplefilter("ignore", category)
            # torch.export's dynamic_shapes: each of `axes` of every input Dim.DYNAMIC (one tuple for a *inputs forward)
            dynamic = tuple({axis: torch.export.Dim.DYNAMIC for axis in axes if axis < x.dim()} for x in inputs)
            params = inspect.signature(module.forward).parameters.values()
            if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
                dynamic = (dynamic,)
            with quiet_loggers("torch.onnx", "torch.export", "torch._export"):
                torch.onnx.export(module, inputs, str(path), dynamo=True, input_names=list(input_names),
                                  output_names=[output_name], dynamic_shapes=dynamic,
                                  external_data=False, verbose=False)


def graph_size(path: Path) -> tuple[int, int]:
    """(nodes of the main graph, bytes of its folder's files but meta.json) of the .onnx file at `path`."""
    import onnx

    nodes = len(onnx.load(str(path), load_external_data=False).graph.node)
    files = [p for p in path.parent.iterdir() if p.is_file() and p.name != "meta.json"]
    return nodes, sum(p.stat().st_size for p in files)
