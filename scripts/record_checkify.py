"""Record what JAX 0.4.30's `checkify` returns for `tests/py/support/checkify_cases.py`.

pmapc's checkify rule gives the error JAX 0.4.30's nested `jax.pmap` gave; this
records it from a side environment (see scripts/record_messages.py for making one):

    /tmp/jax0430/bin/python scripts/record_checkify.py            # from the repository root

It writes `tests/py/goldens/jax0430_checkify.json`: for each case, the error's
message (`err.get()`, None when no check failed), the function and line of
tests/py/support/checkify_cases.py where it arose, and the outputs.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "py"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import checkify  # noqa: E402
from support import checkify_cases  # noqa: E402

JAX_VERSION = "0.4.30"
GOLDENS = ROOT / "tests" / "py" / "goldens" / "jax0430_checkify.json"


def main() -> int:
    if jax.__version__ != JAX_VERSION:
        print(
            f"record_checkify.py needs jax {JAX_VERSION}, found {jax.__version__}", file=sys.stderr
        )
        return 1
    recorded = {}
    for name, (program, argument, errors) in checkify_cases.cases(jax.pmap).items():
        error, output = checkify.checkify(program, errors=errors)(argument)
        recorded[name] = {
            "error": error.get(),
            "location": checkify_cases.location(error),
            "output": np.asarray(output).tolist(),
        }
    lines = [f" {json.dumps(name)}: {json.dumps(recorded[name])}" for name in sorted(recorded)]
    GOLDENS.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"wrote {len(recorded)} cases to {GOLDENS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
