"""A CUDA error or a GPU out-of-memory spoils one replicate process, never the groups after it.

No GPU: a sticky-error fake stands in for a lost CUDA context. Once one configuration raised "CUDA error: an illegal
memory access", every later preparation in the same process raises it too, until a fresh process starts (here: the
next call of replicates._worker, in this process).
"""

from __future__ import annotations

import sys
import types

import pytest

import measuring
from studylib import runtimes
from studylib.bench import replicates, sweep
from studylib.core.config import Config
from studylib.runtimes.pytorch import TorchEager
from studylib.stats.results import ResultsTable

STICKY = "CUDA error: an illegal memory access was encountered"


class Process:
    """The state one replicate process holds: whether its CUDA context is lost."""

    lost = False
    started = 0


class Fake(TorchEager):
    def __init__(self, name: str, fails_at_batch: int | None = None):
        self.name, self.fails_at_batch = name, fails_at_batch

    def prepare(self, workload):
        if Process.lost:
            raise RuntimeError(STICKY)
        if workload.batch_size == self.fails_at_batch:
            Process.lost = True
            raise RuntimeError(STICKY)
        return super().prepare(workload)


@pytest.fixture
def sticky(monkeypatch):
    for runtime in (Fake("fake-ok"), Fake("fake-sticky", fails_at_batch=2), Fake("fake-after")):
        monkeypatch.setitem(runtimes.REGISTRY, runtime.name, runtime)
    worker = replicates._worker

    def fresh_process(task, **kw):
        Process.lost, Process.started = False, Process.started + 1
        return worker(task, **kw)

    monkeypatch.setattr(replicates, "_worker", fresh_process)
    Process.lost, Process.started = False, 0
    return Process


def test_a_sticky_cuda_error_is_its_row_and_a_fresh_process_measures_the_groups_left(sticky, tmp_path):
    configs = [Config("bert-tiny", v, "fp32", b, "cpu", 2, seq_len=8)
               for b in (1, 2, 3) for v in ("fake-ok", "fake-sticky", "fake-after")]
    rows = measuring.measure(configs, table=ResultsTable(tmp_path / "t.jsonl"), env={"fingerprint": "f", "git_commit": None},
                             measure=measuring.FAST | {"max_rounds": 6}, parts_dir=tmp_path / "parts")
    status = {(r["batch_size"], r["variant"]): (r["status"], r["error"]) for r in rows}
    assert sticky.started == 2  # the process that hit the error stopped after its group; one fresh one for the rest
    assert all(status[(b, v)][0] == "ok" for b in (1, 3) for v in ("fake-ok", "fake-sticky", "fake-after"))
    assert status[(2, "fake-ok")][0] == "ok"
    assert status[(2, "fake-sticky")] == ("error", f"RuntimeError: {STICKY}")
    after = status[(2, "fake-after")]  # not tried in the lost context: a row that names what happened before it
    assert after[0] == "error" and after[1].startswith("not measured: fake-sticky's CUDA error")
    assert not any("died" in r["error"] for r in rows)


def test_the_fresh_process_exit_code_writes_no_died_rows(sticky, tmp_path, monkeypatch):
    """The worker's own code after its group's part: the parent starts a fresh process, no row for groups never run."""
    configs = [Config("bert-tiny", v, "fp32", b, "cpu", 2, seq_len=8) for b in (2, 3) for v in ("fake-ok", "fake-sticky")]
    codes = []
    run = replicates._run_process
    monkeypatch.setattr(replicates, "_run_process", lambda *a, **kw: codes.append(run(*a, **kw)) or codes[-1])
    rows = measuring.measure(configs, table=ResultsTable(tmp_path / "t.jsonl"), env={"fingerprint": "f", "git_commit": None},
                             measure=measuring.FAST | {"max_rounds": 6}, parts_dir=tmp_path / "parts")
    assert codes == [replicates.FRESH_PROCESS_EXIT, 0]
    assert [(r["batch_size"], r["status"]) for r in rows] == [(2, "ok"), (2, "error"), (3, "ok"), (3, "ok")]


def _need(*keys):
    return [(k, "id", []) for k in keys]


def test_died_rows_go_to_the_group_in_flight_or_to_the_first_when_nothing_was_measured():
    parts = {"a": {}, "b": {}, "c": {}}
    assert replicates._died_group(_need("a", "b", "c"), parts, 0, {"group_key": "b"}) == "b"  # died while measuring b
    assert replicates._died_group(_need("a", "b", "c"), parts, 0, {}) == "a"  # died before any group: move on
    measured_a = {"b": {}, "c": {}}  # a's part written and combined
    assert replicates._died_group(_need("a", "b", "c"), measured_a, 0, {}) is None  # ended on purpose after a
    assert replicates._died_group(_need("a", "b", "c"), measured_a, 0, {"group_key": "a"}) is None


@pytest.mark.parametrize(("status", "error", "device", "spoils"), [
    ("error", STICKY, "cuda", True),
    ("error", "RuntimeError: CUDA error: device-side assert triggered", "cuda", True),
    ("error", "RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED when calling cublasSgemm", "cuda", True),
    ("oom", "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda", True),
    ("oom", "MemoryError: ", "cpu", False),  # a CPU process gives its memory back to the system
    ("error", "ValueError: export failed", "cuda", False),
    ("skipped", "TensorFlow sees no GPU", "cuda", False),
    ("ok", "", "cuda", False),
])
def test_which_failures_spoil_a_process(status, error, device, spoils):
    assert sweep.spoils_process({"status": status, "error": error, "device": device}) is spoils


def test_memory_is_released_for_every_loaded_framework_between_groups_on_a_gpu(monkeypatch):
    import gc

    import torch

    calls = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("torch"))
    monkeypatch.setattr(gc, "collect", lambda *a: 0)
    jax = types.ModuleType("jax")
    jax.clear_caches = lambda: calls.append("jax")
    tf = types.ModuleType("tensorflow")
    tf.keras = types.SimpleNamespace(backend=types.SimpleNamespace(clear_session=lambda: calls.append("tensorflow")))
    monkeypatch.setitem(sys.modules, "jax", jax)
    monkeypatch.setitem(sys.modules, "tensorflow", tf)
    sweep.release_memory("cuda")  # within a group: what is prepared must still run
    assert calls == ["torch"]
    sweep.release_memory("cuda", between_groups=True)
    assert calls == ["torch", "torch", "jax", "tensorflow"]
    sweep.release_memory("cpu", between_groups=True)
    assert len(calls) == 4
