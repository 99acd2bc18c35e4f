"""The seeds' claims judged on one profile's results (docs/method.md, "Judging a seed claim")."""

from __future__ import annotations

import inspect
import re

import pandas as pd

from .. import runtimes
from ..core import numbers, wording
from ..core.errors import said
from ..core.study_registry import REGISTRY
from ..machine import gemm
from ..stats import verdicts
from ..workloads import models as model_registry
from .claim_coverage import MIN_BATCHES, SEED_CONDITIONS, _present, coverage, in_scope  # noqa: F401 - claims.<name>
from .claim_judge import JUDGED, ClaimMeasurement, NotAnswered, judge, least_favourable, per_cell  # noqa: F401
from .claim_registry import (  # noqa: F401
    BASES,
    SEEDS,
    Claim,
    ClaimError,
    arithmetic,
    articles,
    cite,
    describe,
    evaluator,
    load,
    load_articles,
    register_evaluators,
    registry,
    testing_profiles,
)

WORDS = "claims/claims.md.j2"

# a claims table's columns; `judgement` is the verdict's category, which the totals count
CLAIM_COLUMNS = ["id", "seed", "claim", "seed's number and conditions", "comparable?", "our measurement (95% CI)",
                 "verdict", "judgement"]
PROXY = "proxy: "  # a proxy's judgement is this prefix and its verdict category, never counted with JUDGED
NOT_ANSWERABLE = ("not comparable on this profile", "not answerable on this profile",
                  "not answerable from these results")
NOT_JUDGED = (*NOT_ANSWERABLE, "not tested by this study", "not run on this profile")


def matching(frame: pd.DataFrame, claim: Claim, one_group: bool = False) -> pd.DataFrame:
    """The rows of the seed's models and precisions where there are any, else all; `one_group`: the first only."""
    c = claim.conditions
    for column, wanted in (("model", c.models), ("dtype", c.precision)):
        if wanted and column in frame and frame[column].isin(wanted).any():
            frame = frame[frame[column].isin(wanted)]
    if one_group and len(frame):
        first = frame.iloc[0]
        frame = frame[(frame.model == first.model) & (frame["dtype"] == first["dtype"])]
    return frame


NAMED_ARGS = ("candidate", "baseline", "variant")  # an evaluator's arguments that name a variant it compares


def not_run(df: pd.DataFrame, claim: Claim, named: dict[str, list[str]]) -> NotAnswered | None:
    """Why a claim cannot be answered: the first of `named` with no ok row, with the reason; None when each ran."""
    if "status" not in df or "variant" not in df:
        return None
    rows = matching(df, claim)  # none at all: nothing of the claim's scope ran, and its evaluator says what is missing
    for name, variants in named.items() if len(rows) else ():
        mine = rows[rows.variant.isin(list(variants))]
        if not (mine.status == "ok").any():
            failed = mine[mine.status != "ok"]
            return NotAnswered(wording.macro(WORDS, "did_not_run", name, failed.status.iloc[0] if len(failed) else "",
                                             str(failed.error.iloc[0])[:200] if len(failed) else ""))
    return None


# ---------------------------------------------------------------------------------------------- assessing


def _row(claim: Claim, comparable: str, measured: str, verdict: str, judgement: str) -> dict:
    return {"id": claim.id, "seed": claim.seed, "claim": claim.words, "seed's number and conditions": describe(claim),
            "comparable?": comparable, "our measurement (95% CI)": measured, "verdict": verdict,
            "judgement": judgement}


def _untested(claim: Claim) -> dict:
    return _row(claim, "—", "—", f"not tested: {claim.why_not}", "not tested by this study")


def _measurement_text(m: ClaimMeasurement, claim: Claim) -> str:
    return m.text if m.value is None else wording.macro(WORDS, "measured", m, claim.scale)


def _number_applies(claim: Claim, rows: pd.DataFrame) -> bool:
    """A mean's number applies to any measurement; a model's or an 'up to' number only to rows of that model."""
    models = _present(rows, "model")
    return claim.number_at == "mean" or bool(models and claim.conditions.models
                                              and set(models) <= set(claim.conditions.models))


def _named(claim: Claim) -> set[str]:
    """Every name among the evaluator's arguments (a variant it compares, or a list of them)."""
    return {v for value in claim.args.values() for v in (value if isinstance(value, list) else [value])
            if isinstance(v, str)}


def successor_note(claim: Claim, rows: pd.DataFrame, vt: verdicts.VerdictTable | None, comparisons=()) -> str:
    """Where the successor of a deprecated path the claim compares beats, matches or trails it; '' where none."""
    named = _named(claim)
    parts = []
    for c in comparisons if vt is not None else ():
        if not c.replaces or c.baseline not in named:
            continue
        mine = [v for v in vt.of(c.label) if v.ok and v.candidate == c.candidate and v.baseline == c.baseline]
        cells = verdicts.VerdictTable(vt.study, tuple(mine)).frame()[["model", "dtype", "batch_size", "seq_len"]]
        for column in cells.columns:
            if column in rows and rows[column].notna().any() and len(cells):
                cells = cells[cells[column].isin(set(rows[column].dropna()))]
        sel = [mine[i] for i in in_scope(cells, claim).index] if len(cells) else []
        if not sel:
            continue
        counts = [(said, n) for w, said in verdicts.SUCCESSOR_WORDS.items() if (n := sum(v.decision == w for v in sel))]
        span = numbers.fmt_span(min(v.speedup for v in sel), max(v.speedup for v in sel))
        parts.append(wording.macro(WORDS, "successor", c.candidate, c.baseline, counts, len(sel), span))
    return "; ".join(parts)


def assess(claim: Claim, df: pd.DataFrame, tables: dict[str, pd.DataFrame], peaks: dict | None = None,
           vt: verdicts.VerdictTable | None = None, comparisons=()) -> dict:
    """One claims-table row: the claim judged on its study's results, with host caveat and successor note."""
    device = str(df.device.dropna().iloc[0]) if "device" in df and df.device.notna().any() else "cpu"
    if not claim.evaluator:
        return _untested(claim)
    named = [v for k, v in claim.args.items() if k in NAMED_ARGS and isinstance(v, str)]
    try:
        m = not_run(df, claim, {v: [v] for v in named}) or evaluator(claim)(df, tables, claim, **claim.args)
    except (KeyError, ValueError, IndexError) as e:  # a table without the rows an evaluator needs
        m = NotAnswered(wording.macro(WORDS, "lacks", said(e)))
    rows = m.rows if isinstance(m, ClaimMeasurement) else df[df.status == "ok"] if "status" in df else df
    # analysis tables lack the run's threads and text count: take them from the results
    rows = in_scope(rows.assign(**{c: df[c].dropna().iloc[0] for c in ("threads", "n_texts")
                                   if c not in rows and c in df and df[c].notna().any()}), claim)
    cov = coverage(claim, device, rows)
    measured = _measurement_text(m, claim) if isinstance(m, ClaimMeasurement) else m.reason
    if cov.level in ("not comparable", "not answerable"):  # judgement: 'not comparable on this profile', …
        verdict = (wording.macro(WORDS, "not_comparable", claim.conditions.device == "cuda", testing_profiles(claim))
                   if cov.level == "not comparable" else wording.macro(WORDS, "not_answerable", cov.absent))
        return _row(claim, cov.text(), measured + (" (shown, not judged)" if isinstance(m, ClaimMeasurement) else ""),
                    verdict, f"{cov.level} on this profile")
    if isinstance(m, NotAnswered):
        return _row(claim, "— (nothing measured to compare)", m.reason, f"not answerable here: {m.reason}",
                    "not answerable from these results")
    use = _number_applies(claim, m.rows)
    judgement, verdict = judge(claim, m, use_number=use)
    if claim.number is not None and not use:
        verdict += " " + wording.macro(WORDS, "other_model", claim.conditions.models_text)
    notes = [host_caveat(claim, device, peaks), successor_note(claim, m.rows if len(m.rows) else rows, vt, comparisons)]
    verdict = " — ".join([verdict, *filter(None, notes)])
    if cov.level == "proxy":
        return _row(claim, cov.text(), measured, f"proxy — {verdict}", PROXY + judgement)
    return _row(claim, cov.text(), measured, verdict, judgement)


def study_claims(study: str, df: pd.DataFrame, tables: dict[str, pd.DataFrame],
                 claims: tuple[Claim, ...] | None = None, peaks: dict | None = None,
                 *, vt: verdicts.VerdictTable) -> pd.DataFrame:
    """Every registry claim the study tests, judged on its results (`assess`): its `analyse(...).claims`."""
    mine = [c for c in (claims if claims is not None else registry()) if c.study == study]
    comparisons = tuple(getattr(REGISTRY.get(study), "comparisons", ()))
    return pd.DataFrame([assess(c, df, tables, peaks, vt, comparisons) for c in mine], columns=CLAIM_COLUMNS)


def unassessed(claims: list[Claim], judgement: str, why) -> pd.DataFrame:
    """Rows for claims no study judged on a profile: untestable ones (why_not) or whose study did not run."""
    rows = [_row(c, "—", "—", why(c), judgement) if c.evaluator else _untested(c) for c in claims]
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def totals(table: pd.DataFrame) -> dict[str, int]:
    """Counts of the table's judgements: by verdict, and `judged`, `proxy`, `not answerable`, `claims`."""
    j = table.judgement.value_counts() if len(table) else pd.Series(dtype=int)
    out = {k: int(j.get(k, 0)) for k in JUDGED + NOT_JUDGED}
    out |= {PROXY + k: int(j.get(PROXY + k, 0)) for k in JUDGED}
    out["judged"] = sum(out[k] for k in JUDGED)
    out["proxy"] = sum(out[PROXY + k] for k in JUDGED)
    out["not answerable"] = sum(out[k] for k in NOT_ANSWERABLE)
    out["claims"] = len(table)
    return out


def totals_line(table: pd.DataFrame, where: str = "") -> str:
    """The totals in one sentence, every number counted from the table."""
    t = totals(table)
    return wording.macro(WORDS, "totals", t, where, SEED_CONDITIONS,
                         [(k, t[PROXY + k]) for k in JUDGED if t[PROXY + k]])


def styled(table: pd.DataFrame):
    """A claims table as a notebook shows it: no index, no `judgement`, left-aligned, wrapped."""
    return (table.drop(columns=["judgement"], errors="ignore").style.hide(axis="index")
            .set_properties(**{"text-align": "left", "white-space": "pre-wrap"}))


# ---------------------------------------------------------------------------------------------- host caveat

# a CPU verdict over eager PyTorch of another library names both fp32 GEMM rates where they differ (docs/method.md)
EAGER = "eager"  # eager PyTorch, the baseline the caveat is about
VARIANT_ARGS = ("candidate", "baseline", "variant", "variants", "over")  # an evaluator's arguments naming variants
NAMES = {"torch": "PyTorch", "tensorflow": "TensorFlow", "onnxruntime": "ONNX Runtime", "jax": "JAX"}


def gemm_library(variant: str) -> str:
    """The library whose GEMM a variant runs on a CPU (the record's runner key)."""
    runtime = runtimes.REGISTRY.get(variant)
    family = getattr(runtime, "family", "eager")
    if family in ("tensorflow", "onnxruntime"):
        return family
    if family == "keras":
        return getattr(runtime, "backend", "tensorflow")
    return "torch"


def _arguments(claim: Claim) -> dict:
    """The claim's evaluator arguments with the evaluator's defaults filled in (worst_gain's `over` is eager)."""
    try:
        signature = inspect.signature(evaluator(claim))
    except ClaimError:
        return dict(claim.args)
    defaults = {k: p.default for k, p in signature.parameters.items() if p.default is not inspect.Parameter.empty}
    return defaults | claim.args


def _single_ops(claim: Claim) -> bool:
    """Whether the claim is about single operations only (micro-ops such as argmax: no GEMM in them)."""
    return {getattr(model_registry.MODELS.get(name), "kind", "unknown") for name in claim.conditions.models} == {"op"}


def compared(claim: Claim) -> list[str]:
    """The libraries other than PyTorch a claim compares with eager PyTorch (its evaluator's arguments); [] if none."""
    if not claim.evaluator or not claim.study or _single_ops(claim):
        return []
    args, named = _arguments(claim), []
    for key in VARIANT_ARGS:
        value = args.get(key)
        named += [value] if isinstance(value, str) else list(value or ())
    if args.get("baseline") is None and args.get("over") is None:
        named.append(EAGER)  # no baseline named: the study's default, eager PyTorch (worst_gain, over_batch1, …)
    if EAGER not in named:
        return []
    return list(dict.fromkeys(lib for lib in map(gemm_library, named) if lib != "torch"))


def host_caveat(claim: Claim, device: str, peaks: dict | None) -> str | None:
    """This host's fp32 GEMM figures where a compared library's differ from PyTorch's beyond GAP_RATIO, else None."""
    if device != "cpu" or not peaks:
        return None
    parts = []
    for lib in compared(claim):
        ratio = gemm.gemm_ratio(peaks, lib, "torch", "fp32")
        if ratio is None or 1 / gemm.GAP_RATIO <= ratio <= gemm.GAP_RATIO:
            continue
        parts.append((NAMES.get(lib, lib), gemm.rate_span(gemm.study_rates(peaks, lib, "fp32")),
                      gemm.rate_span(gemm.study_rates(peaks, "torch", "fp32")), ratio))
    return wording.macro("claims/host.md.j2", "caveat", parts, gemm.GAP_RATIO) if parts else None


# ---------------------------------------------------------------------------------------------- groups

SEED_GROUP, PROXY_GROUP, NOT_HERE = "under the seed's conditions", "proxy", "not answerable here"
GROUPS = (SEED_GROUP, PROXY_GROUP, NOT_HERE)  # how the summary groups a profile's claims
# a reason the results give (NotAnswered) that names what would answer the claim in the reader's words
NEEDS = (("random weights", "a trained model"),)


def group(judgement: str) -> str:
    """A judgement's group: judged under the seed's conditions, a proxy, or not answerable here (every other)."""
    return SEED_GROUP if judgement in JUDGED else PROXY_GROUP if str(judgement).startswith(PROXY) else NOT_HERE


def _absent(verdict: str) -> list[str]:
    """'batch 64', 'XLNet and XLM' from a 'not answerable on this profile: batch: seed 32, 64, here 32' verdict."""
    listed = verdict.split(": ", 1)[1] if ": " in verdict else ""
    out = []
    for label, seed, here in re.findall(r"(\w+): seed (.+?), (?:here (.+?)|none measured here)(?:; |$)", listed):
        if label in ("batch", "sequence"):
            missing = [x for x in seed.split(", ") if x not in here.split(", ")]
            out.append(f"{label} {', '.join(missing or [seed])}")
        else:
            out.append(seed)
    return out


def would_answer(claim: Claim | None, judgement: str, verdict: str) -> str:
    """What would answer a claim not answerable here (a GPU, a size, a model, …); '' for a judged or proxy claim."""
    if group(judgement) != NOT_HERE:
        return ""
    if judgement == "not comparable on this profile":  # assess: '… (GPU claim); tested by gpu-t4, …'
        kind = "a GPU" if "(GPU claim)" in verdict else "a CPU"
        where = verdict.split("tested by ", 1)[1] if "tested by " in verdict else ""
        return kind + (f" (profiles {where})" if where else "")
    if judgement == "not answerable on this profile":
        absent = _absent(verdict)
        return wording.macro(WORDS, "would", "run", "; ".join(absent)) if absent else verdict
    if judgement == "not answerable from these results":
        reason = verdict.split(": ", 1)[-1]
        need = next((n for word, n in NEEDS if word in reason), None)
        return f"{need} ({reason})" if need else wording.macro(WORDS, "would", "gap", reason)
    if judgement == "not tested by this study" and claim is not None and claim.why_not:
        return wording.macro(WORDS, "would", "setup", claim.why_not)
    if judgement == "not run on this profile" and claim is not None and claim.study:
        return wording.macro(WORDS, "would", "study", claim.study[:2])
    return verdict
