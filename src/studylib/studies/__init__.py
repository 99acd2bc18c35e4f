"""One module per study: its profile section, its grid of configurations and the analysis its notebook shows.

Each module registers a `Study` (see base); STUDIES is the registry, by notebook id, in reading order.
"""

from __future__ import annotations

# each registers itself: a study, or its claim evaluators (claims.register_evaluators)
from . import (  # noqa: F401 - each registers itself
    eager_vs_compiled,
    keras_backends,
    onnx_batching,
    sorted_batching,
    text_generation,
    torchscript_vs_xla,
)
from .base import REGISTRY as STUDIES
from .base import Analysis, Comparison, Study, register, unregister

__all__ = ["STUDIES", "Analysis", "Comparison", "Study", "register", "unregister"]
