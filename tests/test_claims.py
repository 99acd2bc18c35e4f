"""The claims registry and its judging rules: coverage, verdicts (number first, magnitude words, per op, per model,
two decided shapes) and totals, on synthetic rows."""

import re

import numpy as np
import pandas as pd
import pytest

from studylib.claims import claims
from studylib.stats import verdicts
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


def _claim(cid, expect, number=None, device="cpu", batches=(1, 8), conditions=None, **extra):
    return claims.Claim.model_validate({
        "id": cid, "seed": "003", "where": "test", "original": "测试用的句子", "words": cid, "basis": "measured",
        "number": number, "expect": expect,
        "scale": "ONNX Runtime over eager at batch 1 and 8, the least favourable", "study": "03_onnx_batching",
        "evaluator": "worst_gain", "args": {"variants": ["ort"], "below": 32},
        "conditions": {"device": device, "hardware": "a test machine", "ran_on": [device],
                       "models": ["distilroberta-classifier"], "models_text": "DistilRoBERTa", "precision": ["fp32"],
                       "batch_sizes": list(batches), "seq_lens": [128], "texts": 100, "software": "test"}
                      | (conditions or {})} | extra)


def _table(rows, *registry):
    same, over1 = s03.speedups_same_batch(rows), s03.speedups_over_batch1(rows)
    return claims.study_claims(s03.NOTEBOOK, rows, {"same batch": same, "over batch 1": over1},
                               claims=registry, vt=verdicts.for_study(s03.NOTEBOOK, rows)).set_index("id")


# --- the registry ---------------------------------------------------------------------------------------------


def test_the_registry_holds_every_seed_with_its_words_translation_basis_and_article():
    registry = claims.load()  # validates every field and finds every evaluator in its study module
    assert len(registry) >= 56 and {c.seed for c in registry} == set(claims.SEEDS)
    cjk = re.compile(r"[\u4e00-\u9fff]")
    for c in registry:
        cond = c.conditions
        assert cond.hardware and cond.models_text and cond.precision and cond.software, c.id
        assert (c.study and c.evaluator and callable(claims.evaluator(c))) or c.why_not, c.id
        assert cjk.search(c.original) and not cjk.search(c.words) and c.basis in claims.BASES, c.id
    assert len({c.id for c in registry}) == len(registry)
    articles = claims.articles()
    assert set(articles) == set(claims.SEEDS) and all(a.title and a.author and a.date for a in articles.values())
    assert "Maxence Alluin" in claims.cite("003")


def test_the_registry_keeps_the_seeds_words_where_the_issue_found_them_changed():
    r = {c.id: c for c in claims.registry()}
    assert "002-reduce-overhead" not in r  # a set-up sentence, kept in the conditions, not a claim
    assert "0.3.0" in r["002-library-upgrades"].words and "ONNX 1.6.0" in r["003-onnx-wins-small-batch-cpu"].conditions.software
    assert r["001-nhwc-volta"].conditions.precision == ["fp16"] and "looks like" in r["001-nhwc-volta"].words
    assert r["001-python-overhead-small"].basis == "expected" and "預想" in r["001-python-overhead-small"].original
    assert "dominate the averages" in r["000-input-size-gap"].words and r["000-input-size-gap"].expect == "holds"
    assert r["003-seq-not-linear-single"].expect == "holds" and "less than" not in r["003-seq-not-linear-single"].words
    assert "an inference" in r["000-pytorch-oom"].conditions.hardware
    for cid, hedge in (("000-cpu-tf-slower", "In most cases"), ("000-cpu-tf-slower", "somewhat"),
                       ("002-keras3-vs-native", "generally"), ("002-no-best-backend", "often"),
                       ("002-keras3-vs-keras2", "more than"), ("000-torchscript-model-dependent", "seems")):
        assert hedge in r[cid].words, (cid, hedge)
    for cid in ("003-batching-speeds-up", "003-torchscript-onnx-single-sample"):  # 显著 read with a stated threshold
        assert "显著" in r[cid].original and r[cid].magnitude.at_least == 1.2 and r[cid].magnitude.why


def test_the_seeds_arithmetic_is_computed_not_typed():
    assert claims.arithmetic("0.748 / 0.823") == pytest.approx(0.9089, abs=1e-4)
    assert claims.arithmetic("1 / (1 - 0.70)") == pytest.approx(3.333, abs=1e-3)
    with pytest.raises(ValueError):
        claims.arithmetic("__import__('os')")


ARTICLES = "articles: {}\n"
BASE = "seed: '003', where: w, original: 原文原文, words: w, basis: measured, scale: s"
COND = "conditions: {device: cpu, hardware: h, models_text: m, precision: [fp32], software: s"


def test_a_malformed_registry_names_the_file_the_claim_and_the_field(tmp_path):
    bad = tmp_path / "claims.yaml"
    cases = [(f"- {{id: x-0, {BASE}, expect: higher, why_not: n, {COND}}}}}\n", r"claims.yaml: expected a mapping"),
             (f"claims:\n- {{id: x-1, {BASE}, expect: faster, why_not: n, {COND}}}}}\n",
              r"claims.yaml: claims.0 \(x-1\): expect: Input should be"),
             (f"claims:\n- {{id: x-2, {BASE}, expect: higher, {COND}}}}}\n",
              r"claims.0 \(x-2\): \(claim\): Value error, needs a study"),
             (f"claims:\n- {{id: x-3, {BASE}, expect: higher, why_not: n, {COND}, defining: [batch_sizes]}}}}\n",
              r"claims.0 \(x-3\): conditions: Value error, defining conditions \['batch_sizes'\] are empty"),
             (f"claims:\n- {{id: x-4, {BASE}, expect: equal, why_not: n, magnitude: {{words: 显著, at_least: 1.2, "
              f"why: w}}, {COND}}}}}\n", r"claims.0 \(x-4\): \(claim\): Value error, a magnitude word qualifies"),
             (f"claims:\n- {{id: x-5, {BASE}, expect: higher, why_not: n, basis: guessed, {COND}}}}}\n",
              r"claims.0 \(x-5\): basis: Input should be"),
             (f"claims:\n- {{id: x-6, {BASE}, expect: higher, study: 02_torchscript_vs_xla, evaluator: nope, {COND}}}}}\n",
              r"x-6: study '02_torchscript_vs_xla' registers no evaluator 'nope'")]
    for text, message in cases:
        bad.write_text(text)
        with pytest.raises(claims.ClaimError, match=message):
            claims.load(bad)
    bad.write_text("articles: {'000': {title: t}}\nclaims: []\n")
    with pytest.raises(claims.ClaimError, match=r"articles.000: title_en: Field required"):
        claims.load_articles(bad)


# --- verdict rules --------------------------------------------------------------------------------------------


def test_the_seeds_number_inside_our_ci_is_tested_before_equal_within_noise():
    small = _claim("gpu-tf", "higher", 1.07)  # 000-gpu-tf-faster's size: inside a CI that is also inside the band
    assert claims.judge(small, claims.ClaimMeasurement(1.03, 1.01, 1.09, "x", band=1.10)) == (
        "agrees (number)", "agrees (number): the seed's 1.07 lies inside our CI 1.01–1.09×")
    assert claims.judge(small, claims.ClaimMeasurement(1.0, 0.97, 1.03, "x", band=1.05))[1].startswith(
        "does not agree: equal within noise")  # the number outside: equal within noise still rules
    assert claims.judge(small, claims.ClaimMeasurement(1.0, 0.8, 1.2, "x", band=1.05))[0] == "inconclusive"  # both ways


def test_agreeing_on_the_number_and_on_the_direction_are_separate_verdicts(rows):
    t = _table(rows, _claim("inside", "higher", 1.5), _claim("outside", "higher", 3.0),
               _claim("reversed", "lower"), _claim("no-size", "higher"))
    assert t.loc["inside", "judgement"] == "agrees (number)"
    assert re.fullmatch(r"agrees \(number\): the seed's 1.5 lies inside our CI 1\.\d+–1\.\d+×", t.loc["inside", "verdict"])
    assert t.loc["outside", "judgement"] == "does not agree (number)"  # the seed's 3 beyond our CI: not the number
    assert t.loc["outside", "verdict"].startswith("does not agree (number): our CI 1.")
    assert t.loc["reversed", "verdict"].startswith("does not agree: the direction differs (our CI 1.")
    assert t.loc["no-size", "verdict"].endswith("lies above the ±5% band (A/A noise) (the seed gives no number)")
    assert t["comparable?"].str.startswith("under the seed's conditions").all()
    assert "1.5" in t.loc["inside", "our measurement (95% CI)"] and "95% CI" in t.loc["inside", "our measurement (95% CI)"]


def test_a_magnitude_word_needs_its_stated_threshold():
    word = {"words": "显著 (significant)", "at_least": 1.2, "why": "test"}
    sig, slow = _claim("sig", "higher", magnitude=word), _claim("slow", "lower", magnitude=word)
    assert claims.judge(sig, claims.ClaimMeasurement(1.08, 1.06, 1.10, "x", band=1.02)) == (
        "does not agree", "does not agree: our CI 1.06–1.10× lies above the ±2% band (A/A noise), but short of the "
                          "1.2× that «显著 (significant)» implies")
    assert claims.judge(sig, claims.ClaimMeasurement(1.3, 1.25, 1.4, "x"))[0] == "agrees (direction)"
    assert claims.judge(sig, claims.ClaimMeasurement(1.2, 1.1, 1.3, "x"))[0] == "inconclusive"
    assert claims.judge(slow, claims.ClaimMeasurement(0.7, 0.65, 0.75, "x"))[0] == "agrees (direction)"
    assert claims.judge(_claim("plain", "higher"), claims.ClaimMeasurement(1.08, 1.06, 1.10, "x", band=1.02))[0] == (
        "agrees (direction)")  # without the word, the same CI agrees


def test_equality_uses_the_noise_band_or_the_seeds_tolerance():
    m = claims.ClaimMeasurement(1.02, 0.99, 1.04, "x", band=1.05)
    equal = _claim("eq", "equal")
    assert claims.judge(equal, m) == ("agrees (direction)",
                                      "agrees (direction): our CI 0.99–1.04× lies inside the ±5% band (A/A noise)")
    assert claims.judge(equal, claims.ClaimMeasurement(1.3, 1.2, 1.4, "x"))[0] == "does not agree"
    assert claims.judge(equal, claims.ClaimMeasurement(1.04, 0.99, 1.09, "x"))[0] == "inconclusive"
    wide = _claim("eq10", "equal", tolerance=1.10)
    assert claims.judge(wide, claims.ClaimMeasurement(1.04, 0.99, 1.09, "x")) == (
        "agrees (number)", "agrees (number): our CI 0.99–1.09× lies inside the ±10% band (the seed's tolerance)")


def test_a_model_specific_number_is_compared_only_on_that_model(rows):
    elsewhere = _claim("xlm", "higher", 1.5, number_at="model",
                       conditions={"models": ["xlm-mlm-en-2048"], "models_text": "XLM"})
    here = _claim("same", "higher", 3.0, number_at="up to")
    t = _table(rows, elsewhere, here)
    assert t.loc["xlm", "judgement"] == "proxy: agrees (direction)"  # 1.5 lies in our CI, but on another model
    assert "XLM's: not compared on other models" in t.loc["xlm", "verdict"]
    assert t.loc["same", "verdict"].startswith("does not agree (number)")  # the matching model: compared


def test_single_operations_are_judged_one_by_one():
    from studylib.studies import torchscript_vs_xla as s02

    def row(model, variant, median):
        samples = list(rng.normal(median, median * 0.01, 20))
        return {"model": model, "dtype": "fp32", "variant": variant, "batch_size": 8, "seq_len": 128,
                "device": "cpu", "threads": 2, "status": "ok", "samples_s": samples,
                "median_s": float(np.median(samples))}

    df = pd.DataFrame([row("op-argmax", "eager", 2.0), row("op-argmax", "tf-function", 1.0),
                       row("op-gather", "eager", 1.0), row("op-gather", "tf-function", 2.0)])
    r = {c.id: c for c in claims.registry()}
    argmax, gather = (s02.op_gain(df, {}, r[i], **r[i].args) for i in ("001-unusual-ops-argmax",
                                                                        "001-unusual-ops-slicing"))
    assert argmax.value == pytest.approx(0.5, rel=0.05) and gather.value == pytest.approx(2.0, rel=0.05)
    assert set(argmax.rows.model) == {"op-argmax"} and set(gather.rows.model) == {"op-gather"}
    assert "graph" in r["001-unusual-ops-argmax"].conditions.mode  # what differs from the seed's TF 1.x


def test_the_fastest_backend_needs_two_decided_shapes():
    from studylib.studies import keras_backends as s05

    claim = {c.id: c for c in claims.registry()}["002-no-best-backend"]
    df = pd.DataFrame({"status": ["ok"], "model": ["bert-base"], "dtype": ["fp32"]})
    one = pd.DataFrame({"shape": ["a", "b", "c"], "fastest": ["keras-jax", "keras-tensorflow", "keras-jax"],
                        "decided": [True, False, None]})
    assert isinstance(s05.fastest_backend(df, {"backends": one}, claim), claims.NotAnswered)
    two = one.assign(decided=[True, True, False])
    assert s05.fastest_backend(df, {"backends": two}, claim).holds is True


# --- coverage and totals ----------------------------------------------------------------------------------------


def test_coverage_seed_conditions_proxy_and_not_answerable(rows):
    t = _table(rows, _claim("gpu", "higher", 1.5, device="cuda"), _claim("sizes", "higher", 1.5, batches=(1, 8, 16)),
               _claim("subst", "higher", 1.5, batches=(2, 8)),
               _claim("b64", "higher", 1.5, batches=(64,), conditions={"defining": ["batch_sizes"]}),
               _claim("xlnet", "higher", 1.5, conditions={"models": ["xlnet-base"], "models_text": "XLNet",
                                                         "defining": ["models"]}))
    gpu = t.loc["gpu"]
    assert gpu["comparable?"].startswith("not comparable — absent: device: seed a test machine, here cpu")
    assert gpu.judgement == "not comparable on this profile" and "tested by gpu-" in gpu.verdict
    sizes = t.loc["sizes"]  # the seed's batch 16 not run here: a proxy, the lacking size named
    assert sizes.judgement == "proxy: agrees (number)" and sizes.verdict.startswith("proxy — agrees (number)")
    assert "seed's sizes lacking here: batch 16" in sizes["comparable?"] and "holds: model distilroberta" in sizes[
        "comparable?"]
    assert "substituted: batch: seed 2, 8, here 1" in t.loc["subst", "comparable?"]
    for cid in ("b64", "xlnet"):  # the size or model the claim is about is absent: no verdict, however the CI lies
        assert t.loc[cid, "judgement"] == "not answerable on this profile", cid
        assert t.loc[cid, "verdict"].startswith("not answerable on this profile: ")
    assert t.loc["b64", "verdict"].endswith("batch: seed 64, here 1, 8")
    assert t.loc["xlnet", "verdict"].endswith("model: seed XLNet, here distilroberta-classifier")
    cov = claims.coverage(_claim("c", "higher", caveats=["eager here, compiled in the seed"]), "cpu")
    assert cov.substituted == [] and cov.caveats == ["eager here, compiled in the seed"]  # shown, not substituted


def test_totals_count_only_claims_under_the_seeds_conditions_as_agreeing_or_not(rows):
    why_not = _claim("untested", "higher", why_not="needs TensorRT").model_copy(update={"evaluator": None})
    t = _table(rows, _claim("inside", "higher", 1.5), _claim("reversed", "lower"),
               _claim("proxy", "higher", 9.0, batches=(16,)), _claim("gpu", "higher", device="cuda"),
               _claim("b64", "higher", 1.5, batches=(64,), conditions={"defining": ["batch_sizes"]}),
               why_not).reset_index()
    totals = claims.totals(t)
    assert (totals["judged"], totals["proxy"], totals["not answerable"]) == (2, 1, 2)
    assert (totals["agrees (number)"], totals["does not agree"], totals["proxy: does not agree (number)"]) == (1, 1, 1)
    assert totals["not tested by this study"] == 1
    assert totals["claims"] == len(t) == (totals["judged"] + totals["proxy"] + sum(totals[k] for k in claims.NOT_JUDGED))
    line = claims.totals_line(t, "cpu")
    assert line.startswith("Claims on cpu: 6 — 2 judged under the seed's conditions (except hardware, threads and "
                           "versions): 1 agree (number), 0 agree (direction), 1 do not agree, 0 do not agree "
                           "(number), 0 inconclusive; 1 proxy")
    assert "2 not answerable here (1 for the other device, 1 without a defining model or size" in line


# --- the seeds profile ------------------------------------------------------------------------------------------


def test_the_seeds_profile_runs_the_seeds_own_sizes_within_100_minutes_on_two_cores(outputs):
    from conftest import cli
    from studylib.bench import profiles
    from studylib.core import paths

    loaded = profiles.load("seeds")
    assert loaded.profile.device == "cpu" and loaded.profile.threads == 2
    makefile = (paths.PARAMS_DIR.parent / "Makefile").read_text()
    assert re.search(r"^PROFILE \?= (\S+)", makefile, re.M).group(1) != "seeds"  # not the default profile
    s02, s03, s04 = (loaded.sections[n] for n in ("02_torchscript_vs_xla", "03_onnx_batching",
                                                  "04_sorted_length_batching"))
    shapes = pd.DataFrame(s02.shapes(), columns=["model", "dtype", "batch_size", "seq_len"])
    seed000 = shapes[shapes.batch_size.isin([1, 2, 4, 8])]
    assert set(seed000.batch_size) == {1, 2, 4, 8} and set(seed000.seq_len) >= {8, 64, 128, 256, 512}  # seed 000's
    assert s02.micro_ops.models == ["op-argmax", "op-gather"] and "tf-function" in s02.variants  # seed 001's ops
    assert {"xlnet-base", "xlm-mlm-en-2048"} <= set(s02.models)  # seed 000's XLNet and XLM
    has = {tuple(x) for x in shapes[["model", "batch_size", "seq_len"]].itertuples(index=False)}
    assert {("bert-base", 1, 512), ("bert-base", 8, 256), ("xlnet-base", 1, 512), ("xlnet-base", 1, 1024)} <= has
    assert shapes[shapes.batch_size == 64].groupby("model").seq_len.nunique().max() >= 3  # seed 003's batch-64 sweep
    assert "XLM at" in s02.left_out  # XLM's batch sizes and lengths left out: said, not hidden
    for s in (s03, s04):  # seed 003's 12-layer classifier at its 512-token maximum
        assert s.models == ["roberta-base-classifier"] and s.max_length == 512
        assert s.corpus.n_texts >= max(s.batch_sizes)  # every batch size holds at least one full batch
    assert s03.batch_sizes == [1, 2, 4, 8, 16, 32, 64] and s04.batch_sizes == [16, 64]  # seed 003's
    assert s04.corpus.n_texts >= 4 * max(s04.batch_sizes)  # four batches of 64: the text count is no substitution
    for c in claims.registry():  # every batch size a CPU-testable claim of studies 03/04 is defined by is run
        if c.study in ("03_onnx_batching", "04_sorted_length_batching") and "batch_sizes" in c.conditions.defining \
                and c.conditions.device != "cuda":
            assert set(c.conditions.batch_sizes) <= set(loaded.sections[c.study].batch_sizes), c.id
    r = cli("plan", "--profile", "seeds", outputs=outputs)
    assert r.returncode == 0, r.stderr
    minutes = float(re.search(r"estimated total: about ([\d.]+) min", r.stdout).group(1))
    assert 0 < minutes <= 100


XL_CLAIMS = ("000-torchscript-model-dependent", "000-torchscript-helps-small", "000-torchscript-hurts-large")


@pytest.mark.parametrize("profile, answerable", [("seeds", True), ("cpu", False)])
def test_xlnet_and_xlm_claims_are_answerable_where_the_profile_runs_them(profile, answerable):
    """Coverage on the rows a profile's study 02 would measure: the seeds profile runs XLNet and XLM, cpu does not."""
    from studylib.bench import profiles

    loaded = profiles.load(profile)
    shapes = loaded.sections["02_torchscript_vs_xla"].shapes()
    rows = pd.DataFrame(shapes, columns=["model", "dtype", "batch_size", "seq_len"]).assign(
        device=loaded.profile.device, threads=loaded.profile.threads)
    registry = {c.id: c for c in claims.registry()}
    xl = [c for c in registry.values() if "models" in c.conditions.defining
          and set(c.conditions.models) & {"xlnet-base", "xlm-mlm-en-2048"}]
    assert set(XL_CLAIMS) <= {c.id for c in xl}
    for c in xl:
        cov = claims.coverage(c, loaded.profile.device, claims.matching(rows, c))  # the rows an evaluator takes
        assert (cov.level != "not answerable") == answerable, (c.id, cov.text())
        if answerable:
            assert cov.level in ("seed", "proxy") and any(h.startswith("model ") for h in cov.holds), c.id


def _op_row(model, variant, batch, seq, median):
    samples = list(rng.normal(median, median * 0.01, 20))
    return {"model": model, "dtype": "fp32", "variant": variant, "batch_size": batch, "seq_len": seq, "device": "cpu",
            "threads": 2, "status": "ok", "samples_s": samples, "median_s": float(np.median(samples))}


def test_batching_gains_less_on_long_sequences_is_computed_per_sample():
    from studylib.studies import torchscript_vs_xla as s02

    claim = {c.id: c for c in claims.registry()}["003-long-seq-less-batching-gain"]
    # seq 8: batch 8 costs what batch 1 does (8× per sample); seq 256: batch 8 costs 8× batch 1 (no gain)
    df = pd.DataFrame([_op_row("bert-base", "eager", b, s, t) for b, s, t in
                       ((1, 8, 1.0), (8, 8, 1.0), (1, 256, 1.0), (8, 256, 8.0))])
    m = s02.batching_by_length(df, {}, claim)
    assert m.value == pytest.approx(1 / 8, rel=0.05) and m.ci_high < 1
    assert re.fullmatch(r"bert-base: batch 8 gains (7\.9\d|8\.0\d)× at seq 8, (0\.9\d|1\.0\d)× at seq 256", m.text)


def test_large_inputs_dominate_the_seeds_plain_mean_only_where_their_times_do():
    from studylib.studies import torchscript_vs_xla as s02

    claim = {c.id: c for c in claims.registry()}["000-input-size-gap"]
    shapes = ((1, 8), (1, 16), (1, 32), (4, 256))
    grows = pd.DataFrame([_op_row("bert-base", "eager", b, s, 1e-3 * b * s) for b, s in shapes])
    flat = pd.DataFrame([_op_row("bert-base", "eager", b, s, 1e-3) for b, s in shapes])
    assert s02.input_weight(grows, {}, claim, **claim.args).holds is True
    assert s02.input_weight(flat, {}, claim, **claim.args).holds is False


def _gpu_row(variant, batch, seq, status="ok", error=""):
    samples = list(np.full(10, 0.01)) if status == "ok" else None
    return {"model": "bert-base", "variant": variant, "dtype": "fp32", "batch_size": batch, "seq_len": seq,
            "image_size": None, "device": "cuda", "threads": 16, "status": status, "error": error,
            "samples_s": samples, "median_s": 0.01 if status == "ok" else None, "group_id": f"{batch}-{seq}"}


def test_a_comparison_whose_side_did_not_run_is_not_answerable_and_says_which():
    """Study 02 on a GPU where TensorFlow sees none: its TensorFlow claims name the missing side, never a verdict."""
    from studylib import studies  # noqa: F401 - registers study 02, whose evaluators judge the claim

    skipped = ("skipped", "TensorFlow 2.21.0 sees no GPU")
    df = pd.DataFrame([_gpu_row(v, b, s, *(skipped if v.startswith("tf") else ()))
                       for b in (1, 8) for s in (8, 128) for v in ("eager", "torchscript", "tf-function", "tf-xla")])
    claim = {c.id: c for c in claims.registry()}["000-gpu-tf-faster"]  # tf-function over eager, on a GPU
    row = claims.assess(claim, df, {})
    assert row["verdict"] == "not answerable here: tf-function did not run (skipped: TensorFlow 2.21.0 sees no GPU)"
    assert row["judgement"] == "not answerable from these results"
    assert claims.not_run(df, claim, {"eager": ["eager"], "torchscript": ["torchscript"]}) is None
