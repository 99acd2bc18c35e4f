"""Peak GPU memory for every framework, each counted by its own allocator, without a GPU: fake allocators stand in
for torch's, TensorFlow's and the device's (cudaMemGetInfo)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from studylib import runtimes
from studylib.bench import sweep
from studylib.bench.memory import PeakMemory


@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU of 1000 MiB whose allocators report what the test sets in `state`."""
    state = {"torch": 100, "torch_peak": 100, "tf": 50, "tf_peak": 50, "used": 300}
    mib = 2**20
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a: state.update(torch_peak=state["torch"]))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: state["torch"] * mib)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: state["torch_peak"] * mib)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: ((1000 - state["used"]) * mib, 1000 * mib))
    tf = types.ModuleType("tensorflow")
    tf.config = types.SimpleNamespace(experimental=types.SimpleNamespace(
        reset_memory_stats=lambda d: state.update(tf_peak=state["tf"]),
        get_memory_info=lambda d: {"current": state["tf"] * mib, "peak": state["tf_peak"] * mib}))
    monkeypatch.setitem(sys.modules, "tensorflow", tf)
    return state


def test_each_framework_counts_its_own_allocator(fake_gpu):
    with PeakMemory("cuda", "torch") as torch_mem:
        fake_gpu.update(torch_peak=400, tf_peak=900, used=800)  # only torch's peak is torch's
    assert torch_mem.kind == "cuda_max_allocated" and torch_mem.increase_mb == 300
    fake_gpu["tf"] = 70
    with PeakMemory("cuda", "tensorflow") as tf_mem:
        fake_gpu.update(tf_peak=250)
    assert tf_mem.kind == "tf_peak_bytes" and tf_mem.increase_mb == 180  # peak 250 over the 70 in use at the start
    for framework in ("jax", "onnxruntime"):  # no resettable peak: the device memory their arenas grew by and kept
        fake_gpu["used"] = 300
        with PeakMemory("cuda", framework) as mem:
            fake_gpu["used"] = 420
        assert mem.kind == "cuda_device_used" and mem.increase_mb == 120


@pytest.mark.parametrize(("variant", "allocator"), [
    ("eager", "torch"), ("compile-default", "torch"), ("torchscript", "torch"), ("ort", "onnxruntime"),
    ("tf-xla", "tensorflow"), ("keras-jax-jit", "jax"), ("keras-tensorflow", "tensorflow"), ("keras-torch", "torch"),
    ("keras2-tensorflow", "tensorflow"), ("keras-jax-jit-aa", "jax"), ("ort-aa", "onnxruntime"),
])
def test_each_runtime_names_the_allocator_its_memory_lands_in(variant, allocator):
    assert sweep.allocator_of(runtimes.get(variant)) == allocator


def test_weights_are_counted_once_per_tensor_in_every_framework():
    from studylib.bench import memory

    lin = torch.nn.Linear(256, 128)  # 256*128 + 128 fp32 numbers
    assert memory.weights_mb(lin) == pytest.approx((256 * 128 + 128) * 4 / 2**20)
    tied = torch.nn.Sequential(lin, torch.nn.Linear(128, 256))
    tied[1].weight = torch.nn.Parameter(lin.weight.T)  # a new tensor: counted
    assert memory.weights_mb(tied) > memory.weights_mb(lin)
    var = types.SimpleNamespace
    keras_like = var(weights=[var(shape=(1000, 8), dtype="float32"), var(shape=(8,), dtype=var(name="bfloat16"))])
    assert memory.weights_mb(keras_like) == pytest.approx((1000 * 8 * 4 + 8 * 2) / 2**20)
    assert memory.weights_mb(var(model=keras_like)) == memory.weights_mb(keras_like)  # a TF twin behind `model`
    assert memory.weights_mb(lambda *x: x) is None


def test_every_row_holds_the_weights_it_runs_on_once(monkeypatch, tmp_path):
    """Eager runs on weights built before its window: they are added; torch-int8 and an A/A copy of a PyTorch module
    make their own inside it: nothing is added (a fake window that always grew by 1 MiB)."""
    import measuring
    from studylib.bench import memory
    from studylib.bench.builder import Workloads
    from studylib.core.config import Config

    class OneMiB(PeakMemory):
        @property
        def increase_mb(self):
            return 1.0

    monkeypatch.setattr(sweep, "PeakMemory", OneMiB)
    configs = [Config("bert-tiny", v, "fp32", 1, "cpu", 1, seq_len=8) for v in ("eager", "torch-int8", "eager-aa")]
    workloads = Workloads(0)
    rows = sweep.measure_group(configs, measuring.plan(env={"fingerprint": "f", "git_commit": "c"}),
                               workloads=workloads, group_key="g", group_id="i", replicate=0)
    by = {r["variant"]: r for r in rows}
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    weights = memory.weights_mb(workloads.workload(configs[0]).module)
    assert weights > 0.1  # bert-tiny's fp32 parameters (0.65 MiB)
    assert by["eager"]["peak_mem_mb"] == pytest.approx(1.0 + weights)
    assert by["torch-int8"]["peak_mem_mb"] == by["eager-aa"]["peak_mem_mb"] == 1.0
