"""combine-all-reduces: independent all_reduces with one reducer and group set become one.

Runs after lower-collectives. In each block, all_reduces with equal
`replica_groups`, reducer and element type are combined into one variadic
`stablehlo.all_reduce` placed where the last of them stood, provided no
result of an earlier one is used before that point (which also rules out one
feeding another). One collective instead of several: fewer synchronizations
and launches (the gradient psums of a training step, for example).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import hlo, ir


@dataclasses.dataclass(frozen=True)
class CombineAllReducesPass:
    """Combine independent all_reduces over the same groups into one variadic all_reduce."""

    name: ClassVar[str] = "combine-all-reduces"

    def run(self, module: ir.Module) -> bool:
        changed = False
        for block in all_blocks(module):
            for group in combinable_groups(block):
                combine(group)
                changed = True
        return changed


def all_blocks(module: ir.Module) -> list[ir.Block]:
    blocks = []
    for function in ir.functions(module).values():
        for op in [function, *ir.walk(function)]:
            for region in op.regions:
                blocks.extend(region.blocks)
    return blocks


def reduction_key(op: ir.Operation):
    """What must match for two all_reduces to combine, or None if `op` is not one."""
    if op.name != "stablehlo.all_reduce" or len(op.operands) != 1:
        return None
    if "channel_handle" in op.attributes:
        return None
    reducer = [o.name for o in op.regions[0].blocks[0].operations]
    if len(reducer) != 2 or reducer[0] not in hlo.REDUCER_OPS.values():
        return None
    element = str(ir.element_type_of(op.operands[0].type))
    return str(op.attributes["replica_groups"]), tuple(reducer), element


def combinable_groups(block: ir.Block) -> list[list[ir.Operation]]:
    """Groups of 2+ all_reduces of one key whose earlier results are unused before the last."""
    ops = [op.operation for op in block.operations]
    position = {op: i for i, op in enumerate(ops)}
    open_groups: dict[object, list[ir.Operation]] = {}
    done = []
    for op in ops:
        key = reduction_key(op)
        if key is None:
            continue
        group = open_groups.get(key, [])
        if group and not all(first_use(member, position) > position[op] for member in group):
            if len(group) > 1:
                done.append(group)
            group = []
        open_groups[key] = [*group, op]
    done.extend(group for group in open_groups.values() if len(group) > 1)
    return done


def first_use(op: ir.Operation, position: dict) -> int:
    """The block position of the earliest user of `op`'s results (users nested in ops count
    at their enclosing op); -1 when a user is elsewhere."""
    earliest = len(position)
    for result in op.results:
        for user, _ in ir.uses_of(result):
            while user is not None and user not in position:
                user = user.parent.operation if user.parent is not None else None
            if user is None:
                return -1
            earliest = min(earliest, position[user])
    return earliest


def combine(group: list[ir.Operation]) -> None:
    last = group[-1]
    operands = [op.operands[0] for op in group]
    attributes = {"replica_groups": last.attributes["replica_groups"]}
    loc = ir.fused_loc([op.location for op in group])
    combined = ir.create_op("stablehlo.all_reduce", operands, [v.type for v in operands],
                            attributes, loc=loc, ip=ir.InsertionPoint(last), regions=1)
    reducer = last.regions[0].blocks[0].operations[0].operation
    kind = {v: k for k, v in hlo.REDUCER_OPS.items()}[reducer.name]
    hlo.build_reducer(combined.regions[0], ir.element_type_of(operands[0].type), kind, loc=loc)
    for op, result in zip(group, combined.results):
        op.results[0].replace_all_uses_with(result)
        op.erase()
