"""What study 07's configurations run: a causal LM, corpus prompts, the phase in `strategy`, new tokens in `data`."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .. import runtimes
from ..bench.builder import Workloads
from ..core.config import REFERENCE, Config, original_of
from ..runtimes.generation import eager_runner
from ..runtimes.generation_ort import prepare_generation
from ..workloads import generation, models


def data_tag(new_tokens: int) -> str:
    """The `data` field of a configuration generating `new_tokens` tokens: 'new32'."""
    return f"new{new_tokens}"


def tokens_in(data) -> int | None:
    """The new tokens a `data` field names ('new32' -> 32); None where it names none."""
    return int(data[3:]) if isinstance(data, str) and data.startswith("new") and data[3:].isdigit() else None


def new_tokens_of(c: Config) -> int:
    """The new tokens a configuration's `data` field names ('new32' -> 32)."""
    n = tokens_in(c.data)
    if n is None:
        raise ValueError(f"{c.key}: its data field {c.data!r} names no number of new tokens (study 07 writes 'new32')")
    return n


class GenerationWorkloads(Workloads):
    """Causal LMs, prompts, phases and eager's teacher-forced logits; an impossible prompt or cache is skipped."""

    def __init__(self, seed: int, cache_dir=None, max_cache_mb: float = 4096.0):
        super().__init__(seed, cache_dir)
        self.max_cache_mb = max_cache_mb
        self._runners: dict[str, Any] = {}
        self._stream: dict[str, list[int]] = {}

    def _torch_module(self, c: Config):
        key = (c.model, c.dtype, c.device)
        if key not in self._modules:
            self._release()
            self._modules[key] = generation.build_lm(c.model, seed=self.seed, dtype=c.dtype, device=c.device)
        return self._modules[key]

    def check(self, c: Config) -> None:
        """Raise RuntimeUnavailable (a skipped row naming the cause) where the model or the cache cannot hold it."""
        n = new_tokens_of(c)
        limit = models.spec(c.model).max_positions
        if limit is not None and c.seq_len + n > limit:
            raise runtimes.RuntimeUnavailable(
                f"a prompt of {c.seq_len} tokens and {n} new ones need {c.seq_len + n} positions; {c.model} has {limit}")
        need = generation.kv_cache_bytes(c.model, batch_size=c.batch_size, positions=c.seq_len + n, dtype=c.dtype)
        if need > self.max_cache_mb * 2**20:
            raise runtimes.RuntimeUnavailable(
                f"the KV cache of batch {c.batch_size} × {c.seq_len + n} positions needs {need / 2**20:,.0f} MiB, above "
                f"the section's max_cache_mb ({self.max_cache_mb:,.0f})")

    def workload(self, c: Config, framework: str = "torch") -> generation.GenerationWorkload:
        self.check(c)
        n = new_tokens_of(c)
        lm = self._torch_module(c)
        if "ids" not in self._stream:
            self._stream["ids"] = generation.token_stream(self.cache_dir)
        prompt, continuation = generation.prompts(self._stream["ids"], batch_size=c.batch_size, prompt_len=c.seq_len,
                                                  new_tokens=n, vocab_size=lm.config.vocab_size, device=c.device)
        w = generation.GenerationWorkload(c.model, lm, prompt, continuation, c.strategy, n, c.dtype, c.device,
                                          c.batch_size, c.seq_len, cache_dir=self.cache_dir,
                                          onnxruntime=prepare_generation)
        if original_of(c.variant) == REFERENCE:  # the registered eager runtime calls w.module: the dynamic-cache runner
            w.module = eager_runner(w)
        return w

    def timed_call(self, prepared: runtimes.Prepared, c: Config, w):
        self._runners[c.key] = prepared.fn  # the runner: parity's teacher-forced logits come from it
        return prepared.call

    def as_array(self, output: Any, runtime: runtimes.Runtime, c: Config) -> np.ndarray:
        """Parity reads the runner's teacher-forced logits, not the greedy tokens the timed call returns."""
        runner = self._runners.pop(c.key)
        return runner.logits().detach().float().cpu().numpy().astype("float64")

    def reference(self, c: Config) -> np.ndarray:
        """Eager's (dynamic cache) teacher-forced logits on the configuration's prompt and phase."""
        if c.shape_key not in self._references:
            import torch

            w = self.workload(dataclasses.replace(c, variant=REFERENCE))
            with torch.inference_mode():
                self._references[c.shape_key] = w.module.logits().float().cpu().numpy().astype("float64")
        return self._references[c.shape_key]

    def work(self, c: Config) -> dict[str, Any]:
        return generation.work(c.model, phase=c.strategy, batch_size=c.batch_size, prompt_len=c.seq_len,
                               new_tokens=new_tokens_of(c), dtype=c.dtype)
