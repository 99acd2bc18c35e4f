"""What the layers below the runtimes need to know of a variant: whether it changes the outputs (a quantized
runtime). studylib.runtimes fills it from its registrations when it is imported, as the studies fill
core/study_registry.py."""

from __future__ import annotations

import re

QUANTIZED: set[str] = set()  # the registered variants (and their copies) whose runtime is quantized


def changes_outputs(name) -> bool:
    """Whether the variant an option's name starts with ('ort-int8', 'ort-int8-aa', 'ort-int8 · sorted',
    'torch-int8 @jax') changes the outputs: decision tables set such options apart from the full-precision ones."""
    if not QUANTIZED:
        raise LookupError("no runtime is registered: import studylib.runtimes before asking what a variant does")
    return re.split(r" · | @", str(name))[0] in QUANTIZED
