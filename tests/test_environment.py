"""Environment capture and peak memory."""

import numpy as np
import torch

from studylib.bench.memory import PeakMemory
from studylib.machine import environment


def test_capture_records_what_produced_a_result():
    import torch  # noqa: F401  (thread settings are read from torch once it is imported)

    env = environment.capture("smoke")
    assert env["profile"] == "smoke"
    assert env["python"].startswith("3.") and env["cpu_model"] and env["logical_cpus"] >= 1
    assert env["libraries"]["torch"].startswith("2.") and env["libraries"]["studylib"]
    assert env["threads"]["torch_intra_op"] >= 1
    assert "gpu_name" in env and "git_commit" in env
    assert len(env["fingerprint"]) == 12


def test_fingerprint_changes_with_versions_not_with_time():
    env = environment.capture("smoke")
    later = dict(env, captured_at="2099-01-01T00:00:00+00:00", git_commit="other")
    assert environment.fingerprint(later) == env["fingerprint"]
    newer = dict(env, libraries=dict(env["libraries"], torch="9.9.9"))
    assert environment.fingerprint(newer) != env["fingerprint"]


def test_one_line_summary():
    line = environment.one_line(environment.capture("smoke"))
    assert "CPUs" in line and "torch" in line and "\n" not in line


def test_peak_memory_sees_a_temporary_allocation():
    with PeakMemory("cpu") as baseline:
        pass
    with PeakMemory("cpu") as pm:
        block = np.ones(300 * 2**20 // 8)  # 300 MiB, touched
        del block
    assert pm.kind == "rss_peak"
    assert pm.peak_mb - baseline.peak_mb > 250


def test_the_commit_is_dirty_for_changed_code_but_not_for_changed_outputs_or_reference(tmp_path, monkeypatch):
    import subprocess

    from studylib.core import paths
    from studylib.machine import environment

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "r.jsonl").write_text("{}\n")
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "index.html").write_text("<p>1</p>\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    clean = environment.git_commit()
    assert clean and not clean.endswith("-dirty")
    (tmp_path / "outputs" / "r.jsonl").write_text("{}\n{}\n")  # a run appended to the committed results
    assert environment.git_commit() == clean
    (tmp_path / "reference" / "index.html").write_text("<p>2</p>\n")  # a re-analysis rewrote the committed pages
    assert environment.git_commit() == clean
    (tmp_path / "code.py").write_text("x = 2\n")
    assert environment.git_commit() == clean + "-dirty"


def test_a_gpu_page_says_which_torch_ran_and_why_where_it_is_not_the_cpu_locks():
    """Every page's machine line (environment.one_line, under render's "Machine:"): a GPU run on the overlay's torch
    names it, the CPU lock's and why; a GPU run on the lock's torch, and a CPU run, say nothing more."""
    locked = environment.locked_version("torch")
    assert locked and locked.split("+")[0] == torch.__version__.split("+")[0]  # the CPU lock is what runs here
    gpu = {"gpu_name": "NVIDIA H100", "cuda": "12.8", "cpu_model": "x", "usable_cpus": 16, "python": "3.11",
           "libraries": {"torch": "2.10.0+cu128"}, "git_commit": "abc"}
    line = environment.one_line(gpu)
    assert f"torch 2.10.0+cu128 (torch 2.10.0+cu128 ran, not the CPU lock's {locked}: the last PyPI torch built for " \
           f"CUDA 12: TensorFlow's GPU build is CUDA 12 only" in line and line.endswith(" · commit abc")
    same = gpu | {"libraries": {"torch": locked.split("+")[0] + "+cu130"}}
    cpu = gpu | {"gpu_name": None}
    assert "ran, not the CPU lock's" not in environment.one_line(same) + environment.one_line(cpu)
