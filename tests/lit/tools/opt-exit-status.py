# RUN: %PYTHON %s pmapc %S/Inputs | FileCheck %s

# `pmapc opt` exit statuses, as mlir-opt's: 0 on success, 1 for an error in
# the input or the pipeline, 2 for a bad command line. No case may print a
# Python traceback.

import subprocess
import sys

PMAPC, INPUTS = sys.argv[1], sys.argv[2]
MALFORMED = "module {\n  func.func @main() {\n    %0 = stablehlo.bogus\n  }\n}\n"
UNBOUND = """module @unbound {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32,
           backend_config = {axes = ["i"]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
"""


TRACEBACKS = []


def run(name, args, stdin=""):
    print(f"TEST: {name}")
    done = subprocess.run([PMAPC, "opt", *args], input=stdin, capture_output=True, text=True)
    print(f"exit status: {done.returncode}")
    if "Traceback" in done.stderr + done.stdout:
        TRACEBACKS.append(name)
    for line in done.stderr.splitlines():
        print(f"stderr: {line}")


# CHECK-LABEL: TEST: valid_input
# CHECK-NEXT: exit status: 0
run("valid_input", [f"{INPUTS}/psum_over_i.mlir", "--pmapc-to-stablehlo"])

# CHECK-LABEL: TEST: malformed_input
# CHECK-NEXT: exit status: 1
# CHECK-NEXT: stderr: <stdin>:3:10: error: custom op 'stablehlo.bogus' is unknown
run("malformed_input", ["-"], MALFORMED)

# CHECK-LABEL: TEST: pass_error
# CHECK-NEXT: exit status: 1
# CHECK-NEXT: stderr: <stdin>:3:10: error: axis 'i' is not bound here
run("pass_error", ["-", "--verify-axes"], UNBOUND)

# CHECK-LABEL: TEST: unknown_pass
# CHECK-NEXT: exit status: 1
# CHECK-NEXT: stderr: pmapc opt: error: unknown pass 'nope'
run("unknown_pass", ["-", "--pass-pipeline=builtin.module(nope)"], MALFORMED)

# CHECK-LABEL: TEST: missing_input_file
# CHECK-NEXT: exit status: 1
# CHECK-NEXT: stderr: pmapc opt: error: could not open input file
# CHECK-SAME: '{{.*}}no-such-file.mlir': no such file
run("missing_input_file", [f"{INPUTS}/no-such-file.mlir"])

# CHECK-LABEL: TEST: unknown_flag
# CHECK-NEXT: exit status: 2
# CHECK: stderr: pmapc opt: error: unrecognized arguments: --no-such-flag
run("unknown_flag", ["-", "--no-such-flag"], MALFORMED)

# CHECK-LABEL: TEST: summary
# CHECK-NEXT: tracebacks: []
print("TEST: summary")
print(f"tracebacks: {TRACEBACKS}")
