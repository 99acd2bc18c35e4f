"""Study 05 (Keras 3 backends): the grid, one process per backend, shared Keras weights, and the analysis."""

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import measuring
from studylib.bench import grouping, profiles, replicates, workers
from studylib.bench.builder import Workloads
from studylib.core.config import Config
from studylib.stats import verdicts
from studylib.stats.results import ResultsTable
from studylib.studies import keras_backends as s05

rng = np.random.default_rng(5)

SECTION = dict(models=["bert-tiny", "resnet-50"], dtypes=["fp32"], batch_sizes=[1], seq_lens=[16], image_size=32,
               variants=["eager", "compile-default", "keras-torch", "keras-tensorflow", "keras-tensorflow-jit",
                         "keras-jax-jit", "keras2-tensorflow"])


def test_the_grid_runs_each_backend_in_groups_of_its_own_with_native_eager_and_its_aa_copy():
    configs = s05.configs(s05.KerasBackends(**SECTION), device="cpu", threads=2)
    groups = grouping.groups_to_measure(configs, configs, s05.group_by)
    backends = [g[0].backend for g in groups.values()]
    assert backends == ["torch", "torch", "tensorflow", "tensorflow", "jax", "jax"]  # torch first: it makes the weights
    for g in groups.values():
        assert [c.variant for c in g[:2]] == ["eager", "eager-aa"]  # the baseline, then the A/A control
        assert {c.backend for c in g} == {g[0].backend}
        assert grouping.process_env(g)["KERAS_BACKEND"] == g[0].backend
        assert grouping.process_env(g).get("USE_TF") == (None if g[0].backend == "tensorflow" else "0")
        keras = [c.variant for c in g if c.variant.startswith("keras")]
        assert all(s05.backend_of(v) == g[0].backend for v in keras)
    compiled = [c for c in configs if c.variant == "compile-default"]
    assert {c.backend for c in compiled} == {"torch"} and len(compiled) == 2  # native torch.compile once per shape
    keys = [c.key for c in configs]
    assert len(set(keys)) == len(keys) and "bert-tiny|eager|cpu|fp32|b1|s16|t2|keras=jax" in keys


def test_one_process_cannot_mix_keras_backends():
    a = Config("bert-tiny", "keras-jax", "fp32", 1, "cpu", 2, seq_len=16, backend="jax")
    b = Config("bert-tiny", "keras-torch", "fp32", 1, "cpu", 2, seq_len=16, backend="torch")
    with pytest.raises(ValueError, match="one process cannot run Keras backends"):
        grouping.process_env([a, b])
    assert grouping.process_env([Config("bert-tiny", "eager", "fp32", 1, "cpu", 2, seq_len=16)]) == {}


@pytest.mark.parametrize("change, message", [
    ({"models": ["distilbert-base"]}, "has no Keras twin"),
    ({"variants": ["eager", "compile-default"]}, "at least one Keras variant"),
    ({"variants": ["eager", "keras-theano"]}, "keras-theano"),
    ({"image_size": 16}, "image_size"),
])
def test_the_section_rejects_what_study_05_cannot_run(change, message):
    with pytest.raises(Exception, match=message):
        s05.KerasBackends(**(SECTION | change))


def test_replicates_start_one_process_per_backend_with_its_environment(tmp_path, monkeypatch):
    """Each replicate runs the torch groups in one process, then tensorflow's, then jax's, each process started
    with its KERAS_BACKEND; a process that dies leaves error rows for its group and the next backend still runs."""
    configs = s05.configs(s05.KerasBackends(**SECTION), device="cpu", threads=2)
    groups = grouping.groups_to_measure(configs, configs, s05.group_by)
    seen = []

    def fake_process(task, poll, in_process=False):
        seen.append((task.replicate, task.env_vars, [key for key, _, _ in task.groups]))
        # its Keras worker sets TensorFlow's threads only on the TensorFlow backend (workers.frameworks_of)
        assert workers.frameworks_of("keras", task.plan, task.env_vars) == (
            ("torch", "tensorflow") if task.env_vars["KERAS_BACKEND"] == "tensorflow" else ("torch",))
        return 1  # died: every group of it becomes error rows, one at a time

    monkeypatch.setattr(replicates, "_run_process", fake_process)
    table = ResultsTable(tmp_path / "05.jsonl")
    plan = measuring.plan(measuring.FAST | {"replicates": 2}, env={"fingerprint": "f", "git_commit": "c"},
                          study=s05.NOTEBOOK, profile="smoke", threads=2, frameworks=("torch", "tensorflow"))
    rows = replicates.measure(groups, plan, table=table, workloads=Workloads(0), parts_dir=tmp_path / "parts")
    order = [(r, e["KERAS_BACKEND"]) for r, e, _ in seen]
    assert order[0] == (0, "torch") and order[-1] == (1, "jax")
    firsts = [b for r, b in dict.fromkeys(order)]
    assert firsts == ["torch", "tensorflow", "jax", "torch", "tensorflow", "jax"]
    for _, e, keys in seen:
        assert all(groups[k][0].backend == e["KERAS_BACKEND"] for k in keys)
    assert len(rows) == len(configs) and {r["status"] for r in rows} == {"error"}
    assert all("died with exit code 1" in r["error"] for r in rows)


BACKEND_SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import numpy as np
    from studylib.core.config import Config
    from studylib.bench import keras_models
    from studylib import runtimes
    from studylib.runtimes import keras_process
    cache = Path(sys.argv[1])
    w = keras_models.KerasWorkloads(0, cache_dir=cache)
    out = {"backend": keras_process.backend()}
    for variant, model, seq, image in ((f"keras-{out['backend']}", "bert-tiny", 16, None),):
        c = Config(model, variant, "fp32", 2, "cpu", 2, seq_len=seq, image_size=image, backend=out["backend"])
        rt = runtimes.get(variant)
        rt.warm_up()
        wl = w.workload(c, rt.framework)
        p = rt.prepare(wl)
        y = rt.to_numpy(p.call())
        ref = w.reference(c)
        out[model] = {"diff": float(np.abs(y - ref).max()), "shape": list(y.shape)}
    out["files"] = sorted(p.name for p in (cache / "keras").iterdir())
    print(json.dumps(out))
""")


def _in_backend(backend: str, cache) -> dict:
    env = os.environ | {"KERAS_BACKEND": backend, "USE_TF": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run([sys.executable, "-c", BACKEND_SCRIPT, str(cache)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_backend_loads_the_same_weights_and_matches_the_shared_reference(tmp_path):
    """The torch process makes the weights and the references; the jax process loads both and computes the same
    outputs (on other inputs it would differ: this is what parity checks). The text encoder here; ResNet-50 goes
    through every backend and call mode in the end-to-end smoke-fast report (torch's jit in make test-full)."""
    first = _in_backend("torch", tmp_path)
    assert first["backend"] == "torch"
    assert "bert-tiny.weights.npz" in first["files"]
    assert sum(f.endswith(".reference.npz") for f in first["files"]) == 1
    second = _in_backend("jax", tmp_path)
    assert second["backend"] == "jax" and second["files"] == first["files"]  # nothing new made
    assert second["bert-tiny"]["shape"] == [2, 16, 64]
    assert second["bert-tiny"]["diff"] < 1e-4  # same function from the shared weights


def _row(model, variant, backend, median, *, group, status="ok", error=""):
    base = {"model": model, "variant": variant, "dtype": "fp32", "batch_size": 1, "seq_len": 16, "image_size": None,
            "device": "cpu", "threads": 2, "backend": backend, "status": status, "error": error,
            "group_id": group, "compilations": None, "graph_breaks": None}
    if status != "ok":
        return base
    rounds = 30
    phase = rng.normal(1.0, 0.05, rounds)  # the machine's drift, shared by a round
    samples = list(median * phase * rng.normal(1.0, 0.005, rounds))
    return base | {"samples_s": samples, "sample_rep": [0] * rounds, "sample_round": list(range(rounds)),
                   "median_s": float(np.median(samples)), "first_call_s": median * 20, "prepare_s": 0.01,
                   "max_abs_diff": 1e-6, "parity_ok": True, "cv": 0.05, "stop_reason": "precision"}


@pytest.fixture
def df():
    """bert-tiny: jax-jit 2× native eager, tensorflow 1.2×, torch 0.5×, native compile 1.25×; resnet-50: tensorflow
    fastest (1.6×), jax-jit 1.1×; Keras 2 fails on the text model and is 1.5× slower than Keras 3 on ResNet-50."""
    rows = []
    for model, gains in (("bert-tiny", {"torch": 0.5, "tensorflow": 1.2, "jax": 2.0}),
                         ("resnet-50", {"torch": 0.4, "tensorflow": 1.6, "jax": 1.1})):
        for backend in ("torch", "tensorflow", "jax"):
            g = f"{model}-{backend}"
            eager = 0.01
            rows += [_row(model, "eager", backend, eager, group=g), _row(model, "eager-aa", backend, eager, group=g)]
            variant = {"torch": "keras-torch", "tensorflow": "keras-tensorflow", "jax": "keras-jax-jit"}[backend]
            rows.append(_row(model, variant, backend, eager / gains[backend], group=g))
            if backend == "torch":
                rows.append(_row(model, "compile-default", backend, eager / 1.25, group=g))
            if backend == "tensorflow":
                rows.append(_row(model, "keras2-tensorflow", backend, eager / gains[backend] * 1.5, group=g)
                            if model == "resnet-50" else
                            _row(model, "keras2-tensorflow", backend, 0, group=g, status="skipped",
                                 error="the text encoder has no Keras 2 build here"))
    frame = pd.DataFrame(rows)
    frame.loc[frame.model == "resnet-50", ["seq_len", "image_size"]] = [None, 224]
    return frame


def test_the_analysis_ranks_backends_and_compares_with_native_pytorch_and_keras_2(df):
    a = s05.analyse(df, vt=verdicts.for_study(s05.NOTEBOOK, df))
    b = a.tables["backends"].set_index("model")
    assert b.loc["bert-tiny", "fastest"] == "keras-jax-jit" and b.loc["bert-tiny", "runner-up"] == "keras-tensorflow"
    assert b.loc["resnet-50", "fastest"] == "keras-tensorflow" and bool(b.loc["resnet-50", "decided"])
    assert b.loc["bert-tiny", "ratio"] == pytest.approx(2.0 / 1.2, rel=0.05)  # drift cancels within each process
    n = a.tables["native"].set_index("model")
    assert n.loc["bert-tiny", "ratio"] == pytest.approx(2.0 / 1.25, rel=0.05)  # over native torch.compile
    k2 = a.tables["keras 2"]
    assert len(k2) == 1 and k2.speedup.iloc[0] == pytest.approx(1.5, rel=0.05)
    text = "\n".join(a.findings)
    assert "jax in 1, tensorflow in 1 of 2 shapes" in text
    assert "keras2-tensorflow (1 skipped): the text encoder has no Keras 2 build here" in text
    assert re.search(r"called different from eager in [01] of 6 shapes", text)  # an A/A pair per shape and backend
    claims = a.claims.set_index("id")
    assert claims.loc["002-no-best-backend", "judgement"] == "proxy: agrees (direction)"  # winner changes with model
    # (the Keras-layer models stand in for the seed's KerasCV/KerasNLP ones: a substitution; the workload a caveat)
    keras2 = claims.loc["002-keras3-vs-keras2"]  # 1.5×; the seed's 4.8× is SegmentAnything's, not compared on ResNet
    assert keras2.judgement == "proxy: agrees (direction)" and "not compared on other models" in keras2.verdict
    assert claims.loc["002-keras3-vs-native", "judgement"] == "not comparable on this profile"  # an A100 claim


def test_one_winning_backend_does_not_agree_with_no_best_backend(df):
    df = df.copy()
    resnet_jax = (df.model == "resnet-50") & (df.variant == "keras-jax-jit")
    df.loc[resnet_jax, "samples_s"] = df.loc[resnet_jax, "samples_s"].map(lambda xs: [x / 3 for x in xs])
    df.loc[resnet_jax, "median_s"] /= 3
    claims = s05.analyse(df, vt=verdicts.for_study(s05.NOTEBOOK, df)).claims.set_index("id")
    assert claims.loc["002-no-best-backend", "judgement"] == "proxy: does not agree"  # Keras-layer models stand in


def test_the_smoke_and_cpu_profiles_run_every_backend():
    for name in ("smoke", "cpu"):
        section = profiles.load(name).sections[s05.NOTEBOOK]
        assert {s05.backend_of(v) for v in section.variants} >= {"torch", "tensorflow", "jax"}
        assert "keras2-tensorflow" in section.variants and "compile-default" in section.variants


def test_backend_claims_answer_only_when_every_backend_ran(df):
    """On a GPU where TensorFlow sees none: JAX beating torch alone is no answer to 'JAX first' or 'no best backend'."""
    df = df.copy()
    tf = df.backend == "tensorflow"
    df.loc[tf, "status"], df.loc[tf, "error"] = "skipped", "TensorFlow 2.21.0 sees no GPU"
    df.loc[tf, ["samples_s", "median_s"]] = None
    claims = s05.analyse(df, vt=verdicts.for_study(s05.NOTEBOOK, df)).claims.set_index("id")
    for cid in ("002-no-best-backend", "002-jax-first-7", "002-half-tasks-50pct", "002-keras3-vs-native"):
        assert "Keras 3 on tensorflow did not run (skipped: TensorFlow 2.21.0 sees no GPU)" in \
            claims.loc[cid, "our measurement (95% CI)"], cid
        assert "agrees" not in claims.loc[cid, "judgement"], cid
    assert claims.loc["002-no-best-backend", "verdict"].startswith("not answerable")  # a claim of any device
