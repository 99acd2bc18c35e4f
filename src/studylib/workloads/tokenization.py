"""Subword tokenization without a download: a cached byte-level BPE trained on the corpus, or the user's file."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from ..core.files import write_text_atomic
from .corpus import Corpus, resolve

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
PAD_ID = 1


class TokenizerError(ValueError):
    """A tokenizer file that cannot be used: one line naming the file and the problem."""


def cache_key(corpus: Corpus, vocab_size: int) -> str:
    """Short hash of what the trained tokenizer depends on: texts, vocabulary size, tokenizers version."""
    h = hashlib.sha256(f"{vocab_size}\0{tokenizers.__version__}\0".encode())
    for text in corpus.texts:
        h.update(text.encode("utf-8") + b"\0")
    return h.hexdigest()[:16]


def _train(texts: Sequence[str], vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=list(SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.post_processor = processors.RobertaProcessing(sep=("</s>", 2), cls=("<s>", 0),
                                                      trim_offsets=True, add_prefix_space=False)
    return tok


def _load_file(name: str, path: Path) -> Tokenizer:
    if not path.is_file():
        raise TokenizerError(f"{name}: no such tokenizer file")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a plain Exception for a bad file
        raise TokenizerError(f"{name}: not a tokenizers JSON file ({str(e).splitlines()[0]})") from None
    if tok.token_to_id("<pad>") is None:
        raise TokenizerError(f"{name}: the vocabulary has no <pad> token")
    return tok


def vocabulary_size(tokenizer_file: str) -> int:
    """Check a user's tokenizer file (readable, has <pad>) and return its vocabulary size."""
    return _load_file(tokenizer_file, resolve(tokenizer_file)).get_vocab_size()


def get_tokenizer(corpus: Corpus, *, vocab_size: int, cache_dir: Path,
                  tokenizer_file: str | None = None) -> Tokenizer:
    """The user's tokenizer file if given, else a BPE trained on `corpus` (cached in cache_dir)."""
    if tokenizer_file is not None:
        return _load_file(tokenizer_file, resolve(tokenizer_file))
    path = Path(cache_dir) / f"tokenizer-bpe-{cache_key(corpus, vocab_size)}.json"
    if path.is_file():
        try:
            return Tokenizer.from_file(str(path))
        except Exception:
            pass  # a cache written by something else: train again and replace it
    tok = _train(corpus.texts, vocab_size)
    write_text_atomic(path, tok.to_str())
    return tok


def pad_id(tokenizer: Tokenizer) -> int:
    """The id of <pad> (PAD_ID for a trained tokenizer; a user's file may differ)."""
    found = tokenizer.token_to_id("<pad>")
    if found is None:
        raise TokenizerError("the tokenizer has no <pad> token")
    return found


@contextmanager
def _truncating(tokenizer: Tokenizer, max_length: int):
    # The tokenizer object is shared: set truncation for this call and give the caller's settings back.
    truncation, padding = tokenizer.truncation, tokenizer.padding
    tokenizer.enable_truncation(max_length)
    tokenizer.no_padding()
    try:
        yield tokenizer
    finally:
        tokenizer.no_truncation() if truncation is None else tokenizer.enable_truncation(**truncation)
        if padding is not None:
            tokenizer.enable_padding(**padding)


def encode(tokenizer: Tokenizer, texts: Sequence[str], max_length: int) -> list[list[int]]:
    """Token ids of each text with its special tokens, cut to max_length (the final </s> is kept); no padding."""
    specials = tokenizer.num_special_tokens_to_add(False)
    if max_length <= specials:
        raise ValueError(f"max_length must be above the {specials} special tokens (got {max_length})")
    with _truncating(tokenizer, max_length) as tok:
        return [enc.ids for enc in tok.encode_batch(list(texts))]
