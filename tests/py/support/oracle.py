"""The oracles for `pmapc.pmap` tests: nested `jax.vmap`, and numpy for what vmap cannot run.

Nested named `jax.vmap` has JAX 0.4 nested-pmap collective semantics: the device at
mesh coordinates (d, m) is vmap index (d, m). A test writes its program once as a
function of a *mapper* (`pmapc.pmap` or `vmap_mapper`), builds it both ways and compares.

vmap cannot run `all_gather`, `psum_scatter` or `ppermute` over a tuple of axes (nor a
`ppermute` that leaves a device without a source); the numpy references here compute
those from the per-device blocks, with groups laid out as JAX 0.4 does: the devices that
agree on every other axis, ordered row-major over the named axes in the order written.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import numpy as np
from jax import lax

import pmapc  # conftest has set the CPU device count by the time a test imports this

Mesh = Sequence[tuple[str, int]]  # (axis name, size), outermost first


def vmap_mapper(fun: Callable, axis_name: str, *, in_axes=0, out_axes=0) -> Callable:
    """`jax.vmap` with `pmap`'s call signature: the oracle's mapper."""
    return jax.vmap(fun, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)


def nest(mapper: Callable, body: Callable, names: Sequence[str], **kwargs) -> Callable:
    """`body` mapped over `names`, outermost first; `kwargs` go to every level."""
    fun = body
    for name in reversed(names):
        fun = mapper(fun, name, **kwargs)
    return fun


def assert_tree_equal(actual, expected, *, rtol: float = 1e-6, atol: float = 1e-6) -> None:
    """Same tree structure, shapes and dtypes; integers and bools exact, floats close."""
    actual_leaves, actual_tree = jax.tree_util.tree_flatten(actual)
    expected_leaves, expected_tree = jax.tree_util.tree_flatten(expected)
    assert actual_tree == expected_tree, f"tree {actual_tree} != expected {expected_tree}"
    for index, (got, want) in enumerate(zip(actual_leaves, expected_leaves, strict=True)):
        got, want = np.asarray(got), np.asarray(want)
        where = f"leaf {index} of {expected_tree}"
        assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
        if np.issubdtype(want.dtype, np.inexact):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(got, want, err_msg=where)


def small_ints(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    """Integer-valued data: sums and means of it are exact in float32, whatever the order."""
    return rng.integers(-8, 9, size=shape).astype(dtype)


# ----------------------------------------------------------------------------
# numpy references over a mesh of per-device blocks


def groups(mesh: Mesh, axes: Sequence[str]) -> np.ndarray:
    """Linear device ids, shape (number of groups, group size), each row in group order."""
    names = [name for name, _ in mesh]
    sizes = [size for _, size in mesh]
    named = [names.index(axis) for axis in axes]
    others = [p for p in range(len(mesh)) if p not in named]
    ids = np.arange(int(np.prod(sizes))).reshape(sizes).transpose(others + named)
    return ids.reshape(-1, int(np.prod([sizes[p] for p in named])))


def per_group(
    blocks: np.ndarray,
    mesh: Mesh,
    axes: Sequence[str],
    combine: Callable[[list[np.ndarray], int], np.ndarray],
) -> np.ndarray:
    """Apply `combine(group's blocks, position)` on every device of a mesh of blocks.

    `blocks` has shape (*mesh sizes, *block); the result has shape (*mesh sizes, *result).
    """
    sizes = tuple(size for _, size in mesh)
    flat = blocks.reshape(int(np.prod(sizes)), *blocks.shape[len(sizes) :])
    results: dict[int, np.ndarray] = {}
    for group in groups(mesh, axes):
        members = [flat[device] for device in group]
        for position, device in enumerate(group):
            results[int(device)] = combine(members, position)
    stacked = np.stack([results[device] for device in range(len(flat))])
    return stacked.reshape(*sizes, *stacked.shape[1:])


def all_gather_reference(blocks, mesh, axes, *, axis=0, tiled=False) -> np.ndarray:
    def combine(members, _position):
        return np.concatenate(members, axis) if tiled else np.stack(members, axis)

    return per_group(blocks, mesh, axes, combine)


def psum_scatter_reference(blocks, mesh, axes, *, dimension=0, tiled=False) -> np.ndarray:
    def combine(members, position):
        total = np.sum(members, axis=0, dtype=members[0].dtype)
        if tiled:
            return np.split(total, len(members), axis=dimension)[position]
        return np.take(total, position, axis=dimension)

    return per_group(blocks, mesh, axes, combine)


def all_to_all_reference(blocks, mesh, axes, *, split_axis, concat_axis, tiled=False) -> np.ndarray:
    def combine(members, position):
        if tiled:
            chunks = [np.split(m, len(members), axis=split_axis)[position] for m in members]
            return np.concatenate(chunks, axis=concat_axis)
        return np.stack([np.take(m, position, axis=split_axis) for m in members], concat_axis)

    return per_group(blocks, mesh, axes, combine)


def ppermute_reference(blocks, mesh, axes, perm) -> np.ndarray:
    # JAX numbers a ppermute's group in mesh order whatever the order of `axes`
    # (its lowering sorts each group's device ids; goldens from JAX 0.4.30 agree).
    names = [name for name, _ in mesh]
    axes = tuple(sorted(axes, key=names.index))

    def combine(members, position):
        sources = [source for source, target in perm if target == position]
        return members[sources[0]] if sources else np.zeros_like(members[0])

    return per_group(blocks, mesh, axes, combine)


def axis_index_reference(mesh: Mesh, axes: Sequence[str]) -> np.ndarray:
    """Every device's `axis_index(axes)`, shape (*mesh sizes,), int32."""
    sizes = tuple(size for _, size in mesh)
    placeholders = np.zeros((*sizes, 0), dtype=np.int32)
    return per_group(placeholders, mesh, axes, lambda _members, position: np.int32(position))


def check_against_vmap(
    build: Callable[[Callable], Callable], *args, rtol: float = 1e-6, atol: float = 1e-6
):
    """Build the program with `pmapc.pmap` and with `vmap_mapper`, run both on `args`, compare.

    pmapc runs in every form: called (through `jax.jit`: the partition form with
    replica groups of device ids), compiled by `pmapc.lower` in partition form with
    groups named by mesh axes, and in replica form (`target="replicas"`).
    Returns pmapc's results as numpy arrays, for further checks.
    """
    program = build(pmapc.pmap)
    expected = build(vmap_mapper)(*args)
    # np.asarray waits: XLA's CPU collectives can deadlock with many programs in flight.
    actual = jax.tree_util.tree_map(np.asarray, program(*args))
    assert_tree_equal(actual, expected, rtol=rtol, atol=atol)
    for form in ({"replica_groups": "named"}, {"target": "replicas"}):
        other = pmapc.lower(program, *args, **form).compile()(*args)
        assert_tree_equal(jax.tree_util.tree_map(np.asarray, other), expected, rtol=rtol, atol=atol)
    return actual


# ----------------------------------------------------------------------------
# What the running JAX means where its releases differ


@functools.cache
def jax_pmean_divisors(groups: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """For each axis index, what the running JAX's own single-level `jax.pmap` of
    `pmean` over index `groups` divides that index's group sum by: the first group's
    size in JAX 0.4.30 through 0.12.0.1 (its `psum(1, ...)` was that constant), the
    index's own group's size from 0.12.1 on."""
    count = sum(len(group) for group in groups)
    pmean = jax.pmap(
        lambda x: lax.pmean(x, "i", axis_index_groups=[list(group) for group in groups]),
        axis_name="i",
        devices=jax.devices()[:count],
    )
    means = np.asarray(pmean(np.ones(count, np.float32)))
    sizes = np.empty(count, np.float32)
    for group in groups:
        sizes[list(group)] = len(group)
    return sizes / means


def running_jax_value(program, key: str, recorded: np.ndarray) -> np.ndarray:
    """JAX 0.4.30's recorded array `key` of a golden `program`, as the running JAX
    computes it: a value of a pmean over groups of several sizes (the program's
    `pmean_groups`) rescaled from 0.4.30's divisor to the running release's."""
    if program.pmean_groups is None or not key.startswith("out"):
        return recorded
    dimension, groups = program.pmean_groups
    divisors = jax_pmean_divisors(tuple(tuple(group) for group in groups))
    shape = [1] * recorded.ndim
    shape[dimension] = divisors.size
    scale = (len(groups[0]) / divisors).reshape(shape)
    return (recorded * scale).astype(recorded.dtype)
