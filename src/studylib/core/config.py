"""A configuration (what is run, on what, at which size) and the shape vocabulary its fields' metadata defines."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from itertools import groupby
from typing import Any

from . import cells

REFERENCE = "eager"  # every variant's output is compared with eager PyTorch on the same inputs
# A/A controls: `<variant>-aa`, an independently prepared copy timed in the same group; never an option (docs/method.md)
AA_SUFFIX = "-aa"


def aa_of(variant: str) -> str:
    """The A/A copy of `variant`: `<variant>-aa`."""
    return variant + AA_SUFFIX


def is_aa(variant) -> bool:
    """Whether `variant` names an A/A copy (of any variant)."""
    return isinstance(variant, str) and variant.endswith(AA_SUFFIX) and len(variant) > len(AA_SUFFIX)


# `<variant>-shared(-passive)`: in a worker shared with the other framework (runtimes/shared.py); never an option
SHARED_SETTINGS = ("shared", "shared-passive")


def is_shared(variant) -> bool:
    """Whether `variant` names a variant measured in a process shared with another framework."""
    return isinstance(variant, str) and any(variant.endswith(f"-{s}") for s in SHARED_SETTINGS)


def original_of(variant: str) -> str:
    """The variant an A/A copy copies (`variant` itself where it is no copy)."""
    return variant[: -len(AA_SUFFIX)] if is_aa(variant) else variant


def with_aa(variants, aa) -> list[str]:
    """`variants` in order, each followed by its A/A copy where `aa` names it."""
    copies = set(aa)
    return [x for v in variants for x in ([v, aa_of(v)] if v in copies else [v])]


AA = aa_of(REFERENCE)  # eager's A/A copy, the control every study has run since the start

ROLES = ("shape", "how", "process")
_REQUIRED = object()


def _field(role: str, key: str, at: int, *, inputs: int | None = None, words: str | None = "{}",
           short: str | None = None, size: bool = False, default: Any = _REQUIRED):
    """A Config field: `role` (ROLES), `key` written at place `at` by Config.key, `inputs` its place in shape_key
    (None: not in it), `words`/`short` how shape_label names it (None: never), `size` whether it is a size."""
    meta = {"role": role, "key": key, "at": at, "inputs": inputs, "words": words,
            "short": words if short is None else short, "size": size}
    return field(metadata=meta) if default is _REQUIRED else field(default=default, metadata=meta)


@dataclass(frozen=True)
class Config:
    """One configuration of a sweep: what is run, on what, at which size."""

    model: str = _field("shape", "{}", 0, inputs=0)
    variant: str = _field("how", "{}", 1)
    dtype: str = _field("shape", "{}", 3, inputs=1)
    batch_size: int = _field("shape", "b{}", 4, inputs=3, words="batch {}", short="b{}", size=True)
    device: str = _field("how", "{}", 2, inputs=2)
    threads: int = _field("how", "t{}", 6)
    # fixed-shape studies: the sequence length; data-set studies: the maximum
    seq_len: int | None = _field("shape", "s{}", 5, inputs=4, words="seq {}", short="s{}", size=True, default=None)
    image_size: int | None = _field("shape", "i{}", 5, inputs=5, words="{}px", size=True, default=None)
    # data-set studies: how texts are batched (see batching.STRATEGIES)
    strategy: str | None = _field("shape", "{}", 7, inputs=6, default=None)
    # data-set studies: which data (corpus, sample, tokenizer; see dataset.data_tag); never in a label
    data: str | None = _field("shape", "{}", 8, inputs=7, words=None, default=None)
    # study 05: the Keras backend of the process it runs in (fixed when Keras is imported); None: any process
    backend: str | None = _field("process", "keras={}", 9, default=None)

    @property
    def key(self) -> str:
        """The configuration in one string, a row's config_key: 'bert-base|eager|cpu|fp32|b1|s128|t2'."""
        parts = []
        for _, shared in groupby(_KEY_ORDER, key=lambda f: f.metadata["at"]):
            shared = list(shared)
            written = next((f for f in shared if getattr(self, f.name) is not None), None)
            if written is None and (len(shared) > 1 or shared[-1].default is MISSING):
                written = shared[-1]
            if written is not None:
                parts.append(written.metadata["key"].format(getattr(self, written.name)))
        return "|".join(parts)

    @property
    def shape_key(self) -> tuple:
        """The same model on the same inputs on the same device (by default, one group): the `inputs` fields."""
        return tuple(getattr(self, f.name) for f in _INPUTS)


_KEY_ORDER = sorted(fields(Config), key=lambda f: f.metadata["at"])
_INPUTS = sorted((f for f in fields(Config) if f.metadata["inputs"] is not None), key=lambda f: f.metadata["inputs"])
FIELDS = tuple(f.name for f in fields(Config))
HOW = tuple(f.name for f in fields(Config) if f.metadata["role"] == "how")
SHAPE = tuple(name for name in FIELDS if name not in HOW)
_META = {f.name: f.metadata for f in fields(Config)}


def shape_columns(frame, *, without=()) -> list[str]:
    """The shape fields (SHAPE) with a value in `frame` (a table's columns, or a row's fields), less `without`."""
    skip = set(without)
    if hasattr(frame, "columns"):  # a table
        return [c for c in SHAPE if c in frame.columns and c not in skip and (not len(frame) or frame[c].notna().any())]
    return [c for c in SHAPE if c not in skip and cells.of(frame, c) is not None]


def shape_label(row, columns=None, *, short: bool = False) -> str:
    """A shape in words ('bert-base fp32 batch 8 seq 128'; `short`: 'bert-base fp32 b8 × s128'), blanks left out."""
    parts: list[tuple[str, bool]] = []
    for c in SHAPE if columns is None else columns:
        meta, v = _META.get(c, {}), cells.whole(cells.of(row, c))
        spec = meta.get("short" if short else "words", "{}")
        if v is None or spec is None:
            continue
        parts.append((spec.format(v), bool(meta.get("size"))))
    return "".join(("" if i == 0 else " × " if short and size and parts[i - 1][1] else " ") + text
                   for i, (text, size) in enumerate(parts))


def shape_of(row) -> tuple:
    """What a row (a dict, a pandas row or an object) computes: its SHAPE fields, blanks None."""
    return tuple(cells.of(row, name) for name in SHAPE)
