"""Processes agree on a program before it first runs.

Every process of a `jax.distributed` run must run the same programs in the same
order: each collective waits for its peers, and a process that runs another
program (or none) leaves the others blocked in it, for ever on GPUs and TPUs, or
until gloo gives up with an error that names neither program.

So before a new program first runs across processes, each process writes what
it is about to run to JAX's distributed key-value store, under the number of new
programs it has run before (its n-th), and reads every other process's n-th:

- a `Program`: a digest of the program's structure (the same in every process
  that traces the same code on the same shapes), the function's name, where it is
  defined, and the shapes it takes;
- if every process wrote the same digest, the program runs, and later calls of
  it do not ask again: warm calls pay nothing;
- if they differ, every process raises a `ProcessError` naming each process's
  program, its source line and its shapes;
- if a process has not written its n-th within the time `set_process_timeout`
  sets (`DEFAULT_TIMEOUT` seconds, well under the 30 s after which gloo fails),
  the processes that did raise a `ProcessError` naming those that did not arrive.

The store is the coordinator's (compiler/xla.py: `distributed_client`); each
process writes one short key per new program. `STATS` counts the agreements and
the seconds they took (the digest included), for tests and benchmarks
(benchmarks/processes.py).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time

from pmapc.compiler import xla
from pmapc.errors import ProcessError

DEFAULT_TIMEOUT = 10.0  # seconds
POLL_SECONDS = 0.5  # the longest wait for one process before looking for all again
PREFIX = "pmapc/program"


@dataclasses.dataclass
class Stats:
    agreements: int = 0
    seconds: float = 0.0

    def add(self, seconds: float) -> None:
        self.agreements += 1
        self.seconds += seconds


STATS = Stats()
_timeout = DEFAULT_TIMEOUT
_counter = itertools.count()
_lock = threading.Lock()


def set_process_timeout(seconds: float) -> None:
    """How long a process waits for the others to reach a new program before it
    raises a `ProcessError` naming those that did not (default `DEFAULT_TIMEOUT`)."""
    global _timeout
    if not seconds > 0:
        raise ValueError(f"set_process_timeout needs a positive number of seconds, got {seconds}")
    _timeout = float(seconds)


@dataclasses.dataclass(frozen=True)
class Program:
    """What a process is about to run, as the others read it."""

    digest: str
    name: str
    where: str  # file:line of its definition ("" where unknown)
    shapes: str  # the shapes it takes, e.g. "f32[4,8], f32[]"

    def describe(self) -> str:
        at = f" (defined at {self.where})" if self.where else ""
        return f"'{self.name}'{at} on {self.shapes or 'no arrays'}"


def agree(program: Program, process: int, count: int) -> None:
    """Wait until every one of the `count` processes has written its next program and
    check that it is `program` (module docstring); `process` is this one's index."""
    client = xla.distributed_client()
    if client is None or count < 2:
        return
    with _lock:  # the n-th new program of this process: one number per program
        number = next(_counter)
    xla.key_value_set(client, _key(number, process), json.dumps(dataclasses.asdict(program)))
    seen: dict[int, Program] = {process: program}
    missing = _wait_for(client, number, [p for p in range(count) if p != process], seen)
    if missing:
        raise ProcessError(_missing(program, process, number, missing))
    if any(other.digest != program.digest for other in seen.values()):
        raise ProcessError(_differ(seen, number))


def _wait_for(client, number: int, others: list[int], seen: dict[int, Program]) -> list[int]:
    """Read the `number`-th program of each of `others` into `seen` as it arrives; those
    that have not arrived within the timeout. Every pass looks for each process
    still missing, then waits up to `POLL_SECONDS` for one of them in turn: a
    process that arrives while another is awaited is found at the next pass."""
    deadline = time.monotonic() + _timeout
    pending = list(others)
    while pending:
        for other in list(pending):
            value = xla.key_value_get(client, _key(number, other), 0)
            if value is not None:
                seen[other] = Program(**json.loads(value))
                pending.remove(other)
        left = deadline - time.monotonic()
        if not pending or left <= 0:
            break
        awaited = pending[0]
        value = xla.key_value_get(client, _key(number, awaited), min(left, POLL_SECONDS))
        if value is not None:
            seen[awaited] = Program(**json.loads(value))
            pending.remove(awaited)
        else:
            pending.append(pending.pop(0))  # the next pass waits for another first
    return sorted(pending)


def _key(number: int, process: int) -> str:
    return f"{PREFIX}/{number}/{process}"


def _ordinal(number: int) -> str:
    return f"new program number {number + 1}"


def _missing(program: Program, process: int, number: int, missing: list[int]) -> str:
    who = ", ".join(map(str, missing))
    plural = "es" if len(missing) > 1 else ""
    return (
        f"process{plural} {who} did not reach this process's {_ordinal(number)} within "
        f"{_timeout:g} s: process {process} runs {program.describe()}; every process "
        "must call the same pmapc programs in the same order (a process that skips a "
        "call, or is still busy, leaves the others waiting in its collectives); "
        "pmapc.set_process_timeout(seconds) sets the wait"
    )


def _differ(seen: dict[int, Program], number: int) -> str:
    runs = "; ".join(f"process {p} runs {seen[p].describe()}" for p in sorted(seen))
    return (
        f"the processes run different programs as their {_ordinal(number)}: {runs}; "
        "every process must call the same pmapc programs, on the same shapes, in the "
        "same order"
    )
