// RUN: not pmapc opt %s 2>&1 | FileCheck %s
// RUN: not pmapc opt - < %s 2>&1 | FileCheck %s --check-prefix=STDIN

// A parse error is one `file:line:col: error:` line on stderr and a failing
// exit status (exactly 1: see opt-exit-status.py); no Python traceback. From
// stdin the file is called <stdin>.

// CHECK-NOT: Traceback
// CHECK: opt-malformed-input.mlir:[[# @LINE + 8]]:10: error: custom op 'stablehlo.bogus' is unknown
// CHECK-NOT: Traceback
// CHECK-NOT: module

// STDIN: <stdin>:[[# @LINE + 4]]:10: error: custom op 'stablehlo.bogus' is unknown

module @malformed {
  func.func public @main() {
    %0 = stablehlo.bogus
  }
}
