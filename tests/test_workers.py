"""Worker processes (bench/workers.py): each framework of a group in a process of its own, the rounds still paired.

Fake runtimes of three frameworks (tests/fake_frameworks.py) log every call with its process and time, so the tests
read what happened where: one process per framework and a second for an A/A copy, blocks that never overlap across
processes, a fresh random order per round, parity against the reference the PyTorch worker made, a worker that dies
as a row, and the threading each worker starts with.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

import fake_frameworks as fakes
import measuring
from studylib import runtimes
from studylib.bench import sweep, workers
from studylib.bench.builder import Workloads
from studylib.core.config import Config

TESTS = str(Path(__file__).resolve().parent)


def _configs(*variants: str, batch: int = 1) -> list[Config]:
    return [Config(model="bert-tiny", variant=v, dtype="fp32", batch_size=batch, device="cpu", threads=1, seq_len=8)
            for v in variants]


@pytest.fixture(autouse=True, scope="module")
def registered():
    """The fakes in the runtime registry for this module's tests only."""
    added = fakes.register()
    yield
    for name in added:
        runtimes.REGISTRY.pop(name, None)


@pytest.fixture(scope="module")
def shared(tmp_path_factory, registered):
    """A ProcessPool whose workers import the fakes (tests/ on their path) and log to one file; kept for the module's
    tests (a worker starts in seconds, as a replicate's are kept for its groups)."""
    log = tmp_path_factory.mktemp("workers") / "log.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update({fakes.LOG_VAR: str(log), "PYTHONPATH": os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")])})
    plan = measuring.plan(dict(measuring.FAST, min_rounds=12, max_rounds=12),
                          env={"git_commit": "x", "fingerprint": "f"})
    p = workers.ProcessPool(plan, fakes.FakeWorkloads(0), env)
    p.plan, p.log_path = plan, log
    yield p
    p.close()


@pytest.fixture
def pool(shared):
    """The shared pool, its `log` reading only what this test's calls wrote."""
    start = len(fakes.read_log(shared.log_path))
    shared.read = lambda: fakes.read_log(shared.log_path)[start:]
    return shared


def _measure(pool, configs, group="g"):
    return sweep.measure_group(configs, pool.plan, workloads=pool.workloads, group_key=group, group_id="i",
                               replicate=0, pool=pool)


def test_each_framework_and_each_aa_copy_in_a_process_of_its_own(pool):
    rows = _measure(pool, _configs("fake-torch", "fake-torch-aa", "fake-tf", "fake-ort"))
    assert [r["status"] for r in rows] == ["ok"] * 4, [r["error"] for r in rows]
    assert [r["process"].split(":")[0] for r in rows] == ["torch", "torch~aa", "tensorflow", "onnxruntime"]
    calls = [e for e in pool.read() if e["what"] == "call"]
    pids = {e["pid"] for e in calls}
    assert len(pids) == 4 and os.getpid() not in pids
    assert pids == {w.proc.pid for w in pool.workers.values()}
    assert all(len(r["samples_s"]) == 12 for r in rows)
    # the workers live on for the replicate's next group: the same processes measure it
    _measure(pool, _configs("fake-torch", "fake-ort", batch=2), group="g2")
    later = [e for e in pool.read() if e["what"] == "call"][len(calls):]
    assert {e["pid"] for e in later} <= pids


def test_blocks_never_overlap_across_processes_and_rounds_take_a_fresh_order(pool):
    _measure(pool, _configs("fake-torch", "fake-tf", "fake-ort"))
    calls = sorted((e for e in pool.read() if e["what"] == "call"), key=lambda e: e["start"])
    for a, b in zip(calls, calls[1:]):  # one process runs at a time: every other worker waits idle
        assert a["end"] <= b["start"], (a, b)
    timed = [e["pid"] for e in calls][-3 * 12:]  # the 12 rounds of one call each (block_s 0), after the warm-up
    rounds = [tuple(timed[i:i + 3]) for i in range(0, len(timed), 3)]
    assert all(len(set(r)) == 3 for r in rounds)  # each variant once per round
    assert len(set(rounds)) > 1  # in a fresh random order


def _state(pid: int) -> str:
    """The process's state letter in /proc (R running, S sleeping, T stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_only_the_worker_being_called_runs_the_others_are_stopped(pool):
    _measure(pool, _configs("fake-torch", "fake-tf", "fake-ort"))
    states = {name: _state(w.proc.pid) for name, w in pool.workers.items()}
    running = [name for name, w in pool.workers.items() if not w.paused]
    assert len(running) == 1 and states[running[0]] != "T", states
    assert all(states[name] == "T" for name in states if name not in running), states
    # the next call continues its worker and stops the one that ran
    other = next(name for name in pool.workers if name not in running)
    pool.settings(other)
    pool.get(other).has_reference(_configs("fake-torch")[0])
    assert _state(pool.workers[other].proc.pid) != "T" and _state(pool.workers[running[0]].proc.pid) == "T"


def test_a_pool_with_stopped_workers_closes_at_once(pool):
    fresh = workers.ProcessPool(pool.plan, pool.workloads, pool.env)
    try:
        fresh.settings("torch")
        fresh.settings("onnxruntime")
        assert fresh.workers["torch"].paused and _state(fresh.workers["torch"].proc.pid) == "T"
    finally:
        procs = [w.proc for w in fresh.workers.values()]
        t0 = time.perf_counter()
        fresh.close()
    assert all(p.poll() is not None for p in procs)
    assert time.perf_counter() - t0 < workers.STOP_WAIT_S  # continued, then asked to stop, not killed after waiting


def test_parity_reads_the_reference_the_pytorch_worker_made(pool):
    rows = _measure(pool, _configs("fake-torch", "fake-tf", "fake-ort", batch=3))  # a shape no test made before
    by = {r["variant"]: r for r in rows}
    assert by["fake-tf"]["max_abs_diff"] == pytest.approx(0.25)  # its output is the reference + 0.25
    assert by["fake-tf"]["parity_ok"] is False and by["fake-ort"]["parity_ok"] is True
    made = [e for e in pool.read() if e["what"] == "reference"]
    torch_pid = next(e["pid"] for e in pool.read() if e["what"] == "call")  # fake-torch runs first
    assert made and {e["pid"] for e in made} == {torch_pid}


def test_a_worker_that_dies_is_a_row_and_the_next_group_gets_a_fresh_one(pool):
    rows = _measure(pool, _configs("fake-torch", "fake-ort-dies", "fake-tf"))
    by = {r["variant"]: r for r in rows}
    assert by["fake-ort-dies"]["status"] == "error"
    assert "onnxruntime worker process died with exit code 3" in by["fake-ort-dies"]["error"]
    assert by["fake-torch"]["status"] == by["fake-tf"]["status"] == "ok"
    assert len(by["fake-torch"]["samples_s"]) == 12  # the others' rounds went on
    [row] = _measure(pool, _configs("fake-ort", batch=2), group="g2")
    assert row["status"] == "ok"


def test_workers_start_with_their_frameworks_defaults_and_a_users_wait_policy_is_kept():
    base = {"USE_TF": "0", "KERAS_BACKEND": "jax", "X": "1"}
    assert "USE_TF" not in workers.worker_env("tensorflow", base)
    assert workers.worker_env("onnxruntime", {})["USE_TF"] == "0"
    assert workers.worker_env("keras", base)["USE_TF"] == "0" and workers.worker_env("keras", base)["X"] == "1"
    assert "OMP_WAIT_POLICY" not in workers.worker_env("torch", base)
    assert workers.worker_env("torch", {"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"
    # the shared workers (runtimes/shared.py): both frameworks in one process, one of them under PASSIVE
    assert workers.worker_env("shared-passive", base)["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in workers.worker_env("shared", base) and "USE_TF" not in workers.worker_env("shared", base)
    assert workers.worker_env("shared-passive", {"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"
    plan = measuring.plan(env={}, frameworks=("torch", "tensorflow"))
    assert workers.frameworks_of("shared-passive", plan, {}) == ("torch", "tensorflow")
    assert workers.frameworks_of("torch~aa", plan, {}) == ("torch",)
    assert workers.frameworks_of("tensorflow~aa", plan, {}) == ("torch", "tensorflow")
    assert workers.frameworks_of("keras", plan, {"KERAS_BACKEND": "jax"}) == ("torch",)
    assert workers.frameworks_of("keras", plan, {"KERAS_BACKEND": "tensorflow"}) == ("torch", "tensorflow")


def test_a_worker_records_the_threading_in_force(pool):
    rows = _measure(pool, _configs("fake-torch", "fake-tf"))
    assert all("OMP_WAIT_POLICY unset (OpenMP's default); torch 1 intra-op, 1 inter-op" in r["process"] for r in rows)
    assert "TensorFlow" not in rows[0]["process"]  # the PyTorch worker sets no TensorFlow threads
    fresh = workers.ProcessPool(pool.plan, pool.workloads, dict(pool.env, OMP_WAIT_POLICY="PASSIVE"))
    try:
        assert fresh.settings("torch").startswith("torch: OMP_WAIT_POLICY=PASSIVE;")
    finally:
        fresh.close()


def test_in_process_the_blocks_are_timed_on_the_workers_clock(monkeypatch):
    """On a fake clock that moves only when a fake is called, each row's samples are exactly its cost per call."""
    class Clock:
        now = 0.0

        def __call__(self):
            return self.now

    clock = Clock()
    for r, cost in zip(fakes.FAKES[:3], (0.010, 0.020, 0.005)):
        monkeypatch.setattr(r, "clock", clock)
        monkeypatch.setattr(r, "cost", cost)
    monkeypatch.setattr(sweep.time, "perf_counter", clock)
    plan = measuring.plan(dict(measuring.FAST, min_rounds=8, max_rounds=8), env={"git_commit": "x", "fingerprint": "f"})
    rows = sweep.measure_group(_configs("fake-torch", "fake-tf", "fake-ort"), plan,
                               workloads=fakes.FakeWorkloads(0), group_key="g", group_id="i", replicate=0)
    for r, cost in zip(rows, (0.010, 0.020, 0.005)):
        assert len(r["samples_s"]) == 8 and np.allclose(r["samples_s"], cost, rtol=1e-9, atol=0)
    assert all(r["process"].startswith("this process") for r in rows)


def test_the_shared_workers_hold_both_frameworks_one_of_them_under_passive(tmp_path):
    """Real frameworks: eager PyTorch and tf.function each alone, and both in the worker they share under PASSIVE
    (runtimes/shared.py; the other shared worker differs by its environment alone, tested above), all in one group,
    each checked against the reference the PyTorch worker made."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"} | {"TRANSFORMERS_VERBOSITY": "error"}
    plan = measuring.plan(env={"git_commit": "x", "fingerprint": "f"}, frameworks=("torch", "tensorflow"))
    pool = workers.ProcessPool(plan, Workloads(0), env)
    try:
        rows = sweep.measure_group(
            [Config("bert-tiny", v, "fp32", 1, "cpu", 1, seq_len=8) for v in
             ("eager", "tf-function", "eager-shared-passive", "tf-function-shared-passive")],
            plan, workloads=pool.workloads, group_key="g", group_id="i", replicate=0, pool=pool)
    finally:
        pool.close()
    assert [r["status"] for r in rows] == ["ok"] * 4, [r["error"] for r in rows]
    assert all(r["parity_ok"] for r in rows)
    process = {r["variant"]: r["process"] for r in rows}
    assert process["eager-shared-passive"] == process["tf-function-shared-passive"]  # one process, both frameworks
    assert process["eager-shared-passive"].startswith("shared-passive: OMP_WAIT_POLICY=PASSIVE;")
    assert "TensorFlow 1 intra-op" in process["eager-shared-passive"]
    assert process["tf-function"].startswith("tensorflow: OMP_WAIT_POLICY unset")
    assert process["eager"].startswith("torch: OMP_WAIT_POLICY unset") and "TensorFlow" not in process["eager"]
