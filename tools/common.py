"""Input and output helpers shared by the `pmapc` subcommands."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import NamedTuple

from pmapc import options
from pmapc.compiler import targets
from pmapc.errors import DeviceError, DiagnosticError, PmapcError, SourceLoc


def read_input(path: str, prog: str) -> str | None:
    """The text of `path` ('-': stdin), or None after printing why it cannot be read."""
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        print(f"{prog}: error: could not open input file '{path}': no such file", file=sys.stderr)
    except IsADirectoryError:
        print(
            f"{prog}: error: could not open input file '{path}': it is a directory", file=sys.stderr
        )
    except UnicodeDecodeError:
        print(
            f"{prog}: error: input file '{path}' is not UTF-8 text; expected a .mlir module",
            file=sys.stderr,
        )
    except OSError as error:
        print(f"{prog}: error: could not read '{path}': {error.strerror}", file=sys.stderr)
    return None


def write_output(path: str, text: str) -> None:
    if text and not text.endswith("\n"):
        text += "\n"
    if path == "-":
        sys.stdout.write(text)
        return
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def report_error(prog: str, error: Exception, filename: str | None = None) -> int:
    """Print an error as one diagnostic line (or several for IR) and return exit code 1.

    `filename` names the input file in IR locations that say "-".
    """
    if isinstance(error, DiagnosticError):
        print(error.render(filename), file=sys.stderr)
        return 1
    if isinstance(error, PmapcError) and error.location is not None:
        print(f"{render_location(error.location)}: error: {error.message}", file=sys.stderr)
        return 1
    print(f"{prog}: error: {error}", file=sys.stderr)
    return 1


def render_location(location: SourceLoc) -> str:
    """`file:line:col`, `file:line` or `file`: as much as is known (0 is unknown)."""
    if location.line <= 0:
        return location.file
    if location.col <= 0:
        return f"{location.file}:{location.line}"
    return str(location)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send what is written to stdout inside the block to stderr: Python's `print`
    (sys.stdout) and writes to file descriptor 1 (a C library's, a subprocess's)."""
    sys.stdout.flush()
    with _fd_pointed(1, at=2), contextlib.redirect_stdout(sys.stderr):
        yield


@contextlib.contextmanager
def _fd_pointed(fd: int, at: int) -> Iterator[None]:
    """`fd` writes where `at` does inside the block, and where it did after it."""
    saved = _point_fd(fd, at)
    try:
        yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, fd)
            os.close(saved)


def _point_fd(fd: int, at: int) -> int | None:
    """Make `fd` write where `at` does; return a copy of the old `fd` to restore, or
    None where either is closed."""
    try:
        saved = os.dup(fd)
    except OSError:
        return None
    try:
        os.dup2(at, fd)
    except OSError:
        os.close(saved)
        return None
    return saved


def option_type(kind: type[options.Option]):
    """An argparse `type` that reads a flag's text as a member of `kind` (an option
    enters typed here), refusing other text as argparse refuses a bad choice."""

    def parse(text: str) -> options.Option:
        member = options.parse(kind, text)
        if member is None:
            allowed = ", ".join(options.choices(kind))
            raise argparse.ArgumentTypeError(f"invalid choice: '{text}' (choose from {allowed})")
        return member

    parse.__name__ = kind.__name__
    return parse


def option_metavar(kind: type[options.Option]) -> str:
    return "{" + ",".join(options.choices(kind)) + "}"


def add_topology_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--topology",
        metavar="NAME",
        default=None,
        help=f"compile for a GPU machine or TPU pod slice by name ({targets.EXAMPLES}) "
        f"with XLA:GPU's or XLA:TPU's own compiler, on any machine, and {what}; needs "
        f"{targets.INSTALL}",
    )


class Topology(NamedTuple):
    """A topology named on the command line (compiler/targets.py), and its devices."""

    name: str
    devices: list

    def first(self, count: int, needed_by: str, fix: str) -> list:
        """The first `count` devices; where there are fewer, a DeviceError naming what
        needs them (`needed_by`: `--fold-onto 16`, the mesh), both counts and the
        `fix`. The one check of a topology's size, for every command."""
        if count > len(self.devices):
            raise DeviceError(
                f"{needed_by} needs {count} devices, but the topology '{self.name}' has "
                f"{len(self.devices)}; {fix}"
            )
        return self.devices[:count]


def topology(name: str) -> Topology:
    """The topology `name` and its devices. What libtpu and the CUDA plugin log while
    they describe it (harmless notes that no TPU or GPU is attached) is kept off the
    user's terminal."""
    with native_stderr_dropped():
        return Topology(name, targets.target_devices(name))


@contextlib.contextmanager
def native_stderr_dropped() -> Iterator[None]:
    """Drop what is written to file descriptor 2 inside the block (a C library's log
    lines); Python's exceptions still propagate and are reported after it."""
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        with _fd_pointed(2, at=devnull):
            yield
    finally:
        os.close(devnull)
