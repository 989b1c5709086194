"""The two lowerings of `ragged_all_to_all` (lower-collectives' `ragged` option picks).

JAX's semantics (`jax.lax.ragged_all_to_all`'s docstring): over a group of n
devices, K = n * s offsets and sizes; slice i of a device's `operand`, rows
`input_offsets[i]` to `input_offsets[i] + send_sizes[i]`, goes to the device of
index i // s, which writes it into its `output` at that device's
`all_to_all(output_offsets)[j]`, `recv_sizes[j]` rows, j being the slice's
index among those it receives (source-major). Rows nothing writes keep `output`.

native    XLA's own op: `stablehlo.custom_call @ragged_all_to_all` with the
          replica groups in its backend_config, as JAX lowers it (to-partitions
          adds its `channel_id`). XLA runs it on GPU and TPU, not on CPU, and in
          partition form only (to-replicas refuses it: XLA's conversion of one
          without a channel crashes the process).

expanded  collectives every XLA runs, moving each slice padded to R rows, the
          operand's N or the output's M, whichever is fewer (a slice holds at
          most the operand, and fits in the output):
            pack     slice i = R rows of the operand (zero-padded below) from
                     `input_offsets[i]`, stacked: [K, R, ...]
            exchange one all_to_all of the stacked slices, one of the output
                     offsets (each device then holds, for each slice it receives,
                     the offset it goes to)
            write    slice j's first `recv_sizes[j]` rows into `output` at its
                     offset, in order (a later slice writes over an earlier one)
          It moves K * R rows per device where a ragged exchange moves at most
          min(N, K * R); the padded all_to_all carries that bound as
          `pmapc.ragged_rows` so the plan can say so.
"""

from __future__ import annotations

from collections.abc import Sequence

from pmapc import hlo, ir
from pmapc.rewriter import Builder

# XLA's custom call target for the op (JAX's `_ragged_all_to_all_lowering`).
NATIVE_TARGET = "ragged_all_to_all"
# On the padded all_to_all of the expanded form: the rows a ragged exchange moves at
# most per device, for the communication plan.
RAGGED_ROWS = "pmapc.ragged_rows"
# The backend_config entries of the native form.
REPLICA_GROUPS = "replica_groups"
CHANNEL_ID = "channel_id"


def is_native(op: ir.Operation) -> bool:
    """Whether `op` is the native form (a custom call of XLA's ragged-all-to-all)."""
    return (
        op.name == "stablehlo.custom_call"
        and ir.as_string(op.attributes["call_target_name"]) == NATIVE_TARGET
    )


def native_groups(op: ir.Operation) -> ir.Attribute:
    """The replica groups of the native form (a dense matrix of device ids)."""
    return (ir.as_dict(op.attributes["backend_config"]) or {})[REPLICA_GROUPS]


def with_channel(op: ir.Operation, handle: int) -> ir.Attribute:
    """The native form's backend_config with channel id `handle`."""
    entries = ir.as_dict(op.attributes["backend_config"]) or {}
    entries[CHANNEL_ID] = ir.i64_attr(handle)
    return ir.dict_attr(entries)


def native(
    b: Builder, operands: Sequence[ir.Value], result_type: ir.Type, groups: ir.Attribute
) -> ir.Value:
    """XLA's op over `groups` (mesh positions, a dense matrix), as JAX writes it."""
    attributes = {
        "call_target_name": ir.string_attr(NATIVE_TARGET),
        "backend_config": ir.dict_attr({REPLICA_GROUPS: groups}),
        "api_version": ir.i32_attr(4),
    }
    return b.create("stablehlo.custom_call", list(operands), [result_type], attributes).result


def expanded(
    b: Builder, operands: Sequence[ir.Value], groups: ir.Attribute, count: int
) -> ir.Value:
    """The op as all_to_alls over `groups` (of `count` devices each) and local writes."""
    operand, output, input_offsets, send_sizes, output_offsets, recv_sizes = operands
    del send_sizes  # a receiver writes `recv_sizes` rows (the semantics say they agree)
    operand_rows, output_rows = ir.shape_of(operand.type)[0], ir.shape_of(output.type)[0]
    # A slice holds at most the operand's rows, and fits in the output.
    rows = min(operand_rows, output_rows)
    if rows == 0:
        return output  # nothing to send, or nowhere to write it
    slices = ir.shape_of(input_offsets.type)[0]
    zero = hlo.i32_scalar(b, 0)
    starts = [_index(b, input_offsets, i) for i in range(slices)]
    stacked = _pack(b, operand, starts, rows, zero)
    # What a ragged exchange would move at most: the operand, and no slice beyond `rows`.
    ragged_rows = ir.i64_attr(min(operand_rows, slices * rows))
    received = _all_to_all(b, stacked, groups, count, {RAGGED_ROWS: ragged_rows})
    offsets = _all_to_all(b, _as_i32(b, output_offsets), groups, count)
    result = _padded(b, output, rows)
    window = [rows, *ir.shape_of(output.type)[1:]]
    row = hlo.iota(b, ir.tensor_type(window, ir.i32_type()), 0)  # each row's index
    for j in range(slices):
        chunk = hlo.drop_dim(b, hlo.slice_rows(b, received, j, j + 1), 0)
        offset, size = hlo.element(b, offsets, j), _index(b, recv_sizes, j)
        result = _write(b, result, chunk, offset, size, row, zero)
    return hlo.slice_rows(b, result, 0, ir.shape_of(output.type)[0])


def _index(b: Builder, vector: ir.Value, i: int) -> ir.Value:
    """Entry `i` of an integer vector, as an i32 scalar (the type of every start)."""
    return _as_i32(b, hlo.element(b, vector, i))


def _as_i32(b: Builder, value: ir.Value) -> ir.Value:
    """`value` with i32 elements (converted if it has others)."""
    if ir.element_type_of(value.type) == ir.i32_type():
        return value
    return hlo.convert(b, value, ir.i32_type())


def _padded(b: Builder, value: ir.Value, rows: int) -> ir.Value:
    """`value` with `rows` rows of zeros below: an N-row window from any offset up to
    its own row count stays inside (StableHLO clamps a window that would not)."""
    shape = list(ir.shape_of(value.type))
    zeros = hlo.zeros(b, ir.tensor_type([rows, *shape[1:]], ir.element_type_of(value.type)))
    return hlo.concatenate(b, [value, zeros], 0)


def _pack(
    b: Builder, operand: ir.Value, starts: list[ir.Value], rows: int, zero: ir.Value
) -> ir.Value:
    """[K, rows, ...]: for each start, `rows` rows of `operand` from it (zero-padded)."""
    shape = list(ir.shape_of(operand.type))
    padded = _padded(b, operand, rows)
    trailing = [zero] * (len(shape) - 1)
    window = [rows, *shape[1:]]
    chunks = [
        hlo.insert_unit_dim(b, hlo.dynamic_slice(b, padded, [start, *trailing], window), 0)
        for start in starts
    ]
    return hlo.concatenate(b, chunks, 0) if len(chunks) > 1 else chunks[0]


def _all_to_all(
    b: Builder,
    value: ir.Value,
    groups: ir.Attribute,
    count: int,
    notes: dict[str, ir.Attribute] | None = None,
) -> ir.Value:
    """stablehlo.all_to_all of `value`'s leading dimension in `count` blocks, in place;
    `notes` are discardable attributes it carries."""
    attributes = {
        **(notes or {}),
        "split_dimension": ir.i64_attr(0),
        "concat_dimension": ir.i64_attr(0),
        "split_count": ir.i64_attr(count),
        "replica_groups": groups,
    }
    return b.create("stablehlo.all_to_all", [value], [value.type], attributes).result


def _write(
    b: Builder,
    result: ir.Value,
    chunk: ir.Value,
    offset: ir.Value,
    size: ir.Value,
    row: ir.Value,
    zero: ir.Value,
) -> ir.Value:
    """`result` with the first `size` rows of `chunk` written from row `offset` (`row`:
    each element's row index, in `chunk`'s shape)."""
    shape = ir.shape_of(chunk.type)
    trailing = [zero] * (len(shape) - 1)
    current = hlo.dynamic_slice(b, result, [offset, *trailing], shape)
    keep = hlo.compare(b, "LT", row, hlo.broadcast_in_dim(b, size, row.type, []))
    merged = hlo.select(b, keep, chunk, current)
    return hlo.dynamic_update_slice(b, result, merged, [offset, *trailing])
