"""`make gpu-proof` without a GPU: it says so in one line and exits 2; its verdicts on fake clocks and fake rows.
The proof itself needs a GPU (a later session with one runs it and commits its output under reference/)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from studylib import gpu_check, gpu_proof
from studylib.core import paths
from studylib.machine import gpu


def test_without_a_gpu_it_says_so_in_one_line_and_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(gpu_check, "_nvidia_smi", lambda: None)
    monkeypatch.setattr(gpu, "_seen", {"torch": "PyTorch 2.10.0+cpu is a CPU-only build"})
    assert gpu_proof.main([]) == 2
    out = capsys.readouterr()
    assert out.out == "" and len(out.err.strip().splitlines()) == 1 and out.err.startswith("gpu-proof: no NVIDIA GPU")


class Clock:
    """A fake device: launching queues 20 ms of work at 0.1 ms of host time; sync waits for what is queued."""

    def __init__(self):
        self.now, self.queued = 0.0, 0.0

    def __call__(self):
        return self.now

    def launch(self):
        self.now += 1e-4
        self.queued += 0.02

    def sync(self):
        self.now += self.queued
        self.queued = 0.0


def test_the_chain_is_timed_without_and_with_the_sync():
    clock = Clock()
    without, with_sync = gpu_proof.chain_times(clock.launch, clock.sync, clock)
    assert without == pytest.approx(1e-4) and with_sync == pytest.approx(0.0201)
    assert with_sync / without >= gpu_proof.AT_LEAST


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


def test_a_failed_section_fails_the_proof_and_a_skipped_one_does_not():
    s = gpu_proof.Section
    assert gpu_proof.summary([s("a", True, []), s("TensorRT", None, ["skipped: not installed"])]) == 0
    assert gpu_proof.summary([s("a", True, []), s("b", False, [])]) == 1


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
