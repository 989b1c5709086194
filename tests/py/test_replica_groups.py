"""Replica groups named by mesh axes (to-partitions' default) and as device ids.

Each collective's groups are read back from the module XLA compiles, in either
form (`hlo.read_groups`), and compared with the numpy layout of JAX 0.4's
groups (`oracle.groups`); XLA's HLO names the axes of the programs pmapc
compiles (`pmapc.lower`), while the program embedded in a `jax.jit` keeps
device ids (compiler/embed.py says why); every form gives the numbers numpy
and nested `jax.vmap` give (`oracle.check_against_vmap` runs every oracle
program in each form, too).
"""

from __future__ import annotations

import pathlib
import sys

import jax
import numpy as np
import pytest
from jax import lax
from support.oracle import (
    all_gather_reference,
    all_to_all_reference,
    assert_tree_equal,
    check_against_vmap,
    groups,
    per_group,
    ppermute_reference,
    psum_scatter_reference,
    small_ints,
    vmap_mapper,
)

import pmapc
from pmapc import hlo, ir
from pmapc.passes.to_partitions import DEFAULT_GROUP_FORM

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"
MESH = (("data", 2), ("model", 4))
COLLECTIVE_OPS = ("stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter")
COLLECTIVE_OPS += ("stablehlo.all_to_all", "stablehlo.collective_permute")


def every_kind(mapper):
    """One collective of each kind that has groups, over one axis, both, both in the
    order the program names them, and split by axis_index_groups."""

    def columns(y):
        total = lax.psum(y, "model")
        stacked = lax.all_gather(y, ("model", "data"), tiled=True)
        scattered = lax.psum_scatter(y, "data", tiled=True)
        swapped = lax.all_to_all(y, "model", 0, 0, tiled=True)
        halves = lax.psum(y, "model", axis_index_groups=[[0, 1], [2, 3]])
        shifted = lax.ppermute(y, "model", [(i, (i + 1) % 4) for i in range(4)])
        return total, stacked, scattered, swapped, halves, shifted

    return mapper(mapper(columns, "model"), "data")


def collectives(lowered) -> list[tuple[str, np.ndarray, tuple[str, ...] | None]]:
    """(op name, groups as device ids, the mesh axes named) of each collective of the
    module XLA compiles, in op order; a collective_permute's pairs, no axes."""
    module = lowered.compiler_ir()
    meshes = hlo.meshes_of(module)
    found = []
    for op in ir.walk(ir.functions(module)["main"]):
        if op.name == "stablehlo.collective_permute":
            pairs = ir.dense_int_matrix(op.attributes["source_target_pairs"])
            found.append((op.name, pairs, None))
        elif op.name in COLLECTIVE_OPS:
            groups = hlo.read_groups(op.attributes["replica_groups"], meshes)
            found.append((op.name, groups.matrix(), groups.axes))
    return found


X = np.arange(2 * 4 * 8, dtype=np.float32).reshape(2, 4, 8)
EXPECTED_AXES = [
    ("stablehlo.all_reduce", ("model",)),
    ("stablehlo.all_gather", ("model", "data")),
    ("stablehlo.reduce_scatter", ("data",)),
    ("stablehlo.all_to_all", ("model",)),
]


def test_named_is_the_default():
    assert DEFAULT_GROUP_FORM == "named"  # every jaxlib pmapc admits has the form


def test_groups_name_the_axes_each_collective_is_over_in_program_order():
    found = collectives(pmapc.lower(every_kind(pmapc.pmap), X))
    named = [(name, axes) for name, _, axes in found if axes is not None]
    assert named == EXPECTED_AXES
    for _, matrix, axes in found:
        if axes is not None:
            np.testing.assert_array_equal(matrix, groups(MESH, axes))
    split = [matrix for name, matrix, axes in found if name.endswith("all_reduce") and not axes]
    assert len(split) == 1  # the index groups stay device ids, as JAX keeps them
    np.testing.assert_array_equal(split[0], [[0, 1], [2, 3], [4, 5], [6, 7]])


def test_dense_groups_are_the_same_devices():
    named = collectives(pmapc.lower(every_kind(pmapc.pmap), X))
    dense = collectives(pmapc.lower(every_kind(pmapc.pmap), X, replica_groups="dense"))
    assert all(axes is None for _, _, axes in dense)
    assert [name for name, _, _ in named] == [name for name, _, _ in dense]
    for (_, expected, _), (_, actual, _) in zip(named, dense, strict=True):
        np.testing.assert_array_equal(actual, expected)


def every_kind_reference(x: np.ndarray) -> tuple:
    """What `every_kind` computes, from numpy and the group layout of JAX 0.4."""
    total = per_group(x, MESH, ("model",), lambda members, _: sum(members))
    pairs = x.reshape(2, 2, 2, 8).sum(2, keepdims=True)  # index groups [0, 1], [2, 3]
    halves = np.broadcast_to(pairs, (2, 2, 2, 8)).reshape(x.shape)
    return (
        total,
        all_gather_reference(x, MESH, ("model", "data"), tiled=True),
        psum_scatter_reference(x, MESH, ("data",), tiled=True),
        all_to_all_reference(x, MESH, ("model",), split_axis=0, concat_axis=0, tiled=True),
        halves,
        ppermute_reference(x, MESH, ("model",), [(i, (i + 1) % 4) for i in range(4)]),
    )


@pytest.mark.parametrize("form", ["named", "dense", "jit"])
def test_every_form_computes_what_numpy_does(form):
    program = every_kind(pmapc.pmap)
    if form == "jit":  # the program embedded in JAX's module (groups as device ids)
        result = program(X)
    else:
        result = pmapc.lower(program, X, replica_groups=form).compile()(X)
    actual = jax.tree_util.tree_map(np.asarray, result)
    assert_tree_equal(actual, every_kind_reference(X))


def test_xla_hlo_names_the_mesh_axes():
    lines = [
        line
        for line in pmapc.lower(every_kind(pmapc.pmap), X).as_text("hlo").splitlines()
        if "replica_groups=" in line
    ]
    for kind, axes in [
        ("all-reduce(", "{'model'}"),
        ("all-gather(", "{'model','data'}"),
        ("reduce-scatter(", "{'data'}"),
        ("all-to-all(", "{'model'}"),
    ]:
        assert any(kind in line and f"mesh['data'=2,'model'=4] {axes}" in line for line in lines), (
            kind
        )


def test_dense_hlo_lists_devices():
    hlo_text = pmapc.lower(every_kind(pmapc.pmap), X, replica_groups="dense").as_text("hlo")
    assert "mesh[" not in hlo_text and "replica_groups={{0,1,2,3},{4,5,6,7}}" in hlo_text


def test_replica_form_lists_devices():
    found = collectives(pmapc.lower(every_kind(pmapc.pmap), X, target="replicas"))
    assert found and all(axes is None for _, _, axes in found)


def siblings(mapper):
    """Maps of sizes 4 and 2 side by side under 'data': the mesh data=2 x b=2 x a=2."""

    def outer(x):
        wide = mapper(lambda y: lax.psum(y, "a"), "a")(x)
        narrow = mapper(lambda y: lax.psum(y, ("data", "b")), "b")(x[:2])
        return wide, narrow

    return mapper(outer, "data")


def test_sibling_maps_name_the_axes_of_the_refined_mesh():
    x = small_ints(np.random.default_rng(0), (2, 4, 3))
    found = collectives(pmapc.lower(siblings(pmapc.pmap), x))
    mesh = hlo.meshes_of(pmapc.lower(siblings(pmapc.pmap), x).compiler_ir())
    (devices,) = mesh.values()
    assert devices.mesh.axis_names == ("data", "b", "a")
    assert {axes for _, _, axes in found if axes} == {("b", "a"), ("data", "b")}
    check_against_vmap(siblings, x)


def test_an_axis_name_xla_cannot_read_keeps_device_ids():
    """A tuple axis name's label holds double quotes, which jaxlib 0.10.2's XLA cannot
    read in mesh-axis groups: there the module keeps device ids; later it names them."""
    name = ("a", "b")

    def build(mapper):
        return mapper(mapper(lambda y: lax.psum(y, (name,)), name), "rows")

    x = small_ints(np.random.default_rng(1), (2, 4, 3))
    found = collectives(pmapc.lower(build(pmapc.pmap), x))
    named = [axes for _, _, axes in found if axes]
    assert bool(named) == ir.mesh_axis_name_readable('tuple:("a", "b")')
    expected = build(vmap_mapper)(x)
    assert_tree_equal(np.asarray(build(pmapc.pmap)(x)), expected)
    assert_tree_equal(np.asarray(pmapc.lower(build(pmapc.pmap), x).compile()(x)), expected)


def test_the_program_in_a_jit_keeps_device_ids_and_no_mesh_of_its_own():
    """Two maps in one `jax.jit`: JAX's module gets no `sdy.mesh` of pmapc's (JAX
    would merge it with its own and misplace a multi-process call's outputs)."""
    first = every_kind(pmapc.pmap)
    second = pmapc.pmap(pmapc.pmap(lambda y: lax.psum(y, ("data", "model")), "model"), "data")

    @jax.jit
    def both(x):
        return first(x)[0], second(x)

    module = ir.parse_module(both.lower(X).as_text(), ir.make_context())
    groups = [
        hlo.read_groups(op.attributes["replica_groups"], hlo.meshes_of(module)).axes
        for function in ir.functions(module).values()
        for op in ir.walk(function)
        if op.name in COLLECTIVE_OPS and "replica_groups" in op.attributes
    ]
    assert groups and all(axes is None for axes in groups)
    assert "mesh[" not in both.lower(X).as_text("hlo")
    total, summed = both(X)
    np.testing.assert_array_equal(np.asarray(total), every_kind_reference(X)[0])
    np.testing.assert_array_equal(np.asarray(summed), np.broadcast_to(X.sum((0, 1)), X.shape))


@pytest.mark.parametrize("form", ["named", "dense"])
def test_the_quickstart_program_in_either_form(form):
    """README's program: its HLO names `data` and `model` on every all-reduce (or lists
    devices), and it computes what numpy does either way."""
    sys.path.insert(0, str(EXAMPLES))
    from quickstart import step

    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    lowered = pmapc.lower(step, x, replica_groups=form)
    reduces = [line for line in lowered.as_text("hlo").splitlines() if " all-reduce(" in line]
    assert len(reduces) == 3
    named = [line for line in reduces if "replica_groups=mesh['data'=2,'model'=4]" in line]
    assert len(named) == (3 if form == "named" else 0)
    scaled = x * np.arange(1, 5, dtype=np.float32)[None, :, None]
    expected = np.broadcast_to(scaled.sum(axis=(0, 1)), (2, 4, 3))
    for result in lowered.compile()(x):
        np.testing.assert_allclose(np.asarray(result), expected)
