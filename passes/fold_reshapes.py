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

The squeezes move in one analysis and one rewrite, not op by op. The analysis
follows the uses from the squeezes through the ops they could pass (`explore`),
then decides, producers before users, which ops are lifted and the shape each
computes on (`decide`). The rewrite sets each lifted op's result type in place,
gives it its operands' blocks, and squeezes a lifted value only where an op
outside the lifted ops uses it; a reshape of a lifted value that gives the
dimensions back is dropped. Its cost is the ops the squeezes reach, whatever the
length of the chain. A module without a reshape is left at once (the op index
says so).

What it saves XLA is about a constant per squeeze and reshape that go, while its
cost grows with the ops it lifts. So the analysis gives up, and nothing is
lifted, once the squeezes reach more than `OPS_PER_SQUEEZE` ops each on average:
a body of 1,000 collectives on its block keeps its squeeze, and the pass costs it
no more than a tiny nest.

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
ALL_REDUCE = "stablehlo.all_reduce"
# The ops the squeezes may reach, per squeeze, before lifting them costs more than it
# saves (module docstring).
OPS_PER_SQUEEZE = 64

# A user, the operand it takes, and the user's result where it may be a node (below).
Use = tuple[ir.Operation, int, ir.Value | None]


@dataclasses.dataclass(frozen=True)
class FoldReshapesPass:
    """Fold reshape chains, and move unit-dimension squeezes down to their inverses."""

    name: ClassVar[str] = "fold-reshapes"
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        reshapes = index_of(module, analyses).ops(RESHAPE)
        if not reshapes:
            return False
        changed, squeezes = fold_chains(reshapes, rewriter)
        if not squeezes:
            return changed
        lifting = Lifting(squeezes)
        if not lifting.lifted:
            return changed
        lifting.rewrite(rewriter)
        return True


def fold_chains(
    reshapes: list[ir.Operation], rewriter: Rewriter
) -> tuple[bool, list[ir.Operation]]:
    """Make each reshape of a reshape one reshape, and drop those to their operand's
    type and those no op uses: whether that changed anything, and the squeezes left.

    (`reshapes` in pre-order, as the op index holds them: a reshape's producer
    comes before it.)"""
    changed = False
    left = []
    for op in reshapes:
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
    return changed, squeezes


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


def could_pass(op: ir.Operation) -> bool:
    """Whether a squeeze could move below `op`: an elementwise op, a single all_reduce."""
    name = op.name
    return name in hlo.ELEMENTWISE or (name == ALL_REDUCE and len(op.operands) == 1)


# The ops that may be nodes (below), each named by its result: squeezes are
# reshapes, and the ops a squeeze could pass have one result but all_reduces.
MAY_BE_NODES = hlo.ELEMENTWISE | {ALL_REDUCE, RESHAPE}


def uses(value: ir.Value) -> list[Use]:
    """The uses of `value`, each user named by its (first) result where it may be a node."""
    found = []
    for user, index in ir.uses_of(value):
        found.append((user, index, user.results[0] if user.name in MAY_BE_NODES else None))
    return found


class Node:
    """A squeeze, or an op a squeeze could pass that uses a node's result; named by its
    result (values compare and hash as what they are; op objects do not)."""

    __slots__ = ("block", "fills", "inputs", "op", "operand_count", "result", "squeeze", "users")

    def __init__(
        self,
        op: ir.Operation,
        result: ir.Value,
        squeeze: bool,
        operand_count: int = 1,
        fills: dict[int, ir.Operation] | None = None,
    ) -> None:
        self.op = op
        self.result = result
        self.squeeze = squeeze
        self.users = uses(result)
        self.operand_count = operand_count
        self.inputs: dict[int, ir.Value] = {}  # operand -> the node's result it is
        self.fills = fills or {}  # operand -> the fill that makes it
        # The shape it computes on: for a squeeze, of the value it squeezes (the block);
        # for another op, of its operands' blocks once lifted, None where it is not.
        self.block: tuple[int, ...] | None = None


class Lifting:
    """Which ops the squeezes pass, and the shapes they then compute on (the analysis),
    and the rewrite that lifts them. Ops are named by their results."""

    def __init__(self, squeezes: list[ir.Operation]) -> None:
        self.seeds = {op.results[0]: op for op in squeezes}
        self.nodes: dict[ir.Value, Node] = {}
        self.ruled_out: set[ir.Value] = set()  # ops reached that no squeeze can pass
        self.budget = OPS_PER_SQUEEZE * len(squeezes)
        self.lifted: dict[ir.Value, Node] = {}
        order = self.explore()
        if order is None:
            return  # it would cost more than it saves: nothing is lifted
        for node in order:
            self.decide(node)

    # -- the analysis ----------------------------------------------------------------

    def explore(self) -> list[Node] | None:
        """The nodes, producers before users: a depth-first walk along the uses from each
        squeeze, each node once, in reverse post-order; None once they are more than
        the budget."""
        finished: list[Node] = []
        for result, squeeze in self.seeds.items():
            if result in self.nodes:
                continue  # reached from a squeeze before it
            root = self.nodes[result] = Node(squeeze, result, True)
            stack = [(root, 0)]
            while stack:
                node, next_use = stack[-1]
                if next_use == len(node.users):
                    stack.pop()
                    finished.append(node)
                    continue
                stack[-1] = (node, next_use + 1)
                user, index, name = node.users[next_use]
                if name is None:
                    continue
                child = self.nodes.get(name)
                if child is None:
                    child = self.reach(user, name, index)
                    if child is None:
                        continue
                    if len(self.nodes) > self.budget:
                        return None
                    stack.append((child, 0))
                child.inputs[index] = node.result
        finished.reverse()
        return finished

    def reach(self, op: ir.Operation, result: ir.Value, through: int) -> Node | None:
        """A new node for `op`, reached through its operand `through`: a squeeze, or an op
        a squeeze could pass whose other operands could each be blocks or fills; None
        (ruled out) for any other."""
        if result in self.ruled_out:
            return None
        if result in self.seeds:
            node = self.nodes[result] = Node(op, result, True)
            return node
        if not could_pass(op):
            self.ruled_out.add(result)
            return None
        operands = op.operands
        count = len(operands)
        fills = {}
        for index in range(count):
            if index == through:
                continue
            producer = patterns.defining_op(operands[index])
            if producer is not None and patterns.is_fill(producer):
                fills[index] = producer
            elif producer is None or producer.name not in MAY_BE_NODES:
                self.ruled_out.add(result)
                return None
        node = self.nodes[result] = Node(op, result, False, count, fills)
        return node

    def decide(self, node: Node) -> None:
        """The shape `node` computes on (its producers decided already), and whether it is
        lifted: every operand not a fill is a block, or a squeeze of one, all of one
        shape."""
        if node.squeeze:
            source = self.source(node, 0)
            if source is not None and source.block is not None:
                node.block = source.block  # it squeezes a lifted value: that value's block
            else:
                node.block = ir.shape_of(node.op.operands[0].type)
            return
        shapes = set()
        for index in range(node.operand_count):
            if index in node.fills:
                continue
            source = self.source(node, index)
            if source is None or source.block is None:
                return
            shapes.add(source.block)
        if len(shapes) == 1:
            node.block = shapes.pop()
            self.lifted[node.result] = node

    def source(self, node: Node, index: int) -> Node | None:
        """The node whose result is operand `index` of `node`, if one is."""
        result = node.inputs.get(index)
        return None if result is None else self.nodes[result]

    # -- the rewrite -----------------------------------------------------------------

    def rewrite(self, rewriter: Rewriter) -> None:
        """Lift each lifted op, producers first; squeeze its result for the ops outside
        that use it; erase the squeezes and fills no op uses any more."""
        types = BlockTypes()
        fills = Fills(self.lifted, types, rewriter)
        for node in self.lifted.values():
            self.lift(node, fills, types, rewriter)
        for node in self.nodes.values():
            if node.squeeze and all(name in self.lifted for _, _, name in node.users):
                rewriter.erase(node.op)
        fills.erase_unused()

    def lift(self, node: Node, fills: Fills, types: BlockTypes, rewriter: Rewriter) -> None:
        """`node` on its operands' blocks, its result squeezed for the ops outside."""
        assert node.block is not None
        op = node.op
        for index, fill in node.fills.items():
            value = fills.made_in(fill, node.block)
            if value is not None:
                rewriter.set_operand(op, index, value)
        for index, input_ in node.inputs.items():
            source = self.nodes[input_]
            if source.squeeze:
                rewriter.set_operand(op, index, source.op.operands[0])
            # (a lifted operand has its block's type already)
        result = op.results[0]
        small = result.type
        rewriter.set_result_type(op, 0, types.of(node.block, small))
        self.squeeze_for_users(node, result, small, rewriter)

    def squeeze_for_users(
        self, node: Node, result: ir.Value, small: ir.Type, rewriter: Rewriter
    ) -> None:
        """Give the users of `result` (now a block) outside the lifted ops its squeeze,
        made once; a reshape among them now reshapes the block, or is nothing."""
        squeezed = None
        for user, index, name in node.users:
            if name in self.lifted:
                continue
            if user.name == RESHAPE:
                drop_if_identity(user, rewriter)
                continue
            if squeezed is None:
                squeezed = rewriter.after(node.op).create(RESHAPE, [result], [small]).result
            rewriter.set_operand(user, index, squeezed)


class BlockTypes:
    """The type of a value lifted onto blocks of a shape: its own element type, that
    shape (each made once)."""

    def __init__(self) -> None:
        self.made: dict[tuple[tuple[int, ...], ir.Type], ir.Type] = {}

    def of(self, shape: tuple[int, ...], small: ir.Type) -> ir.Type:
        type_ = self.made.get((shape, small))
        if type_ is None:
            type_ = self.made[shape, small] = ir.tensor_type(shape, ir.element_type_of(small))
        return type_


class Fills:
    """The fills (broadcast scalars, splat constants) of the lifted ops, each made in the
    shape of the blocks it is used with: in place where every op that uses it is
    lifted onto blocks of one shape, else made again beside it."""

    def __init__(self, lifted: dict[ir.Value, Node], types: BlockTypes, rewriter: Rewriter) -> None:
        self.lifted = lifted
        self.types = types
        self.rewriter = rewriter
        # Each fill's value (as the fill made it) -> the one shape it is made in, in place
        self.in_place: dict[ir.Value, tuple[int, ...] | None] = {}
        self.made: dict[tuple[ir.Value, tuple[int, ...]], ir.Value] = {}
        self.copied: dict[ir.Value, ir.Operation] = {}  # the fills made again somewhere

    def made_in(self, fill: ir.Operation, shape: tuple[int, ...]) -> ir.Value | None:
        """The value `fill` makes, made in `shape` for a lifted op that uses it: None
        where `fill` itself now makes it so."""
        filled = fill.results[0]
        if filled not in self.in_place:
            one_shape = self.in_place[filled] = self.one_shape(filled, shape)
            if one_shape is not None:
                self.refill(fill, one_shape)
        if self.in_place[filled] == shape:
            return None
        value = self.made.get((filled, shape))
        if value is None:
            self.copied[filled] = fill
            b = self.rewriter.after(fill)
            value = self.made[filled, shape] = patterns.fill_like(b, filled, shape)
        return value

    def one_shape(self, filled: ir.Value, shape: tuple[int, ...]) -> tuple[int, ...] | None:
        """The one block shape of the lifted ops that use `filled`, where only they do
        (one use: the lifted op that asks, onto blocks of `shape`)."""
        if len(list(filled.uses)) == 1:
            return shape
        shapes = set()
        for _, _, name in uses(filled):
            node = self.lifted.get(name) if name is not None else None
            if node is None:
                return None
            shapes.add(node.block)
        return shapes.pop() if len(shapes) == 1 else None

    def refill(self, fill: ir.Operation, shape: tuple[int, ...]) -> None:
        """Make `fill` a fill of `shape`, in place."""
        type_ = self.types.of(shape, fill.results[0].type)
        if fill.name == "stablehlo.constant":
            splat = ir.splat_value(fill.attributes["value"])
            assert splat is not None, "a fill constant is a splat"
            self.rewriter.set_attributes(fill, {"value": ir.splat_attr(type_, splat)})
        self.rewriter.set_result_type(fill, 0, type_)

    def erase_unused(self) -> None:
        for fill in self.copied.values():
            patterns.erase_if_unused(fill, self.rewriter)
