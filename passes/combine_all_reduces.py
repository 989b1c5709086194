"""combine-all-reduces: independent all_reduces with one reducer and group set become one.

Runs after lower-collectives. In each block, all_reduces with equal
`replica_groups`, reducer and element type are combined into one variadic
`stablehlo.all_reduce`, provided there is a place for it: after the last of
their operands is computed and before the first of their results is used
(which also rules out one feeding another). The combined op goes right after
that last operand. One collective instead of several: fewer synchronizations
and launches (the gradient and loss psums of a training step, for example).

Each all_reduce's reduction key (groups, reducer, element type) costs a few
microseconds to read, so the passes before keep the keys they can learn for
free (`reduction_keys`, kept by `ReductionKeys`): this relies on lower-collectives
building all_reduces by copying one template per key (`Lowering.cloned`), whose
copies the keeper hears as copies. Were it to build each all_reduce anew, the
keeper would read every key itself and the keeping would cost more than it
saves. It pays as things are: W4 at 10,000 collectives, combine-all-reduces 66
ms instead of 107, lower-collectives 141 instead of 139, the pipeline 0.92 of
its time without (`benchmarks/reduction_keys.py`, benchmarks/README.md).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, NamedTuple

from pmapc import collectives, hlo, ir
from pmapc.passes.base import Analyses, Analysis, Form, Keeper, KeptAnalysis
from pmapc.passes.op_index import Entry, index_of, op_index, walk_op_index
from pmapc.rewriter import Rewriter


def known_reduction_keys(module: ir.Module) -> dict[int, tuple | None]:
    """The analysis (`reduction_keys`), a cache: the reduction keys known of the
    module's all_reduces, by identity, as `ReductionKeys` learned them during the
    passes before (computed afresh, none are known; combine-all-reduces reads the
    others itself)."""
    return {}


class Candidate(NamedTuple):
    """An all_reduce that could combine: the op, its identity (of its op-index entry)
    and its reduction key."""

    op: ir.Operation
    identity: int
    key: tuple


def candidates_by_block(
    all_reduces: list[Entry], known: dict[int, tuple | None]
) -> list[list[Candidate]]:
    """The candidates of each block holding two or more, in program order
    (`all_reduces` is every all_reduce's op-index entry, in program order; `known`,
    the keys known of some of them, by identity)."""
    by_block: dict[ir.Block, list[Candidate]] = {}
    for _, op, identity in all_reduces:
        key = known[identity] if identity in known else reduction_key(op)
        if key is not None:
            by_block.setdefault(op.block, []).append(Candidate(op, identity, key))
    return [candidates for candidates in by_block.values() if len(candidates) > 1]


def reduction_keys_hold(known: dict[int, tuple | None], module: ir.Module) -> bool:
    """Whether every key known is the key of a live all_reduce of the module (for
    tests: the cache may know fewer than all)."""
    entries = walk_op_index(module).entries("stablehlo.all_reduce")
    live = {identity: op for _, op, identity in entries}
    return all(
        identity in live and reduction_key(live[identity]) == key for identity, key in known.items()
    )


class ReductionKeys(Keeper):
    """Learns reduction keys as passes rewrite (a keeper, passes/base.py): a copy of
    an all_reduce has the key of the all_reduce it copies (lower-collectives copies
    one all_reduce per key), an all_reduce built otherwise has its key read once
    the pass is done; an erased one's is forgotten, and so is one whose attributes
    change (a key reads the groups). Its operands may change: a key does not read
    them (lower-collectives sets each copy's)."""

    @staticmethod
    def holds(result, module: ir.Module) -> bool:
        return reduction_keys_hold(result, module)

    def __init__(self, known: dict[int, tuple | None], module: ir.Module) -> None:
        self.known = dict(known)
        self.unread: dict[int, ir.Operation] = {}  # all_reduces built: read at the end
        self.copies: dict[int, list[int]] = {}  # an unread all_reduce -> its copies
        self.origin: dict[int, int] = {}  # a copy of an unread all_reduce -> that one

    def op_created(
        self, op: ir.Operation, key: int, ip: ir.InsertionPoint, source: int | None
    ) -> None:
        if op.name != "stablehlo.all_reduce":
            return
        if source in self.known:
            self.known[key] = self.known[source]
        elif source in self.unread:
            self.copies[source].append(key)
            self.origin[key] = source
        else:
            self.unread[key] = op
            self.copies[key] = []

    def op_erased(self, op: ir.Operation, key: int) -> None:
        if key in self.unread:  # read it while it lives, for its copies
            self._read(key)
        if key in self.origin:
            self.copies[self.origin.pop(key)].remove(key)
        self.known.pop(key, None)

    def op_modified(self, op: ir.Operation, key: int) -> None:
        """An attribute changed (its groups, say): the key is no longer known."""
        self.op_erased(op, key)

    def result(self) -> dict[int, tuple | None]:
        for identity in list(self.unread):
            self._read(identity)
        return self.known

    def _read(self, identity: int) -> None:
        key = reduction_key(self.unread.pop(identity))
        for copy in [identity, *self.copies.pop(identity)]:
            self.origin.pop(copy, None)
            self.known[copy] = key


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
    identities: list[int]
    last_def: ir.Operation | None
    first_use: ir.Operation | None
    results: set[ir.Value]  # the members' results (values hash by identity, ops do not)

    def feeds(self, operand: ir.Value) -> bool:
        """Whether a member of the group defines `operand` (psum of a psum)."""
        return operand in self.results

    def admits(self, last_def, first_use) -> bool:
        return _before(_later(self.last_def, last_def), _earlier(self.first_use, first_use))


def combinable_groups(candidates: list[Candidate]) -> list[_Group]:
    """Groups of 2+ all_reduces of one key (from one block) that can stand together."""
    if len(candidates) < 2:
        return []
    block = candidates[0].op.block
    open_groups: dict[object, _Group] = {}
    done = []
    for op, identity, key in candidates:
        operand, result = op.operands[0], op.results[0]
        last_def = _in_block(ir.value_owner_op(operand), block)
        first_use = None
        for user, _ in ir.uses_of(result):
            first_use = _earlier(first_use, _in_block(user, block))
        group = open_groups.get(key)
        if group is not None and not group.feeds(operand) and group.admits(last_def, first_use):
            group.members.append(op)
            group.identities.append(identity)
            group.results.add(result)
            group.last_def = _later(group.last_def, last_def)
            group.first_use = _earlier(group.first_use, first_use)
            continue
        if group is not None and len(group.members) > 1:
            done.append(group)
        open_groups[key] = _Group([op], [identity], last_def, first_use, {result})
    done.extend(group for group in open_groups.values() if len(group.members) > 1)
    return done


def combine(group: _Group, rewriter: Rewriter) -> None:
    members = group.members
    operands = [op.operands[0] for op in members]
    attributes = {"replica_groups": members[-1].attributes["replica_groups"]}
    loc = ir.fused_loc([op.location for op in members])
    b = (
        rewriter.after(group.last_def, loc)
        if group.last_def is not None
        else rewriter.at_start(members[0].block, loc)
    )
    combined = b.create(
        "stablehlo.all_reduce", operands, [v.type for v in operands], attributes, regions=1
    )
    reducer = members[-1].regions[0].blocks[0].operations[0].operation.name
    hlo.build_reducer(b, combined.regions[0], ir.element_type_of(operands[0].type), reducer)
    for op, result in zip(members, combined.results):
        rewriter.replace(op, [result])


# The reduction keys known, kept (learned) through a pass by `ReductionKeys`.
reduction_keys = KeptAnalysis("reduction_keys", known_reduction_keys, ReductionKeys)


@dataclasses.dataclass(frozen=True)
class CombineAllReducesPass:
    """Combine independent all_reduces over the same groups into one variadic all_reduce."""

    name: ClassVar[str] = "combine-all-reduces"
    accepts: ClassVar[Form] = Form.LOWERED
    reads: ClassVar[tuple[Analysis, ...]] = (op_index, reduction_keys)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        changed = False
        all_reduces = index_of(module, analyses).entries("stablehlo.all_reduce")
        known = analyses.get(reduction_keys, module)
        for candidates in candidates_by_block(all_reduces, known):
            # One group at a time: combining erases ops that another group may hold as
            # its last operand or first use (a pair of sums over the results of a pair),
            # so the block's groups are found again after each combine. Other blocks
            # keep theirs (positions are per block).
            while groups := combinable_groups(candidates):
                erased = set(groups[0].identities)
                candidates = [c for c in candidates if c.identity not in erased]
                combine(groups[0], rewriter)
                changed = True
        return changed
