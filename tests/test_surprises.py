"""Surprises: expectations checked on a replicate's paired rounds, one call of each side profiled (torch.profiler,
ONNX Runtime's profiler), the profile stored in results rows and shown side by side under the finding.
No timing thresholds: only names, counts and which side is which."""

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import measuring
from conftest import stored_row
from studylib import runtimes
from studylib.bench import surprises
from studylib.bench.surprises import Expectation
from studylib.core.config import Config
from studylib.machine import profiling
from studylib.runtimes.pytorch import TorchEager
from studylib.stats.results import ResultsTable, validated
from studylib.studies import STUDIES, Analysis
from studylib.workloads import models

MEASURE = {"warmup_calls": 0, "min_rounds": 6, "max_rounds": 8, "min_time_s": 0.0, "target_ci_pct": 50.0,
           "budget_s": 0.05, "block_s": 0.0, "replicates": 2}
TOLERANCE = {"fp32": 1e-3, "int8": 0.1}


def _config(variant, batch=4, strategy=None):
    return Config("roberta-tiny-classifier", variant, "fp32", batch, "cpu", 2, seq_len=32, strategy=strategy)


def _rows(times: dict[str, float], spread=0.01, n=12, seed=0):
    """One replicate's rows by key: per-round samples around each configuration's time, rounds shared (a common
    per-round factor, as a machine's phase would be)."""
    rng = np.random.default_rng(seed)
    phase = rng.uniform(0.9, 1.1, n)
    return {key: {"status": "ok", "group_id": "g", "samples_s": list(t * phase * rng.uniform(1 - spread, 1 + spread, n)),
                  "sample_rep": [0] * n, "sample_round": list(range(n))} for key, t in times.items()}


def test_band_is_the_layers_band():
    from studylib.stats import speedups

    assert surprises.EQUIVALENCE is speedups.EQUIVALENCE


def test_expectations_are_data_in_every_study():
    for study in STUDIES.values():
        assert study.expectations, study.notebook
        assert all(isinstance(e, Expectation) for e in study.expectations)
    assert Expectation("ort-optimized", "ort") in STUDIES["03_onnx_batching"].expectations
    assert STUDIES["04_sorted_length_batching"].expectations[0].column == "strategy"
    with pytest.raises(ValueError):
        Expectation("a", "b", expect="slower")
    with pytest.raises(ValueError):
        Expectation("a", "b", column="colour")


def test_pairs_are_alike_but_for_the_column():
    configs = [_config(v, b) for b in (1, 8) for v in ("eager", "ort", "ort-optimized")]
    pairs = surprises.config_pairs([Expectation("ort-optimized", "ort")], configs)
    assert [(b.variant, c.variant, c.batch_size) for _, b, c in pairs] == [("ort", "ort-optimized", 1),
                                                                            ("ort", "ort-optimized", 8)]
    by_strategy = [_config("eager", b, s) for b in (1, 8) for s in ("unsorted", "sorted")]
    pairs = surprises.config_pairs([Expectation("sorted", "unsorted", column="strategy", min_batch=2)], by_strategy)
    assert [(b.strategy, c.strategy, c.batch_size) for _, b, c in pairs] == [("unsorted", "sorted", 8)]


def test_check_on_a_replicates_rounds():
    """Expected faster and slower: a surprise; expected faster and faster: none; expected equal and 20% apart:
    a surprise; expected equal and alike: none."""
    eager, ort, opt, ts, tso = (_config(v) for v in ("eager", "ort", "ort-optimized", "torchscript",
                                                     "torchscript-optimized"))
    configs = [eager, ort, opt, ts, tso]
    rows = _rows({eager.key: 1.0, ort.key: 0.5, opt.key: 0.6, ts.key: 0.8, tso.key: 0.8 * 1.2})
    found = {(f.expectation.candidate, f.expectation.baseline): f for f in surprises.check(
        [Expectation("ort", "eager"), Expectation("ort-optimized", "ort"),
         Expectation("torchscript-optimized", "torchscript", expect="equal")], configs, rows)}
    assert not found[("ort", "eager")].surprising and found[("ort", "eager")].speedup.ratio == pytest.approx(2, rel=0.05)
    assert found[("ort-optimized", "ort")].surprising and found[("ort-optimized", "ort")].speedup.ci_high < 1
    assert found[("torchscript-optimized", "torchscript")].surprising
    assert found[("ort-optimized", "ort")].reason(0).startswith("ort-optimized over ort was expected faster; replicate 0")
    alike = _rows({ts.key: 0.8, tso.key: 0.8}, spread=0.005, seed=1)
    (f,) = surprises.check([Expectation("torchscript-optimized", "torchscript", expect="equal")], configs, alike)
    assert not f.surprising
    failed = rows | {opt.key: {"status": "error"}}
    assert surprises.check([Expectation("ort-optimized", "ort")], configs, failed) == []


def test_is_surprise_rule():
    assert surprises.is_surprise("faster", 0.8, 0.95)
    assert not surprises.is_surprise("faster", 0.8, 1.01)
    assert surprises.is_surprise("equal", 1.06, 1.2) and surprises.is_surprise("equal", 0.8, 0.9)
    assert not surprises.is_surprise("equal", 0.97, 1.03) and not surprises.is_surprise("equal", 1.02, 1.2)


def test_torch_profile_of_one_call():
    """bert-tiny's call under torch.profiler: at most ten operators, named, with self times and call counts."""
    import torch

    w = models.torch_workload("bert-tiny", batch_size=2, seq_len=8)
    with torch.inference_mode():
        w.module(*w.inputs)
        ops, note = profiling.torch_profile(lambda: w.module(*w.inputs))
    assert 0 < len(ops) <= profiling.TOP
    assert all(isinstance(o["op"], str) and o["op"] and o["self_ms"] >= 0 and o["calls"] >= 1 for o in ops)
    assert [o["self_ms"] for o in ops] == sorted((o["self_ms"] for o in ops), reverse=True)
    assert any("addmm" in o["op"] or "linear" in o["op"] or "matmul" in o["op"] for o in ops), ops
    assert 0 < sum(o["self_pct"] for o in ops) <= 100.0001
    assert note.startswith("torch.profiler (CPU activity")


def test_ort_profile_totals_keep_the_profiled_call():
    """Of a profile holding a warm-up call and the profiled one, only the second half of the model runs counts."""
    events = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100},
              {"cat": "Node", "name": "a_kernel_time", "ts": 10, "dur": 999, "args": {"op_name": "MatMul"}},
              {"cat": "Session", "name": "model_run", "ts": 200, "dur": 50},
              {"cat": "Node", "name": "a_kernel_time", "ts": 210, "dur": 30, "args": {"op_name": "MatMul"}},
              {"cat": "Node", "name": "a_fence_before", "ts": 210, "dur": 0, "args": {"op_name": "MatMul"}},
              {"cat": "Node", "name": "b_kernel_time", "ts": 240, "dur": 10, "args": {"op_name": "Gelu"}}]
    totals, runs = runtimes.ort_session.profile_totals(events)
    assert runs == 1 and totals == {"MatMul": [30e-6, 1], "Gelu": [10e-6, 1]}
    ops = profiling.top_ops(totals)
    assert [o["op"] for o in ops] == ["MatMul", "Gelu"] and ops[0]["self_pct"] == pytest.approx(75)


def test_ort_profile_of_one_call(tmp_path):
    """ONNX Runtime's profiler on a tiny exported model: a profiling session is swapped in for the call and the
    timed session is back afterwards."""
    pytest.importorskip("onnxruntime")
    w = dataclasses.replace(models.torch_workload("roberta-tiny-classifier", batch_size=2, seq_len=16),
                            cache_dir=tmp_path)
    runtime = runtimes.get("ort")
    prepared = runtime.prepare(w)
    session = prepared.fn.session
    ops, note = profiling.profile_prepared(runtime, prepared, prepared.call, "cpu")
    assert prepared.fn.session is session
    assert 0 < len(ops) <= profiling.TOP and any(o["op"] == "MatMul" for o in ops), ops
    assert all(o["calls"] >= 1 and o["self_ms"] >= 0 for o in ops)
    assert "ONNX Runtime's profiler" in note and "1 model run(s)" in note
    assert not list(Path.cwd().glob("ort_*.json"))  # the profile was written to a temporary directory, removed


def test_tensorflow_is_noted_not_profiled():
    ops, note = profiling.profile_prepared(runtimes.get("tf-eager"), runtimes.Prepared(lambda: None, (), None),
                                           lambda: None, "cpu")
    assert ops is None and note.startswith("not profiled")


class _SlowEager(TorchEager):
    """Eager with a pause in every call: a variant 'meant to be faster' that is always slower. The pause is ~100 times
    bert-tiny's whole call: with two replicates (t at 1 degree of freedom) the CI must hold even when eager's time
    moves 2x between them on a loaded host (a 20 ms pause failed under `make test`'s two workers)."""

    name = "slow-eager"

    def prepare(self, workload):
        p = super().prepare(workload)
        module = p.fn

        def slow(*inputs):
            time.sleep(0.2)
            return module(*inputs)

        return dataclasses.replace(p, fn=slow)


def test_a_measured_surprise_stores_both_profiles(tmp_path, monkeypatch):
    """A real (tiny) group where the candidate is slower than expected: both rows carry a profile and its reason,
    three replicates combine into one profile, the rows load, and the page shows them side by side."""
    monkeypatch.setitem(runtimes.REGISTRY, "slow-eager", _SlowEager())
    configs = [Config("bert-tiny", v, "fp32", 2, "cpu", 2, seq_len=8) for v in ("eager", "slow-eager", "eager-aa")]
    table = ResultsTable(tmp_path / "t.jsonl")
    expect = (Expectation("slow-eager", "eager"),)
    # three replicates: the speed-up's CI over two has one degree of freedom (t 12.7), and missed 1 once under CI's load
    rows = measuring.measure(configs, table=table, measure=MEASURE | {"replicates": 3}, tolerance=TOLERANCE,
                             expectations=expect)
    by = {r["variant"]: r for r in rows}
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    for v in ("eager", "slow-eager"):
        assert 0 < len(by[v]["profile_top_ops"] or []) <= profiling.TOP, (v, by[v]["profile_note"])
        assert "slow-eager over eager was expected faster" in by[v]["profile_note"]
        assert "torch.profiler" in by[v]["profile_note"]
    assert by["eager-aa"]["profile_top_ops"] is None and by["eager-aa"]["profile_note"] is None
    df = table.frame(with_samples=True)
    (pair,) = surprises.profiled_pairs(df, expect)
    assert pair["surprising"] and pair["speedup"].ci_high < 1, pair["speedup"]
    (line,) = surprises.attach(Analysis({}, [], pd.DataFrame()), df, expect).findings
    assert line.startswith("**Surprise: slow-eager is slower than eager at bert-tiny fp32 batch 2 seq 8")
    page = surprises.html(df, dataclasses.replace(STUDIES["01_eager_vs_compiled"], expectations=expect))
    assert page.count("<details") == 1 and by["eager"]["profile_top_ops"][0]["op"] in page


def _profiled_row(key, variant, seconds, ops, **values):
    n = 12
    rng = np.random.default_rng(len(variant))
    return stored_row(key, model="roberta-tiny-classifier", variant=variant, dtype="fp32", batch_size=8, device="cpu",
                      threads=2, seq_len=128, strategy="unsorted", data="d", group_id="g", n=n, median_s=seconds,
                      samples_s=list(seconds * rng.uniform(0.99, 1.01, n)), sample_rep=[0] * n,
                      sample_round=list(range(n)), ci_run_low_s=seconds * 0.99, ci_run_high_s=seconds * 1.01,
                      profile_top_ops=ops, profile_note=("one steady-state call, because ort-optimized over ort was "
                                                         "expected faster; …" if ops else None),
                      **values)


def test_rows_with_and_without_profiles_load_and_render(tmp_path):
    """Rows with the profile columns are validated and stored; rows stored before them load; the HTML has a
    <details> with both variants' operator names, and a table without profiles says so."""
    ort_ops = [{"op": "MatMul", "self_ms": 5.0, "calls": 24, "self_pct": 50.0},
               {"op": "Softmax", "self_ms": 1.0, "calls": 4, "self_pct": 10.0}]
    opt_ops = [{"op": "Attention", "self_ms": 7.0, "calls": 4, "self_pct": 60.0},
               {"op": "SkipLayerNormalization", "self_ms": 2.0, "calls": 8, "self_pct": 17.0}]
    rows = [_profiled_row("eager", "eager", 1.0, None),
            _profiled_row("ort", "ort", 0.5, ort_ops),
            _profiled_row("opt", "ort-optimized", 0.6, opt_ops)]
    path = tmp_path / "r.jsonl"
    table = ResultsTable(path)
    for r in rows:
        table.append(r)
    with pytest.raises(ValueError, match="profile_top_ops"):
        validated(rows[1] | {"profile_top_ops": "MatMul"})
    old = {k: v for k, v in _profiled_row("old", "torch-int8", 0.9, None).items()
           if k not in ("profile_top_ops", "profile_note")}
    with open(path, "a") as f:
        f.write(json.dumps(old) + "\n")
    df = table.frame(with_samples=True)
    assert len(df) == 4 and df.profile_note.notna().sum() == 2
    study = STUDIES["03_onnx_batching"]
    page = surprises.html(df, study)
    assert page.count("<details") == 1 and "<summary>" in page
    for name in ("Attention", "SkipLayerNormalization", "MatMul", "Softmax", "ort-optimized"):
        assert name in page
    assert page.index("Attention") < page.index("MatMul")  # the candidate's column first
    assert "ort-optimized is slower than ort at roberta-tiny-classifier fp32 batch 8" in page
    analysis = surprises.attach(Analysis({}, ["an earlier finding"], pd.DataFrame()), df, study.expectations)
    assert any(line.startswith("**Surprise: ort-optimized is slower than ort") for line in analysis.findings)
    assert list(analysis.tables["surprises"].candidate) == ["ort-optimized"]  # ort over eager: not profiled for it
    assert analysis.findings[0] == "an earlier finding"
    # a table stored before profiles existed: no column at all
    before = pd.DataFrame([old])
    assert surprises.profiled_pairs(before, study.expectations) == []
    assert surprises.html(before, study).startswith("<p>No surprise was profiled")
