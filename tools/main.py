"""The `pmapc` command: `pmapc opt | trace | run | plan ...`, `pmapc --version`."""

from __future__ import annotations

import os
import platform
import sys
import traceback
from importlib import metadata

USAGE = """usage: pmapc <command> [options]
       pmapc --version

commands:
  opt     run passes on a pmapc-IR (.mlir) module (mlir-opt conventions)
  trace   trace a Python function decorated with pmapc.pmap to pmapc IR
  run     compile a module for its mesh, run it on devices, write outputs as .npy
  plan    print which devices talk in each collective, and the bytes they move

options:
  -h, --help     print this message
  -V, --version  print the versions of pmapc, JAX, jaxlib and Python

'pmapc <command> --help' describes each command."""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 1
    if argv[0] in ("-V", "--version"):
        print(version_line())
        return 0
    command, rest = argv[0], argv[1:]
    if command in ("trace", "run", "plan"):  # the commands that start JAX's backends
        quiet_plugins()
    if command == "opt":
        from pmapc.tools import opt

        return opt.main(rest)
    if command == "trace":
        from pmapc.tools import trace_cmd

        return trace_cmd.main(rest)
    if command == "run":
        from pmapc.tools import run_cmd

        return run_cmd.main(rest)
    if command == "plan":
        from pmapc.tools import plan_cmd

        return plan_cmd.main(rest)
    print(f"pmapc: error: unknown command '{command}'\n{USAGE}", file=sys.stderr)
    return 1


def quiet_plugins() -> None:
    """Register JAX's PJRT plugins with what they log on load dropped: with the targets
    extra on a machine without a GPU, the CUDA plugin's notes that there is none."""
    from pmapc.compiler import xla
    from pmapc.tools.common import native_stderr_dropped

    with native_stderr_dropped():
        xla.register_plugins()


def version_line() -> str:
    """`pmapc 0.1.0 (jax 0.10.2, jaxlib 0.10.2, Python 3.11.9)`, each from the installed
    packages' metadata."""
    from pmapc import __version__

    jax = ", ".join(f"{name} {_installed(name)}" for name in ("jax", "jaxlib"))
    return f"pmapc {__version__} ({jax}, Python {platform.python_version()})"


def _installed(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def entry_point() -> None:
    """Console entry: never let a Python traceback reach the user."""
    try:
        code = main(sys.argv[1:])
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # the reader left (`pmapc ... | head`): stop quietly, as cat does
        _silence_stdout()
        sys.exit(141)  # 128 + SIGPIPE, a shell's status for a process the pipe ended
    except SystemExit as exit_:
        raise exit_
    except Exception as error:  # an internal error: one line, unless asked for more
        if os.environ.get("PMAPC_TRACEBACK"):
            traceback.print_exc()
        print(
            f"pmapc: internal error: {type(error).__name__}: {error} (set PMAPC_TRACEBACK=1 "
            "for details and please report it)",
            file=sys.stderr,
        )
        code = 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = 141
    sys.exit(code)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit finds no closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
