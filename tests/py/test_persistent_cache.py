"""pmapc's per-device programs in JAX's persistent compilation cache (compiler/persistent.py).

A restarted process, JAX's cache already holding the executables, takes pmapc's
program of each map from the cache instead of running the passes. Each run is a
process of its own (a restart), whose numbers are checked against numpy.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from pmapc.compiler import persistent

# One process's run: a nest (or, with "callback", one that prints from the body)
# called once, its result checked against numpy; prints what the cache did.
RUN = textwrap.dedent(
    """
    import json, sys
    from functools import partial
    import pmapc
    pmapc.use_host_devices(8)
    import jax
    import numpy as np
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    from pmapc.compiler import persistent
    from pmapc.lowering import trace

    scale, width, kind = float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    lowerings = []  # the maps lowered to pmapc IR
    lower_map = trace.lower_map
    trace.lower_map = lambda *args: lowerings.append(1) or lower_map(*args)

    @partial(pmapc.pmap, axis_name="data")
    def step(x):
        @partial(pmapc.pmap, axis_name="model")
        def inner(y):
            if kind == "callback":
                jax.debug.callback(lambda v: None, y)
            if kind == "remat":  # a policy: a function, which the structure knows by identity
                policy = jax.checkpoint_policies.nothing_saveable
                y = jax.checkpoint(lambda v: -(-v), policy=policy)(y)
            return jax.lax.psum(y * scale, "model"), jax.lax.psum(y, ("data", "model"))

        return inner(x)

    x = np.arange(8 * width, dtype=np.float32).reshape(2, 4, width)
    rows, total = step(x)
    np.testing.assert_allclose(rows, np.broadcast_to((x * scale).sum(1, keepdims=True), x.shape))
    np.testing.assert_allclose(total, np.broadcast_to(x.sum((0, 1)), x.shape))
    stats = persistent.STATS
    print(json.dumps({"hits": stats.hits, "misses": stats.misses, "writes": stats.writes,
                      "lowered": len(lowerings)}))
    """
)


def run(cache: pathlib.Path, scale: float = 2.0, width: int = 3, kind: str = "plain") -> dict:
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(cache), str(scale), str(width), kind],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_restarted_process_takes_the_program_from_the_cache(tmp_path):
    """Keyed by the map's structure (lowering/structure_digest.py): a restarted process
    neither lowers the map nor runs the passes."""
    assert run(tmp_path) == {"hits": 0, "misses": 1, "writes": 1, "lowered": 1}
    assert run(tmp_path) == {"hits": 1, "misses": 0, "writes": 0, "lowered": 0}
    entries = [p.name for p in tmp_path.iterdir() if p.name.startswith(persistent.KEY_PREFIX)]
    assert len(entries) == 1


def test_a_structure_known_by_identity_is_kept_by_its_ir(tmp_path):
    """A remat's policy is a function, which has no digest: the program is kept by the
    map's lowered IR, so a restarted process lowers the map but runs no pass."""
    assert run(tmp_path, kind="remat") == {"hits": 0, "misses": 1, "writes": 1, "lowered": 1}
    assert run(tmp_path, kind="remat") == {"hits": 1, "misses": 0, "writes": 0, "lowered": 1}


def test_a_constant_of_the_body_is_fed_another_shape_is_another_program(tmp_path):
    """A map's float literals are operands of its program (lowering/structure.py), so a
    restarted sweep's next learning rate takes the kept program and feeds it its own
    value; another shape is another program. (Each run checks its numbers.)"""
    assert run(tmp_path, scale=2.0) == {"hits": 0, "misses": 1, "writes": 1, "lowered": 1}
    assert run(tmp_path, scale=3.0) == {"hits": 1, "misses": 0, "writes": 0, "lowered": 0}
    assert run(tmp_path, width=5) == {"hits": 0, "misses": 1, "writes": 1, "lowered": 1}


def test_a_program_that_calls_back_is_never_kept(tmp_path):
    """What it calls is its function's, in this process: it is neither looked for nor
    written, by its structure (which holds the function) or by its IR."""
    nothing = {"hits": 0, "misses": 0, "writes": 0, "lowered": 1}
    assert run(tmp_path, kind="callback") == nothing
    assert run(tmp_path, kind="callback") == nothing


def test_the_key_covers_the_releases_and_pmapc_source(monkeypatch):
    """An edited pmapc (another source digest) or another release never reads an entry
    an older one wrote; nor do other abstract values or options, nor a structure's
    digest that happens to equal an IR's bytes."""
    ir_bytes = b"module"
    key = persistent.program_key("ir", ir_bytes, ("f32[2]", "partitions"))
    assert key.startswith(persistent.KEY_PREFIX)
    assert key == persistent.program_key("ir", ir_bytes, ("f32[2]", "partitions"))
    assert key != persistent.program_key("ir", ir_bytes, ("f32[3]", "partitions"))
    assert key != persistent.program_key("ir", b"module2", ("f32[2]", "partitions"))
    assert key != persistent.program_key("structure", ir_bytes, ("f32[2]", "partitions"))
    releases = persistent._releases()
    monkeypatch.setattr(persistent, "_releases", lambda: (*releases[:-1], "edited"))
    assert key != persistent.program_key("ir", ir_bytes, ("f32[2]", "partitions"))


@pytest.mark.parametrize("weak", [False, True])
def test_an_entry_reads_back_as_the_program_written(weak):
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec

    from pmapc.compiler import embed
    from pmapc.lowering import jax_api

    program = embed.SpmdProgram(
        bytecode=b"\x00MLIR bytes",
        in_specs=(PartitionSpec("data", ("model", "b"), None), PartitionSpec()),
        out_specs=(PartitionSpec(None, "model"),),
        block_avals_out=(
            jax_api.ShapedArray((1, 3), np.dtype(jax.numpy.bfloat16), weak_type=weak),
        ),
        host_callbacks=(),
    )
    again = embed.SpmdProgram.from_bytes(program.to_bytes())
    assert again.bytecode == program.bytecode
    assert again.in_specs == program.in_specs
    assert again.out_specs == program.out_specs
    assert again.block_avals_out == program.block_avals_out
