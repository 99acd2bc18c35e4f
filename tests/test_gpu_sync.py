"""Each runtime's device sync lands inside the timed sample: a fake asynchronous device on a fake clock.

A call enqueues work and returns at once; only a sync waits for it. A sample that holds the sync measures the work,
one without measures the launch: so each test below fails if a runtime's sync moves out of the timed region. No GPU
is used: the one device synchronize (torch.cuda.synchronize, which every framework's rows but JAX's wait with:
base.device_sync) and JAX's block_until_ready are the fake device's; TensorFlow's sync_devices and ONNX Runtime's
binding's own wait raise, so a runtime that went back to them fails here.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from studylib import runtimes
from studylib.bench import sweep, timing
from studylib.runtimes.keras import KerasRuntime
from studylib.runtimes.ort_session import OrtCall
from studylib.workloads.models import Workload


class FakeDevice:
    """An asynchronous device on a fake clock: a call enqueues `work` seconds and returns after `launch` seconds;
    a sync waits until the queue is done. A sample with the sync inside it is `work`; without, `launch`."""

    def __init__(self, work: float = 0.010, launch: float = 1e-5):
        self.now, self.busy_until, self.work, self.launch, self.syncs = 0.0, 0.0, work, launch, 0

    def __deepcopy__(self, memo):  # a model copied for a variant (eager-aa, channels-last) runs on the same device
        return self

    def __call__(self) -> float:  # the clock
        return self.now

    def enqueue(self, *args, **kwargs):
        self.busy_until = max(self.now, self.busy_until) + self.work
        self.now += self.launch
        return torch.zeros(1)

    def sync(self, *args, **kwargs):
        self.syncs += 1
        self.now = max(self.now, self.busy_until)


class _Module(torch.nn.Module):
    def __init__(self, device: FakeDevice):
        super().__init__()
        self.device = device
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, *xs):
        return self.device.enqueue()


def _samples(prepared, call, device: FakeDevice) -> list[float]:
    r = timing.measure_rounds({"x": sweep.synced(call, prepared.sync)}, warmup_calls=1, min_rounds=6, max_rounds=6,
                              budget_s=1e9, clock=device)
    return r.samples["x"]


TORCH_VARIANTS = ["eager", "eager-aa", "compile-default", "compile-reduce-overhead", "compile-max-autotune",
                  "torchscript", "torchscript-optimized", "eager-channels-last", "compile-default-channels-last",
                  "eager-cudnn-benchmark"]


@pytest.mark.parametrize("variant", TORCH_VARIANTS)
def test_each_torch_runtime_syncs_inside_the_timed_sample(variant, monkeypatch):
    device = FakeDevice()
    monkeypatch.setattr(torch.cuda, "synchronize", device.sync)
    monkeypatch.setattr(torch, "compile", lambda module, mode=None: module)
    monkeypatch.setattr(torch.jit, "trace", lambda module, inputs, check_trace=False: module)
    monkeypatch.setattr(torch.jit, "freeze", lambda module: module)
    monkeypatch.setattr(torch.jit, "optimize_for_inference", lambda module: module)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)  # as eager-cudnn-benchmark's own process has it
    w = Workload("resnet-tiny", "vision", _Module(device), (torch.zeros(1, 3, 4, 4),), "fp32", "cuda", 1)
    prepared = runtimes.get(variant).prepare(w)
    xs = _samples(prepared, prepared.call, device)
    assert xs == pytest.approx([device.work] * 6) and device.syncs >= 7


def test_without_the_sync_the_fake_device_times_only_the_launch():
    """The control: the same call with no sync measures the launch, so the tests above would catch a lost sync."""
    device = FakeDevice()
    prepared = runtimes.Prepared(lambda: device.enqueue(), (), None)
    assert _samples(prepared, prepared.call, device) == pytest.approx([device.launch] * 6)


def _not_this_wait(*args, **kwargs):
    raise AssertionError("a framework's own wait, not the one device synchronize")


@pytest.mark.parametrize("variant", ["tf-eager", "tf-function", "tf-xla"])
def test_each_tensorflow_runtime_syncs_inside_the_timed_sample(variant, monkeypatch):
    device = FakeDevice()
    monkeypatch.setattr(torch.cuda, "synchronize", device.sync)
    tf = types.ModuleType("tensorflow")
    tf.config = types.SimpleNamespace(list_physical_devices=lambda kind: ["/physical_device:GPU:0"])
    tf.test = types.SimpleNamespace(experimental=types.SimpleNamespace(sync_devices=_not_this_wait))

    def function(fn, jit_compile=False):
        wrapped = lambda *xs: fn(*xs)  # noqa: E731
        wrapped.experimental_get_tracing_count = lambda: 1
        return wrapped

    tf.function = function
    monkeypatch.setitem(sys.modules, "tensorflow", tf)
    w = Workload("bert-tiny", "text", lambda *xs: device.enqueue(), (1,), "fp32", "cuda", 1, 8, framework="tensorflow")
    prepared = runtimes.get(variant).prepare(w)
    assert prepared.sync is torch.cuda.synchronize  # the one device synchronize, not sync_devices
    assert _samples(prepared, prepared.call, device) == pytest.approx([device.work] * 6)


def test_onnx_runtimes_io_binding_syncs_inside_the_timed_sample(monkeypatch):
    device = FakeDevice()
    monkeypatch.setattr(torch.cuda, "synchronize", device.sync)

    class Binding:
        def bind_ortvalue_input(self, name, value):
            pass

        def bind_output(self, name, device_type, device_id):
            pass

        def get_outputs(self):
            return [None]

        synchronize_outputs = _not_this_wait

    session = types.SimpleNamespace(io_binding=Binding, run_with_iobinding=lambda binding: device.enqueue())
    call = OrtCall(session, ["input_ids"], "cuda")
    prepared = runtimes.Prepared(call, (object(),), call.sync)  # as OnnxRuntime.prepare builds it on CUDA
    assert _samples(prepared, prepared.call, device) == pytest.approx([device.work] * 6)


@pytest.mark.parametrize("backend", ["torch", "tensorflow", "jax"])
def test_keras_direct_calls_wait_for_the_device_inside_the_timed_sample(backend, monkeypatch):
    device = FakeDevice()
    monkeypatch.setattr(torch.cuda, "synchronize", device.sync)
    tf = types.ModuleType("tensorflow")
    tf.test = types.SimpleNamespace(experimental=types.SimpleNamespace(sync_devices=_not_this_wait))
    monkeypatch.setitem(sys.modules, "tensorflow", tf)

    class Output:
        def block_until_ready(self):
            device.sync()
            return self

    def model(*xs, training=False):
        device.enqueue()
        return Output()

    call = KerasRuntime(backend, "call")._direct(model, "cuda")
    prepared = runtimes.Prepared(call, (1,), None)  # the direct call waits itself (no separate sync)
    assert _samples(prepared, prepared.call, device) == pytest.approx([device.work] * 6)
