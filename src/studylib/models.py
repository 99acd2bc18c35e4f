"""Models built from transformers configs with random weights and a fixed seed (nothing is downloaded).

Speed does not depend on weight values, so a config-built model times like the checkpoint it mirrors.
The registry is import-light (no torch at import) so profiles validate quickly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["text", "vision"]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: Kind
    family: str  # transformers model family: config and class names derive from it
    config: dict[str, Any] = field(default_factory=dict)
    mirrors: str = ""  # the public checkpoint whose shape this follows

    @property
    def max_positions(self) -> int | None:
        return self.config.get("max_position_embeddings", 512) if self.kind == "text" else None


_TINY_TEXT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=1000)

MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in [
        ModelSpec("bert-base", "text", "bert", {}, mirrors="bert-base-uncased (110M parameters)"),
        ModelSpec("bert-tiny", "text", "bert", _TINY_TEXT, mirrors="a 2-layer BERT for tests"),
        ModelSpec("resnet-50", "vision", "resnet", {}, mirrors="microsoft/resnet-50 (25.6M parameters)"),
        ModelSpec(
            "resnet-tiny",
            "vision",
            "resnet",
            dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=10),
            mirrors="a 2-stage ResNet for tests",
        ),
    ]
}

_TORCH_CLASSES = {"bert": ("BertConfig", "BertModel"), "resnet": ("ResNetConfig", "ResNetForImageClassification")}
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


class UnknownModel(ValueError):
    pass


def spec(name: str) -> ModelSpec:
    try:
        return MODELS[name]
    except KeyError:
        raise UnknownModel(f"unknown model {name!r} (known: {', '.join(sorted(MODELS))})") from None


@dataclass
class Workload:
    """A model ready to call on fixed inputs: what every runtime prepares and every timer times."""

    model_name: str
    kind: Kind
    module: Any  # torch.nn.Module taking the inputs positionally and returning one tensor
    inputs: tuple
    dtype: str
    device: str
    batch_size: int
    seq_len: int | None = None
    image_size: int | None = None

    @property
    def tokens_per_call(self) -> int | None:
        return self.batch_size * self.seq_len if self.kind == "text" else None


def _first_output(module):
    import torch

    class FirstOutput(torch.nn.Module):
        """Calls a transformers model with positional tensors and returns its first output tensor."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *inputs):
            return self.inner(*inputs, return_dict=False)[0]

    return FirstOutput(module).eval()


def build_torch(name: str, *, seed: int = 0, dtype: str = "fp32", device: str = "cpu"):
    """The PyTorch model for a registry name, random weights from `seed`, in eval mode."""
    import torch
    import transformers

    s = spec(name)
    config_cls, model_cls = (getattr(transformers, n) for n in _TORCH_CLASSES[s.family])
    torch.manual_seed(seed)
    model = model_cls(config_cls(**s.config)).eval()
    return _first_output(model).to(device=device, dtype=getattr(torch, TORCH_DTYPES[dtype]))


def torch_inputs(name: str, *, batch_size: int, seq_len: int | None = None, image_size: int | None = None,
                 dtype: str = "fp32", device: str = "cpu", seed: int = 0) -> tuple:
    """Fixed-seed inputs: token ids and an all-ones mask for text, pixel values for vision."""
    import torch

    s = spec(name)
    g = torch.Generator().manual_seed(seed)
    if s.kind == "text":
        vocab = s.config.get("vocab_size", 30522)
        ids = torch.randint(0, vocab, (batch_size, seq_len), generator=g)
        return ids.to(device), torch.ones_like(ids).to(device)
    pixels = torch.randn(batch_size, 3, image_size, image_size, generator=g)
    return (pixels.to(device=device, dtype=getattr(torch, TORCH_DTYPES[dtype])),)


def torch_workload(name: str, *, batch_size: int, seq_len: int | None = None, image_size: int | None = None,
                   dtype: str = "fp32", device: str = "cpu", seed: int = 0, module=None) -> Workload:
    """Model plus inputs for one configuration; pass `module` to reuse an already built model."""
    s = spec(name)
    if s.kind == "text" and seq_len is not None and s.max_positions and seq_len > s.max_positions:
        raise ValueError(f"sequence length {seq_len} exceeds {name}'s {s.max_positions} positions")
    module = module if module is not None else build_torch(name, seed=seed, dtype=dtype, device=device)
    inputs = torch_inputs(name, batch_size=batch_size, seq_len=seq_len, image_size=image_size,
                          dtype=dtype, device=device, seed=seed)
    return Workload(name, s.kind, module, inputs, dtype, device, batch_size,
                    seq_len if s.kind == "text" else None, image_size if s.kind == "vision" else None)
