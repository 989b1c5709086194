"""Print the pmapc IR of a function for FileCheck: `TEST: <name>`, then the IR."""

import pmapc


def show(name, function, *args, stage="pmapc"):
    print(f"TEST: {name}")
    print(pmapc.lower(function, *args).as_text(stage), flush=True)
