"""How well one run's intervals are calibrated, from its own results: a report that prints, not a test.

Per study and over all of them: the A/A pairs (every `<x>-aa` against `<x>`), how many the method called different
(the false-positive rate, with its exact 95% interval; 5% is what a 95% CI promises) and their mean z² (with its
chi-square 95% interval; about 1 when the intervals are as wide as the noise), and the half-widths of the speed-up
CIs of every comparison a study's Answer gives (its `Comparison`s at every shape), their median and quartiles.
Compare two runs with `python -m studylib compare REF NEW --check` for the re-run side of the same question.

    .venv/bin/python benchmarks/calibration_report.py reference/cpu
    .venv/bin/python benchmarks/calibration_report.py outputs/cpu
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

import studylib.studies  # noqa: F401 - registers the studies
from studylib.core import speedups
from studylib.core.results import ResultsTable
from studylib.core.study_registry import studies


def study_rows(folder: Path, notebook: str) -> pd.DataFrame:
    path = folder / "results" / f"{notebook}.jsonl"
    return pd.DataFrame(ResultsTable(path).rows()) if path.exists() else pd.DataFrame()


def half_widths(df: pd.DataFrame, notebook: str) -> list[float]:
    """The CI half-widths (log scale, as % of the speed-up) of every comparison the study's Answer gives."""
    out = []
    for c in studies()[notebook].comparisons:
        if c.column not in df or not (df[c.column] == c.candidate).any():
            continue
        t = speedups.pair_table(df, c.candidate, c.baseline, column=c.column)
        ok = t[t.speedup.notna()]
        out += list(100 * np.expm1((np.log(ok.ci_high.astype(float)) - np.log(ok.ci_low.astype(float))) / 2))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a profile's outputs folder, e.g. reference/cpu")
    folder = parser.parse_args().folder
    lines, all_aa, all_hw = [], [], []
    for notebook in studies():
        df = study_rows(folder, notebook)
        if not len(df):
            continue
        aa = speedups.aa_pairs(df)  # single operations (study 02's micro-ops) included: their A/A copies count too
        hw = half_widths(df[df.task != "op"] if "task" in df else df, notebook)
        all_aa.append(aa)
        all_hw += hw
        lines.append((notebook, speedups.aa_calibration(df, pairs=aa), hw))
    lines.append(("all", speedups.aa_calibration(pd.DataFrame(), pairs=pd.concat(all_aa, ignore_index=True)), all_hw))
    print(f"{'study':28} {'A/A pairs':>9} {'called different':>22} {'mean z² [95% CI]':>22} "
          f"{'comparisons':>11} {'CI half-width % median [quartiles]':>36}")
    for name, cal, hw in lines:
        q = np.percentile(hw, [25, 50, 75]) if hw else [np.nan] * 3
        fp = f"{cal.false_pos} ({100 * cal.rate:.1f}%, {100 * cal.rate_low:.1f}–{100 * cal.rate_high:.1f}%)"
        z2 = f"{cal.mean_z2:.2f} [{cal.z2_low:.2f}, {cal.z2_high:.2f}]"
        print(f"{name:28} {cal.n:9d} {fp:>22} {z2:>22} {len(hw):11d} {f'{q[1]:.1f} [{q[0]:.1f}, {q[2]:.1f}]':>36}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
