"""Freed memory kept for reuse while a group is timed, so that a call's steady state is not its allocator's page faults.

With glibc's defaults a block above the mmap threshold (128 KiB, rising to at most 32 MiB as such blocks are freed) is
mapped when it is allocated and unmapped when it is freed. A call that allocates large activations (eager PyTorch and
its dynamic int8 on a BERT-sized model or a batch of 32 texts) therefore maps them afresh, page by page, on every
call: 120-150 thousand minor page faults per call of study 03's classifier at batch 32 on the development machine.
What those cost is the host's (a virtual machine's page-fault path; how much of the guest's freed memory the host
has taken back), not the runtime's, and it moves between processes: that classifier's int8 pass took 0.38 s in the
first replicate and 0.51-0.87 s in the next two, in the reference of 2e16ef4 and again in its re-run. ONNX Runtime
and TensorFlow keep arenas of their own and do not pay it.

So while a group's rounds run (its warm-up calls included) both of glibc's thresholds are raised to 1 GiB
(`mallopt`): a freed block stays in the heap and the next call reuses it, with no page fault. Afterwards the
thresholds go back to glibc's initial 128 KiB and the heap is trimmed, so the next group's preparation and peak
memory are measured as before. Every framework in a comparison is timed under the same policy (recorded in the
environment as `allocator`). Where the C library is not glibc nothing changes and the environment says so.
`benchmarks/allocator.py` prints the difference on this machine.
"""

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
    """The C library when it has glibc's mallopt and malloc_trim, else None (looked up once per process)."""
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
    """Within the block freed memory stays in the heap for reuse (yields whether it could be set); afterwards glibc's
    initial thresholds are back and the heap is trimmed."""
    lib = _glibc()
    kept = lib is not None and lib.mallopt(M_MMAP_THRESHOLD, KEPT) == 1 and lib.mallopt(M_TRIM_THRESHOLD, KEPT) == 1
    try:
        yield kept
    finally:
        if lib is not None:
            lib.mallopt(M_MMAP_THRESHOLD, INITIAL)
            lib.mallopt(M_TRIM_THRESHOLD, INITIAL)
            lib.malloc_trim(0)
