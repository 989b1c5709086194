"""The benchmarks' HLO reader (`benchmarks/hlo_stats.py`, over pmapc's
`compiler/hlo_collectives.py`) on text from both ends of the JAX range: dense replica
groups (jax 0.10.2) and mesh-axis groups (jax 0.11+,
`replica_groups=mesh['x'=2,'y'=4] {'y'}`) must give the same counts and bytes, which
are worked out here by hand from the cost model; and the device ids of every form of
replica groups, against the groups pmapc's mesh math gives."""

from __future__ import annotations

import pathlib
import sys

import jax
import numpy as np
import pytest
from jax import lax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))

import hlo_stats  # noqa: E402

from pmapc.compiler import hlo_collectives  # noqa: E402
from pmapc.mesh import Mesh as PmapcMesh  # noqa: E402
from pmapc.mesh import replica_groups_for  # noqa: E402


def body(v):
    """The program the recorded texts in hlo/ are the HLO of, on a (2, 4) mesh ('x', 'y')
    with v an f32[8, 4] block per device."""
    a = lax.psum(v, "y")
    b = lax.all_gather(v, ("x", "y"), tiled=True)
    c = lax.psum_scatter(v, "y", scatter_dimension=0, tiled=True)
    d = lax.all_to_all(v, "x", 0, 0, tiled=True)
    e = lax.ppermute(v, "y", [(i, (i + 1) % 4) for i in range(4)])
    f = lax.psum(v, "x")
    return a.sum() + b.sum() + c.sum() + d.sum() + e.sum() + f.sum()


BLOCK = 8 * 4 * 4  # bytes of one f32[8, 4] block
# kind -> bytes one device sends per step: 2(n-1)/n S for an all-reduce, (n-1)/n S of
# the larger size for the others, S for a permute.
EXPECTED_BYTES = {
    "all-reduce": 2 * (1 / 2) * BLOCK + 2 * (3 / 4) * BLOCK,  # psum over x (2), over y (4)
    "all-gather": (7 / 8) * 8 * BLOCK,  # over (x, y): 8 blocks gathered
    "reduce-scatter": (3 / 4) * BLOCK,  # over y: the block is the scattered size
    "all-to-all": (1 / 2) * BLOCK,  # over x
    "collective-permute": BLOCK,
}
EXPECTED_COUNTS = {
    "all-reduce": 2,
    "all-gather": 1,
    "reduce-scatter": 1,
    "all-to-all": 1,
    "collective-permute": 1,
}


def recorded(version: str) -> str:
    text = (HERE / "hlo" / f"shard_map_2x4_jax{version}.txt").read_text()
    return "\n".join(line for line in text.splitlines() if not line.startswith("//"))


def check(stats: hlo_stats.CollectiveStats) -> None:
    assert stats.static_count == EXPECTED_COUNTS
    assert stats.dynamic_count == EXPECTED_COUNTS
    assert stats.wire_bytes == pytest.approx(EXPECTED_BYTES)


@pytest.mark.parametrize("version", ["0.10.2", "0.12.0.1"])
def test_recorded_hlo_of_each_jax_end(version):
    text = recorded(version)
    assert ("replica_groups=mesh[" in text) == (version != "0.10.2")
    check(hlo_stats.collective_stats(text))


def test_the_running_jax_hlo():
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
    program = jax.jit(
        jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P(), check_vma=False)
    )
    check(
        hlo_stats.collective_stats(program.lower(np.ones((16, 16), np.float32)).compile().as_text())
    )


@pytest.mark.parametrize(
    ("groups", "size"),
    [
        ("mesh['x'=2,'y'=4] {'y'}", 4),
        ("mesh['x'=2,'y'=4] {'y','x'}", 8),
        ("mesh['data'=2,'model'=4] {}", 1),
        ("mesh['x'=4,'y'=2] {'x':(2)2}", 2),  # a sub-axis: the second half of 'x'
        ("{{0,4},{1,5},{2,6},{3,7}}", 2),
        ("[2,4]<=[8]", 4),
        ("{}", 8),
    ],
)
def test_group_size_of_each_form(groups, size):
    assert hlo_stats.group_size(f"%x), channel_id=1, replica_groups={groups}, x", 8) == size


ASYNC_WRAPPED = """\
HloModule m, num_partitions=8

%wrapped_all_to_all (p0: f32[4,4], p1: f32[4,4]) -> (f32[4,4], f32[4,4]) {
  %p0 = f32[4,4]{1,0} parameter(0)
  %p1 = f32[4,4]{1,0} parameter(1)
  ROOT %a2a = (f32[4,4]{1,0}, f32[4,4]{1,0}) all-to-all(%p0, %p1), channel_id=1, \
replica_groups=mesh['x'=2,'y'=4] {'x'}
}

ENTRY %main (a: f32[4,4], b: f32[4,4]) -> (f32[4,4], f32[4,4]) {
  %a = f32[4,4]{1,0} parameter(0)
  %b = f32[4,4]{1,0} parameter(1)
  %start = ((f32[4,4]{1,0}, f32[4,4]{1,0}), (f32[4,4]{1,0}, f32[4,4]{1,0})) \
async-start(%a, %b), calls=%wrapped_all_to_all
  %update = ((f32[4,4]{1,0}, f32[4,4]{1,0}), (f32[4,4]{1,0}, f32[4,4]{1,0})) \
async-update(%start), calls=%wrapped_all_to_all
  ROOT %done = (f32[4,4]{1,0}, f32[4,4]{1,0}) async-done(%update), calls=%wrapped_all_to_all
}
"""


def test_a_collective_in_an_async_wrapper_counts_once():
    stats = hlo_stats.collective_stats(ASYNC_WRAPPED)
    assert stats.dynamic_count["all-to-all"] == 1
    assert stats.wire_bytes["all-to-all"] == pytest.approx((1 / 2) * 2 * 4 * 4 * 4)


MESH_2X4 = PmapcMesh(("x", "y"), (2, 4))


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ("mesh['x'=2,'y'=4] {'y'}", replica_groups_for(MESH_2X4, ("y",))),
        ("mesh['x'=2,'y'=4] {'y','x'}", replica_groups_for(MESH_2X4, ("y", "x"))),
        ("mesh['x'=2,'y'=4] {}", np.arange(8).reshape(8, 1)),
        ("mesh['x'=2,'y'=4] {'y':(2)2}", [[0, 1], [2, 3], [4, 5], [6, 7]]),
        ("mesh['x'=2,'y'=4] {'y':(1)2}", [[0, 2], [1, 3], [4, 6], [5, 7]]),
        ("{{0,4},{1,5},{2,6},{3,7}}", replica_groups_for(MESH_2X4, ("x",))),
        ("{{0,1,2},{3}}", [[0, 1, 2], [3, -1, -1]]),  # unequal groups padded, as StableHLO
        ("[2,4]<=[8]", replica_groups_for(MESH_2X4, ("y",))),
        ("[4,2]<=[2,4]T(1,0)", replica_groups_for(MESH_2X4, ("x",))),
        ("{}", np.arange(8).reshape(1, 8)),
    ],
)
def test_device_ids_of_each_form_of_replica_groups(groups, expected):
    np.testing.assert_array_equal(hlo_collectives.replica_groups(groups, 8), expected)


STARTS_AND_LOOPS = """\
HloModule m, is_scheduled=true, replica_count=1, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

%body (c: (s32[], f32[8])) -> (s32[], f32[8]) {
  %c = (s32[], f32[8]{0}) parameter(0)
  %v = f32[8]{0} get-tuple-element(%c), index=1
  %in_loop = f32[8]{0} all-reduce(%v), channel_id=3, replica_groups=[4,2]<=[8], to_apply=%add
  %i = s32[] get-tuple-element(%c), index=0
  ROOT %t = (s32[], f32[8]{0}) tuple(%i, %in_loop)
}

%cond (c: (s32[], f32[8])) -> pred[] {
  %c = (s32[], f32[8]{0}) parameter(0)
  ROOT %p = pred[] constant(true)
}

ENTRY %main (x: f32[8]) -> (f32[8], f32[8]) {
  %x = f32[8]{0} parameter(0)
  %ags = ((f32[8]{0}, f32[8]{0}), (f32[64]{0}, f32[64]{0})) all-gather-start(%x, %x), \
channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, use_global_device_ids=true
  %agd = (f32[64]{0}, f32[64]{0}) all-gather-done(%ags)
  %cps = (f32[8]{0}, f32[8]{0}, u32[], u32[]) collective-permute-start(%x), channel_id=2, \
source_target_pairs={{0,1},{1,0}}
  %cpd = f32[8]{0} collective-permute-done(%cps)
  %ars = ((f32[8]{0}), f32[8]{0}) all-reduce-start(%x), channel_id=4, \
replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%add, \
output_to_operand_aliasing={{1}: (0, {})}
  %ard = f32[8]{0} all-reduce-done(%ars)
  %ars2 = (f32[8]{0}, f32[4]{0}) all-reduce-start(%x, %x), channel_id=5, \
replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=%add
  %init = (s32[], f32[8]{0}) tuple(%x, %cpd)
  %loop = (s32[], f32[8]{0}) while(%init), condition=%cond, body=%body, \
backend_config={"known_trip_count":{"n":"5"}}
  %after = f32[8]{0} get-tuple-element(%loop), index=1
  ROOT %r = (f32[8]{0}, f32[8]{0}) tuple(%after, %after)
}
"""


def test_start_forms_are_read_by_their_results_and_loops_in_run_order():
    parsed = hlo_collectives.parse(STARTS_AND_LOOPS)
    assert parsed.device_count == 8
    collectives = [parsed.collectives[i] for i in parsed.run_order()]
    assert [(c.name, c.opcode, c.element_bytes, c.is_async) for c in collectives] == [
        ("ags", "all-gather-start", (256, 256), True),
        ("cps", "collective-permute-start", (32,), True),
        # its results, aliased to its operands (XLA:GPU of jax 0.11), and a combined one
        ("ars", "all-reduce-start", (32,), True),
        ("ars2", "all-reduce-start", (32, 16), True),
        ("in_loop", "all-reduce", (32,), False),
    ]
    np.testing.assert_array_equal(collectives[1].groups, [[0, 1], [1, 0]])
    assert parsed.executions()["body"] == (5, False)
    stats = hlo_stats.collective_stats(STARTS_AND_LOOPS)
    assert stats.dynamic_count["all-reduce"] == 5 + 2
    assert stats.wire_bytes["all-gather"] == pytest.approx(7 / 8 * 512)
    assert stats.wire_bytes["collective-permute"] == 32


def test_shapes_nest_as_written():
    assert hlo_collectives.parse_shape("f32[4,8]{1,0}") == 128
    assert hlo_collectives.parse_shape("((f32[2]{0}, s8[3]{0}), (bf16[4]{0}), u32[])") == [
        [8, 3],
        [8],
        4,
    ]
    assert hlo_collectives.array_bytes("(f32[2]{0}, (c64[1]{0}, pred[]))") == [8, 8, 1]
