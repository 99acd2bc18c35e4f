"""The seed articles the studies re-examine, named as a reader cites them: title, author, year, address.

Built from the registry's articles (claims.yaml: read from the headers and bylines of the stored copies,
shared/seeds/*.txt, mostly Chinese reports); an address is given only where the copy carries one, and a field the
copy does not state says so.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from ..claims.claim_registry import articles


@dataclass(frozen=True)
class Seed:
    id: str
    title: str
    author: str
    year: str
    url: str = ""  # "" where the stored copy gives no address
    read_as: str = ""  # the stored copy, where it is a translation or a report of the original

    def html(self) -> str:
        title = html.escape(self.title)
        title = f'<a href="{html.escape(self.url)}">{title}</a>' if self.url else title
        via = f" Source: {html.escape(self.read_as)}." if self.read_as else ""
        return f"<li><b>Seed {self.id}</b>: {title}, {html.escape(self.author)}, {html.escape(self.year)}.{via}</li>"


def _address(source: str) -> str:
    """The first web address in an article's `source` (host/path, as the registry writes it), or ""."""
    m = re.search(r"\b((?:[\w-]+\.)+(?:com|ai|org|io|net)/\S+)", source)
    return f"https://{m.group(1).rstrip(');,')}" if m else ""


def _seeds() -> dict[str, Seed]:
    """The registry's articles (claims.yaml, the one place a seed's title, author and date are written)."""
    return {sid: Seed(sid, f"{a.title_en} ({a.title})", a.author, a.date, _address(a.source), a.source)
            for sid, a in articles().items()}


SEEDS = _seeds()


def html_list(ids=None) -> str:
    """The seeds (all, or `ids`) as an HTML list, each by title, author and year, linked where it has an address."""
    return "<ul class=\"study-seeds\">" + "".join(SEEDS[i].html() for i in (ids or SEEDS)) + "</ul>"
