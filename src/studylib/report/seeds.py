"""The seed articles the studies re-examine, named as a reader cites them (from claims.yaml's articles)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..claims.claim_registry import articles
from ..core import wording


@dataclass(frozen=True)
class Seed:
    id: str
    title: str
    author: str
    year: str
    url: str = ""  # "" where the stored copy gives no address
    read_as: str = ""  # the stored copy, where it is a translation or a report of the original


def _address(source: str) -> str:
    """The first web address in an article's `source` (host/path, as the registry writes it), or ""."""
    m = re.search(r"\b((?:[\w-]+\.)+(?:com|ai|org|io|net)/\S+)", source)
    return f"https://{m.group(1).rstrip(');,')}" if m else ""


def _seeds() -> dict[str, Seed]:
    """The registry's articles (claims.yaml, the one place a seed's title, author and date are written)."""
    return {sid: Seed(sid, f"{a.title_en} ({a.title})", a.author, a.date, _address(a.source), a.source)
            for sid, a in articles().items()}


SEEDS = _seeds()


def html_list() -> str:
    """The seeds as an HTML list, each by title, author and year, linked where it has an address."""
    return wording.block("report/seeds.html.j2", seeds=list(SEEDS.values()))
