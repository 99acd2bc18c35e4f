"""A/A copies: `<variant>-aa` is `<variant>` prepared a second time, independently, on its own copy of the model.

A copy runs the same code as its original; any difference a study reports between the two is noise, so how often
the pair comes out "significantly different" is the method's false-positive rate (speedups.aa_calibration). The
copy is built again from scratch: a PyTorch workload's module is deep-copied and its inputs cloned (made as the
originals were, inference tensors or not: an inference tensor takes a faster path than a normal one, and the control
would measure that, not noise), then the original's own `prepare` traces, exports, opens a session or wraps a
tf.function on that copy. A TensorFlow or Keras workload's model is prepared again as it is (a new tf.function, a
new compiled predict function): its weights are shared, its graph is not.
"""

from __future__ import annotations

import copy
import dataclasses

from ..core.config import aa_of
from .base import Prepared, Runtime


def _twin(x):
    """A copy of a tensor made as the original was (an inference tensor or not); other inputs as they are."""
    import torch

    if not isinstance(x, torch.Tensor):
        return x
    with torch.inference_mode(x.is_inference()):
        return x.clone()


def torch_copy(workload):
    """The workload on a deep copy of its PyTorch module and clones of its inputs (the originals untouched)."""
    import torch

    params = list(workload.module.parameters())
    with torch.inference_mode(bool(params) and params[0].is_inference()):
        module = copy.deepcopy(workload.module)
    return dataclasses.replace(workload, module=module, inputs=tuple(_twin(x) for x in workload.inputs))


class AACopy(Runtime):
    """The A/A copy of `original`: the same runtime under the name `<original>-aa`, prepared again on a copy."""

    def __init__(self, original: Runtime):
        self.original = original
        self.name = aa_of(original.name)
        self.framework = original.framework
        self.precision = original.precision
        self.family = original.family

    @property
    def process(self) -> str:
        """A second worker of its original's framework: the A/A pair is timed across processes, as every pair is."""
        return f"{self.original.process}~aa"

    @property
    def uses_dynamo(self) -> bool:
        return self.original.uses_dynamo

    def copies_weights_of(self, workload) -> bool:
        """A PyTorch workload's module is deep-copied in `prepare` (see `prepare`): its weights are counted there."""
        return (self.framework == "torch" and hasattr(workload.module, "parameters")) \
            or self.original.copies_weights_of(workload)

    def process_env(self, device: str) -> dict[str, str]:
        return self.original.process_env(device)

    def memory_warmup_calls(self, device: str) -> int:
        return self.original.memory_warmup_calls(device)

    def warm_up(self) -> float:
        return self.original.warm_up()

    def context(self):
        return self.original.context()

    def to_numpy(self, output):
        return self.original.to_numpy(output)

    def __getattr__(self, name):  # anything else a study asks of a runtime (e.g. a Keras backend): the original's
        if name == "original":
            raise AttributeError(name)
        return getattr(self.original, name)

    def prepare(self, workload) -> Prepared:
        if self.framework != "torch" or not hasattr(workload.module, "parameters"):
            return self.original.prepare(workload)
        prepared = self.original.prepare(torch_copy(workload))
        inner = prepared.adapt

        def adapt(batch: tuple) -> tuple:  # each batch of a data-set pass cloned too, then adapted as the original does
            return inner(tuple(_twin(x) for x in batch))

        prepared.adapt = adapt
        return prepared
