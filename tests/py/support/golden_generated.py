"""Generated nested-pmap programs whose results JAX 0.4.30's real `jax.pmap` recorded.

`PROGRAMS` is a deterministic list of `golden_programs.Program`s, each named
`{family}/{kind}/{mesh}/axes={names}/{variant}/{dtype}[/grad]`, run by
`golden_programs.evaluate` under both JAX versions (`jax.pmap` in 0.4.30 by
`scripts/record_generated_goldens.py`, `pmapc.pmap` by
`test_golden_generated.py`). Families (the first part of the name):

- `inner`: every collective kind and variant in the innermost body, over every
  non-empty ordered tuple of the bound axes, on meshes 8, 2x2, 2x4, 4x2, 2x2x2.
- `outer`: a collective in an outer body, after the inner maps return (their
  body psums over the inner axes first), over every ordered tuple bound there.
- `inout`: `in_axes` None (a broadcast operand) or 1, `out_axes` 1, and the
  outermost map's `out_axes=None` after a psum over its axis.
- `dtype`: bf16, int32 and bool operands; `weak`: Python scalars in the body.
- `groups`: `axis_index_groups` over one axis and over tuples, and the groups
  JAX refuses.
- `siblings`: two inner maps of different names (and sizes) in one outer map.
- `errors`: programs JAX 0.4.30 refuses (the recorded exception's builtin class).

A fraction of the programs of most families run in grad mode (name ending `/grad`):
gradients through the collectives, with and without groups. The collective calls
are built in `golden_ops.py`; `golden_store.py` is the golden file's format.

Left out because JAX 0.4.30 fails on them for reasons that are not semantics:
`out_axes=None` on a non-outermost map (a TypeError in its lowering), reverse
mode through `out_axes=None`, gradients of pmax/pmin (no rule), `pmean` with
groups of unequal sizes (it divides by the first group's size), a ppermute
index out of range (an IndexError) and an empty perm (aborts the process).

This module uses only APIs present in both JAX versions and does not import pmapc.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import jax.numpy as jnp
import numpy as np
from jax import lax

from support.golden_ops import (
    BLOCK,
    Op,
    all_gather,
    axis_arg,
    axis_index,
    core_ops,
    differentiable_ops,
    error_ops,
    every_op,
    grouped_ops,
    join_label,
    ppermute,
    psum_scatter,
    reduction,
    shift_perm,
    weak_ops,
)
from support.golden_programs import Mesh, Program, nest

MESHES: dict[str, Mesh] = {
    "8": (("i", 8),),
    "2x2": (("data", 2), ("model", 2)),
    "2x4": (("data", 2), ("model", 4)),
    "4x2": (("data", 4), ("model", 2)),
    "2x2x2": (("a", 2), ("b", 2), ("c", 2)),
}
DTYPES = {"f32": np.float32, "bf16": jnp.bfloat16, "i32": np.int32, "bool": np.bool_}


# ----------------------------------------------------------------------------
# Inputs and names


def draw(rng: np.random.Generator, dtype: str, shape: Sequence[int]) -> np.ndarray:
    """Small integers (bf16 smaller still), so every sum and mean here is exact."""
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    bound = 4 if dtype == "bf16" else 8
    return rng.integers(-bound, bound + 1, size=shape).astype(DTYPES[dtype])


def drawn(dtype: str, *shapes: Sequence[int]) -> Callable:
    """`Program.inputs`: one array of `dtype` per shape."""
    return lambda rng: tuple(draw(rng, dtype, shape) for shape in shapes)


def sizes(mesh: Mesh) -> tuple[int, ...]:
    return tuple(size for _, size in mesh)


def names(mesh: Mesh) -> tuple[str, ...]:
    return tuple(name for name, _ in mesh)


def group_size(mesh: Mesh, axes: Sequence[str]) -> int:
    return math.prod(dict(mesh)[axis] for axis in axes)


def ordered_tuples(axes: Sequence[str]) -> list[tuple[str, ...]]:
    """Every non-empty ordered subset of `axes`: ('a',), ..., ('a', 'b'), ('b', 'a'), ..."""
    return [t for r in range(1, len(axes) + 1) for t in itertools.permutations(axes, r)]


def program_name(
    family: str, op_kind: str, mesh: str, axes, variant: str, dtype: str, mode: str = "value"
) -> str:
    axes_part = f"axes={','.join(axes)}" if axes else ""
    return join_label(
        family, op_kind, mesh, axes_part, variant, dtype, "" if mode == "value" else mode
    )


# ----------------------------------------------------------------------------
# Program builders


def innermost(
    family: str, mesh_name: str, axes, op: Op, dtype: str = "f32", mode: str = "value"
) -> Program:
    """`op` in the innermost body of the mesh's nest; in grad mode it is applied to x*x."""
    mesh = MESHES[mesh_name]

    def body(x):
        return op.apply(x if mode == "value" else x * x)

    return Program(
        program_name(family, op.kind, mesh_name, axes, op.variant, dtype, mode),
        lambda pmap: nest(pmap, body, mesh),
        drawn(dtype, sizes(mesh) + op.block),
        mode,
        jax_gradient_wrong=op.jax_gradient_wrong and mode == "grad",
    )


def in_outer_body(mesh_name: str, level: int, axes, op: Op, mode: str = "value") -> Program:
    """`op` in the body of the `level` outermost maps, on the stacked result of the inner
    maps (whose body adds its psum over the inner axes), reshaped to `op.block`."""
    mesh = MESHES[mesh_name]
    outer, inner = mesh[:level], mesh[level:]
    rows = math.prod(op.block) // math.prod(sizes(inner))

    def build(pmap):
        inner_map = nest(pmap, lambda t: t + lax.psum(t, axis_arg(names(inner))), inner)

        def body(x):
            stacked = inner_map(x).reshape(op.block)
            return op.apply(stacked if mode == "value" else stacked * stacked)

        return nest(pmap, body, outer)

    where = f"{mesh_name}/body={','.join(names(outer))}"
    return Program(
        program_name("outer", op.kind, where, axes, op.variant, "f32", mode),
        build,
        drawn("f32", (*sizes(mesh), rows)),
        mode,
        jax_gradient_wrong=op.jax_gradient_wrong and mode == "grad",
    )


# ----------------------------------------------------------------------------
# Families


def inner_family() -> list[Program]:
    programs = [
        innermost("inner", mesh_name, axes, op)
        for mesh_name, mesh in MESHES.items()
        for axes in ordered_tuples(names(mesh))
        for op in every_op(axes, group_size(mesh, axes))
    ]
    for mesh_name, axes in GRAD_AXES:
        n = group_size(MESHES[mesh_name], axes)
        programs += [
            innermost("inner", mesh_name, axes, op, mode="grad")
            for op in differentiable_ops(axes, n)
        ]
    return programs


GRAD_AXES = (
    ("8", ("i",)),
    ("2x4", ("model", "data")),
    ("4x2", ("data",)),
    ("2x2x2", ("b", "c", "a")),
)


def outer_family() -> list[Program]:
    programs = []
    for mesh_name, mesh in MESHES.items():
        for level in range(1, len(mesh)):
            for axes in ordered_tuples(names(mesh[:level])):
                n = group_size(mesh, axes)
                programs += [
                    in_outer_body(mesh_name, level, axes, op)
                    for op in [*core_ops(axes, n), axis_index(axes)]
                ]
    for mesh_name, level, axes in (("2x4", 1, ("data",)), ("2x2x2", 2, ("b", "a"))):
        n = group_size(MESHES[mesh_name], axes)
        programs += [
            in_outer_body(mesh_name, level, axes, op, mode="grad")
            for op in (
                reduction("psum", axes),
                all_gather(axes, 0, False),
                psum_scatter(axes, n, 1, True),
                ppermute(axes, n, "shift"),
            )
        ]
    return programs


def inout_variants(depth: int) -> list[tuple[str, list, list | None, list]]:
    """(label, x's in_axes, w's in_axes or None for no w, out_axes), per level outermost
    first. JAX 0.4.30 cannot lower an inner map's `out_axes` other than 0 (nor reverse
    mode through an inner `in_axes` other than 0, whose transpose has such out_axes)."""
    same = [0] * depth
    if depth == 1:
        return [
            ("in_axes=0,None", same, [None], same),
            ("in_axes=1", [1], None, same),
            ("out_axes=1", same, None, [1]),
        ]
    rest = [0] * (depth - 1)
    return [
        ("in_axes=0,None/every-level", same, [None] * depth, same),
        ("in_axes=1/outermost", [1, *rest], None, same),
        ("out_axes=1/outermost", same, None, [1, *rest]),
        ("in_axes=0,None/outermost", same, [None, *rest], same),
        ("in_axes=0,None/innermost", same, [*rest, None], same),
        ("in_axes=1/every-level", [1] * depth, None, same),
        ("in_axes=1/innermost", [*rest, 1], None, same),
    ]


def mapped_shape(mesh: Mesh, in_axes: Sequence[int | None], block) -> tuple[int, ...]:
    """The global shape whose block, after every level takes its `in_axes`, is `block`."""
    shape = list(block)
    for (_, size), axis in reversed(list(zip(mesh, in_axes))):
        if axis is not None:
            shape.insert(axis, size)
    return tuple(shape)


def inout_body(mesh: Mesh) -> Callable:
    """A psum over every axis (innermost first) and a tiled all_gather over the innermost."""
    every, innermost_axis = axis_arg(names(mesh)[::-1]), names(mesh)[-1]

    def body(x, *w):
        product, total = (x * w[0], x + w[0]) if w else (x, x)
        return (lax.psum(product, every), lax.all_gather(total, innermost_axis, axis=1, tiled=True))

    return body


def inout_program(mesh_name: str, variant, mode: str = "value") -> Program:
    label, x_axes, w_axes, out_axes = variant
    mesh = MESHES[mesh_name]
    arguments = [x_axes] if w_axes is None else [x_axes, w_axes]

    def build(pmap):
        fun = inout_body(mesh)
        for level in reversed(range(len(mesh))):
            in_axes = tuple(axes[level] for axes in arguments)
            fun = pmap(fun, mesh[level][0], in_axes=in_axes, out_axes=out_axes[level])
        return fun

    shapes = [mapped_shape(mesh, axes, BLOCK) for axes in arguments]
    return Program(
        program_name("inout", "psum+all_gather", mesh_name, (), label, "f32", mode),
        build,
        drawn("f32", *shapes),
        mode,
    )


def replicated_output(mesh_name: str) -> Program:
    """The outermost map's `out_axes=None`, after a psum over its axis."""
    mesh = MESHES[mesh_name]
    outer_axis, inner = mesh[0][0], mesh[1:]

    def build(pmap):
        inner_map = (
            nest(pmap, lambda t: lax.psum(t, axis_arg(names(inner))), inner)
            if inner
            else (lambda t: t)
        )
        return pmap(lambda x: lax.psum(inner_map(x) * 2, outer_axis), outer_axis, out_axes=None)

    label = "out_axes=None/outermost" if inner else "out_axes=None"
    return Program(
        program_name("inout", "psum", mesh_name, (), label, "f32"),
        build,
        drawn("f32", sizes(mesh) + BLOCK),
    )


def inout_family() -> list[Program]:
    programs = []
    for mesh_name, mesh in MESHES.items():
        programs += [inout_program(mesh_name, v) for v in inout_variants(len(mesh))]
        programs.append(replicated_output(mesh_name))
    for mesh_name in ("2x4", "2x2x2"):
        programs += [
            inout_program(mesh_name, v, mode="grad")
            for v in inout_variants(len(MESHES[mesh_name]))[:3]
        ]
    return programs


DTYPE_AXES = (("2x4", ("model", "data")), ("2x2x2", ("c", "a")))


def dtype_family() -> list[Program]:
    programs = [
        innermost("dtype", mesh_name, axes, op, dtype)
        for dtype in ("bf16", "i32", "bool")
        for mesh_name, axes in DTYPE_AXES
        for op in core_ops(axes, group_size(MESHES[mesh_name], axes))
    ]
    axes = ("model", "data")
    programs += [
        innermost("dtype", "2x4", axes, op, "bf16", mode="grad")
        for op in (
            reduction("psum", axes),
            all_gather(axes, 1, True),
            psum_scatter(axes, 8, 0, False),
            ppermute(axes, 8, "shift"),
        )
    ]
    return programs


def weak_family() -> list[Program]:
    return [
        innermost("weak", mesh_name, axes, op, dtype)
        for mesh_name, axes in (("2x4", ("model", "data")), ("2x2x2", ("a", "c")))
        for dtype in DTYPES
        for op in weak_ops(axes)
    ]


GROUPS = (  # (mesh, axes, groups): indices along the axes in the order written
    ("8", ("i",), ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("8", ("i",), ((0, 5), (1, 4), (2, 7), (3, 6))),
    ("2x4", ("model",), ((0, 1), (2, 3))),
    ("2x4", ("model",), ((0, 2), (1, 3))),
    ("2x4", ("data",), ((0,), (1,))),
    ("2x4", ("data", "model"), ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("2x4", ("model", "data"), ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("2x4", ("model", "data"), ((0, 3, 4, 7), (1, 2, 5, 6))),
    ("4x2", ("data",), ((0, 3), (1, 2))),
    ("2x2x2", ("b", "c"), ((0, 3), (1, 2))),
    ("2x2x2", ("c", "a", "b"), ((0, 1, 2, 3), (4, 5, 6, 7))),
    ("2x2x2", ("a", "b", "c"), ((0, 2, 4, 6), (1, 3, 5, 7))),
)
UNEVEN_GROUPS = (
    ("2x4", ("model",), ((0, 1, 2), (3,))),
    ("2x4", ("model", "data"), ((0, 1, 2, 3, 4, 5), (6, 7))),
)
BAD_GROUPS = (  # JAX refuses these: not a partition of the indices. JAX 0.4.30 fails
    # inside XLA (a RuntimeError) on a partition of only some of the indices of a tuple
    ("2x4", ("model",), ((0, 1),)),
    ("2x4", ("model",), ((0, 1), (1, 2))),
    ("2x4", ("model",), ((0, 1), (2, 4))),
    ("2x4", ("data", "model"), ((0, 1, 2, 3), (3, 4, 5, 6))),
)


def groups_family() -> list[Program]:
    programs = [
        innermost("groups", mesh_name, axes, op)
        for mesh_name, axes, groups in GROUPS
        for op in grouped_ops(axes, groups)
    ]
    for mesh_name, axes, groups in UNEVEN_GROUPS:  # all-reduces take them, the rest refuse
        ops = grouped_ops(axes, groups)
        programs += [
            innermost("groups", mesh_name, axes, op) for op in ops if op.kind != "pmean"
        ]  # JAX divides by the first group's size
    for mesh_name, axes, groups in BAD_GROUPS:
        ops = grouped_ops(axes, groups)
        programs += [innermost("groups", mesh_name, axes, op) for op in ops[::3]]
    for mesh_name, axes, groups in (GROUPS[3], GROUPS[6]):
        ops = grouped_ops(axes, groups)
        programs += [
            innermost("groups", mesh_name, axes, op, mode="grad")
            for op in (ops[0], ops[1], ops[5], ops[6], ops[9])
        ]
    return programs


# Siblings: one outer map over 'data' (2) calls two inner nests side by side.
SIBLINGS: dict[str, tuple[Mesh, ...]] = {
    "a4+b2": ((("a", 4),), (("b", 2),)),
    "a4+b4": ((("a", 4),), (("b", 4),)),
    "a2+b4": ((("a", 2),), (("b", 4),)),
    "a4+b2c2": ((("a", 4),), (("b", 2), ("c", 2))),
}
SIBLING_BLOCK = (8,)  # divisible by every group size: tiled scatters and all_to_alls fit
D = ("data",)


def _recipes() -> dict[str, Callable]:
    """Innermost bodies of a sibling, given its own axes `own` (size n) and the block t."""

    def shifted(axes, n):
        return lambda t: lax.ppermute(t, axes, shift_perm(n))

    return {
        "psum_own": lambda own, n: lambda t: lax.psum(t, axis_arg(own)),
        "psum_data": lambda own, n: lambda t: lax.psum(t, "data"),
        "psum_own_data": lambda own, n: lambda t: lax.psum(t, own + D),
        "psum_data_own": lambda own, n: lambda t: lax.psum(t, D + own),
        "pmean_data_own": lambda own, n: lambda t: lax.pmean(t, D + own),
        "pmax_own_data": lambda own, n: lambda t: lax.pmax(t, own + D),
        "pmin_own": lambda own, n: lambda t: lax.pmin(t, axis_arg(own)),
        "all_gather_own": lambda own, n: lambda t: lax.all_gather(t, axis_arg(own)),
        "all_gather_own_data": lambda own, n: lambda t: lax.all_gather(t, own + D),
        "all_gather_data_own_tiled": lambda own, n: (
            lambda t: lax.all_gather(t, D + own, tiled=True)
        ),
        "axis_index_own": lambda own, n: lambda t: t + 100 * lax.axis_index(axis_arg(own)),
        "axis_index_data_own": lambda own, n: lambda t: t + 100 * lax.axis_index(D + own),
        "axis_index_own_data": lambda own, n: lambda t: t + 100 * lax.axis_index(own + D),
        "ppermute_own_shift": lambda own, n: shifted(axis_arg(own), n),
        "ppermute_data_own_shift": lambda own, n: shifted(D + own, 2 * n),
        "psum_scatter_own_data_tiled": lambda own, n: (
            lambda t: lax.psum_scatter(t, own + D, tiled=True)
        ),
        "all_to_all_data_own_tiled": lambda own, n: (
            lambda t: lax.all_to_all(t, D + own, 0, 0, tiled=True)
        ),
    }


RECIPES = _recipes()
THEN = {
    "": None,
    "then_psum_data": lambda y: lax.psum(y, "data"),
    "then_all_gather_data": lambda y: lax.all_gather(y, "data", axis=1),
}


def siblings_program(config: str, recipe: str, then: str = "", mode: str = "value") -> Program:
    """Each sibling nest runs `recipe` over its own axes; the outer body then runs `then`."""
    branches = SIBLINGS[config]

    def build(pmap):
        def outer(*xs):
            outs = []
            for branch, x in zip(branches, xs):
                own, n = names(branch), math.prod(sizes(branch))
                inner = RECIPES[recipe](own, n)
                body = inner if mode == "value" else (lambda t, inner=inner: inner(t * t))
                outs.append(nest(pmap, body, branch)(x))
            return tuple(outs) if not then else tuple(THEN[then](y) for y in outs)

        return pmap(outer, "data")

    shapes = [(2, *sizes(branch), *SIBLING_BLOCK) for branch in branches]
    name = program_name(
        "siblings", join_label(recipe, then), f"data2/{config}", (), "", "f32", mode
    )
    return Program(name, build, drawn("f32", *shapes), mode)


def siblings_family() -> list[Program]:
    programs = [siblings_program(config, recipe) for config in SIBLINGS for recipe in RECIPES]
    programs += [
        siblings_program(config, "psum_own", then) for config in SIBLINGS for then in THEN if then
    ]
    programs += [
        siblings_program(config, recipe, mode="grad")
        for config, recipe in (
            ("a4+b2", "psum_own_data"),
            ("a4+b2c2", "all_gather_data_own_tiled"),
            ("a4+b2c2", "ppermute_data_own_shift"),
        )
    ]
    return programs


def inner_axis_in_outer_body() -> Program:
    """A psum over the inner axis in the outer body, where only 'data' is bound."""

    def build(pmap):
        inner = pmap(lambda t: t * 2, "model")
        return pmap(lambda x: lax.psum(inner(x), "model"), "data")

    return Program(
        program_name("errors", "psum", "2x4", ("model",), "unbound_in_outer_body", "f32"),
        build,
        drawn("f32", (2, 4, *BLOCK)),
    )


def errors_family() -> list[Program]:
    return [*(innermost("errors", "2x4", (), op) for op in error_ops()), inner_axis_in_outer_body()]


def _programs() -> list[Program]:
    programs = [
        *inner_family(),
        *outer_family(),
        *inout_family(),
        *dtype_family(),
        *weak_family(),
        *groups_family(),
        *siblings_family(),
        *errors_family(),
    ]
    repeated = {p.name for p in programs if [q.name for q in programs].count(p.name) > 1}
    assert not repeated, f"program names must be unique: {sorted(repeated)}"
    return programs


PROGRAMS: list[Program] = _programs()


def family_of(program: Program) -> str:
    return program.name.split("/")[0]
