"""The plan by host and slice (`compiler/plan_hosts.py`) on stand-in devices.

Each stand-in names the host (`process_index`) and slice (`slice_index`) of one
mesh position, as a GPU machine's, a TPU pod's or a `jax.distributed` run's
devices do; the programs are lowered for this process's CPU devices and planned
for the stand-ins. The bytes per link are checked against a count made device by
device (every piece an all-to-all sends, every stage of the hierarchical
reduction), and the hint's against the plan of the nest written in the order it
names. tests/py/test_targets.py checks the same split against the groups XLA
compiled for real GPU machines and TPU pods, and tests/py/test_multiprocess.py
for a `jax.distributed` run.
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ElementTree

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pmapc
from pmapc.compiler import plan_hosts
from pmapc.compiler.plan_hosts import Links, Placement

SDS = jax.ShapeDtypeStruct


@dataclasses.dataclass(frozen=True)
class StandIn:
    process_index: int
    slice_index: int | None = None


def stand_ins(hosts, slices=None) -> list[StandIn]:
    slices = slices if slices is not None else [None] * len(hosts)
    return [StandIn(h, s) for h, s in zip(hosts, slices, strict=True)]


TWO_HOSTS = stand_ins([0, 0, 0, 0, 1, 1, 1, 1])
TWO_SLICES = stand_ins([0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 0, 0, 1, 1, 1, 1])


def counted(placement: Placement, op: str, groups: np.ndarray, payload: float) -> Links:
    """The busiest device's bytes per link, device by device: an exchange sends S/n to
    each other member; a reduction reduces inside its host, then among the hosts of
    its slice, then among the slices, each stage a ring over one piece per member."""
    worst = np.zeros(3)
    for group in groups:
        members = [int(d) for d in group if d >= 0]
        n = len(members)
        for device in members:
            host = [d for d in members if placement.hosts[d] == placement.hosts[device]]
            same_slice = [d for d in members if placement.slices[d] == placement.slices[device]]
            k, m = len(host), len(same_slice)
            if op == "all_to_all":
                sent = np.array([k - 1, m - k, n - m]) * payload / n
            else:
                # stage sizes: S, S/k, S/m; a ring over g sends (g-1)/g of its piece
                host_ring = (k - 1) / k * payload
                slice_ring = (m // k - 1) / (m // k) * payload / k
                pod_ring = (n // m - 1) / (n // m) * payload / m
                sent = np.array([host_ring, slice_ring, pod_ring])
                sent *= 2 if op == "all_reduce" else 1
            worst = np.maximum(worst, sent)
    return Links(*worst)


GROUPS = {
    "all": np.arange(8)[None, :],
    "rows of 4": np.arange(8).reshape(2, 4),
    "columns": np.arange(8).reshape(2, 4).T.copy(),
    "pairs": np.arange(8).reshape(4, 2),
    "strided pairs": np.array([[0, 4], [1, 5], [2, 6], [3, 7]]),
}


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
@pytest.mark.parametrize("groups", list(GROUPS))
@pytest.mark.parametrize("devices", ["two hosts", "two slices"])
def test_the_split_counts_what_each_device_sends(op, groups, devices):
    placement = Placement.of_devices(TWO_HOSTS if devices == "two hosts" else TWO_SLICES)
    matrix = GROUPS[groups]
    links = placement.links(op, matrix, 1024.0)
    assert links == pytest.approx(counted(placement, op, matrix, 1024.0))
    # the links together are the ring the plan's bytes count
    n = matrix.shape[1]
    ring = (2 if op == "all_reduce" else 1) * (n - 1) / n * 1024
    assert links.in_host + links.across_hosts + links.across_slices == pytest.approx(ring)


def test_a_permute_sends_each_pair_on_its_link():
    placement = Placement.of_devices(TWO_SLICES)
    pairs = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [5, 4]])
    links = placement.links("collective_permute", pairs, 100.0)
    # 0->1 in a host; 1->2 and 2->3 between hosts of slice 0; 3->4 and 5->4 between
    # hosts 1 and 2 (other slices), 5->4 on host 2: in a host
    assert links == Links(in_host=100.0, across_hosts=100.0, across_slices=100.0)


def test_spans_count_hosts_and_slices_of_the_widest_group():
    placement = Placement.of_devices(TWO_SLICES)
    assert placement.span(GROUPS["all"]) == (4, 2)
    assert placement.span(GROUPS["pairs"]) == (1, 1)
    assert placement.span(GROUPS["strided pairs"]) == (2, 2)
    assert placement.span(np.array([[0, 1, -1], [2, 4, 6]])) == (3, 2)  # -1: padding


def nest(body, devices, inner="model", outer="data"):
    return pmapc.pmap(pmapc.pmap(body, inner), outer, devices=devices)


def data_heavy(x):
    """More bytes along 'data' than along 'model'."""
    return lax.psum(x, "data") + lax.psum(x[:1], "model")


def planned(body, devices, shape, inner="model", outer="data"):
    lowered = nest(body, None, inner, outer).lower(SDS(shape, jnp.float32))
    return lowered.compilation.plan(devices)


def cells(line: str) -> list[str]:
    """A table line's cells (columns are 2 or more spaces apart)."""
    return re.split(r"\s{2,}", line.strip())


def test_the_table_on_two_hosts_and_its_hint():
    plan = planned(data_heavy, TWO_HOSTS, (2, 4, 256))
    lines = plan.table().splitlines()
    assert lines[1] == (
        "devices on 2 hosts; hosts: the most one group spans; across hosts: between hosts "
        "of one slice"
    )
    header, data, model = map(cells, lines[2:5])
    assert header == [
        *("#", "op", "axes", "groups", "per run", "sent", "received", "minimum"),
        *("hosts", "in host", "across hosts", "source"),
    ]
    assert data[1:11] == [
        *("all_reduce", "data", "4 x 2", "1", "1.00 KiB", "1.00 KiB", "1.00 KiB"),
        *("2", "0 B", "1.00 KiB"),
    ]
    assert model[1:11] == [
        "all_reduce",
        "model",
        "2 x 4",
        "1",
        "6 B",
        "6 B",
        "6 B",
        "1",
        "6 B",
        "0 B",
    ]
    assert lines[6] == "pmapc per run by link: in host 6 B, across hosts 1.00 KiB per device"
    assert lines[7] == (
        "hint: 'data' groups span 2 hosts: 1.00 KiB per run between hosts; with 'model' "
        "outer to 'data' (axes model, data, outermost first) they stay inside a host, and "
        "the program sends 2 B between hosts per run instead of 1.00 KiB"
    )


def test_the_hint_s_bytes_are_those_of_the_nest_in_its_order():
    """The hint's alternative is the plan of the same program nested as it says."""
    plan = planned(data_heavy, TWO_HOSTS, (2, 4, 256))
    (hint,) = plan.hints()
    assert (hint.moved, hint.outward_of, hint.order) == ("model", "data", ("model", "data"))
    swapped = planned(data_heavy, TWO_HOSTS, (4, 2, 256), inner="data", outer="model")
    assert swapped.by_link() == hint.program_then
    assert plan.by_link() == hint.program_now
    assert swapped.hints() == []  # no order of the two is better than this one


def test_no_hint_where_the_order_is_already_the_cheapest():
    def model_heavy(x):
        return lax.psum(x, "model") + lax.psum(x[:1], "data")

    plan = planned(model_heavy, TWO_HOSTS, (2, 4, 256))
    assert plan.hints() == [] and "hint:" not in plan.table()


def test_the_table_on_two_slices():
    plan = planned(data_heavy, TWO_SLICES, (2, 4, 256))
    lines = plan.table().splitlines()
    assert lines[1].startswith("devices on 4 hosts in 2 slices; ")
    assert cells(lines[2])[8:13] == ["hosts", "slices", "in host", "across hosts", "across slices"]
    # its groups span 2 hosts in 2 slices, and all it sends crosses slices
    assert cells(lines[3])[1:3] + cells(lines[3])[8:13] == [
        *("all_reduce", "data", "2", "2", "0 B", "0 B", "1.00 KiB"),
    ]
    by_link = plan.by_link()
    assert by_link is not None and by_link.across_slices == 1024.0
    assert "across slices 1.00 KiB per device" in plan.table()
    (hint,) = plan.hints()
    assert hint.inside == "a host" and hint.spans == (2, 2)
    assert hint.line(str).startswith(
        "hint: 'data' groups span 2 hosts in 2 slices: 1024.0 per run between hosts and slices; "
    )


def test_one_host_adds_nothing():
    plan = planned(data_heavy, stand_ins([0] * 8), (2, 4, 256))
    assert "hosts" not in plan.table().splitlines()[1]
    assert plan.hints() == [] and plan_hosts.header(plan.placement) == ()


def test_the_pictures_mark_host_and_slice_boundaries():
    plan = planned(data_heavy, TWO_SLICES, (2, 4, 256))
    text = plan.picture()
    assert text.splitlines()[0] == plan_hosts.PICTURE_LEGEND
    # the grid is data (rows) x model (columns): hosts of 2 devices, a slice per row
    assert "    A   B|  C   D\n  === === === ===\n    A   B|  C   D" in text
    svg = ElementTree.fromstring(plan.svg())
    ns = "{http://www.w3.org/2000/svg}"
    panel = svg.findall(f"{ns}g")[0]
    kinds = [line.get("class") for line in panel.findall(f"{ns}line")]
    assert kinds.count("host-boundary") == 2 and kinds.count("slice-boundary") == 4
    hosts = [rect.get("data-host") for rect in panel.findall(f"{ns}rect")]
    assert hosts == ["0", "0", "1", "1", "2", "2", "3", "3"]
