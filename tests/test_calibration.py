"""`compare --check`: a re-run judged against the reference's intervals, on a simulated machine (no torch).

Two runs of the same profile are drawn from one simulated machine: every group's variants share a drift per round,
and each call has noise of its own. Honest intervals pass the check, narrow or wide; the same runs with every interval
shrunk to a quarter (samples pulled towards their median) fail it, and so does a re-run in which one variant became 8%
slower: the command exits 1."""

import json

import numpy as np
import pytest
from scipy import stats as _st

from studylib.__main__ import main
from studylib.report.compare import compare
from studylib.stats import calibration, stats
from studylib.stats.measurement import Measurement

NB = "01_eager_vs_compiled"
ROUNDS = 40
TRUE = {"eager": 0.100, "compiled": 0.080, "fast": 0.050}


def _run(rng, *, shrink: float = 1.0, groups: int = 40, noise: float = 0.02, change: dict | None = None) -> list[dict]:
    """One run's rows; `change`: a variant's true time multiplied by this factor (a real change between runs)."""
    rows = []
    for g in range(groups):
        drift = np.exp(rng.normal(0, 0.05, ROUNDS))  # the machine's phase, common to a round
        for variant, t in TRUE.items():
            t = t * (change or {}).get(variant, 1.0)
            x = t * (1 + g / 100) * drift * np.exp(rng.normal(0, noise, ROUNDS))
            med = float(np.median(x))
            x = med * (x / med) ** shrink
            lo, hi = stats.median_ci(x)
            rows.append({"study": NB, "profile": "cpu", "config_key": f"m{g}|{variant}", "variant": variant,
                         "model": f"m{g}", "dtype": "fp32", "batch_size": 1, "seq_len": 8, "image_size": None,
                         "status": "ok", "median_s": med, "ci_low_s": lo, "ci_high_s": hi, "samples_s": list(x),
                         "sample_rep": [0] * ROUNDS, "sample_round": list(range(ROUNDS)), "group_id": f"g{g}",
                         "group_key": f"m{g}"})
    return rows


def _write(folder, rows):
    folder.mkdir(parents=True)
    (folder / f"{NB}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "env.json").write_text(json.dumps({"profile": "cpu"}))
    return folder


@pytest.fixture
def runs(tmp_path):
    def make(shrink):
        rng = np.random.default_rng(7)
        return (_write(tmp_path / f"ref{shrink}", _run(rng, shrink=shrink)),
                _write(tmp_path / f"new{shrink}", _run(rng, shrink=shrink)))
    return make


def test_an_honest_pair_passes_the_check(runs, capsys):
    ref, new = runs(1.0)
    c = compare(ref, new).calibration
    s = c.summary
    assert 0.5 <= s["speedup_mean_z2"] <= 1.5 and s["speedup_share_z_over_1_96"] <= 0.10
    assert s["reversed"] == 0 and s["reproduced_share_of_decided"] >= 0.85
    assert s["reproduced_below_expected_p"] > calibration.CHECK_ALPHA
    assert s["not_reproduced_beyond_chance_p"] > calibration.CHECK_ALPHA
    assert c.failures() == []
    assert main(["compare", str(ref), str(new), "--check"]) == 0
    assert "check: every figure inside its limits" in capsys.readouterr().out


def test_intervals_shrunk_to_a_quarter_fail_the_check(runs, capsys):
    ref, new = runs(0.25)
    c = compare(ref, new).calibration
    assert c.summary["speedup_mean_z2"] > 4  # differences ~4x their stated standard errors: z² ~ 16
    assert any(f.startswith("speedup_mean_z2") for f in c.failures())
    assert main(["compare", str(ref), str(new), "--check"]) == 1
    assert "OUTSIDE the limits" in capsys.readouterr().out
    assert main(["compare", str(ref), str(new)]) == 0  # without --check the figures are information


def test_a_real_eight_percent_change_in_one_variant_fails_the_check(tmp_path, capsys):
    """The re-run's "fast" variant is 8% slower in truth, the rest unchanged: two of each group's three comparisons
    move by 8%, far beyond their stated standard errors (about 0.8% for a difference), and fewer are reproduced within
    ±10% than the widths predict. No verdict reverses, so a check on reversals alone would pass it."""
    rng = np.random.default_rng(7)
    ref = _write(tmp_path / "ref", _run(rng))
    new = _write(tmp_path / "new", _run(rng, change={"fast": 1.08}))
    c = compare(ref, new).calibration
    s = c.summary
    assert s["reversed"] == 0
    failed = {f.split(" ")[0] for f in c.failures()}
    assert {"speedup_mean_z2", "speedup_share_z_over_1_96", "reproduced_below_expected_p"} <= failed, failed
    assert s["reproduced_share_of_decided"] < s["reproduced_expected_of_decided"] - 0.1
    assert main(["compare", str(ref), str(new), "--check"]) == 1
    assert "OUTSIDE the limits" in capsys.readouterr().out


def decided(t):
    """speedup_z's rows as the reference's decided comparisons (one group per row: independent speed-ups)."""
    return t.assign(ref_verdict="faster", notebook="n", group=[f"g{i}" for i in range(len(t))], a="x", b="y")


def test_reproduced_below_what_the_widths_predict_fails_though_mean_z2_is_inside_its_limits():
    """Differences 1.15 times as large as the intervals say: mean z² about 1.3, inside [0.5, 1.5], but over 1,000
    independent comparisons the share reproduced within ±10% (about 87%) lies significantly below the 92% the widths
    predict."""
    rng = np.random.default_rng(5)
    se, n = 0.02, 1000
    new = 1.5 * np.exp(rng.normal(0, 1.15 * se * np.sqrt(2), n))
    t = decided(calibration.speedup_z(pairs_of(np.full(n, 1.5), new, se, df=1e6)))
    assert 0.5 < np.mean(t.z ** 2) < 1.5
    got = calibration.binomial_tests(t)
    assert got["effective"] == n
    assert got["reproduced_below_expected_p"] < calibration.CHECK_ALPHA
    assert got["not_reproduced_beyond_chance_p"] > calibration.CHECK_ALPHA
    honest = decided(calibration.speedup_z(pairs_of(np.full(n, 1.5), 1.5 * np.exp(
        rng.normal(0, se * np.sqrt(2), n)), se, df=1e6)))
    assert calibration.binomial_tests(honest)["reproduced_below_expected_p"] > calibration.CHECK_ALPHA


def test_not_reproduced_more_often_than_chance_fails():
    """Calibrated intervals call a comparison not reproduced (its 90% CI wholly beyond ±10%) almost never when nothing
    changed; three of 200 comparisons 30% apart are far beyond that chance."""
    se = 0.02
    new = np.full(200, 1.5)
    new[:3] = 1.5 * 1.3
    t = decided(calibration.speedup_z(pairs_of(np.full(200, 1.5), new, se)))
    assert (t.reproduction == "not reproduced").sum() == 3 and t.not_reproduced_chance.max() < 1e-3
    assert calibration.binomial_tests(t)["not_reproduced_beyond_chance_p"] < 1e-6
    assert calibration.binomial_tests(t.iloc[3:])["not_reproduced_beyond_chance_p"] == 1.0


def test_a_groups_comparisons_count_as_its_independent_speed_ups():
    """Four variants in a group give six pairs but three independent speed-ups; a group of two gives one."""
    import pandas as pd

    four = [("g", a, b) for i, a in enumerate("wxyz") for b in "wxyz"[i + 1:]]
    pairs = pd.DataFrame([*four, ("h", "p", "q")], columns=["group", "a", "b"]).assign(notebook="n")
    assert calibration.effective_comparisons(pairs) == 3 + 1
    assert calibration.effective_comparisons(pairs.drop(columns="group")) == 7  # no groups known: each counts


def test_the_common_shift_is_removed_before_the_medians_z():
    import pandas as pd

    medians = pd.DataFrame({"notebook": ["n"] * 3, "config_key": ["a", "b", "c"], "ref_median_s": [1.0, 2.0, 4.0],
                            "new_median_s": [1.1, 2.2, 4.4]})
    rows = {("n", k): Measurement.of({"se_log": 0.05, "df_log": 10.0}) for k in "abc"}
    t = calibration.median_z(medians, rows, rows)
    assert np.allclose(t.z, 0) and t.attrs["shift_log"] == pytest.approx(np.log(1.1))


def pairs_of(ref, new, se, df=1e6):
    """compare_pairs' columns for speed-ups `ref` and `new` (lists), each with log SE `se` at `df` degrees of freedom and
    its 95% CI."""
    import pandas as pd

    q = float(_st.t.ppf(0.975, df))
    cols = {}
    for run, ratios in (("ref", ref), ("new", new)):
        r = np.asarray(ratios, dtype=float)
        e = np.broadcast_to(np.asarray(se, dtype=float), r.shape)
        cols |= {f"{run}_ratio": r, f"{run}_ci_low": r * np.exp(-q * e), f"{run}_ci_high": r * np.exp(q * e),
                 f"{run}_se": e, f"{run}_df": np.full(r.shape, float(df))}
    return pd.DataFrame(cols)


def test_reproduction_is_judged_against_the_tolerance():
    t = calibration.speedup_z(pairs_of([1.5, 1.5, 1.5], [1.52, 2.0, 1.6], [0.005, 0.005, 0.08]))
    assert list(t.reproduction) == ["reproduced", "not reproduced", "undecided"]


def test_reproduction_is_the_two_one_sided_tests():
    """Equivalence at 5% is two one-sided tests: the difference's 90% CI inside ±tolerance. Two speed-ups 5% apart
    with a difference SE of 2.5% are reproduced within ±10% (90% CI 0.9–9.1%), though the 95% CI (to 9.9% on the log
    scale, 10.4% as a ratio) would reach past the tolerance."""
    se = 0.025 / np.sqrt(2)  # each run's log SE: the difference's is 2.5%
    t = calibration.speedup_z(pairs_of([1.5], [1.5 * np.exp(0.05)], se))
    assert t.se_log.iloc[0] == pytest.approx(0.025)
    assert 0.05 + calibration.Z * 0.025 > np.log1p(calibration.TOLERANCE)  # the 95% CI would not fit
    assert list(t.reproduction) == ["reproduced"]


def test_few_degrees_of_freedom_widen_the_tost_and_keep_z_calibrated():
    """The same difference and SEs at 3 degrees of freedom each: the 90% CI uses t (Satterthwaite's 6 for the
    difference), too wide for ±10%, so the pair is undecided; z is the normal quantile of the t statistic's
    probability, smaller than the t statistic itself."""
    se = 0.025 / np.sqrt(2)
    t = calibration.speedup_z(pairs_of([1.5], [1.5 * np.exp(0.05)], se, df=3))
    assert t.df.iloc[0] == pytest.approx(6.0)
    assert list(t.reproduction) == ["undecided"]
    assert t.z.iloc[0] == pytest.approx(_st.norm.isf(_st.t.sf(2.0, 6)))
    assert 0 < t.z.iloc[0] < 2.0


def test_z_of_a_t_statistic_is_standard_normal_under_calibration():
    """Differences drawn at their stated SE and t(4) noise: the t statistics' mean square is 4/(4-2) = 2, the
    transformed z's is 1."""
    rng = np.random.default_rng(0)
    t = rng.standard_t(4, 200_000)
    z = calibration.z_of(t, 4)
    assert np.mean(t ** 2) == pytest.approx(2.0, rel=0.1)
    assert np.mean(z ** 2) == pytest.approx(1.0, abs=0.02)


def test_the_expected_reproduction_share_is_what_the_tost_gives_when_nothing_changed():
    """Re-run speed-ups drawn at their stated SEs around an unchanged truth: the share the TOST calls reproduced is the
    expected one, for narrow intervals (nearly all), wide ones (few) and intervals so wide the TOST cannot pass."""
    rng = np.random.default_rng(3)
    for se, lo, hi in ((0.01, 0.99, 1.0), (0.03, 0.3, 0.9), (0.06, 0.0, 0.0)):
        ref = np.full(20_000, 1.5)
        new = ref * np.exp(rng.normal(0, se * np.sqrt(2), ref.size))  # both runs' noise: the difference's SE √2·se
        t = calibration.speedup_z(pairs_of(ref, new, se, df=30))
        expected = float(t.reproduction_expected.iloc[0])
        assert lo <= expected <= hi
        assert (t.reproduction == "reproduced").mean() == pytest.approx(expected, abs=0.015)


def test_compare_says_how_much_reproduction_the_intervals_widths_allow(tmp_path, capsys):
    """Calls five times noisier than the other tests' (speed-up CIs about ±5%): about half the comparisons can be
    shown to agree within ±10%, and on an honest pair the observed share is near the share the widths predict. compare
    prints both, so a shortfall reads as intervals too wide (the expected share low too) or runs that disagree (the
    observed share below it)."""
    rng = np.random.default_rng(11)
    ref, new = (_write(tmp_path / name, _run(rng, noise=0.10)) for name in ("ref", "new"))
    c = compare(ref, new).calibration
    s = c.summary
    n = s["decided"]
    assert n >= 100 and 0.3 < s["reproduced_expected_of_decided"] < 0.8
    assert abs(s["reproduced_share_of_decided"] - s["reproduced_expected_of_decided"]) < 3 * np.sqrt(0.25 / n)
    assert c.failures() == []  # the check tests agreement, not width: wide honest intervals pass it
    main(["compare", str(ref), str(new)])
    assert "expected from the intervals' widths alone" in capsys.readouterr().out
