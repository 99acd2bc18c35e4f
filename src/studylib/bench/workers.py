"""Worker processes: each framework of a group measured in a process of its own, as its users run it.

A user runs one framework per process, with its defaults. So a replicate process (replicates.py) imports no
framework: it coordinates one worker process per framework (`Runtime.process`): PyTorch's variants (eager,
torch.compile, TorchScript, export, int8, the static caches) in one, TensorFlow's in one, ONNX Runtime's in one, the
group's Keras backend in one, and each A/A copy in a second worker of its original's framework, so the A/A pairs test
the pairing across processes and show any interference an idle worker causes a timed one (OpenMP threads spinning
after a parallel region, ONNX Runtime's spinning intra-op pool, TensorFlow's inter-op pool). A worker starts with the
profile's thread count and nothing else imposed: no OpenMP wait policy unless the user set one (`worker_env`), only
its own frameworks' thread pools set (`frameworks_of`). It lives for the replicate's groups and holds its models.

The coordinator (sweep.measure_group) asks the workers to prepare the group's configurations one at a time, hands
eager PyTorch's reference output to the workers that check parity against it, then runs the interleaved rounds
(timing.run_rounds): a block is timed inside its variant's worker while every other worker waits in a blocking read
(asleep). Messages are pickled over a Unix socket pair (`python -m studylib.bench.workers FD`): a method name and
its arguments, answered by (True, value) or (False, sweep.RemoteFailure). A worker that dies fails the calls made to
it (its configurations become rows saying so); the next group starts a fresh one.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from typing import Any

from .. import runtimes
from ..core.config import SHARED_SETTINGS as SHARED
from ..core.config import Config
from ..machine import gpu
from ..machine.threads import apply_threads, threads_in_force
from . import sweep
from .builder import Workloads
from .plan import Plan

STOP_WAIT_S = 10.0  # how long a worker is given to end after the coordinator says so


class WorkerDied(RuntimeError):
    """The worker process ended while a call to it was in flight (a crash, the out-of-memory killer)."""


def frameworks_of(process: str, plan: Plan, env: dict[str, str]) -> tuple[str, ...]:
    """The frameworks whose thread pools (and precision policy) a worker sets: torch in every worker (it builds the
    models: TensorFlow's twin and the ONNX export start from the PyTorch module), TensorFlow only in TensorFlow's, in
    the shared ones (runtimes/shared.py) and in a Keras worker on the TensorFlow backend."""
    base = process.split("~")[0]
    wanted = {"torch"}
    if base in ("tensorflow", *SHARED) or (base == "keras" and env.get("KERAS_BACKEND", "tensorflow") == "tensorflow"):
        wanted.add("tensorflow")
    return tuple(f for f in plan.frameworks if f in wanted) or ("torch",)


def worker_env(process: str, base_env: dict[str, str]) -> dict[str, str]:
    """What a worker starts with: the replicate's environment (the precision variables, a Keras backend), transformers
    kept from importing TensorFlow where the worker does not run it, and OMP_WAIT_POLICY only where the user set it
    (or in 'shared-passive', the worker that measures that setting)."""
    env = dict(base_env)
    base = process.split("~")[0]
    if base == "shared-passive":  # the setting that worker is for (runtimes/shared.py); a user's own policy is kept
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if base in ("tensorflow", *SHARED):
        for var in ("USE_TF", "USE_TORCH"):  # transformers enables TensorFlow only when neither is set
            env.pop(var, None)
    elif base != "keras":  # a Keras worker keeps its backend's (grouping.process_env)
        env["USE_TF"] = "0"
    return env


class ProcessWorker:
    """A `sweep.Worker` in a child process: the same methods, each a message over a socket. It is started at once and
    answers its start when first called (`settings`), so a group's workers import their frameworks side by side."""

    def __init__(self, process: str, plan: Plan, workloads: Workloads, env: dict[str, str]):
        self.process = process
        ours, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "studylib.bench.workers", str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), env=worker_env(process, env))
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.dead: WorkerDied | None = None
        self._settings: str | None = None
        self._send("start", process, plan, workloads, frameworks_of(process, plan, env))

    @property
    def settings(self) -> str:
        """Its process and threading as a row records it; waits for its start."""
        if self._settings is None:
            self._settings = self._receive("start")
        return self._settings

    def _send(self, method: str, *args) -> None:
        try:
            self.conn.send((method, args))
        except OSError:
            self._died(method)

    def _receive(self, method: str) -> Any:
        try:
            ok, value = self.conn.recv()
        except (EOFError, OSError):
            self._died(method)
        if not ok:
            raise value
        return value

    def _died(self, method: str):
        try:
            rc = self.proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        signal = f" (signal {-rc})" if rc < 0 else ""
        oom = "; the kernel's out-of-memory killer is the likely cause" if rc in (-9, 137) else ""
        self.dead = WorkerDied(f"the {self.process} worker process died with exit code {rc}{signal} during {method}{oom}")
        raise self.dead from None

    def _call(self, method: str, *args) -> Any:
        if self.dead is not None:
            raise self.dead
        self.settings  # noqa: B018 - its start answered first
        self._send(method, *args)
        return self._receive(method)

    def __getattr__(self, method: str):
        if method.startswith("_") or method in ("proc", "conn", "dead", "process"):
            raise AttributeError(method)
        return lambda *args: self._call(method, *args)

    def close(self) -> None:
        if self.dead is None and self.proc.poll() is None:
            try:
                self.conn.send(("stop", ()))
                self.proc.wait(STOP_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.conn.close()


class ProcessPool:
    """One ProcessWorker per framework process, started when a group first needs it and kept for the replicate's
    groups; a dead one is replaced at the next group."""

    separate = True

    def __init__(self, plan: Plan, workloads: Workloads, env: dict[str, str] | None = None):
        self.plan, self.workloads = plan, workloads
        self.env = dict(os.environ if env is None else env)
        self.workers: dict[str, ProcessWorker] = {}

    def name_of(self, c: Config) -> str:
        return runtimes.get(c.variant).process

    def get(self, name: str) -> ProcessWorker:
        w = self.workers.get(name)
        if w is not None and (w.dead is not None or w.proc.poll() is not None):
            w.close()
            w = None
        if w is None:
            w = self.workers[name] = ProcessWorker(name, self.plan, self.workloads, self.env)
        return w

    def settings(self, name: str) -> str:
        """The worker's process and threading as a row records it (`process`)."""
        return self.get(name).settings

    def close(self) -> None:
        for w in self.workers.values():
            w.close()
        self.workers.clear()


def serve(conn: Connection) -> None:
    """A worker's loop: start (threads, precision, a sweep.Worker), then one message at a time until `stop`."""
    worker: sweep.Worker | None = None
    while True:
        try:
            method, args = conn.recv()
        except EOFError:  # the coordinator is gone
            return
        if method == "stop":
            if worker is not None:
                worker.close()
            return
        try:
            if method == "start":
                process, plan, workloads, frameworks = args
                apply_threads(plan.threads, frameworks)
                if plan.env.get("precision"):  # the profile's precision policy, as the notebook's process applied it
                    gpu.apply(plan.env["precision"], frameworks)
                worker = sweep.Worker(plan, workloads)
                value = f"{process}: {threads_in_force(frameworks)}"
            else:
                value = getattr(worker, method)(*args)
            conn.send((True, value))
        except KeyboardInterrupt:
            return
        except Exception as exc:  # noqa: BLE001 - sent back as the row's failure
            status, message = sweep.classify_failure(exc)
            try:
                conn.send((False, sweep.RemoteFailure(status, message)))
            except (pickle.PicklingError, OSError):
                return


if __name__ == "__main__":
    _conn = Connection(int(sys.argv[1]))
    try:
        serve(_conn)
    except KeyboardInterrupt:
        pass
