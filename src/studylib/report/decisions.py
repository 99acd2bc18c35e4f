"""What pages show of a study's verdicts (stats/verdicts.py), as tables and picks: the decision table a study page
opens with, the "which batch size" table of the data-set studies, the pick per workload (the index's "What to use")
and the summary's headlines; the numbers' formats. The Answer's words are prose.py's. Every function here reads a
VerdictTable and nothing else decides: a verdict edited in a saved table changes every element that names it
(tests/test_verdicts.py).
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

from ..core import numbers
from ..core.variants import changes_outputs
from ..stats import speedups, verdicts
from ..stats.verdicts import Verdict, VerdictTable

MIN_COST_S = 0.5  # one-time costs below this are left out of the Answer's sentences (they are in the table)
WHAT_TO_USE_COLUMNS = ["study", "workload", "decision", "speed-up over default (95% CI)", "latency", "one-time cost",
                       "paid back after", "quantized option (changes outputs)"]


# --- numbers, one way --------------------------------------------------------------------------------------------------


def ms(value: float) -> str:
    """Milliseconds to three significant figures: '8.26 ms', '137 ms', '1,131 ms'."""
    if value is None or not np.isfinite(value):
        return "—"
    if value >= 100:
        return f"{value:,.0f} ms"
    return f"{value:.3g} ms"


def x(v: Verdict) -> str:
    """'1.22× (95% CI 1.18–1.27)'."""
    return numbers.fmt(v.speedup, v.ci_low, v.ci_high)


def x_short(v: Verdict) -> str:
    """'1.22× (1.18–1.27)', for table cells under a header that says what the interval is."""
    return numbers.fmt(v.speedup, v.ci_low, v.ci_high, brief=True)


def calls_said(n: float, low: float | None = None, high: float | None = None, *, ci: bool = False) -> str:
    """Calls to pay a one-time cost back, said one way everywhere: '1 call', '146–1,167 calls' (a range over
    workloads, `low`–`high`), '4 (3–6) calls' (`ci`: the number with the interval its speed-up's CI gives)."""
    n_, lo, hi = (numbers.fmt_calls(v) for v in (n, n if low is None else low, n if high is None else high))
    said = n_ if lo == hi else f"{n_} ({lo}–{hi})" if ci else f"{lo}–{hi}"
    if said == "never":
        return said
    return f"{said} call{'' if said == '1' else 's'}"


def seconds(s: float) -> str:
    return "—" if s is None or not np.isfinite(s) else (f"{s:.1f} s" if s >= 1 else f"{s * 1e3:.0f} ms")


def one_time(v: Verdict) -> str:
    """An option's one-time cost as tables say it: '14.2 s', or where a compile from the compile cache an earlier
    process saved was measured, 'cold 14.2 s, warm 3.1 s (cache from an earlier process)'."""
    if not np.isfinite(v.warm_one_time_s):
        return seconds(v.one_time_s)
    return f"cold {seconds(v.one_time_s)}, warm {seconds(v.warm_one_time_s)} (cache from an earlier process)"


def quantized(name: str) -> bool:
    """An option that changes what is computed (a quantized runtime): it stands apart from the full-precision ones."""
    return changes_outputs(name)


# --- the verdict table of a study run -----------------------------------------------------------------------------------


def _per_item(v_ms: float, n: float, item: str) -> str:
    return f"{ms(v_ms / n)}/{item}" if n and np.isfinite(v_ms) else ""


def _cell(v: Verdict) -> str:
    if not v.ok:
        msg = v.message if len(v.message) <= 90 else v.message[:90] + "…"
        return f"{v.status}: {msg}" if msg else v.status
    per = f"{ms(v.ms_per_item)}/{v.item}" if v.items_per_call != 1 else ""
    call = f"{ms(v.ms_per_call)}/{'pass' if v.item == 'text' else 'call'}"
    return f"{v.decision}: {x_short(v)} · {call}" + (f" · {per}" if per else "")


def _base_cell(v: Verdict) -> str:
    call = f"{ms(v.base_ms_per_call)}/{'pass' if v.item == 'text' else 'call'}"
    per = f"{ms(v.base_ms_per_item)}/{v.item}" if v.items_per_call != 1 else ""
    return "baseline: " + call + (f" · {per}" if per else "")


def decision_table(vt: VerdictTable) -> pd.DataFrame:
    """Workloads down, options across: each cell the decision, the speed-up over the workload's baseline with its
    95% CI, and the latency per call (a pass over the text set in studies 03/04) and per item; the baseline's
    column its latency; the last column the fastest option by latency (unpaired where options ran in different
    processes)."""
    opts = vt.options()
    if not opts:
        return pd.DataFrame()
    baselines = list(dict.fromkeys(v.baseline for v in opts))
    candidates = list(dict.fromkeys(v.candidate for v in opts))
    rows = []
    separate = len(baselines) > 1 and any(v.backend for v in opts)
    for workload in dict.fromkeys(v.workload for v in opts):
        here = [v for v in opts if v.workload == workload]
        row = {"workload": workload}
        for b in baselines:
            one = next((v for v in here if v.baseline == b), None)
            row[f"{b} (baseline)"] = _base_cell(one) if one else ""
        for c in candidates:
            one = next((v for v in here if v.candidate == c), None)
            row[c] = _cell(one) if one else "not run"
        timed = [(v.ms_per_call, v.candidate, v) for v in here if v.ok]
        timed += [(v.base_ms_per_call, v.baseline, None) for v in here if np.isfinite(v.base_ms_per_call)]
        if timed:
            best_ms, name, v = min(timed, key=lambda t: t[0])
            note = ("baseline" if v is None else v.decision + (" over its baseline" if separate else ""))
            row["fastest by latency"] = f"{name} ({note}{'; processes differ: unpaired' if separate else ''})"
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def decision_table_html(vt: VerdictTable) -> str:
    t = decision_table(vt)
    if not len(t):
        return "<p>No option ran ok beside its baseline, so there is no decision table.</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
    body = []
    for _, r in t.iterrows():
        cells = []
        for c in t.columns:
            text = str(r[c])
            word = text.split(":", 1)[0] if ":" in text else ""
            cls = f' class="d-{word}"' if word in verdicts.DECISIONS else ""
            cells.append(f"<td{cls}>{html.escape(text).replace(' · ', '<br>')}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table class="decisions"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>')


STYLE = ("<style>table.decisions{border-collapse:collapse;font-size:.85rem}table.decisions td,table.decisions th"
         "{border:1px solid #ccc;padding:.3rem .45rem;vertical-align:top;text-align:left}"
         "td.d-faster{background:#e6f4ea}td.d-slower{background:#fdecea}td.d-equal{background:#f3f3f3}"
         "td.d-undecided{background:#fff8e1}</style>")


def batch_table(vt: VerdictTable) -> pd.DataFrame:
    """Studies 03/04: which batch size — every option (and baseline) at every batch size by its latency per text,
    best first, with its decision over the same batch size's baseline."""
    opts = [v for v in vt.options() if v.item == "text"]
    if not opts or len({v.batch_size for v in opts}) < 2:
        return pd.DataFrame()
    rows = {}
    for v in opts:
        if np.isfinite(v.base_ms_per_item):
            rows.setdefault((v.baseline, v.batch_size), {"option": v.baseline, "batch": int(v.batch_size),
                                                         "per text": v.base_ms_per_item, "decision": "baseline"})
        if v.ok:
            rows[(v.candidate, v.batch_size)] = {"option": v.candidate, "batch": int(v.batch_size),
                                                 "per text": v.ms_per_item,
                                                 "decision": f"{v.decision} ({x_short(v)} over {v.baseline})"}
    t = pd.DataFrame(list(rows.values())).sort_values("per text", kind="stable").reset_index(drop=True)
    t["rank"] = range(1, len(t) + 1)
    t["quantized"] = ["int8: changes outputs" if quantized(o) else "" for o in t.option]
    t["per text"] = t["per text"].map(ms)
    return t[["rank", "option", "batch", "per text", "decision", "quantized"]]


# --- the index and the summary ---------------------------------------------------------------------------------------


def pick(vt: VerdictTable, workload: str) -> tuple[str, Verdict | None]:
    """(decision words, the verdict behind them) for one workload: 'use X' where the fastest full-precision option
    is decidedly faster than the default and than the runner-up; 'use X or Y (not told apart)' where it beats the
    default but not the runner-up; 'tie: keep the default', 'undecided: …' or 'keep the default: every option is
    slower' where no option is decidedly faster. A tie never names a winner."""
    full = [v for v in vt.options() if v.workload == workload and v.ok and not quantized(v.candidate)]
    if not full:
        return "", None
    base = full[0].baseline
    lead = vt.lead(workload)
    top = next((v for v in full if lead is not None and v.candidate == lead.candidate), None)
    if top is None:
        top = min(full, key=lambda v: v.ms_per_call)
    unpaired = lead is not None and not lead.paired
    if top.decision == "faster":
        if lead is None or lead.decision == "faster":
            return f"use {top.candidate}" + (" (ranked by latency: unpaired)" if unpaired else ""), top
        return f"use {top.candidate} or {lead.baseline} (not told apart: {lead.decision})", top
    if any(v.decision == "faster" for v in full):
        best = max((v for v in full if v.decision == "faster"), key=lambda v: v.speedup)
        return f"use {best.candidate}", best
    if any(v.decision == "undecided" for v in full):
        mde = min(v.detectable for v in full if v.decision == "undecided")
        return f"undecided: could not tell effects under {numbers.fmt(mde)}; keep {base}", None
    if any(v.decision == "equal" for v in full):
        return f"tie: keep the default ({base})", None
    return f"keep the default ({base}): every option is slower", None


def what_to_use(vt: VerdictTable, study: str = "") -> pd.DataFrame:
    """Per workload: the decision (`pick`), the chosen option's speed-up over the default with its CI, its latency
    per call and per item, its one-time cost and the calls that pay it back; quantized options apart."""
    rows = []
    for workload in dict.fromkeys(v.workload for v in vt.options()):
        here = [v for v in vt.options() if v.workload == workload and v.ok]
        quant = [v for v in here if quantized(v.candidate)]
        words_, top = pick(vt, workload)
        faster = f" ({numbers.fmt_alone(top.speedup, top.ci_low, top.ci_high)} faster)" if top is not None else ""
        rec = {"study": study, "workload": workload, "decision": words_ + faster}
        if top is not None:
            rec |= {"speed-up over default (95% CI)": f"{x(top)} over {top.baseline}", "latency": _latency(top),
                    "one-time cost": one_time(top),
                    "paid back after": calls_said(top.break_even) if np.isfinite(top.break_even) else ""}
        elif here:
            rec["latency"] = _latency(here[0], baseline=True)
        qf = sorted((v for v in quant if v.decision == "faster"), key=lambda v: -v.speedup)
        if qf:
            agree = (f", labels agree on {qf[0].label_agreement:.0%}" if np.isfinite(qf[0].label_agreement) else "")
            rec["quantized option (changes outputs)"] = f"{qf[0].candidate}: {x(qf[0])}{agree}"
        elif quant:
            rec["quantized option (changes outputs)"] = ", ".join(f"{v.candidate}: {v.decision}" for v in quant)
        rows.append(rec)
    return pd.DataFrame(rows).reindex(columns=WHAT_TO_USE_COLUMNS).fillna("")


def _latency(v: Verdict, *, baseline: bool = False) -> str:
    per_call, per_item = (v.base_ms_per_call, v.base_ms_per_item) if baseline else (v.ms_per_call, v.ms_per_item)
    unit = "pass" if v.item == "text" else "call"
    out = f"{ms(per_call)}/{unit}"
    return out + (f" ({ms(per_item)}/{v.item})" if v.items_per_call != 1 else "")


def headline(vt: VerdictTable, label: str) -> dict:
    """A declared comparison on one profile in a line of numbers (the summary's table): the common verdict and the
    geometric mean only where every shape's verdict is the same, else the range and 'depends on the shape'."""
    rows = vt.of(label)
    if not len(vt):
        return {"status": "not run", "n": 0}
    if not rows:
        return {"status": "not in this profile", "n": 0}
    ok = [v for v in rows if v.ok]
    if not ok:
        return {"status": f"{rows[0].status}: {rows[0].message[:160]}", "n": 0, "of": len(rows)}
    counts = pd.Series([v.decision for v in ok]).value_counts()
    out = {"status": "ok", "n": len(ok), "of": len(rows), "lowest": min(v.speedup for v in ok),
           "highest": max(v.speedup for v in ok)}
    if len(counts) == 1:
        g = speedups.combine([(v.speedup, v.ci_low, v.ci_high) for v in ok])
        return out | {"speedup": g.ratio, "ci_low": g.ci_low, "ci_high": g.ci_high, "reading": counts.index[0]}
    return out | {"speedup": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                  "reading": "depends on the shape: " + ", ".join(f"{w} at {n}" for w, n in counts.items())}
