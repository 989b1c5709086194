"""Keep a test process's resident memory bounded.

JAX's caches keep the programs of live functions and thousands of entries of their
own (bounded, 2,048 or 4,096 each), and glibc keeps what a process frees for its
next allocations: a pytest worker that ran thousands of tests (the folded goldens,
the random programs' oracles) grew to 3.7 GB, most of it freed. `bound()` runs
after every test (conftest.py) and after every random program of a search.
"""

from __future__ import annotations

import ctypes
import gc
import os

import jax

# A process that holds more than this empties JAX's caches and gives the memory it
# freed back to the system; the level then rises to what it holds plus the margin,
# so that a process whose live data is larger does not do it every time.
RESIDENT_LIMIT_MIB = 1024
RESIDENT_MARGIN_MIB = 512
_limit = [RESIDENT_LIMIT_MIB]


def bound() -> None:
    if resident_mib() <= _limit[0]:
        return
    jax.clear_caches()
    gc.collect()
    _give_back_freed_memory()
    _limit[0] = max(RESIDENT_LIMIT_MIB, resident_mib() + RESIDENT_MARGIN_MIB)


def resident_mib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


def _give_back_freed_memory() -> None:
    """glibc's `malloc_trim`: the free pages of its arenas back to the system."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
