"""The A/A controls every study shows: each `<variant>-aa` over its original per shape, the false positives, the
calibration of the CIs and the noise floor; no A/A copy is ever an option."""

import numpy as np
import pandas as pd
import pytest

from studylib.stats import speedups
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
    text = common.aa_finding(df)
    assert "called different from eager in 0 of 4 shapes (false-positive rate 0%" in text
    assert "within the fixed ±5% band" in text


def test_a_copy_that_differs_is_counted_and_does_not_move_the_band():
    rng = np.random.default_rng(1)
    df = pd.DataFrame([r for b, f in ((1, 1.0), (2, 1.0), (4, 1.08), (8, 1.0)) for r in _rows(b, f, rng)])
    aa = speedups.aa_pairs(df)
    assert aa.significant.sum() == 1 and aa.set_index("batch_size").loc[4].significant
    # the band is a fixed ±5%: an extreme A/A ratio (which grows with the number of controls) does not widen it
    assert "called different from eager in 1 of 4 shapes (false-positive rate 25%" in common.aa_finding(df)
    assert "within the fixed ±5% band" in common.aa_finding(df)
    assert speedups.verdict(1.055, 1.065) == "faster"


def test_no_control_row_is_said_not_hidden():
    rng = np.random.default_rng(2)
    df = pd.DataFrame([r for r in _rows(1, 1.0, rng) if r["variant"] != "eager-aa"])
    aa = speedups.aa_pairs(df)
    assert aa.empty
    assert "No A/A control was measured" in common.aa_finding(df)


def test_drift_is_reported_with_its_size():
    ok = pd.DataFrame([{"status": "ok", "drift": True, "drift_pct": 0.12},
                       {"status": "ok", "drift": False, "drift_pct": 0.0},
                       {"status": "error", "drift": None, "drift_pct": None}])
    text = " ".join(common.drift_lines(ok))
    assert text.startswith("Drift: 1 of 2 configurations") and "+12%" in text
    assert common.drift_lines(ok.assign(drift=False))[0].startswith("Drift: no configuration")


def _copies(rng, factors: dict[str, float], n: int = 20) -> list[dict]:
    """Several runtimes and their A/A copies at one batch size each of 1, 2, 4 and 8 (`factors`: copy over original)."""
    rows = []
    for b in (1, 2, 4, 8):
        drift = 1 + 0.3 * np.sin(np.arange(n) / 3)
        base = {"model": "m", "dtype": "fp32", "batch_size": b, "status": "ok", "group_id": f"g{b}",
                "group_key": f"m|fp32|b{b}", "sample_rep": [0] * n, "sample_round": list(range(n))}
        for i, (v, f) in enumerate(factors.items()):
            t = 0.01 * (i + 1) * drift
            for name, times in ((v, t), (f"{v}-aa", f * t)):
                samples = times * (1 + 0.01 * rng.standard_normal(n))
                rows.append(base | {"variant": name, "samples_s": list(samples), "median_s": float(np.median(samples))})
    return rows


def test_every_aa_copy_is_paired_with_its_own_original():
    df = pd.DataFrame(_copies(np.random.default_rng(3), {"eager": 1.0, "torchscript": 1.0, "ort": 1.12}))
    aa = speedups.aa_pairs(df)
    assert len(aa) == 12 and sorted(aa.runtime.unique()) == ["eager", "ort", "torchscript"]
    assert (aa.candidate == aa.runtime + "-aa").all() and (aa.baseline == aa.runtime).all()
    fp = aa.groupby("runtime").significant.sum()
    # ort's copy is 12% off: always called different; the true copies at most once in 8 (95% CIs, random data)
    assert fp["ort"] == 4 and fp["eager"] + fp["torchscript"] <= 1
    text = common.aa_finding(df)
    assert "eager-aa, torchscript-aa, ort-aa" in text
    assert (f"in {fp.sum()} of 12 pairs (eager {fp['eager']} of 4, torchscript {fp['torchscript']} of 4, ort 4 of 4)"
            in text)


def test_no_aa_copy_is_a_candidate_or_an_option():
    from studylib.stats import verdicts

    df = pd.DataFrame(_copies(np.random.default_rng(4), {"eager": 1.0, "ort": 0.5}))  # ort-aa would be fastest
    assert not speedups.pair_table(df, None).candidate.str.endswith("-aa").any()
    assert [r.variant for r, _ in speedups.matched(df, None, "eager")] == ["ort"] * 4
    assert set(speedups.without_aa(df).variant) == {"eager", "ort"}
    vt = verdicts.compute("t", df.assign(status="ok"))
    assert len(vt.options()) == 4 and not any("-aa" in v.candidate or "-aa" in v.baseline for v in vt)


def _pairs(ratios, halves) -> pd.DataFrame:
    """A/A pairs with these ratios and CI half-widths on the log scale."""
    r, h = np.asarray(ratios, float), np.asarray(halves, float)
    return pd.DataFrame({"speedup": r, "ci_low": r * np.exp(-h), "ci_high": r * np.exp(h),
                         "significant": (r * np.exp(-h) > 1) | (r * np.exp(h) < 1)})


def test_the_calibration_counts_false_positives_with_an_exact_interval():
    from scipy.stats import binomtest

    h = 1.96 * 0.02  # every CI: SE 0.02 on the log scale
    pairs = _pairs([1.0] * 57 + [1.05, 0.95, 1.06], [h] * 60)
    cal = speedups.aa_calibration(pd.DataFrame(), pairs=pairs)
    assert (cal.n, cal.false_pos) == (60, 3) and cal.rate == pytest.approx(0.05)
    ci = binomtest(3, 60).proportion_ci(confidence_level=0.95, method="exact")
    assert (cal.rate_low, cal.rate_high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    for k, n in ((0, 31), (31, 31), (1, 2)):  # the edges: no false positive, all, tiny n
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        edge = speedups.aa_calibration(pd.DataFrame(), pairs=_pairs([1.2] * k + [1.0] * (n - k), [h] * n))
        assert (edge.false_pos, edge.rate_low, edge.rate_high) == (k, pytest.approx(ci.low), pytest.approx(ci.high))
    assert "3 of 60 A/A pairs called different (false-positive rate 5%, exact 95% CI 1%–14%" in cal.sentence()


def test_the_mean_z2_and_its_chi_square_interval():
    from scipy.stats import chi2, norm

    se = 0.02
    z = np.array([0.5, -1.0, 1.5, -2.0, 0.0, 1.0, -0.5, 2.5])  # z-scores of the log ratios
    pairs = _pairs(np.exp(z * se), [norm.ppf(0.975) * se] * len(z))  # SE = the CI's half-width / 1.96
    cal = speedups.aa_calibration(pd.DataFrame(), pairs=pairs)
    mean = float(np.mean(z ** 2))
    assert cal.n_z == 8 and cal.mean_z2 == pytest.approx(mean)
    assert cal.z2_low == pytest.approx(8 * mean / chi2.ppf(0.975, 8))
    assert cal.z2_high == pytest.approx(8 * mean / chi2.ppf(0.025, 8))
    assert cal.z2_low < mean < cal.z2_high
    # a pair without a finite CI counts as a pair but not in z²; no pair at all says so
    worse = pd.concat([pairs, pd.DataFrame({"speedup": [1.0], "ci_low": [np.nan], "ci_high": [np.nan],
                                            "significant": [False]})], ignore_index=True)
    assert (speedups.aa_calibration(pd.DataFrame(), pairs=worse).n, speedups.aa_calibration(
        pd.DataFrame(), pairs=worse).n_z) == (9, 8)
    empty = speedups.aa_calibration(pd.DataFrame())
    assert empty.n == 0 and empty.sentence() == "no A/A pair ran"


def test_an_aa_copy_is_its_variant_prepared_again_on_its_own_model():
    import torch

    from studylib import runtimes
    from studylib.workloads import models

    w = models.torch_workload("bert-tiny", batch_size=2, seq_len=8, seed=0)
    for name in ("eager", "torchscript"):
        original, copy = runtimes.get(name), runtimes.get(f"{name}-aa")
        assert (copy.name, copy.family, copy.framework) == (f"{name}-aa", original.family, original.framework)
        with original.context():
            a = original.prepare(w)
            out_a = a.call()
        with copy.context():
            b = copy.prepare(w)
            out_b = b.call()
            adapted = b.adapt(w.inputs)
        assert a.fn is not b.fn and all(x is not y for x, y in zip(a.inputs, b.inputs))
        assert all(x is not y and torch.equal(x, y) for x, y in zip(w.inputs, adapted))  # batches cloned too
        assert torch.allclose(out_a, out_b)
    # the copy's weights are its own: changing the original's leaves the copy's output as it was
    copy = runtimes.get("eager-aa")
    with copy.context():
        b = copy.prepare(w)
        before = b.call().clone()
    with torch.no_grad():
        for p in w.module.parameters():
            p.add_(1.0)
    with copy.context():
        assert torch.equal(b.call(), before)


def test_the_profiles_aa_setting_decides_which_copies_each_study_runs():
    from collections import Counter

    from studylib.bench import profiles
    from studylib.core import study_registry
    from studylib.core.config import is_aa, original_of

    def copies(name):
        loaded = profiles.load(name)
        out = Counter()
        for nb in loaded.notebooks():
            grid = study_registry.grid(loaded, nb)
            keys = {c.key for c in grid}
            for i, c in enumerate(grid):
                if is_aa(c.variant):
                    original = c.key.replace(f"|{c.variant}|", f"|{original_of(c.variant)}|")
                    assert original in keys and grid[i - 1].variant == original_of(c.variant)  # right after it
                    out[nb[:2], original_of(c.variant)] += 1
        return out

    smoke = copies("smoke")
    assert {r for _, r in smoke} == {"eager", "ort"} and smoke["03", "ort"] == 3  # one extra copy, in study 03
    cpu = copies("cpu")
    assert sum(cpu.values()) >= 60
    assert {r for _, r in cpu} == {"eager", "torchscript", "tf-function", "ort", "keras-jax-jit"}
    assert cpu["02", "tf-function"] == cpu["02", "eager"] == 14  # whole models and micro-ops alike
