"""The seeds' claims: one registry of every quantitative claim of seeds 000–004, and the rules that judge them.

The registry is `claims.yaml` beside this module: data, not code, because it is what a reader checks line by
line against the seeds (the seed's words, where they are, its number, its conditions), and because the
profiles (params/*.yaml) are YAML validated by pydantic in the same way, so a mistake in either reads alike
(`claims.yaml: claims.7.expect: Input should be ...`). Numbers may be written as the seed's own arithmetic
("0.748 / 0.823", "1 - 0.20") so that a derived ratio is computed here, never typed.

Each claim names the study that tests it and an evaluator: a function of that study's module which turns the
study's results (and the tables its `analyse` computed) into our measurement — a ratio with its 95% CI, on the
scale of the seed's number — or says, computed from the data, why the data cannot answer it. A claim no study
can test carries `why_not` instead.

Judging a claim on one profile's results, in three steps:

1. **Comparability** (`comparability`), from the claim's conditions against the rows the measurement used:
   a claim about one device kind (cpu or cuda) is *not comparable* on a profile of the other kind, whatever
   the numbers say; otherwise it is *same* when model, precision, batch and sequence sizes, text count and
   threads all match the seed's, and *partly* with each difference listed (plus the claim's fixed caveats,
   e.g. "eager PyTorch here, compiled in the seed"). Software versions are shown but not compared: no
   profile pins the seeds' 2019–2023 versions, so every row would differ for the same reason.
2. **Magnitude** (`judge`), only where comparable or partly: for a claimed direction, the seed's number
   inside our CI → "agrees"; our CI on the same side of 1 but missing the number → "agrees in direction
   only" (ours smaller/larger); our CI on the other side → "does not agree (direction differs)"; our CI
   inside the noise band → "does not agree (equal within noise)"; a CI across 1 → "inconclusive". For a
   claimed equality the band is the seed's own tolerance or the study's A/A noise band (studies/common.py
   `noise_band`), whichever is wider: CI inside → agrees, CI outside → does not agree, else inconclusive.
3. **Totals** (`totals`), which count only claims actually judged; the rest are counted by why not.

Batch "small"/"large" is defined once per claim, from the seed's own sizes, in its `sizes` note.
"""

from __future__ import annotations

import ast
import functools
import importlib
import math
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from . import paths
from .speedups import EQUIVALENCE, verdict

# A claims table's columns (study_claims builds them from the registry of seed claims): the claim, the seed's
# number and conditions, whether this profile can compare, our measurement with its CI, the verdict, and the
# verdict's category (`judgement`, which the totals count).
CLAIM_COLUMNS = ["id", "seed", "claim", "seed's number and conditions", "comparable?", "our measurement (95% CI)",
                 "verdict", "judgement"]

REGISTRY_FILE = Path(__file__).with_name("claims.yaml")
SEEDS = ("000", "001", "002", "003", "004")
COLUMNS = CLAIM_COLUMNS  # every claims table's columns, a study's and the summary's
JUDGED = ("agrees", "agrees in direction only", "does not agree", "inconclusive")
NOT_JUDGED = ("not comparable on this profile", "not answerable from these results", "not tested by this study",
              "not run on this profile")


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


class Conditions(BaseModel):
    """What the seed measured under: the device kind the claim is about (`any` for a host-side or general
    claim), the machine, models (this study's ids of the same architecture; `models_text` in the seed's
    words), precision, sizes and versions."""

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


class Claim(BaseModel):
    """One quantitative claim of one seed, as the registry holds it (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    seed: Literal[SEEDS]
    where: str
    words: str
    number: float | None = None
    number_text: str = ""
    expect: Literal["higher", "lower", "equal", "holds"]
    tolerance: float | None = Field(None, gt=1, description="the seed's own 'within x%' band, as a ratio")
    scale: str = Field(description="what our measurement is, on the scale of the seed's number")
    sizes: str = Field("", description="batch 'small'/'large' (and the like) for this claim, from the seed's sizes")
    conditions: Conditions
    caveats: list[str] = Field(default_factory=list, description="differences no profile removes")
    study: str | None = None
    evaluator: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    why_not: str | None = None

    @field_validator("number", mode="before")
    @classmethod
    def _arithmetic(cls, v):
        return None if v is None else arithmetic(v)

    @model_validator(mode="after")
    def _tested_or_why_not(self) -> Claim:
        if not (self.evaluator and self.study) and not self.why_not:
            raise ValueError("needs a study and an evaluator, or why_not")
        if self.expect == "equal" and self.number not in (None, 1.0):
            raise ValueError("an equality claim's number is its tolerance: give it as `tolerance`")
        return self


def _validation_message(e: ValidationError, path: Path, index: int, item) -> str:
    """'claims.yaml: claims.7 (000-xla): conditions.device: Input should be ...', one line per error."""
    name = item.get("id", "no id") if isinstance(item, dict) else "not a mapping"
    return "\n".join(f"{path.name}: claims.{index} ({name}): {'.'.join(map(str, err['loc'])) or '(claim)'}: {err['msg']}"
                     for err in e.errors())


def load(path: Path | None = None) -> list[Claim]:
    """The registry, validated: every field checked, ids unique, every evaluator present in its study module."""
    path = path or REGISTRY_FILE
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, list):
        raise ClaimError(f"{path.name}: expected a list of claims")
    out: list[Claim] = []
    for i, item in enumerate(data):
        try:
            out.append(Claim.model_validate(item))
        except ValidationError as e:
            raise ClaimError(_validation_message(e, path, i, item)) from None
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


def evaluator(claim: Claim):
    """The claim's evaluator: `claim.evaluator` in the module of its study (built-in or plug-in)."""
    from .studies import STUDIES

    if claim.study not in STUDIES:
        raise ClaimError(f"{REGISTRY_FILE.name}: {claim.id}: study {claim.study!r} is not registered")
    module = importlib.import_module(STUDIES[claim.study].analyse.__module__)
    fn = getattr(module, claim.evaluator, None)
    if fn is None:
        raise ClaimError(f"{REGISTRY_FILE.name}: {claim.id}: {module.__name__} has no evaluator {claim.evaluator!r}")
    return fn


# ---------------------------------------------------------------------------------------------- measurements


@dataclass(frozen=True)
class Measurement:
    """Our answer to a claim: `value` with its 95% CI on the claim's scale, a sentence saying what was measured,
    and the results rows it used (their conditions are compared with the seed's). `holds` answers a yes/no
    claim (expect: holds) instead; `band` is the study's A/A noise band for 'equal'."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    text: str
    rows: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    band: float = EQUIVALENCE
    holds: bool | None = None
    unit: str = "×"


@dataclass(frozen=True)
class NotAnswered:
    """Why the results cannot answer a claim (computed from them: which sizes or variants are missing)."""

    reason: str


def least_favourable(cells: list[tuple[Any, tuple[float, float, float]]], claim: Claim):
    """Of (label, (ratio, low, high)) cells that must all bear a claim out, the one least favourable to it: the
    smallest for 'higher', the largest for 'lower', the furthest from 1 for 'equal'."""
    if claim.expect == "higher":
        return min(cells, key=lambda c: c[1][0])
    if claim.expect == "lower":
        return max(cells, key=lambda c: c[1][0])
    return max(cells, key=lambda c: abs(math.log(c[1][0])))


def matching(frame: pd.DataFrame, claim: Claim, one_group: bool = False) -> pd.DataFrame:
    """The rows of the seed's models and precisions where the results have any, else all of them (comparability
    then lists the difference). `one_group`: only the first (model, precision) of those, for evaluators that
    compare rows within one model — a claim gets one verdict per profile, on the closest set-up it ran."""
    c = claim.conditions
    for column, wanted in (("model", c.models), ("dtype", c.precision)):
        if wanted and column in frame and frame[column].isin(wanted).any():
            frame = frame[frame[column].isin(wanted)]
    if one_group and len(frame):
        first = frame.iloc[0]
        frame = frame[(frame.model == first.model) & (frame["dtype"] == first["dtype"])]
    return frame


def fmt_ci(value: float, lo: float, hi: float, unit: str = "×") -> str:
    """'1.23× (95% CI 1.20–1.26×)'."""
    return f"{value:.3g}{unit} (95% CI {lo:.3g}–{hi:.3g}{unit})"


# ---------------------------------------------------------------------------------------------- judging


def _sizes(values) -> str:
    v = sorted({int(x) for x in values if pd.notna(x)})
    return ", ".join(map(str, v)) if v else "—"


def _present(rows: pd.DataFrame, column: str) -> list:
    return sorted({x for x in rows[column].dropna()}) if column in rows and len(rows) else []


def comparability(claim: Claim, device: str, rows: pd.DataFrame | None = None) -> tuple[str, list[str]]:
    """('same' | 'partly' | 'not comparable', the differences) of a claim on a profile of `device`.

    `rows` are the results rows our measurement used; without them (nothing measured) only the device and
    the claim's caveats are compared."""
    c = claim.conditions
    if c.device != "any" and c.device != device:
        return "not comparable", [f"device: seed {c.hardware}, here {device}"]
    diffs = []
    if c.device == "any" and device not in c.ran_on:
        diffs.append(f"device: seed {c.hardware}, here {device} (the claim is read as holding on either)")
    rows = rows if rows is not None else pd.DataFrame()
    threads = _present(rows, "threads")
    if device == "cpu" and c.threads and threads and threads != [c.threads]:  # a GPU run's host threads matter less
        diffs.append(f"threads: seed {c.threads}, here {_sizes(threads)}")
    models = _present(rows, "model")
    if models and not set(models) <= set(c.models):
        diffs.append(f"model: seed {c.models_text}, here {', '.join(models)}")
    precision = _present(rows, "dtype")
    if precision and not set(precision) <= set(c.precision):
        diffs.append(f"precision: seed {', '.join(c.precision)}, here {', '.join(precision)}")
    for column, label, seed in (("batch_size", "batch", c.batch_sizes), ("seq_len", "sequence", c.seq_lens)):
        here = _present(rows, column)
        if here and seed and not set(here) <= set(seed):
            diffs.append(f"{label}: seed {_sizes(seed)}, here {_sizes(here)}")
    texts = _present(rows, "n_texts")
    if c.texts and texts and texts != [c.texts]:
        diffs.append(f"texts: seed {c.texts:,}, here {_sizes(texts)}")
    diffs += claim.caveats
    return ("partly" if diffs else "same"), diffs


def judge(claim: Claim, m: Measurement) -> tuple[str, str]:
    """(judgement, verdict sentence) from our measurement, by the rules in the module docstring."""
    if claim.expect == "holds":
        if m.holds is None:
            return "inconclusive", "inconclusive"
        return ("agrees", "agrees") if m.holds else ("does not agree", "does not agree")
    lo, hi = m.ci_low, m.ci_high
    band = max(m.band, claim.tolerance or 1.0)
    source = "the seed's tolerance" if (claim.tolerance or 0) >= m.band else "the A/A noise band"
    within = f"±{band - 1:.0%} ({source})"
    if claim.expect == "equal":
        if 1 / band <= lo and hi <= band:
            return "agrees", f"agrees: equal within {within}"
        if lo > band or hi < 1 / band:
            return "does not agree", f"does not agree: differs by more than {within}"
        return "inconclusive", f"inconclusive: the CI crosses the edge of {within}"
    cls = verdict(lo, hi, band)
    want, other = ("faster", "slower") if claim.expect == "higher" else ("slower", "faster")
    n = claim.number
    inside = n is not None and lo <= n <= hi
    if cls == want:
        if n is None:
            return "agrees", "agrees in direction (the seed gives no size)"
        if inside:
            return "agrees", f"agrees: the seed's {n:.3g} lies inside our CI"
        ours = "smaller" if (hi < n) == (claim.expect == "higher") else "larger"
        return "agrees in direction only", f"direction agrees, size does not: our effect is {ours} than the seed's {n:.3g}"
    if cls == other:
        return "does not agree", "does not agree: the direction differs"
    if cls == "equal":
        return "does not agree", f"does not agree: equal within noise ({within}) here"
    if inside:
        return "inconclusive", f"inconclusive: our CI holds both the seed's {n:.3g} and no difference"
    return "inconclusive", "inconclusive: our CI includes 1"


@functools.cache
def _profiles() -> tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...]:
    """(name, device, follows, study sections) of every params/*.yaml, read without validation."""
    out = []
    for p in sorted(paths.PARAMS_DIR.glob("*.yaml")):
        try:
            d = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError:
            continue
        out.append((p.stem, d.get("device", ""), tuple(d.get("follows") or ()), tuple(d.get("notebooks") or ())))
    return tuple(out)


def testing_profiles(claim: Claim) -> list[str]:
    """Profiles whose device kind the claim is about and which run its study, those following its seed first."""
    if not claim.study:
        return []
    fits = [(claim.seed not in follows, name) for name, device, follows, sections in _profiles()
            if device == claim.conditions.device and claim.study in sections]
    return [name for _, name in sorted(fits)]


def describe(claim: Claim) -> str:
    """The seed's number and its conditions in one cell."""
    c = claim.conditions
    parts = [claim.number_text or "no number"]
    parts.append(f"{c.hardware}{f', {c.threads} threads' if c.threads else ''}; {c.models_text}; "
                 f"{'/'.join(c.precision)}")
    sizes = []
    if c.batch_sizes:
        sizes.append(f"batch {_sizes(c.batch_sizes)}")
    if c.seq_lens:
        sizes.append(f"seq {_sizes(c.seq_lens)}")
    if c.texts:
        sizes.append(f"{c.texts:,} texts")
    if sizes:
        parts.append(" × ".join(sizes))
    if claim.sizes:
        parts.append(claim.sizes)
    parts.append(c.software)
    return " · ".join(parts) + f" [{claim.where}]"


def _row(claim: Claim, comparable: str, measured: str, verdict: str, judgement: str) -> dict:
    return {"id": claim.id, "seed": claim.seed, "claim": claim.words, "seed's number and conditions": describe(claim),
            "comparable?": comparable, "our measurement (95% CI)": measured, "verdict": verdict,
            "judgement": judgement}


def _measurement_text(m: Measurement, claim: Claim) -> str:
    if m.value is None:
        return m.text
    return f"{fmt_ci(m.value, m.ci_low, m.ci_high, m.unit)} — {claim.scale}: {m.text}"


def assess(claim: Claim, df: pd.DataFrame, tables: dict[str, pd.DataFrame]) -> dict:
    """One claims-table row: the claim judged on one profile's results of its study (`df`, its `tables`)."""
    device = str(df.device.dropna().iloc[0]) if "device" in df and df.device.notna().any() else "cpu"
    if not claim.evaluator:
        return _row(claim, "—", "—", f"not tested: {claim.why_not}", "not tested by this study")
    try:
        m = evaluator(claim)(df, tables, claim, **claim.args)
    except (KeyError, ValueError, IndexError) as e:  # a table without the rows an evaluator needs
        m = NotAnswered(f"the results lack what this needs ({type(e).__name__}: {e})")
    rows = m.rows if isinstance(m, Measurement) else None
    if rows is not None:  # analysis tables lack the run's threads and text count: take them from the results
        rows = rows.assign(**{c: df[c].dropna().iloc[0] for c in ("threads", "n_texts")
                              if c not in rows and c in df and df[c].notna().any()})
    level, diffs = comparability(claim, device, rows)
    comparable = level if level == "same" else f"{level}: " + "; ".join(diffs)
    if level == "not comparable":
        where = testing_profiles(claim)
        kind = "GPU" if claim.conditions.device == "cuda" else "CPU"
        verdict = f"not comparable on this profile ({kind} claim)" + (
            f"; tested by {', '.join(where)}" if where else "; no profile here tests it")
        measured = _measurement_text(m, claim) + " (shown, not judged)" if isinstance(m, Measurement) else m.reason
        return _row(claim, comparable, measured, verdict, "not comparable on this profile")
    if isinstance(m, NotAnswered):
        return _row(claim, "— (nothing measured to compare)", m.reason, f"not answerable here: {m.reason}",
                    "not answerable from these results")
    judgement, verdict = judge(claim, m)
    if level == "partly":
        verdict += " (partly comparable)"
    return _row(claim, comparable, _measurement_text(m, claim), verdict, judgement)


def study_claims(study: str, df: pd.DataFrame, tables: dict[str, pd.DataFrame],
                 claims: tuple[Claim, ...] | None = None) -> pd.DataFrame:
    """Every registry claim the study tests, judged on its results: the rows its `analyse(df).claims` returns."""
    mine = [c for c in (claims if claims is not None else registry()) if c.study == study]
    return pd.DataFrame([assess(c, df, tables) for c in mine], columns=COLUMNS)


def unassessed(claims: list[Claim], judgement: str, why) -> pd.DataFrame:
    """Rows for claims no study judged on a profile: untestable ones (why_not) or whose study did not run."""
    rows = []
    for c in claims:
        if not c.evaluator:
            rows.append(_row(c, "—", "—", f"not tested: {c.why_not}", "not tested by this study"))
        else:
            rows.append(_row(c, "—", "—", why(c), judgement))
    return pd.DataFrame(rows, columns=COLUMNS)


def totals(table: pd.DataFrame) -> dict[str, int]:
    """Counts of the table's judgements: `judged` counts only claims given a verdict (agree / agree in direction
    only / do not agree / inconclusive), and of those `partly` the ones partly comparable; the rest by why not."""
    j = table.judgement.value_counts() if len(table) else pd.Series(dtype=int)
    out = {k: int(j.get(k, 0)) for k in JUDGED + NOT_JUDGED}
    judged = table[table.judgement.isin(JUDGED)] if len(table) else table
    out["judged"] = len(judged)
    out["partly"] = int(judged["comparable?"].str.startswith("partly").sum()) if len(judged) else 0
    out["same"] = out["judged"] - out["partly"]
    out["claims"] = len(table)
    return out


def totals_line(table: pd.DataFrame, where: str = "") -> str:
    """The totals in one sentence, every number counted from the table."""
    t = totals(table)
    return (f"Claims{f' on {where}' if where else ''}: {t['judged']} of {t['claims']} judged "
            f"({t['same']} under the seed's conditions, {t['partly']} partly comparable) — {t['agrees']} agree, "
            f"{t['agrees in direction only']} agree in direction only, {t['does not agree']} do not agree, "
            f"{t['inconclusive']} inconclusive; not judged: {t['not comparable on this profile']} not comparable on "
            f"this profile, {t['not answerable from these results']} not answerable from these results, "
            f"{t['not tested by this study']} not tested by this study (why in the table), "
            f"{t['not run on this profile']} whose study did not run.")


def styled(table: pd.DataFrame):
    """A claims table as a notebook shows it: without the index and the `judgement` column (the verdict says it),
    left-aligned, long cells wrapped."""
    return (table.drop(columns=["judgement"], errors="ignore").style.hide(axis="index")
            .set_properties(**{"text-align": "left", "white-space": "pre-wrap"}))
