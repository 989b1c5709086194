"""The forms a module takes between passes (passes/forms.py): every pass says which it
takes, the pass manager checks it on entry once per pipeline where needed, the checks
cost one walk with equal attributes read once, and nothing is sized by the device count
(the index-group cover check, the mesh's limit of 2^31 positions)."""

from __future__ import annotations

import pathlib
import tracemalloc

import pytest

from pmapc import dialect, ir, shapes
from pmapc.compiler.pipeline import default_pipeline, parse_pipeline
from pmapc.errors import DiagnosticError, ShapeError
from pmapc.passes import PASSES, forms, manager, verify_axes
from pmapc.passes.base import Form
from pmapc.passes.manager import run_passes

# Passes that take any valid module and keep its form.
ANY_FORM = {"fold-reshapes"}

ROOT = pathlib.Path(__file__).parents[2]
NESTED = (ROOT / "examples" / "nested_2x4.mlir").read_text()


def map_call(axis: str, size: int, callee: str, operand: str, shape: str, body: str) -> str:
    """A `@pmapc.map` over `axis` of `operand` (of `shape`), calling `callee` on blocks of
    `body` shape."""
    config = f'axis_name = "{axis}", axis_size = {size} : i64, in_axes = [0], out_axes = [0]'
    return (
        f"%0 = stablehlo.custom_call @pmapc.map({operand}) {{called_computations = [@{callee}], "
        f"api_version = 4 : i32, backend_config = {{{config}}}}} "
        f": (tensor<{shape}xf32>) -> tensor<{shape}xf32>"
    )


def nest(outer: int, inner: int) -> str:
    """Two maps, `outer` x `inner`, around a body that returns its block."""
    return f"""module {{
  func.func public @main(%x: tensor<{outer}x{inner}xf32>) -> tensor<{outer}x{inner}xf32> {{
    {map_call("i", outer, "outer", "%x", f"{outer}x{inner}", f"{inner}")}
    return %0 : tensor<{outer}x{inner}xf32>
  }}
  func.func private @outer(%y: tensor<{inner}xf32>) -> tensor<{inner}xf32> {{
    {map_call("j", inner, "inner", "%y", f"{inner}", "")}
    return %0 : tensor<{inner}xf32>
  }}
  func.func private @inner(%z: tensor<f32>) -> tensor<f32> {{
    return %z : tensor<f32>
  }}
}}"""


def parse(text: str) -> ir.Module:
    return ir.parse_module(text, ir.make_context())


def flattened(psums: int, axes: str = '["i"]', mesh: str = "2") -> str:
    """A flattened module of `psums` equal psums over `axes` on a mesh `i` of `mesh`."""
    ops = "\n".join(
        f"    %{n + 1} = stablehlo.custom_call @pmapc.psum(%{n if n else 'arg0'}) "
        f"{{api_version = 4 : i32, backend_config = {{axes = {axes}}}}} "
        ": (tensor<3xf32>) -> tensor<3xf32>"
        for n in range(psums)
    )
    return f"""
module attributes {{pmapc.mesh = {{axis_names = ["i"], axis_sizes = array<i64: {mesh}>}}}} {{
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {{
{ops}
    return %{psums} : tensor<3xf32>
  }}
}}
"""


def lowered(collectives: int, groups: str = "[[0, 1]]") -> str:
    """A lowered module on 2 devices of `collectives` equal all_reduces over `groups`
    (a 2-column matrix)."""
    rows = groups.count("[") - 1
    ops = []
    for n in range(collectives):
        operand = f"%{n}" if n else "%arg0"
        ops.append(
            f'    %{n + 1} = "stablehlo.all_reduce"({operand}) ({{\n'
            "    ^bb0(%l: tensor<f32>, %r: tensor<f32>):\n"
            "      %s = stablehlo.add %l, %r : tensor<f32>\n"
            "      stablehlo.return %s : tensor<f32>\n"
            f"    }}) {{replica_groups = dense<{groups}> : tensor<{rows}x2xi64>}}"
            " : (tensor<3xf32>) -> tensor<3xf32>"
        )
    body = "\n".join(ops)
    return f"""
module attributes {{pmapc.mesh = {{axis_names = ["i"], axis_sizes = array<i64: 2>}}}} {{
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {{
{body}
    return %{collectives} : tensor<3xf32>
  }}
}}
"""


def ragged(groups: str) -> str:
    """A lowered module on 2 devices with XLA's ragged_all_to_all over `groups`."""
    types = "tensor<4xf32>, tensor<6xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>"
    return f"""
module attributes {{pmapc.mesh = {{axis_names = ["i"], axis_sizes = array<i64: 2>}}}} {{
  func.func public @main(%a: tensor<4xf32>, %b: tensor<6xf32>, %c: tensor<2xi32>)
      -> tensor<6xf32> {{
    %0 = stablehlo.custom_call @ragged_all_to_all(%a, %b, %c, %c, %c, %c) {{api_version = 4 : i32,
      backend_config = {{replica_groups = dense<{groups}> : tensor<1x2xi64>}}}}
      : ({types}, tensor<2xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }}
}}
"""


# ----------------------------------------------------------------------------
# Every pass says what it takes


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_pass_states_the_form_it_takes(name):
    pass_class = PASSES[name]
    if name in ANY_FORM:
        assert not hasattr(pass_class, "accepts")
        return
    assert isinstance(pass_class.accepts, Form)
    assert isinstance(getattr(pass_class, "produces", pass_class.accepts), Form)


def test_the_default_pipeline_goes_through_the_forms_in_order():
    """Each pass takes the form the one before it leaves, so the pipeline checks its
    input once, at verify-axes."""
    form = None
    for pass_ in default_pipeline():
        accepts = getattr(pass_, "accepts", None)
        if accepts is None:
            continue
        assert form in (None, accepts), f"{pass_.name} takes {accepts}, gets {form}"
        form = getattr(pass_, "produces", accepts)
    assert form is Form.LOWERED


@pytest.fixture
def checks(monkeypatch) -> list[tuple[Form, str]]:
    """The (form, reader) of each check the pass manager makes."""
    checked = []
    real = forms.check

    def counting(module, form, reader, analyses=None):
        checked.append((form, reader))
        real(module, form, reader, analyses)

    monkeypatch.setattr(manager.forms, "check", counting)
    return checked


def test_a_pipeline_checks_its_input_once(checks):
    run_passes(parse(NESTED), default_pipeline())
    assert checks == [(Form.PMAPC, "verify-axes")]


def test_a_pass_that_takes_another_form_checks_again(checks):
    passes = parse_pipeline("builtin.module(flatten-maps,cse,to-partitions)")
    with pytest.raises(DiagnosticError, match="run lower-collectives before to-partitions"):
        run_passes(parse(NESTED), passes)
    # to-partitions takes a lowered module; flatten-maps leaves a flattened one
    assert checks == [(Form.PMAPC, "flatten-maps"), (Form.LOWERED, "to-partitions")]


@pytest.mark.parametrize(
    "pipeline, message",
    [
        (
            "lower-collectives",
            "'pmapc.map' is still here; run flatten-maps before lower-collectives",
        ),
        ("to-partitions", "'pmapc.map' is still here; run flatten-maps and lower-collectives"),
        ("flatten-maps,to-replicas", "is still here; run lower-collectives before to-replicas"),
        ("flatten-maps,lower-collectives,verify-axes", None),
    ],
)
def test_a_pass_run_alone_on_a_form_it_cannot_take(pipeline, message):
    module = parse(NESTED)
    passes = parse_pipeline(f"builtin.module({pipeline})")
    if message is None:  # a lowered module is pmapc IR with nothing left to do
        run_passes(module, passes)
        return
    with pytest.raises(DiagnosticError) as caught:
        run_passes(module, passes)
    (diagnostic,) = caught.value.diagnostics
    assert message in diagnostic.message
    assert diagnostic.loc is not None and diagnostic.loc.line > 1


def test_verify_axes_refuses_a_flattened_module():
    with pytest.raises(DiagnosticError) as caught:
        run_passes(parse(flattened(1)), parse_pipeline("builtin.module(verify-axes)"))
    assert "in a flattened module (it has 'pmapc.mesh')" in str(caught.value)


# ----------------------------------------------------------------------------
# One walk, each distinct attribute once


@pytest.mark.parametrize(
    "module, form, owner, function",
    [
        # verify-axes' check of a collective, once per equal config and types
        (flattened(200), Form.FLATTENED, verify_axes, "_check_collective"),
        # the groups' matrix, once per equal attribute
        (lowered(200), Form.LOWERED, forms, "_dense_matrix"),
    ],
)
def test_equal_ops_are_checked_once(module, form, owner, function, monkeypatch):
    calls = []
    real = getattr(owner, function)
    monkeypatch.setattr(owner, function, lambda *args: calls.append(1) or real(*args))
    forms.check(parse(module), form, "a pass")
    assert len(calls) == 1


def test_a_flattened_collective_is_checked_against_the_mesh():
    with pytest.raises(DiagnosticError) as caught:
        forms.check(parse(flattened(1, axes='["j"]')), Form.FLATTENED, "sink-slices")
    assert "axis 'j' is not an axis of the mesh (axes: 'i'); sink-slices takes a flattened" in (
        str(caught.value)
    )


@pytest.mark.parametrize(
    "module, message",
    [
        (
            lowered(1, "[[0, 1], [2, 3]]"),
            "'stablehlo.all_reduce' names device 2 in its replica_groups, outside the "
            "module's 2 devices (0..1)",
        ),
        (ragged("[[0, 0]]"), "names device 0 more than once; a device may be in one group"),
        (ragged("[[0, -1]]"), "names device -1 in its replica groups"),
        (ragged("[[0, 2]]"), "names device 2 in its replica groups, outside the module's 2"),
    ],
)
def test_lowered_groups_name_devices_of_the_mesh_each_once(module, message):
    with pytest.raises(DiagnosticError) as caught:
        forms.check(parse(module), Form.LOWERED, "to-partitions")
    assert message in str(caught.value)


# ----------------------------------------------------------------------------
# Nothing sized by the device count


def test_the_cover_check_costs_the_indices_written_not_the_positions():
    """A set of every position would take tens of MiB at 2^22; the check's peak memory
    stays that of the few indices written."""
    tracemalloc.start()
    try:
        with pytest.raises(ShapeError) as caught:
            shapes.check_index_groups("psum", [[0, 1]], "'i'", 2**22, equal_sizes=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    assert "indices 2, 3, 4, 5 and 4194298 more in no group" in str(caught.value)


def test_index_group_messages_cite_a_few_indices():
    many = [[index] for index in range(100_000)] + [[5]]
    where = shapes.describe_axes(["i"], 100_000, many)
    with pytest.raises(ShapeError) as caught:
        shapes.check_index_groups("psum", many, where, 100_000, equal_sizes=False)
    message = str(caught.value)
    assert len(message) < 300
    assert "(index 5 more than once)" in message
    assert "[[0], [1], [2], [3], [4], [5], [6], [7], [8], [9], [10], [11], [12], [13], [14]" in (
        message
    )
    assert "...] (100001 groups, 100001 indices)" in message
    outside = shapes._cover_fault([[index] for index in range(10, 100_010)], 100_000)
    assert outside == "indices 100000, 100001, 100002, 100003 and 6 more out of range"
    missing = shapes._cover_fault([[0], [99_999]], 100_000)
    assert missing == "indices 1, 2, 3, 4 and 99994 more in no group"
    repeated = shapes._cover_fault([[i, i] for i in range(10)], 20)
    assert repeated == "indices 0, 1, 2, 3 and 6 more more than once"


def test_index_group_messages_stay_jax_s_for_small_groups():
    assert shapes.format_index_groups([[0, 1], [1, 2, 3, 4, 5, 6, 7]]) == (
        "[[0, 1], [1, 2, 3, 4, 5, 6, 7]]"
    )


@pytest.mark.parametrize(
    "sizes, refused",
    [("65536, 65536", True), ("2147483648", False), ("2147483649", True), ("1, 1", False)],
)
def test_a_mesh_over_2_31_positions_is_refused_where_it_is_read(sizes, refused):
    module = parse(
        f"""module attributes {{pmapc.mesh = {{axis_names = [{
            ", ".join(f'"a{i}"' for i in range(sizes.count(",") + 1))
        }], axis_sizes = array<i64: {sizes}>}}}} {{
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {{
    return %arg0 : tensor<3xf32>
  }}
}}"""
    )
    if not refused:
        assert dialect.read_mesh(module) is not None
        return
    with pytest.raises(DiagnosticError) as caught:
        dialect.read_mesh(module)
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.loc is not None and diagnostic.loc.line == 1
    assert "more than the 2147483648 devices XLA numbers" in diagnostic.message


@pytest.mark.parametrize("outer, inner, refused", [(65536, 65536, True), (65536, 32768, False)])
def test_a_nest_over_2_31_positions_is_refused_at_its_map(outer, inner, refused):
    passes = parse_pipeline("builtin.module(verify-axes)")
    if not refused:
        run_passes(parse(nest(outer, inner)), passes)
        return
    with pytest.raises(DiagnosticError) as caught:
        run_passes(parse(nest(outer, inner)), passes)
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.message.startswith(
        f"the nest of maps {outer} x {inner} has {outer * inner} positions"
    )
    assert diagnostic.loc is not None and diagnostic.loc.line == 7  # the inner map
