"""ONNX Runtime on the torch model, each step's file cached under `<cache_dir>/onnx/<key>/` (docs/method.md)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..machine import gpu
from ..machine.gpu import current_precision, ort_cuda_options
from ..workloads.models import FAMILIES, quiet_loggers, spec
from . import onnx_export
from .base import Prepared, PrepareStep, Runtime, RuntimeUnavailable, private_dir, registered, short_hash
from .ort_gpu import EngineBuild, session_inputs, tensorrt_options
from .ort_session import OUTPUT_NAME, OrtCall, session_options

MODEL_FILE = "model.onnx"
# hashed into the quantized file's cache key
QUANTIZE_SETTINGS = {"weight_type": "QInt8", "per_channel": False, "reduce_range": False}


def _ort():
    try:
        import onnx  # noqa: F401  (the optimizer and quantizer need it)
        import onnxruntime
    except ImportError:
        raise RuntimeUnavailable("onnxruntime is not installed") from None
    return onnxruntime


def weights_fingerprint(module, samples_per_tensor: int = 1024) -> str:
    """sha256 over every state-dict entry's name, shape, dtype and up to `samples_per_tensor` evenly spaced values."""
    import torch

    h = hashlib.sha256()
    for name, t in module.state_dict().items():
        flat = t.detach().reshape(-1)
        step = max(1, flat.numel() // samples_per_tensor)
        h.update(f"{name}|{tuple(t.shape)}|{t.dtype}|".encode())
        h.update(flat[::step][:samples_per_tensor].to("cpu", torch.float64).numpy().tobytes())
    return h.hexdigest()


def export_key(workload, exporter: str = "torchscript") -> str:
    """Cache key of the export: model, dtype, device, exporter settings, weights and library versions."""
    import onnx
    import onnxruntime
    import torch
    import transformers

    config = getattr(getattr(workload.module, "inner", None), "config", None)
    # The trace follows the model code on the example inputs: its shape and whether the mask pads anything.
    example = [list(x.shape) for x in workload.inputs] + [bool((workload.inputs[-1] == 0).any())]
    return short_hash({
        "model": workload.model_name, "dtype": workload.dtype, "device": workload.device,
        "step": "export", "settings": onnx_export.SETTINGS[exporter], "weights": weights_fingerprint(workload.module),
        "attention": getattr(config, "_attn_implementation", None), "example": example,
        "versions": {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
                     "transformers": transformers.__version__},
    })


def cache_root(workload) -> Path:
    """`<cache_dir>/onnx`, or a directory private to this process (removed at exit) when there is no cache_dir."""
    return Path(workload.cache_dir) / "onnx" if workload.cache_dir is not None else private_dir("studylib-onnx-")


def cached_folder(final: Path, make: Callable[[Path], dict]) -> tuple[dict, bool]:
    """(metadata, True) where `final` is complete; else `make` fills a temporary folder renamed into place: False."""
    if (final / "meta.json").is_file():
        return json.loads((final / "meta.json").read_text()), True
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        meta = make(tmp)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        if final.exists() and not (final / "meta.json").is_file():
            shutil.rmtree(final)  # not made by this code (the rename below is atomic): never a cache entry
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "meta.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return meta, False


def cached_step(root: Path, key: str, make: Callable[[Path], None], about: dict) -> tuple[Path, float, bool, dict]:
    """The model file for `key` under `root`: (path, seconds when made, whether cached, {"nodes", "bytes"})."""
    def made(folder: Path) -> dict:
        t0 = time.perf_counter()
        make(folder / MODEL_FILE)
        seconds = time.perf_counter() - t0
        nodes, size = onnx_export.graph_size(folder / MODEL_FILE)
        return about | {"seconds": seconds, "made_at": time.time(), "nodes": nodes, "bytes": size}

    meta, cached = cached_folder(root / key, made)
    if "nodes" not in meta:  # made before graph sizes were recorded
        meta["nodes"], meta["bytes"] = onnx_export.graph_size(root / key / MODEL_FILE)
    return root / key / MODEL_FILE, meta["seconds"], cached, {"nodes": meta["nodes"], "bytes": meta["bytes"]}


def _input_names(workload) -> tuple[str, ...]:
    return FAMILIES[spec(workload.model_name).family].inputs


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

    # com.microsoft ops defeat shape inference: without a default type, "Unable to find data type for weight_name"
    with quiet_loggers("root"):  # the quantizer logs "consider pre-processing" on the root logger every time
        quantize_dynamic(str(parent), str(path), weight_type=QuantType.QInt8, per_channel=False,
                         reduce_range=False, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def check_cuda(ort, *, int8: bool) -> None:
    """RuntimeUnavailable where this onnxruntime has no CUDA provider, or for an int8 variant (CPU only)."""
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise RuntimeUnavailable(f"onnxruntime {ort.__version__} has no CUDAExecutionProvider (install onnxruntime-gpu); "
                                 f"available: {', '.join(ort.get_available_providers())}")
    if int8:
        raise RuntimeUnavailable("ONNX Runtime dynamic int8 quantization runs on CPU only")


class OnnxRuntime(Runtime):
    """One ONNX Runtime variant (NAMES); int8 quantizes the optimized graph, on CPU only."""

    framework = "torch"
    family = "onnxruntime"
    copies_weights = True  # the session holds its own initializers
    NAMES = {"plain": "ort", "optimized": "ort-optimized", "int8": "ort-int8", "tensorrt": "ort-tensorrt",
             "dynamo": "ort-dynamo"}

    def __init__(self, variant: str = "plain"):
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
            check_cuda(ort, int8=self.variant == "int8")
            if workload.dtype not in ("fp32", "fp16"):
                raise RuntimeUnavailable(f"{self.name} on CUDA runs fp32 or fp16, not {workload.dtype}")
        elif workload.device != "cpu":
            raise RuntimeUnavailable(f"{self.name} does not run on device {workload.device!r}")
        elif workload.dtype != "fp32":
            raise RuntimeUnavailable(f"{self.name} on CPU runs fp32 only in this study, not {workload.dtype}")
        if self.variant in ("optimized", "int8") and workload.kind != "text":
            raise RuntimeUnavailable(f"{self.name} applies transformer fusions: text models only")

    def model_path(self, workload) -> tuple[Path, list[PrepareStep], str]:
        """The variant's .onnx file (made or loaded step by step), each step's record, and the last cache key."""
        root = cache_root(workload)
        key = export_key(workload, self.exporter)
        steps = [("export", lambda parent, path: onnx_export.export(self.exporter, workload, path,
                                                                     _input_names(workload), OUTPUT_NAME), {})]
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
                key = short_hash({"parent": key, "step": step, "settings": settings})
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
        providers = ([("CUDAExecutionProvider", ort_cuda_options(current_precision())), "CPUExecutionProvider"] if cuda
                     else ["CPUExecutionProvider"])
        if self.variant == "tensorrt":
            providers.insert(0, ("TensorrtExecutionProvider", tensorrt_options(workload, path.parent,
                                                                               session_inputs(path))))

        def make_session(profile_prefix: str | None = None):
            return ort.InferenceSession(str(path), session_options(ort, threads, profile_prefix), providers=providers)

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


RUNTIMES = [
    registered(OnnxRuntime("plain"), "ONNX Runtime on the exported model", "Greens", "03 04 07"),
    registered(OnnxRuntime("optimized"), "ONNX Runtime on the model after its transformer graph optimizer", "Greens",
               "03 04"),
    registered(OnnxRuntime("int8"), "ONNX Runtime on the dynamically int8-quantized model (changes the outputs)",
               "Greens", "03 07"),
    registered(OnnxRuntime("tensorrt"), "ONNX Runtime with its TensorRT provider (GPU only)", "Greens", "03"),
    registered(OnnxRuntime("dynamo"), "ONNX Runtime on the model exported by torch.onnx.export(dynamo=True), the path "
               "torch 2.13 takes by default (the other ort variants start from the deprecated TorchScript exporter, "
               "dynamo=False)", "Greens", "03"),
]
