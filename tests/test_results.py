"""The results table: append-only rows, a torn line after a crash, resume and force, failures as rows."""

import json

import numpy as np
import pandas as pd
import pytest

import measuring
from conftest import stored_row
from studylib.bench import replicates, sweep
from studylib.core.config import Config
from studylib.core.files import read_json, write_json_atomic
from studylib.machine import environment
from studylib.stats.results import ResultsTable, measured_alike

FAST = measuring.FAST
TOL = {"fp32": 1e-3, "bf16": 0.1, "fp16": 0.02}


def _row(key, **kw):
    return stored_row(key, env_fingerprint="abc", settings_hash="s1", **kw)


def test_rows_append_and_the_newest_row_per_configuration_wins(tmp_path):
    t = ResultsTable(tmp_path / "r.jsonl")
    t.append(_row("a", median_s=1.0))
    t.append(_row("b", median_s=2.0))
    t.append(_row("a", median_s=0.5))
    rows = t.rows()
    assert [r["config_key"] for r in rows] == ["b", "a"]
    assert rows[1]["median_s"] == 0.5
    latest = t.latest()
    assert measured_alike(latest["a"], "abc", "s1") and not measured_alike(latest["a"], "other-env", "s1")
    assert not measured_alike(latest.get("c"), "abc", "s1") and not measured_alike(latest["a"], "abc", "s2")


def test_a_torn_last_line_is_ignored_then_cut_off(tmp_path):
    path = tmp_path / "r.jsonl"
    t = ResultsTable(path)
    t.append(_row("a"))
    with open(path, "a") as f:
        f.write('{"config_key": "b", "status": "o')  # the process died mid-write
    assert [r["config_key"] for r in t.rows()] == ["a"]
    t.append(_row("c"))
    lines = path.read_text().splitlines()
    assert [json.loads(ln)["config_key"] for ln in lines] == ["a", "c"]


@pytest.mark.parametrize("rows_before", [0, 1])
def test_a_torn_line_longer_than_the_tail_read_is_cut_whole(tmp_path, rows_before):
    path = tmp_path / "r.jsonl"
    t = ResultsTable(path)
    for _ in range(rows_before):
        t.append(_row("a"))
    with open(path, "a") as f:
        f.write('{"config_key": "b", "samples_s": [' + "0.1, " * 60_000)  # ~300 KB, died mid-write
    t.append(_row("c"))
    assert [json.loads(ln)["config_key"] for ln in path.read_text().splitlines()] == ["a"] * rows_before + ["c"]


def test_an_unknown_status_is_refused(tmp_path):
    with pytest.raises(ValueError):
        ResultsTable(tmp_path / "r.jsonl").append(_row("a", status="fine"))


def test_atomic_json_leaves_no_temporary_file(tmp_path):
    write_json_atomic(tmp_path / "x.json", {"a": 1})
    assert read_json(tmp_path / "x.json") == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_csv_has_no_raw_samples(tmp_path):
    t = ResultsTable(tmp_path / "r.jsonl")
    t.append(_row("a", samples_s=[1.0, 2.0], median_s=1.5))
    csv = t.write_csv().read_text()
    header = csv.splitlines()[0].split(",")
    assert "median_s" in header and "samples_s" not in header


def _configs(*batches, device="cpu", seq_len=16, variant="eager"):
    return [Config("bert-tiny", variant, "fp32", b, device, 2, seq_len=seq_len) for b in batches]


@pytest.fixture(scope="module")
def env():
    return environment.capture("test")


def _run(table, configs, env, measure_settings=FAST, **kw):
    return measuring.measure(configs, table=table, env=env, study="test", profile="test", measure=measure_settings,
                             tolerance=TOL, **kw)


def test_resume_after_a_crash_between_rows(tmp_path, env):
    table = ResultsTable(tmp_path / "r.jsonl")
    configs = _configs(1, 2, 3)

    def crash_after_first(rows):
        raise KeyboardInterrupt  # Ctrl-C right after the first group's row was written

    with pytest.raises(KeyboardInterrupt):
        _run(table, configs, env, on_group=crash_after_first)
    assert [r["config_key"] for r in table.rows()] == [configs[0].key]

    new = _run(table, configs, env)
    assert [r["config_key"] for r in new] == [c.key for c in configs[1:]]
    assert [r["config_key"] for r in table.rows()] == [c.key for c in configs]

    assert _run(table, configs, env) == []  # everything measured: nothing to do
    forced = _run(table, configs, env, force=True)
    assert len(forced) == 3 and len(table.rows()) == 3
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 6  # forced rows appended, newest wins


def test_a_measured_row_holds_statistics_samples_and_parity(tmp_path, env):
    table = ResultsTable(tmp_path / "r.jsonl")
    [row] = _run(table, _configs(2), env)
    assert row["status"] == "ok" and row["error"] == ""
    assert len(row["samples_s"]) == row["n"] >= FAST["min_rounds"]
    assert row["sample_rep"] == [0] * row["n"] and row["sample_round"] == list(range(row["n"]))
    assert row["replicates"] == 1 and row["group_id"] and row["group_key"]
    assert row["ci_run_low_s"] <= row["median_s"] <= row["ci_run_high_s"]  # as stored; tables report a wider one
    assert row["throughput_samples_s"] == pytest.approx(2 / row["median_s"])
    assert row["throughput_tokens_s"] == pytest.approx(2 * 16 / row["median_s"])
    assert row["max_abs_diff"] == 0.0 and row["parity_ok"] is True
    assert row["peak_mem_mb"] >= 0 and row["mem_kind"] == "rss_peak"  # the configuration's own increase
    assert row["env_fingerprint"] == env["fingerprint"] and row["threads"] == 2


def test_failures_are_rows_and_the_sweep_goes_on(tmp_path, env):
    table = ResultsTable(tmp_path / "r.jsonl")
    gpt2_traced = Config("gpt2-tiny", "torchscript", "fp32", 1, "cpu", 2, seq_len=8)  # tracing fails
    configs = [*_configs(1, seq_len=4096), *_configs(1, device="cuda"), gpt2_traced, *_configs(1)]
    rows = _run(table, configs, env)
    assert [r["status"] for r in rows] == ["skipped", "skipped" if not _cuda() else "ok", "error", "ok"]
    assert "exceeds bert-tiny's 512 positions" in rows[0]["error"]
    if not _cuda():
        assert rows[1]["error"].startswith("PyTorch ")  # the framework that sees no GPU, and why (gpu.unavailable)
        assert "CPU-only build" in rows[1]["error"] or "sees no CUDA GPU" in rows[1]["error"]
    assert rows[2]["error"].startswith("RuntimeError")
    assert len(table.rows()) == 4


def _cuda():
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize("exc, status", [
    (MemoryError("x"), "oom"),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom"),
    (RuntimeError("[enforce fail at alloc_cpu.cpp] DefaultCPUAllocator: can't allocate memory"), "oom"),
    (RuntimeError("OOM when allocating tensor with shape[8,12,1024,1024]"), "oom"),  # TensorFlow
    (RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Failed to allocate memory for requested buffer"),
     "oom"),
    (RuntimeError("inductor failed\nlong traceback"), "error"),
])
def test_failure_classification(exc, status):
    got, message = sweep.classify_failure(exc)
    assert got == status
    assert "\n" not in message and len(message) <= 300


def test_parity_flags_a_mismatch_and_scales_with_the_output():
    ref = np.array([[10.0, -20.0]])
    assert sweep.parity(ref + 0.01, ref, 1e-3)["parity_ok"] is True  # 0.01 <= 1e-3 * 20
    bad = sweep.parity(ref + 0.5, ref, 1e-3)
    assert bad["parity_ok"] is False and bad["max_abs_diff"] == pytest.approx(0.5)
    assert sweep.parity(np.zeros((2, 2)), ref, 1.0)["parity_ok"] is False  # wrong shape


def test_failed_rows_and_changed_settings_are_measured_again(tmp_path, env):
    table = ResultsTable(tmp_path / "r.jsonl")
    [c] = _configs(1)
    table.append(stored_row(c.key, "error", error="boom", env_fingerprint=env["fingerprint"],
                            settings_hash=measuring.plan(FAST, TOL, env=env).settings_hash(c)))
    assert [r["status"] for r in _run(table, [c], env)] == ["ok"]  # a failure is retried
    assert _run(table, [c], env) == []  # now measured alike: skipped
    again = _run(table, [c], env, measure_settings=FAST | {"budget_s": 0.1})
    assert len(again) == 1  # other measurement settings: measured again


def test_a_group_is_timed_in_shared_rounds_and_replicates_pool(tmp_path, env):
    """Variants of one shape share rounds (paired speed-ups); two replicates pool their samples with ids."""
    table = ResultsTable(tmp_path / "r.jsonl")
    configs = [Config("bert-tiny", v, "fp32", 1, "cpu", 2, seq_len=16) for v in ("eager", "eager-aa")]
    rows = _run(table, configs, env, measure_settings=FAST | {"replicates": 2})
    eager, aa = rows
    assert eager["group_id"] == aa["group_id"] and eager["group_key"] == aa["group_key"]
    assert eager["replicates"] == 2 and set(eager["sample_rep"]) == {0, 1}
    assert len(eager["samples_s"]) == len(eager["sample_rep"]) == len(eager["sample_round"]) == eager["n"]
    assert eager["sample_rep"] == aa["sample_rep"] and eager["sample_round"] == aa["sample_round"]
    assert aa["max_abs_diff"] == 0.0  # the A/A copy computes exactly what eager does
    from studylib.stats import variance

    s = variance.speedup(eager, aa)
    assert s.paired and s.n == eager["n"] and s.ci_low <= s.ratio <= s.ci_high
    assert not list((tmp_path / "r.parts").glob("*.json"))  # combined: no part left behind


def test_an_interrupted_replicate_resumes_from_its_parts(tmp_path, env):
    """Replicate 0 of every group finished, replicate 1 was interrupted: a re-run measures only what is missing."""
    table = ResultsTable(tmp_path / "r.jsonl")
    configs = _configs(1, 2)
    settings = FAST | {"replicates": 2}
    calls = []
    real = sweep.measure_group

    def interrupted(cfgs, plan, **kw):
        calls.append((cfgs[0].batch_size, kw["replicate"]))
        if kw["replicate"] == 1 and cfgs[0].batch_size == 2:
            raise KeyboardInterrupt
        return real(cfgs, plan, **kw)

    sweep.measure_group = interrupted
    try:
        with pytest.raises(KeyboardInterrupt):
            _run(table, configs, env, measure_settings=settings)
        assert [r["config_key"] for r in table.rows()] == [configs[0].key]  # batch 1 had both replicates
        calls.clear()
        sweep.measure_group = lambda cfgs, plan, **kw: (calls.append((cfgs[0].batch_size, kw["replicate"])),
                                                        real(cfgs, plan, **kw))[1]
        new = _run(table, configs, env, measure_settings=settings)
    finally:
        sweep.measure_group = real
    assert calls == [(2, 1)]  # only the missing replicate of the missing group
    assert [r["config_key"] for r in new] == [configs[1].key] and new[0]["replicates"] == 2


def _counting(calls):
    real = sweep.measure_group
    return lambda cfgs, plan, **kw: (calls.append((cfgs[0].batch_size, kw["replicate"])), real(cfgs, plan, **kw))[1]


def test_an_early_pass_measures_one_replicate_and_the_notebook_the_rest(tmp_path, env, monkeypatch):
    """`studylib run` measures replicate 0 of every notebook first; the notebook's own run then measures only the
    last replicate and combines, so a group's replicates lie far apart in time."""
    table = ResultsTable(tmp_path / "r.jsonl")
    configs = _configs(1, 2)
    settings = FAST | {"replicates": 2}
    calls = []
    monkeypatch.setattr(sweep, "measure_group", _counting(calls))
    assert _run(table, configs, env, measure_settings=settings, only_replicate=0) == []
    assert calls == [(1, 0), (2, 0)] and table.rows() == []  # parts only: a group waits for its k replicates
    assert len(list((tmp_path / "r.parts").glob("*.r0.json"))) == 2
    calls.clear()
    rows = _run(table, configs, env, measure_settings=settings)
    assert calls == [(1, 1), (2, 1)]
    assert [r["replicates"] for r in rows] == [2, 2] and all(set(r["sample_rep"]) == {0, 1} for r in rows)
    assert not list((tmp_path / "r.parts").glob("*.json"))


def test_a_forced_run_keeps_its_own_early_pass_and_drops_older_parts(tmp_path, env, monkeypatch):
    table = ResultsTable(tmp_path / "r.jsonl")
    configs = _configs(1)
    settings = FAST | {"replicates": 2}
    calls = []
    monkeypatch.setattr(sweep, "measure_group", _counting(calls))
    monkeypatch.setenv(replicates.RUN_ID_VAR, "run-a")
    _run(table, configs, env, measure_settings=settings, only_replicate=0, force=True)
    monkeypatch.setenv(replicates.RUN_ID_VAR, "run-b")  # another run: its forced early pass measures anew
    _run(table, configs, env, measure_settings=settings, only_replicate=0, force=True)
    assert calls == [(1, 0), (1, 0)]
    calls.clear()
    rows = _run(table, configs, env, measure_settings=settings, force=True)  # run-b's notebook: keeps run-b's part
    assert calls == [(1, 1)] and rows[0]["replicates"] == 2
    monkeypatch.delenv(replicates.RUN_ID_VAR)  # outside a run (JupyterLab): a forced run keeps no part
    _run(table, configs, env, measure_settings=settings, only_replicate=0, force=True)
    assert len(list((tmp_path / "r.parts").glob("*.r0.json"))) == 1
    calls.clear()
    _run(table, configs, env, measure_settings=settings, force=True)
    assert calls == [(1, 0), (1, 1)]


@pytest.mark.parametrize("change, message", [
    (lambda r: r.update(colour="blue"), "unknown column(s) ['colour']"),
    (lambda r: r.pop("median_s"), "missing column(s) ['median_s']"),
    (lambda r: r.update(n="6"), "column n must be int, got str '6'"),
    (lambda r: r.update(batch_size=True), "column batch_size must be int, got bool"),
    (lambda r: r.update(median_s=None), "an 'ok' row without ['median_s']"),
])
def test_a_row_is_validated_once_as_it_is_stored(tmp_path, change, message):
    row = _row("a")
    change(row)
    table = ResultsTable(tmp_path / "r.jsonl")
    with pytest.raises(ValueError) as e:
        table.append(row)
    assert message in str(e.value) and not (tmp_path / "r.jsonl").exists()


def test_numpy_scalars_are_stored_as_python_numbers(tmp_path):
    table = ResultsTable(tmp_path / "r.jsonl")
    table.append(_row("a", n=np.int64(6), median_s=np.float32(1.5), drift=np.bool_(False)))
    stored = json.loads((tmp_path / "r.jsonl").read_text())
    assert stored["n"] == 6 and stored["median_s"] == 1.5 and stored["drift"] is False


def test_a_measurement_holds_every_column_read_alike_from_a_row_or_the_frame(tmp_path):
    """Measurement.of reads a stored row, a frame's row (NaN blanks, float batch sizes) and itself alike; every stored
    column and every column the reported table adds is one of its fields, so no reader falls back on a dict."""
    from dataclasses import fields

    from studylib.stats.measurement import Measurement
    from studylib.stats.results import COLUMNS

    t = ResultsTable(tmp_path / "r.jsonl")
    t.append(_row("a|eager", model="m", variant="eager", dtype="fp32", batch_size=1, device="cpu", threads=2,
                  group_id="g", prepare_s=0.5, first_call_s=1.5, samples_s=[1.0, 1.2, 0.8, 1.1, 0.9, 1.0],
                  sample_rep=[0, 0, 0, 1, 1, 1], sample_round=[0, 1, 2, 0, 1, 2]))
    t.append(_row("b|x", model="m", variant="x", dtype="fp32", batch_size=None, device="cpu", threads=2,
                  warm_prepare_s=0.25, warm_first_call_s=1.25, status="error", error="boom"))
    names = {f.name for f in fields(Measurement)}
    assert set(COLUMNS) <= names and {k for r in t.rows() for k in r} <= names
    typed = t.measurements()
    frame = t.frame(with_samples=True)
    assert [Measurement.of(r) for _, r in frame.iterrows()] == typed
    a, b = typed
    assert Measurement.of(a) is a and a.ok and not b.ok and b.error == "boom" and b.batch_size is None
    assert a.config == Config("m", "eager", "fp32", 1, "cpu", 2) and a.shape == b.shape[:2] + (1,) + b.shape[3:]
    assert a.one_time_s == pytest.approx(0.5 + 1.5 - a.median_s)  # preparation and first call less a steady call
    # where a step came from a cache an earlier process filled (an ONNX export), the one-time cost is the cold one
    cold = Measurement.of({"median_s": 1.0, "first_call_s": 1.5, "prepare_s": 0.5, "cold_prepare_s": 2.5})
    assert cold.one_time_s == pytest.approx(2.5 + 1.5 - 1.0)
    assert np.isnan(a.warm_one_time_s)  # no warm compile measured
    assert Measurement.of({"median_s": 1.0, "warm_first_call_s": 1.25}).warm_one_time_s == pytest.approx(0.25)
    x, reps, rounds = a.samples()
    assert list(reps) == [0, 0, 0, 1, 1, 1] and list(rounds) == [0, 1, 2, 0, 1, 2] and x[1] == 1.2
    x, reps, rounds = Measurement.of({"samples_s": [3.0, 2.0]}).samples()  # no ids stored: one replicate, in order
    assert list(x) == [3.0, 2.0] and list(reps) == [0, 0] and list(rounds) == [0, 1]
    assert Measurement.of({"samples_s": [3.0, 1.0]}).steady_median_s == 2.0  # no median stored: the samples'


def test_the_columns_are_the_measurements_stored_fields_with_their_types_units_and_meaning(tmp_path):
    """results.COLUMNS is read off Measurement's field metadata: every stored field, in order, with the types its
    annotation allows; the fields the variance model adds are not stored; every field says what it means."""
    from dataclasses import fields

    from studylib.core.config import FIELDS
    from studylib.stats import measurement
    from studylib.stats.results import COLUMNS

    stored = [f for f in fields(measurement.Measurement) if f.metadata["stored"] != measurement.READ]
    assert list(COLUMNS) == [f.name for f in stored] and set(FIELDS) <= set(COLUMNS)
    assert COLUMNS["median_s"] == (float, int) and COLUMNS["samples_s"] == (list,) and COLUMNS["drift"] == (bool,)
    assert "ci_low_s" not in COLUMNS and "ci_low_s" in {f.name for f in fields(measurement.Measurement)}
    assert all(f.metadata["meaning"] for f in fields(measurement.Measurement))
    assert measurement.OK_REQUIRES[:2] == ("n", "median_s") and "parity_ok" in measurement.OK_REQUIRES
    with pytest.raises(ValueError, match="column median_s must be float or int, got str"):
        ResultsTable(tmp_path / "t.jsonl").append(_row("a|eager", median_s="fast"))


def test_a_blank_cell_is_none_however_it_is_stored():
    from studylib.core import cells

    assert [cells.value(v) for v in (None, float("nan"), np.float64("nan"), pd.NA, "", 0, "x")] == \
        [None, None, None, None, "", 0, "x"]
    assert [cells.present(v) for v in (None, float("nan"), pd.NA, "", 0.0, "x")] == [False] * 4 + [True] * 2
    assert np.isnan(cells.number("")) and np.isnan(cells.number("abc")) and cells.number("1.5") == 1.5
    assert cells.text(float("nan")) == "" and cells.text(3) == "3"
    assert cells.whole(8.0) == 8 and type(cells.whole(8.0)) is int and cells.whole(8.5) == 8.5 and cells.whole(pd.NA) is None
    assert cells.of({"a": float("nan")}, "a") is None and cells.of(pd.Series({"a": 2}), "a") == 2
    assert cells.of(object(), "a") is None
