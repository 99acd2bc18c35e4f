"""A configuration: what is run (model, variant, precision), on what (device, threads), at which size.

The lowest layer of the study: the comparison layer (speedups.py) derives its shape vocabulary from these
fields, and the measurement (sweep.py) runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

REFERENCE = "eager"  # every variant's output is compared with eager PyTorch on the same inputs
AA = "eager-aa"  # A/A control: a second, independently prepared copy of eager, timed like any variant


@dataclass(frozen=True)
class Config:
    """One configuration of a sweep: what is run, on what, at which size."""

    model: str
    variant: str
    dtype: str
    batch_size: int
    device: str
    threads: int
    seq_len: int | None = None  # fixed-shape studies: the sequence length; data-set studies: the maximum
    image_size: int | None = None
    strategy: str | None = None  # data-set studies: how texts are batched (see batching.STRATEGIES)
    data: str | None = None  # data-set studies: which data (corpus, sample, tokenizer; see dataset.data_tag)
    # study 05: the Keras backend of the process this configuration runs in (fixed when Keras is imported, so
    # each backend's groups run in processes of their own; see process_env). None: any process.
    backend: str | None = None

    @property
    def key(self) -> str:
        size = f"s{self.seq_len}" if self.seq_len is not None else f"i{self.image_size}"
        key = f"{self.model}|{self.variant}|{self.device}|{self.dtype}|b{self.batch_size}|{size}|t{self.threads}"
        return key + "".join(f"|{v}" for v in (self.strategy, self.data) if v is not None) + (
            f"|keras={self.backend}" if self.backend is not None else "")

    @property
    def shape_key(self) -> tuple:
        """Configurations sharing this key time the same model on the same inputs (by default, one group)."""
        return (self.model, self.dtype, self.device, self.batch_size, self.seq_len, self.image_size, self.strategy,
                self.data)


# The fields that say how a configuration runs rather than what it computes: everything else is its shape.
HOW = ("variant", "device", "threads")
FIELDS = tuple(f.name for f in fields(Config))
SHAPE = tuple(name for name in FIELDS if name not in HOW)
