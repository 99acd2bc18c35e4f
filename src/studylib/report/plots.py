"""The few figure kinds the studies share (failures marked, never gaps; A/A controls the grey noise band)."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from ..bench import roofline as rf
from ..core import numbers, wording
from ..core.config import is_aa
from ..machine import limits
from ..stats.speedups import EQUIVALENCE
from .palette import NOISE, colour, marker

BAND_LABEL = wording.macro("report/plots.md.j2", "band", EQUIVALENCE)

sns.set_theme(style="whitegrid", context="notebook", font_scale=0.85, rc={"axes.titlesize": 10})
pd.set_option("display.max_colwidth", None)  # a page never cuts a table cell's text ("… te...")


DOTS_UP_TO = 2


def lines_with_ci(df: pd.DataFrame, *, x: str, y: str, lo: str, hi: str, hue: str, row: str = "", col: str = "",
                  ylabel: str = "", xlabel: str = "", logy: bool = False, title: str = "", scale: float = 1.0,
                  caption: str = ""):
    """One line per `hue` with its 95% CI band, a panel per (`row`, `col`) that ran, failures marked at the bottom."""
    df = df[~_aa_rows(df, [f for f in (row, col) if f])]
    fig, axes, cells = _facets(df, row, col)
    hues = list(dict.fromkeys(df[hue]))
    dodge = {h: 2 ** ((k - (len(hues) - 1) / 2) * 0.06) for k, h in enumerate(hues)}  # multiplicative: log x
    for ax, sel, name in cells:
        ok = sel[sel.status == "ok"]
        dots = sel[x].nunique() <= DOTS_UP_TO
        for h in hues:
            g = ok[ok[hue] == h].sort_values(x)
            if len(g) and dots:
                mid = g[y] * scale
                ax.errorbar(g[x] * dodge[h], mid, yerr=[mid - g[lo] * scale, g[hi] * scale - mid],
                            fmt=marker(h), ms=5, capsize=3, label=str(h), color=colour(h))
            elif len(g):
                ax.plot(g[x], g[y] * scale, marker=marker(h), ms=4, label=str(h), color=colour(h))
                ax.fill_between(g[x], g[lo] * scale, g[hi] * scale, alpha=0.2, color=colour(h))
        failed = sel[sel.status != "ok"]
        for k, f in enumerate(failed.itertuples()):
            _mark_failed(ax, getattr(f, x), 0.02 + 0.06 * (k % 3), f.status, colour(getattr(f, hue)),
                         f"{getattr(f, hue)} ({f.status})")
        xs = sorted(sel[x].dropna().unique())
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(int(v)) for v in xs])
        ax.xaxis.set_minor_formatter(NullFormatter())
        if dots and xs:
            ax.set_xlim(xs[0] / 1.6, xs[-1] * 1.6)
        if logy and len(ok):
            _log_y(ax)
        ax.set_title(name)
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel(ylabel or y)
        ax.grid(alpha=0.3, which="both")
    return _finish(fig, axes, title, caption)


def _aa_rows(df: pd.DataFrame, columns) -> pd.Series:
    """Rows where any of `columns` names an A/A copy (config.is_aa)."""
    return df[list(columns)].map(is_aa).any(axis=1)


def speedup_points(sp: pd.DataFrame, *, x: str = "batch_size", hue: str = "variant", row: str = "", col: str = "",
                   title: str = "", ylabel: str = "speed-up over eager (×)", logy: bool = False, caption: str = ""):
    """Speed-ups with 95% CI bars, a panel per (`row`, `col`), one y scale, the ±5% band grey; no A/A points."""
    sp = sp[~_aa_rows(sp, [f for f in (hue, row, col) if f])]
    fig, axes, cells = _facets(sp, row, col)
    hues = list(dict.fromkeys(sp[hue]))
    offsets = {h: (k - (len(hues) - 1) / 2) * 0.08 for k, h in enumerate(hues)}
    for ax, sel, name in cells:
        ax.axhspan(1 / EQUIVALENCE, EQUIVALENCE, color=NOISE, alpha=0.3, lw=0, zorder=0, label=BAND_LABEL)
        for h in hues:
            g = sel[sel[hue] == h]
            ok = g[g.speedup.notna()]
            xs = np.log2(ok[x].astype(float)) + offsets[h]
            ax.errorbar(xs, ok.speedup, yerr=[ok.speedup - ok.ci_low, ok.ci_high - ok.speedup], fmt="o",
                        capsize=3, color=colour(h), label=str(h))
            for f in g[g.speedup.isna()].itertuples():
                _mark_failed(ax, np.log2(float(getattr(f, x))) + offsets[h], 0.05, str(f.status), colour(h),
                             f"{h} (failed)")
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        xs = sorted(sel[x].dropna().unique())
        ax.set_xticks(np.log2(np.asarray(xs, dtype=float)), [str(int(v)) for v in xs])
        if len(xs) == 1:
            ax.set_xlim(np.log2(float(xs[0])) - 0.5, np.log2(float(xs[0])) + 0.5)
        ax.set_title(name)
        ax.set_xlabel(x.replace("_", " "))
        ax.set_ylabel(ylabel)
        if logy:
            _log_y(ax)
        ax.grid(alpha=0.3)
    _share_y(cells, include_one=True)
    return _finish(fig, axes, title, caption)


def _share_y(cells, *, include_one: bool = False) -> None:
    """One y scale for every panel of a figure (speed-ups compared across facets), 1 included where asked."""
    lims = [ax.get_ylim() for ax, _, _ in cells]
    if not lims:
        return
    lo, hi = min(a for a, _ in lims), max(b for _, b in lims)
    if include_one:
        lo, hi = min(lo, 1 / EQUIVALENCE * 0.98), max(hi, EQUIVALENCE * 1.02)
    for ax, _, _ in cells:
        ax.set_ylim(lo, hi)


def forest(sp: pd.DataFrame, *, label: str = "variant", color: str = "backend", col: str = "workload",
           title: str = "", xlabel: str = "speed-up over eager (×, log scale)", caption: str = ""):
    """A forest plot: a line per `label` with its 95% CI, a panel per `col`, the ±5% band grey; no A/A lines."""
    sp = sp[~_aa_rows(sp, [label])]
    cols = list(dict.fromkeys(sp[col]))
    labels = list(dict.fromkeys(sp[label]))
    fig, axes = plt.subplots(1, len(cols), figsize=(4.2 * len(cols) + 1.6, 0.32 * len(labels) + 1.6), squeeze=False,
                             sharey=True)
    for j, c in enumerate(cols):
        ax = axes[0][j]
        sel = sp[sp[col] == c]
        ax.axvspan(1 / EQUIVALENCE, EQUIVALENCE, color=NOISE, alpha=0.3, lw=0, label=BAND_LABEL)
        for t in sel.itertuples():
            y = labels.index(getattr(t, label))
            if pd.notna(t.speedup):
                ax.errorbar([t.speedup], [y], xerr=[[t.speedup - t.ci_low], [t.ci_high - t.speedup]], fmt="o",
                            color=colour(getattr(t, color)), capsize=3, label=str(getattr(t, color)))
            else:
                ax.text(1.0, y, f" {t.status}", va="center", fontsize=7, color="crimson")
        ax.axvline(1.0, color="grey", lw=1, ls="--")
        ax.set_xscale("log")
        _log_ticks(ax.xaxis, *ax.get_xlim())
        ax.set_yticks(range(len(labels)), labels)
        ax.set_ylim(-0.7, len(labels) - 0.3)
        ax.invert_yaxis()
        ax.set_title(str(c), fontsize=9)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3, axis="x")
    return _finish(fig, axes, title, caption)


def _ink(rgba) -> str:
    """Black or white text, whichever reads on a cell of colour `rgba` (relative luminance)."""
    r, g, b = rgba[:3]
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "white"


def heatmap(sp: pd.DataFrame, *, x: str = "seq_len", y: str = "batch_size", row: str = "model", col: str = "pair",
            title: str = "", caption: str = ""):
    """Speed-up per cell of a y × x grid with ratio and CI, a panel per `row` × `col`; a missing cell hatched."""
    from matplotlib.colors import TwoSlopeNorm

    fig, axes, cells = _facets(sp, row, col)
    fig.set_layout_engine("constrained")
    ok = sp[sp.speedup.notna()]
    span = float(np.nanmax(np.abs(np.log2(ok.speedup)))) if len(ok) else 1.0
    norm = TwoSlopeNorm(0.0, -max(span, 0.1), max(span, 0.1))
    cmap = plt.get_cmap("RdBu")
    xs, ys = sorted(sp[x].unique()), sorted(sp[y].unique())
    image = None
    for ax, sel, name in cells:
        grid = np.full((len(ys), len(xs)), np.nan)
        status = {}
        for t in sel.itertuples():
            yi, xi = ys.index(getattr(t, y)), xs.index(getattr(t, x))
            if pd.notna(t.speedup):
                grid[yi, xi] = np.log2(t.speedup)
                label = numbers.fmt(t.speedup, t.ci_low, t.ci_high, brief=True).replace(" (", "\n(", 1)
                ax.text(xi, yi, label, ha="center", va="center",
                        fontsize=7, color=_ink(cmap(norm(grid[yi, xi]))))
            else:
                status[(yi, xi)] = str(t.status)
        image = ax.imshow(grid, cmap=cmap, norm=norm, origin="lower", aspect="auto")
        for yi, xi in zip(*np.nonzero(np.isnan(grid))):
            ax.add_patch(plt.Rectangle((xi - 0.5, yi - 0.5), 1, 1, facecolor="0.88", edgecolor="0.6", hatch="//",
                                       lw=0))
            ax.text(xi, yi, status.get((yi, xi), "not run"), ha="center", va="center", fontsize=7,
                    color="crimson" if (yi, xi) in status else "0.3",
                    bbox={"facecolor": "0.88", "edgecolor": "none", "pad": 1})
        ax.set_xticks(range(len(xs)), [str(int(v)) for v in xs])
        ax.set_yticks(range(len(ys)), [str(int(v)) for v in ys])
        ax.set_xlabel(x.replace("_", " "))
        ax.set_ylabel(y.replace("_", " "))
        ax.set_title(name, fontsize=9)
        ax.grid(False)
    if image is not None:
        bar = fig.colorbar(image, ax=[ax for ax, _, _ in cells], shrink=0.6, pad=0.02)
        ticks = [t for t in (-3, -2, -1, -0.5, 0, 0.5, 1, 2, 3) if abs(t) <= max(span, 0.1)]
        bar.set_ticks(ticks, labels=[numbers.fmt_factor(2 ** t) for t in ticks])
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
    """Headline speed-ups: a row per comparison, a marker per profile with its 95% CI; unmeasured ones named."""
    ran = set(table[table.status == "ok"].comparison)
    unmeasured = list(dict.fromkeys(table[~table.comparison.isin(ran)].comparison))
    table = table[table.comparison.isin(ran)]
    comps = list(dict.fromkeys(table.comparison))
    profiles = list(dict.fromkeys(table.profile))
    fig, ax = plt.subplots(figsize=(9.5, 0.45 * len(comps) + 1.6))
    offsets = {p: (k - (len(profiles) - 1) / 2) * 0.8 / max(len(profiles), 1) for k, p in enumerate(profiles)}
    for p in profiles:
        g = table[table.profile == p]
        ok = g[g.status == "ok"]
        ys = np.array([comps.index(c) for c in ok.comparison]) + offsets[p]
        ax.errorbar(ok.speedup, ys, xerr=[ok.speedup - ok.ci_low, ok.ci_high - ok.speedup], fmt="o", capsize=3,
                    color=colour(p), label=p)
        for f in g[(g.status != "ok") & (g.status != "not in this profile")].itertuples():
            y = comps.index(f.comparison) + offsets[p]
            ax.plot(0.02, y, transform=ax.get_yaxis_transform(), marker="x", color=colour(p), ms=8,
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
    if unmeasured:
        caption = (caption + " " if caption else "") + "Measured by no profile: " + "; ".join(unmeasured) + "."
    return _finish(fig, np.array([ax]), title, caption)


def roofline(rt: pd.DataFrame, peaks: dict | None, *, title: str = "Roofline: achieved rate against arithmetic intensity",
             caption: str = ""):
    """The roofline figure: achieved GFLOP/s against FLOPs per byte under the machine's roofs."""

    points, left_out = rf.plottable(rt)
    fig, ax = plt.subplots(figsize=(9, 5.4))
    variants = list(dict.fromkeys(points.variant))
    markers = dict(zip(dict.fromkeys(points.peak_of), "os^DvP*"))
    for v in variants:
        for key, g in points[points.variant == v].groupby("peak_of", sort=False):
            ax.scatter(g.intensity, g.gflops, color=colour(v), marker=markers[key], s=36, alpha=0.85,
                       label=f"{v}" + (f" ({key})" if len(markers) > 1 else ""))
    bandwidth = limits.peak_bandwidth(peaks)
    if bandwidth and len(points):
        lo, hi = points.intensity.min() / 3, points.intensity.max() * 3
        for key in dict.fromkeys(["fp32", *points.peak_of]):
            peak = limits.peak_gflops(peaks, key)
            if not peak:
                continue
            lo, hi = min(lo, peak / bandwidth / 3), max(hi, peak / bandwidth * 3)
            xs = np.geomspace(lo, hi, 200)
            roof = np.minimum(peak, bandwidth * xs)
            ax.plot(xs, roof, color="0.35", lw=1.2, ls="-" if key == "fp32" else "--")
            if key == "fp32":  # below this line a call is overhead-bound (roofline.regime)
                ax.plot(xs, rf.OVERHEAD_SHARE * roof, color="0.6", lw=0.8, ls=":",
                        label=wording.macro("report/plots.md.j2", "overhead", rf.OVERHEAD_SHARE))
            by = (limits.roof(peaks, key) or {}).get("library")
            ax.annotate(f"{key} roof {peak:,.0f} GFLOP/s" + (f" ({by})" if by else ""), (hi, peak), xytext=(-4, 4),
                        textcoords="offset points",
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


# --- layout ----------------------------------------------------------------------------------------------------------


FAILED_MARKERS = {"oom": "X", "error": "x", "skipped": "s"}


def _facets(df: pd.DataFrame, row: str, col: str, width: float = 4.6, height: float = 3.2):
    """Panels for the (row, col) pairs with rows in `df`: (figure, axes array, [(ax, its rows, its title)])."""
    keys = list(dict.fromkeys(zip(df[row] if row else [None] * len(df), df[col] if col else [None] * len(df))))
    rows = {r: [c for r2, c in keys if r2 == r] for r, _ in keys} or {None: []}
    ncols = max([len(cs) for cs in rows.values()] + [1])
    fig, axes = plt.subplots(len(rows), ncols, figsize=(width * ncols + 0.6, height * len(rows) + 0.6),
                             squeeze=False, sharex=False)
    cells = []
    for (r, cs), line in zip(rows.items(), axes):
        for c, ax in zip(cs, line):
            sel = df[df[row] == r] if row else df
            cells.append((ax, sel[sel[col] == c] if col else sel, " · ".join(str(v) for v in (r, c) if v is not None)))
        for ax in line[len(cs):]:  # no such panel
            ax.remove()
    return fig, np.array([ax for ax, _, _ in cells] or [axes[0][0]]), cells


def _log_ticks(axis, lo: float, hi: float) -> None:
    """Plain-number ticks on a log axis over [lo, hi]: 1-2-5 per decade where that labels three, else about five."""
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
PANELS_NAMED = 6  # panel titles an alt text names before it counts the rest


def alt_text(fig) -> str:
    """What a figure shows, for its <img alt>: its title, what is plotted against what, its panels, its caption."""
    axes = [ax for ax in fig.axes if ax.get_visible() and (ax.get_xlabel() or ax.get_ylabel() or ax.get_title())]
    parts = [fig.get_suptitle()]
    labelled = next((ax for ax in axes if ax.get_xlabel() and ax.get_ylabel()), None)
    if labelled is not None:
        parts.append(f"{labelled.get_ylabel()} against {labelled.get_xlabel()}")
    titles = [ax.get_title() for ax in axes if ax.get_title()]
    if len(titles) > 1:
        more = f" and {len(titles) - PANELS_NAMED} more" if len(titles) > PANELS_NAMED else ""
        parts.append(f"{len(titles)} panels: " + "; ".join(titles[:PANELS_NAMED]) + more)
    parts += [" ".join(t.get_text().split()) for t in fig.texts if t.get_text() != parts[0]]  # the caption, unwrapped
    return ". ".join(p.rstrip(".") for p in parts if p) + "."


def install() -> None:
    """In a notebook's kernel, every figure's PNG carries its alt text (`alt_text`) as output metadata."""
    from IPython import get_ipython
    from matplotlib.figure import Figure

    shell = get_ipython()
    if shell is None:
        return
    png = shell.display_formatter.formatters["image/png"]
    try:
        draw = png.lookup_by_type(Figure)
    except KeyError:  # no inline backend: figures are not shown as PNG
        return
    if getattr(draw, "with_alt", False):
        return

    def with_alt(fig):
        data = draw(fig)
        return (data, {"alt": alt_text(fig)}) if data is not None else None

    with_alt.with_alt = True
    png.for_type(Figure, with_alt)


def _finish(fig, axes, title: str, caption: str = ""):
    """One legend for all facets, the title, the caption at the bottom, and a tight layout."""
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
