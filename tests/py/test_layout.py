"""`pmapc/layout.py`: one mesh for every chain of nested maps, checked against
JAX 0.4's per-chain device numbering computed directly."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmapc import layout
from pmapc.mesh import axis_index_of


def jax04_index(sizes: tuple[int, ...], total: int, device: int) -> int:
    """The innermost map's index on `device` as JAX 0.4 numbered it: the next
    mixed-radix digit after the enclosing maps', devices left over fastest."""
    trailing = total // math.prod(sizes)
    return (device // trailing) % sizes[-1]


def chains_strategy():
    # Sibling sizes that divide one another: products of 1, 2 and 4 per depth.
    size = st.sampled_from([1, 2, 4])
    chain = st.lists(size, min_size=1, max_size=3)
    return st.lists(chain, min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(chains_strategy())
def test_every_map_indexes_devices_as_jax_0_4(size_chains):
    # Siblings must fit the same devices: pad every chain with the outer sizes
    # of the longest so that they all share one outermost map.
    chains = [
        tuple((f"m{depth}_{size}", size) for depth, size in enumerate([2, *sizes]))
        for sizes in size_chains
    ]
    result = layout.layout(chains)
    total = result.mesh.size
    assert total == max(math.prod(s for _, s in chain) for chain in chains)
    for chain in chains:
        sizes = tuple(size for _, size in chain)
        for depth in range(1, len(sizes) + 1):
            axes = result.axes_of(sizes[:depth])
            for device in range(total):
                assert axis_index_of(result.mesh, axes, device) == jax04_index(
                    sizes[:depth], total, device
                )


def test_uniform_nests_keep_one_axis_per_depth():
    chains = [(("data", 2),), (("data", 2), ("model", 4)), (("data", 2), ("model", 4))]
    result = layout.layout(chains)
    assert (result.mesh.axis_names, result.mesh.axis_sizes) == (("data", "model"), (2, 4))
    assert result.axes_of((2, 4)) == ("model",)


def test_shadowed_names_are_made_unique():
    result = layout.layout([(("i", 2), ("i", 4))])
    assert result.mesh.axis_names == ("i", "i_1")


def test_a_larger_sibling_binds_several_axes():
    chains = [(("data", 2), ("a", 4)), (("data", 2), ("b", 2))]
    result = layout.layout(chains)
    assert (result.mesh.axis_names, result.mesh.axis_sizes) == (("data", "b", "a"), (2, 2, 2))
    assert result.axes_of((2, 4)) == ("b", "a")
    assert result.axes_of((2, 2)) == ("b",)


def test_names_do_not_depend_on_the_order_maps_are_found_in():
    chains = [(("data", 2), ("a", 4)), (("data", 2), ("b", 2)), (("data", 2), ("c", 2))]
    meshes = {layout.layout(order).mesh for order in itertools.permutations(chains)}
    assert len(meshes) == 1


def test_size_one_maps_keep_an_axis():
    result = layout.layout([(("d", 2), ("one", 1), ("m", 4)), (("d", 2), ("w", 4))])
    assert result.mesh.axis_sizes == (2, 1, 4)
    assert result.axes_of((2, 1)) == ("one",)
    assert result.axes_of((2, 4)) == ("one", "m")


@pytest.mark.parametrize("factors, sizes", [((4,), (6,)), ((2, 4), (2, 6)), ((2, 3), (3, 2))])
def test_sizes_that_cut_devices_differently_have_no_layout(factors, sizes):
    assert layout.refine(factors, sizes) is None
    with pytest.raises(ValueError, match="no mesh refines"):
        layout.layout([tuple(("a", s) for s in factors), tuple(("b", s) for s in sizes)])


def test_refine_keeps_both_cuts():
    assert layout.refine((8,), (2, 1, 2)) == (2, 1, 2, 2)
    assert layout.refine((2, 2, 2), (4,)) == (2, 2, 2)
    assert np.prod(layout.refine((2, 4), (4, 2))) == 8
