"""The one shape vocabulary (core/config.py): the roles on Config's fields, and what is derived from them — SHAPE,
HOW, Config.key, Config.shape_key, shape_columns, shape_label — and the pairing of two sides on it (speedups.paired)."""

import json
import math

import pandas as pd

from studylib.bench import grouping
from studylib.core import paths
from studylib.core.config import FIELDS, HOW, ROLES, SHAPE, Config, shape_columns, shape_label, shape_of
from studylib.stats import speedups
from studylib.studies import STUDIES


def test_every_field_has_a_role_and_the_shape_is_every_field_but_how_it_runs():
    from dataclasses import fields

    assert all(f.metadata["role"] in ROLES for f in fields(Config))
    assert HOW == ("variant", "device", "threads")
    assert SHAPE == tuple(name for name in FIELDS if name not in HOW)
    assert "backend" in SHAPE and "backend" not in [f.name for f in fields(Config) if f.metadata["inputs"] is not None]


def test_keys_and_groups_are_the_ones_the_committed_results_were_written_with():
    """Results on disk are found again by config_key (a re-run resumes by it) and grouped by group_key: both are
    derived from the field metadata now, and must read exactly as the reference's rows do."""
    files = sorted((paths.reference_root() / "cpu" / "results").glob("*.jsonl"))
    assert files
    seen = 0
    for path in files:
        study = STUDIES[path.stem]
        for line in path.read_text().splitlines():
            row = json.loads(line)
            c = Config(**{name: row[name] for name in FIELDS})
            assert c.key == row["config_key"]
            [group] = grouping.groups_to_measure([c], [c], study.group_by)
            assert group == row["group_key"], c.key
            seen += 1
    assert seen > 100


def test_a_key_writes_each_field_at_its_place():
    text = Config("bert-base", "eager", "fp32", 8, "cpu", 2, seq_len=128)
    image = Config("resnet-50", "eager-aa", "bf16", 1, "cuda", 4, image_size=224, backend="jax")
    data = Config("m", "ort", "fp32", 4, "cpu", 2, seq_len=128, strategy="sorted", data="corpus:n32")
    assert text.key == "bert-base|eager|cpu|fp32|b8|s128|t2"
    assert image.key == "resnet-50|eager-aa|cuda|bf16|b1|i224|t4|keras=jax"
    assert data.key == "m|ort|cpu|fp32|b4|s128|t2|sorted|corpus:n32"
    assert text.shape_key == ("bert-base", "fp32", "cpu", 8, 128, None, None, None)
    assert image.shape_key == ("resnet-50", "bf16", "cuda", 1, None, 224, None, None)  # the backend is no input


def test_shape_columns_are_the_shape_fields_a_table_fills():
    df = pd.DataFrame({"model": ["a", "b"], "variant": ["x", "y"], "batch_size": [1, 8], "seq_len": [16, None],
                       "image_size": [None, None], "other": [1, 2]})
    assert shape_columns(df) == ["model", "batch_size", "seq_len"]  # image_size: no value; variant: how it runs
    assert shape_columns(df, without=("seq_len",)) == ["model", "batch_size"]
    assert shape_columns(df.iloc[:0]) == ["model", "batch_size", "seq_len", "image_size"]  # no rows: every column
    assert shape_columns(df.iloc[1]) == ["model", "batch_size"]  # a row: the fields it has a value for


def test_one_label_for_a_shape_in_words_and_in_short():
    text = {"model": "bert-base", "dtype": "fp32", "batch_size": 8, "seq_len": 128.0, "image_size": math.nan,
            "data": "corpus:n32", "backend": None}
    image = pd.Series({"model": "resnet-50", "dtype": "fp32", "batch_size": 1, "seq_len": None, "image_size": 224})
    assert shape_label(text) == "bert-base fp32 batch 8 seq 128"  # data never named, blanks left out
    assert shape_label(text, short=True) == "bert-base fp32 b8 × s128"
    assert shape_label(image) == "resnet-50 fp32 batch 1 224px"
    assert shape_label(image, ("model", "batch_size", "image_size"), short=True) == "resnet-50 b1 × 224px"
    assert shape_label(text, ("model", "dtype", "batch_size"), short=True) == "bert-base fp32 b8"
    assert shape_label(text, ("seq_len", "image_size")) == "seq 128"
    assert shape_of(text) == ("bert-base", "fp32", 8, 128.0, None, None, "corpus:n32", None)


def test_paired_aligns_both_sides_on_the_shape():
    df = pd.DataFrame([
        {"model": "m", "variant": "eager", "batch_size": 1, "seq_len": 8, "image_size": None, "median_s": 1.0},
        {"model": "m", "variant": "fast", "batch_size": 8, "seq_len": 8, "image_size": None, "median_s": 4.0},
        {"model": "m", "variant": "fast", "batch_size": 1, "seq_len": 8, "image_size": None, "median_s": 0.5},
        {"model": "m", "variant": "eager", "batch_size": 8, "seq_len": 8.0, "image_size": None, "median_s": 6.0},
        {"model": "m", "variant": "fast", "batch_size": 32, "seq_len": 8, "image_size": None, "median_s": 9.0},
    ], index=[10, 10, 11, 12, 13])  # an index with a repeated label
    c, b = speedups.paired(df, "fast", "eager")
    assert list(c.batch_size) == [8, 1] and list(b.batch_size) == [8, 1]  # the candidate's order; batch 32 unpaired
    assert list(c.median_s / b.median_s) == [4.0 / 6.0, 0.5]  # aligned row by row
    c, b = speedups.paired(df, "fast", "eager", on=["model"])  # on the model alone: each meets the first eager row
    assert list(b.batch_size) == [1, 1, 1]
    assert [len(x) for x in speedups.paired(df, "fast", "missing")] == [0, 0]
