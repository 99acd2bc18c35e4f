"""Two frameworks in one process: a variant run in a worker it shares with another framework's (issue 62 item 4).

Each framework is measured in a process of its own, as its users run it (bench/workers.py). A reader who deploys
PyTorch and TensorFlow in one process meets two costs that setting hides: PyTorch's OpenMP threads spin for a while
after each parallel region and can take the cores TensorFlow needs next, and the usual cure for that,
OMP_WAIT_POLICY=PASSIVE (this study's own setting until timing method 4), makes every one of eager PyTorch's many
small parallel regions wake sleeping threads. So study 02 times, beside each variant in its own process:
- `<variant>-shared`: the same variant in the worker 'shared', which holds every `-shared` variant of the group
  (eager PyTorch and tf.function side by side, OpenMP's own wait policy);
- `<variant>-shared-passive`: the same in 'shared-passive', started with OMP_WAIT_POLICY=PASSIVE.
Each is its original in every other way (the same preparation, parity and memory), paired with it in the same rounds.
"""

from __future__ import annotations

from ..core.config import SHARED_SETTINGS
from .aa import AACopy
from .base import Runtime


class SharedProcess(AACopy):
    """`original` measured in the worker `setting` ('shared' or 'shared-passive'), under `<original>-<setting>`."""

    def __init__(self, original: Runtime, setting: str):
        super().__init__(original)
        self.setting = setting
        self.name = f"{original.name}-{setting}"

    @property
    def process(self) -> str:
        return self.setting

    def copies_weights_of(self, workload) -> bool:
        return self.original.copies_weights_of(workload)

    def prepare(self, workload):
        return self.original.prepare(workload)  # in a process of its own: the original's model, not a copy of it


def of(original: Runtime) -> list[Runtime]:
    """The original in each shared setting."""
    return [SharedProcess(original, s) for s in SHARED_SETTINGS]
