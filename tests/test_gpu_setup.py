"""`make setup-gpu` survives `make` re-running setup, and env.json records every GPU package.

The Makefile runs against a fake interpreter that only logs its arguments: what is checked is which pip commands
run, in which order, never an installation."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from studylib.core import paths
from studylib.machine import environment

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@pytest.fixture
def venv(tmp_path):
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text('#!/bin/bash\necho "$*" >> "$(dirname "$0")/../calls.log"\n')
    python.chmod(0o755)
    return tmp_path / ".venv"


def _make(venv, target: str) -> list[str]:
    log = venv / "calls.log"
    log.unlink(missing_ok=True)
    subprocess.run(["make", "-s", "-C", str(paths.ROOT), target, f"VENV={venv}"], check=True, capture_output=True,
                   text=True, timeout=60)
    return log.read_text().splitlines() if log.exists() else []


GPU = "-m pip install -q -r {venv}/requirements.lock.gpu -r requirements-gpu.txt -c requirements-gpu.resolved.txt"
CPU = "-m pip install -q -r requirements.lock"


def test_setup_gpu_installs_the_lock_and_the_overlay_in_one_constrained_command(venv):
    gpu = GPU.format(venv=venv)
    first = _make(venv, "setup-gpu")  # a fresh venv: the CPU lock's torch (PyPI's CUDA 13 build) never comes first
    assert first.count(gpu) == 1 and CPU not in first, first
    assert first.index("-m pip uninstall -q -y onnxruntime onnxruntime-gpu") < first.index(gpu)
    pins = (venv / "requirements.lock.gpu").read_text().splitlines()
    assert not any(p.startswith(("torch==", "onnxruntime==")) for p in pins) and "tensorflow==2.21.0" in pins
    assert (venv / ".studylib-gpu").exists()
    assert _make(venv, "setup-gpu") == []  # nothing changed: nothing runs
    (venv / ".studylib-installed").unlink()  # as when requirements.lock or pyproject.toml is newer than the stamp
    again = _make(venv, "setup")
    assert again.count(gpu) == 1 and CPU not in again  # the GPU builds stay


def test_setup_gpu_on_a_cpu_environment_swaps_in_the_gpu_stack(venv):
    assert CPU in _make(venv, "setup")
    assert _make(venv, "setup-gpu").count(GPU.format(venv=venv)) == 1


def test_setup_without_setup_gpu_installs_the_cpu_lock_only(venv):
    calls = _make(venv, "setup")
    assert "-m pip install -q -r requirements.lock" in calls
    assert not any("requirements-gpu.txt" in c for c in calls)


def test_env_json_records_every_installed_gpu_package(monkeypatch):
    installed = {"onnxruntime-gpu": "1.31.1", "jax-cuda13-plugin": "0.10.2", "tensorrt-cu13": "10.16.1.11",
                 "nvidia-cudnn-cu13": "9.20.0.48", "torch": "2.13.0"}
    monkeypatch.setattr(environment, "_version", installed.get)
    env = environment.capture("p")
    assert env["gpu_libraries"] == {k: v for k, v in installed.items() if k != "torch"}
    assert env["libraries"]["onnxruntime"] is None  # the CPU package is gone; the GPU one is what ran
    monkeypatch.setattr(environment, "_version", {"torch": "2.13.0"}.get)  # the same, without the GPU packages
    bare = environment.capture("p")
    assert bare["gpu_libraries"] == {} and bare["libraries"] == env["libraries"]
    assert bare["fingerprint"] != env["fingerprint"]  # a GPU build swapped in or out is measured again
