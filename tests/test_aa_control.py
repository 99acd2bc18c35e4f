"""The A/A control every study shows: eager-aa over eager per shape, its false-positive count and noise floor."""

import numpy as np
import pandas as pd
import pytest

from studylib import speedups
from studylib.studies import common


def _rows(batch: int, aa_factor: float, rng, n: int = 20) -> list[dict]:
    """eager and eager-aa of one shape, timed in the same 20 rounds on a machine whose speed drifts by round."""
    drift = 1 + 0.3 * np.sin(np.arange(n) / 3)  # common to both variants within a round
    eager = 0.01 * drift * (1 + 0.01 * rng.standard_normal(n))
    aa = 0.01 * aa_factor * drift * (1 + 0.01 * rng.standard_normal(n))
    base = {"model": "m", "dtype": "fp32", "batch_size": batch, "status": "ok", "group_id": f"g{batch}",
            "group_key": f"m|fp32|b{batch}", "sample_rep": [0] * n, "sample_round": list(range(n))}
    return [base | {"variant": "eager", "samples_s": list(eager)},
            base | {"variant": "eager-aa", "samples_s": list(aa)},
            base | {"variant": "other", "samples_s": list(eager / 2)}]


def test_identical_copies_are_not_called_different_and_keep_the_fixed_band():
    rng = np.random.default_rng(0)
    df = pd.DataFrame([r for b in (1, 2, 4, 8) for r in _rows(b, 1.0, rng)])
    aa = speedups.aa_pairs(df)
    assert len(aa) == 4 and not aa.significant.any()
    assert aa.speedup.between(0.98, 1.02).all()  # drift common to a round cancels in the paired ratio
    assert speedups.band(df) == speedups.EQUIVALENCE
    text = common.aa_finding(df)
    assert "called different from eager in 0 of 4 shapes (false-positive rate 0%" in text
    assert "within the fixed ±5% band" in text


def test_a_copy_that_differs_is_counted_and_widens_the_equal_band():
    rng = np.random.default_rng(1)
    df = pd.DataFrame([r for b, f in ((1, 1.0), (2, 1.0), (4, 1.08), (8, 1.0)) for r in _rows(b, f, rng)])
    aa = speedups.aa_pairs(df)
    assert aa.significant.sum() == 1 and aa.set_index("batch_size").loc[4].significant
    band = speedups.band(df)
    assert band == pytest.approx(1.08, rel=0.01)
    assert "called different from eager in 1 of 4 shapes (false-positive rate 25%" in common.aa_finding(df)
    assert "widens to ±8" in common.aa_finding(df)
    # a speed-up of 1.06 with a tight CI is 'faster' under the fixed band, 'equal' under the A/A floor
    assert speedups.verdict(1.055, 1.065) == "faster" and speedups.verdict(1.055, 1.065, band) == "equal"


def test_no_control_row_is_said_not_hidden():
    rng = np.random.default_rng(2)
    df = pd.DataFrame([r for r in _rows(1, 1.0, rng) if r["variant"] != "eager-aa"])
    aa = speedups.aa_pairs(df)
    assert aa.empty and speedups.band(df) == speedups.EQUIVALENCE
    assert "No A/A control was measured" in common.aa_finding(df)


def test_drift_is_reported_with_its_size():
    ok = pd.DataFrame([{"status": "ok", "drift": True, "drift_pct": 0.12},
                       {"status": "ok", "drift": False, "drift_pct": 0.0},
                       {"status": "error", "drift": None, "drift_pct": None}])
    text = common.drift_finding(ok)
    assert text.startswith("Drift: 1 of 2 configurations") and "+12%" in text
    assert common.drift_finding(ok.assign(drift=False)).startswith("Drift: no configuration")
