"""The rules of what a value varies over, once, for both analyses that apply them.

Which values may differ between devices is decided twice (CONTRIBUTING.md, "Data
flow"): by the tracer on the jaxpr of an outermost map (lowering/divergence.py,
before JAX differentiates it) and by predicate-divergent on pmapc IR after
flatten-maps (passes/variance.py, for modules written by hand). Each walks its own
program and names an axis its own way, the tracer by its map's depth in the nest,
the IR by its mesh axis's name, but both decide by the rules below, generic over
that name, so that on one program they agree (tests/py/test_variance_rules.py runs
both on random programs and compares every predicate):

- sources: a value each device computes on its own, whatever its operands, varies
  over every axis (`PER_DEVICE_PRIMITIVES`, `PER_DEVICE_OPS`); so do host callbacks;
- a collective's result (`collective_result`): one that agrees over its group no
  longer varies over the axes it acts along; the others vary over them too;
- where a collective's devices meet (`meeting_axes`): along its axes, along every
  axis for one XLA runs over the whole mesh at once, nowhere for one that does not
  communicate;
- control flow: a branch's results vary as its predicate and every branch's results
  (`branch_results`); a loop's carries as what its body yields and its predicate,
  until they settle (`loop_fixpoint`);
- control flow diverges along the axes its predicate varies over and its
  collectives meet along (`diverging`);
- a function's results are its body's for each call's arguments (the tracer reads a
  call's jaxpr at each call), and a value of its body varies as in any of its calls:
  the body is one piece of code, which each call runs.

Axes are frozensets of the analysis's axis names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from pmapc.collectives import Collective

Axis = TypeVar("Axis")

# What each device computes on its own, by the JAX primitive a traced program binds
# and by the op pmapc IR holds: `lax.rng_uniform` is a stateful generator, which XLA
# runs per device (`stablehlo.rng`, its lowering); a host callback calls Python on
# each device (`pure_callback`, `io_callback`, `debug_callback`, lowered to the
# custom calls `dialect.is_host_callback` knows); `replica_id` and `partition_id`
# are the device's own number (pmapc's lowering of `axis_index` reads them).
PER_DEVICE_PRIMITIVES = frozenset({"rng_uniform", "pure_callback", "io_callback", "debug_callback"})
PER_DEVICE_OPS = frozenset({"stablehlo.rng", "stablehlo.replica_id", "stablehlo.partition_id"})


def collective_result(
    collective: Collective, grouped: bool, operands: frozenset[Axis], axes: frozenset[Axis]
) -> frozenset[Axis]:
    """What the result of `collective` over `axes` varies over, its operands varying over
    `operands`; `grouped`: it takes index groups (its groups' results may differ)."""
    if collective.agrees_over_group and not grouped:
        return operands - axes
    return operands | axes


def meeting_axes(
    collective: Collective, axes: frozenset[Axis], every_axis: frozenset[Axis]
) -> frozenset[Axis]:
    """The axes along which the devices of `collective` over `axes` must all reach it."""
    if not collective.communicates:
        return frozenset()
    return every_axis if collective.spans_mesh else axes


def branch_results(
    predicate: frozenset[Axis], branches: Iterable[Sequence[frozenset[Axis]]], count: int
) -> list[frozenset[Axis]]:
    """What the `count` results of a branch vary over: each as its predicate and what
    every branch returns there (`branches`: each branch's results)."""
    results = [predicate] * count
    for returned in branches:
        results = [axes | more for axes, more in zip(results, returned)]
    return results


# One trip of a loop: the carries' variance in -> (its predicate's, what it yields).
Trip = Callable[[list[frozenset[Axis]]], tuple[frozenset[Axis], Sequence[frozenset[Axis]]]]


def loop_fixpoint(
    carried: list[frozenset[Axis]], trip: Trip
) -> tuple[list[frozenset[Axis]], frozenset[Axis]]:
    """The carries' variance once it settles, and the predicate's then: each carry
    joins what the body yields for it and the predicate (devices that stop apart
    hold apart), trip after trip, until nothing grows."""
    while True:
        predicate, yielded = trip(carried)
        grown = [axes | more | predicate for axes, more in zip(carried, yielded)]
        if grown == carried:
            return carried, predicate
        carried = grown


def diverging(predicate: frozenset[Axis], meeting: frozenset[Axis]) -> frozenset[Axis]:
    """The axes along which control flow parts devices that must meet in it."""
    return predicate & meeting
