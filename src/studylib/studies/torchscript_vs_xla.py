"""Study 02: PyTorch (eager, TorchScript) vs TensorFlow (eager, graph, XLA) on the same weights."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from pydantic import field_validator

from .. import stats
from ..models import MODELS
from ..profiles import Grid
from ..sweep import AA, REFERENCE, Config
from .base import Analysis, Comparison, Study, register
from .common import aa_control, aa_finding, classify, describe_ci, drift_finding, fmt_x, latency_table, noise_band  # noqa: F401

NOTEBOOK = "02_torchscript_vs_xla"
SHAPE_COLUMNS = ["model", "dtype", "batch_size", "seq_len"]
FRAMEWORK = {"eager": "PyTorch", AA: "PyTorch", "torchscript": "PyTorch", "torchscript-optimized": "PyTorch",
             "tf-eager": "TensorFlow", "tf-function": "TensorFlow", "tf-xla": "TensorFlow"}

# (candidate, baseline): within each framework, the speed-up over its own eager (and XLA over the TF graph);
# across frameworks, TensorFlow over eager PyTorch.
WITHIN = [("torchscript", "eager"), ("torchscript-optimized", "eager"), ("tf-function", "tf-eager"),
          ("tf-xla", "tf-eager"), ("tf-xla", "tf-function")]
ACROSS = [("tf-eager", "eager"), ("tf-function", "eager"), ("tf-xla", "torchscript")]
PAIRS = WITHIN + ACROSS

# Seed 000 (PyTorch 1.3 / TF 2.0): numbers its claims are compared with.
SEED_CPU_MEAN_S = {"PyTorch": 0.748, "TensorFlow": 0.823}
SEED_GPU_MEAN_S = {"PyTorch": 0.046, "TensorFlow": 0.043}
SEED_TORCHSCRIPT = 1.20  # "about 20% faster on average"
SEED_XLA = 1.15  # "most runs about 1.15×"
SEED_XLA_BEST_REDUCTION = 0.70  # "up to 70% less time, on small inputs"
MAGNITUDE_BAND = 1.10  # a measured CI overlapping claim/1.1 … claim×1.1 counts as the same size of effect


class TorchscriptVsXla(Grid):
    """Section of study 02: PyTorch (eager, TorchScript) vs TensorFlow (eager, graph, XLA) on the same weights.

    Sequence lengths beyond a model's positions are allowed here, as in seed 000's grid (up to 1024 for
    every model): those cells become 'skipped' rows that the figures mark, rather than an invalid profile.
    """

    variants: list[Literal["eager", "torchscript", "torchscript-optimized", "tf-eager", "tf-function", "tf-xla"]]

    @field_validator("models")
    @classmethod
    def _text_only(cls, v: list[str]) -> list[str]:
        for name in v:
            if name in MODELS and MODELS[name].kind != "text":
                raise ValueError(f"{name!r} is not a text model (study 02 compares text encoders)")
        return v


def configs(section: TorchscriptVsXla, *, device: str, threads: int) -> list[Config]:
    """Every configuration, grouped by model, eager PyTorch first within each shape (its output is the reference).

    Shapes matching one of the section's `skip` entries are left out."""
    variants = [REFERENCE, AA] + [v for v in section.variants if v not in (REFERENCE, AA)]
    return [Config(model, v, dtype, batch, device, threads, seq_len=seq)
            for model, dtype, batch, seq in section.shapes() for v in variants]


def estimate_s(c: Config, section: TorchscriptVsXla, measure: dict, speed: float = 1.0) -> float:
    """A rough wall-time guess for `plan`, per replicate: graph build / XLA compile, warm-up, the minimum rounds."""
    tokens = c.batch_size * c.seq_len
    big = not c.model.endswith("tiny")
    per_call = (0.015 + 0.0008 * tokens) if big else 0.002
    per_call *= 2.5 if c.variant == "tf-eager" else 1.0
    build = {"tf-function": 2.5, "tf-xla": 2.0, "torchscript": 0.5, "torchscript-optimized": 1.0}.get(c.variant, 0.0)
    calls = 1 + measure["warmup_calls"] + measure["min_rounds"]
    return measure["replicates"] * (build * (1 if big else 0.2) + max(per_call / speed, measure["block_s"]) * calls
                                    + measure["min_time_s"] / 7)


SPEEDUP_COLUMNS = [*SHAPE_COLUMNS, "tokens", "pair", "candidate", "baseline", "kind", "status", "error", "speedup",
                   "ci_low", "ci_high"]


def speedups(df: pd.DataFrame) -> pd.DataFrame:
    """Speed-up of each pair's candidate over its baseline on every shape, with CIs (paired by round).

    `df` needs raw samples. A pair whose candidate or baseline failed keeps a row with that status and
    message (prefixed with which side failed) and no ratio, so heatmaps mark the cell.
    """
    out = []
    for key, g in df.groupby(SHAPE_COLUMNS, sort=False):
        by = {r.variant: r for _, r in g.iterrows()}
        for cand, base in PAIRS:
            if cand not in by or base not in by:
                continue
            c, b = by[cand], by[base]
            rec = dict(zip(SHAPE_COLUMNS, key)) | {
                "tokens": int(key[2] * key[3]), "pair": f"{cand} over {base}", "candidate": cand, "baseline": base,
                "kind": "within" if (cand, base) in WITHIN else "across", "status": "ok", "error": ""}
            if c.status == "ok" and b.status == "ok":
                ratio, lo, hi = stats.speedup(b, c)
                rec |= {"speedup": ratio, "ci_low": lo, "ci_high": hi}
            else:
                side = c if c.status != "ok" else b
                rec |= {"status": side.status, "error": f"{side.variant}: {side.error}"}
            out.append(rec)
    return pd.DataFrame(out, columns=SPEEDUP_COLUMNS)


def _geo(df: pd.DataFrame, cand: str, base: str, mask=None) -> dict | None:
    """Geometric-mean speed-up of `cand` over `base` across shapes where both ran, with its CI (stats.geomean_speedup)."""
    ok = df[df.status == "ok"]
    if mask is not None:
        ok = ok[mask(ok)]
    c = ok[ok.variant == cand].set_index(SHAPE_COLUMNS)
    b = ok[ok.variant == base].set_index(SHAPE_COLUMNS)
    both = c.index.intersection(b.index)
    if not len(both):
        return None
    g, lo, hi = stats.geomean_speedup([(b.loc[k], c.loc[k]) for k in both])
    return {"speedup": g, "ci_low": lo, "ci_high": hi, "n": len(both)}


def _describe_geo(r: dict) -> str:
    return f"{describe_ci(r)} over {r['n']} shape{'s' * (r['n'] != 1)}"


def _magnitude(r: dict, claimed: float) -> str:
    """Verdict on a claimed speed-up size from a measured geometric mean's CI."""
    if r is None:
        return "not measured in this profile"
    cls = classify(r["ci_low"], r["ci_high"])
    overlaps = r["ci_low"] <= claimed * MAGNITUDE_BAND and r["ci_high"] >= claimed / MAGNITUDE_BAND
    if overlaps:
        return f"agrees (CI overlaps {claimed / MAGNITUDE_BAND:.2f}–{claimed * MAGNITUDE_BAND:.2f}×)"
    if cls == "faster":
        return "faster, but by " + ("less" if r["ci_high"] < claimed else "more") + " than claimed"
    return {"equal": "does not agree (no difference: CI within ±5%)", "slower": "does not agree (slower here)",
            "unclear": "inconclusive (CI includes 1)"}[cls]


def findings(df: pd.DataFrame, sp: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    aa = aa_control(df, SHAPE_COLUMNS)
    band = noise_band(aa)
    lines = [aa_finding(aa)]
    models = list(dict.fromkeys(df.model))
    for cand, base in PAIRS:
        overall = _geo(df, cand, base)
        if overall is None:
            continue
        per_model = [(m, _geo(df, cand, base, lambda t, m=m: t.model == m)) for m in models]
        cells = sp[(sp.candidate == cand) & (sp.baseline == base) & sp.speedup.notna()]
        classes = [classify(lo, hi, band) for lo, hi in zip(cells.ci_low, cells.ci_high)]
        lines.append(
            f"**{cand} over {base}**: geometric mean {_describe_geo(overall)}; "
            + "; ".join(f"{m} {describe_ci(r)}" for m, r in per_model if r)
            + f". Per shape: faster in {classes.count('faster')}, slower in {classes.count('slower')}, within "
              f"±{band - 1:.0%} in "
              f"{classes.count('equal')}, unclear in {classes.count('unclear')} of {len(classes)}.")
    ok = sp[sp.speedup.notna()]
    for (cand, base), g in ok.groupby(["candidate", "baseline"], sort=False):
        if g.tokens.nunique() < 2:
            continue
        small, large = g[g.tokens == g.tokens.min()], g[g.tokens == g.tokens.max()]
        gm = lambda s: float(np.exp(np.log(s).mean()))  # noqa: E731
        lines.append(f"Input size, {cand} over {base}: {fmt_x(gm(small.speedup))} at the smallest input "
                     f"({int(small.tokens.iloc[0])} tokens per call) vs {fmt_x(gm(large.speedup))} at the largest "
                     f"({int(large.tokens.iloc[0])}), geometric means over models; Spearman correlation of speed-up "
                     f"with tokens per call {g[['speedup', 'tokens']].corr(method='spearman').iloc[0, 1]:+.2f}.")
    xla = df[(df.variant == "tf-xla") & (df.status == "ok")]
    if len(xla):
        build = xla.first_call_s - xla.median_s
        lines.append(f"XLA compiled {int(xla.compilations.sum())} graphs in the first calls of {len(xla)} "
                     f"configurations (one per input shape; {build.min():.1f}–{build.max():.1f} s each beyond a steady "
                     f"call) and recompiled {int(xla.recompilations.sum())} times during steady-state timing.")
    measured = df[df.status == "ok"]
    if len(measured):
        bad = measured[measured.parity_ok == False]  # noqa: E712
        worst = measured.groupby(measured.variant.map(FRAMEWORK)).max_abs_diff.max()
        lines.append("Parity with eager PyTorch (same inputs): largest max-abs difference "
                     + ", ".join(f"{fw} {v:.1e}" for fw, v in worst.items()) + "; "
                     + (f"**{len(bad)} configuration(s) exceed the tolerance**: "
                        + ", ".join(f"{r['variant']} {r['model']} b{r['batch_size']} s{r['seq_len']}"
                                    for _, r in bad.iterrows()) if len(bad) else "all within tolerance."))
    failed = df[df.status != "ok"]
    if len(failed):
        parts = [f"{v} ({', '.join(f'{n} {s}' for s, n in g.status.value_counts().items())}): {g.error.iloc[0]}"
                 for v, g in failed.groupby("variant", sort=False)]
        lines.append(f"{len(failed)} of {len(df)} configurations did not run; they are marked in the figures and "
                     f"left out of the averages above — " + "; ".join(parts))
    else:
        lines.append("Every configuration ran.")
    if len(measured):
        noisy = measured.loc[measured.cv.astype(float).idxmax()]
        lines.append(f"Noise: CV {measured.cv.min():.1%}–{measured.cv.max():.1%} (noisiest: {noisy['variant']} "
                     f"{noisy['model']} b{noisy['batch_size']} s{noisy['seq_len']}); "
                     f"{int(measured.stop_reason.str.contains('budget').sum())} of {len(measured)} configurations hit their "
                     f"time budget before the precision target.")
    drift = drift_finding(df)
    return lines + ([drift] if drift else [])


def _mean_of_medians(df: pd.DataFrame, a: str, b: str) -> tuple[float, float, int]:
    """Seed 000's metric (a plain mean of per-cell times), over the cells where both variants ran."""
    ok = df[df.status == "ok"]
    x = ok[ok.variant == a].set_index(SHAPE_COLUMNS).median_s
    y = ok[ok.variant == b].set_index(SHAPE_COLUMNS).median_s
    both = x.index.intersection(y.index)
    return float(x[both].mean()), float(y[both].mean()), len(both)


def claims(df: pd.DataFrame, sp: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's claims beside this run, with CI-based verdicts."""
    rows = []
    gpu = (df.device == "cuda").any()
    seed_means = SEED_GPU_MEAN_S if gpu else SEED_CPU_MEAN_S
    where = "GPU" if gpu else "CPU"
    for tf_variant in ("tf-eager", "tf-function"):
        r = _geo(df, tf_variant, "eager")
        if r is None:
            continue
        pt, tf, n = _mean_of_medians(df, "eager", tf_variant)
        seed_ratio = seed_means["PyTorch"] / seed_means["TensorFlow"]  # TF's speed-up over PyTorch in the seed
        cls = classify(r["ci_low"], r["ci_high"])
        same = (seed_ratio < 1 and cls == "slower") or (seed_ratio > 1 and cls == "faster")
        rows.append({"seed": "000", "claim": f"on {where}, PyTorch averages {seed_means['PyTorch']} s and TensorFlow "
                                             f"{seed_means['TensorFlow']} s per inference "
                                             f"(TensorFlow {'slower' if seed_ratio < 1 else 'faster'})",
                     "this run": f"{tf_variant} vs eager PyTorch: mean of per-shape medians {pt * 1e3:.3g} ms "
                                 f"(PyTorch) vs {tf * 1e3:.3g} ms over {n} shapes; TensorFlow's speed-up "
                                 f"{_describe_geo(r)}",
                     "verdict": ("agrees" if same else "inconclusive" if cls == "unclear" else "does not agree")
                                + f" ({tf_variant} is {cls} than eager PyTorch here)"})
    ts = _geo(df, "torchscript", "eager")
    rows.append({"seed": "000", "claim": "TorchScript is about 20% faster than eager PyTorch on average",
                 "this run": _describe_geo(ts) if ts else "not measured", "verdict": _magnitude(ts, SEED_TORCHSCRIPT)})
    per_model = {m: _geo(df, "torchscript", "eager", lambda t, m=m: t.model == m) for m in dict.fromkeys(df.model)}
    per_model = {m: r for m, r in per_model.items() if r}
    if len(per_model) > 1:
        lows, highs = [r["ci_low"] for r in per_model.values()], [r["ci_high"] for r in per_model.values()]
        differ = max(lows) > min(highs)
        rows.append({"seed": "000", "claim": "TorchScript's gain depends on the model",
                     "this run": "; ".join(f"{m} {describe_ci(r)}" for m, r in per_model.items()),
                     "verdict": "agrees (per-model CIs do not overlap)" if differ
                                else "not shown here (per-model CIs overlap)"})
    xla = _geo(df, "tf-xla", "tf-function")
    cells = sp[(sp.candidate == "tf-xla") & (sp.baseline == "tf-function") & sp.speedup.notna()]
    faster = int((cells.ci_low > 1).sum())
    rows.append({"seed": "000 (GPU, XLA auto-clustering)", "claim": "XLA speeds most runs up about 1.15×",
                 "this run": (f"tf-xla over tf-function {_describe_geo(xla)}; faster (CI above 1) in {faster} of "
                              f"{len(cells)} shapes") if xla else "not measured",
                 "verdict": _magnitude(xla, SEED_XLA)
                 + ("" if not len(cells) else f"; 'most runs' {'holds' if faster > len(cells) / 2 else 'does not hold'}")})
    if len(cells):
        best = cells.loc[cells.speedup.idxmax()]
        reduction = 1 - 1 / best.speedup
        smallest = cells.tokens.min()
        rows.append({"seed": "000", "claim": "XLA cut inference time by up to 70%, mostly on small inputs",
                     "this run": f"largest cut {reduction:.0%} ({describe_ci(best)}) at batch {best.batch_size} × "
                                 f"seq {best.seq_len} ({best.model}); smallest input here is {smallest} tokens",
                     # judged on the CI: could the cut reach the seed's 70% (within 10 points)?
                     "verdict": ("agrees" if 1 - 1 / best.ci_high >= SEED_XLA_BEST_REDUCTION - 0.1
                                 else "smaller cut here")
                                + ("; largest on the smallest input" if best.tokens == smallest
                                   else "; not on the smallest input")})
    failed = df[df.status != "ok"]
    big = df[(df.batch_size == 8) & (df.seq_len == 1024) & (df.variant.map(FRAMEWORK) == "PyTorch")]
    rows.append({"seed": "000", "claim": "PyTorch ran out of memory at batch 8 × seq 1024 (not DistilBERT); those cells "
                                         "were dropped, biasing the averages toward PyTorch",
                 "this run": ("batch 8 × seq 1024: " + ", ".join(f"{r['variant']} {r['model']} {r['status']}"
                                                               for _, r in big.iterrows()) if len(big)
                              else "batch 8 × seq 1024 is not in this profile's grid")
                             + f"; {len(failed)} configuration(s) failed or were skipped here, kept as rows and "
                               f"marked in the figures; averages use only shapes where both sides ran",
                 "verdict": ("OOM reproduced" if (big.status == "oom").any() else
                             "no OOM at that size here" if len(big) else "not tested at that size")})
    return pd.DataFrame(rows)


def first_call_table(df: pd.DataFrame) -> pd.DataFrame:
    """What each variant costs before steady state: preparation (trace and freeze; wrapping in tf.function)
    and the first call (graph build, XLA compile), per model, as the range over shapes. Building the
    TensorFlow twin (copying the weights) happens once per model and is not part of either."""
    ok = df[df.status == "ok"].copy()
    ok["cold_s"] = ok.prepare_s + ok.first_call_s
    rows = []
    for (model, variant), g in ok.groupby(["model", "variant"], sort=False):
        rows.append({"model": model, "variant": variant, "framework": FRAMEWORK[variant],
                     "prepare (s)": f"{g.prepare_s.min():.2f}–{g.prepare_s.max():.2f}",
                     "first call (s)": f"{g.first_call_s.min():.2f}–{g.first_call_s.max():.2f}",
                     "first call ÷ steady call": f"{(g.first_call_s / g.median_s).median():.0f}× (median)",
                     "graphs built": "" if g.compilations.isna().all() else int(g.compilations.sum()),
                     "rebuilt in steady state": "" if g.recompilations.isna().all() else int(g.recompilations.sum())})
    return pd.DataFrame(rows)


def analyse(df: pd.DataFrame) -> Analysis:
    """Speed-ups within and across frameworks, first-call costs, the findings and the seed claims."""
    sp = speedups(df)
    return Analysis(tables={"speedups": sp, "first call": first_call_table(df)}, findings=findings(df, sp),
                    claims=claims(df, sp))


STUDY = register(Study(
    NOTEBOOK, TorchscriptVsXla, configs, estimate_s, analyse, frameworks=("torch", "tensorflow"),
    comparisons=(
        Comparison("TorchScript over eager PyTorch", "torchscript", "eager"),
        Comparison("XLA over tf.function", "tf-xla", "tf-function"),
        Comparison("tf.function over eager PyTorch", "tf-function", "eager"),
    )))
