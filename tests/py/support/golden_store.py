"""The file format of the generated goldens (`goldens/jax0430_generated.npz`).

One npz entry per array would make the file mostly zip headers, so it holds two
entries: `values`, every array raveled into one float64 vector (exact for float32,
bfloat16, int32 and bool; npz holds no bfloat16), and `index`, a JSON string:
program name -> {"arrays": {key: [dtype, shape, offset]}, "error": [...]}.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class Recorded:
    """What JAX 0.4.30 did with one program: its arrays, or the exception it raised."""

    arrays: dict[str, np.ndarray]  # inputs (`input{k}`) and, without an error, results
    error: str | None = None  # the builtin class of the exception, e.g. "ValueError"
    error_type: str | None = None  # the exception's own class
    error_message: str | None = None  # the first line of its message


def pack(recorded: dict[str, Recorded]) -> dict[str, np.ndarray]:
    """The npz entries that hold `recorded` (program name -> Recorded)."""
    chunks, index, offset = [], {}, 0
    for name, record in recorded.items():
        entry = {"arrays": {}}
        for key, array in record.arrays.items():
            array = np.asarray(array)
            entry["arrays"][key] = [array.dtype.name, list(array.shape), offset]
            chunks.append(array.astype(np.float64).ravel())
            offset += array.size
        if record.error is not None:
            entry["error"] = [record.error, record.error_type, record.error_message]
        index[name] = entry
    values = np.concatenate(chunks) if chunks else np.zeros(0)
    return {"values": values, "index": np.array(json.dumps(index, sort_keys=True))}


def unpack(entries) -> dict[str, Recorded]:
    """The `Recorded` of every program, from the npz entries `pack` wrote."""
    values, index = entries["values"], json.loads(str(entries["index"]))
    recorded = {}
    for name, entry in index.items():
        arrays = {
            key: values[offset : offset + math.prod(shape)].reshape(shape).astype(jnp.dtype(dtype))
            for key, (dtype, shape, offset) in entry["arrays"].items()
        }
        recorded[name] = Recorded(arrays, *entry.get("error", (None, None, None)))
    return recorded
