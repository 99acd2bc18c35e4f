"""Freed memory kept for reuse while a group is timed (glibc's thresholds at 1 GiB; docs/method.md)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
KEPT = 1 << 30  # both thresholds while timing: no block is unmapped or trimmed
INITIAL = 128 * 1024  # glibc's initial values of both
POLICY = "glibc: freed memory kept for reuse while timing (mmap and trim thresholds 1 GiB)"
UNCHANGED = "the C library's own (no glibc mallopt): freed memory may be returned and faulted in again each call"


@functools.cache
def _glibc():
    """The C library when it has glibc's mallopt and malloc_trim, else None (once per process)."""
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        lib.mallopt, lib.malloc_trim  # noqa: B018 - glibc only
        lib.gnu_get_libc_version  # noqa: B018 - musl has a mallopt that does nothing
    except (OSError, AttributeError):
        return None
    return lib


def policy() -> str:
    """What the timed rounds run under, for the environment."""
    return POLICY if _glibc() is not None else UNCHANGED


@contextmanager
def reused_memory() -> Iterator[bool]:
    """Freed memory stays in the heap within the block (yields whether set); then the defaults and a trim."""
    lib = _glibc()
    kept = lib is not None and lib.mallopt(M_MMAP_THRESHOLD, KEPT) == 1 and lib.mallopt(M_TRIM_THRESHOLD, KEPT) == 1
    try:
        yield kept
    finally:
        if lib is not None:
            lib.mallopt(M_MMAP_THRESHOLD, INITIAL)
            lib.mallopt(M_TRIM_THRESHOLD, INITIAL)
            lib.malloc_trim(0)
