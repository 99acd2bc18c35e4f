"""Study 02: the same weights in PyTorch and TensorFlow, thread settings in both, and the analysis on synthetic rows."""

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest

from studylib.report import plots
from studylib.stats import speedups, verdicts
from studylib.studies import torchscript_vs_xla as s02

rng = np.random.default_rng(1)

@pytest.fixture(scope="module")
def twin(tensorflow_probe):
    return tensorflow_probe["twin"]


def test_tensorflow_twin_holds_the_same_weights(twin):
    for name, (eager_diff, xla_diff, scale, compilations) in twin["diffs"].items():
        assert scale > 0.1, name  # outputs are not trivially zero
        assert eager_diff < 1e-4 * max(1, scale), name
        assert xla_diff < 1e-4 * max(1, scale), name
        assert compilations == 1, name  # one trace for one input shape


def test_thread_settings_reach_both_frameworks(twin):
    t = twin["threads"]
    assert (t["torch_intra_op"], t["torch_inter_op"], t["tf_intra_op"], t["tf_inter_op"]) == (1, 1, 1, 1)


def _row(model, variant, batch, seq, median, *, status="ok", error=""):
    base = {"model": model, "variant": variant, "dtype": "fp32", "batch_size": batch, "seq_len": seq, "device": "cpu",
            "status": status, "error": error, "compilations": None, "recompilations": None}
    if status != "ok":
        return base
    samples = list(rng.normal(median, median * 0.01, 40))
    comp = 1 if variant.startswith("tf-") and variant != "tf-eager" else None
    return base | {"samples_s": samples, "median_s": float(np.median(samples)), "first_call_s": median * 50,
                   "prepare_s": 0.01, "max_abs_diff": 1e-6, "parity_ok": True, "cv": 0.01, "stop_reason": "precision",
                   "compilations": comp, "recompilations": 0 if comp else None}


@pytest.fixture
def df():
    rows = []
    for model, ts_gain in (("bert-tiny", 1.25), ("gpt2-tiny", None)):
        for batch in (1, 4):
            for seq in (8, 64):
                eager = 0.001 * batch * seq / 8
                rows += [_row(model, "eager", batch, seq, eager),
                         _row(model, "tf-eager", batch, seq, eager * 2),
                         _row(model, "tf-function", batch, seq, eager * 1.1),
                         # XLA gains most on the smallest input
                         _row(model, "tf-xla", batch, seq, eager * 1.1 / (1.5 if batch * seq == 8 else 1.1))]
                rows.append(_row(model, "torchscript", batch, seq, eager / ts_gain) if ts_gain else
                            _row(model, "torchscript", batch, seq, 0, status="error", error="RuntimeError: trace"))
    return pd.DataFrame(rows)


def test_speedups_pair_each_variant_with_its_baseline_and_keep_failures(df):
    sp = s02.speedups(df)
    ts = sp[(sp.pair == "torchscript over eager") & (sp.model == "bert-tiny")]
    assert len(ts) == 4 and np.allclose(ts.speedup, 1.25, rtol=0.03)
    assert (ts.ci_low < ts.speedup).all() and (ts.speedup < ts.ci_high).all()
    failed = sp[(sp.candidate == "torchscript") & (sp.model == "gpt2-tiny")]
    assert len(failed) == 4 and failed.speedup.isna().all() and (failed.status == "error").all()
    assert failed.error.iloc[0] == "torchscript: RuntimeError: trace"
    cross = sp[(sp.pair == "tf-eager over eager")]
    assert np.allclose(cross.speedup, 0.5, rtol=0.03) and set(cross.kind) == {"across"}


def test_geomean_ci_covers_the_true_ratio_and_narrows_with_samples():
    def row(x):
        return {"samples_s": list(x)}  # rows from different runs: not paired

    pairs = [(rng.normal(2.0, 0.02, 200), rng.normal(1.0, 0.01, 200)),
             (rng.normal(1.0, 0.01, 200), rng.normal(2.0, 0.02, 200))]
    g, lo, hi = speedups.geomean_of([(row(b), row(c)) for b, c in pairs])
    assert g == pytest.approx(1.0, abs=0.01) and lo < 1.0 < hi
    _, lo10, hi10 = speedups.geomean_of([(row(b[:10]), row(c[:10])) for b, c in pairs])
    assert hi10 - lo10 > hi - lo


def test_findings_and_claims_come_from_the_data(df):
    sp = s02.speedups(df)
    text = "\n".join(s02.findings(df, sp))
    from studylib.report import prose

    lines = "\n".join(prose.verdict_lines(verdicts.for_study(s02.NOTEBOOK, df)))
    assert "**TorchScript over eager PyTorch**: faster at bert-tiny (all 4 shapes) (1.2" in lines and "4 not measured" in lines
    assert "4 of 40 configurations did not run" in text and "RuntimeError: trace" in text
    assert "XLA compiled 8 graphs in the first calls of 8 configurations" in text
    assert "recompiled 0 times" in text
    claims = s02.claims(df, sp, vt=verdicts.for_study(s02.NOTEBOOK, df)).set_index("id")
    ts = claims.loc["000-torchscript-20pct"]  # 1.25× here, the seed's 1.20 outside a narrow CI
    assert ts.judgement == "proxy: agrees (direction)" and "larger than the seed's 1.2" in ts.verdict
    cpu = claims.loc["000-cpu-tf-slower"]  # tf.function at 1/1.1 of eager's speed; the seed's 0.748 / 0.823
    assert cpu.verdict.startswith("proxy — agrees (number): the seed's 0.909 lies inside our CI")
    assert "substituted: model: seed the transformers library's models" in cpu["comparable?"]
    assert "seed's sizes lacking here: batch 2, 8; sequence 128, 256, 512, 1024" in cpu["comparable?"]
    linear = claims.loc["003-seq-linear-large-batch"]  # time ∝ sequence in this data: exponent 1
    assert linear.judgement == "not answerable on this profile"  # the seed's batch 64 is absent: no verdict
    assert linear.verdict.endswith("batch: seed 64, here 4") and "(shown, not judged)" in linear[
        "our measurement (95% CI)"]
    xla = claims.loc["000-xla-70pct"]
    assert xla.judgement == "not comparable on this profile" and "tested by gpu-h100, gpu-v100" in xla.verdict
    decided = verdicts.for_study(s02.NOTEBOOK, df.assign(device="cuda"))
    on_gpu = s02.claims(df.assign(device="cuda"), sp, vt=decided).set_index("id").loc["000-xla-70pct"]
    # both models gain 1.5x at the smallest input here, so either may be named
    assert re.search(r"\((bert|gpt2)-tiny; the smallest input\)", on_gpu["our measurement (95% CI)"])
    assert on_gpu.verdict.startswith("proxy — agrees (direction)")  # an 'up to' number: not on substitute models
    assert "not compared on other models" in on_gpu.verdict


def test_heatmap_marks_failed_cells(df):
    sp = s02.speedups(df)
    fig = plots.heatmap(sp[sp.kind == "within"], row="pair", col="model")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts.count("error") == 4  # gpt2-tiny's torchscript over eager, on 4 shapes
    assert any(t.startswith("1.25×") or t.startswith("1.24×") or t.startswith("1.26×") for t in texts)


def test_export_aoti_runs_where_variant_skip_lets_it_and_never_on_the_micro_ops():
    section = s02.TorchscriptVsXla(models=["bert-tiny", "gpt2-tiny"], variants=["eager", "torchscript", "export-aoti"],
                                   dtypes=["fp32"], batch_sizes=[1, 4], seq_lens=[8],
                                   micro_ops={"models": ["op-argmax"], "batch_sizes": [2], "seq_lens": [16]},
                                   variant_skip={"export-aoti": [{"model": "gpt2-tiny"}, {"batch_size": 4}]})
    configs = s02.configs(section, device="cpu", threads=2)
    assert {(c.model, c.batch_size) for c in configs if c.variant == "export-aoti"} == {("bert-tiny", 1)}
    assert {c.variant for c in configs if c.model == "op-argmax"} == {"eager", "eager-aa", "torchscript"}
    assert len([c for c in configs if c.variant == "torchscript"]) == 4 + 1  # every model shape and the operation


def test_export_aoti_is_paired_with_eager_and_with_torchscript_it_succeeds(df):
    steps = [{"step": "torch.export", "seconds": 1.5, "cached": False, "key": "", "nodes": 420, "bytes": None},
             {"step": "aoti_compile_and_package", "seconds": 30.0, "cached": False, "key": "", "nodes": None,
              "bytes": 44e6},
             {"step": "load", "seconds": 0.25, "cached": False, "key": "", "nodes": None, "bytes": None}]
    aoti = [_row("bert-tiny", "export-aoti", b, s, 0.001 * b * s / 8 / 1.6) | {"prepare_s": 31.0, "prepare_steps": steps}
            for b in (1, 4) for s in (8, 64)]
    frame = pd.concat([df, pd.DataFrame(aoti)], ignore_index=True)
    sp = s02.speedups(frame)
    over_ts = sp[sp.pair == "export-aoti over torchscript"]
    assert len(over_ts) == 4 and np.allclose(over_ts.speedup, 1.6 / 1.25, rtol=0.03) and set(over_ts.kind) == {"within"}
    assert np.allclose(sp[sp.pair == "export-aoti over eager"].speedup, 1.6, rtol=0.03)
    text = "\n".join(s02.findings(frame, sp))
    assert ("torch.export + AOTInductor, made once per configuration before its first call: torch.export 1.50 s, "
            "AOTInductor's compile into a package 30.0 s (package 44 MB), loading it 0.25 s, over 4 configurations") in text
    first = s02.first_call_table(frame).set_index("variant").loc["export-aoti"]
    assert first["framework"] == "PyTorch" and first["prepare (s)"] == "31.00"  # both ends alike: one value


def test_two_frameworks_in_one_process_are_declared_comparisons_never_options(df):
    """eager and tf.function in a process they share (and under PASSIVE) are judged against themselves in their own
    processes, at the shapes variant_skip leaves; they are never an option, never a lead, and the finding reads the
    verdict table."""
    section = s02.TorchscriptVsXla(models=["bert-tiny"], variants=["eager", "tf-function", "eager-shared-passive",
                                                                   "tf-function-shared"],
                                   dtypes=["fp32"], batch_sizes=[1, 4], seq_lens=[8],
                                   micro_ops={"models": ["op-argmax"], "batch_sizes": [2], "seq_lens": [16]},
                                   variant_skip={"eager-shared-passive": [{"batch_size": 4}],
                                                 "tf-function-shared": [{"batch_size": 4}]})
    configs = s02.configs(section, device="cpu", threads=2)
    assert {(c.variant, c.batch_size) for c in configs if "shared" in c.variant} == {
        ("eager-shared-passive", 1), ("tf-function-shared", 1)}
    assert not any("shared" in c.variant for c in configs if c.model == "op-argmax")
    bert = df[df.model == "bert-tiny"]
    eager = bert[(bert.variant == "eager") & (bert.batch_size == 1) & (bert.seq_len == 8)].iloc[0]
    tf_fn = bert[(bert.variant == "tf-function") & (bert.batch_size == 1) & (bert.seq_len == 8)].iloc[0]
    shared = [_row("bert-tiny", "eager-shared-passive", 1, 8, eager.median_s * 1.3),  # PASSIVE: 1.3 times slower
              _row("bert-tiny", "tf-function-shared", 1, 8, tf_fn.median_s)]
    vt = verdicts.compute(s02.NOTEBOOK, pd.concat([bert, pd.DataFrame(shared)], ignore_index=True),
                          comparisons=s02.STUDY.comparisons)
    assert not any("shared" in v.candidate for v in vt if v.kind in ("option", "lead"))
    passive = next(c.label for c in s02.SHARED if c.candidate == "eager-shared-passive")
    [v] = vt.of(passive)
    assert v.kind == "declared" and v.decision == "slower" and v.speedup == pytest.approx(1 / 1.3, rel=0.02)
    lines = s02.process_findings(vt)
    assert len(lines) == 2 and passive in lines[0] and lines[0].count("slower") == 1
    doctored = verdicts.VerdictTable(vt.study, tuple(
        dataclasses.replace(x, decision="equal") if x.comparison == passive else x for x in vt.rows))
    assert "equal" in s02.process_findings(doctored)[0] and "slower" not in s02.process_findings(doctored)[0]
