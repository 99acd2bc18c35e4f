"""The top and the bottom of a study page, from its verdict table (stats/verdicts.py, worded by decisions.py).

A page opens with its decision table (workloads down, options across: the decision, the speed-up over the named
baseline with its 95% CI, the latency per call and per item), then the Answer (at most prose.ANSWER_WORDS words: what to use where,
where it does not pay off, the one-time cost and the calls that pay it back, and one sentence on ties), then — in the
data-set studies — which batch size. Under a heading of their own follow why (where a mechanism is measured), what
a GPU would change, and what the profile did not run. Statistics (the band, the
false-discovery rule, the A/A controls, detectable effects, re-run intervals, every verdict) are in "How sure are
we" at the end of the page (`how_sure_html`).
"""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd

from ..bench import profiles
from ..core import numbers, paths
from ..stats import speedups, variance
from ..stats.verdicts import VerdictTable
from ..studies import STUDIES
from . import decisions, prose


def whole_models(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of whole models: study 02's single-operation micro-benchmarks (task "op") have their own table."""
    return df[df.task != "op"] if "task" in df else df


def _profile_variants() -> dict[str, dict[str, set[str]]]:
    """For every profile under params/ with a grid of its own (profiles.shipped, the cached loader), the values each
    study section lists (variants, strategies)."""
    out: dict[str, dict[str, set[str]]] = {}
    for name, loaded in profiles.shipped().items():
        for nb, section in loaded.sections.items():
            values = {str(v) for key in ("variants", "strategies") for v in getattr(section, key, None) or []}
            out.setdefault(nb, {})[name] = values
    return out


def running_profiles(notebook: str, value: str) -> list[str]:
    """The profiles (params/*.yaml) whose section of `notebook` runs `value` (a variant or strategy)."""
    return sorted(p for p, values in _profile_variants().get(notebook, {}).items() if value in values)


def not_run_line(notebook: str, df: pd.DataFrame, profile: str | None = None) -> str:
    """What the study's comparisons ask that this profile did not run, said once with who runs it."""
    ran = {v for c in STUDIES[notebook].comparisons if len(df) and c.column in df for v in df[c.column].unique()}
    missing = list(dict.fromkeys(v for c in STUDIES[notebook].comparisons for v in (c.candidate, c.baseline)
                                 if v not in ran))
    if not missing:
        return ""
    parts = []
    for value in missing:
        who = [p for p in running_profiles(notebook, value) if p not in (profile, "smoke", paths.FAST_SMOKE)]
        parts.append(value + (f" (the {', '.join(who)} profile{'s' * (len(who) > 1)} run it)" if who else ""))
    return ("**Not run here**, so the comparisons that need them are not answered on this page: " + "; ".join(parts)
            + ".")


def aa_line(df: pd.DataFrame, aa: pd.DataFrame) -> str:
    """The A/A controls (`aa`, speedups.aa_pairs of `df`) and what they show, in one paragraph."""
    if not len(aa):
        return "No A/A control ran, so this page cannot show its false-positive rate."
    cal = speedups.aa_calibration(df, pairs=aa)
    copies = ", ".join(f"{r}-aa against {r}" for r in dict.fromkeys(aa.runtime))
    return (f"**A/A control** ({copies}, the same code twice): {cal.sentence()}. The A/A pairs calibrate the "
            f"intervals; they do not move the band.")


def rule_line(vt: VerdictTable) -> str:
    """The verdict rule, stated once."""
    band = (vt.rows[0].band if len(vt) else speedups.EQUIVALENCE) - 1
    return (f"**The rule.** A speed-up counts as faster (slower) only where its whole 95% CI lies above (below) the "
            f"±{band:.0%} band and its Benjamini–Hochberg adjusted p-value, over this page's {len(vt)} verdicts, is "
            f"below {speedups.FDR:.2f}; equal where the CI lies inside the band; otherwise undecided. An undecided "
            f"cell names the smallest effect this run would call {variance.POWER:.0%} of the time.")


def rerun_line(vt: VerdictTable) -> str:
    """How far a same-host re-run's speed-ups may move: the median half-width of the 95% prediction intervals."""
    half = [v.rerun_high / v.speedup - 1 for v in vt if v.ok and np.isfinite(v.rerun_high)]
    ci = [v.ci_high / v.speedup - 1 for v in vt if v.ok and np.isfinite(v.ci_high)]
    if not half:
        return ""
    return (f"**A re-run on this host** would measure each speed-up within its 95% prediction interval: median "
            f"half-width ±{float(np.median(half)):.1%} (the CIs' median half-width is ±{float(np.median(ci)):.1%}).")


VERDICT_COLUMNS = {"comparison": "comparison", "shape": "shape", "decision": "decision",
                   "speed-up (95% CI)": None, "re-run 95% interval": None, "detectable from": None,
                   "adjusted p": None, "one-time cost": None, "paid back after": None}


def verdict_rows(vt: VerdictTable) -> pd.DataFrame:
    """Every verdict of the page as a table: the comparison, the shape, the decision and its statistics."""
    rows = []
    for v in vt:
        ok = v.ok
        rows.append({"comparison": v.comparison, "shape": v.shape or v.workload,
                     "decision": v.decision if ok else f"{v.status}: {v.message[:120]}",
                     "speed-up (95% CI)": decisions.x(v) if ok else "",
                     "re-run 95% interval": numbers.fmt_ci(v.rerun_low, v.rerun_high) if ok and np.isfinite(v.rerun_low)
                     else "",
                     "detectable from": f"{numbers.fmt(v.detectable)} or {numbers.fmt(1 / v.detectable)}"
                     if ok and v.decision == "undecided" and np.isfinite(v.detectable) else "",
                     "adjusted p": f"{v.p:.3g}" if ok and np.isfinite(v.p) else "",
                     "one-time cost": decisions.one_time(v) if ok and v.one_time_s > 0 else "",
                     "paid back after": "paid back after " + decisions.calls_said(
                         v.break_even, v.break_even_low, v.break_even_high, ci=True)
                     if ok and v.pays_back else ""})
    return pd.DataFrame(rows, columns=list(VERDICT_COLUMNS))


def top_html(notebook: str, vt: VerdictTable, df: pd.DataFrame, machine: str, why: str = "") -> str:
    """The page's opening: the decision table, the Answer under it, which batch size (studies 03/04), then under a
    heading of their own: why (where a mechanism is measured), what a GPU would change, and what this profile did
    not run."""
    study = STUDIES[notebook]
    parts = [decisions.STYLE, "<h2>Decision table</h2>",
             '<p style="color:#444;font-size:.9em">Each cell: the decision, the speed-up over the workload\'s '
             "baseline (95% CI), and the latency per call (a pass over the text set in studies 03 and 04) and per "
             "item. Green: faster; grey: equal within the band; red: slower; yellow: undecided.</p>",
             decisions.decision_table_html(vt),
             prose.answer_html(vt, machine)]
    batches = decisions.batch_table(vt)
    if len(batches):
        parts.append("<h3>Which batch size: latency per text, best first</h3>"
                     + batches.to_html(index=False, escape=True, classes="batches"))
    notes = [f"**Why.** {why}" if why else "", prose.successor_line(vt, study.comparisons),
             f"**On a GPU.** {study.on_gpu}" if study.on_gpu else "", not_run_line(notebook, whole_models(df), _profile(df))]
    notes = [n for n in notes if n]
    if notes:
        parts.append("<h3>Why, and where this answer holds</h3>"
                     + "".join(f"<p>{inline_html(n)}</p>" for n in notes))
    return "".join(parts)


def how_sure_html(vt: VerdictTable, df: pd.DataFrame) -> str:
    """The page's "How sure are we": the rule, the A/A controls, re-run intervals and every verdict."""
    df = whole_models(df)
    aa = speedups.aa_pairs(df) if len(df) else pd.DataFrame()
    lines = [rule_line(vt), aa_line(df, aa) if len(df) else "", rerun_line(vt)]
    items = "".join(f"<li>{inline_html(x)}</li>" for x in lines if x)
    table = verdict_rows(vt)
    return (f"<ul>{items}</ul><details><summary>Every verdict of this page ({len(table)})</summary>"
            + table.to_html(index=False, escape=True, classes="verdicts") + "</details>")


def _profile(df: pd.DataFrame) -> str | None:
    return str(df.profile.iloc[0]) if "profile" in df and len(df) else None


def inline_html(line: str) -> str:
    """A line's markdown (**bold**, `code`) as escaped HTML."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(line, quote=False))
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


