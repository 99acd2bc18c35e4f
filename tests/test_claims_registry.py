"""The registry's corrections (issue 43): inferred conditions and our thresholds shown in the claims table, seed 000's
models and mode, the re-scoped and added claims; each evaluator changed or added there, on a small table."""

import numpy as np
import pandas as pd
import pytest

from studylib.claims import claims

BASE = ('seed: "001", where: w, original: 测试用的句子, words: w, basis: measured, scale: s, number_text: n, '
        "conditions: {device: cpu, hardware: h, models_text: m, precision: [fp32], software: s")
rng = np.random.default_rng(43)


def _registry() -> dict:
    return {c.id: c for c in claims.registry()}


# --- the registry ---------------------------------------------------------------------------------------------


def test_inferred_conditions_and_our_thresholds_are_marked_in_the_claims_table():
    r = _registry()
    volta, batching = claims.describe(r["001-nhwc-volta"]), claims.describe(r["003-batching-speeds-up"])
    assert "fp16 (inferred)" in volta and "(inferred)" not in volta.replace("fp16 (inferred)", "")
    assert "seq 512 (inferred)" in batching and "batch 1, 2, 4, 8, 16, 32, 64 ×" in batching
    assert "«显著 (significant)» read as at least 1.2× (our threshold, not the seed's)" in batching
    assert "our threshold" not in claims.describe(r["000-torchscript-20pct"])  # no magnitude word, no threshold
    for c in r.values():  # every magnitude word's threshold is shown beside the claim
        assert (c.magnitude is not None) == ("our threshold" in claims.describe(c)), c.id


def test_an_inferred_entry_must_name_a_condition_with_a_value(tmp_path):
    bad = tmp_path / "claims.yaml"
    for inferred, message in (("[speed]", r"claims.0 \(x-1\): \(claim\): Value error, inferred: \['speed'\] are not "
                                          r"conditions"),
                              ("[seq_lens]", r"claims.0 \(x-1\): \(claim\): Value error, inferred: conditions "
                                             r"\['seq_lens'\] are empty")):
        bad.write_text(f"claims:\n- {{id: x-1, {BASE}}}, expect: higher, why_not: n, inferred: {inferred}}}\n")
        with pytest.raises(claims.ClaimError, match=message):
            claims.load(bad)


def test_seed_000_lists_xlnet_and_xlm_and_records_the_modes_of_its_benchmark_script():
    r = _registry()
    for c in (x for x in r.values() if x.seed == "000"):
        assert {"xlnet-base", "xlm-mlm-en-2048"} <= set(c.conditions.models) or "models" in c.conditions.defining, c.id
        assert "tf.function" in c.conditions.mode and "no_grad" in c.conditions.mode and "mode" in c.inferred, c.id
    assert any("no_grad" in v for v in r["000-cpu-tf-slower"].caveats)
    assert not any("does not say" in v for c in r.values() for v in c.caveats)  # the TF mode is known now


def test_the_claims_the_issue_found_missing_are_registered_with_an_evaluator_or_why_not():
    r = _registry()
    added = {"000-torchscript-xlnet-lasting": "02_torchscript_vs_xla", "000-xla-small-inputs": "02_torchscript_vs_xla",
             "002-out-of-the-box": "05_keras_backends", "002-fastest-beats-keras2-and-pytorch": "05_keras_backends",
             "003-torchscript-short-sequences": "02_torchscript_vs_xla"}
    for cid, study in added.items():
        assert r[cid].study == study and callable(claims.evaluator(r[cid])), cid
    assert r["000-torchscript-xlnet-lasting"].conditions.models == ["xlnet-base"]


def test_the_re_scoped_claims_test_what_their_seed_says():
    r = _registry()
    overhead = r["001-python-overhead-small"]  # about PyTorch's Python overhead, not TensorFlow's modes
    assert overhead.args == {"candidate": "torchscript", "baseline": "eager", "at": "smallest"}
    keras = r["002-python-overhead-small-batch"]  # Keras against native PyTorch on the seed's A100: a GPU claim
    assert keras.conditions.device == "cuda" and keras.study == "05_keras_backends"


# --- the evaluators changed or added ----------------------------------------------------------------------------


def _row(model, variant, batch, seq, median, **extra):
    samples = list(rng.normal(median, median * 0.005, 20))
    return {"model": model, "dtype": "fp32", "variant": variant, "batch_size": batch, "seq_len": seq, "device": "cpu",
            "threads": 2, "status": "ok", "error": "", "samples_s": samples, "median_s": float(np.median(samples))} | extra


@pytest.fixture
def cells_seen(monkeypatch):
    """claims.per_cell stood in for (part R of issue 43 adds it): records the cells an evaluator hands it."""
    seen = []

    def per_cell(cells, claim, *, text="", rows=None, band=1.05, unit="×"):
        seen.append(list(cells))
        return claims.ClaimMeasurement(None, None, None, text, rows=rows if rows is not None else pd.DataFrame())

    monkeypatch.setattr(claims, "per_cell", per_cell, raising=False)
    return seen


def test_argmax_is_judged_per_size_never_averaged_over_sizes(cells_seen):
    from studylib.studies import torchscript_vs_xla as s02

    claim = _registry()["001-unusual-ops-argmax"]  # PyTorch 2× faster at 1 × 128, 2× slower at 32 × 128
    df = pd.DataFrame([_row("op-argmax", "eager", 1, 128, 1.0), _row("op-argmax", "tf-function", 1, 128, 2.0),
                       _row("op-argmax", "eager", 32, 128, 2.0), _row("op-argmax", "tf-function", 32, 128, 1.0),
                       _row("op-gather", "eager", 1, 128, 1.0), _row("op-gather", "tf-function", 1, 128, 1.0)])
    m = s02.op_gain(df, {}, claim, **claim.args)
    (cells,) = cells_seen
    assert [label for label, _ in cells] == ["op-argmax b1 × s128", "op-argmax b32 × s128"]  # one cell per size
    assert [round(c[0], 1) for _, c in cells] == [2.0, 0.5] and set(m.rows.model) == {"op-argmax"}


def test_xlnets_lasting_gain_is_judged_at_every_input_of_xlnet_only(cells_seen):
    from studylib.studies import torchscript_vs_xla as s02

    claim = _registry()["000-torchscript-xlnet-lasting"]
    df = pd.DataFrame([_row("xlnet-base", v, b, s, t * (0.8 if v == "torchscript" else 1.0))
                       for v in ("eager", "torchscript") for b, s, t in ((1, 8, 1.0), (8, 512, 9.0))]
                      + [_row("bert-base", v, 1, 8, 1.0) for v in ("eager", "torchscript")])
    s02.every_input_gain(df, {}, claim, **claim.args)
    (cells,) = cells_seen
    assert [label for label, _ in cells] == ["xlnet-base b1 × s8", "xlnet-base b8 × s512"]
    assert all(c[0] == pytest.approx(1.25, rel=0.02) for _, c in cells)
    empty = s02.every_input_gain(df[df.variant == "eager"], {}, claim, **claim.args)
    assert isinstance(empty, claims.NotAnswered) and "not both measured" in empty.reason


def test_seed_000s_claims_leave_a_sweep_at_another_batch_out():
    from studylib.studies import torchscript_vs_xla as s02

    claim = _registry()["000-torchscript-20pct"]  # seed 000's batches 1-8; a batch-64 sweep is seed 003's
    df = pd.DataFrame([_row("distilbert-base", v, b, 8, t * (0.8 if v == "torchscript" and b == 1 else 1.0))
                       for v in ("eager", "torchscript") for b, t in ((1, 1.0), (64, 8.0))])
    m = s02.framework_gain(df, {}, claim, **claim.args)
    assert m.value == pytest.approx(1.25, rel=0.02) and set(m.rows.batch_size) == {1}


def test_not_linear_at_batch_1_needs_three_lengths_and_a_bend_not_a_fixed_cost():
    from studylib.studies import torchscript_vs_xla as s02

    claim = _registry()["003-seq-not-linear-single"]
    affine = {8: 1.0 + 0.008, 64: 1.0 + 0.064, 256: 1.0 + 0.256}  # a fixed cost per call, then a straight line
    two = pd.DataFrame([_row("bert-base", "eager", 1, s, affine[s]) for s in (8, 256)])
    m = s02.seq_curvature(two, {}, claim, **claim.args)  # two points always lie on a line: not judged
    assert isinstance(m, claims.NotAnswered) and "three sequence lengths" in m.reason
    three = pd.DataFrame([_row("bert-base", "eager", 1, s, t) for s, t in affine.items()])
    m = s02.seq_curvature(three, {}, claim, **claim.args)
    assert m.value == pytest.approx(1.0, rel=0.02) and m.holds is False  # straight: the claim does not hold
    assert "between seq 64 → 256 as between 8 → 64" in m.text
    quadratic = pd.DataFrame([_row("bert-base", "eager", 1, s, 1.0 + (s / 64) ** 2) for s in (8, 64, 256)])
    m = s02.seq_curvature(quadratic, {}, claim, **claim.args)
    assert m.value > 1.25 and m.holds is True
    wide = three.assign(ci_low_s=three.median_s * 0.98, ci_high_s=three.median_s * 1.02)
    m = s02.seq_curvature(wide, {}, claim, **claim.args)  # a CI across the band's edge: open, not 'does not hold'
    assert m.ci_low < 1 / 1.25 and m.holds is None
    flat = pd.DataFrame([_row("bert-base", "eager", 1, s, 1.0) for s in (8, 64, 256)])
    assert isinstance(s02.seq_curvature(flat, {}, claim, **claim.args), claims.NotAnswered)  # no rise, no slope


def _s03(variant, batch, median, n_texts=64):
    return _row("roberta-base-classifier", variant, batch, 512, median, strategy="unsorted", n_texts=n_texts,
                ci_low_s=median * 0.99, ci_high_s=median * 1.01, label_agreement=1.0)


def test_format_irrelevant_from_32_judges_batch_32_where_64_is_not_measured():
    from studylib.studies import onnx_batching as s03

    claim = _registry()["003-format-irrelevant-large-batch-cpu"]
    df = pd.DataFrame([_s03(v, b, t) for b in (1, 32) for v, t in (("eager", 1.0), ("torchscript", 1.0),
                                                                    ("ort", 0.5 if b == 32 else 0.9))])
    m = s03.worst_gain(df, {}, claim, **claim.args)
    assert m.value == pytest.approx(2.0, rel=0.02) and "ort over eager b32" in m.text and "b1" not in m.text
    assert claims.coverage(claim, "cpu", m.rows).level != "not answerable"  # 64 lacking: judged at 32


def test_study_03_reads_only_batches_a_pass_fills_not_the_seeds_1000_texts():
    from studylib.studies import onnx_batching as s03

    claim = _registry()["003-torchscript-reliable-small-batch"]
    df = pd.DataFrame([_s03(v, b, t, n_texts=8) for b in (1, 16) for v, t in (("eager", 1.0), ("torchscript", 0.8))])
    m = s03.worst_gain(df, {}, claim, **claim.args)
    assert "b1" in m.text and "b16" not in m.text  # 8 texts never make a batch of 16


def test_a_verdict_that_rests_only_on_our_threshold_says_so():
    from studylib.studies import onnx_batching as s03

    claim = _registry()["003-torchscript-onnx-single-sample"]  # 显著 read as 1.2×: TorchScript decided 1.11×
    df = pd.DataFrame([_s03(v, 1, t) for v, t in (("eager", 1.11), ("torchscript", 1.0), ("ort", 0.5))])
    m = s03.worst_gain(df, {}, claim, **claim.args)
    assert m.value == pytest.approx(1.11, rel=0.02)
    assert "only the registry's reading of «显著 (significant)» as at least 1.2×" in m.text
    df = pd.DataFrame([_s03(v, 1, t) for v, t in (("eager", 1.5), ("torchscript", 1.0), ("ort", 0.5))])
    assert "registry's reading" not in s03.worst_gain(df, {}, claim, **claim.args).text  # beyond it: no note


def _keras_rows():
    return pd.DataFrame([_row("bert-base", v, 1, 128, 1.0, backend=v.split("-")[1])
                         for v in ("keras-torch", "keras-tensorflow", "keras-jax")])


def _native(rows):
    cols = ["model", "dtype", "batch_size", "seq_len", "image_size", "shape", "best Keras 3", "ratio", "ci_low",
            "ci_high", "vs_eager", "vs_eager_low", "vs_eager_high"]
    return pd.DataFrame([(m, "fp32", b, 128, np.nan, f"{m} b{b}", "keras-jax", r, r * 0.95, r * 1.05, e, e * 0.95,
                          e * 1.05) for m, b, r, e in rows], columns=cols)


def test_keras_against_native_pytorch_over_batch_and_out_of_the_box():
    from studylib.studies import keras_backends as s05

    r = _registry()
    native = _native([("bert-base", 1, 2.0, 1.2), ("bert-base", 8, 1.0, 0.8)])
    trend = s05.native_gap_trend(_keras_rows(), {"native": native}, r["002-python-overhead-small-batch"])
    assert trend.value == pytest.approx(2.0, rel=0.01) and "2.00× at b1 vs 1.00× at b8" in trend.text
    one = s05.native_gap_trend(_keras_rows(), {"native": native[native.batch_size == 1]},
                               r["002-python-overhead-small-batch"])
    assert isinstance(one, claims.NotAnswered) and "two batch sizes" in one.reason
    box = r["002-out-of-the-box"]
    m = s05.keras3_over_native(_keras_rows(), {"native": native}, box, **box.args)
    assert m.value == pytest.approx((1.2 * 0.8) ** 0.5, rel=0.01) and "geometric mean over 2 shape(s)" in m.text


def test_the_fastest_keras_3_beats_keras_2_and_pytorch_on_almost_every_shape():
    from studylib.studies import keras_backends as s05

    claim = _registry()["002-fastest-beats-keras2-and-pytorch"]

    def sp(shapes):  # speed-ups over native eager: (batch, {variant: ratio})
        return pd.DataFrame([{"model": "bert-base", "dtype": "fp32", "batch_size": b, "seq_len": 128,
                              "image_size": np.nan, "variant": v, "speedup": x, "ci_low": x * 0.98,
                              "ci_high": x * 1.02} for b, ratios in shapes for v, x in ratios.items()])

    wins = sp([(b, {"keras-jax": 2.0, "keras-torch": 1.5, "compile-default": 1.2, "keras2-tensorflow": 0.9})
               for b in range(1, 11)])
    m = s05.fastest_beats_rest(_keras_rows(), {"speedups": wins}, claim, **claim.args)
    assert m.holds is True and "on 10 of 10 shape(s)" in m.text
    two_lose = sp([(b, {"keras-jax": 2.0 if b > 2 else 1.0, "compile-default": 1.2}) for b in range(1, 11)])
    m = s05.fastest_beats_rest(_keras_rows(), {"speedups": two_lose}, claim, **claim.args)
    assert m.holds is False and "on 8 of 10" in m.text and "not decided faster than native eager" in m.text
