"""The variance model (variance.py) on a simulated machine: its intervals cover what they claim, no more, no less.

A fake machine runs groups of variants in k replicate processes of interleaved rounds. A whole run lies in a phase of
its own (every median alike); each process lands in a phase shared by its group's variants, and each variant settles
in it with an effect of its own (memory placement); each round drifts alike for the group's variants; each call has
lognormal noise with occasional slow outliers. Everything is synthetic: no real timing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import stored_row
from studylib.bench import timing
from studylib.stats import calibration, design, run_shift, speedups, stats, variance
from studylib.stats.results import ResultsTable

TRUE = {"eager": 0.100, "eager-aa": 0.100, "fast": 0.070}  # per-call medians in the machine's average phase
RUN_SD, PHASE_SD, OWN_SD, ROUND_SD, NOISE_SD = 0.04, 0.05, 0.015, 0.03, 0.02


def _run(rng, *, groups=30, replicates=3, rounds=8, run_sd=RUN_SD, shift: run_shift.RunShift | None = None,
         own_sd=OWN_SD, shared_sd=0.0):
    """One simulated run's rows; also returns the run's own phase (every median of it is shifted by exp(phase)).
    `shared_sd`: a phase per replicate common to every group (the groups of one replicate share its process)."""
    rows, whole = [], rng.normal(0, run_sd)
    shared = rng.normal(0, shared_sd, replicates) if shared_sd else np.zeros(replicates)
    for g in range(groups):
        phase = rng.normal(0, PHASE_SD, replicates) + shared
        own = {v: rng.normal(0, own_sd, replicates) for v in TRUE}
        drift = rng.normal(0, ROUND_SD, (replicates, rounds))
        for v, mu in TRUE.items():
            noise = rng.normal(0, NOISE_SD, (replicates, rounds)) + np.where(
                rng.random((replicates, rounds)) < 0.05, 0.3, 0.0)  # 5% of calls 35% slow (a neighbour's burst)
            xs = (mu * np.exp(whole + phase[:, None] + own[v][:, None] + drift + noise)).ravel().tolist()
            reps = np.repeat(np.arange(replicates), rounds).tolist()
            rows.append({"config_key": f"g{g}|{v}", "variant": v, "status": "ok", "group_id": f"run-g{g}",
                         "samples_s": xs, "sample_rep": reps, "sample_round": list(range(rounds)) * replicates,
                         "run_shift_sigma": None if shift is None else shift.sigma,
                         "run_shift_df": None if shift is None else shift.df, **timing.row_statistics(xs, reps)})
    return rows, whole


def _true_median(v: str, whole: float = 0.0) -> float:
    """The median a variant's samples converge to in a run of phase `whole` (noise and outliers included)."""
    rng = np.random.default_rng(0)
    n = 400_000
    x = np.exp(rng.normal(0, PHASE_SD, n) + rng.normal(0, OWN_SD, n) + rng.normal(0, ROUND_SD, n)
               + rng.normal(0, NOISE_SD, n) + np.where(rng.random(n) < 0.05, 0.3, 0.0))
    return TRUE[v] * float(np.exp(whole)) * float(np.median(x))


def _inside(lo, hi, v) -> bool:
    return lo <= v <= hi


def test_medians_speedups_and_geomeans_cover_95_percent_and_a_a_is_calibrated():
    rng = np.random.default_rng(5)
    truth = {v: _true_median(v) for v in TRUE}
    med, rerun, sp, aa_z, geo = [], [], [], [], []
    shift = run_shift.estimate(rng.normal(0, RUN_SD * np.sqrt(2), 400) * 100)  # a long record of same-host pairs
    for _ in range(12):
        rows, whole = _run(rng, shift=shift)
        rows = variance.with_reported_ci(rows)
        by = {r["config_key"]: r for r in rows}
        for r in rows:
            med.append(_inside(r["ci_low_s"], r["ci_high_s"], truth[r["variant"]] * np.exp(whole)))
            rerun.append(_inside(r["rerun_low_s"], r["rerun_high_s"], truth[r["variant"]]))
        pairs = []
        for g in range(30):
            e, f, a = by[f"g{g}|eager"], by[f"g{g}|fast"], by[f"g{g}|eager-aa"]
            s = variance.speedup(e, f)
            sp.append(_inside(s.ci_low, s.ci_high, TRUE["eager"] / TRUE["fast"]))
            z = variance.speedup(e, a)
            aa_z.append(np.log(z.ratio) / z.se)
            pairs.append((e, f))
        g = speedups.geomean_of(pairs[:10])
        geo.append(_inside(g.ci_low, g.ci_high, TRUE["eager"] / TRUE["fast"]))
    # 95% ± 3% over 1,080 medians and 360 speed-ups (a coverage's SE there is 0.7% and 1.1%)
    assert 0.92 <= np.mean(med) <= 0.98, np.mean(med)
    assert 0.92 <= np.mean(rerun) <= 0.98, np.mean(rerun)
    assert 0.92 <= np.mean(sp) <= 0.98, np.mean(sp)
    assert 0.7 <= np.mean(np.square(aa_z)) <= 1.3, np.mean(np.square(aa_z))
    assert np.mean(geo) >= 0.8  # 12 geometric means: only a gross miss can show


def test_a_re_run_falls_inside_the_re_run_interval_but_not_always_inside_this_runs():
    """Pairs of runs on one host: the re-run's medians against the reference's two intervals."""
    rng = np.random.default_rng(9)
    shift = run_shift.estimate(rng.normal(0, RUN_SD * np.sqrt(2), 400) * 100)
    within, rerun = [], []
    for _ in range(10):
        ref, new = (variance.with_reported_ci(_run(rng, shift=shift)[0]) for _ in range(2))
        for r, n in zip(ref, new):
            within.append(_inside(r["ci_low_s"], r["ci_high_s"], n["median_s"]))
            rerun.append(_inside(r["rerun_low_s"], r["rerun_high_s"], n["median_s"]))
    # a re-run's median is itself noisy: two calibrated intervals' centres fall inside each other ~83% of the time
    assert np.mean(rerun) >= 0.78 and np.mean(within) < np.mean(rerun) - 0.1


def test_nothing_is_counted_twice_between_processes_is_estimated_beyond_sampling_noise():
    rng = np.random.default_rng(2)
    quiet = variance.ratios_between(_run(rng, own_sd=0.0)[0])
    settled = variance.ratios_between(_run(rng, own_sd=0.05)[0])
    assert quiet.units == settled.units == 60
    assert np.sqrt(quiet.tau2) < 0.012  # only sampling noise between processes: (nearly) nothing added
    assert np.sqrt(settled.tau2) == pytest.approx(0.05 * np.sqrt(2), rel=0.3)  # both copies' own effects
    medians = variance.medians_between(_run(rng)[0])
    assert np.sqrt(medians.tau2) == pytest.approx(np.hypot(PHASE_SD, OWN_SD), rel=0.35)
    # a group's rows share their processes: (k - 1) per group, nearly all of it where the groups' phases are their own
    assert medians.common < 0.3 and 40 <= medians.df <= 30 * 2


def test_groups_that_share_a_replicates_process_give_its_spread_fewer_degrees_of_freedom():
    """A study's groups of one replicate run in one process: a phase common to them all is one draw per replicate,
    so the medians' τ² rests on nearly k − 1 = 2 degrees of freedom, not 2 per group (variance.medians_between)."""
    shared = variance.medians_between(_run(np.random.default_rng(2), shared_sd=0.10)[0])
    assert shared.common > 0.4 and 2 <= shared.df <= 15
    assert stats.common_share([{0: 0.1, 1: -0.1, 2: 0.0}] * 5) == pytest.approx(1.0)  # every group moves alike
    assert stats.common_share([{0: 0.1, 1: -0.1, 2: 0.0}, {0: -0.1, 1: 0.1, 2: 0.0}]) == 0.0  # they cancel
    assert stats.common_share([{0: 0.1, 1: -0.1}]) == 0.0  # one group: nothing to share


def test_the_estimate_is_the_mean_of_the_replicate_medians_whose_variance_the_model_gives():
    """Processes dominate (τ 5%, rounds' noise 0.5%): the mean of three replicate medians varies as Σ(v + τ²)/k² says
    (mean z² 1); the median of all values pooled, the earlier estimate, would vary ~1.35 times as much."""
    rng = np.random.default_rng(4)
    reps = np.repeat(np.arange(3), 9)
    z, z_pooled = [], []
    for _ in range(3000):
        values = np.repeat(rng.normal(0, 0.05, 3), 9) + rng.normal(0, 0.005, 27)
        u = variance.unit_of(values, reps)
        e = variance.estimate(u, variance.Between(0.05 ** 2, 10_000, 1))
        z.append(e.value / e.se)
        z_pooled.append(np.median(values) / e.se)
    assert np.mean(np.square(z)) == pytest.approx(1.0, abs=0.08)
    assert np.mean(np.square(z_pooled)) > 1.2


def test_a_row_reports_the_estimate_its_interval_is_built_around():
    """Three replicates with medians 1, 1 and 2 s: the row reports their geometric mean (2^(1/3) s), its interval
    symmetric around it on the log scale, its rates rescaled; the median of all nine samples (1.05 s) is kept."""
    xs = [0.9, 1.0, 1.1, 0.95, 1.0, 1.05, 1.9, 2.0, 2.1]
    reps = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    row = {"config_key": "a", "variant": "eager", "status": "ok", "group_id": "g", "samples_s": xs, "sample_rep": reps,
           "sample_round": [0, 1, 2] * 3, "throughput_samples_s": 1 / 1.05, **timing.row_statistics(xs, reps)}
    assert row["median_s"] == pytest.approx(1.05)
    out = variance.with_reported_ci([row])[0]
    assert out["median_s"] == pytest.approx(2 ** (1 / 3)) and out["median_pooled_s"] == pytest.approx(1.05)
    assert np.sqrt(out["ci_low_s"] * out["ci_high_s"]) == pytest.approx(out["median_s"])
    assert out["throughput_samples_s"] == pytest.approx(1 / 2 ** (1 / 3))
    single = variance.with_reported_ci([dict(row, sample_rep=[0] * 9)])[0]  # one replicate: the stored median
    assert single["median_s"] == pytest.approx(1.05) and single["throughput_samples_s"] == pytest.approx(1 / 1.05)


def test_each_runtime_gets_its_own_between_process_spread_of_speed_ups():
    """A runtime whose copy settles differently in each process (a batch-32 PyTorch pass) gets a wide interval; a
    quiet one beside it keeps a narrow one, instead of one spread for the whole table."""
    rng = np.random.default_rng(12)
    rows = []
    for g in range(20):
        settle = {"eager": 0.0, "noisy": 0.06, "quiet": 0.0}
        for v, sd in settle.items():
            eff = rng.normal(0, sd, 3)
            xs = (0.1 * np.exp(eff[:, None] + rng.normal(0, 0.01, (3, 8)))).ravel().tolist()
            reps = np.repeat(np.arange(3), 8).tolist()
            rows.append({"config_key": f"g{g}|{v}", "variant": v, "status": "ok", "group_id": f"g{g}",
                         "samples_s": xs, "sample_rep": reps, "sample_round": list(range(8)) * 3,
                         **timing.row_statistics(xs, reps)})
    by = variance.ratios_between_by_runtime(rows)
    noisy_class, quiet_class = ("noisy", None), ("quiet", None)  # (runtime, task): these rows name no task
    assert set(by) == {noisy_class, quiet_class} and by[noisy_class].df == by[quiet_class].df == 40
    assert np.sqrt(by[noisy_class].tau2) == pytest.approx(0.06, rel=0.35) and np.sqrt(by[quiet_class].tau2) < 0.01
    out = {r["config_key"]: r for r in variance.with_reported_ci(rows)}
    noisy, quiet = (variance.speedup(out["g0|eager"], out[f"g0|{v}"]) for v in ("noisy", "quiet"))
    assert noisy.se > 3 * quiet.se
    both = variance.speedup(out["g0|noisy"], out["g0|quiet"])  # neither is the pairs' baseline: the two averaged
    assert quiet.se < both.se < noisy.se


def test_a_shapes_comparisons_do_not_inherit_another_shapes_unsteady_baseline():
    """One group holding six batch sizes (study 03's kind): eager at batch 1, the group's first row, moves 15% between
    processes, everything else 1%. Each shape's speed-ups are estimated against eager at that shape, so those at the
    other sizes do not carry the 15% (against the group's first row every one would); at batch 1 they keep it."""
    rng = np.random.default_rng(3)
    sizes = (1, 2, 4, 8, 16, 32)
    rows = []
    for g in range(2):
        for b in sizes:
            for v in ("eager", "ort", "int8"):
                sd = 0.15 if (v, b) == ("eager", 1) else 0.01
                eff = rng.normal(0, sd, 3)
                xs = (0.1 * b * np.exp(eff[:, None] + rng.normal(0, 0.01, (3, 8)))).ravel().tolist()
                reps = np.repeat(np.arange(3), 8).tolist()
                rows.append({"config_key": f"g{g}|{v}|b{b}", "variant": v, "batch_size": b, "status": "ok",
                             "group_id": f"g{g}", "samples_s": xs, "sample_rep": reps,
                             "sample_round": list(range(8)) * 3, **timing.row_statistics(xs, reps)})
    out = {r["config_key"]: r for r in variance.with_reported_ci(rows)}
    assert out["g0|eager|b8"]["ratio_anchor"] and not out["g0|ort|b8"]["ratio_anchor"]
    others = [variance.speedup(out[f"g{g}|eager|b{b}"], out[f"g{g}|{v}|b{b}"]).se
              for g in range(2) for b in sizes[1:] for v in ("ort", "int8")]
    # against the group's first row each would carry eager at batch 1's 15%: SE at least 0.15/√3 = 0.087; here only
    # the one shape in six of each runtime's pooled spread that holds it
    assert max(others) < 0.075, others
    at1 = [variance.speedup(out["g0|eager|b1"], out[f"g0|{v}|b1"]) for v in ("ort", "int8")]
    assert min(s.se for s in at1) > 0.087  # its own pairs keep it
    frame = pd.DataFrame(list(out.values())).set_index("config_key", drop=False)
    frame["image_size"] = np.nan  # a table's missing field, as pandas holds it: the same shape still
    from_frame = variance.speedup(frame.loc["g0|eager|b8"], frame.loc["g0|ort|b8"])
    assert from_frame.se == pytest.approx(variance.speedup(out["g0|eager|b8"], out["g0|ort|b8"]).se)


def test_a_unit_whose_replicates_disagree_far_beyond_the_rest_keeps_its_own_spread():
    rng = np.random.default_rng(4)
    rows, _ = _run(rng)
    odd = rows[0]
    reps = np.array(odd["sample_rep"])
    odd["samples_s"] = [x * (1.6 if r == 2 else 1.0) for x, r in zip(odd["samples_s"], reps)]
    out = variance.with_reported_ci(rows)
    assert out[0]["heterogeneous"] and np.mean([r["heterogeneous"] for r in out[1:]]) <= 0.02
    assert out[0]["ci_high_s"] / out[0]["ci_low_s"] > 2 * np.median([r["ci_high_s"] / r["ci_low_s"] for r in out[1:]])


def test_one_replicate_gives_within_process_intervals_and_failures_stay_blank():
    rng = np.random.default_rng(3)
    single = variance.with_reported_ci(_run(rng, replicates=1)[0])
    assert variance.medians_between(single) is None
    assert all(r["ci_low_s"] < r["median_s"] < r["ci_high_s"] and r["process_spread_pct"] is None for r in single)
    assert all(r["rerun_low_s"] is None for r in single)  # the shift between runs is unknown here

    failed = {"config_key": "x", "status": "oom", "error": "out of memory", "ci_run_low_s": None,
              "ci_run_high_s": None, "median_s": None}
    rows = variance.with_reported_ci(_run(rng, groups=3)[0] + [failed])
    assert rows[-1]["ci_low_s"] is None and rows[-1]["process_spread_pct"] is None
    assert all(r["process_spread_pct"] > 0 for r in rows[:-1])


def test_unpaired_speedups_add_both_medians_variances_and_leave_the_shift_between_runs_out():
    rng = np.random.default_rng(6)
    shift = run_shift.estimate([5.0, -5.0, 4.0])
    rows = variance.with_reported_ci(_run(rng, groups=4, shift=shift)[0])
    plain = variance.with_reported_ci([dict(r, run_shift_sigma=None, run_shift_df=None) for r in rows])
    for table in (rows, plain):
        by = {r["config_key"]: r for r in table}
        s = variance.speedup(by["g0|eager"], dict(by["g1|fast"], group_id="elsewhere"))
        assert not s.paired and s.se == pytest.approx(np.hypot(by["g0|eager"]["se_log"], by["g1|fast"]["se_log"]))
    a = variance.speedup({**rows[0]}, dict(rows[5], group_id="x"))
    b = variance.speedup({**plain[0]}, dict(plain[5], group_id="x"))
    assert (a.ci_low, a.ci_high) == pytest.approx((b.ci_low, b.ci_high))


def test_the_minimum_detectable_effect_grows_with_the_standard_error():
    small, large = variance.detectable(0.01, 30, 1.05), variance.detectable(0.03, 30, 1.05)
    assert 1.05 < small < large
    # at that size, the CI's lower end lies above the band 80% of the time
    rng = np.random.default_rng(1)
    est = np.log(large) + rng.normal(0, 0.03, 20_000)
    t = 2.042  # t(0.975, 30)
    assert np.mean(np.exp(est - t * 0.03) > 1.05) == pytest.approx(0.80, abs=0.02)
    assert np.isnan(variance.detectable(float("nan"), 3, 1.05))


def test_the_run_shift_record_gives_an_sd_per_run_with_its_chi_square_interval():
    est = run_shift.estimate([4.0, -4.0])
    d = np.log1p([0.04, -0.04])
    assert est.sigma == pytest.approx(np.sqrt(np.mean(d ** 2) / 2)) and est.df == 2
    assert est.low < est.sigma < est.high
    rec = run_shift.recorded()
    assert rec.df == len(run_shift.pairs()) >= 8
    assert all({"first", "second", "host", "hours_apart", "shift_pct"} <= set(p) for p in run_shift.pairs())
    assert run_shift.for_profile("unknown") is None and run_shift.for_profile("recorded") == rec
    with pytest.raises(ValueError, match="run_shift must be one of"):
        run_shift.for_profile("3.3")
    assert "unknown" in run_shift.describe(None) and f"{rec.pct:.1f}%" in run_shift.describe(rec)


def test_each_page_says_whether_a_re_run_interval_is_known():
    from studylib.studies import common

    rng = np.random.default_rng(8)
    for shift, says in ((run_shift.recorded(), "same-host re-run pairs"), (None, "is unknown")):
        frame = pd.DataFrame(variance.with_reported_ci(_run(rng, groups=4, shift=shift)[0]))
        frame = frame.assign(drift=False, max_abs_diff=0.0)
        text = " ".join(common.drift_lines(frame))
        assert says in text, text
        table = common.add_timing_columns(frame)
        assert (table["95% CI (re-run here)"] == "unknown").all() == (shift is None)


def test_the_table_stores_the_runs_interval_and_reports_the_models(tmp_path):
    table = ResultsTable(tmp_path / "t.jsonl")
    for row in _run(np.random.default_rng(5), groups=3)[0]:
        table.append(stored_row(**row))
    stored = next(iter(table.latest().values()))
    assert "ci_low_s" not in stored and stored["ci_run_low_s"] is not None
    frame = table.frame()
    assert {"ci_low_s", "ci_high_s", "rerun_low_s", "rerun_high_s", "se_log", "df_log", "heterogeneous",
            "process_spread_pct"} <= set(frame.columns)


def test_a_speedups_variance_parts_add_up_to_its_standard_error():
    """speedup_parts splits what speedup_estimate uses: SE² = (v̄ + τ²)/k, v̄ from the rounds, τ² beyond them."""
    rng = np.random.default_rng(6)
    rows = variance.with_reported_ci(_run(rng, own_sd=0.03)[0])
    for base, cand in ((rows[0], rows[1]), (rows[3], rows[5])):
        p = design.speedup_parts(base, cand)
        e, paired, _ = variance.speedup_estimate(base, cand)
        assert paired and p.k == 3 and p.v > 0 and p.tau2 > 0
        assert e.se ** 2 == pytest.approx((p.v + p.tau2) / p.k)
        se, df = design.projected([p], 3, 1.0)  # the design measured: its own SE and degrees of freedom back
        assert se[0] == pytest.approx(e.se) and df[0] == pytest.approx(e.df)
    other = dict(rows[1], group_id="another")  # not timed in the same rounds: no paired parts
    assert design.speedup_parts(rows[0], other) is None


def test_a_projected_design_scales_each_parts_degrees_of_freedom_and_a_rerun_doubles_them():
    """Five processes instead of three: the rounds' part rests on 5/3 the values, τ²'s on 4 replicate differences
    instead of 2 (the projection kept three processes' degrees of freedom before); a re-run's difference of two
    speed-ups has √2 their SE at twice their degrees of freedom (one run's were used before)."""
    p = design.Parts(v=0.02 ** 2, tau2=0.02 ** 2, k=3, df_within=21.0, tau_df=2.0)
    se, df = design.projected([p], 5, 1.0)
    within, between = (0.02 ** 2 / 5, 24 * 5 / 3 - 5), (0.02 ** 2 / 5, 4.0)
    assert se[0] == pytest.approx(np.sqrt(within[0] + between[0]))
    assert df[0] == pytest.approx(variance.satterthwaite([within, between])) and df[0] > 2 * 3.0
    se2, df2 = design.projected([p], 3, 2.0)  # twice the rounds: the rounds' part halves, τ²'s df stays
    assert se2[0] == pytest.approx(np.sqrt(0.02 ** 2 / 6 + 0.02 ** 2 / 3))
    assert df2[0] == pytest.approx(variance.satterthwaite([(0.02 ** 2 / 6, 48 - 3), (0.02 ** 2 / 3, 2.0)]))
    got = design.rerun_reproduced([p], 5, 1.0)
    one_run = float(calibration.reproduction_probability(np.sqrt(2) * se, df)[0])
    assert got == pytest.approx(float(calibration.reproduction_probability(np.sqrt(2) * se, 2 * df)[0]))
    assert got > one_run  # twice the degrees of freedom: a narrower t, more comparisons shown to agree
