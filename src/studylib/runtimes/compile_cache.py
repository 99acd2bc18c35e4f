"""torch.compile from the cache an earlier process saved (`<cache_dir>/compile/<key>.bin`), with hit counters."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.files import write_bytes_atomic
from .base import Prepared, Runtime, short_hash

FOLDER = "compile"
_written: set[str] = set()  # the files this process wrote: one read back is not from an earlier process


def recording():
    """A context in which torch.compile records its cache artifacts afresh (a no-op on a torch without it)."""
    try:
        from torch.compiler._cache import CacheArtifactManager
    except ImportError:
        return contextlib.nullcontext()
    fresh = getattr(CacheArtifactManager, "with_fresh_cache", None)
    return fresh() if fresh is not None else contextlib.nullcontext()


def saved() -> bytes | None:
    """The cache artifacts compiled in the current recording, serialized (None: nothing, or this torch cannot)."""
    import torch

    save = getattr(torch.compiler, "save_cache_artifacts", None)
    out = save() if save is not None else None
    return out[0] if out else None


def path(cache_dir: Path | str, config_key: str, mode: str) -> Path:
    """Where a configuration's saved artifacts are kept: `<cache_dir>/compile/<key>.bin`."""
    import torch

    key = short_hash({"config": config_key, "torch": torch.__version__, "mode": mode})
    return Path(cache_dir) / FOLDER / f"{key}.bin"


def write(file: Path, artifacts: bytes) -> None:
    """Replace `file` with `artifacts`, atomically."""
    write_bytes_atomic(file, artifacts)
    _written.add(str(file))


def from_this_process(file: Path) -> bool:
    """Whether this process wrote `file` (an in-process run's replicates share one process)."""
    return str(file) in _written


def lookups() -> dict[str, int]:
    """This process's running hits and misses (bypasses as misses) of the FX graph and AOTAutograd caches."""
    from torch._dynamo.utils import counters

    fx, aot = counters["inductor"], counters["aot_autograd"]
    return {"hits": int(fx["fxgraph_cache_hit"] + aot["autograd_cache_hit"]),
            "misses": int(fx["fxgraph_cache_miss"] + fx["fxgraph_cache_bypass"] + aot["autograd_cache_miss"]
                          + aot["autograd_cache_bypass"])}


@dataclass
class WarmCompile:
    """A compile from saved artifacts: its first output (as `first_call` returned it), what it took, the lookups."""

    output: Any
    prepare_s: float  # loading the artifacts into the empty cache, and the runtime's preparation (torch.compile)
    first_call_s: float
    hits: int
    misses: int
    loaded: int  # artifacts the file held


def warm_compile(runtime: Runtime, workload, artifacts: bytes,
                 first_call: Callable[[Prepared], tuple[Any, float]]) -> WarmCompile | None:
    """`runtime` compiled again from `artifacts` in an empty cache, prepared and first called; None if nothing loads."""
    import torch

    with runtime.context():
        torch._dynamo.reset()
        t0 = time.perf_counter()
        info = torch.compiler.load_cache_artifacts(artifacts)
        if info is None or info.empty():
            return None
        before = lookups()
        prepared = runtime.prepare(workload)
        prepare_s = time.perf_counter() - t0
        output, first_call_s = first_call(prepared)
        after = lookups()
    torch._dynamo.reset()
    return WarmCompile(output, prepare_s, first_call_s, after["hits"] - before["hits"],
                       after["misses"] - before["misses"], sum(len(v) for v in info.artifacts.values()))
