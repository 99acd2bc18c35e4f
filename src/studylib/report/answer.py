"""The top (`top_html`) and the "How sure are we" bottom (`how_sure_html`) of a study page, from its verdict table."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..bench import profiles
from ..core import numbers, paths, wording
from ..stats import speedups, variance
from ..stats.verdicts import VerdictTable
from ..studies import STUDIES
from . import decisions, prose
from .prose import inline_html

WORDS = "report/how_sure.md.j2"


def whole_models(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of whole models: study 02's single-operation micro-benchmarks (task "op") have their own table."""
    return df[df.task != "op"] if "task" in df else df


def running_profiles(notebook: str, value: str) -> list[str]:
    """The shipped profiles whose section of `notebook` runs `value` (a variant or strategy)."""
    section = {name: loaded.sections.get(notebook) for name, loaded in profiles.shipped().items()}
    return sorted(p for p, sec in section.items() if sec is not None
                  and value in {str(v) for key in ("variants", "strategies") for v in getattr(sec, key, None) or []})


def not_run_line(notebook: str, df: pd.DataFrame, profile: str | None = None) -> str:
    """What the study's comparisons ask that this profile did not run, said once with who runs it."""
    ran = {v for c in STUDIES[notebook].comparisons if len(df) and c.column in df for v in df[c.column].unique()}
    missing = list(dict.fromkeys(v for c in STUDIES[notebook].comparisons for v in (c.candidate, c.baseline)
                                 if v not in ran))
    if not missing:
        return ""
    parts = [(value, [p for p in running_profiles(notebook, value) if p not in (profile, "smoke", paths.FAST_SMOKE)])
             for value in missing]
    return wording.macro(WORDS, "not_run", parts)


def aa_line(df: pd.DataFrame, aa: pd.DataFrame) -> str:
    """The A/A controls (`aa`, speedups.aa_pairs of `df`) and what they show, in one paragraph."""
    if not len(aa):
        return wording.macro(WORDS, "no_aa")
    cal = speedups.aa_calibration(df, pairs=aa)
    return wording.macro(WORDS, "aa", list(dict.fromkeys(aa.runtime)), cal.sentence())


def rule_line(vt: VerdictTable) -> str:
    """The verdict rule, stated once."""
    band = (vt.rows[0].band if len(vt) else speedups.EQUIVALENCE) - 1
    return wording.macro(WORDS, "rule", band, len(vt), vt.decided(), speedups.FDR, variance.POWER, vt.level())


def rerun_line(vt: VerdictTable) -> str:
    """How far a same-host re-run's speed-ups may move: the median half-width of the 95% prediction intervals."""
    half = [v.rerun_high / v.speedup - 1 for v in vt if v.ok and np.isfinite(v.rerun_high)]
    ci = [v.ci_high / v.speedup - 1 for v in vt if v.ok and np.isfinite(v.ci_high)]
    if not half:
        return ""
    return wording.macro(WORDS, "rerun", float(np.median(half)), float(np.median(ci)))


def verdict_rows(vt: VerdictTable) -> pd.DataFrame:
    """Every verdict of the page as a table: the comparison, the shape, the decision and its statistics."""
    return pd.DataFrame([{
        "comparison": v.comparison, "shape": v.shape or v.workload,
        "decision": v.decision if v.ok else f"{v.status}: {v.message[:120]}",
        "speed-up (95% CI)": decisions.x(v) if v.ok else "",
        "re-run 95% interval": numbers.fmt_ci(v.rerun_low, v.rerun_high) if v.ok and np.isfinite(v.rerun_low) else "",
        "detectable from": wording.macro(WORDS, "detectable", v.detectable)
        if v.ok and v.decision == "undecided" and np.isfinite(v.detectable) else "",
        "adjusted p": f"{v.p:.3g}" if v.ok and np.isfinite(v.p) else "",
        "one-time cost": decisions.one_time(v) if v.ok and v.one_time_s > 0 else "",
        "paid back after": "paid back after " + decisions.calls_said(v.break_even, v.break_even_low, v.break_even_high,
                                                                     ci=True) if v.ok and v.pays_back
        else wording.macro(WORDS, "payback_estimate", decisions.calls_said(v.break_even))
        if v.ok and v.decision == "undecided" and v.one_time_s > 0 and np.isfinite(v.break_even) else ""}
        for v in vt], columns=["comparison", "shape", "decision", "speed-up (95% CI)", "re-run 95% interval",
                               "detectable from", "adjusted p", "one-time cost", "paid back after"])


DECISION_ROWS_SHOWN = 15  # a longer decision table is folded under the Answer, so the Answer stays on the first screen


def top_html(notebook: str, vt: VerdictTable, df: pd.DataFrame, machine: str, why: str = "") -> str:
    """The page's opening: Answer, decision table, batch-size table, why, what a GPU would change, what did not run."""
    study = STUDIES[notebook]
    batches = decisions.batch_table(vt)
    table = decisions.decision_table(vt)
    return wording.block(
        "report/top.html.j2", table=decisions.decision_table_html(table), rows=len(table), fold_rows=DECISION_ROWS_SHOWN,
        passes=any(v.item == "text" for v in vt.options()), level=vt.level(), answer=prose.answer_html(vt, machine),
        batches=batches.to_html(index=False, escape=True, classes="batches") if len(batches) else "",
        why=inline_html(why), successors=inline_html(prose.successor_line(vt, study.comparisons)),
        on_gpu=inline_html(study.on_gpu or ""), not_run=inline_html(not_run_line(notebook, whole_models(df), _profile(df))))


def how_sure_html(vt: VerdictTable, df: pd.DataFrame) -> str:
    """The page's "How sure are we": the rule, the A/A controls, re-run intervals and every verdict."""
    df = whole_models(df)
    aa = speedups.aa_pairs(df) if len(df) else pd.DataFrame()
    lines = [rule_line(vt), aa_line(df, aa) if len(df) else "", rerun_line(vt)]
    table = verdict_rows(vt)
    return wording.block("report/how_sure.html.j2", lines=[inline_html(x) for x in lines if x], n=len(table),
                         table=table.to_html(index=False, escape=True, classes="verdicts"))


def _profile(df: pd.DataFrame) -> str | None:
    return str(df.profile.iloc[0]) if "profile" in df and len(df) else None
