"""Random nested-map programs: a description, a hypothesis generator and two interpreters.

A `Program` describes a nest of maps over a mesh of 1-3 axes (outermost first), the
arguments (dtype and `in_axes` at every level), and at every level a sequence of `Op`s
(collectives, and `stack`, a local op that makes a dimension for `psum_scatter` or
`all_to_all`). The innermost body combines the arguments and runs its ops; every outer
body calls the map below it and runs its ops on the stacked result.

- `build(program, mapper)` turns it into a function with `pmapc.pmap` or `vmap_mapper`
  (nested named `jax.vmap`, an oracle for what vmap can run: see `vmap_can_run`).
- `run_numpy(program, arrays)` interprets it on a numpy mesh of per-device blocks, with
  the references of `oracle.py`: the oracle for every program.
- `programs()` is the hypothesis strategy; `sample_arguments(program)` gives its inputs.

Arrays are integer-valued and group sizes are powers of two, so every result is exact.
The parts share the shape rules (`result_shape`, `varying_after`), hence one module.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from jax import lax

import pmapc
from support.oracle import (
    all_gather_reference,
    all_to_all_reference,
    axis_index_reference,
    per_group,
    ppermute_reference,
    psum_scatter_reference,
)

MAX_BLOCK = 64  # elements per device, at every step
AXIS_NAMES = ("i", "j", "k", "data", "model", "x")  # drawn with repeats: shadowing happens
REDUCTIONS = ("psum", "pmean", "pmax", "pmin")
NOT_ON_VMAP_TUPLES = ("all_gather", "psum_scatter", "ppermute")  # vmap raises on 2+ axes
CONTROL_FLOW = ("cond", "while")
COMBINE = {"add": operator.add, "multiply": operator.mul}


def search_settings(examples: int) -> settings:
    """Hypothesis settings of a random-program search: `examples` programs, the same
    ones every run (derandomized, no example database), with no time limit per program
    (each runs in a child process that compiles it)."""
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


@dataclasses.dataclass(frozen=True)
class Op:
    """One step of a body: a collective over `axes`, or `stack` (local)."""

    kind: str  # a REDUCTIONS kind, all_gather, psum_scatter, all_to_all, ppermute,
    # axis_index (its value is added), stack (`count` copies v + c along `dimension`),
    # or control flow around `then`, a reduction, taken by each device on its own
    # value: cond (`then` where the value sums above 0, else twice the value) or
    # while (`then` |sum| mod 3 times): devices of one group go different ways
    axes: str | tuple[str, ...] = ()  # as the user writes it: a name or a tuple of names
    dimension: int = 0  # all_gather axis, scatter_dimension, split_axis, stack axis
    concat: int = 0  # all_to_all concat_axis
    tiled: bool = False
    perm: tuple[tuple[int, int], ...] = ()
    count: int = 0
    then: Op | None = None  # the reduction a cond or while runs

    def __repr__(self) -> str:  # the fields that differ from their defaults
        fields = [
            f"{field.name}={getattr(self, field.name)!r}"
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != field.default
        ]
        return f"Op({', '.join(fields)})"

    def _repr_pretty_(self, printer, cycle) -> None:  # hypothesis prints examples with it
        printer.text(repr(self))


@dataclasses.dataclass(frozen=True)
class Level:
    """One map of the nest: its axis, whether `axis_size=` is passed, its out_axes, its ops."""

    name: str
    size: int
    pass_size: bool
    out_axis: int | None
    ops: tuple[Op, ...]


@dataclasses.dataclass(frozen=True)
class Arg:
    dtype: str  # "float32" or "int32"
    in_axes: tuple[int | None, ...]  # one per level, outermost first


@dataclasses.dataclass(frozen=True)
class Program:
    levels: tuple[Level, ...]  # outermost first
    block: tuple[int, ...]  # each argument's shape in the innermost body
    args: tuple[Arg, ...]
    combine: str  # a COMBINE key: how the innermost body joins its arguments
    seed: int  # of the argument data

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(jnp.result_type(*(arg.dtype for arg in self.args)))

    def global_shape(self, arg: Arg) -> tuple[int, ...]:
        shape = self.block
        for level, axis in zip(reversed(self.levels), reversed(arg.in_axes), strict=True):
            shape = shape if axis is None else insert(shape, axis, level.size)
        return shape


def insert(shape: tuple[int, ...], position: int, size: int) -> tuple[int, ...]:
    return (*shape[:position], size, *shape[position:])


def axis_tuple(axes: str | tuple[str, ...]) -> tuple[str, ...]:
    return (axes,) if isinstance(axes, str) else axes


def resolve(levels, axes) -> list[int]:
    """The levels that `axes` name in a body of the nest `levels`: inner bindings shadow."""
    names = [level.name for level in levels]
    return [len(names) - 1 - names[::-1].index(name) for name in axis_tuple(axes)]


def group_size(levels, axes) -> int:
    return math.prod(levels[position].size for position in resolve(levels, axes))


def result_shape(op: Op, shape: tuple[int, ...], n: int) -> tuple[int, ...]:
    """The shape `op` gives a value of `shape` when its axes name a group of `n` devices."""
    d, sizes = op.dimension, list(shape)
    match (op.kind, op.tiled):
        case ("stack", _):
            sizes.insert(d, op.count)
        case ("all_gather", True):
            sizes[d] *= n
        case ("all_gather", False):
            sizes.insert(d, n)
        case ("psum_scatter", True):
            sizes[d] //= n
        case ("psum_scatter", False):
            del sizes[d]
        case ("all_to_all", True):
            sizes[d] //= n
            sizes[op.concat] *= n
        case ("all_to_all", False):
            del sizes[d]
            sizes.insert(op.concat, n)
    return tuple(sizes)


def varying_after(op: Op, varying: frozenset[int], scope) -> frozenset[int]:
    """The levels over which the value may differ (vmap: is batched) after `op`."""
    full_permutation = op.kind == "ppermute" and len(op.perm) == group_size(scope, op.axes)
    if op.kind == "stack" or full_permutation:  # a replicated value stays replicated
        return varying
    if op.then is not None:  # the predicate varies as the value does
        return varying | varying_after(op.then, varying, scope)
    named = frozenset(resolve(scope, op.axes))
    if op.kind in (*REDUCTIONS, "all_gather"):
        return varying - named
    return varying | named


def initial_varying(program: Program) -> frozenset[int]:
    """The levels over which the innermost body's combined arguments differ."""
    return frozenset(
        depth for arg in program.args for depth, axis in enumerate(arg.in_axes) if axis is not None
    )


def walk_ops(program: Program):
    """(scope, op, operand shape, levels the operand varies over) for each op, in run order."""
    shape, varying = program.block, initial_varying(program)
    for depth in reversed(range(len(program.levels))):
        scope, level = program.levels[: depth + 1], program.levels[depth]
        for op in level.ops:
            yield scope, op, shape, varying
            shape = result_shape(op, shape, group_size(scope, op.axes))
            varying = varying_after(op, varying, scope)
        shape = shape if level.out_axis is None else insert(shape, level.out_axis, level.size)
        varying = varying - {depth}


def vmap_can_run(program: Program) -> bool:
    """False if an op is one that named `jax.vmap` rejects or gets wrong (jax 0.10.2)."""
    for scope, op, _shape, varying in walk_ops(program):
        named = resolve(scope, op.axes)
        if op.kind in NOT_ON_VMAP_TUPLES and len(named) > 1:
            return False
        if op.kind == "ppermute" and len(op.perm) < group_size(scope, op.axes):
            return False  # a device without a source
        if op.kind == "all_to_all" and not varying.issuperset(named):
            return False  # the batching rule returns a wrong shape for an unbatched operand
        if op.kind == "psum_scatter" and not op.tiled and not varying.issubset(named):
            return False  # the batching rule over other axes misplaces the batch dimension
    return True


def jax_can_batch(program: Program) -> bool:
    """False if the program has an untiled psum_scatter: JAX's batching rule for it
    (jax 0.10 to 0.12) puts the result's batch dimension one too far when the operand
    carries it after the scatter dimension, so `jax.vmap` of the program fails, with
    pmapc as with the oracle."""
    return not any(
        op.kind == "psum_scatter" and not op.tiled for level in program.levels for op in level.ops
    )


def sample_arguments(program: Program) -> list[np.ndarray]:
    """Small integers (floats too): sums, means over powers of two and products stay exact."""
    rng = np.random.default_rng(program.seed)
    return [
        rng.integers(-8, 9, size=program.global_shape(arg)).astype(arg.dtype)
        for arg in program.args
    ]


# ----------------------------------------------------------------------------
# JAX: the program as nested maps, with `pmapc.pmap` or `vmap_mapper`


def vmap_mapper(fun, axis_name: str, *, in_axes, out_axes, axis_size=None):
    """Named `jax.vmap` with `pmap`'s call signature."""
    return jax.vmap(
        fun, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name, axis_size=axis_size
    )


def jax_op(op: Op, value):
    match op.kind:
        case "psum" | "pmean" | "pmax" | "pmin":
            return getattr(lax, op.kind)(value, op.axes)
        case "all_gather":
            return lax.all_gather(value, op.axes, axis=op.dimension, tiled=op.tiled)
        case "psum_scatter":
            return lax.psum_scatter(value, op.axes, scatter_dimension=op.dimension, tiled=op.tiled)
        case "all_to_all":
            return lax.all_to_all(value, op.axes, op.dimension, op.concat, tiled=op.tiled)
        case "ppermute":
            return lax.ppermute(value, op.axes, op.perm)
        case "axis_index":
            return value + lax.axis_index(op.axes).astype(value.dtype)
        case "stack":
            return jnp.stack([value + copy for copy in range(op.count)], axis=op.dimension)
        case "cond":
            then = op.then
            return lax.cond(value.sum() > 0, lambda v: jax_op(then, v), lambda v: v * 2, value)
        case "while":
            then, trips = op.then, (jnp.abs(value.sum()) % 3).astype(jnp.int32)
            return lax.fori_loop(0, trips, lambda _, v: jax_op(then, v), value)
    raise ValueError(f"unknown op kind '{op.kind}'")


def run_jax_ops(ops: tuple[Op, ...], value):
    for op in ops:
        value = jax_op(op, value)
    return value


def build(program: Program, mapper: Callable) -> Callable:
    """The program as a function of its global arrays, each level mapped with `mapper`."""
    combine, dtype, innermost = COMBINE[program.combine], program.dtype, program.levels[-1]

    def body(*args):
        values = [jnp.asarray(arg).astype(dtype) for arg in args]
        combined = values[0] if len(values) == 1 else combine(*values)
        return run_jax_ops(innermost.ops, combined)

    fun = map_level(program, len(program.levels) - 1, body, mapper)
    for depth in reversed(range(len(program.levels) - 1)):
        fun = map_level(program, depth, calling(fun, program.levels[depth].ops), mapper)
    return fun


def run_with_pmapc(program: Program, arrays: list[np.ndarray]) -> np.ndarray:
    """The program's result with `pmapc.pmap` (np.asarray waits for it: XLA's CPU
    collectives can deadlock with many programs queued)."""
    return np.asarray(build(program, pmapc.pmap)(*arrays))


def calling(inner, ops: tuple[Op, ...]):
    """An outer body: call the map below, run this level's ops on its stacked result."""
    return lambda *args: run_jax_ops(ops, inner(*args))


def map_level(program: Program, depth: int, body, mapper):
    level = program.levels[depth]
    return mapper(
        body,
        level.name,
        in_axes=tuple(arg.in_axes[depth] for arg in program.args),
        out_axes=level.out_axis,
        axis_size=level.size if level.pass_size else None,
    )


# ----------------------------------------------------------------------------
# JAX's transformations of a program (float32; no pmax or pmin, which have no
# derivative): run the same way on `pmapc.pmap` and on the nested-vmap oracle


TRANSFORMATIONS = ("grad", "vjp", "jvp", "linearize", "vmap", "jit", "remat")


def differentiable(program: Program) -> Program:
    """`program` with float32 arguments, and psum and pmean for pmax and pmin."""
    replacements = {"pmax": "psum", "pmin": "pmean"}

    def replaced(op: Op) -> Op:
        then = replaced(op.then) if op.then is not None else None
        return dataclasses.replace(op, kind=replacements.get(op.kind, op.kind), then=then)

    levels = tuple(
        dataclasses.replace(level, ops=tuple(replaced(op) for op in level.ops))
        for level in program.levels
    )
    args = tuple(dataclasses.replace(arg, dtype="float32") for arg in program.args)
    return dataclasses.replace(program, levels=levels, args=args)


def transformation_inputs(
    program: Program, arrays: list[np.ndarray], out_shape
) -> tuple[np.ndarray, list[np.ndarray]]:
    """(cotangent of the result, tangents of the arguments): small integers, from the seed."""
    rng = np.random.default_rng(program.seed + 1)
    weights = rng.integers(-3, 4, size=out_shape).astype(np.float32)
    tangents = [rng.integers(-3, 4, size=array.shape).astype(np.float32) for array in arrays]
    return weights, tangents


def run_transformed(
    program: Program, transformation: str, arrays, weights, tangents, mapper: Callable = pmapc.pmap
) -> list[np.ndarray]:
    """`transformation` of the program (built with `mapper`) at `arrays`: every value it
    gives, as numpy arrays (the forward result too, where the transformation has one)."""
    fun = build(program, mapper)
    argnums = tuple(range(len(arrays)))

    def loss(*args):
        return (fun(*args) * weights).sum()

    match transformation:
        case "grad":
            values = jax.grad(loss, argnums=argnums)(*arrays)
        case "remat":
            values = jax.grad(jax.checkpoint(loss), argnums=argnums)(*arrays)
        case "vjp":
            out, pull = jax.vjp(fun, *arrays)
            values = (out, *pull(weights))
        case "jvp":
            values = jax.jvp(fun, tuple(arrays), tuple(tangents))
        case "linearize":
            out, derivative = jax.linearize(fun, *arrays)
            values = (out, derivative(*tangents))
        case "vmap":  # a batch of two over a new leading dimension of every argument
            values = (jax.vmap(fun)(*[np.stack([a, 2 * a + 1]) for a in arrays]),)
        case "jit":
            values = (jax.jit(fun)(*arrays),)
        case _:
            raise ValueError(f"unknown transformation '{transformation}'")
    return [np.asarray(value) for value in values]


# ----------------------------------------------------------------------------
# numpy: the program on a mesh of per-device blocks, shape (*level sizes, *block)


def run_numpy(program: Program, arrays: list[np.ndarray]) -> np.ndarray:
    blocks = [
        mesh_blocks(program, arg, array).astype(program.dtype)
        for arg, array in zip(program.args, arrays, strict=True)
    ]
    value = blocks[0] if len(blocks) == 1 else COMBINE[program.combine](*blocks)
    for depth in reversed(range(len(program.levels))):
        level, scope = program.levels[depth], program.levels[: depth + 1]
        for op in level.ops:
            value = numpy_op(op, scope, value)
        value = stack_results(value, depth, level.out_axis)
    return value


def mesh_blocks(program: Program, arg: Arg, array: np.ndarray) -> np.ndarray:
    """A global argument split as the maps split it: every device's block."""
    value = array
    for depth, (level, axis) in enumerate(zip(program.levels, arg.in_axes, strict=True)):
        if axis is None:  # the same block for every index of the level
            value = np.repeat(np.expand_dims(value, depth), level.size, axis=depth)
        else:
            value = np.moveaxis(value, depth + axis, depth)
    return value


def stack_results(value: np.ndarray, depth: int, out_axis: int | None) -> np.ndarray:
    """A map's results, mesh axis `depth`, stacked at `out_axis` (None: one, replicated)."""
    if out_axis is not None:
        return np.moveaxis(value, depth, depth + out_axis)
    first = np.take(value, 0, axis=depth)
    assert (value == np.expand_dims(first, depth)).all(), "out_axes=None on a varying value"
    return first


def numpy_op(op: Op, scope, value: np.ndarray) -> np.ndarray:
    """`op` on every block; mesh axes are named by level number (shadowed names resolved)."""
    if op.then is not None:
        return _numpy_control_flow(op, scope, value)
    mesh = [(str(depth), level.size) for depth, level in enumerate(scope)]
    axes = [str(depth) for depth in resolve(scope, op.axes)] if op.kind != "stack" else []
    match op.kind:
        case "psum" | "pmean" | "pmax" | "pmin":
            return per_group(value, mesh, axes, REDUCERS[op.kind])
        case "all_gather":
            return all_gather_reference(value, mesh, axes, axis=op.dimension, tiled=op.tiled)
        case "psum_scatter":
            return psum_scatter_reference(value, mesh, axes, dimension=op.dimension, tiled=op.tiled)
        case "all_to_all":
            return all_to_all_reference(
                value, mesh, axes, split_axis=op.dimension, concat_axis=op.concat, tiled=op.tiled
            )
        case "ppermute":
            return ppermute_reference(value, mesh, axes, op.perm)
        case "axis_index":
            index = axis_index_reference(mesh, axes)
            index = index.reshape(index.shape + (1,) * (value.ndim - len(scope)))
            return value + index.astype(value.dtype)
        case "stack":
            copies = [value + copy for copy in range(op.count)]
            return np.stack(copies, axis=len(scope) + op.dimension)
    raise ValueError(f"unknown op kind '{op.kind}'")


def _numpy_control_flow(op: Op, scope, value: np.ndarray) -> np.ndarray:
    """A cond or while as nested vmap runs it: every device runs `then` on its value
    (its collective sees every device's), and keeps the result only where its own
    predicate holds; a loop runs until every device is done."""
    assert op.then is not None
    sums = value.reshape((*value.shape[: len(scope)], -1)).sum(-1)
    where = (...,) + (None,) * (value.ndim - len(scope))
    if op.kind == "cond":
        return np.where((sums > 0)[where], numpy_op(op.then, scope, value), value * 2)
    trips = np.abs(sums).astype(np.int64) % 3
    for trip in range(int(trips.max(initial=0))):
        value = np.where((trip < trips)[where], numpy_op(op.then, scope, value), value)
    return value


REDUCERS = {
    "psum": lambda members, _: np.sum(members, axis=0, dtype=members[0].dtype),
    "pmean": lambda members, _: np.sum(members, axis=0, dtype=members[0].dtype) / len(members),
    "pmax": lambda members, _: np.max(members, axis=0),
    "pmin": lambda members, _: np.min(members, axis=0),
}


# ----------------------------------------------------------------------------
# hypothesis strategies


def factorizations(total: int, parts: int) -> list[tuple[int, ...]]:
    """Every ordered way to write `total` as a product of `parts` positive factors."""
    if parts == 1:
        return [(total,)]
    return [
        (factor, *rest)
        for factor in range(1, total + 1)
        if total % factor == 0
        for rest in factorizations(total // factor, parts - 1)
    ]


MESH_SHAPES = [shape for parts in (1, 2, 3) for shape in factorizations(8, parts)]


@st.composite
def programs(draw) -> Program:
    """A random nest over a mesh of 8 devices with 1-2 arguments and 1-4 innermost ops."""
    sizes = draw(st.sampled_from(MESH_SHAPES))
    names = draw(st.lists(st.sampled_from(AXIS_NAMES), min_size=len(sizes), max_size=len(sizes)))
    block = draw(block_shapes())
    args = draw(st.lists(arguments(len(sizes), len(block)), min_size=1, max_size=2))
    stub = Program(
        levels=tuple(
            Level(name, size, False, 0, ()) for name, size in zip(names, sizes, strict=True)
        ),
        block=block,
        args=tuple(args),
        combine="add",
        seed=0,
    )
    return dataclasses.replace(
        stub,
        levels=draw(nest_levels(stub)),
        combine=draw(st.sampled_from(sorted(COMBINE))),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


@st.composite
def transformable_programs(draw, transformation: str) -> Program:
    """A random program made differentiable that nested vmap runs, and batches when
    `transformation` is vmap: one that `transformation` can be checked on against it."""
    program = differentiable(draw(programs()))
    assume(vmap_can_run(program))
    # reverse mode cannot run a loop whose trip count is traced (JAX refuses it)
    assume(transformation not in REVERSE_MODE or not has_loops(program))
    assume(transformation != "vmap" or jax_can_batch(program))
    return program


REVERSE_MODE = ("grad", "vjp", "remat")


def has_loops(program: Program) -> bool:
    return any(op.kind == "while" for level in program.levels for op in level.ops)


def split_budget(examples: int, parts: int) -> int:
    """The examples each of `parts` searches gets, so that together they run about
    `examples` (each is its own test, which pytest-xdist can run beside the others)."""
    return max(1, round(examples / parts))


@st.composite
def block_shapes(draw) -> tuple[int, ...]:
    """The innermost shape of the arguments: rank 0-3, at most 16 elements."""
    dims: list[int] = []
    for _ in range(draw(st.integers(0, 3))):
        room = 16 // math.prod(dims)
        dims.append(draw(st.sampled_from([size for size in (1, 2, 3, 4, 8) if size <= room])))
    return tuple(dims)


@st.composite
def arguments(draw, depth: int, rank: int) -> Arg:
    """An argument mapped at each of `depth` levels over dimension 0, 1 or None."""
    in_axes: list[int | None] = []
    for _ in range(depth):  # innermost first: dimension 1 needs a body value of rank >= 1
        axis = draw(st.sampled_from((0, 1, None) if rank >= 1 else (0, None)))
        rank += axis is not None
        in_axes.insert(0, axis)
    return Arg(draw(st.sampled_from(("float32", "int32"))), tuple(in_axes))


@st.composite
def nest_levels(draw, program: Program) -> tuple[Level, ...]:
    """Each level's ops, out_axes and axis_size, innermost first, tracking the value's shape."""
    levels, shape, varying = list(program.levels), program.block, initial_varying(program)
    for depth in reversed(range(len(levels))):
        scope = levels[: depth + 1]
        min_ops = 1 if depth == len(levels) - 1 else 0
        ops, shape, varying = draw(op_sequences(scope, shape, program.dtype, varying, min_ops))
        choices = [*range(len(shape) + 1), *([None] if depth not in varying else [])]
        out_axis = draw(st.sampled_from(choices))
        mapped = any(arg.in_axes[depth] is not None for arg in program.args)
        levels[depth] = dataclasses.replace(
            levels[depth], ops=ops, out_axis=out_axis, pass_size=not mapped or draw(st.booleans())
        )
        shape = shape if out_axis is None else insert(shape, out_axis, levels[depth].size)
        varying = varying - {depth}
    return tuple(levels)


@st.composite
def op_sequences(draw, scope, shape, dtype, varying, min_size: int):
    """(ops, shape after them, levels the value varies over): 1-4 ops innermost, 0-2 outside."""
    ops: list[Op] = []
    for _ in range(draw(st.integers(min_size, 4 if min_size else 2))):
        for op in draw(collectives(scope, shape, dtype)):
            shape = result_shape(op, shape, group_size(scope, op.axes))
            varying = varying_after(op, varying, scope)
            ops.append(op)
    return tuple(ops), shape, varying


def feasible_kinds(shape: tuple[int, ...], dtype: np.dtype, n: int) -> list[str]:
    """The collectives a value of `shape` can take over a group of `n`, within MAX_BLOCK."""
    kinds = ["psum", "pmax", "pmin", "axis_index", "ppermute"]
    if np.issubdtype(dtype, np.floating):
        kinds.append("pmean")
    grows = math.prod(shape) * n <= MAX_BLOCK
    if grows:
        kinds.append("all_gather")
    if grows or any(size % n == 0 for size in shape):  # may stack a dimension first
        kinds += ["psum_scatter", "all_to_all"]
    return kinds


@st.composite
def collectives(draw, scope, shape, dtype) -> list[Op]:
    """One collective over a random group; `stack` first when it needs a dimension."""
    axes = draw(axis_names(scope))
    n = group_size(scope, axes)
    kind = draw(st.sampled_from(feasible_kinds(shape, dtype, n)))
    if kind in REDUCTIONS and draw(st.integers(0, 3)) == 0:  # around control flow
        return [Op(draw(st.sampled_from(CONTROL_FLOW)), axes, then=Op(kind, axes))]
    if kind in (*REDUCTIONS, "axis_index"):
        return [Op(kind, axes)]
    if kind == "ppermute":
        return [Op(kind, axes, perm=draw(device_permutations(n)))]
    if kind == "all_gather":
        tiled = len(shape) > 0 and draw(st.booleans())
        dimension = draw(st.integers(0, len(shape) - tiled))
        return [Op(kind, axes, dimension=dimension, tiled=tiled)]
    stack, shape, dimension, tiled = draw(split_dimensions(shape, n))
    concat = draw(st.integers(0, len(shape) - 1)) if kind == "all_to_all" else 0
    return [*stack, Op(kind, axes, dimension=dimension, concat=concat, tiled=tiled)]


@st.composite
def axis_names(draw, scope) -> str | tuple[str, ...]:
    """A non-empty subset of the names bound in `scope` in random order; one name maybe bare."""
    order = draw(st.permutations(list(dict.fromkeys(level.name for level in scope))))
    chosen = tuple(order[: draw(st.integers(1, len(order)))])
    return chosen[0] if len(chosen) == 1 and draw(st.booleans()) else chosen


@st.composite
def device_permutations(draw, n: int) -> tuple[tuple[int, int], ...]:
    """(source, target) pairs of a permutation of a group of `n`, or of part of it."""
    targets = draw(st.permutations(range(n)))
    partial = draw(st.booleans())
    sources = sorted(draw(st.sets(st.integers(0, n - 1), max_size=n))) if partial else range(n)
    return tuple(draw(st.permutations([(source, targets[source]) for source in sources])))


@st.composite
def split_dimensions(draw, shape: tuple[int, ...], n: int):
    """(stack ops, shape, dimension, tiled): a dimension that a group of `n` can split."""
    tiled = draw(st.booleans())
    dims = [d for d, size in enumerate(shape) if (size % n == 0 if tiled else size == n)]
    if math.prod(shape) * n <= MAX_BLOCK and (not dims or draw(st.integers(0, 3)) == 0):
        dimension = draw(st.integers(0, len(shape)))
        stack = Op("stack", dimension=dimension, count=n)
        return [stack], insert(shape, dimension, n), dimension, tiled
    if not dims:
        tiled = True
        dims = [d for d, size in enumerate(shape) if size % n == 0]
    return [], shape, draw(st.sampled_from(dims)), tiled


def folded(count: int, function: Callable, *args):
    """`function(*args)` with every outermost map folded onto the first `count` devices
    (`pmapc.fold_onto`)."""
    with pmapc.fold_onto(jax.devices()[:count]):
        return function(*args)
