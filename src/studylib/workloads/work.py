"""The work one call does (FLOPs, bytes moved at least), counted once per shape on the meta device."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from . import models


@dataclass(frozen=True)
class Work:
    """What one call computes: FLOPs, and bytes moved at least (weights read once, outputs written once)."""

    flops: int
    weight_bytes: int
    activation_bytes: int

    @property
    def bytes(self) -> int:
        return self.weight_bytes + self.activation_bytes


def count(module, inputs: tuple) -> Work:
    """Run `module(*inputs)` once, counting its FLOPs (FlopCounterMode) and the bytes its operators write."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.flop_counter import FlopCounterMode

    class Traffic(TorchDispatchMode):
        """Sums the bytes every operator writes (outputs that are views of inputs excluded)."""

        written = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not any(r.alias_info is not None for r in func._schema.returns):
                self.written += sum(t.numel() * t.element_size() for t in tree_leaves(out)
                                    if isinstance(t, torch.Tensor))
            return out

    weights = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
    flops = FlopCounterMode(display=False)
    traffic = Traffic()
    with torch.inference_mode(), flops, traffic:
        module(*inputs)
    return Work(int(flops.get_total_flops()), int(weights), int(traffic.written))


@functools.lru_cache(maxsize=1)  # one model at a time
def _meta_model(name: str, dtype: str):
    """The model on the meta device (text models with eager attention: the same FLOPs as SDPA, and it runs there)."""
    import torch

    attention = "eager" if models.spec(name).kind == "text" else None
    with torch.device("meta"):
        return models.build_torch(name, dtype=dtype, device="meta", attention=attention)


_WORK: dict[tuple, Work] = {}


def work_per_call(name: str, *, dtype: str, batch_size: int, seq_len: int | None = None,
                  image_size: int | None = None, real: Callable[[], tuple] | None = None) -> Work:
    """The work of one call at that shape, on the meta device (else on `real()`'s (module, inputs)), cached."""
    key = (name, dtype, batch_size, seq_len, image_size)
    if key not in _WORK:
        inputs = models.torch_inputs(name, batch_size=batch_size, seq_len=seq_len, image_size=image_size,
                                     dtype=dtype, device="meta")
        try:
            _WORK[key] = count(_meta_model(name, dtype), inputs)
        except Exception:
            if real is None:
                raise
            module, real_inputs = real()
            _WORK[key] = count(module, real_inputs)
    return _WORK[key]


def per_text(name: str, dtype: str, lengths: Iterable[int], real: Callable[[int], tuple] | None = None
             ) -> dict[int, Work]:
    """Work of one text of each length: a quadratic fitted on three counts and checked on a fourth."""
    lengths = sorted(set(int(n) for n in lengths))

    def at(n: int) -> Work:
        return work_per_call(name, dtype=dtype, batch_size=1, seq_len=n, real=real and (lambda: real(n)))

    if len(lengths) <= 4:
        return {n: at(n) for n in lengths}
    probes = [lengths[0], lengths[len(lengths) // 2], lengths[-1]]
    check = lengths[len(lengths) // 4] if lengths[len(lengths) // 4] not in probes else lengths[1]
    works = [at(n) for n in probes]
    fits = [np.polyfit(probes, [getattr(w, f) for w in works], 2) for f in ("flops", "activation_bytes")]

    def fitted(n: int) -> Work:
        return Work(*(int(round(np.polyval(fits[0], n))), works[0].weight_bytes,
                      int(round(np.polyval(fits[1], n)))))

    truth = at(check)
    if fitted(check) != truth:
        return {n: at(n) for n in lengths}
    return {n: fitted(n) for n in lengths}


def pass_work(name: str, dtype: str, batches: Iterable[tuple[int, int]], text_lengths: Iterable[int],
              real: Callable[[int], tuple] | None = None) -> dict[str, int]:
    """Work of one pass over `batches` (texts, padded length); useful FLOPs at each text's own length."""
    batches, text_lengths = list(batches), list(text_lengths)
    works = per_text(name, dtype, [n for _, n in batches] + text_lengths, real)
    computed = sum(b * works[n].flops for b, n in batches)
    moved = sum(b * works[n].activation_bytes + works[n].weight_bytes for b, n in batches)
    return {"flops_per_call": computed, "bytes_per_call": moved,
            "useful_flops_per_call": sum(works[n].flops for n in text_lengths)}
