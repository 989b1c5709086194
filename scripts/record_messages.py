"""Record the errors JAX 0.4.30's `jax.pmap` raises for `tests/py/support/message_cases.py`.

pmapc's messages for mistakes `jax.pmap` caught start with JAX 0.4.30's wording
(lowering/jax_messages.py); this records that wording from a side environment:

    python3 -m venv /tmp/jax0430
    /tmp/jax0430/bin/pip install jax==0.4.30 jaxlib==0.4.30 'numpy<2'
    /tmp/jax0430/bin/python scripts/record_messages.py           # from the repository root

It writes `tests/py/goldens/jax0430_messages.json`: for each case, the builtin class
of the error and its message.
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
from support import message_cases  # noqa: E402

JAX_VERSION = "0.4.30"
GOLDENS = ROOT / "tests" / "py" / "goldens" / "jax0430_messages.json"


def builtin_class(error: Exception) -> str:
    """The first builtin exception class in the error's MRO (JAX's errors subclass them)."""
    return next(c.__name__ for c in type(error).__mro__ if c.__module__ == "builtins")


def main() -> int:
    if jax.__version__ != JAX_VERSION:
        print(
            f"record_messages.py needs jax {JAX_VERSION}, found {jax.__version__}", file=sys.stderr
        )
        return 1
    recorded = {}
    for name, make_mistake in message_cases.cases(jax.pmap, jax.devices()).items():
        try:
            make_mistake()
        except Exception as error:  # what JAX raised is what we record
            recorded[name] = {"class": builtin_class(error), "message": str(error)}
        else:
            print(f"JAX {JAX_VERSION} raised nothing for '{name}'", file=sys.stderr)
            return 1
    GOLDENS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(recorded)} messages to {GOLDENS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
