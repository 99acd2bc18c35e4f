"""The few figure kinds the studies share. Failed configurations are drawn as marked cells, never gaps."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter
import pandas as pd

FAILED_MARKERS = {"oom": "X", "error": "x", "skipped": "s"}


def _facets(df: pd.DataFrame, row: str, col: str):
    rows = list(dict.fromkeys(df[row])) if row else [None]
    cols = list(dict.fromkeys(df[col])) if col else [None]
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(4.6 * len(cols) + 0.6, 3.2 * len(rows) + 0.6),
                             squeeze=False, sharex=False)
    return fig, axes, rows, cols


def _select(df, row, r, col, c):
    sel = df
    if row:
        sel = sel[sel[row] == r]
    if col:
        sel = sel[sel[col] == c]
    return sel


def _mark_failed(ax, x, height: float, status: str, color, label: str) -> None:
    """A failed configuration: a marker at `x`, `height` up the axes, labelled with its status."""
    ax.plot(x, height, transform=ax.get_xaxis_transform(), marker=FAILED_MARKERS.get(status, "X"), color=color,
            ms=9, ls="none", label=label)
    ax.annotate(status, (x, height), xycoords=("data", "axes fraction"), xytext=(5, 0), textcoords="offset points",
                fontsize=7, color="crimson", va="center")


def _finish(fig, axes, title: str):
    """One legend for all facets (each label once), the title, and a tight layout."""
    handles = {}
    for ax in axes.flat:
        for hd, lb in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lb, hd)
    ncol = min(len(handles), 4)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title)
    rows = -(-len(handles) // ncol) if handles else 0
    fig.tight_layout(rect=(0, min(0.4, 0.35 * rows / fig.get_figheight()), 1, 1))
    return fig


def lines_with_ci(df: pd.DataFrame, *, x: str, y: str, lo: str, hi: str, hue: str, row: str = "", col: str = "",
                  ylabel: str = "", xlabel: str = "", logx: bool = True, logy: bool = False,
                  reference: float | None = None, title: str = "", scale: float = 1.0):
    """One line per `hue` with a shaded 95% CI band, faceted by `row` × `col`.

    Rows whose `status` is not 'ok' are drawn as labelled markers along the bottom of their facet.
    """
    fig, axes, rows, cols = _facets(df, row, col)
    hues = list(dict.fromkeys(df[hue]))
    colors = {h: plt.cm.tab10(i % 10) for i, h in enumerate(hues)}
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i][j]
            sel = _select(df, row, r, col, c)
            ok = sel[sel.status == "ok"]
            for h in hues:
                g = ok[ok[hue] == h].sort_values(x)
                if len(g):
                    ax.plot(g[x], g[y] * scale, marker="o", ms=4, label=str(h), color=colors[h])
                    ax.fill_between(g[x], g[lo] * scale, g[hi] * scale, alpha=0.2, color=colors[h])
            failed = sel[sel.status != "ok"]
            for k, f in enumerate(failed.itertuples()):
                _mark_failed(ax, getattr(f, x), 0.02 + 0.06 * (k % 3), f.status, colors.get(getattr(f, hue), "k"),
                             f"{getattr(f, hue)} ({f.status})")
            if reference is not None:
                ax.axhline(reference, color="grey", lw=1, ls="--")
            if logx:
                ax.set_xscale("log", base=2)
                xs = sorted(sel[x].dropna().unique())
                ax.set_xticks(xs, [str(int(v)) for v in xs])
            if logy and len(ok):
                ax.set_yscale("log")
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                # Label only the 2s and 5s between decades, so the axis stays readable.
                ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
                ax.tick_params(axis="y", which="minor", labelsize=7)
            ax.set_title(" · ".join(str(v) for v in (r, c) if v is not None), fontsize=10)
            ax.set_xlabel(xlabel or x)
            ax.set_ylabel(ylabel or y)
            ax.grid(alpha=0.3, which="both")
    return _finish(fig, axes, title)


def speedup_points(sp: pd.DataFrame, *, x: str = "batch_size", hue: str = "variant", row: str = "", col: str = "",
                   title: str = ""):
    """Speed-up over the reference with 95% CI error bars; 1 (no change) dashed; failures marked."""
    fig, axes, rows, cols = _facets(sp, row, col)
    hues = list(dict.fromkeys(sp[hue]))
    offsets = {h: (k - (len(hues) - 1) / 2) * 0.08 for k, h in enumerate(hues)}
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i][j]
            sel = _select(sp, row, r, col, c)
            for k, h in enumerate(hues):
                g = sel[sel[hue] == h]
                ok = g[g.speedup.notna()]
                xs = np.log2(ok[x].astype(float)) + offsets[h]
                ax.errorbar(xs, ok.speedup, yerr=[ok.speedup - ok.ci_low, ok.ci_high - ok.speedup], fmt="o",
                            capsize=3, color=plt.cm.tab10(k % 10), label=str(h))
                for f in g[g.speedup.isna()].itertuples():
                    _mark_failed(ax, np.log2(float(getattr(f, x))) + offsets[h], 0.05, str(f.status),
                                 plt.cm.tab10(k % 10), f"{h} (failed)")
            ax.axhline(1.0, color="grey", lw=1, ls="--")
            xs = sorted(sel[x].dropna().unique())
            ax.set_xticks(np.log2(np.asarray(xs, dtype=float)), [str(int(v)) for v in xs])
            ax.set_title(" · ".join(str(v) for v in (r, c) if v is not None), fontsize=10)
            ax.set_xlabel(x.replace("_", " "))
            ax.set_ylabel("speed-up over eager (×)")
            ax.grid(alpha=0.3)
    return _finish(fig, axes, title)
