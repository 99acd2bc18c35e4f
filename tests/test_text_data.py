"""The data-set studies' text pieces: corpora, the trained tokenizer, batching strategies and their padding."""

import json

import numpy as np
import pytest
from pydantic import ValidationError
from tokenizers import Tokenizer, models

from studylib.core import paths
from studylib.workloads import batching, corpus, tokenization
from studylib.workloads.corpus import Corpus, CorpusError, CorpusSettings

# ---------------------------------------------------------------- corpora


def test_default_corpus_is_real_text_with_a_long_tail():
    c = corpus.load()
    words = np.array([len(t.split()) for t in c.texts])
    assert c.name == corpus.DEFAULT_SOURCE and "pydoc" in c.source
    assert len(c.texts) > 1000
    assert words.min() >= 2
    assert words.max() > 10 * np.median(words)
    assert corpus.load().texts == c.texts  # a fixed order, run after run


def test_user_corpora_in_each_format(tmp_path):
    (tmp_path / "a.txt").write_text("first text\n\n  second text  \n")
    (tmp_path / "a.csv").write_text('id,text\n1,"one, with a comma"\n2,\n3,three\n')
    (tmp_path / "a.jsonl").write_text('{"text": "one"}\n\n{"text": "two", "label": 1}\n')
    assert corpus.load(str(tmp_path / "a.txt")).texts == ("first text", "second text")
    assert corpus.load(str(tmp_path / "a.csv"), "text").texts == ("one, with a comma", "three")
    assert corpus.load(str(tmp_path / "a.jsonl"), "text").texts == ("one", "two")


def test_sample_is_a_fixed_prefix_of_one_permutation():
    c = Corpus("c", "test", tuple(f"text {i}" for i in range(50)))
    ten = corpus.sample(c, 10, seed=3)
    assert len(set(ten)) == 10 and ten == corpus.sample(c, 10, seed=3)
    assert corpus.sample(c, 20, seed=3)[:10] == ten
    assert corpus.sample(c, 10, seed=4) != ten
    everything = corpus.sample(c, 500, seed=3)
    assert sorted(everything) == list(range(50)) and everything[:10] == ten


BAD = {
    "missing file": ("nothing.csv", None, "text", "nothing.csv: no such corpus file"),
    "unknown extension": ("x.parquet", "", None, "x.parquet: unsupported corpus format (use .txt, .csv or .jsonl)"),
    "csv column": ("x.csv", "a,b\n1,2\n", "text", "x.csv: column 'text' not found (columns: a, b)"),
    "csv without column": ("x.csv", "a,b\n1,2\n", None, "x.csv: a .csv corpus needs a column"),
    "jsonl column": ("x.jsonl", '{"a": "x", "b": "y"}\n', "text", "x.jsonl: column 'text' not found (columns: a, b)"),
    "jsonl without column": ("x.jsonl", '{"text": "x"}\n', None, "x.jsonl: a .jsonl corpus needs a column"),
    "bad json": ("x.jsonl", '{"text": "a"}\n' * 6 + '{"text": \n', "text", "x.jsonl: line 7: not valid JSON"),
    "empty txt": ("x.txt", "\n   \n\n", None, "x.txt: no texts in the file"),
    "column for txt": ("x.txt", "a text\n", "text", "x.txt: column is only for .csv and .jsonl corpora"),
}


@pytest.mark.parametrize("case", BAD.values(), ids=BAD.keys())
def test_bad_corpora_fail_with_one_line_naming_the_file(tmp_path, monkeypatch, case):
    name, content, column, message = case
    monkeypatch.setattr(paths, "ROOT", tmp_path)  # relative paths resolve against the repository root
    if content is not None:
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / name).write_text(content)
    with pytest.raises(CorpusError) as err:
        corpus.load(f"data/{name}", column)
    assert str(err.value).startswith(f"data/{message}")
    assert "\n" not in str(err.value)


def test_check_is_cheap_but_catches_what_loading_would(tmp_path):
    (tmp_path / "ok.jsonl").write_text('{"text": "a"}\n{"oops\n')  # only the first line is read
    corpus.check(str(tmp_path / "ok.jsonl"), "text")
    corpus.check(corpus.DEFAULT_SOURCE)
    with pytest.raises(CorpusError, match="column 'body' not found"):
        corpus.check(str(tmp_path / "ok.jsonl"), "body")
    with pytest.raises(CorpusError, match="column is only for"):
        corpus.check(corpus.DEFAULT_SOURCE, "text")


def test_corpus_settings_validate_the_files(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "ROOT", tmp_path)
    assert CorpusSettings.model_validate({}).source == corpus.DEFAULT_SOURCE
    with pytest.raises(ValidationError) as err:
        CorpusSettings.model_validate({"source": "data/x.csv", "column": "text"})
    assert "data/x.csv: no such corpus file" in str(err.value)
    with pytest.raises(ValidationError, match="data/tok.json: no such tokenizer file"):
        CorpusSettings.model_validate({"tokenizer": "data/tok.json"})
    with pytest.raises(ValidationError):
        CorpusSettings.model_validate({"n_texts": 0})
    with pytest.raises(ValidationError):
        CorpusSettings.model_validate({"vocab_size": "8000"})  # strict: no string coercion


# ---------------------------------------------------------------- tokenizer

SMALL = Corpus("small", "test", tuple(
    f"The {w} batch of sentence number {i} is padded to the longest text in the batch."
    for i in range(40) for w in ("first", "second", "third")))


def test_trained_tokenizer_has_roberta_ids_and_truncates_keeping_the_end(tmp_path):
    tok = tokenization.get_tokenizer(SMALL, vocab_size=300, cache_dir=tmp_path)
    assert [tok.token_to_id(s) for s in tokenization.SPECIALS] == [0, 1, 2, 3, 4]
    assert tokenization.pad_id(tok) == tokenization.PAD_ID == 1
    short, long = tokenization.encode(tok, ["a padded text", " ".join(SMALL.texts[:5])], max_length=16)
    assert short[0] == 0 and short[-1] == 2 and 1 not in short
    assert len(long) == 16 and long[0] == 0 and long[-1] == 2
    assert tok.decode(short) == "a padded text"
    assert tok.truncation is None and tok.padding is None  # encode leaves the shared tokenizer as it was


def test_tokenizer_is_cached_and_loaded_without_training(tmp_path, monkeypatch):
    first = tokenization.get_tokenizer(SMALL, vocab_size=300, cache_dir=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [f"tokenizer-bpe-{tokenization.cache_key(SMALL, 300)}.json"]

    def no_training(*args, **kwargs):
        raise AssertionError("trained again instead of loading the cache")

    monkeypatch.setattr(tokenization, "_train", no_training)
    again = tokenization.get_tokenizer(SMALL, vocab_size=300, cache_dir=tmp_path)
    assert again.get_vocab() == first.get_vocab()
    with pytest.raises(AssertionError, match="trained again"):  # another vocabulary size is another tokenizer
        tokenization.get_tokenizer(SMALL, vocab_size=400, cache_dir=tmp_path)


def test_user_tokenizer_file(tmp_path):
    def user(name):
        return tokenization.get_tokenizer(SMALL, vocab_size=300, cache_dir=tmp_path, tokenizer_file=str(tmp_path / name))

    trained = tokenization.get_tokenizer(SMALL, vocab_size=300, cache_dir=tmp_path / "cache")
    trained.save(str(tmp_path / "mine.json"))
    assert user("mine.json").get_vocab() == trained.get_vocab()

    Tokenizer(models.WordLevel({"a": 0, "<unk>": 1}, unk_token="<unk>")).save(str(tmp_path / "nopad.json"))
    with pytest.raises(tokenization.TokenizerError, match=r"nopad.json: the vocabulary has no <pad> token"):
        user("nopad.json")
    (tmp_path / "broken.json").write_text(json.dumps({"not": "a tokenizer"}))
    with pytest.raises(tokenization.TokenizerError, match="broken.json: not a tokenizers JSON file"):
        user("broken.json")
    with pytest.raises(tokenization.TokenizerError, match="gone.json: no such tokenizer file"):
        user("gone.json")


# ---------------------------------------------------------------- batching

LENGTHS = [3, 1, 4, 1, 5, 9, 2]  # batch size 3, max_length 10: worked out by hand below


def _covers_once(plan, n):
    flat = [i for b in plan for i in b.indices]
    return sorted(flat) == list(range(n))


@pytest.mark.parametrize("strategy", batching.STRATEGIES)
def test_every_strategy_batches_each_text_once_and_restores_order(strategy):
    plan = batching.plan(LENGTHS, 3, strategy, max_length=10, seed=1, bucket_batches=1)
    assert _covers_once(plan, len(LENGTHS))
    assert all(len(b.indices) <= 3 for b in plan)
    assert all(b.length >= max(LENGTHS[i] for i in b.indices) for b in plan)
    outputs = [np.array([[i, 10 * i] for i in b.indices], dtype=np.float32) for b in plan]
    restored = batching.restore(outputs, plan, len(LENGTHS))
    assert restored.tolist() == [[i, 10 * i] for i in range(len(LENGTHS))]


def test_padding_waste_by_hand():
    unsorted = batching.plan(LENGTHS, 3, "unsorted", max_length=10)
    assert [(b.indices, b.length) for b in unsorted] == [((0, 1, 2), 4), ((3, 4, 5), 9), ((6,), 2)]
    assert batching.padding(unsorted, LENGTHS) == {"real_tokens": 25, "computed_tokens": 41, "padding_waste": 16 / 41}

    sorted_ = batching.plan(LENGTHS, 3, "sorted", max_length=10)  # longest first, ties in the given order
    assert [(b.indices, b.length) for b in sorted_] == [((5, 4, 2), 9), ((0, 6, 1), 3), ((3,), 1)]
    assert batching.padding(sorted_, LENGTHS) == {"real_tokens": 25, "computed_tokens": 37, "padding_waste": 12 / 37}

    to_max = batching.plan(LENGTHS, 3, "pad-to-max", max_length=10)
    assert [b.length for b in to_max] == [10, 10, 10]
    assert batching.padding(to_max, LENGTHS)["padding_waste"] == 45 / 70


def test_sorted_pads_least_and_bucketed_is_deterministic():
    lengths = np.random.default_rng(0).lognormal(3, 1, 300).clip(3, 512).astype(int)
    waste = {s: batching.padding(batching.plan(lengths, 16, s, max_length=512), lengths)["padding_waste"]
             for s in batching.STRATEGIES}
    assert waste["sorted"] <= waste["bucketed"] <= waste["unsorted"] <= waste["pad-to-max"]

    bucketed = batching.plan(lengths, 16, "bucketed", max_length=512, seed=5, bucket_batches=4)
    assert _covers_once(bucketed, len(lengths))
    assert bucketed == batching.plan(lengths, 16, "bucketed", max_length=512, seed=5, bucket_batches=4)
    assert bucketed != batching.plan(lengths, 16, "bucketed", max_length=512, seed=6, bucket_batches=4)
    assert all(list(lengths[list(b.indices)]) == sorted(lengths[list(b.indices)], reverse=True) for b in bucketed)
    one_bucket = batching.plan(lengths, 16, "bucketed", max_length=512, bucket_batches=1000)
    assert batching.padding(one_bucket, lengths)["padding_waste"] == waste["sorted"]


def test_plan_rejects_bad_input():
    with pytest.raises(ValueError, match="known: unsorted, sorted, bucketed, pad-to-max"):
        batching.plan(LENGTHS, 3, "random", max_length=10)
    with pytest.raises(ValueError, match="batch_size"):
        batching.plan(LENGTHS, 0, "sorted", max_length=10)
    with pytest.raises(ValueError, match="text 5 has 9 tokens, above max_length 8"):
        batching.plan(LENGTHS, 3, "sorted", max_length=8)


def test_collate_pads_right_and_masks():
    ids = [[0, 7, 2], [0, 2], [0, 5, 6, 7, 2]]
    input_ids, mask = batching.collate(ids, batching.Batch((2, 0), 6), pad_id=1)
    assert input_ids.dtype == mask.dtype == np.int64
    assert input_ids.tolist() == [[0, 5, 6, 7, 2, 1], [0, 7, 2, 1, 1, 1]]
    assert mask.tolist() == [[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]]
    with pytest.raises(ValueError, match="more than the batch's length"):
        batching.collate(ids, batching.Batch((2,), 4), pad_id=1)


def test_restore_refuses_a_missing_or_repeated_text():
    outputs = [np.zeros((2, 1)), np.zeros((1, 1))]
    with pytest.raises(ValueError, match="text 3 is in no batch"):
        batching.restore(outputs, [batching.Batch((0, 1), 1), batching.Batch((2,), 1)], 4)
    with pytest.raises(ValueError, match="text 1 appears in more than one"):
        batching.restore(outputs, [batching.Batch((0, 1), 1), batching.Batch((1,), 1)], 2)
    with pytest.raises(ValueError, match="shape"):
        batching.restore([np.zeros((3, 1)), np.zeros((1, 1))], [batching.Batch((0, 1), 1), batching.Batch((2,), 1)], 3)
