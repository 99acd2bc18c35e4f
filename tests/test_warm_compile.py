"""The warm compile (bench/warm.py, runtimes/compile_cache.py): a compiled configuration compiled again from the
cache an earlier process saved, beside its cold compile, without a timing threshold anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import measuring
import studylib
from studylib import runtimes
from studylib.bench import warm
from studylib.bench.builder import Workloads
from studylib.core import numbers
from studylib.core.config import Config
from studylib.report import decisions, prose
from studylib.runtimes import compile_cache
from studylib.stats import verdicts
from studylib.stats.measurement import Measurement
from studylib.stats.results import ResultsTable
from studylib.studies import eager_vs_compiled as s01

FAKE_ENV = {"fingerprint": "f", "git_commit": None}
ARGMAX = dict(model="op-argmax", dtype="fp32", batch_size=1, device="cpu", threads=1, seq_len=8)

# One process: compile op-argmax cold and save its artifacts to the file, or, where the file exists, compile it from
# them; print the cache lookups of that compile.
PROCESS = r"""
import json, sys
from pathlib import Path
from studylib import runtimes
from studylib.bench.timing import first_call
from studylib.runtimes import compile_cache
from studylib.workloads import models

file, runtime = Path(sys.argv[1]), runtimes.get("compile-default")
w = models.torch_workload("op-argmax", batch_size=1, seq_len=8)
if file.exists():
    warm = compile_cache.warm_compile(runtime, w, file.read_bytes(), lambda prepared: first_call(prepared.call))
    print(json.dumps({"hits": warm.hits, "misses": warm.misses, "loaded": warm.loaded}))
else:
    with runtime.context():
        before = compile_cache.lookups()
        runtime.prepare(w).call()
        after = compile_cache.lookups()
        compile_cache.write(file, compile_cache.saved())
    print(json.dumps({k: after[k] - before[k] for k in after}))
"""


def _process(file: Path) -> dict:
    src = str(Path(studylib.__file__).parents[1])
    env = os.environ | {"PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]), "USE_TF": "0"}
    done = subprocess.run([sys.executable, "-c", PROCESS, str(file)], capture_output=True, text=True, env=env,
                          timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_later_process_compiles_from_the_cache_an_earlier_one_saved(tmp_path):
    file = tmp_path / "compile" / "argmax.bin"
    cold = _process(file)
    assert cold["misses"] > 0 and cold["hits"] == 0  # an empty cache: compiled anew
    assert file.is_file() and not list(file.parent.glob(".*.tmp"))  # written whole, through a rename
    warm_ = _process(file)
    assert warm_["loaded"] > 0 and warm_["hits"] > 0 and warm_["misses"] == 0


def _configs():
    return [Config(variant=v, **ARGMAX) for v in ("eager", "compile-default")]


def test_the_warm_compile_fills_its_columns_and_combines_over_replicates(tmp_path):
    """Replicate 1 finds no file and saves one; replicate 2 compiles from it (in this process here, which its note
    says): the combined row has its timings, hits and no misses, its parity, and both notes once."""
    rows = measuring.measure(_configs(), table=ResultsTable(tmp_path / "t.jsonl"), env=FAKE_ENV,
                             workloads=Workloads(0, tmp_path / "cache"), parts_dir=tmp_path / "parts",
                             measure=measuring.FAST | {"replicates": 2}, warm_compile=True)
    eager, compiled = rows
    assert eager["warm_note"] is None and eager["warm_first_call_s"] is None  # eager compiles nothing
    assert compiled["status"] == "ok" and compiled["replicates"] == 2
    assert compiled["warm_cache_hits"] > 0 and compiled["warm_cache_misses"] == 0
    assert compiled["warm_first_call_s"] > 0 and compiled["warm_prepare_s"] > 0
    assert np.isfinite(Measurement.of(compiled).warm_one_time_s)
    assert compiled["warm_max_abs_diff"] <= compiled["parity_tol"]
    assert warm.NO_FILE in compiled["warm_note"] and "this same process" in compiled["warm_note"]
    assert len(list((tmp_path / "cache" / compile_cache.FOLDER).glob("*.bin"))) == 1
    stored = ResultsTable(tmp_path / "t.jsonl").latest()  # the columns are stored (results.validated)
    assert stored[compiled["config_key"]]["warm_cache_hits"] == compiled["warm_cache_hits"]


def test_an_unreadable_cache_file_leaves_the_cold_row_with_a_note(tmp_path):
    cache = tmp_path / "cache"
    compiled = _configs()[1]
    file = compile_cache.path(cache, compiled.key, "default")
    file.parent.mkdir(parents=True)
    file.write_bytes(b"not a compile cache")
    row = measuring.measure(_configs(), table=ResultsTable(tmp_path / "t.jsonl"), env=FAKE_ENV,
                            workloads=Workloads(0, cache), parts_dir=tmp_path / "parts", warm_compile=True)[1]
    assert row["status"] == "ok" and row["first_call_s"] > 0 and row["n"] > 0  # the cold measurement stands
    assert row["warm_first_call_s"] is None and row["warm_cache_hits"] is None
    assert "loaded nothing" in row["warm_note"]
    assert file.read_bytes() != b"not a compile cache"  # replaced by this process's artifacts


def _prepared(variant: str, cache_dir) -> types.SimpleNamespace:
    runtime = runtimes.get(variant)
    return types.SimpleNamespace(config=Config(variant=variant, **ARGMAX), runtime=runtime, artifacts=b"x",
                                 workload=types.SimpleNamespace(cache_dir=cache_dir), row={"status": "ok"})


def test_without_a_cache_directory_the_step_says_so_and_copies_are_left_alone(tmp_path):
    none, aa, eager = (_prepared("compile-default", None), _prepared("compile-default-aa", tmp_path),
                       _prepared("eager", tmp_path))
    warm.measure([none, aa, eager], workloads=None, plan=None, parity=None)
    assert none.row["warm_note"] == warm.NO_CACHE_DIR
    assert "warm_note" not in aa.row and "warm_note" not in eager.row and not any(tmp_path.iterdir())


def test_a_failing_warm_compile_is_a_note_and_the_cache_is_still_saved(tmp_path, monkeypatch):
    p = _prepared("compile-default", tmp_path)
    file = compile_cache.path(tmp_path, p.config.key, "default")
    file.parent.mkdir(parents=True)
    file.write_bytes(b"earlier")

    def broken(*args, **kwargs):
        raise RuntimeError("inductor exploded\nstack")

    monkeypatch.setattr(compile_cache, "warm_compile", broken)
    plan = types.SimpleNamespace(tolerance=lambda c: 1e-3)
    warm.measure([p], workloads=None, plan=plan, parity=None)
    assert p.row["warm_note"] == "warm compile failed: RuntimeError: inductor exploded"
    assert file.read_bytes() == b"x" and p.artifacts is None


def test_combined_takes_medians_of_the_replicates_that_compiled_warm():
    reps = [{"warm_note": warm.NO_FILE},
            {"warm_prepare_s": 0.2, "warm_first_call_s": 1.0, "warm_cache_hits": 3, "warm_cache_misses": 0,
             "warm_max_abs_diff": 1e-7, "warm_note": ""},
            {"warm_prepare_s": 0.4, "warm_first_call_s": 3.0, "warm_cache_hits": 3, "warm_cache_misses": 0,
             "warm_max_abs_diff": 2e-7, "warm_note": ""},
            {"warm_cache_hits": 1, "warm_cache_misses": 2, "warm_max_abs_diff": 0.0,
             "warm_note": "not warm: the compile missed the cache 2 time(s), hit it 1"}]
    out = warm.combined(reps)
    assert out["warm_prepare_s"] == pytest.approx(0.3) and out["warm_first_call_s"] == pytest.approx(2.0)
    assert (out["warm_cache_hits"], out["warm_cache_misses"]) == (7, 2) and out["warm_max_abs_diff"] == 2e-7
    assert out["warm_note"] == f"{warm.NO_FILE}; not warm: the compile missed the cache 2 time(s), hit it 1"
    assert warm.combined([{}, {}]) == dict.fromkeys(warm.WARM_COLUMNS)


def _row(variant, batch, median, *, first=None, warm_first=None, hits=None, misses=None):
    rng = np.random.default_rng(batch + len(variant))
    samples = list(rng.normal(median, median * 0.01, 50))
    return {"model": "bert-tiny", "variant": variant, "dtype": "fp32", "batch_size": batch, "seq_len": 16,
            "image_size": None, "device": "cpu", "status": "ok", "error": "", "samples_s": samples,
            "median_s": float(np.median(samples)), "first_call_s": first or median, "warmup_calls": 1,
            "n": len(samples), "stop_reason": "precision", "prepare_s": 0.0, "max_abs_diff": 1e-7, "parity_tol": 1e-3,
            "parity_ok": True, "cv": 0.01, "ci_low_s": median * 0.99, "ci_high_s": median * 1.01,
            "warm_prepare_s": 0.5 if warm_first else None, "warm_first_call_s": warm_first,
            "warm_cache_hits": hits, "warm_cache_misses": misses, "warm_max_abs_diff": 1e-7 if hits else None}


@pytest.fixture
def df():
    return pd.DataFrame([
        _row("eager", 1, 0.010), _row("compile-default", 1, 0.005, first=2.005, warm_first=0.805, hits=4, misses=0),
        _row("eager", 8, 0.080), _row("compile-default", 8, 0.040, first=3.04, hits=2, misses=1),
    ])


def test_the_compile_table_and_findings_give_both_costs(df):
    sp = s01.speedups(df, vt=verdicts.for_study(s01.NOTEBOOK, df))
    t = s01.compile_table(sp, df).set_index("batch_size")
    assert t.loc[1, "compile cold (s)"] == "2.0" and t.loc[1, "compile warm (s)"] == "1.3"  # 0.5 + 0.805 - 0.005
    assert t.loc[1, "cache hits / misses"] == "4 / 0"
    assert t.loc[8, "compile warm (s)"] == "" and t.loc[8, "cache hits / misses"] == "2 / 1"  # missed: not warm
    text = "\n".join(s01.findings(df, sp))
    assert "Compiling cost 2.0–3.0 s per configuration" in text
    assert "from the compile cache an earlier process saved, 1.3 s (1 of 2 compiled configurations)" in text
    assert "1 compile(s) from an earlier process's cache missed it" in text
    assert s01.compile_table(sp)["compile warm (s)"].eq("").all()  # without the results: blank


def test_the_verdicts_index_and_answer_give_the_warm_cost_beside_the_cold_one(df, monkeypatch):
    vt = verdicts.for_study(s01.NOTEBOOK, df)
    at1 = next(v for v in vt.options() if v.candidate == "compile-default" and v.batch_size == 1)
    at8 = next(v for v in vt.options() if v.candidate == "compile-default" and v.batch_size == 8)
    assert at1.warm_one_time_s == pytest.approx(0.5 + 0.805 - at1.ms_per_call / 1e3)
    assert np.isnan(at8.warm_one_time_s)
    assert decisions.one_time(at1) == "cold 2.0 s, warm 1.3 s (cache from an earlier process)"
    assert decisions.one_time(at8) == numbers.fmt_seconds(at8.one_time_s)
    assert "warm 1.3 s" in decisions.what_to_use(vt).set_index("workload")["one-time cost"].iloc[0]
    answer = " ".join(prose.answer_sentences(vt))
    assert "(1.3 s warm)" in answer and prose.words(answer) <= prose.ANSWER_WORDS
    # where the warm figure would push a sentence out of the box, the box keeps the cold one only
    cold, _ = prose._fitted(vt, warm=False)
    closing = cold[-1]
    monkeypatch.setattr(prose, "ANSWER_WORDS", prose.words(" ".join(cold[:-1])) + prose.words(closing) + 6)
    tight = " ".join(prose.answer_sentences(vt))
    assert "warm" not in tight and "see the table" not in tight
