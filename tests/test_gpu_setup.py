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


def test_setup_after_setup_gpu_keeps_the_gpu_builds(venv):
    first = _make(venv, "setup-gpu")  # a fresh venv: setup, then the overlay
    assert first.index("-m pip install -q -r requirements.lock") < first.index(
        "-m pip install -q -r requirements-gpu.txt")
    assert (venv / ".studylib-gpu").exists()
    assert _make(venv, "setup-gpu") == []  # nothing changed: nothing runs
    (venv / ".studylib-installed").unlink()  # as when requirements.lock or pyproject.toml is newer than the stamp
    again = _make(venv, "setup")
    lock = f"-m pip install -q -r {venv}/requirements.lock.gpu"
    assert "-m pip install -q -r requirements.lock" not in again and lock in again  # never the CPU onnxruntime
    assert "onnxruntime==" not in (venv / "requirements.lock.gpu").read_text()
    assert again.index(lock) < again.index("-m pip uninstall -q -y onnxruntime onnxruntime-gpu") < again.index(
        "-m pip install -q -r requirements-gpu.txt")


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
