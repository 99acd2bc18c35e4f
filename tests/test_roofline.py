"""The roofline: FLOP counts against hand counts, the measured limits against a direct timing, the regime rule,
work per call in measured rows, and old tables (without the work columns) still analysed. No timing thresholds."""

import dataclasses
import json
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import measuring
from studylib.bench import roofline
from studylib.core.config import Config
from studylib.machine import limits
from studylib.report import plots
from studylib.stats import verdicts
from studylib.stats.results import ResultsTable
from studylib.workloads import models
from studylib.workloads import work as counting

MEASURE = {"warmup_calls": 0, "min_rounds": 6, "max_rounds": 8, "min_time_s": 0.0, "target_ci_pct": 50.0,
           "budget_s": 0.05, "block_s": 0.0, "replicates": 1}
TOLERANCE = {"fp32": 1e-3, "int8": 0.1}
PEAKS = {"method": limits.METHOD, "device": "cpu", "threads": 2, "seconds": 1.0, "measured_at": "now",
         "matmul": {"fp32": {"gflops": 100.0, "ci_low": 95.0, "ci_high": 105.0, "n": 10, "size": 1024,
                             "kernel": "torch.mm"},
                    "int8": {"skipped": "not in this test"}},
         "bandwidth": {"gbs": 10.0, "ci_low": 9.0, "ci_high": 11.0, "n": 10, "bytes": 1, "kernel": "triad"}}


def _bert_hand_count(config: dict, batch: int, seq: int) -> int:
    """BERT by hand: per layer Q, K, V and output projections (4·h²·s), the two attention matmuls (2·s²·h)
    and the feed-forward pair (2·h·ffn·s), two FLOPs per multiply-add; then the pooler (h² on one token)."""
    h, ffn, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    per_layer = 2 * (4 * h * h * seq + 2 * seq * seq * h + 2 * h * ffn * seq)
    return batch * (layers * per_layer + 2 * h * h)


def _conv(c_in: int, c_out: int, k: int, out: int) -> int:
    return 2 * c_in * c_out * k * k * out * out


def _resnet_basic_hand_count(config: dict, image: int) -> int:
    """A basic-block ResNet by hand: the 7×7 stride-2 stem and a 3×3 stride-2 max pool, then per stage two
    3×3 convolutions per block (the first stage at stride 1, later ones halving the size in their first
    block, with a 1×1 projection where the width or size changes), then the classifier."""
    width = config["embedding_size"]
    size = image // 2
    flops = _conv(3, width, 7, size)
    size //= 2
    for stage, (out, depth) in enumerate(zip(config["hidden_sizes"], config["depths"])):
        for block in range(depth):
            stride = 2 if stage > 0 and block == 0 else 1
            size_out = size // stride
            flops += _conv(width, out, 3, size_out) + _conv(out, out, 3, size_out)
            if width != out or stride != 1:
                flops += _conv(width, out, 1, size_out)
            width, size = out, size_out
    return flops + 2 * width * config["num_labels"]


def test_bert_flops_match_the_hand_count():
    config = models.spec("bert-tiny").config
    for batch, seq in ((1, 8), (2, 16), (3, 64)):
        work = counting.work_per_call("bert-tiny", dtype="fp32", batch_size=batch, seq_len=seq)
        assert work.flops == pytest.approx(_bert_hand_count(config, batch, seq), rel=0.02)
        params = sum(p.numel() for p in models.build_torch("bert-tiny").parameters())
        assert work.weight_bytes >= 4 * params and work.activation_bytes > 0


def test_resnet_flops_match_the_hand_count():
    config = models.spec("resnet-tiny").config
    work = counting.work_per_call("resnet-tiny", dtype="fp32", batch_size=2, image_size=32)
    assert work.flops == pytest.approx(2 * _resnet_basic_hand_count(config, 32), rel=0.02)


def test_a_model_meta_cannot_run_is_counted_on_the_real_one():
    """DistilBERT's attention cannot run on the meta device: its count comes from the real model, the same."""
    module = models.build_torch("distilbert-tiny")
    inputs = models.torch_inputs("distilbert-tiny", batch_size=2, seq_len=8)
    work = counting.work_per_call("distilbert-tiny", dtype="fp32", batch_size=2, seq_len=8,
                                  real=lambda: (module, inputs))
    assert work == counting.count(module, inputs) and work.flops > 0


def test_pass_work_counts_padding_and_the_useful_part():
    """Per-text counts come from a quadratic fitted on four lengths: they equal direct counts."""
    lengths = [3, 5, 9, 12, 17, 20, 31]
    works = counting.per_text("bert-tiny", "fp32", lengths)
    for n in (5, 20):
        assert works[n] == counting.work_per_call("bert-tiny", dtype="fp32", batch_size=1, seq_len=n)
    batches = [(2, 5), (3, 20), (2, 31)]  # (texts, padded length)
    work = counting.pass_work("bert-tiny", "fp32", batches, lengths)
    assert work["flops_per_call"] == sum(b * works[n].flops for b, n in batches)
    assert work["useful_flops_per_call"] == sum(works[n].flops for n in lengths)
    assert work["bytes_per_call"] > 3 * works[5].weight_bytes  # weights read once per batch


def test_peak_is_the_rate_of_a_direct_matmul():
    """Within a factor of 100 of timing the same product directly: a check of units (a GFLOP/s-vs-FLOP/s slip is
    1000x), not a speed threshold; the direct rate is the best of ten calls, as a loaded host (make test's other
    worker) slowed a median of five 29x once."""
    import torch

    peak = limits.matmul_peak("fp32", "cpu", 0.3)
    assert peak["ci_low"] <= peak["gflops"] <= peak["ci_high"] and peak["n"] >= limits.MIN_SAMPLES
    n = peak["size"]
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - t0)
    direct = 2 * n ** 3 / min(times) / 1e9
    assert 0.01 < peak["gflops"] / direct < 100


def test_limits_are_measured_once_per_environment(monkeypatch):
    import torch

    calls = []
    monkeypatch.setattr(limits, "measure_peaks", lambda device, budget: calls.append(device) or {"new": True})
    env = {"fingerprint": "abc"}
    kept = PEAKS | {"threads": torch.get_num_threads()}
    assert limits.cached_peaks(env, {"fingerprint": "abc", "peaks": kept}, device="cpu", budget=1) is kept
    assert not calls
    for previous in ({"fingerprint": "other", "peaks": kept}, {"fingerprint": "abc", "peaks": kept | {"threads": 99}},
                     {"fingerprint": "abc", "peaks": kept | {"method": -1}}, None):
        assert limits.cached_peaks(env, previous, device="cpu", budget=1) == {"new": True}
    assert len(calls) == 4


def test_measured_limits_have_every_dtype_and_a_bandwidth():
    """The libraries' GEMMs (machine/gemm.py, tests/test_gemm.py) come from a fake runner here: no processes."""
    from studylib.machine import gemm

    def runner(library, threads, budget):
        return {key: {"status": "failed", "message": "not run in this test"} for key in gemm.CHILDREN[library]}

    peaks = limits.measure_peaks("cpu", budget=0.5, gemm_runner=runner)
    assert set(peaks["gemm"]["libraries"]) == {k for keys in gemm.CHILDREN.values() for k in keys}
    assert set(peaks["matmul"]) == set(limits.peak_dtypes("cpu"))
    assert peaks["bandwidth"]["ci_low"] <= peaks["bandwidth"]["gbs"] <= peaks["bandwidth"]["ci_high"]
    assert json.loads(json.dumps(peaks)) == peaks  # stored in env.json as it is
    assert "memory bandwidth" in limits.describe_peaks(peaks)


@pytest.mark.parametrize("achieved, intensity, expected", [
    (8.0, 1.0, "memory-bound"),  # memory roof 10 GFLOP/s at 1 FLOP/byte: 80% of it
    (2.0, 1.0, "overhead-bound"),  # 20% of the memory roof
    (60.0, 100.0, "compute-bound"),  # the compute peak (100) caps the roof at 100 FLOPs/byte
    (20.0, 100.0, "overhead-bound"),  # 20% of the peak
    (30.0, 5.0, "memory-bound"),  # ridge at 10 FLOPs/byte: 5 is on the slope (roof 50)
])
def test_regime_rule(achieved, intensity, expected):
    assert roofline.regime(achieved, intensity, 100.0, 10.0) == expected


def test_regime_is_unknown_without_limits_or_work():
    assert roofline.regime(8.0, 1.0, None, 10.0) == roofline.UNKNOWN
    assert roofline.regime(float("nan"), 1.0, 100.0, 10.0) == roofline.UNKNOWN


RNG = np.random.default_rng(0)


def _synthetic(variant, seconds, *, flops=10**9, moved=10**7, batch=1):
    samples = list(RNG.normal(seconds, seconds * 0.005, 12))
    return {"config_key": f"m|{variant}|b{batch}", "model": "m", "variant": variant, "dtype": "fp32",
            "batch_size": batch, "seq_len": 8, "image_size": None, "strategy": None, "status": "ok",
            "median_s": float(np.median(samples)), "samples_s": samples, "sample_rep": [0] * 12,
            "sample_round": list(range(12)), "flops_per_call": flops, "bytes_per_call": moved}


def test_roofline_table_and_regime_findings_on_synthetic_rows():
    # batch 1: eager at 1 GFLOP/s (1% of the 100 GFLOP/s attainable at 100 FLOPs/byte): overhead-bound, and the
    # candidate twice as fast; batch 8: eager at 80 GFLOP/s (compute-bound), the candidate no faster.
    df = pd.DataFrame([_synthetic("eager", 1.0), _synthetic("torchscript", 0.5),
                       _synthetic("eager", 0.1, flops=8 * 10**9, moved=8 * 10**7, batch=8),
                       _synthetic("torchscript", 0.1, flops=8 * 10**9, moved=8 * 10**7, batch=8)]
                      + [{"config_key": "m|tf-xla|b1", "model": "m", "variant": "tf-xla", "dtype": "fp32",
                          "batch_size": 1, "status": "error"}])
    rt = roofline.roofline_table(df, PEAKS)
    eager = rt[rt.variant == "eager"].set_index("batch_size")
    assert list(eager.regime) == ["overhead-bound", "compute-bound"]
    assert eager.loc[8, "gflops"] == pytest.approx(80.0, rel=0.02)
    assert eager.loc[8, "share_of_peak"] == pytest.approx(0.8, rel=0.02)
    assert eager.loc[1, "intensity"] == 100.0
    assert rt[rt.variant == "tf-xla"].regime.iloc[0] == roofline.UNKNOWN
    vt = verdicts.compute("t", df)
    assert [v.decision for v in vt.options() if v.candidate == "torchscript"] == ["faster", "equal"]
    lines = roofline.regime_findings(df, rt, [("torchscript", "eager"), ("tf-xla", "torchscript")],
                                     vt, ["model", "dtype", "batch_size"])
    assert lines == ["**torchscript over eager by regime** (the regime of eager's call; decisions from the verdict "
                     "table): faster in 1 of 1 overhead-bound shapes; faster in 0 of 1 compute-bound shapes (equal in 1)."]
    # the regime lines say what the verdict table decides, not what they would decide from the rows' CIs
    doctored = dataclasses.replace(vt, rows=tuple(dataclasses.replace(v, decision="undecided") for v in vt.rows))
    assert roofline.regime_findings(df, rt, [("torchscript", "eager")], doctored,
                                    ["model", "dtype", "batch_size"])[0].endswith(
        "faster in 0 of 1 overhead-bound shapes (undecided in 1); faster in 0 of 1 compute-bound shapes (undecided in 1).")
    # a pair the table does not compare (tf-xla failed) has no line; one read the other way round is mirrored
    assert roofline.regime_findings(df, rt, [("eager", "torchscript")], vt,
                                    ["model", "dtype", "batch_size"])[0].endswith(
        "faster in 0 of 1 overhead-bound shapes (slower in 1); faster in 0 of 1 compute-bound shapes (equal in 1).")
    # attach counts the pairs the table compares at every shape (an option, a declared comparison), not a pair it
    # holds only where the two lead (a fastest-over-runner-up row)
    attached = roofline.attach(SimpleNamespace(tables={}, findings=[]), df, PEAKS, [("torchscript", "eager")], vt,
                               ["model", "dtype", "batch_size"])
    assert attached.findings[1:] == lines
    as_leads = dataclasses.replace(vt, rows=tuple(dataclasses.replace(v, kind="lead") for v in vt.rows))
    assert roofline.attach(SimpleNamespace(tables={}, findings=[]), df, PEAKS, [("torchscript", "eager")], as_leads,
                           ["model", "dtype", "batch_size"]).findings[1:] == []
    assert "2 overhead-bound, 0 memory-bound, 2 compute-bound" in roofline.summary_finding(rt, PEAKS)
    fig = plots.roofline(rt, PEAKS)
    assert "not plotted, 1 configuration(s): 1 error" in " ".join(t.get_text() for t in fig.axes[0].texts)


def test_old_tables_without_work_columns_still_analyse(tmp_path):
    """Rows stored before work was counted lack the new columns: they load, and every study page still
    renders its roofline table, saying the rows have no FLOP count."""
    from studylib.stats.measurement import MEASURED_COLUMNS
    from studylib.studies import eager_vs_compiled as s01

    new = {"flops_per_call", "bytes_per_call", "useful_flops_per_call", "graph_breaks"}
    assert new <= set(MEASURED_COLUMNS)
    path = tmp_path / "old.jsonl"
    rows = []
    for variant, seconds in (("eager", 0.01), ("compile-default", 0.008)):
        row = _synthetic(variant, seconds) | {"model": "bert-tiny", "seq_len": 16, "config_key": variant,
                                               "status": "ok", "error": "", "ci_run_low_s": seconds * 0.99,
                                               "ci_run_high_s": seconds * 1.01, "first_call_s": seconds,
                                               "prepare_s": 0.1, "n": 12, "replicates": 1, "parity_ok": True,
                                               "max_abs_diff": 0.0, "cv": 0.005, "stop_reason": "precision",
                                               "device": "cpu"}
        rows.append({k: v for k, v in row.items() if k not in new})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    df = ResultsTable(path).frame(with_samples=True)
    for peaks in (None, PEAKS):
        analysis = s01.analyse(df, peaks, vt=verdicts.for_study(s01.NOTEBOOK, df))
        rt = analysis.tables["roofline"]
        assert list(rt.regime) == [roofline.UNKNOWN] * 2 and rt.gflops.isna().all()
        assert any(line.startswith("**Roofline**") for line in analysis.findings)
        assert "graph breaks" in analysis.tables["compile"]
    decided = verdicts.for_study(s01.NOTEBOOK, df)
    assert "none of the 2 measured configurations has a FLOP count" in " ".join(s01.analyse(df, PEAKS, vt=decided).findings)
    assert "peaks unknown" in " ".join(s01.analyse(df, vt=verdicts.for_study(s01.NOTEBOOK, df)).findings)


def test_measured_rows_carry_their_work(tmp_path):
    """A real (tiny) measurement stores FLOPs and bytes per call, the same as counted directly."""
    configs = [Config("bert-tiny", v, "fp32", 2, "cpu", 2, seq_len=8) for v in ("eager", "torchscript")]
    rows = measuring.measure(configs, table=ResultsTable(tmp_path / "t.jsonl"), measure=MEASURE, tolerance=TOLERANCE)
    expected = counting.work_per_call("bert-tiny", dtype="fp32", batch_size=2, seq_len=8)
    for r in rows:
        assert r["status"] == "ok", r["error"]
        assert (r["flops_per_call"], r["bytes_per_call"]) == (expected.flops, expected.bytes)
        assert r["useful_flops_per_call"] is None


def test_sorting_gain_is_set_beside_the_padding_prediction():
    """Study 04: the gain computed tokens (and FLOPs) alone predict, next to the measured one."""
    from studylib.studies import sorted_batching as s04

    rows = [_synthetic("eager", 1.0) | {"strategy": "unsorted", "computed_tokens": 400, "flops_per_call": 4 * 10**9},
            _synthetic("eager", 0.6) | {"strategy": "sorted", "computed_tokens": 250, "flops_per_call": 2 * 10**9}]
    df = pd.DataFrame(rows).assign(batch_size=4, error="")
    p = s04.predicted_gains(df, s04.gains(df)).iloc[0]
    assert (p.predicted_tokens, p.predicted_flops) == (1.6, 2.0)
    assert p.speedup == pytest.approx(1 / 0.6, rel=0.02)
    table = s04.predicted_table(s04.predicted_gains(df, s04.gains(df)))
    assert table["measured vs prediction"].iloc[0].startswith("less than FLOPs predict")
    line = s04.prediction_findings(s04.predicted_gains(df, s04.gains(df)))[0]
    assert "predicted 1.60× from computed tokens, 2.00× from FLOPs" in line and "at 0 of 1 batch sizes" in line
