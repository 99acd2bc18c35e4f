"""What pages show of a study's verdicts, as tables and picks; every function here only reads a VerdictTable."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..core import numbers, wording
from ..core.numbers import fmt_ms
from ..core.variants import changes_outputs
from ..stats import speedups, verdicts
from ..stats.verdicts import Verdict, VerdictTable

MIN_COST_S = 0.5  # one-time costs below this are left out of the Answer's sentences (they are in the table)
SPEEDUP = "speed-up over default (CI at its page's level)"  # the What-to-use column (each study page its own level)
WHAT_TO_USE_COLUMNS = ["study", "workload", "decision", SPEEDUP, "latency", "one-time cost", "paid back after",
                       "quantized option (changes outputs)"]
WORDS = "report/decisions.md.j2"


def x(v: Verdict) -> str:
    """'1.22× (99.2% CI 1.18–1.27)': the interval at the level its verdict table decided at."""
    return numbers.fmt(v.speedup, v.ci_low, v.ci_high, level=v.level)


def x_short(v: Verdict) -> str:
    """'1.22× (1.18–1.27)', for table cells under a header that says what the interval is."""
    return numbers.fmt(v.speedup, v.ci_low, v.ci_high, brief=True)


def calls_said(n: float, low: float | None = None, high: float | None = None, *, ci: bool = False) -> str:
    """Calls to pay a one-time cost back: '1 call', '146–1,167 calls' (a range), with `ci` '4 (3–6) calls'."""
    n_, lo, hi = (numbers.fmt_calls(v) for v in (n, n if low is None else low, n if high is None else high))
    said = n_ if lo == hi else f"{n_} ({lo}–{hi})" if ci else f"{lo}–{hi}"
    if said == "never":
        return said
    return f"{said} call{'' if said == '1' else 's'}"


def one_time(v: Verdict) -> str:
    """An option's one-time cost: '14.2 s', or with a warm compile 'cold 14.2 s, warm 3.1 s (cache from …)'."""
    if not np.isfinite(v.warm_one_time_s):
        return numbers.fmt_seconds(v.one_time_s)
    return wording.macro(WORDS, "one_time", v.one_time_s, v.warm_one_time_s)


# --- the verdict table of a study run -----------------------------------------------------------------------------------


def _latency(v: Verdict, *, baseline: bool = False) -> list[str]:
    """['8.26 ms/call', '1.03 ms/image']: per call (a pass over the text set), and per item where a call has several."""
    per_call, per_item = (v.base_ms_per_call, v.base_ms_per_item) if baseline else (v.ms_per_call, v.ms_per_item)
    out = [f"{fmt_ms(per_call)}/{'pass' if v.item == 'text' else 'call'}"]
    return out + [f"{fmt_ms(per_item)}/{v.item}"] if v.items_per_call != 1 else out


def _cell(v: Verdict) -> str:
    if not v.ok:
        msg = v.message if len(v.message) <= 90 else v.message[:90] + "…"
        return f"{v.status}: {msg}" if msg else v.status
    return " · ".join([f"{v.decision}: {x_short(v)}", *_latency(v)])


def decision_table(vt: VerdictTable) -> pd.DataFrame:
    """Workloads down, options across (decision, speed-up, latency); the baseline's latency; the fastest option."""
    opts = vt.options()
    if not opts:
        return pd.DataFrame()
    baselines = list(dict.fromkeys(v.baseline for v in opts))
    candidates = list(dict.fromkeys(v.candidate for v in opts))
    rows = []
    separate = len(baselines) > 1 and any(v.backend for v in opts)
    for workload in dict.fromkeys(v.workload for v in opts):
        here = [v for v in opts if v.workload == workload]
        base, cand = ({getattr(v, side): v for v in reversed(here)} for side in ("baseline", "candidate"))  # the first
        row = {"workload": workload} | {f"{b} (baseline)": "baseline: " + " · ".join(_latency(base[b], baseline=True))
                                        if b in base else "" for b in baselines}
        row |= {c: _cell(cand[c]) if c in cand else "not run" for c in candidates}
        timed = [(v.ms_per_call, v.candidate, v) for v in here if v.ok]
        timed += [(v.base_ms_per_call, v.baseline, None) for v in here if np.isfinite(v.base_ms_per_call)]
        if timed:
            best_ms, name, v = min(timed, key=lambda t: t[0])
            note = "baseline" if v is None else v.decision
            row["fastest by latency"] = wording.macro(WORDS, "fastest", name, note, separate and v is not None, separate)
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def decision_table_html(t: pd.DataFrame) -> str:
    """The decision table (`decision_table`) as HTML, each cell coloured by its decision."""
    rows = [[(w if (w := str(text).split(":", 1)[0]) in verdicts.DECISIONS else "", str(text)) for text in r]
            for r in t.itertuples(index=False)]
    return wording.block("report/decision_table.html.j2", columns=list(t.columns), rows=rows)


def batch_table(vt: VerdictTable) -> pd.DataFrame:
    """Studies 03/04: every option at every batch size by latency per text, best first, with its decision."""
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
    t["quantized"] = ["int8: changes outputs" if changes_outputs(o) else "" for o in t.option]
    t["per text"] = t["per text"].map(fmt_ms)
    return t[["rank", "option", "batch", "per text", "decision", "quantized"]]


# --- the index and the summary ---------------------------------------------------------------------------------------


def pick(vt: VerdictTable, workload: str) -> tuple[str, Verdict | None]:
    """(decision words, the verdict behind them) for one workload (docs/method.md, "Pages")."""
    full = [v for v in vt.options() if v.workload == workload and v.ok and not changes_outputs(v.candidate)]
    if not full:
        return "", None
    base = full[0].baseline
    lead = vt.lead(workload)
    top = next((v for v in full if lead is not None and v.candidate == lead.candidate), None) or min(
        full, key=lambda v: v.ms_per_call)
    if top.decision == "faster":
        if lead is None or lead.decision == "faster":
            return wording.macro(WORDS, "use", top.candidate, lead is not None and not lead.paired), top
        return wording.macro(WORDS, "use_either", top.candidate, lead.baseline, lead.decision), top
    if faster := [v for v in full if v.decision == "faster"]:
        best = max(faster, key=lambda v: v.speedup)
        return wording.macro(WORDS, "use", best.candidate, False), best
    if undecided := [v.detectable for v in full if v.decision == "undecided"]:
        return wording.macro(WORDS, "undecided", min(undecided), base), None
    return wording.macro(WORDS, "tie" if any(v.decision == "equal" for v in full) else "slower", base), None


ACROSS_COLUMNS = ["workload", "fastest found (by latency)", "its decision in its study", "baselines",
                  "slowest baseline over fastest", "how each study runs it"]


def across_studies(vts: dict[str, VerdictTable], runs: dict[str, str]) -> pd.DataFrame:
    """Each whole-model workload (model, precision, batch, size) several studies measured, in one row: the fastest
    full-precision option any of them found by median latency (studies are not paired with each other), its own
    study's decision, every baseline's latency, and how each study runs it (`runs`, by notebook)."""
    found: dict[str, dict[str, list[Verdict]]] = {}
    for nb, vt in vts.items():
        for v in vt.options():
            if v.ok and not v.strategy and not changes_outputs(v.candidate):
                found.setdefault(v.workload, {}).setdefault(nb, []).append(v)
    rows = []
    for workload, by in found.items():
        if len(by) < 2:
            continue
        nb, top = min(((nb, v) for nb, vs in by.items() for v in vs), key=lambda t: t[1].ms_per_call)
        bases = {(n, v.baseline): v for n, vs in by.items() for v in vs}
        rows.append({"workload": workload, "fastest found (by latency)": f"{top.candidate} (study {nb[:2]}): "
                     f"{_per_call(top)}", "its decision in its study": f"{top.decision}: {x(top)} over {top.baseline}",
                     "baselines": "; ".join(f"{n[:2]} {b}: {_per_call(v, baseline=True)}" for (n, b), v in bases.items()),
                     "slowest baseline over fastest": numbers.fmt(max(ms) / min(ms)) if (ms := [
                         v.base_ms_per_call for v in bases.values()]) else "",
                     "how each study runs it": "; ".join(f"{n[:2]}: {runs.get(n, '')}" for n in by)})
    return pd.DataFrame(rows, columns=ACROSS_COLUMNS)


def what_to_use(vt: VerdictTable, study: str = "") -> pd.DataFrame:
    """Per workload: the `pick` and the chosen option's numbers; quantized options apart."""
    rows = []
    for workload in dict.fromkeys(v.workload for v in vt.options()):
        here = [v for v in vt.options() if v.workload == workload and v.ok]
        quant = [v for v in here if changes_outputs(v.candidate)]
        words_, top = pick(vt, workload)
        rec = {"study": study, "workload": workload, "decision": words_}
        if top is not None:  # where the decision names two options, each number names whose it is
            whose = f"{top.candidate}: " if " or " in words_ else ""
            cost, calls = one_time(top), calls_said(top.break_even) if np.isfinite(top.break_even) else ""
            rec |= {"decision": f"{words_} ({numbers.fmt_alone(top.speedup, top.ci_low, top.ci_high)} faster)",
                    SPEEDUP: f"{whose}{x(top)} over {top.baseline}", "latency": f"{whose}{_per_call(top)}",
                    "one-time cost": f"{whose}{cost}" if cost else "", "paid back after": f"{whose}{calls}" if calls else ""}
        elif here:
            rec["latency"] = _per_call(here[0], baseline=True)
        qf = sorted((v for v in quant if v.decision == "faster"), key=lambda v: -v.speedup)
        if qf:
            agree = qf[0].label_agreement if np.isfinite(qf[0].label_agreement) else None
            rec["quantized option (changes outputs)"] = wording.macro(WORDS, "quantized", qf[0], agree)
        elif quant:
            rec["quantized option (changes outputs)"] = ", ".join(f"{v.candidate}: {v.decision}" for v in quant)
        rows.append(rec)
    return pd.DataFrame(rows).reindex(columns=WHAT_TO_USE_COLUMNS).fillna("")


def _per_call(v: Verdict, *, baseline: bool = False) -> str:
    call, *item = _latency(v, baseline=baseline)
    return call + (f" ({item[0]})" if item else "")


def headline(vt: VerdictTable, label: str) -> dict:
    """A declared comparison on one profile: the common verdict and geometric mean, else the range and 'depends'."""
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
                  "reading": wording.macro(WORDS, "depends", list(counts.items()))}
