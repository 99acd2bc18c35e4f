"""One module per study: its grid of configurations and the analysis its notebook shows."""

from __future__ import annotations

from . import eager_vs_compiled, onnx_batching, sorted_batching, torchscript_vs_xla

STUDIES = {m.NOTEBOOK: m for m in [eager_vs_compiled, torchscript_vs_xla, onnx_batching, sorted_batching]}
