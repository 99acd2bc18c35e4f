"""`make gpu-proof` without a GPU: it says so in one line and exits 2; its verdicts on fake clocks and fake rows.
The proof itself needs a GPU (a later session with one runs it and commits its output under reference/)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import types

import pytest
import torch

from studylib import gpu_check, gpu_proof
from studylib.core import paths
from studylib.core.config import Config
from studylib.machine import gpu
from studylib.workloads.models import Workload


def test_without_a_gpu_it_says_so_in_one_line_and_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(gpu_check, "_nvidia_smi", lambda: None)
    monkeypatch.setattr(gpu, "_seen", {"torch": "PyTorch 2.10.0+cpu is a CPU-only build"})
    assert gpu_proof.main([]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1 and out.err.startswith("gpu-proof: no NVIDIA GPU")


class FakeDevice:
    """An asynchronous device on a fake clock: a launch queues `work` seconds at `launch` seconds of host time; a
    sync waits until the queue is done; `spin` queues a long kernel (the proof's torch.cuda._sleep)."""

    def __init__(self, work=0.002, launch=1e-5, spin_s=0.05):
        self.now, self.busy_until, self.work, self.launch, self.spin_s = 0.0, 0.0, work, launch, spin_s

    def __call__(self):
        return self.now

    def __deepcopy__(self, memo):
        return self

    def enqueue(self, seconds=None):
        self.busy_until = max(self.now, self.busy_until) + (self.work if seconds is None else seconds)
        self.now += self.launch

    def spin(self):
        self.enqueue(self.spin_s)

    def sync(self, *args, **kwargs):
        self.now = max(self.now, self.busy_until)


def _gpu_output():
    return types.SimpleNamespace(is_cuda=True, device="cuda:0")


class _Module(torch.nn.Module):
    def __init__(self, device, output=_gpu_output):
        super().__init__()
        self.device, self.output = device, output
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, *xs):
        self.device.enqueue()
        return self.output()


class _Workloads:
    def __init__(self, module):
        self.module = module

    def workload(self, c, framework):
        return Workload(c.model, "vision", self.module, (torch.zeros(1, 3, 4, 4),), "fp32", "cuda", 1)


@pytest.fixture
def device(monkeypatch):
    d = FakeDevice()
    monkeypatch.setattr(torch.cuda, "synchronize", d.sync)
    monkeypatch.setattr(gpu_proof, "unavailable", lambda device, runtime: None)
    return d


CONFIG = Config("resnet-tiny", "eager", "fp32", 1, "cuda", 1, image_size=4)


def test_a_runtime_that_waits_passes_both_checks_and_its_output_device_is_its_own(device):
    checks = gpu_proof.path_checks(CONFIG, _Workloads(_Module(device)), device.spin, device.sync, clock=device)
    assert [c.passed for c in checks] == [True, True], [c.line() for c in checks]
    assert checks[0].detail == "its output lies on cuda:0"
    assert "with its wait" in checks[1].detail and checks[1].line().startswith("PASS  eager resnet-tiny fp32 b1")


def test_an_output_on_the_host_fails_the_device_check(device):
    checks = gpu_proof.path_checks(CONFIG, _Workloads(_Module(device, lambda: torch.zeros(1))), device.spin,
                                   device.sync, clock=device)
    assert checks[0].passed is False and checks[0].detail == "its output lies on cpu"


def test_a_runtime_without_its_wait_fails(device, monkeypatch):
    """A runtime whose prepared call lost its wait: caught, where timing a raw matmul chain would have passed it."""
    from studylib import runtimes
    from studylib.runtimes.pytorch import TorchEager

    class Lost(TorchEager):
        name = "proof-lost-sync"

        def prepare(self, workload):
            return dataclasses.replace(super().prepare(workload), sync=None)

    monkeypatch.setitem(runtimes.REGISTRY, Lost.name, Lost())
    checks = gpu_proof.path_checks(dataclasses.replace(CONFIG, variant=Lost.name), _Workloads(_Module(device)),
                                   device.spin, device.sync, clock=device)
    assert [c.passed for c in checks] == [False] and "no wait" in checks[0].detail


def test_the_wait_verdict_needs_the_spin_with_the_wait_and_little_without():
    assert gpu_proof.wait_verdict("x", 0.05, 0.051, 0.0001).passed
    assert not gpu_proof.wait_verdict("x", 0.05, 0.0002, 0.0001).passed  # no wait: the spin is not waited for
    assert not gpu_proof.wait_verdict("x", 0.05, 0.051, 0.05).passed  # it waits by itself: the hook proves nothing


def test_the_tensorrt_engine_is_built_by_the_first_replicate_and_loaded_by_the_second():
    from studylib.runtimes.base import PrepareStep
    from studylib.runtimes.ort_gpu import ENGINE_STEP

    made, loaded = PrepareStep(ENGINE_STEP, 12.0, False), PrepareStep(ENGINE_STEP, 12.0, True)
    export = PrepareStep("export", 1.0, True)
    assert gpu_proof.engine_verdict([export, made], [export, loaded]).passed
    assert not gpu_proof.engine_verdict([export, made], [export, made]).passed  # built twice: the cache missed
    assert not gpu_proof.engine_verdict([export], [export]).passed  # no engine step: nothing proven


def test_every_runtime_of_the_smallest_shapes_is_checked_within_ten_minutes():
    """gpu-smoke's studies 01, 02, 03 and 07 at their smallest shape: every runtime once per model (no A/A copy), ONNX
    Runtime's, TensorRT's and the generation runners' included; the proof's own estimate under ten minutes with the
    smoke run."""
    paths = gpu_proof.smallest_paths()
    configs = [c for _, c in paths]
    variants = {c.variant for c in configs}
    assert {"eager", "compile-default", "export-aoti", "torchscript", "tf-xla", "ort", "ort-tensorrt", "static",
            "static-compile"} <= variants
    assert not any(c.variant.endswith("-aa") for c in configs)
    assert {nb for nb, _ in paths} == set(gpu_proof.PATH_STUDIES)
    assert {c.strategy for nb, c in paths if nb == gpu_proof.GENERATION} == {"decode"}
    assert len({(nb, c.model, c.variant, c.dtype) for nb, c in paths}) == len(paths)
    assert 0 < gpu_proof.estimate_s(paths, smoke=True) <= 600


def test_one_line_per_check_and_a_failed_check_fails_the_proof():
    c = gpu_proof.Check
    assert gpu_proof.summary([c("a", True, "x"), c("TensorRT", None, "not installed")]) == 0
    assert gpu_proof.summary([c("a", True, "x"), c("b", False, "y")]) == 1
    assert [x.line() for x in (c("a", True, "x"), c("b", None, "why"), c("d", False, "y"))] == [
        "PASS  a: x", "SKIP  b: why", "FAIL  d: y"]


def _row(variant, status="ok", *, model="bert-tiny", notes="", parity=True, error=""):
    return {"variant": variant, "model": model, "dtype": "fp32", "status": status, "notes": notes,
            "parity_ok": parity, "max_abs_diff": 1e-6, "error": error}


GOOD = [_row("eager"), _row("compile-reduce-overhead"), _row("eager-cudnn-benchmark", model="resnet-tiny"),
        _row("eager-channels-last", "skipped", error="channels_last needs 4-D image inputs")]


def test_the_smoke_run_passes_with_parity_no_graph_skips_and_cudnn_benchmark_ok():
    ok, lines = gpu_proof.smoke_verdict(GOOD)
    assert ok and lines[0] == "status counts: ok 3, skipped 1"


@pytest.mark.parametrize("bad", [
    [_row("compile-reduce-overhead", notes="CUDA graphs skipped 1 time(s)")],
    [_row("compile-reduce-overhead", parity=False)],
    [_row("eager-cudnn-benchmark", "skipped", model="resnet-tiny", error="cudnn.benchmark must be on")],
    [_row("compile-default", "error", error="RuntimeError: CUDA error")],
    [_row("compile-default", "oom", error="CUDA out of memory")],
])
def test_the_smoke_run_fails_on_any_of_what_it_proves(bad):
    rows = [r for r in GOOD if r["variant"] not in {b["variant"] for b in bad}] + bad
    assert gpu_proof.smoke_verdict(rows)[0] is False
    assert gpu_proof.smoke_verdict([])[0] is False  # nothing ran: nothing proven




@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("target", ["gpu-check", "gpu-proof"])
def test_make_without_a_gpu_exits_2_with_one_line(target, tmp_path):
    """The real targets, with this interpreter behind a built venv's stamp (nothing is installed)."""
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/bash\nPYTHONPATH="{paths.ROOT / "src"}" exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    (venv / ".studylib-installed").touch()
    done = subprocess.run(["make", "-s", "-C", str(paths.ROOT), target, f"VENV={venv}",
                           f"PROOF_OUT={tmp_path / 'proof.txt'}"], capture_output=True, text=True, timeout=120)
    said = [line for line in (done.stdout + done.stderr).splitlines() if not line.startswith("make")]
    assert done.returncode == 2 and len(said) == 1 and "no NVIDIA GPU" in said[0], done.stdout + done.stderr
