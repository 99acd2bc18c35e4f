"""torch.export + AOTInductor (`export-aoti`): exported, compiled and loaded in `prepare`, a PrepareStep each."""

from __future__ import annotations

import contextlib
import io
import itertools
import time
import warnings
from collections.abc import Callable
from typing import Any

from ..core.errors import said
from ..machine import gpu
from ..workloads.models import quiet_loggers
from .base import Prepared, PrepareStep, RuntimeUnavailable, device_sync, private_dir, registered
from .pytorch import TorchCompiled, _Torch, fresh_inductor_cache

STEPS = ("torch.export", "aoti_compile_and_package", "load")
# loggers silenced in the export and compile (not results); a failing step raises
_NOTICES = ("torch.export", "torch._export", "torch._inductor", "torch._dynamo", "torch.utils._pytree",
            "torch.fx.experimental.symbolic_shapes")

PACKAGES = "studylib-aoti-"  # private_dir's prefix for the packages this process compiles
_numbers = itertools.count()


class AotiStepError(RuntimeError):
    """A step of export-aoti that raised: which step, the error's type and its first line (the row's message)."""


def toolchain(device: str = "cpu") -> tuple[Callable, Callable, Callable]:
    """(export, aoti_compile_and_package, aoti_load_package); raises RuntimeUnavailable naming what is missing."""
    import torch._inductor  # binds torch too

    found = {"torch.export.export": getattr(getattr(torch, "export", None), "export", None),
             "torch._inductor.aoti_compile_and_package": getattr(torch._inductor, "aoti_compile_and_package", None),
             "torch._inductor.aoti_load_package": getattr(torch._inductor, "aoti_load_package", None)}
    missing = [name for name, f in found.items() if f is None]
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
    return tuple(found.values())


def timed_step(step: str, make: Callable[[], Any]) -> tuple[Any, float]:
    """(what `make()` returns, seconds); an error but out-of-memory becomes AotiStepError naming the step."""
    t0 = time.perf_counter()
    try:
        out = make()
    except (MemoryError, RuntimeUnavailable):
        raise
    except Exception as exc:
        raise AotiStepError(f"{step} failed: {said(exc)}") from exc
    return out, time.perf_counter() - t0


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings(), quiet_loggers(*_NOTICES):
        for category in (FutureWarning, UserWarning, DeprecationWarning):
            warnings.simplefilter("ignore", category)
        yield


class ExportAOTI(_Torch):
    """torch.export + AOTInductor, cold per configuration."""

    name = "export-aoti"
    family = "export"
    copies_weights = True  # the package holds the weights as constants

    def warm_up(self) -> float:
        """Inductor's process start-up, shared with torch.compile (whichever runs first pays it, untimed)."""
        return TorchCompiled("default").warm_up()

    def context(self):
        stack = contextlib.ExitStack()
        stack.enter_context(super().context())
        stack.enter_context(fresh_inductor_cache())
        return stack

    def prepare(self, workload) -> Prepared:
        import torch

        export, compile_package, load_package = toolchain(workload.device)
        module, inputs = workload.module, workload.inputs
        path = private_dir(PACKAGES) / f"{next(_numbers)}-{workload.model_name}.pt2"
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


RUNTIMES = [registered(ExportAOTI(), "torch.export, then AOTInductor (aoti_compile_and_package): the model compiled "
                       "ahead of time into a package, loaded and called; TorchScript's successor for deployment (cold "
                       "compile per configuration)", "PuBuGn", "01 02")]
