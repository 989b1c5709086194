"""The op index: the ops passes look up by name, found in one walk and shared.

Walking a module from Python costs a microsecond or more per op, whatever the
walk looks for, so the passes that look ops up by name (fold-gather-slice
the slices, sink-gathers and lower-collectives the custom_calls,
combine-all-reduces and the target passes the collectives, simplify the
reshapes) share one walk through `Analyses`. A pass that rewrites a few ops
and knows where the indexed ops it built stand brings the index up to date
(`edited`, from the `ir.Edits` it recorded) and preserves it; flatten-maps
builds it from the walks of the nesting analysis; any other pass that changes
the IR drops it, and the next pass that needs it walks again.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Collection, Iterator

from pmapc import dialect, ir

# Every name a pass looks up (asking for another is a pmapc bug, caught by `ops`).
INDEXED = frozenset((
    dialect.CUSTOM_CALL,
    "func.call",
    "stablehlo.dynamic_slice",
    "stablehlo.reshape",
    "stablehlo.replica_id",
    "stablehlo.partition_id",
    "stablehlo.all_reduce",
    "stablehlo.all_gather",
    "stablehlo.reduce_scatter",
    "stablehlo.all_to_all",
    "stablehlo.collective_permute",
))

Entry = tuple[str, ir.Operation, int]  # an op, its name and its `ir.op_key`
Built = tuple[str, ir.Operation, int]  # an op a pass made, its name and step (ir.Edits)


@dataclasses.dataclass(frozen=True)
class OpIndex:
    """The indexed ops of each function, by function name, in pre-order."""

    functions: dict[str, list[Entry]]

    def ops(self, names: str | Collection[str], function: str | None = None
            ) -> list[ir.Operation]:
        """The ops named `names` of `function` (default: of every function, in module
        order), in pre-order."""
        return [entry[1] for entry in self.entries(names, function)]

    def entries(self, names: str | Collection[str], function: str | None = None
                ) -> list[Entry]:
        """`ops`, as index entries."""
        wanted = {names} if isinstance(names, str) else set(names)
        assert wanted <= INDEXED, f"not indexed: {sorted(wanted - INDEXED)}"
        lists = self.functions.values() if function is None else [
            self.functions.get(function, [])]
        return [entry for entries in lists for entry in entries if entry[0] in wanted]

    def edited(self, placements: Placements) -> OpIndex:
        """The index after the edits `placements` recorded: erased ops go; each indexed
        op built stands where `placements` says (an indexed op built, still there and
        placed nowhere is a pmapc bug)."""
        edits = placements.edits
        placed = {built[2] for entries in placements.all() for built in entries}
        unplaced = [name for name, op, step in indexed(edits.created)
                    if step not in placed and edits.key_if_alive(op, step) is not None]
        assert not unplaced, f"indexed ops built but not placed: {unplaced}"

        def kept(built: list[Built]) -> list[Entry]:
            entries = []
            for name, op, step in built:
                key = edits.key_if_alive(op, step)
                if key is not None:
                    entries.append((name, op, key))
            return entries

        functions = {}
        for function, entries in self.functions.items():
            updated = kept(placements.at_start.get(function, []))
            for entry in entries:
                built = placements.in_place_of.get(entry[2])
                if built is not None:
                    updated.extend(kept(built))  # built right before the op
                if edits.alive(entry[2]) and entry[2] not in placements.replaced:
                    updated.append(entry)
            updated.extend(kept(placements.at_end.get(function, [])))
            functions[function] = updated
        return OpIndex(functions)


def op_index(module: ir.Module) -> OpIndex:
    """The analysis: one walk of every function."""
    return OpIndex({name: ir.walk_named(function, INDEXED)
                    for name, function in ir.functions(module).items()})


def index_of(module: ir.Module, analyses=None) -> OpIndex:
    """The module's op index: the shared one if the pass runs with `analyses` (a
    `passes.base.Analyses`), else a walk of its own."""
    return analyses.get(op_index, module) if analyses is not None else op_index(module)


def indexed(built: list[Built]) -> list[Built]:
    """The ops of `built` (e.g. `ir.Edits.created`) with indexed names."""
    return [entry for entry in built if entry[0] in INDEXED]


class Placements:
    """Where the indexed ops a pass builds stand, noted while it runs (for `edited`):
    right before an op of the index as it was before the pass (by `ir.op_key`, taken
    before any erase; the op may stay or go), or first or last in a function (by
    name). Ops built in place of ops built by the same pass are not supported."""

    def __init__(self, edits: ir.Edits) -> None:
        self.edits = edits
        self.in_place_of: dict[int, list[Built]] = {}
        self.at_start: dict[str, list[Built]] = {}
        self.at_end: dict[str, list[Built]] = {}
        self._first_or_last: set[int] = set()  # the steps of those at a start or end
        self.replaced: set[int] = set()  # ops erased unrecorded (`replace`)

    def all(self) -> Iterator[list[Built]]:
        yield from self.in_place_of.values()
        yield from self.at_start.values()
        yield from self.at_end.values()

    def mark(self) -> int:
        """Where the ops built from now on start (for `put_in_place`)."""
        return len(self.edits.created)

    def put_in_place(self, key: int, mark: int) -> None:
        """The indexed ops built since `mark` (but those placed first or last in a
        function) stand right before the op of `key` (which may go or stay)."""
        built = [b for b in self.edits.created[mark:]
                 if b[0] in INDEXED and b[2] not in self._first_or_last]
        if key in self.in_place_of:
            self.in_place_of[key].extend(built)
        else:
            self.in_place_of[key] = built

    def replace(self, key: int, mark: int) -> None:
        """`put_in_place`, for an op the pass erased without recording it (a cheaper
        erase, for a pass that replaces thousands of ops)."""
        self.put_in_place(key, mark)
        self.replaced.add(key)

    @contextlib.contextmanager
    def in_place(self, op: ir.Operation) -> Iterator[None]:
        """The ops built inside the `with` block stand right before `op` (which the
        block may erase)."""
        key, mark = ir.op_key(op), self.mark()
        yield
        self.put_in_place(key, mark)

    @contextlib.contextmanager
    def at_start_of(self, function: str) -> Iterator[None]:
        """The ops built inside the `with` block stand first in `function`."""
        mark = self.mark()
        yield
        self._put(self.at_start, function, mark)

    @contextlib.contextmanager
    def at_end_of(self, function: str) -> Iterator[None]:
        """The ops built inside the `with` block stand last in `function`."""
        mark = self.mark()
        yield
        self._put(self.at_end, function, mark)

    def _put(self, table: dict[str, list[Built]], function: str, mark: int) -> None:
        built = indexed(self.edits.created[mark:])
        table.setdefault(function, []).extend(built)
        self._first_or_last.update(b[2] for b in built)

    def preserve(self, analyses, index: OpIndex | None) -> None:
        """Preserve `index` (the op index before the pass, if it was at hand) edited."""
        if analyses is not None and index is not None:
            analyses.preserve(op_index, index.edited(self))
