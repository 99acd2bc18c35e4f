"""The claims layer's rules of issue 43, one test each on small tables: a caveat is shown, not substituted; sizes the
seed lacks are never lacking; a scope restricts the rows compared; a number beyond our CI is 'does not agree
(number)'; per-size cells in opposite directions are never averaged; texts: enough batches, not the seed's count;
every verdict says what the CI shows; the host's GEMM caveat; the registry's `seed_lacks` and `scope`; the summary's
groups."""

import re

import numpy as np
import pandas as pd
import pytest

from studylib.claims import claims
from studylib.core import numbers
from studylib.machine import gemm, limits
from studylib.stats import verdicts
from studylib.studies import onnx_batching as s03

rng = np.random.default_rng(43)


def _row(variant, batch, median, seq=128, n_texts=100):
    samples = list(rng.normal(median, median * 0.01, 20))
    return {"model": "distilroberta-classifier", "dtype": "fp32", "variant": variant, "batch_size": batch,
            "strategy": "unsorted", "device": "cpu", "threads": 2, "seq_len": seq, "n_texts": n_texts,
            "status": "ok", "error": "", "samples_s": samples, "median_s": float(np.median(samples)),
            "ci_low_s": median * 0.99, "ci_high_s": median * 1.01, "label_agreement": 1.0}


@pytest.fixture
def rows():
    """ONNX Runtime 1.5× eager at batch 1 and 8, equal at 32."""
    out = []
    for batch, eager in ((1, 2.0), (8, 1.0), (32, 1.2)):
        out += [_row("eager", batch, eager), _row("ort", batch, eager / (1.5 if batch < 32 else 1.0))]
    return pd.DataFrame(out)


def _claim(cid, expect="higher", number=None, conditions=None, **extra):
    return claims.Claim.model_validate({
        "id": cid, "seed": "003", "where": "test", "original": "测试用的句子", "words": cid, "basis": "measured",
        "number": number, "expect": expect, "scale": "ONNX Runtime over eager", "study": "03_onnx_batching",
        "evaluator": "worst_gain", "args": {"variants": ["ort"], "below": 32},
        "conditions": {"device": "cpu", "hardware": "a test machine", "ran_on": ["cpu"],
                       "models": ["distilroberta-classifier"], "models_text": "DistilRoBERTa", "precision": ["fp32"],
                       "batch_sizes": [1, 8], "seq_lens": [128], "texts": 100, "software": "test"}
                      | (conditions or {})} | extra)


def _table(rows, *registry, peaks=None):
    tables = {"same batch": s03.speedups_same_batch(rows), "over batch 1": s03.speedups_over_batch1(rows)}
    decided = verdicts.for_study(s03.NOTEBOOK, rows)
    return claims.study_claims(s03.NOTEBOOK, rows, tables, claims=registry, peaks=peaks, vt=decided).set_index("id")


# --- a. a caveat is shown, never a substitution ------------------------------------------------------------------


def test_a_caveat_alone_leaves_the_verdict_under_the_seeds_conditions(rows):
    t = _table(rows, _claim("caveated", caveats=["tf.function here, TF 1.x graphs in the seed"]))
    r = t.loc["caveated"]
    assert r.judgement == "agrees (direction)" and not r.verdict.startswith("proxy")
    assert r["comparable?"].startswith("under the seed's conditions")
    assert "caveat: tf.function here, TF 1.x graphs in the seed" in r["comparable?"]


def test_a_fixed_substitution_makes_every_verdict_a_proxy(rows):
    t = _table(rows, _claim("swapped", substitutes=["comparison: seed Keras 3 against PyTorch, here compile vs eager"]))
    r = t.loc["swapped"]
    assert r.judgement == "proxy: agrees (direction)" and r.verdict.startswith("proxy")
    assert "substituted: comparison: seed Keras 3 against PyTorch" in r["comparable?"]


# --- b. sizes the seed has no result for are not lacking -------------------------------------------------------


def test_sizes_the_seed_lacks_itself_are_never_lacking(rows):
    plain = _claim("plain", conditions={"seq_lens": [128, 256]})
    lacks = _claim("lacks", conditions={"seq_lens": [128, 256], "seed_lacks": {"seq_lens": [256]}})
    beyond = _claim("beyond", conditions={"seq_lens": [128, 1024]})  # DistilRoBERTa takes 512 positions
    t = _table(rows, plain, lacks, beyond)
    assert t.loc["plain", "judgement"].startswith("proxy: ") and "lacking here: sequence 256" in t.loc[
        "plain", "comparable?"]
    for cid, size in (("lacks", 256), ("beyond", 1024)):
        assert not t.loc[cid, "judgement"].startswith("proxy"), cid
        assert f"sequence {size}: the seed has no result there either" in t.loc[cid, "comparable?"], cid


# --- c. a claim scoped to part of a grid ------------------------------------------------------------------------


def test_a_scoped_claim_is_compared_on_its_scope_only(rows):
    scoped = _claim("scoped", conditions={"batch_sizes": [1, 8, 32], "scope": {"batch_sizes": [1]}})
    whole = _claim("whole", conditions={"batch_sizes": [1]})
    t = _table(rows, scoped, whole)
    assert "substituted: batch: seed 1, here 8" in t.loc["whole", "comparable?"]  # the evaluator used batch 8 too
    assert "holds: model distilroberta-classifier; batch 1" in t.loc["scoped", "comparable?"]
    assert "substituted" not in t.loc["scoped", "comparable?"] and "lacking" not in t.loc["scoped", "comparable?"]
    assert t.loc["scoped", "judgement"] == "agrees (direction)"
    assert set(claims.in_scope(rows, scoped).batch_size) == {1} and len(claims.in_scope(rows, whole)) == len(rows)


# --- d. the seed's number beyond our CI ---------------------------------------------------------------------------


def test_a_number_beyond_the_ci_in_the_claimed_direction_does_not_agree_on_the_number(rows):
    twenty = _claim("twenty", number=1.20)  # 000-torchscript-20pct: 1.07× (1.06–1.08) against the seed's 1.20
    assert claims.judge(twenty, claims.ClaimMeasurement(1.07, 1.06, 1.08, "x", band=1.07)) == (
        "does not agree (number)", "does not agree (number): our CI 1.06–1.08× lies below the seed's 1.2, and "
                                   "crosses the edge of the ±7% band (A/A noise)")
    assert claims.judge(twenty, claims.ClaimMeasurement(1.07, 1.06, 1.08, "x", band=1.05))[1].endswith(
        "and lies above the ±5% band (A/A noise)")
    assert claims.judge(twenty, claims.ClaimMeasurement(1.4, 1.3, 1.5, "x"))[1].startswith(
        "agrees (direction), not the number: our CI 1.30–1.50×, our effect larger than the seed's 1.2")  # larger: still agrees
    assert claims.judge(twenty, claims.ClaimMeasurement(0.8, 0.75, 0.85, "x"))[0] == "does not agree"  # reversed
    t = _table(rows, _claim("three", number=3.0), _claim("plain")).reset_index()
    totals = claims.totals(t)
    assert (totals["does not agree (number)"], totals["judged"]) == (1, 2)
    assert "1 do not agree (number)" in claims.totals_line(t)


# --- e. per-size cells in opposite directions -----------------------------------------------------------------------


def test_per_cell_never_averages_cells_whose_directions_differ():
    argmax = _claim("argmax", expect="lower")  # 001-unusual-ops-argmax: 2.52× at 1×128, 0.70× at 32×128
    split = claims.per_cell([("1×128", (2.52, 2.40, 2.65)), ("32×128", (0.70, 0.68, 0.72))], argmax, text="argmax")
    assert split.value is None
    assert split.text == "argmax: faster at 1×128; slower at 32×128 (1×128 2.52×; 32×128 0.70×)"
    assert claims.judge(argmax, split) == ("does not agree", "does not agree: the claim does not hold across the "
                                                             "sizes — faster at 1×128; slower at 32×128")
    same = claims.per_cell([("b1", (0.5, 0.45, 0.55)), ("b8", (0.8, 0.75, 0.85)), ("b32", (1.0, 0.97, 1.03))], argmax)
    assert (same.value, same.ci_low, same.ci_high) == (1.0, 0.97, 1.03)  # no opposite cells: the least favourable
    assert same.text.startswith("least favourable: b32; all: b1 0.50×") and not same.verdict
    assert claims.judge(argmax, same)[0] == "does not agree"  # equal within noise at b32


# --- f. texts: enough batches, not the seed's count ----------------------------------------------------------------


def test_a_text_count_other_than_the_seeds_is_a_note_where_the_run_has_enough_batches(rows):
    small, large = (_claim(c, conditions={"texts": 1000, "batch_sizes": b}) for c, b in (("s", [1, 8]), ("l", [1, 8, 32])))
    enough = claims.coverage(small, "cpu", rows[rows.batch_size <= 8])  # 100 texts: 12 batches of 8
    assert enough.level == "seed" and not enough.substituted
    assert any(n.startswith(f"texts: seed 1,000, here 100 (at least {claims.MIN_BATCHES} batches") for n in enough.notes)
    few = claims.coverage(large, "cpu", rows)  # 100 texts: 3 batches of 32
    assert few.level == "proxy" and "texts: seed 1,000, here 100" in few.substituted


# --- g. the verdict says what the CI shows ----------------------------------------------------------------------------


def test_every_verdict_says_what_our_ci_shows():
    plain, equal = _claim("plain"), _claim("equal", expect="equal")
    assert claims.judge(plain, claims.ClaimMeasurement(1.06, 1.03, 1.09, "x", band=1.05)) == (
        "inconclusive", "inconclusive: our CI 1.03–1.09× crosses the edge of the ±5% band (A/A noise)")
    assert claims.judge(plain, claims.ClaimMeasurement(1.0, 0.9, 1.1, "x", band=1.05))[1] == (
        "inconclusive: our CI 0.90–1.10× reaches past both edges of the ±5% band (A/A noise)")
    word = _claim("word", magnitude={"words": "显著", "at_least": 1.2, "why": "test"})
    for claim in (plain, equal, word, _claim("n", number=1.2)):
        for ci in ((1.5, 1.4, 1.6), (1.06, 1.03, 1.09), (0.8, 0.7, 0.9), (1.0, 0.99, 1.01), (1.2, 1.1, 1.3)):
            sentence = claims.judge(claim, claims.ClaimMeasurement(*ci, "x", band=1.05))[1]
            assert f"our CI {numbers.fmt_ci(ci[1], ci[2])}" in sentence and "includes 1" not in sentence, (claim.id, ci)


# --- the host caveat ------------------------------------------------------------------------------------------------


def _peaks(**rates: float) -> dict:
    """The machine's limits with a fake GEMM record: each library `rates[key]` GFLOP/s (tests/test_gemm.py's way)."""
    def runner(library, threads, budget):
        return {key: {"status": "ok", "library": key, "version": "1", "kernel_library": "k", "info": {}, "threads": 2,
                      "call": "matmul", "seconds": 0.1,
                      "rates": {"fp32": {shape: {"gflops": rates[key], "ci_low": rates[key], "ci_high": rates[key],
                                                 "n": 3, "rel_err": 0.0, "path": ["p"]} for shape in s_shapes}}}
                if key in rates else {"status": "not installed", "message": "no"} for key in gemm.CHILDREN[library]}

    from studylib.machine import gemm_child
    s_shapes = list(gemm_child.shapes())
    return {"method": limits.METHOD, "gemm": gemm.measure_libraries(2, 1.0, runner=runner)}


def test_a_cpu_verdict_over_eager_pytorch_names_the_hosts_gemm_figures_where_they_differ(rows):
    registry = {c.id: c for c in claims.registry()}
    far, near = _peaks(torch=100.0, onnxruntime=210.0, tensorflow=120.0), _peaks(torch=100.0, onnxruntime=120.0)
    said = claims.host_caveat(_claim("ort"), "cpu", far)
    assert said == ("host: this CPU's fp32 GEMM at BERT-base's linear layers runs ONNX Runtime 210 GFLOP/s against "
                    "PyTorch's 100 (2.10×), more than 1.3× apart, so a verdict over eager PyTorch here carries this "
                    "host's GEMM path")
    assert claims.host_caveat(_claim("ort"), "cpu", near) is None  # within 1.3×
    assert claims.host_caveat(_claim("ort"), "cuda", far) is None and claims.host_caveat(_claim("o"), "cpu", None) is None
    assert claims.compared(registry["000-cpu-tf-slower"]) == ["tensorflow"]
    assert claims.host_caveat(registry["000-cpu-tf-slower"], "cpu", far) is None  # TensorFlow within 1.3× here
    for cid in ("000-torchscript-20pct", "001-unusual-ops-argmax", "003-batching-speeds-up"):  # PyTorch only; an op
        assert claims.compared(registry[cid]) == [], cid
    t = _table(rows, _claim("ort"), peaks=far)
    assert t.loc["ort", "verdict"].endswith(said) and t.loc["ort", "judgement"] == "agrees (direction)"


# --- the registry's seed_lacks and scope --------------------------------------------------------------------------------


BASE = "seed: '003', where: w, original: 原文原文, words: w, basis: measured, scale: s, expect: higher, why_not: n"
COND = "conditions: {device: cpu, hardware: h, models_text: m, precision: [fp32], software: s, batch_sizes: [1, 8]"


@pytest.mark.parametrize("extra, message", [
    ("scope: {batch_sizes: [1]}, seed_lacks: {batch_sizes: [8]}", None),
    ("scope: {batches: [1]}", r"claims.0 \(x-1\): conditions.scope.batches: Extra inputs are not permitted"),
    ("seed_lacks: {seq_lens: [-3]}", r"claims.0 \(x-1\): conditions.seed_lacks.seq_lens.0: Input should be greater"),
    ("scope: {batch_sizes: [64]}", r"claims.0 \(x-1\): conditions: Value error, scope.batch_sizes \[64\] are not in "
                                   r"the seed's batch_sizes \[1, 8\]"),
    ("seed_lacks: {seq_lens: [1024]}", r"claims.0 \(x-1\): conditions: Value error, seed_lacks.seq_lens \[1024\]"),
])
def test_the_registry_parses_and_checks_seed_lacks_and_scope(tmp_path, extra, message):
    path = tmp_path / "claims.yaml"
    path.write_text(f"claims:\n- {{id: x-1, {BASE}, {COND}, {extra}}}}}\n")
    if message is None:
        (c,) = claims.load(path)
        assert c.conditions.scope.batch_sizes == [1] and c.conditions.seed_lacks.batch_sizes == [8]
        return
    with pytest.raises(claims.ClaimError, match=message):
        claims.load(path)


# --- the summary's groups ----------------------------------------------------------------------------------------------


def test_the_summary_groups_claims_and_names_what_would_answer_the_rest(rows):
    from studylib.report import summary

    untested = _claim("untested", why_not="it compares two GPUs").model_copy(update={"evaluator": None})
    t = _table(rows, _claim("seed"), _claim("proxy", conditions={"batch_sizes": [1, 8, 16]}),
               _claim("gpu", conditions={"device": "cuda"}),
               _claim("b64", conditions={"batch_sizes": [64], "defining": ["batch_sizes"]}), untested).reset_index()
    g = summary.claim_groups(t.assign(profile="cpu")).set_index("id")
    assert list(g.group) == ["under the seed's conditions", "proxy"] + ["not answerable here"] * 3
    assert g.loc["seed", "what would answer it"] == g.loc["proxy", "what would answer it"] == ""
    assert g.loc["gpu", "what would answer it"].startswith("a GPU (profiles gpu-")
    assert g.loc["b64", "what would answer it"] == "a run with batch 64"
    assert g.loc["untested", "what would answer it"].endswith("it compares two GPUs")
    assert claims.would_answer(None, "not answerable from these results", "not answerable here: the classifiers "
                               "carry random weights, so there is no accuracy to lose").startswith("a trained model")


# --- a claim about a deprecated path names its successor ----------------------------------------------------------


def test_a_claim_about_a_deprecated_path_says_where_its_successor_stands_at_the_claims_shapes(rows):
    """A claim judging the TorchScript-based ONNX export (`ort`) names where the dynamo exporter beats, matches or
    falls behind it — at the sizes the claim was judged on only (batch below 32, not 32); a claim naming no
    deprecated path says nothing of successors."""
    from studylib.studies import STUDIES

    dynamo = [_row("ort-dynamo", 1, 2.0 / 1.5 / 1.25), _row("ort-dynamo", 8, 1.0 / 1.5), _row("ort-dynamo", 32, 0.6)]
    df = pd.concat([rows, pd.DataFrame(dynamo)], ignore_index=True)
    vt = verdicts.for_study(s03.NOTEBOOK, df)
    comparisons = STUDIES[s03.NOTEBOOK].comparisons
    claim = _claim("onnx-small")
    note = claims.successor_note(claim, df[df.batch_size < 32], vt, comparisons)
    assert re.fullmatch(r"its successor ort-dynamo against ort at these shapes: beats it at 1, matches it at 1 "
                        r"of 2 \((0\.99|1\.00|1\.01)–1\.2[456]×\)", note), note
    assert "beats it at 2" in claims.successor_note(claim, df, vt, comparisons)  # batch 32 counted where judged on it
    assert claims.successor_note(claim, df, None, comparisons) == ""  # no verdict table: nothing said
    eager_only = _claim("batching", args={"variants": ["eager"]})
    assert claims.successor_note(eager_only, df, vt, comparisons) == ""
    t = _table(df, claim, eager_only)  # the verdict column says it, after the verdict on the claim itself
    assert t.verdict["onnx-small"].endswith(" — " + note)
    assert "successor" not in t.verdict["batching"]
