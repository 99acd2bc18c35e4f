"""The verdict table: every comparison a study answers, at every shape, decided once and saved (docs/method.md)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.cells import key, number, present, text
from ..core.config import SHAPE, is_aa, is_shared
from ..core.files import write_text_atomic
from ..core.study_registry import studies
from ..core.variants import changes_outputs
from . import calibration, speedups
from .measurement import Measurement
from .speedups import UNDECIDED, Comparison

DECISIONS = (speedups.FASTER, speedups.SLOWER, speedups.EQUAL, UNDECIDED)
# a successor's decision over the deprecated path it replaces, in words (the Answer's line and the claims)
SUCCESSOR_WORDS = {"faster": "beats it", "equal": "matches it", "slower": "falls behind", "undecided": "undecided"}
SUFFIX = ".verdicts.csv"
SHAPE_FIELDS = tuple(c for c in SHAPE if c != "data")  # the shape a Verdict carries (config.SHAPE, its data tag aside)


@dataclass(frozen=True)
class Verdict:
    """One comparison at one shape (see the module's docstring)."""

    study: str
    kind: str  # 'option' (over the study's default), 'declared', or 'lead' (fastest over runner-up)
    comparison: str  # how pages name it: 'torch.compile (default) over eager'
    column: str  # the configuration field the comparison varies: variant, strategy
    candidate: str  # the option's name (option_name: 'ort', 'ort · sorted', 'eager (jax process)')
    baseline: str
    candidate_value: str  # the compared column's values (the variant, the strategy) as the results rows hold them
    baseline_value: str
    workload: str  # the shape less the options, as a reader names it: 'resnet-50 fp32 batch 8 224px'
    shape: str  # the full shape the row compares at (workload, and the options the comparison holds fixed)
    model: str
    dtype: str
    batch_size: float
    seq_len: float
    image_size: float
    strategy: str
    backend: str
    status: str  # 'ok', or why there is no speed-up (the failing side's status)
    message: str
    paired: bool
    item: str  # what one item is: 'text', 'sequence', 'image'
    items_per_call: float
    call: str  # what one call is: 'call of 8 sequences', 'pass over 32 texts'
    ms_per_call: float
    ms_per_item: float
    base_ms_per_call: float
    base_ms_per_item: float
    speedup: float
    ci_low: float  # the interval at the family's false-coverage-adjusted level (`level`), the one decided on
    ci_high: float
    rerun_low: float  # 95% prediction interval of the speed-up a same-host re-run would measure
    rerun_high: float
    detectable: float  # the speed-up (or its inverse, a slow-down) this interval would call decided 80% of the time
    se: float
    df: float
    p: float  # Benjamini–Hochberg adjusted p-value beyond the band, over the study's table
    decision: str  # faster / slower / equal / undecided; '' where nothing was measured
    band: float
    one_time_s: float  # preparation + first call − one steady call of the candidate
    break_even: float  # calls after which the one-time cost is paid back (∞ where it saves nothing)
    break_even_low: float
    break_even_high: float
    parity_ok: object  # True / False / None
    max_abs_diff: float
    label_agreement: float
    warm_one_time_s: float = float("nan")  # one_time_s with an earlier process's compile cache (NaN: none measured)
    level: float = float("nan")  # the confidence level of ci_low–ci_high and detectable: 1 − R·q/m (speedups.judge)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and np.isfinite(self.speedup)

    @property
    def pays_back(self) -> bool:
        return self.decision == "faster" and np.isfinite(self.break_even)


COLUMNS = [f.name for f in fields(Verdict)]


@dataclass(frozen=True)
class VerdictTable:
    """A study's verdicts (one study run), with the band they were decided against."""

    study: str
    rows: tuple[Verdict, ...]

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(v) for v in self.rows], columns=COLUMNS)

    def level(self) -> float:
        """The one confidence level the table's intervals are decided and printed at; NaN where no row has one."""
        levels = {round(v.level, 9) for v in self.rows if np.isfinite(v.level)}
        return levels.pop() if len(levels) == 1 else float("nan")

    def decided(self) -> int:
        """How many verdicts are faster or slower (R of the false-coverage level 1 − R·q/m)."""
        return sum(v.decision in ("faster", "slower") for v in self.rows)

    def options(self) -> list[Verdict]:
        """Every option over the default, per workload."""
        return [v for v in self.rows if v.kind == "option"]

    def lead(self, workload: str) -> Verdict | None:
        """The workload's fastest full-precision option over its runner-up (lead or declared row), or None."""
        rows = [v for v in self.rows if v.workload == workload]
        full = sorted((v for v in rows if v.kind == "option" and v.ok and not changes_outputs(v.candidate)),
                      key=lambda v: v.ms_per_call)
        pair = (full[0].candidate, full[1].candidate) if len(full) > 1 else None
        return next((v for v in rows if v.kind == "lead" or (v.kind == "declared" and (v.candidate, v.baseline) == pair
                                                             and full[1].ms_per_call < full[1].base_ms_per_call)), None)

    def of(self, comparison: str) -> list[Verdict]:
        return [v for v in self.rows if v.comparison == comparison]

    def comparisons(self) -> list[str]:
        return list(dict.fromkeys(v.comparison for v in self.rows))

    def decision(self, candidate_row, baseline_row, options: tuple[str, ...] = ("variant",),
                 kinds: tuple[str, ...] | None = None) -> str:
        """The decision of one row over another among rows of `kinds`, mirrored if held reversed; '' if none."""
        rows = [v for v in self.rows if kinds is None or v.kind in kinds]

        def find(cand, base) -> str | None:
            names, shape = (option_name(cand, options), option_name(base, options)), _shape_of(cand)
            return next((v.decision for v in rows if (v.candidate, v.baseline) == names and _shape_of(v) == shape),
                        None)

        word = find(candidate_row, baseline_row)
        return word if word is not None else MIRROR.get(find(baseline_row, candidate_row) or "", "")


MIRROR = {"faster": "slower", "slower": "faster", "equal": "equal", "undecided": "undecided", "": ""}


def _shape_of(row) -> tuple:
    """The shape fields a Verdict carries (SHAPE_FIELDS) of a Verdict or a row, blanks (None, NaN, NA, '') as None."""
    get = row.get if hasattr(row, "get") else lambda c: getattr(row, c, None)
    return tuple(key(v) for v in (get(c) for c in SHAPE_FIELDS))


# --- what a call and an item are -----------------------------------------------------------------------------------


def items_of(row) -> tuple[float, str, str]:
    """(items per call, the item's name, what a call is) for a results row (a data-set pass, or a batch)."""
    texts = row.get("n_texts") if hasattr(row, "get") else None
    batch = row.get("batch_size")
    if present(texts) and float(texts) > 0:
        n = float(texts)
        return n, "text", f"pass over {n:,.0f} texts"
    n = float(batch) if present(batch) else 1.0
    item = "image" if present(row.get("image_size")) else "sequence"
    return n, item, f"call of {n:,.0f} {item}{'s' if n != 1 else ''}"


def option_name(row, options: tuple[str, ...]) -> str:
    """An option as pages name it: 'ort-int8', 'eager · sorted', 'keras-jax-jit', 'eager (jax process)'."""
    parts = [str(row[options[0]])]
    parts += [str(row[o]) for o in options[1:] if o != "backend" and o in row and present(row[o])]
    name = " · ".join(parts)
    backend = row.get("backend") if "backend" in options else None
    if present(backend) and str(backend) not in name:
        name += f" ({backend} process)"
    return name


def workload_columns(df: pd.DataFrame, options: tuple[str, ...]) -> list[str]:
    """The shape columns that tell a study's workloads apart (its shape less its options)."""
    return speedups.shape_columns(df, without=(*options, "data", "task"))


# --- computing -------------------------------------------------------------------------------------------------------


def _keys(rec: dict, column: str, baseline: str, fixed: Iterable[str]) -> tuple[tuple, tuple]:
    """(candidate row's key, baseline row's key) of a pair-table record (shape and variant)."""
    cand = {c: rec.get(c) for c in _KEY}
    base = cand | {column: baseline} | {k: rec.get("baseline_" + k) for k in fixed}
    return tuple(key(cand[c]) for c in _KEY), tuple(key(base[c]) for c in _KEY)


_KEY = (*SHAPE, "variant")


def _judged_pairs(df: pd.DataFrame, options: tuple[str, ...], default: dict,
                  declared: list[Comparison]) -> list[dict]:
    """Every option over the default, then each declared comparison not among them, as records judged as one family."""
    primary = options[0]
    fixed = {k: v for k, v in default.items() if k != primary}
    labels = {(c.column, c.candidate, c.baseline): c.label for c in declared}
    records: dict[tuple, dict] = {}
    values = [v for v in dict.fromkeys(df[primary].dropna()) if not (is_aa(v) or is_shared(v))]  # never options
    if default.get(primary) in values:
        t = speedups.pair_table(df, values, default[primary], column=primary, baseline_where=fixed or None,
                                judged=False)
        for rec in t.to_dict("records"):
            if all(key(rec.get(k)) == key(v) for k, v in default.items()):
                continue  # the default itself
            keys = _keys(rec, primary, default[primary], fixed)
            plain = all(key(rec.get(k)) == key(v) for k, v in fixed.items())
            label = labels.get((primary, rec[primary], default[primary])) if plain else None
            records[keys] = rec | {"kind": "option", "column": primary, "comparison": label or ""}
    for c in declared:
        if c.column not in df or not ((df[c.column] == c.candidate).any() and (df[c.column] == c.baseline).any()):
            continue
        for rec in speedups.pair_table(df, c.candidate, c.baseline, column=c.column, judged=False).to_dict("records"):
            keys = _keys(rec, c.column, c.baseline, ())
            if keys in records:
                records[keys]["comparison"] = c.label
            else:
                records[keys] = rec | {"kind": "declared", "column": c.column, "comparison": c.label}
    records |= _leads(df, options, default, records)
    if not records:
        return []
    table = speedups.judge(pd.DataFrame(list(records.values())), speedups.EQUIVALENCE)
    return [r | {"keys": k} for r, k in zip(table.to_dict("records"), records)]


def _leads(df: pd.DataFrame, options: tuple[str, ...], default: dict, records: dict) -> dict:
    """Per workload, the fastest full-precision option over the runner-up (kind 'lead') where that is not the default."""
    ok = df[(df.status == "ok") & ~df[options[0]].map(lambda v: is_aa(v) or is_shared(v))] if "status" in df else df
    ok = ok[~ok[options[0]].map(changes_outputs)]
    work = workload_columns(ok, options)
    out = {}
    for _, g in ok.groupby(work, dropna=False, sort=False) if work else [(None, ok)]:
        if len(g) < 2:
            continue
        g = g.assign(median_s=[Measurement.of(r).steady_median_s for _, r in g.iterrows()]).sort_values("median_s")
        top, second = g.iloc[0], g.iloc[1]
        if all(key(second.get(k)) == key(v) for k, v in default.items()):
            continue
        keys = (tuple(key(top.get(c)) for c in _KEY), tuple(key(second.get(c)) for c in _KEY))
        if keys in records:
            continue
        out[keys] = {**{c: top.get(c) for c in _KEY}, "candidate": top[options[0]], "baseline": second[options[0]],
                     "status": "ok", "error": "", **speedups.pair_record(second, top), "kind": "lead",
                     "column": options[0], "comparison": ""}
    return out


def for_study(notebook: str, df: pd.DataFrame) -> VerdictTable:
    """`compute` with the registered study's comparisons, options and default (core/study_registry)."""
    study = studies()[notebook]
    return compute(notebook, df, comparisons=study.comparisons, options=study.options, default=dict(study.default))


def unlisted(ci_low: float, ci_high: float, band: float = speedups.EQUIVALENCE) -> str:
    """The rule for a comparison the table does not hold: the one door to it outside stats/."""
    return speedups.verdict(ci_low, ci_high, band)


def direction(lo: float, hi: float) -> str:
    """A pair's direction for `compare`: 'faster', 'slower', or 'unclear' where the CI does not exclude 1."""
    word = speedups.verdict(lo, hi, band=1.0)
    return "unclear" if word == UNDECIDED else word


def decision_at(vt: VerdictTable, candidate: str, baseline: str, row, *, column: str = "variant") -> str:
    """The table's decision of `candidate` over `baseline` (values of `column`) at `row`'s shape; '' where none."""
    want = {c: key(row.get(c) if hasattr(row, "get") else getattr(row, c, None)) for c in SHAPE_FIELDS
            if c not in (column, "data", "task")}
    for v in vt:
        if v.column == column and v.candidate_value == candidate and v.baseline_value == baseline and all(
                key(getattr(v, c)) == want[c] for c in want):
            return v.decision
    return ""


def compute(study_name: str, df: pd.DataFrame, *, comparisons: Iterable[Comparison] = (),
            options: tuple[str, ...] = ("variant",), default: dict | None = None) -> VerdictTable:
    """The study's verdict table from its results `df` (samples included; task 'op' rows left out)."""
    default = dict(default or {"variant": "eager"})
    df = df[df.task != "op"] if "task" in df else df
    if not len(df) or options[0] not in df:
        return VerdictTable(study_name, ())
    records = _judged_pairs(df, options, default, list(comparisons))
    rows_by_key = _rows_by_shape(df)
    shown = workload_columns(df, options)  # complete labels: model, dtype, batch, sequence or image size
    out = []
    for r in records:
        cand, base = (rows_by_key.get(k) for k in r["keys"])
        out.append(_verdict(study_name, r, cand, base, options, shown))
    return VerdictTable(study_name, tuple(out))


def _rows_by_shape(df: pd.DataFrame) -> dict[tuple, dict]:
    """Results rows by their key (shape and variant); an ok row wins over a failed one of the same key."""
    out: dict[tuple, dict] = {}
    for r in df.to_dict("records"):
        k = tuple(key(r.get(c)) for c in _KEY)
        if k not in out or (out[k].get("status") != "ok" and r.get("status") == "ok"):
            out[k] = r
    return out


_SAME = ("speedup", "ci_low", "ci_high", "detectable", "se", "df", "p", "level", "one_time_s", "break_even",
         "break_even_low", "break_even_high", "parity_ok", "max_abs_diff", "label_agreement")  # a pair record's
_OF_ROW = ("model", "dtype", "batch_size", "seq_len", "image_size", "strategy", "backend")  # the candidate row's


def _verdict(study: str, r: dict, cand: dict | None, base: dict | None, options, shown) -> Verdict:
    row = cand or r
    n, item, call = items_of(row)
    name = option_name({**r, r["column"]: r["candidate"]}, options) if cand is None else option_name(cand, options)
    base_name = option_name(base, options) if base is not None else str(r["baseline"])
    ms, base_ms = number(r.get("median_s")) * 1e3, number(r.get("base_median_s")) * 1e3
    if not np.isfinite(ms) and cand is not None and cand.get("status") == "ok":
        ms = number(cand.get("median_s")) * 1e3
    ratio = number(r.get("speedup"))
    lo, hi = calibration.rerun_interval(ratio, number(r.get("se")), number(r.get("df")))
    full = speedups.shape_columns(pd.DataFrame([r]), without=("data", "task"))
    lead = " (fastest over runner-up)" if r["kind"] == "lead" else ""
    return Verdict(
        **{f: _cell(f, r.get(f)) for f in _SAME}, **{f: _cell(f, row.get(f)) for f in _OF_ROW},
        study=study, kind=r["kind"], candidate_value=text(r.get("candidate")), baseline_value=text(r.get("baseline")),
        comparison=r["comparison"] or f"{name} over {base_name}{lead}", column=r["column"], candidate=name,
        baseline=base_name, workload=speedups.shape_label(row, shown) or "the one workload run",
        shape=speedups.shape_label(r, [c for c in full if c != r["column"]]),
        status=text(r.get("status")) or "ok", message=text(r.get("error")),
        paired=bool(r.get("paired")) if np.isfinite(ratio) else False, item=item, items_per_call=n, call=call,
        ms_per_call=ms, ms_per_item=ms / n, base_ms_per_call=base_ms, base_ms_per_item=base_ms / n,
        rerun_low=lo, rerun_high=hi, decision=text(r.get("verdict")) if np.isfinite(ratio) else "",
        band=speedups.EQUIVALENCE,
        warm_one_time_s=Measurement.of(cand).warm_one_time_s if cand is not None else float("nan"))


# --- saving and loading ----------------------------------------------------------------------------------------------


def path_for(results_dir: Path, study: str) -> Path:
    return Path(results_dir) / f"{study}{SUFFIX}"


def save(table: VerdictTable, results_dir: Path) -> Path:
    """Write the table atomically as results/<study>.verdicts.csv."""
    return write_text_atomic(path_for(results_dir, table.study), table.frame().to_csv(index=False))


_BOOL = {"True": True, "False": False, "true": True, "false": False}


def _cell(name: str, v):
    kind = Verdict.__dataclass_fields__[name].type
    if kind == "float":
        return number(v)
    if kind == "bool":
        return _BOOL.get(str(v), bool(v) if present(v) else False)
    if name == "parity_ok":
        return None if not present(v) else _BOOL.get(str(v), bool(v))
    return text(v)


def load(path: Path) -> VerdictTable:
    """A saved verdict table (`save`); an empty one where the file is missing."""
    path = Path(path)
    study = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.stem
    if not path.exists():
        return VerdictTable(study, ())
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    rows = tuple(Verdict(**{c: _cell(c, rec.get(c, "")) for c in COLUMNS}) for rec in frame.to_dict("records"))
    return VerdictTable(study, rows)
