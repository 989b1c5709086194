"""The op index: the ops passes look up by name, found in one walk and shared.

Walking a module from Python costs a microsecond or more per op, whatever the
walk looks for, so the passes that look ops up by name (fold-gather-slice
the slices, sink-gathers and lower-collectives the custom_calls,
combine-all-reduces and the target passes the collectives, simplify the
reshapes) share one walk through `Analyses`. It stays current through a pass
that edits only through its rewriter: `IndexKeeper` listens, takes each op
built where it stands and drops each op erased (passes/base.py attaches it).
flatten-maps builds the index of the program it flattens from the walks of the
nesting analysis; a pass that edits otherwise drops it, and the next pass that
needs it walks again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import ClassVar

from pmapc import dialect, hlo, ir

# Every name a pass looks up (asking for another is a pmapc bug, caught by `ops`).
INDEXED = frozenset(
    (
        dialect.CUSTOM_CALL,
        "func.call",
        "stablehlo.dynamic_slice",
        "stablehlo.reshape",
        "stablehlo.replica_id",
        "stablehlo.partition_id",
        *hlo.COLLECTIVE_OPS,
    )
)

Entry = tuple[str, ir.Operation, int]  # an op's name, the op, its identity (`ir.op_key`)


@dataclasses.dataclass(frozen=True)
class OpIndex:
    """The indexed ops of each function, by function name, in pre-order."""

    functions: dict[str, list[Entry]]

    def ops(self, names: str | Collection[str], function: str | None = None) -> list[ir.Operation]:
        """The ops named `names` of `function` (default: of every function, in module
        order), in pre-order."""
        return [entry[1] for entry in self.entries(names, function)]

    def entries(self, names: str | Collection[str], function: str | None = None) -> list[Entry]:
        """`ops`, as index entries."""
        wanted = {names} if isinstance(names, str) else set(names)
        assert wanted <= INDEXED, f"not indexed: {sorted(wanted - INDEXED)}"
        lists = self.functions.values() if function is None else [self.functions.get(function, [])]
        return [entry for entries in lists for entry in entries if entry[0] in wanted]


def op_index(module: ir.Module) -> OpIndex:
    """The analysis: one walk of every function."""
    return OpIndex(
        {name: ir.walk_named(function, INDEXED) for name, function in ir.functions(module).items()}
    )


def index_of(module: ir.Module, analyses) -> OpIndex:
    """The module's op index, shared through `analyses` (a `passes.base.Analyses`)."""
    return analyses.get(op_index, module)


@dataclasses.dataclass(slots=True)
class _Built:
    """An op a pass built, in the order built."""

    name: str
    op: ir.Operation
    key: int
    placed: bool  # whether where it stands is known (see IndexKeeper)
    erased: bool = False
    before: list[_Built] | None = None  # the ops built right before it, in order


class IndexKeeper:
    """An op index kept current through a pass's rewrites (a rewriter `Listener`).

    Each op built stands right before an anchor, found from its insertion point
    when it is built: an op of the index, an op built earlier in the pass, or the
    start or the end of a function (before its first op or its terminator). An
    indexed op built where none of these says where (in a block of an op that is
    not indexed, say) makes its function stale, and `result` walks that function
    again; only such functions are walked.
    """

    needs_result: ClassVar[bool] = True
    watches_attributes: ClassVar[bool] = False  # the index holds no attributes

    def __init__(self, index: OpIndex, module: ir.Module) -> None:
        self.index = index
        self.module = module
        self.alive = {entry[2] for entries in index.functions.values() for entry in entries}
        self.built: dict[int, _Built] = {}  # the ops built in the pass, alive, by identity
        # The ops built right before an indexed op (by identity), and at the start
        # and the end of a function (by name); those before a built op, in it.
        self.before_op: dict[int, list[_Built]] = {}
        self.at_start: dict[str, list[_Built]] = {}
        self.at_end: dict[str, list[_Built]] = {}
        self.stale: set[str] = set()  # functions to walk again

    def op_created(
        self, op: ir.Operation, key: int, ip: ir.InsertionPoint, source: int | None
    ) -> None:
        name = op.name
        indexed = name in INDEXED
        anchor = self._anchor(ip, indexed)
        built = _Built(name, op, key, anchor is not None)
        if anchor is not None:
            anchor.append(built)
        self.built[key] = built

    def op_erased(self, op: ir.Operation, key: int) -> None:
        built = self.built.pop(key, None)
        if built is not None:
            built.erased = True  # its address may come back for another op
        self.alive.discard(key)

    def op_modified(self, op: ir.Operation, key: int) -> None:
        pass

    def result(self) -> OpIndex:
        """The index as the pass leaves the module."""
        result = {}
        before_op, alive = self.before_op, self.alive
        for name, function in ir.functions(self.module).items():
            if name in self.stale:
                result[name] = ir.walk_named(function, INDEXED)
                continue
            entries: list[Entry] = []
            _extend(entries, self.at_start.get(name))
            for entry in self.index.functions.get(name, []):
                key = entry[2]
                if key in before_op:
                    _extend(entries, before_op[key])
                if key in alive:
                    entries.append(entry)
            _extend(entries, self.at_end.get(name))
            result[name] = entries
        return OpIndex(result)

    def _anchor(self, ip: ir.InsertionPoint, indexed: bool) -> list[_Built] | None:
        """The list of the ops built right before what an op built at `ip` stands
        before; None if unknown (then, for an indexed op, its function is stale)."""
        ref = ip.ref_operation
        if ref is not None:
            key = ir.op_key(ref)
            built = self.built.get(key)
            if built is not None and (built.placed or not indexed):
                if not built.placed:
                    return None
                if built.before is None:
                    built.before = []
                return built.before
            if key in self.alive:
                return self.before_op.setdefault(key, [])
            block = ref.block
        else:
            block = ip.block
        owner = block.owner.operation
        if owner.name == "func.func" and block == ir.function_entry_block(owner):
            name = ir.symbol_name(owner)
            if ref is None or ref == ir.terminator(block):
                return self.at_end.setdefault(name, [])
            if ref == block.operations[0]:
                return self.at_start.setdefault(name, [])
        if indexed:
            self.stale.add(ir.symbol_name(ir.enclosing_function(owner)))
        return None


def _extend(entries: list[Entry], built_before: list[_Built] | None) -> None:
    """Add the indexed ops of `built_before` still there, each after the ones built
    before it, in order."""
    if not built_before:
        return
    for built in built_before:
        if built.before:
            _extend(entries, built.before)
        if not built.erased and built.name in INDEXED:
            entries.append((built.name, built.op, built.key))
