"""The op index the passes share (passes/op_index.py) stays exact through the pipeline.

A pass that preserves the index edits it instead of walking the IR again; if it
misplaced or missed an op, the passes after it would skip or misorder ops. Here
every pipeline runs with `check_preserved`, which walks the IR again after each
pass that preserved the index and requires the same ops, in the same order: on
random programs of every collective and nest shape, and on programs that make
each preserving pass rewrite (sink-slices, sink-gathers, lower-collectives,
combine-all-reduces with to-partitions' split, loops with collectives inside).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from jax import lax
from support.random_programs import build, programs, sample_arguments

import pmapc
from pmapc import ir
from pmapc.compiler import pipeline
from pmapc.passes import TARGETS, manager
from pmapc.passes.op_index import IndexKeeper, op_index
from pmapc.rewriter import Rewriter


def traced_ir(fun, *args) -> str:
    """The pmapc IR of `fun(*args)`, as text (its own context for each run)."""
    return pmapc.lower(fun, *args).as_text("pmapc")


def check_pipeline(text: str) -> None:
    for target in TARGETS:
        module = ir.parse_module(text, ir.make_context())
        manager.run_passes(
            module, pipeline.default_pipeline(target), verify_each=True, check_preserved=True
        )


def nested(body, out_axes=0):
    return pmapc.pmap(pmapc.pmap(body, axis_name="model", out_axes=out_axes), axis_name="data")


def chain(x):
    for k in range(6):
        x = lax.psum(x, "data" if k % 2 else "model") * 0.5 + k
    return x


def independent_sums(x, y):
    return lax.psum(x, "model") + lax.psum(y * 2, "model") + lax.pmax(x, ("data", "model"))


def every_kind(x):
    gathered = lax.all_gather(x, "model")  # (4, 8)
    scattered = lax.psum_scatter(gathered, "model")  # (8,)
    exchanged = lax.all_to_all(gathered, "model", 0, 0, tiled=True)
    shifted = lax.ppermute(x, "data", [(0, 1), (1, 0)])
    index = lax.axis_index(("data", "model")).astype(x.dtype)
    return scattered + exchanged.sum(0) + shifted + index + lax.pmin(x, "data")


def in_a_loop(x):
    return lax.fori_loop(0, 3, lambda i, v: lax.psum(v, "data") * 0.25 + i, x)


def gather_below_ops(x):
    # The inner map's stacked output is scaled before @main returns it: sink-gathers
    # moves the gather below the multiply first (it then keeps no index).
    return x * 3.0


X = np.arange(2 * 4 * 8, dtype=np.float32).reshape(2, 4, 8)
PROGRAMS = {
    "chain": (nested(chain), (X,)),
    "independent sums": (nested(independent_sums), (X, X + 1)),
    "every kind": (nested(every_kind), (X,)),
    "loop": (nested(in_a_loop), (X,)),
    "entry slices and result gathers": (nested(lambda x: x + 1), (X,)),
    "inner maps in a row": (
        pmapc.pmap(
            lambda x: pmapc.pmap(jnp.sin, axis_name="model")(
                pmapc.pmap(jnp.cos, axis_name="model")(x)
            ),
            axis_name="data",
        ),
        (X,),
    ),
    "gather below ops": (
        pmapc.pmap(lambda x: pmapc.pmap(jnp.sin, axis_name="model")(x) * 3.0, axis_name="data"),
        (X,),
    ),
    "3-deep": (
        pmapc.pmap(
            pmapc.pmap(pmapc.pmap(lambda x: lax.psum(x, ("a", "c")), axis_name="c"), axis_name="b"),
            axis_name="a",
        ),
        (X.reshape(2, 2, 2, 8),),
    ),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_preserved_index_equals_a_fresh_walk(name):
    fun, args = PROGRAMS[name]
    check_pipeline(traced_ir(fun, *args))


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(programs())
def test_preserved_index_equals_a_fresh_walk_on_random_programs(program):
    fun = build(program, pmapc.pmap)
    check_pipeline(traced_ir(fun, *sample_arguments(program)))


def test_the_nesting_walk_serves_every_pass(monkeypatch):
    """verify-axes walks each function once; flatten-maps builds the op index from
    those walks, and on a nest whose arguments and results the sink passes split
    (they rewrite, and preserve it) no pass after it walks again: fold-gather-slice,
    lower-collectives, combine-all-reduces, to-partitions and fold-reshapes take the
    index as the passes before left it."""
    module = ir.parse_module(traced_ir(nested(chain), X), ir.make_context())
    functions = list(ir.functions(module))
    running, walked = ["verify-axes"], []
    walk_named = ir.walk_named
    monkeypatch.setattr(
        ir,
        "walk_named",
        lambda op, names: walked.append((running[0], ir.symbol_name(op))) or walk_named(op, names),
    )

    def after(pass_, _):
        running[0] = "after " + pass_.name

    manager.run_passes(module, pipeline.default_pipeline(), verify_each=False, after_pass=after)
    assert walked == [("verify-axes", name) for name in functions]
    # The sink passes did rewrite: @main takes and returns each device's own block.
    main_type = ir.function_type(ir.functions(module)["main"])
    assert [ir.shape_of(t) for t in [*main_type.inputs, *main_type.results]] == [(1, 1, 8)] * 2


def keeping(module: ir.Module) -> tuple[Rewriter, IndexKeeper]:
    """A rewriter whose edits an IndexKeeper of the module's index follows."""
    keeper = IndexKeeper(op_index(module), module)
    return Rewriter([keeper]), keeper


def test_an_indexed_op_built_where_no_anchor_says_sends_its_function_to_a_walk():
    text = """
    func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
      %0 = stablehlo.negate %a : tensor<4xf32>
      %1 = stablehlo.exponential %0 : tensor<4xf32>
      return %1 : tensor<4xf32>
    }"""
    module = ir.parse_module(text, ir.make_context())
    rewriter, keeper = keeping(module)
    main = ir.functions(module)["main"]
    block = ir.function_entry_block(main)
    middle = block.operations[1]  # neither indexed nor first nor last
    with ir.building(module):
        f32 = ir.element_type_of(block.arguments[0].type)
        rewriter.before(middle).create(
            "stablehlo.reshape", [block.arguments[0]], [ir.tensor_type([2, 2], f32)]
        )
    assert keeper.stale == {"main"}
    assert keeper.result() == op_index(module)


def test_an_address_an_erased_op_frees_can_come_back_for_a_new_op():
    """Ops made after an erase are there even when they reuse the erased op's address
    (addresses are the only identity an op has across Python objects)."""
    text = """
    func.func @main(%a: tensor<4xf32>) -> tensor<2x2xf32> {
      %0 = stablehlo.reshape %a : (tensor<4xf32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>
    }"""
    module = ir.parse_module(text, ir.make_context())
    rewriter, keeper = keeping(module)
    main = ir.functions(module)["main"]
    block = ir.function_entry_block(main)
    keys = []
    with ir.building(module):
        for _ in range(50):  # replace the reshape by a new one, again and again
            (old,) = ir.walk(main, "stablehlo.reshape")  # a new Python object each time
            f32 = ir.element_type_of(block.arguments[0].type)
            new = rewriter.before(old).create(
                "stablehlo.reshape", [block.arguments[0]], [ir.tensor_type([2, 2], f32)]
            )
            keys.append(ir.op_key(new))
            rewriter.replace(old, [new.result])
    assert len(set(keys)) < len(keys)  # addresses came back
    assert not keeper.stale
    assert keeper.result() == op_index(module)
    assert len(keeper.result().ops("stablehlo.reshape")) == 1


def test_an_ops_identity_is_its_address_read_from_every_object_of_it():
    """`ir.op_key` gives every Python object of one op the same identity, the address
    `PyCapsule_GetPointer` reads (however the adapter reads it), and two ops two."""
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    text = """
    func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
      %0 = stablehlo.add %a, %a : tensor<4xf32>
      %1 = stablehlo.add %a, %a : tensor<4xf32>
      return %1 : tensor<4xf32>
    }"""
    module = ir.parse_module(text, ir.make_context())
    main = ir.functions(module)["main"]
    first, second = ir.walk(main, "stablehlo.add")
    (again, _) = ir.walk(main, "stablehlo.add")
    assert first is not again and ir.op_key(first) == ir.op_key(again)
    assert ir.op_key(first) != ir.op_key(second)
    for op in (first, second):
        assert ir.op_key(op) == get(op._CAPIPtr, b"jaxlib.mlir.ir.Operation._CAPIPtr")


def test_jax_sees_the_same_program_through_the_reordered_pipeline():
    """simplify now runs after the target pass: the program still computes what
    nested vmap does."""
    fun, args = PROGRAMS["independent sums"]
    want = jax.vmap(jax.vmap(independent_sums, axis_name="model"), axis_name="data")(*args)
    np.testing.assert_allclose(np.asarray(fun(*args)), np.asarray(want), rtol=1e-6)
