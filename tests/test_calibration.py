"""`compare --check`: a re-run judged against the reference's intervals, on a simulated machine (no torch).

Two runs of the same profile are drawn from one simulated machine: every group's variants share a drift per round,
and each call has noise of its own. Honest intervals pass the check; the same runs with every interval shrunk to a
quarter (samples pulled towards their median) fail it, and the command exits 1."""

import json

import numpy as np
import pytest

from studylib.__main__ import main
from studylib.core import calibration, stats
from studylib.report.compare import compare

NB = "01_eager_vs_compiled"
ROUNDS = 40
TRUE = {"eager": 0.100, "compiled": 0.080, "fast": 0.050}


def _run(rng, *, shrink: float = 1.0, groups: int = 40) -> list[dict]:
    rows = []
    for g in range(groups):
        drift = np.exp(rng.normal(0, 0.05, ROUNDS))  # the machine's phase, common to a round
        for variant, t in TRUE.items():
            x = t * (1 + g / 100) * drift * np.exp(rng.normal(0, 0.02, ROUNDS))
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
    rows = {("n", k): {"ci_low_s": 0.9, "ci_high_s": 1.1} for k in "abc"}
    t = calibration.median_z(medians, rows, rows)
    assert np.allclose(t.z, 0) and t.attrs["shift_log"] == pytest.approx(np.log(1.1))


def test_reproduction_is_judged_against_the_tolerance():
    import pandas as pd

    pairs = pd.DataFrame({"ref_ratio": [1.5, 1.5, 1.5], "ref_ci_low": [1.49, 1.49, 1.2],
                          "ref_ci_high": [1.51, 1.51, 1.9], "new_ratio": [1.52, 2.0, 1.6],
                          "new_ci_low": [1.51, 1.98, 1.3], "new_ci_high": [1.53, 2.02, 2.0]})
    t = calibration.speedup_z(pairs)
    assert list(t.reproduction) == ["reproduced", "not reproduced", "inconclusive"]


def test_reproduction_is_the_two_one_sided_tests():
    """Equivalence at 5% is two one-sided tests: the difference's 90% CI inside ±tolerance. Two speed-ups 5% apart
    with a difference SE of 2.5% are reproduced within ±10% (90% CI 0.9–9.1%), though the 95% CI (to 9.9% on the log
    scale, 10.4% as a ratio) would reach past the tolerance."""
    import pandas as pd

    se = 0.025 / np.sqrt(2)  # each run's log SE: the difference's is 2.5%
    h = calibration.Z * se

    def side(ratio):
        return ratio, ratio * np.exp(-h), ratio * np.exp(h)

    (r, rl, rh), (n, nl, nh) = side(1.5), side(1.5 * np.exp(0.05))
    t = calibration.speedup_z(pd.DataFrame({"ref_ratio": [r], "ref_ci_low": [rl], "ref_ci_high": [rh],
                                            "new_ratio": [n], "new_ci_low": [nl], "new_ci_high": [nh]}))
    assert t.se_log.iloc[0] == pytest.approx(0.025)
    assert 0.05 + calibration.Z * 0.025 > np.log1p(calibration.TOLERANCE)  # the 95% CI would not fit
    assert list(t.reproduction) == ["reproduced"]
