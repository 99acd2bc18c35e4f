"""Why one framework beats another at compute-bound shapes: the GEMM each library runs on this CPU (peaks["gemm"])."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core import numbers, wording
from .gemm import GAP_RATIO as MECHANISM_RATIO
from .gemm import _gemm, gemm_ratio, rate_span, study_cells, study_rates, study_shapes

TEMPLATE = "machine/gemm_why.txt"
NAMES = {"torch": "PyTorch", "torch-onednn": "PyTorch through oneDNN's linear", "tensorflow": "TensorFlow",
         "onnxruntime": "ONNX Runtime", "jax": "JAX"}
TABLE_COLUMNS = ["library", "version", "dtype", "shape", "M×K×N", "GFLOP/s", "95% CI", "code path",
                 "max rel. error", "status"]


def code_path(peaks: dict | None, runner: str, dtype: str) -> str:
    """The code path `runner`'s kernel library reported at the study shapes (its kernel library where none)."""
    cells = study_cells(peaks, runner, dtype)
    found = sorted({p for k in study_shapes(peaks) for p in (cells.get(k) or {}).get("path") or []})
    record = (_gemm(peaks).get("libraries") or {}).get(runner) or {}
    return "; ".join(found) or str(record.get("kernel_library") or "kernel library unknown")


def mechanism(peaks: dict | None, a: str, b: str, dtype: str = "fp32", *, observed: float | None = None,
              what: str | None = None) -> str | None:
    """Whether the gap `observed` (`a` over `b`) follows their GEMMs, in a sentence; None within MECHANISM_RATIO."""
    ratio = gemm_ratio(peaks, a, b, dtype)
    if ratio is None or 1 / MECHANISM_RATIO <= ratio <= MECHANISM_RATIO:
        return None
    g = _gemm(peaks)
    faster, slower = (a, b) if ratio > 1 else (b, a)
    return wording.macro(
        TEMPLATE, "mechanism", cpu=g.get("cpu_model"), flags=", ".join(g.get("cpu_flags") or []) or "flags unknown",
        dtype=dtype, faster=NAMES.get(faster, faster), faster_path=code_path(peaks, faster, dtype),
        faster_span=rate_span(study_rates(peaks, faster, dtype)), slower=NAMES.get(slower, slower),
        slower_path=code_path(peaks, slower, dtype), slower_span=rate_span(study_rates(peaks, slower, dtype)),
        times=ratio if ratio > 1 else 1 / ratio,
        tokens=max((s["m"] for s in (g.get("shapes") or {}).values() if s.get("studies")), default=None),
        observed=observed, what=what, a=NAMES.get(a, a), b=NAMES.get(b, b),
        against=bool(observed) and (observed > 1) != (ratio > 1))


def explain(peaks: dict | None, a: str, b: str, dtype: str = "fp32", **kwargs) -> str:
    """`mechanism`'s sentence where there is one; else why the GEMM path does not explain a gap."""
    said = mechanism(peaks, a, b, dtype, **kwargs)
    if said:
        return said
    ratio = gemm_ratio(peaks, a, b, dtype)
    na, nb = NAMES.get(a, a), NAMES.get(b, b)
    if ratio is None:
        return wording.macro(TEMPLATE, "not_measured", dtype, na, nb)
    return wording.macro(TEMPLATE, "within", dtype, na, nb, MECHANISM_RATIO, rate_span(study_rates(peaks, a, dtype)),
                         rate_span(study_rates(peaks, b, dtype)), ratio)


def _fmt(v, spec: str) -> str:
    return format(v, spec) if isinstance(v, (int, float)) and np.isfinite(v) else ""


def gemm_table(peaks: dict | None, *, studies_only: bool = False) -> pd.DataFrame:
    """One row per library × dtype × shape (`studies_only`: the compared ones), failures with their status."""
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
                ok = "gflops" in cell
                rows.append({"library": name, "version": record.get("version", ""), "dtype": dtype,
                             "shape": (shapes.get(key) or {}).get("label", key), "M×K×N": key.replace("x", "×"),
                             "GFLOP/s": _fmt(cell.get("gflops"), ",.0f"),
                             "95% CI": numbers.fmt_range(cell["ci_low"], cell["ci_high"], ",.0f", collapse=False)
                             if ok else "",
                             "code path": "; ".join(cell.get("path") or []) or (record.get("kernel_library") or ""),
                             "max rel. error": _fmt(cell.get("rel_err"), ".1e"),
                             "status": "ok" if ok else f"{cell.get('status')}: {cell.get('message', '')[:120]}"})
    return pd.DataFrame(rows, columns=TABLE_COLUMNS).fillna("")
