"""Whether a variant changes the outputs (a quantized runtime); studylib.runtimes fills QUANTIZED when imported."""

from __future__ import annotations

import re

QUANTIZED: set[str] = set()  # the registered variants (and their copies) whose runtime is quantized


def changes_outputs(name) -> bool:
    """Whether the variant an option's name starts with ('ort-int8 · sorted', 'torch-int8 @jax') changes the outputs."""
    if not QUANTIZED:
        raise LookupError("no runtime is registered: import studylib.runtimes before asking what a variant does")
    return re.split(r" · | @", str(name))[0] in QUANTIZED
