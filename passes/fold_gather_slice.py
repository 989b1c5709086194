"""fold-gather-slice: a slice at the device's own index of an all_gather is its input.

When an inner map's output feeds another inner map over the same axis (two
inner maps in a row), flatten-maps gathers the first map's blocks over the
axis and the second map slices its own block back out. The pair cancels:
`dynamic_slice(all_gather(x, axis, dim), own index along dim)` is `x` with a
unit dimension at `dim`. The gather goes when nothing else uses it.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import dialect, hlo, ir
from pmapc.passes import patterns
from pmapc.passes.base import Analyses, Analysis, Form
from pmapc.passes.op_index import index_of, op_index
from pmapc.rewriter import Rewriter


@dataclasses.dataclass(frozen=True)
class FoldGatherSlicePass:
    """Cancel an untiled all_gather followed by a slice at the device's own index."""

    name: ClassVar[str] = "fold-gather-slice"
    accepts: ClassVar[Form] = Form.FLATTENED
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        changed = False
        views = analyses.views
        for op in index_of(module, analyses).ops("stablehlo.dynamic_slice"):
            changed |= fold(op, views, rewriter)
        return changed


def fold(op: ir.Operation, views: dialect.Views, rewriter: Rewriter) -> bool:
    own = patterns.own_slice_of(op, views)
    match = patterns.untiled_gather(op.operands[0], views)
    if own is None or match is None or (match[1], match[2]) != own:
        return False
    gather = match[0]
    block = hlo.reshape(rewriter.before(op), gather.operands[0], ir.shape_of(op.results[0].type))
    rewriter.replace_all_uses(op.results[0], block)
    patterns.erase_slice(op, rewriter)
    patterns.erase_if_unused(gather, rewriter)
    return True
