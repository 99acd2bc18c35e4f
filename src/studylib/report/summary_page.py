"""The summary page's reader-facing parts: its opening line from the registry of studies, its answer first, and a
compact verdict matrix whose cells link to the study page that holds each claim's numbers (summary.py computes)."""

from __future__ import annotations

import json

import pandas as pd

from ..claims import claims as seedclaims
from ..core import paths, wording
from ..studies import STUDIES
from .summary import WORDS

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
    return wording.macro(WORDS, "opening", [_study_title(nb) for nb in STUDIES], names)


def answer(names: list[str], claims_table: pd.DataFrame) -> str:
    """Markdown: the page's answer first — what each profile says about the seeds' claims, and, with fewer than
    two profiles, that nothing is compared yet and which profiles would add which claims."""
    lines = [seedclaims.totals_line(claims_table[claims_table.profile == p], p) for p in names]
    if len(names) == 1:
        lines.append(wording.macro(WORDS, "only", names[0]))
    lines += [wording.macro(WORDS, "would_add", who, ids, sorted({i[:3] for i in ids}))
              for who, ids in _would_add(names, claims_table).items()] if names else []
    return wording.block("report/summary_answer.md.j2", lines=lines)


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
    profiles = list(dict.fromkeys(claims_table.profile)) if len(claims_table) else []
    pages = {nb[:2]: nb for nb in STUDIES}
    rows = []
    for (claim_id, claim), g in claims_table.groupby(["id", "claim"], sort=False) if len(claims_table) else ():
        cells = []
        for p in profiles:
            r = g[g.profile == p]
            if not len(r):
                cells.append(None)
                continue
            r, nb = r.iloc[0], pages.get(str(r.iloc[0].study))
            cells.append({"word": SHORT.get(r.judgement, str(r.judgement)), "tip": str(r.verdict),
                          "href": f"../../{p}/html/{nb}.html" if nb and _has_page(p, nb) else ""})
        rows.append((str(claim_id), str(claim), cells))
    return wording.block("report/claim_matrix.html.j2", profiles=profiles, rows=rows)
