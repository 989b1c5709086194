"""Collectives in optimized HLO text: how many of each kind, and the bytes they move.

Reads what `Compiled.as_text()` (pmapc, either form) and `jax.jit(f).lower(...)
.compile().as_text()` (shard_map, partition mode) print, through pmapc's HLO
reader (`pmapc.compiler.hlo_collectives`, which the communication plan uses too:
replica groups in their explicit, iota and mesh-axis forms, async wrappers and
`-start`/`-done` pairs, loops). Collectives inside a `while` body count once per
iteration when XLA knows the trip count (`known_trip_count`); otherwise once,
and the loop is listed as unknown.

Bytes are per device per step, by the cost model of /work/shared/REFERENCE.md
(the communication plan's, `compiler/plan.py`): all-reduce 2(n-1)/n*S; all-gather, reduce-scatter,
all-to-all (n-1)/n*S of the larger (gathered/scattered) size; collective-permute
S. n is the replica-group size, S the payload in bytes from the HLO shape.
"""

from __future__ import annotations

import dataclasses

from pmapc.compiler.hlo_collectives import (
    KINDS,
    HloCollectives,
    cost,
    instruction_attributes,
    parse,
    replica_groups,
)

__all__ = ["KINDS", "CollectiveStats", "collective_stats", "cost", "group_size", "parse"]


@dataclasses.dataclass
class CollectiveStats:
    """Per kind: ops in the HLO text, executions per step, bytes per device per step."""

    static_count: dict[str, int]
    dynamic_count: dict[str, int]
    wire_bytes: dict[str, float]
    loops: list[str]  # e.g. "while x100: 2 in body"

    @property
    def total_bytes(self) -> float:
        return sum(self.wire_bytes.values())

    def as_dict(self) -> dict:
        return dataclasses.asdict(self) | {"total_bytes": self.total_bytes}


def group_size(rest: str, device_count: int) -> int:
    """The replica-group size of an instruction, from the text after its opcode's
    parenthesis (`%x), channel_id=1, replica_groups=..., ...`)."""
    value = instruction_attributes(rest).get("replica_groups", "{}")
    return int(replica_groups(value, device_count).shape[1])


def describe_loops(parsed: HloCollectives) -> list[str]:
    """One line per while loop: its trip count and the collectives in its body."""
    lines = []
    for body, trip in parsed.loops:
        inside = sum(1 for c in parsed.collectives if c.computation == body)
        count = f"x{trip}" if trip is not None else "x? (trip count unknown, counted once)"
        lines.append(f"while {count}: {inside} in body")
    return lines


def collective_stats(hlo_text: str, device_count: int | None = None) -> CollectiveStats:
    """Count the collectives of optimized HLO text by kind and price them per step."""
    parsed = parse(hlo_text, device_count)
    executions = parsed.executions()
    stats = CollectiveStats(
        dict.fromkeys(KINDS, 0),
        dict.fromkeys(KINDS, 0),
        dict.fromkeys(KINDS, 0.0),
        describe_loops(parsed),
    )
    for collective in parsed.collectives:
        runs, _ = executions.get(collective.computation, (0, False))
        stats.static_count[collective.kind] += 1
        stats.dynamic_count[collective.kind] += runs
        stats.wire_bytes[collective.kind] += runs * collective.wire_bytes()
    return stats
