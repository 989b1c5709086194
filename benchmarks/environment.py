"""What a benchmark's figures were measured on, stamped into every results file:
the date, the pmapc commit (and whether the checkout had changes outside
benchmarks/), the machine, and the JAX, jaxlib and Python releases.
benchmarks/tables.py prints the stamp above each table of benchmarks/README.md."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import jax
import jaxlib

REPO = Path(__file__).resolve().parent.parent


def _git(*command: str) -> str:
    done = subprocess.run(["git", *command], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(**extra) -> dict:
    """The stamp of a run, with `extra` (the mode, the command's settings) beside it."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "pmapc_commit": _git("rev-parse", "--short", "HEAD"),
        "pmapc_uncommitted_changes": bool(_git("status", "--porcelain", "--", ":!benchmarks")),
        "cpu_count": os.cpu_count(),
        "cpu": _cpu_model(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "python": platform.python_version(),
        "command": " ".join(["python", *sys.argv]),
        **extra,
    }


def write_results(path: Path, settings: dict, **results) -> None:
    """A benchmark's results file: `results` beside the stamp of this run (with the
    benchmark's `settings`), which benchmarks/tables.py renders."""
    path.write_text(json.dumps({"environment": environment(**settings), **results}, indent=1))
