"""Study 07: Text generation: prefill and decode.

The grid, and the analysis its notebook shows. Written by `python -m studylib new-study`: eager PyTorch against
torch.compile (and TorchScript, where a profile lists it) on a text model. TODO: the question, the comparisons and the
grid are this study's to decide.
"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import model_validator

from .. import runtimes
from ..core import speedups, verdicts
from ..core.config import REFERENCE, Config, is_aa, with_aa
from ..core.speedups import Comparison
from ..measurement import claims as seedclaims
from ..measurement import surprises
from ..measurement.schemas import Grid
from ..workloads.models import MODELS
from .base import Analysis, Study, register
from .common import aa_finding, describe_ci, drift_finding, failures_and_noise, latency_table, size_label

NOTEBOOK = "07_text_generation"
# What should hold (a candidate faster than, or equal to, its baseline): a replicate that contradicts it profiles one
# call of each side after its rounds (surprises.py). TODO: this study's expectations.
EXPECTATIONS = (surprises.Expectation("compile-default", REFERENCE),)


class TextGeneration(Grid):
    """Section of study 07: text models, batch sizes and sequence lengths, and the variants compared."""

    # TODO: the variants this study compares (names from studylib.runtimes.REGISTRY); eager is every speed-up's baseline
    variants: list[Literal["eager", "compile-default", "torchscript"]]

    @model_validator(mode="after")
    def _text_models(self) -> TextGeneration:
        for name in self.models:
            if MODELS[name].kind != "text":
                raise ValueError(f"models: {name!r} is not a text model (this study's inputs are token ids)")
        return self


def configs(section: TextGeneration, *, device: str, threads: int) -> list[Config]:
    """Every shape of the grid: eager first, then the other variants, each one `aa` names followed by its A/A copy."""
    variants = with_aa([REFERENCE] + [v for v in section.variants if v != REFERENCE], section.aa)
    return [Config(model, v, dtype, batch, device, threads, seq_len=seq)
            for model, dtype, batch, seq in section.shapes() for v in variants]


def estimate_s(c: Config, section: TextGeneration, measure: dict, speed: float = 1.0) -> float:
    """A rough wall-time guess for `plan`, per replicate: a cold torch.compile, then the first call, the warm-up and
    the minimum rounds (per-call costs guessed for 2 CPU cores; `speed` is the machine's speed relative to that)."""
    big = not c.model.endswith("tiny")
    compile_s = (14.0 if big else 4.0) if runtimes.family(c.variant) == "compile" else 0.0
    per_call = (0.1 if big else 0.002) * c.batch_size * (c.seq_len or 128) / 128
    calls = 1 + measure["warmup_calls"] + measure["min_rounds"]
    return measure["replicates"] * (compile_s + max(per_call / speed, measure["block_s"]) * calls
                                    + measure["min_time_s"] / 5)


def speedup_table(df: pd.DataFrame) -> pd.DataFrame:
    """Every variant over eager on the same shape, paired by round, with the decision the verdict table holds (the
    one every element of the page reads)."""
    t = speedups.pair_table(df, None, REFERENCE, band=speedups.band(df))
    vt = verdicts.for_study(NOTEBOOK, df) if len(df) else None
    t["verdict"] = [verdicts.decision_at(vt, r.candidate, r.baseline, r) if vt is not None and pd.notna(r.speedup)
                    else None for r in t.itertuples()] if len(t) else []
    return t


def _where(row) -> str:
    return f"{row['variant']} {row['model']} {row['dtype']} batch {row['batch_size']} {size_label(row)}"


def findings(df: pd.DataFrame, sp: pd.DataFrame) -> list[str]:
    """The study's own findings, beside the verdicts the page lists first: each speed-up with its CI, the A/A control,
    what failed, the noise and the drift."""
    lines = [aa_finding(df)]
    for _, r in sp[sp.speedup.notna() & ~sp.variant.map(is_aa)].iterrows():
        lines.append(f"{_where(r)}: {describe_ci(r)} over eager ({r['verdict']}).")
    drift = drift_finding(df)
    return lines + failures_and_noise(df, _where) + ([drift] if drift else [])


def analyse(df: pd.DataFrame, peaks: dict | None = None) -> Analysis:
    """Speed-ups over eager, the measurements table, the findings, the claims of the registry this study tests
    (measurement/claims.yaml; none until it names some) and the surprises. `peaks` is unused (no roofline here)."""
    sp = speedup_table(df)
    analysis = Analysis(tables={"speedups": sp, "measurements": latency_table(df)}, findings=findings(df, sp),
                        claims=seedclaims.study_claims(NOTEBOOK, df, {"speedups": sp}))
    return surprises.attach(analysis, df, EXPECTATIONS, speedups.band(df))


STUDY = register(Study(
    NOTEBOOK, TextGeneration, configs, estimate_s, analyse,
    # TODO: the comparisons the Answer box, the index's "What to use" and the summary give: (words, candidate, baseline)
    comparisons=(Comparison("torch.compile (default) over eager", "compile-default", "eager"),),
    expectations=EXPECTATIONS,
))
