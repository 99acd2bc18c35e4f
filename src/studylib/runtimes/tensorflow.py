"""TensorFlow eager, tf.function and XLA on the model's twin, compiled cold; `compilations` counts traces."""

from __future__ import annotations

import numpy as np

from .base import Prepared, Runtime, RuntimeUnavailable, device_sync, registered


class _TF(Runtime):
    framework = "tensorflow"
    family = "tensorflow"

    @staticmethod
    def _check(workload) -> None:
        if workload.dtype != "fp32":
            raise RuntimeUnavailable(f"TensorFlow variants run in fp32 only in this study (asked {workload.dtype})")
        if workload.device == "cuda":
            import tensorflow as tf

            if not tf.config.list_physical_devices("GPU"):
                raise RuntimeUnavailable("this TensorFlow build sees no GPU")

    @staticmethod
    def to_numpy(output):
        return np.asarray(output, dtype="float64")


class TFEager(_TF):
    name = "tf-eager"

    def prepare(self, workload) -> Prepared:
        self._check(workload)
        return Prepared(workload.module, workload.inputs, device_sync(workload.device))


class TFFunction(_TF):
    """A tf.function graph of the model; with jit_compile=True, XLA compiles it (once per input shape)."""

    def __init__(self, jit_compile: bool):
        self.jit_compile = jit_compile
        self.name = "tf-xla" if jit_compile else "tf-function"

    def prepare(self, workload) -> Prepared:
        import tensorflow as tf

        self._check(workload)
        fn = tf.function(workload.module, jit_compile=self.jit_compile)
        return Prepared(fn, workload.inputs, device_sync(workload.device),
                        compilations=fn.experimental_get_tracing_count)


RUNTIMES = [
    registered(TFEager(), "TensorFlow, the same weights, run eagerly", "Oranges", "02"),
    registered(TFFunction(jit_compile=False), "TensorFlow, the same weights, traced into a tf.function graph", "Oranges",
               "02"),
    registered(TFFunction(jit_compile=True), "tf.function compiled by XLA (jit_compile=True)", "Oranges", "02"),
]
