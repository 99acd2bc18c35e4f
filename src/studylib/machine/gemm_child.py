"""`python -m studylib.machine.gemm_child LIBRARY THREADS BUDGET_S` (gemm.py starts it): one MARK + JSON line."""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from ..core.errors import said
from . import rates as rates_
from .threads import Captured, apply_threads

MARK = "GEMM-RESULT "
DTYPES = ("fp32", "bf16")
# BERT-base's linear layers at study 02's token counts per call, and one square product
TOKENS = (32, 256)
BERT_BASE = (("attention projection", 768, 768), ("FFN in", 768, 3072), ("FFN out", 3072, 768))
SQUARE = 1024


def shapes() -> dict[str, dict]:
    """{"256x768x3072": {"m", "k", "n", "label", "studies"}}; `studies` marks the compute-bound ones compared."""
    out = {}
    for m in TOKENS:
        for name, k, n in BERT_BASE:
            out[f"{m}x{k}x{n}"] = {"m": m, "k": k, "n": n, "label": f"BERT-base {name}, {m} tokens",
                                   "studies": m == max(TOKENS)}
    out[f"{SQUARE}x{SQUARE}x{SQUARE}"] = {"m": SQUARE, "k": SQUARE, "n": SQUARE, "label": f"square {SQUARE}",
                                          "studies": False}
    return out


def bf16_round(a: np.ndarray) -> np.ndarray:
    """fp32 values rounded to the nearest bfloat16 (ties to even), still as fp32, so all libraries get the same."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    u = (u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return u.view(np.float32)


def operands(m: int, k: int, n: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """x (m × k) and w (k × n), fixed seed, as fp32 (bf16-representable for bf16)."""
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal(s, dtype=np.float32) for s in ((m, k), (k, n)))
    return (bf16_round(x), bf16_round(w)) if dtype == "bf16" else (x, w)


# --- each library: setup(threads) -> (record fields, make(x, w, dtype) -> (call, to_float64, path_of_first)) ---

def _torch(threads: int, onednn: bool = False):
    import torch
    import torch.nn.functional as F

    apply_threads(threads)  # set once per process: the second runner in it finds it set
    config = torch.__config__.show()
    blas = next((p.split("=", 1)[1] for p in config.replace(",", " ").split() if p.startswith("BLAS_INFO=")), None)
    info = {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "mkldnn": torch.backends.mkldnn.is_available(),
            "mkl": torch.backends.mkl.is_available(), "blas": blas,
            "build": [line.strip(" -") for line in config.splitlines() if line.strip(" -").startswith("Intel")]}
    call_name = "torch.ops.mkldnn._linear_pointwise" if onednn else "F.linear"
    fields = {"library": "PyTorch" + (" through oneDNN's linear" if onednn else ""), "version": torch.__version__,
              "call": call_name, "kernel_library": "oneDNN" if onednn else f"{blas or 'BLAS'} / oneDNN", "info": info}

    def make(x, w, dtype):
        dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
        xt = torch.from_numpy(x).to(dt)
        wt = torch.from_numpy(np.ascontiguousarray(w.T)).to(dt)  # a Linear's weight: (out, in)
        if onednn:
            def call():
                return torch.ops.mkldnn._linear_pointwise(xt, wt, None, "none", [], "")
        else:
            def call():
                return F.linear(xt, wt)

        def first():
            with torch.backends.mkl.verbose(1), torch.backends.mkldnn.verbose(1):
                return call()
        return call, lambda y: y.float().numpy().astype(np.float64), first
    return fields, make


def _tensorflow(threads: int):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    try:
        from tensorflow.python.util import _pywrap_util_port

        onednn = bool(_pywrap_util_port.IsMklEnabled())
    except Exception:  # noqa: BLE001 - an internal module; not knowing is recorded
        onednn = None
    build = {k: v for k, v in tf.sysconfig.get_build_info().items() if k in ("cpu_compiler", "is_cuda_build")}
    fields = {"library": "TensorFlow", "version": tf.__version__, "call": "tf.linalg.matmul in tf.function, .numpy()",
              "kernel_library": {True: "oneDNN", False: "Eigen"}.get(onednn, "oneDNN or Eigen"),
              "info": {"onednn_enabled": onednn, "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
                       **build}}
    matmul = tf.function(tf.linalg.matmul)

    def make(x, w, dtype):
        dt = {"fp32": tf.float32, "bf16": tf.bfloat16}[dtype]
        xt, wt = tf.cast(tf.constant(x), dt), tf.cast(tf.constant(w), dt)

        def call():
            return matmul(xt, wt).numpy()
        return call, lambda y: np.asarray(y).astype(np.float64), call
    return fields, make


def _onnxruntime(threads: int):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    fields = {"library": "ONNX Runtime", "version": ort.__version__, "call": "one-MatMul graph, InferenceSession",
              "kernel_library": "MLAS", "info": {"providers": ort.get_available_providers()}}

    def make(x, w, dtype):
        if dtype != "fp32":
            elem = TensorProto.BFLOAT16
            bits = (np.ascontiguousarray(w).view(np.uint32) >> 16).astype(np.uint16)
            weight = helper.make_tensor("w", elem, w.shape, bits.tobytes(), raw=True)
        else:
            elem, weight = TensorProto.FLOAT, numpy_helper.from_array(w, "w")
        graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "gemm",
                                  [helper.make_tensor_value_info("x", elem, x.shape)],
                                  [helper.make_tensor_value_info("y", elem, (x.shape[0], w.shape[1]))], [weight])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.intra_op_num_threads = threads  # as runtimes.onnxrt sets its sessions
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

        def call():
            return session.run(None, {"x": x})[0]
        return call, lambda y: np.asarray(y).astype(np.float64), call
    return fields, make


def _jax(threads: int):
    cpus = sorted(os.sched_getaffinity(0))
    pinned = threads < len(cpus)
    if pinned:  # XLA:CPU sizes its thread pool from the CPUs the process may use; it has no other setting
        os.sched_setaffinity(0, cpus[:threads])
    from importlib.metadata import version

    import jax
    import jax.numpy as jnp

    fields = {"library": "JAX", "version": jax.__version__, "call": "jax.jit(jnp.matmul), block_until_ready",
              "kernel_library": "XLA:CPU", "info": {"jaxlib": version("jaxlib"), "backend": jax.default_backend(),
                                                    "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
                                                    "threads": f"pinned to {threads} CPUs" if pinned else
                                                    f"all {len(cpus)} CPUs the process may use"}}
    matmul = jax.jit(jnp.matmul)

    def make(x, w, dtype):
        dt = {"fp32": jnp.float32, "bf16": jnp.bfloat16}[dtype]
        xj, wj = jnp.asarray(x, dt), jnp.asarray(w, dt)
        hlo = matmul.lower(xj, wj).compile().as_text()

        def call():
            return matmul(xj, wj).block_until_ready()

        def first():
            y = call()
            print(f"XLA_PATH {hlo_path(hlo, dtype)}")
            return y
        return call, lambda y: np.asarray(y).astype(np.float64), first
    return fields, make


def hlo_path(hlo: str, dtype: str) -> str:
    """What XLA:CPU compiled a matmul to: a oneDNN custom call, or its own dot (and in which precision)."""
    if "onednn" in hlo.lower():
        return "XLA:CPU oneDNN matmul (custom call)"
    upcast = dtype == "bf16" and "f32[" in hlo and "convert(" in hlo
    return "XLA:CPU dot" + (" in fp32 (bf16 operands converted)" if upcast else "")


SETUPS = {"torch": _torch, "torch-onednn": lambda t: _torch(t, onednn=True),
          "tensorflow": _tensorflow, "onnxruntime": _onnxruntime, "jax": _jax}
CHILDREN = {"torch": ("torch", "torch-onednn"), "tensorflow": ("tensorflow",), "onnxruntime": ("onnxruntime",),
            "jax": ("jax",)}  # the runners each library's process measures


def paths(lines: list[str]) -> tuple[list[str], dict]:
    """(code paths, library facts such as oneDNN's ISA) from the kernel libraries' log lines of one call."""
    found, facts = [], {}
    for line in lines:
        parts = line.strip().split(",")
        if line.startswith("onednn_verbose") and len(parts) > 6 and parts[2] == "primitive" and (
                parts[3] == "exec" or parts[3].startswith("create")):
            found.append(f"oneDNN {parts[5]} {parts[6]}" if parts[6] else "oneDNN sgemm")  # gemm_api: its BLAS call
        elif line.startswith("onednn_verbose") and len(parts) > 3 and parts[2] == "info":
            if parts[3].startswith("oneDNN"):
                facts["onednn"] = parts[3].split(" (")[0]
            elif parts[3] == "cpu" and len(parts) > 4 and parts[4].startswith("isa:"):
                facts["onednn_isa"] = parts[4][4:]
        elif line.startswith("MKL_VERBOSE") and "(" in line.split()[1]:
            found.append(f"MKL {line.split()[1].split('(')[0]}")
        elif line.startswith("MKL_VERBOSE"):
            text = line[len("MKL_VERBOSE "):]
            facts["mkl"] = text.split(" Product")[0]
            facts["mkl_dispatch"] = text.split(" architecture ")[-1].split(", Lnx")[0]
        elif line.startswith("XLA_PATH "):
            found.append(line[len("XLA_PATH "):].strip())
    return sorted(set(found)), facts


def measure_runner(key: str, threads: int, budget: float, out: Captured) -> dict:
    """One runner's record: its fields, rates[dtype][shape] (a rate, or a status and message), seconds."""
    started = time.perf_counter()
    try:
        fields, make = SETUPS[key](threads)
    except ImportError as exc:
        return {"status": "not installed", "message": said(exc)}
    except Exception as exc:  # noqa: BLE001 - a library that cannot start is a result
        return {"status": "failed", "message": said(exc)}
    cells = [(d, k, s) for d in DTYPES for k, s in shapes().items()]
    rates: dict[str, dict] = {d: {} for d in DTYPES}
    facts: dict = {}
    for dtype, key_, shape in cells:
        x, w = operands(shape["m"], shape["k"], shape["n"], dtype)
        try:
            call, to_float64, first = make(x, w, dtype)
            out.new_lines()
            y = to_float64(first())
            found, more = paths(out.new_lines())
            facts.update(more)
            rel_err = None
            if shape["m"] <= max(TOKENS):  # the square product's float64 reference would cost most of the check
                reference = x.astype(np.float64) @ w.astype(np.float64)
                rel_err = float(np.max(np.abs(y - reference)) / np.max(np.abs(reference)))
            flops = 2.0 * shape["m"] * shape["k"] * shape["n"]
            rate = rates_.rate(rates_.timed_calls(call, lambda: None, budget / len(cells)), flops, 1e9)
            out.new_lines()  # the timed calls' log lines are not kept
            rates[dtype][key_] = {"gflops": rate.pop("median"), **rate, "rel_err": rel_err, "path": found}
        except Exception as exc:  # noqa: BLE001 - a dtype the library lacks is a result
            status = "unsupported" if "NOT_IMPLEMENTED" in str(exc) or "not supported" in str(exc).lower() \
                else "failed"
            rates[dtype][key_] = {"status": status, "message": said(exc)}
    fields["info"] = {**fields["info"], **facts}
    return {"status": "ok", **fields, "threads": threads, "rates": rates,
            "seconds": time.perf_counter() - started}


def main(argv: list[str]) -> int:
    library, threads, budget = argv[0], int(argv[1]), float(argv[2])
    if library in ("tensorflow", "jax"):
        os.environ.setdefault("ONEDNN_VERBOSE", "1")  # oneDNN reads it once, when it starts
    runners = CHILDREN[library]
    with Captured(1) as out:
        records = {key: measure_runner(key, threads, budget / len(runners), out) for key in runners}
    print(MARK + json.dumps(records), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
