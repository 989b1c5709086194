"""`jax.lax.ragged_all_to_all` in a nest, against a numpy reference of its documented
semantics (tests/py/support/ragged_cases.py): the expanded form on CPU, where no JAX runs
the op; the native form (XLA's op) as IR and HLO; its gradient, jit, vmap and the
stages; its errors."""

from __future__ import annotations

import inspect
import pathlib
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.ragged_cases import RaggedArgs, linear_map, make_args, reference

import pmapc
from pmapc import ir
from pmapc.compiler import xla
from pmapc.errors import ArgumentError, ShapeError, UnsupportedError
from pmapc.passes import ragged

GRID = (2, 4)  # data x model


def groups_over(grid: tuple[int, int], axes: tuple[str, ...], index_groups=None) -> list:
    """The groups of flat device indices a collective over `axes` of a data x model
    nest acts in, each in the order of its axes (then split by `index_groups`)."""
    rows, cols = grid
    at = lambda r, c: r * cols + c  # noqa: E731
    if axes == ("model",):
        groups = [[at(r, c) for c in range(cols)] for r in range(rows)]
    elif axes == ("data",):
        groups = [[at(r, c) for r in range(rows)] for c in range(cols)]
    else:
        order = [(r, c) for r in range(rows) for c in range(cols)]
        if axes == ("model", "data"):
            order = [(r, c) for c in range(cols) for r in range(rows)]
        groups = [[at(r, c) for r, c in order]]
    if index_groups is None:
        return groups
    return [[group[i] for i in chosen] for group in groups for chosen in index_groups]


def nest(axes, index_groups=None):
    """A data x model nest whose body is one ragged_all_to_all over `axes`."""

    def body(*operands):
        return jax.lax.ragged_all_to_all(*operands, axis_name=axes, axis_index_groups=index_groups)

    @partial(pmapc.pmap, axis_name="data")
    def outer(*operands):
        return pmapc.pmap(body, axis_name="model")(*operands)

    return outer


def check(args: RaggedArgs, function) -> None:
    got = np.asarray(function(*args.operands()))
    np.testing.assert_array_equal(got, reference(args))


@pytest.mark.parametrize(
    "axes", [("model",), ("data",), ("data", "model"), ("model", "data")], ids="-".join
)
@pytest.mark.parametrize("slices_per_peer", [1, 2])
def test_over_the_axes_of_a_nest(axes, slices_per_peer):
    args = make_args(GRID, groups_over(GRID, axes), slices_per_peer=slices_per_peer, seed=3)
    check(args, nest(axes))


@pytest.mark.parametrize(
    ("feature", "dtype"),
    [((), np.float32), ((3,), np.int32), ((2, 3), np.float32), ((2,), np.int8)],
    ids=["rows-f32", "rows3-i32", "rows2x3-f32", "rows2-i8"],
)
def test_dtypes_and_row_shapes(feature, dtype):
    args = make_args(GRID, groups_over(GRID, ("model",)), feature=feature, dtype=dtype, seed=4)
    check(args, nest("model"))


def test_empty_slices_keep_the_output():
    args = make_args(GRID, groups_over(GRID, ("model",)), empty=True)
    np.testing.assert_array_equal(nest("model")(*args.operands()), args.output)


def test_rows_no_slice_writes_keep_the_output():
    args = make_args(GRID, groups_over(GRID, ("model",)), gap=2, seed=5)
    got = np.asarray(nest("model")(*args.operands()))
    np.testing.assert_array_equal(got, reference(args))
    unwritten = got == args.output
    assert unwritten.any() and not unwritten.all()


@pytest.mark.parametrize(
    "index_groups", [[[0, 1], [2, 3]], [[0, 2], [1, 3]], [[3, 2, 1, 0]]], ids=str
)
def test_axis_index_groups(index_groups):
    groups = groups_over(GRID, ("model",), index_groups)
    args = make_args(GRID, groups, slices_per_peer=2, seed=6)
    check(args, nest("model", index_groups))


def test_a_single_map_of_eight():
    args = make_args((8,), [list(range(8))], seed=7)
    f = pmapc.pmap(lambda *a: jax.lax.ragged_all_to_all(*a, axis_name="i"), axis_name="i")
    check(args, f)


def test_under_jit_with_ops_around():
    args = make_args(GRID, groups_over(GRID, ("model",)), seed=8)
    step = nest("model")

    @jax.jit
    def program(operand, output, *offsets_and_sizes):
        return step(operand * 2, output, *offsets_and_sizes) + 1

    doubled = RaggedArgs(**{**args.__dict__, "operand": args.operand * 2})
    got = np.asarray(program(*args.operands()))
    np.testing.assert_allclose(got, reference(doubled) + 1, rtol=0, atol=1e-6)


def test_gradient_is_the_transposed_linear_map():
    """The op is linear in (operand, output): the gradient of <w, result> is the
    transpose of its matrix (built from the numpy reference) applied to w."""
    args = make_args(GRID, groups_over(GRID, ("model",)), feature=(2,), max_size=2, seed=9)
    weights = np.random.default_rng(1).normal(size=args.output.shape).astype(np.float32)
    step = nest("model")

    def loss(operand, output):
        result = step(operand, output, *args.operands()[2:])
        return jnp.sum(result * weights)

    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(args.operand, args.output)
    want = linear_map(args).T @ weights.reshape(-1)
    operand_size = args.operand.size
    np.testing.assert_allclose(grads[0].reshape(-1), want[:operand_size], atol=1e-5)
    np.testing.assert_allclose(grads[1].reshape(-1), want[operand_size:], atol=1e-5)


def test_vmap_around_the_nest():
    groups = groups_over(GRID, ("model",))
    cases = [make_args(GRID, groups, seed=s, rows=20, out_rows=24) for s in (10, 11)]
    stacked = [np.stack(parts) for parts in zip(*(c.operands() for c in cases))]
    got = np.asarray(jax.vmap(nest("model"))(*stacked))
    for index, case in enumerate(cases):
        np.testing.assert_array_equal(got[index], reference(case))


def test_the_plan_shows_padded_against_ragged_bytes():
    args = make_args(GRID, groups_over(GRID, ("model",)), seed=12)
    plan = pmapc.lower(nest("model"), *args.operands()).plan()
    (padded,) = [step for step in plan.steps if step.ragged_payload is not None]
    rows = args.operand.shape[2]
    assert padded.op == "all_to_all" and padded.label == "all_to_all (ragged, padded)"
    assert padded.payload == 4 * rows * 3 * 4  # 4 slices of every row, 3 float32s a row
    assert padded.ragged_payload == rows * 3 * 4
    assert padded.minimum() < padded.sent()


# -- the native form: XLA's op, for GPU and TPU ----------------------------------------


def test_native_form_is_xlas_custom_call():
    args = make_args(GRID, groups_over(GRID, ("model",)), seed=13)
    lowered = pmapc.lower(nest("model"), *args.operands(), ragged="native")
    (op,) = [
        o
        for o in lowered.compilation.module.body.operations[-1].regions[0].blocks[0].operations
        if o.name == "stablehlo.custom_call"
    ]
    config = op.attributes["backend_config"]
    assert str(op.attributes["call_target_name"]) == '"ragged_all_to_all"'
    assert "channel_id" in config and "replica_groups" in config
    hlo = xla.hlo_text(xla.hlo_of(lowered.compilation.module))
    assert "ragged-all-to-all(" in hlo and "replica_groups={{0,1,2,3},{4,5,6,7}}" in hlo
    (step,) = lowered.plan().steps
    assert step.op == "ragged_all_to_all" and step.axes == ("model",)


def test_native_ops_of_two_maps_in_one_jit_get_channels_of_their_own():
    """Each embedded program's native ragged_all_to_all takes a fresh channel id of
    JAX's module, as a collective takes a fresh channel handle: two maps lowered for
    GPU in one `jax.jit` do not both say channel 1."""
    args = make_args(GRID, groups_over(GRID, ("model",)), seed=13)

    def twice(*operands):
        return nest("model")(nest("model")(*operands), *operands[1:])

    lowered = jax.jit(twice).trace(*args.operands()).lower(lowering_platforms=("cuda",))
    natives = [
        op
        for op in ir.walk(lowered.compiler_ir("stablehlo").operation, "stablehlo.custom_call")
        if ragged.is_native(op)
    ]
    channels = [
        ir.as_int((ir.as_dict(op.attributes["backend_config"]) or {})[ragged.CHANNEL_ID])
        for op in natives
    ]
    assert len(channels) == 2 and len(set(channels)) == 2, channels


def test_native_form_is_refused_for_cpu_devices():
    args = make_args(GRID, groups_over(GRID, ("model",)))
    lowered = pmapc.lower(nest("model"), *args.operands(), ragged="native")
    with pytest.raises(UnsupportedError, match="does not run on cpu; lower it with ragged="):
        lowered.compile()


def test_native_form_is_refused_in_replica_form():
    args = make_args(GRID, groups_over(GRID, ("model",)))
    with pytest.raises(UnsupportedError, match="partition form only"):
        pmapc.lower(nest("model"), *args.operands(), ragged="native", target="replicas")


def test_cpu_programs_default_to_the_expanded_form():
    args = make_args(GRID, groups_over(GRID, ("model",)))
    text = pmapc.lower(nest("model"), *args.operands()).as_text()
    assert "@ragged_all_to_all" not in text and "stablehlo.all_to_all" in text


# -- errors -----------------------------------------------------------------------------


def test_operand_and_output_of_two_dtypes_are_refused_at_the_users_line():
    args = make_args(GRID, groups_over(GRID, ("model",)))
    operands = args.operands()
    operands[1] = operands[1].astype(np.int32)
    line = inspect.getsourcelines(nest)[1] + 4
    with pytest.raises(ArgumentError, match="give them one dtype") as caught:
        nest("model")(*operands)
    assert f"test_ragged.py:{line}" in str(caught.value)


def test_slices_that_do_not_divide_among_the_group_are_refused():
    args = make_args(GRID, groups_over(GRID, ("model",)), slices_per_peer=2)
    operands = [a[..., :6] if a.ndim == 3 and a.dtype == np.int32 else a for a in args.operands()]
    with pytest.raises(ShapeError, match="6 slices, not a multiple of the group's 4 devices"):
        nest("model")(*operands)


def test_rows_of_different_shapes_are_refused():
    args = make_args(GRID, groups_over(GRID, ("model",)), feature=(3,))
    operands = args.operands()
    operands[1] = np.zeros((*GRID, 9, 4), np.float32)
    with pytest.raises(ShapeError, match="same dimensions after the first"):
        nest("model")(*operands)


def test_an_unknown_ragged_form_is_refused():
    args = make_args(GRID, groups_over(GRID, ("model",)))
    with pytest.raises(ArgumentError, match="ragged= takes 'native' or 'expanded'"):
        pmapc.lower(nest("model"), *args.operands(), ragged="padded")


# -- folded onto fewer devices ----------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize(
    ("axes", "index_groups"),
    [
        (("model",), None),
        (("data",), None),
        (("data", "model"), None),
        (("model",), [[0, 3], [1, 2]]),
    ],
    ids=["model", "data", "data-model", "model-groups"],
)
def test_folded(count, axes, index_groups):
    """On `count` devices a group within a device's block becomes local writes; one
    across devices gathers its members first."""
    args = make_args(GRID, groups_over(GRID, axes, index_groups), slices_per_peer=2, seed=14)
    with pmapc.fold_onto(jax.devices()[:count]):
        check(args, nest(axes, index_groups))


def test_folded_gradient():
    args = make_args(GRID, groups_over(GRID, ("model",)), feature=(2,), max_size=2, seed=15)
    weights = np.random.default_rng(2).normal(size=args.output.shape).astype(np.float32)
    step = nest("model")

    def loss(operand):
        return jnp.sum(step(operand, *args.operands()[1:]) * weights)

    with pmapc.fold_onto(jax.devices()[:2]):
        grad = jax.jit(jax.grad(loss))(args.operand)
    want = linear_map(args).T @ weights.reshape(-1)
    np.testing.assert_allclose(grad.reshape(-1), want[: args.operand.size], atol=1e-5)


# -- jax.lax.ragged_dot, the grouped matmul of expert MLPs ------------------------------


def ragged_dot_reference(lhs, rhs, group_sizes):
    """Rows of `lhs` in consecutive groups of `group_sizes`, group g times rhs[g];
    rows after the last group are zeros."""
    out = np.zeros((*lhs.shape[:-1], rhs.shape[-1]), np.float32)
    for index in np.ndindex(*lhs.shape[:-2]):
        start = 0
        for group, size in enumerate(group_sizes[index]):
            out[index][start : start + size] = lhs[index][start : start + size] @ rhs[index][group]
            start += size
    return out


@pytest.mark.parametrize("count", [None, 1, 2], ids=["unfolded", "folded-1", "folded-2"])
def test_ragged_dot_in_a_nest(count):
    rng = np.random.default_rng(16)
    lhs = rng.normal(size=(*GRID, 10, 3)).astype(np.float32)
    rhs = rng.normal(size=(GRID[1], 3, 3, 5)).astype(np.float32)  # 3 groups per model device
    sizes = rng.integers(0, 4, size=(*GRID, 3)).astype(np.int32)

    @partial(pmapc.pmap, axis_name="data", in_axes=(0, None, 0))
    def grouped(lhs, rhs, sizes):
        return pmapc.pmap(jax.lax.ragged_dot, axis_name="model")(lhs, rhs, sizes)

    want = ragged_dot_reference(lhs, np.broadcast_to(rhs, (*GRID, 3, 3, 5)), sizes)
    if count is None:
        got = grouped(lhs, rhs, sizes)
    else:
        with pmapc.fold_onto(jax.devices()[:count]):
            got = grouped(lhs, rhs, sizes)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


# -- pmapc run ----------------------------------------------------------------------------

LIT_MODULE = pathlib.Path(__file__).parents[1] / "lit" / "passes" / "ragged-all-to-all.mlir"


def test_pmapc_run_of_pmapc_ir(tmp_path, capsys):
    """`pmapc run` of the lit test's module (a 2x4 nest, one slice per model device of
    an f32[4, 2] operand into an f32[6, 2] output): the expanded form on CPU."""
    from pmapc.tools.main import main

    groups = groups_over(GRID, ("model",))
    args = make_args(GRID, groups, feature=(2,), max_size=1, gap=0, rows=4, out_rows=6, seed=17)
    paths = []
    for index, array in enumerate(args.operands()):
        paths += ["--input", str(tmp_path / f"a{index}.npy")]
        np.save(tmp_path / f"a{index}.npy", array)
    assert main(["run", str(LIT_MODULE), *paths, "-o", str(tmp_path)]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "result0.npy"), reference(args))
