"""The answer a study page opens with, computed from its rows through the comparison layer (speedups.py).

The box answers the page's question with its conditions: first the fastest option per workload (advice.py),
then each comparison the study declares (Study.comparisons) where it pays off and where it does not, by regime
(its per-shape verdicts; a geometric mean only where they all agree), with the one-time cost and the calls that
pay it back; then the A/A control, the false-discovery line, what this profile did not run, the machine and what
a GPU would change. Every number in the box is also in the table printed right under it (`tables`), in the same
words, so a reader (and tests/test_answers.py) can find where each comes from.
"""

from __future__ import annotations

import html
import re
from functools import cache

import numpy as np
import pandas as pd
import yaml

from ..core import paths, speedups, variance
from ..core.speedups import Comparison
from ..studies import STUDIES
from . import advice

WORDS = {"faster": "pays off at", "slower": "slower at", "equal": "no gain (equal within ±{band}) at",
         "unclear": "undecided at"}
ANSWER_COLUMNS = ["comparison", "shape", "speed-up (95% CI)", "verdict", "detectable from", "one-time cost (s)",
                  "paid back after (calls)"]


def whole_models(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of whole models: study 02's single-operation micro-benchmarks (task "op") have their own table."""
    return df[df.task != "op"] if "task" in df else df


def comparison_table(df: pd.DataFrame, c: Comparison, band: float) -> pd.DataFrame:
    """`c` at every shape of `df` (speedups.pair_table) with each shape's label (only the columns that vary)."""
    t = speedups.pair_table(df, c.candidate, c.baseline, column=c.column, band=band)
    on = [k for k in speedups.match_columns(t, c.column) if k not in ("device", "threads")]
    dims = speedups.varying(t, [*[a for a in c.along if a in on], *[k for k in on if k not in c.along]])
    t["shape"] = [speedups.shape_label(r, dims) or "the one shape run" for _, r in t.iterrows()]
    return t


def _calls(r) -> str:
    if r.verdict != "faster" or not np.isfinite(r.one_time_s) or r.one_time_s <= 0:
        return ""
    n, lo, hi = (speedups.fmt_calls(v) for v in (r.break_even, r.break_even_low, r.break_even_high))
    return n if lo == hi else f"{n} ({lo}–{hi})"


def paid_back(r) -> str:
    """'paid back after 1 call', 'paid back after 4 (3–6) calls': the break-even in the number it needs."""
    calls = _calls(r)
    return f"paid back after {calls} {'call' if calls == '1' else 'calls'}"


def _detectable(r) -> str:
    """An undecided shape's minimum detectable effect (variance.detectable): the speed-up, or slow-down, this run's
    interval would call decided 80% of the time; blank for a decided shape."""
    mde = getattr(r, "detectable", np.nan)
    if r.verdict != "unclear" or not np.isfinite(mde):
        return ""
    return f"{mde:.2f}× or {1 / mde:.2f}×"


MIN_COST_S = 0.5  # one-time costs below this are in the answer table, not in the box's sentence


def _costs(ok: pd.DataFrame, c: Comparison) -> str:
    """What else the candidate costs: outputs that differ from eager's, int8 label agreement. (Peak memory is in
    the latency tables: each runtime's allocator is counted its own way, so a ratio across runtimes misleads.)"""
    out = []
    if "parity_ok" in ok and (ok.parity_ok == False).any():  # noqa: E712 - a column of True / False / None
        bad = ok[ok.parity_ok == False]  # noqa: E712
        out.append(f"its outputs differ from eager's beyond the tolerance at {', '.join(bad['shape'])} (max |Δ| "
                   f"{bad.max_abs_diff.max():.1e})")
    if "label_agreement" in ok and ok.label_agreement.notna().any() and "int8" in c.candidate:
        lo, hi = f"{ok.label_agreement.min():.1%}", f"{ok.label_agreement.max():.1%}"
        out.append(f"its predicted labels agree with fp32 on {lo if lo == hi else lo + '–' + hi} of texts (random "
                   f"weights: this shows how far int8 moves the outputs, not a trained model's accuracy)")
    return (" Costs: " + "; ".join(out) + ".") if out else ""


def conditional(t: pd.DataFrame, c: Comparison, band: float, df: pd.DataFrame) -> tuple[str, list[dict]]:
    """`c`'s answer by regime (markdown) and the answer-table rows behind its numbers."""
    ok = t[t.speedup.notna()]
    rows = [{"comparison": c.label, "shape": r.shape, "speed-up (95% CI)": speedups.fmt(r.speedup, r.ci_low, r.ci_high),
             "verdict": r.verdict, "detectable from": _detectable(r),
             "one-time cost (s)": f"{r.one_time_s:.1f}" if _calls(r) else "",
             "paid back after (calls)": _calls(r)} for r in ok.itertuples()]
    verdicts = list(dict.fromkeys(ok.verdict))
    words = {k: w.format(band=f"{band - 1:.0%}") for k, w in WORDS.items()}

    def listed(sel) -> str:
        return ", ".join(f"{r.shape} {speedups.fmt(r.speedup, r.ci_low, r.ci_high)}"
                         + (f" (detectable from {_detectable(r)})" if _detectable(r) else "") for r in sel.itertuples())

    if not len(ok):
        line = f"**{c.label}**:"
    elif len(verdicts) == 1 and len(ok) > 1:
        g = speedups.geomean(df, c.candidate, c.baseline, column=c.column)
        text = speedups.fmt(*g)
        rows.append({"comparison": c.label, "shape": f"geometric mean over {len(ok)} shapes",
                     "speed-up (95% CI)": text, "verdict": verdicts[0]})
        each = f": {listed(ok)}" if len(ok) <= 4 else f"; per shape {ok.speedup.min():.2f}–{ok.speedup.max():.2f}×"
        line = (f"**{c.label}**: {words[verdicts[0]]} every one of the {len(ok)} shapes run{each} — geometric mean "
                f"{text}.")
    else:
        parts = [f"{words[v]} {listed(ok[ok.verdict == v])}" for v in ("faster", "slower", "equal", "unclear")
                 if (ok.verdict == v).any()]
        line = f"**{c.label}**: " + "; ".join(parts) + "."
    paid = ok[[bool(_calls(r)) and r.one_time_s >= MIN_COST_S for r in ok.itertuples()]]
    if len(paid):
        line += (" One-time cost " + ", ".join(f"{r.one_time_s:.1f} s at {r.shape} ({paid_back(r)})"
                                               for r in paid.itertuples()) + ".")
    line += _costs(ok, c)
    failed = t[t.speedup.isna()]
    if len(failed):
        error = str(failed.error.iloc[0])
        line += (f" {len(failed)} shape(s) not measured: {failed.status.iloc[0]} — "
                 f"{error if len(error) <= 200 else error[:200] + '…'}.")
    return line, rows


def headline(df: pd.DataFrame, c: Comparison) -> dict:
    """`c` on one profile's rows in a line of numbers (the summary's table): the geometric mean over the shapes both
    sides ran with its CI, and the per-shape verdicts (`reading`: the common one, or 'depends on the shape')."""
    if not len(df) or c.column not in df:
        return {"status": "not run", "n": 0}
    if not (df[c.column] == c.candidate).any():
        return {"status": "not in this profile", "n": 0}
    t = comparison_table(df, c, speedups.band(df))
    ok = t[t.speedup.notna()]
    if not len(ok):
        return {"status": f"{t.status.iloc[0]}: {str(t.error.iloc[0])[:160]}", "n": 0, "of": len(t)}
    g = speedups.geomean(df, c.candidate, c.baseline, column=c.column)
    counts = ok.verdict.value_counts()
    reading = counts.index[0] if len(counts) == 1 else "depends on the shape: " + ", ".join(
        f"{w} at {n}" for w, n in counts.items())
    return {"status": "ok", "speedup": g.ratio, "ci_low": g.ci_low, "ci_high": g.ci_high, "n": len(ok), "of": len(t),
            "reading": reading, "lowest": ok.speedup.min(), "highest": ok.speedup.max()}


@cache
def _profile_variants() -> dict[str, dict[str, set[str]]]:
    """For every profile file, the values each study section lists (variants, strategies), read from the YAML."""
    out: dict[str, dict[str, set[str]]] = {}
    for path in sorted(paths.PARAMS_DIR.glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        for nb, section in (data.get("notebooks") or {}).items():
            values = {str(v) for key in ("variants", "strategies") for v in (section or {}).get(key, []) or []}
            out.setdefault(nb, {})[path.stem] = values
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


def aa_line(df: pd.DataFrame, band: float, aa: pd.DataFrame) -> str:
    """The A/A controls (`aa`, speedups.aa_pairs of `df`) and the verdict rule in one paragraph."""
    if not len(aa):
        return ""
    cal = speedups.aa_calibration(df, pairs=aa)
    copies = ", ".join(f"{r}-aa against {r}" for r in dict.fromkeys(aa.runtime))
    return (f"**A/A control** ({copies}, the same code twice): {cal.sentence()}; its largest ratio sets the 'equal' "
            f"band to ±{band - 1:.0%}. A shape counts as faster or slower "
            f"only where its whole CI lies outside that band and, over this page's comparisons, the "
            f"Benjamini–Hochberg adjusted p-value is below {speedups.FDR:.2f} (false-discovery rate "
            f"{speedups.FDR:.0%}). An undecided shape names the speed-up (or slow-down) it is 'detectable from': the "
            f"smallest effect this run's interval would have decided {variance.POWER:.0%} of the time.")


def analyse(notebook: str, df: pd.DataFrame) -> tuple[list[str], pd.DataFrame, pd.DataFrame]:
    """(lines, answer table, advice table) of a study's rows (whole models only)."""
    study = STUDIES[notebook]
    df = whole_models(df)
    if not len(df) or not (df.status == "ok").any():
        return [], pd.DataFrame(columns=ANSWER_COLUMNS), pd.DataFrame(columns=advice.ADVICE_COLUMNS)
    aa = speedups.aa_pairs(df)
    band = speedups.band(df, pairs=aa)
    best = advice.fastest(df, options=study.options, default=dict(study.default), band=band)
    lines = [fastest_line(best)]
    rows: list[dict] = []
    for c in study.comparisons:
        if c.column not in df or not ((df[c.column] == c.candidate).any() and (df[c.column] == c.baseline).any()):
            continue
        line, r = conditional(comparison_table(df, c, band), c, band, df)
        lines.append(line)
        rows += r
    lines += [x for x in (aa_line(df, band, aa), not_run_line(notebook, df, _profile(df))) if x]
    return lines, pd.DataFrame(rows, columns=ANSWER_COLUMNS).fillna(""), best


def _profile(df: pd.DataFrame) -> str | None:
    return str(df.profile.iloc[0]) if "profile" in df and len(df) else None


def fastest_line(best: pd.DataFrame) -> str:
    """The fastest option per workload, first, with its speed-up over the default."""
    if not len(best):
        return ""
    parts = []
    for option, g in best.groupby("fastest", sort=False):
        at = ", ".join(f"{r['workload'] or 'the one workload'} ("
                       + (r["over default"] if r["over default"] != "is the default" else "the default itself")
                       + (f"; {r['note']}" if r["note"] else "") + ")" for _, r in g.fillna("").iterrows())
        parts.append(f"{option} at {at}")
    return "**Fastest option** (over the default, eager PyTorch): " + "; ".join(parts) + "."


def headlines(notebook: str, df: pd.DataFrame) -> list[str]:
    """The box's lines (markdown); empty when nothing ran ok."""
    return analyse(notebook, df)[0]


def inline_html(line: str) -> str:
    """A line's markdown (**bold**, `code`) as escaped HTML."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(line, quote=False))
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def box_html(notebook: str, df: pd.DataFrame, machine: str) -> str:
    """The page's opening "Answer" box, then the tables its numbers come from."""
    lines, table, best = analyse(notebook, df)
    lines = lines or ["Nothing ran ok with these parameters, so there is no answer yet: see the measurements below "
                      "for each configuration's status."]
    items = "".join(f"<li>{inline_html(line)}</li>" for line in lines if line)
    gpu = STUDIES[notebook].on_gpu
    tables = ""
    if len(best):
        tables += ("<h3>Fastest option per workload</h3>" + advice.shown(best).to_html(index=False, escape=True,
                                                                                     classes="advice"))
    if len(table):
        tables += ("<h3>Where each option pays off (the Answer's numbers)</h3>"
                   + table.to_html(index=False, escape=True, classes="answer-numbers"))
    return (f'<div class="answer" style="border:2px solid #2b6cb0;border-radius:6px;padding:.6rem 1rem;'
            f'margin:.5rem 0 1rem;background:#f4f8fc"><h2 style="margin-top:0">Answer</h2><ul>{items}</ul>'
            f'<p style="color:#444;font-size:.9em">Measured on {html.escape(machine)}.'
            f'{" On a GPU: " + inline_html(gpu) if gpu else ""}</p></div>{tables}')
