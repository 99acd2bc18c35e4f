"""Studies 03 and 04: their analysis on synthetic pass timings (the claims' verdicts follow the CIs)."""

import numpy as np
import pandas as pd
import pytest

from studylib.stats import verdicts
from studylib.studies import onnx_batching as s03
from studylib.studies import sorted_batching as s04

rng = np.random.default_rng(2)


def _row(variant, batch, median, *, strategy="unsorted", status="ok", waste=0.5, error=""):
    base = {"model": "m", "dtype": "fp32", "variant": variant, "batch_size": batch, "strategy": strategy,
            "device": "cpu", "status": status, "error": error, "n_texts": 100}
    if status != "ok":
        return base
    samples = list(rng.normal(median, median * 0.01, 20))
    return base | {"samples_s": samples, "median_s": float(np.median(samples)), "ci_low_s": median * 0.99,
                   "ci_high_s": median * 1.01, "cv": 0.01, "parity_ok": True, "max_abs_diff": 1e-7,
                   "label_agreement": 0.97 if variant.endswith("int8") else 1.0, "padding_waste": waste,
                   "throughput_samples_s": 100 / median, "throughput_tokens_s": 4000 / median,
                   "batched_vs_unbatched_max_diff": 1e-7, "first_call_s": median, "prepare_s": 1.0, "notes": ""}


@pytest.fixture
def df03():
    rows = []
    for batch, eager in ((1, 2.0), (8, 1.0), (64, 1.2)):
        ort_gain = 1.5 if batch < 32 else 1.02  # ONNX wins below 32, all within 10% at 64 (the seed's claims)
        rows += [_row("eager", batch, eager), _row("torchscript", batch, eager / 1.01),
                 _row("ort", batch, eager / ort_gain), _row("ort-int8", batch, eager / 3)]
    rows.append(_row("torch-int8", 1, 0, status="error", error="RuntimeError: no qengine"))
    return pd.DataFrame(rows)


def test_study03_speedups_findings_and_claims(df03):
    same, over1 = s03.speedups_same_batch(df03), s03.speedups_over_batch1(df03)
    ort1 = same[(same.variant == "ort") & (same.batch_size == 1)].iloc[0]
    assert ort1.speedup == pytest.approx(1.5, rel=0.02) and ort1.ci_low > 1
    eager8 = over1[(over1.variant == "eager") & (over1.batch_size == 8)].iloc[0]
    assert eager8.speedup == pytest.approx(2.0, rel=0.02)  # batch 8 halves the time per text of batch 1
    text = "\n".join(s03.findings(df03, same))
    assert "eager (m fp32): lowest time per text at batch 8 (" in text and "from batch 1 to 64" in text
    assert "ort-int8: predicted labels agree with eager fp32 PyTorch on 97.0% of texts" in text
    assert "torch-int8 b1: error — RuntimeError: no qengine" in text
    claims = s03.claims(df03, same, over1, vt=verdicts.for_study(s03.NOTEBOOK, df03)).set_index("id")
    winner = claims.loc["003-onnx-wins-small-batch-cpu"]  # 1.5× over eager and TorchScript below 32
    assert winner.verdict.startswith("proxy — agrees (direction)") and "ort over torchscript b8" in winner[
        "our measurement (95% CI)"]
    within = claims.loc["003-within-10pct-at-64"]  # everything within 2% at batch 64
    assert within.verdict.startswith("proxy — agrees (number): our CI ") and within.verdict.endswith(
        "lies inside the ±10% band (the seed's tolerance)")
    assert "holds: batch 64" in within["comparable?"] and "substituted: batch" not in within["comparable?"]
    batching = claims.loc["003-batching-speeds-up"]  # batch 8 halves the time per text
    assert batching.judgement == "proxy: agrees (direction)" and "eager at b8" in batching["our measurement (95% CI)"]
    assert "beyond the 1.2× that «显著 (significant)» implies" in batching.verdict
    ort = claims.loc["004-ort-ahead-small-batch"]  # a GPU claim, on a CPU profile
    assert ort.judgement == "not comparable on this profile" and ort.verdict.startswith(
        "not comparable on this profile (GPU claim)")
    decided = verdicts.for_study(s03.NOTEBOOK, df03.assign(device="cuda"))
    on_gpu = s03.claims(df03.assign(device="cuda"), same, over1, vt=decided).set_index("id").loc["004-ort-ahead-small-batch"]
    assert on_gpu.judgement == "proxy: inconclusive"  # 1.5× faster: at, not beyond, what «好得多» is read as
    assert "crosses the 1.5× that «好得多 (much better)» implies" in on_gpu.verdict
    assert "seed compiled (torch.compile), here eager PyTorch" in on_gpu["comparable?"]
    assert "not answerable here: the classifiers carry random weights" in claims.loc["003-int8-costs-accuracy",
                                                                                      "verdict"]


@pytest.mark.parametrize("sizes, small, large", [([4, 16], 4, 16), ([1, 16, 64], 16, 64), ([8, 16, 32], 16, 32)])
def test_study04_claims_compare_the_seeds_batch_sizes_where_measured(sizes, small, large):
    rows = []
    for b in sizes:
        # unsorted gets slower per pass as batches grow (padding), sorted gets faster
        rows += [_row("eager", b, 1.0 * (1 + 0.3 * np.log2(b)), waste=0.5),
                 _row("eager", b, 1.0 / (1 + 0.1 * np.log2(b)), strategy="sorted", waste=0.05)]
    df = pd.DataFrame(rows)
    g = s04.gains(df)
    table = s04.claims(df, g, vt=verdicts.for_study(s04.NOTEBOOK, df)).set_index("id")
    first = table.loc["003-unsorted-16-to-64-slower"]
    assert f"throughput at batch {large} over batch {small}" in first["our measurement (95% CI)"]
    sorted_row = table.loc["003-sorted-16-to-64-faster"]
    if (small, large) == (16, 64):  # the seed's sizes: judged (a proxy: the model is a stand-in)
        assert first.judgement in ("proxy: agrees (number)", "proxy: agrees (direction)")  # slower, as the seed says
        assert sorted_row.judgement in ("proxy: agrees (number)", "proxy: agrees (direction)")
        assert "holds: batch 16, 64" in first["comparable?"]
    else:  # without batch 16 or 64 the claim is not answerable, whatever the other sizes show
        assert first.judgement == sorted_row.judgement == "not answerable on this profile"
        assert first.verdict.endswith(f"batch: seed 16, 64, here {small}, {large}")
    big = g[g.batch_size == large].iloc[0]
    assert big.speedup > 1 and big.ci_low > 1


def test_two_models_and_dtypes_give_one_row_per_claim_on_the_closest_set_up():
    rows = []
    for model, dtype, gain in (("m", "fp32", 1.5), ("m", "bf16", 0.8), ("n", "fp32", 1.5)):
        for batch, eager in ((1, 2.0), (8, 1.0)):
            rows += [{**r, "model": model, "dtype": dtype} for r in
                     (_row("eager", batch, eager), _row("torchscript", batch, eager), _row("ort", batch, eager / gain))]
    df = pd.DataFrame(rows)
    same, over1 = s03.speedups_same_batch(df), s03.speedups_over_batch1(df)
    table = s03.claims(df, same, over1, vt=verdicts.for_study(s03.NOTEBOOK, df)).set_index("id")
    winner = table.loc["003-onnx-wins-small-batch-cpu"]  # once per profile: on the seed's fp32, the first model run
    assert winner.verdict.startswith("proxy — agrees (direction)") and "here m —" in winner["comparable?"]
    assert "bf16" not in winner["comparable?"] and len(table) == table.index.nunique()
    text = "\n".join(s03.findings(df, same))
    assert "m bf16, batch 1, fastest to slowest" in text

    rows4 = [{**_row("eager", b, t, strategy=st), "dtype": dt} for dt in ("fp32", "bf16")
             for st, t in (("unsorted", 1.0), ("sorted", 0.5)) for b in (4, 16)]
    df4 = pd.DataFrame(rows4)
    t4 = s04.claims(df4, s04.gains(df4), vt=verdicts.for_study(s04.NOTEBOOK, df4)).set_index("id")
    assert t4.loc["003-sorting-helps", "judgement"] == "proxy: agrees (direction)" and "bf16" not in t4.loc["003-sorting-helps",
                                                                                          "comparable?"]


def test_study03_preparation_shows_each_exports_graph_size_and_torchao_labels(df03):
    steps = {"ort": [{"step": "export", "seconds": 0.4, "cached": False, "key": "a", "nodes": 120, "bytes": 2_500_000}],
             "ort-dynamo": [{"step": "export", "seconds": 4.0, "cached": False, "key": "b", "nodes": 95,
                             "bytes": 2_400_000}],
             "ort-int8": [{"step": "export", "seconds": 0.4, "cached": True, "key": "a"},  # made before sizes were kept
                          {"step": "quantize", "seconds": 0.2, "cached": True, "key": "c"}]}
    df = pd.concat([df03, pd.DataFrame([_row("ort-dynamo", 1, 1.4), _row("torchao-int8", 1, 0.9)])], ignore_index=True)
    df["prepare_steps"] = [steps.get(v) for v in df.variant]
    prep = s03.preparation_table(df).set_index(["variant", "batch_size"])
    assert prep.loc[("ort-dynamo", 1), ["export (s)", "graph nodes", "graph MB", "source"]].tolist() == [
        "4.00", "95", "2.4", "made in this run"]
    assert prep.loc[("ort", 8), ["graph nodes", "graph MB"]].tolist() == ["120", "2.5"]
    assert prep.loc[("ort-int8", 1), ["graph nodes", "graph MB", "source"]].tolist() == ["", "", "cache"]
    assert "torchao-int8" not in prep.index.get_level_values(0)  # no ONNX file: its one-time cost is the verdicts'
    text = "\n".join(s03.findings(df, s03.speedups_same_batch(df)))
    assert "torchao-int8: predicted labels agree with eager fp32 PyTorch on 97.0% of texts" in text
    assert "Parity of fp32 variants" in text and "torchao-int8 b1" not in text.split("Parity of fp32")[1].split("\n")[0]
