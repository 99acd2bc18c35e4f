"""Keras twins of study 05's models, with shared weights and the Keras reference output (docs/method.md)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import numpy as np

from .. import runtimes
from ..core.config import Config
from ..core.files import write_bytes_atomic
from ..machine.threads import tensorflow_start_up_log
from ..runtimes.base import RuntimeUnavailable
from ..runtimes.keras_process import backend, check_backend, keras_module, to_numpy
from ..workloads import models
from .builder import Workloads, check_length

KERAS_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


@contextlib.contextmanager
def _dtype_policy(k, dtype: str):
    """Build under a dtype policy (bf16: variables and compute in bfloat16, as the native model's .to(bf16))."""
    if k.__name__ == "tf_keras":
        if dtype != "fp32":
            raise RuntimeUnavailable(f"Keras 2 runs fp32 only in this study (asked {dtype})")
        yield
        return
    old = k.config.dtype_policy()
    k.config.set_dtype_policy(KERAS_DTYPES[dtype])
    try:
        yield
    finally:
        k.config.set_dtype_policy(old)


def _encoder(k, name: str):
    """A post-norm BERT-style Keras 3 encoder sized as `name`'s transformers config; returns the last hidden state."""
    s = models.spec(name)
    if s.family != "bert":
        raise RuntimeUnavailable(f"no Keras build of {name} (study 05 mirrors BERT-style encoders and resnet-50)")
    cfg = models._config(s)
    hidden, heads = cfg.hidden_size, cfg.num_attention_heads
    ops = k.ops

    class Embeddings(k.layers.Layer):
        """Token + position + segment (all zero, as the native model's default) embeddings."""

        def build(self, input_shape):
            self.tokens = self.add_weight(shape=(cfg.vocab_size, hidden), name="tokens")
            self.positions = self.add_weight(shape=(cfg.max_position_embeddings, hidden), name="positions")
            self.segments = self.add_weight(shape=(cfg.type_vocab_size, hidden), name="segments")

        def call(self, ids):
            seq = ops.shape(ids)[1]
            return ops.take(self.tokens, ids, axis=0) + self.positions[:seq][None] + self.segments[0][None, None]

        def compute_output_shape(self, input_shape):
            return (*input_shape, hidden)

    ids = k.Input(shape=(None,), dtype="int32", name="input_ids")
    x = k.layers.LayerNormalization(epsilon=cfg.layer_norm_eps, name="embeddings_norm")(Embeddings(name="embeddings")(ids))
    for i in range(cfg.num_hidden_layers):
        a = k.layers.MultiHeadAttention(heads, hidden // heads, name=f"layer{i}_attention")(x, x)
        x = k.layers.LayerNormalization(epsilon=cfg.layer_norm_eps, name=f"layer{i}_attention_norm")(x + a)
        f = k.layers.Dense(cfg.intermediate_size, activation="gelu", name=f"layer{i}_intermediate")(x)
        f = k.layers.Dense(hidden, name=f"layer{i}_output")(f)
        x = k.layers.LayerNormalization(epsilon=cfg.layer_norm_eps, name=f"layer{i}_output_norm")(x + f)
    return k.Model(ids, x, name=f"keras-{name}")


def _resnet(k, name: str, image_size: int):
    if name != "resnet-50":
        raise RuntimeUnavailable(f"no Keras build of {name} (keras.applications mirrors resnet-50 only)")
    if image_size < 32:
        raise RuntimeUnavailable(f"keras.applications.ResNet50 takes images of 32 pixels or more (asked {image_size})")
    return k.applications.ResNet50(weights=None, input_shape=(image_size, image_size, 3), classifier_activation=None)


def _architecture(k, name: str, image_size: int | None):
    s = models.spec(name)
    if s.kind == "vision":
        return _resnet(k, name, image_size)
    if k.__name__ == "tf_keras":
        raise RuntimeUnavailable("the text encoder has no Keras 2 build here (Keras 2 vs 3 is compared on ResNet-50)")
    return _encoder(k, name)


def _save_npz(path: Path, *arrays, **named) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, *arrays, **named)
    write_bytes_atomic(path, buffer.getvalue())


def build(name: str, *, dtype: str = "fp32", image_size: int | None = None, seed: int = 0, cache_dir: Path,
          flavour: str = "keras"):
    """The Keras model of `name` in `dtype` with the study's shared weights (made from `seed` on first use)."""
    k = keras_module(flavour)
    path = Path(cache_dir) / "keras" / f"{name}.weights.npz"
    if not path.exists():  # the first process to need them makes them, in fp32, and saves them
        if flavour != "keras":
            raise RuntimeUnavailable(f"{name}'s Keras weights are made by a Keras 3 variant first (none ran)")

        with tensorflow_start_up_log():  # seeding Keras seeds TensorFlow too where it is installed (importing it)
            k.utils.set_random_seed(seed)
        with _dtype_policy(k, "fp32"):
            first = _architecture(k, name, image_size)
        _save_npz(path, *[np.asarray(w, dtype="float32") for w in first.get_weights()])
        if dtype == "fp32":
            return first
        del first
    with np.load(path) as saved:
        weights = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    with _dtype_policy(k, dtype):
        model = _architecture(k, name, image_size)
    if len(weights) != len(model.weights):
        raise ValueError(f"{name}: {len(weights)} saved weights, the {flavour} model has {len(model.weights)}")
    model.set_weights(weights)  # cast to the model's dtype
    return model


def inputs(name: str, *, batch_size: int, seq_len: int | None = None, image_size: int | None = None,
           seed: int = 0) -> tuple[np.ndarray]:
    """Fixed-seed numpy inputs, channels last as Keras takes images: token ids (int32), or pixels (float32)."""
    s = models.spec(name)
    rng = np.random.default_rng(seed)
    if s.kind == "text":
        return (rng.integers(0, s.vocab_size, size=(batch_size, seq_len), dtype="int32"),)
    return (rng.standard_normal((batch_size, image_size, image_size, 3), dtype="float32"),)


def _is_keras(c: Config) -> bool:
    return runtimes.family(c.variant) == "keras"


class KerasWorkloads(Workloads):
    """Study 05's workloads: Keras variants get their flavour's Keras model, numpy inputs and the Keras reference."""

    def __init__(self, seed: int, cache_dir=None):
        super().__init__(seed, cache_dir=cache_dir)
        self._keras: dict[tuple, Any] = {}

    def _release(self) -> None:
        if self._keras:
            self._keras.clear()
            keras_module().backend.clear_session()
        super()._release()

    def workload(self, c: Config, framework: str = "torch") -> models.Workload:
        if framework not in ("keras", "keras2"):
            return super().workload(c, framework)
        s = check_length(c)
        if c.backend is not None:
            check_backend(c.backend)
        # a model per variant: compile() (jit or not) and predict's state belong to the model object
        mkey = (c.variant, c.model, c.dtype, c.image_size)
        if mkey not in self._keras:
            if any(k[1] != c.model for k in self._keras):
                self._release()  # one model (the native one and its Keras twins) in memory at a time
            self._keras[mkey] = build(c.model, dtype=c.dtype, image_size=c.image_size, seed=self.seed,
                                      cache_dir=self.cache_dir, flavour=framework)
        x = inputs(c.model, batch_size=c.batch_size, seq_len=c.seq_len, image_size=c.image_size, seed=self.seed)
        return models.Workload(c.model, s.kind, self._keras[mkey], x, c.dtype, c.device, c.batch_size,
                               c.seq_len if s.kind == "text" else None, c.image_size if s.kind == "vision" else None,
                               framework=framework, cache_dir=self.cache_dir)

    def reference_is_eager(self, c: Config) -> bool:
        return not _is_keras(c)  # a Keras variant's is the shape's saved Keras output, made in its own process

    def has_reference(self, c: Config) -> bool:
        return (c.shape_key, "keras") in self._references if _is_keras(c) else super().has_reference(c)

    def set_reference(self, c: Config, output: np.ndarray) -> None:
        if _is_keras(c):
            self._references[(c.shape_key, "keras")] = output
        else:
            super().set_reference(c, output)

    def reference(self, c: Config) -> np.ndarray:
        """Keras variants: the shape's saved Keras output, made and saved by the first process to need it."""
        if not _is_keras(c):
            return super().reference(c)
        key = (c.shape_key, "keras")
        if key not in self._references:
            size = f"s{c.seq_len}" if c.seq_len is not None else f"i{c.image_size}"
            shape = f"{c.model}-{c.dtype}-{c.device}-b{c.batch_size}-{size}-seed{self.seed}"
            safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in shape)
            path = Path(self.cache_dir) / "keras" / f"{safe}.reference.npz"
            if not path.exists():
                w = self.workload(c, "keras")
                _save_npz(path, output=to_numpy(w.module(*w.inputs, training=False)), backend=np.asarray(backend()))
            with np.load(path) as saved:
                self._references[key] = saved["output"]
        return self._references[key]
