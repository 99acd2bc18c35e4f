"""A comparison of two runs as plain text: what `python -m studylib compare REF NEW` prints (the machines'
differences, one line per notebook, the reversed pairs, the largest changes of the median), in the words of
templates/report/compare.txt.j2. The figures themselves are compare.py's."""

from __future__ import annotations

import pandas as pd

from ..core import numbers, wording
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
