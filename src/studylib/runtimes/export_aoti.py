"""torch.export + AOTInductor (`export-aoti`): the model exported to one graph, compiled ahead of time into a package,
loaded back and called as a deployment calls it.

TorchScript is deprecated from torch 2.11 in favour of `torch.export`; AOTInductor is how an exported program runs
without Python's tracing or a just-in-time compile: `torch.export.export` (step "torch.export"), then
`torch._inductor.aoti_compile_and_package` (Inductor generates the kernels, C++ on a CPU and Triton on CUDA, and a C++
wrapper, compiled into a shared library inside a .pt2 file: step "aoti_compile_and_package"), then
`torch._inductor.aoti_load_package` (step "load"). The call is the loaded package's own `__call__` on the workload's
inputs (its Python layer flattens them, as any caller's would). Each step is a `PrepareStep` (the exported graph's
nodes, the package's bytes), and all three run in `prepare`, so the one-time cost is preparation plus the first call,
as torch.compile's is (there the compile lands in the first call instead).

Cold in every configuration: each compiles with an empty Inductor cache (`context`, as TorchCompiled's) and writes
its package into a directory private to the process (removed at exit), so nothing compiled for an earlier
configuration is reused. Inductor's one-time process start-up (imports, worker pool, toolchain checks) is
torch.compile's, paid once per process, untimed (`warm_up`). The export is static: the package runs the example
inputs' shapes, as each configuration of studies 01 and 02 calls it (a pass over other shapes would need
`dynamic_shapes`). Its family is "export", not "compile": dynamo's counters (graphs, breaks) say nothing about it
(torch.export either gives one graph or fails). On CUDA its C++ wrapper compiles against a CUDA toolkit's headers:
where there is none (a driver-only machine, a container with pip's CUDA libraries only) its rows are skipped rows
naming it (gpu.cuda_toolkit; `make gpu-check` says so before a run).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import itertools
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..machine import gpu
from ..workloads.models import quiet_loggers
from .base import Prepared, PrepareStep, RuntimeUnavailable, device_sync
from .pytorch import TorchCompiled, _fresh_inductor_cache, _Torch

STEPS = ("torch.export", "aoti_compile_and_package", "load")
# notices of the export and the compile (pytree deprecations, torchvision ops skipped, Inductor's tuning hints): not
# results, and a page's error output; a step that fails raises, and its row keeps the message
_NOTICES = ("torch.export", "torch._export", "torch._inductor", "torch._dynamo", "torch.utils._pytree",
            "torch.fx.experimental.symbolic_shapes")

_packages: Path | None = None
_numbers = itertools.count()


class AotiStepError(RuntimeError):
    """A step of export-aoti that raised: which step, the error's type and its first line (the row's message)."""


def package_dir() -> Path:
    """A directory private to this process for the packages it compiles, removed at exit."""
    global _packages
    if _packages is None:
        _packages = Path(tempfile.mkdtemp(prefix="studylib-aoti-"))
        atexit.register(shutil.rmtree, _packages, ignore_errors=True)
    return _packages


def toolchain(device: str = "cpu") -> tuple[Callable, Callable, Callable]:
    """(torch.export.export, aoti_compile_and_package, aoti_load_package), or RuntimeUnavailable saying what this torch
    lacks, that AOTInductor finds no C++ compiler (it compiles the wrapper, and a CPU's kernels, in C++), or, on CUDA,
    no CUDA toolkit (gpu.cuda_toolkit)."""
    import torch._inductor  # binds torch too

    export = getattr(getattr(torch, "export", None), "export", None)
    aoti_compile_and_package = getattr(torch._inductor, "aoti_compile_and_package", None)
    aoti_load_package = getattr(torch._inductor, "aoti_load_package", None)
    missing = [name for name, f in (("torch.export.export", export), ("torch._inductor.aoti_compile_and_package",
                                                                      aoti_compile_and_package),
                                    ("torch._inductor.aoti_load_package", aoti_load_package)) if f is None]
    if missing:
        raise RuntimeUnavailable(f"torch {torch.__version__} has no {', '.join(missing)} (torch.export and "
                                 f"AOTInductor's packages: torch 2.6 on)")
    from torch._inductor import config, cpp_builder

    try:
        cpp_builder.get_cpp_compiler()
    except Exception as exc:  # noqa: BLE001 - whatever the search raised, the row says no compiler was found
        cxx = config.cpp.cxx if isinstance(config.cpp.cxx, (list, tuple)) else [config.cpp.cxx]
        searched = ", ".join(str(c) for c in cxx if c) or "none"
        raise RuntimeUnavailable(f"AOTInductor compiles C++ and finds no C++ compiler here (searched: {searched}; "
                                 f"set CXX or install g++): {type(exc).__name__}") from None
    if device == "cuda":
        home, why = gpu.cuda_toolkit()
        if home is None:
            raise RuntimeUnavailable(why)
    return export, aoti_compile_and_package, aoti_load_package


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:240] if lines else ""


def timed_step(step: str, make: Callable[[], Any]) -> tuple[Any, float]:
    """(what `make()` returns, seconds it took); an error other than running out of memory becomes AotiStepError
    naming the step, so the row says which of the three failed."""
    t0 = time.perf_counter()
    try:
        out = make()
    except (MemoryError, RuntimeUnavailable):
        raise
    except Exception as exc:
        raise AotiStepError(f"{step} failed: {type(exc).__name__}: {_first_line(exc)}") from exc
    return out, time.perf_counter() - t0


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings(), quiet_loggers(*_NOTICES):
        for category in (FutureWarning, UserWarning, DeprecationWarning):
            warnings.simplefilter("ignore", category)
        yield


class ExportAOTI(_Torch):
    """torch.export + AOTInductor, cold per configuration (see the module's docstring)."""

    name = "export-aoti"
    family = "export"
    copies_weights = True  # the package holds the weights as constants

    def warm_up(self) -> float:
        """Inductor's process start-up, shared with torch.compile (whichever runs first pays it, untimed)."""
        return TorchCompiled("default").warm_up()

    def context(self):
        stack = contextlib.ExitStack()
        stack.enter_context(super().context())
        stack.enter_context(_fresh_inductor_cache())
        return stack

    def prepare(self, workload) -> Prepared:
        import torch

        export, compile_package, load_package = toolchain(workload.device)
        module, inputs = workload.module, workload.inputs
        path = package_dir() / f"{next(_numbers)}-{workload.model_name}.pt2"
        # exported and compiled as a deployment does it: outside the inference mode the timing holds, gradients off
        with _quiet(), torch.inference_mode(False), torch.no_grad():
            with contextlib.redirect_stderr(io.StringIO()):  # the partial graph torch prints when an export fails
                program, export_s = timed_step("torch.export", lambda: export(module, inputs))
            _, compile_s = timed_step("aoti_compile_and_package",
                                      lambda: compile_package(program, package_path=str(path)))
            loaded, load_s = timed_step("load", lambda: load_package(str(path)))
        nodes, size = len(program.graph.nodes), path.stat().st_size
        path.unlink()  # loaded: the loader holds what it extracted; a process of many configurations keeps no copies
        steps = [PrepareStep("torch.export", export_s, False, nodes=nodes),
                 PrepareStep("aoti_compile_and_package", compile_s, False, bytes=size),
                 PrepareStep("load", load_s, False)]
        notes = (f"torch.export {export_s:.2f} s ({nodes} graph nodes); AOTInductor compile {compile_s:.1f} s "
                 f"(package {size / 1e6:.3g} MB); load {load_s:.2f} s; static shapes, cold Inductor cache")
        return Prepared(loaded, inputs, device_sync(workload.device), notes, steps=steps)

    @staticmethod
    def to_numpy(output):
        if isinstance(output, (list, tuple)):  # a package returns its graph's outputs as the module did: one tensor
            output = output[0]
        return _Torch.to_numpy(output)
