"""Tables for a page: a long one shows its first rows and folds the whole under one line, with an embedded CSV."""

from __future__ import annotations

import base64

import pandas as pd
from IPython import get_ipython
from IPython.display import HTML

from ..core import wording

SHOWN_ROWS = 10  # a table up to this long is shown whole


def clean(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with every missing value (NaN, None, <NA>) as an empty cell: a page never prints them."""
    return table.astype(object).where(table.notna(), "")


def page_html(table: pd.DataFrame, classes: str = "dataframe") -> str:
    """A table as a page shows it: missing values blank, a plain row count (RangeIndex) left out, never cut."""
    keep_index = not isinstance(table.index, pd.RangeIndex)
    return clean(table).to_html(index=keep_index, escape=True, classes=classes, max_rows=None, max_cols=None)


def install() -> None:
    """In a notebook's kernel, every DataFrame a cell returns is shown through `page_html`."""
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, page_html)


def folded(table: pd.DataFrame, name: str, *, shown: int = SHOWN_ROWS, what: str = "rows") -> HTML:
    """`table` whole up to `shown` rows, else its first rows and the rest under a closed <details> (each row once),
    and the whole as `name`.csv."""
    if len(table) <= shown:
        return HTML(page_html(table.reset_index(drop=True), "study-table"))
    csv = base64.b64encode(table.to_csv(index=False).encode()).decode()
    return HTML(wording.block("report/folded.html.j2", head=page_html(table.head(shown).reset_index(drop=True),
                              "study-table"), shown=shown, n=len(table), what=what, name=name, csv=csv,
                              rest=page_html(table.iloc[shown:].reset_index(drop=True), "study-table")))
