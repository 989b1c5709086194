"""The op index: the ops passes look up by name, found in one walk and shared.

Walking a module from Python costs a microsecond or more per op, whatever the
walk looks for, so the passes that look ops up by name (fold-gather-slice
the slices, sink-gathers and lower-collectives the custom_calls,
combine-all-reduces and to-partitions the collectives, simplify the
reshapes) share one walk through `Analyses` until a pass changes the IR,
and a pass that knows how its rewrites changed the index preserves it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from pmapc import dialect, ir

# Every name a pass looks up (asking for another is a pmapc bug, caught by `ops`).
INDEXED = frozenset((
    dialect.CUSTOM_CALL,
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


@dataclasses.dataclass(frozen=True)
class OpIndex:
    """The indexed ops of each function, by function name, in pre-order: (name, op)."""

    functions: dict[str, list[tuple[str, ir.Operation]]]

    def ops(self, names: str | Collection[str], function: str | None = None
            ) -> list[ir.Operation]:
        """The ops named `names` of `function` (default: of every function, in module
        order), in pre-order."""
        wanted = {names} if isinstance(names, str) else set(names)
        assert wanted <= INDEXED, f"not indexed: {sorted(wanted - INDEXED)}"
        lists = self.functions.values() if function is None else [
            self.functions.get(function, [])]
        return [op for entries in lists for name, op in entries if name in wanted]

    def without(self, names: Collection[str]) -> OpIndex:
        """The index with no ops named `names` (for a pass that erased only such ops)."""
        return OpIndex({function: [entry for entry in entries if entry[0] not in names]
                        for function, entries in self.functions.items()})


def op_index(module: ir.Module) -> OpIndex:
    """The analysis: one walk of every function."""
    return OpIndex({name: ir.walk_named(function, INDEXED)
                    for name, function in ir.functions(module).items()})


def index_of(module: ir.Module, analyses=None) -> OpIndex:
    """The module's op index: the shared one if the pass runs with `analyses` (a
    `passes.base.Analyses`), else a walk of its own."""
    return analyses.get(op_index, module) if analyses is not None else op_index(module)
