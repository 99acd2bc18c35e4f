"""Study 07's ONNX Runtime runners (optimum's ORTModelForCausalLM, its int8), for `ort` and `ort-int8`."""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
from pathlib import Path

from ..workloads.models import _quiet_transformers, quiet_loggers
from .base import Prepared, PrepareStep, RuntimeUnavailable, device_sync, short_hash
from .generation import PhaseRunner
from .onnxrt import cache_root, cached_folder, check_cuda, weights_fingerprint
from .ort_session import session_options

QUANTIZED = "model_int8.onnx"


def _optimum():
    try:
        import onnxruntime  # noqa: F401
        from optimum.onnxruntime import ORTModelForCausalLM
    except ImportError as exc:
        raise RuntimeUnavailable(f"optimum's ONNX Runtime models are not installed ({exc.name or exc}): pip install "
                                 f"optimum-onnx") from None
    return ORTModelForCausalLM


def _export(w, folder: Path) -> dict[str, float]:
    """Save the model to a temporary folder and export it with optimum into `folder`: the seconds of each step."""
    seconds = {}
    ort_model = _optimum()
    with tempfile.TemporaryDirectory(prefix="studylib-lm-") as saved:
        t0 = time.perf_counter()
        w.lm.save_pretrained(saved)
        seconds["save"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        # the exporter's tracer warnings and optimum's notices say nothing about speed (and would be a page's errors)
        with _quiet_transformers(), warnings.catch_warnings(), quiet_loggers("optimum", "torch.onnx"):
            warnings.simplefilter("ignore")
            ort_model.from_pretrained(saved, export=True, use_cache=True).save_pretrained(folder)
        seconds["export"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    keep_last_logits(folder / "model.onnx")
    seconds["last-position logits"] = time.perf_counter() - t0
    return seconds


LOGITS = "logits"  # optimum's name for the graph's logits output


def keep_last_logits(path: Path) -> None:
    """Rewrite the graph at `path` to compute the last position's logits only; raises where it cannot."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    producer = next((n for n in graph.node if LOGITS in n.output), None)
    if producer is None or producer.op_type != "MatMul":
        raise RuntimeError(f"the exported graph's {LOGITS} come from {producer.op_type if producer else 'nothing'}, "
                           f"not a MatMul: its last position cannot be kept alone")
    import numpy as np

    hidden, last = producer.input[0], f"{producer.input[0]}/last_position"
    names = {k: f"studylib/last_position/{k}" for k in ("starts", "ends", "axes")}
    graph.initializer.extend([numpy_helper.from_array(np.array([v], dtype=np.int64), names[k]) for k, v in
                              (("starts", -1), ("ends", np.iinfo(np.int64).max), ("axes", 1))])
    index = list(graph.node).index(producer)
    graph.node.insert(index, helper.make_node("Slice", [hidden, names["starts"], names["ends"], names["axes"]], [last],
                                              name="studylib/last_position"))
    producer.input[0] = last
    out = next(o for o in graph.output if o.name == LOGITS)
    out.type.tensor_type.shape.dim[1].Clear()
    out.type.tensor_type.shape.dim[1].dim_value = 1
    onnx.save(model, str(path))  # weights stay in their external files, next to it, unchanged


def _quantize(folder: Path) -> float:
    """Dynamic int8 of the exported model beside it (QUANTIZED): the seconds it took."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    t0 = time.perf_counter()
    tmp = folder / f".tmp-{os.getpid()}-{QUANTIZED}"
    try:
        with quiet_loggers("root"):  # the quantizer logs "consider pre-processing" on the root logger
            quantize_dynamic(str(folder / "model.onnx"), str(tmp), weight_type=QuantType.QInt8, per_channel=False)
        os.replace(tmp, folder / QUANTIZED)
    finally:
        tmp.unlink(missing_ok=True)
    return time.perf_counter() - t0


def exported(w, int8: bool) -> tuple[Path, list[PrepareStep]]:
    """The exported model's folder (and int8 file), made or cached, and its steps."""
    import onnxruntime
    import optimum
    import torch
    import transformers

    key = short_hash({"model": w.model_name, "dtype": w.dtype, "weights": weights_fingerprint(w.lm), "logits": "last",
                      "versions": [torch.__version__, transformers.__version__, onnxruntime.__version__,
                                   getattr(optimum, "__version__", "")]})
    final = cache_root(w) / "generation" / key
    meta, cached = cached_folder(final, lambda tmp: {"seconds": _export(w, tmp), "model": w.model_name,
                                                     "dtype": w.dtype})
    steps = [PrepareStep(s, t, cached, key) for s, t in meta["seconds"].items()]
    if int8:
        qmeta = final / "quantize.json"
        if qmeta.is_file():
            steps.append(PrepareStep("quantize", json.loads(qmeta.read_text())["seconds"], True, key))
        else:
            seconds = _quantize(final)
            qmeta.write_text(json.dumps({"seconds": seconds}))
            steps.append(PrepareStep("quantize", seconds, False, key))
    return final, steps


class OrtRunner(PhaseRunner):
    """One phase of generation through an ORTModelForCausalLM: the past it is given is left as it was."""

    def __init__(self, w, model):
        super().__init__(w)
        self.model = model
        if w.phase == "decode":
            self._setup()

    def _fresh(self):
        return None

    def _step(self, ids, past, start: int, *, eager: bool = False):
        import torch

        b, n = ids.shape
        mask = torch.ones(b, start + n, dtype=torch.long, device=ids.device)
        positions = torch.arange(start, start + n, device=ids.device).unsqueeze(0).expand(b, -1)
        out = self.model(input_ids=ids, attention_mask=mask, past_key_values=past, position_ids=positions,
                         use_cache=True)
        return out.logits[:, -1:, :], out.past_key_values


def prepare_generation(runtime, workload) -> Prepared:
    """`ort` and `ort-int8` on study 07's workload: ORTModelForCausalLM on the shared export or its int8 file."""
    import torch

    int8 = runtime.variant == "int8"
    if runtime.variant not in ("plain", "int8"):
        raise RuntimeUnavailable(f"{runtime.name} is not offered for text generation (study 07 runs ort and ort-int8)")
    ort_model = _optimum()
    import onnxruntime as ort

    if workload.dtype != "fp32":
        raise RuntimeUnavailable(f"{runtime.name} runs the fp32 export only in this study (asked {workload.dtype})")
    provider = "CPUExecutionProvider"
    if workload.device == "cuda":
        check_cuda(ort, int8=int8)
        provider = "CUDAExecutionProvider"
    folder, steps = exported(workload, int8)
    options = session_options(ort, torch.get_num_threads())
    t0 = time.perf_counter()
    with _quiet_transformers(), warnings.catch_warnings(), quiet_loggers("optimum"):
        warnings.simplefilter("ignore")
        model = ort_model.from_pretrained(folder, file_name=QUANTIZED if int8 else "model.onnx", provider=provider,
                                          session_options=options, use_cache=True)
    steps.append(PrepareStep("session", time.perf_counter() - t0, False))
    notes = (f"optimum ORTModelForCausalLM ({provider}, intra_op_threads={options.intra_op_num_threads}); its graph "
             f"computes logits at the last position only, as eager's (keep_last_logits)")
    if int8:
        notes += "; weights int8 (quantize_dynamic, QInt8, per tensor)"
    # on a GPU the outputs are torch tensors on the device (optimum's IO binding): wait for them inside the timed call
    return Prepared(OrtRunner(workload, model), (), device_sync(workload.device), notes, steps=steps)
