"""The benchmarks' HLO reader (`benchmarks/hlo_stats.py`) on text from both ends of
the JAX range: dense replica groups (jax 0.10.2) and mesh-axis groups (jax 0.11+,
`replica_groups=mesh['x'=2,'y'=4] {'y'}`) must give the same counts and bytes, which
are worked out here by hand from the cost model."""

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
