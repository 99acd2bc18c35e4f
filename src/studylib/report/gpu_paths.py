"""The study's CUDA code paths, and which of them a set of results exercised (an `ok` row on CUDA through it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from .. import runtimes
from ..core import wording

WORDS = "report/gpu_paths.md.j2"


@dataclass(frozen=True)
class Branch:
    name: str
    what: str
    uses: Callable[[pd.Series], bool]  # does this configuration go through the branch?


BRANCHES = [
    Branch("CUDA sync in the timed region", "one device synchronize (torch.cuda.synchronize) for torch, TensorFlow and "
           "ONNX Runtime, JAX's block_until_ready, inside every timed call", lambda r: True),
    Branch("CUDA allocator peak", "peak memory from torch's CUDA allocator per configuration", lambda r: True),
    Branch("fp16 on CUDA", "half-precision modules, inputs and ONNX graphs", lambda r: r["dtype"] == "fp16"),
    Branch("bf16 on CUDA", "bfloat16 modules and inputs", lambda r: r["dtype"] == "bf16"),
    Branch("torch.compile on CUDA", "Inductor/Triton kernels; reduce-overhead adds CUDA graphs",
           lambda r: runtimes.family(str(r["variant"])) == "compile"),
    Branch("AOTInductor on CUDA", "torch.export then aoti_compile_and_package: Triton kernels and a C++ wrapper "
           "compiled ahead of time into a .pt2 package, loaded and run on the GPU",
           lambda r: runtimes.family(str(r["variant"])) == "export"),
    Branch("TensorFlow on GPU", "TF eager, tf.function and XLA on the GPU, memory growth on",
           lambda r: runtimes.family(str(r["variant"])) == "tensorflow"),
    Branch("ONNX Runtime CUDA provider", "CUDAExecutionProvider with IO binding (inputs and outputs on the GPU)",
           lambda r: r["variant"] in ("ort", "ort-optimized", "ort-dynamo")),
    Branch("ONNX Runtime TensorRT provider", "TensorrtExecutionProvider (where onnxruntime-gpu has it), engine and "
           "timing caches beside the ONNX file, one engine per shape (cache/onnx/<key>/trt/b{B}s{S})",
           lambda r: r["variant"] == "ort-tensorrt"),
    Branch("fp32 precision policy", "the profile's tf32 setting applied to torch, TensorFlow, JAX, ONNX Runtime and "
           "TensorRT (gpu.py)", lambda r: r["dtype"] == "fp32"),
    Branch("cuDNN autotuning process", "eager-cudnn-benchmark in a process started with cudnn.benchmark on",
           lambda r: r["variant"] == "eager-cudnn-benchmark"),
    Branch("CUDA graphs' memory", "reduce-overhead and max-autotune: peak memory through the graphs' recording",
           lambda r: r["variant"] in ("compile-reduce-overhead", "compile-max-autotune")),
    Branch("JAX on GPU", "Keras 3 on the JAX backend (CUDA plugin, no preallocation)",
           lambda r: str(r["variant"]).startswith("keras-jax")),
]


def coverage(df: pd.DataFrame) -> pd.DataFrame:
    """One row per CUDA branch: configurations that would use it, those run on CUDA, those that ran ok there."""
    rows = []
    for b in BRANCHES:
        mine = df[df.apply(b.uses, axis=1)] if len(df) else df
        cuda = mine[mine["device"] == "cuda"] if len(mine) else mine
        ok = int((cuda["status"] == "ok").sum()) if len(cuda) else 0
        state = wording.macro(WORDS, "state", ok, len(cuda), cuda["status"].iloc[0] if len(cuda) else "", len(mine))
        rows.append({"branch": b.name, "what": b.what, "configs": len(mine), "cuda_configs": len(cuda), "ok": ok,
                     "state": state})
    return pd.DataFrame(rows)


def not_exercised_note(df: pd.DataFrame) -> str:
    """One sentence for a notebook: the CUDA branches its configurations use that these results did not run."""
    cov = coverage(df)
    used = cov[cov.configs > 0]
    return wording.macro(WORDS, "note", list(used[used.ok == 0].branch), not (len(df) and (df["device"] == "cuda").any()))
