"""Does a re-run reproduce the reference? `studylib compare REF NEW`; CompareError only on input it cannot compare."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core import numbers, wording
from ..core.config import is_aa, original_of
from ..core.files import read_json
from ..machine.limits import matmul_gflops, peak_bandwidth
from ..stats.calibration import Calibration, calibrate
from ..stats.measurement import Measurement
from ..stats.results import ResultsTable
from ..stats.speedups import speedup
from ..stats.verdicts import direction

WORST_SHOWN = 10
# Fields of env.json compared as they are; the machine's measured limits are compared with PEAK_TOLERANCE.
MACHINE_FIELDS = ("cpu_model", "usable_cpus", "gpu_name", "cuda")
LIMITS = "measured limits: "  # how machine_differences starts the line of the measured limits
PEAK_TOLERANCE = 0.15  # a measured limit more than 15% apart names another machine (or one far busier)


class CompareError(Exception):
    """Input that cannot be compared; the message is one line naming the path and the problem."""


@dataclass
class Run:
    """One results folder: its profile and, per notebook, the newest row of each configuration."""

    folder: Path
    profile: str | None
    notebooks: dict[str, list[Measurement]]
    env: dict[str, Any] = field(default_factory=dict)  # env.json, {} when missing


@dataclass
class RunComparison:
    """The outcome of `compare`: one row per notebook plus an "all" row, and the details behind it."""

    ref: Path
    new: Path
    profile: str | None
    table: pd.DataFrame  # one row per notebook in both runs, then "all"
    reversed_pairs: pd.DataFrame  # pairs whose verdict is faster in one run and slower in the other
    worst_medians: pd.DataFrame  # up to WORST_SHOWN configurations with the largest |NEW/REF - 1|
    medians: pd.DataFrame = field(default_factory=pd.DataFrame)  # every configuration ok in both runs
    pairs: pd.DataFrame = field(default_factory=pd.DataFrame)  # every pair compared, with both verdicts
    only_ref: list[str] = field(default_factory=list)  # notebooks only in REF
    only_new: list[str] = field(default_factory=list)  # notebooks only in NEW
    # what differs between the runs' env.json; None when either run has none (the machines were not compared)
    machine_differences: list[str] | None = None
    calibration: Calibration | None = None  # the differences as a calibrated test (calibration.py)


def results_folder(path: Path) -> Path:
    """The folder holding the `*.jsonl` files: `path` itself, or its `results/` (a profile folder)."""
    path = Path(path)
    if not path.is_dir():
        raise CompareError(f"{path}: no such folder")
    if not any(path.glob("*.jsonl")) and (path / "results").is_dir():
        path = path / "results"
    if not any(path.glob("*.jsonl")):
        raise CompareError(f"{path}: no results (*.jsonl) in this folder")
    return path


def load_run(path: Path) -> Run:
    """A results folder: the newest row per configuration of each `<notebook>.jsonl`, and its profile."""
    folder = results_folder(path)
    notebooks = {p.stem: ResultsTable(p).measurements() for p in sorted(folder.glob("*.jsonl"))}
    env = read_json(folder / "env.json", default={}) or {}
    env = env if isinstance(env, dict) else {}
    profile = env.get("profile")
    if not profile:
        named = [r.profile for rows in notebooks.values() for r in rows if r.profile]
        profile = max(set(named), key=named.count) if named else None
    return Run(folder, profile, notebooks, env)


def _peaks(env: dict[str, Any]) -> dict[str, tuple[float, str]]:
    """The measured limits of env.json's "peaks": {"matmul fp32": (215.0, "GFLOP/s"), "bandwidth": (115.4, "GB/s")}."""
    peaks = env.get("peaks") if isinstance(env.get("peaks"), dict) else {}
    out = {f"matmul {key}": (matmul_gflops(peaks, key), "GFLOP/s") for key in peaks.get("matmul") or {}}
    out["bandwidth"] = (peak_bandwidth(peaks), "GB/s")
    return {k: (float(v), unit) for k, (v, unit) in out.items() if isinstance(v, (int, float)) and v > 0}


def machine_differences(ref_env: dict[str, Any], new_env: dict[str, Any]) -> list[str] | None:
    """One line per difference between two runs' machines; [] when env.json agrees, None when one is missing."""
    if not ref_env or not new_env:
        return None
    out = [f"{key}: {ref_env[key]!r} in REF, {new_env[key]!r} in NEW" for key in MACHINE_FIELDS
           if key in ref_env and key in new_env and ref_env[key] != new_env[key]]
    (t_ref, t_new), (l_ref, l_new) = ((ref_env.get(k) or {}, new_env.get(k) or {}) for k in ("threads", "libraries"))
    p_ref, p_new = _peaks(ref_env), _peaks(new_env)
    changed = {"threads: ": [f"{k} {a} -> {t_new[k]}" for k, a in t_ref.items() if t_new.get(k) not in (None, a)],
               "libraries: ": [f"{k} {a} -> {l_new[k]}" for k, a in l_ref.items() if k in l_new and l_new[k] != a],
               LIMITS: [f"{k} {a:.0f} -> {p_new[k][0]:.0f} {unit}" for k, (a, unit) in p_ref.items()
                        if k in p_new and abs(p_new[k][0] / a - 1) > PEAK_TOLERANCE]}
    return out + [label + ", ".join(lines) for label, lines in changed.items() if lines]


def _inside(value: float | None, lo: float | None, hi: float | None) -> bool:
    """Whether value lies in [lo, hi]; False when any of them is missing."""
    return None not in (value, lo, hi) and bool(lo <= value <= hi)


def _delta_pct(ref: float | None, new: float | None) -> float:
    """100 * (new / ref - 1); NaN when either median is missing or REF's is not positive."""
    return 100 * (new / ref - 1) if ref is not None and new is not None and ref > 0 else float("nan")


def _rerun_ci(row: Measurement) -> tuple:
    """A row's re-run interval, or its within-run one where the profile does not know the shift between runs."""
    if row.rerun_low_s is not None and row.rerun_high_s is not None:
        return row.rerun_low_s, row.rerun_high_s
    return row.ci_low_s, row.ci_high_s


MEDIAN_COLUMNS = ["notebook", "config_key", "ref_median_s", "new_median_s", "delta_pct", "new_in_ref_ci",
                  "ref_in_new_ci", "new_in_ref_run_ci"]


def compare_medians(notebook: str, ref_rows: list[Measurement], new_by_key: dict[str, Measurement]) -> pd.DataFrame:
    """One row per configuration ok in both runs: both medians, the change in %, and the CI checks."""
    # the CI checks: each median in the other's re-run interval (its CI with the shift between whole runs, where the
    # profile knows it), then NEW's in the reference's interval within its own run only (not the shift between runs)
    return pd.DataFrame([[notebook, r.config_key, r.median_s, n.median_s, _delta_pct(r.median_s, n.median_s),
                          _inside(n.median_s, *_rerun_ci(r)), _inside(r.median_s, *_rerun_ci(n)),
                          _inside(n.median_s, r.ci_low_s, r.ci_high_s)]
                         for r in ref_rows for n in [new_by_key[r.config_key]]], columns=MEDIAN_COLUMNS)


SPEEDUP_FIELDS = ("ratio", "ci_low", "ci_high", "se", "df", "verdict")


def _pair(notebook: str, a: Measurement, b: Measurement, new_by_key: dict[str, Measurement], **where) -> dict:
    """b's speed-up over a in each run: ref_ratio … ref_verdict (SPEEDUP_FIELDS), then new_ratio … new_verdict."""
    out = {"notebook": notebook, **where, "a": a.config_key, "b": b.config_key}
    for run, x, y in (("ref", a, b), ("new", new_by_key[a.config_key], new_by_key[b.config_key])):
        s = speedup(x, y)
        out |= dict(zip([f"{run}_{c}" for c in SPEEDUP_FIELDS],
                        (s.ratio, s.ci_low, s.ci_high, s.se, s.df, direction(s.ci_low, s.ci_high))))
    return out


def _columns(*head: str, fields=SPEEDUP_FIELDS) -> list[str]:
    return [*head, "a", "b", *(f"{run}_{c}" for run in ("ref", "new") for c in fields)]


def compare_pairs(notebook: str, ref_rows: list[Measurement], new_by_key: dict[str, Measurement]) -> pd.DataFrame:
    """The speed-up of b over a in each run, for every pair (a before b) of one REF group, A/A copies left out."""
    groups: dict[str, list[Measurement]] = {}
    for r in ref_rows:
        if not is_aa(r.variant):
            groups.setdefault(str(r.group_key), []).append(r)  # a group's variants were timed together
    df = pd.DataFrame([_pair(notebook, a, b, new_by_key, group=g) for g, rows in groups.items()
                       for i, a in enumerate(rows) for b in rows[i + 1:]], columns=_columns("notebook", "group"))
    df["outcome"] = [_outcome(r, n) for r, n in zip(df["ref_verdict"], df["new_verdict"])]
    return df


def _outcome(ref_verdict: str, new_verdict: str) -> str:
    """"same", "reversed" (faster <-> slower) or "decided<->unclear"."""
    if ref_verdict == new_verdict:
        return "same"
    return "decided<->unclear" if "unclear" in (ref_verdict, new_verdict) else "reversed"


def compare_aa(notebook: str, ref_rows: list[Measurement], new_by_key: dict[str, Measurement]) -> pd.DataFrame:
    """Each A/A pair (variant X and X-aa, same REF group and shape): its speed-up and significance in each run."""
    originals: dict[tuple, Measurement] = {}  # by group, shape and variant; an ok row first
    for r in sorted(ref_rows, key=lambda r: not r.ok):
        originals.setdefault((r.group_key, r.shape, r.variant), r)
    df = pd.DataFrame([_pair(notebook, base, r, new_by_key) for r in ref_rows  # in REF's order
                       if is_aa(r.variant) and (base := originals.get((r.group_key, r.shape, original_of(r.variant))))],
                      columns=_columns("notebook", fields=("ratio", "ci_low", "ci_high", "verdict")))
    for run in ("ref", "new"):
        df[f"{run}_significant"] = df[f"{run}_verdict"] != "unclear"
    return df.drop(columns=["ref_verdict", "new_verdict"])


def summarize(notebook: str, medians: pd.DataFrame, pairs: pd.DataFrame, aa: pd.DataFrame) -> dict[str, Any]:
    """One line of the table: counts and shares over one notebook's (or all notebooks') details."""
    n, k = len(medians), len(pairs)
    abs_delta = medians["delta_pct"].abs()
    decided = int((pairs["ref_verdict"] != "unclear").sum())
    shares = {}
    for c in ("new_in_ref_ci", "ref_in_new_ci", "new_in_ref_run_ci"):
        shares.update({c: int(medians[c].sum()), f"{c}_share": medians[c].mean() if n else np.nan})
    return {
        "notebook": notebook,
        "configs": n,
        **shares,
        # the shift common to all medians (geometric mean of NEW / REF): the machine's speed between the runs
        "shift_pct": 100 * float(np.expm1(np.mean(np.log1p(medians["delta_pct"] / 100)))) if n else np.nan,
        "median_abs_delta_pct": abs_delta.median() if n else np.nan,
        "worst_abs_delta_pct": abs_delta.max() if n else np.nan,
        "comparisons": k,
        "same": int((pairs["outcome"] == "same").sum()),
        "reversed": int((pairs["outcome"] == "reversed").sum()),
        "decided_unclear": int((pairs["outcome"] == "decided<->unclear").sum()),
        "ref_decided": decided,
        "ref_decided_share": decided / k if k else np.nan,
        "aa_pairs": len(aa),
        "aa_false_pos_ref": int(aa["ref_significant"].sum()),
        "aa_false_pos_new": int(aa["new_significant"].sum()),
    }


def compare(ref: Path, new: Path) -> RunComparison:
    """Compare the run in `new` with the reference in `ref` (results folders or profile folders)."""
    r, n = load_run(ref), load_run(new)
    if r.profile and n.profile and r.profile != n.profile:
        raise CompareError(f"{r.folder} is profile {r.profile!r} but {n.folder} is profile {n.profile!r}: "
                           f"compare runs of the same profile")
    common = [nb for nb in r.notebooks if nb in n.notebooks]
    if not common:
        raise CompareError(f"{n.folder}: no notebook in common with {r.folder} "
                           f"(REF has {', '.join(r.notebooks)}; NEW has {', '.join(n.notebooks)})")
    parts = {}  # per notebook: its medians, pairs and A/A pairs
    for nb in common:
        new_by_key = {row.config_key: row for row in n.notebooks[nb]}
        both = [row for row in r.notebooks[nb] if row.ok and getattr(new_by_key.get(row.config_key), "ok", False)]
        parts[nb] = [f(nb, both, new_by_key) for f in (compare_medians, compare_pairs, compare_aa)]
    medians, pairs, aa = (pd.concat(list(frames), ignore_index=True) for frames in zip(*parts.values()))
    lines = [summarize(nb, *frames) for nb, frames in parts.items()] + [summarize("all", medians, pairs, aa)]
    by_key = [{(nb, row.config_key): row for nb in common for row in run.notebooks[nb]} for run in (r, n)]
    order = medians["delta_pct"].abs().sort_values(ascending=False, kind="stable").index
    return RunComparison(
        ref=r.folder, new=n.folder, profile=r.profile or n.profile,
        table=pd.DataFrame(lines),
        reversed_pairs=pairs[pairs["outcome"] == "reversed"].reset_index(drop=True),
        worst_medians=medians.loc[order[:WORST_SHOWN]].reset_index(drop=True),
        medians=medians, pairs=pairs,
        only_ref=[nb for nb in r.notebooks if nb not in n.notebooks],
        only_new=[nb for nb in n.notebooks if nb not in r.notebooks],
        machine_differences=machine_differences(r.env, n.env),
        calibration=calibrate(medians, pairs, *by_key),
    )


def _count(k: int, share: float) -> str:
    return "-" if pd.isna(share) else f"{k} ({100 * share:.0f}%)"


def _pct(x: float) -> str:
    return "-" if pd.isna(x) else f"{x:.1f}%"


def _of(k: int, total: int) -> str:
    return "-" if total == 0 else f"{k}/{total}"


def _ratio(ratio: float, lo: float, hi: float, word: str) -> str:
    return f"{ratio:.2f}x [{lo:.2f}, {hi:.2f}] {word}"


def _time(seconds: float | None) -> str:
    if seconds is None or pd.isna(seconds):
        return "-"
    return numbers.fmt_ms(seconds * 1e3) if seconds < 1 else f"{seconds:.3g} s"


def format_comparison(c: RunComparison) -> str:
    """The comparison as plain text: the table (one line per notebook, then "all"), reversed pairs, worst medians."""
    t = c.table
    table = pd.DataFrame({
        "notebook": t["notebook"],
        "configs": t["configs"],
        "new median in ref CI": [_count(k, s) for k, s in zip(t["new_in_ref_ci"], t["new_in_ref_ci_share"])],
        "ref median in new CI": [_count(k, s) for k, s in zip(t["ref_in_new_ci"], t["ref_in_new_ci_share"])],
        "new in ref run-only CI": [_count(k, s) for k, s in zip(t["new_in_ref_run_ci"], t["new_in_ref_run_ci_share"])],
        "shift": [f"{x:+.1f}%" if pd.notna(x) else "-" for x in t["shift_pct"]],
        "median |Δ|": [_pct(x) for x in t["median_abs_delta_pct"]],
        "worst |Δ|": [_pct(x) for x in t["worst_abs_delta_pct"]],
        "comparisons": t["comparisons"],
        "same": t["same"],
        "reversed": t["reversed"],
        "decided↔unclear": t["decided_unclear"],
        "ref decided": [_count(k, s) for k, s in zip(t["ref_decided"], t["ref_decided_share"])],
        "A/A false pos. (ref)": [_of(k, n) for k, n in zip(t["aa_false_pos_ref"], t["aa_pairs"])],
        "A/A false pos. (new)": [_of(k, n) for k, n in zip(t["aa_false_pos_new"], t["aa_pairs"])],
    })
    rp, w = c.reversed_pairs, c.worst_medians
    reversed_ = pd.DataFrame({
        "notebook": rp["notebook"], "a": rp["a"], "b": rp["b"],
        "ref": [_ratio(*x) for x in zip(rp["ref_ratio"], rp["ref_ci_low"], rp["ref_ci_high"], rp["ref_verdict"])],
        "new": [_ratio(*x) for x in zip(rp["new_ratio"], rp["new_ci_low"], rp["new_ci_high"], rp["new_verdict"])],
    }).to_string(index=False) if not rp.empty else ""
    worst = pd.DataFrame({
        "notebook": w["notebook"], "configuration": w["config_key"],
        "ref median": [_time(x) for x in w["ref_median_s"]], "new median": [_time(x) for x in w["new_median_s"]],
        "Δ": [f"{x:+.1f}%" for x in w["delta_pct"]],
        "in ref CI": ["yes" if x else "no" for x in w["new_in_ref_ci"]],
    }).to_string(index=False) if not w.empty else ""
    return wording.block("report/compare.txt.j2", c=c, tolerance=PEAK_TOLERANCE, table=table.to_string(index=False),
                         limits_only=all(d.startswith(LIMITS) for d in c.machine_differences or ()),
                         reversed=reversed_, n_reversed=len(rp), worst=worst, n_worst=len(w), n_medians=len(c.medians))
