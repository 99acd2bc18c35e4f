"""ONNX Runtime's GPU providers: the CUDA provider's options and TensorRT's caches and optimization profile.

Nothing here has run on a GPU yet (no GPU while this was written); tests check the options built (test_gpu.py).
"""

from __future__ import annotations

from pathlib import Path


def cuda_provider_options() -> dict[str, str]:
    """The CUDA provider's options: the process's precision policy (use_tf32) and an arena grown by what a call
    asks for (gpu.ort_cuda_options)."""
    from ..machine.gpu import current_precision, ort_cuda_options

    return ort_cuda_options(current_precision())


def session_inputs(path: Path) -> list[tuple[str, int]]:
    """(name, rank) of each input of the ONNX graph, read without a session."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    return [(i.name, len(i.type.tensor_type.shape.dim)) for i in graph.input if i.name not in initializers]


def tensorrt_options(workload, cache_dir: Path | str, inputs: list[tuple[str, int]]) -> dict:
    """The TensorRT provider's options: fp16 where the configuration is, engine and timing caches under the
    profile's cache (outputs/<profile>/cache/tensorrt: a later session, replicate or run with the same graph and
    shapes loads its engine instead of building it), and one optimization profile from the grid's shape: batch and
    sequence from 1 up to the configuration's (its batch size and sequence length, or maximum length in the
    data-set studies, Workload.max_shape), optimized for that largest shape. TF32 follows the precision policy
    through NVIDIA_TF32_OVERRIDE (gpu.py), which TensorRT honours."""
    batch, seq = workload.max_shape or (workload.batch_size, workload.seq_len)
    trt_dir = Path(workload.cache_dir or cache_dir) / "tensorrt"  # outputs/<profile>/cache/tensorrt in a run
    trt_dir.mkdir(parents=True, exist_ok=True)

    def shape(b: int, s: int | None) -> str:
        return ",".join(f"{name}:{b}" + (f"x{s}" if rank >= 2 and s is not None else "") for name, rank in inputs
                        if rank <= 2)  # image inputs keep their fixed shape (no profile needed beyond the batch)

    options = {"trt_fp16_enable": workload.dtype == "fp16", "trt_engine_cache_enable": True,
               "trt_engine_cache_path": str(trt_dir), "trt_timing_cache_enable": True,
               "trt_timing_cache_path": str(trt_dir)}
    if workload.kind == "text":
        options |= {"trt_profile_min_shapes": shape(1, 1), "trt_profile_opt_shapes": shape(batch, seq),
                    "trt_profile_max_shapes": shape(batch, seq)}
    return options
