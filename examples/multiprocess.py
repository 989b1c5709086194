"""A nested data x model program over several processes on this machine.

    python examples/multiprocess.py                      # 2 processes x 4 CPU devices
    python examples/multiprocess.py --processes 4 --devices 2
    python examples/multiprocess.py --disagree     # the last process runs another program

Run without --process-id, this script starts the processes itself: copies of
itself on a free loopback port, each with its own virtual CPU devices, joined
by `jax.distributed.initialize` (gloo collectives). Every process runs the same
program. The outermost axis 'data' spans the processes, two rows per process;
'model' stays inside each process. Each process passes only its own rows, gets
back only its rows of each result, and checks them against numpy; then it
passes the whole input as one global `jax.Array` and gets global arrays back.
With --disagree, the processes then call a new program, but the last one calls
another: instead of hanging in their collectives, every process raises a
`pmapc.ProcessError` naming what each process runs.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from functools import partial

import numpy as np

import pmapc

ROWS_PER_PROCESS = 2
MARK = "[process"  # gloo writes to stdout too: the launcher relays only marked lines


def run_one_process(
    process_id: int, processes: int, devices: int, port: int, disagree: bool = False
) -> int:
    pmapc.use_host_devices(devices)  # per process, before jax.distributed.initialize
    import jax

    jax.distributed.initialize(
        f"127.0.0.1:{port}",
        num_processes=processes,
        process_id=process_id,
        heartbeat_timeout_seconds=10,
    )

    def say(*parts) -> None:
        # One write per line: gloo's own stdout writes may land between two writes.
        sys.stdout.write(" ".join([f"{MARK} {process_id}]", *map(str, parts)]) + "\n")
        sys.stdout.flush()

    data, model = ROWS_PER_PROCESS * processes, devices // ROWS_PER_PROCESS

    @partial(pmapc.pmap, axis_name="data")
    def step(x):
        @partial(pmapc.pmap, axis_name="model")
        def columns(y):
            scaled = y * (jax.lax.axis_index("model") + 1)
            return jax.lax.psum(scaled, "model"), jax.lax.psum(scaled, ("data", "model"))

        return columns(x)

    x = np.arange(data * model * 3, dtype=np.float32).reshape(data, model, 3)
    mine = slice(process_id * ROWS_PER_PROCESS, (process_id + 1) * ROWS_PER_PROCESS)
    row_totals, grand = step(x[mine])  # this process's rows in, its rows out

    scaled = x * (np.arange(model)[None, :, None] + 1)
    want_rows = np.broadcast_to(scaled.sum(1, keepdims=True), x.shape)
    want_grand = np.broadcast_to(scaled.sum((0, 1)), x.shape)
    say(
        f"mesh data={data} x model={model} over {processes} processes; my rows "
        f"{mine.start}..{mine.stop - 1}"
    )
    say("psum over model, my rows [:, 0, :]:", np.asarray(row_totals)[:, 0].tolist())
    local_ok = np.allclose(row_totals, want_rows[mine]) and np.allclose(grand, want_grand[mine])
    say("process-local call agrees with numpy:", local_ok)

    by_process = jax.sharding.Mesh(
        np.array(jax.devices()).reshape(processes, devices), ("process", "device")
    )
    sharding = jax.sharding.NamedSharding(by_process, jax.sharding.PartitionSpec("process"))
    whole = jax.make_array_from_process_local_data(sharding, x[mine], x.shape)
    global_rows, _ = step(whole)  # a global array in, global arrays out
    global_ok = global_rows.shape == x.shape and all(
        np.allclose(shard.data, want_rows[shard.index]) for shard in global_rows.addressable_shards
    )
    say("global-array call agrees with numpy:", global_ok)
    if disagree:
        return (
            0 if local_ok and global_ok and run_another(process_id, processes, x[mine], say) else 1
        )
    return 0 if local_ok and global_ok else 1


def run_another(process_id: int, processes: int, rows: np.ndarray, say) -> bool:
    """Every process but the last calls `total`, the last `peak`: each raises a
    ProcessError naming the two programs before either runs."""
    import jax

    @partial(pmapc.pmap, axis_name="data")
    def total(x):
        return pmapc.pmap(lambda y: jax.lax.psum(y, ("data", "model")), axis_name="model")(x)

    @partial(pmapc.pmap, axis_name="data")
    def peak(x):
        return pmapc.pmap(lambda y: jax.lax.pmax(y, "model"), axis_name="model")(x)

    try:
        (peak if process_id == processes - 1 else total)(rows)
    except pmapc.ProcessError as error:
        say("ProcessError:", error)
        return True
    say("the processes ran different programs, and no error was raised")
    return False


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch(processes: int, devices: int, timeout: float, disagree: bool = False) -> int:
    """Start the processes, relay their marked lines, and wait for them (bounded)."""
    port = str(free_port())
    children = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--process-id",
                str(i),
                "--processes",
                str(processes),
                "--devices",
                str(devices),
                "--port",
                port,
                *(["--disagree"] if disagree else []),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(processes)
    ]
    deadline = time.monotonic() + timeout
    status = 0
    try:
        for i, child in enumerate(children):
            output, _ = child.communicate(timeout=max(1.0, deadline - time.monotonic()))
            lines = output.splitlines()
            print("\n".join(line[line.index(MARK) :] for line in lines if MARK in line))
            if child.returncode != 0:
                print(f"process {i} exited with {child.returncode}:", *lines[-20:], sep="\n")
                status = 1
    except subprocess.TimeoutExpired:
        print(f"the processes did not finish in {timeout:.0f} s; stopping them")
        status = 1
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument(
        "--devices",
        type=int,
        default=4,
        help=f"CPU devices per process (a multiple of {ROWS_PER_PROCESS})",
    )
    parser.add_argument("--process-id", type=int, help="run as this process (set by the launcher)")
    parser.add_argument("--port", type=int)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument(
        "--disagree",
        action="store_true",
        help="then have the last process call another program than the others",
    )
    args = parser.parse_args()
    if args.process_id is None:
        return launch(args.processes, args.devices, args.timeout, args.disagree)
    return run_one_process(args.process_id, args.processes, args.devices, args.port, args.disagree)


if __name__ == "__main__":
    sys.exit(main())
