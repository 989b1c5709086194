"""sink-gathers: return inner-map outputs split instead of all-gathering them.

After flatten-maps, an inner map's stacked output is an untiled
`pmapc.all_gather` over the inner axis. When @main returns that value
(through reshapes that only add or drop unit dimensions), the devices need
not exchange anything: @main returns each device's own block, its
`pmapc.split` names the inner axis on that dimension, and the runtime
assembles the global array from the blocks. The gather stays only for other
users. Repeats until nothing changes, so 3-deep nests return fully split.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import dialect, hlo, ir
from pmapc.passes import patterns


@dataclasses.dataclass(frozen=True)
class SinkGathersPass:
    """Return gathered inner-map outputs as split results, without the all_gather."""

    name: ClassVar[str] = "sink-gathers"

    def run(self, module: ir.Module) -> bool:
        if dialect.read_mesh(module) is None:
            return False
        main = ir.functions(module)["main"]
        block = ir.function_entry_block(main)
        returned = [op for op in block.operations if op.name == "func.return"][0].operation
        changed = False
        progress = True
        while progress:
            progress = False
            for index in range(len(returned.operands)):
                progress |= sink_result(main, returned, index)
            changed |= progress
        if changed:
            ir.set_function_type(main, [a.type for a in block.arguments],
                                 [v.type for v in returned.operands])
        return changed


def sink_result(main, returned: ir.Operation, index: int) -> bool:
    value = returned.operands[index]
    gathered = patterns.through_unit_reshapes(value)
    match = patterns.untiled_gather(gathered)
    if match is None:
        return False
    gather, axis, dim = match
    shape = list(ir.shape_of(value.type))
    split = [list(d) for d in dialect.read_split(
        ir.get_arg_attr(main, "res", index, dialect.SPLIT_ATTR), len(shape))]
    if any(axis in d for d in split) or ir.shape_of(gathered.type)[dim] == 1:
        return False
    result_dim = patterns.matching_dim(ir.shape_of(gathered.type), dim, shape)
    shape[result_dim] = 1
    split[result_dim].append(axis)
    block = hlo.reshape(gather.operands[0], shape, loc=gather.location,
                        ip=ir.InsertionPoint(returned))
    returned.operands[index] = block
    ir.set_arg_attr(main, "res", index, dialect.SPLIT_ATTR, dialect.split_attr(split))
    patterns.erase_unused_reshapes(value)
    patterns.erase_if_unused(gather)
    return True
