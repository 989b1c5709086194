"""simplify: fold reshape chains, then MLIR's canonicalize and cse.

Folds the reshape chains the rewrites leave behind (`reshape(reshape(x))` is
one reshape, a reshape to the same type is nothing), shares equal constants
and index arithmetic, and drops dead ops. Canonicalize runs without region
simplification (merging blocks, dropping unreachable ones and dead block
arguments): StableHLO's regions are single blocks, where it finds nothing to
do, and it cost a third of canonicalize's time on W4.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import ir
from pmapc.passes import patterns
from pmapc.passes.base import Analyses, Analysis
from pmapc.passes.op_index import index_of, op_index
from pmapc.rewriter import Rewriter

# MLIR's passes, in mlir-opt's textual form.
UPSTREAM = "canonicalize{region-simplify=disabled},cse"


@dataclasses.dataclass(frozen=True)
class SimplifyPass:
    """Run MLIR's canonicalize and cse: fold reshapes, share constants, drop dead ops."""

    name: ClassVar[str] = "simplify"
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)
    keeps: ClassVar[tuple[Analysis, ...]] = ()  # MLIR's passes edit without the rewriter

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        """True: canonicalize and cse report no change count, so this says "maybe"."""
        for op in index_of(module, analyses).ops("stablehlo.reshape"):
            fold_reshape(op, rewriter)
        ir.run_upstream_passes(module, UPSTREAM)
        return True


def fold_reshape(op: ir.Operation, rewriter: Rewriter) -> None:
    """Reshape the source of a reshape chain directly; drop reshapes to the same type."""
    source = op.operands[0]
    producer = patterns.defining_op(source)
    if producer is not None and producer.name == "stablehlo.reshape":
        source = producer.operands[0]
        rewriter.set_operand(op, 0, source)
        patterns.erase_if_unused(producer, rewriter)
    if source.type == op.results[0].type:
        rewriter.replace(op, [source])
