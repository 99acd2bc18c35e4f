"""Timed rounds keep freed memory for reuse (machine/allocator.py): glibc's page faults counted, not timed."""

import ctypes
import resource

import pytest

from studylib.machine import allocator, environment

SIZE = 64 << 20  # above glibc's largest mmap threshold (32 MiB): mapped and unmapped per call by default


def touch(lib) -> int:
    """Minor page faults of one malloc, write, free of SIZE bytes (what a call's large activation does)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p = lib.malloc(ctypes.c_size_t(SIZE))
    assert p
    ctypes.memset(p, 1, SIZE)
    lib.free(ctypes.c_void_p(p))
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_freed_memory_is_reused_while_timing_and_returned_after():
    """By default each call faults its block's pages in again; inside reused_memory, after the first call, no page
    faults; afterwards glibc maps and unmaps again (the heap trimmed, peak memory of what follows as before)."""
    lib = allocator._glibc()
    if lib is None:
        pytest.skip("the C library is not glibc")
    lib.malloc.restype = ctypes.c_void_p
    pages = SIZE // resource.getpagesize()
    default = touch(lib)
    with allocator.reused_memory() as kept:
        assert kept
        touch(lib)  # the first call grows the heap
        reused = [touch(lib) for _ in range(3)]
    after = touch(lib)
    assert default > pages // 2 and after > pages // 2
    assert max(reused) < pages // 100


def test_the_environment_records_the_policy():
    env = environment.capture("cpu")
    assert env["allocator"] == allocator.policy()
    assert env["allocator"] in (allocator.POLICY, allocator.UNCHANGED)
