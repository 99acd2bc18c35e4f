"""`compare --check`: a re-run judged against the reference's intervals, on a simulated machine (no torch).

Two runs of the same profile are drawn from one simulated machine: every group's variants share a drift per round,
and each call has noise of its own. Honest intervals pass the check; the same runs with every interval shrunk to a
quarter (samples pulled towards their median) fail it, and the command exits 1."""

import json

import numpy as np
import pytest
from scipy import stats as _st

from studylib.__main__ import main
from studylib.core import calibration, stats
from studylib.report.compare import compare

NB = "01_eager_vs_compiled"
ROUNDS = 40
TRUE = {"eager": 0.100, "compiled": 0.080, "fast": 0.050}


def _run(rng, *, shrink: float = 1.0, groups: int = 40, noise: float = 0.02) -> list[dict]:
    rows = []
    for g in range(groups):
        drift = np.exp(rng.normal(0, 0.05, ROUNDS))  # the machine's phase, common to a round
        for variant, t in TRUE.items():
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


def test_the_common_shift_is_removed_before_the_medians_z():
    import pandas as pd

    medians = pd.DataFrame({"notebook": ["n"] * 3, "config_key": ["a", "b", "c"], "ref_median_s": [1.0, 2.0, 4.0],
                            "new_median_s": [1.1, 2.2, 4.4]})
    rows = {("n", k): {"se_log": 0.05, "df_log": 10.0} for k in "abc"}
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
    assert list(t.reproduction) == ["reproduced", "not reproduced", "inconclusive"]


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
    difference), too wide for ±10%, so the pair is inconclusive; z is the normal quantile of the t statistic's
    probability, smaller than the t statistic itself."""
    se = 0.025 / np.sqrt(2)
    t = calibration.speedup_z(pairs_of([1.5], [1.5 * np.exp(0.05)], se, df=3))
    assert t.df.iloc[0] == pytest.approx(6.0)
    assert list(t.reproduction) == ["inconclusive"]
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
    s = compare(ref, new).calibration.summary
    n = s["decided"]
    assert n >= 100 and 0.3 < s["reproduced_expected_of_decided"] < 0.8
    assert abs(s["reproduced_share_of_decided"] - s["reproduced_expected_of_decided"]) < 3 * np.sqrt(0.25 / n)
    main(["compare", str(ref), str(new)])
    assert "expected from the intervals' widths alone" in capsys.readouterr().out
