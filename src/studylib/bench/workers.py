"""Worker processes: each framework in a process of its own, coordinated over Unix sockets (docs/method.md)."""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..core.config import SHARED_SETTINGS as SHARED
from ..machine import gpu
from ..machine.threads import apply_threads, threads_in_force
from . import sweep
from .builder import Workloads
from .plan import Plan

STOP_WAIT_S = 10.0  # how long a worker is given to end after the coordinator says so
STOPPED_WAIT_S = 1.0  # how long `pause` waits for the kernel to show the worker stopped


def _wait_stopped(pid: int) -> None:
    """Wait until /proc shows the process stopped: SIGSTOP is delivered asynchronously, and the next timed call must
    not share its cores with a worker still running (no /proc, as on macOS: no wait)."""
    deadline = time.monotonic() + STOPPED_WAIT_S
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("T", "t"):
            return
        time.sleep(0.0005)


class WorkerDied(RuntimeError):
    """The worker process ended while a call to it was in flight (a crash, the out-of-memory killer)."""


def frameworks_of(process: str, plan: Plan, env: dict[str, str]) -> tuple[str, ...]:
    """The frameworks whose threads and precision policy a worker sets: torch always, TensorFlow where it runs."""
    base = process.split("~")[0]
    wanted = {"torch"}
    if base in ("tensorflow", *SHARED) or (base == "keras" and env.get("KERAS_BACKEND", "tensorflow") == "tensorflow"):
        wanted.add("tensorflow")
    return tuple(f for f in plan.frameworks if f in wanted) or ("torch",)


def worker_env(process: str, base_env: dict[str, str]) -> dict[str, str]:
    """A worker's environment: the replicate's, USE_TF off where it runs no TensorFlow, OMP_WAIT_POLICY only as set."""
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


def died(who: str, rc: int, when: str) -> str:
    """What a process that died with exit code `rc` leaves as its failure."""
    signal = f" (signal {-rc})" if rc < 0 else ""
    oom = "; the kernel's out-of-memory killer is the likely cause" if rc in (-9, 137) else ""
    return f"{who} died with exit code {rc}{signal} {when}{oom}"


def ended(proc: subprocess.Popen, wait_s: float) -> int:
    """The process's exit code once it has ended, killed after `wait_s` seconds."""
    try:
        return proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


class ProcessWorker:
    """A `sweep.Worker` in a child process group, each method a message; `focus` runs before every call."""

    def __init__(self, process: str, plan: Plan, workloads: Workloads, env: dict[str, str], focus=None):
        self.process = process
        ours, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "studylib.bench.workers", str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), env=worker_env(process, env), process_group=0)
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.dead: WorkerDied | None = None
        self.paused = False
        self.focus = focus
        self._settings: str | None = None
        self._send("start", process, plan, workloads, frameworks_of(process, plan, env))

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):  # the group has ended
            pass

    def pause(self) -> None:
        """Stop the worker's process group (SIGSTOP) until `resume`."""
        if not self.paused and self.dead is None and self.proc.poll() is None:
            self._signal(signal.SIGSTOP)
            self.paused = True
            _wait_stopped(self.proc.pid)

    def resume(self) -> None:
        if self.paused:
            self._signal(signal.SIGCONT)
            self.paused = False

    def _focused(self) -> None:
        if self.focus is not None:
            self.focus(self)
        self.resume()

    @property
    def settings(self) -> str:
        """Its process and threading as a row records it; waits for its start."""
        if self._settings is None:
            self._focused()
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
        self.resume()
        rc = ended(self.proc, STOP_WAIT_S)
        self.dead = WorkerDied(died(f"the {self.process} worker process", rc, f"during {method}"))
        raise self.dead from None

    def _call(self, method: str, *args) -> Any:
        if self.dead is not None:
            raise self.dead
        self.settings  # noqa: B018 - its start answered first
        self._focused()
        self._send(method, *args)
        return self._receive(method)

    def __getattr__(self, method: str):
        if method.startswith("_") or method in ("proc", "conn", "dead", "process", "paused", "focus"):
            raise AttributeError(method)
        return lambda *args: self._call(method, *args)

    def close(self) -> None:
        self.resume()
        if self.dead is None and self.proc.poll() is None:
            try:
                self.conn.send(("stop", ()))
                self.proc.wait(STOP_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._signal(signal.SIGKILL)  # what it left running in its group
        self.conn.close()


class ProcessPool:
    """One ProcessWorker per framework process, kept across groups; only the one being called runs (`focus`)."""

    separate = True

    def __init__(self, plan: Plan, workloads: Workloads, env: dict[str, str] | None = None):
        self.plan, self.workloads = plan, workloads
        self.env = dict(os.environ if env is None else env)
        self.workers: dict[str, ProcessWorker] = {}

    def get(self, name: str) -> ProcessWorker:
        w = self.workers.get(name)
        if w is not None and (w.dead is not None or w.proc.poll() is not None):
            w.close()
            w = None
        if w is None:
            w = self.workers[name] = ProcessWorker(name, self.plan, self.workloads, self.env, focus=self.focus)
        return w

    def focus(self, worker: ProcessWorker) -> None:
        """Stop every worker but `worker` (which its caller then continues)."""
        for w in self.workers.values():
            if w is not worker:
                w.pause()

    def settings(self, name: str) -> str:
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
