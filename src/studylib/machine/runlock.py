"""One measuring run per profile at a time (a `flock`; children inherit HELD_ENV), and a warning on others' runs."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..core import paths

LOCK_NAME = ".run.lock"
HELD_ENV = "STUDYLIB_LOCK_HELD"  # os.pathsep-joined lock paths held by an ancestor process


class Busy(Exception):
    """Another live process is measuring this profile: the message is one line naming it."""


def lock_path(profile: str) -> Path:
    return paths.profile_dir(profile) / LOCK_NAME


def _holder(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}


def _describe(holder: dict) -> str:
    if not holder:
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(holder.get("since", 0)))
    return f"pid {holder.get('pid')} (`{holder.get('command', '?')}`, since {since})"


def _is_held(path: Path) -> bool:
    """Whether a live process holds the lock at `path` (tried without blocking, released at once)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _held_by_ancestor(path: Path) -> bool:
    return str(path) in os.environ.get(HELD_ENV, "").split(os.pathsep)


@contextmanager
def hold(profile: str, command: str | None = None) -> Iterator[None]:
    """Hold the profile's run lock while the block runs; raise Busy at once if a live process holds it."""
    path = lock_path(profile)
    if _held_by_ancestor(path):
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Busy(f"outputs/{profile} is being measured by {_describe(_holder(path))}: two runs at once would "
                   f"share the CPU and spoil each other's timings; wait for it to end or stop it") from None
    previous = os.environ.get(HELD_ENV)
    try:
        record = {"pid": os.getpid(), "command": command or " ".join(sys.argv), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        for other in sorted(paths.outputs_root().glob(f"*/{LOCK_NAME}")):  # every other profile's lock held now
            if other.parent.name != profile and not _held_by_ancestor(other) and _is_held(other):
                print(f"warning: a run of profile {other.parent.name} is measuring on this machine too "
                      f"({_describe(_holder(other))}); the timings of both share its CPUs", file=sys.stderr)
        os.environ[HELD_ENV] = os.pathsep.join(p for p in (previous, str(path)) if p)
        yield
    finally:
        if previous is None:
            os.environ.pop(HELD_ENV, None)
        else:
            os.environ[HELD_ENV] = previous
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
