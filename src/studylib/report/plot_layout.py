"""Layout for plots.py: facets from the shapes that ran, readable log ticks, failure markers, one legend per figure
and a caption under it."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

FAILED_MARKERS = {"oom": "X", "error": "x", "skipped": "s"}


def _facets(df: pd.DataFrame, row: str, col: str, width: float = 4.6, height: float = 3.2):
    """Panels for the (row, col) pairs that have rows in `df`, one figure row per `row` value, left-aligned;
    returns the figure, its axes array (for the legend) and [(ax, r, c)]."""
    keys = list(dict.fromkeys(zip(df[row] if row else [None] * len(df), df[col] if col else [None] * len(df))))
    rows = list(dict.fromkeys(r for r, _ in keys)) or [None]
    ncols = max([sum(1 for r2, _ in keys if r2 == r) for r in rows] + [1])
    fig, axes = plt.subplots(len(rows), ncols, figsize=(width * ncols + 0.6, height * len(rows) + 0.6),
                             squeeze=False, sharex=False)
    cells, used = [], set()
    for i, r in enumerate(rows):
        for j, (_, c) in enumerate(k for k in keys if k[0] == r):
            cells.append((axes[i][j], r, c))
            used.add((i, j))
    for i in range(len(rows)):
        for j in range(ncols):
            if (i, j) not in used:
                axes[i][j].remove()
    return fig, np.array([ax for ax, _, _ in cells] or [axes[0][0]]), cells


def _select(df, row, r, col, c):
    sel = df
    if row:
        sel = sel[sel[row] == r]
    if col:
        sel = sel[sel[col] == c]
    return sel


def _title(r, c) -> str:
    return " · ".join(str(v) for v in (r, c) if v is not None)


def _log_ticks(axis, lo: float, hi: float) -> None:
    """Plain-number ticks on a log axis spanning [lo, hi]: 1-2-5 per decade where that labels three values or
    more, else about five evenly spaced values (a short span, where 1-2-5 leaves one or two labels)."""
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo <= 0 or hi <= lo:
        return
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    if sum(lo <= m * 10.0 ** d <= hi for d in decades for m in (1, 2, 5)) < 3:
        ticks = [t for t in MaxNLocator(5, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi) if lo <= t <= hi and t > 0]
        if len(ticks) >= 3:
            axis.set_ticks(ticks)
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
            axis.set_minor_formatter(NullFormatter())
            return
    _plain_log_axis(axis)


def _log_y(ax) -> None:
    """A log y axis with plain-number ticks (`_log_ticks`) and small minor labels."""
    ax.set_yscale("log")
    _log_ticks(ax.yaxis, *ax.get_ylim())
    ax.tick_params(axis="y", which="minor", labelsize=7)


def _plain_log_axis(axis) -> None:
    """Log-scale tick labels as plain numbers, labelling only the 2s and 5s between decades."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))


def _mark_failed(ax, x, height: float, status: str, color, label: str) -> None:
    """A failed configuration: a marker at `x`, `height` up the axes, labelled with its status."""
    ax.plot(x, height, transform=ax.get_xaxis_transform(), marker=FAILED_MARKERS.get(status, "X"), color=color,
            ms=9, ls="none", label=label)
    ax.annotate(status, (x, height), xycoords=("data", "axes fraction"), xytext=(5, 0), textcoords="offset points",
                fontsize=7, color="crimson", va="center")


CAPTION_IN = 0.22  # inches kept at the bottom of a faceted figure per line of its caption


def _finish(fig, axes, title: str, caption: str = ""):
    """One legend for all facets (each label once), the title, the caption at the very bottom (one sentence:
    what to see), and a tight layout."""
    handles = {}
    for ax in axes.flat:
        for hd, lb in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lb, hd)
    ncol = min(len(handles), 4)
    caption = _wrapped(fig, caption)
    below = CAPTION_IN * (caption.count("\n") + 1) / fig.get_figheight() if caption else 0.0
    fig.legend(list(handles.values()), list(handles), loc="lower center", bbox_to_anchor=(0.5, below), ncol=ncol,
               fontsize=8, frameon=False)
    if caption:
        fig.text(0.01, 0.01, caption, ha="left", va="bottom", fontsize=9, style="italic", color="0.25")
    if title:
        fig.suptitle(title)
    rows = -(-len(handles) // ncol) if handles else 0
    fig.tight_layout(rect=(0, min(0.45, below + 0.35 * rows / fig.get_figheight()), 1, 1))
    return fig


def _wrapped(fig, text: str) -> str:
    """`text` broken into lines that fit the figure's width (about 14 characters of 9-point text per inch)."""
    return textwrap.fill(text, width=max(40, int(fig.get_figwidth() * 14))) if text else ""


def _caption(fig, text: str):
    """A one-sentence caption under a single-panel figure (below its axes), saying what to see; returns it."""
    if text:
        fig.text(0.01, 0.0, _wrapped(fig, text), ha="left", va="top", fontsize=9, style="italic", color="0.25")
    return fig
