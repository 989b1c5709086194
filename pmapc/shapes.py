"""Shape rules of maps and collectives, as pure functions on tuples.

Shared by `verify-axes` (to check IR) and the tracer (to give results their
types). Each rule returns the result shape or raises `ShapeError` with a
message that names the collective, the axes, the dimension at fault and the
fix. A collective's rule is named by its record in `pmapc/collectives.py`
and takes `(params, shape, where, n)`: `where` describes the axes for
messages (`describe_axes`), `n` is the size of the group.
"""

from __future__ import annotations

from collections.abc import Sequence

from pmapc.errors import ShapeError
from pmapc.params import (
    AllGatherParams,
    AllToAllParams,
    NoParams,
    PpermuteParams,
    PsumScatterParams,
    RaggedAllToAllParams,
    ReductionParams,
)

Shape = tuple[int, ...]


# How many indices (of index groups, of those at fault) a message cites before it
# says how many more there are: a message stays one readable line at any size.
CITED = 4
CITED_GROUP_INDICES = 16


def describe_axes(
    axes: Sequence[str], group_size: int, index_groups: Sequence[Sequence[int]] | None = None
) -> str:
    """`'model' (size 4)`, `('data', 'model') (size 8)`; with index groups
    `'i' (size 8, axis_index_groups [[0, 1], [2, 3]])`."""
    names = ", ".join(f"'{a}'" for a in axes)
    size = f"size {group_size}"
    if index_groups is not None:
        size += f", axis_index_groups {format_index_groups(index_groups)}"
    return f"{names} ({size})" if len(axes) == 1 else f"({names}) ({size})"


def format_index_groups(index_groups: Sequence[Sequence[int]]) -> str:
    """The index groups as JAX writes them, `[[0, 1], [2, 3]]`; past
    `CITED_GROUP_INDICES` indices, those first ones and how many there are in all:
    `[[0, 1, ..., 15, ...], ...] (2 groups, 40 indices)`."""
    total = sum(len(group) for group in index_groups)
    if total <= CITED_GROUP_INDICES:
        return str([list(group) for group in index_groups])
    shown, budget = [], CITED_GROUP_INDICES
    for group in index_groups:
        if budget <= 0:
            shown.append("...")
            break
        cited = ", ".join(str(index) for index in group[:budget])
        shown.append(f"[{cited}, ...]" if len(group) > budget else f"[{cited}]")
        budget -= len(group)
    count = len(index_groups)
    groups = "1 group" if count == 1 else f"{count} groups"
    return f"[{', '.join(shown)}] ({groups}, {total} indices)"


def check_index_groups(
    kind: str, index_groups: Sequence[Sequence[int]], where: str, n: int, *, equal_sizes: bool
) -> None:
    """JAX's rules for `axis_index_groups` over a group of `n` devices: non-empty groups
    that hold each index 0..n-1 exactly once, and, where `equal_sizes`, all of one size
    (JAX 0.4 requires it of all_gather, psum_scatter and all_to_all). The work grows
    with the indices written, not with `n`."""
    fault = _cover_fault(index_groups, n)
    if fault is not None:
        raise ShapeError(
            f"'{kind}' over {where}: axis_index_groups must cover all indices "
            f"exactly once ({fault}); put each index 0..{n - 1} in one group"
        )
    sizes = sorted({len(group) for group in index_groups})
    if equal_sizes and len(sizes) > 1:
        listed = ", ".join(str(size) for size in sizes[:CITED])
        more = f" and {len(sizes) - CITED} more" if len(sizes) > CITED else ""
        raise ShapeError(
            f"'{kind}' over {where}: axis_index_groups must all be the same "
            f"size, got sizes {listed}{more}; split the indices into groups of one size"
        )


def _cover_fault(index_groups: Sequence[Sequence[int]], n: int) -> str | None:
    """What keeps `index_groups` from holding each of 0..n-1 exactly once, or None."""
    if not index_groups or not all(index_groups):
        return "every group must hold at least one index"
    seen: set[int] = set()
    outside, repeated = set(), set()
    for group in index_groups:
        for index in group:
            if not 0 <= index < n:
                outside.add(index)
            elif index in seen:
                repeated.add(index)
            seen.add(index)
    if outside:
        return f"{_listed(sorted(outside))} out of range"
    if repeated:
        return f"{_listed(sorted(repeated))} more than once"
    if len(seen) < n:
        return f"{_listed(_first_missing(seen, n), n - len(seen))} in no group"
    return None


def _first_missing(seen: set[int], n: int) -> list[int]:
    """The first `CITED` of 0..n-1 not in `seen` (which holds only such indices), in
    time of the indices seen, not of n."""
    missing: list[int] = []
    expected = 0
    for index in [*sorted(seen), n]:
        while expected < index and len(missing) < CITED:
            missing.append(expected)
            expected += 1
        if len(missing) == CITED:
            break
        expected = index + 1
    return missing


def _listed(values: Sequence[int], count: int | None = None) -> str:
    """`index 4`, `indices 4, 5, 6`, or `indices 4, 5, 6, 7 and 12 more`: at most
    `CITED` of the `count` values (default: all of `values`), the first ones."""
    count = len(values) if count is None else count
    text = ", ".join(str(v) for v in values[:CITED])
    if count > CITED:
        text += f" and {count - CITED} more"
    return f"index {text}" if count == 1 else f"indices {text}"


def check_static(shape: Shape, what: str) -> None:
    """ShapeError if `shape` has a dynamic dimension (any negative size: MLIR's `?`):
    maps and collectives take static shapes, as `jax.pmap` does."""
    if any(dim < 0 for dim in shape):
        dims = ", ".join("?" if dim < 0 else str(dim) for dim in shape)
        raise ShapeError(
            f"{what} has a dynamic shape [{dims}]; maps and collectives take static "
            "shapes (as jax.pmap does): give it a size in every dimension"
        )


def mapped_operand_shape(shape: Shape, in_axis: int | None, axis_size: int, axis: str) -> Shape:
    """The per-device shape a map's body sees for an operand of `shape`."""
    check_static(shape, "the operand")
    if in_axis is None:
        return shape
    if in_axis >= len(shape):
        raise ShapeError(
            f"in_axes entry {in_axis} is out of range for an operand of rank {len(shape)}; "
            f"map axis '{axis}' must name one of its dimensions 0..{len(shape) - 1} or be unit"
        )
    if shape[in_axis] != axis_size:
        raise ShapeError(
            f"dimension {in_axis} of the operand has size {shape[in_axis]}, but axis '{axis}' "
            f"has size {axis_size}; map over a dimension of size {axis_size}"
        )
    return shape[:in_axis] + shape[in_axis + 1 :]


def mapped_result_shape(shape: Shape, out_axis: int | None, axis_size: int, axis: str) -> Shape:
    """The stacked shape a map returns for a body result of `shape`."""
    check_static(shape, "the body's result")
    if out_axis is None:
        return shape
    if out_axis > len(shape):
        raise ShapeError(
            f"out_axes entry {out_axis} is out of range for a body result of rank {len(shape)}; "
            f"stack axis '{axis}' at a position 0..{len(shape)}"
        )
    return (*shape[:out_axis], axis_size, *shape[out_axis:])


def same_shape(params: ReductionParams, shape: Shape, where: str, n: int) -> Shape:
    """psum, pmax, pmin: the operand's shape."""
    return shape


def _check_dim(kind: str, name: str, dim: int, rank: int, where: str) -> None:
    if rank == 0:
        raise ShapeError(
            f"'{kind}' over {where} needs an operand with dimensions, got a scalar ({name} {dim})"
        )
    if not 0 <= dim < rank:
        raise ShapeError(
            f"'{kind}' over {where} has {name} {dim}, out of range for an operand of "
            f"rank {rank}; use a dimension in 0..{rank - 1}"
        )


def _check_divisible(kind: str, dim: int, shape: Shape, where: str, n: int, tiled: bool) -> None:
    if tiled and shape[dim] % n != 0:
        raise ShapeError(
            f"'{kind}' over {where} needs dimension {dim} divisible by {n}, got {shape[dim]}; "
            f"pad it to a multiple of {n}"
        )
    if not tiled and shape[dim] != n:
        raise ShapeError(
            f"'{kind}' over {where} with tiled=false needs dimension {dim} of size {n}, "
            f"got {shape[dim]}; pass tiled=true to split it into {n} blocks instead"
        )


def all_gather_shape(params: AllGatherParams, shape: Shape, where: str, n: int) -> Shape:
    """Tiled: `all_gather_dimension` times n; untiled: a new dimension of size n there."""
    dim = params.all_gather_dimension
    if params.tiled:
        _check_dim("all_gather", "all_gather_dimension", dim, len(shape), where)
        return (*shape[:dim], shape[dim] * n, *shape[dim + 1 :])
    if not 0 <= dim <= len(shape):
        raise ShapeError(
            f"'all_gather' over {where} has all_gather_dimension {dim}, out of range for an "
            f"operand of rank {len(shape)}; use a dimension in 0..{len(shape)}"
        )
    return (*shape[:dim], n, *shape[dim:])


def psum_scatter_shape(params: PsumScatterParams, shape: Shape, where: str, n: int) -> Shape:
    """Tiled: `scatter_dimension` divided by n; untiled: that dimension (size n) removed."""
    dim = params.scatter_dimension
    _check_dim("psum_scatter", "scatter_dimension", dim, len(shape), where)
    _check_divisible("psum_scatter", dim, shape, where, n, params.tiled)
    if params.tiled:
        return (*shape[:dim], shape[dim] // n, *shape[dim + 1 :])
    return shape[:dim] + shape[dim + 1 :]


def all_to_all_shape(params: AllToAllParams, shape: Shape, where: str, n: int) -> Shape:
    """Tiled: split dimension divided by n, concat dimension times n; untiled: the split
    dimension (size n) removed and one of size n inserted at `concat_axis`."""
    split, concat = params.split_axis, params.concat_axis
    _check_dim("all_to_all", "split_axis", split, len(shape), where)
    _check_divisible("all_to_all", split, shape, where, n, params.tiled)
    if params.tiled:
        _check_dim("all_to_all", "concat_axis", concat, len(shape), where)
        result = list(shape)
        result[split] //= n
        result[concat] *= n
        return tuple(result)
    _check_dim("all_to_all", "concat_axis", concat, len(shape), where)
    rest = shape[:split] + shape[split + 1 :]
    return (*rest[:concat], n, *rest[concat:])


def ppermute_shape(params: PpermuteParams, shape: Shape, where: str, n: int) -> Shape:
    """The operand's shape, once `perm` is checked: indices in range, each used once."""
    sources, targets = set(), set()
    for src, dst in params.perm:
        for index in (src, dst):
            if not 0 <= index < n:
                raise ShapeError(
                    f"'ppermute' over {where} has index {index} in its permutation, out of "
                    f"range; indices must be in 0..{n - 1}"
                )
        if src in sources:
            raise ShapeError(
                f"'ppermute' over {where} sends from index {src} twice; each source may appear once"
            )
        if dst in targets:
            raise ShapeError(
                f"'ppermute' over {where} sends to index {dst} twice; each target may appear once"
            )
        sources.add(src)
        targets.add(dst)
    return shape


# ragged_all_to_all's operands, in order (JAX's names).
RAGGED_OPERANDS = (
    "operand",
    "output",
    "input_offsets",
    "send_sizes",
    "output_offsets",
    "recv_sizes",
)


def ragged_all_to_all_shape(
    params: RaggedAllToAllParams, operands: Sequence[Shape], where: str, n: int
) -> Shape:
    """The output's shape, once the operands fit: `operand` and `output` of one rank
    (at least 1) and the same trailing dimensions; the four offset and size vectors
    of one length K, a multiple of n (K / n slices go to each device of the group)."""
    kind = "'ragged_all_to_all' over " + where
    if len(operands) != len(RAGGED_OPERANDS):
        raise ShapeError(
            f"{kind} takes {len(RAGGED_OPERANDS)} operands ({', '.join(RAGGED_OPERANDS)}), "
            f"got {len(operands)}"
        )
    operand, output, *vectors = operands
    if not operand or len(operand) != len(output) or operand[1:] != output[1:]:
        raise ShapeError(
            f"{kind} sends rows of operand {list(operand)} into output {list(output)}: they "
            "need one rank (at least 1) and the same dimensions after the first; reshape "
            "them to [rows, ...] with the same row shape"
        )
    for name, shape in zip(RAGGED_OPERANDS[2:], vectors):
        if len(shape) != 1 or shape[0] < 1:
            raise ShapeError(
                f"{kind} needs {name} of rank 1 with at least one entry, got shape "
                f"{list(shape)}; pass one entry per slice"
            )
    lengths = sorted({shape[0] for shape in vectors})
    if len(lengths) > 1:
        listed = ", ".join(
            f"{name} {shape[0]}" for name, shape in zip(RAGGED_OPERANDS[2:], vectors)
        )
        raise ShapeError(f"{kind} needs offsets and sizes of one length, got {listed}")
    if lengths[0] % n != 0:
        raise ShapeError(
            f"{kind} has {lengths[0]} slices, not a multiple of the group's {n} devices; "
            f"pass {n} x (slices per device) offsets and sizes"
        )
    return tuple(output)


def axis_index_shape(params: NoParams, shape: Shape, where: str, n: int) -> Shape:
    """A scalar (axis_index takes no operand)."""
    return ()
