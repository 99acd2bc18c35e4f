"""The Answer a study page gives under its decision table, in words: at most ANSWER_WORDS words of plain prose
(what to use where, where it does not pay off, the one-time cost and the calls that pay it back, one sentence on
ties), the index's one-line headline of a study, and the findings' verdict lines. Every sentence is built from a
VerdictTable (stats/verdicts.py), through the picks and numbers of decisions.py."""

from __future__ import annotations

import html
import re

import numpy as np

from ..core import numbers
from ..stats import speedups, verdicts
from ..stats.verdicts import Verdict, VerdictTable
from .decisions import MIN_COST_S, calls_said, pick, quantized, seconds

ANSWER_WORDS = 110  # counted strictly (`words`): the box, its heading and machine line stay under 150


def _where(rows: list[Verdict], among: list[str]) -> str:
    """The workloads of `rows`, as few words as the reader needs: 'every workload', 'resnet-50 (3 shapes)', a list."""
    wl = list(dict.fromkeys(v.workload for v in rows))
    if len(among) > 1 and set(wl) == set(among):
        return "every workload"
    if len(among) == 1:
        return wl[0]
    models = list(dict.fromkeys(v.model for v in rows))
    parts = []
    for m in models:
        mine = [w for w in wl if any(v.workload == w and v.model == m for v in rows)]
        all_of_model = [w for w in among if w.startswith(m + " ") or w == m]
        if len(all_of_model) > 1 and set(mine) == set(all_of_model):
            parts.append(f"{m} (all {len(mine)} shapes)")
        else:
            parts += mine
    return joined(parts) if len(parts) <= 3 else f"{len(wl)} of {len(among)} workloads"


def joined(labels: list[str]) -> str:
    """Workload labels that differ in one word only, said once: 'roberta fp32 batch 1 and 8 seq 128'."""
    split = [w.split(" ") for w in labels]
    if len(split) > 1 and len({len(t) for t in split}) == 1:
        differ = [i for i in range(len(split[0])) if len({t[i] for t in split}) > 1]
        if len(differ) == 1:
            i = differ[0]
            values = [t[i] for t in split]
            said = ", ".join(values[:-1]) + " and " + values[-1]
            return " ".join([*split[0][:i], said, *split[0][i + 1:]])
    return ", ".join(labels)


def _range(rows: list[Verdict]) -> str:
    """The speed-ups of `rows` from lowest to highest, each end at its own CI's decimals (as its table cell)."""
    lo, hi = min(rows, key=lambda v: v.speedup), max(rows, key=lambda v: v.speedup)
    return numbers.fmt_span((lo.speedup, lo.ci_low, lo.ci_high), (hi.speedup, hi.ci_low, hi.ci_high))


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return seconds(lo) if seconds(lo) == seconds(hi) else f"{seconds(lo)}–{seconds(hi)}"


def _cost(rows: list[Verdict], warm: bool = True) -> str:
    """'one-time 14.2 s, paid back after 1,400 calls'; with `warm`, a compile's cost from the cache an earlier process
    saved beside it where measured ('one-time 14.2 s (3.1 s warm), …': the calls are the cold cost's)."""
    paid = [v for v in rows if v.pays_back and v.one_time_s >= MIN_COST_S]
    if not paid:
        return ""
    n_lo, n_hi = min(v.break_even for v in paid), max(v.break_even for v in paid)
    cost = _span([v.one_time_s for v in paid])
    warm_s = [v.warm_one_time_s for v in paid if np.isfinite(v.warm_one_time_s)]
    if warm and warm_s:
        cost += f" ({_span(warm_s)} warm)"
    return f"one-time {cost}, paid back after {calls_said(n_lo, n_lo, n_hi)}"


_PHRASE = {"faster": "faster", "equal": "no gain", "slower": "slower", "undecided": "undecided"}


def _sentence(name: str, rows: list[Verdict], among: list[str], warm: bool = True) -> tuple[float, str]:
    """(rank key, sentence) for one option or declared comparison (`warm`: _cost's)."""
    ok = [v for v in rows if v.ok]
    if not ok:
        return -1.0, ""
    tag = " (int8: changes outputs)" if quantized(name) else ""
    faster = [v for v in ok if v.decision == "faster"]
    rest = []
    for word in ("equal", "slower", "undecided"):
        sel = [v for v in ok if v.decision == word]
        if sel:
            rest.append(f"{_PHRASE[word]} at {_where(sel, among)}" + (f" ({_range(sel)})" if word == "slower" else ""))
    base = ok[0].baseline if len({v.baseline for v in ok}) == 1 else "its baseline"
    if faster:
        cost = _cost(faster, warm)
        s = (f"{name}{tag} pays off at {_where(faster, among)}: {_range(faster)} faster than {base}"
             + (f", {cost}" if cost else "") + ("; " + "; ".join(rest) if rest else "") + ".")
        # Quantized options change outputs: they rank after every full-precision option that pays off.
        return max(v.speedup for v in faster) / (1000.0 if tag else 1.0), s
    return 0.0, f"{name}{tag}: " + "; ".join(rest) + "."


def _merged(sentences: list[tuple[float, str]]) -> list[tuple[float, str]]:
    """Options that did not pay off anywhere and say the same thing are named together in one sentence."""
    out: list[tuple[float, str]] = []
    same: dict[str, list[str]] = {}
    for rank, s in sentences:
        if rank <= 0 and ": " in s:
            name, body = s.split(": ", 1)
            if body in same:
                same[body].append(name)
                continue
            same[body] = [name]
        out.append((rank, s))
    merged = []
    for rank, s in out:
        if rank <= 0 and ": " in s and len(same.get(s.split(": ", 1)[1], [])) > 1:
            body = s.split(": ", 1)[1]
            s = ", ".join(same[body]) + ": " + body
        merged.append((rank, s))
    return merged


def words(text: str) -> int:
    """Words as the strictest reader counts them: every run of letters or digits, so '1.24–1.82×' is four and
    'keras-tensorflow-jit' three (a budget kept this way holds under any word count)."""
    return len(re.findall(r"\w+", re.sub(r"<[^>]+>", " ", text)))


def answer_sentences(vt: VerdictTable) -> list[str]:
    """The Answer: per option (faster ones first, by their largest speed-up) where it pays off and where it does
    not, with its one-time cost and the calls that pay it back; then the declared comparisons between options;
    then one sentence on what the verdicts can tell. At most ANSWER_WORDS words: what does not fit is in the table.
    A compile's warm cost (the cache an earlier process saved) is said beside the cold one only where every sentence
    fits with it; the tables give it always."""
    if not any(v.ok for v in vt):
        return ["Nothing ran ok beside its baseline, so there is no answer yet: the table below gives each "
                "configuration's status."]
    out, left_out = _fitted(vt, warm=True)
    return _fitted(vt, warm=False)[0] if left_out else out


def _fitted(vt: VerdictTable, *, warm: bool) -> tuple[list[str], int]:
    """answer_sentences' sentences within the budget, and how many of them it left out."""
    opts = [v for v in vt.options()]
    ranked = []
    for name in dict.fromkeys(v.candidate for v in opts):
        rows = [v for v in opts if v.candidate == name]
        ranked.append(_sentence(name, rows, list(dict.fromkeys(v.workload for v in rows)), warm))
    ranked = _merged(sorted(ranked, key=lambda t: -t[0]))
    declared = [v for v in vt if v.kind == "declared"]
    for label in dict.fromkeys(v.comparison for v in declared):
        rows = [v for v in declared if v.comparison == label]
        rank, s = _sentence(label, rows, list(dict.fromkeys(v.workload for v in rows)), warm)
        # a declared comparison that is decided faster (a successor over the path it replaces) is said after the
        # full-precision options that pay off and before quantized ones; the others after everything
        ranked.append((rank / 100.0 if rank > 0 else rank - 100.0,
                       s.replace(f"{label} pays off at", f"{label}: faster at", 1)))
    ranked.sort(key=lambda t: -t[0])
    first = pick_sentence(vt)
    out: list[str] = [first] if first else []
    closing = _closing(vt)
    budget = ANSWER_WORDS - words(closing) - 6
    left_out = 0
    for _, s in [r for r in ranked if r[1]]:
        if words(" ".join([*out, s])) <= budget:
            out.append(s)
        else:
            left_out += 1
    if left_out:
        out.append(f"{left_out} more: see the table.")
    return [*out, closing], left_out


def successor_line(vt: VerdictTable, comparisons) -> str:
    """Where each successor matches or beats the deprecated path it replaces (the study's comparisons with
    `replaces`), from the verdict table's declared rows: one clause per decision, with the workloads and speed-ups."""
    parts = []
    for c in comparisons:
        rows = [v for v in vt.of(c.label) if v.ok and v.candidate == c.candidate and v.baseline == c.baseline]
        if not c.replaces or not rows:
            continue
        among = list(dict.fromkeys(v.workload for v in rows))
        said = [f"{words_} at {_where(sel, among)} ({_range(sel)})" for word, words_ in verdicts.SUCCESSOR_WORDS.items()
                if (sel := [v for v in rows if v.decision == word])]
        parts.append(f"`{c.candidate}` against `{c.baseline}` ({c.replaces}): " + "; ".join(said))
    return ("**Successors of deprecated paths.** " + ". ".join(parts) + ".") if parts else ""


def _closing(vt: VerdictTable) -> str:
    undecided = [v.detectable for v in vt if v.ok and v.decision == "undecided" and np.isfinite(v.detectable)]
    band = f"±{(vt.rows[0].band if len(vt) else speedups.EQUIVALENCE) - 1:.0%}"
    if undecided:
        return (f"Ties are within {band}; undecided cells could not tell effects under "
                f"{numbers.fmt(min(undecided))}.")
    return f"Ties are within {band}."


def answer_html(vt: VerdictTable, machine: str) -> str:
    """The Answer box: the sentences and the machine they hold for (what a GPU would change is said under it)."""
    items = "".join(f"<li>{_inline(s)}</li>" for s in answer_sentences(vt))
    return (f'<div class="answer" style="border:2px solid #2b6cb0;border-radius:6px;padding:.6rem 1rem;'
            f'margin:.5rem 0 1rem;background:#f4f8fc"><h2 style="margin-top:0">Answer</h2><ul>{items}</ul>'
            f'<p style="color:#444;font-size:.9em">Measured on {html.escape(machine)}.</p></div>')


def _inline(text: str) -> str:
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(text, quote=False))
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def pick_sentence(vt: VerdictTable) -> str:
    """The Answer's first sentence: what to use, by workload ('Pick: ort at every workload.')."""
    workloads = list(dict.fromkeys(v.workload for v in vt.options()))
    picks: dict[str, list[tuple[str, Verdict | None]]] = {}
    for w in workloads:
        words_, top = pick(vt, w)
        if words_:
            key = "undecided: keep the default" if words_.startswith("undecided") else _unordered(words_)
            picks.setdefault(key, []).append((w, top))
    if not picks:
        return ""
    parts = []
    for words_, chosen in picks.items():
        wl = [w for w, _ in chosen]
        tops = [t for _, t in chosen if t is not None]
        where = ("every workload" if len(wl) == len(workloads) and len(wl) > 1 else
                 wl[0] if len(wl) == 1 else joined(wl) if len(wl) <= 3 and joined(wl) != ", ".join(wl)
                 else f"{len(wl)} of {len(workloads)} workloads")
        parts.append(f"{words_} at {where}" + (f" ({_range(tops)} over {tops[0].baseline})" if tops else ""))
    return "Pick: " + "; ".join(parts) + "."


def _unordered(words_: str) -> str:
    """'use B or A (not told apart: …)' and 'use A or B (…)' are one pick: two options this run could not order."""
    m = re.fullmatch(r"use (.+?) or (.+?) \(not told apart: (\w+)\)", words_)
    return f"use {' or '.join(sorted(m.group(1, 2)))} (not told apart: {m.group(3)})" if m else words_


def verdict_lines(vt: VerdictTable) -> list[str]:
    """One line per comparison of the table (options over the default, declared ones): its decisions counted, with
    the workloads where few, and the range of its speed-ups within each decision."""
    lines = []
    for label in vt.comparisons():
        rows = [v for v in vt.of(label) if v.kind != "lead"]
        ok = [v for v in rows if v.ok]
        if not rows:
            continue
        if not ok:
            lines.append(f"**{label}**: not measured ({rows[0].status}: {rows[0].message[:120]}).")
            continue
        among = list(dict.fromkeys(v.workload for v in rows))
        parts = []
        for word in verdicts.DECISIONS:
            sel = [v for v in ok if v.decision == word]
            if sel:
                parts.append(f"{word} at {_where(sel, among)} ({_range(sel)})")
        failed = len(rows) - len(ok)
        lines.append(f"**{label}**: " + "; ".join(parts) + (f"; {failed} not measured" if failed else "") + ".")
    return lines


def first_sentence(vt: VerdictTable) -> str:
    """The Answer's first sentence (the index's headline of a study)."""
    return answer_sentences(vt)[0]
