"""The seeds' claims judged on one profile's results (the registry itself: claim_registry.py and claims.yaml).

Each claim names the study that tests it and an evaluator: a function of that study's module which turns the
study's results (and the tables its `analyse` computed) into our measurement — a ratio with its 95% CI, on the
scale of the seed's number — or says, computed from the data, why the data cannot answer it. A claim no study
can test carries `why_not` instead.

Judging a claim on one profile, in three steps (and a fourth for the summary):

1. **Coverage** (`coverage`): the claim's conditions (models, precision, batch and sequence sizes, text count,
   device, threads, framework mode) against the rows our measurement used. A claim about one device kind is
   *not comparable* on a profile of the other. Where a *defining* condition is absent (the model or the batch
   size the claim is about: no row of it) the claim is *not answerable* on this profile. Otherwise each
   condition holds, is substituted (another model, size or precision), or the seed's sizes are partly lacking;
   any substitution or lacking size makes the verdict a **proxy**. Hardware, threads and software versions are
   never counted as substitutions: no profile has the seeds' machines or pins their 2019–2023 versions, so a
   verdict without other differences is "under the seed's conditions (except hardware, threads and versions)".
   Nor are a claim's caveats (a fixed difference such as "tf.function here, TF 1.x graphs in the seed": shown),
   sizes the seed has no result for itself (`seed_lacks`, sequences beyond the models' positions) or a text count
   other than the seed's where the run has a few batches of its largest batch (claim_coverage.py). A claim about
   part of a grid (`scope`) is compared, and judged, on that part only (`in_scope`).
2. **Verdict** (`judge`), on the one rule of speedups.verdict (CI wholly above the band: faster; wholly below:
   slower; inside: equal; else unclear), in this order: (a) the seed's number inside our CI, with the CI not
   reaching past the band on the other side → **agrees (number)**; (b) a magnitude word (显著 significant, 得多
   much, …) sets the smallest ratio the claim holds at (`magnitude.at_least`, its reason in the registry): the
   whole CI beyond it → agrees (direction), the effect wholly short of it → does not agree, else inconclusive;
   (c) the claimed direction → **agrees (direction)** (the seed's number, where given, outside our CI);
   the other direction → does not agree; equal within the band → does not agree (equal within noise);
   else inconclusive. Before (b): the seed's number beyond our CI in the claimed direction (our effect
   smaller) with the CI decided that way or undecided (not reversed, not equal within noise) → **does not
   agree (number)**, counted among the judged. A model's or an "up to" number
   (`number_at`) is compared only where the measurement is on that model; elsewhere only the direction is
   judged. A claimed equality: CI inside the wider of the seed's tolerance and the A/A band → agrees (number
   where the seed gives a tolerance, else direction). Per-size cells are never averaged across directions
   (`per_cell`: decided faster at some sizes and slower at others → does not agree, each direction named). Every
   verdict sentence says what our CI shows (claim_judge.py); a CPU verdict over eager PyTorch of another library
   names the host's GEMM figures where they differ by more than 1.3× (claim_host.py); a claim about a deprecated
   path (TorchScript, the TorchScript-based ONNX export, torch.ao int8) says where its successor beats, matches or
   falls behind it at the claim's shapes (`successor_note`, from the study's verdict table).
3. **Totals** (`totals`): claims judged under the seed's conditions (except hardware) are counted by verdict; a
   proxy, a claim not answerable here (device or defining condition absent, or the results lack what it
   needs) and a claim not tested are counted apart, never among agree / disagree.
4. **Groups** (`group`, `would_answer`): the summary's under the seed's conditions / proxy / not answerable here,
   the last with what would answer each claim (a GPU, a size, a trained model), from its row's coverage and
   the registry's why_not.

Batch "small"/"large" is defined once per claim, from the seed's own sizes, in its `sizes` note.
"""

from __future__ import annotations

import re

import pandas as pd

from ..core import numbers
from ..core.study_registry import REGISTRY
from ..stats import verdicts
from .claim_coverage import (  # noqa: F401 - claims.<name> is how studies and tests reach them
    MIN_BATCHES,
    SEED_CONDITIONS,
    Coverage,
    _present,
    comparability,
    coverage,
    in_scope,
)
from .claim_host import host_caveat
from .claim_judge import (  # noqa: F401
    AGREES_DIRECTION,
    AGREES_NUMBER,
    DISAGREES,
    DISAGREES_NUMBER,
    JUDGED,
    ClaimMeasurement,
    NotAnswered,
    judge,
    least_favourable,
    per_cell,
)
from .claim_registry import (  # noqa: F401
    BASES,
    DEFINING,
    REGISTRY_FILE,
    SEEDS,
    Article,
    Claim,
    ClaimError,
    Conditions,
    Magnitude,
    arithmetic,
    articles,
    cite,
    describe,
    evaluator,
    load,
    load_articles,
    register_evaluators,
    registry,
    sizes_text,
    testing_profiles,
)

# A claims table's columns (study_claims builds them from the registry of seed claims): the claim, the seed's
# number and conditions, the coverage of those conditions on this profile, our measurement with its CI, the
# verdict, and the verdict's category (`judgement`, which the totals count).
CLAIM_COLUMNS = ["id", "seed", "claim", "seed's number and conditions", "comparable?", "our measurement (95% CI)",
                 "verdict", "judgement"]
COLUMNS = CLAIM_COLUMNS  # every claims table's columns, a study's and the summary's
PROXY = "proxy: "  # a proxy's judgement is this prefix and its verdict category, never counted with JUDGED
NOT_ANSWERABLE = ("not comparable on this profile", "not answerable on this profile",
                  "not answerable from these results")
NOT_JUDGED = (*NOT_ANSWERABLE, "not tested by this study", "not run on this profile")


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


NAMED_ARGS = ("candidate", "baseline", "variant")  # an evaluator's arguments that name a variant it compares


def not_run(df: pd.DataFrame, claim: Claim, named: dict[str, list[str]]) -> NotAnswered | None:
    """Why a claim cannot be answered: the first of `named` (what it names → the variants standing for it) with no ok
    row among the claim's rows, with its rows' reason; None when each ran (never an answer with one side missing)."""
    if "status" not in df or "variant" not in df:
        return None
    rows = matching(df, claim)  # none at all: nothing of the claim's scope ran, and its evaluator says what is missing
    for name, variants in named.items() if len(rows) else ():
        mine = rows[rows.variant.isin(list(variants))]
        if not (mine.status == "ok").any():
            failed = mine[mine.status != "ok"]
            why = f" ({failed.status.iloc[0]}: {str(failed.error.iloc[0])[:200]})" if len(failed) else " (no rows)"
            return NotAnswered(f"{name} did not run{why}")
    return None


# ---------------------------------------------------------------------------------------------- assessing


def _row(claim: Claim, comparable: str, measured: str, verdict: str, judgement: str) -> dict:
    return {"id": claim.id, "seed": claim.seed, "claim": claim.words, "seed's number and conditions": describe(claim),
            "comparable?": comparable, "our measurement (95% CI)": measured, "verdict": verdict,
            "judgement": judgement}


def _measurement_text(m: ClaimMeasurement, claim: Claim) -> str:
    if m.value is None:
        return m.text
    return f"{numbers.fmt(m.value, m.ci_low, m.ci_high, unit=m.unit)} — {claim.scale}: {m.text}"


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
    """Where the successor of a deprecated path the claim names (a study comparison with `replaces` whose baseline
    the claim's evaluator compares: TorchScript, the TorchScript-based ONNX export, torch.ao int8) beats, matches or
    falls behind it, at the claim's shapes: the verdict table's decisions at the models, precisions and sizes of
    `rows` (what the claim was judged on) within the claim's scope. '' where the claim names no deprecated path."""
    named = _named(claim)
    parts = []
    for c in comparisons if vt is not None else ():
        if not c.replaces or c.baseline not in named:
            continue
        mine = [v for v in vt.of(c.label) if v.ok and v.candidate == c.candidate and v.baseline == c.baseline]
        cells = pd.DataFrame({"model": [v.model for v in mine], "dtype": [v.dtype for v in mine],
                              "batch_size": [v.batch_size for v in mine], "seq_len": [v.seq_len for v in mine]})
        for column in cells.columns:
            if column in rows and rows[column].notna().any() and len(cells):
                cells = cells[cells[column].isin(set(rows[column].dropna()))]
        sel = [mine[i] for i in in_scope(cells, claim).index] if len(cells) else []
        if not sel:
            continue
        counts = [f"{said} at {n}" for w, said in verdicts.SUCCESSOR_WORDS.items()
                  if (n := sum(v.decision == w for v in sel))]
        span = numbers.fmt_span(min(v.speedup for v in sel), max(v.speedup for v in sel))
        parts.append(f"its successor {c.candidate} against {c.baseline} at these shapes: {', '.join(counts)} of "
                     f"{len(sel)} ({span})")
    return "; ".join(parts)


def assess(claim: Claim, df: pd.DataFrame, tables: dict[str, pd.DataFrame], peaks: dict | None = None,
           vt: verdicts.VerdictTable | None = None, comparisons=()) -> dict:
    """One claims-table row: the claim judged on one profile's results of its study (`df`, its `tables`); `peaks`,
    the machine's limits (StudyRun.peaks), give a CPU verdict over eager PyTorch its host caveat (claim_host); the
    study's verdict table `vt` and `comparisons`, the successor of a deprecated path the claim names
    (successor_note)."""
    device = str(df.device.dropna().iloc[0]) if "device" in df and df.device.notna().any() else "cpu"
    if not claim.evaluator:
        return _row(claim, "—", "—", f"not tested: {claim.why_not}", "not tested by this study")
    named = [v for k, v in claim.args.items() if k in NAMED_ARGS and isinstance(v, str)]
    try:
        m = not_run(df, claim, {v: [v] for v in named}) or evaluator(claim)(df, tables, claim, **claim.args)
    except (KeyError, ValueError, IndexError) as e:  # a table without the rows an evaluator needs
        m = NotAnswered(f"the results lack what this needs ({type(e).__name__}: {e})")
    rows = m.rows if isinstance(m, ClaimMeasurement) else df[df.status == "ok"] if "status" in df else df
    # analysis tables lack the run's threads and text count: take them from the results
    rows = in_scope(rows.assign(**{c: df[c].dropna().iloc[0] for c in ("threads", "n_texts")
                                   if c not in rows and c in df and df[c].notna().any()}), claim)
    cov = coverage(claim, device, rows)
    measured = _measurement_text(m, claim) if isinstance(m, ClaimMeasurement) else m.reason
    if cov.level == "not comparable":
        where = testing_profiles(claim)
        kind = "GPU" if claim.conditions.device == "cuda" else "CPU"
        verdict = f"not comparable on this profile ({kind} claim)" + (
            f"; tested by {', '.join(where)}" if where else "; no profile here tests it")
        return _row(claim, cov.text(), measured + (" (shown, not judged)" if isinstance(m, ClaimMeasurement) else ""),
                    verdict, "not comparable on this profile")
    if cov.level == "not answerable":
        return _row(claim, cov.text(), measured + (" (shown, not judged)" if isinstance(m, ClaimMeasurement) else ""),
                    f"not answerable on this profile: {'; '.join(cov.absent)}", "not answerable on this profile")
    if isinstance(m, NotAnswered):
        return _row(claim, "— (nothing measured to compare)", m.reason, f"not answerable here: {m.reason}",
                    "not answerable from these results")
    use = _number_applies(claim, m.rows)
    judgement, verdict = judge(claim, m, use_number=use)
    if claim.number is not None and not use:
        verdict += f" (the seed's number is {claim.conditions.models_text}'s: not compared on other models)"
    host = host_caveat(claim, device, peaks)
    verdict += f" — {host}" if host else ""
    successor = successor_note(claim, m.rows if len(m.rows) else rows, vt, comparisons)
    verdict += f" — {successor}" if successor else ""
    if cov.level == "proxy":
        return _row(claim, cov.text(), measured, f"proxy — {verdict}", PROXY + judgement)
    return _row(claim, cov.text(), measured, verdict, judgement)


def study_claims(study: str, df: pd.DataFrame, tables: dict[str, pd.DataFrame],
                 claims: tuple[Claim, ...] | None = None, peaks: dict | None = None,
                 *, vt: verdicts.VerdictTable) -> pd.DataFrame:
    """Every registry claim the study tests, judged on its results: the rows its `analyse(df, peaks, vt=...).claims`
    returns (`peaks`: the machine's limits, for the host caveat; `vt`, the run's verdict table, for a claim that names
    a path a successor replaces)."""
    mine = [c for c in (claims if claims is not None else registry()) if c.study == study]
    comparisons = tuple(getattr(REGISTRY.get(study), "comparisons", ()))
    return pd.DataFrame([assess(c, df, tables, peaks, vt, comparisons) for c in mine], columns=COLUMNS)


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
    """Counts of the table's judgements: `judged` counts only claims judged under the seed's conditions (except
    hardware), by verdict; `proxy` those judged on substitutes (by verdict under 'proxy: …'); `not answerable`
    the device or a defining condition absent or the results lacking; `not tested` and `not run` the rest."""
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
    p = "; ".join(f"{t[PROXY + k]} {k}" for k in JUDGED if t[PROXY + k])
    return (f"Claims{f' on {where}' if where else ''}: {t['claims']} — {t['judged']} judged under {SEED_CONDITIONS}: "
            f"{t[AGREES_NUMBER]} agree (number), {t[AGREES_DIRECTION]} agree (direction), {t[DISAGREES]} do "
            f"not agree, {t[DISAGREES_NUMBER]} do not agree (number), {t['inconclusive']} inconclusive; "
            f"{t['proxy']} proxy verdicts on substituted models or sizes "
            f"(not counted as agreeing or not{f': {p}' if p else ''}); {t['not answerable']} not answerable here "
            f"({t['not comparable on this profile']} for the other device, {t['not answerable on this profile']} "
            f"without a defining model or size, {t['not answerable from these results']} the results lack what they "
            f"need); {t['not tested by this study']} not tested (why in the table); {t['not run on this profile']} "
            f"whose study did not run.")


def styled(table: pd.DataFrame):
    """A claims table as a notebook shows it: without the index and the `judgement` column (the verdict says it),
    left-aligned, long cells wrapped."""
    return (table.drop(columns=["judgement"], errors="ignore").style.hide(axis="index")
            .set_properties(**{"text-align": "left", "white-space": "pre-wrap"}))


# ---------------------------------------------------------------------------------------------- groups

SEED_GROUP, PROXY_GROUP, NOT_HERE = "under the seed's conditions", "proxy", "not answerable here"
GROUPS = (SEED_GROUP, PROXY_GROUP, NOT_HERE)  # how the summary groups a profile's claims
# a reason the results give (NotAnswered) that names what would answer the claim in the reader's words
NEEDS = (("random weights", "a trained model"),)


def group(judgement: str) -> str:
    """A judgement's group: judged under the seed's conditions, a proxy, or not answerable here (every other)."""
    return SEED_GROUP if judgement in JUDGED else PROXY_GROUP if str(judgement).startswith(PROXY) else NOT_HERE


def _absent(verdict: str) -> list[str]:
    """'batch 64', 'XLNet and XLM' from a 'not answerable on this profile: batch: seed 32, 64, here 32' verdict (the
    absent conditions `assess` lists from the coverage): the seed's sizes not measured, or the seed's models."""
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
    """What would answer a claim not answerable here, from the row's coverage (the device kind, the absent
    defining sizes or models), the results' reason or the registry's why_not; '' for a judged or proxy claim."""
    if group(judgement) != NOT_HERE:
        return ""
    if judgement == "not comparable on this profile":  # assess: '… (GPU claim); tested by gpu-t4, …'
        kind = "a GPU" if "(GPU claim)" in verdict else "a CPU"
        where = verdict.split("tested by ", 1)[1] if "tested by " in verdict else ""
        return kind + (f" (profiles {where})" if where else "")
    if judgement == "not answerable on this profile":
        absent = _absent(verdict)
        return f"a run with {'; '.join(absent)}" if absent else verdict
    if judgement == "not answerable from these results":
        reason = verdict.split(": ", 1)[-1]
        need = next((n for word, n in NEEDS if word in reason), None)
        return f"{need} ({reason})" if need else f"results without this gap: {reason}"
    if judgement == "not tested by this study" and claim is not None and claim.why_not:
        return f"a set-up no study here has: {claim.why_not}"
    if judgement == "not run on this profile" and claim is not None and claim.study:
        return f"a run of study {claim.study[:2]} on this profile"
    return verdict
