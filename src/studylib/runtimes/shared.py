"""`<variant>-shared(-passive)`: the original in a worker shared with the other framework (study 02)."""

from __future__ import annotations

from ..core.config import SHARED_SETTINGS
from .aa import AACopy
from .base import Runtime, registered

# original -> (palette, its gloss in each of SHARED_SETTINGS)
GLOSSES = {
    "eager": ("Greys", ("eager PyTorch in one process with TensorFlow (OpenMP's own wait policy)",
                        "eager PyTorch in one process with TensorFlow, under OMP_WAIT_POLICY=PASSIVE (idle OpenMP "
                        "threads sleep), a setting often given a process that holds both frameworks")),
    "tf-function": ("YlOrRd", ("tf.function in one process with PyTorch (OpenMP's own wait policy)",
                               "tf.function in one process with PyTorch, under OMP_WAIT_POLICY=PASSIVE")),
}


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


def runtimes(registry: dict[str, Runtime]) -> list[Runtime]:
    """Each original of GLOSSES in each shared setting, registered (study 02)."""
    return [registered(SharedProcess(registry[name], setting), gloss, colours, "02")
            for name, (colours, glosses) in GLOSSES.items() for setting, gloss in zip(SHARED_SETTINGS, glosses)]
