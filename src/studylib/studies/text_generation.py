"""Study 07: when do a static KV cache, torch.compile and ONNX Runtime pay off for prefill and decode?"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import Field, field_validator, model_validator

from .. import runtimes
from ..bench import surprises
from ..bench.schemas import Grid, Skip, VariantSkips
from ..claims import claims as seedclaims
from ..core import paths
from ..core.config import REFERENCE, Config, is_aa, original_of, with_aa
from ..runtimes.generation import PARITY_STEPS
from ..stats import verdicts
from ..stats.speedups import Comparison
from ..workloads import generation
from ..workloads.models import MODELS
from . import text_generation_tables as tables
from .base import Analysis, Study, register
from .common import aa_finding, drift_lines, failures_and_noise, finish, over_reference, replicates_s, say
from .text_generation_workloads import GenerationWorkloads, data_tag, new_tokens_of

NOTEBOOK = "07_text_generation"
Variant = runtimes.offered(NOTEBOOK)  # the variants whose registration offers them in this study
Phase = Literal["prefill", "decode", "generate"]
# a compiled static cache's decode step is not slower than eager's (surprises.py)
EXPECTATIONS = (surprises.Expectation("static-compile", REFERENCE),)


class TextGeneration(VariantSkips, Grid):  # Grid first in validation: eager and the grid before variant_skip
    """Section of study 07: causal LMs, batch sizes, prompt lengths (`seq_lens`), new tokens, phases and variants."""

    variants: list[Variant]
    phases: list[Phase] = Field(default_factory=lambda: list(generation.PHASES),
                                description="what is timed: prefill (time to first token), decode (one step at "
                                            "prompt + new_tokens/2), generate (prompt + new_tokens, end to end)")
    new_tokens: int = Field(32, ge=1, le=4096, description="tokens each generation produces (no early end)")
    max_cache_mb: float = Field(4096.0, gt=0, description="a configuration whose KV cache (prompt + new tokens) "
                                                          "needs more is a skipped row")
    variant_phases: dict[str, list[Phase]] = Field(default_factory=dict, description=(
        "by variant: the phases it runs (default: every phase of the section); say why in left_out"))
    phase_skip: dict[Phase, list[Skip]] = Field(default_factory=dict, description=(
        "by phase: shapes where that phase is left out while the others run there (say why in left_out)"))

    @field_validator("phases")
    @classmethod
    def _phases(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError("must list at least one phase, each once")
        return v

    @model_validator(mode="after")
    def _causal_models_and_phases(self) -> TextGeneration:
        for name in self.models:
            if MODELS[name].family not in ("llama-lm", "gpt2-lm"):
                lms = [n for n, s in MODELS.items() if s.family in ("llama-lm", "gpt2-lm")]
                raise ValueError(f"models: {name!r} is not a causal language model (use one of: {', '.join(lms)})")
        for variant, phases in self.variant_phases.items():
            if variant not in self.variants or variant == REFERENCE:
                raise ValueError(f"variant_phases: {variant!r} is not one of this section's variants other than "
                                 f"eager ({', '.join(v for v in self.variants if v != REFERENCE)})")
            if not phases or any(p not in self.phases for p in phases):
                raise ValueError(f"variant_phases.{variant}: {phases} must be some of the section's phases "
                                 f"({', '.join(self.phases)})")
        for phase, skips in self.phase_skip.items():
            if phase not in self.phases:
                raise ValueError(f"phase_skip: {phase!r} is not one of the section's phases ({', '.join(self.phases)})")
            shapes = self.shapes()
            if shapes and all(any(k.matches(*shape) for k in skips) for shape in shapes):
                raise ValueError(f"phase_skip.{phase}: leaves out every shape (drop {phase!r} from phases instead)")
        return self

    def runs_phase(self, variant: str, phase: str, shape: tuple = ()) -> bool:
        """Whether `variant` runs `phase` (variant_phases) at `shape` (model, dtype, batch, prompt; phase_skip)."""
        if shape and any(k.matches(*shape) for k in self.phase_skip.get(phase, ())):
            return False
        return phase in self.variant_phases.get(original_of(variant), self.phases)


def configs(section: TextGeneration, *, device: str, threads: int) -> list[Config]:
    """Every shape × phase: eager first (and its A/A copy), then the other variants the shape and phase run."""
    variants = with_aa([REFERENCE] + [v for v in section.variants if v != REFERENCE], section.aa)
    return [Config(model, v, dtype, batch, device, threads, seq_len=seq, strategy=phase,
                   data=data_tag(section.new_tokens))
            for model, dtype, batch, seq in section.shapes() for phase in section.phases for v in variants
            if section.runs_phase(v, phase, (model, dtype, batch, seq)) and section.runs(v, model, dtype, batch, seq)]


# `plan`'s per-call guesses for a quiet 2-core host (docs/method.md, "Studies")
GFLOPS, GBS, STEP_S, COMPILE_S, EXPORT_S, QUANTIZE_S = 100.0, 10.0, 0.010, 40.0, 30.0, 10.0


def _per_call_s(c: Config) -> float:
    n = new_tokens_of(c)
    w = generation.work(c.model, phase=c.strategy, batch_size=c.batch_size, prompt_len=c.seq_len, new_tokens=n,
                        dtype=c.dtype)
    layers = generation._shape(c.model)["layers"]
    steps = {"prefill": 1, "decode": 1, "generate": n}[c.strategy]
    return w["flops_per_call"] / (GFLOPS * 1e9) + w["bytes_per_call"] / (GBS * 1e9) + steps * STEP_S * layers / 30


def _skipped(c: Config, section: TextGeneration) -> bool:
    """Whether the configuration will be a skipped row (GenerationWorkloads.check: positions, cache size)."""
    try:
        GenerationWorkloads(0, max_cache_mb=section.max_cache_mb).check(c)
    except runtimes.RuntimeUnavailable:
        return True
    return False


def estimate_s(c: Config, section: TextGeneration, measure: dict, speed: float = 1.0) -> float:
    """`plan`'s rough wall-time guess, per replicate: one-time costs, first call, warm-up, rounds and parity."""
    if _skipped(c, section):
        return 0.0
    big = not c.model.endswith("tiny")
    variant = original_of(c.variant)
    once, one_time = 0.0, 0.0  # once per profile (the export, cached), and per replicate (a compile, a session)
    if variant == "static-compile":
        one_time = (COMPILE_S if big else 8.0) * (1 if c.strategy == "decode" else 2)
    first = (c.batch_size, c.seq_len) == (section.batch_sizes[0], section.seq_lens[0])
    if variant.startswith("ort") and first and c.strategy == next(
            p for p in section.phases if section.runs_phase(variant, p)):
        once = (EXPORT_S if big else 3.0) if variant == "ort" else (QUANTIZE_S if big else 0.5)
    if variant.startswith("ort"):
        one_time += 2.0 if big else 0.2
    parity = (1 if c.strategy == "decode" else 0.2) * PARITY_STEPS + (c.strategy == "generate") * 0.2
    return once + replicates_s(measure, one_time, _per_call_s(c), speed, 5, extra_calls=parity)  # + parity's run


def _where(row) -> str:
    return f"{row['variant']} {tables.shape_words(row)}"


def findings(df: pd.DataFrame, sp: pd.DataFrame, phases: pd.DataFrame, vt: verdicts.VerdictTable) -> list[str]:
    """The fastest option per phase and shape, each speed-up, generate against its parts, A/A, failures, drift."""
    lines = tables.fastest_findings(df, vt) + tables.consistency_findings(phases)
    for _, r in sp[sp.speedup.notna() & ~sp.variant.map(is_aa)].iterrows():
        lines.append(say(NOTEBOOK, "over_eager", _where(r), r))
    return lines + [aa_finding(df)] + failures_and_noise(df, _where) + drift_lines(df)


def analyse(df: pd.DataFrame, peaks: dict | None = None, *, vt: verdicts.VerdictTable) -> Analysis:
    """The study's tables, findings and claims, every decision as the run's verdict table `vt` has it."""
    sp, phases, mechanism = over_reference(df, vt), tables.phase_table(df), tables.mechanism_table(df, peaks)
    return finish(NOTEBOOK, df, peaks, vt, {"speedups": sp, "phases": phases, "one_time": tables.one_time_table(df, sp),
                                            "mechanism": mechanism, "measurements": tables.measurements(df)},
                  findings(df, sp, phases, vt), seedclaims.study_claims(NOTEBOOK, df, {"speedups": sp}, vt=vt),
                  later=tables.mechanism_findings(mechanism, peaks))


def workloads(run) -> GenerationWorkloads:
    """What each configuration runs (StudyRun -> GenerationWorkloads): the section's cache limit, the profile's cache."""
    return GenerationWorkloads(run.plan.seed, cache_dir=paths.cache_dir(run.profile),
                               max_cache_mb=run.section.max_cache_mb)


STUDY = register(Study(
    NOTEBOOK, TextGeneration, configs, estimate_s, analyse, workloads=workloads,
    comparisons=(
        Comparison("static KV cache over eager's dynamic cache", "static"),
        Comparison("static cache + torch.compile over eager", "static-compile"),
        Comparison("ONNX Runtime (optimum) over eager", "ort"),
        Comparison("ONNX Runtime dynamic int8 over eager", "ort-int8"),
    ),
    runs="a causal LM (transformers), one generation phase per call",
    on_gpu=("decode is bound by memory bandwidth and per-step launches there; transformers' generate compiles a static "
            "cache's forward by itself on CUDA and CUDA graphs cut the launches, so the compiled static cache can gain "
            "more: run a gpu-* profile to see."),
    expectations=EXPECTATIONS,
))
