"""Study 07's ONNX Runtime runners: optimum's ORTModelForCausalLM, exported from the random-weight model saved to a
temporary folder, and its dynamic int8. The registered `ort` and `ort-int8` (onnxrt.py) prepare study 07's workload
through `prepare_generation`, which the workload names, so one name means one runtime across the studies. The export
(its axes dynamic) is made once per model, dtype and weights under `<cache_dir>/onnx/generation/<key>/`, with each
step's seconds; the phases are generation.py's (docs/method.md, "Runtimes").
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

from ..workloads.models import _quiet_transformers, quiet_loggers
from .base import Prepared, PrepareStep, RuntimeUnavailable, device_sync
from .generation import PARITY_STEPS
from .onnxrt import _hash, cache_root, weights_fingerprint
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


def _key(w) -> str:
    import onnxruntime
    import optimum
    import torch
    import transformers

    return _hash({"model": w.model_name, "dtype": w.dtype, "weights": weights_fingerprint(w.lm), "logits": "last",
                  "versions": [torch.__version__, transformers.__version__, onnxruntime.__version__,
                               getattr(optimum, "__version__", "")]})


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
    """Rewrite the exported graph at `path` to compute logits at the last position only, as eager's forward does
    (logits_to_keep=1): a Slice of the last position in front of the MatMul that produces `logits`; a graph whose
    logits come from another operation stops here (an error row naming it)."""
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
    """The exported model's folder (and its int8 file), made or loaded from the cache, and the steps it took: the
    export is shared by ort and ort-int8, each step's seconds recorded when it was made."""
    key = _key(w)
    final = cache_root(w) / "generation" / key
    meta = final / "meta.json"
    if meta.is_file():
        steps = [PrepareStep(s, t, True, key) for s, t in json.loads(meta.read_text())["seconds"].items()]
    else:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=final.parent))
        try:
            seconds = _export(w, tmp)
            (tmp / "meta.json").write_text(json.dumps({"seconds": seconds, "model": w.model_name, "dtype": w.dtype}))
            if not final.exists():
                tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        steps = [PrepareStep(s, t, False, key) for s, t in seconds.items()]
    if int8:
        qmeta = final / "quantize.json"
        if qmeta.is_file():
            steps.append(PrepareStep("quantize", json.loads(qmeta.read_text())["seconds"], True, key))
        else:
            seconds = _quantize(final)
            qmeta.write_text(json.dumps({"seconds": seconds}))
            steps.append(PrepareStep("quantize", seconds, False, key))
    return final, steps


class OrtRunner:
    """One phase of generation through an ORTModelForCausalLM (see runtimes/generation.py for the phases)."""

    def __init__(self, w, model):
        import torch

        self.w, self.model = w, model
        self.ids = torch.cat([w.prompt, w.continuation], dim=1)
        self.prefix = w.decode_context if w.phase == "decode" else w.seq_len
        if w.phase == "decode":
            self._setup()

    def _step(self, ids, past, start: int):
        """(next-token logits (batch, 1, vocab), the new past) after `ids` at positions start.."""
        import torch

        b, n = ids.shape
        mask = torch.ones(b, start + n, dtype=torch.long, device=ids.device)
        positions = torch.arange(start, start + n, device=ids.device).unsqueeze(0).expand(b, -1)
        out = self.model(input_ids=ids, attention_mask=mask, past_key_values=past, position_ids=positions,
                         use_cache=True)
        return out.logits[:, -1:, :], out.past_key_values

    def _setup(self) -> None:
        _, self.past = self._step(self.ids[:, : self.prefix], None, 0)
        self.token = self.ids[:, self.prefix: self.prefix + 1]

    def __call__(self):
        import torch

        w = self.w
        if w.phase == "decode":  # the past it was given is left as it was: the next call repeats the step
            return self._step(self.token, self.past, self.prefix)[0].argmax(-1)
        logits, past = self._step(w.prompt, None, 0)
        tokens = [logits.argmax(-1)]
        if w.phase == "prefill":
            return tokens[0]
        for i in range(w.new_tokens - 1):
            logits, past = self._step(tokens[-1], past, w.seq_len + i)
            tokens.append(logits.argmax(-1))
        return torch.cat(tokens, dim=1)

    def logits(self):
        import torch

        logits, past = self._step(self.ids[:, : self.prefix], None, 0)
        out = [logits]
        for j in range(self.prefix, min(self.ids.shape[1] - 1, self.prefix + PARITY_STEPS)):
            logits, past = self._step(self.ids[:, j: j + 1], past, j)
            out.append(logits)
        return torch.cat(out, dim=1)


def prepare_generation(runtime, workload) -> Prepared:
    """`ort` and `ort-int8` (runtimes/onnxrt.py's OnnxRuntime, its plain and int8 variants) on study 07's workload:
    optimum's ORTModelForCausalLM on the shared export, its int8 on the quantized file; the other ONNX Runtime variants
    (optimized, TensorRT, dynamo) are not offered for generation."""
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
        if int8:
            raise RuntimeUnavailable("ONNX Runtime dynamic int8 quantization runs on CPU only")
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise RuntimeUnavailable("this onnxruntime has no CUDAExecutionProvider (pip install onnxruntime-gpu)")
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
