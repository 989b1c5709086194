"""sink-gathers: return inner-map outputs split instead of all-gathering them.

After flatten-maps, an inner map's stacked output is an untiled
`pmapc.all_gather` over the inner axis. When @main returns that value
(through reshapes that only add or drop unit dimensions), the devices need
not exchange anything: @main returns each device's own block, its
`pmapc.split` names the inner axis on that dimension, and the runtime
assembles the global array from the blocks. The gather stays only for other
users. Repeats until nothing changes, so 3-deep nests return fully split.

To reach the results, a gather first moves below elementwise ops whose other
operands are the same everywhere (splat constants, broadcast scalar constants
or scalar arguments of @main): `all_gather(x) * 0.5` becomes
`all_gather(x * 0.5)`, which also computes on one block instead of the whole
stack. It also moves below a psum, pmax or
pmin over other axes: `psum(all_gather(x, "model"), "data")` becomes
`all_gather(psum(x, "data"), "model")`, which reduces a block instead of the
stack.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import collectives, dialect, hlo, ir
from pmapc.passes import patterns
from pmapc.passes.base import Analyses, Analysis, Form
from pmapc.passes.op_index import index_of, op_index
from pmapc.rewriter import Rewriter


@dataclasses.dataclass(frozen=True)
class SinkGathersPass:
    """Return gathered inner-map outputs as split results, without the all_gather."""

    name: ClassVar[str] = "sink-gathers"
    accepts: ClassVar[Form] = Form.FLATTENED
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        if analyses.views.read_mesh(module) is None:
            return False
        views = analyses.views
        gathers = [
            op
            for op in index_of(module, analyses).ops(dialect.CUSTOM_CALL, "main")
            if views.collective_of(op) is collectives.ALL_GATHER
        ]
        if not gathers:
            return False  # what it moves and returns split are @main's gathers
        main = ir.functions(module)["main"]
        block = ir.function_entry_block(main)
        returned = ir.terminator(block)
        moved = push_gathers_down(gathers, views, rewriter)
        splits = patterns.Splits(main, "res")
        sunk = patterns.repeat_until_unchanged(
            lambda: sink_results(returned, splits, views, rewriter)
        )
        changed = moved or sunk
        if changed:
            ir.set_function_type(
                main, [a.type for a in block.arguments], [v.type for v in returned.operands]
            )
            splits.write()
        return changed


def sink_results(
    returned: ir.Operation, splits: patterns.Splits, views: dialect.Views, rewriter: Rewriter
) -> bool:
    """Return split every gathered result that can be; whether any was."""
    changed = False
    for index in range(len(returned.operands)):
        changed |= sink_result(returned, index, splits, views, rewriter)
    return changed


def sink_result(
    returned: ir.Operation,
    index: int,
    splits: patterns.Splits,
    views: dialect.Views,
    rewriter: Rewriter,
) -> bool:
    value = returned.operands[index]
    gathered = patterns.through_unit_reshapes(value)
    match = patterns.untiled_gather(gathered, views)
    if match is None:
        return False
    gather, axis, dim = match
    if ir.shape_of(gathered.type)[dim] == 1:
        return False
    shape = list(ir.shape_of(value.type))
    result_dim = patterns.matching_dim(ir.shape_of(gathered.type), dim, shape)
    if not splits.split_over(index, result_dim, axis):
        return False
    shape[result_dim] = 1
    block = hlo.reshape(rewriter.before(returned, gather.location), gather.operands[0], shape)
    rewriter.set_operand(returned, index, block)
    patterns.erase_unused_reshapes(value, rewriter)
    patterns.erase_if_unused(gather, rewriter)
    return True


def push_gathers_down(
    gathers: list[ir.Operation], views: dialect.Views, rewriter: Rewriter
) -> bool:
    """Move every untiled gather of `gathers` (@main's all_gathers) below the
    elementwise ops and reductions it can pass."""
    pending = list(gathers)
    changed = False
    while pending:
        gather = pending.pop()
        users = ir.uses_of(gather.results[0])
        if len(users) != 1 or patterns.untiled_gather(gather.results[0], views) is None:
            continue
        user = users[0][0]
        moved = push_below_elementwise(user, views, rewriter) or push_below_reduction(
            user, views, rewriter
        )
        if moved is not None:
            pending.append(moved)
            changed = True
    return changed


def push_below_elementwise(
    op: ir.Operation, views: dialect.Views, rewriter: Rewriter
) -> ir.Operation | None:
    """`f(all_gather(x), uniform...)` -> `all_gather(f(x, uniform...))`; the new gather."""
    if op.name not in hlo.ELEMENTWISE:
        return None
    gathers = [
        (i, found)
        for i, v in enumerate(op.operands)
        if (found := patterns.untiled_gather(v, views)) is not None
    ]
    if len(gathers) != 1:
        return None
    position, (gather, axis, dim) = gathers[0]
    if len(list(op.operands[position].uses)) != 1:
        return None
    others = [v for i, v in enumerate(op.operands) if i != position]
    if not all(is_uniform(v) for v in others):
        return None
    block = gather.operands[0]
    b = rewriter.before(op)
    operands = [
        block if i == position else patterns.fill_like(b, v, ir.shape_of(block.type))
        for i, v in enumerate(op.operands)
    ]
    result_type = ir.tensor_type(ir.shape_of(block.type), ir.element_type_of(op.results[0].type))
    attributes = ir.attributes_of(op)
    local = b.create(op.name, operands, [result_type], attributes)
    return regather(op, gather, local.result, axis, dim, rewriter)


def push_below_reduction(
    op: ir.Operation, views: dialect.Views, rewriter: Rewriter
) -> ir.Operation | None:
    """`psum(all_gather(x, a), axes)` -> `all_gather(psum(x, axes), a)` when `a` is not
    in `axes` (likewise pmax and pmin); the new gather."""
    collective = views.collective_of(op)
    if collective is None or not collective.reduction or len(op.operands) != 1:
        return None
    match = patterns.untiled_gather(op.operands[0], views)
    view = views.collective(op)
    if match is None or match[1] in view.axes or len(list(op.operands[0].uses)) != 1:
        return None
    gather, axis, dim = match
    block = gather.operands[0]
    reduced = dialect.create_collective(
        rewriter.before(op), view.kind, [block], [block.type], view.axes, view.params
    )
    return regather(op, gather, reduced.results[0], axis, dim, rewriter)


def regather(
    op: ir.Operation, gather: ir.Operation, local: ir.Value, axis: str, dim: int, rewriter: Rewriter
) -> ir.Operation:
    """Replace `op` (which used `gather`) by a gather of `local`, computed on one block."""
    stacked = dialect.create_collective(
        rewriter.before(op, gather.location),
        collectives.ALL_GATHER.kind,
        [local],
        [op.results[0].type],
        [axis],
        collectives.AllGatherParams(all_gather_dimension=dim, tiled=False),
    )
    rewriter.replace(op, [stacked.result])
    rewriter.erase(gather)
    return stacked


def is_uniform(value: ir.Value) -> bool:
    """Whether `value` is a splat constant or a broadcast scalar, constant or an
    argument of @main: the same at every position and on every device (an
    `axis_index`, say, is not). A scalar argument of @main has no dimension to
    split; `jax.jit` passes a map's float literals as such (lowering/structure.py)."""
    fill = patterns.fill_of(value)
    if fill is None or fill.name == "stablehlo.constant":
        return fill is not None
    scalar = fill.operands[0]
    argument = ir.entry_argument(scalar)
    if argument is not None and argument[0] == "main":
        return True
    constant = patterns.fill_of(scalar)
    return constant is not None and constant.name == "stablehlo.constant"
