"""A/A copies: `<variant>-aa` is `<variant>` prepared again on its own copy of the model (docs/method.md)."""

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


def module_copy(module):
    """A deep copy of a PyTorch module, made as the original was (inference tensors or not)."""
    import torch

    params = list(module.parameters())
    with torch.inference_mode(bool(params) and params[0].is_inference()):
        return copy.deepcopy(module)


class AACopy:
    """`original` as `<original>-aa`, prepared again on a copy; everything else is the original's."""

    def __init__(self, original: Runtime):
        self.original = original
        self.name = aa_of(original.name)

    def __getattr__(self, name):
        if name == "original":
            raise AttributeError(name)
        return getattr(self.original, name)

    @property
    def process(self) -> str:
        """A second worker of its original's framework: the A/A pair is timed across processes, as every pair is."""
        return f"{self.original.process}~aa"

    def copies_weights_of(self, workload) -> bool:
        """A PyTorch workload's module is deep-copied in `prepare`: its weights are counted there."""
        return (self.framework == "torch" and hasattr(workload.module, "parameters")) \
            or self.original.copies_weights_of(workload)

    def prepare(self, workload) -> Prepared:
        if self.framework != "torch" or not hasattr(workload.module, "parameters"):
            return self.original.prepare(workload)
        # the workload on a deep copy of its module and clones of its inputs (the originals untouched)
        prepared = self.original.prepare(dataclasses.replace(workload, module=module_copy(workload.module),
                                                             inputs=tuple(_twin(x) for x in workload.inputs)))
        inner = prepared.adapt

        def adapt(batch: tuple) -> tuple:  # each batch of a data-set pass cloned too, then adapted as the original does
            return inner(tuple(_twin(x) for x in batch))

        prepared.adapt = adapt
        return prepared
