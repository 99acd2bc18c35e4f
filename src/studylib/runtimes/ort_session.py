"""An ONNX Runtime session as the call a runtime times (`OrtCall`), its options, and its profiler's op totals."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..core.wording import say
from ..machine.profiling import top_ops
from .base import device_sync

OUTPUT_NAME = "output"  # the exported graph's one output (onnxrt's export names it)


def session_options(ort, threads: int, profile_prefix: str | None = None):
    """Every session's options: ORT_ENABLE_ALL, sequential, one inter-op and `threads` intra-op threads, profiler."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return options


def profile_totals(events: list[dict], after_runs: int | None = None) -> tuple[dict[str, list[float]], int]:
    """({op type: [self seconds, node runs]}, model runs counted) over the runs after `after_runs` (default: half)."""
    starts = sorted(e["ts"] for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    skip = len(starts) // 2 if after_runs is None else after_runs
    since = starts[skip] if skip < len(starts) else float("-inf") if not starts else float("inf")
    totals: dict[str, list[float]] = {}
    for e in events:
        if e.get("cat") != "Node" or not str(e.get("name", "")).endswith("_kernel_time") or e.get("ts", 0) < since:
            continue
        op = (e.get("args") or {}).get("op_name") or e["name"].removesuffix("_kernel_time")
        t = totals.setdefault(op, [0.0, 0])
        t[0] += e.get("dur", 0) / 1e6
        t[1] += 1
    return totals, len(starts) - skip


class OrtCall:
    """Runs an InferenceSession once (numpy on CPU, IO binding on CUDA); `make_session` rebuilds it for `profile`."""

    def __init__(self, session, input_names: list[str], device: str, make_session: Callable | None = None):
        self.session, self.input_names, self.device = session, input_names, device
        self.binding = session.io_binding() if device == "cuda" else None
        self.make_session = make_session
        self._device_sync = device_sync(device)

    def profile(self, call: Callable[[], object], top: int = 10) -> tuple[list[dict] | None, str]:
        """`call` profiled by ONNX Runtime on a profiling session: the top op types by kernel time, and a note."""
        if self.make_session is None:
            return None, "not profiled: this session cannot be rebuilt with ONNX Runtime's profiler on"
        tmp = Path(tempfile.mkdtemp(prefix="studylib-ort-profile-"))
        try:
            session = self.make_session(str(tmp / "ort"))
            timed = self.session, self.binding
            self.session, self.binding = session, session.io_binding() if self.device == "cuda" else None
            try:
                call()  # the new session's first run allocates its buffers: not what the timed session does
                t0 = time.perf_counter()
                call()
                wall = time.perf_counter() - t0
            finally:
                self.session, self.binding = timed
            events = json.loads(Path(session.end_profiling()).read_text())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        totals, runs = profile_totals(events)
        ops = top_ops(totals, top)
        return ops, say("runtimes/ort_profile.md", wall_ms=wall * 1e3, kernel_ms=sum(v[0] for v in totals.values()) * 1e3,
                        op_types=len(totals), runs=runs, shown=len(ops))

    on_first_call: Callable[[float], object] | None = None  # told the first call's seconds (a TensorRT engine build)

    def __call__(self, *inputs):
        if self.on_first_call is not None:
            hook, self.on_first_call = self.on_first_call, None
            t0 = time.perf_counter()
            out = self(*inputs)
            if self.binding is not None:
                self.sync()
            hook(time.perf_counter() - t0)
            return out
        if self.binding is None:
            return self.session.run([OUTPUT_NAME], dict(zip(self.input_names, inputs)))[0]
        for name, value in zip(self.input_names, inputs):
            self.binding.bind_ortvalue_input(name, value)
        self.binding.bind_output(OUTPUT_NAME, "cuda", 0)  # a fresh output on the GPU, as PyTorch allocates one
        self.session.run_with_iobinding(self.binding)
        return self.binding.get_outputs()[0]

    def sync(self):
        """The one device synchronize every framework's rows wait with (base.device_sync), not the binding's own."""
        if self._device_sync is not None:  # None inside base.sync_removed (a test hook)
            self._device_sync()
