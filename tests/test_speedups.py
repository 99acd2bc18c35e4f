"""The comparison layer (speedups.py): pairing, the one verdict rule, false discoveries, break-even, the band;
and the check that an Answer box's numbers come from its page's tables."""

import numpy as np
import pandas as pd
import pytest

from answer_numbers import answer_numbers_missing
from studylib.stats import speedups, variance
from studylib.stats.stats import Speedup

rng = np.random.default_rng(1)


def _row(variant, batch, median, *, status="ok", model="m", group=None, first=None, prepare=0.0):
    row = {"model": model, "variant": variant, "dtype": "fp32", "batch_size": batch, "seq_len": 8, "image_size": None,
           "device": "cpu", "threads": 2, "status": status, "error": "" if status == "ok" else "boom"}
    if status != "ok":
        return row
    noise = rng.normal(1, 0.003, 40)
    samples = list(median * noise)
    return row | {"samples_s": samples, "sample_rep": [0] * 40, "sample_round": list(range(40)),
                  "group_id": group or f"{model}|{batch}", "median_s": float(np.median(samples)),
                  "first_call_s": first or median, "prepare_s": prepare, "max_abs_diff": 0.0, "parity_ok": True}


def test_the_verdict_rule_needs_the_whole_ci_beyond_the_band():
    assert speedups.verdict(1.06, 1.10) == "faster"
    assert speedups.verdict(1.03, 1.10) == "undecided"  # above 1, but not wholly above the ±5% band
    assert speedups.verdict(0.97, 1.04) == "equal"
    assert speedups.verdict(0.80, 0.90) == "slower"
    assert speedups.verdict(1.06, 1.10, band=1.08) == "undecided"  # a wider band
    assert speedups.verdict(float("nan"), 1.2) == "undecided"


def test_many_weak_shapes_lose_their_verdict_to_the_false_discovery_control():
    t = pd.DataFrame({"speedup": [1.30] + [1.062] * 9, "ci_low": [1.25] + [1.0505] * 9,
                      "ci_high": [1.35] + [1.074] * 9})
    judged = speedups.judge(t)
    assert judged.verdict.iloc[0] == "faster"
    single = speedups.judge(t.iloc[[1]])
    assert single.verdict.iloc[0] == "faster" and single.p.iloc[0] < speedups.FDR
    assert (judged.p.iloc[1:] >= single.p.iloc[0]).all()


def test_pair_table_pairs_on_the_shape_keeps_failures_and_prices_the_first_call():
    df = pd.DataFrame([_row("eager", 1, 0.010), _row("fast", 1, 0.005, first=1.005, prepare=0.5),
                       _row("eager", 8, 0.080), _row("fast", 8, 0, status="oom"),
                       _row("eager", 1, 0.020, model="other"), _row("eager-aa", 1, 0.010)])
    t = speedups.pair_table(df, "fast")
    assert list(t.batch_size) == [1, 8]
    one = t.iloc[0]
    assert one.speedup == pytest.approx(2.0, rel=0.02) and one.paired and one.verdict == "faster"
    assert one.one_time_s == pytest.approx(0.5 + 1.005 - one.median_s)
    # N calls, the first one cold, take no longer than N eager calls from break_even on, and not before
    n = one.break_even
    cold = 0.5 + 1.005
    assert cold + (n - 1) * one.median_s <= n * one.base_median_s * 1.02
    assert cold + (n - 2) * one.median_s > (n - 1) * one.base_median_s * 0.98
    assert one.break_even_low <= n <= one.break_even_high
    assert t.iloc[1].status == "oom" and pd.isna(t.iloc[1].speedup)
    every = speedups.pair_table(df, None)
    assert set(every.variant) == {"fast"}  # neither the baseline nor the A/A copy is a candidate


def test_a_baseline_fixed_at_another_batch_pairs_across_it():
    df = pd.DataFrame([_row("eager", 1, 0.010, group="g"), _row("eager", 8, 0.040, group="g"),
                       _row("fast", 8, 0.020, group="g")])
    t = speedups.pair_table(df, ["eager", "fast"], baseline_where={"batch_size": 1})
    by = t.set_index(["variant", "batch_size"])
    assert by.loc[("fast", 8)].speedup == pytest.approx(0.5, rel=0.02)
    assert by.loc[("fast", 8)].baseline_batch_size == 1


def test_the_band_is_a_fixed_five_percent():
    assert speedups.EQUIVALENCE == 1.05
    assert speedups.verdict(0.96, 1.04) == "equal" and speedups.verdict(1.051, 1.07) == "faster"
    assert speedups.verdict(0.94, 0.949) == "slower" and speedups.verdict(1.03, 1.06) == "undecided"


def test_the_p_value_beyond_the_band_uses_the_speedups_own_t_distribution():
    # a nominal 0.005 under the normal is larger under t at 9 degrees of freedom: the SE and df are the row's own
    se = 0.01
    ratio = 1.05 * np.exp(2.807 * se)  # z = 2.807: two-sided normal p = 0.005
    normal = speedups.p_beyond_band(ratio, se, np.inf)
    t9 = speedups.p_beyond_band(ratio, se, 9)
    assert normal == pytest.approx(0.005, rel=0.01) and t9 == pytest.approx(0.0206, rel=0.05) and t9 > 2 * normal


def test_geomean_and_combine_and_ratio_of():
    df = pd.DataFrame([_row("eager", 1, 0.010), _row("fast", 1, 0.005), _row("eager", 8, 0.080),
                       _row("fast", 8, 0.020)])
    g = speedups.geomean(df, "fast")
    assert g.ratio == pytest.approx(np.sqrt(2 * 4), rel=0.02) and g.n == 2 and g.ci_low < g.ratio < g.ci_high
    c = speedups.combine([Speedup(2.0, 1.9, 2.1), Speedup(8.0, 7.6, 8.4)])
    assert c.ratio == pytest.approx(4.0)
    r = speedups.ratio_of(Speedup(2.0, 1.9, 2.1), Speedup(1.0, 0.95, 1.05))
    assert r.ratio == pytest.approx(2.0) and r.ci_low < 1.9 and r.ci_high > 2.1
    assert speedups.geomean(df, "absent") is None


def test_shape_labels_name_only_what_varies():
    t = pd.DataFrame({"model": ["a", "a"], "batch_size": [1.0, 8.0], "seq_len": [8, 8]})
    assert speedups.shape_label(t.iloc[1], ["batch_size"]) == "batch 8"


def test_the_answer_number_check_fails_on_a_number_no_table_prints():
    box = ('<div class="answer"><ul><li>Pick: use x at batch 1 (1.87× over y).</li><li>x pays off at 2 of 3 '
           'workloads: 1.40–1.87× faster than y, one-time 1.4 s, paid back after 4–9 calls; undecided at batch 8.'
           '</li></ul></div>')
    table = "<table><tr><td>1.87× (1.74–1.92)</td><td>1.4 s</td><td>paid back after 4 calls</td></tr></table>"
    missing, checked = answer_numbers_missing(box + table)
    assert checked >= 4 and missing == ["1.40×", "paid back after 9"]
    table += "<table><tr><td>1.40× (1.30–1.50)</td><td>paid back after 9 (8–10) calls</td></tr></table>"
    assert answer_numbers_missing(box + table)[0] == []


def test_a_break_even_is_counted_in_the_number_it_needs():
    from studylib.report.decisions import calls_said

    assert calls_said(1.0, 1.0, 1.0, ci=True) == "1 call"
    assert calls_said(4.0, 3.0, 6.0, ci=True) == "4 (3–6) calls"  # the number with its CI's interval
    assert calls_said(146.0, 146.0, 1167.0) == "146–1,167 calls"  # a range over workloads
    assert calls_said(float("inf")) == "never"


def _family(rng, truth, m=40, df=12.0, se=(0.01, 0.05)):
    """One page's family of m speed-ups with these true values: estimates drawn as the variance model's (log ratio
    ~ truth + se·t at df), each with its 95% CI."""
    se = rng.uniform(*se, m)
    est = np.exp(np.log(truth) + se * rng.standard_t(df, m))
    lo, hi = speedups.interval(est, se, df)
    return pd.DataFrame({"speedup": est, "ci_low": lo, "ci_high": hi, "se": se, "df": df})


@pytest.mark.parametrize("effect", [1.0, 1.12])
def test_the_adjusted_intervals_keep_the_false_coverage_rate_below_q(effect):
    """Benjamini & Yekutieli: of the intervals of the comparisons decided, the share that misses its true value
    averages at most q over families. A/A families (effect 1: nothing to find) and families half A/A, half a true
    1.12× (near the band, where selection favours lucky draws, and the plain 95% CIs of the decided miss more)."""
    rng = np.random.default_rng(56)
    truth = np.where(np.arange(40) < 20, 1.0, effect)
    adjusted, plain = [], []
    for _ in range(80):
        t = _family(rng, truth)
        judged = speedups.judge(t)
        decided = judged.verdict.isin(["faster", "slower"]).to_numpy()
        r = max(decided.sum(), 1)
        assert judged.level.iloc[0] == pytest.approx(1 - r * speedups.FDR / 40) and judged.level.nunique() == 1
        adjusted.append(np.sum(decided & ~((judged.ci_low <= truth) & (truth <= judged.ci_high))) / r)
        plain.append(np.sum(decided & ~((t.ci_low <= truth) & (truth <= t.ci_high))) / r)
    assert np.mean(adjusted) <= speedups.FDR
    if effect > 1:
        assert np.mean(plain) > speedups.FDR  # what the adjustment is for: unadjusted, the decided ones miss
        assert np.mean(adjusted) < np.mean(plain) / 2


def test_decided_is_the_adjusted_interval_beyond_the_band_and_equal_inside_it():
    """The step-up's decisions and the printed intervals are one statement: a row is decided exactly where its
    Benjamini–Hochberg adjusted p is at most q and exactly where its interval lies beyond the band; equal exactly
    where it lies inside; one level and one smallest detectable effect per row, at that level."""
    rng = np.random.default_rng(3)
    t = _family(rng, rng.choice([0.9, 0.97, 1.0, 1.04, 1.08, 1.2], 60), m=60, se=(0.002, 0.03))
    judged = speedups.judge(t)
    beyond = (judged.ci_low > 1.05) | (judged.ci_high < 1 / 1.05)
    inside = (judged.ci_low >= 1 / 1.05) & (judged.ci_high <= 1.05)
    decided = judged.verdict.isin(["faster", "slower"])
    assert 0 < decided.sum() < len(t) and (judged.verdict == "equal").any() and (judged.verdict == "undecided").any()
    assert (decided == beyond).all() and ((judged.verdict == "equal") == inside).all()
    assert (decided == (judged.p <= speedups.FDR)).all()
    level = judged.level.iloc[0]
    assert level == pytest.approx(1 - decided.sum() * speedups.FDR / len(t))
    assert (judged.ci_low < t.ci_low).all() and (judged.ci_high > t.ci_high).all()  # wider than the plain 95%
    assert judged.detectable.to_numpy() == pytest.approx(variance.detectable(t.se, t.df, 1.05, level))
    again = speedups.judge(judged)  # judging a judged table again decides the same, at the same level
    assert (again.verdict == judged.verdict).all() and again.ci_low.to_numpy() == pytest.approx(judged.ci_low)
