"""A comparison of two runs as plain text: what `python -m studylib compare REF NEW` prints.

One line per notebook (then "all") with medians inside each other's CIs, the shift, the verdicts kept or reversed
and the A/A false positives; the machines' differences first; then the reversed pairs and the largest changes of
the median. The figures themselves are compare.py's.
"""

from __future__ import annotations

import pandas as pd

from .compare import LIMITS, PEAK_TOLERANCE, RunComparison


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
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


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
    out = [f"REF {c.ref}" + (f" (profile {c.profile})" if c.profile else ""), f"NEW {c.new}"]
    if c.machine_differences:
        if all(d.startswith(LIMITS) for d in c.machine_differences):
            header = ["the runs' CPU, threads and libraries are the same, but a limit measured at the start of each run",
                      "moved: another host behind the same CPU name, or this one in another state (on a shared machine",
                      "a bf16 or int8 matmul rate can move by tens of % within hours); look at the shift and the rows",
                      "of that dtype:"]
        else:
            header = ["the runs' machines differ, so their medians are not expected to agree and a verdict may change",
                      "for a real reason (reproducibility is judged only between runs on one machine):"]
        out += ["", *header, *(f"  {line}" for line in c.machine_differences), ""]
    elif c.machine_differences is None:
        out.append("machines: not compared (env.json is missing in one of the runs)")
    else:
        out.append("machines: the same CPU, threads, libraries and measured limits (within "
                   f"{100 * PEAK_TOLERANCE:.0f}%) in both env.json")
    if c.only_ref:
        out.append(f"only in REF (not compared): {', '.join(c.only_ref)}")
    if c.only_new:
        out.append(f"only in NEW (not compared): {', '.join(c.only_new)}")
    out += ["", "configurations ok in both runs; 'in CI': the re-run CI (this run's CI, its processes included,",
            "with the recorded shift between whole runs; this run's CI where the profile does not know it); shift =",
            "geometric mean of NEW / REF medians - 1, the machine's change between",
            "the runs; |Δ| = |NEW median / REF median - 1|; a pair's verdict is faster or",
            "slower when its speed-up's 95% CI excludes 1, else unclear; an A/A false positive is an A/A pair",
            "(variant X-aa against X) whose CI excludes 1.", "",
            table.to_string(index=False), ""]
    rp = c.reversed_pairs
    if rp.empty:
        out.append("reversed pairs: none")
    else:
        out.append(f"reversed pairs ({len(rp)}): speed-up of b over a")
        out.append(pd.DataFrame({
            "notebook": rp["notebook"], "a": rp["a"], "b": rp["b"],
            "ref": [_ratio(*x) for x in zip(rp["ref_ratio"], rp["ref_ci_low"], rp["ref_ci_high"], rp["ref_verdict"])],
            "new": [_ratio(*x) for x in zip(rp["new_ratio"], rp["new_ci_low"], rp["new_ci_high"], rp["new_verdict"])],
        }).to_string(index=False))
    w = c.worst_medians
    out += ["", f"largest changes of the median ({len(w)} of {len(c.medians)}):"]
    if not w.empty:
        out.append(pd.DataFrame({
            "notebook": w["notebook"], "configuration": w["config_key"],
            "ref median": [_time(x) for x in w["ref_median_s"]], "new median": [_time(x) for x in w["new_median_s"]],
            "Δ": [f"{x:+.1f}%" for x in w["delta_pct"]],
            "in ref CI": ["yes" if x else "no" for x in w["new_in_ref_ci"]],
        }).to_string(index=False))
    return "\n".join(out)
