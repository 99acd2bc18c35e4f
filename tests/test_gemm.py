"""The GEMM of every library (machine/gemm.py, gemm_child.py), the roof as the best of them (limits.roof), and why one
framework beats another (machine/gemm_why.py): the record's structure from a fake runner, failures as rows, the
roof, the mechanism's sentence above and below its threshold, no share of a roof above 100% in words. No timing."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from studylib.bench import roofline
from studylib.machine import gemm, gemm_child, gemm_why, limits

CPUINFO = ("processor\t: 0\nmodel name\t: AMD EPYC 9R14\n"
           "flags\t\t: fpu sse2 avx fma avx2 avx512f avx512bw avx512vl avx512_bf16 avx512_vnni amx_tile\n")
STUDY_SHAPES = [k for k, s in gemm_child.shapes().items() if s["studies"]]


def _cell(gflops: float, path: str) -> dict:
    return {"gflops": gflops, "ci_low": 0.9 * gflops, "ci_high": 1.1 * gflops, "n": 10, "rel_err": 5e-7,
            "path": [path]}


def _record(rate: float, path: str, library: str, version: str = "1.0") -> dict:
    """A library's record: `rate` GFLOP/s in fp32 at every shape (a little more at the larger ones), bf16 twice."""
    rates = {d: {k: _cell(rate * (1 + 0.1 * i) * (2 if d == "bf16" else 1), path)
                 for i, k in enumerate(gemm_child.shapes())} for d in gemm_child.DTYPES}
    return {"status": "ok", "library": library, "version": version, "call": "matmul", "kernel_library": path.split()[0],
            "info": {}, "threads": 2, "rates": rates, "seconds": 0.1}


def _fake_runner(rates: dict[str, float], calls: list | None = None):
    """A runner that measures nothing: each runner key gets `rates[key]` (missing: not installed)."""
    def runner(library, threads, budget):
        if calls is not None:
            calls.append((library, threads, budget))
        return {key: _record(rates[key], f"lib-{key} path", key.title()) if key in rates else
                {"status": "not installed", "message": f"{key} is not installed"} for key in gemm.CHILDREN[library]}
    return runner


def _peaks(**rates: float) -> dict:
    record = gemm.measure_libraries(2, 1.0, runner=_fake_runner(rates))
    return {"method": limits.METHOD, "matmul": {"fp32": {"gflops": 50.0, "ci_low": 45.0, "ci_high": 55.0, "size": 2048,
                                                         "n": 10, "kernel": "F.linear"}}, "gemm": record}


def test_the_record_has_every_library_shape_and_dtype_from_a_fake_runner():
    calls = []
    record = gemm.measure_libraries(2, 4.0, runner=_fake_runner({"torch": 100, "tensorflow": 200}, calls))
    assert [c[0] for c in calls] == list(gemm.LIBRARIES)
    assert all(threads == 2 and budget == pytest.approx(4.0 / len(gemm.LIBRARIES)) for _, threads, budget in calls)
    assert set(record["libraries"]) == {k for keys in gemm.CHILDREN.values() for k in keys}
    assert record["libraries"]["jax"]["status"] == "not installed"
    torch_rates = record["libraries"]["torch"]["rates"]
    assert set(torch_rates) == {"fp32", "bf16"} and set(torch_rates["fp32"]) == set(record["shapes"])
    assert {(s["m"], s["k"], s["n"]) for s in record["shapes"].values()} >= {(256, 768, 768), (256, 768, 3072),
                                                                              (256, 3072, 768), (1024, 1024, 1024)}
    assert json.loads(json.dumps(record)) == record  # stored in env.json as it is


def test_a_library_that_breaks_or_is_missing_is_a_status_row(monkeypatch):
    def runner(library, threads, budget):
        if library == "tensorflow":
            raise RuntimeError("TensorFlow crashed")
        return _fake_runner({"torch": 100.0})(library, threads, budget)

    peaks = {"gemm": gemm.measure_libraries(2, 1.0, runner=runner)}
    assert peaks["gemm"]["libraries"]["tensorflow"] == {"status": "failed",
                                                        "message": "RuntimeError: TensorFlow crashed"}
    table = gemm_why.gemm_table(peaks)
    tf_rows = table[table.library == "TensorFlow"]
    assert len(tf_rows) == 1 and tf_rows.status.iloc[0].startswith("failed: RuntimeError")
    assert (table[table.library == "PyTorch"].status == "ok").all()
    assert not table.isna().any().any()
    # A library that is not installed is not started at all.
    monkeypatch.setattr(gemm.importlib.util, "find_spec", lambda name: None)
    assert gemm.run_child("jax", 2, 1.0) == {"jax": {"status": "not installed", "message": "jax is not installed"}}


def test_a_library_process_without_a_result_is_a_failed_record(monkeypatch):
    class Done:
        returncode, stdout, stderr = 1, "some log\n", "Traceback ...\nImportError: libfoo.so missing\n"

    monkeypatch.setattr(gemm.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(gemm.subprocess, "run", lambda *a, **k: Done())
    assert gemm.run_child("onnxruntime", 2, 1.0) == {
        "onnxruntime": {"status": "failed", "message": "exit 1: ImportError: libfoo.so missing"}}


def test_the_roof_is_the_best_rate_of_any_library():
    peaks = _peaks(torch=100.0, tensorflow=200.0, onnxruntime=150.0)
    best = limits.roof(peaks, "fp32")
    tf_best = max(c["gflops"] for c in peaks["gemm"]["libraries"]["tensorflow"]["rates"]["fp32"].values())
    assert best["runner"] == "tensorflow" and best["gflops"] == tf_best == limits.peak_gflops(peaks, "fp32")
    assert limits.peak_gflops(peaks, "bf16") == 2 * tf_best
    # Without the libraries' record (an older env.json) the roof is the square matmul's, as before.
    assert limits.peak_gflops(peaks | {"gemm": None}, "fp32") == 50.0
    assert limits.roof(None, "fp32") is None
    text = limits.describe_peaks(peaks | {"device": "cpu", "threads": 2, "seconds": 1.0, "measured_at": "now",
                                          "bandwidth": {"gbs": 10.0, "ci_low": 9.0, "ci_high": 11.0, "bytes": 1e6,
                                                        "kernel": "triad"}})
    assert f"fp32 roof {tf_best:,.1f} GFLOP/s (Tensorflow, " in text
    assert "Onnxruntime 1.0 (lib-onnxruntime): fp32 up to" in text and "jax: not installed" in text


def test_measured_limits_carry_the_libraries_record_and_the_roof_follows_it():
    peaks = limits.measure_peaks("cpu", budget=0.3, gemm_runner=_fake_runner({"tensorflow": 1e6}))
    assert peaks["method"] == limits.METHOD and peaks["gemm"]["libraries"]["tensorflow"]["status"] == "ok"
    assert limits.roof(peaks, "fp32")["runner"] == "tensorflow"


@pytest.mark.parametrize("tf_rate, expect_sentence", [(260.0, True), (125.0, False), (60.0, True)])
def test_mechanism_names_the_gemm_path_above_its_threshold_only(tf_rate, expect_sentence):
    peaks = _peaks(torch=100.0, tensorflow=tf_rate)
    sentence = gemm_why.mechanism(peaks, "tensorflow", "torch", "fp32")
    ratio = gemm.gemm_ratio(peaks, "tensorflow", "torch", "fp32")
    assert ratio == pytest.approx(tf_rate / 100.0)
    if not expect_sentence:
        assert sentence is None
        return
    tf = gemm.study_rates(peaks, "tensorflow", "fp32")
    pt = gemm.study_rates(peaks, "torch", "fp32")
    assert len(tf) == len(STUDY_SHAPES) == 3
    faster, slower = (tf, pt) if tf_rate > 100 else (pt, tf)
    for number in (f"{min(faster):,.0f}–{max(faster):,.0f}", f"{min(slower):,.0f}–{max(slower):,.0f}",
                   f"{max(ratio, 1 / ratio):.2f}×"):
        assert number in sentence
    assert "lib-tensorflow path" in sentence and "lib-torch path" in sentence
    assert "holds for this CPU" in sentence and ", ".join(peaks["gemm"]["cpu_flags"]) in sentence
    assert sentence.count(".") >= 1 and "\n" not in sentence


def test_mechanism_with_the_observed_speed_up_and_without_data():
    peaks = _peaks(torch=100.0, tensorflow=210.0)
    said = gemm_why.mechanism(peaks, "tensorflow", "torch", observed=2.11, what="tf.function over eager PyTorch")
    assert "the 2.11× of tf.function over eager PyTorch follows the GEMM path" in said
    against = gemm_why.mechanism(peaks, "tensorflow", "torch", observed=0.8)
    assert "does not come from the GEMM" in against
    assert gemm_why.mechanism(peaks, "jax", "torch") is None  # not installed: no numbers, no sentence
    assert gemm_why.mechanism(None, "tensorflow", "torch") is None
    assert gemm_why.gemm_table(None).empty


def test_cpu_flags_and_model_come_from_cpuinfo():
    assert gemm.cpu_flags(CPUINFO) == ["avx", "fma", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                                       "avx512_bf16", "amx_tile"]
    assert gemm.cpu_model(CPUINFO) == "AMD EPYC 9R14"
    assert gemm.cpu_flags("processor: 0\n") == []


def test_code_paths_are_read_from_the_kernel_libraries_logs():
    lines = ["onednn_verbose,v1,info,oneDNN v3.7.3 (commit N/A)",
             "onednn_verbose,v1,info,cpu,isa:Intel AVX-512 with Intel DL Boost and bfloat16 support",
             "onednn_verbose,v1,primitive,exec,cpu,gemm_api,,undef,src_f32::blocked:ab:f0,,,256x768:768x3072,13.4",
             "onednn_verbose,v1,primitive,create:cache_miss,cpu,matmul,brg_matmul:avx512_core_bf16,undef,src,,,1.4",
             "MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for Intel(R) 64 architecture Intel(R) "
             "Architecture processors, Lnx 2.60GHz lp64 gnu_thread",
             "MKL_VERBOSE SGEMM(T,N,3072,256,768,0x7ff,0x7f,768) 9.65ms CNR:OFF Dyn:0 FastMM:1 TID:0  NThr:2",
             "XLA_PATH XLA:CPU dot", "something else"]
    found, facts = gemm_child.paths(lines)
    assert found == ["MKL SGEMM", "XLA:CPU dot", "oneDNN matmul brg_matmul:avx512_core_bf16", "oneDNN sgemm"]
    assert facts == {"onednn": "oneDNN v3.7.3", "onednn_isa": "Intel AVX-512 with Intel DL Boost and bfloat16 support",
                     "mkl": "oneMKL 2024.0 Update 2", "mkl_dispatch": "Intel(R) Architecture processors"}
    assert gemm_child.hlo_path("%convert = f32[2,2] convert(bf16[2,2] %p)\n dot(...)", "bf16") == \
        "XLA:CPU dot in fp32 (bf16 operands converted)"
    assert gemm_child.hlo_path("custom_call_target=\"__onednn$matmul\"", "fp32") == "XLA:CPU oneDNN matmul (custom call)"


def test_bf16_operands_are_exact_bfloat16_values():
    x, w = gemm_child.operands(8, 16, 4, "bf16")
    assert not (x.view(np.uint32) & 0xFFFF).any() and not (w.view(np.uint32) & 0xFFFF).any()
    fx, _ = gemm_child.operands(8, 16, 4, "fp32")
    assert np.allclose(x, fx, rtol=2 ** -8) and not np.array_equal(x, fx)


def _percentages(text: str) -> list[float]:
    return [float(p) for p in re.findall(r"(\d+(?:\.\d+)?)\s?%", text)]


def test_no_share_of_a_roof_above_100_percent_in_words():
    peaks = _peaks(torch=100.0)
    top = limits.peak_gflops(peaks, "fp32")
    seconds = 1.0
    rt = pd.DataFrame({"config_key": ["a", "b"], "model": ["bert-base"] * 2, "variant": ["tf-function", "torch-eager"],
                       "dtype": ["fp32"] * 2, "batch_size": [1, 1], "seq_len": [256, 256], "image_size": [None] * 2,
                       "strategy": [None] * 2, "status": ["ok"] * 2, "median_s": [seconds] * 2,
                       "flops_per_call": [1.75 * top * 1e9, 0.5 * top * 1e9], "useful_flops_per_call": [None] * 2,
                       "bytes_per_call": [1e6, 1e6]})
    table = roofline.roofline_table(rt, peaks | {"bandwidth": {"gbs": 1e6}})
    assert table.share_of_peak.max() == pytest.approx(1.75)  # the number is kept; the words are capped
    text = roofline.summary_finding(table, peaks | {"bandwidth": {"gbs": 1e6}})
    assert "above the measured roof" in text and max(_percentages(text)) <= 100
    assert "**A rate above the roof is a flag, not a result**" in text and "lowest 50%" in text
    assert roofline.share_text(1.75) == "above the measured roof"
    assert roofline.share_text(1.004) == roofline.share_text(0.999) == "at the measured roof"
    below = roofline.summary_finding(table[table.share_of_peak < 1], peaks | {"bandwidth": {"gbs": 1e6}})
    assert "flag" not in below
    assert roofline.share_text(0.55) == "55%"
    rule = roofline.rule_text(peaks | {"bandwidth": {"gbs": 10.0}})
    assert f"fp32 roof is {top:,.1f} GFLOP/s" in rule and "(the best GEMM any library reached: Torch at" in rule


def test_explain_always_gives_one_sentence_and_the_page_table_keeps_the_study_shapes():
    close = _peaks(torch=100.0, tensorflow=110.0)
    within = gemm_why.explain(close, "tensorflow", "torch")
    assert "within 1.3×" in within and "1.10×" in within and "does not explain" in within
    far = _peaks(torch=100.0, tensorflow=200.0)
    assert gemm_why.explain(far, "tensorflow", "torch") == gemm_why.mechanism(far, "tensorflow", "torch")
    assert "not both measured" in gemm_why.explain(far, "jax", "torch")
    page = gemm_why.gemm_table(far, studies_only=True)
    ok = page[page.status == "ok"]
    assert set(ok["M×K×N"]) == {k.replace("x", "×") for k in STUDY_SHAPES}
    assert set(ok.library) == {"PyTorch", "TensorFlow"}  # the others are not installed in this fake
    assert len(gemm_why.gemm_table(far)) > len(page)


def test_a_real_library_process_returns_its_record():
    """ONNX Runtime (the quickest to start) measured for real in its own process, with a tiny budget: the record's
    structure, exact-enough products, bf16 as an unsupported cell. No timing threshold."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    record = gemm.run_child("onnxruntime", 1, 0.05)["onnxruntime"]
    assert record["status"] == "ok", record
    assert record["threads"] == 1 and record["kernel_library"] == "MLAS"
    fp32 = record["rates"]["fp32"]
    assert set(fp32) == set(gemm_child.shapes())
    for key, cell in fp32.items():
        assert cell["ci_low"] <= cell["gflops"] <= cell["ci_high"]
        assert cell["rel_err"] is None if key.startswith(str(gemm_child.SQUARE)) else cell["rel_err"] < 1e-4
    assert all("status" in c or "gflops" in c for c in record["rates"]["bf16"].values())


def test_compare_holds_two_runs_limits_like_with_like_whatever_the_roof():
    """A run of METHOD 2 (with every library's GEMM) against one of METHOD 1 on the same machine: PyTorch's matmul is
    compared, so a roof set by another library reads as no machine difference."""
    from studylib.report import compare

    new = _peaks(torch=100.0, tensorflow=400.0)
    old = {k: v for k, v in new.items() if k != "gemm"} | {"method": 1}
    assert limits.peak_gflops(new, "fp32") > 2 * limits.peak_gflops(old, "fp32")
    assert compare.machine_differences({"peaks": old}, {"peaks": new}) == []
    faster = new | {"matmul": {"fp32": new["matmul"]["fp32"] | {"gflops": 80.0}}}
    assert compare.machine_differences({"peaks": old}, {"peaks": faster})[0].startswith(compare.LIMITS)
