"""The warm compile: each torch.compile configuration compiled again from an earlier process's cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..core import cells
from ..core.config import is_aa
from ..core.errors import said
from ..runtimes import compile_cache
from ..runtimes.base import synced
from ..stats.measurement import MEASURED_COLUMNS
from .timing import first_call

WARM_COLUMNS = tuple(c for c in MEASURED_COLUMNS if c.startswith("warm_"))
NO_CACHE_DIR = "warm compile not measured: no cache directory to keep the compile cache between processes"
NO_FILE = "no compile cache from an earlier process yet (this process saved one)"


def applies(runtime, variant: str) -> bool:
    """Whether a configuration gets a warm compile: a torch.compile variant (family 'compile'), not an A/A copy."""
    return runtime.family == "compile" and not is_aa(variant)


def artifacts(runtime, variant: str) -> bytes | None:
    """The cache artifacts of the configuration's cold compile, just made; None where none applies or was saved."""
    if not applies(runtime, variant):
        return None
    try:
        return compile_cache.saved()
    except Exception:  # noqa: BLE001 - a cache that cannot be saved is a note (measure), never a lost row
        return None


def measure(ready: list, workloads, plan, parity: Callable[..., dict[str, Any]]) -> None:
    """Each compiled configuration's warm compile into its row, then its cold artifacts saved for the next process."""
    for p in ready:
        if not applies(p.runtime, p.config.variant) or p.row["status"] != "ok":
            continue
        row = p.row
        if getattr(p.workload, "cache_dir", None) is None:
            row["warm_note"] = NO_CACHE_DIR
            continue
        file = compile_cache.path(p.workload.cache_dir, p.config.key, p.runtime.mode)
        try:
            notes = _warm(p, file, workloads, plan.tolerance(p.config), parity)
        except Exception as exc:  # noqa: BLE001 - a failed warm compile is a note on a measured row
            notes = [f"warm compile failed: {said(exc)}"[:300]]
        if p.artifacts:
            try:
                compile_cache.write(file, p.artifacts)
            except OSError as exc:
                notes.append(f"compile cache not saved for the next process: {exc}"[:200])
        else:
            notes.append("the cold compile left no cache artifacts to save for the next process")
        row["warm_note"] = "; ".join(notes)
        p.artifacts = None  # written: let go of them


def _warm(p, file, workloads, tolerance: float, parity) -> list[str]:
    """One configuration's warm compile into its row; its notes."""
    if not file.is_file():
        return [NO_FILE]
    c, w, runtime = p.config, p.workload, p.runtime

    def timed_first_call(prepared) -> tuple[Any, float]:
        call = synced(workloads.timed_call(prepared, c, w), prepared.sync)
        out, seconds = first_call(workloads.first_call(prepared, c, w, runtime, call))
        return workloads.as_array(out, runtime, c), seconds

    warm = compile_cache.warm_compile(runtime, w, file.read_bytes(), timed_first_call)
    if warm is None:
        return [f"the compile cache file {file.name} loaded nothing (unreadable): no warm compile"]
    check = parity(warm.output, workloads.reference(c), tolerance)
    p.row.update(warm_cache_hits=warm.hits, warm_cache_misses=warm.misses, warm_max_abs_diff=check["max_abs_diff"])
    notes = []
    if compile_cache.from_this_process(file):
        notes.append("the cache was saved by this same process (an in-process run), not an earlier one")
    if warm.misses or not warm.hits:
        notes.append(f"not warm: the compile missed the cache {warm.misses} time(s), hit it {warm.hits} "
                     f"(first call {warm.first_call_s:.2f} s, not reported as warm)")
    else:
        p.row.update(warm_prepare_s=warm.prepare_s, warm_first_call_s=warm.first_call_s)
    if not check["parity_ok"]:
        notes.append(f"the warm compile's output differs from eager: max abs diff {check['max_abs_diff']:.2e} "
                     f"above {check['parity_tol']:.2e}")
    return notes


def combined(reps: list[dict]) -> dict[str, Any]:
    """The warm columns over replicates: timings' medians, hits and misses summed, the largest difference, notes once."""
    def median(values):
        return float(np.median(values))

    def total(values):
        return int(sum(values))

    out: dict[str, Any] = {}
    for key, pick in (("warm_prepare_s", median), ("warm_first_call_s", median), ("warm_cache_hits", total),
                      ("warm_cache_misses", total), ("warm_max_abs_diff", max)):
        values = [r[key] for r in reps if cells.value(r.get(key)) is not None]
        out[key] = pick(values) if values else None
    notes = [n for r in reps for n in str(r.get("warm_note") or "").split("; ") if n]
    out["warm_note"] = "; ".join(dict.fromkeys(notes)) or None
    return out
