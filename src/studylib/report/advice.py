"""What to use on this machine: for every workload a profile measured, the fastest option and what it costs.

A workload is a study's shape less the columns that are choices (the runtime `variant`; study 04's batching
`strategy`; study 05's Keras `backend` process). Per workload: the option with the lowest median, its speed-up
over the study's default (eager PyTorch, unsorted batches; paired in the same rounds where they shared them), the
runner-up and whether the lead over it is decided (speedups.verdict against the page's band), and the one-time
cost of the fastest option (its preparation and first call). No A/A copy (`<variant>-aa`, config.is_aa) is ever an option.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core import speedups
from ..core.config import REFERENCE, is_aa

ADVICE_COLUMNS = ["study", "workload", "fastest", "median", "over default", "speedup", "ci_low", "ci_high",
                  "runner-up", "lead", "lead_low", "lead_high", "decided", "one-time cost", "note"]


def option_name(row, options: tuple[str, ...]) -> str:
    """'ort-int8', 'eager · sorted', 'keras-tensorflow-jit' (a backend is named by the variant already)."""
    parts = [str(row[options[0]])]
    parts += [str(row[o]) for o in options[1:] if o != "backend" and o in row and pd.notna(row[o])]
    return " · ".join(parts)


def _seconds(v: float) -> str:
    if v is None or not np.isfinite(v):
        return ""
    return f"{v * 1e3:.3g} ms" if v < 1 else f"{v:.1f} s"


def _cost_note(row) -> str:
    notes = []
    if "label_agreement" in row and pd.notna(row.get("label_agreement")) and "int8" in str(row.get("variant")):
        notes.append(f"labels agree with fp32 on {row['label_agreement']:.1%} of texts")
    if row.get("parity_ok") is False or row.get("parity_ok") == 0:
        notes.append(f"outputs differ from eager (max |Δ| {row.get('max_abs_diff', float('nan')):.1e})")
    return "; ".join(notes)


def fastest(df: pd.DataFrame, *, options: tuple[str, ...] = ("variant",), default: dict | None = None,
            band: float | None = None, study: str = "") -> pd.DataFrame:
    """One row per workload of `df` (a study's results, raw samples included): the fastest option and its costs."""
    default = default or {"variant": REFERENCE}
    ok = df[(df.status == "ok") & ~df.variant.map(is_aa)] if len(df) else df
    if not len(ok):
        return pd.DataFrame(columns=ADVICE_COLUMNS)
    band = band if band is not None else speedups.band(df)
    workload = speedups.shape_columns(ok, without=options)
    shown = [c for c in workload if c == "model" or c in speedups.varying(ok, workload)]
    rows = []
    for _, g in ok.groupby(workload, dropna=False, sort=False):
        g = g.sort_values("median_s")
        top = g.iloc[0]
        rec = {"study": study, "workload": speedups.shape_label(top, shown), "fastest": option_name(top, options),
               "median": _seconds(top.median_s),
               "one-time cost": _seconds((top.get("prepare_s") or 0) + (top.get("first_call_s") or 0)),
               "note": _cost_note(top)}
        base = g
        for k, v in default.items():
            base = base[base[k] == v]
        for o in options:  # a choice the default leaves open (05's backend process) is the fastest's own
            if o not in default:
                base = base[base[o] == top[o]]
        if len(base):
            if base.index[0] == top.name:
                rec |= {"over default": "is the default", "speedup": 1.0}
            else:
                s = speedups.speedup(base.iloc[0], top)
                rec |= {"over default": speedups.fmt(*s), "speedup": s.ratio, "ci_low": s.ci_low, "ci_high": s.ci_high}
        if len(g) > 1:
            second = g.iloc[1]
            lead = speedups.speedup(second, top)
            rec |= {"runner-up": option_name(second, options), "lead": lead.ratio, "lead_low": lead.ci_low,
                    "lead_high": lead.ci_high,
                    "decided": "yes" if speedups.verdict(lead.ci_low, lead.ci_high, band) == "faster" else "no"}
        rows.append(rec)
    return pd.DataFrame(rows).reindex(columns=ADVICE_COLUMNS)


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """The advice table as a page shows it: the numbers formatted, the helper columns dropped."""
    t = table.copy()
    t["lead over runner-up"] = [speedups.fmt(v, lo, hi) if pd.notna(v) else "" for v, lo, hi in
                                zip(t.lead, t.lead_low, t.lead_high)]
    cols = ["study", "workload", "fastest", "median", "over default", "runner-up", "lead over runner-up", "decided",
            "one-time cost", "note"]
    return t[[c for c in cols if c in t and (c != "study" or t.study.astype(bool).any())]].fillna("")
