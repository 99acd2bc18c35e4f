"""benchmarks/peer_agreement.py: its pure parts on fake data (matching the harness's rows, the 5% rule, the table, the
order-statistic CI), and a --quick smoke of one runtime (eager BERT-base alone in its process)."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "peer_agreement.py"


@pytest.fixture(scope="module")
def pa():
    spec = importlib.util.spec_from_file_location("peer_agreement", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["peer_agreement"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


COLUMNS = ["study", "config_key", "model", "variant", "dtype", "batch_size", "device", "threads", "seq_len",
           "image_size", "strategy", "data", "backend", "status", "error", "median_s", "ci_low_s", "ci_high_s",
           "replicates", "real_tokens", "n_texts"]


def _row(**kw) -> dict:
    base = {c: "" for c in COLUMNS}
    base.update(device="cpu", threads="2", dtype="fp32", status="ok", batch_size="1", replicates="3")
    base.update({k: str(v) for k, v in kw.items()})
    return base


def _write(folder: Path, notebook: str, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{notebook}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)


@pytest.fixture
def results(tmp_path):
    """A fake harness results folder: study 02 at two shapes, 01 with a float-written seq_len column, 05 with three
    backends' eager, 03 with an error row; 07's file is missing."""
    folder = tmp_path / "results"
    _write(folder, "02_torchscript_vs_xla", [
        _row(model="bert-base", variant="eager", seq_len=8, median_s=0.050, ci_low_s=0.045, ci_high_s=0.055),
        _row(model="bert-base", variant="eager", seq_len=64, median_s=0.120),
        _row(model="bert-base", variant="eager-aa", seq_len=8, median_s=0.049),
        _row(model="bert-base", variant="tf-xla", seq_len=8, median_s=0.027, ci_low_s=0.024, ci_high_s=0.030),
        _row(model="bert-base", variant="tf-function", seq_len=8, median_s=0.036, threads=1),
        _row(model="bert-base", variant="torchscript", seq_len=8, status="skipped", error="no TorchScript"),
    ])
    _write(folder, "01_eager_vs_compiled", [
        _row(model="resnet-50", variant="eager", image_size="224.0", median_s=0.088),
        _row(model="resnet-50", variant="compile-default", image_size="224.0", median_s=0.078),
    ])
    _write(folder, "05_keras_backends", [
        _row(model="resnet-50", variant="eager", image_size=224, backend=b, median_s=m)
        for b, m in (("torch", 0.106), ("tensorflow", 0.097), ("jax", 0.103))
    ] + [_row(model="resnet-50", variant="keras-jax-jit", image_size=224, backend="jax", median_s=0.0935)])
    _write(folder, "03_onnx_batching", [
        _row(model="distilroberta-classifier", variant="eager", seq_len=128, strategy="unsorted",
             data="pydoc-topics:n32:bpe8000:max128", median_s=1.435, real_tokens=954, n_texts=32),
        _row(model="distilroberta-classifier", variant="ort", seq_len=128, strategy="unsorted",
             data="pydoc-topics:n32:bpe8000:max128", status="error", error="export failed: boom", real_tokens=954),
    ])
    return folder


def _ok(median: float, **kw) -> dict:
    return {"status": "ok", "median_s": median, "ci_low_s": median * 0.98, "ci_high_s": median * 1.02,
            "q1_s": median * 0.97, "q3_s": median * 1.03, "n": 50, "process_medians_s": [median]} | kw


def test_within_is_the_studys_band(pa):
    assert pa.within(1.0) and pa.within(1.05) and pa.within(1 / 1.05)
    assert pa.within(1.0501) is False and pa.within(0.95) is False  # 0.95 < 1/1.05 = 0.9524
    assert pa.within(0.953) is True
    assert pa.within(None) is None and pa.within(float("nan")) is None and pa.within(0.0) is None


def test_median_ci_order_statistics(pa):
    med, lo, hi, q1, q3 = pa.median_ci([float(i) for i in range(1, 101)])  # 1..100
    assert med == 50.5 and q1 == pytest.approx(25.75) and q3 == pytest.approx(75.25)
    # binomial(100, 1/2): ranks 40 and 61 hold the median with >= 95% (the textbook pair)
    assert (lo, hi) == (40.0, 61.0)
    assert pa.median_ci([3.0, 1.0, 2.0])[:3] == (2.0, 1.0, 3.0)  # below 6 samples: the range
    assert all(math.isnan(v) for v in pa.median_ci([]))


def test_pooled_processes_use_the_geometric_mean(pa):
    one = pa.pooled([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]])
    assert one["median_s"] == 4.0 and one["n"] == 7
    two = pa.pooled([[1.0] * 10, [4.0] * 10])
    assert two["median_s"] == pytest.approx(2.0) and two["process_medians_s"] == [1.0, 4.0]
    assert two["ci_low_s"] < 2.0 < two["ci_high_s"]
    assert pa.pooled([[]])["median_s"] is None


def test_match_rows_normalises_cells(pa, results):
    rows = pa.read_results(results, "01_eager_vs_compiled")
    assert len(pa.match_rows(rows, {"model": "resnet-50", "image_size": 224, "variant": "eager"})) == 1
    assert pa.read_results(results, "07_text_generation") is None
    rows02 = pa.read_results(results, "02_torchscript_vs_xla")
    # the A/A copy and the other sequence length are not eager at b1×8
    assert [r["median_s"] for r in pa.match_rows(rows02, pa.RUNTIMES[2].match | {"variant": "eager"})] == ["0.05"]


def _by_runtime(table):
    return {(r["study"], r["runtime"]): r for r in table}


def test_table_matches_by_study_variant_and_shape(pa, results):
    selected = pa.select(["01", "02", "03", "05", "07"], None)
    standalone = {
        "01:eager": _ok(0.080), "01:compile-default": _ok(0.079),
        "02:eager": _ok(0.040), "02:torchscript": _ok(0.037), "02:tf-xla": _ok(0.0272),
        "02:tf-function": {"status": "skipped", "error": "ModuleNotFoundError: No module named 'tensorflow'", "n": 0},
        "03:eager": _ok(1.00, pass_tokens=950), "03:ort": _ok(0.55, pass_tokens=950),
        "05:eager": _ok(0.080), "05:keras-jax-jit": _ok(0.090),
        "07:eager": {"status": "error", "error": "export failed: out of memory", "n": 0},
    }  # 07:ort not run at all
    table = pa.build_rows(selected, standalone, results, threads=2)
    pa.check_pass(table)
    t = _by_runtime(table)
    # every selected runtime has its row(s), none dropped: 05's eager once per Keras backend
    assert len(table) == len(selected) + 2
    assert [k for k in t if k[0] == "05"] == [("05", "eager (backend torch)"), ("05", "eager (backend tensorflow)"),
                                              ("05", "eager (backend jax)"), ("05", "keras-jax-jit (backend jax)")]
    eager = t[("02", "eager")]
    assert eager["ratio"] == pytest.approx(0.050 / 0.040) and eager["within_5pct"] is False
    assert eager["status"] == "ok" and eager["harness"]["ci_low_s"] == 0.045
    assert t[("02", "tf-xla")]["within_5pct"] is True
    assert t[("01", "eager")]["harness"]["median_s"] == 0.088  # image_size written 224.0 in the CSV
    # threads are part of the key: the harness's tf-function row ran 1 thread; the standalone one was skipped anyway
    assert t[("02", "tf-function")]["status"] == "standalone skipped" and t[("02", "tf-function")]["ratio"] is None
    assert t[("02", "torchscript")]["status"] == "harness skipped" and t[("02", "torchscript")]["within_5pct"] is None
    assert t[("03", "ort")]["status"].startswith("harness error")
    assert "not the same pass" in t[("03", "eager")]["harness"]["note"]  # 954 tokens there, 950 here
    assert t[("07", "eager")]["status"] == "standalone error"
    assert t[("07", "ort")]["status"] == "standalone not run"
    assert t[("07", "ort")]["harness"]["status"] == "missing"
    assert t[("05", "eager (backend jax)")]["ratio"] == pytest.approx(0.103 / 0.080)
    text = pa.markdown(table)
    assert text.count("\n") == len(table) + 1  # header, rule, one line per row
    assert "| 02 | bert-base fp32 b1×8 | eager | 40 [39.2–40.8] (38.8–41.2) | 50 | 50 [45–55] | 1.250 | **no** | ok |" in text
    assert "standalone skipped: ModuleNotFoundError" in text


def test_threads_are_part_of_the_key(pa, results):
    table = pa.build_rows(pa.select(["02"], ["tf-function"]), {"02:tf-function": _ok(0.036)}, results, threads=2)
    assert table[0]["harness"]["status"] == "missing"
    table = pa.build_rows(pa.select(["02"], ["tf-function"]), {"02:tf-function": _ok(0.036)}, results, threads=1)
    assert table[0]["within_5pct"] is True


def test_outputs_json_and_csv(pa, results, tmp_path):
    table = pa.build_rows(pa.select(["02"], ["eager"]), {"02:eager": _ok(0.049)}, results, threads=2)
    paths = pa.write_outputs(tmp_path / "out" / "pa.json", table, {"threads": 2})
    data = json.loads(paths[0].read_text())
    assert data["meta"]["threads"] == 2 and data["rows"][0]["within_5pct"] is True
    with open(paths[1]) as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["runtime"] == "eager" and float(rows[0]["ratio"]) == pytest.approx(0.050 / 0.049)


def test_select_rejects_unknown_names(pa):
    assert [rt.key for rt in pa.select(["02"], ["02:eager", "tf-xla"])] == ["02:eager", "02:tf-xla"]
    with pytest.raises(ValueError, match="unknown study 04"):
        pa.select(["04"], None)
    with pytest.raises(ValueError, match="unknown runtime"):
        pa.select(["02"], ["tf-magic"])


def test_harness_profile_cuts_each_study_to_its_peer_shape(pa, tmp_path):
    """Each study's harness run is the cpu profile's section at the peer shape only: it validates as a profile, its
    grid holds each runtime's harness row and nothing else (no A/A copy, one replicate), measurement settings kept."""
    yaml = pytest.importorskip("yaml")
    import studylib.studies  # noqa: F401 - registers the studies the profile is checked against
    from studylib.bench import profiles
    from studylib.core import study_registry

    raw = yaml.safe_load((ROOT / "params" / "cpu.yaml").read_text())
    for study, nb in pa.NOTEBOOKS.items():
        rts = [rt for rt in pa.RUNTIMES if rt.study == study]
        cut = pa.harness_profile(raw, study, [rt.runtime for rt in rts])
        path = tmp_path / f"peer-{study}.yaml"
        path.write_text(yaml.safe_dump(cut, sort_keys=False))
        loaded = profiles.load(str(path))
        assert loaded.notebooks() == [nb] and loaded.profile.measure.replicates == 1
        assert loaded.measure_for(nb).min_time_s == profiles.load("cpu").measure_for(nb).min_time_s
        grid = study_registry.grid(loaded, nb)
        assert grid and not any(c.variant.endswith("-aa") for c in grid)
        assert {c.variant for c in grid} == {"eager", *(rt.runtime for rt in rts)}
        for rt in rts:  # every runtime's peer shape is in the grid
            want = {k: v for k, v in rt.match.items() if k not in ("strategy", "data")}
            assert any(all(getattr(c, k, None) == v for k, v in want.items()) and c.variant == rt.runtime
                       for c in grid), (study, rt.runtime, want)
        shapes = {(c.model, c.batch_size, getattr(c, "seq_len", None)) for c in grid}
        assert len({m for m, _, _ in shapes}) == 1 and {b for _, b, _ in shapes} == {1}, (study, shapes)


def _loop(ms: float, n: int = 12) -> dict:
    return {"status": "ok", "samples_s": [ms / 1e3] * n, "first_call_s": 0.1, "prepare_s": 1.0, "method": "fake"}


def test_interleaved_ratio_is_paired_within_rounds(pa, tmp_path):
    """Three rounds in which the host drifts (every timing 1.0×, 1.3×, 0.8×): the harness runs 2% slower than the
    loop in each round, and the paired ratio says 1.02 with a tight CI, where pooled medians would not pair; a round
    whose harness failed is left out of the pairs and named; a loop that failed everywhere is a row with its status."""
    eager02 = next(rt for rt in pa.RUNTIMES if rt.key == "02:eager")
    xla = next(rt for rt in pa.RUNTIMES if rt.key == "02:tf-xla")
    rounds = []
    for k, drift in enumerate((1.0, 1.3, 0.8)):
        folder = tmp_path / f"round{k}"
        rows = [_row(model="bert-base", variant="eager", seq_len=8, median_s=0.050 * drift * 1.02),
                _row(model="bert-base", variant="tf-xla", seq_len=8, median_s=0.040 * drift)]
        _write(folder, "02_torchscript_vs_xla", rows)
        harness = {"status": "ok", "results": str(folder)} if k < 2 else {"status": "error", "error": "boom"}
        rounds.append({"round": k + 1, "loops": {eager02.measurement: _loop(50 * drift),
                                                 xla.measurement: {"status": "error", "error": "XLA failed"}},
                       "harness": {"02": harness}})
    table = pa.paired_rows([eager02, xla], rounds, {}, None, threads=2)
    e, x = table
    assert e["status"] == "ok" and e["paired_rounds"] == 2
    assert e["ratio"] == pytest.approx(1.02) and e["within_5pct"] is True
    assert e["ratio_ci"][0] == pytest.approx(1.02) and e["ratio_ci"][1] == pytest.approx(1.02)
    assert e["harness"]["rounds_s"] == pytest.approx([0.051, 0.0663]) and "round 3: harness error boom" in \
        e["harness"]["note"]
    assert e["standalone"]["process_medians_s"] == pytest.approx([0.05, 0.065, 0.04])
    assert x["status"] == "standalone error" and x["ratio"] is None and x["within_5pct"] is None
    assert "1.020 [1.020–1.020]" in pa.markdown(table)


def test_geometric_mean_and_its_interval(pa):
    gm, lo, hi = pa.geometric([1.0, 4.0])
    assert gm == pytest.approx(2.0)
    half = 12.706 * (math.log(4.0) / math.sqrt(2)) / math.sqrt(2)  # t(1) × sd / √n over the logs
    assert (lo, hi) == pytest.approx((2.0 * math.exp(-half), 2.0 * math.exp(half)))
    assert math.isnan(pa.geometric([3.0])[1])


def test_shares_no_code_with_the_harness():
    text = SCRIPT.read_text()
    assert not re.search(r"^\s*(import|from)\s+studylib", text, re.M)  # nothing of the harness, for timing or models
    assert not re.search(r"OMP_WAIT_POLICY\"?\]?\s*=", text)  # never set (only removed from the children's env)


def test_loops_keep_freed_memory_as_the_harness_times_unless_asked_for_glibcs_defaults(pa, monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "4096")  # a caller's own setting is replaced either way
    kept = pa.child_env("torch", 2)
    assert kept["MALLOC_MMAP_THRESHOLD_"] == kept["MALLOC_TRIM_THRESHOLD_"] == str(1 << 30)
    assert not {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"} & set(pa.child_env("torch", 2, glibc_defaults=True))


def test_quick_smoke_of_one_runtime(tmp_path):
    """Eager BERT-base at batch 1 × 8 alone in its own process, half a second of timing, against a fake harness row.
    One thread: `make test`'s other worker has the other core."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    results = tmp_path / "results"
    _write(results, "02_torchscript_vs_xla", [_row(model="bert-base", variant="eager", seq_len=8, threads=1,
                                                   median_s=0.050)])
    out = tmp_path / "smoke.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--studies", "02", "--runtimes", "eager",
                           "--threads", "1", "--seconds", "0.5", "--results", str(results), "--out", str(out),
                           "--cache", str(tmp_path / "cache")], capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 1 and rows[0]["status"] == "ok", rows
    s = rows[0]["standalone"]
    assert s["n"] >= 3 and s["median_s"] > 0 and s["env"]["OMP_WAIT_POLICY"] is None
    assert s["env"]["OMP_NUM_THREADS"] == "1" and s["env"]["torch_intra_op"] == 1
    assert s["env"]["MALLOC_MMAP_THRESHOLD_"] == s["env"]["MALLOC_TRIM_THRESHOLD_"] == str(1 << 30)  # as the harness
    assert "torch" in s["frameworks_loaded"] and "tensorflow" not in s["frameworks_loaded"]  # alone: USE_TF=0
    assert rows[0]["ratio"] == pytest.approx(0.050 / s["median_s"])
    assert "| 02 | bert-base fp32 b1×8 | eager |" in proc.stdout
