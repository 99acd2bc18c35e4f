"""Study 01's analysis on synthetic results: speed-ups, break-even, findings, claims, figures."""

import numpy as np
import pandas as pd
import pytest

from studylib.core.config import Config
from studylib.report import plots
from studylib.stats import verdicts
from studylib.studies import eager_vs_compiled as s01
from studylib.studies.eager_vs_compiled import EagerVsCompiled

rng = np.random.default_rng(0)


def _row(variant, batch, median, *, status="ok", first=None, model="resnet-tiny", dtype="fp32", error=""):
    base = {"model": model, "variant": variant, "dtype": dtype, "batch_size": batch, "seq_len": None,
            "image_size": 32, "device": "cpu", "status": status, "error": error}
    if status != "ok":
        return base
    samples = list(rng.normal(median, median * 0.01, 50))
    return base | {"samples_s": samples, "median_s": float(np.median(samples)), "first_call_s": first or median,
                   "warmup_calls": 1, "n": len(samples), "throughput_samples_s": batch / median, "peak_mem_mb": None,
                   "stop_reason": "precision", "prepare_s": 0.0, "max_abs_diff": 1e-7,
                   "parity_ok": True, "cv": 0.01, "ci_low_s": median * 0.99, "ci_high_s": median * 1.01}


@pytest.fixture
def df():
    return pd.DataFrame([
        _row("eager", 1, 0.010), _row("compile-default", 1, 0.005, first=1.005),
        _row("compile-max-autotune", 1, 0.020, first=3.0),
        _row("eager", 8, 0.080), _row("compile-default", 8, 0.040, first=2.0),
        _row("compile-max-autotune", 8, 0, status="oom", error="MemoryError: x"),
    ])


def test_speedups_break_even_and_failed_rows_kept(df):
    sp = s01.speedups(df, vt=verdicts.for_study(s01.NOTEBOOK, df))
    d1 = sp[(sp.variant == "compile-default") & (sp.batch_size == 1)].iloc[0]
    assert d1.speedup == pytest.approx(2.0, rel=0.05) and d1.ci_low < d1.speedup < d1.ci_high
    assert d1.compile_s == pytest.approx(1.005 - df.median_s[1])  # the cold first call beyond a steady one
    # Break-even N: N compiled calls (the first one cold) first cost no more than N eager calls.
    eager_m, comp_m, first = df.median_s[0], df.median_s[1], df.first_call_s[1]
    n = int(d1.break_even_calls)
    assert first + (n - 1) * comp_m <= n * eager_m
    assert first + (n - 2) * comp_m > (n - 1) * eager_m
    slow = sp[(sp.variant == "compile-max-autotune") & (sp.batch_size == 1)].iloc[0]
    assert slow.speedup < 1 and slow.break_even_calls == np.inf
    failed = sp[sp.status == "oom"]
    assert len(failed) == 1 and pd.isna(failed.speedup.iloc[0])


def test_findings_are_computed_from_the_data(df):
    sp = s01.speedups(df, vt=verdicts.for_study(s01.NOTEBOOK, df))
    text = "\n".join(s01.findings(df, sp))
    assert "Compiling cost 1.0–3.0 s per configuration" in text, text
    assert "faster in" not in text and "slower in" not in text  # decisions are the verdict table's (test_verdicts)
    assert "1 oom" in text and "MemoryError: x" in text and "{" not in text
    assert "every configuration is within tolerance" in text


def test_a_parity_mismatch_is_flagged_in_the_findings(df):
    df.loc[1, "parity_ok"] = False
    text = "\n".join(s01.findings(df, s01.speedups(df, vt=verdicts.for_study(s01.NOTEBOOK, df))))
    assert "1 configuration(s) exceed the tolerance" in text


def _claim(table, claim_id):
    return table.set_index("id").loc[claim_id]


def test_claims_have_computed_verdicts(df):
    """On a GPU profile seed 004's rows are judged: 2× faster at batch 1 and 8 is not 'equally fast', and a
    grid without a batch above 8 cannot say whether the gain grows."""
    df["device"] = "cuda"
    sp = s01.speedups(df, vt=verdicts.for_study(s01.NOTEBOOK, df))
    claims = s01.claims(df, sp, vt=verdicts.for_study(s01.NOTEBOOK, df))
    assert list(claims.columns) == s01.seedclaims.CLAIM_COLUMNS
    equal = _claim(claims, "004-eager-equals-compiled-small-batch")
    assert equal.judgement == "proxy: does not agree"  # resnet-tiny is not the seed's ResNet: a proxy verdict
    assert equal.verdict.startswith("proxy — does not agree: our CI ") and "lies wholly outside the ±" in equal.verdict
    assert "substituted: model: seed ResNet" in equal["comparable?"]
    assert "2.0" in equal["our measurement (95% CI)"] and "95% CI" in equal["our measurement (95% CI)"]
    grows = _claim(claims, "004-compile-gain-grows")
    assert grows.judgement == "not answerable from these results" and "above 8" in grows.verdict


def test_gpu_claims_are_not_judged_on_a_cpu_profile(df):
    claims = s01.claims(df, s01.speedups(df, vt=verdicts.for_study(s01.NOTEBOOK, df)), vt=verdicts.for_study(s01.NOTEBOOK, df))
    equal = _claim(claims, "004-eager-equals-compiled-small-batch")
    assert equal["comparable?"].startswith("not comparable") and equal.judgement == "not comparable on this profile"
    assert equal.verdict.startswith("not comparable on this profile (GPU claim); tested by gpu-3090ti")
    assert "(shown, not judged)" in equal["our measurement (95% CI)"]
    assert not claims.verdict.str.startswith(("agrees", "does not agree"))[
        claims["comparable?"].str.startswith("not comparable")].any()


def test_break_even_is_unset_when_the_gain_is_not_significant(df):
    df.at[1, "samples_s"] = list(df.samples_s[0])  # the compiled variant timed exactly like eager
    sp = s01.speedups(df, vt=verdicts.for_study(s01.NOTEBOOK, df))
    d1 = sp[(sp.variant == "compile-default") & (sp.batch_size == 1)].iloc[0]
    assert d1.ci_low <= 1 <= d1.ci_high and not d1.significant
    assert pd.isna(d1.break_even_calls)
    assert s01.compile_table(sp).iloc[0]["break-even calls"] == "no gain (equal)"  # the verdict table's word


def test_results_table_formats_ok_rows_and_blanks_failed_ones(df):
    t = s01.latency_table(df).set_index(["batch_size", "variant"])
    ok, failed = t.loc[(1, "compile-default")], t.loc[(8, "compile-max-autotune")]
    assert ok["median"].endswith("ms") and "–" in ok["95% CI (this run)"] and ok["CV"] == "1.0%"
    assert ok["n"] == 50 and ok["max |Δ|"] == "1.0e-07"
    assert failed["status"] == "oom" and failed["error"] == "MemoryError: x"
    assert failed["95% CI (this run)"] == "" and failed["CV"] == "" and failed["max |Δ|"] == "" and pd.isna(failed["n"])


def test_everything_skipped_still_renders(tmp_path):
    """A cuda profile on a machine without a GPU: every row skipped, and every table and figure still works."""
    import measuring
    from studylib.stats.results import ResultsTable

    table = ResultsTable(tmp_path / "r.jsonl")
    configs = [Config("resnet-tiny", v, "fp32", 1, "cuda", 2, image_size=32) for v in ("eager", "compile-default")]
    measuring.measure(configs, table=table, measure={"warmup_calls": 0, "min_rounds": 6, "max_rounds": 6,
                                                     "min_time_s": 0.0, "target_ci_pct": 5.0, "budget_s": 0.1,
                                                     "block_s": 0.0, "replicates": 1}, tolerance={"fp32": 1e-3})
    df = table.frame(with_samples=True)
    if (df.status == "ok").any():
        pytest.skip("this machine has a GPU")
    sp = s01.speedups(df, vt=verdicts.for_study(s01.NOTEBOOK, df))
    assert len(s01.latency_table(df)) == 2 and len(s01.compile_table(sp)) == 1
    text = "\n".join(s01.findings(df, sp))
    assert "Failed or skipped configurations: 2 skipped" in text and "PyTorch " in text  # names the framework
    decided = verdicts.for_study(s01.NOTEBOOK, df)
    assert set(s01.claims(df, sp, vt=decided).judgement) <= {"not answerable from these results",  # nothing ran: no verdicts
                                                 "not answerable on this profile"}
    df["workload"] = "resnet-tiny"
    sp["workload"] = "resnet-tiny"
    plots.lines_with_ci(df, x="batch_size", y="median_s", lo="ci_low_s", hi="ci_high_s", hue="variant",
                        row="workload", col="dtype")
    plots.speedup_points(sp, row="workload", col="dtype")


def test_configs_put_eager_first_for_every_shape():
    section = EagerVsCompiled(models=["bert-tiny", "resnet-tiny"], variants=["compile-default", "eager"],
                              dtypes=["fp32"], batch_sizes=[1, 2], seq_lens=[8, 16], image_size=32)
    configs = s01.configs(section, device="cpu", threads=2)
    assert len(configs) == 2 * 2 * 3 + 2 * 3  # text: 2 seq × 2 batch × 3 variants; vision: 2 batch × 3
    shapes = {}
    for c in configs:
        shapes.setdefault(c.shape_key, []).append(c.variant)
    assert all(v[:2] == ["eager", "eager-aa"] for v in shapes.values())  # the A/A control at every shape
    assert len({c.key for c in configs}) == len(configs)


def test_skip_leaves_out_the_matching_shapes_only():
    section = EagerVsCompiled(models=["bert-tiny", "resnet-tiny"], variants=["eager", "compile-default"],
                              dtypes=["fp32", "bf16"], batch_sizes=[1, 8], seq_lens=[16], image_size=32,
                              skip=[{"dtype": "bf16", "batch_size": 8}, {"model": "bert-tiny", "dtype": "bf16"}])
    shapes = {(c.model, c.dtype, c.batch_size) for c in s01.configs(section, device="cpu", threads=2)}
    assert shapes == {("bert-tiny", "fp32", 1), ("bert-tiny", "fp32", 8), ("resnet-tiny", "fp32", 1),
                      ("resnet-tiny", "fp32", 8), ("resnet-tiny", "bf16", 1)}


def test_the_half_precision_claim_says_when_the_large_batch_was_left_out():
    frame = pd.DataFrame([
        _row("eager", 1, 0.010), _row("compile-default", 1, 0.005), _row("eager", 8, 0.080),
        _row("compile-default", 8, 0.040), _row("eager", 1, 0.300, dtype="bf16"),
        _row("compile-default", 1, 0.050, dtype="bf16"),
    ]).assign(device="cuda")
    decided = verdicts.for_study(s01.NOTEBOOK, frame)
    half = _claim(s01.claims(frame, s01.speedups(frame, vt=decided), vt=decided), "004-fp16-beats-fp32-large-batch")
    assert half.verdict == "not answerable here: no batch above 8 has both fp32 and bf16 compiled here"


def test_figures_mark_failed_configurations(df):
    df["workload"] = "resnet-tiny"
    fig = plots.lines_with_ci(df, x="batch_size", y="median_s", lo="ci_low_s", hi="ci_high_s", hue="variant",
                              row="workload", col="dtype")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "oom" in texts
    sp = s01.speedups(df, vt=verdicts.for_study(s01.NOTEBOOK, df))
    sp["workload"] = "resnet-tiny"
    fig = plots.speedup_points(sp, row="workload", col="dtype")
    assert "oom" in [t.get_text() for ax in fig.axes for t in ax.texts]


def test_skip_by_sequence_length_in_study_02_leaves_that_shape_out_of_every_model():
    from studylib.studies import torchscript_vs_xla as s02
    from studylib.studies.torchscript_vs_xla import TorchscriptVsXla

    section = TorchscriptVsXla(models=["bert-tiny", "gpt2-tiny"], variants=["eager", "tf-function"], dtypes=["fp32"],
                               batch_sizes=[1, 4], seq_lens=[8, 64], skip=[{"batch_size": 4, "seq_len": 64}])
    shapes = {(c.model, c.batch_size, c.seq_len) for c in s02.configs(section, device="cpu", threads=2)}
    assert shapes == {(m, b, s) for m in ("bert-tiny", "gpt2-tiny") for b in (1, 4) for s in (8, 64)} - {
        ("bert-tiny", 4, 64), ("gpt2-tiny", 4, 64)}


AOTI_STEPS = [{"step": "torch.export", "seconds": 1.5, "cached": False, "key": "", "nodes": 420, "bytes": None},
              {"step": "aoti_compile_and_package", "seconds": 30.0, "cached": False, "key": "", "nodes": None,
               "bytes": 44e6},
              {"step": "load", "seconds": 0.25, "cached": False, "key": "", "nodes": None, "bytes": None}]


def test_export_aoti_is_a_compiled_variant_whose_one_time_cost_is_its_preparation():
    """torch.export + AOTInductor compiles ahead of time, in its preparation: the compile table and findings count that
    preparation and the first call (beyond a steady one) as its one-time cost, as torch.compile's first call is."""
    frame = pd.DataFrame([_row("eager", 1, 0.010), _row("compile-default", 1, 0.005, first=1.005),
                          _row("export-aoti", 1, 0.004) | {"prepare_s": 32.0, "prepare_steps": AOTI_STEPS}])
    sp = s01.speedups(frame, vt=verdicts.for_study(s01.NOTEBOOK, frame))
    aoti = sp[sp.variant == "export-aoti"].iloc[0]
    assert aoti.compile_s == pytest.approx(32.0, rel=1e-4)  # preparation + first call − one steady call
    table = s01.compile_table(sp, frame).set_index("variant")
    assert list(table.index) == ["compile-default", "export-aoti"]
    assert table.loc["export-aoti", "compile cold (s)"] == "32.0" and pd.isna(table.loc["export-aoti", "graphs"])
    text = "\n".join(s01.findings(frame, sp))
    assert ("Compiling ahead of time (torch.export + AOTInductor) cost 32.0 s per configuration (its preparation "
            "and the first call beyond a steady one): torch.export 1.50 s, AOTInductor's compile into a package 30.0 s "
            "(package 44 MB), loading it 0.25 s, over 1 configuration.") in text
    assert "Compiling cost 1.0 s per configuration" in text  # torch.compile's line counts torch.compile only


def test_variant_skip_keeps_a_costly_variant_and_its_copy_to_the_shapes_left():
    grid = dict(models=["bert-tiny", "resnet-tiny"], variants=["eager", "compile-default", "export-aoti"],
                dtypes=["fp32", "bf16"], batch_sizes=[1, 8], seq_lens=[16], image_size=32)
    section = EagerVsCompiled(**grid, aa=["eager", "export-aoti"],
                              variant_skip={"export-aoti": [{"batch_size": 8}, {"dtype": "bf16"}]})
    shapes: dict[str, set] = {}
    for c in s01.configs(section, device="cpu", threads=2):
        shapes.setdefault(c.variant, set()).add((c.model, c.dtype, c.batch_size))
    assert shapes["export-aoti"] == shapes["export-aoti-aa"] == {("bert-tiny", "fp32", 1), ("resnet-tiny", "fp32", 1)}
    assert len(shapes["compile-default"]) == len(shapes["eager"]) == 8
    # a size the grid no longer has skips nothing: a reader who edits batch_sizes need not edit variant_skip
    edited = EagerVsCompiled(**grid | {"batch_sizes": [3]}, variant_skip={"export-aoti": [{"batch_size": 4}]})
    assert {c.batch_size for c in s01.configs(edited, device="cpu", threads=2) if c.variant == "export-aoti"} == {3}
    for bad, message in (({"eager": [{"batch_size": 8}]}, "eager is the reference"),
                         ({"export-aoti": [{"model": "bert-huge"}]}, r"variant_skip.export-aoti\[0\]: unknown model"),
                         ({"compile-max-autotune": [{"batch_size": 1}]}, "is not one of this section's variants")):
        with pytest.raises(ValueError, match=message):
            EagerVsCompiled(**grid, variant_skip=bad)
