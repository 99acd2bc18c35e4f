"""Text corpora: `pydoc_data.topics`, or a user's .txt, .csv or .jsonl; every problem a one-line CorpusError."""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..core import paths

DEFAULT_SOURCE = "pydoc-topics"
FORMATS = (".txt", ".csv", ".jsonl")
MIN_WORDS = 2  # a one-word paragraph is a heading or a stray token, not a sentence to classify


class CorpusError(ValueError):
    """A corpus that cannot be used: one line naming the file and the problem."""


@dataclass(frozen=True)
class Corpus:
    """A named, ordered collection of texts."""

    name: str
    source: str  # for people: where the texts came from
    texts: tuple[str, ...]


def resolve(path: str) -> Path:
    """A user path: absolute, or relative to the repository root."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else paths.ROOT / p


def _pydoc_topics() -> Corpus:
    from pydoc_data.topics import topics

    texts = []
    for key in sorted(topics):
        for para in re.split(r"\n[ \t]*\n", topics[key]):
            para = " ".join(para.split())
            if len(para.split()) >= MIN_WORDS:
                texts.append(para)
    version = ".".join(map(str, sys.version_info[:3]))
    return Corpus(DEFAULT_SOURCE, f"paragraphs of Python {version}'s pydoc topics (pydoc_data.topics)",
                  tuple(texts))


def _file(source: str, column: str | None) -> Path:
    """The checked path of a user corpus; what needs no reading of the file."""
    path = resolve(source)
    if path.suffix.lower() not in FORMATS:
        raise CorpusError(f"{source}: unsupported corpus format (use .txt, .csv or .jsonl)")
    if not path.exists():
        raise CorpusError(f"{source}: no such corpus file")
    if not path.is_file():
        raise CorpusError(f"{source}: not a file")
    if path.suffix.lower() == ".txt" and column is not None:
        raise CorpusError(f"{source}: column is only for .csv and .jsonl corpora")
    if path.suffix.lower() != ".txt" and not column:
        raise CorpusError(f"{source}: a {path.suffix.lower()} corpus needs a column (the field holding the text)")
    return path


@contextmanager
def _utf8(source: str) -> Iterator[None]:
    try:
        yield
    except UnicodeDecodeError as e:
        raise CorpusError(f"{source}: not UTF-8 text (byte {e.start})") from None


def _read_lines(source: str, path: Path) -> list[str]:
    with _utf8(source):
        return path.read_text(encoding="utf-8-sig").splitlines()


def _csv_column(source: str, reader, column: str) -> int:
    """The index of `column` in the CSV's header row."""
    try:
        header = next(reader)
    except StopIteration:
        raise CorpusError(f"{source}: empty file, no header row") from None
    except csv.Error as e:
        raise CorpusError(f"{source}: line {reader.line_num}: {e}") from None
    if column not in header:
        raise _column_missing(source, column, header)
    return header.index(column)


def _column_missing(where: str, column: str, columns) -> CorpusError:
    return CorpusError(f"{where}: column {column!r} not found (columns: {', '.join(map(str, columns))})")


def _jsonl_object(source: str, number: int, line: str) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        raise CorpusError(f"{source}: line {number}: not valid JSON") from None
    if not isinstance(obj, dict):
        raise CorpusError(f"{source}: line {number}: not a JSON object")
    return obj


def _csv_texts(source: str, path: Path, column: str) -> list[str]:
    with _utf8(source), open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        at = _csv_column(source, reader, column)
        try:
            return [row[at].strip() for row in reader if len(row) > at and row[at].strip()]
        except csv.Error as e:
            raise CorpusError(f"{source}: line {reader.line_num}: {e}") from None


def _jsonl_texts(source: str, path: Path, column: str) -> list[str]:
    texts = []
    for number, line in enumerate(_read_lines(source, path), start=1):
        if not line.strip():
            continue
        obj = _jsonl_object(source, number, line)
        if column not in obj:
            raise _column_missing(f"{source}: line {number}", column, obj)
        if not isinstance(obj[column], str):
            raise CorpusError(f"{source}: line {number}: column {column!r} is not a string")
        if obj[column].strip():
            texts.append(obj[column].strip())
    return texts


def check(source: str = DEFAULT_SOURCE, column: str | None = None) -> None:
    """Cheap validation for profile loading: the file exists, its format is known, the column is there."""
    if source == DEFAULT_SOURCE:
        if column is not None:
            raise CorpusError(f"{source}: column is only for .csv and .jsonl corpora")
        return
    path = _file(source, column)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        with _utf8(source), open(path, newline="", encoding="utf-8-sig") as f:
            _csv_column(source, csv.reader(f), column)
    elif suffix == ".jsonl":
        with open(path, encoding="utf-8-sig", errors="replace") as f:
            for number, line in enumerate(f, start=1):
                if line.strip():
                    obj = _jsonl_object(source, number, line)
                    if column not in obj:
                        raise _column_missing(source, column, obj)
                    return
        raise CorpusError(f"{source}: no texts in the file")


def load(source: str = DEFAULT_SOURCE, column: str | None = None) -> Corpus:
    """The corpus named by `source` (DEFAULT_SOURCE or a file path), texts in file order."""
    check(source, column)
    if source == DEFAULT_SOURCE:
        return _pydoc_topics()
    path = resolve(source)
    suffix = path.suffix.lower()
    if suffix == ".txt":
        texts = [ln.strip() for ln in _read_lines(source, path) if ln.strip()]
    elif suffix == ".csv":
        texts = _csv_texts(source, path, column)
    else:
        texts = _jsonl_texts(source, path, column)
    if not texts:
        raise CorpusError(f"{source}: no texts in the file")
    where = source if column is None else f"{source}, column {column!r}"
    return Corpus(path.name, where, tuple(texts))


def sample(corpus: Corpus, n: int, seed: int) -> list[int]:
    """n text indices, a prefix of one fixed-seed permutation (the data set's "given order")."""
    if n < 1:
        raise ValueError(f"n must be at least 1 (got {n})")
    order = np.random.default_rng(seed).permutation(len(corpus.texts))
    return [int(i) for i in order[:n]]


class CorpusSettings(BaseModel):
    """The `corpus:` key of a data-set study's profile section: which texts, how many, which tokenizer."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    source: str = DEFAULT_SOURCE
    column: str | None = None
    n_texts: int = Field(1000, ge=1)
    tokenizer: str | None = None  # a tokenizers JSON file; without it a BPE tokenizer is trained on the corpus
    vocab_size: int = Field(8000, ge=100, le=100000)

    @model_validator(mode="after")
    def _files(self) -> CorpusSettings:
        check(self.source, self.column)
        if self.tokenizer is not None and not resolve(self.tokenizer).is_file():
            raise ValueError(f"{self.tokenizer}: no such tokenizer file")
        return self
