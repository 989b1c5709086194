"""One process of a multi-process pmapc run, started by tests/py/test_multiprocess.py.

    python multiprocess_worker.py SCENARIO PROCESS_ID PROCESSES DEVICES OUTER INNER PORT

Every process runs the same program on its own rows of the inputs and checks
its rows of every result against numpy; it prints one line
`PMAPC-RESULT {json}` (gloo writes to stdout too). Scenarios:

- `layout`: a nested data x model program over an OUTER x INNER mesh (psum over
  each axis and both, all_gather over each axis, axis_index, an unmapped input, an
  `out_axes=None` result), through jax.jit with process-local inputs and with
  global arrays; with `--aot`, also compiled ahead of time in replica form;
  with `--docs-example`, the multi-process example of the jax.pmap documentation;
  with `--devices-argument`, a map given `devices=`; with `--axis-size`, a map
  of no mapped input; with `--errors`, a nest that cannot be laid out; with
  `--plan`, the communication plan by host against the groups XLA compiled.
- `peer-dies`: process 1 exits after the first call (with `--stop`, it stops
  instead, as a hung machine would); the others keep calling until JAX ends
  them (a failed collective, or its heartbeat check).
- `disagree --odd P --how HOW`: every process calls a nest that psums over both
  axes, but process P, with HOW `different`, calls one that pmaxes over `model`
  instead (`different-shape`: the same nest on other shapes), and with `same` calls
  the same; then every process calls again. With `skip`, every process first runs
  the psum nest together, then all but P call the pmax nest while P waits. The
  wait is `pmapc.set_process_timeout(AGREE_SECONDS)`. Each reports the error it
  got (its type, message and the seconds the call took) or the results' check
  against numpy.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from functools import partial

import numpy as np

import pmapc

HEARTBEAT_SECONDS = 3
AGREE_SECONDS = 20.0  # ample: on 2 busy cores, processes start a call seconds apart


def main(argv: list[str]) -> int:
    scenario, process_id, processes, devices, outer, inner, port = argv[:7]
    process_id, processes, devices = int(process_id), int(processes), int(devices)
    outer, inner = int(outer), int(inner)
    pmapc.use_host_devices(devices)
    import jax

    jax.distributed.initialize(
        f"127.0.0.1:{port}",
        num_processes=processes,
        process_id=process_id,
        heartbeat_timeout_seconds=HEARTBEAT_SECONDS,
    )
    checks: dict[str, bool] = {}
    if scenario == "peer-dies":
        return peer_dies(process_id, outer, inner, argv)
    if scenario == "disagree":
        return disagree(process_id, processes, outer, inner, argv)
    check_layout(checks, process_id, processes, outer, inner)
    if "--global" in argv:
        check_global_arrays(checks, processes, outer, inner)
    if "--aot" in argv:
        check_aot(checks, process_id, processes, outer, inner)
    if "--docs-example" in argv:
        check_docs_example(checks, process_id)
    if "--devices-argument" in argv:
        check_devices_argument(checks, process_id, processes, outer)
    if "--axis-size" in argv:
        check_axis_size(checks, process_id, processes, outer)
    if "--errors" in argv:
        check_errors(checks, inner)
    if "--plan" in argv:
        check_plan(checks, process_id, processes, outer, inner)
    report(process_id=process_id, checks=checks)
    return 0


def report(**fields) -> None:
    # One write: gloo's own stdout writes may land between two writes.
    sys.stdout.write("PMAPC-RESULT " + json.dumps(fields) + "\n")
    sys.stdout.flush()


@partial(pmapc.pmap, axis_name="data", in_axes=(0, None), out_axes=(0, None))
def step(x, scale):
    import jax

    @partial(pmapc.pmap, axis_name="model")
    def columns(y):
        y = y * scale
        lax = jax.lax
        return {
            "psum_model": lax.psum(y, "model"),
            "psum_data": lax.psum(y, "data"),
            "psum_both": lax.psum(y, ("data", "model")),
            "gather_model": lax.all_gather(y, "model"),
            "gather_data": lax.all_gather(y, "data"),
            "index_data": lax.axis_index("data"),
            "index_model": lax.axis_index("model"),
            "index_both": lax.axis_index(("data", "model")),
        }

    per_device = columns(x)
    return per_device, jax.lax.psum(x.sum() * scale, "data")


def expected_step(x: np.ndarray, scale: float):
    """numpy's answer for the whole (OUTER, INNER, 3) input."""
    outer, inner = x.shape[:2]
    y = x * scale
    d, m = np.meshgrid(np.arange(outer), np.arange(inner), indexing="ij")
    per_device = {
        "psum_model": np.broadcast_to(y.sum(1, keepdims=True), y.shape),
        "psum_data": np.broadcast_to(y.sum(0, keepdims=True), y.shape),
        "psum_both": np.broadcast_to(y.sum((0, 1), keepdims=True), y.shape),
        "gather_model": np.broadcast_to(y[:, None], (outer, inner, inner, 3)),
        "gather_data": np.stack([np.stack([y[:, j] for j in range(inner)])] * outer),
        "index_data": d,
        "index_model": m,
        "index_both": d * inner + m,
    }
    return per_device, np.float32(y.sum())


def global_input(outer: int, inner: int) -> np.ndarray:
    return np.arange(outer * inner * 3, dtype=np.float32).reshape(outer, inner, 3) - 7.0


def compare(checks, prefix: str, got, want, rows: slice | None) -> None:
    """Check this process's rows (or, with rows None, the whole value)."""
    per_device, total = got
    want_per_device, want_total = want
    for name, value in per_device.items():
        expected = want_per_device[name] if rows is None else want_per_device[name][rows]
        checks[f"{prefix}{name}"] = bool(
            np.shape(value) == np.shape(expected) and np.allclose(np.asarray(value), expected)
        )
    checks[f"{prefix}out_axes_none"] = bool(np.allclose(np.asarray(total), want_total))


def check_layout(checks, process_id, processes, outer, inner) -> None:
    x = global_input(outer, inner)
    rows = slice(process_id * outer // processes, (process_id + 1) * outer // processes)
    want = expected_step(x, 2.0)
    for call in range(2):  # the second call takes JAX's warm dispatch path
        got = step(x[rows], 2.0)
        compare(checks, f"call{call}:", got, want, rows)
    checks["results_are_local"] = all(v.is_fully_addressable for v in jax_leaves(got))
    # A result fed back as the next call's input (a training loop's pattern).
    twice = increment(increment(x[rows]))
    once_np = x + x.sum(0)
    checks["feedback"] = bool(np.allclose(np.asarray(twice), (once_np + once_np.sum(0))[rows]))


@partial(pmapc.pmap, axis_name="data")
def increment(x):
    import jax

    return x + jax.lax.psum(x, "data")


def check_global_arrays(checks, processes, outer, inner) -> None:
    """The whole input as a global jax.Array gives global arrays back."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    x = global_input(outer, inner)
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(processes, -1), ("p", "d"))
    rows = slice(
        jax.process_index() * outer // processes, (jax.process_index() + 1) * outer // processes
    )
    sharding = NamedSharding(mesh, PartitionSpec("p"))
    # A sharding of all devices need not be the nest's: the map places its inputs.
    global_x = jax.make_array_from_process_local_data(sharding, x[rows], x.shape)
    per_device, total = step(global_x, 2.0)
    want_per_device, want_total = expected_step(x, 2.0)
    for name, value in per_device.items():
        expected = want_per_device[name]
        ok = value.shape == expected.shape and not value.is_fully_addressable
        for shard in value.addressable_shards:
            ok = ok and np.allclose(np.asarray(shard.data), expected[shard.index])
        checks[f"global:{name}"] = bool(ok)
    checks["global:out_axes_none"] = bool(
        np.allclose(np.asarray(total.addressable_shards[0].data), want_total)
    )


def check_aot(checks, process_id, processes, outer, inner) -> None:
    """`pmapc.lower(...).compile()` in both forms, on process-local inputs."""
    x = global_input(outer, inner)
    rows = slice(process_id * outer // processes, (process_id + 1) * outer // processes)
    for target in ("replicas", "partitions"):
        compiled = pmapc.lower(step, x[rows], np.float32(2.0), target=target).compile()
        checks[f"aot-{target}:form"] = compiled.executable.form == target
        got = compiled(x[rows], np.float32(2.0))
        compare(checks, f"aot-{target}:", got, expected_step(x, 2.0), rows)


def check_docs_example(checks, process_id) -> None:
    """jax.pmap's documented multi-process example: 2 processes x 4 devices."""
    import jax
    import jax.numpy as jnp

    f = pmapc.pmap(lambda x: x + jax.lax.psum(x, "i"), axis_name="i")
    got = f(jnp.arange(4) + 4 * process_id)
    documented = [[28, 29, 30, 31], [32, 33, 34, 35]][process_id]
    checks["docs_example"] = np.asarray(got).tolist() == documented


def check_plan(checks, process_id, processes, outer, inner) -> None:
    """The plan of `step` across processes: each process is a host, and the bytes per
    link of pmapc's collectives are those of XLA's, read from its compiled groups."""
    x = global_input(outer, inner)
    rows = slice(process_id * outer // processes, (process_id + 1) * outer // processes)
    plan = step.lower(x[rows], 2.0).compile().plan()
    checks["plan:hosts"] = plan.placement.host_count == processes
    ours, theirs = plan.by_link(), plan.xla.by_link()
    checks["plan:agrees"] = ours == theirs and ours.across_hosts > 0 and ours.in_host > 0
    checks["plan:table"] = f"devices on {processes} hosts" in plan.table()


def check_devices_argument(checks, process_id, processes, outer) -> None:
    """devices= names global devices: listed last process first, process p holds
    the rows counted from the end, and passes those."""
    import jax

    rows_each = outer // processes
    devices = [
        d
        for p in reversed(range(processes))
        for d in [d for d in jax.devices() if d.process_index == p][:rows_each]
    ]
    reverse = pmapc.pmap(
        lambda x: 100 * jax.lax.axis_index("data") + jax.lax.psum(x, "data"),
        axis_name="data",
        devices=devices,
    )
    x = global_input(outer, 1)[:, 0]
    first = (processes - 1 - process_id) * rows_each
    rows = slice(first, first + rows_each)
    want = 100 * np.arange(outer)[:, None] + x.sum(0)
    checks["devices_reversed"] = bool(np.allclose(np.asarray(reverse(x[rows])), want[rows]))


def check_axis_size(checks, process_id, processes, outer) -> None:
    """No mapped input: `axis_size` counts this process's rows, as in JAX 0.4."""
    import jax

    rows_each = outer // processes
    indices = pmapc.pmap(
        lambda s: s + jax.lax.axis_index("data"),
        axis_name="data",
        in_axes=None,
        axis_size=rows_each,
    )(np.int32(0))
    mine = np.arange(process_id * rows_each, (process_id + 1) * rows_each)
    checks["axis_size"] = np.asarray(indices).tolist() == mine.tolist()


def check_errors(checks, inner) -> None:
    """A nest whose inner axes do not fit in one process's devices is refused."""
    import jax

    @partial(pmapc.pmap, axis_name="data")
    def too_wide(x):
        return pmapc.pmap(lambda y: jax.lax.psum(y, "model"), axis_name="model")(x)

    local_devices = jax.local_device_count()
    try:
        too_wide(np.ones((1, 2 * local_devices), np.float32))
        checks["error:inner_axes_too_big"] = False
    except pmapc.DeviceError as error:
        checks["error:inner_axes_too_big"] = (
            f"but process 0 has {local_devices} cpu device(s)" in str(error)
            and isinstance(error, ValueError)
        )

    # a fold runs in one process: asked for with several, it is refused
    @partial(pmapc.pmap, axis_name="data")
    def nest(x):
        return pmapc.pmap(lambda y: jax.lax.psum(y, "model"), axis_name="model")(x)

    try:
        with pmapc.fold_onto(jax.local_devices()[:1]):
            nest(np.ones((1, 2), np.float32))
        checks["error:fold_across_processes"] = False
    except pmapc.DeviceError as error:
        checks["error:fold_across_processes"] = "runs in one process" in str(error)


def peer_dies(process_id, outer, inner, argv) -> int:
    x = global_input(outer, inner)[process_id * outer // 2 : (process_id + 1) * outer // 2]
    np.asarray(step(x, 2.0)[1])
    report(process_id=process_id, event="first call done")
    if process_id == 1 and "--stop" in argv:
        os.kill(os.getpid(), signal.SIGSTOP)  # hangs: no heartbeats, sockets left open
    if process_id == 1:
        os._exit(17)  # dies without a word to the others
    started = time.monotonic()
    while time.monotonic() - started < 600:  # ended by JAX's heartbeat check, not by this
        np.asarray(step(x, 2.0)[1])
    return 0


@partial(pmapc.pmap, axis_name="data")
def psum_both(x):
    import jax

    return pmapc.pmap(lambda y: jax.lax.psum(y, ("data", "model")), axis_name="model")(x)


@partial(pmapc.pmap, axis_name="data")
def pmax_model(x):
    import jax

    return pmapc.pmap(lambda y: jax.lax.pmax(y, "model"), axis_name="model")(x)


def disagree(process_id, processes, outer, inner, argv) -> int:
    odd = int(argv[argv.index("--odd") + 1])
    how = argv[argv.index("--how") + 1]
    pmapc.set_process_timeout(AGREE_SECONDS)
    x = global_input(outer, inner)
    rows = slice(process_id * outer // processes, (process_id + 1) * outer // processes)
    function, given = psum_both, x[rows]
    if process_id == odd and how == "different":
        function = pmax_model
    if process_id == odd and how == "different-shape":
        given = np.concatenate([given, given], axis=-1)
    results = []
    if how == "skip":
        # all run the first program (and start their backends, which JAX starts
        # together); then P skips the second, which the others wait for in vain
        results.append(bool(np.allclose(np.asarray(function(given)), x.sum((0, 1)))))
        if process_id == odd:
            time.sleep(AGREE_SECONDS + 10)  # past the others' wait
            report(process_id=process_id, event="skipped", checks={"psum_both": all(results)})
            return 0
        function = pmax_model
    for _ in range(2):
        started = time.monotonic()
        try:
            got = np.asarray(function(given))
        except pmapc.PmapcError as error:
            report(
                process_id=process_id,
                error=type(error).__name__,
                message=str(error),
                seconds=time.monotonic() - started,
            )
            return 0
        results.append(bool(np.allclose(got, np.broadcast_to(x.sum((0, 1)), x.shape)[rows])))
    # warm calls do not ask again: one agreement per program
    from pmapc.compiler import agreement

    once = agreement.STATS.agreements == (2 if how == "skip" else 1)
    report(process_id=process_id, checks={"psum_both": all(results), "agreed_once": once})
    return 0


def jax_leaves(tree):
    import jax

    return jax.tree_util.tree_leaves(tree)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
