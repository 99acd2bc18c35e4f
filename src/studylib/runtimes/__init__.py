"""Runtimes: each prepares a Workload once into a ready call; declared once in its family file's RUNTIMES."""

from __future__ import annotations

from typing import Literal

from ..core import variants
from ..core.config import is_aa
from . import export_aoti, generation, int8, keras, onnxrt, pytorch, shared, tensorflow
from .aa import AACopy
from .base import Prepared, Runtime, RuntimeUnavailable

_ORIGINALS: list[Runtime] = [*pytorch.RUNTIMES, *export_aoti.RUNTIMES, *int8.RUNTIMES, *generation.RUNTIMES, *tensorflow.RUNTIMES,
                             *onnxrt.RUNTIMES, *keras.RUNTIMES]
# every runtime, and its A/A copy `<name>-aa` (runtimes/aa.py: the same runtime prepared again on its own copy)
REGISTRY: dict[str, Runtime] = {r.name: r for o in _ORIGINALS for r in (o, AACopy(o))}
# eager PyTorch and tf.function in a process they share, with and without OMP_WAIT_POLICY=PASSIVE (runtimes/shared.py)
REGISTRY |= {r.name: r for r in shared.runtimes(REGISTRY)}
variants.QUANTIZED.update(name for name, r in REGISTRY.items() if r.quantized)


def family(name: str) -> str | None:
    """The family of the runtime called `name` (Runtime.family), or None for a name no runtime has."""
    return getattr(REGISTRY.get(name), "family", None)


def get(name: str) -> Runtime:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown runtime {name!r} (known: {', '.join(REGISTRY)})") from None


def declared() -> list[Runtime]:
    """Every registered variant but the A/A copies, in registration order."""
    return [r for name, r in REGISTRY.items() if not is_aa(name) and r.gloss]


def offered(notebook: str | None = None):
    """The Literal of variant names offered in `notebook` (by its number), or every registered one where None."""
    number = notebook.split("_")[0] if notebook else None
    return Literal[tuple(r.name for r in declared() if number is None or number in r.studies)]


__all__ = ["REGISTRY", "Prepared", "Runtime", "RuntimeUnavailable", "declared", "family", "get", "offered"]
