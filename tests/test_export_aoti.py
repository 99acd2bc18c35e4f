"""torch.export + AOTInductor (export-aoti): a measured group records its three steps and checks the package's output
against eager; without AOTInductor or a C++ compiler it is a skipped row saying why, and an export that fails is an
error row naming the step."""

import pytest
import torch

import measuring
from studylib import runtimes
from studylib.bench.sweep import classify_failure
from studylib.core.config import Config
from studylib.runtimes import RuntimeUnavailable, export_aoti
from studylib.runtimes.base import private_dir
from studylib.stats.results import ResultsTable
from studylib.workloads import models

AOTI = runtimes.REGISTRY["export-aoti"]


def test_registered_in_a_family_of_its_own_with_an_aa_copy():
    assert (AOTI.family, AOTI.framework, AOTI.uses_dynamo) == ("export", "torch", False)
    copy = runtimes.REGISTRY["export-aoti-aa"]
    assert (copy.family, copy.uses_dynamo) == ("export", False)


def test_a_measured_group_records_each_step_and_the_package_matches_eager(outputs, tmp_path):
    """bert-tiny: two inputs through the wrapper's `*inputs`, exported, compiled into a package, loaded and called; its
    output within the fp32 tolerance of eager's, each step recorded (made in this run, not cached)."""
    configs = [Config("bert-tiny", v, "fp32", 1, "cpu", 1, seq_len=8) for v in ("eager", "export-aoti")]
    rows = measuring.measure(configs, table=ResultsTable(tmp_path / "t.jsonl"), env={"fingerprint": "f", "git_commit": None},
                             measure=measuring.FAST | {"max_rounds": 6}, parts_dir=tmp_path / "parts")
    row = {r["variant"]: r for r in rows}["export-aoti"]
    assert row["status"] == "ok", row["error"]
    assert row["parity_ok"] is True and row["max_abs_diff"] <= row["parity_tol"]
    steps = row["prepare_steps"]
    assert [s["step"] for s in steps] == list(export_aoti.STEPS) and not any(s["cached"] for s in steps)
    assert steps[0]["nodes"] > 0 and steps[1]["bytes"] > 0  # the exported graph's nodes, the package's size
    assert sum(s["seconds"] for s in steps) <= row["prepare_s"]  # every step inside the timed preparation
    assert "AOTInductor compile" in row["notes"] and "package" in row["notes"]
    assert row["compilations"] is None and row["graph_breaks"] is None  # dynamo's counters are not about it
    assert not list(private_dir(export_aoti.PACKAGES).glob("*.pt2"))  # loaded packages are not kept on disk


def _workload():
    return models.torch_workload("bert-tiny", batch_size=1, seq_len=8)


def test_without_aotinductor_it_is_skipped_saying_what_torch_lacks(monkeypatch):
    import torch._inductor

    monkeypatch.delattr(torch._inductor, "aoti_compile_and_package")
    with pytest.raises(RuntimeUnavailable, match=r"has no torch\._inductor\.aoti_compile_and_package \(") as e:
        AOTI.prepare(_workload())
    assert classify_failure(e.value)[0] == "skipped"


def test_without_a_cpp_compiler_it_is_skipped_saying_so(monkeypatch):
    from torch._inductor import cpp_builder, exc

    def no_compiler():
        raise exc.InvalidCxxCompiler()

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    with pytest.raises(RuntimeUnavailable, match=r"finds no C\+\+ compiler here \(searched: .+\): InvalidCxxCompiler"):
        AOTI.prepare(_workload())


class _DataDependent(torch.nn.Module):
    """A branch on a tensor's value: torch.export cannot trace it into one graph."""

    def forward(self, x):
        return x * 2 if x.sum() > 0 else x - 1


def test_an_export_that_fails_is_an_error_naming_the_step():
    w = models.Workload("bert-tiny", "text", _DataDependent().eval(), (torch.ones(2, 3),), "fp32", "cpu", 2, 3)
    with AOTI.context(), pytest.raises(export_aoti.AotiStepError) as e:
        AOTI.prepare(w)
    status, message = classify_failure(e.value)
    assert status == "error" and message.startswith("AotiStepError: torch.export failed: ")
    assert "GuardOnDataDependentSymNode: Could not guard on data-dependent expression" in message  # the exporter's words


def test_on_cuda_without_a_cuda_toolkit_it_is_skipped_naming_the_toolkit(monkeypatch):
    """A driver-only machine (no CUDA_HOME, no nvcc, no /usr/local/cuda): torch's lookup of the toolkit's include
    folder raised inside the compile, an error row; now a skipped row that names the missing toolkit, before any
    export is tried."""
    import torch.utils.cpp_extension

    monkeypatch.setattr(torch.utils.cpp_extension, "_find_cuda_home", lambda: None)
    w = models.Workload("bert-tiny", "text", _DataDependent().eval(), (torch.ones(2, 3),), "fp32", "cuda", 2, 3)
    with pytest.raises(RuntimeUnavailable, match=r"finds none here \(CUDA_HOME and CUDA_PATH unset, no nvcc on PATH, "
                                                 r"no /usr/local/cuda\): install the CUDA 12 toolkit") as e:
        AOTI.prepare(w)
    assert classify_failure(e.value)[0] == "skipped"


def test_a_toolkit_is_one_with_its_headers(tmp_path):
    from studylib.machine import gpu

    home, line = gpu.cuda_toolkit(lambda: str(tmp_path))
    assert home is None and f"{tmp_path} has no include/cuda_runtime_api.h" in line
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda_runtime_api.h").write_text("")
    assert gpu.cuda_toolkit(lambda: str(tmp_path)) == (str(tmp_path), f"CUDA toolkit at {tmp_path}")
