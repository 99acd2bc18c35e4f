"""Seed 001's questions: channels_last and cudnn.benchmark runtimes (study 01), PyTorch vs TensorFlow on single
operations (study 02), their profile sections and their claims' evaluators on synthetic rows."""

import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from studylib import runtimes
from studylib.bench import grouping, profiles, sweep
from studylib.core.config import Config
from studylib.stats import verdicts
from studylib.studies import eager_vs_compiled as s01
from studylib.studies import torchscript_vs_xla as s02
from studylib.workloads import models

rng = np.random.default_rng(7)


# --- runtimes -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def resnet():
    return models.torch_workload("resnet-tiny", batch_size=2, image_size=32, seed=3)


def test_channels_last_matches_eager_and_leaves_the_shared_model_alone(resnet):
    eager = runtimes.get("eager")
    with eager.context():
        ref = eager.to_numpy(resnet.module(*resnet.inputs))
        prepared = runtimes.get("eager-channels-last").prepare(resnet)
        out = eager.to_numpy(prepared.call())
    assert prepared.inputs[0].is_contiguous(memory_format=torch.channels_last)
    assert not prepared.inputs[0].is_contiguous()  # really NHWC in memory, not merely tagged
    conv = next(m for m in prepared.fn.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    shared = next(m for m in resnet.module.modules() if isinstance(m, torch.nn.Conv2d))
    assert shared.weight.is_contiguous() and resnet.inputs[0].is_contiguous()  # eager's model and inputs untouched
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())
    assert prepared.adapt(resnet.inputs)[0].is_contiguous(memory_format=torch.channels_last)


def test_compiled_channels_last_counts_as_compiled_and_matches_eager(resnet):
    runtime = runtimes.get("compile-default-channels-last")
    assert runtime.family == "compile" and runtime.uses_dynamo and runtimes.family("eager-channels-last") == "eager"
    from studylib.runtimes.pytorch import reset_compiled

    reset_compiled()
    with runtime.context():
        ref = runtime.to_numpy(resnet.module(*resnet.inputs))
        prepared = runtime.prepare(resnet)
        out = runtime.to_numpy(prepared.call())
    assert prepared.inputs[0].is_contiguous(memory_format=torch.channels_last)
    assert np.abs(out - ref).max() <= 1e-3 * max(1.0, np.abs(ref).max())


def test_a_text_model_has_no_layout_to_change_and_cudnn_benchmark_needs_cuda():
    text = models.torch_workload("bert-tiny", batch_size=1, seq_len=8)
    for name in ("eager-channels-last", "compile-default-channels-last"):
        with pytest.raises(runtimes.RuntimeUnavailable, match="4-D image inputs"):
            runtimes.get(name).prepare(text)
    status, message = sweep.classify_failure(runtimes.RuntimeUnavailable("channels_last needs 4-D image inputs"))
    assert status == "skipped"
    cpu = models.torch_workload("resnet-tiny", batch_size=1, image_size=32)
    with pytest.raises(runtimes.RuntimeUnavailable, match="cudnn.benchmark is a CUDA setting"):
        runtimes.get("eager-cudnn-benchmark").prepare(cpu)


def test_cudnn_benchmark_is_on_from_its_own_process_start_not_around_its_calls(monkeypatch):
    """A process started with the variant's environment (grouping.process_env) has the flag on once gpu.apply ran, as
    replicates' processes do before any model is built; another process has it off. The prepared call is the module
    itself: nothing is flipped around it (a fake CUDA workload: the call runs on CPU)."""
    from studylib.machine import gpu

    c = Config("resnet-tiny", "eager-cudnn-benchmark", "fp32", 1, "cuda", 2, image_size=32)
    probe = ("import torch; from studylib.machine import gpu; gpu.apply(gpu.policy(False, 'cuda')); "
             "print(torch.backends.cudnn.benchmark)")

    def started_with(env: dict) -> str:
        return subprocess.run([sys.executable, "-c", probe], env=os.environ | {"USE_TF": "0"} | env, text=True,
                              capture_output=True, check=True, timeout=120).stdout.strip()

    assert started_with(grouping.process_env([c])) == "True"
    assert started_with({}) == "False"
    w = models.torch_workload("resnet-tiny", batch_size=1, image_size=32)
    seen = []

    class Spy(torch.nn.Module):
        def forward(self, x):
            seen.append(torch.backends.cudnn.benchmark)
            return x * 2

    fake = models.Workload(w.model_name, w.kind, Spy(), w.inputs, "fp32", "cuda", 1, image_size=32)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    prepared = runtimes.get("eager-cudnn-benchmark").prepare(fake)
    prepared.fn(*w.inputs)
    assert seen == [True] and torch.backends.cudnn.benchmark is True and prepared.fn is fake.module
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    with pytest.raises(runtimes.RuntimeUnavailable, match="from the process's start"):
        runtimes.get("eager-cudnn-benchmark").prepare(fake)
    assert gpu.CUDNN_BENCHMARK_VAR in grouping.process_env([c])


# --- micro-ops --------------------------------------------------------------------------------------------------

def test_micro_op_modules_compute_argmax_and_strided_gather():
    a = models.torch_workload("op-argmax", batch_size=2, seq_len=6, seed=1)
    (x,) = a.inputs
    assert a.kind == "op" and a.seq_len == 6 and x.shape == (2, 6, 768)
    assert torch.equal(a.module(x), x.argmax(-1))
    g = models.torch_workload("op-gather", batch_size=2, seq_len=7, seed=1)
    x, index = g.inputs
    assert index.shape == (3,) and int(index.max()) < 4  # 7 rows strided by 2 leave 4
    out = g.module(x, index)
    assert torch.equal(out, torch.stack([x[:, 2 * int(i)] for i in index], dim=1))


def test_micro_ops_agree_between_pytorch_and_tensorflow(tensorflow_probe):
    out = tensorflow_probe["ops"]  # run in one process with TensorFlow (tests/tensorflow_probe.py)
    assert out["op-argmax"]["shape"] == [3, 10] and out["op-gather"]["shape"] == [3, 5, 768]
    for name, r in out.items():
        assert r["diffs"] == {"tf-eager": 0.0, "tf-function": 0.0, "tf-xla": 0.0, "torchscript": 0.0}, name


def test_the_work_of_a_micro_op_is_counted_without_flops():
    from studylib.workloads import work as counting

    w = counting.work_per_call("op-gather", dtype="fp32", batch_size=2, seq_len=16)
    assert w.flops == 0 and w.weight_bytes == 0 and w.activation_bytes >= 2 * 8 * 768 * 4  # the gathered copy


# --- profiles and configurations -------------------------------------------------------------------------------

def _s01(**kw):
    return s01.EagerVsCompiled(**{"models": ["bert-tiny", "resnet-tiny"], "dtypes": ["fp32", "bf16"],
                                  "batch_sizes": [1, 4], "seq_lens": [16], "image_size": 32,
                                  "variants": ["eager", "compile-default", "eager-channels-last",
                                               "compile-default-channels-last", "eager-cudnn-benchmark"]} | kw)


def test_study01_adds_the_image_only_variants_to_image_models_only():
    section = _s01(vision_only_skip=[{"dtype": "bf16"}])
    configs = s01.configs(section, device="cpu", threads=2)
    by = {}
    for c in configs:
        by.setdefault((c.model, c.dtype, c.batch_size), []).append(c.variant)
    assert by[("bert-tiny", "fp32", 1)] == ["eager", "eager-aa", "compile-default"]
    assert by[("resnet-tiny", "bf16", 4)] == ["eager", "eager-aa", "compile-default"]
    assert by[("resnet-tiny", "fp32", 4)] == ["eager", "eager-aa", "compile-default", "eager-channels-last",
                                              "compile-default-channels-last", "eager-cudnn-benchmark"]
    assert s01.estimate_s([c for c in configs if c.variant == "eager-cudnn-benchmark"][0], section,
                          {"warmup_calls": 2, "min_rounds": 6, "min_time_s": 1.0, "block_s": 0.0, "replicates": 1}) == 0


def test_study01_rejects_a_bad_variant_a_bad_skip_and_a_micro_op():
    with pytest.raises(ValueError, match="variants"):
        _s01(variants=["eager", "eager-nhwc"])
    with pytest.raises(ValueError, match=r"vision_only_skip\[0\]: dtype 'fp16' is not in dtypes"):
        _s01(vision_only_skip=[{"dtype": "fp16"}])
    with pytest.raises(ValueError, match="micro-ops are study 02's"):
        _s01(models=["op-argmax"])


def test_study02_times_micro_ops_at_their_own_sizes():
    section = s02.TorchscriptVsXla(models=["bert-tiny"], variants=["eager", "tf-function"], dtypes=["fp32"],
                                   batch_sizes=[1], seq_lens=[8],
                                   micro_ops={"models": ["op-argmax", "op-gather"], "batch_sizes": [2, 8],
                                              "seq_lens": [128]})
    configs = s02.configs(section, device="cpu", threads=2)
    ops = {(c.model, c.batch_size, c.seq_len) for c in configs if c.model.startswith("op-")}
    assert ops == {(m, b, 128) for m in ("op-argmax", "op-gather") for b in (2, 8)}
    assert [c.variant for c in configs if c.model == "op-argmax" and c.batch_size == 2] == ["eager", "eager-aa",
                                                                                            "tf-function"]
    assert all(s02.estimate_s(c, section, {"warmup_calls": 2, "min_rounds": 6, "min_time_s": 1.0, "block_s": 0.0,
                                           "replicates": 1}) > 0 for c in configs)


def test_study02_rejects_a_micro_op_among_its_models_and_a_model_among_its_micro_ops():
    base = {"variants": ["eager"], "dtypes": ["fp32"], "batch_sizes": [1], "seq_lens": [8]}
    with pytest.raises(ValueError, match="not a text model"):
        s02.TorchscriptVsXla(models=["op-argmax"], **base)
    with pytest.raises(ValueError, match="'bert-tiny' is not a single operation"):
        s02.TorchscriptVsXla(models=["bert-tiny"], micro_ops={"models": ["bert-tiny"], "batch_sizes": [1],
                                                              "seq_lens": [8]}, **base)
    with pytest.raises(ValueError, match="at least 2"):
        s02.TorchscriptVsXla(models=["bert-tiny"], micro_ops={"models": ["op-gather"], "batch_sizes": [1],
                                                              "seq_lens": [1]}, **base)


@pytest.mark.parametrize("name", ["smoke", "cpu", "gpu-v100", "gpu-h100"])
def test_profiles_run_the_new_parts(name):
    loaded = profiles.load(name)
    one, two = loaded.sections["01_eager_vs_compiled"], loaded.sections["02_torchscript_vs_xla"]
    assert "eager-channels-last" in one.variants and two.micro_ops is not None
    configs = s01.configs(one, device=loaded.profile.device, threads=2)
    layout = {c.model for c in configs if c.variant in s01.VISION_ONLY}
    assert layout and all(models.MODELS[m].kind == "vision" for m in layout)


# --- analysis and evaluators on synthetic rows -----------------------------------------------------------------

def _row(model, variant, batch, median, *, seq=None, image=32, status="ok", error="", device="cpu"):
    base = {"model": model, "variant": variant, "dtype": "fp32", "batch_size": batch, "seq_len": seq,
            "image_size": image, "device": device, "threads": 2, "status": status, "error": error,
            "compilations": None, "recompilations": None}
    if status != "ok":
        return base
    samples = list(rng.normal(median, median * 0.01, 40))
    return base | {"samples_s": samples, "median_s": float(np.median(samples)), "first_call_s": median * 3,
                   "prepare_s": 0.01, "max_abs_diff": 0.0, "parity_ok": True, "cv": 0.01, "stop_reason": "precision",
                   "ci_low_s": median * 0.99, "ci_high_s": median * 1.01, "warmup_calls": 1, "n": 40,
                   "throughput_samples_s": batch / median, "peak_mem_mb": None}


@pytest.fixture
def layout_rows():
    """channels_last 1.25× the default layout, eager and compiled; cudnn.benchmark skipped (a CPU profile)."""
    rows = []
    for batch in (1, 8):
        t = 0.01 * batch
        rows += [_row("resnet-tiny", "eager", batch, t), _row("resnet-tiny", "eager-aa", batch, t),
                 _row("resnet-tiny", "compile-default", batch, t / 2),
                 _row("resnet-tiny", "eager-channels-last", batch, t / 1.25),
                 _row("resnet-tiny", "compile-default-channels-last", batch, t / 2.5),
                 _row("resnet-tiny", "eager-cudnn-benchmark", batch, 0, status="skipped",
                      error="cudnn.benchmark is a CUDA setting")]
    return pd.DataFrame(rows)


def test_layout_table_findings_and_claim(layout_rows):
    lay = s01.layout_speedups(layout_rows)
    ok = lay[lay.speedup.notna()]
    assert set(ok.pair) == {"eager-channels-last over eager", "compile-default-channels-last over compile-default"}
    assert np.allclose(ok.speedup, 1.25, rtol=0.03)
    skipped = lay[lay.candidate == "eager-cudnn-benchmark"]
    assert len(skipped) == 2 and (skipped.status == "skipped").all() and "CUDA setting" in skipped.error.iloc[0]
    sp = s01.speedups(layout_rows, vt=verdicts.for_study(s01.NOTEBOOK, layout_rows))
    from studylib.report import prose

    text = "\n".join(prose.verdict_lines(verdicts.for_study(s01.NOTEBOOK, layout_rows.assign(task="vision"))))
    assert "**channels_last (NHWC) over the default layout, eager**: faster at every workload (1.2" in text
    assert "**cudnn.benchmark (own process, unpaired) over eager**: not measured (skipped: " in text
    assert set(s01.compile_table(sp, layout_rows).variant) == {"compile-default", "compile-default-channels-last"}
    cpu = s01.claims(layout_rows, sp, vt=verdicts.for_study(s01.NOTEBOOK, layout_rows)).set_index("id").loc["001-nhwc-volta"]
    assert cpu.judgement == "not comparable on this profile" and "(shown, not judged)" in cpu[
        "our measurement (95% CI)"]
    gpu_rows = layout_rows.assign(device="cuda")
    decided = verdicts.for_study(s01.NOTEBOOK, gpu_rows)
    gpu = s01.claims(gpu_rows, s01.speedups(gpu_rows, vt=decided), vt=decided).set_index("id").loc["001-nhwc-volta"]
    assert gpu.judgement == "not answerable on this profile"  # Volta's NHWC gain is a tensor-core (fp16) claim
    assert gpu.verdict.endswith("precision: seed fp16, here fp32")
    half = layout_rows.assign(device="cuda", dtype="fp16")
    decided = verdicts.for_study(s01.NOTEBOOK, half)
    gpu = s01.claims(half, s01.speedups(half, vt=decided), vt=decided).set_index("id").loc["001-nhwc-volta"]
    assert gpu.judgement == "agrees (direction)" and gpu.verdict.endswith("(the seed gives no number)")
    assert "caveat: workload: seed training benchmarks, here inference; layout: " in gpu["comparable?"]  # not a proxy
    assert "holds: precision fp16" in gpu["comparable?"] and "over 4" not in gpu.verdict
    assert "on 2 shape(s)" in gpu["our measurement (95% CI)"]


def test_layout_claim_is_not_answerable_without_channels_last(layout_rows):
    rows = layout_rows[~layout_rows.variant.str.contains("channels-last")].assign(device="cuda", dtype="fp16")
    decided = verdicts.for_study(s01.NOTEBOOK, rows)
    claim = s01.claims(rows, s01.speedups(rows, vt=decided), vt=decided).set_index("id").loc["001-nhwc-volta"]
    assert claim.judgement == "not answerable from these results" and "image models only" in claim.verdict


@pytest.fixture
def op_rows():
    """PyTorch eager at 1/1.5 of tf.function's speed on both operations, 2× tf-eager's; and a whole model where
    PyTorch and TensorFlow are equal."""
    rows = []
    for op in ("op-argmax", "op-gather"):
        for batch in (1, 32):
            t = 1e-4 * batch
            rows += [_row(op, "eager", batch, t * 1.5, seq=128, image=None),
                     _row(op, "eager-aa", batch, t * 1.5, seq=128, image=None),
                     _row(op, "tf-eager", batch, t * 3, seq=128, image=None),
                     _row(op, "tf-function", batch, t, seq=128, image=None),
                     _row(op, "tf-xla", batch, t, seq=128, image=None),
                     _row(op, "torchscript", batch, t * 1.2, seq=128, image=None)]
    for seq in (8, 64):
        rows += [_row("bert-tiny", v, 1, 0.001 * seq, seq=seq, image=None)
                 for v in ("eager", "eager-aa", "tf-function", "tf-eager", "tf-xla", "torchscript")]
    return pd.DataFrame(rows)


def test_micro_ops_stay_out_of_the_whole_model_analysis(op_rows):
    sp = s02.speedups(op_rows)
    assert set(sp.model) == {"bert-tiny"}
    ops = s02.op_speedups(op_rows)
    eager_fn = ops[ops.pair == "eager over tf-function"]
    assert set(ops.model) == {"op-argmax", "op-gather"} and len(eager_fn) == 4
    assert np.allclose(eager_fn.speedup, 1 / 1.5, rtol=0.03)
    text = "\n".join(s02.findings(op_rows, sp))

    tasks = op_rows.assign(task=["op" if m.startswith("op-") else "text" for m in op_rows.model])
    vt = verdicts.for_study(s02.NOTEBOOK, tasks)  # the verdict table judges whole models only
    assert {v.model for v in vt} == {"bert-tiny"} and any(v.candidate == "tf-function" for v in vt.options())
    # about 1/1.5 (the fake samples are noisy, 3%) at the decimals its CI supports (core/numbers.py): 0.67× or 0.667×
    assert re.search(r"\*\*Single operations, eager over tf-function\*\* \(below 1: PyTorch slower\): op-argmax "
                     r"0\.6[4-9]\d?×", text), text
    assert "PyTorch faster in 0, slower in 4" in text
    assert "**Single operations, eager over tf-eager**" in text and "PyTorch faster in 4" in text
    table = s02.op_table(op_rows)
    assert len(table) == 16 and table["speed-up (95% CI)"].str.contains("95% CI").all()
    assert table.loc[0, "batch × seq (× 768)"] == "1 × 128" and float(table.loc[0, "PyTorch (ms)"]) > 0


def test_the_unusual_ops_claim_is_judged_on_the_micro_ops_only(op_rows):
    claims = s02.claims(op_rows, s02.speedups(op_rows), vt=verdicts.for_study(s02.NOTEBOOK, op_rows)).set_index("id")
    for op in ("argmax", "gather"):  # each operation judged on its own rows only
        ops = claims.loc[f"001-unusual-ops-{'argmax' if op == 'argmax' else 'slicing'}"]
        # 1.5×: at «慢得多»'s threshold; the caveat (one op's inference, not a training graph) is shown, not a proxy
        assert not ops.judgement.startswith("proxy") and "much slower" in ops.verdict
        measured = ops["our measurement (95% CI)"]  # judged per size (claims.per_cell), one cell per size
        assert f"eager over tf-function per operation and size: least favourable: op-{op} b" in measured
        assert measured.count(f"op-{op} b") == 3 and f"op-{'gather' if op == 'argmax' else 'argmax'}" not in measured
        assert f"holds: model op-{op}" in ops["comparable?"] and "mode: seed TensorFlow 1.x" in ops["comparable?"]
    # the whole-model claims see only bert-tiny: TensorFlow equal to PyTorch there, not 1.5× as on the ops
    cpu = claims.loc["000-cpu-tf-slower"]
    assert "1 × " not in cpu["our measurement (95% CI)"] and "over 2 shape(s)" in cpu["our measurement (95% CI)"]
    assert list(claims.index) == [c.id for c in s02.seedclaims.registry() if c.study == s02.NOTEBOOK]


def test_without_micro_ops_the_claim_says_what_is_missing(op_rows):
    whole = op_rows[op_rows.model == "bert-tiny"]
    decided = verdicts.for_study(s02.NOTEBOOK, whole)
    ops = s02.claims(whole, s02.speedups(whole), vt=decided).set_index("id").loc["001-unusual-ops-argmax"]
    assert ops.judgement == "not answerable on this profile" and "micro_ops" in ops["our measurement (95% CI)"]
    assert len(s02.op_table(whole)) == 0 and not any("Single operations" in x for x in s02.findings(whole,
                                                                                                  s02.speedups(whole)))
