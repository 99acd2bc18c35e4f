"""A study's Answer, headline and verdict lines, in words, from a VerdictTable (docs/method.md, "Pages")."""

from __future__ import annotations

import html
import re

import numpy as np

from ..core import numbers, wording
from ..core.variants import changes_outputs
from ..stats import speedups, verdicts
from ..stats.verdicts import Verdict, VerdictTable
from .decisions import MIN_COST_S, calls_said, pick

ANSWER_WORDS = 110  # counted strictly (`words`): the box, its heading and machine line stay under 150
WORDS = "report/answer.md.j2"


def _where(rows: list[Verdict], among: list[Verdict]) -> str:
    """The workloads of `rows` among those of `among`, tersely: 'every workload', 'resnet-50 (3 shapes)', a list."""
    wl, among = (list(dict.fromkeys(v.workload for v in vs)) for vs in (rows, among))
    if len(among) > 1 and set(wl) == set(among):
        return "every workload"
    if len(among) == 1:
        return wl[0]
    parts = []
    for m in dict.fromkeys(v.model for v in rows):
        mine = [w for w in wl if any(v.workload == w and v.model == m for v in rows)]
        all_of_model = [w for w in among if w.startswith(m + " ") or w == m]
        if len(all_of_model) > 1 and set(mine) == set(all_of_model):
            parts.append(f"{m} (all {len(mine)} shapes)")
        else:
            parts += mine
    return joined(parts) if len(parts) <= 3 else f"{len(wl)} of {len(among)} workloads"


def _decided(ok: list[Verdict], among: list[Verdict], words) -> list[tuple[str, str, str]]:
    """(a decision's words, _where, speed-up range) for each decision of `words` (or of a dict's keys) `ok` reached."""
    named = words if isinstance(words, dict) else dict(zip(words, words))
    return [(said, _where(sel, among), _range(sel)) for w, said in named.items()
            if (sel := [v for v in ok if v.decision == w])]


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


def _cost(rows: list[Verdict], warm: bool = True) -> str:
    """'one-time 14.2 s, paid back after 1,400 calls'; with `warm`, the warm cost beside it where measured."""
    paid = [v for v in rows if v.pays_back and v.one_time_s >= MIN_COST_S]
    if not paid:
        return ""
    n_lo, n_hi = min(v.break_even for v in paid), max(v.break_even for v in paid)
    warm_s = [v.warm_one_time_s for v in paid if np.isfinite(v.warm_one_time_s)]
    cold = [v.one_time_s for v in paid]
    return wording.macro(WORDS, "cost", numbers.fmt_range(min(cold), max(cold), numbers.fmt_seconds),
                         numbers.fmt_range(min(warm_s), max(warm_s), numbers.fmt_seconds) if warm and warm_s else "",
                         calls_said(n_lo, n_lo, n_hi))


def _sentence(name: str, rows: list[Verdict], warm: bool = True, declared: bool = False) -> tuple[float, str]:
    """(rank key, sentence) for one option or declared comparison, among its workloads (`warm`: _cost's)."""
    ok = [v for v in rows if v.ok]
    if not ok:
        return -1.0, ""
    tag = changes_outputs(name)
    faster = [v for v in ok if v.decision == "faster"]
    rest = [wording.macro(WORDS, "where", *said) for said in _decided(ok, rows, ("equal", "slower", "undecided"))]
    base = ok[0].baseline if len({v.baseline for v in ok}) == 1 else "its baseline"
    said = wording.macro(WORDS, "option", name, tag, declared and not tag, _where(faster, rows) if faster else "",
                         _range(faster) if faster else "", base, _cost(faster, warm) if faster else "", rest)
    # Quantized options change outputs: they rank after every full-precision option that pays off.
    return (max(v.speedup for v in faster) / (1000.0 if tag else 1.0) if faster else 0.0), said


def _merged(sentences: list[tuple[float, str]]) -> list[tuple[float, str]]:
    """Options that did not pay off anywhere and say the same thing are named together in one sentence."""
    same: dict[str, list[str]] = {}  # a body said by options that did not pay off: their names, in order
    for rank, s in sentences:
        if rank <= 0 and ": " in s:
            name, body = s.split(": ", 1)
            same.setdefault(body, []).append(name)
    out, said = [], set()
    for rank, s in sentences:
        if rank <= 0 and ": " in s:
            if (body := s.split(": ", 1)[1]) in said:
                continue
            said.add(body)
            s = ", ".join(same[body]) + ": " + body
        out.append((rank, s))
    return out


def words(text: str) -> int:
    """Words as the strictest reader counts them: every run of letters or digits ('1.24–1.82×' is four)."""
    return len(re.findall(r"\w+", re.sub(r"<[^>]+>", " ", text)))


def answer_sentences(vt: VerdictTable) -> list[str]:
    """The Answer's sentences, at most ANSWER_WORDS words (docs/method.md, "Pages")."""
    if not any(v.ok for v in vt):
        return [wording.macro(WORDS, "nothing")]
    out, left_out = _fitted(vt, warm=True)
    return _fitted(vt, warm=False)[0] if left_out else out


def _fitted(vt: VerdictTable, *, warm: bool) -> tuple[list[str], int]:
    """answer_sentences' sentences within the budget, and how many of them it left out."""
    opts = vt.options()
    ranked = _merged(sorted((_sentence(name, [v for v in opts if v.candidate == name], warm)
                             for name in dict.fromkeys(v.candidate for v in opts)), key=lambda t: -t[0]))
    declared = [v for v in vt if v.kind == "declared"]
    for label in dict.fromkeys(v.comparison for v in declared):
        rank, s = _sentence(label, [v for v in declared if v.comparison == label], warm, declared=True)
        # a declared one decided faster: after full-precision options, before quantized; the others last
        ranked.append((rank / 100.0 if rank > 0 else rank - 100.0, s))
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
        out.append(wording.macro(WORDS, "more", left_out))
    return [*out, closing], left_out


def successor_line(vt: VerdictTable, comparisons) -> str:
    """Where each successor matches or beats the deprecated path it replaces, one clause per decision."""
    parts = []
    for c in comparisons:
        rows = [v for v in vt.of(c.label) if v.ok and v.candidate == c.candidate and v.baseline == c.baseline]
        if not c.replaces or not rows:
            continue
        parts.append((c.candidate, c.baseline, c.replaces, _decided(rows, rows, verdicts.SUCCESSOR_WORDS)))
    return wording.macro(WORDS, "successors", parts) if parts else ""


def _closing(vt: VerdictTable) -> str:
    undecided = [v.detectable for v in vt if v.ok and v.decision == "undecided" and np.isfinite(v.detectable)]
    return wording.macro(WORDS, "closing", vt.rows[0].band if len(vt) else speedups.EQUIVALENCE,
                         min(undecided) if undecided else None)


def answer_html(vt: VerdictTable, machine: str) -> str:
    """The Answer box: the sentences and the machine they hold for (what a GPU would change is said under it)."""
    return wording.block("report/answer_box.html.j2", sentences=[inline_html(s) for s in answer_sentences(vt)],
                         machine=machine)


def inline_html(line: str) -> str:
    """A line's markdown (**bold**, `code`) as escaped HTML."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(line, quote=False))
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def pick_sentence(vt: VerdictTable) -> str:
    """The Answer's first sentence: what to use, by workload ('Pick: ort at every workload.')."""
    workloads = list(dict.fromkeys(v.workload for v in vt.options()))
    picks: dict[str, list[tuple[str, Verdict | None]]] = {}
    shown: dict[str, str] = {}
    for w in workloads:
        words_, top = pick(vt, w)
        if words_:
            key = "undecided: keep the default" if words_.startswith("undecided") else _unordered(words_)
            picks.setdefault(key, []).append((w, top))
            shown.setdefault(key, key if key.startswith("undecided") else words_)  # the first one's order: fastest first
    parts = []
    for key, chosen in picks.items():
        words_ = shown[key]
        wl = [w for w, _ in chosen]
        tops = [t for _, t in chosen if t is not None]
        where = ("every workload" if len(wl) == len(workloads) and len(wl) > 1 else
                 wl[0] if len(wl) == 1 else joined(wl) if len(wl) <= 3 and joined(wl) != ", ".join(wl)
                 else f"{len(wl)} of {len(workloads)} workloads")
        parts.append((words_, where, _range(tops) if tops else "", tops[0].baseline if tops else ""))
    return wording.macro(WORDS, "pick", parts) if parts else ""


def _unordered(words_: str) -> str:
    """'use B or A (not told apart: …)' and 'use A or B (…)' are one pick: two options this run could not order."""
    m = re.fullmatch(r"use (.+?) or (.+?) \(not told apart: (\w+)\)", words_)
    return wording.macro(WORDS, "unordered", *sorted(m.group(1, 2)), m.group(3)) if m else words_


def verdict_lines(vt: VerdictTable) -> list[str]:
    """One line per comparison of the table: its decisions counted, with their workloads or speed-up ranges."""
    lines = []
    for label in vt.comparisons():
        rows = [v for v in vt.of(label) if v.kind != "lead"]
        ok = [v for v in rows if v.ok]
        if not rows:
            continue
        if not ok:
            lines.append(wording.macro(WORDS, "not_measured", label, rows[0].status, rows[0].message[:120]))
            continue
        lines.append(wording.macro(WORDS, "verdict_line", label, _decided(ok, rows, verdicts.DECISIONS),
                                   len(rows) - len(ok)))
    return lines


def first_sentence(vt: VerdictTable) -> str:
    """The Answer's first sentence (the index's headline of a study)."""
    return answer_sentences(vt)[0]
