"""ONNX Runtime's TensorRT provider: its options (engine caches, one profile) and its engine build as a step."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .base import PrepareStep

ENGINE_STEP = "tensorrt engine"
ENGINE_RECORD = "build.json"  # beside the engines: the seconds their build took, written when they were built


def session_inputs(path: Path) -> list[tuple[str, int]]:
    """(name, rank) of each input of the ONNX graph, read without a session."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    return [(i.name, len(i.type.tensor_type.shape.dim)) for i in graph.input if i.name not in initializers]


def tensorrt_options(workload, model_dir: Path | str, inputs: list[tuple[str, int]]) -> dict:
    """The TensorRT provider's options: fp16 as configured, caches, and (text) one profile up to Workload.max_shape."""
    batch, seq = workload.max_shape or (workload.batch_size, workload.seq_len)
    engines = Path(model_dir) / "trt" / (f"b{batch}" + (f"s{seq}" if seq is not None else ""))  # one per profile
    engines.mkdir(parents=True, exist_ok=True)

    def shape(b: int, s: int | None) -> str:
        return ",".join(f"{name}:{b}" + (f"x{s}" if rank >= 2 and s is not None else "") for name, rank in inputs
                        if rank <= 2)  # image inputs keep their fixed shape (no profile needed beyond the batch)

    options = {"trt_fp16_enable": workload.dtype == "fp16", "trt_engine_cache_enable": True,
               "trt_engine_cache_path": str(engines), "trt_timing_cache_enable": True,
               "trt_timing_cache_path": str(engines.parent)}
    if workload.kind == "text":
        options |= {"trt_profile_min_shapes": shape(1, 1), "trt_profile_opt_shapes": shape(batch, seq),
                    "trt_profile_max_shapes": shape(batch, seq)}
    return options


def engine_files(engines: Path) -> list[Path]:
    return sorted(Path(engines).glob("*.engine"))


class EngineBuild:
    """TensorRT's engine build as a cache-aware prepare step, its seconds kept in `ENGINE_RECORD`."""

    def __init__(self, engines: Path | str):
        self.engines = Path(engines)
        record = self.engines / ENGINE_RECORD
        self.cached = bool(engine_files(self.engines)) and record.is_file()
        self.made_s = float(json.loads(record.read_text())["seconds"]) if self.cached else None

    def _size(self) -> int:
        return sum(f.stat().st_size for f in engine_files(self.engines))

    def _made(self, seconds: float, where: str) -> PrepareStep:
        (self.engines / ENGINE_RECORD).write_text(json.dumps({"seconds": seconds, "built_in": where,
                                                              "made_at": time.time()}))
        return PrepareStep(ENGINE_STEP, seconds, False, self.engines.name, bytes=self._size())

    def after_session(self, session_s: float) -> PrepareStep | None:
        """The step once the session is made in `session_s`: cached, built now, or None (the first call builds it)."""
        if self.cached:
            return PrepareStep(ENGINE_STEP, self.made_s, True, self.engines.name, bytes=self._size())
        return self._made(session_s, "session") if engine_files(self.engines) else None

    def after_first_call(self, seconds: float) -> PrepareStep | None:
        """The step when the first call built the engine (`seconds`: that call), or None where it wrote none."""
        return self._made(seconds, "first call") if engine_files(self.engines) else None
