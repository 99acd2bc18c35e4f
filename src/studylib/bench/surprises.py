"""Surprises and their mechanism: where a variant meant to be faster is slower, or two meant to be equal differ.

Each study states what it expects as data (`Study.expectations`: a candidate faster than, or equal to, its
baseline, as values of one configuration column). While a group is measured (sweep.measure_group), each
replicate checks every expectation whose two configurations ran in the group, on the speed-up paired over
that replicate's rounds (variance.speedup). A surprise is

- expected faster, but the whole 95% CI of the speed-up is below 1 (it is slower), or
- expected equal, but the whole CI lies outside the ±5% band (EQUIVALENCE) on one side.

Then one steady-state call of each of the two is profiled, after the timed rounds (so the profiler never
touches a sample): PyTorch runtimes with torch.profiler (CPU activity; CUDA activity on a GPU), ONNX
Runtime with its own session profiler (OnnxRuntime's `Prepared.profile`); TensorFlow is recorded as not
profiled. Each row keeps its call's top operators by self time (`profile_top_ops`: op, self_ms, calls,
self_pct) and what was profiled and why (`profile_note`). `findings` and `html` read them back: one
sentence per surprise, and the two variants' top operators side by side, collapsed under it.
"""

from __future__ import annotations

import dataclasses
import html as _html
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..core import numbers
from ..core.config import FIELDS as CONFIG_FIELDS
from ..machine.profiling import profile_prepared
from ..stats import speedups, stats
from ..stats.measurement import Measurement
from ..stats.speedups import EQUIVALENCE

EXPECTS = ("faster", "equal")


@dataclass(frozen=True)
class Expectation:
    """`candidate` is expected faster than (or equal to) `baseline`: two values of `column`, every other
    configuration field alike. `min_batch` leaves out smaller batches (one text per batch: nothing to sort)."""

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
    """(expectation, baseline config, candidate config) for each expectation whose two configurations (config.Config,
    alike but for the expectation's column) are both among `configs`."""
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
        s, e = self.speedup, self.expectation
        return (f"{e.tag}; replicate {replicate} measured {numbers.fmt(s.ratio, s.ci_low, s.ci_high)} over {s.n} "
                f"paired rounds")


def check(expectations: Iterable[Expectation], configs: Iterable, rows: dict[str, dict]) -> list[Found]:
    """Every expectation whose two configurations ran ok in `rows` (one replicate's rows by config key, with their
    samples and rounds), with the speed-up paired over the replicate's rounds."""
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
    """The configurations to profile, each with why: both sides of every expectation that this replicate's rows (by
    config key, with their samples and rounds) contradict. Checking never costs the group its rows."""
    expectations = tuple(expectations)
    if not expectations:
        return {}
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
    """One steady-state call of a prepared configuration (sweep._Prepared: config, runtime, prepared, call) profiled,
    as its row stores it (`profile_top_ops`, `profile_note`); a profile that fails is a note, never a lost row."""
    try:
        ops, note = profile_prepared(p.runtime, p.prepared, p.call, p.config.device)
    except Exception as exc:  # noqa: BLE001 - a failed profile never drops the measurement
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        ops, note = None, f"not profiled: {type(exc).__name__}: {first}"
    return {"profile_top_ops": ops,
            "profile_note": (f"one steady-state call, after the timed rounds of replicate {replicate}, "
                             f"because {'; '.join(why)}. {note}")[:2000]}


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
    """Each expectation's (baseline, candidate) row pair in `df` (a results frame with samples) where either side
    was profiled for it (a replicate found it contradicted), with the speed-up over all replicates (variance.speedup),
    whether it is a surprise there too, and both rows (measurement.Measurement). Tables stored before profiling
    existed have no profile column: no pairs."""
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
    e, s = pair["expectation"], pair["speedup"]
    ratio = numbers.fmt(s.ratio, s.ci_low, s.ci_high)
    if s.ratio < 1:
        word = "slower than"
    elif s.ratio > 1:
        word = "faster than"
    else:
        word = "as fast as"
    expected = "expected faster" if e.expect == "faster" else f"expected equal within ±{band - 1:.0%}"
    head = f"{e.candidate} is {word} {e.baseline} at {pair['where']}: {ratio}, {expected}"
    if pair["surprising"]:
        return f"**Surprise: {head}**"
    return (f"Flagged in a replicate, not over all of them: {head} — a replicate's own CI contradicted the "
            f"expectation, the CI over every replicate does not")


def findings(df, expectations: Iterable[Expectation], band: float = EQUIVALENCE) -> list[str]:
    """One sentence per profiled pair (a surprise over all replicates, or one flagged in a replicate only), saying
    the top operators of one call of each are shown under it."""
    return _findings(profiled_pairs(df, expectations, band), band)


def _findings(pairs: list[dict], band: float) -> list[str]:
    return [f"{_sentence(p, band)}; one steady-state call of each was profiled: their top operators are side by side "
            f"under the same sentence in Surprises." for p in pairs]


def _cell(v, spec: str) -> str:
    return "" if v is None else format(v, spec)


def _side_rows(m: Measurement) -> list[dict]:
    return list(m.profile_top_ops or ())


def pair_html(pair: dict, band: float = EQUIVALENCE) -> str:
    """One surprise as a collapsed <details>: the finding as its summary, the two calls' top operators side by side."""
    e, base, cand = pair["expectation"], pair["baseline"], pair["candidate"]
    sides = [(getattr(cand, e.column), cand), (getattr(base, e.column), base)]
    ops = [_side_rows(r) for _, r in sides]
    n = max((len(o) for o in ops), default=0)
    esc = _html.escape
    head = "".join(f'<th colspan="3" style="text-align:center">{esc(str(name))}</th>' for name, _ in sides)
    sub = "<th>operator</th><th>self ms</th><th>calls</th>" * 2
    body = []
    for i in range(n):
        cells = [f"<td>{i + 1}</td>"]
        for o in ops:
            op = o[i] if i < len(o) else None
            cells += ([f"<td><code>{esc(str(op['op']))}</code></td>", f"<td>{_cell(op.get('self_ms'), '.3g')}</td>",
                       f"<td>{_cell(op.get('calls'), 'd')}</td>"] if op else ["<td></td>"] * 3)
        body.append(f"<tr>{''.join(cells)}</tr>")
    share = []
    for o in ops:
        pct = sum(op.get("self_pct") or 0 for op in o)
        share.append(f'<td colspan="3">top {len(o)}: {pct:.0f}% of the call\'s self time</td>' if o
                     else '<td colspan="3">no operators recorded</td>')
    body.append(f"<tr><td></td>{''.join(share)}</tr>")
    notes = "".join(f"<li><b>{esc(str(name))}</b>: {esc(str(r.profile_note or 'not profiled in this run'))}</li>"
                    for name, r in sides)
    summary = _sentence(pair, band).replace("**", "")
    return (f'<details class="surprise"><summary>{esc(summary)} — top operators of one call of each</summary>'
            f'<table class="surprise-ops"><thead><tr><th>#</th>{head}</tr><tr><th></th>{sub}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table><ul>{notes}</ul></details>')


def html(df, study, band: float | None = None) -> str:
    """Every profiled pair of a study's results as collapsed <details> blocks (pair_html); a line saying none was
    found otherwise. `study` is the Study (the caller reads it from the registry: its `expectations`); `band` is
    the 'equal' band, by default the results' own (speedups.band), as the study's findings use."""
    if band is None:
        band = speedups.band(df)
    pairs = profiled_pairs(df, study.expectations, band)
    if not pairs:
        expected = "; ".join(e.label for e in study.expectations) or "none stated"
        return (f"<p>No surprise was profiled: no configuration contradicted what this study expects ({_html.escape(expected)}) "
                f"in a replicate's rounds, or the rows were measured before profiling was added.</p>")
    return "\n".join(pair_html(p, band) for p in pairs)


def attach(analysis, df, expectations: Iterable[Expectation], band: float = EQUIVALENCE):
    """A study's Analysis with the surprises added: their findings, and tables["surprises"] (one row per profiled
    pair: where, expectation, speed-up with CI, whether it holds over all replicates)."""
    expectations = tuple(expectations)
    pairs = profiled_pairs(df, expectations, band)
    analysis.tables["surprises"] = pd.DataFrame(
        [{"candidate": p["expectation"].candidate, "baseline": p["expectation"].baseline,
          "expected": p["expectation"].expect, "where": p["where"], "speedup": p["speedup"].ratio,
          "ci_low": p["speedup"].ci_low, "ci_high": p["speedup"].ci_high, "surprise over all replicates": p["surprising"]}
         for p in pairs],
        columns=["candidate", "baseline", "expected", "where", "speedup", "ci_low", "ci_high",
                 "surprise over all replicates"])
    analysis.findings.extend(_findings(pairs, band))
    return analysis
