"""ONNX Runtime on the torch model: the plain export, the transformer-optimized graph, dynamic int8, and the plain
graph of the dynamo exporter.

`ort`, `ort-optimized`, `ort-int8` and `ort-tensorrt` start from the TorchScript-based exporter
(`torch.onnx.export(..., dynamo=False)` with `dynamic_axes` for batch and sequence length): deprecated upstream,
but the graph ONNX Runtime's transformer optimizer and its BERT tooling were written for (on the dynamo graph that
optimizer fused no attention block of roberta-tiny, and `quantize_dynamic` stopped on a shape-inference error, when
this was written). `ort-dynamo` runs the dynamo exporter's graph as it comes (`dynamo=True`, what torch 2.13's
`torch.onnx.export` does by default; onnx_export.py), beside `ort`, so a page compares the two exports' one-time
costs, graph sizes and latencies; an export that fails is that configuration's error row.

Each step (export, optimize, fp16, quantize) writes one `model.onnx` under
`<cache_dir>/onnx/<key>/`, where the key hashes everything the file depends on (see `export_key`), so a
re-run loads the files instead of exporting again. A step writes into a temporary directory beside its
final one and renames it into place when done: an interrupted step leaves no directory that counts as
cached. `Prepared.steps` records each step, the seconds it took when it was made and whether it came
from the cache (results rows keep them as `prepare_steps`), since a cache hit makes `prepare_s` small.

On CUDA, sessions use the CUDAExecutionProvider with IO binding: inputs are put on the GPU by `adapt`
(untimed) and outputs stay there, as PyTorch's do, and `sync` waits for the outputs inside the timed
region (a plain `session.run` would time host<->device copies for ORT only; onnxruntime issue 8166).
fp16 follows ONNX Runtime's recommended path: export an fp32 copy of the (fp16) module, optimize it,
then convert the graph to fp16 with `onnxruntime.transformers`. bf16 and GPU int8 are not offered.
`ort-tensorrt` runs the plain graph with the TensorrtExecutionProvider first (CUDA behind it for what
TensorRT does not take), where the installed onnxruntime-gpu has it and TensorRT's libraries of the major it links
loaded (gpu.preload_tensorrt, before its first session), with one optimization profile over the
grid's shapes and its engines beside the model file they are built from, one folder per shape,
`<cache>/onnx/<key>/trt/b{B}s{S}` (ort_gpu.py, also the CUDA provider's options). Its engine build is a prepare step
of its own ("tensorrt engine", ort_gpu.EngineBuild): made by the session, or by its first call where no optimization
profile is given, or loaded from that folder, cached, with the seconds the build took, so the cold one-time cost
counts it in every replicate.
The session a runtime times, and ONNX Runtime's profiler on it, are ort_session.py's (OrtCall).
The CUDA branches have not been run yet (no GPU while this was written); reports say so (gpu_paths).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..machine import gpu
from ..workloads.models import FAMILIES, spec
from . import onnx_export
from .base import Prepared, PrepareStep, Runtime, RuntimeUnavailable
from .ort_gpu import EngineBuild, cuda_provider_options, session_inputs, tensorrt_options
from .ort_session import OUTPUT_NAME, OrtCall, profile_totals  # noqa: F401 - profile_totals re-exported (tests)

OPSET = onnx_export.OPSET
MODEL_FILE = "model.onnx"
# What each step does, hashed into its cache key: change a setting here and older files are not reused.
EXPORT_SETTINGS = onnx_export.SETTINGS["torchscript"]
QUANTIZE_SETTINGS = {"weight_type": "QInt8", "per_channel": False, "reduce_range": False}


def _ort():
    try:
        import onnx  # noqa: F401  (the optimizer and quantizer need it)
        import onnxruntime
    except ImportError:
        raise RuntimeUnavailable("onnxruntime is not installed") from None
    return onnxruntime


def weights_fingerprint(module, samples_per_tensor: int = 1024) -> str:
    """sha256 over every state-dict entry's name, shape and dtype and up to 1,024 evenly spaced values.

    Cheap even for roberta-base, and any two seeds differ in every tensor, so a seed never reuses another
    seed's export.
    """
    import torch

    h = hashlib.sha256()
    for name, t in module.state_dict().items():
        flat = t.detach().reshape(-1)
        step = max(1, flat.numel() // samples_per_tensor)
        h.update(f"{name}|{tuple(t.shape)}|{t.dtype}|".encode())
        h.update(flat[::step][:samples_per_tensor].to("cpu", torch.float64).numpy().tobytes())
    return h.hexdigest()


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def export_key(workload, exporter: str = "torchscript") -> str:
    """Cache key of the export: model, dtype, device, exporter settings, weights and library versions."""
    import onnx
    import onnxruntime
    import torch
    import transformers

    config = getattr(getattr(workload.module, "inner", None), "config", None)
    # The trace follows the model code on the example inputs: its shape and whether the mask pads anything.
    example = [list(x.shape) for x in workload.inputs] + [bool((workload.inputs[-1] == 0).any())]
    return _hash({
        "model": workload.model_name, "dtype": workload.dtype, "device": workload.device,
        "step": "export", "settings": onnx_export.SETTINGS[exporter], "weights": weights_fingerprint(workload.module),
        "attention": getattr(config, "_attn_implementation", None), "example": example,
        "versions": {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
                     "transformers": transformers.__version__},
    })


_process_cache: Path | None = None


def cache_root(workload) -> Path:
    """`<cache_dir>/onnx`, or a directory private to this process (removed at exit) when there is no cache_dir."""
    global _process_cache
    if workload.cache_dir is not None:
        return Path(workload.cache_dir) / "onnx"
    if _process_cache is None:
        _process_cache = Path(tempfile.mkdtemp(prefix="studylib-onnx-"))
        atexit.register(shutil.rmtree, _process_cache, ignore_errors=True)
    return _process_cache


def cached_step(root: Path, key: str, make: Callable[[Path], None], about: dict) -> tuple[Path, float, bool, dict]:
    """The model file for `key`: loaded when `<root>/<key>/` is complete, else made by `make(path)`.

    Returns (path, seconds the step took when it was made, whether it came from the cache, its graph's size:
    {"nodes", "bytes"}, counted when made). `make` writes into a temporary directory that is renamed to `<root>/<key>`
    only once the file and its metadata are complete, so an interrupted step never counts as cached.
    """
    final = root / key
    if (final / "meta.json").is_file():
        meta = json.loads((final / "meta.json").read_text())
        if "nodes" not in meta:  # made before graph sizes were recorded
            meta["nodes"], meta["bytes"] = onnx_export.graph_size(final / MODEL_FILE)
        return final / MODEL_FILE, meta["seconds"], True, {"nodes": meta["nodes"], "bytes": meta["bytes"]}
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=root))
    try:
        t0 = time.perf_counter()
        make(tmp / MODEL_FILE)
        seconds = time.perf_counter() - t0
        nodes, size = onnx_export.graph_size(tmp / MODEL_FILE)
        (tmp / "meta.json").write_text(json.dumps(about | {"seconds": seconds, "made_at": time.time(),
                                                           "nodes": nodes, "bytes": size}, indent=1))
        if final.exists() and not (final / "meta.json").is_file():
            shutil.rmtree(final)  # not made by this code (the rename below is atomic): never a cache entry
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "meta.json").is_file():
                raise
            # Another process finished the same step first; its file is equivalent, use it.
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final / MODEL_FILE, seconds, False, {"nodes": nodes, "bytes": size}


def _input_names(workload) -> tuple[str, ...]:
    return FAMILIES[spec(workload.model_name).family].inputs


def _export(workload, path: Path, exporter: str = "torchscript") -> None:
    """Export with dynamic batch (and sequence, for text) axes, fp32 weights (onnx_export.export)."""
    onnx_export.export(exporter, workload, path, _input_names(workload), OUTPUT_NAME)


def _optimizer_settings(workload) -> dict:
    config = workload.module.inner.config
    return {"model_type": "gpt2" if spec(workload.model_name).family == "gpt2" else "bert",  # "bert" covers RoBERTa
            "num_heads": config.num_attention_heads, "hidden_size": config.hidden_size,
            "use_gpu": workload.device == "cuda"}


def _optimize(settings: dict, parent: Path, path: Path) -> None:
    """onnxruntime.transformers' fusions (Attention, SkipLayerNorm, BiasGelu); errors propagate."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(str(parent), **settings)
    optimized.save_model_to_file(str(path))


def _to_fp16(parent: Path, path: Path) -> None:
    import onnx
    from onnxruntime.transformers.onnx_model import OnnxModel

    model = OnnxModel(onnx.load(str(parent)))
    model.convert_float_to_float16(keep_io_types=False)  # fp16 output, as the fp16 eager module gives
    model.save_model_to_file(str(path))


def _quantize(parent: Path, path: Path) -> None:
    """Dynamic int8: weights of MatMul and (fused) Attention quantized ahead of time, activations per call."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The optimized graph holds com.microsoft ops that ONNX shape inference cannot type; without a default
    # type the quantizer stops with "Unable to find data type for weight_name=...".
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer logs "consider pre-processing" on the root logger every time
    try:
        quantize_dynamic(str(parent), str(path), weight_type=QuantType.QInt8, per_channel=False,
                         reduce_range=False, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    finally:
        root.setLevel(level)


class OnnxRuntime(Runtime):
    """One ONNX Runtime variant: "plain" (`ort`), "optimized" (`ort-optimized`), "int8" (`ort-int8`), "tensorrt"
    (`ort-tensorrt`, CUDA only) or "dynamo" (`ort-dynamo`: the plain graph of the dynamo exporter, needs onnxscript).

    Sessions use ORT_ENABLE_ALL, sequential execution, one inter-op thread and as many intra-op threads
    as PyTorch has (`torch.get_num_threads()`, which the study sets), so both frameworks get the same cores.
    int8 quantizes the optimized graph (QAttention and MatMulInteger nodes), the order ONNX Runtime's BERT
    examples use; it is CPU only.
    """

    framework = "torch"
    family = "onnxruntime"
    copies_weights = True  # the session holds its own initializers
    NAMES = {"plain": "ort", "optimized": "ort-optimized", "int8": "ort-int8", "tensorrt": "ort-tensorrt",
             "dynamo": "ort-dynamo"}

    def __init__(self, variant: str = "plain"):
        if variant not in self.NAMES:
            raise ValueError(f"unknown ONNX Runtime variant {variant!r} (known: {', '.join(self.NAMES)})")
        self.variant = variant
        self.name = self.NAMES[variant]
        self.precision = "int8" if variant == "int8" else None
        self.exporter = "dynamo" if variant == "dynamo" else "torchscript"

    def _check(self, workload, ort) -> None:
        why = onnx_export.available(self.exporter)
        if why:
            raise RuntimeUnavailable(why)
        if self.variant == "tensorrt":
            if workload.device != "cuda":
                raise RuntimeUnavailable("ONNX Runtime's TensorRT provider needs a CUDA GPU")
            if "TensorrtExecutionProvider" not in ort.get_available_providers():
                raise RuntimeUnavailable(
                    f"onnxruntime {ort.__version__} has no TensorrtExecutionProvider (install onnxruntime-gpu and "
                    f"TensorRT); available: {', '.join(ort.get_available_providers())}")
            major = gpu.tensorrt_major(ort.__version__)
            if major is None:
                raise RuntimeUnavailable(f"which TensorRT major onnxruntime {ort.__version__} links is not known here "
                                         f"(gpu.ORT_TENSORRT_MAJOR)")
            libraries = gpu.preload_tensorrt(major)  # before any session asks for the provider
            if libraries.state != "loaded":
                raise RuntimeUnavailable(f"ort-tensorrt: {libraries.detail}")
        if workload.device == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise RuntimeUnavailable(
                    f"onnxruntime {ort.__version__} has no CUDAExecutionProvider (install onnxruntime-gpu); "
                    f"available: {', '.join(ort.get_available_providers())}")
            if self.variant == "int8":
                raise RuntimeUnavailable("ONNX Runtime dynamic int8 quantization runs on CPU only")
            if workload.dtype not in ("fp32", "fp16"):
                raise RuntimeUnavailable(f"{self.name} on CUDA runs fp32 or fp16, not {workload.dtype}")
        elif workload.device == "cpu":
            if workload.dtype != "fp32":
                raise RuntimeUnavailable(f"{self.name} on CPU runs fp32 only in this study, not {workload.dtype}")
        else:
            raise RuntimeUnavailable(f"{self.name} does not run on device {workload.device!r}")
        if self.variant in ("optimized", "int8") and workload.kind != "text":
            raise RuntimeUnavailable(f"{self.name} applies transformer fusions: text models only")

    def model_path(self, workload) -> tuple[Path, list[PrepareStep], str]:
        """The variant's .onnx file (made or loaded step by step), each step's record, and the last cache key."""
        root = cache_root(workload)
        key = export_key(workload, self.exporter)
        steps = [("export", lambda parent, path: _export(workload, path, self.exporter), {})]
        if self.variant in ("optimized", "int8"):
            settings = _optimizer_settings(workload)
            steps.append(("optimize", lambda parent, path: _optimize(settings, parent, path), settings))
        if workload.dtype == "fp16":
            steps.append(("fp16", _to_fp16, {"keep_io_types": False}))
        if self.variant == "int8":
            steps.append(("quantize", _quantize, QUANTIZE_SETTINGS))
        path, records = None, []
        for step, make, settings in steps:
            if step != "export":
                key = _hash({"parent": key, "step": step, "settings": settings})
            parent = path
            path, seconds, hit, size = cached_step(root, key, lambda p, make=make, parent=parent: make(parent, p),
                                                   {"model": workload.model_name, "step": step, "settings": settings,
                                                    "exporter": self.exporter})
            records.append(PrepareStep(step, seconds, hit, key, **size))
        return path, records, key

    def prepare(self, workload) -> Prepared:
        own = getattr(workload, "onnxruntime", None)  # a workload ONNX Runtime prepares its own way (study 07's LM)
        if own is not None:
            return own(self, workload)
        ort = _ort()
        self._check(workload, ort)
        import torch

        path, steps, key = self.model_path(workload)
        threads = torch.get_num_threads()
        cuda = workload.device == "cuda"
        providers = ([("CUDAExecutionProvider", cuda_provider_options()), "CPUExecutionProvider"] if cuda
                     else ["CPUExecutionProvider"])
        if self.variant == "tensorrt":
            providers.insert(0, ("TensorrtExecutionProvider", tensorrt_options(workload, path.parent,
                                                                               session_inputs(path))))

        def make_session(profile_prefix: str | None = None):
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            if profile_prefix is not None:
                options.enable_profiling = True
                options.profile_file_prefix = profile_prefix
            return ort.InferenceSession(str(path), options, providers=providers)

        build = EngineBuild(providers[0][1]["trt_engine_cache_path"]) if self.variant == "tensorrt" else None
        t0 = time.perf_counter()
        session = make_session()
        session_s = time.perf_counter() - t0
        first = providers[0] if isinstance(providers[0], str) else providers[0][0]
        if session.get_providers()[0] != first:
            raise RuntimeUnavailable(f"ONNX Runtime could not start {first} (providers: {session.get_providers()})")

        # The exporter drops inputs the graph does not use; feed only the ones the session takes.
        wanted = {i.name for i in session.get_inputs()}
        keep = [i for i, n in enumerate(_input_names(workload)) if n in wanted]
        call = OrtCall(session, [_input_names(workload)[i] for i in keep], workload.device, make_session)
        if build is not None:  # the engine build, a step of its own: loaded from its cache or made by this session
            step = build.after_session(session_s)
            if step is not None:
                steps.append(step)
            else:  # no optimization profile: TensorRT builds the engine in the first call, which the hook times
                call.on_first_call = lambda seconds: steps.extend(s for s in [build.after_first_call(seconds)] if s)

        def adapt(torch_inputs: tuple) -> tuple:
            arrays = [torch_inputs[i].detach().cpu().numpy() for i in keep]
            if cuda:
                return tuple(ort.OrtValue.ortvalue_from_numpy(a, "cuda", 0) for a in arrays)
            return tuple(arrays)

        notes = (f"cache key {key}; {self.exporter} exporter (torch.onnx.export's default here: "
                 f"{onnx_export.default_exporter()}); graph {steps[-1].nodes} nodes, {steps[-1].bytes / 1e6:.3g} MB; "
                 f"ORT intra_op_threads={threads} inter_op_threads=1 sequential"
                 + ("; CUDA with IO binding (inputs and outputs on the GPU); " + ", ".join(
                     f"{p[0]} {p[1]}" for p in providers if not isinstance(p, str)) if cuda else ""))
        return Prepared(call, adapt(workload.inputs), call.sync if cuda else None, notes, adapt, steps=steps,
                        profile=call.profile)

    @staticmethod
    def to_numpy(output):
        if not isinstance(output, np.ndarray):  # an OrtValue on the GPU
            output = output.numpy()
        return output.astype("float64")
