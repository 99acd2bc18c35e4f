"""A tokenized text data set, and workloads timing one pass over it in a strategy's batches (studies 03 and 04)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import runtimes
from ..core.config import REFERENCE, Config
from ..workloads import batching, corpus, models, tokenization, work
from .builder import Workloads

UNBATCHED_CHECK_TEXTS = 16  # texts run one by one to check that batching does not change their output


@dataclass(frozen=True)
class TextDataset:
    """The sample of texts as token ids, in the given order."""

    source: str
    ids: tuple[tuple[int, ...], ...]
    pad_id: int
    max_length: int
    tokenizer: str  # how the ids were made

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(x) for x in self.ids])

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(f"{self.pad_id}|{self.max_length}|{self.tokenizer}".encode())
        for x in self.ids:
            h.update(np.asarray(x, dtype=np.int64).tobytes() + b"|")
        return h.hexdigest()[:10]


def data_tag(settings, max_length: int) -> str:
    """What a configuration's results depend on in the data (a user's file by its content), for its key."""
    source = settings.source if settings.column is None else f"{settings.source}[{settings.column}]"
    tok = settings.tokenizer or f"bpe{settings.vocab_size}"
    files = [f for f in (settings.source, settings.tokenizer) if f and f != corpus.DEFAULT_SOURCE]
    digest = "".join(f":{hashlib.sha256(Path(corpus.resolve(f)).read_bytes()).hexdigest()[:8]}" for f in files)
    return f"{source}:n{settings.n_texts}:{tok}:max{max_length}{digest}"


def load(settings, *, max_length: int, seed: int, cache_dir, model: str | None = None) -> TextDataset:
    """Load the corpus, draw the fixed-seed sample, tokenize it (training or loading the tokenizer)."""
    c = corpus.load(settings.source, settings.column)
    picked = corpus.sample(c, settings.n_texts, seed)
    tok = tokenization.get_tokenizer(c, vocab_size=settings.vocab_size, cache_dir=cache_dir,
                                     tokenizer_file=settings.tokenizer)
    texts = tuple(c.texts[i] for i in picked)
    ids = tokenization.encode(tok, texts, max_length)
    if model is not None:
        vocab = models.spec(model).vocab_size
        if vocab is not None and max(max(x) for x in ids) >= vocab:
            raise tokenization.TokenizerError(
                f"{settings.tokenizer or 'trained tokenizer'}: token ids reach {max(max(x) for x in ids)}, beyond "
                f"{model}'s vocabulary of {vocab}: use a smaller vocabulary")
    how = settings.tokenizer or f"byte-level BPE, {tok.get_vocab_size()} tokens, trained on {c.name}"
    return TextDataset(c.source, tuple(tuple(x) for x in ids), tokenization.pad_id(tok), max_length, how)


@dataclass
class Pass:
    """One configuration's batches, as torch inputs, and what the pass computes."""

    plan: list[batching.Batch]
    inputs: list[tuple]  # (input_ids, attention_mask) per batch, torch tensors on the device
    n_texts: int
    real_tokens: int
    computed_tokens: int
    padding_waste: float


class DatasetWorkloads(Workloads):
    """Workloads whose timed call is one pass over the whole data set in the configuration's batches."""

    def __init__(self, data: TextDataset, seed: int, cache_dir=None, bucket_batches: int = batching.BUCKET_BATCHES):
        super().__init__(seed, cache_dir)
        self.data = data
        self.bucket_batches = bucket_batches
        self._passes: dict[tuple, Pass] = {}
        self._unbatched: dict[tuple, float] = {}

    def _pass(self, c: Config) -> Pass:
        key = (c.batch_size, c.strategy, c.device)
        if key not in self._passes:
            import torch

            lengths = self.data.lengths
            plan = batching.plan(lengths, c.batch_size, c.strategy, max_length=self.data.max_length, seed=self.seed,
                                 bucket_batches=self.bucket_batches)
            inputs = [tuple(torch.from_numpy(a).to(c.device) for a in batching.collate(self.data.ids, b, self.data.pad_id))
                      for b in plan]
            self._passes = {key: Pass(plan, inputs, self.data.n, **batching.padding(plan, lengths))}
        return self._passes[key]

    def example_inputs(self, c: Config) -> tuple:
        """Two texts of different lengths in one padded batch: a trace or export sees a real padding mask."""
        import torch

        lengths = self.data.lengths
        pair = batching.Batch((int(lengths.argmin()), int(np.argsort(lengths)[len(lengths) // 2])),
                              int(np.sort(lengths)[len(lengths) // 2]))
        if lengths[pair.indices[0]] == lengths[pair.indices[1]]:
            pair = batching.Batch(pair.indices, pair.length + 1)  # every text alike: pad one position anyway
        return tuple(torch.from_numpy(a).to(c.device) for a in batching.collate(self.data.ids, pair, self.data.pad_id))

    def workload(self, c: Config, framework: str = "torch") -> models.Workload:
        if framework != "torch":
            raise runtimes.RuntimeUnavailable(f"the data-set studies run {framework} models only through ONNX")
        module = self._torch_module(c)
        example = self.example_inputs(c)
        return models.Workload(c.model, "text", module, example, c.dtype, c.device, int(example[0].shape[0]),
                               int(example[0].shape[1]), cache_dir=self.cache_dir, max_shape=(c.batch_size, c.seq_len))

    def timed_call(self, prepared: runtimes.Prepared, c: Config, w: models.Workload):
        batches = [prepared.adapt(b) for b in self._pass(c).inputs]  # converted before timing
        fn = prepared.fn
        return lambda: [fn(*b) for b in batches]

    def first_call(self, prepared: runtimes.Prepared, c: Config, w: models.Workload, runtime: runtimes.Runtime,
                   call):
        """The first pass, each batch's output copied to the host before the next batch runs."""
        batches = [prepared.adapt(b) for b in self._pass(c).inputs]
        fn, sync, host = prepared.fn, prepared.sync, runtime.to_numpy

        def first():
            out = [host(fn(*b)) for b in batches]
            if sync is not None:
                sync()
            return out

        return first

    def as_array(self, output: Any, runtime: runtimes.Runtime, c: Config) -> np.ndarray:
        """The pass's outputs as one float64 array in the texts' original order (host arrays are taken as they are)."""
        return batching.restore([o if isinstance(o, np.ndarray) else runtime.to_numpy(o) for o in output],
                                self._pass(c).plan, self.data.n)

    def reference(self, c: Config) -> np.ndarray:
        if c.shape_key not in self._references:
            eager = runtimes.get(REFERENCE)
            module = self._torch_module(c)
            with eager.context():
                out = [module(*b) for b in self._pass(c).inputs]
            self._references[c.shape_key] = self.as_array(out, eager, c)
        return self._references[c.shape_key]

    def batched_vs_unbatched(self, c: Config) -> float:
        """Max abs difference between eager PyTorch's batched pass and the same texts run one at a time."""
        key = c.shape_key
        if key not in self._unbatched:
            import torch

            eager = runtimes.get(REFERENCE)
            module = self._torch_module(c)
            batched = self.reference(c)
            picks = np.random.default_rng(self.seed).choice(self.data.n, min(UNBATCHED_CHECK_TEXTS, self.data.n),
                                                            replace=False)
            diff = 0.0
            with eager.context():
                for i in picks:
                    ids = torch.tensor([self.data.ids[i]], device=c.device)
                    single = eager.to_numpy(module(ids, torch.ones_like(ids)))[0]
                    diff = max(diff, float(np.max(np.abs(single - batched[i]))))
            self._unbatched[key] = diff
        return self._unbatched[key]

    def work(self, c: Config) -> dict[str, Any]:
        """FLOPs and bytes of one pass (work.pass_work), and the useful FLOPs of each text at its own length."""
        def real(length: int):
            return self._torch_module(c), models.torch_inputs(c.model, batch_size=1, seq_len=length, dtype=c.dtype,
                                                              device=c.device, seed=self.seed)

        p = self._pass(c)
        return work.pass_work(c.model, c.dtype, [(len(b.indices), b.length) for b in p.plan],
                                  self.data.lengths.tolist(), real)

    def rates(self, c: Config, w: models.Workload, median_s: float) -> dict[str, Any]:
        p = self._pass(c)
        try:
            unbatched = self.batched_vs_unbatched(c)
        except Exception as exc:  # a failed check is reported, never a reason to drop the measurement
            unbatched = None
            print(f"batched-vs-unbatched check failed for {c.key}: {type(exc).__name__}: {exc}")
        return {"throughput_samples_s": p.n_texts / median_s, "throughput_tokens_s": p.real_tokens / median_s,
                "n_texts": p.n_texts, "n_batches": len(p.plan), "real_tokens": p.real_tokens,
                "computed_tokens": p.computed_tokens, "padding_waste": p.padding_waste,
                "batched_vs_unbatched_max_diff": unbatched}
