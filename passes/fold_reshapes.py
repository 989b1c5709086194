"""fold-reshapes: fold the reshape chains the rewrites leave behind.

`reshape(reshape(x))` is one reshape, a reshape to the same type is nothing.
In the default pipeline MLIR's canonicalize and cse follow it (the named
pipeline `simplify`, compiler/pipeline.py): they share equal constants and
index arithmetic and drop dead ops.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import ir
from pmapc.passes import patterns
from pmapc.passes.base import Analyses, Analysis
from pmapc.passes.op_index import index_of, op_index
from pmapc.rewriter import Rewriter


@dataclasses.dataclass(frozen=True)
class FoldReshapesPass:
    """Fold reshape chains: a reshape of a reshape is one, a reshape to its type none."""

    name: ClassVar[str] = "fold-reshapes"
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        changed = False
        for op in index_of(module, analyses).ops("stablehlo.reshape"):
            changed |= fold_reshape(op, rewriter)
        return changed


def fold_reshape(op: ir.Operation, rewriter: Rewriter) -> bool:
    """Reshape the source of a reshape chain directly; drop reshapes to the same type.
    Whether it changed anything."""
    source = op.operands[0]
    producer = patterns.defining_op(source)
    changed = False
    if producer is not None and producer.name == "stablehlo.reshape":
        source = producer.operands[0]
        rewriter.set_operand(op, 0, source)
        patterns.erase_if_unused(producer, rewriter)
        changed = True
    if source.type == op.results[0].type:
        rewriter.replace(op, [source])
        changed = True
    return changed
