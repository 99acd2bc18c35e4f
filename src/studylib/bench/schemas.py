"""The profile schema: the pydantic models a params/<profile>.yaml file is validated with (loading: profiles.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ..core import study_registry
from ..core.config import original_of
from ..workloads.corpus import CorpusSettings
from ..workloads.models import MODELS
from ..workloads.tokenization import TokenizerError, vocabulary_size

Dtype = Literal["fp32", "bf16", "fp16"]
# The published articles this study re-examines (../shared/seeds/); a profile says which it follows.
SEEDS = {
    "000": "Hugging Face, PyTorch 1.3 vs TensorFlow 2.0 inference: n1-standard-32 (32 vCPU Xeon) and V100 16GB",
    "001": "why PyTorch is as fast as TensorFlow (framework design)",
    "002": "Keras 3 backends benchmark: A100 40GB",
    "003": "PyTorch, TorchScript and ONNX Runtime with smart batching: CPU, T4 and V100",
    "004": "PyTorch 2 torch.compile vs ONNX Runtime and TensorRT: RTX 3090 Ti",
}
# int8: quantized runtimes, whatever the input dtype; tf32: fp32 rows under a tf32 precision policy
Tolerance = Literal["fp32", "tf32", "bf16", "fp16", "int8"]
Device = Literal["cpu", "cuda"]


class ProfileError(Exception):
    """A bad profile or parameter: the message is one line naming file, key and problem."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class MeasureSettings(_Strict):
    """How each group of configurations is timed: interleaved rounds, in `replicates` processes (see timing)."""

    warmup_calls: int = Field(2, ge=0, description="untimed calls per variant after its first call")
    min_rounds: int = Field(10, ge=3, description="rounds per replicate at least (3: see variance.py)")
    max_rounds: int = Field(500, ge=3)
    min_time_s: float = Field(10.0, ge=0, description="rounds are spread over at least this many seconds per group")
    target_ci_pct: float = Field(2.0, gt=0, le=100, description="stop when every median and speed-up CI is this tight")
    budget_s: float = Field(5.0, gt=0, description="sampling seconds per configuration (a group gets the sum)")
    block_s: float = Field(0.02, ge=0, description="a call shorter than this is repeated in a block per sample")
    replicates: int = Field(1, ge=1, le=10, description="independent processes, one after another, per group")

    @model_validator(mode="after")
    def _round_bounds(self) -> MeasureSettings:
        if self.max_rounds < self.min_rounds:
            raise ValueError(f"max_rounds ({self.max_rounds}) is below min_rounds ({self.min_rounds})")
        return self


def _known(values, known, what: str):
    """`values`, each one of `known` (a ValueError names the first that is not)."""
    for v in values:
        if v not in known:
            raise ValueError(f"unknown {what} {v!r} (known: {', '.join(known)})")
    return values


def _nonempty_unique(values: list) -> list:
    if not values:
        raise ValueError("must list at least one value")
    if len(set(values)) != len(values):
        raise ValueError("lists a value twice")
    return values


class Skip(_Strict):
    """Shapes a grid leaves out: every configuration whose model, dtype, batch size and sequence length match."""

    model: str | None = None
    dtype: Dtype | None = None
    batch_size: int | None = None
    seq_len: int | None = None

    @model_validator(mode="after")
    def _names_something(self) -> Skip:
        if all(getattr(self, k) is None for k in SKIP_KEYS):
            raise ValueError("names none of model, dtype, batch_size, seq_len (it would leave out every shape)")
        return self

    def matches(self, model: str, dtype: str, batch_size: int, seq_len: int | None = None) -> bool:
        return all(want is None or want == have for want, have in zip(
            (self.model, self.dtype, self.batch_size, self.seq_len), (model, dtype, batch_size, seq_len)))


SKIP_KEYS = ("model", "dtype", "batch_size", "seq_len")


class _Section(_Strict):
    """What every grid section shares: models, dtypes and batch sizes, an eager reference, A/A copies, overrides."""

    models: list[str]
    dtypes: list[Dtype]
    batch_sizes: list[int]
    measure: MeasureSettings | None = None
    aa: list[str] = Field(default_factory=lambda: ["eager"], description="variants whose A/A copy runs too (aa_of)")
    left_out: str = ""

    @field_validator("models")
    @classmethod
    def _models(cls, v: list[str]) -> list[str]:
        return _known(_nonempty_unique(v), sorted(MODELS), "model")

    @field_validator("variants", "dtypes", "strategies", check_fields=False)
    @classmethod
    def _lists(cls, v: list) -> list:
        return _nonempty_unique(v)

    @field_validator("batch_sizes", "seq_lens", check_fields=False)
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        bad = [x for x in _nonempty_unique(v) if x < 1]
        if bad:
            raise ValueError(f"must be at least 1 (got {bad[0]})")
        return v

    @model_validator(mode="after")
    def _eager_and_aa(self):
        if "eager" not in self.variants:
            raise ValueError("variants must include 'eager', the reference every speed-up is taken over")
        if len(set(self.aa)) != len(self.aa):
            raise ValueError("aa: lists a variant twice")
        for v in self.aa:
            if v not in self.variants:
                raise ValueError(f"aa: {v!r} is not one of this section's variants ({', '.join(self.variants)}): "
                                 f"an A/A copy copies a variant the section runs")
        return self


class Grid(_Section):
    """A fixed-shape grid: every model, dtype, batch size and (text models) sequence length, less the skips."""

    seq_lens: list[int]
    skip: list[Skip] = Field(default_factory=list, description="shapes of the grid left out (say why in left_out)")

    def shapes(self) -> list[tuple[str, str, int, int | None]]:
        """(model, dtype, batch, seq_len or None) of every shape the grid times, skips left out."""
        return [(m, d, b, s) for m in self.models for d in self.dtypes
                for s in (self.seq_lens if MODELS[m].kind == "text" else [None]) for b in self.batch_sizes
                if not any(k.matches(m, d, b, s) for k in self.skip)]

    @model_validator(mode="after")
    def _skips_in_grid(self):
        for i, s in enumerate(self.skip):
            for key in SKIP_KEYS:
                value, allowed = getattr(s, key), getattr(self, f"{key}s")
                if value is not None and value not in allowed:
                    raise ValueError(f"skip[{i}]: {key} {value!r} is not in {key}s {allowed} (it would skip nothing)")
        if self.skip and not self.shapes():
            raise ValueError("skip leaves out every shape of the grid")
        return self


class VariantSkips(_Strict):
    """A grid section's `variant_skip` (mixed into a Grid): shapes where one variant is left out."""

    variant_skip: dict[str, list[Skip]] = Field(default_factory=dict, description="by variant: shapes it is left out")

    @model_validator(mode="after")
    def _variant_skips_known(self):
        for variant, skips in self.variant_skip.items():
            if variant not in self.variants:
                raise ValueError(f"variant_skip: {variant!r} is not one of this section's variants "
                                 f"({', '.join(self.variants)})")
            if variant == "eager":
                raise ValueError("variant_skip: eager is the reference every speed-up is taken over: it runs at every "
                                 "shape (use skip to leave a shape out)")
            for i, k in enumerate(skips):  # a size outside the grid skips nothing (editing the grid must not break it)
                if k.model is not None and k.model not in MODELS:
                    raise ValueError(f"variant_skip.{variant}[{i}]: unknown model {k.model!r} "
                                     f"(known: {', '.join(sorted(MODELS))})")
        return self

    def runs(self, variant: str, model: str, dtype: str, batch_size: int, seq_len: int | None = None) -> bool:
        """Whether `variant` (an A/A copy: as its original) runs at this shape: no variant_skip entry of it matches."""
        return not any(k.matches(model, dtype, batch_size, seq_len) for k in self.variant_skip.get(original_of(variant), ()))


class DataGrid(_Section):
    """What both data-set studies share: classifiers timed on passes over a tokenized text sample."""

    max_length: int = Field(512, ge=8)
    corpus: CorpusSettings = CorpusSettings()

    @field_validator("models")
    @classmethod
    def _classifiers(cls, v: list[str]) -> list[str]:
        classifiers = [n for n, s in MODELS.items() if s.family == "roberta-classifier"]
        for name in v:
            if name not in classifiers:
                raise ValueError(f"{name!r} is not a text classifier (use one of: {', '.join(classifiers)})")
        return v

    @model_validator(mode="after")
    def _fits(self):
        if self.measure is not None and self.measure.warmup_calls < 1:
            # a pass holds every batch shape; TorchScript and ONNX Runtime specialise on the first ones they see
            raise ValueError("measure.warmup_calls: passes over a data set need at least 1 untimed warm-up pass")
        vocab = self.corpus.vocab_size
        where = "corpus.vocab_size"
        if self.corpus.tokenizer is not None:
            try:
                vocab, where = vocabulary_size(self.corpus.tokenizer), f"corpus.tokenizer ({self.corpus.tokenizer})"
            except TokenizerError as e:
                raise ValueError(f"corpus: {e}") from None
        for name in self.models:
            limit = MODELS[name].max_positions
            if limit is not None and self.max_length > limit:  # None: relative positions (XLNet)
                raise ValueError(f"max_length: {self.max_length} exceeds {name}'s {limit} positions")
            if vocab > MODELS[name].vocab_size:
                raise ValueError(f"{where}: a vocabulary of {vocab} tokens does not fit {name}'s "
                                 f"{MODELS[name].vocab_size} embeddings")
        return self


def sections() -> dict[str, type[BaseModel]]:
    """The schema of each study's profile section, by notebook id, from the study registry."""
    return {name: study.section for name, study in study_registry.studies().items()}


_CUDA_ONLY = {"card": "a GPU card ({}) on a cpu profile: set device: cuda, or leave card out",
              "tf32": "TF32 is a CUDA GPU format; a cpu profile must leave it false"}


class Profile(_Strict):
    """One hardware profile: common settings and a section per notebook it runs."""

    description: str
    follows: list[str] = Field(default_factory=list, description="the seeds (articles) whose set-up this profile follows")
    device: Device = "cpu"
    card: Literal["t4", "v100", "a100", "3090ti", "h100"] | None = Field(
        None, description="cuda: the GPU `make plan` estimates for (run.card_speed); unset: as an A100")
    threads: int = Field(ge=1)
    seed: int = 0
    measure: MeasureSettings = MeasureSettings()
    run_shift: Literal["recorded", "unknown"] = Field("unknown", description=(
        "the shift between two whole runs: 'recorded' (run_shifts.yaml: medians get a re-run CI) or 'unknown'"))
    parity_tolerance: dict[Tolerance, Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: {"fp32": 1e-3, "tf32": 0.02, "bf16": 0.1, "fp16": 0.02, "int8": 0.1},
        description="largest max-abs-difference to eager allowed, relative to max(1, max |eager output|)")
    tf32: bool = Field(False, description="CUDA: fp32 matmuls and convolutions in TF32, in every framework alike")
    notebooks: dict[str, dict[str, Any]]

    @field_validator("card", "tf32")
    @classmethod
    def _cuda_only(cls, v, info: ValidationInfo):
        if v and info.data.get("device") != "cuda":
            raise ValueError(_CUDA_ONLY[info.field_name].format(v))
        return v

    @field_validator("notebooks")
    @classmethod
    def _sections(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if not v:
            raise ValueError("must name at least one notebook")
        return _known(v, list(sections()), "notebook")

    @field_validator("follows")
    @classmethod
    def _seeds(cls, v: list[str]) -> list[str]:
        return _known(v, list(SEEDS), "seed")

class AutoRule(_Strict):
    """Use profile `use` when the machine has at least this much GPU memory (cuda rules) or cores (cpu rules)."""

    use: str
    min_gpu_memory_gib: float = Field(0.0, ge=0)
    min_cores: int = Field(0, ge=0)


class AutoChoice(_Strict):
    """How the `auto` profile picks: the first matching rule of `cuda` (GPU present) or `cpu` (none)."""

    cuda: list[AutoRule]
    cpu: list[AutoRule]
    threads: Literal["cores"] | int = "cores"

    @field_validator("cuda", "cpu")
    @classmethod
    def _catch_all(cls, v: list[AutoRule]) -> list[AutoRule]:
        if not v:
            raise ValueError("must list at least one rule")
        last = v[-1]
        if last.min_gpu_memory_gib or last.min_cores:
            raise ValueError("the last rule must have no minimum, so that every machine gets a profile")
        return v

    @field_validator("threads")
    @classmethod
    def _threads(cls, v):
        if isinstance(v, int) and v < 1:
            raise ValueError(f"must be 'cores' or at least 1 (got {v})")
        return v


class AutoProfile(_Strict):
    """A profile that detects the machine and runs the grid of the profile its rules pick."""

    description: str
    auto: AutoChoice
