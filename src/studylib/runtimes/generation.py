"""Study 07's PyTorch runners, each called with no arguments for one phase; `logits()` is parity's forced run."""

from __future__ import annotations

import time

from .base import Prepared, PrepareStep, RuntimeUnavailable, device_sync, registered
from .pytorch import TorchCompiled, _Torch

PARITY_STEPS = 4  # forced tokens parity feeds after the prefix, one a step (each through the variant's cache path)


class PhaseRunner:
    """One phase of generation on study 07's workload `w`; a subclass steps its model (`_step`) from a fresh state."""

    def __init__(self, w):
        import torch

        self.w = w
        self.ids = torch.cat([w.prompt, w.continuation], dim=1)  # prompt then the forced continuation
        self.prefix = w.decode_context if w.phase == "decode" else w.seq_len  # what the phase's cache starts from

    # a subclass's `_fresh()`: an empty state (a cache, or no past); `_step(ids, state, start, *, eager=False)`:
    # (next-token logits (batch, 1, vocab), the state after) for `ids` at positions start..; `eager`: uncompiled

    def _back(self) -> None:
        """After a decode step: the state back to the context, where the step left it changed."""

    def _setup(self) -> None:
        """The decode phase's state: the prompt and half the new tokens, and the token its one step feeds."""
        _, self.state = self._step(self.ids[:, : self.prefix], self._fresh(), 0, eager=True)
        self.token = self.ids[:, self.prefix: self.prefix + 1]

    def __call__(self):
        w = self.w
        if w.phase == "decode":
            logits, _ = self._step(self.token, self.state, self.prefix)
            self._back()  # so the next call is the same step
            return logits.argmax(-1)
        logits, state = self._step(w.prompt, self._fresh(), 0)
        token = logits.argmax(-1)
        if w.phase == "prefill":
            return token
        tokens = [token]
        for i in range(w.new_tokens - 1):
            logits, state = self._step(token, state, w.seq_len + i)
            token = logits.argmax(-1)
            tokens.append(token)
        import torch

        return torch.cat(tokens, dim=1)

    def logits(self):
        """Teacher-forced next-token logits (batch, positions, vocab): the phase's prefix, then one forced token a step."""
        import torch

        logits, state = self._step(self.ids[:, : self.prefix], self._fresh(), 0, eager=self.w.phase == "decode")
        out = [logits]
        for j in range(self.prefix, min(self.ids.shape[1] - 1, self.prefix + PARITY_STEPS)):
            logits, state = self._step(self.ids[:, j: j + 1], state, j)
            out.append(logits)
        return torch.cat(out, dim=1)


class TorchRunner(PhaseRunner):
    """A transformers causal LM on a dynamic or static cache, forward compiled or not."""

    def __init__(self, w, *, static: bool = False, compiled: bool = False):
        import torch

        super().__init__(w)
        self.lm, self.static = w.lm, static
        self.forward = torch.compile(self.lm.forward) if compiled else self.lm.forward
        self.cache = None
        if static:
            from transformers import StaticCache

            self.cache = StaticCache(config=self.lm.config, max_cache_len=w.cache_len)
            config = self.lm.config  # allocated now, not lazily in the first (possibly compiled) call
            heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
            self.cache.early_initialization(w.batch_size, heads, config.hidden_size // config.num_attention_heads,
                                            self.lm.dtype, w.prompt.device)
        self.steps: list[PrepareStep] = []
        if w.phase == "decode":
            t0 = time.perf_counter()
            self._setup()
            self.steps.append(PrepareStep("prefill to the decode context", time.perf_counter() - t0, False))

    def _fresh(self):
        from transformers import DynamicCache

        if self.static:
            self.cache.reset()
            return self.cache
        return DynamicCache(config=self.lm.config)

    def _step(self, ids, cache, start: int, *, eager: bool = False):
        """The cache is updated in place; `eager` (the decode context) so a compiled runner compiles its step alone."""
        import torch

        n = ids.shape[1]
        positions = torch.arange(start, start + n, device=ids.device)
        forward = self.lm.forward if eager else self.forward
        out = forward(input_ids=ids, past_key_values=cache, cache_position=positions,
                      position_ids=positions.unsqueeze(0).expand(ids.shape[0], -1), use_cache=True, logits_to_keep=1)
        return out.logits[:, -1:, :], cache

    def _back(self) -> None:
        if not self.static:  # a static cache overwrites the same slot; a dynamic one is cropped
            self.state.crop(self.prefix)

    def logits(self):
        out = super().logits()
        if self.w.phase == "decode":  # the static cache was reset for it
            self._setup()
        return out


def eager_runner(w) -> TorchRunner:
    """The baseline's runner (transformers' default dynamic cache, eager): what the registered `eager` calls."""
    return TorchRunner(w)


def check(w) -> None:
    """A workload these runners take: study 07's (a causal LM and a phase)."""
    if not hasattr(w, "lm"):
        raise RuntimeUnavailable("a text-generation variant runs study 07's workloads only (a causal LM and a phase)")


class StaticCacheRuntime(_Torch):
    """transformers' StaticCache (allocated once for prompt + new tokens), forward eager."""

    name = "static"

    def prepare(self, workload) -> Prepared:
        check(workload)
        runner = TorchRunner(workload, static=True)
        return Prepared(runner, (), device_sync(workload.device), steps=runner.steps)


class StaticCacheCompiled(TorchCompiled):
    """StaticCache with the forward torch.compile'd (default mode), compiled cold in the first call."""

    def __init__(self):
        super().__init__("default")
        self.name = "static-compile"

    def prepare(self, workload) -> Prepared:
        check(workload)
        runner = TorchRunner(workload, static=True, compiled=True)
        notes = ("forward compiled by the study (torch.compile, default mode): transformers' generate compiles a static "
                 "cache's forward by itself only on CUDA")
        return Prepared(runner, (), device_sync(workload.device), notes, steps=runner.steps)


RUNTIMES = [
    registered(StaticCacheRuntime(), "text generation on transformers' StaticCache (allocated once at its full length) "
               "instead of the default dynamic cache", "GnBu", "07"),
    registered(StaticCacheCompiled(), "StaticCache with the model's forward compiled by torch.compile (transformers "
               "4.57 compiles it by itself only on CUDA: on a CPU the study compiles it)", "GnBu", "07"),
]
