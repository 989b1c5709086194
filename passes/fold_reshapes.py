"""fold-reshapes: fold the reshape chains the rewrites leave behind, and the unit
dimensions a device's blocks drop and take back.

`reshape(reshape(x))` is one reshape, a reshape to the same type is nothing.

A reshape that only drops unit dimensions (a squeeze: flatten-maps drops each
map's dimension, of size 1 in a device's block) moves below the elementwise ops
and single all_reduces that use it, which then compute on the block as it came:
`f(squeeze(x), fill) -> squeeze(f(x, fill'))`, where each other operand is a
squeeze of a value of `x`'s shape, a broadcast scalar or a splat constant (the
same at every position, made in `x`'s shape). Where the squeeze meets a reshape
that gives the dimensions back, both go, and the program computes on its blocks
as `jax.shard_map`'s body does (XLA compiles a tiny nest's module sooner
without them: benchmarks/new_programs.py). A squeeze that
meets neither stays where it is.

In the default pipeline MLIR's canonicalize and cse follow it (the named
pipeline `simplify`, compiler/pipeline.py): they share equal constants and
index arithmetic and drop dead ops.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import hlo, ir
from pmapc.passes import patterns
from pmapc.passes.base import Analyses, Analysis
from pmapc.passes.op_index import index_of, op_index
from pmapc.rewriter import Rewriter

RESHAPE = "stablehlo.reshape"


@dataclasses.dataclass(frozen=True)
class FoldReshapesPass:
    """Fold reshape chains, and move unit-dimension squeezes down to their inverses."""

    name: ClassVar[str] = "fold-reshapes"
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        changed = False
        left = []  # the reshapes not dropped
        # (The index is the IR's as the pass began, in pre-order: a reshape's
        # producer comes before it.)
        for op in index_of(module, analyses).ops(RESHAPE):
            producer = patterns.defining_op(op.operands[0])
            if producer is not None and producer.name == RESHAPE:
                rewriter.set_operand(op, 0, producer.operands[0])  # the chain's source
                changed = True
            if drop_if_identity(op, rewriter):
                changed = True
            else:
                left.append(op)
        # No reshape's operand is a reshape's result now; one no op uses is nothing.
        squeezes = []
        for op in left:
            if not list(op.results[0].uses):
                rewriter.erase(op)
                changed = True
            elif is_squeeze(op):
                squeezes.append(op)
        while squeezes:
            changed |= sink_squeeze(squeezes.pop(), squeezes, rewriter)
        return changed


def drop_if_identity(op: ir.Operation, rewriter: Rewriter) -> bool:
    """Drop a reshape to its operand's type; whether it did."""
    if op.operands[0].type != op.results[0].type:
        return False
    rewriter.replace(op, [op.operands[0]])
    return True


def is_squeeze(op: ir.Operation) -> bool:
    """Whether `op` is a reshape that only drops unit dimensions of its operand."""
    if op.name != RESHAPE:
        return False
    before, after = ir.shape_of(op.operands[0].type), ir.shape_of(op.results[0].type)
    return len(after) < len(before) and [d for d in before if d != 1] == [
        d for d in after if d != 1
    ]


def sink_squeeze(squeeze: ir.Operation, squeezes: list[ir.Operation], rewriter: Rewriter) -> bool:
    """Move `squeeze` below each use it can pass, and drop the reshapes that undo it;
    the squeezes of the results it passed join `squeezes`. Whether anything changed.

    A reshape among its users (one that used the result of an op it passed) now
    reshapes its operand, or is nothing. No op that `squeezes` holds is erased
    here but `squeeze`: a reshape erased undoes `squeeze`, so it is no squeeze."""
    block, small = squeeze.operands[0], squeeze.results[0]
    changed = False
    for user, index in ir.uses_of(small):
        if user.operands[index] != small:
            continue  # a use of an op that moved the squeeze below it already
        if user.name == RESHAPE:  # a chain: `user` reshapes `block`, or is nothing
            rewriter.set_operand(user, 0, block)
            drop_if_identity(user, rewriter)
            changed = True
        elif _passes(user, small, block.type):
            squeezes.append(_lift(user, small, block, rewriter))
            changed = True
    patterns.erase_if_unused(squeeze, rewriter)
    return changed


def _passes(op: ir.Operation, small: ir.Value, big: ir.Type) -> bool:
    """Whether a squeeze to `small` (from type `big`) moves below `op`, a user of it."""
    if op.name == "stablehlo.all_reduce":
        return len(op.operands) == 1
    if op.name not in hlo.ELEMENTWISE:
        return False
    shape = ir.shape_of(big)
    return all(
        v == small or _squeezed_from(v, shape) is not None or patterns.fill_of(v) is not None
        for v in op.operands
    )


def _lift(op: ir.Operation, small: ir.Value, block: ir.Value, rewriter: Rewriter) -> ir.Operation:
    """`op` on the unsqueezed operands, its result squeezed back for its users: the
    new squeeze."""
    shape = ir.shape_of(block.type)
    result = op.results[0]
    squeezed = rewriter.after(op).create(RESHAPE, [result], [result.type])
    for user, index in ir.uses_of(result):
        if user != squeezed:
            rewriter.set_operand(user, index, squeezed.result)
    b = rewriter.before(op)
    for index, value in enumerate(list(op.operands)):
        if value == small:
            lifted = block
        else:
            lifted = _squeezed_from(value, shape) or patterns.fill_like(b, value, shape)
        rewriter.set_operand(op, index, lifted)
        filled = patterns.fill_of(value) if lifted != value else None
        if filled is not None:  # (a squeeze goes when its turn in `squeezes` comes)
            patterns.erase_if_unused(filled, rewriter)
    rewriter.set_result_type(op, 0, ir.tensor_type(shape, ir.element_type_of(result.type)))
    return squeezed


def _squeezed_from(value: ir.Value, shape: tuple[int, ...]) -> ir.Value | None:
    """The operand of the squeeze that makes `value` from a value of `shape`, if one does."""
    producer = patterns.defining_op(value)
    if producer is None or not is_squeeze(producer):
        return None
    source = producer.operands[0]
    return source if ir.shape_of(source.type) == shape else None
