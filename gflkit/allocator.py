"""Keep freed large blocks inside the process (glibc's ``malloc``), so that tensors of one size, allocated and
freed at every training step, reuse memory instead of faulting it in again.

glibc serves a large request (above ``M_MMAP_THRESHOLD``, 128 KiB, raised dynamically up to 32 MiB) with a
fresh ``mmap`` and returns it to the system when it is freed; heap memory above ``M_TRIM_THRESHOLD`` is
given back as well. A batched step creates several ``n × d`` tensors (the clients' gradients, activations
and their gradients) and frees them before the next one, so every step page-faults its memory in anew: with
100 MCLR clients that was a third of the training's CPU time. :func:`keep_freed_blocks` sets both
thresholds once per process, so those blocks stay in the heap and are reused. The process keeps up to
:data:`TRIM_THRESHOLD` of freed memory rather than handing it back.

Nothing changes where the C library is not glibc (macOS, Windows, musl), or where the user already tunes
glibc's allocator (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_`` or ``GLIBC_TUNABLES`` set).
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys

#: ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: requests up to this size come from the heap (glibc's largest allowed value on a 64-bit system)
MMAP_THRESHOLD = 32 * 2**20
#: how much freed memory at the top of the heap the process keeps before returning it to the system
TRIM_THRESHOLD = 2**30
#: environment variables through which a user tunes glibc's allocator; any of them set: left alone
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


@functools.cache
def keep_freed_blocks() -> bool:
    """Set glibc's mmap and trim thresholds for this process (once); whether they were set."""
    if not sys.platform.startswith("linux") or any(name in os.environ for name in USER_SETTINGS):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only: musl's mallopt does nothing
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_blocks"]
