"""Study 05: Keras 3 on its JAX, TensorFlow and PyTorch backends, next to native PyTorch (eager and compiled)."""

from __future__ import annotations

import dataclasses
import functools

import pandas as pd
from pydantic import Field, field_validator

from .. import runtimes
from ..bench import keras_models, surprises
from ..bench.schemas import Grid
from ..claims import claims as seedclaims
from ..core import numbers, paths
from ..core.config import REFERENCE, Config, is_aa, original_of, shape_columns, shape_label, shape_of, with_aa
from ..runtimes.keras import BACKENDS
from ..stats import speedups as speedups_layer
from ..stats import verdicts
from ..stats.speedups import EQUIVALENCE, Comparison
from ..workloads.models import MODELS
from .base import Analysis, Study, register
from .common import (  # noqa: F401
    aa_finding,
    closing_findings,
    count_claim,
    count_of,
    describe_ci,
    failed_by_variant,
    finish,
    first_call_cells,
    latency_table,
    over_reference,
    per_model_variant,
    ratio_claim,
    replicates_s,
    say,
    triple,
)

NOTEBOOK = "05_keras_backends"
Variant = runtimes.offered(NOTEBOOK)  # the variants whose registration offers them in this study
NATIVE_COMPILED = "compile-default"
KERAS2 = "keras2-tensorflow"
KERAS_MODELS = ("bert-base", "bert-tiny", "resnet-50")  # the models keras_models can build
# JIT should beat its backend's op-by-op predict, torch.compile eager PyTorch (surprises.py)
EXPECTATIONS = (surprises.Expectation(NATIVE_COMPILED, REFERENCE), surprises.Expectation("keras-jax-jit", "keras-jax"),
                surprises.Expectation("keras-torch-jit", "keras-torch"))


def backend_of(variant: str) -> str | None:
    """The Keras backend a variant needs (None: native PyTorch, which runs in every backend's process)."""
    runtime = runtimes.get(variant)
    return getattr(runtime, "backend", None) if runtime.family == "keras" else None


def is_keras3(variant: str) -> bool:
    """A Keras 3 option: a Keras variant other than Keras 2, and no A/A copy."""
    return runtimes.family(variant) == "keras" and variant != KERAS2 and not is_aa(variant)


class KerasBackends(Grid):
    """Section of study 05: Keras 3 backends (and Keras 2) next to native PyTorch on the same shapes."""

    variants: list[Variant]
    image_size: int = Field(224, ge=32, description="keras.applications.ResNet50 takes 32 pixels or more")

    @field_validator("models")
    @classmethod
    def _mirrored(cls, v: list[str]) -> list[str]:
        for name in v:
            if name in MODELS and name not in KERAS_MODELS:
                raise ValueError(f"{name!r} has no Keras twin (study 05 mirrors {', '.join(KERAS_MODELS)})")
        return v

    @field_validator("variants")
    @classmethod
    def _some_keras(cls, v: list[str]) -> list[str]:
        if not any(backend_of(x) for x in v):
            raise ValueError("name at least one Keras variant (keras-<backend>[-jit|-call] or keras2-tensorflow)")
        return v


def configs(section: KerasBackends, *, device: str, threads: int) -> list[Config]:
    """Every configuration by backend (torch first): native eager, its copy and native compile, then Keras's."""
    backends = [b for b in BACKENDS if any(backend_of(v) == b for v in section.variants)]
    out = []
    for backend in backends:
        native = [REFERENCE] + ([NATIVE_COMPILED] if backend == backends[0] and NATIVE_COMPILED in section.variants
                                else [])
        native, keras = (with_aa(vs, section.aa) for vs in (native, [v for v in section.variants
                                                                    if backend_of(v) == backend]))
        for model, dtype, batch, seq in section.shapes():
            out += [Config(model, v, dtype, batch, device, threads, seq_len=seq,
                           image_size=None if seq is not None else section.image_size, backend=backend)
                    for v in native + keras]
    return out


def group_by(c: Config) -> tuple:
    """Rounds are shared by one backend's variants of one shape (a process runs one Keras backend)."""
    return (c.backend, *c.shape_key)


def estimate_s(c: Config, section: KerasBackends, measure: dict, speed: float = 1.0) -> float:
    """`plan`'s rough wall-time guess, per replicate: model build, compile, warm-up and the minimum rounds."""
    c = dataclasses.replace(c, variant=original_of(c.variant))
    big = not c.model.endswith("tiny")
    vision = c.image_size is not None
    size = c.batch_size * ((c.image_size / 224) ** 2 if vision else (c.seq_len or 128) / 128)
    per_call = (0.1 if big else 0.002) * size
    if c.variant.endswith("-call") or c.variant in ("keras-jax", "keras-torch"):
        per_call *= 3 if big else 6  # op by op through Keras layers
    if c.dtype == "bf16" and c.device == "cpu":
        per_call *= 8
    compile_s = 0.0
    if c.variant == NATIVE_COMPILED or c.variant == "keras-torch-jit":
        compile_s = (25.0 if vision else 14.0) if big else 4.0
    elif c.variant.endswith("-jit") or c.variant in ("keras-tensorflow", KERAS2):
        compile_s = (4.0 if big else 0.5)
    build_s = (3.0 if big else 0.3) if backend_of(c.variant) else 0.0
    return replicates_s(measure, build_s + compile_s, per_call, speed, 6)


def _across(frame) -> list[str]:
    """The shape columns of `frame` (a table or a row) but the backend: a shape as every backend's processes run it."""
    return shape_columns(frame, without=("backend",))


def _shape_label(row) -> str:
    """'bert-base fp32 b1 × s128': a shape as every backend's processes run it (config.shape_label)."""
    return shape_label(row, _across(row), short=True)


def _label(r) -> str:
    return f"{r['variant']} {_shape_label(r)}"


# what the backend table holds per shape, after the shape and its columns
BACKEND_COLUMNS = ["fastest", "fastest over native eager", "runner-up", "fastest over runner-up", "ratio", "ci_low",
                   "ci_high", "decided"]


def backend_table(sp: pd.DataFrame, df: pd.DataFrame | None, vt: verdicts.VerdictTable) -> pd.DataFrame:
    """Per shape: the fastest Keras 3 backend by latency and its lead over the runner-up, decided as `vt` decides it."""
    ok = sp[sp.speedup.notna() & sp.variant.map(is_keras3)]
    rows = None if df is None or not len(df) else {  # the results row of each shape and variant
        (shape_of(r), r["variant"]): r for r in df[df.status == "ok"].to_dict("records")}
    on, out = _across(sp), []
    for key, g in ok.groupby(on, dropna=False, sort=False):
        best = g.loc[g.groupby("backend").median_s.idxmin()].sort_values("median_s")
        top = best.iloc[0]
        rec = dict(zip(on, key)) | {"shape": _shape_label(top), "fastest": top.variant,
                                    "fastest over native eager": describe_ci(top)}
        if len(best) > 1 and rows is not None:
            second = best.iloc[1]
            pair = [rows[(shape_of(r), r.variant)] for r in (second, top)]
            lead = speedups_layer.speedup(*pair)
            rec |= {"runner-up": second.variant, "fastest over runner-up": numbers.fmt(*lead), "ratio": lead.ratio,
                    "ci_low": lead.ci_low, "ci_high": lead.ci_high,
                    "decided": (vt.decision(pair[1], pair[0], STUDY.options)
                                or verdicts.unlisted(lead.ci_low, lead.ci_high)) == "faster"}
        out.append(rec)
    return pd.DataFrame(out, columns=["shape", *on, *BACKEND_COLUMNS])


# what the native table holds per shape, after the shape and its columns
NATIVE_COLUMNS = ["best Keras 3", "over native eager", "over native compiled", "ratio", "ci_low", "ci_high", "vs_eager",
                  "vs_eager_low", "vs_eager_high"]


def _best_keras3(sp: pd.DataFrame, on: list[str]):
    """Per shape (the columns `on`) with a Keras 3 speed-up: (its columns, its rows, the fastest Keras 3 row)."""
    for key, g in sp.groupby(on, dropna=False, sort=False) if len(sp) else ():
        keras = g[g.variant.map(is_keras3)]
        if len(keras):
            yield dict(zip(on, key)), g, keras.loc[keras.speedup.idxmax()]


def native_table(sp: pd.DataFrame) -> pd.DataFrame:
    """Per shape: the fastest Keras 3 variant over native eager PyTorch and over native torch.compile."""
    on, out = _across(sp), []
    for shape, g, top in _best_keras3(sp[sp.speedup.notna()], on):
        rec = shape | {"shape": _shape_label(top), "best Keras 3": top.variant,
                                    "over native eager": describe_ci(top), "vs_eager": top.speedup,
                                    "vs_eager_low": top.ci_low, "vs_eager_high": top.ci_high}
        compiled = g[g.variant == NATIVE_COMPILED]
        if len(compiled):
            v, lo, hi = speedups_layer.ratio_of(triple(top), triple(compiled.iloc[0]))
            rec |= {"over native compiled": numbers.fmt(v, lo, hi), "ratio": v, "ci_low": lo, "ci_high": hi}
        out.append(rec)
    return pd.DataFrame(out, columns=["shape", *on, *NATIVE_COLUMNS])


def keras2_table(df: pd.DataFrame) -> pd.DataFrame:
    """Keras 3 over Keras 2 on TensorFlow, both predict_on_batch in graph mode, paired in the same rounds."""
    ok = df[df.status == "ok"]
    on, out = shape_columns(ok), []
    keras3, keras2 = speedups_layer.paired(ok, "keras-tensorflow", KERAS2)
    for new, old in zip(keras3.to_dict("records"), keras2.to_dict("records")):
        rec = dict(zip(("speedup", "ci_low", "ci_high"), speedups_layer.speedup(old, new)))
        out.append({c: new[c] for c in on} | rec | {"shape": _shape_label(old), "Keras 3 over Keras 2": describe_ci(rec)})
    return pd.DataFrame(out, columns=["shape", *on, "Keras 3 over Keras 2", "speedup", "ci_low", "ci_high"])


def first_call_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per model and variant: the first call's cost and, for torch.compile, dynamo's graphs and breaks."""
    return per_model_variant(df, lambda variant, g: {
        **first_call_cells(g), "torch.compile graphs": count_of(g.compilations, "max"),
        "graph breaks": count_of(g.graph_breaks, "max")})


def _geo(cells: pd.DataFrame) -> tuple[float, float, float]:
    return speedups_layer.combine(cells.itertuples())


def findings(df: pd.DataFrame, sp: pd.DataFrame, backends: pd.DataFrame, native: pd.DataFrame,
             keras2: pd.DataFrame) -> list[str]:
    """Findings as markdown bullets, every number computed from the results."""
    lines = [aa_finding(df)]
    if len(backends):
        wins = backends.fastest.map(backend_of).value_counts()
        lines.append(say(NOTEBOOK, "fastest", list(wins.items()), len(backends)))
    ok = sp[sp.speedup.notna()]
    for backend in BACKENDS:
        mine = ok[ok.backend == backend]
        parts = [(variant, _geo(g)[0]) for variant, g in
                 mine[mine.variant.map(is_keras3).astype(bool)].groupby("variant", sort=False)]
        if parts:
            lines.append(say(NOTEBOOK, "on_backend", backend, parts))
    if len(native):
        lines.append(say(NOTEBOOK, "native", list(native.itertuples()), list(native[native.ratio.notna()].itertuples())))
    if len(keras2):
        lines.append(say(NOTEBOOK, "keras2", *_geo(keras2), len(keras2)))
    calls = []
    for backend in BACKENDS:
        a, b = speedups_layer.paired(ok[ok.backend == backend], f"keras-{backend}", f"keras-{backend}-call")
        if len(a):
            calls.append((backend, *speedups_layer.ratio_of(_geo(a), _geo(b))))
    if calls:
        lines.append(say(NOTEBOOK, "predict", calls))
    measured = df[df.status == "ok"]
    dynamo = measured[measured.compilations.notna() & measured.variant.isin([NATIVE_COMPILED, "keras-torch-jit"])]
    if len(dynamo):
        per = dynamo.groupby("variant", sort=False).agg(graphs=("compilations", "median"),
                                                        breaks=("graph_breaks", "median"))
        lines.append(say(NOTEBOOK, "dynamo", [(v, r.graphs, r.breaks) for v, r in per.iterrows()]))
    return lines + closing_findings(NOTEBOOK, df, _label, _worst_differences, failed_by_variant(df))


def _worst_differences(measured: pd.DataFrame) -> tuple[list, float]:
    """The largest max-abs differences: per Keras backend, and of the native variants."""
    keras = measured[measured.variant.map(lambda v: runtimes.family(v) == "keras")]
    worst = keras.groupby(keras.variant.map(backend_of)).max_abs_diff.max() if len(keras) else pd.Series()
    return list(worst.items()), measured[~measured.index.isin(keras.index)].max_abs_diff.max()


def analyse(df: pd.DataFrame, peaks: dict | None = None, *, vt: verdicts.VerdictTable) -> Analysis:
    """The study's tables, findings and claims, every decision as the run's verdict table `vt` has it."""
    sp = over_reference(df)  # in each backend's process: pair_table matches the backend too
    tables = {"speedups": sp, "backends": backend_table(sp, df, vt), "native": native_table(sp),
              "keras 2": keras2_table(df), "first call": first_call_table(df)}
    return finish(NOTEBOOK, df, peaks, vt, tables, findings(df, sp, tables["backends"], tables["native"],
                                                            tables["keras 2"]),
                  seedclaims.study_claims(NOTEBOOK, df, {**tables, "verdicts": vt}, peaks=peaks, vt=vt))


def keras_workloads(run):
    """What each configuration runs: a Keras model on its process's backend, or native PyTorch."""
    return keras_models.KerasWorkloads(run.settings.seed, cache_dir=paths.cache_dir(run.profile))


# --- seed 002's claims, measured on the study's results and tables (studylib.claims.claims) ---


def _every_backend(evaluate):
    """`evaluate`, answered NotAnswered where a Keras 3 backend has no ok row (seedclaims.not_run)."""

    @functools.wraps(evaluate)
    def guarded(df: pd.DataFrame, tables: dict, claim, **kwargs):
        keras3 = [v for v in df.variant.dropna().unique() if is_keras3(v)] if "variant" in df else None
        missing = keras3 is not None and seedclaims.not_run(df, claim, {
            f"Keras 3 on {b}": [v for v in keras3 if backend_of(v) == b] for b in BACKENDS})
        return missing or evaluate(df, tables, claim, **kwargs)

    return guarded


def _ok_rows(df: pd.DataFrame, claim) -> pd.DataFrame:
    return seedclaims.matching(df[df.status == "ok"], claim)


def _decided(tables: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The backend table (every model) and its shapes whose fastest backend is decided."""
    b = tables["backends"]
    return b, b[b.decided.fillna(False).astype(bool)] if len(b) else b


@_every_backend
def fastest_backend(df: pd.DataFrame, tables: dict, claim):
    """Holds when the fastest Keras 3 backend differs between the decided shapes."""
    b, decided = _decided(tables)  # every model: the claim is that the winner changes with the model
    if len(decided) < 2:  # one decided shape cannot show the winner changing
        return seedclaims.NotAnswered(say(NOTEBOOK, "too_few_decided", len(decided), len(b)))
    winners = decided.fastest.map(backend_of)
    text = "fastest backend (decided shapes): " + "; ".join(f"{s}: {w}" for s, w in zip(decided["shape"], winners))
    return count_claim(text, _ok_rows(df, claim), winners.nunique() > 1)


@_every_backend
def jax_first(df: pd.DataFrame, tables: dict, claim):
    """Seed 002's 'JAX first on 7 metrics': holds when JAX is the backend most often fastest over decided shapes."""
    b, decided = _decided(tables)
    if not len(decided):
        return seedclaims.NotAnswered(say(NOTEBOOK, "none_decided", len(b)))
    counts = decided.fastest.map(backend_of).value_counts()
    first = bool(counts.index[0] == "jax" and (len(counts) == 1 or counts.iloc[0] > counts.iloc[1]))
    return count_claim("fastest backend over decided shapes: " + ", ".join(f"{w} {n}" for w, n in counts.items()),
                       _ok_rows(df, claim), first)


@_every_backend
def share_above(df: pd.DataFrame, tables: dict, claim, at_least: str | float = 1.5, share: str | float = 0.5):
    """Holds when, on `share` of the shapes, the best Keras 3 over native compile's CI lies above `at_least`."""
    at_least, share = seedclaims.arithmetic(at_least), seedclaims.arithmetic(share)
    n = tables["native"]
    n = n[n.ratio.notna()] if len(n) else n
    if not len(n):
        return seedclaims.NotAnswered("no shape has Keras 3 beside native torch.compile'd PyTorch")
    above = int((n.ci_low > at_least).sum())
    return count_claim(say(NOTEBOOK, "above", at_least, above, len(n)), _ok_rows(df, claim), above >= share * len(n))


@_every_backend
def keras3_over_native(df: pd.DataFrame, tables: dict, claim, against: str = "compiled", at: str = "best"):
    """The fastest Keras 3 over native PyTorch (`against`): its best shape (`at: best`) or geometric mean."""
    n = seedclaims.matching(tables["native"], claim)
    col, lo_col, hi_col = ("ratio", "ci_low", "ci_high") if against == "compiled" else \
        ("vs_eager", "vs_eager_low", "vs_eager_high")
    n = n[n[col].notna()]
    if not len(n):
        return seedclaims.NotAnswered(say(NOTEBOOK, "no_native", against))
    rows = _ok_rows(df, claim)
    if at == "mean":
        g = speedups_layer.combine(list(zip(n[col].astype(float), n[lo_col].astype(float), n[hi_col].astype(float))))
        cells = [(s, b, float(v)) for s, b, v in zip(n["shape"], n["best Keras 3"], n[col])]
        return ratio_claim(df, g, say(NOTEBOOK, "mean_over_native", against, cells), rows)
    best = n.loc[n[col].astype(float).idxmax()]
    text = say(NOTEBOOK, "best_over_native", against, best["best Keras 3"], best["shape"], int((n[col] > 1.5).sum()),
               len(n))
    return ratio_claim(df, (float(best[col]), float(best[lo_col]), float(best[hi_col])), text, rows)


@_every_backend
def native_gap_trend(df: pd.DataFrame, tables: dict, claim):
    """The fastest Keras 3 variant's lead over native compiled PyTorch, smallest batch over largest, geometric mean."""
    n = seedclaims.matching(tables["native"], claim)
    n = n[n.ratio.notna()]
    cells, used = [], []
    for _, g in n.groupby([c for c in _across(n) if c != "batch_size"], dropna=False, sort=False):
        if g.batch_size.nunique() < 2:
            continue
        small, large = g.loc[g.batch_size.idxmin()], g.loc[g.batch_size.idxmax()]
        cells.append(speedups_layer.ratio_of(*((float(r.ratio), float(r.ci_low), float(r.ci_high))
                                               for r in (small, large))))
        used.append(say(NOTEBOOK, "gap_at", small["model"], float(small.ratio), int(small.batch_size),
                        float(large.ratio), int(large.batch_size)))
    if not cells:
        return seedclaims.NotAnswered("Keras 3 and native torch.compile'd PyTorch were not measured at two batch sizes "
                                      "of one model and shape")
    s = speedups_layer.combine(cells)
    return ratio_claim(df, s, "the fastest Keras 3 over native compiled PyTorch: " + "; ".join(used),
                       _ok_rows(df, claim))


@_every_backend
def fastest_beats_rest(df: pd.DataFrame, tables: dict, claim, share: str | float = 0.9):
    """Holds when, on `share` of the shapes, the fastest Keras 3 variant is decided faster than every rival that ran."""
    share = seedclaims.arithmetic(share)
    vt = tables.get("verdicts") or verdicts.VerdictTable(NOTEBOOK, ())
    sp = tables["speedups"]
    sp = seedclaims.matching(sp[sp.speedup.notna()], claim) if len(sp) else sp
    beats, lines = 0, []
    for _, g, top in _best_keras3(sp, _across(sp)):
        # each speed-up is over native eager, paired in its process
        rivals = {"native eager": (top.to_dict() | {"variant": REFERENCE}, triple(top))}
        for name, variant in (("native compiled", NATIVE_COMPILED), ("Keras 2", KERAS2)):
            other = g[g.variant == variant]
            if len(other):
                rivals[name] = (other.iloc[0], speedups_layer.ratio_of(triple(top), triple(other.iloc[0])))
        lost = [name for name, (row, (_, lo, hi)) in rivals.items()
                if (vt.decision(top, row, STUDY.options) or verdicts.unlisted(lo, hi, EQUIVALENCE)) != "faster"]
        beats += not lost
        lines.append(say(NOTEBOOK, "beats", top["variant"], shape_label(top, ("model", "batch_size"), short=True), lost,
                         list(rivals)))
    if not lines:
        return seedclaims.NotAnswered("no shape has a Keras 3 variant beside native PyTorch")
    return count_claim(say(NOTEBOOK, "beats_every", beats, len(lines), share, lines), _ok_rows(df, claim),
                       beats >= share * len(lines))


def keras3_over_keras2(df: pd.DataFrame, tables: dict, claim):
    """Keras 3 over Keras 2 on TensorFlow (predict_on_batch): the geometric mean over shapes."""
    k = tables["keras 2"]
    if not len(k):
        return seedclaims.NotAnswered("Keras 2 and Keras 3 on TensorFlow were not both measured on any shape")
    g, lo, hi = _geo(k)
    rows = df[(df.status == "ok") & df.variant.isin([KERAS2, "keras-tensorflow"])]
    return ratio_claim(df, (g, lo, hi), say(NOTEBOOK, "over_keras2", len(k), list(zip(k["shape"], k.speedup))), rows)


STUDY = register(Study(
    NOTEBOOK, KerasBackends, configs, estimate_s, analyse, group_by=group_by, workloads=keras_workloads,
    frameworks=("torch", "tensorflow"),
    # each over native eager PyTorch in its own backend's process (paired in its rounds)
    comparisons=(
        *(Comparison(f"Keras 3 ({name}, {how}) over eager PyTorch", f"keras-{b}{suffix}")
          for b, name in (("tensorflow", "TensorFlow"), ("jax", "JAX"), ("torch", "PyTorch"))
          for how, suffix in (("jit", "-jit"), ("predict", ""))),
        Comparison("torch.compile over eager PyTorch", NATIVE_COMPILED),
        Comparison("Keras 3 over Keras 2 (TensorFlow, predict)", "keras-tensorflow", KERAS2),
        *(Comparison(f"predict_on_batch over a direct call ({b})", f"keras-{b}", f"keras-{b}-call")
          for b in ("tensorflow", "jax", "torch")),
    ),
    options=("variant", "backend"),
    runs="the same PyTorch models as native eager, timed in each Keras backend's rounds beside its Keras 3 twins",
    on_gpu=("the per-op Python cost of eager backends hides behind asynchronous kernel launches (except in "
            "predict_on_batch's host copies) and XLA's fusion matters more, so jit variants and the backend ranking can "
            "change; seed 002 measured an A100 in bf16."),
    expectations=EXPECTATIONS,
))


seedclaims.register_evaluators(NOTEBOOK, fastest_backend, jax_first, share_above, keras3_over_native,
                               native_gap_trend, fastest_beats_rest, keras3_over_keras2)
