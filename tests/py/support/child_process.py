"""Run pmapc in a spawned child process, so that a crash or a hang fails one test.

`ChildProcess.run(function, *args)` calls a module-level `function(*args)` in a
child with 8 CPU devices and returns what it returned (numpy arrays: pickled back).
A segfault or a deadlock then fails the call that caused it, with the Python
stacks the child's faulthandler wrote, and hypothesis can shrink the input,
instead of killing pytest. The child starts on first use and again after a crash.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
import tempfile
import time
import traceback
from collections.abc import Callable

import pmapc


class ChildFailure(AssertionError):
    """The child raised an error, crashed or hung; `details` says what it reported."""

    def __init__(self, summary: str, details: str):
        super().__init__(f"{summary}:\n{details}")
        self.details = details


class ChildProcess:
    def __init__(self, timeout: float = 120.0):
        self.timeout = timeout
        self.process = self.connection = None
        handle, self.fault_log = tempfile.mkstemp(prefix="pmapc-faults-", suffix=".txt")
        os.close(handle)

    def run(self, function: Callable, *args):
        if self.process is None:
            self.start()
        self.connection.send((function, args))
        if not self.connection.poll(self.timeout):
            os.kill(self.process.pid, signal.SIGUSR1)  # its faulthandler writes every stack
            time.sleep(1)
            self.fail(f"pmapc did not finish in {self.timeout:.0f} s (a deadlock?)")
        try:
            status, value = self.connection.recv()
        except EOFError:
            status, value = "crashed", None
        if status == "crashed":
            self.process.join()
            self.fail(f"pmapc crashed its process (exit code {self.process.exitcode})")
        if status == "error":
            raise ChildFailure("pmapc raised an error", value)
        return value

    def fail(self, summary: str):
        """Stop the child; raise a ChildFailure with the Python stacks it wrote."""
        self.stop()
        with open(self.fault_log) as log:
            raise ChildFailure(summary, log.read())

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=serve, args=(child_end, self.fault_log), daemon=True)
        self.process.start()
        child_end.close()  # so that the child's death reads as EOF here

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()
            self.connection.close()
        self.process = self.connection = None

    def close(self) -> None:
        self.stop()
        os.unlink(self.fault_log)


def serve(connection, fault_log: str) -> None:
    """The child: run every (function, args) received, send back the result."""
    log = open(fault_log, "w")  # open until the child exits
    faulthandler.enable(log)
    faulthandler.register(signal.SIGUSR1, log, all_threads=True)
    pmapc.use_host_devices(8)
    while True:
        try:
            function, args = connection.recv()
        except EOFError:
            return
        try:
            reply = ("ok", function(*args))
        except Exception as error:
            reply = ("error", describe(error))
        connection.send(reply)


def describe(error: Exception) -> str:
    """The traceback, and the error pmapc raised it from (with the IR diagnostics' notes)."""
    text = "".join(traceback.format_exception(error))
    return text if error.__context__ is None else f"{text}\nraised from:\n{error.__context__}"
