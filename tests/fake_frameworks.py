"""Fake runtimes of three frameworks for the worker-process tests (tests/test_workers.py).

`register` adds them to the runtime registry: the tests' module does it for its own tests (and takes them out after,
so no other test module sees them), and a worker process does it when it unpickles `FakeWorkloads` (the task's
workloads), so the fakes exist there too. Every call of a fake, and every reference it makes, is appended to the log
file named by FAKE_LOG as one JSON line (what, variant, pid, start and end on the monotonic clock), so a test can
see which process did what and when. A fake's output is the shape's reference plus its `offset`; `die_at` ends its
process at that call (0-based, the first call included) with exit code 3; `cost` is a busy wait per call in seconds,
or a fake clock's step.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from studylib import runtimes
from studylib.bench.builder import Workloads
from studylib.runtimes.aa import AACopy
from studylib.runtimes.base import Prepared, Runtime

LOG_VAR = "FAKE_LOG"
REFERENCE = np.arange(4.0)


def log(**entry) -> None:
    path = os.environ.get(LOG_VAR)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), **entry}) + "\n")


def read_log(path) -> list[dict]:
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


class FakeRuntime(Runtime):
    def __init__(self, name: str, family: str, offset: float = 0.0, die_at: int | None = None, cost: float = 0.0):
        self.name, self.family, self.offset, self.die_at, self.cost = name, family, offset, die_at, cost
        self.clock = None  # a fake clock (tests in one process): a call advances it by `cost` instead of waiting

    def prepare(self, workload) -> Prepared:
        calls = iter(range(10**9))

        def fn(x):
            i = next(calls)
            if i == self.die_at:
                os._exit(3)
            start = time.monotonic()
            if self.clock is not None:
                self.clock.now += self.cost
            else:
                while time.monotonic() - start < self.cost:
                    pass
            log(what="call", variant=self.name, start=start, end=time.monotonic())
            return x + self.offset

        return Prepared(fn, (REFERENCE.copy(),), None)

    @staticmethod
    def to_numpy(output):
        return np.asarray(output, dtype="float64")


FAKES = [FakeRuntime("fake-torch", "eager", cost=0.002), FakeRuntime("fake-tf", "tensorflow", 0.25, cost=0.002),
         FakeRuntime("fake-ort", "onnxruntime", cost=0.002), FakeRuntime("fake-ort-dies", "onnxruntime", die_at=4)]


def register() -> list[str]:
    """The fakes and their A/A copies in the runtime registry; the names added."""
    fakes = {r.name: r for o in FAKES for r in (o, AACopy(o))}
    added = [n for n in fakes if n not in runtimes.REGISTRY]
    runtimes.REGISTRY.update(fakes)
    return added


class FakeWorkloads(Workloads):
    """Workloads of the fakes: the same four numbers for every configuration; eager's reference is REFERENCE,
    logged where it is made."""

    def __setstate__(self, state):  # in a worker process: the fakes are registered there before any is prepared
        register()
        self.__dict__.update(state)

    def workload(self, c, framework="torch"):
        class W:
            module, inputs, cache_dir = None, (), None

        return W()

    def reference(self, c):
        if c.shape_key not in self._references:
            log(what="reference", variant=c.variant)
            self._references[c.shape_key] = REFERENCE.copy()
        return self._references[c.shape_key]

    def work(self, c):
        return {}

    def rates(self, c, w, median_s):
        return {"throughput_samples_s": c.batch_size / median_s}
