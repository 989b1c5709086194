"""Arguments and a numpy reference for `jax.lax.ragged_all_to_all` over groups of
devices, as its docstring defines it (tests/py/test_ragged.py).

Each device's values are stacked along leading grid dimensions, one per map of
the nest (`[rows, cols, ...]` for a 2-D nest). A group is a list of flat device
indices (row-major) in the order the collective's axes (and index groups) put
them; slice i of a device's operand goes to the member of index i // s of its
group, which writes it at the offset the sender gives, `recv_sizes` rows, in the
order it receives them.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass
class RaggedArgs:
    """The six operands of every device, stacked on `grid`, and the groups."""

    grid: tuple[int, ...]
    groups: list[list[int]]  # flat device indices, each group in its order
    operand: np.ndarray
    output: np.ndarray
    input_offsets: np.ndarray
    send_sizes: np.ndarray
    output_offsets: np.ndarray
    recv_sizes: np.ndarray

    def operands(self) -> list[np.ndarray]:
        return [
            self.operand,
            self.output,
            self.input_offsets,
            self.send_sizes,
            self.output_offsets,
            self.recv_sizes,
        ]


def make_args(
    grid: tuple[int, ...],
    groups: list[list[int]],
    *,
    slices_per_peer: int = 1,
    feature: tuple[int, ...] = (3,),
    dtype=np.float32,
    max_size: int = 3,
    gap: int = 1,
    seed: int = 0,
    empty: bool = False,
    rows: int | None = None,
    out_rows: int | None = None,
) -> RaggedArgs:
    """Consistent arguments: each sender's slices packed in its operand with `gap`
    unused rows between them, each receiver's slices packed in its output with `gap`
    rows between them that nothing writes (so they keep `output`), sizes drawn from
    0..max_size (all 0 if `empty`); `rows` and `out_rows` fix the operand's and the
    output's row counts (by default, what the slices need)."""
    rng = np.random.default_rng(seed)
    n = len(groups[0])
    assert all(len(g) == n for g in groups)
    s = slices_per_peer
    k = n * s
    devices = int(np.prod(grid))
    send = np.zeros((devices, k), np.int32)
    recv = np.zeros((devices, k), np.int32)
    in_off = np.zeros((devices, k), np.int32)
    out_off = np.zeros((devices, k), np.int32)
    for group in groups:
        sizes = np.zeros((n, k), np.int32) if empty else rng.integers(0, max_size + 1, size=(n, k))
        for src in range(n):
            send[group[src]] = sizes[src]
            in_off[group[src]] = _packed(sizes[src], gap)
        for dst in range(n):
            received = [sizes[src, dst * s + j] for src in range(n) for j in range(s)]
            recv[group[dst]] = received
            offsets = _packed(np.asarray(received), gap)
            for src in range(n):
                for j in range(s):
                    out_off[group[src], dst * s + j] = offsets[src * s + j]
    needed = int((in_off[:, -1] + send[:, -1]).max()) + gap
    out_needed = int(out_off.max()) + max_size + gap + 2
    assert rows is None or rows >= needed, f"{rows} operand rows, {needed} needed"
    assert out_rows is None or out_rows >= out_needed, f"{out_rows} output rows, {out_needed}"
    rows, out_rows = rows or needed, out_rows or out_needed
    operand = _values(rng, (devices, rows, *feature), dtype)
    output = _values(rng, (devices, out_rows, *feature), dtype) - 100
    stack = lambda a: a.reshape(*grid, *a.shape[1:])  # noqa: E731
    return RaggedArgs(
        grid,
        groups,
        stack(operand),
        stack(output),
        stack(in_off),
        stack(send),
        stack(out_off),
        stack(recv),
    )


def _packed(sizes: np.ndarray, gap: int) -> np.ndarray:
    """Offsets of slices of `sizes` laid one after another with `gap` rows between."""
    return np.concatenate([[0], np.cumsum(np.asarray(sizes) + gap)[:-1]]).astype(np.int32)


def _values(rng, shape, dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.normal(size=shape).astype(dtype)


def reference(args: RaggedArgs) -> np.ndarray:
    """The result on every device, stacked on the grid (the documented semantics)."""
    flat = [a.reshape(-1, *a.shape[len(args.grid) :]) for a in args.operands()]
    operand, output, in_off, send, out_off, recv = flat
    result = output.copy()
    n = len(args.groups[0])
    s = in_off.shape[1] // n
    for group in args.groups:
        for dst_rank, dst in enumerate(group):
            for src_rank, src in enumerate(group):
                for j in range(s):
                    i = dst_rank * s + j  # the sender's slice for dst
                    size = recv[dst, src_rank * s + j]
                    start, offset = in_off[src, i], out_off[src, i]
                    data = operand[src, start : start + send[src, i]]
                    result[dst, offset : offset + size] = data[:size]
    return result.reshape(*args.grid, *result.shape[1:])


def linear_map(args: RaggedArgs) -> np.ndarray:
    """The op as a matrix from (operand, output) to the result, all devices flattened:
    it is linear in them (the offsets and sizes fixed), so its vector-Jacobian product
    is this matrix's transpose (the oracle for its gradient)."""
    sizes = (args.operand.size, args.output.size)
    columns = []
    for which, size in enumerate(sizes):
        for index in range(size):
            unit = [np.zeros(args.operand.shape), np.zeros(args.output.shape)]
            unit[which].reshape(-1)[index] = 1.0
            probe = dataclasses.replace(args, operand=unit[0], output=unit[1])
            columns.append(reference(probe).reshape(-1))
    return np.stack(columns, axis=1)
