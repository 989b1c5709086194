"""Input and output helpers shared by the `pmapc` subcommands."""

from __future__ import annotations

import sys

from pmapc.errors import DiagnosticError, PmapcError


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
        location = error.location
        print(f"{location.file}:{location.line}: error: {error.message}", file=sys.stderr)
        return 1
    print(f"{prog}: error: {error}", file=sys.stderr)
    return 1
