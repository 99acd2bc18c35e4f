"""The answer a study page opens with, and the headline the index shows beside its link.

Computed from a study's rows alone, the same way for every study: each headline comparison its registry
entry names (a geometric-mean speed-up over the shapes both sides ran, with a CI, and how many shapes
were faster / slower / equal / unclear), the A/A control's false-positive rate and noise floor, the
machine, and the study's one line on what a GPU would change. The summary's per-profile headline table
uses the same `headline` numbers.
"""

from __future__ import annotations

import html
import re

import pandas as pd

from . import stats
from .studies import STUDIES, Comparison
from .studies.common import aa_control, classify, noise_band
from .sweep import AA, REFERENCE

# Columns that make two rows the same workload apart from the variant (whichever a study has).
SHAPE_COLUMNS = ["model", "dtype", "batch_size", "seq_len", "image_size", "strategy", "data", "backend"]


def _by_shape(frame: pd.DataFrame, shape: list[str]) -> pd.DataFrame:
    ok = frame[frame.status == "ok"]
    return ok.set_index(pd.Index(["|".join(map(str, r)) for r in ok[shape].itertuples(index=False)]))


def headline(df: pd.DataFrame, c: Comparison, band: float | None = None) -> dict:
    """`c`'s geometric-mean speed-up over the shapes both sides ran ok, with its CI and per-shape readings
    (faster / slower / equal within `band` / unclear); or a status saying why there is none."""
    if not len(df) or c.column not in df:
        return {"status": "not run", "n": 0}
    cand, base = df[df[c.column] == c.candidate], df[df[c.column] == c.baseline]
    if not len(cand):
        return {"status": "not in this profile", "n": 0}
    shape = [k for k in c.shape if k in df]
    ok_c, ok_b = _by_shape(cand, shape), _by_shape(base, shape)
    both = ok_c.index.intersection(ok_b.index)
    if not len(both):
        failed = cand[cand.status != "ok"]
        why = f"{failed.status.iloc[0]}: {failed.error.iloc[0]}" if len(failed) else "baseline did not run"
        return {"status": why[:160], "n": 0}
    pairs = [(ok_b.loc[k], ok_c.loc[k]) for k in both]
    g, lo, hi = stats.geomean_speedup(pairs, n_resamples=1000)
    readings = [classify(s.ci_low, s.ci_high, *([band] if band else [])) for s in (stats.speedup(b, a) for b, a in pairs)]
    return {"status": "ok", "speedup": g, "ci_low": lo, "ci_high": hi, "n": len(both), "of": len(cand),
            "reading": classify(lo, hi), **{w: readings.count(w) for w in ("faster", "slower", "equal", "unclear")}}


def _aa(df: pd.DataFrame) -> pd.DataFrame:
    return aa_control(df, [c for c in SHAPE_COLUMNS if c in df]) if len(df) and "variant" in df else pd.DataFrame()


def fastest(df: pd.DataFrame) -> str:
    """Which variant (with its batching strategy where a study varies it) has the lowest median at how many
    shapes; the A/A copy is left out."""
    ok = df[(df.status == "ok") & (df.variant != AA)]
    if not len(ok):
        return ""
    who = ok.variant + (" · " + ok.strategy.astype(str) if "strategy" in ok and ok.strategy.nunique() > 1 else "")
    shape = [c for c in SHAPE_COLUMNS if c in ok and c not in ("strategy", "backend")]
    winners = who.loc[ok.groupby(shape, dropna=False, sort=False).median_s.idxmin()].value_counts()
    n = int(winners.sum())
    listed = ", ".join(f"{name} at {k}" for name, k in winners.items())
    return f"**Lowest median latency** per shape: {listed} of {n} shape{'s' * (n != 1)}."


def whole_models(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of whole models: study 02's single-operation micro-benchmarks (task "op") have their own table,
    and pooling them into a headline speed-up or the fastest-variant count would mix two questions."""
    return df[df.task != "op"] if "task" in df else df


def headlines(notebook: str, df: pd.DataFrame) -> list[str]:
    """The study's headline findings (markdown), computed from its rows (whole models only); empty when nothing
    ran ok."""
    df = whole_models(df)
    if not len(df) or not (df.status == "ok").any():
        return []
    aa = _aa(df)
    band = noise_band(aa)
    lines = []
    for c in STUDIES[notebook].comparisons:
        h = headline(df, c, band)
        if h["status"] != "ok":
            continue
        lines.append(f"**{c.label}**: {h['speedup']:.2f}× (95% CI {h['ci_low']:.2f}–{h['ci_high']:.2f}×), geometric "
                     f"mean over {h['n']} shape{'s' * (h['n'] != 1)}; per shape faster in {h['faster']}, slower in "
                     f"{h['slower']}, equal within ±{band - 1:.0%} in {h['equal']}, unclear in {h['unclear']}.")
    lines.append(fastest(df))
    if len(aa):
        fp = int(aa.significant.sum())
        lines.append(f"**A/A control** ({AA} vs {REFERENCE}, the same code twice): called different in {fp} of "
                     f"{len(aa)} shapes; the noise floor is ±{noise_band(aa) - 1:.0%}, so smaller effects are not "
                     f"claimed.")
    return lines


def inline_html(line: str) -> str:
    """A headline's markdown (**bold**, `code`) as escaped HTML."""
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(line, quote=False))
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def box_html(notebook: str, df: pd.DataFrame, machine: str) -> str:
    """The page's opening "Answer" box: headlines, the machine, and what a GPU would change."""
    lines = headlines(notebook, df) or ["Nothing ran ok with these parameters, so there is no answer yet: see "
                                        "the measurements below for each configuration's status."]
    items = "".join(f"<li>{inline_html(line)}</li>" for line in lines)
    gpu = STUDIES[notebook].on_gpu
    return (f'<div class="answer" style="border:2px solid #2b6cb0;border-radius:6px;padding:.6rem 1rem;'
            f'margin:.5rem 0 1rem;background:#f4f8fc"><h2 style="margin-top:0">Answer</h2><ul>{items}</ul>'
            f'<p style="color:#444;font-size:.9em">Measured on {html.escape(machine)}.'
            f'{" On a GPU: " + inline_html(gpu) if gpu else ""}</p></div>')
