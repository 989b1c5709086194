"""The collective records (pmapc/collectives.py) and the tables that hang off them.

Every kind has one record, a JAX primitive that binds it, a result rule that
agrees with JAX's, a lowering rule and a row in docs/ir.md; reductions have
reducers with identities; parameters survive the trip through the IR.
"""

import pathlib
import re

import jax
import jax.numpy as jnp
import pytest

from pmapc import collectives, dialect, hlo, ir
from pmapc.lowering import jax_api
from pmapc.passes.lower_collectives import RULES
from pmapc.rewriter import unobserved

ROOT = pathlib.Path(__file__).parents[2]
AXIS, AXIS_SIZE = "i", 4
OPERAND = jnp.zeros((4, 8), jnp.float32)

# One JAX call per kind, traced with `AXIS` bound to `AXIS_SIZE` devices.
JAX_CALLS = {
    "psum": lambda x: jax.lax.psum(x, AXIS),
    "pmax": lambda x: jax.lax.pmax(x, AXIS),
    "pmin": lambda x: jax.lax.pmin(x, AXIS),
    "all_gather": lambda x: jax.lax.all_gather(x, AXIS, axis=1, tiled=True),
    "psum_scatter": lambda x: jax.lax.psum_scatter(x, AXIS, scatter_dimension=0, tiled=True),
    "all_to_all": lambda x: jax.lax.all_to_all(x, AXIS, 0, 1, tiled=True),
    "ragged_all_to_all": lambda x: jax.lax.ragged_all_to_all(
        x, x[:3], *[jnp.zeros(AXIS_SIZE, jnp.int32)] * 4, axis_name=AXIS
    ),
    "ppermute": lambda x: jax.lax.ppermute(x, AXIS, [(0, 1), (1, 2), (2, 0)]),
    "axis_index": lambda x: jax.lax.axis_index(AXIS),
}

KINDS = [collective.kind for collective in collectives.ALL]


def traced_equation(collective: collectives.Collective):
    """The equation of `collective`'s JAX primitive in its JAX call's jaxpr."""
    closed = jax.make_jaxpr(JAX_CALLS[collective.kind], axis_env=[(AXIS, AXIS_SIZE)])(OPERAND)
    primitive = jax_api.collective_primitive(collective)
    (equation,) = [e for e in closed.jaxpr.eqns if e.primitive is primitive]
    return equation


def test_one_record_per_kind():
    assert len(set(KINDS)) == len(KINDS)
    assert list(collectives.BY_KIND) == KINDS
    assert all(collectives.BY_KIND[kind].kind == kind for kind in KINDS)


def test_every_kind_has_a_jax_call_here():
    assert list(JAX_CALLS) == KINDS


def test_every_kind_has_its_own_jax_primitive():
    primitives = [jax_api.collective_primitive(c) for c in collectives.ALL]
    assert all(isinstance(p, jax_api.Primitive) for p in primitives)
    assert len({id(p) for p in primitives}) == len(primitives)


@pytest.mark.parametrize("kind", KINDS)
def test_params_are_read_from_the_jax_primitive(kind):
    collective = collectives.BY_KIND[kind]
    params = collective.params_from_jax(traced_equation(collective).params)
    assert isinstance(params, collective.params_type)
    values = params.as_dict()
    assert sorted(values) == sorted(param.name for param in collective.params)
    for param in collective.params:
        if param.optional and values[param.name] is None:
            continue  # JAX_CALLS pass no optional parameter (index groups: test_index_groups)
        expected = tuple if param.value_type is list else param.value_type  # perm pairs
        assert isinstance(values[param.name], expected), param


@pytest.mark.parametrize("kind", KINDS)
def test_kinds_take_index_groups_where_their_jax_primitive_does(kind):
    collective = collectives.BY_KIND[kind]
    jax_takes_them = "axis_index_groups" in traced_equation(collective).params
    assert collective.takes_index_groups == jax_takes_them


@pytest.mark.parametrize("kind", KINDS)
def test_result_rule_agrees_with_jax(kind):
    collective = collectives.BY_KIND[kind]
    assert collective.shape_rule.__module__ == "pmapc.shapes"
    equation = traced_equation(collective)
    params = collective.params_from_jax(equation.params)
    operands = [tuple(v.aval.shape) for v in equation.invars] or [OPERAND.shape]
    (shape, *_) = collective.result_shapes(params, operands, (AXIS,), AXIS_SIZE)
    assert shape == equation.outvars[0].aval.shape


def test_every_kind_has_a_lowering_rule():
    assert set(RULES) == set(collectives.ALL)
    assert all(callable(rule) for rule in RULES.values())


def test_every_kind_has_a_fold_rule():
    from pmapc.lowering import fold_rules

    assert set(fold_rules.RULES) == set(collectives.ALL)


@pytest.mark.parametrize("kind", KINDS)
def test_reductions_have_reducers_with_identities(kind):
    collective = collectives.BY_KIND[kind]
    if collective.reduction:
        assert collective.reducer is not None
    if collective.reducer is None:
        return
    assert collective.reducer in collectives.REDUCER_OPS
    module = ir.parse_module("module {}", ir.make_context())
    with ir.building(module):
        for element_type in (ir.i32_type(), ir.Type.parse("f32")):
            assert hlo.reduction_identity(element_type, collective.reducer) is not None


@pytest.mark.parametrize("kind", KINDS)
def test_params_round_trip_through_the_ir(kind):
    collective = collectives.BY_KIND[kind]
    params = collective.params_from_jax(traced_equation(collective).params)
    module = ir.parse_module("module {}", ir.make_context())
    with ir.building(module):
        b = unobserved(ir.InsertionPoint(module.body), ir.Location.unknown())
        op = dialect.create_collective(b, kind, [], [], [AXIS], params)
        view = dialect.read_collective(op)
        assert dialect.collective_of(op) is collective
    assert view.collective is collective and view.kind == kind
    assert view.axes == (AXIS,)
    assert view.params == params


def test_collective_of_other_ops_is_none():
    text = """
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = stablehlo.custom_call @pmapc.psum_all(%x) {api_version = 4 : i32,
          backend_config = {axes = ["i"]}}
          : (tensor<2xf32>) -> tensor<2xf32>
      %1 = stablehlo.custom_call @other(%0) : (tensor<2xf32>) -> tensor<2xf32>
      %2 = stablehlo.add %1, %1 : tensor<2xf32>
      %3 = stablehlo.custom_call @pmapc.map(%2) {api_version = 4 : i32, backend_config = {}}
          : (tensor<2xf32>) -> tensor<2xf32>
      return %3 : tensor<2xf32>
    }
    """
    module = ir.parse_module(text, ir.make_context())
    ops = list(ir.function_entry_block(ir.functions(module)["main"]).operations)
    assert [dialect.collective_of(op.operation) for op in ops] == [None] * 5


def test_docs_table_lists_the_records_and_their_params():
    """docs/ir.md's collectives table: a row per record, each with its parameters."""
    text = (ROOT / "docs" / "ir.md").read_text()
    table = text.split("| kind | parameters | result |", 1)[1].split("\n\n", 1)[0]
    documented = {}
    for row in table.strip().splitlines()[1:]:
        kinds_cell, params_cell = row.split("|")[1:3]
        names = [re.match(r"\w+", p).group() for p in re.findall(r"`([^`]+)`", params_cell)]
        for kind in re.findall(r"`(\w+)`", kinds_cell):
            documented[kind] = names
    assert set(documented) == set(KINDS)
    for collective in collectives.ALL:
        assert documented[collective.kind] == [p.name for p in collective.params]
