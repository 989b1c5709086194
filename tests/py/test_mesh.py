"""The pure index math of pmapc/mesh.py, checked against hand-computed groups."""

import numpy as np
import pytest

from pmapc.mesh import (
    Mesh,
    axis_index_of,
    axis_index_terms,
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
