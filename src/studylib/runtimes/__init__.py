"""Runtimes: each prepares a Workload once (compile, trace, export) and returns a zero-argument call.

Preparation is separate from the call, so timing code never needs to know which runtime it times.
Adding a runtime is one class in a family file plus one line in REGISTRY.
"""

from __future__ import annotations

from .base import Prepared, Runtime, RuntimeUnavailable
from .pytorch import TorchCompiled, TorchEager

REGISTRY: dict[str, Runtime] = {
    r.name: r
    for r in [
        TorchEager(),
        TorchCompiled("default"),
        TorchCompiled("reduce-overhead"),
        TorchCompiled("max-autotune"),
    ]
}


def get(name: str) -> Runtime:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown runtime {name!r} (known: {', '.join(REGISTRY)})") from None


__all__ = ["REGISTRY", "Prepared", "Runtime", "RuntimeUnavailable", "get"]
