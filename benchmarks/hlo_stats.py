"""Collectives in optimized HLO text: how many of each kind, and the bytes they move.

Reads what `Compiled.as_text()` (pmapc, replica mode) and `jax.jit(f).lower(...)
.compile().as_text()` (shard_map, partition mode) print. Collectives inside a
`while` body count once per iteration when XLA knows the trip count
(`known_trip_count`); otherwise once, and the loop is listed as unknown.

Replica groups come in three forms: explicit (`{{0,1},{2,3}}`, `{}` for all
devices), iota (`[2,4]<=[8]`) and, from JAX 0.11 on, mesh axes
(`mesh['x'=2,'y'=4] {'y'}`: the group is every named axis, so its size is the
product of theirs). A collective may be wrapped in an `async-start` that calls a
computation holding it (counted through the start only) or split into
`<kind>-start`/`-done` (counted at the start).

Bytes are per device per step, by the cost model of /work/shared/REFERENCE.md:
all-reduce 2(n-1)/n*S; all-gather, reduce-scatter, all-to-all (n-1)/n*S of the
larger (gathered/scattered) size; collective-permute S. n is the replica-group
size, S the payload in bytes from the HLO shape.
"""

from __future__ import annotations

import dataclasses
import re

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")

DTYPE_BYTES = {
    "pred": 1,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "c64": 8,
    "c128": 16,
}

_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.+?)\s+([a-z][\w\-]*)\((.*)$")
_ARRAY = re.compile(r"\b([a-z]+\d*)\[([\d,]*)\]")
_EXPLICIT_GROUPS = re.compile(r"replica_groups=\{(\{[\d,]*\}(?:,\{[\d,]*\})*)?\}")
_IOTA_GROUPS = re.compile(r"replica_groups=\[(\d+),(\d+)\]<=")
_MESH_GROUPS = re.compile(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_MESH_AXIS = re.compile(r"'([^']*)'=(\d+)")
_AXIS_REF = re.compile(r"'([^']*)'(?::\((\d+)\)(\d+))?")  # 'x', or a sub-axis 'x':(1)2
_DEVICE_COUNT = re.compile(r"(?:replica_count|num_partitions)=(\d+)")
_CALLEE = re.compile(
    r"\b(body|condition|calls|to_apply|true_computation|false_computation)"
    r"=%?([\w.\-]+)"
)
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


@dataclasses.dataclass
class Collective:
    """One collective instruction of the HLO."""

    kind: str
    group_size: int
    payload_bytes: int  # S: the larger of operand and result, summed over a tuple
    computation: str

    def wire_bytes(self) -> float:
        """Bytes one device sends for one execution, by the cost model."""
        n = self.group_size
        if self.kind == "collective-permute":
            return float(self.payload_bytes)
        if n <= 1:
            return 0.0
        factor = 2.0 if self.kind == "all-reduce" else 1.0
        return factor * (n - 1) / n * self.payload_bytes


@dataclasses.dataclass
class CollectiveStats:
    """Per kind: ops in the HLO text, executions per step, bytes per device per step."""

    static_count: dict[str, int]
    dynamic_count: dict[str, int]
    wire_bytes: dict[str, float]
    loops: list[str]  # e.g. "while x100 (2 collectives)"

    @property
    def total_bytes(self) -> float:
        return sum(self.wire_bytes.values())

    def as_dict(self) -> dict:
        return dataclasses.asdict(self) | {"total_bytes": self.total_bytes}


def array_bytes(type_text: str) -> list[int]:
    """Bytes of each array in an HLO type (`f32[4,8]{1,0}` or a tuple of them)."""
    sizes = []
    for dtype, dims in _ARRAY.findall(type_text):
        if dtype not in DTYPE_BYTES:
            continue
        count = 1
        for dim in filter(None, dims.split(",")):
            count *= int(dim)
        sizes.append(count * DTYPE_BYTES[dtype])
    return sizes


def group_size(attributes: str, device_count: int) -> int:
    """The replica-group size, from mesh-axis, explicit or iota groups, or `{}`
    (all devices)."""
    mesh = _MESH_GROUPS.search(attributes)
    if mesh:
        sizes = {name: int(size) for name, size in _MESH_AXIS.findall(mesh.group(1))}
        size = 1
        for name, _, sub_axis_size in _AXIS_REF.findall(mesh.group(2)):
            size *= int(sub_axis_size) if sub_axis_size else sizes[name]
        return size
    iota = _IOTA_GROUPS.search(attributes)
    if iota:
        return int(iota.group(2))
    explicit = _EXPLICIT_GROUPS.search(attributes)
    if explicit is None or explicit.group(1) is None:
        return device_count
    first = explicit.group(1).split("}")[0].strip("{")
    return len([d for d in first.split(",") if d])


def payload_bytes(kind: str, type_text: str, n: int, is_async_start: bool) -> int:
    """S of the cost model: the gathered/scattered size, summed over tuple elements."""
    sizes = array_bytes(type_text)
    if not sizes:
        return 0
    if is_async_start:  # (operands..., results...) tuples: the larger element
        return max(sizes)
    if kind == "reduce-scatter":  # the result is the scattered (smaller) piece
        return sum(sizes) * n
    return sum(sizes)


def _collective_kind(opcode: str) -> tuple[str | None, bool]:
    base = opcode.removesuffix("-start")
    if base in KINDS:
        return base, opcode != base
    return None, False


@dataclasses.dataclass
class _Parsed:
    collectives: list[Collective]
    # caller -> [(callee, times per caller execution or None when unknown)]
    calls: dict[str, list[tuple[str, int | None]]]
    order: list[str]  # computations in text order (callees before callers)
    entry: str
    loops: list[tuple[str, int | None]]  # (while body, trip count or None)


def parse(hlo_text: str, device_count: int | None = None) -> _Parsed:
    """The collectives and the call graph of an HLO module's text."""
    if device_count is None:
        found = _DEVICE_COUNT.search(hlo_text)
        device_count = int(found.group(1)) if found else 1
    parsed = _Parsed([], {}, [], "", [])
    current = ""
    for line in hlo_text.splitlines():
        header = _COMPUTATION.match(line)
        if header and not line.startswith(" "):
            current = header.group(1)
            parsed.order.append(current)
            parsed.calls[current] = []
            if line.startswith("ENTRY"):
                parsed.entry = current
            continue
        instruction = _INSTRUCTION.match(line)
        if instruction and current:
            _read_instruction(parsed, current, instruction, device_count)
    return parsed


def _read_instruction(parsed: _Parsed, computation: str, match, device_count: int) -> None:
    type_text, opcode, rest = match.groups()
    kind, is_async_start = _collective_kind(opcode)
    if kind is not None:
        n = group_size(rest, device_count)
        size = payload_bytes(kind, type_text, n, is_async_start)
        parsed.collectives.append(Collective(kind, n, size, computation))
    if opcode in ("async-update", "async-done"):
        return  # the computation they name runs once, counted at its async-start
    trip = _TRIP_COUNT.search(rest)
    for role, callee in _CALLEE.findall(rest):
        if role == "body":
            count = int(trip.group(1)) if trip else None
            parsed.calls[computation].append((callee, count))
            parsed.loops.append((callee, count))
        elif role != "condition":  # a loop condition holds no collectives worth counting
            parsed.calls[computation].append((callee, 1))
    for branches in _BRANCHES.findall(rest):
        for callee in branches.split(","):
            parsed.calls[computation].append((callee.strip().lstrip("%"), 1))


def executions_per_step(parsed: _Parsed) -> dict[str, int]:
    """How often each computation runs per step (a loop of unknown trip count: once)."""
    times = dict.fromkeys(parsed.order, 0)
    times[parsed.entry] = 1
    for caller in reversed(parsed.order):  # callers come after their callees in HLO text
        for callee, trip in parsed.calls[caller]:
            if callee in times:
                times[callee] += times[caller] * (trip if trip is not None else 1)
    return times


def describe_loops(parsed: _Parsed) -> list[str]:
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
    times = executions_per_step(parsed)
    stats = CollectiveStats(
        dict.fromkeys(KINDS, 0),
        dict.fromkeys(KINDS, 0),
        dict.fromkeys(KINDS, 0.0),
        describe_loops(parsed),
    )
    for collective in parsed.collectives:
        runs = times.get(collective.computation, 0)
        stats.static_count[collective.kind] += 1
        stats.dynamic_count[collective.kind] += runs
        stats.wire_bytes[collective.kind] += runs * collective.wire_bytes()
    return stats


def cost(kind: str, n: int, payload: float) -> float:
    """Bytes per device of one collective by the cost model (for analytic minimums)."""
    return Collective(kind, n, int(payload), "").wire_bytes()
