"""Keras 3 on its process's backend, and Keras 2, as runtimes (study 05; docs/method.md, "Keras")."""

from __future__ import annotations

import logging
import warnings

import numpy as np

from .base import Prepared, Runtime, RuntimeUnavailable, device_sync, registered, sync_is_removed
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
        """On the torch backend, `fn` with grad off but outside torch.inference_mode (docs/method.md, "Keras")."""
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
        elif self.backend != "jax" and (sync := device_sync(device)) is not None:
            # the torch and TensorFlow backends on CUDA: the one device synchronize (base.device_sync)
            def call(*xs):
                out = model(*xs, training=False)
                sync()
                return out
        else:  # eager PyTorch and TensorFlow on a CPU return when the work is done
            def call(*xs):
                return model(*xs, training=False)
        return call

    to_numpy = staticmethod(to_numpy)


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


# backend -> its palette, and each call's gloss (CALLS' order)
_GLOSSES = {
    "torch": ("Reds", ("Keras 3 on the PyTorch backend, predict_on_batch",
                       "Keras 3 on the PyTorch backend, jit_compile (torch.compile)",
                       "Keras 3 on the PyTorch backend, a direct model call")),
    "tensorflow": ("YlOrBr", ("Keras 3 on the TensorFlow backend, predict_on_batch (a tf.function graph)",
                              "Keras 3 on the TensorFlow backend, jit_compile (XLA)",
                              "Keras 3 on the TensorFlow backend, a direct (eager) model call")),
    "jax": ("BuPu", ("Keras 3 on the JAX backend, predict_on_batch", "Keras 3 on the JAX backend, jit_compile (XLA)",
                     "Keras 3 on the JAX backend, a direct model call")),
}
RUNTIMES = [registered(KerasRuntime(backend, call), gloss, _GLOSSES[backend][0], "05")
            for backend in BACKENDS for call, gloss in zip(CALLS, _GLOSSES[backend][1])]
RUNTIMES.append(registered(Keras2Runtime(), "Keras 2 (tf-keras) predict_on_batch", "YlOrBr", "05"))
