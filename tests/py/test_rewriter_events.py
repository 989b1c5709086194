"""The rewriter tells its listeners of every edit (pmapc/rewriter.py), and the op
index kept by listening stays exact through each kind of edit, flatten-maps'
inlining included (passes/op_index.py: IndexKeeper)."""

from __future__ import annotations

import pytest

from pmapc import ir
from pmapc.compiler import pipeline
from pmapc.passes import KEPT_ANALYSES, manager
from pmapc.passes.base import Analyses, run_pass
from pmapc.passes.flatten_maps import FlattenMapsPass
from pmapc.passes.lower_collectives import LowerCollectivesPass
from pmapc.passes.op_index import IndexKeeper, op_index
from pmapc.passes.verify_axes import VerifyAxesPass
from pmapc.rewriter import Listener, Rewriter, events_heard

ADDS = """
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  %1 = stablehlo.multiply %0, %b : tensor<4xf32>
  %2 = stablehlo.negate %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}"""


class Recorder(Listener):
    """Hears every event, as (event, what it names)."""

    def __init__(self) -> None:
        self.heard: list[tuple] = []

    def op_created(self, op, key, ip, source) -> None:
        self.heard.append(("op_created", op.name, key == ir.op_key(op)))

    def op_erased(self, op, key) -> None:
        self.heard.append(("op_erased", op.name))

    def op_modified(self, op, key) -> None:
        self.heard.append(("op_modified", op.name))

    def operand_set(self, op, key, index, value) -> None:
        self.heard.append(("operand_set", op.name, index, key == ir.op_key(op)))

    def uses_replaced(self, value, new) -> None:
        self.heard.append(("uses_replaced", len(list(value.uses))))

    def op_moved(self, op, key, ip) -> None:
        self.heard.append(("op_moved", op.name, ip.ref_operation.name))

    def block_moved(self, block, region) -> None:
        self.heard.append(("block_moved", region.owner.name))

    def body_inlined(self, body, site, key, walked) -> None:
        self.heard.append(("body_inlined", body.owner.operation.name, site.name))


def parse(text: str) -> ir.Module:
    return ir.parse_module(text, ir.make_context())


def ops_of(module: ir.Module, function: str = "main") -> list[ir.Operation]:
    block = ir.function_entry_block(ir.functions(module)[function])
    return [op.operation for op in block.operations]


def test_operand_and_use_changes_moves_and_attributes_are_heard():
    module = parse(ADDS)
    recorder = Recorder()
    rewriter = Rewriter([recorder])
    add, multiply, negate, _ = ops_of(module)
    args = ir.function_entry_block(ir.functions(module)["main"]).arguments
    with ir.building(module):
        rewriter.set_operand(multiply, 1, args[0])
        rewriter.replace_all_uses(add.results[0], args[1])
        rewriter.move_after(add, negate)
        rewriter.move_before(add, multiply)
        rewriter.set_attributes(negate, {"tag": ir.string_attr("x")})
        rewriter.replace(negate, [multiply.results[0]])
    assert recorder.heard == [
        ("operand_set", "stablehlo.multiply", 1, True),
        ("uses_replaced", 1),  # heard before the use changes
        ("op_moved", "stablehlo.add", "func.return"),  # after `negate`: before the return
        ("op_moved", "stablehlo.add", "stablehlo.multiply"),
        ("op_modified", "stablehlo.negate"),
        ("uses_replaced", 1),
        ("op_erased", "stablehlo.negate"),
    ]
    ir.verify(module)
    names = [op.name for op in ops_of(module)]
    assert names == ["stablehlo.add", "stablehlo.multiply", "func.return"]


class CreationsOnly(Listener):
    def __init__(self) -> None:
        self.created = 0

    def op_created(self, op, key, ip, source) -> None:
        self.created += 1


def test_a_listener_hears_only_the_events_it_overrides_and_no_identity_is_read_for_others(
    monkeypatch,
):
    module = parse(ADDS)
    listener = CreationsOnly()
    rewriter = Rewriter([listener])
    assert events_heard(CreationsOnly) == {"op_created"}
    read = []
    op_key = ir.op_key
    monkeypatch.setattr(ir, "op_key", lambda op: read.append(op.name) or op_key(op))
    add, multiply, negate, _ = ops_of(module)
    args = ir.function_entry_block(ir.functions(module)["main"]).arguments
    with ir.building(module):
        rewriter.set_operand(multiply, 1, args[0])
        rewriter.set_attributes(negate, {"tag": ir.string_attr("x")})
        rewriter.move_before(negate, multiply)
        rewriter.replace_all_uses(add.results[0], args[1])
        assert read == []
        rewriter.before(add).create("stablehlo.negate", [args[0]], [args[0].type])
    assert read == ["stablehlo.negate"] and listener.created == 1


INLINE = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %a : tensor<4xf32>
  %1 = func.call @body(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = stablehlo.negate %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
func.func private @body(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential %x : tensor<4xf32>
  %1 = stablehlo.reshape %0 : (tensor<4xf32>) -> tensor<2x2xf32>
  %2 = stablehlo.reshape %1 : (tensor<2x2xf32>) -> tensor<4xf32>
  %3 = stablehlo.log %2 : tensor<4xf32>
  %4 = stablehlo.sine %3 : tensor<4xf32>
  return %4 : tensor<4xf32>
}"""

INLINED = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %a : tensor<4xf32>
  %1 = stablehlo.exponential %0 : tensor<4xf32>
  %2 = stablehlo.reshape %1 : (tensor<4xf32>) -> tensor<2x2xf32>
  %3 = stablehlo.reshape %2 : (tensor<2x2xf32>) -> tensor<4xf32>
  %4 = stablehlo.log %3 : tensor<4xf32>
  %5 = stablehlo.sine %4 : tensor<4xf32>
  %6 = stablehlo.negate %5 : tensor<4xf32>
  return %6 : tensor<4xf32>
}"""


def inline_call(module: ir.Module, rewriter: Rewriter, *, copy: bool = False) -> None:
    """Inline @body (or a detached copy of it) at main's func.call, then erase both."""
    call = next(op for op in ops_of(module) if op.name == "func.call")
    body = ir.functions(module)["body"]
    function = ir.detached_clone(body) if copy else body
    results = rewriter.inline(ir.function_entry_block(function), call, list(call.operands))
    rewriter.replace(call, results)
    rewriter.erase(function)
    if copy:
        rewriter.erase(body)


@pytest.mark.parametrize("padding", [0, 8], ids=["host-adopted", "ops-moved"])
def test_inline_is_one_event_per_body_either_way_it_moves_the_ops(padding):
    """A body longer than the block it goes into takes that block's place (its ops
    move into the body, its arguments adopted); a shorter one has its ops moved.
    Either way: the same IR, and one `body_inlined`."""
    extra = "".join(f"  %p{i} = stablehlo.negate %a : tensor<4xf32>\n" for i in range(padding))
    text = INLINE.replace("  %0 = stablehlo.negate %a", extra + "  %0 = stablehlo.negate %a", 1)
    module = parse(text)
    recorder = Recorder()
    with ir.building(module):
        inline_call(module, Rewriter([recorder]))
    ir.verify(module)
    expected = ["stablehlo.negate"] * padding + [op.name for op in ops_of(parse(INLINED))]
    assert [op.name for op in ops_of(module)] == expected
    assert list(ir.functions(module)) == ["main"]
    assert [h for h in recorder.heard if h[0] == "body_inlined"] == [
        ("body_inlined", "func.func", "func.call")
    ]
    moves = [h for h in recorder.heard if h[0] in ("op_moved", "op_created", "block_moved")]
    assert moves == []  # the body's ops move unheard, one by one


def test_inline_returns_an_argument_of_the_block_it_adopts():
    """A body that returns what it was given, inlined where its site's block is
    shorter than it: the value returned is the argument the body adopted."""
    text = """
    func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
      %0 = func.call @body(%a) : (tensor<4xf32>) -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }
    func.func private @body(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = stablehlo.negate %x : tensor<4xf32>
      %1 = stablehlo.negate %0 : tensor<4xf32>
      %2 = stablehlo.negate %1 : tensor<4xf32>
      return %x : tensor<4xf32>
    }"""
    module = parse(text)
    with ir.building(module):
        inline_call(module, Rewriter())
    ir.verify(module)
    (argument,) = ir.function_entry_block(ir.functions(module)["main"]).arguments
    assert (
        ir.terminator(ir.function_entry_block(ir.functions(module)["main"])).operands[0] == argument
    )


@pytest.mark.parametrize("copy", [False, True], ids=["function", "detached-copy"])
@pytest.mark.parametrize("padding", [0, 8], ids=["host-adopted", "ops-moved"])
def test_the_index_kept_through_an_inlining_equals_a_fresh_walk(copy, padding):
    extra = "".join(
        f"  %p{i} = stablehlo.reshape %a : (tensor<4xf32>) -> tensor<2x2xf32>\n"
        for i in range(padding)
    )
    text = INLINE.replace("  %0 = stablehlo.negate %a", extra + "  %0 = stablehlo.negate %a", 1)
    module = parse(text)
    keeper = IndexKeeper(op_index(module), module)
    rewriter = Rewriter([keeper])
    with ir.building(module):
        call = next(op for op in ops_of(module) if op.name == "func.call")
        argument = call.operands[0]
        row = ir.tensor_type([1, 4], ir.element_type_of(argument.type))
        # Built before the site: it stays before the body.
        rewriter.before(call).create("stablehlo.reshape", [argument], [row])
        inline_call(module, rewriter, copy=copy)
    assert not keeper.stale
    assert keeper.result() == op_index(module)
    assert len(keeper.result().ops("stablehlo.reshape")) == padding + 3


def test_an_indexed_op_moved_sends_its_function_to_a_walk():
    text = """
    func.func @main(%a: tensor<4xf32>) -> (tensor<2x2xf32>, tensor<1x4xf32>) {
      %0 = stablehlo.reshape %a : (tensor<4xf32>) -> tensor<2x2xf32>
      %1 = stablehlo.negate %a : tensor<4xf32>
      %2 = stablehlo.reshape %1 : (tensor<4xf32>) -> tensor<1x4xf32>
      return %0, %2 : tensor<2x2xf32>, tensor<1x4xf32>
    }"""
    module = parse(text)
    keeper = IndexKeeper(op_index(module), module)
    rewriter = Rewriter([keeper])
    first, negate, last, _ = ops_of(module)
    with ir.building(module):
        rewriter.move_before(negate, first)  # not indexed: the index stays as it is
        assert not keeper.stale
        rewriter.move_after(first, last)
    ir.verify(module)
    assert keeper.stale == {"main"}
    assert keeper.result() == op_index(module)
    assert keeper.result().ops("stablehlo.reshape")[0] == last


def pmapc_map(result: str, operand: str, callee: str, axis: str, size: int, types: str) -> str:
    config = f'axis_name = "{axis}", axis_size = {size} : i64, in_axes = [0], out_axes = [0]'
    return (
        f"{result} = stablehlo.custom_call @pmapc.map({operand}) {{called_computations = "
        f"[@{callee}], api_version = 4 : i32, backend_config = {{{config}}}}} : {types}"
    )


def psum(result: str, operand: str, axis: str, type_: str) -> str:
    return (
        f"{result} = stablehlo.custom_call @pmapc.psum({operand}) {{api_version = 4 : i32, "
        f'backend_config = {{axes = ["{axis}"]}}}} : ({type_}) -> {type_}'
    )


X, Y, Z = "tensor<2x4x8xf32>", "tensor<4x8xf32>", "tensor<8xf32>"
# Two maps of one body (inlined twice: a copy first, then the function), a call
# inlined (a collective in it), a call that stays, and a function nothing calls.
NEST_TWICE = f"""
module {{
  func.func public @main(%a: {X}) -> ({X}, {X}) {{
    {pmapc_map("%0", "%a", "outer", "data", 2, f"({X}) -> {X}")}
    {pmapc_map("%1", "%0", "outer", "data", 2, f"({X}) -> {X}")}
    return %0, %1 : {X}, {X}
  }}
  func.func private @outer(%x: {Y}) -> {Y} {{
    {pmapc_map("%0", "%x", "inner", "model", 4, f"({Y}) -> {Y}")}
    %1 = func.call @helper(%0) : ({Y}) -> {Y}
    %2 = func.call @plain(%1) : ({Y}) -> {Y}
    return %2 : {Y}
  }}
  func.func private @inner(%y: {Z}) -> {Z} {{
    {psum("%0", "%y", "model", Z)}
    %1 = stablehlo.reshape %0 : ({Z}) -> tensor<2x4xf32>
    %2 = stablehlo.reshape %1 : (tensor<2x4xf32>) -> {Z}
    return %2 : {Z}
  }}
  func.func private @helper(%z: {Y}) -> {Y} {{
    {psum("%0", "%z", "data", Y)}
    return %0 : {Y}
  }}
  func.func private @plain(%w: {Y}) -> {Y} {{
    %0 = stablehlo.reshape %w : ({Y}) -> tensor<32xf32>
    %1 = stablehlo.reshape %0 : (tensor<32xf32>) -> {Y}
    return %1 : {Y}
  }}
  func.func private @unused(%v: {Z}) -> {Z} {{
    {psum("%0", "%v", "model", Z)}
    return %0 : {Z}
  }}
}}
"""


@pytest.mark.parametrize("text", [NEST_TWICE], ids=["bodies-inlined-twice"])
def test_flatten_maps_keeps_the_op_index_it_provides(text, monkeypatch):
    """flatten-maps provides the op index from the nesting analysis's walks and the
    pipeline's keeper keeps it through the inlining: bodies inlined twice (a copy,
    then the function), a call inlined, a call that stays, a function erased unused;
    nothing walks a function of the result again."""
    module = parse(text)
    analyses = Analyses(KEPT_ANALYSES)
    with ir.building(module):
        run_pass(VerifyAxesPass(), module, analyses)
        walked = []
        walk_named = ir.walk_named
        monkeypatch.setattr(
            ir,
            "walk_named",
            lambda op, names: (
                walked.append((ir.symbol_name(op), op.operation.attached)) or walk_named(op, names)
            ),
        )
        assert run_pass(FlattenMapsPass(), module, analyses, keep={op_index})
    monkeypatch.undo()
    preserved = analyses.preserved()
    assert list(preserved) == [op_index]
    assert manager.holds(op_index, preserved[op_index], module)
    # Only the copies are walked, each once (flatten-maps' walk serves the keeper).
    assert sorted(walked) == [("helper", False), ("inner", False), ("outer", False)]
    assert sorted(preserved[op_index].functions) == ["main", "plain"]
    analyses.after_pass(True)
    with ir.building(module):
        run_pass(LowerCollectivesPass(), module, analyses)
    ir.verify(module)


def test_flatten_maps_keeps_the_index_in_every_pipeline_check():
    """The pipeline's check after each pass covers flatten-maps' index."""
    module = parse(NEST_TWICE)
    seen = []
    manager.run_passes(
        module,
        pipeline.default_pipeline(),
        check_preserved=True,
        after_pass=lambda p, m: seen.append(p.name),
    )
    assert "flatten-maps" in seen


class Modifications(Listener):
    def __init__(self) -> None:
        self.modified: list[str] = []

    def op_modified(self, op, key) -> None:
        self.modified.append(op.name)


def test_a_result_retyped_through_the_rewriter_is_heard_as_a_modification():
    module = parse(ADDS)
    listener = Modifications()
    rewriter = Rewriter([listener])
    add = ops_of(module)[0]
    with ir.building(module):
        type_ = add.results[0].type
        wider = ir.tensor_type([1, *ir.shape_of(type_)], ir.element_type_of(type_))
        rewriter.set_result_type(add, 0, wider)
    assert listener.modified == [add.name]
    assert add.results[0].type == wider
