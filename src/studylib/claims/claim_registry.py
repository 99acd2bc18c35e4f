"""The seed-claims registry (`claims.yaml`): its schema, loading and validation; claims.py judges what it holds."""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, field_validator, model_validator
from pydantic.type_adapter import TypeAdapter

from ..bench import profiles, schemas
from ..core import paths, study_registry, wording

REGISTRY_FILE = Path(__file__).with_name("claims.yaml")
SEEDS = tuple(schemas.SEEDS)  # the seed articles, by number
# what a claim rests on in its seed: a reported measurement, an expectation, an inference, or a reader's report
BASES = ("measured", "expected", "inferred", "reported")
# The conditions a claim can be defined by (Conditions' fields that a profile's rows show).
DEFINING = ("models", "batch_sizes", "seq_lens", "precision")


class ClaimError(ValueError):
    """The registry is malformed: the message names the file, the claim and the field."""


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def arithmetic(text: str | float | int) -> float:
    """A number, or the seed's arithmetic on numbers ('0.748 / 0.823', '1 / (1 - 0.70)'), evaluated."""
    if isinstance(text, int | float):
        return float(text)

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(f"only numbers and + - * / are allowed, not {ast.dump(node)[:40]}")

    return ev(ast.parse(str(text), mode="eval").body)


class Sizes(BaseModel):
    """Batch sizes and sequence lengths: a part of a seed's grid (`scope`, `seed_lacks`)."""

    model_config = ConfigDict(extra="forbid")
    batch_sizes: list[PositiveInt] = Field(default_factory=list)
    seq_lens: list[PositiveInt] = Field(default_factory=list)


class Conditions(BaseModel):
    """What the seed measured under; `seed_lacks`: sizes it has no result for; `scope`: the part the claim is about."""

    model_config = ConfigDict(extra="forbid")
    device: Literal["cpu", "cuda", "any"]
    hardware: str
    ran_on: list[Literal["cpu", "cuda"]] = Field(default_factory=list, description="device kinds the seed measured")
    threads: int | None = None
    models: list[str] = Field(default_factory=list)
    models_text: str
    precision: list[Literal["fp32", "fp16", "bf16", "int8"]]
    batch_sizes: list[int] = Field(default_factory=list)
    seq_lens: list[int] = Field(default_factory=list, description="token lengths (maximum length for data sets)")
    texts: int | None = None
    software: str
    mode: str = Field("", description="the framework mode the seed ran (graph, eager, compiled), in its words")
    defining: list[Literal[DEFINING]] = Field(
        default_factory=list, description="the conditions the claim is about: a profile without them cannot answer it "
                                          "(every listed model or size absent from its rows); other conditions may be "
                                          "substituted, which makes a verdict a proxy")
    seed_lacks: Sizes = Field(default_factory=Sizes, description="sizes of the seed's grid it has no result for (a "
                                                                 "model limited to fewer positions): never lacking here")
    scope: Sizes = Field(default_factory=Sizes, description="the part of the grid the claim is about: its rows are "
                                                            "judged and compared with the seed's, the rest left out")

    @model_validator(mode="after")
    def _defined(self) -> Conditions:
        empty = [d for d in self.defining if not getattr(self, d)]
        if empty:
            raise ValueError(f"defining conditions {empty} are empty: list the seed's values")
        for part in ("seed_lacks", "scope"):
            for key in ("batch_sizes", "seq_lens"):
                sizes, grid = getattr(getattr(self, part), key), getattr(self, key)
                outside = sorted(set(sizes) - set(grid))
                if outside and (grid or part == "seed_lacks"):
                    raise ValueError(f"{part}.{key} {outside} are not in the seed's {key} {sorted(grid)}")
        return self


class Magnitude(BaseModel):
    """The size a claim's word implies ('显著', '得多'): the smallest ratio it is read as, and why."""

    model_config = ConfigDict(extra="forbid")
    words: str
    at_least: float = Field(gt=1)
    why: str


class Article(BaseModel):
    """A seed article as the pages name it."""

    model_config = ConfigDict(extra="forbid")
    title: str
    title_en: str
    author: str
    date: str
    source: str


class Claim(BaseModel):
    """One quantitative claim of one seed, as the registry holds it (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    seed: Literal[SEEDS]
    where: str
    original: str = Field(min_length=4, description="the seed's own words, in the article's language")
    words: str = Field(description="an English translation of `original`")
    basis: Literal[BASES]
    number: float | None = None
    number_text: str = ""
    expect: Literal["higher", "lower", "equal", "holds"]
    tolerance: float | None = Field(None, gt=1, description="the seed's own 'within x%' band, as a ratio")
    magnitude: Magnitude | None = None
    number_at: Literal["mean", "model", "up to"] = Field(
        "mean", description="what the seed's number is: a mean over its grid, one model's, or its largest ('up to'); "
                            "a model's or an 'up to' number is compared only at the matching model")
    scale: str = Field(description="what our measurement is, on the scale of the seed's number")
    sizes: str = Field("", description="batch 'small'/'large' (and the like) for this claim, from the seed's sizes")
    conditions: Conditions
    caveats: list[str] = Field(default_factory=list, description="differences no profile removes: shown, never "
                                                                 "counted as a substitution")
    substitutes: list[str] = Field(default_factory=list, description="what we compare in place of what the seed "
                                                                     "compared: every verdict is a proxy")
    study: str | None = None
    evaluator: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    why_not: str | None = None
    inferred: list[str] = Field(default_factory=list, description="conditions (Conditions' field names) we inferred, "
                                                                  "not read in the seed: the claims table marks them")

    @field_validator("number", mode="before")
    @classmethod
    def _arithmetic(cls, v):
        return None if v is None else arithmetic(v)

    @model_validator(mode="after")
    def _tested_or_why_not(self) -> Claim:
        if not (self.evaluator and self.study) and not self.why_not:
            raise ValueError("needs a study and an evaluator, or why_not")
        if self.magnitude and self.expect not in ("higher", "lower"):
            raise ValueError("a magnitude word qualifies a direction: expect must be higher or lower")
        if self.expect == "equal" and self.number not in (None, 1.0):
            raise ValueError("an equality claim's number is its tolerance: give it as `tolerance`")
        unknown = [k for k in self.inferred if k not in Conditions.model_fields or k == "defining"]
        if unknown:
            raise ValueError(f"inferred: {unknown} are not conditions (one of {', '.join(_SHOWN)}, mode, threads)")
        empty = [k for k in self.inferred if getattr(self.conditions, k) in (None, "", [])]
        if empty:
            raise ValueError(f"inferred: conditions {empty} are empty: an inferred condition needs a value")
        return self


def _validated(kind, items, path: Path, part: str):
    """`items` (the file's `part`) as `kind`, else a ClaimError: 'claims.yaml: claims.7 (000-xla): …' per error."""
    try:
        return TypeAdapter(kind).validate_python(items)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            key, *loc = err["loc"]
            item, field = items[key], ".".join(map(str, loc)) or f"({part[:-1]})"
            ident = item.get("id", "no id") if isinstance(item, dict) else "not a mapping"
            name = f" ({ident})" if part == "claims" else ""
            lines.append(f"{path.name}: {part}.{key}{name}: {field}: {err['msg']}")
        raise ClaimError("\n".join(lines)) from None


def _document(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ClaimError(f"{path.name}: not valid YAML: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise ClaimError(f"{path.name}: expected a mapping with `articles` and a list of `claims`")
    return data


def load_articles(path: Path | None = None) -> dict[str, Article]:
    """The seed articles by seed number, validated; every seed must be named."""
    path = path or REGISTRY_FILE
    raw = {str(seed): item for seed, item in (_document(path).get("articles") or {}).items()}
    out = _validated(dict[str, Article], raw, path, "articles")
    missing = sorted(set(SEEDS) - set(out))
    if missing:
        raise ClaimError(f"{path.name}: articles: no entry for seed(s) {missing}")
    return out


def load(path: Path | None = None) -> list[Claim]:
    """The registry, validated: every field checked, ids unique, every evaluator present in its study module."""
    path = path or REGISTRY_FILE
    out = _validated(list[Claim], _document(path)["claims"], path, "claims")
    ids = [c.id for c in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ClaimError(f"{path.name}: duplicate claim ids {dup}")
    for c in out:
        if c.evaluator and c.study:
            evaluator(c)  # raises ClaimError when missing
    return out


@functools.cache
def registry() -> tuple[Claim, ...]:
    """The package's registry, loaded once."""
    return tuple(load())


@functools.cache
def articles() -> dict[str, Article]:
    """The package's seed articles by seed number ('000' …), loaded once: what pages cite a seed by."""
    return load_articles()


def cite(seed: str) -> str:
    """'«title» (English title), author, date' of a seed article."""
    a = articles()[seed]
    return f"«{a.title}» ({a.title_en}), {a.author}, {a.date}"


# study id -> evaluator name -> the function its study registered (register_evaluators)
EVALUATORS: dict[str, dict[str, Callable]] = {}


def register_evaluators(study: str, *functions: Callable) -> None:
    """Register `functions` as study `study`'s claim evaluators, under their names (a second one replaces the first)."""
    EVALUATORS.setdefault(study, {}).update({fn.__name__: fn for fn in functions})


def evaluator(claim: Claim):
    """The claim's evaluator: the function its study (built-in or plug-in) registered under `claim.evaluator`."""
    known = study_registry.studies()
    if claim.study not in known:
        raise ClaimError(f"{REGISTRY_FILE.name}: {claim.id}: study {claim.study!r} is not registered")
    fn = EVALUATORS.get(claim.study, {}).get(claim.evaluator)
    if fn is None:
        raise ClaimError(f"{REGISTRY_FILE.name}: {claim.id}: study {claim.study!r} registers no evaluator "
                         f"{claim.evaluator!r} (claims.register_evaluators)")
    return fn


def sizes_text(values) -> str:
    """'1, 8, 64' (sorted, unique, integers) or '—'."""
    v = sorted({int(x) for x in values if pd.notna(x)})
    return ", ".join(map(str, v)) if v else "—"


def _profiles() -> tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...]:
    """(name, device, follows, study sections) of every shipped profile but smoke-fast."""
    return tuple((name, p.profile.device, tuple(p.profile.follows), tuple(p.sections))
                 for name, p in profiles.shipped().items() if name != paths.FAST_SMOKE)


def testing_profiles(claim: Claim) -> list[str]:
    """Profiles whose device kind the claim is about and which run its study, those following its seed first."""
    if not claim.study:
        return []
    fits = [(claim.seed not in follows, name) for name, device, follows, sections in _profiles()
            if device == claim.conditions.device and claim.study in sections]
    return [name for _, name in sorted(fits)]


# The conditions describe() shows, in its order: each marked where the registry says we inferred it.
_SHOWN = ("hardware", "models", "precision", "batch_sizes", "seq_lens", "texts", "software")


def describe(claim: Claim) -> str:
    """The seed's number and conditions in one cell (ours marked '(inferred)', a word's threshold named as ours)."""
    c = claim.conditions

    def mark(key: str, text: str) -> str:
        return f"{text} (inferred)" if key in claim.inferred else text

    parts = [claim.number_text or "no number"]
    parts.append(f"{mark('hardware', c.hardware)}{f', {c.threads} threads' if c.threads else ''}; "
                 f"{mark('models', c.models_text)}; {mark('precision', '/'.join(c.precision))}")
    sizes = [mark(k, said) for k, said in (("batch_sizes", f"batch {sizes_text(c.batch_sizes)}"),
                                           ("seq_lens", f"seq {sizes_text(c.seq_lens)}"),
                                           ("texts", f"{c.texts or 0:,} texts")) if getattr(c, k)]
    parts += [p for p in (" × ".join(sizes), claim.sizes) if p]
    parts.append(mark("software", c.software))
    parts += [f"{k} (inferred): {getattr(c, k)}" for k in claim.inferred if k not in _SHOWN]
    if claim.magnitude:
        parts.append(wording.macro("claims/claims.md.j2", "threshold", claim.magnitude))
    return " · ".join(parts) + f" [{claim.where}]"
