"""What one position of a folded nest receives from a `ragged_all_to_all`, from the
operands of every position of its group (the fold's rule, lowering/fold_rules.py).

The same writes as the expanded form (passes/ragged.py), as JAX ops on the
members the fold gathers: the slices for this position, each read as the
sender's N rows from its input offset (zero-padded below), written into this
position's output at the sender's output offset, `recv_sizes` rows, in the order
received (source-major); rows nothing writes keep the output.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax


def receive(members, rank):
    """The result at the member of index `rank` (an int, or a traced one) of a group
    whose members' six operands are `members`, each stacked on a leading axis."""
    operand, output, input_offsets, _, output_offsets, recv_sizes = members
    size, rows = operand.shape[0], operand.shape[1]
    slices = input_offsets.shape[1] // size
    padded = jnp.concatenate([operand, jnp.zeros_like(operand)], axis=1)
    mine = output[rank]
    result = jnp.concatenate([mine, jnp.zeros((rows, *mine.shape[1:]), mine.dtype)])
    received = recv_sizes[rank]
    row = jnp.arange(rows).reshape(rows, *[1] * (mine.ndim - 1))
    for source in range(size):
        for j in range(slices):
            sent = rank * slices + j  # the source's index for the slice it sends here
            chunk = lax.dynamic_slice_in_dim(padded[source], input_offsets[source, sent], rows)
            offset = output_offsets[source, sent]
            current = lax.dynamic_slice_in_dim(result, offset, rows)
            written = jnp.where(row < received[source * slices + j], chunk, current)
            result = lax.dynamic_update_slice_in_dim(result, written, offset, 0)
    return result[: mine.shape[0]]
