"""The seeds' claims judged on one profile's results (the registry itself: claim_registry.py and claims.yaml).

Each claim names the study that tests it and an evaluator: a function of that study's module which turns the
study's results (and the tables its `analyse` computed) into our measurement — a ratio with its 95% CI, on the
scale of the seed's number — or says, computed from the data, why the data cannot answer it. A claim no study
can test carries `why_not` instead.

Judging a claim on one profile, in three steps:

1. **Coverage** (`coverage`): the claim's conditions (models, precision, batch and sequence sizes, text count,
   device, threads, framework mode) against the rows our measurement used. A claim about one device kind is
   *not comparable* on a profile of the other. Where a *defining* condition is absent (the model or the batch
   size the claim is about: no row of it) the claim is *not answerable* on this profile. Otherwise each
   condition holds, is substituted (another model, size or precision; a fixed caveat such as "tf.function here,
   TF 1.x graphs in the seed"), or the seed's sizes are partly lacking; any substitution or lacking size makes
   the verdict a **proxy**. Hardware, threads and software versions are never counted as substitutions: no
   profile has the seeds' machines or pins their 2019–2023 versions, so a verdict without other differences is
   "under the seed's conditions (except hardware, threads and versions)".
2. **Verdict** (`judge`), on the one rule of speedups.verdict (CI wholly above the band: faster; wholly below:
   slower; inside: equal; else unclear), in this order: (a) the seed's number inside our CI, with the CI not
   reaching past the band on the other side → **agrees (number)**; (b) a magnitude word (显著 significant, 得多
   much, …) sets the smallest ratio the claim holds at (`magnitude.at_least`, its reason in the registry): the
   whole CI beyond it → agrees (direction), the effect wholly short of it → does not agree, else inconclusive;
   (c) the claimed direction → **agrees (direction)** (the seed's number, where given, outside our CI);
   the other direction → does not agree; equal within the band → does not agree (equal within noise);
   else inconclusive. A model's or an "up to" number (`number_at`) is compared only where the measurement is
   on that model; elsewhere only the direction is judged. A claimed equality: CI inside the wider of the
   seed's tolerance and the A/A band → agrees (number where the seed gives a tolerance, else direction).
3. **Totals** (`totals`): claims judged under the seed's conditions (except hardware) are counted by verdict; a
   proxy, a claim not answerable here (device or defining condition absent, or the results lack what it
   needs) and a claim not tested are counted apart, never among agree / disagree.

Batch "small"/"large" is defined once per claim, from the seed's own sizes, in its `sizes` note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..core.speedups import EQUIVALENCE, verdict
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
AGREES_NUMBER, AGREES_DIRECTION = "agrees (number)", "agrees (direction)"
JUDGED = (AGREES_NUMBER, AGREES_DIRECTION, "does not agree", "inconclusive")
PROXY = "proxy: "  # a proxy's judgement is this prefix and its verdict category, never counted with JUDGED
NOT_ANSWERABLE = ("not comparable on this profile", "not answerable on this profile",
                  "not answerable from these results")
NOT_JUDGED = (*NOT_ANSWERABLE, "not tested by this study", "not run on this profile")
SEED_CONDITIONS = "the seed's conditions (except hardware, threads and versions)"


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


def fmt_ci(value: float, lo: float, hi: float, unit: str = "×") -> str:
    """'1.23× (95% CI 1.20–1.26×)'."""
    return f"{value:.3g}{unit} (95% CI {lo:.3g}–{hi:.3g}{unit})"


# ---------------------------------------------------------------------------------------------- judging


def _present(rows: pd.DataFrame, column: str) -> list:
    return sorted({x for x in rows[column].dropna()}) if column in rows and len(rows) else []


@dataclass(frozen=True)
class Coverage:
    """How far a profile's rows cover a claim's conditions: `level` is 'seed' (all hold but hardware, threads
    and versions), 'proxy' (something substituted or lacking), 'not answerable' (a defining condition absent)
    or 'not comparable' (the other device kind); the conditions that hold, those substituted, the seed's sizes
    we lack, the defining ones absent, and notes that change no level (hardware, threads)."""

    level: str
    holds: list[str] = field(default_factory=list)
    substituted: list[str] = field(default_factory=list)
    lacking: list[str] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        head = {"seed": f"under {SEED_CONDITIONS}", "proxy": "proxy", "not answerable": "not answerable",
                "not comparable": "not comparable"}[self.level]
        parts = [(f"absent: {'; '.join(self.absent)}", self.absent), (f"holds: {'; '.join(self.holds)}", self.holds),
                 (f"substituted: {'; '.join(self.substituted)}", self.substituted),
                 (f"seed's sizes lacking here: {'; '.join(self.lacking)}", self.lacking),
                 (f"not compared: {'; '.join(self.notes)}", self.notes)]
        return head + "".join(f" — {t}" for t, present in parts if present)


_LABELS = {"models": "model", "precision": "precision", "batch_sizes": "batch", "seq_lens": "sequence"}
_COLUMNS = {"models": "model", "precision": "dtype", "batch_sizes": "batch_size", "seq_lens": "seq_len"}


def coverage(claim: Claim, device: str, rows: pd.DataFrame | None = None) -> Coverage:
    """The claim's conditions on a profile of `device`, against the results rows our measurement used (without
    them, only the device, the defining conditions and the claim's caveats are compared)."""
    c = claim.conditions
    if c.device != "any" and c.device != device:
        return Coverage("not comparable", absent=[f"device: seed {c.hardware}, here {device}"])
    rows = rows if rows is not None else pd.DataFrame()
    holds, subs, lacking, absent, notes = [], [], [], [], [f"hardware: seed {c.hardware}, here {device}"]
    threads = _present(rows, "threads")
    if c.threads and threads and threads != [c.threads]:
        notes.append(f"threads: seed {c.threads}, here {sizes_text(threads)}")
    for key in DEFINING:
        seed, here = getattr(c, key), _present(rows, _COLUMNS[key])
        label = _LABELS[key]
        show = sizes_text if key in ("batch_sizes", "seq_lens") else (lambda v: ", ".join(map(str, v)))
        seed_text = c.models_text if key == "models" else show(seed)
        if not seed:
            continue
        if not here:
            (absent if key in c.defining else lacking).append(f"{label}: seed {seed_text}, none measured here")
            continue
        common, extra, missing = set(here) & set(seed), set(here) - set(seed), set(seed) - set(here)
        if key in c.defining and (missing if key in ("batch_sizes", "seq_lens") else not common):
            absent.append(f"{label}: seed {seed_text}, here {show(here)}")
            continue
        if common:
            holds.append(f"{label} {show(sorted(common))}")
        if extra:
            subs.append(f"{label}: seed {seed_text}, here {show(sorted(extra))}")
        if missing and key in ("batch_sizes", "seq_lens"):
            lacking.append(f"{label} {show(sorted(missing))}")
    texts = _present(rows, "n_texts")
    if c.texts and texts:
        (holds.append(f"{c.texts:,} texts") if texts == [c.texts] else
         subs.append(f"texts: seed {c.texts:,}, here {sizes_text(texts)}"))
    if c.mode:
        notes.append(f"mode: seed {c.mode}")
    subs += claim.caveats
    level = "not answerable" if absent else "proxy" if (subs or lacking) else "seed"
    return Coverage(level, holds, subs, lacking, absent, notes)


def comparability(claim: Claim, device: str, rows: pd.DataFrame | None = None) -> tuple[str, list[str]]:
    """(level, differences): `coverage` as a level and the substituted, lacking and absent conditions."""
    cov = coverage(claim, device, rows)
    return cov.level, cov.absent + cov.substituted + [f"lacking {x}" for x in cov.lacking]


def _beyond(claim: Claim, lo: float, hi: float, at: float) -> str:
    """'yes' when the CI lies wholly beyond ratio `at` in the claimed direction, 'no' when wholly short of it."""
    if claim.expect == "higher":
        return "yes" if lo >= at else "no" if hi < at else "unsure"
    return "yes" if hi <= 1 / at else "no" if lo > 1 / at else "unsure"


def judge(claim: Claim, m: Measurement, use_number: bool = True) -> tuple[str, str]:
    """(judgement, verdict sentence) from our measurement, by the rules in the module docstring; `use_number`
    False where the seed's number belongs to another model or shape than the one measured."""
    if claim.expect == "holds":
        if m.holds is None:
            return "inconclusive", "inconclusive"
        return ((AGREES_DIRECTION, f"{AGREES_DIRECTION}: it holds here") if m.holds
                else ("does not agree", "does not agree: it does not hold here"))
    lo, hi = m.ci_low, m.ci_high
    band = max(m.band, claim.tolerance or 1.0)
    source = "the seed's tolerance" if (claim.tolerance or 0) >= m.band else "the A/A noise band"
    within = f"±{band - 1:.0%} ({source})"
    if claim.expect == "equal":
        kind = AGREES_NUMBER if claim.tolerance else AGREES_DIRECTION
        if 1 / band <= lo and hi <= band:
            return kind, f"{kind}: equal within {within}"
        if lo > band or hi < 1 / band:
            return "does not agree", f"does not agree: differs by more than {within}"
        return "inconclusive", f"inconclusive: the CI crosses the edge of {within}"
    cls = verdict(lo, hi, band)
    want, other = ("faster", "slower") if claim.expect == "higher" else ("slower", "faster")
    n = claim.number if use_number else None
    if n is not None and lo <= n <= hi:  # (a) the seed's number first, before 'equal within noise'
        if (lo >= 1 / band) if claim.expect == "higher" else (hi <= band):
            return AGREES_NUMBER, f"{AGREES_NUMBER}: the seed's {n:.3g} lies inside our CI"
        return "inconclusive", f"inconclusive: our CI holds both the seed's {n:.3g} and the other direction"
    mag = claim.magnitude
    if mag and cls == want:  # (b) a magnitude word's threshold
        at = _beyond(claim, lo, hi, mag.at_least)
        if at == "yes":
            return AGREES_DIRECTION, f"{AGREES_DIRECTION}: beyond the {mag.at_least:.3g}× that «{mag.words}» implies"
        if at == "no":
            return "does not agree", f"does not agree: {want}, but short of the {mag.at_least:.3g}× «{mag.words}» implies"
        return "inconclusive", f"inconclusive: our CI crosses the {mag.at_least:.3g}× that «{mag.words}» implies"
    if cls == want:
        if claim.number is None:
            return AGREES_DIRECTION, f"{AGREES_DIRECTION}: the seed gives no number"
        if n is None:
            return AGREES_DIRECTION, AGREES_DIRECTION
        ours = "smaller" if (hi < n) == (claim.expect == "higher") else "larger"
        return AGREES_DIRECTION, f"{AGREES_DIRECTION}, not the number: our effect is {ours} than the seed's {n:.3g}"
    if cls == other:
        return "does not agree", "does not agree: the direction differs"
    if cls == "equal":
        return "does not agree", f"does not agree: equal within noise ({within}) here"
    return "inconclusive", "inconclusive: our CI includes 1"


def _row(claim: Claim, comparable: str, measured: str, verdict: str, judgement: str) -> dict:
    return {"id": claim.id, "seed": claim.seed, "claim": claim.words, "seed's number and conditions": describe(claim),
            "comparable?": comparable, "our measurement (95% CI)": measured, "verdict": verdict,
            "judgement": judgement}


def _measurement_text(m: Measurement, claim: Claim) -> str:
    if m.value is None:
        return m.text
    return f"{fmt_ci(m.value, m.ci_low, m.ci_high, m.unit)} — {claim.scale}: {m.text}"


def _number_applies(claim: Claim, rows: pd.DataFrame) -> bool:
    """A mean's number applies to any measurement; a model's or an 'up to' number only to rows of that model."""
    models = _present(rows, "model")
    return claim.number_at == "mean" or bool(models and claim.conditions.models
                                              and set(models) <= set(claim.conditions.models))


def assess(claim: Claim, df: pd.DataFrame, tables: dict[str, pd.DataFrame]) -> dict:
    """One claims-table row: the claim judged on one profile's results of its study (`df`, its `tables`)."""
    device = str(df.device.dropna().iloc[0]) if "device" in df and df.device.notna().any() else "cpu"
    if not claim.evaluator:
        return _row(claim, "—", "—", f"not tested: {claim.why_not}", "not tested by this study")
    named = [v for k, v in claim.args.items() if k in NAMED_ARGS and isinstance(v, str)]
    try:
        m = not_run(df, claim, {v: [v] for v in named}) or evaluator(claim)(df, tables, claim, **claim.args)
    except (KeyError, ValueError, IndexError) as e:  # a table without the rows an evaluator needs
        m = NotAnswered(f"the results lack what this needs ({type(e).__name__}: {e})")
    rows = m.rows if isinstance(m, Measurement) else df[df.status == "ok"] if "status" in df else df
    # analysis tables lack the run's threads and text count: take them from the results
    rows = rows.assign(**{c: df[c].dropna().iloc[0] for c in ("threads", "n_texts")
                          if c not in rows and c in df and df[c].notna().any()})
    cov = coverage(claim, device, rows)
    measured = _measurement_text(m, claim) if isinstance(m, Measurement) else m.reason
    if cov.level == "not comparable":
        where = testing_profiles(claim)
        kind = "GPU" if claim.conditions.device == "cuda" else "CPU"
        verdict = f"not comparable on this profile ({kind} claim)" + (
            f"; tested by {', '.join(where)}" if where else "; no profile here tests it")
        return _row(claim, cov.text(), measured + (" (shown, not judged)" if isinstance(m, Measurement) else ""),
                    verdict, "not comparable on this profile")
    if cov.level == "not answerable":
        return _row(claim, cov.text(), measured + (" (shown, not judged)" if isinstance(m, Measurement) else ""),
                    f"not answerable on this profile: {'; '.join(cov.absent)}", "not answerable on this profile")
    if isinstance(m, NotAnswered):
        return _row(claim, "— (nothing measured to compare)", m.reason, f"not answerable here: {m.reason}",
                    "not answerable from these results")
    use = _number_applies(claim, m.rows)
    judgement, verdict = judge(claim, m, use_number=use)
    if claim.number is not None and not use:
        verdict += f" (the seed's number is {claim.conditions.models_text}'s: not compared on other models)"
    if cov.level == "proxy":
        return _row(claim, cov.text(), measured, f"proxy — {verdict}", PROXY + judgement)
    return _row(claim, cov.text(), measured, verdict, judgement)


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
            f"{t[AGREES_NUMBER]} agree (number), {t[AGREES_DIRECTION]} agree (direction), {t['does not agree']} do "
            f"not agree, {t['inconclusive']} inconclusive; {t['proxy']} proxy verdicts on substituted models or sizes "
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
