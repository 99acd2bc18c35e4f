"""CUDA-graph safe parity: a compiled function whose previous outputs are freed by its next run (what cudagraph trees do
in compile-reduce-overhead and compile-max-autotune) still gets its parity checked, and the rows are ok.

No GPU: a fake runtime stands in for the CUDA graph. Its output raises when read after the function ran again, as
PyTorch's "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run" does.
"""

from __future__ import annotations

import pytest

import measuring
from studylib import runtimes
from studylib.bench import sweep
from studylib.bench.builder import Workloads
from studylib.bench.dataset import DatasetWorkloads, TextDataset
from studylib.core.config import Config
from studylib.runtimes.pytorch import TorchEager


class Overwritten(RuntimeError):
    pass


class GraphOutput:
    """An output of a fake CUDA graph: readable until the graph runs again."""

    def __init__(self, graph: FakeGraph, value):
        self.graph, self.run, self.value = graph, graph.runs, value

    def read(self):
        if self.graph.runs != self.run:
            raise Overwritten("Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run")
        return self.value


class FakeGraph:
    def __init__(self, module):
        self.module, self.runs = module, 0

    def __call__(self, *xs):
        self.runs += 1
        return GraphOutput(self, self.module(*xs))


class FakeReduceOverhead(TorchEager):
    """Records CUDA graphs in the calls after the first (memory_warmup_calls), as compile-reduce-overhead does on a GPU."""

    name = "fake-cuda-graph"

    def memory_warmup_calls(self, device: str) -> int:
        return 2

    def prepare(self, workload):
        return runtimes.Prepared(FakeGraph(workload.module), workload.inputs, None)

    @staticmethod
    def to_numpy(output):
        return TorchEager.to_numpy(output.read())


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setitem(runtimes.REGISTRY, FakeReduceOverhead.name, FakeReduceOverhead())


def test_the_fake_raises_when_an_output_is_read_after_the_next_run():
    graph = FakeGraph(lambda x: x)
    first = graph(1)
    assert first.read() == 1
    graph(2)
    with pytest.raises(Overwritten):
        first.read()


def test_parity_reads_the_first_output_before_the_cuda_graph_calls_after_it(fake):
    configs = [Config("bert-tiny", v, "fp32", 1, "cpu", 2, seq_len=8) for v in ("eager", FakeReduceOverhead.name)]
    plan = measuring.plan(measuring.FAST | {"max_rounds": 6}, env={"fingerprint": "f", "git_commit": None})
    rows = sweep.measure_group(configs, plan, workloads=Workloads(0), group_key="g", group_id="i", replicate=0)
    assert [r["status"] for r in rows] == ["ok", "ok"], rows[1]["error"]
    assert rows[1]["parity_ok"] and rows[1]["max_abs_diff"] == 0.0
    assert "2 warm-up call(s) after the first" in rows[1]["notes"]


def test_a_data_set_pass_copies_each_batchs_output_before_the_next_batch_runs(fake):
    ids = ((101, 7, 8, 102), (101, 9, 102), (101, 5, 6, 7, 102))  # batch 2: two batches through one graph per pass
    data = TextDataset("s", ids, 0, 8, "fake")
    w = DatasetWorkloads(data, seed=0)
    configs = [Config("roberta-tiny-classifier", v, "fp32", 2, "cpu", 2, seq_len=8, strategy="sorted", data="t")
               for v in ("eager", FakeReduceOverhead.name)]
    plan = measuring.plan(measuring.FAST | {"max_rounds": 6}, env={"fingerprint": "f", "git_commit": None})
    rows = sweep.measure_group(configs, plan, workloads=w, group_key="g", group_id="i", replicate=0)
    assert [r["status"] for r in rows] == ["ok", "ok"], rows[1]["error"]
    assert rows[1]["parity_ok"] and rows[1]["max_abs_diff"] == 0.0
