"""Passes over a text data set: every runtime on the same batches, outputs back in order, padding accounted exactly."""

import numpy as np
import pytest

import measuring
from studylib.bench import dataset
from studylib.core.config import Config
from studylib.stats.results import ResultsTable
from studylib.workloads import batching
from studylib.workloads.corpus import CorpusSettings

WORDS = "the model reads every text once and returns one label for each of them in order".split()
MEASURE = {"warmup_calls": 0, "min_rounds": 6, "max_rounds": 8, "min_time_s": 0.0, "target_ci_pct": 50.0,
           "budget_s": 0.05, "block_s": 0.0, "replicates": 1}
TOLERANCE = {"fp32": 1e-3, "int8": 0.1}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(3)
    lines = [" ".join(rng.choice(WORDS, size=int(n))) for n in rng.integers(2, 40, 30)]
    (tmp / "texts.txt").write_text("\n".join(lines) + "\n")
    settings = CorpusSettings(source=str(tmp / "texts.txt"), n_texts=20, vocab_size=300)
    return dataset.load(settings, max_length=32, seed=0, cache_dir=tmp / "cache", model="roberta-tiny-classifier")


@pytest.fixture(scope="module")
def run(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    workloads = dataset.DatasetWorkloads(data, seed=0, cache_dir=out / "cache")
    configs = [Config("roberta-tiny-classifier", v, "fp32", 4, "cpu", 2, seq_len=32, strategy=s, data="test")
               for s in ("unsorted", "sorted") for v in ("eager", "torchscript", "ort", "ort-int8", "torch-int8")]
    rows = measuring.measure(configs, table=ResultsTable(out / "t.jsonl"), measure=MEASURE, tolerance=TOLERANCE,
                             workloads=workloads)
    return {(r["strategy"], r["variant"]): r for r in rows}, workloads


def test_every_runtime_runs_the_pass_and_matches_eager(run):
    rows, _ = run
    assert all(r["status"] == "ok" for r in rows.values()), [r["error"] for r in rows.values()]
    for (strategy, variant), r in rows.items():
        assert r["parity_ok"], (strategy, variant, r["max_abs_diff"])
        assert r["label_agreement"] is not None and r["label_agreement"] >= 0.8
    # fp32 runtimes are exact up to float rounding; int8 is not, and says by how much
    assert rows[("unsorted", "ort")]["max_abs_diff"] < 1e-4
    assert rows[("unsorted", "ort-int8")]["max_abs_diff"] > 1e-6


def test_padding_and_throughput_are_accounted_exactly(run, data):
    rows, _ = run
    for strategy in ("unsorted", "sorted"):
        plan = batching.plan(data.lengths, 4, strategy, max_length=32)
        expected = batching.padding(plan, data.lengths)
        r = rows[(strategy, "eager")]
        assert (r["real_tokens"], r["computed_tokens"]) == (expected["real_tokens"], expected["computed_tokens"])
        assert r["padding_waste"] == expected["padding_waste"]
        assert r["real_tokens"] == int(data.lengths.sum()) and r["n_texts"] == data.n == 20
        assert r["throughput_tokens_s"] == pytest.approx(r["real_tokens"] / r["median_s"])
    assert rows[("sorted", "eager")]["padding_waste"] < rows[("unsorted", "eager")]["padding_waste"]


def test_outputs_come_back_in_the_given_order(run):
    _, workloads = run
    config = lambda s: Config("roberta-tiny-classifier", "eager", "fp32", 4, "cpu", 2, seq_len=32,  # noqa: E731
                                    strategy=s, data="test")
    unsorted, sorted_ = workloads.reference(config("unsorted")), workloads.reference(config("sorted"))
    assert unsorted.shape == (20, 2)
    np.testing.assert_allclose(sorted_, unsorted, atol=1e-5)  # other batches, same texts, same order
    assert workloads.batched_vs_unbatched(config("sorted")) < 1e-4
