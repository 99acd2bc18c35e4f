"""The few figure kinds the studies share. Failed configurations are drawn as marked cells, never gaps."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

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
    import textwrap

    return textwrap.fill(text, width=max(40, int(fig.get_figwidth() * 14))) if text else ""


def _caption(fig, text: str):
    """A one-sentence caption under a single-panel figure (below its axes), saying what to see; returns it."""
    if text:
        fig.text(0.01, 0.0, _wrapped(fig, text), ha="left", va="top", fontsize=9, style="italic", color="0.25")
    return fig


# Up to this many distinct x values a sweep is drawn as dots with CI bars, not as lines: two points make no curve.
DOTS_UP_TO = 2


def lines_with_ci(df: pd.DataFrame, *, x: str, y: str, lo: str, hi: str, hue: str, row: str = "", col: str = "",
                  ylabel: str = "", xlabel: str = "", logx: bool = True, logy: bool = False,
                  reference: float | None = None, title: str = "", scale: float = 1.0, caption: str = ""):
    """One line per `hue` with a shaded 95% CI band, faceted by `row` × `col`; where x takes at most DOTS_UP_TO
    values, dots with CI bars side by side instead. `caption`: one sentence under the figure, what to see.

    Rows whose `status` is not 'ok' are drawn as labelled markers along the bottom of their facet.
    """
    fig, axes, rows, cols = _facets(df, row, col)
    hues = list(dict.fromkeys(df[hue]))
    colors = {h: plt.cm.tab10(i % 10) for i, h in enumerate(hues)}
    dots = df[x].nunique() <= DOTS_UP_TO
    dodge = {h: 2 ** ((k - (len(hues) - 1) / 2) * 0.06) for k, h in enumerate(hues)}  # multiplicative: log x
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i][j]
            sel = _select(df, row, r, col, c)
            ok = sel[sel.status == "ok"]
            for h in hues:
                g = ok[ok[hue] == h].sort_values(x)
                if len(g) and dots:
                    mid = g[y] * scale
                    ax.errorbar(g[x] * dodge[h], mid, yerr=[mid - g[lo] * scale, g[hi] * scale - mid], fmt="o", ms=5,
                                capsize=3, label=str(h), color=colors[h])
                elif len(g):
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
                _plain_log_axis(ax.yaxis)
                ax.tick_params(axis="y", which="minor", labelsize=7)
            ax.set_title(" · ".join(str(v) for v in (r, c) if v is not None), fontsize=10)
            ax.set_xlabel(xlabel or x)
            ax.set_ylabel(ylabel or y)
            ax.grid(alpha=0.3, which="both")
            if dots and logx:
                xs = sorted(sel[x].dropna().unique())
                if xs:
                    ax.set_xlim(xs[0] / 1.6, xs[-1] * 1.6)
    return _finish(fig, axes, title, caption)


def speedup_points(sp: pd.DataFrame, *, x: str = "batch_size", hue: str = "variant", row: str = "", col: str = "",
                   title: str = "", ylabel: str = "speed-up over eager (×)", logy: bool = False, caption: str = ""):
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
            ax.set_ylabel(ylabel)
            if logy:
                ax.set_yscale("log")
                _plain_log_axis(ax.yaxis)
                ax.tick_params(axis="y", which="minor", labelsize=7)
            ax.grid(alpha=0.3)
    return _finish(fig, axes, title, caption)


def forest(sp: pd.DataFrame, *, label: str = "variant", color: str = "backend", col: str = "workload",
           title: str = "", xlabel: str = "speed-up over eager (×, log scale)", caption: str = ""):
    """Speed-ups as a forest plot: one line per `label` with its 95% CI as a bar on a log axis, coloured by `color`,
    one panel per `col`; 1 (no change) dashed; a failed or skipped row is written at 1 with its status."""
    cols = list(dict.fromkeys(sp[col]))
    labels = list(dict.fromkeys(sp[label]))
    colours = {c: plt.cm.tab10(i % 10) for i, c in enumerate(dict.fromkeys(sp[color]))}
    fig, axes = plt.subplots(1, len(cols), figsize=(4.2 * len(cols) + 1.6, 0.32 * len(labels) + 1.6), squeeze=False,
                             sharey=True)
    for j, c in enumerate(cols):
        ax = axes[0][j]
        sel = sp[sp[col] == c]
        for t in sel.itertuples():
            y = labels.index(getattr(t, label))
            hue = colours[getattr(t, color)]
            if pd.notna(t.speedup):
                ax.errorbar([t.speedup], [y], xerr=[[t.speedup - t.ci_low], [t.ci_high - t.speedup]], fmt="o",
                            color=hue, capsize=3, label=str(getattr(t, color)))
            else:
                ax.text(1.0, y, f" {t.status}", va="center", fontsize=7, color="crimson")
        ax.axvline(1.0, color="grey", lw=1, ls="--")
        ax.set_xscale("log")
        _plain_log_axis(ax.xaxis)
        ax.set_yticks(range(len(labels)), labels)
        ax.set_ylim(-0.7, len(labels) - 0.3)
        ax.invert_yaxis()
        ax.set_title(str(c), fontsize=9)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3, axis="x")
    return _finish(fig, axes, title, caption)


def heatmap(sp: pd.DataFrame, *, x: str = "seq_len", y: str = "batch_size", row: str = "model", col: str = "pair",
            title: str = "", caption: str = ""):
    """Speed-up per cell of a y × x grid, one panel per `row` × `col`; annotated with ratio and 95% CI.

    Colour is log2 of the speed-up, blue faster and red slower, on one scale for all panels. A cell whose
    run failed is grey and names its status; a cell outside the grid stays blank.
    """
    from matplotlib.colors import TwoSlopeNorm

    fig, axes, rows, cols = _facets(sp, row, col)
    fig.set_layout_engine("constrained")
    ok = sp[sp.speedup.notna()]
    span = float(np.nanmax(np.abs(np.log2(ok.speedup)))) if len(ok) else 1.0
    norm = TwoSlopeNorm(0.0, -max(span, 0.1), max(span, 0.1))
    xs, ys = sorted(sp[x].unique()), sorted(sp[y].unique())
    image = None
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            ax = axes[i][j]
            sel = _select(sp, row, r, col, c)
            grid = np.full((len(ys), len(xs)), np.nan)
            for t in sel.itertuples():
                yi, xi = ys.index(getattr(t, y)), xs.index(getattr(t, x))
                if pd.notna(t.speedup):
                    grid[yi, xi] = np.log2(t.speedup)
                    ax.text(xi, yi, f"{t.speedup:.2f}×\n({t.ci_low:.2f}–{t.ci_high:.2f})", ha="center", va="center",
                            fontsize=7)
                else:
                    ax.add_patch(plt.Rectangle((xi - 0.5, yi - 0.5), 1, 1, color="0.8", hatch="//", fill=True))
                    ax.text(xi, yi, str(t.status), ha="center", va="center", fontsize=7, color="crimson")
            image = ax.imshow(grid, cmap="RdBu", norm=norm, origin="lower", aspect="auto")
            ax.set_xticks(range(len(xs)), [str(int(v)) for v in xs])
            ax.set_yticks(range(len(ys)), [str(int(v)) for v in ys])
            ax.set_xlabel(x.replace("_", " "))
            ax.set_ylabel(y.replace("_", " "))
            ax.set_title(" · ".join(str(v) for v in (r, c) if v is not None), fontsize=9)
    if image is not None:
        bar = fig.colorbar(image, ax=axes, shrink=0.6, pad=0.02)
        ticks = [t for t in (-3, -2, -1, -0.5, 0, 0.5, 1, 2, 3) if abs(t) <= max(span, 0.1)]
        bar.set_ticks(ticks, labels=[f"{2 ** t:.2g}×" for t in ticks])
        bar.set_label("speed-up (log scale)")
    if title:
        fig.suptitle(title)
    return _caption(fig, caption)


def length_histogram(lengths, *, max_length: int, title: str = "", caption: str = ""):
    """Distribution of token lengths (log count), with the median, p90 and the truncation length marked."""
    lengths = np.asarray(lengths)
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.hist(lengths, bins=np.unique(np.geomspace(1, max(max_length, lengths.max()) + 1, 40).astype(int)),
            color="steelblue", alpha=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for q, style in ((50, "--"), (90, ":")):
        v = np.percentile(lengths, q)
        ax.axvline(v, color="k", ls=style, lw=1, label=f"p{q} = {v:.0f} tokens")
    ax.axvline(max_length, color="crimson", lw=1, label=f"max_length = {max_length}")
    _plain_log_axis(ax.xaxis)
    _plain_log_axis(ax.yaxis)
    ax.set_xlabel("tokens per text (with special tokens)")
    ax.set_ylabel("texts")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return _caption(fig, caption)


def speedups_by_profile(table: pd.DataFrame, *, title: str = "", caption: str = ""):
    """Headline speed-ups, one row per comparison, one marker per profile with its 95% CI (log scale).

    A comparison a profile could not measure gets a failure marker at the left edge, labelled with why.
    """
    comps = list(dict.fromkeys(table.comparison))
    profiles = list(dict.fromkeys(table.profile))
    fig, ax = plt.subplots(figsize=(9.5, 0.45 * len(comps) + 1.6))
    offsets = {p: (k - (len(profiles) - 1) / 2) * 0.8 / max(len(profiles), 1) for k, p in enumerate(profiles)}
    for k, p in enumerate(profiles):
        g = table[table.profile == p]
        ok = g[g.status == "ok"]
        ys = np.array([comps.index(c) for c in ok.comparison]) + offsets[p]
        ax.errorbar(ok.speedup, ys, xerr=[ok.speedup - ok.ci_low, ok.ci_high - ok.speedup], fmt="o", capsize=3,
                    color=plt.cm.tab10(k % 10), label=p)
        for f in g[(g.status != "ok") & (g.status != "not in this profile")].itertuples():
            y = comps.index(f.comparison) + offsets[p]
            ax.plot(0.02, y, transform=ax.get_yaxis_transform(), marker="x", color=plt.cm.tab10(k % 10), ms=8,
                    ls="none", label=f"{p} (did not run)")
            ax.annotate(str(f.status).split(":")[0], (0.02, y), xycoords=("axes fraction", "data"), xytext=(6, 0),
                        textcoords="offset points", fontsize=7, color="crimson", va="center")
    ax.axvline(1.0, color="grey", lw=1, ls="--")
    ax.set_yticks(range(len(comps)), comps)
    ax.invert_yaxis()
    ax.set_xscale("log")
    _plain_log_axis(ax.xaxis)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("speed-up (×, geometric mean over shapes, 95% CI)")
    ax.grid(alpha=0.3, axis="x")
    return _finish(fig, np.array([ax]), title, caption)


def roofline(rt: pd.DataFrame, peaks: dict | None, *, title: str = "Roofline: achieved rate against arithmetic intensity",
             caption: str = ""):
    """Achieved GFLOP/s against arithmetic intensity (FLOPs per byte), log-log, one colour per variant and one
    marker per dtype, under the machine's roofs: the bandwidth slope and each dtype's matmul peak
    (roofline.roofline_table and measure_peaks). Rows that cannot be placed (failed, or no FLOP count) are
    listed in a note under the axes. Returns the figure."""
    from . import roofline as rf

    points, left_out = rf.plottable(rt)
    fig, ax = plt.subplots(figsize=(9, 5.4))
    variants = list(dict.fromkeys(points.variant))
    markers = dict(zip(dict.fromkeys(points.peak_of), "os^DvP*"))
    for k, v in enumerate(variants):
        for key, g in points[points.variant == v].groupby("peak_of", sort=False):
            ax.scatter(g.intensity, g.gflops, color=plt.cm.tab10(k % 10), marker=markers[key], s=36, alpha=0.85,
                       label=f"{v}" + (f" ({key})" if len(markers) > 1 else ""))
    bandwidth = rf.peak_bandwidth(peaks)
    if bandwidth and len(points):
        lo, hi = points.intensity.min() / 3, points.intensity.max() * 3
        for key in dict.fromkeys(["fp32", *points.peak_of]):
            peak = rf.peak_gflops(peaks, key)
            if not peak:
                continue
            lo, hi = min(lo, peak / bandwidth / 3), max(hi, peak / bandwidth * 3)
            xs = np.geomspace(lo, hi, 200)
            roof = np.minimum(peak, bandwidth * xs)
            ax.plot(xs, roof, color="0.35", lw=1.2, ls="-" if key == "fp32" else "--")
            if key == "fp32":  # below this line a call is overhead-bound (roofline.regime)
                ax.plot(xs, rf.OVERHEAD_SHARE * roof, color="0.6", lw=0.8, ls=":",
                        label=f"{rf.OVERHEAD_SHARE:.0%} of the fp32 roof (overhead-bound below)")
            ax.annotate(f"{key} peak {peak:,.0f} GFLOP/s", (hi, peak), xytext=(-4, 4), textcoords="offset points",
                        ha="right", fontsize=8, color="0.3")
        ax.annotate(f"{bandwidth:,.1f} GB/s", (lo, bandwidth * lo), xytext=(4, 6), textcoords="offset points",
                    fontsize=8, color="0.3", rotation=30)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_log_axis(ax.xaxis)
    _plain_log_axis(ax.yaxis)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte moved)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.grid(alpha=0.3, which="both")
    notes = [] if peaks else ["machine limits unknown: no roofs drawn"]
    if len(left_out):
        why = left_out.apply(lambda r: r["status"] if r["status"] != "ok" else "no FLOP count", axis=1)
        notes.append(f"not plotted, {len(left_out)} configuration(s): "
                     + "; ".join(f"{n} {w}" for w, n in why.value_counts().items()))
    if notes:
        ax.text(0.0, -0.16, " · ".join(notes), transform=ax.transAxes, fontsize=8, color="crimson", va="top")
    ax.set_title(title, fontsize=11)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return _caption(fig, caption)
