"""Tables as a reader takes them in: a long table shows its first rows, and folds the whole of it under one
summary line with the table as a CSV to download (embedded in the page, so the link works wherever it is read)."""

from __future__ import annotations

import base64
import html

import pandas as pd
from IPython.display import HTML

SHOWN_ROWS = 10  # a table up to this long is shown whole


def folded(table: pd.DataFrame, name: str, *, shown: int = SHOWN_ROWS, what: str = "rows") -> HTML:
    """`table` for a page: whole when it has at most `shown` rows, else its first `shown` rows then the whole
    table under a closed <details> line ("all 98 rows …") with a link to it as `name`.csv; never truncated."""
    def _html(t: pd.DataFrame) -> str:
        return t.to_html(index=False, escape=True, na_rep="", classes="study-table", max_rows=None,
                         max_cols=None)

    if len(table) <= shown:
        return HTML(_html(table))
    csv = base64.b64encode(table.to_csv(index=False).encode()).decode()
    link = (f'<a download="{html.escape(name)}.csv" href="data:text/csv;base64,{csv}">'
            f"{html.escape(name)}.csv</a>")
    return HTML(f"{_html(table.head(shown))}"
                f'<p class="study-more">The first {shown} of {len(table)} {what}; the whole table is below '
                f"and as {link}.</p>"
                f'<details class="study-table"><summary>All {len(table)} {what}</summary>{_html(table)}</details>')
