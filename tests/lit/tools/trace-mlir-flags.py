# RUN: pmapc trace %S/../../../examples/quickstart.py:step --arg f32[2,4,3] --emit=spmd --mlir-print-ir-after=flatten-maps --mlir-timing 2>&1 >/dev/null | FileCheck %s
# RUN: pmapc trace %S/../../../examples/quickstart.py:step --arg f32[2,4,3] --emit=spmd --mlir-print-ir-after=flatten-maps 2>/dev/null | FileCheck %s --check-prefix=OUT

# pmapc trace takes pmapc opt's MLIR instrumentation flags: the passes run once
# more on the traced IR and MLIR prints on stderr; stdout keeps the IR asked for.

# CHECK: // -----// IR Dump After FlattenMapsPass: flatten-maps //----- //
# CHECK-NEXT: module @step attributes {pmapc.mesh
# CHECK-NOT: IR Dump
# CHECK: ... Execution time report ...
# CHECK: VerifyAxesPass
# CHECK: FlattenMapsPass

# OUT-NOT: IR Dump
# OUT: module @step attributes {mhlo.num_partitions = 8 : i32
