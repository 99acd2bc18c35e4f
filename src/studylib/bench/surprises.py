"""Surprises: expectations checked per replicate, a contradicted one's sides profiled, read back (docs/method.md)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..core import wording
from ..core.config import FIELDS as CONFIG_FIELDS
from ..core.errors import said
from ..machine.profiling import profile_prepared
from ..stats import speedups, stats
from ..stats.measurement import Measurement
from ..stats.speedups import EQUIVALENCE

EXPECTS = ("faster", "equal")
WORDS = "report/surprises.md.j2"


@dataclass(frozen=True)
class Expectation:
    """`candidate` expected faster than (or equal to) `baseline`, two values of `column`; `min_batch`: smallest batch."""

    candidate: str
    baseline: str
    expect: str = "faster"
    column: str = "variant"
    min_batch: int = 1

    def __post_init__(self):
        if self.expect not in EXPECTS:
            raise ValueError(f"expect must be one of {EXPECTS}, got {self.expect!r}")
        if self.column not in CONFIG_FIELDS:
            raise ValueError(f"column must be a configuration field ({', '.join(CONFIG_FIELDS)}), got {self.column!r}")

    @property
    def label(self) -> str:
        return f"{self.candidate} {'faster than' if self.expect == 'faster' else 'as fast as'} {self.baseline}"

    @property
    def tag(self) -> str:
        """How a profiled row's note names this expectation as the reason (profiled_pairs finds pairs by it)."""
        return f"{self.candidate} over {self.baseline} was expected {self.expect}"


def is_surprise(expect: str, ci_low: float, ci_high: float, band: float = EQUIVALENCE) -> bool:
    """Whether a speed-up CI (candidate over baseline) contradicts the expectation (see the module's docstring)."""
    if not (math.isfinite(ci_low) and math.isfinite(ci_high)):
        return False
    if expect == "faster":
        return ci_high < 1
    return ci_high < 1 / band or ci_low > band


def config_pairs(expectations: Iterable[Expectation], configs: Iterable) -> list[tuple[Expectation, Any, Any]]:
    """(expectation, baseline config, candidate config) for each expectation with both configurations in `configs`."""
    configs = list(configs)
    keys = {c.key for c in configs}
    out = []
    for e in expectations:
        for c in configs:
            if getattr(c, e.column) != e.candidate or c.batch_size < e.min_batch:
                continue
            base = dataclasses.replace(c, **{e.column: e.baseline})
            if base.key in keys:
                out.append((e, base, c))
    return out


@dataclass(frozen=True)
class Found:
    """An expectation checked on one replicate's rounds: the pair's keys and the paired speed-up."""

    expectation: Expectation
    baseline_key: str
    candidate_key: str
    speedup: stats.Speedup

    @property
    def surprising(self) -> bool:
        return is_surprise(self.expectation.expect, self.speedup.ci_low, self.speedup.ci_high)

    def reason(self, replicate: int) -> str:
        return wording.macro(WORDS, "reason", self.expectation.tag, replicate, self.speedup)


def check(expectations: Iterable[Expectation], configs: Iterable, rows: dict[str, dict]) -> list[Found]:
    """Every expectation whose two sides ran ok in `rows` (one replicate's, by key), with its paired speed-up."""
    out = []
    for e, base, cand in config_pairs(expectations, configs):
        if base.key not in rows or cand.key not in rows:
            continue
        b, c = Measurement.of(rows[base.key]), Measurement.of(rows[cand.key])
        if not (b.ok and c.ok and b.samples_s and c.samples_s):
            continue
        s = speedups.speedup(b, c)
        if s.n >= 2 and math.isfinite(s.ratio):
            out.append(Found(e, base.key, cand.key, s))
    return out


# -- profiling a surprise ---------------------------------------------------------------------------------------

def to_profile(expectations: Iterable[Expectation], configs: list, rows: dict[str, dict],
               replicate: int) -> dict[str, list[str]]:
    """Config key → why, for both sides of every expectation this replicate's rows contradict; never raises."""
    reasons: dict[str, list[str]] = {}
    try:
        checked = check(expectations, configs, rows)
    except Exception as exc:  # noqa: BLE001 - checking never costs the group its rows
        print(f"surprises: expectations not checked: {type(exc).__name__}: {exc}")
        return {}
    for found in checked:
        if found.surprising:
            for key in (found.baseline_key, found.candidate_key):
                reasons.setdefault(key, []).append(found.reason(replicate))
    return reasons


def profile(p, why: list[str], replicate: int) -> dict[str, Any]:
    """One steady-state call of a sweep._Prepared profiled into `profile_top_ops`, `profile_note`; never raises."""
    try:
        ops, note = profile_prepared(p.runtime, p.prepared, p.call, p.config.device)
    except Exception as exc:  # noqa: BLE001 - a failed profile never drops the measurement
        ops, note = None, f"not profiled: {said(exc)}"
    return {"profile_top_ops": ops, "profile_note": wording.macro(WORDS, "profiled", replicate, why, note)[:2000]}


# -- reading them back -------------------------------------------------------------------------------------------

def _where(m: Measurement, column: str) -> str:
    parts = [str(m.model), str(m.dtype), f"batch {m.batch_size}"]
    if m.strategy is None:
        if m.seq_len is not None:
            parts.append(f"seq {m.seq_len}")
        if m.image_size is not None:
            parts.append(f"{m.image_size}px")
    else:
        parts.append(f"{m.variant}" if column != "variant" else f"{m.strategy} batches")
    if m.device not in (None, "cpu"):
        parts.append(str(m.device))
    return " ".join(parts)


def _profiled_for(m: Measurement, e: Expectation) -> bool:
    """Whether the row was profiled because of `e` (its note names it: a row can be profiled for another pair)."""
    return isinstance(m.profile_note, str) and e.tag in m.profile_note


def profiled_pairs(df, expectations: Iterable[Expectation], band: float = EQUIVALENCE) -> list[dict]:
    """Each expectation's profiled row pair, with the speed-up over all replicates and whether still surprising."""
    if df is None or not len(df) or "profile_note" not in df:
        return []
    rows = [Measurement.of(r) for r in df.to_dict("records")]
    index = {r.config: r for r in rows}  # the baseline: the candidate's configuration with e.column replaced
    out = []
    for e in expectations:
        for cand in rows:
            if getattr(cand, e.column) != e.candidate or not cand.ok or (cand.batch_size or 0) < e.min_batch:
                continue
            base = index.get(dataclasses.replace(cand.config, **{e.column: e.baseline}))
            if base is None or not base.ok or not (_profiled_for(base, e) or _profiled_for(cand, e)):
                continue
            s = speedups.speedup(base, cand)
            out.append({"expectation": e, "baseline": base, "candidate": cand, "speedup": s,
                        "surprising": is_surprise(e.expect, s.ci_low, s.ci_high, band), "where": _where(cand, e.column)})
    return out


def _sentence(pair: dict, band: float) -> str:
    return wording.macro(WORDS, "sentence", pair["expectation"], pair["speedup"], pair["where"], band,
                         pair["surprising"])


def html(df, study) -> str:
    """Every profiled pair as a collapsed <details> with both calls' top operators, or a line saying none was found."""
    pairs = []
    for p in profiled_pairs(df, study.expectations):
        e = p["expectation"]
        sides = [{"name": str(getattr(r, e.column)), "ops": list(r.profile_top_ops or ()), "note": r.profile_note}
                 for r in (p["candidate"], p["baseline"])]
        for side in sides:
            side["share"] = sum(op.get("self_pct") or 0 for op in side["ops"])
        pairs.append({"summary": _sentence(p, EQUIVALENCE).replace("**", ""), "sides": sides,
                      "n": max(len(side["ops"]) for side in sides)})
    return wording.block("report/surprises.html.j2", pairs=pairs,
                         expected="; ".join(e.label for e in study.expectations) or "none stated")


def attach(analysis, df, expectations: Iterable[Expectation], band: float = EQUIVALENCE):
    """A study's Analysis with the surprises' findings and tables["surprises"] (one row per profiled pair)."""
    pairs = profiled_pairs(df, expectations, band)
    analysis.tables["surprises"] = pd.DataFrame(
        [{"candidate": p["expectation"].candidate, "baseline": p["expectation"].baseline,
          "expected": p["expectation"].expect, "where": p["where"], "speedup": p["speedup"].ratio,
          "ci_low": p["speedup"].ci_low, "ci_high": p["speedup"].ci_high, "surprise over all replicates": p["surprising"]}
         for p in pairs],
        columns=["candidate", "baseline", "expected", "where", "speedup", "ci_low", "ci_high",
                 "surprise over all replicates"])
    analysis.findings.extend(wording.macro(WORDS, "finding", _sentence(p, band)) for p in pairs)
    return analysis
