"""TensorFlow eager, tf.function and XLA on the model's twin, compiled cold; `compilations` counts traces."""

from __future__ import annotations

import numpy as np

from .base import Prepared, Runtime, RuntimeUnavailable, device_sync, registered


class TFRuntime(Runtime):
    """TensorFlow eager (`jit_compile` None) or a tf.function graph; jit_compile=True: XLA (once per input shape)."""

    framework = "tensorflow"
    family = "tensorflow"

    def __init__(self, jit_compile: bool | None):
        self.jit_compile = jit_compile
        self.name = {None: "tf-eager", False: "tf-function", True: "tf-xla"}[jit_compile]

    def prepare(self, workload) -> Prepared:
        if workload.dtype != "fp32":
            raise RuntimeUnavailable(f"TensorFlow variants run in fp32 only in this study (asked {workload.dtype})")
        if workload.device == "cuda" or self.jit_compile is not None:
            import tensorflow as tf

            if workload.device == "cuda" and not tf.config.list_physical_devices("GPU"):
                raise RuntimeUnavailable("this TensorFlow build sees no GPU")
        if self.jit_compile is None:
            return Prepared(workload.module, workload.inputs, device_sync(workload.device))
        fn = tf.function(workload.module, jit_compile=self.jit_compile)
        return Prepared(fn, workload.inputs, device_sync(workload.device),
                        compilations=fn.experimental_get_tracing_count)

    @staticmethod
    def to_numpy(output):
        return np.asarray(output, dtype="float64")


RUNTIMES = [
    registered(TFRuntime(None), "TensorFlow, the same weights, run eagerly", "Oranges", "02"),
    registered(TFRuntime(jit_compile=False), "TensorFlow, the same weights, traced into a tf.function graph", "Oranges",
               "02"),
    registered(TFRuntime(jit_compile=True), "tf.function compiled by XLA (jit_compile=True)", "Oranges", "02"),
]
