"""Study 07's workload: a decoder-only model, unpadded prompts, the phase a call runs, and its work."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import corpus, models, tokenization

PHASES = ("prefill", "decode", "generate")
TOKENIZER_VOCAB = 8000  # the corpus BPE's size (the data-set studies' too); every model's vocabulary holds its ids
BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


@dataclass
class GenerationWorkload:
    """One configuration's model, prompt and phase: what study 07's runners prepare (runtimes/generation*.py)."""

    model_name: str
    lm: Any  # the transformers causal LM (LlamaForCausalLM, GPT2LMHeadModel), eval mode
    prompt: Any  # (batch, prompt length) token ids
    continuation: Any  # (batch, new tokens) ids after each prompt: parity's teacher-forced tokens
    phase: str
    new_tokens: int
    dtype: str
    device: str
    batch_size: int
    seq_len: int  # the prompt's length
    module: Any = None  # eager's runner (runtimes.generation.eager_runner): what the registered eager runtime calls
    # how `ort` and `ort-int8` prepare it (runtimes.generation_ort.prepare_generation)
    onnxruntime: Any = None
    inputs: tuple = ()
    kind: str = "text"
    framework: str = "torch"
    cache_dir: Path | None = None
    max_shape: tuple | None = None
    image_size: int | None = None

    @property
    def decode_context(self) -> int:
        """Positions already in the cache when the decode phase's one step runs: the prompt and half the new tokens."""
        return self.seq_len + self.new_tokens // 2

    @property
    def cache_len(self) -> int:
        """Positions a cache must hold: the prompt and every new token."""
        return self.seq_len + self.new_tokens

    @property
    def tokens_per_call(self) -> int:
        """Tokens a call produces or reads: the prompt's (prefill), one per row (decode), the new ones (generate)."""
        per_row = {"prefill": self.seq_len, "decode": 1, "generate": self.new_tokens}[self.phase]
        return self.batch_size * per_row


def build_lm(name: str, *, seed: int, dtype: str = "fp32", device: str = "cpu"):
    """The causal LM of a registry name (family llama-lm or gpt2-lm), random weights from `seed`, in eval mode."""
    import torch
    import transformers

    s = models.spec(name)
    if s.family not in ("llama-lm", "gpt2-lm"):
        raise ValueError(f"{name!r} is not a causal language model (study 07 generates text)")
    torch.manual_seed(seed)
    with models._quiet_transformers():
        config = models._config(s)
        lm = getattr(transformers, models.FAMILIES[s.family].torch_class)(config).eval()
    return lm.to(device=device, dtype=getattr(torch, models.TORCH_DTYPES[dtype]))


def token_stream(cache_dir: Path | None) -> list[int]:
    """The corpus's texts tokenized by the study's BPE (trained once, cached in `cache_dir`), joined into one stream."""
    text = corpus.load()
    tok = tokenization.get_tokenizer(text, vocab_size=TOKENIZER_VOCAB,
                                     cache_dir=Path(cache_dir) if cache_dir else Path(tempfile.gettempdir()))
    return [i for ids in tokenization.encode(tok, text.texts, 100_000) for i in ids]


def prompts(stream: list[int], *, batch_size: int, prompt_len: int, new_tokens: int, vocab_size: int,
            device: str = "cpu"):
    """(prompt, continuation): row i is the stream's i-th window of prompt_len + new_tokens ids, wrapping around."""
    import torch

    if not stream:
        raise ValueError("the token stream is empty")
    width = prompt_len + new_tokens
    rows = [[stream[(i * width + j) % len(stream)] % vocab_size for j in range(width)] for i in range(batch_size)]
    ids = torch.tensor(rows, dtype=torch.long, device=device)
    return ids[:, :prompt_len].contiguous(), ids[:, prompt_len:].contiguous()


def _shape(name: str) -> dict:
    """Layers, hidden size, KV heads, head size and vocabulary of a causal LM in the registry (from its config)."""
    s = models.spec(name)
    c = s.config
    if s.family == "gpt2-lm":
        layers, hidden, heads = c.get("n_layer", 12), c.get("n_embd", 768), c.get("n_head", 12)
        return dict(layers=layers, hidden=hidden, kv_heads=heads, head_dim=hidden // heads, vocab=s.vocab_size,
                    ffn=4 * hidden, q_heads=heads)
    hidden, heads = c.get("hidden_size", 4096), c.get("num_attention_heads", 32)
    return dict(layers=c.get("num_hidden_layers", 32), hidden=hidden, kv_heads=c.get("num_key_value_heads", heads),
                head_dim=hidden // heads, vocab=s.vocab_size, ffn=c.get("intermediate_size", 11008), q_heads=heads)


def kv_cache_bytes(name: str, *, batch_size: int, positions: int, dtype: str) -> int:
    """Bytes of a KV cache holding `positions` tokens per row: keys and values of every layer's KV heads."""
    m = _shape(name)
    return 2 * m["layers"] * m["kv_heads"] * m["head_dim"] * positions * batch_size * BYTES[dtype]


def layer_params(name: str) -> int:
    """Weights a token's pass through the layers multiplies by (attention and MLP projections of every layer)."""
    m = _shape(name)
    h, kv = m["hidden"], m["kv_heads"] * m["head_dim"]
    mlp = (3 if models.spec(name).family == "llama-lm" else 2) * h * m["ffn"]
    return m["layers"] * (2 * h * h + 2 * h * kv + mlp)


def matmul_params(name: str) -> int:
    """Weights a token's forward multiplies by: the layers' projections and the LM head."""
    m = _shape(name)
    return layer_params(name) + m["hidden"] * m["vocab"]


def weight_bytes(name: str, dtype: str) -> int:
    """Bytes of weights a forward reads once: the multiplied weights (the embedding row read is left out)."""
    return matmul_params(name) * BYTES[dtype]


def work(name: str, *, phase: str, batch_size: int, prompt_len: int, new_tokens: int, dtype: str) -> dict[str, int]:
    """FLOPs and bytes read of one call of `phase`, from the model's shape (docs/method.md, "Workloads")."""
    m = _shape(name)
    attn = 4 * m["q_heads"] * m["head_dim"] * m["layers"]  # FLOPs per token per position attended (QK^T and AV)
    w = weight_bytes(name, dtype)

    def prefill(n: int) -> tuple[int, int]:  # the LM head at the last position only: the logits generation reads
        head = 2 * (matmul_params(name) - layer_params(name)) * batch_size
        return (2 * layer_params(name) * batch_size * n + head + attn * batch_size * n * (n + 1) // 2,
                w + kv_cache_bytes(name, batch_size=batch_size, positions=n, dtype=dtype))

    def step(ctx: int) -> tuple[int, int]:
        return (2 * matmul_params(name) * batch_size + attn * batch_size * (ctx + 1),
                w + kv_cache_bytes(name, batch_size=batch_size, positions=ctx + 1, dtype=dtype))

    if phase == "prefill":
        flops, moved = prefill(prompt_len)
    elif phase == "decode":
        flops, moved = step(prompt_len + new_tokens // 2)
    else:
        parts = [prefill(prompt_len)] + [step(prompt_len + i) for i in range(new_tokens - 1)]
        flops, moved = sum(p[0] for p in parts), sum(p[1] for p in parts)
    return {"flops_per_call": int(flops), "bytes_per_call": int(moved)}
