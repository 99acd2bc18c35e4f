"""`quick.compare({"mine": fast, "eager": slow})`: your callables in interleaved rounds, decided as the pages decide."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .bench.timing import first_call, measure_rounds, row_statistics
from .core import numbers, wording
from .stats import speedups
from .stats.verdicts import VerdictTable, compute

STUDY = "quick"
WORKLOAD = {"study": STUDY, "profile": STUDY, "model": "yours", "dtype": "fp32", "batch_size": 1, "seq_len": None,
            "image_size": None, "task": "text", "group_id": STUDY, "prepare_s": 0.0}


def _array(out: Any) -> np.ndarray | None:
    """An output as a float64 array (torch and TF tensors, numpy, numbers); None when it is not one."""
    for get in (lambda o: o.detach().float().cpu().numpy(), lambda o: o.numpy(), lambda o: o):
        try:
            a = np.asarray(get(out), dtype="float64")
        except Exception:  # noqa: BLE001 - not this kind of output: try the next
            continue
        if a.dtype.kind == "f":
            return a
    return None


def _max_abs_diff(out: Any, ref: Any) -> float | None:
    a, b = _array(out), _array(ref)
    if a is None or b is None or a.shape != b.shape:
        return None
    return float(np.max(np.abs(a - b))) if a.size else 0.0


@dataclass
class Result:
    """What `compare` measured: the verdict table (one verdict per option over the baseline) and the raw rows."""

    verdicts: VerdictTable
    rows: pd.DataFrame
    baseline: str

    def table(self) -> pd.DataFrame:
        """One line per callable: median, first call, output difference, decision with speed-up and 95% CI."""
        by = {v.candidate: v for v in self.verdicts.options()}
        out = []
        for r in self.rows.itertuples():
            v = by.get(r.variant)
            out.append({"callable": r.variant,
                        "median per call": numbers.fmt_seconds(r.median_s) if r.status == "ok" else "",
                        "first call": numbers.fmt_seconds(r.first_call_s) if r.status == "ok" else "",
                        "max abs diff vs baseline": "" if pd.isna(r.max_abs_diff) else f"{r.max_abs_diff:.2e}",
                        "decision": "baseline" if r.variant == self.baseline else
                        (v.decision if v is not None and v.ok else f"{r.status}: {r.error}"),
                        "speed-up (95% CI)": numbers.fmt(v.speedup, v.ci_low, v.ci_high) if v is not None and v.ok
                        else ""})
        return pd.DataFrame(out)

    def __str__(self) -> str:
        return self.table().to_string(index=False)

    def _repr_html_(self) -> str:
        band = (self.verdicts.rows[0].band if len(self.verdicts) else speedups.EQUIVALENCE) - 1
        return self.table().to_html(index=False, escape=True) + wording.block("quick/rule.html", band=band,
                                                                               baseline=self.baseline)


def compare(calls: dict[str, Callable[[], Any]], *, baseline: str | None = None, replicates: int = 3,
            budget_s: float = 5.0, min_rounds: int = 10, warmup_calls: int = 2, seed: int = 0,
            sync: Callable[[], Any] | None = None, rtol: float = 1e-3,
            clock: Callable[[], float] = time.perf_counter) -> Result:
    """Time `calls` ({name: callable()}) against `baseline`; parity within `rtol`; `sync` waits for a device."""
    if len(calls) < 2 or not all(callable(f) for f in calls.values()):
        raise ValueError("compare needs at least two callables, as {name: callable}")
    baseline = baseline or ("eager" if "eager" in calls else next(iter(calls)))
    if baseline not in calls:
        raise ValueError(f"baseline {baseline!r} is not one of {list(calls)}")
    if any(n.endswith("-aa") for n in calls):
        raise ValueError("names ending in '-aa' are kept for the A/A copy of the baseline")
    if replicates < 1 or budget_s <= 0:
        raise ValueError("replicates must be at least 1 and budget_s positive")

    timed = {n: f if sync is None else (lambda f=f: (f(), sync())[0])
             for n, f in (calls | {f"{baseline}-aa": calls[baseline]}).items()}
    rows = {n: WORKLOAD | {"variant": n, "config_key": n, "status": "ok", "error": "", "samples_s": [],
                           "sample_rep": [], "sample_round": []} for n in timed}
    outputs = {}
    for n, f in timed.items():
        try:
            outputs[n], rows[n]["first_call_s"] = first_call(f, clock=clock)
        except Exception as exc:  # noqa: BLE001 - a failure is a result
            rows[n].update(status="error", error=f"{type(exc).__name__}: {exc}")
    live = {n: f for n, f in timed.items() if rows[n]["status"] == "ok"}
    for rep in range(replicates):
        r = measure_rounds(live, baseline=baseline if baseline in live else None, seed=seed * 1000 + rep,
                           warmup_calls=warmup_calls, min_rounds=min_rounds, budget_s=budget_s * len(live),
                           clock=clock)
        for n, exc in r.failed.items():
            rows[n].update(status="error", error=f"{type(exc).__name__}: {exc}")
            live.pop(n, None)
        for n, xs in r.samples.items():
            if n in live:
                rows[n]["samples_s"] += xs
                rows[n]["sample_rep"] += [rep] * len(xs)
                rows[n]["sample_round"] += list(range(len(xs)))
    ref = _array(outputs.get(baseline))
    scale = max(1.0, float(np.max(np.abs(ref)))) if ref is not None and ref.size else 1.0
    for n, row in rows.items():
        if row["status"] == "ok":
            row.update(row_statistics(row["samples_s"], row["sample_rep"]))
        diff = _max_abs_diff(outputs.get(n), outputs.get(baseline)) if n in outputs and baseline in outputs else None
        row.update(max_abs_diff=diff, parity_ok=diff is None or diff <= rtol * scale)
    df = pd.DataFrame(list(rows.values()))
    vt = compute(STUDY, df, default={"variant": baseline})
    shown = df[~df.variant.str.endswith("-aa")].reset_index(drop=True)
    return Result(vt, shown, baseline)
