"""Why one framework beats another at compute-bound shapes: the GEMM each library runs on this CPU.

Reads the per-library GEMM record of the machine's limits (peaks["gemm"], machine/gemm.py): `gemm_table` lays
every library's figures out for a page, `gemm_ratio` compares two libraries at the studies' compute-bound shapes
(BERT-base's linear layers at the most tokens), and `mechanism` says in one sentence, with the record's numbers,
that the difference follows the GEMM path, where the two differ by more than MECHANISM_RATIO.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core import numbers

# the ratio and rates live with the record (machine/gemm.py), where the claims layer reads them too
from .gemm import GAP_RATIO as MECHANISM_RATIO
from .gemm import _gemm, gemm_ratio, study_rates, study_shapes  # noqa: F401 - gemm_ratio: re-exported
from .gemm import rate_span as _span
from .gemm import study_cells as _cells

NAMES = {"torch": "PyTorch", "torch-onednn": "PyTorch through oneDNN's linear", "tensorflow": "TensorFlow",
         "onnxruntime": "ONNX Runtime", "jax": "JAX"}
TABLE_COLUMNS = ["library", "version", "dtype", "shape", "M×K×N", "GFLOP/s", "95% CI", "code path",
                 "max rel. error", "status"]


def code_path(peaks: dict | None, runner: str, dtype: str) -> str:
    """The code path `runner`'s kernel library reported at the study shapes (its kernel library where none)."""
    cells = _cells(peaks, runner, dtype)
    found = sorted({p for k in study_shapes(peaks) for p in (cells.get(k) or {}).get("path") or []})
    record = (_gemm(peaks).get("libraries") or {}).get(runner) or {}
    return "; ".join(found) or str(record.get("kernel_library") or "kernel library unknown")


def mechanism(peaks: dict | None, a: str, b: str, dtype: str = "fp32", *, observed: float | None = None,
              what: str | None = None) -> str | None:
    """One plain sentence, numbers from the record: `a`'s and `b`'s GEMM on this CPU at BERT-base's shapes, and
    that a framework gap (`observed`: `a` over `b`, `what`: its words, e.g. "tf.function over eager PyTorch")
    follows that path and holds for this CPU.
    None where the two are within MECHANISM_RATIO of each other or either was not measured."""
    ratio = gemm_ratio(peaks, a, b, dtype)
    if ratio is None or 1 / MECHANISM_RATIO <= ratio <= MECHANISM_RATIO:
        return None
    g = _gemm(peaks)
    flags = ", ".join(g.get("cpu_flags") or []) or "flags unknown"
    cpu = f"{g['cpu_model']}; " if g.get("cpu_model") else ""
    tokens = max((s["m"] for k, s in (g.get("shapes") or {}).items() if s.get("studies")), default=None)
    shapes = "BERT-base's linear layers" + (f" at {tokens} tokens" if tokens else "")
    faster, slower = (a, b) if ratio > 1 else (b, a)
    times = ratio if ratio > 1 else 1 / ratio
    gap = (f"the {numbers.fmt(observed)} of {what or f'{NAMES.get(a, a)} over {NAMES.get(b, b)}'}" if observed
           else f"a gap between {NAMES.get(a, a)} and {NAMES.get(b, b)} at compute-bound shapes")
    opening = (f"On this CPU ({cpu}{flags}), the {dtype} GEMM of {NAMES.get(faster, faster)} "
               f"({code_path(peaks, faster, dtype)}) reaches {_span(study_rates(peaks, faster, dtype))} GFLOP/s at "
               f"{shapes} and that of {NAMES.get(slower, slower)} ({code_path(peaks, slower, dtype)}) "
               f"{_span(study_rates(peaks, slower, dtype))} GFLOP/s, {numbers.fmt(times)} as fast")
    if observed and (observed > 1) != (ratio > 1):
        return f"{opening}: {gap} goes the other way, so it does not come from the GEMM."
    return (f"{opening}: {gap} follows the GEMM path each library takes, and holds for this CPU; another CPU can "
            f"give both libraries the same path.")


def explain(peaks: dict | None, a: str, b: str, dtype: str = "fp32", **kwargs) -> str:
    """`mechanism`'s sentence where there is one; else one sentence saying the two GEMMs are within
    MECHANISM_RATIO (with the ratio) or were not both measured."""
    said = mechanism(peaks, a, b, dtype, **kwargs)
    if said:
        return said
    ratio = gemm_ratio(peaks, a, b, dtype)
    na, nb = NAMES.get(a, a), NAMES.get(b, b)
    if ratio is None:
        return (f"The {dtype} GEMMs of {na} and {nb} were not both measured with this machine's limits, "
                f"so this page cannot say whether the GEMM path explains a gap between them.")
    return (f"On this CPU the {dtype} GEMMs of {na} and {nb} are within {numbers.fmt_factor(MECHANISM_RATIO)} of each other at "
            f"BERT-base's shapes ({na} {_span(study_rates(peaks, a, dtype))}, {nb} {_span(study_rates(peaks, b, dtype))} "
            f"GFLOP/s; {numbers.fmt(ratio)}): the GEMM path does not explain a larger gap between them.")


def _fmt(v, spec: str) -> str:
    return format(v, spec) if isinstance(v, (int, float)) and np.isfinite(v) else ""


def gemm_table(peaks: dict | None, *, studies_only: bool = False) -> pd.DataFrame:
    """Every library's GEMM figures per dtype and shape, for a page: one row per library × dtype × shape (only
    the compute-bound study shapes with `studies_only`), a library or a cell that did not run keeps a row with its
    status and message. Empty where none was measured."""
    g = _gemm(peaks)
    shapes = g.get("shapes") or {}
    keep = set(study_shapes(peaks)) if studies_only else set(shapes)
    rows = []
    for runner, record in (g.get("libraries") or {}).items():
        name = NAMES.get(runner, runner)
        if record.get("status") != "ok":
            rows.append({"library": name, "status": f"{record.get('status')}: {record.get('message', '')}"})
            continue
        for dtype, cells in (record.get("rates") or {}).items():
            for key, cell in cells.items():
                if key not in keep:
                    continue
                s = shapes.get(key) or {}
                ok = "gflops" in cell
                rows.append({"library": name, "version": record.get("version", ""), "dtype": dtype,
                             "shape": s.get("label", key), "M×K×N": key.replace("x", "×"),
                             "GFLOP/s": _fmt(cell.get("gflops"), ",.0f"),
                             "95% CI": numbers.fmt_range(cell["ci_low"], cell["ci_high"], ",.0f", collapse=False) if ok else "",
                             "code path": "; ".join(cell.get("path") or []) or (record.get("kernel_library") or ""),
                             "max rel. error": _fmt(cell.get("rel_err"), ".1e"),
                             "status": "ok" if ok else f"{cell.get('status')}: {cell.get('message', '')[:120]}"})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS).fillna("")
