"""What each configuration runs: its model, its inputs and the eager PyTorch reference parity is checked against."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import runtimes
from ..core.config import REFERENCE, Config
from ..workloads import models, work


def check_length(c: Config) -> models.ModelSpec:
    """The model's spec; a skipped row where the configuration's sequence is longer than the model's positions."""
    spec = models.spec(c.model)
    if c.seq_len is not None and spec.max_positions and c.seq_len > spec.max_positions:
        raise runtimes.RuntimeUnavailable(f"sequence length {c.seq_len} exceeds {c.model}'s "
                                          f"{spec.max_positions} positions")
    return spec


class Workloads:
    """Builds each model once per dtype (and its TensorFlow twin when asked) and each eager reference once per shape."""

    def __init__(self, seed: int, cache_dir=None):
        self.seed = seed
        self.cache_dir = cache_dir
        self._modules: dict[tuple, Any] = {}
        self._tf_modules: dict[tuple, Any] = {}
        self._references: dict[tuple, np.ndarray] = {}

    def __getstate__(self) -> dict:
        """Pickled (for a replicate's process) without built models or cached outputs."""
        state = self.__dict__.copy()
        for k, v in state.items():
            if isinstance(v, dict) and k.startswith("_"):
                state[k] = {}
        return state

    def _torch_module(self, c: Config):
        mkey = (c.model, c.dtype, c.device)
        if mkey not in self._modules:
            self._release()  # one model in memory at a time
            self._modules[mkey] = models.build_torch(c.model, seed=self.seed, dtype=c.dtype, device=c.device)
        return self._modules[mkey]

    def _release(self) -> None:
        self._modules.clear()
        self._references.clear()
        if self._tf_modules:
            self._tf_modules.clear()
            import tensorflow as tf

            tf.keras.backend.clear_session()

    def workload(self, c: Config, framework: str = "torch") -> models.Workload:
        """The configuration's model and inputs, as the runtime's framework takes them."""
        check_length(c)
        w = models.torch_workload(c.model, batch_size=c.batch_size, seq_len=c.seq_len, image_size=c.image_size,
                                  dtype=c.dtype, device=c.device, seed=self.seed, module=self._torch_module(c))
        w.cache_dir = self.cache_dir
        if framework == "torch":
            return w
        if framework != "tensorflow":
            raise ValueError(f"unknown framework {framework!r}")
        if c.dtype != "fp32":
            raise runtimes.RuntimeUnavailable(f"TensorFlow variants run in fp32 only in this study (asked {c.dtype})")
        try:
            import tensorflow  # noqa: F401
        except ImportError:
            raise runtimes.RuntimeUnavailable("tensorflow is not installed") from None
        mkey = (c.model, c.dtype, c.device)
        if mkey not in self._tf_modules:
            self._tf_modules[mkey] = models.build_tf_from_torch(c.model, w.module)
        return models.tf_workload(w, self._tf_modules[mkey])

    def timed_call(self, prepared: runtimes.Prepared, c: Config, w: models.Workload):
        """What `measure` times: one call on the workload's inputs."""
        return prepared.call

    def first_call(self, prepared: runtimes.Prepared, c: Config, w: models.Workload, runtime: runtimes.Runtime,
                   call):
        """The configuration's first call, whose output `as_array` reads for parity: the timed call itself."""
        return call

    def as_array(self, output: Any, runtime: runtimes.Runtime, c: Config) -> np.ndarray:
        return runtime.to_numpy(output)

    def rates(self, c: Config, w: models.Workload, median_s: float) -> dict[str, Any]:
        return {"throughput_samples_s": c.batch_size / median_s,
                "throughput_tokens_s": (w.tokens_per_call / median_s) if w.tokens_per_call else None}

    def work(self, c: Config) -> dict[str, Any]:
        """FLOPs and bytes of one timed call (work.work_per_call), on the real model where the meta device fails."""
        def real():
            w = self.workload(c)
            return w.module, w.inputs

        w = work.work_per_call(c.model, dtype=c.dtype, batch_size=c.batch_size, seq_len=c.seq_len,
                                   image_size=c.image_size, real=real)
        return {"flops_per_call": w.flops, "bytes_per_call": w.bytes}

    def reference_is_eager(self, c: Config) -> bool:
        """Whether `c`'s parity reference is eager PyTorch's output (made in the PyTorch worker, bench/workers.py)."""
        return True

    def has_reference(self, c: Config) -> bool:
        return c.shape_key in self._references

    def set_reference(self, c: Config, output: np.ndarray) -> None:
        self._references[c.shape_key] = output

    def reference(self, c: Config) -> np.ndarray:
        """Eager PyTorch output on the configuration's inputs, in its dtype."""
        if c.shape_key not in self._references:
            w = self.workload(c)
            eager = runtimes.get(REFERENCE)
            with eager.context():
                self._references[c.shape_key] = eager.to_numpy(w.module(*w.inputs))
        return self._references[c.shape_key]
