"""Keras 3 on its three backends, and Keras 2, as runtimes (study 05).

Three ways to run a Keras model, per backend:
- `keras-<backend>`: `model.predict_on_batch(x)` after `model.compile(jit_compile=False)`: what a Keras user
  calls for inference. TensorFlow traces a tf.function graph; JAX and PyTorch run op by op.
- `keras-<backend>-jit`: the same after `compile(jit_compile=True)`: XLA on TensorFlow and JAX,
  torch.compile on PyTorch. Compilation happens in the first call, which is timed on its own.
- `keras-<backend>-call`: calling the model directly, `model(x, training=False)`, on inputs already converted
  to the backend's tensors: eager on every backend, without predict's input and output handling.
`keras2-tensorflow` is Keras 2 (tf-keras) with predict_on_batch, its default graph mode.

predict_on_batch takes numpy and returns numpy: the host copies (and, on a GPU, the transfers) are inside the
timed call, as a Keras user gets them; the direct call waits for the device (JAX's block_until_ready, CUDA
synchronize) without copying the output back. The Keras model is handed over by the workload (keras_models.build
in the configuration's process); its backend is the process's (KERAS_BACKEND, grouping.process_env).
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

from .base import Prepared, Runtime, RuntimeUnavailable, device_sync, sync_is_removed
from .keras_process import check_backend, keras_module, to_numpy

BACKENDS = ("torch", "tensorflow", "jax")  # Keras 3's, in the order study 05 runs their processes
CALLS = {"predict": "", "jit": "-jit", "call": "-call"}


class KerasRuntime(Runtime):
    framework = "keras"
    family = "keras"

    def __init__(self, backend: str, call: str):
        self.backend, self.call = backend, call
        self.name = f"keras-{backend}{CALLS[call]}"

    @property
    def uses_dynamo(self) -> bool:
        return self.backend == "torch" and self.call == "jit"  # Keras's jit_compile on torch is torch.compile

    def warm_up(self) -> float:
        check_backend(self.backend)
        if self.uses_dynamo:  # Keras's layers make dynamo warn per graph break and recompile; the row counts them

            import torch

            torch._logging.set_logs(dynamo=logging.ERROR)
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\._dynamo")
        return 0.0

    def prepare(self, workload) -> Prepared:
        check_backend(self.backend)
        model = workload.module
        if self.call == "call":
            import keras

            tensors = tuple(keras.ops.convert_to_tensor(x) for x in workload.inputs)
            return Prepared(self._outside_inference_mode(self._direct(model, workload.device)), tensors, None,
                            notes="direct call model(x, training=False) on backend tensors")
        model.compile(jit_compile=self.call == "jit")
        return Prepared(self._outside_inference_mode(model.predict_on_batch), workload.inputs, None,
                        notes=f"predict_on_batch (numpy in and out), jit_compile={self.call == 'jit'}")

    def _outside_inference_mode(self, fn):
        """On the torch backend, `fn` run with grad off but outside torch.inference_mode, which the native variants
        of its group hold while they are timed: Keras's torch.compile fails under inference mode (a dynamo guard
        error), and Keras's own predict uses no_grad. Entering the two modes costs microseconds a call."""
        if self.backend != "torch":
            return fn
        import torch

        def call(*xs):
            with torch.inference_mode(False), torch.no_grad():
                return fn(*xs)

        return call

    def _direct(self, model, device: str):
        """model(x) that returns only once the device is done (the output stays on the device)."""
        if self.backend == "jax" and not sync_is_removed():
            def call(*xs):
                return model(*xs, training=False).block_until_ready()
        elif device == "cuda" and self.backend != "jax" and (sync := device_sync(device)) is not None:
            # the torch and TensorFlow backends: the one device synchronize (base.device_sync)

            def call(*xs):
                out = model(*xs, training=False)
                sync()
                return out
        else:  # eager PyTorch and TensorFlow on a CPU return when the work is done
            def call(*xs):
                return model(*xs, training=False)
        return call

    @staticmethod
    def to_numpy(output):
        return to_numpy(output)


class Keras2Runtime(Runtime):
    """Keras 2 (tf-keras) predict_on_batch: a tf.function graph, as Keras 2 runs predict by default."""

    name = "keras2-tensorflow"
    framework = "keras2"
    family = "keras"
    backend = "tensorflow"

    def warm_up(self) -> float:
        keras_module("keras2")
        return 0.0

    def prepare(self, workload) -> Prepared:
        if workload.module is None:
            raise RuntimeUnavailable("no Keras 2 model for this configuration")
        return Prepared(workload.module.predict_on_batch, workload.inputs, None,
                        notes="Keras 2 (tf-keras) predict_on_batch (numpy in and out)")

    @staticmethod
    def to_numpy(output):
        return np.asarray(output).astype("float64")


def all_runtimes() -> list[Runtime]:
    return [KerasRuntime(b, call) for b in BACKENDS for call in CALLS] + [Keras2Runtime()]
