"""The summary page's reader-facing parts: its opening line from the registry of studies, its answer first, and a
compact verdict matrix whose cells link to the study page that holds each claim's numbers (summary.py computes)."""

from __future__ import annotations

import html
import json

import pandas as pd

from ..claims import claims as seedclaims
from ..core import paths
from ..studies import STUDIES

# A claim's short verdict (the claims table's `judgement`) as one word or two for the matrix.
SHORT = {"not comparable on this profile": "not comparable here", "not run on this profile": "not run",
         "not answerable from these results": "no answer", "agrees in direction only": "direction only",
         "not tested by this study": "not tested"}


def _study_title(notebook: str) -> str:
    """A study's page title from its notebook's first heading ('01 · Eager PyTorch vs …')."""
    cells = json.loads(paths.notebook_path(notebook).read_text())["cells"]
    first = "".join(cells[0]["source"]).splitlines()[0] if cells else notebook
    return first.lstrip("# ").strip()


def opening(names: list[str]) -> str:
    """Markdown: what this page covers, counted from the registry of studies and the profiles with results."""
    studies = "; ".join(_study_title(nb) for nb in STUDIES)
    which = ", ".join(f"`{n}`" for n in names) or "none yet"
    return (f"This page sets the {len(STUDIES)} studies ({studies}) side by side for every profile with results "
            f"({which}). It measures nothing itself: each study's own analysis runs on each profile's results.")


def answer(names: list[str], claims_table: pd.DataFrame) -> str:
    """Markdown: the page's answer first — what each profile says about the seeds' claims, and, with fewer than
    two profiles, that nothing is compared yet and which profiles would add which claims."""
    if not names:
        return "**Answer.** No profile has results yet, so there is nothing to summarise."
    lines = [seedclaims.totals_line(claims_table[claims_table.profile == p], p) for p in names]
    if len(names) < 2:
        lines.append(f"Only `{names[0]}` has results here, so nothing is compared across machines yet.")
    for who, ids in _would_add(names, claims_table).items():
        seeds = sorted({i[:3] for i in ids})
        what = ", ".join(ids) if len(ids) <= 3 else f"from seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}"
        lines.append(f"Results from {', '.join(f'`{p}`' for p in who)} would judge {len(ids)} claim(s) not judged "
                     f"here ({what}).")
    return "**Answer.**\n\n" + "\n".join(f"- {line}" for line in lines)


def _would_add(names: list[str], claims_table: pd.DataFrame) -> dict[tuple[str, ...], list[str]]:
    """The claims no present profile judged, grouped by the profiles without results that would test them."""
    judged = set(claims_table[~claims_table.judgement.astype(str).str.startswith("not ")].id)
    out: dict[tuple[str, ...], list[str]] = {}
    for claim in seedclaims.registry():
        who = tuple(sorted(p for p in seedclaims.testing_profiles(claim) if p not in names))
        if claim.id not in judged and who:
            out.setdefault(who, []).append(claim.id)
    return out


def _has_page(profile: str, notebook: str) -> bool:
    """Whether the profile's page for `notebook` exists or will be rendered (its executed notebook exists)."""
    return ((paths.html_dir(profile) / f"{notebook}.html").exists()
            or (paths.executed_dir(profile) / f"{notebook}.ipynb").exists())


def verdict_matrix(claims_table: pd.DataFrame) -> str:
    """HTML: each claim down, each profile across, its short verdict linked to the study page with its numbers."""
    if not len(claims_table):
        return "<p>No claim was judged: no profile has results.</p>"
    profiles = list(dict.fromkeys(claims_table.profile))
    pages = {nb[:2]: nb for nb in STUDIES}
    head = "".join(f"<th>{html.escape(p)}</th>" for p in profiles)
    rows = []
    for (claim_id, claim), g in claims_table.groupby(["id", "claim"], sort=False):
        cells = []
        for p in profiles:
            r = g[g.profile == p]
            if not len(r):
                cells.append("<td>not run</td>")
                continue
            r = r.iloc[0]
            word = html.escape(SHORT.get(r.judgement, str(r.judgement)))
            nb = pages.get(str(r.study))
            tip = html.escape(str(r.verdict))
            cells.append(f'<td title="{tip}"><a href="../../{p}/html/{nb}.html">{word}</a></td>'
                         if nb and _has_page(p, nb) else f'<td title="{tip}">{word}</td>')
        rows.append(f"<tr><td>{html.escape(str(claim_id))}</td><td>{html.escape(str(claim))}</td>{''.join(cells)}</tr>")
    return (f'<table class="verdicts"><thead><tr><th>claim</th><th>what the seed says</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")
