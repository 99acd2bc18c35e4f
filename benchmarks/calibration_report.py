"""How well one run's intervals are calibrated, from its own results: a report that prints, not a test.

Per study and over all of them: the A/A pairs (every `<x>-aa` against `<x>`), how many the method called different
(the false-positive rate, with its exact 95% interval; 5% is what a 95% CI promises) and their mean z² (with its
chi-square 95% interval; about 1 when the intervals are as wide as the noise), and the half-widths of the speed-up
CIs of every comparison a study's Answer gives (its `Comparison`s at every shape), their median and quartiles.
Compare two runs with `python -m studylib compare REF NEW --check` for the re-run side of the same question.

Then what a longer or wider design would give, from the run's own variance parts: each paired speed-up's SE² = (v̄ +
τ²)/k (design.speedup_parts), v̄ shrinking with more rounds per process and τ² only with more processes. For k'
processes of m times the rounds: SE'² = (v̄/m + τ²)/k', each part's degrees of freedom scaled with the information
it rests on (design.projected); the Answers' median CI half-width, the share of the comparisons `compare` counts
(every pair of a group, decided in this run) that a same-host re-run of that design would reproduce within ±10% had
nothing changed (design.rerun_reproduced: the two runs' difference, SE √2·SE' at twice the degrees of freedom; for
the design measured it predicts what `compare` observes), and the report's time: each study's time outside its
groups (processes starting, the notebook) as measured, its groups' untimed part (preparation, first calls, warm-up)
× k'/k and its timed rounds × m·k'/k.

    .venv/bin/python benchmarks/calibration_report.py reference/cpu
    .venv/bin/python benchmarks/calibration_report.py outputs/cpu
    .venv/bin/python benchmarks/calibration_report.py reference/cpu --rounds 02=1.3 --rounds 03=1.4 --rounds 04=1.33
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as _st

import studylib.studies  # noqa: F401 - registers the studies
from studylib.core.files import read_json
from studylib.core.study_registry import studies
from studylib.report import compare
from studylib.stats import design, speedups
from studylib.stats.measurement import Measurement
from studylib.stats.results import ResultsTable

# (processes, rounds × the measured ones)
DESIGNS = [(3, 1.0), (3, 1.2), (3, 1.3), (3, 1.4), (3, 1.5), (3, 2.0), (4, 1.0), (4, 1.5), (5, 1.0), (6, 1.0)]


def study_rows(folder: Path, notebook: str) -> pd.DataFrame:
    path = folder / "results" / f"{notebook}.jsonl"
    return pd.DataFrame(ResultsTable(path).rows()) if path.exists() else pd.DataFrame()


def answer_comparisons(df: pd.DataFrame, notebook: str) -> list[speedups.Comparison]:
    """The study's Answer comparisons whose candidate the table holds."""
    return [c for c in studies()[notebook].comparisons if c.column in df and (df[c.column] == c.candidate).any()]


def half_widths(df: pd.DataFrame, notebook: str) -> list[float]:
    """The CI half-widths (log scale, as % of the speed-up) of every comparison the study's Answer gives."""
    out = []
    for c in answer_comparisons(df, notebook):
        t = speedups.pair_table(df, c.candidate, c.baseline, column=c.column)
        ok = t[t.speedup.notna()]
        out += list(100 * np.expm1((np.log(ok.ci_high.astype(float)) - np.log(ok.ci_low.astype(float))) / 2))
    return out


def answer_parts(df: pd.DataFrame, notebook: str) -> list[design.Parts]:
    """The variance parts of every paired speed-up the study's Answer gives (single operations left out)."""
    out = []
    for c in answer_comparisons(df, notebook):
        for cand, base in speedups.matched(df, c.candidate, c.baseline, column=c.column):
            if base is None or cand.get("status", "ok") != "ok" or base.get("status", "ok") != "ok":
                continue
            parts = design.speedup_parts(base, cand)
            if parts is not None:
                out.append(parts)
    return out


def compared_parts(rows: list[Measurement], notebook: str) -> list[design.Parts]:
    """The variance parts of every pair `compare` counts among the decided ones (this run's verdict not unclear)."""
    ok = [r for r in rows if r.ok]
    by_key = {r.config_key: r for r in ok}
    pairs = compare.compare_pairs(notebook, ok, by_key)
    out = []
    for p in pairs[pairs.ref_verdict != "unclear"].itertuples():
        parts = design.speedup_parts(by_key[p.a], by_key[p.b])
        if parts is not None:
            out.append(parts)
    return out


def study_seconds(folder: Path, notebook: str, rows: list[Measurement]) -> tuple[float, float, float]:
    """(the study's whole time, its groups' time, its timed rounds' time) in seconds."""
    run = (read_json(folder / "run.json", default={}) or {}).get(notebook, {})
    whole = float(run.get("duration_s") or 0) + float(run.get("early_replicates_s") or 0)
    groups = sum(float(r.wall_s or 0) for r in rows)
    timed = sum(float(np.sum(r.samples_s)) * float(r.block_calls or 1) for r in rows if r.ok and r.samples_s)
    return whole, groups, timed


def _rounds(m: float | dict[str, float], notebook: str) -> float:
    """A design's rounds factor for one study: `m` itself, or the entry of `m` whose key starts its name (else 1)."""
    if not isinstance(m, dict):
        return m
    return next((v for key, v in m.items() if notebook.startswith(key)), 1.0)


def projection(folder: Path, per_study: dict[str, float] | None = None) -> str:
    """The projected designs as a table; `per_study`: rounds factors by study (a prefix of its name, e.g. "03"),
    projected with the run's processes and with five."""
    by_study: dict[str, tuple] = {}
    ks = []
    for notebook in studies():
        path = folder / "results" / f"{notebook}.jsonl"
        if not path.exists():
            continue
        rows = ResultsTable(path).measurements()
        df = pd.DataFrame(rows)
        by_study[notebook] = (answer_parts(df[df.task != "op"] if "task" in df else df, notebook),
                              compared_parts(rows, notebook), study_seconds(folder, notebook, rows))
        ks += [int(r.replicates) for r in rows if r.ok and r.replicates]
    answers = [p for a, _, _ in by_study.values() for p in a]
    seconds = [s for *_, s in by_study.values()]
    if not answers or not ks:
        return "no paired speed-ups to project"
    k0 = max(set(ks), key=ks.count)
    lines = [f"variance parts of the Answers' {len(answers)} speed-ups (this run: {k0} processes): a process's median "
             f"{100 * np.median(np.sqrt([p.v for p in answers])):.1f}% (median SD), between processes "
             f"{100 * np.median(np.sqrt([p.tau2 for p in answers])):.1f}%; the report's groups spent "
             f"{100 * sum(t for *_, t in seconds) / max(sum(g for _, g, _ in seconds), 1e-9):.0f}% of their time in "
             f"timed rounds",
             f"{'processes':>9} {'rounds ×':>8} {'report min':>10} {'Answers: median CI half-width %':>32} "
             f"{'reproduced within ±10% (expected)':>34}"]
    designs: list[tuple[int, float | dict]] = list(DESIGNS)
    if per_study:
        designs += [(k0, per_study), (5, per_study)]
    for k, m in designs:
        se, df, compared = [], [], []
        for notebook, (a, c, _) in by_study.items():
            got = design.projected(a, k, _rounds(m, notebook))
            se, df = np.concatenate([se, got[0]]), np.concatenate([df, got[1]])
            compared.append((len(c), design.rerun_reproduced(c, k, _rounds(m, notebook)) if c else 0.0))
        hw = 100 * np.median(np.expm1(_st.t.ppf(0.975, np.maximum(df, 1.0)) * se))
        expected = sum(n * e for n, e in compared) / max(sum(n for n, _ in compared), 1)
        minutes = sum(w - g + (g - t) * k / k0 + t * _rounds(m, nb) * k / k0
                      for nb, (*_, (w, g, t)) in by_study.items()) / 60
        label = f"{m:8.1f}" if not isinstance(m, dict) else f"{'per study':>8}"
        lines.append(f"{k:9d} {label} {minutes:10.0f} {hw:32.1f} {100 * expected:33.0f}%")
    if per_study:
        lines.append("per study: " + ", ".join(f"{nb} × {_rounds(per_study, nb):g}" for nb in by_study))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a profile's outputs folder, e.g. reference/cpu")
    parser.add_argument("--rounds", action="append", default=[], metavar="STUDY=M",
                        help="project a design with M times the rounds in STUDY (a prefix of its name, e.g. 03=1.4), "
                             "1 elsewhere (repeatable)")
    args = parser.parse_args()
    folder = args.folder
    try:
        per_study = {key: float(value) for key, value in (r.split("=", 1) for r in args.rounds)}
    except ValueError:
        parser.error("--rounds: give STUDY=M, e.g. 03=1.4")
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
    print()
    print(projection(folder, per_study or None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
