"""Models from transformers configs with fixed-seed random weights; the registry imports no torch."""

from __future__ import annotations

import contextlib
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Kind = Literal["text", "vision", "op"]  # op: one framework operation on a (batch, seq, hidden) tensor


@dataclass(frozen=True)
class Family:
    """A transformers model family: config class, PyTorch and TensorFlow model classes, input names, config defaults."""

    config: str
    torch_class: str
    tf_class: str
    inputs: tuple[str, ...] = ("input_ids", "attention_mask")
    max_positions_key: str | None = "max_position_embeddings"  # None: relative positions, no length limit
    position_offset: int = 0  # RoBERTa reserves the first positions for padding
    # the config class's default positions and vocabulary (the registry validates with no transformers import)
    positions: int | None = None
    vocab: int | None = None


FAMILIES = {
    "bert": Family("BertConfig", "BertModel", "TFBertModel", positions=512, vocab=30522),
    "distilbert": Family("DistilBertConfig", "DistilBertModel", "TFDistilBertModel", positions=512, vocab=30522),
    "gpt2": Family("GPT2Config", "GPT2Model", "TFGPT2Model", max_positions_key="n_positions", positions=1024,
                   vocab=50257),
    "roberta": Family("RobertaConfig", "RobertaModel", "TFRobertaModel", position_offset=2, positions=514, vocab=50265),
    "roberta-classifier": Family("RobertaConfig", "RobertaForSequenceClassification",
                                 "TFRobertaForSequenceClassification", position_offset=2, positions=514, vocab=50265),
    # relative positions (no length limit); its memory is off (_NO_MEMS): a call returns the hidden states alone
    "xlnet": Family("XLNetConfig", "XLNetModel", "TFXLNetModel", max_positions_key=None, vocab=32000),
    "xlm": Family("XLMConfig", "XLMModel", "TFXLMModel", positions=512, vocab=30145),
    "resnet": Family("ResNetConfig", "ResNetForImageClassification", "TFResNetForImageClassification",
                     inputs=("pixel_values",)),
    # Study 07's decoder-only language models (LM head included: generation needs the logits); no TensorFlow twin
    "llama-lm": Family("LlamaConfig", "LlamaForCausalLM", "", inputs=("input_ids",), positions=2048, vocab=32000),
    "gpt2-lm": Family("GPT2Config", "GPT2LMHeadModel", "", inputs=("input_ids",), max_positions_key="n_positions",
                      positions=1024, vocab=50257),
    # Seed 001's "unusual" operations, one per model: no transformers class (see OPS); inputs are made here.
    "op": Family("", "", "", inputs=("x",)),
}

# XLNet without its recurrence memory: no `mems` computed or returned in eval (use_mems_eval), none kept (mem_len)
_NO_MEMS = dict(use_mems_eval=False, mem_len=None)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: Kind
    family: str  # key of FAMILIES: config and class names derive from it
    config: dict[str, Any] = field(default_factory=dict)
    mirrors: str = ""  # the public checkpoint whose shape this follows
    # work of a call relative to a BERT-base-sized encoder's (docs/method.md); only time estimates use it
    cost: float = 1.0

    @property
    def max_positions(self) -> int | None:
        """Longest token sequence the model takes (None for vision models)."""
        fam = FAMILIES[self.family]
        if self.kind != "text" or fam.max_positions_key is None:
            return None
        return self.config.get(fam.max_positions_key, fam.positions) - fam.position_offset

    @property
    def vocab_size(self) -> int | None:
        return self.config.get("vocab_size", FAMILIES[self.family].vocab) if self.kind == "text" else None


_TINY_TEXT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, vocab_size=1000)
_TINY = {
    "bert": _TINY_TEXT,
    "distilbert": dict(dim=64, n_layers=2, n_heads=2, hidden_dim=128, vocab_size=1000),
    "gpt2": dict(n_embd=64, n_layer=2, n_head=2, vocab_size=1000),
    "roberta": _TINY_TEXT | dict(vocab_size=8000),
    "xlnet": dict(d_model=64, n_layer=2, n_head=2, d_inner=128, vocab_size=1000) | _NO_MEMS,
    "xlm": dict(emb_dim=64, n_layers=2, n_heads=2, vocab_size=1000),
}

MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in [
        ModelSpec("bert-base", "text", "bert", {}, mirrors="bert-base-uncased (110M parameters)"),
        ModelSpec("bert-tiny", "text", "bert", _TINY["bert"], mirrors="a 2-layer BERT for tests"),
        ModelSpec("distilbert-base", "text", "distilbert", {}, mirrors="distilbert-base-uncased (66M parameters)"),
        ModelSpec("distilbert-tiny", "text", "distilbert", _TINY["distilbert"], mirrors="a 2-layer DistilBERT for tests"),
        ModelSpec("gpt2", "text", "gpt2", {}, mirrors="gpt2 (124M parameters)"),
        ModelSpec("gpt2-tiny", "text", "gpt2", _TINY["gpt2"], mirrors="a 2-layer GPT-2 for tests"),
        ModelSpec("roberta-base", "text", "roberta", {}, mirrors="roberta-base (125M parameters)"),
        ModelSpec("roberta-tiny", "text", "roberta", _TINY["roberta"], mirrors="a 2-layer RoBERTa for tests"),
        # seed 000's XLNet and XLM (XLNetConfig's defaults are the large model's; XLMConfig's xlm-mlm-en-2048's)
        ModelSpec("xlnet-base", "text", "xlnet", dict(d_model=768, n_layer=12, n_head=12, d_inner=3072) | _NO_MEMS,
                  mirrors="xlnet-base-cased (117M parameters), without its recurrence memory", cost=1.2),
        ModelSpec("xlnet-tiny", "text", "xlnet", _TINY["xlnet"], mirrors="a 2-layer XLNet for tests"),
        ModelSpec("xlm-mlm-en-2048", "text", "xlm", {}, mirrors="xlm-mlm-en-2048 (667M parameters)", cost=7.0),
        ModelSpec("xlm-tiny", "text", "xlm", _TINY["xlm"], mirrors="a 2-layer XLM for tests"),
        # sentence classifiers for the data-set studies, with the corpus BPE's vocabulary
        ModelSpec("roberta-base-classifier", "text", "roberta-classifier", dict(vocab_size=8000, num_labels=2),
                  mirrors="camembert-base / roberta-base sentence classifier (~110M parameters)"),
        ModelSpec("distilroberta-classifier", "text", "roberta-classifier",
                  dict(vocab_size=8000, num_labels=2, num_hidden_layers=6),
                  mirrors="distilroberta-base sentence classifier (6 layers, ~82M parameters)"),
        ModelSpec("roberta-tiny-classifier", "text", "roberta-classifier", _TINY["roberta"] | dict(num_labels=2),
                  mirrors="a 2-layer RoBERTa classifier for tests"),
        # study 07: SmolLM2-135M's shape, a tiny Llama of its form (the corpus BPE's vocabulary), distilgpt2's
        ModelSpec("smollm2-135m", "text", "llama-lm",
                  dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                       num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True, max_position_embeddings=8192,
                       rope_theta=100000.0), mirrors="HuggingFaceTB/SmolLM2-135M (135M parameters)", cost=1.2),
        ModelSpec("llama-tiny", "text", "llama-lm",
                  dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, vocab_size=8000, tie_word_embeddings=True, max_position_embeddings=512),
                  mirrors="a 2-layer Llama (grouped-query attention) for tests"),
        ModelSpec("distilgpt2", "text", "gpt2-lm", dict(n_layer=6), mirrors="distilgpt2 (82M parameters)"),
        ModelSpec("resnet-50", "vision", "resnet", {}, mirrors="microsoft/resnet-50 (25.6M parameters)"),
        # seed 001's "unusual ops" on a (batch, seq_len, 768) fp32 tensor
        ModelSpec("op-argmax", "op", "op", dict(op="argmax", hidden_size=768),
                  mirrors="argmax over the last axis of a (batch, seq, 768) tensor (seed 001)"),
        ModelSpec("op-gather", "op", "op", dict(op="gather", hidden_size=768),
                  mirrors="strided slice x[:, ::2] then an index gather along the sequence (seed 001)"),
        ModelSpec("resnet-tiny", "vision", "resnet",
                  dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=10),
                  mirrors="a 2-stage ResNet for tests"),
    ]
}

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
    module: Any  # takes the inputs positionally and returns one tensor (torch.nn.Module, or a TF callable)
    inputs: tuple
    dtype: str
    device: str
    batch_size: int
    seq_len: int | None = None
    image_size: int | None = None
    framework: str = "torch"
    cache_dir: Path | None = None  # where runtimes keep exported models (outputs/<profile>/cache)
    # the largest (batch, sequence) a call will have, for TensorRT's profile; None: the inputs' own shape
    max_shape: tuple[int, int | None] | None = None

    @property
    def tokens_per_call(self) -> int | None:
        return self.batch_size * self.seq_len if self.kind == "text" else None


# loggers whose import notices (torchao's CUDA-only kernels on a CPU build, pytree deprecations) say nothing of speed
TORCHAO_NOTICES = ("torchao", "torch.utils._pytree")


@contextlib.contextmanager
def quiet_loggers(*names: str):
    """The loggers `names` held back to errors while the block runs."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for log, level in zip(loggers, levels):
            log.setLevel(level)


@contextlib.contextmanager
def _quiet_transformers():
    """Silence transformers' notices that say nothing about speed ("all weights were used", deprecations)."""
    import transformers

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        with warnings.catch_warnings(), quiet_loggers(*TORCHAO_NOTICES):
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        transformers.logging.set_verbosity(verbosity)


def _config(s: ModelSpec, attention: str | None = None):
    import transformers

    config = getattr(transformers, FAMILIES[s.family].config)(**s.config)
    if attention is not None:
        config._attn_implementation = attention
    return config


def _torch_op(op: str):
    """A one-operation nn.Module: `argmax` over the last axis; `gather`, a strided slice then an index gather."""
    import torch

    class Argmax(torch.nn.Module):
        def forward(self, x):
            return x.argmax(-1)

    class Gather(torch.nn.Module):
        def forward(self, x, index):
            return x[:, ::2].index_select(1, index)

    return {"argmax": Argmax, "gather": Gather}[op]().eval()


class TFOp:
    """The TensorFlow twin of `_torch_op`: the same operation on the same inputs."""

    def __init__(self, op: str):
        self.op = op

    def __call__(self, *inputs):
        import tensorflow as tf

        if self.op == "argmax":
            return tf.argmax(inputs[0], axis=-1)
        x, index = inputs
        return tf.gather(x[:, ::2], index, axis=1)


def build_torch(name: str, *, seed: int = 0, dtype: str = "fp32", device: str = "cpu", attention: str | None = None):
    """The PyTorch model for a registry name, random weights from `seed`, eval mode, `attention` (None: default)."""
    import torch

    s = spec(name)
    if s.kind == "op":
        return _torch_op(s.config["op"]).to(device=device)
    import transformers

    fam = FAMILIES[s.family]

    class FirstOutput(torch.nn.Module):
        """Calls a transformers model with positional tensors (passed by name) and returns its first output."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *inputs):
            return self.inner(**dict(zip(fam.inputs, inputs)), return_dict=False)[0]

    torch.manual_seed(seed)
    with _quiet_transformers():
        model = getattr(transformers, fam.torch_class)(_config(s, attention)).eval()
    return FirstOutput(model).eval().to(device=device, dtype=getattr(torch, TORCH_DTYPES[dtype]))


class TFFirstOutput:
    """Calls a transformers TensorFlow model with positional tensors (passed by name); returns its first output."""

    def __init__(self, model, names: tuple[str, ...]):
        self.model, self.names = model, names

    def __call__(self, *inputs):
        return self.model(**dict(zip(self.names, inputs)), training=False)[0]


def build_tf_from_torch(name: str, torch_module) -> TFFirstOutput | TFOp:
    """The TensorFlow twin of a `build_torch` model: the same config, its weights copied in by transformers."""
    s = spec(name)
    if s.kind == "op":
        return TFOp(s.config["op"])
    import transformers
    from transformers.modeling_tf_pytorch_utils import load_pytorch_weights_in_tf2_model

    fam = FAMILIES[s.family]
    # unseeded-initializer warnings say nothing: the weights are PyTorch's, copied in below
    warnings.filterwarnings("ignore", message=r"The initializer \w+ is unseeded", category=UserWarning)
    with _quiet_transformers():
        model = getattr(transformers, fam.tf_class)(_config(s))
        model(model.dummy_inputs, training=False)  # creates the variables
        # fp32 copies on the host: the converter reads weights with .numpy() (a GPU or bf16 tensor would fail)
        weights = {k: v.detach().to("cpu", copy=True).float() for k, v in torch_module.inner.state_dict().items()}
        load_pytorch_weights_in_tf2_model(model, weights)
    return TFFirstOutput(model, fam.inputs)


def torch_inputs(name: str, *, batch_size: int, seq_len: int | None = None, image_size: int | None = None,
                 dtype: str = "fp32", device: str = "cpu", seed: int = 0) -> tuple:
    """Fixed-seed inputs: ids and an all-ones mask, pixel values, or an op's (batch, seq_len, hidden) tensor."""
    import torch

    s = spec(name)
    g = torch.Generator().manual_seed(seed)
    if s.kind == "op":
        x = torch.randn(batch_size, seq_len, s.config["hidden_size"], generator=g)
        x = x.to(device=device, dtype=getattr(torch, TORCH_DTYPES[dtype]))
        if s.config["op"] != "gather":
            return (x,)
        rows = (seq_len + 1) // 2
        return x, torch.randint(0, rows, (max(1, seq_len // 2),), generator=g).to(device)
    if s.kind == "text":
        ids = torch.randint(0, s.vocab_size, (batch_size, seq_len), generator=g)
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
                    seq_len if s.kind in ("text", "op") else None, image_size if s.kind == "vision" else None)


def tf_workload(w: Workload, tf_module: TFFirstOutput) -> Workload:
    """The same configuration for TensorFlow: the twin model and the same input values as TF tensors."""
    import tensorflow as tf

    with tf.device("/GPU:0" if w.device == "cuda" else "/CPU:0"):
        inputs = tuple(tf.constant(x.cpu().numpy()) for x in w.inputs)
    return Workload(w.model_name, w.kind, tf_module, inputs, w.dtype, w.device, w.batch_size, w.seq_len,
                    w.image_size, framework="tensorflow")
