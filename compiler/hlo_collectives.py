"""XLA's collectives, read from the text of an HLO module (what
`executable.hlo_modules()[0].to_string()` and `jax.stages.Compiled.as_text()` print).

Each instruction line is read as `name = type opcode(operands), key=value, ...`;
the attributes are split at the commas outside brackets and quotes, and a
collective's replica groups are read from `replica_groups=` in each of its
forms, as device ids (one row per group):

- explicit `{{0,1},{2,3}}`, and `{}` for one group of every device;
- iota `[2,4]<=[8]`, or `[4,2]<=[2,4]T(1,0)` (an iota laid out, transposed, reshaped);
- mesh axes (from JAX 0.11 on, and what pmapc writes) `mesh['x'=2,'y'=4] {'y'}`:
  a group is every device that differs only along the named axes, in the order
  named; a sub-axis `'x':(2)2` is the size-2 factor of 'x' after its leading
  factor of size 2.

A collective-permute's `source_target_pairs={{0,1},...}` are read as its rows.

A program for several TPU slices is one slice's: its devices are numbered inside
the slice (`num_partitions` counts one slice's), and what crosses slices is a
host transfer to the DCN runtime, a `send`/`recv` pair whose frontend attributes
name the collective (`_xla_megascale_transfer_type="ALL_REDUCE"`) and which share
`_xla_host_transfer_rendezvous`. Each pair is read as one collective of that kind
(`dcn`), its payload the larger of the data sent and received, its groups each
device alone: the HLO does not say which of the slices it joins
(compiler/plan_xla.py counts it over every slice).
A collective may be wrapped in an `async-start` that calls a computation holding
it (it runs once, through the start) or split into `<kind>-start`/`-done`
(read at the start). Inside a `while` body it runs once per iteration when XLA
knows the trip count (`known_trip_count`); otherwise once, and it is marked.

`benchmarks/hlo_stats.py` counts and prices these by kind; the communication
plan (`compiler/plan_xla.py`) matches them with the collectives pmapc emitted.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

import numpy as np

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
_INSTRUCTION = re.compile(r"^\s+(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([a-z][\w\-]*)\((.*)$")
_SHAPE_TOKEN = re.compile(r"\(|\)|([a-z]+\d*)\[([^\]]*)\](?:\{[^}]*\})?")
_MESH_GROUPS = re.compile(r"mesh\[([^\]]*)\]\s*\{([^}]*)\}")
_MESH_AXIS = re.compile(r"'([^']*)'=(\d+)")
_AXIS_REF = re.compile(r"'([^']*)'(?::\((\d+)\)(\d+))?")  # 'x', or a sub-axis 'x':(1)2
_IOTA_GROUPS = re.compile(r"\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?")
_ROW = re.compile(r"\{([\d,\s]*)\}")
_DEVICE_COUNT = re.compile(r"\b(replica_count|num_partitions)=(\d+)")
_CALLEE = re.compile(
    r"\b(body|condition|calls|to_apply|true_computation|false_computation)=%?([\w.\-]+)"
)
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_OP_NAME = re.compile(r'op_name="([^"]*)"')


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective instruction of the HLO."""

    name: str  # the instruction, e.g. "all-reduce.3"
    opcode: str  # as written: "all-reduce", "all-reduce-start", ...
    kind: str  # one of KINDS
    groups: np.ndarray  # (groups, group size) device ids; (pairs, 2) for a permute
    element_bytes: tuple[int, ...]  # S of each element (several: combined or split)
    computation: str
    is_async: bool  # a -start/-done pair, or wrapped in an async-start
    op_name: str = ""  # its metadata's op_name ("psum;psum" when XLA combined two)
    dcn: bool = False  # a transfer between TPU slices (module docstring)

    @property
    def group_size(self) -> int:
        return 2 if self.kind == "collective-permute" else int(self.groups.shape[1])

    @property
    def payload_bytes(self) -> int:
        """S: the larger of operand and result, summed over the elements."""
        return sum(self.element_bytes)

    def wire_bytes(self) -> float:
        """Bytes one device sends for one execution, by the cost model."""
        return cost(self.kind, self.group_size, self.payload_bytes)


def cost(kind: str, n: int, payload: float) -> float:
    """Bytes per device of one collective over groups of n by the cost model:
    all-reduce 2(n-1)/n S; all-gather, reduce-scatter, all-to-all (n-1)/n S;
    collective-permute S."""
    if kind == "collective-permute":
        return float(payload)
    if n <= 1:
        return 0.0
    factor = 2.0 if kind == "all-reduce" else 1.0
    return factor * (n - 1) / n * payload


@dataclasses.dataclass
class HloCollectives:
    """The collectives and the call graph of one HLO module."""

    collectives: list[Collective]
    # caller -> [(callee, times per caller execution or None when unknown)]
    calls: dict[str, list[tuple[str, int | None]]]
    order: list[str]  # computations in text order (callees before callers)
    entry: str
    loops: list[tuple[str, int | None]]  # (while body, trip count or None)
    async_computations: set[str]  # computations an async-start calls
    device_count: int
    # computation -> its collectives (by index) and callees, in the order it runs them
    sequence: dict[str, list[int | str]] = dataclasses.field(default_factory=dict)
    # a DCN transfer's rendezvous -> the index of its collective
    transfers: dict[str, int] = dataclasses.field(default_factory=dict)

    def executions(self) -> dict[str, tuple[int, bool]]:
        """How often each computation runs per execution of the entry, and whether a
        loop of unknown trip count (counted once) holds it."""
        times = dict.fromkeys(self.order, 0)
        unknown = dict.fromkeys(self.order, False)
        times[self.entry] = 1
        for caller in reversed(self.order):  # callers come after their callees
            for callee, trip in self.calls[caller]:
                if callee in times:
                    times[callee] += times[caller] * (trip if trip is not None else 1)
                    unknown[callee] = unknown[callee] or unknown[caller] or trip is None
        return {name: (times[name], unknown[name]) for name in self.order}

    def run_order(self) -> list[int]:
        """The indices of the collectives in the order the entry computation reaches
        them (its schedule, calls followed where they are made); the unreached last."""
        reached: dict[int, None] = {}
        visited: set[str] = set()

        def visit(name: str) -> None:  # a computation called again adds nothing new
            visited.add(name)
            for item in self.sequence.get(name, []):
                if isinstance(item, int):
                    reached.setdefault(item)
                elif item not in visited:
                    visit(item)

        visit(self.entry)
        return [*reached, *(i for i in range(len(self.collectives)) if i not in reached)]


def opcode_count(hlo_text: str, opcode: str) -> int:
    """How many instructions of an HLO module's text run `opcode`, synchronously or as
    an async `-start`/`-done` pair (counted once); e.g. XLA's native
    `ragged-all-to-all`, which the collectives of KINDS leave out."""
    opcodes = (_INSTRUCTION.match(line) for line in hlo_text.splitlines())
    names = (match.group(3) for match in opcodes if match is not None)
    return sum(1 for name in names if name in (opcode, f"{opcode}-start"))


def module_device_count(hlo_text: str) -> int:
    """replica_count x num_partitions of the module's header."""
    header = hlo_text.split("\n", 1)[0]
    counts = {key: int(value) for key, value in _DEVICE_COUNT.findall(header)}
    return counts.get("replica_count", 1) * counts.get("num_partitions", 1)


def parse(hlo_text: str, device_count: int | None = None) -> HloCollectives:
    """The collectives and the call graph of an HLO module's text; `device_count`
    (default: replica_count x num_partitions of the module) sizes `{}` groups."""
    if device_count is None:
        device_count = module_device_count(hlo_text)
    parsed = HloCollectives([], {}, [], "", [], set(), device_count)
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
            _read_instruction(parsed, current, *instruction.groups())
    parsed.collectives = [
        dataclasses.replace(c, is_async=c.is_async or c.computation in parsed.async_computations)
        for c in parsed.collectives
    ]
    return parsed


def _read_instruction(
    parsed: HloCollectives, computation: str, name: str, type_text: str, opcode: str, rest: str
) -> None:
    kind = opcode.removesuffix("-start")
    sequence = parsed.sequence.setdefault(computation, [])
    if kind in KINDS:
        sequence.append(len(parsed.collectives))
        attributes = instruction_attributes(rest)
        parsed.collectives.append(
            _collective(name, opcode, kind, type_text, attributes, computation, parsed.device_count)
        )
    if opcode in ("send", "recv"):
        _read_transfer(parsed, computation, name, opcode, type_text, instruction_attributes(rest))
    if opcode == "async-start":
        callee = instruction_attributes(rest).get("calls", "")
        parsed.async_computations.add(callee.lstrip("%"))
    if opcode in ("async-update", "async-done"):
        return  # the computation they name runs once, counted at its async-start
    trip = _TRIP_COUNT.search(rest)
    for role, callee in _CALLEE.findall(rest):
        sequence.append(callee)
        if role == "body":
            count = int(trip.group(1)) if trip else None
            parsed.calls[computation].append((callee, count))
            parsed.loops.append((callee, count))
        elif role != "condition":  # a loop condition holds no collectives worth counting
            parsed.calls[computation].append((callee, 1))
    for branches in _BRANCHES.findall(rest):
        for callee in branches.split(","):
            parsed.calls[computation].append((callee.strip().lstrip("%"), 1))
            sequence.append(callee.strip().lstrip("%"))


# The DCN runtime's transfer types, as the collectives they are.
DCN_KINDS = {
    "ALL_REDUCE": "all-reduce",
    "ALL_GATHER": "all-gather",
    "REDUCE_SCATTER": "reduce-scatter",
    "ALL_TO_ALL": "all-to-all",
}
_FRONTEND = re.compile(r'(_xla_megascale_transfer_type|_xla_host_transfer_rendezvous)="([^"]*)"')


def _read_transfer(
    parsed: HloCollectives, computation: str, name: str, opcode: str, type_text: str, attributes
) -> None:
    """A send or recv to the DCN runtime (module docstring): the first of a pair makes
    its collective, the second may make its payload larger."""
    fields = dict(_FRONTEND.findall(attributes.get("frontend_attributes", "")))
    kind = DCN_KINDS.get(fields.get("_xla_megascale_transfer_type", ""))
    rendezvous = fields.get("_xla_host_transfer_rendezvous")
    if kind is None or rendezvous is None:
        return
    shape = parse_shape(type_text)
    payload = flatten(shape[0] if isinstance(shape, list) else shape)
    known = parsed.transfers.get(rendezvous)
    if known is not None:
        before = parsed.collectives[known]
        larger = max(before.payload_bytes, sum(payload))
        parsed.collectives[known] = dataclasses.replace(before, element_bytes=(larger,))
        return
    parsed.transfers[rendezvous] = len(parsed.collectives)
    parsed.sequence.setdefault(computation, []).append(len(parsed.collectives))
    alone = np.arange(parsed.device_count, dtype=np.int64)[:, None]
    parsed.collectives.append(
        Collective(name, opcode, kind, alone, (sum(payload),), computation, True, dcn=True)
    )


def _collective(name, opcode, kind, type_text, attributes, computation, device_count) -> Collective:
    if kind == "collective-permute":
        groups = rows_of(attributes.get("source_target_pairs", "{}")).reshape(-1, 2)
    else:
        groups = replica_groups(attributes.get("replica_groups", "{}"), device_count)
    elements = _results(kind, opcode, parse_shape(type_text))
    n = 2 if kind == "collective-permute" else groups.shape[1]
    if kind == "reduce-scatter":  # the result is the scattered (smaller) piece
        elements = [size * n for size in elements]
    op_name = _OP_NAME.search(attributes.get("metadata", ""))
    return Collective(
        name,
        opcode,
        kind,
        groups,
        tuple(elements),
        computation,
        opcode.endswith("-start"),
        op_name.group(1) if op_name else "",
    )


def _results(kind: str, opcode: str, shape) -> list[int]:
    """The bytes of each result element: an all-gather-start's or a collective-permute-
    start's shape is (operands, results, ...); an all-reduce-start's is its results,
    or, where XLA aliases the results to the operands (XLA:GPU of jax 0.11:
    `((f32[..]), f32[..]) all-reduce-start`), the operands' tuple and then the
    results."""
    if not opcode.endswith("-start") or not isinstance(shape, list):
        return flatten(shape)
    if kind == "all-reduce":
        aliased = len(shape) > 1 and isinstance(shape[0], list)
        return flatten(shape[1:]) if aliased else flatten(shape)
    return flatten(shape[1]) if len(shape) > 1 else flatten(shape)


def instruction_attributes(rest: str) -> dict[str, str]:
    """`key=value` attributes after an instruction's operands (`rest` starts after the
    opcode's parenthesis), split at the commas outside brackets and quotes."""
    end = _closing(rest, 0, depth=1)
    attributes = {}
    for part in _split_top_level(rest[end + 1 :]):
        key, sep, value = part.partition("=")
        if sep:
            attributes[key.strip()] = value.strip()
    return attributes


def _closing(text: str, start: int, depth: int = 0) -> int:
    """The index where the brackets open at `start` (plus `depth` already open) close."""
    quoted = False
    for index in range(start, len(text)):
        char = text[index]
        if char == '"' and (index == 0 or text[index - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "([{":
            depth += 1
        elif not quoted and char in ")]}":
            depth -= 1
            if depth == 0:
                return index
    return len(text)


def _split_top_level(text: str) -> list[str]:
    parts, start, index = [], 0, 0
    while index < len(text):
        char = text[index]
        if char in '([{"':
            index = _closing(text, index) if char != '"' else text.find('"', index + 1)
            index = len(text) if index < 0 else index
        elif char == ",":
            parts.append(text[start:index])
            start = index + 1
        index += 1
    parts.append(text[start:])
    return [part for part in parts if part.strip()]


def parse_shape(type_text: str):
    """An HLO shape as bytes: an int per array, a list per tuple (nested as written)."""
    stack: list[list] = [[]]
    for token in _SHAPE_TOKEN.finditer(type_text):
        if token.group(0) == "(":
            stack.append([])
        elif token.group(0) == ")":
            if len(stack) > 1:
                done = stack.pop()
                stack[-1].append(done)
        else:
            stack[-1].append(_array_bytes(token.group(1), token.group(2)))
    top = stack[0]
    return top[0] if len(top) == 1 else top


def _array_bytes(dtype: str, dims: str) -> int:
    count = 1
    for dim in filter(None, dims.split(",")):
        count *= int(dim.strip().lstrip("<="))
    return count * DTYPE_BYTES.get(dtype, 0)


def flatten(shape) -> list[int]:
    if isinstance(shape, int):
        return [shape]
    return [size for element in shape for size in flatten(element)]


def array_bytes(type_text: str) -> list[int]:
    """Bytes of each array in an HLO type (`f32[4,8]{1,0}` or a tuple of them)."""
    return flatten(parse_shape(type_text))


def replica_groups(value: str, device_count: int) -> np.ndarray:
    """The device ids of each group, from any form of `replica_groups=`'s value."""
    mesh = _MESH_GROUPS.fullmatch(value.strip())
    if mesh:
        return mesh_groups(mesh.group(1), mesh.group(2))
    iota = _IOTA_GROUPS.fullmatch(value.strip())
    if iota:
        count, size = int(iota.group(1)), int(iota.group(2))
        dims = [int(d) for d in iota.group(3).split(",")]
        order = [int(p) for p in iota.group(4).split(",")] if iota.group(4) else range(len(dims))
        ids = np.arange(int(np.prod(dims)), dtype=np.int64).reshape(dims)
        return ids.transpose(list(order)).reshape(count, size)
    groups = rows_of(value)
    if groups.size == 0:  # `{}`: one group of every device
        return np.arange(device_count, dtype=np.int64).reshape(1, -1)
    return groups


def rows_of(value: str) -> np.ndarray:
    """`{{0,1},{2,3}}` as a matrix, shorter rows padded with -1 (as StableHLO pads
    groups of unequal size)."""
    rows = [[int(d) for d in row.split(",") if d.strip()] for row in _ROW.findall(value)]
    rows = [row for row in rows if row]
    width = max((len(row) for row in rows), default=0)
    matrix = np.full((len(rows), width), -1, dtype=np.int64)
    for index, row in enumerate(rows):
        matrix[index, : len(row)] = row
    return matrix


def mesh_groups(mesh_text: str, axes_text: str) -> np.ndarray:
    """The groups of `mesh[<mesh_text>] {<axes_text>}`: lay the device ids out in the
    mesh's shape, each axis cut into the factors its sub-axes name, move the named
    factors to the back in the order named, and reshape."""
    sizes = {name: int(size) for name, size in _MESH_AXIS.findall(mesh_text)}
    refs = [
        (name, int(pre) if pre else 1, int(size) if size else sizes[name])
        for name, pre, size in _AXIS_REF.findall(axes_text)
    ]
    cuts = {name: {1, size} for name, size in sizes.items()}
    for name, pre, size in refs:
        cuts[name] |= {pre, pre * size}
    factors: list[tuple[str, int, int]] = []  # (axis, pre-size, size), major first
    for name in sizes:
        bounds = sorted(cuts[name])
        factors.extend((name, lo, hi // lo) for lo, hi in itertools.pairwise(bounds))
    total = int(np.prod(list(sizes.values()), dtype=np.int64))
    ids = np.arange(total, dtype=np.int64).reshape([size for _, _, size in factors] or [1])
    named = []
    for name, pre, size in refs:
        named.extend(
            index
            for index, (axis, lo, width) in enumerate(factors)
            if axis == name and pre <= lo and lo * width <= pre * size
        )
    others = [index for index in range(len(factors)) if index not in named]
    group = int(np.prod([factors[index][2] for index in named], dtype=np.int64))
    return ids.transpose(others + named).reshape(-1, group)
