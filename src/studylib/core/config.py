"""A configuration: what is run (model, variant, precision), on what (device, threads), at which size.

The lowest layer of the study: the comparison layer (speedups.py) derives its shape vocabulary from these
fields, and the measurement (sweep.py) runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

REFERENCE = "eager"  # every variant's output is compared with eager PyTorch on the same inputs
# A/A controls: a variant named `<variant>-aa` is a second, independently prepared copy of `<variant>` (its own
# model, trace, session or function built again), timed in the same group like any variant. It is never an option:
# its speed-up over its original is noise, so the share of A/A pairs called different is the method's false-positive
# rate (speedups.aa_pairs, speedups.aa_calibration).
AA_SUFFIX = "-aa"


def aa_of(variant: str) -> str:
    """The A/A copy of `variant`: `<variant>-aa`."""
    return variant + AA_SUFFIX


def is_aa(variant) -> bool:
    """Whether `variant` names an A/A copy (of any variant)."""
    return isinstance(variant, str) and variant.endswith(AA_SUFFIX) and len(variant) > len(AA_SUFFIX)


def original_of(variant: str) -> str:
    """The variant an A/A copy copies (`variant` itself where it is no copy)."""
    return variant[: -len(AA_SUFFIX)] if is_aa(variant) else variant


def with_aa(variants, aa) -> list[str]:
    """`variants` in order, each followed by its A/A copy where `aa` names it (copies of variants not listed are
    left out)."""
    copies = set(aa)
    return [x for v in variants for x in ([v, aa_of(v)] if v in copies else [v])]


AA = aa_of(REFERENCE)  # eager's A/A copy, the control every study has run since the start


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
