"""The op index: the ops passes look up by name, found in one walk and shared.

Walking a module from Python costs a microsecond or more per op, whatever the
walk looks for, so the passes that look ops up by name (predicate-divergent
the branches and loops, fold-gather-slice and sink-slices the slices,
sink-gathers and lower-collectives the custom_calls, combine-all-reduces and
the target passes the collectives, fold-reshapes the reshapes) share one walk
through `Analyses`. It stays current through a pass that keeps it (its edits
all go through its rewriter): `IndexKeeper` listens, takes each op built where
it stands, drops each op erased and moves the ops of each body inlined
(passes/base.py attaches it). flatten-maps provides the index of the program
it flattens from the walks of the nesting analysis, and the keeper keeps it
through the inlining; a pass that keeps it not drops it, and the next pass that
needs it walks again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from pmapc import dialect, hlo, ir
from pmapc.passes.base import Keeper, KeptAnalysis
from pmapc.rewriter import Walk

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
        *hlo.CONTROL_FLOW,
    )
)

Entry = tuple[str, ir.Operation, int]  # an op's name, the op, its identity (`ir.op_key`)


@dataclasses.dataclass(frozen=True)
class OpIndex:
    """The indexed ops of each function, by function name, in pre-order. (One that
    flatten-maps provides lacks the functions @main does not reach, which it erases;
    a keeper walks a function its index lacks, should it stay.)"""

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


def walk_op_index(module: ir.Module) -> OpIndex:
    """The analysis (`op_index`): one walk of every function."""
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
    before: list[_Placed] | None = None  # what stands right before it, in order


@dataclasses.dataclass(slots=True)
class _Body:
    """A function's body inlined, standing where it was put: its ops as the index
    held them, and the ops built at its start and end."""

    start: list[_Placed] | None
    entries: list[Entry]
    end: list[_Placed] | None


_Placed = _Built | _Body  # what stands right before an anchor


class IndexKeeper(Keeper):
    """An op index kept current through a pass's rewrites (a rewriter `Listener`).

    Each op built stands right before an anchor, found from its insertion point
    when it is built: an op of the index, an op built earlier in the pass, or the
    start or the end of a function (before its first op or its terminator). A
    body inlined stands right before the op it is put before, whole: the entries
    of the function it was, with what was built in it (or, for a body the index
    does not hold, such as a function's copy, a walk of it). An indexed op built
    or moved where none of these says where (in a block of an op that is not
    indexed, say) makes its function stale, and `result` walks that function
    again; only such functions are walked.
    """

    def __init__(self, index: OpIndex, module: ir.Module) -> None:
        self.index = index
        self.module = module
        self.alive = {entry[2] for entries in index.functions.values() for entry in entries}
        self.built: dict[int, _Built] = {}  # the ops built in the pass, alive, by identity
        # What stands right before an op of the index (by identity), and at the start
        # and the end of a function (by name); what stands before a built op, in it.
        self.before_op: dict[int, list[_Placed]] = {}
        self.at_start: dict[str, list[_Placed]] = {}
        self.at_end: dict[str, list[_Placed]] = {}
        self.stale: set[str] = set()  # functions to walk again

    @staticmethod
    def holds(result, module: ir.Module) -> bool:
        return walk_op_index(module) == result

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

    def op_moved(self, op: ir.Operation, key: int, ip: ir.InsertionPoint) -> None:
        """An indexed op, or one that may hold some, leaves its place: both functions
        are walked again. What was built before a built op that moves stays where
        it stands; what is built before it later is placed by where it now is."""
        built = self.built.get(key)
        if key in self.alive or op.regions or (built is not None and built.name in INDEXED):
            self._stale_at(op)
            ref = ip.ref_operation
            self._stale_at(ref if ref is not None else ip.block.owner.operation)
        elif built is not None:
            built.placed = False

    def block_moved(self, block: ir.Block, region: ir.Region) -> None:
        """A block with an indexed op in it (a reducer's has none) makes both
        functions stale."""
        ops = [op.operation for op in block.operations]
        if any(op.name in INDEXED or ir.walk_named(op, INDEXED) for op in ops):
            self._stale_at(block.owner.operation)
            self._stale_at(region.owner.operation)

    def body_inlined(
        self, body: ir.Block, site: ir.Operation, key: int, walked: Walk | None
    ) -> None:
        owner = body.owner.operation
        name = ir.symbol_name(owner) if owner.name == "func.func" else None
        if name is None or name in self.stale or len(owner.regions[0].blocks) != 1:
            # A block among others, or what was built in it misplaced: walk both.
            self._stale_at(owner)
            self._stale_at(site)
            return
        anchor = self._anchor_before(site, key, True)
        if anchor is None:
            return  # `site`'s function is stale
        if owner.attached and name in self.index.functions:
            anchor.append(
                _Body(
                    self.at_start.pop(name, None),
                    self.index.functions[name],
                    self.at_end.pop(name, None),
                )
            )
            return
        # A body the index does not hold (a detached copy of a function, say): the
        # caller's walk of it, or one of its own.
        if walked is None or not INDEXED <= walked.names:
            found = ir.walk_named(owner, INDEXED)
        elif walked.names == INDEXED:
            found = walked.found
        else:
            found = [entry for entry in walked.found if entry[0] in INDEXED]
        self.alive.update(entry[2] for entry in found)
        anchor.append(_Body(None, found, None))

    def result(self) -> OpIndex:
        """The index as the pass leaves the module."""
        result = {}
        for name, function in ir.functions(self.module).items():
            if name in self.stale or name not in self.index.functions:
                result[name] = ir.walk_named(function, INDEXED)
                continue
            entries: list[Entry] = []
            body = _Body(self.at_start.get(name), self.index.functions[name], self.at_end.get(name))
            self._emit(entries, body)
            result[name] = entries
        return OpIndex(result)

    def _emit(self, entries: list[Entry], body: _Body) -> None:
        """Add the indexed ops of `body` still there, each after what stands before it."""
        before_op, alive = self.before_op, self.alive
        self._extend(entries, body.start)
        for entry in body.entries:
            key = entry[2]
            if key in before_op:
                self._extend(entries, before_op[key])
            if key in alive:
                entries.append(entry)
        self._extend(entries, body.end)

    def _extend(self, entries: list[Entry], placed: list[_Placed] | None) -> None:
        """Add the indexed ops of `placed` still there, each after what stands before
        it, in order."""
        if not placed:
            return
        for item in placed:
            if isinstance(item, _Body):
                self._emit(entries, item)
                continue
            if item.before:
                self._extend(entries, item.before)
            if not item.erased and item.name in INDEXED:
                entries.append((item.name, item.op, item.key))

    def _anchor(self, ip: ir.InsertionPoint, indexed: bool) -> list[_Placed] | None:
        """The list of what stands right before what an op built at `ip` stands
        before; None if unknown (then, for an indexed op, its function is stale)."""
        ref = ip.ref_operation
        if ref is None:
            return self._in_block(ip.block, None, indexed)
        return self._anchor_before(ref, ir.op_key(ref), indexed)

    def _anchor_before(self, ref: ir.Operation, key: int, indexed: bool) -> list[_Placed] | None:
        """`_anchor` for an op built right before `ref` (whose identity is `key`)."""
        built = self.built.get(key)
        if built is not None and (built.placed or not indexed):
            if not built.placed:
                return None
            if built.before is None:
                built.before = []
            return built.before
        if key in self.alive:
            return self.before_op.setdefault(key, [])
        return self._in_block(ref.block, ref, indexed)

    def _in_block(
        self, block: ir.Block, ref: ir.Operation | None, indexed: bool
    ) -> list[_Placed] | None:
        """`_anchor` for an op built before `ref` in `block` (at its end: None), where
        no op of the index or built before says where."""
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

    def _stale_at(self, op: ir.Operation) -> None:
        """Walk again the function `op` stands in (if it stands in one)."""
        op = op.operation
        while op.name != "func.func":
            parent = op.parent
            if parent is None:
                return
            op = parent.operation
        self.stale.add(ir.symbol_name(op))


# The op index, kept current through a pass by `IndexKeeper`.
op_index = KeptAnalysis("op_index", walk_op_index, IndexKeeper)
