"""pmapc's per-device programs in JAX's persistent compilation cache.

A restarted job (preempted, rescheduled, a notebook restarted) lowers its
functions again: JAX traces and lowers them, then finds each executable in its
persistent cache (`jax_compilation_cache_dir`) instead of compiling it. Inside
that lowering, pmapc would run its passes on every outermost map again. Where
the cache is configured, pmapc keeps there, beside JAX's executables, the
per-device program it made of each map, so that a restarted process skips
pmapc's passes as it skips XLA's compile.

An entry is keyed by what decides the program and by what made it:

- the map: its structure (lowering/structure.py: its equations, parameters,
  integer literals and source locations, float literals aside), as
  `lowering/structure_digest.py` reads it the same in every process, so that a
  restarted process neither lowers the map nor runs the passes; or, where a part
  of the structure is known only by its identity in this process (a
  `custom_jvp`'s rule), the map's pmapc IR as JAX lowered it (bytecode,
  locations included: the program's metadata names the user's lines);
- the abstract values in and out, the mesh (axis names and sizes, the fold),
  the platforms and the compiler's options (target, replica groups, ragged form);
- the JAX, jaxlib and pmapc releases, and a digest of pmapc's own source, so
  that an edited pmapc never reads what an older one wrote.

A map whose program calls back to Python is never kept: what it calls is its
function's, and lives in the process. Entries are written whatever their
compile time (JAX's `jax_persistent_cache_min_compile_time_secs` is about XLA's
compile, and a pmapc entry is a few KiB); they go when JAX's cache evicts them.
`STATS` counts what was read and written, for tests and benchmarks.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import importlib.util
import pathlib
import threading
from collections.abc import Sequence

import jax
import jaxlib.version

from pmapc.lowering import jax_api

# JAX's own entries are keyed by a hex digest: this prefix keeps pmapc's apart.
KEY_PREFIX = "pmapc-program-"
# pmapc's packages, whose source the key's digest covers.
_PACKAGES = ("pmapc", "pmapc.ir", "pmapc.compiler", "pmapc.passes", "pmapc.lowering")


@dataclasses.dataclass
class Stats:
    """Entries read (`hits`), looked for and missed (`misses`), and written."""

    hits: int = 0
    misses: int = 0
    writes: int = 0


STATS = Stats()
_STATS_LOCK = threading.Lock()


class Entries:
    """The persistent cache JAX is configured with, seen as pmapc's entries."""

    def __init__(self, cache) -> None:
        self.cache = cache

    @classmethod
    def configured(cls) -> Entries | None:
        """The cache, if JAX's persistent compilation cache is configured and enabled."""
        cache = jax_api.persistent_cache()
        return None if cache is None else cls(cache)

    def get(self, key: str) -> bytes | None:
        found = self.cache.get(key)
        with _STATS_LOCK:
            if found is None:
                STATS.misses += 1
            else:
                STATS.hits += 1
        return found

    def put(self, key: str, entry: bytes) -> None:
        self.cache.put(key, entry)
        with _STATS_LOCK:
            STATS.writes += 1


def program_key(kind: str, identity: bytes, described: Sequence[object]) -> str:
    """The key of the program of the map `identity` stands for: its lowered IR's
    bytecode (`kind` "ir") or its structure's digest ("structure"), with
    `described` (its abstract values, mesh, platforms and options, as text)."""
    digest = hashlib.sha256()
    for part in (*_releases(), kind, *map(str, described)):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(identity)
    return KEY_PREFIX + digest.hexdigest()


@functools.cache
def _releases() -> tuple[str, ...]:
    """JAX's, jaxlib's and pmapc's releases, and the digest of pmapc's source."""
    try:
        pmapc_release = importlib.metadata.version("pmapc")
    except importlib.metadata.PackageNotFoundError:
        pmapc_release = "unknown"
    return (jax.__version__, jaxlib.version.__version__, pmapc_release, _source_digest())


def _source_digest() -> str:
    """sha256 of every Python file of pmapc's packages, in a fixed order."""
    digest = hashlib.sha256()
    for package in _PACKAGES:
        spec = importlib.util.find_spec(package)
        locations = spec.submodule_search_locations if spec is not None else None
        for location in sorted(locations or ()):
            for path in sorted(pathlib.Path(location).glob("*.py")):
                digest.update(path.name.encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()
