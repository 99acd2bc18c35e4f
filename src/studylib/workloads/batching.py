"""Batching strategies for variable-length text, the padding each costs, and the way back to input order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

STRATEGIES = ("unsorted", "sorted", "bucketed", "pad-to-max")
# batches per bucket (torchtext's 100 would be the whole ~1,000-text sample, i.e. `sorted` again)
BUCKET_BATCHES = 8


@dataclass(frozen=True)
class Batch:
    """Indices of the texts in one batch, in row order, and the length every row is padded to."""

    indices: tuple[int, ...]
    length: int


def _cut(order: Sequence[int], lengths: np.ndarray, batch_size: int, pad_to: int | None = None) -> list[Batch]:
    return [Batch(tuple(int(i) for i in chunk), pad_to or int(lengths[list(chunk)].max()))
            for chunk in (order[s:s + batch_size] for s in range(0, len(order), batch_size))]


def _longest_first(order: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    return order[np.argsort(-lengths[order], kind="stable")]


def plan(lengths: Sequence[int], batch_size: int, strategy: str, *, max_length: int, seed: int = 0,
         bucket_batches: int = BUCKET_BATCHES) -> list[Batch]:
    """Batches of the texts with these token lengths (texts in the given order) under `strategy`."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown batching strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1 (got {batch_size})")
    if bucket_batches < 1:
        raise ValueError(f"bucket_batches must be at least 1 (got {bucket_batches})")
    lens = np.asarray(lengths, dtype=np.int64)
    if lens.ndim != 1 or len(lens) == 0:
        raise ValueError("lengths must be a non-empty list of token counts")
    if lens.min() < 1:
        raise ValueError(f"text {int(lens.argmin())} has {int(lens.min())} tokens; every text needs at least 1")
    if lens.max() > max_length:
        raise ValueError(f"text {int(lens.argmax())} has {int(lens.max())} tokens, above max_length {max_length}")
    given = np.arange(len(lens))
    if strategy == "unsorted":
        return _cut(given, lens, batch_size)
    if strategy == "pad-to-max":
        return _cut(given, lens, batch_size, pad_to=max_length)
    if strategy == "sorted":
        return _cut(_longest_first(given, lens), lens, batch_size)
    rng = np.random.default_rng(seed)
    shuffled, size = rng.permutation(len(lens)), bucket_batches * batch_size
    batches = [b for s in range(0, len(lens), size)
               for b in _cut(_longest_first(shuffled[s:s + size], lens), lens, batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def padding(batches: Sequence[Batch], lengths: Sequence[int]) -> dict[str, int | float]:
    """real_tokens, computed_tokens (rows x padded length, summed) and padding_waste = 1 - real/computed."""
    real = sum(int(lengths[i]) for b in batches for i in b.indices)
    computed = sum(len(b.indices) * b.length for b in batches)
    return {"real_tokens": real, "computed_tokens": computed,
            "padding_waste": (computed - real) / computed if computed else 0.0}


def collate(ids: Sequence[Sequence[int]], batch: Batch, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """int64 input_ids [B, L] right-padded with pad_id, and the int64 attention_mask marking real tokens."""
    input_ids = np.full((len(batch.indices), batch.length), pad_id, dtype=np.int64)
    attention_mask = np.zeros_like(input_ids)
    for row, i in enumerate(batch.indices):
        n = len(ids[i])
        if n > batch.length:
            raise ValueError(f"text {i} has {n} tokens, more than the batch's length {batch.length}")
        input_ids[row, :n] = ids[i]
        attention_mask[row, :n] = 1
    return input_ids, attention_mask


def restore(outputs: Sequence[np.ndarray], batches: Sequence[Batch], n: int) -> np.ndarray:
    """Per-batch outputs (rows in batch order) put back in the texts' original order, as one array."""
    if len(outputs) != len(batches):
        raise ValueError(f"{len(outputs)} outputs for {len(batches)} batches")
    arrays = [np.asarray(o) for o in outputs]
    row_shape = arrays[0].shape[1:] if arrays else ()
    result = np.empty((n, *row_shape), dtype=arrays[0].dtype if arrays else float)
    seen = np.zeros(n, dtype=np.int64)
    for k, (out, batch) in enumerate(zip(arrays, batches)):
        if out.shape[:1] != (len(batch.indices),) or out.shape[1:] != row_shape:
            raise ValueError(f"output {k} has shape {out.shape}; expected {(len(batch.indices), *row_shape)}")
        idx = np.asarray(batch.indices, dtype=np.int64)
        if len(idx) and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"batch {k} holds an index outside 0..{n - 1}")
        result[idx] = out
        np.add.at(seen, idx, 1)
    if (seen > 1).any():
        raise ValueError(f"text {int(np.argmax(seen > 1))} appears in more than one batch row")
    if (seen == 0).any():
        raise ValueError(f"text {int(np.argmax(seen == 0))} is in no batch")
    return result
