"""Which CUDA branches a set of rows exercised; the summary's cross-profile speed-ups and verdicts."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from conftest import stored_row
from studylib.machine.threads import tensorflow_start_up_log
from studylib.report import gpu_paths, summary
from studylib.stats import speedups, verdicts
from studylib.studies import eager_vs_compiled as s01


def _row(variant, *, device="cpu", dtype="fp32", status="ok", samples=None, **shape):
    base = {"model": "m", "dtype": dtype, "batch_size": 1, "seq_len": 8, "image_size": None}
    return base | shape | {"variant": variant, "device": device, "status": status, "error": "" if status == "ok" else
                           "boom", "samples_s": samples if samples is not None else [1.0] * 5}


def test_cpu_rows_exercise_no_cuda_branch_and_the_note_lists_those_they_would_use():
    df = pd.DataFrame([_row("eager"), _row("compile-default"), _row("ort")])
    cov = gpu_paths.coverage(df).set_index("branch")
    assert (cov.ok == 0).all()
    assert cov.loc["torch.compile on CUDA", "state"] == "not exercised: these configurations ran on the CPU"
    assert cov.loc["TensorFlow on GPU", "state"] == "not used by these configurations"
    note = gpu_paths.not_exercised_note(df)
    assert "measured on the CPU" in note and "torch.compile on CUDA" in note and "ONNX Runtime CUDA provider" in note
    assert "TensorFlow on GPU" not in note and "TensorRT" not in note


def test_cuda_rows_count_only_when_they_ran():
    df = pd.DataFrame([_row("eager", device="cuda", dtype="fp16"),
                       _row("ort-tensorrt", device="cuda", status="skipped")])
    cov = gpu_paths.coverage(df).set_index("branch")
    assert cov.loc["fp16 on CUDA", "ok"] == 1 and cov.loc["CUDA sync in the timed region", "ok"] == 1
    assert cov.loc["ONNX Runtime TensorRT provider", "state"].startswith("not exercised: 1 CUDA configuration")
    note = gpu_paths.not_exercised_note(df)
    assert "did not run" in note and "ONNX Runtime TensorRT provider" in note and "fp16" not in note
    assert gpu_paths.not_exercised_note(df.iloc[:1]).startswith("**GPU code paths:** every CUDA branch")


def _profile_rows(eager_s, compiled_s, rng):
    rows = []
    for batch in (1, 8):
        rows.append(_row("eager", batch_size=batch, samples=list(eager_s * batch * (1 + 0.01 * rng.standard_normal(9)))))
        rows.append(_row("compile-default", batch_size=batch,
                         samples=list(compiled_s * batch * (1 + 0.01 * rng.standard_normal(9)))))
    rows.append(_row("compile-max-autotune", batch_size=1, status="error"))
    return pd.DataFrame(rows)


def _saved(frames):
    """summary.verdicts_of for profiles whose runs decided and saved the verdict tables of `frames`' rows."""
    def verdicts_of(profile, notebook):
        df = frames.get((profile, notebook))
        return verdicts.for_study(notebook, df) if df is not None else verdicts.VerdictTable(notebook, ())

    return verdicts_of


def test_headline_speedups_per_profile(monkeypatch):
    rng = np.random.default_rng(0)
    frames = {("fast", s01.NOTEBOOK): _profile_rows(2.0, 1.0, rng),
              ("same", s01.NOTEBOOK): _profile_rows(1.0, 1.0, rng)}
    monkeypatch.setattr(summary, "results", lambda p, nb: frames.get((p, nb), pd.DataFrame()))
    monkeypatch.setattr(summary, "verdicts_of", _saved(frames))
    t = summary.headline_speedups(["fast", "same"]).set_index(["comparison", "profile"])
    fast = t.loc[("torch.compile (default) over eager", "fast")]
    df = frames["fast", s01.NOTEBOOK]
    pairs = [(df[(df.variant == "eager") & (df.batch_size == b)].iloc[0],
              df[(df.variant == "compile-default") & (df.batch_size == b)].iloc[0]) for b in (1, 8)]
    # the geometric mean of the saved verdicts' speed-ups (every shape 'faster'): close to the pooled estimate
    expected = speedups.geomean_of(pairs)
    assert fast.speedup == pytest.approx(expected.ratio, rel=0.01) and fast.speedup == pytest.approx(2.0, rel=0.03)
    assert fast.ci_low < fast.speedup < fast.ci_high and fast.n == 2 and fast.reading == "faster"
    assert t.loc[("torch.compile (default) over eager", "same")].reading == "equal"
    failed = t.loc[("torch.compile (max-autotune) over eager", "fast")]
    assert failed.status == "error: compile-max-autotune: boom" and failed.n == 0  # a failure is a result, with its message
    assert t.loc[("TorchScript over eager PyTorch", "fast")].status == "not run"
    matrix = summary.speedup_matrix(t.reset_index())
    assert list(matrix.columns) == ["fast", "same"]
    assert matrix.loc[("01", "torch.compile (default) over eager"), "fast"].startswith("2.0")
    lines = summary.findings(t.reset_index(), summary.claims([]))
    assert any(line.startswith("**torch.compile (default) over eager**: fast 2.0") for line in lines)
    assert any("torch.compile (max-autotune) over eager on fast: no speed-up (error: compile-max-autotune: boom)" in line
               for line in lines)


def test_present_profiles_skips_the_summary_and_puts_smoke_last(tmp_path):
    for name in ("smoke", "summary", "gpu-a100", "cpu", "empty"):
        (tmp_path / name / "results").mkdir(parents=True)
    for name in ("smoke", "summary", "gpu-a100", "cpu"):
        (tmp_path / name / "results" / "01_eager_vs_compiled.jsonl").write_text("")
    assert summary.present_profiles(tmp_path) == ["cpu", "gpu-a100", "smoke"]


def testtensorflow_start_up_log_is_kept_out_but_other_lines_pass(capfd):
    import os

    with tensorflow_start_up_log():
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
                    b"I0000 00:00:1795321289.016448    1846 port.cc:153] oneDNN custom operations are on.\n"
                    b"E0000 00:00:1795321293.815809    1846 cuda_platform.cc:52] failed call to cuInit: UNKNOWN\n"
                    b"E0000 00:00:1795321293.815809    1846 something.cc:1] a real error\n")
    err = capfd.readouterr().err
    assert "a real error" in err
    assert "absl" not in err and "oneDNN" not in err and "cuInit" not in err


def test_summary_reads_only_the_profile_grid_of_today_and_the_newest_row_per_workload(tmp_path, monkeypatch):
    from studylib.bench import profiles
    from studylib.stats.results import ResultsTable
    from studylib.studies import onnx_batching as s03

    monkeypatch.setenv("STUDYLIB_OUTPUTS", str(tmp_path))
    loaded = profiles.load("smoke")
    today = s03.configs(loaded.sections[s03.NOTEBOOK], device="cpu", threads=loaded.profile.threads)[0]
    stale = dataclasses.replace(today, data=today.data.replace(":n", ":n999"))  # the corpus sample changed since
    for name in ("smoke", "mybox"):  # mybox: results copied from elsewhere, no params/mybox.yaml
        table = ResultsTable(tmp_path / name / "results" / f"{s03.NOTEBOOK}.jsonl")
        for c, stamp in ((today, "2026-11-23T10:00"), (stale, "2026-11-22T10:00")):
            table.append(stored_row(c.key, timestamp=stamp, **dataclasses.asdict(c)))
    assert summary.results("smoke", s03.NOTEBOOK).config_key.tolist() == [today.key]
    assert summary.results("mybox", s03.NOTEBOOK).config_key.tolist() == [today.key]  # the newest of one workload


def test_profiles_of_another_precision_policy_or_other_versions_are_not_read_alike(tmp_path, monkeypatch):
    """A tf32-on profile's speed-up gets its own line, never pooled with tf32-off ones; differing versions are said."""
    import json

    rng = np.random.default_rng(1)
    frames = {(p, s01.NOTEBOOK): _profile_rows(2.0, 1.0, rng).assign(tf32=policy)
              for p, policy in (("gpu-a100", "off"), ("gpu-a100-tf32", "on"), ("gpu-h100", "off"))}
    monkeypatch.setattr(summary, "results", lambda p, nb: frames.get((p, nb), pd.DataFrame()))
    monkeypatch.setattr(summary, "verdicts_of", _saved(frames))
    monkeypatch.setenv("STUDYLIB_OUTPUTS", str(tmp_path))
    for p, torch_version in (("gpu-a100", "2.10.0"), ("gpu-a100-tf32", "2.10.0"), ("gpu-h100", "2.13.0")):
        (tmp_path / p / "results").mkdir(parents=True)
        (tmp_path / p / "results" / "env.json").write_text(json.dumps({"libraries": {"torch": torch_version}}))
    t = summary.headline_speedups(["gpu-a100", "gpu-a100-tf32", "gpu-h100"])
    assert t.set_index("profile").loc["gpu-a100-tf32", "tf32"].iloc[0] == "on"
    lines = summary.findings(t, summary.claims([]))
    off = next(line for line in lines if line.startswith("**torch.compile (default) over eager, TF32 off**"))
    on = next(line for line in lines if line.startswith("**torch.compile (default) over eager, TF32 on**"))
    assert "gpu-a100 2.0" in off and "gpu-h100" in off and "tf32" not in off.split("**")[2]
    assert on.count("gpu-a100-tf32") == 1 and "gpu-h100" not in on
    assert "torch differs between profiles (gpu-a100 2.10.0, gpu-a100-tf32 2.10.0, gpu-h100 2.13.0)" in "\n".join(lines)
