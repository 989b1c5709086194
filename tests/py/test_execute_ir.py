"""Generated nested-map programs, one collective each, run on 8 CPU devices against numpy.

Every program runs in both forms a pipeline can end in (conftest.py's `target`
fixture): partition form (to-partitions) and replica form (to-replicas),
against the same oracle.

Each case is a pmapc-IR module built from a text template: `@main` maps over the
outermost mesh axis, every body maps over the next axis, and the innermost body
applies one collective whose result is stacked back through `out_axes`. The
oracle is plain numpy with explicit loops over device coordinates, written from
JAX 0.4's nested-pmap rules: devices are numbered row-major over the nesting, a
collective acts within the devices that agree on every other axis, ordered
row-major over the named axes in the order the tuple names them.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

MESH_2X4 = (("data", 2), ("model", 4))
MESH_2X2X2 = (("a", 2), ("b", 2), ("c", 2))
MESH_8 = (("i", 8),)
# Per mesh: the inner axis, the outer axis, all axes, a tuple in non-nesting order.
AXIS_SETS = {
    MESH_2X4: [("model",), ("data",), ("data", "model"), ("model", "data")],
    MESH_2X2X2: [("c",), ("a",), ("a", "b", "c"), ("c", "a")],
}
ELEMENT_TYPES = {"f32": np.dtype(np.float32), "i32": np.dtype(np.int32), "i1": np.dtype(bool)}
VARIANTS = [
    "psum", "pmax", "pmin",
    "all_gather_tiled_d0", "all_gather_tiled_d1", "all_gather_d0", "all_gather_d1",
    "psum_scatter_tiled_d1", "psum_scatter_d0",
    "all_to_all_tiled_s0c1", "all_to_all_tiled_s1c0", "all_to_all_s0c1", "all_to_all_s2c0",
    "ppermute_cycle", "ppermute_partial", "axis_index",
]  # fmt: skip


def collective_spec(variant: str, n: int) -> tuple[str, dict, tuple[int, ...]]:
    """The kind, parameters and a fitting per-device block of `variant` over a group of n."""
    gather, scatter, to_all = "all_gather", "psum_scatter", "all_to_all"
    specs = {
        "psum": ("psum", {}, (2, 3)),
        "pmax": ("pmax", {}, (2, 3)),
        "pmin": ("pmin", {}, (3, 2)),
        "all_gather_tiled_d0": (gather, {"all_gather_dimension": 0, "tiled": True}, (2, 3)),
        "all_gather_tiled_d1": (gather, {"all_gather_dimension": 1, "tiled": True}, (2, 3)),
        "all_gather_d0": (gather, {"all_gather_dimension": 0, "tiled": False}, (2, 3)),
        "all_gather_d1": (gather, {"all_gather_dimension": 1, "tiled": False}, (2, 3)),
        "psum_scatter_tiled_d1": (scatter, {"scatter_dimension": 1, "tiled": True}, (3, 2 * n)),
        "psum_scatter_d0": (scatter, {"scatter_dimension": 0, "tiled": False}, (n, 3)),
        "all_to_all_tiled_s0c1": (
            to_all, {"split_axis": 0, "concat_axis": 1, "tiled": True}, (2 * n, 3)),
        "all_to_all_tiled_s1c0": (
            to_all, {"split_axis": 1, "concat_axis": 0, "tiled": True}, (3, 2 * n)),
        "all_to_all_s0c1": (
            to_all, {"split_axis": 0, "concat_axis": 1, "tiled": False}, (n, 2, 3)),
        "all_to_all_s2c0": (
            to_all, {"split_axis": 2, "concat_axis": 0, "tiled": False}, (2, 3, n)),
        "ppermute_cycle": ("ppermute", {"perm": [[j, (j + 1) % n] for j in range(n)]}, (2, 3)),
        "ppermute_partial": ("ppermute", {"perm": [[j, j + 1] for j in range(n - 1)]}, (2, 3)),
        "axis_index": ("axis_index", {}, (2,)),
    }  # fmt: skip
    return specs[variant]


@dataclasses.dataclass(frozen=True)
class Operand:
    """A `@main` argument: its per-device block and its in_axes entry at each level."""

    block: tuple[int, ...]
    in_axes: tuple[int | None, ...]


@dataclasses.dataclass(frozen=True)
class Case:
    """One program: a mesh, one collective in the innermost body, and how data maps."""

    mesh: tuple[tuple[str, int], ...]
    kind: str
    params: dict
    axes: tuple[str, ...]
    dtype: str
    operands: tuple[Operand, ...]
    out_axes: tuple[int | None, ...]

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(size for _, size in self.mesh)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.mesh)

    @property
    def group_size(self) -> int:
        return int(np.prod([self.sizes[self.names.index(a)] for a in self.axes]))


def make_case(
    mesh, variant, axes, dtype, *, in_axes=None, out_axes=None, block=None, params=None, unmapped=()
) -> Case:
    """`variant` over `axes`; `params` override the variant's, `unmapped` adds operands
    (their in_axes per level) that the body adds to the first before the collective."""
    n = int(np.prod([dict(mesh)[a] for a in axes]))
    kind, default_params, default_block = collective_spec(variant, n)
    depth = len(mesh)
    block = default_block if block is None else block  # () is a scalar block
    operands = [Operand(block, in_axes or (0,) * depth)]
    operands += [Operand(block, extra_in_axes) for extra_in_axes in unmapped]
    return Case(
        mesh,
        kind,
        {**default_params, **(params or {})},
        tuple(axes),
        dtype,
        tuple(operands),
        out_axes or (0,) * depth,
    )


# ----------------------------------------------------------------------------
# The numpy oracle


def reference_collective(case: Case, blocks: list[np.ndarray], index: int) -> np.ndarray:
    """The result on the device at position `index` of a group whose inputs are `blocks`."""
    return _REFERENCES[case.kind](case.params, blocks, index, ELEMENT_TYPES[case.dtype])


def _all_gather_reference(params, blocks, index, dtype):
    dim = params["all_gather_dimension"]
    return np.concatenate(blocks, axis=dim) if params["tiled"] else np.stack(blocks, dim)


def _psum_scatter_reference(params, blocks, index, dtype):
    total, dim = np.sum(blocks, axis=0, dtype=dtype), params["scatter_dimension"]
    if params["tiled"]:
        return np.split(total, len(blocks), axis=dim)[index]
    return np.take(total, index, axis=dim)


def _all_to_all_reference(params, blocks, index, dtype):
    split, concat = params["split_axis"], params["concat_axis"]
    if params["tiled"]:
        chunks = [np.split(block, len(blocks), axis=split)[index] for block in blocks]
        return np.concatenate(chunks, axis=concat)
    # Untiled: the split dimension is removed, a group dimension inserted at concat.
    return np.stack([np.take(block, index, axis=split) for block in blocks], axis=concat)


def _ppermute_reference(params, blocks, index, dtype):
    for source, target in params["perm"]:
        if target == index:
            return blocks[source]
    return np.zeros_like(blocks[0])


# kind -> (params, the group's blocks, a position's index, element dtype) -> its result
_REFERENCES = {
    "psum": lambda params, blocks, index, dtype: np.sum(blocks, axis=0, dtype=dtype),
    "pmax": lambda params, blocks, index, dtype: np.max(blocks, axis=0),
    "pmin": lambda params, blocks, index, dtype: np.min(blocks, axis=0),
    "all_gather": _all_gather_reference,
    "psum_scatter": _psum_scatter_reference,
    "all_to_all": _all_to_all_reference,
    "ppermute": _ppermute_reference,
    "axis_index": lambda params, blocks, index, dtype: np.array(index, dtype=np.int32),
}


def group_of(case: Case, coords: tuple[int, ...]) -> tuple[list[tuple[int, ...]], int]:
    """The group members of the device at `coords`, in group order, and its own position.

    A group is ordered row-major over the axes as the collective names them; a
    ppermute's in mesh order, whatever the order named (JAX sorts its groups).
    """
    named = [case.names.index(axis) for axis in case.axes]
    if case.kind == "ppermute":
        named.sort()
    members = []
    for values in itertools.product(*[range(case.sizes[p]) for p in named]):
        member = list(coords)
        for position, value in zip(named, values, strict=True):
            member[position] = value
        members.append(tuple(member))
    position = 0
    for p in named:
        position = position * case.sizes[p] + coords[p]
    return members, position


def local_block(array: np.ndarray, operand: Operand, coords: tuple[int, ...]) -> np.ndarray:
    """What the innermost body sees of `array` on the device at `coords`."""
    for in_axis, coord in zip(operand.in_axes, coords, strict=True):
        if in_axis is not None:
            array = np.take(array, coord, axis=in_axis)
    return array


def reference_per_device(case: Case, arrays: list[np.ndarray]) -> dict:
    """Every device's collective result, keyed by its mesh coordinates."""
    inputs = {}
    for coords in itertools.product(*[range(s) for s in case.sizes]):
        blocks = [local_block(a, op, coords) for a, op in zip(arrays, case.operands, strict=True)]
        inputs[coords] = sum(blocks[1:], blocks[0])
    results = {}
    for coords in inputs:
        members, position = group_of(case, coords)
        results[coords] = reference_collective(case, [inputs[m] for m in members], position)
    return results


def stack_results(case: Case, per_device: dict, prefix: tuple[int, ...] = ()) -> np.ndarray:
    """The global result: per-device results stacked level by level through out_axes."""
    depth = len(prefix)
    if depth == len(case.mesh):
        return per_device[prefix]
    parts = [stack_results(case, per_device, (*prefix, j)) for j in range(case.sizes[depth])]
    if case.out_axes[depth] is None:
        return parts[0]  # unmapped: replicated over this axis
    return np.stack(parts, axis=case.out_axes[depth])


# ----------------------------------------------------------------------------
# The program template


def tensor_type(shape: tuple[int, ...], element: str) -> str:
    return f"tensor<{''.join(f'{d}x' for d in shape)}{element}>"


def shapes_by_depth(block, sizes, axes) -> list[tuple[int, ...]]:
    """The shape at every depth (0 = @main) of a value with `block` inside the innermost body."""
    shapes = [tuple(block)]
    for size, axis in zip(reversed(sizes), reversed(axes), strict=True):
        inner = shapes[0]
        shapes.insert(0, inner if axis is None else (*inner[:axis], size, *inner[axis:]))
    return shapes


def attribute_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value} : i64"
    return f"[{', '.join(attribute_text(v) if isinstance(v, list) else str(v) for v in value)}]"


def axes_text(axes) -> str:
    return "[" + ", ".join("unit" if a is None else str(a) for a in axes) + "]"


def map_lines(case: Case, depth: int, arg_types, result_type: str) -> list[str]:
    name, size = case.mesh[depth]
    args = ", ".join(f"%arg{i}" for i in range(len(arg_types)))
    config = (
        f'axis_name = "{name}", axis_size = {size} : i64, '
        f"in_axes = {axes_text([op.in_axes[depth] for op in case.operands])}, "
        f"out_axes = {axes_text([case.out_axes[depth]])}"
    )
    return [
        f"%0 = stablehlo.custom_call @pmapc.map({args}) {{called_computations = "
        f"[@depth{depth + 1}], api_version = 4 : i32, backend_config = {{{config}}}}} : "
        f"({', '.join(arg_types)}) -> {result_type}",
        f"return %0 : {result_type}",
    ]


def body_lines(case: Case, arg_types, result_type: str) -> list[str]:
    """Sum the operands (when there are several), then apply the collective."""
    lines, value = [], "%arg0"
    for i in range(1, len(arg_types)):
        lines.append(f"%sum{i} = stablehlo.add {value}, %arg{i} : {arg_types[0]}")
        value = f"%sum{i}"
    config = ", ".join(
        [
            f"axes = [{', '.join(f'{chr(34)}{a}{chr(34)}' for a in case.axes)}]",
            *(f"{k} = {attribute_text(v)}" for k, v in case.params.items()),
        ]
    )
    operand, operand_type = (value, arg_types[0]) if case.kind != "axis_index" else ("", "")
    lines.append(
        f"%r = stablehlo.custom_call @pmapc.{case.kind}({operand}) {{api_version = 4 "
        f": i32, backend_config = {{{config}}}}} : ({operand_type}) -> {result_type}"
    )
    lines.append(f"return %r : {result_type}")
    return lines


def program_text(case: Case, result_block: tuple[int, ...], result_element: str) -> str:
    arg_shapes = [shapes_by_depth(op.block, case.sizes, op.in_axes) for op in case.operands]
    result_shapes = shapes_by_depth(result_block, case.sizes, case.out_axes)
    functions = []
    for depth in range(len(case.mesh) + 1):
        arg_types = [tensor_type(shapes[depth], case.dtype) for shapes in arg_shapes]
        result_type = tensor_type(result_shapes[depth], result_element)
        if depth < len(case.mesh):
            lines = map_lines(case, depth, arg_types, result_type)
        else:
            lines = body_lines(case, arg_types, result_type)
        header = "public @main" if depth == 0 else f"private @depth{depth}"
        params = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(arg_types))
        functions.append(
            f"  func.func {header}({params}) -> {result_type} {{\n"
            + "".join(f"    {line}\n" for line in lines)
            + "  }\n"
        )
    return "module {\n" + "".join(functions) + "}\n"


# ----------------------------------------------------------------------------
# Running and comparing


def random_input(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    """Distinct values; floats are quarter-integers so every sum is exact."""
    if dtype == "i1":
        return rng.random(shape) < 0.5
    size = int(np.prod(shape))
    values = rng.permutation(size).reshape(shape) - size // 2
    if dtype == "f32":
        return (values / 4).astype(np.float32)
    return (values * 3).astype(np.int32)


def element_name(dtype: np.dtype) -> str:
    return {numpy_dtype: name for name, numpy_dtype in ELEMENT_TYPES.items()}[dtype]


def check_case(case: Case, compile_ir, rng: np.random.Generator) -> None:
    arrays = [
        random_input(rng, shapes_by_depth(op.block, case.sizes, op.in_axes)[0], case.dtype)
        for op in case.operands
    ]
    per_device = reference_per_device(case, arrays)
    sample = per_device[(0,) * len(case.mesh)]
    expected = stack_results(case, per_device)
    executable = compile_ir(program_text(case, sample.shape, element_name(sample.dtype)))
    (result,) = executable(*arrays)
    assert_matches(np.asarray(result), expected)
    for shard in result.addressable_shards:  # every device's copy, replicas included
        assert_matches(np.asarray(shard.data), expected[shard.index])


def assert_matches(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
        f"got {actual.dtype}{list(actual.shape)}, expected {expected.dtype}{list(expected.shape)}"
    )
    if actual.dtype == np.float32:
        np.testing.assert_allclose(actual, expected, rtol=1e-6)
    else:
        np.testing.assert_array_equal(actual, expected)


def case_id(case: Case, variant: str) -> str:
    mesh = "x".join(str(size) for _, size in case.mesh)
    return f"{mesh}-{variant}-{'+'.join(case.axes)}-{case.dtype}"


def collective_cases() -> list:
    """Every variant over every axis set of both meshes, in f32 and i32; bools for pmax/pmin."""
    cases = []
    for mesh, axis_sets in AXIS_SETS.items():
        for variant, axes in itertools.product(VARIANTS, axis_sets):
            for dtype in ("f32", "i32") if variant != "axis_index" else ("i32",):
                case = make_case(mesh, variant, axes, dtype)
                cases.append(pytest.param(case, id=case_id(case, variant)))
    for mesh, axes in [
        (MESH_2X4, ("model", "data")),
        (MESH_2X4, ("model",)),
        (MESH_2X2X2, ("c", "a")),
        (MESH_2X2X2, ("b",)),
    ]:
        for variant in ("pmax", "pmin"):
            case = make_case(mesh, variant, axes, "i1", block=(4, 5))
            cases.append(pytest.param(case, id=case_id(case, variant)))
    for v, variant in enumerate(VARIANTS):
        case = make_case(MESH_8, variant, ("i",), ("f32", "i32")[v % 2])
        cases.append(pytest.param(case, id=case_id(case, variant)))
    return cases


@pytest.mark.parametrize("case", collective_cases())
def test_collective(case: Case, compile_ir, rng) -> None:
    check_case(case, compile_ir, rng)


# Cases that vary how data enters and leaves the maps: (id, variant, mesh, axes, dtype, options).
LAYOUT_CASES = [
    ("in-1-2-out-2-1", "psum", MESH_2X4, ("model",), "f32",
     {"in_axes": (1, 2), "out_axes": (2, 1)}),
    ("in-2-0-out-1-2", "all_gather_tiled_d1", MESH_2X4, ("model", "data"), "i32",
     {"in_axes": (2, 0), "out_axes": (1, 2)}),
    ("in-1-0-2-out-0-2-1", "psum_scatter_tiled_d1", MESH_2X2X2, ("b", "a"), "f32",
     {"in_axes": (1, 0, 2), "out_axes": (0, 2, 1)}),
    ("in-3-1-0-out-2-0-3", "all_to_all_s0c1", MESH_2X2X2, ("c",), "i32",
     {"in_axes": (3, 1, 0), "out_axes": (2, 0, 3)}),
    ("unit-everywhere", "all_gather_d1", MESH_2X4, ("model", "data"), "i32",
     {"unmapped": [(None, None)]}),
    ("unit-outer-1-inner", "psum_scatter_tiled_d1", MESH_2X4, ("data",), "f32",
     {"in_axes": (1, 0), "unmapped": [(None, 1)]}),
    ("unit-middle", "ppermute_cycle", MESH_2X2X2, ("c", "a"), "i32",
     {"unmapped": [(2, None, 0)]}),
    ("out-unit-inner", "psum", MESH_2X4, ("model",), "f32", {"out_axes": (0, None)}),
    ("out-unit-all", "pmax", MESH_2X4, ("data", "model"), "i32", {"out_axes": (None, None)}),
    ("out-unit-outer-inner", "pmin", MESH_2X2X2, ("c", "a"), "f32",
     {"out_axes": (None, 1, None)}),
    ("rank4-all_gather-d2", "all_gather_tiled_d0", MESH_2X2X2, ("a", "b", "c"), "f32",
     {"block": (2, 1, 3, 2), "params": {"all_gather_dimension": 2}}),
    ("rank4-all_gather-untiled-d4", "all_gather_d0", MESH_2X4, ("model",), "i32",
     {"block": (2, 1, 3, 2), "params": {"all_gather_dimension": 4}, "out_axes": (1, 3)}),
    ("rank4-psum_scatter-untiled-d2", "psum_scatter_d0", MESH_2X2X2, ("b", "c"), "i32",
     {"block": (2, 3, 4, 2), "params": {"scatter_dimension": 2}}),
    ("rank4-all_to_all-tiled-s2c3", "all_to_all_tiled_s0c1", MESH_2X4, ("model", "data"),
     "f32", {"block": (2, 1, 16, 3), "params": {"split_axis": 2, "concat_axis": 3}}),
    ("rank4-all_to_all-s3c1", "all_to_all_s0c1", MESH_2X2X2, ("a", "c"), "f32",
     {"block": (2, 3, 1, 4), "params": {"split_axis": 3, "concat_axis": 1}}),
    ("all_to_all-tiled-s1c1", "all_to_all_tiled_s0c1", MESH_2X4, ("model", "data"), "i32",
     {"block": (2, 16, 3), "params": {"split_axis": 1, "concat_axis": 1}}),
    ("all_to_all-untiled-s1c1", "all_to_all_s0c1", MESH_2X2X2, ("c", "b"), "f32",
     {"block": (2, 4, 3), "params": {"split_axis": 1, "concat_axis": 1}}),
    ("rank4-pmin", "pmin", MESH_2X2X2, ("b",), "i32", {"block": (2, 1, 3, 2)}),
    ("scalar-psum", "psum", MESH_8, ("i",), "f32", {"block": ()}),
    ("scalar-all_gather", "all_gather_d0", MESH_8, ("i",), "i32", {"block": ()}),
    ("ppermute-empty", "ppermute_cycle", MESH_8, ("i",), "f32", {"params": {"perm": []}}),
    ("ppermute-reverse", "ppermute_cycle", MESH_8, ("i",), "i32",
     {"params": {"perm": [[j, 7 - j] for j in range(8)]}}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("variant", "mesh", "axes", "dtype", "options"),
    [pytest.param(*case[1:], id=case[0]) for case in LAYOUT_CASES],
)
def test_layout(variant, mesh, axes, dtype, options, compile_ir, rng) -> None:
    check_case(make_case(mesh, variant, axes, dtype, **options), compile_ir, rng)


def test_example_collective_in_outer_body(run_ir) -> None:
    """examples/nested_2x4.mlir: psum, ppermute, all_gather and slice inside, psum outside."""
    text = (Path(__file__).parents[2] / "examples" / "nested_2x4.mlir").read_text()
    x = np.arange(64, dtype=np.float32).reshape(2, 4, 8) / 4
    devices = list(itertools.product(range(2), range(4)))  # (data, model), row-major
    summed = {(d, m): sum(x[d, k] for k in range(4)) for d, m in devices}  # psum 'model'
    permuted = {(d, (m + 1) % 4): summed[d, m] for d, m in devices}  # ppermute 0->1->2->3->0
    gathered = np.concatenate([permuted[device] for device in devices])  # ('data', 'model')
    inner = {device: gathered[0:8] for device in devices}  # the slice [0:8]
    stacked = [np.stack([inner[d, m] for m in range(4)]) for d in range(2)]  # inner out_axes
    expected = np.stack([stacked[0] + stacked[1]] * 2)  # psum over 'data', outer out_axes
    (result,) = run_ir(text, x)
    np.testing.assert_allclose(result, expected, rtol=1e-6)


# psum and pmax over 'model' and a psum over 'data' inside a 2x4 nest: the two
# independent all-reduces over one group set are combined into one variadic
# all_reduce, which to-partitions splits again (docs/ir.md).
COMBINED_ALL_REDUCES = """
module {
  func.func public @main(%arg0: tensor<2x4x3xf32>, %arg1: tensor<2x4x3xf32>)
      -> (tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x4x3xf32>) {
    %0:3 = stablehlo.custom_call @pmapc.map(%arg0, %arg1) {called_computations = [@outer],
      api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64,
      in_axes = [0, 0], out_axes = [0, 0, 0]}}
      : (tensor<2x4x3xf32>, tensor<2x4x3xf32>)
      -> (tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x4x3xf32>)
    return %0#0, %0#1, %0#2 : tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x4x3xf32>
  }
  func.func private @outer(%arg0: tensor<4x3xf32>, %arg1: tensor<4x3xf32>)
      -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
    %0:3 = stablehlo.custom_call @pmapc.map(%arg0, %arg1) {called_computations = [@inner],
      api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64,
      in_axes = [0, 0], out_axes = [0, 0, 0]}}
      : (tensor<4x3xf32>, tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>)
    return %0#0, %0#1, %0#2 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
  }
  func.func private @inner(%x: tensor<3xf32>, %y: tensor<3xf32>)
      -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
    %0 = stablehlo.custom_call @pmapc.psum(%x) {api_version = 4 : i32,
      backend_config = {axes = ["model"]}} : (tensor<3xf32>) -> tensor<3xf32>
    %1 = stablehlo.custom_call @pmapc.psum(%y) {api_version = 4 : i32,
      backend_config = {axes = ["model"]}} : (tensor<3xf32>) -> tensor<3xf32>
    %2 = stablehlo.custom_call @pmapc.psum(%x) {api_version = 4 : i32,
      backend_config = {axes = ["data"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0, %1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
}
"""


def test_combined_all_reduces(run_ir, rng) -> None:
    x = random_input(rng, (2, 4, 3), "f32")
    y = random_input(rng, (2, 4, 3), "f32")
    sum_x, sum_y, sum_x_data = run_ir(COMBINED_ALL_REDUCES, x, y)
    np.testing.assert_allclose(sum_x, np.broadcast_to(x.sum(1, keepdims=True), x.shape))
    np.testing.assert_allclose(sum_y, np.broadcast_to(y.sum(1, keepdims=True), y.shape))
    np.testing.assert_allclose(sum_x_data, np.broadcast_to(x.sum(0, keepdims=True), x.shape))


def test_each_target_compiles_in_its_form(compile_ir, target) -> None:
    executable = compile_ir(COMBINED_ALL_REDUCES)
    assert executable.form == target
