"""The small interface every runtime implements."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable


class RuntimeUnavailable(Exception):
    """The runtime cannot run here (missing package, no device): recorded as a 'skipped' row."""


@dataclass
class Prepared:
    """A ready-to-time call and how to wait for its device."""

    call: Callable[[], Any]
    sync: Callable[[], Any] | None
    notes: str = ""  # e.g. what the runtime fell back to


class Runtime:
    name: str = ""

    def warm_up(self) -> float:
        """One-time, untimed start-up cost of the runtime in this process (seconds spent; 0 if none)."""
        return 0.0

    def prepare(self, workload) -> Prepared:
        """Build the call for `workload` (trace, compile or export here; the first call may do more)."""
        raise NotImplementedError

    def context(self):
        """Entered around preparation and timing (e.g. torch.inference_mode)."""
        return contextlib.nullcontext()

    @staticmethod
    def to_numpy(output) -> Any:
        """The output as a float64 numpy array, for parity checks."""
        raise NotImplementedError
