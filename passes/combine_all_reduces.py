"""combine-all-reduces: independent all_reduces with one reducer and group set become one.

Runs after lower-collectives. In each block, all_reduces with equal
`replica_groups`, reducer and element type are combined into one variadic
`stablehlo.all_reduce`, provided there is a place for it: after the last of
their operands is computed and before the first of their results is used
(which also rules out one feeding another). The combined op goes right after
that last operand. One collective instead of several: fewer synchronizations
and launches (the gradient and loss psums of a training step, for example).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import collectives, hlo, ir
from pmapc.passes.base import Analyses
from pmapc.passes.op_index import index_of
from pmapc.passes.rewriter import Rewriter


@dataclasses.dataclass(frozen=True)
class CombineAllReducesPass:
    """Combine independent all_reduces over the same groups into one variadic all_reduce."""

    name: ClassVar[str] = "combine-all-reduces"
    keeps_analyses_current: ClassVar[bool] = True

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        changed = False
        all_reduces = index_of(module, analyses).ops("stablehlo.all_reduce")
        for candidates in candidates_by_block(all_reduces):
            # One group at a time: combining erases ops that another group may hold as
            # its last operand or first use (a pair of sums over the results of a pair),
            # so the block's groups are found again after each combine. Other blocks
            # keep theirs (positions are per block).
            while groups := combinable_groups(candidates):
                erased = {ir.op_key(op) for op in groups[0].members}
                candidates = [c for c in candidates if ir.op_key(c[0]) not in erased]
                combine(groups[0], rewriter)
                changed = True
        return changed


def candidates_by_block(all_reduces: list[ir.Operation]
                        ) -> list[list[tuple[ir.Operation, tuple]]]:
    """(all_reduce, reduction_key) of each block holding two or more that could combine,
    in program order (`all_reduces` is every all_reduce, in program order)."""
    by_block: dict[ir.Block, list[tuple[ir.Operation, tuple]]] = {}
    for op in all_reduces:
        key = reduction_key(op)
        if key is not None:
            by_block.setdefault(op.block, []).append((op, key))
    return [candidates for candidates in by_block.values() if len(candidates) > 1]


def reduction_key(op: ir.Operation) -> tuple | None:
    """What must match for two all_reduces to combine (groups, reducer, element type:
    attributes and types are uniqued, so equal ones are equal keys), or None if `op`
    cannot."""
    attributes = op.attributes
    if len(op.operands) != 1 or "channel_handle" in attributes:
        return None
    body = op.regions[0].blocks[0].operations
    if len(body) != 2:
        return None
    reducer = body[0].name
    if reducer not in collectives.REDUCER_OPS:
        return None
    return attributes["replica_groups"], reducer, ir.element_type_of(op.result.type)


# Positions in a block are ops of that block; None before the first op
# (operands defined outside) or after the last (results not used in it).


def _before(a: ir.Operation | None, b: ir.Operation | None) -> bool:
    """Whether position `a` (a definition) comes strictly before position `b` (a use)."""
    if a is None or b is None:
        return True
    return a.is_before_in_block(b)


def _later(a, b):
    return b if a is None or (b is not None and a.is_before_in_block(b)) else a


def _earlier(a, b):
    return b if a is None or (b is not None and b.is_before_in_block(a)) else a


def _feeds(group: _Group, last_def: ir.Operation | None) -> bool:
    """Whether a member of `group` defines the operand (psum of a psum)."""
    return last_def is not None and any(last_def == member for member in group.members)


def _in_block(op: ir.Operation | None, block: ir.Block) -> ir.Operation | None:
    """`op`, or its ancestor that stands in `block` (None if there is none)."""
    while op is not None and op.block != block:
        parent = op.parent
        op = parent.operation if parent is not None and parent.name != "func.func" else None
    return op


@dataclasses.dataclass
class _Group:
    """All_reduces that can become one: every operand is ready at `last_def`, no result
    is used before `first_use`; the combined op goes right after `last_def`."""

    members: list[ir.Operation]
    last_def: ir.Operation | None
    first_use: ir.Operation | None

    def admits(self, last_def, first_use) -> bool:
        return _before(_later(self.last_def, last_def), _earlier(self.first_use, first_use))


def combinable_groups(candidates: list[tuple[ir.Operation, tuple]]) -> list[_Group]:
    """Groups of 2+ all_reduces of one key (from one block) that can stand together."""
    if len(candidates) < 2:
        return []
    block = candidates[0][0].block
    open_groups: dict[object, _Group] = {}
    done = []
    for op, key in candidates:
        last_def = _in_block(ir.value_owner_op(op.operands[0]), block)
        first_use = None
        for user, _ in ir.uses_of(op.results[0]):
            first_use = _earlier(first_use, _in_block(user, block))
        group = open_groups.get(key)
        if group is not None and not _feeds(group, last_def) and group.admits(
                last_def, first_use):
            group.members.append(op)
            group.last_def = _later(group.last_def, last_def)
            group.first_use = _earlier(group.first_use, first_use)
            continue
        if group is not None and len(group.members) > 1:
            done.append(group)
        open_groups[key] = _Group([op], last_def, first_use)
    done.extend(group for group in open_groups.values() if len(group.members) > 1)
    return done


def combine(group: _Group, rewriter: Rewriter) -> None:
    members = group.members
    operands = [op.operands[0] for op in members]
    attributes = {"replica_groups": members[-1].attributes["replica_groups"]}
    loc = ir.fused_loc([op.location for op in members])
    b = (rewriter.after(group.last_def, loc) if group.last_def is not None
         else rewriter.at_start(members[0].block, loc))
    combined = b.create("stablehlo.all_reduce", operands, [v.type for v in operands],
                        attributes, regions=1)
    reducer = members[-1].regions[0].blocks[0].operations[0].operation.name
    hlo.build_reducer(b, combined.regions[0], ir.element_type_of(operands[0].type), reducer)
    for op, result in zip(members, combined.results):
        rewriter.replace(op, [result])
