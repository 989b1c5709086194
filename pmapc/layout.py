"""How the maps of a nest share one device mesh: pure index math, no IR.

Each map runs inside a chain of enclosing maps, and JAX 0.4 numbered a nest's
devices per chain: a map's index is the next mixed-radix digit of the device
id after the digits of the maps around it, and whatever devices its body does
not use (a smaller sibling's) repeat its work, as the fastest digit. So a
chain of map sizes (2, 4) on 8 devices reads device d as (d // 4, d % 4), and
a chain (2, 2) beside it reads d as (d // 4, (d // 2) % 2), each pair of
devices d, d + 1 computing the same.

pmapc lays every chain over one mesh whose axes refine them all: the mesh
axis sizes are the finest sequence of which every chain's sizes are products
of consecutive runs. A map then binds one or more consecutive mesh axes (the
size-4 map above binds two axes of size 2, its size-2 sibling the first of
them), and a collective over the map's axis acts over those mesh axes, in
order, which numbers devices exactly as JAX 0.4 did. When all the maps at
each depth agree, as in most programs, the mesh has one axis per depth.

Chains of sizes that do not divide one another (a size-4 and a size-6 map
side by side) have no common refinement; `refine` returns None for them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from pmapc.mesh import Mesh

# A map and the maps around it, outermost first: (axis name, axis size) each.
Chain = tuple[tuple[str, int], ...]


def refine(factors: Sequence[int], sizes: Sequence[int]) -> tuple[int, ...] | None:
    """The coarsest sizes whose consecutive runs give both `factors` and `sizes`
    (each as a prefix), or None when they cut the devices incompatibly."""
    out: list[int] = []
    pending_a, pending_b = list(reversed(factors)), list(reversed(sizes))
    a = pending_a.pop() if pending_a else None
    b = pending_b.pop() if pending_b else None
    while a is not None or b is not None:
        if a is None or b is None:
            rest = a if a is not None else b
            assert rest is not None  # the loop runs while one is left
            out.append(rest)
            take_a, take_b = b is None, a is None
        elif a == b:
            out.append(a)
            take_a = take_b = True
        elif a == 1 or (b != 1 and b % a == 0):
            out.append(a)
            take_a, take_b = True, False
            b = b // a if a != 1 else b
        elif b == 1 or a % b == 0:
            out.append(b)
            take_a, take_b = False, True
            a = a // b if b != 1 else a
        else:
            return None
        if take_a:
            a = pending_a.pop() if pending_a else None
        if take_b:
            b = pending_b.pop() if pending_b else None
    return tuple(out)


def spans(factors: Sequence[int], sizes: Sequence[int]) -> list[range]:
    """The mesh axes (positions in `factors`) of each map of a chain of `sizes`.

    `factors` must refine `sizes` (`refine`). A map of size 1 binds one axis of
    size 1; a larger map binds the consecutive axes whose product is its size.
    """
    result, start = [], 0
    for size in sizes:
        stop, product = start, 1
        while product < size or stop == start:
            product *= factors[stop]
            stop += 1
        assert product == size, (factors, sizes)
        result.append(range(start, stop))
        start = stop
    return result


@dataclasses.dataclass(frozen=True)
class Layout:
    """The mesh of a nest and the mesh axes that each chain of map sizes binds."""

    mesh: Mesh

    def axes_of(self, sizes: Sequence[int]) -> tuple[str, ...]:
        """The mesh axes bound by the innermost map of a chain of `sizes`."""
        span = spans(self.mesh.axis_sizes, sizes)[-1]
        return tuple(self.mesh.axis_names[i] for i in span)


def layout(chains: Iterable[Chain]) -> Layout:
    """The mesh that every chain refines, with readable, unique axis names.

    A mesh axis takes the name of a map that binds exactly that axis (the least
    such name, so the result does not depend on the order maps were found in),
    else of a map that binds it with others; names bound again deeper are made
    unique as `name_1`, `name_2`, ... Raises ValueError if chains disagree.
    """
    chains = list(chains)
    factors: tuple[int, ...] = ()
    for chain in chains:
        merged = refine(factors, [size for _, size in chain])
        if merged is None:
            raise ValueError(
                f"no mesh refines the map sizes {[s for _, s in chain]} and {list(factors)}"
            )
        factors = merged
    exact: list[set[str]] = [set() for _ in factors]
    covering: list[set[str]] = [set() for _ in factors]
    for chain in chains:
        for (name, _), span in zip(chain, spans(factors, [size for _, size in chain])):
            (exact if len(span) == 1 else covering)[span.start].add(name)
            for position in span[1:]:
                covering[position].add(name)
    names: list[str] = []
    for position in range(len(factors)):
        base = min(exact[position] or covering[position])
        name, suffix = base, 1
        while name in names:
            name, suffix = f"{base}_{suffix}", suffix + 1
        names.append(name)
    return Layout(Mesh(tuple(names), factors))
