"""Does a re-run reproduce the reference? `python -m studylib compare REF NEW`.

REF and NEW are two results folders of the same profile (`outputs/cpu/results`, or the profile folder
`outputs/cpu`). For every notebook in both, and only for configurations that are `ok` in both runs:

- medians: how many of NEW's medians fall inside REF's 95% CI (and the other way round), and the
  median and worst |NEW/REF - 1| of the medians;
- verdicts: within each comparison group of REF, every pair of configurations gets a verdict in each run
  (faster / slower when the speed-up's CI excludes 1, else unclear, from `variance.speedup`); counted as
  the same, reversed (faster <-> slower) or decided <-> unclear;
- the A/A control: a variant `X-aa` is a second copy of `X`; the share of A/A pairs whose speed-up CI
  excludes 1 is the false-positive rate of each run;
- the machines: what differs between the two runs' env.json (CPU, GPU, core and thread counts, library
  versions, the measured matmul and memory limits). Across machines the medians are not expected to agree,
  and a verdict may change for a real reason, so the comparison says so before its figures.

Differences are information: `compare` only fails (CompareError) on input it cannot compare. The text the command
prints is compare_text.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

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
    """Read a results folder: the newest row per `config_key` of each `<notebook>.jsonl`.

    The last line of a configuration wins; a torn or unparseable line is ignored (as `ResultsTable` does).
    The profile is env.json's "profile", or else the one named by the rows.
    """
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
    """The measured limits of env.json's "peaks": {"matmul fp32": (215.0, "GFLOP/s"), "bandwidth": (115.4, "GB/s")}:
    PyTorch's square matmul, measured alike by every limits.METHOD (the roof, the best of every library's GEMM,
    exists only from METHOD 2)."""
    peaks = env.get("peaks") if isinstance(env.get("peaks"), dict) else {}
    out = {f"matmul {key}": (matmul_gflops(peaks, key), "GFLOP/s") for key in peaks.get("matmul") or {}}
    out["bandwidth"] = (peak_bandwidth(peaks), "GB/s")
    return {k: (float(v), unit) for k, (v, unit) in out.items() if isinstance(v, (int, float)) and v > 0}


def machine_differences(ref_env: dict[str, Any], new_env: dict[str, Any]) -> list[str] | None:
    """One line per difference between the machines of two runs: [] when env.json agrees, None when one is missing.

    Compared: MACHINE_FIELDS, the threads the runs set, library versions, and the measured limits (matmul
    rate per dtype, memory bandwidth), which differ by more than PEAK_TOLERANCE between different hosts
    even where the CPU's name is the same (a cloud VM's "Intel Xeon Processor" names several generations).
    """
    if not ref_env or not new_env:
        return None
    out = []
    for key in MACHINE_FIELDS:
        if key in ref_env and key in new_env and ref_env[key] != new_env[key]:
            out.append(f"{key}: {ref_env[key]!r} in REF, {new_env[key]!r} in NEW")
    threads = [(k, v, (new_env.get("threads") or {}).get(k)) for k, v in (ref_env.get("threads") or {}).items()]
    changed = [f"{k} {a} -> {b}" for k, a, b in threads if a != b and b is not None]
    if changed:
        out.append("threads: " + ", ".join(changed))
    libs_ref, libs_new = ref_env.get("libraries") or {}, new_env.get("libraries") or {}
    changed = [f"{k} {libs_ref[k]} -> {libs_new[k]}" for k in libs_ref if k in libs_new and libs_ref[k] != libs_new[k]]
    if changed:
        out.append("libraries: " + ", ".join(changed))
    peaks_ref, peaks_new = _peaks(ref_env), _peaks(new_env)
    changed = [f"{k} {peaks_ref[k][0]:.0f} -> {peaks_new[k][0]:.0f} {unit}"
               for k, (_, unit) in peaks_ref.items()
               if k in peaks_new and abs(peaks_new[k][0] / peaks_ref[k][0] - 1) > PEAK_TOLERANCE]
    if changed:
        out.append(LIMITS + ", ".join(changed))
    return out


def group_key(row: Measurement) -> str:
    """The comparison group of a row (sweep.base_row writes it on every row): its variants were timed together."""
    return str(row.group_key)


def _inside(value: float | None, lo: float | None, hi: float | None) -> bool:
    """Whether value lies in [lo, hi]; False when any of them is missing."""
    if value is None or lo is None or hi is None:
        return False
    return bool(lo <= value <= hi)


def _delta_pct(ref: float | None, new: float | None) -> float:
    """100 * (new / ref - 1); NaN when either median is missing or REF's is not positive."""
    if ref is None or new is None or not ref > 0:
        return float("nan")
    return 100 * (new / ref - 1)


def _ok(row: Measurement | None) -> bool:
    return row is not None and row.ok


def _rerun_ci(row: Measurement) -> tuple:
    """A row's re-run interval, or its within-run one where the profile does not know the shift between runs."""
    if row.rerun_low_s is not None and row.rerun_high_s is not None:
        return row.rerun_low_s, row.rerun_high_s
    return row.ci_low_s, row.ci_high_s


def compare_medians(notebook: str, ref_rows: list[Measurement], new_by_key: dict[str, Measurement]) -> pd.DataFrame:
    """One row per configuration ok in both runs: both medians, the change in %, and the CI checks."""
    out = []
    for r in ref_rows:
        n = new_by_key[r.config_key]
        out.append({
            "notebook": notebook,
            "config_key": r.config_key,
            "ref_median_s": r.median_s,
            "new_median_s": n.median_s,
            "delta_pct": _delta_pct(r.median_s, n.median_s),
            # the re-run interval (this run's CI with the shift between whole runs) where the profile knows it
            "new_in_ref_ci": _inside(n.median_s, *_rerun_ci(r)),
            "ref_in_new_ci": _inside(r.median_s, *_rerun_ci(n)),
            # the reference's interval within its own run only (its processes, not the shift between runs)
            "new_in_ref_run_ci": _inside(n.median_s, r.ci_low_s, r.ci_high_s),
        })
    return pd.DataFrame(out, columns=["notebook", "config_key", "ref_median_s", "new_median_s", "delta_pct",
                                      "new_in_ref_ci", "ref_in_new_ci", "new_in_ref_run_ci"])


def _speedup_fields(prefix: str, a: Measurement, b: Measurement) -> dict[str, Any]:
    s = speedup(a, b)
    return {f"{prefix}_ratio": s.ratio, f"{prefix}_ci_low": s.ci_low, f"{prefix}_ci_high": s.ci_high,
            f"{prefix}_se": s.se, f"{prefix}_df": s.df, f"{prefix}_verdict": direction(s.ci_low, s.ci_high)}


def compare_pairs(notebook: str, ref_rows: list[Measurement], new_by_key: dict[str, Measurement]) -> pd.DataFrame:
    """Every unordered pair (a, b) of one REF group, A/A copies left out: the speed-up of b over a in each run.

    `ref_rows` are the configurations ok in both runs, in REF's order; a comes before b in that order.
    """
    groups: dict[str, list[Measurement]] = {}
    for r in ref_rows:
        if not is_aa(r.variant):
            groups.setdefault(group_key(r), []).append(r)
    out = []
    for g, rows in groups.items():
        for i, a in enumerate(rows):
            for b in rows[i + 1:]:
                na, nb = new_by_key[a.config_key], new_by_key[b.config_key]
                out.append({"notebook": notebook, "group": g, "a": a.config_key, "b": b.config_key,
                            **_speedup_fields("ref", a, b), **_speedup_fields("new", na, nb)})
    df = pd.DataFrame(out, columns=["notebook", "group", "a", "b"] + [
        f"{p}_{c}" for p in ("ref", "new") for c in ("ratio", "ci_low", "ci_high", "se", "df", "verdict")])
    df["outcome"] = [_outcome(r, n) for r, n in zip(df["ref_verdict"], df["new_verdict"])]
    return df


def _outcome(ref_verdict: str, new_verdict: str) -> str:
    """"same", "reversed" (faster <-> slower) or "decided<->unclear"."""
    if ref_verdict == new_verdict:
        return "same"
    if "unclear" in (ref_verdict, new_verdict):
        return "decided<->unclear"
    return "reversed"


def compare_aa(notebook: str, ref_rows: list[Measurement], new_by_key: dict[str, Measurement]) -> pd.DataFrame:
    """Each A/A pair (variant X and X-aa, same REF group and shape): its speed-up and significance in each run."""
    originals: dict[tuple, Measurement] = {}  # by group, shape and variant; an ok row first
    for r in sorted(ref_rows, key=lambda r: not r.ok):
        originals.setdefault((r.group_key, r.shape, r.variant), r)
    out = []
    for r in ref_rows:  # in REF's order
        base = originals.get((r.group_key, r.shape, original_of(r.variant))) if is_aa(r.variant) else None
        if base is None:
            continue
        row = {"notebook": notebook, "a": base.config_key, "b": r.config_key}
        for run, a, b in (("ref", base, r), ("new", new_by_key[base.config_key], new_by_key[r.config_key])):
            s = speedup(a, b)
            row.update({f"{run}_ratio": s.ratio, f"{run}_ci_low": s.ci_low, f"{run}_ci_high": s.ci_high,
                        f"{run}_significant": s.significant})
        out.append(row)
    return pd.DataFrame(out, columns=["notebook", "a", "b"] + [
        f"{p}_{c}" for p in ("ref", "new") for c in ("ratio", "ci_low", "ci_high", "significant")])


def summarize(notebook: str, medians: pd.DataFrame, pairs: pd.DataFrame, aa: pd.DataFrame) -> dict[str, Any]:
    """One line of the table: counts and shares over one notebook's (or all notebooks') details."""
    n, k = len(medians), len(pairs)
    abs_delta = medians["delta_pct"].abs()
    decided = int((pairs["ref_verdict"] != "unclear").sum())
    return {
        "notebook": notebook,
        "configs": n,
        "new_in_ref_ci": int(medians["new_in_ref_ci"].sum()),
        "new_in_ref_ci_share": medians["new_in_ref_ci"].mean() if n else np.nan,
        "ref_in_new_ci": int(medians["ref_in_new_ci"].sum()),
        "ref_in_new_ci_share": medians["ref_in_new_ci"].mean() if n else np.nan,
        "new_in_ref_run_ci": int(medians["new_in_ref_run_ci"].sum()),
        "new_in_ref_run_ci_share": medians["new_in_ref_run_ci"].mean() if n else np.nan,
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
    lines, all_medians, all_pairs, all_aa = [], [], [], []
    for nb in common:
        new_by_key = {row.config_key: row for row in n.notebooks[nb]}
        both = [row for row in r.notebooks[nb] if _ok(row) and _ok(new_by_key.get(row.config_key))]
        medians = compare_medians(nb, both, new_by_key)
        pairs = compare_pairs(nb, both, new_by_key)
        aa = compare_aa(nb, both, new_by_key)
        lines.append(summarize(nb, medians, pairs, aa))
        all_medians.append(medians)
        all_pairs.append(pairs)
        all_aa.append(aa)
    medians = pd.concat(all_medians, ignore_index=True)
    pairs = pd.concat(all_pairs, ignore_index=True)
    by_key = [{(nb, row.config_key): row for nb in common for row in run.notebooks[nb]} for run in (r, n)]
    lines.append(summarize("all", medians, pairs, pd.concat(all_aa, ignore_index=True)))
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
