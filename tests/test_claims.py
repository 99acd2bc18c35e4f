"""The claims registry and its judging rules: comparability, magnitude verdicts and totals, on synthetic rows."""

import numpy as np
import pandas as pd
import pytest

from studylib import claims
from studylib.studies import onnx_batching as s03

rng = np.random.default_rng(3)


def _row(variant, batch, median, device="cpu"):
    samples = list(rng.normal(median, median * 0.01, 20))
    return {"model": "distilroberta-classifier", "dtype": "fp32", "variant": variant, "batch_size": batch,
            "strategy": "unsorted", "device": device, "threads": 2, "seq_len": 128, "n_texts": 100, "status": "ok",
            "error": "", "samples_s": samples, "median_s": float(np.median(samples)), "ci_low_s": median * 0.99,
            "ci_high_s": median * 1.01, "label_agreement": 1.0}


@pytest.fixture
def rows():
    """ONNX Runtime 1.5× eager at batch 1 and 8, equal at 32; TorchScript equal throughout."""
    out = []
    for batch, eager in ((1, 2.0), (8, 1.0), (32, 1.2)):
        out += [_row("eager", batch, eager), _row("torchscript", batch, eager),
                _row("ort", batch, eager / (1.5 if batch < 32 else 1.0))]
    return pd.DataFrame(out)


def _claim(cid, expect, number=None, device="cpu", batches=(1, 8), **extra):
    return claims.Claim.model_validate({
        "id": cid, "seed": "003", "where": "test", "words": cid, "number": number, "expect": expect,
        "scale": "ONNX Runtime over eager at batch 1 and 8, the least favourable", "study": "03_onnx_batching",
        "evaluator": "worst_gain", "args": {"variants": ["ort"], "below": 32},
        "conditions": {"device": device, "hardware": "a test machine", "ran_on": [device],
                       "models": ["distilroberta-classifier"], "models_text": "DistilRoBERTa", "precision": ["fp32"],
                       "batch_sizes": list(batches), "seq_lens": [128], "texts": 100, "software": "test"}} | extra)


def _table(rows, *registry):
    same, over1 = s03.speedups_same_batch(rows), s03.speedups_over_batch1(rows)
    return claims.study_claims(s03.NOTEBOOK, rows, {"same batch": same, "over batch 1": over1},
                               claims=registry).set_index("id")


def test_the_registry_holds_every_seed_with_conditions_and_a_test_or_a_why_not():
    registry = claims.load()  # validates every field and finds every evaluator in its study module
    assert len(registry) >= 25 and {c.seed for c in registry} == set(claims.SEEDS)
    for c in registry:
        cond = c.conditions
        assert cond.hardware and cond.models_text and cond.precision and cond.software, c.id
        assert (c.study and c.evaluator and callable(claims.evaluator(c))) or c.why_not, c.id
    assert len({c.id for c in registry}) == len(registry)


def test_the_seeds_arithmetic_is_computed_not_typed():
    assert claims.arithmetic("0.748 / 0.823") == pytest.approx(0.9089, abs=1e-4)
    assert claims.arithmetic("1 / (1 - 0.70)") == pytest.approx(3.333, abs=1e-3)
    with pytest.raises(ValueError):
        claims.arithmetic("__import__('os')")


def test_a_malformed_registry_names_the_file_the_claim_and_the_field(tmp_path):
    bad = tmp_path / "claims.yaml"
    bad.write_text("- {id: x-1, seed: '003', where: w, words: w, expect: faster, scale: s, why_not: n,\n"
                   "   conditions: {device: cpu, hardware: h, models_text: m, precision: [fp32], software: s}}\n")
    with pytest.raises(claims.ClaimError, match=r"claims.yaml: claims.0 \(x-1\): expect: Input should be"):
        claims.load(bad)
    bad.write_text("- {id: x-2, seed: '003', where: w, words: w, expect: higher, scale: s,\n"
                   "   conditions: {device: cpu, hardware: h, models_text: m, precision: [fp32], software: s}}\n")
    with pytest.raises(claims.ClaimError, match=r"claims.0 \(x-2\): \(claim\): Value error, needs a study"):
        claims.load(bad)


def test_magnitude_inside_outside_and_reversed(rows):
    t = _table(rows, _claim("inside", "higher", 1.5), _claim("outside", "higher", 3.0),
               _claim("reversed", "lower"), _claim("no-size", "higher"))
    assert t.loc["inside", "verdict"] == "agrees: the seed's 1.5 lies inside our CI"
    assert t.loc["outside", "judgement"] == "agrees in direction only"
    assert t.loc["outside", "verdict"].startswith("direction agrees, size does not: our effect is smaller than the seed's 3")
    assert t.loc["reversed", "verdict"] == "does not agree: the direction differs"
    assert t.loc["no-size", "verdict"] == "agrees in direction (the seed gives no size)"
    assert (t["comparable?"] == "same").all()  # the seed's model, precision, sizes and texts
    assert "1.5" in t.loc["inside", "our measurement (95% CI)"] and "95% CI" in t.loc["inside", "our measurement (95% CI)"]


def test_equality_uses_the_noise_band_or_the_seeds_tolerance():
    m = claims.Measurement(1.02, 0.99, 1.04, "x", band=1.05)
    equal = _claim("eq", "equal")
    assert claims.judge(equal, m) == ("agrees", "agrees: equal within ±5% (the A/A noise band)")
    assert claims.judge(equal, claims.Measurement(1.3, 1.2, 1.4, "x"))[0] == "does not agree"
    assert claims.judge(equal, claims.Measurement(1.04, 0.99, 1.09, "x"))[0] == "inconclusive"
    wide = _claim("eq10", "equal", tolerance=1.10)
    assert claims.judge(wide, claims.Measurement(1.04, 0.99, 1.09, "x"))[1].startswith(
        "agrees: equal within ±10% (the seed's tolerance)")
    noisy = claims.Measurement(1.06, 1.02, 1.09, "x", band=1.12)  # a direction claim inside the A/A band
    assert claims.judge(_claim("h", "higher", 1.3), noisy) == (
        "does not agree", "does not agree: equal within noise (±12% (the A/A noise band)) here")


def test_comparability_same_partly_and_not_comparable(rows):
    t = _table(rows, _claim("gpu", "higher", 1.5, device="cuda"), _claim("sizes", "higher", 1.5, batches=(16, 64)))
    gpu = t.loc["gpu"]
    assert gpu["comparable?"].startswith("not comparable: device: seed a test machine, here cpu")
    assert gpu.judgement == "not comparable on this profile"
    assert gpu.verdict.startswith("not comparable on this profile (GPU claim); tested by gpu-")
    assert not gpu.verdict.startswith(("agrees", "does not agree"))
    sizes = t.loc["sizes"]
    assert sizes["comparable?"] == "partly: batch: seed 16, 64, here 1, 8"
    assert sizes.verdict.endswith("(partly comparable)") and sizes.judgement == "agrees"
    level, diffs = claims.comparability(_claim("c", "higher", caveats=["eager here, compiled in the seed"]), "cpu")
    assert (level, diffs) == ("partly", ["eager here, compiled in the seed"])


def test_totals_count_only_judged_claims_and_match_the_table(rows):
    why_not = _claim("untested", "higher", why_not="needs TensorRT").model_copy(update={"evaluator": None})
    t = _table(rows, _claim("inside", "higher", 1.5), _claim("reversed", "lower"), _claim("sizes", "higher", 9.0,
               batches=(16,)), _claim("gpu", "higher", device="cuda"), why_not).reset_index()
    totals = claims.totals(t)
    assert totals["judged"] == 3 and totals["partly"] == 1 and totals["same"] == 2
    assert (totals["agrees"], totals["agrees in direction only"], totals["does not agree"]) == (1, 1, 1)
    assert totals["not comparable on this profile"] == 1 and totals["not tested by this study"] == 1
    assert totals["claims"] == len(t) == sum(totals[k] for k in claims.JUDGED + claims.NOT_JUDGED)
    line = claims.totals_line(t, "cpu")
    assert line.startswith("Claims on cpu: 3 of 5 judged (2 under the seed's conditions, 1 partly comparable) — 1 agree")
    assert "1 not comparable on this profile" in line
