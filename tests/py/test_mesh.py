"""The pure index math of pmapc/mesh.py, checked against hand-computed groups."""

import numpy as np
import pytest

from pmapc.mesh import (
    Mesh,
    ReplicaGroups,
    axes_joining,
    axes_of_groups,
    axis_index_of,
    axis_index_terms,
    canonical_axes,
    permutation_pairs,
    replica_groups_for,
)

MESH_2X4 = Mesh(("data", "model"), (2, 4))
MESH_2X2X2 = Mesh(("a", "b", "c"), (2, 2, 2))


@pytest.mark.parametrize(
    ("axes", "groups"),
    [
        (("model",), [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (("data",), [[0, 4], [1, 5], [2, 6], [3, 7]]),
        (("data", "model"), [[0, 1, 2, 3, 4, 5, 6, 7]]),
        (("model", "data"), [[0, 4, 1, 5, 2, 6, 3, 7]]),
    ],
)
def test_replica_groups_on_2x4(axes, groups):
    np.testing.assert_array_equal(replica_groups_for(MESH_2X4, axes), groups)


@pytest.mark.parametrize(
    ("axes", "groups"),
    [
        (("a",), [[0, 4], [1, 5], [2, 6], [3, 7]]),
        (("b",), [[0, 2], [1, 3], [4, 6], [5, 7]]),
        (("c",), [[0, 1], [2, 3], [4, 5], [6, 7]]),
        (("a", "c"), [[0, 1, 4, 5], [2, 3, 6, 7]]),
        (("c", "a"), [[0, 4, 1, 5], [2, 6, 3, 7]]),
    ],
)
def test_replica_groups_on_2x2x2(axes, groups):
    np.testing.assert_array_equal(replica_groups_for(MESH_2X2X2, axes), groups)


def test_strides_and_coordinates_are_row_major():
    assert [MESH_2X4.stride(a) for a in ("data", "model")] == [4, 1]
    assert MESH_2X4.device_coords(6) == {"data": 1, "model": 2}


@pytest.mark.parametrize("axes", [("data",), ("model",), ("data", "model"), ("model", "data")])
def test_axis_index_is_position_in_group(axes):
    for group in replica_groups_for(MESH_2X4, axes):
        for position, device in enumerate(group):
            assert axis_index_of(MESH_2X4, axes, int(device)) == position


def test_axis_index_terms_name_stride_size_weight():
    assert axis_index_terms(MESH_2X4, ("model", "data")) == [(1, 4, 2), (4, 2, 1)]


def test_permutation_expanded_over_every_group():
    pairs = permutation_pairs(MESH_2X4, ("data",), [(0, 1), (1, 0)])
    assert pairs.tolist() == [[0, 4], [4, 0], [1, 5], [5, 1], [2, 6], [6, 2], [3, 7], [7, 3]]


def test_one_dimensional_and_empty_meshes():
    np.testing.assert_array_equal(replica_groups_for(Mesh(("i",), (8,)), ("i",)), [list(range(8))])
    assert Mesh((), ()).size == 1


MESH_2X1X4 = Mesh(("data", "one", "model"), (2, 1, 4))


@pytest.mark.parametrize(
    ("axes", "canonical"),
    [
        (("model", "one", "data"), ("model", "data")),
        (("one",), ("one",)),
        (("data", "model"), ("data", "model")),
    ],
)
def test_canonical_axes_leave_out_axes_of_size_1(axes, canonical):
    assert canonical_axes(MESH_2X1X4, axes) == canonical
    np.testing.assert_array_equal(
        replica_groups_for(MESH_2X1X4, axes), replica_groups_for(MESH_2X1X4, canonical)
    )


@pytest.mark.parametrize(
    "axes", [("a",), ("b",), ("c",), ("a", "c"), ("c", "a"), ("b", "c", "a"), ("a", "b", "c")]
)
def test_axes_of_groups_finds_the_axes_in_their_order(axes):
    """Every ordered tuple of axes comes back from its groups (on 2x2x2 no two tuples
    share their groups)."""
    assert axes_of_groups(MESH_2X2X2, replica_groups_for(MESH_2X2X2, axes)) == axes


def test_axes_of_groups_of_other_groups_is_none():
    split = replica_groups_for(MESH_2X4, ("model",), [[0, 1], [2, 3]])
    assert axes_of_groups(MESH_2X4, split) is None  # index groups: not whole axes
    shuffled = replica_groups_for(MESH_2X4, ("model",))[:, [1, 0, 2, 3]]
    assert axes_of_groups(MESH_2X4, shuffled) is None  # same devices, another order
    assert axes_of_groups(MESH_2X4, np.array([[0, 1], [2, 3]])) is None  # not every device
    singletons = np.arange(8).reshape(8, 1)
    assert axes_of_groups(MESH_2X4, singletons) is None  # no axis of size 1 gives them
    assert axes_of_groups(MESH_2X1X4, singletons) == ("one",)


def test_axes_of_groups_reads_a_matrix_once_not_every_tuple_of_axes():
    """Ten axes have 9,864,100 ordered tuples; the groups of one are found at once."""
    mesh = Mesh(tuple(f"a{i}" for i in range(10)), (2,) * 10)
    axes = ("a9", "a3", "a0", "a7")
    assert axes_of_groups(mesh, replica_groups_for(mesh, axes)) == axes


def test_axes_joining_pairs_are_the_axes_they_differ_along():
    pairs = permutation_pairs(MESH_2X4, ("model",), [(0, 1), (1, 0)])
    assert axes_joining(MESH_2X4, pairs) == ("model",)
    assert axes_joining(MESH_2X4, np.array([[0, 5]])) == ("data", "model")
    assert axes_joining(MESH_2X4, np.zeros((0, 2), dtype=np.int64)) == ()


def test_replica_groups_over_axes_are_counted_without_listing_devices():
    huge = Mesh(("data", "model"), (1 << 30, 2))
    groups = ReplicaGroups.over_axes(huge, ("model",))
    assert (groups.count, groups.size, groups.largest()) == (1 << 30, 2, 2)
    padded = ReplicaGroups.of_ids(replica_groups_for(MESH_2X4, ("model",), [[0], [1, 2, 3]]))
    assert (padded.count, padded.size, padded.largest()) == (4, 3, 3)


def test_replica_groups_on_a_mesh_that_lists_its_devices():
    """An `sdy.mesh` with device ids: position p of the mesh is device order[p]."""
    order = (7, 6, 5, 4, 3, 2, 1, 0)
    groups = ReplicaGroups.over_axes(MESH_2X4, ("data",), order)
    np.testing.assert_array_equal(groups.matrix(), [[7, 3], [6, 2], [5, 1], [4, 0]])


def test_index_groups_split_every_group_in_order():
    np.testing.assert_array_equal(
        replica_groups_for(MESH_2X4, ("model",), [[3], [0, 1, 2]]),
        [[3, -1, -1], [0, 1, 2], [7, -1, -1], [4, 5, 6]],
    )
