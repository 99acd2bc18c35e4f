"""One module per study; importing the package registers every one (STUDIES: by notebook id, in reading order)."""

from __future__ import annotations

import importlib
import pkgutil

from .base import REGISTRY as STUDIES
from .base import Analysis, Comparison, Study, register, unregister

# every module here, so each registers itself (a study, or its claim evaluators): a new study is its own file only
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["STUDIES", "Analysis", "Comparison", "Study", "register", "unregister"]
