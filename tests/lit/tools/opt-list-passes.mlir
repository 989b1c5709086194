// RUN: pmapc opt --list-passes | FileCheck %s

// --list-passes names each pass with its docstring's first line and its
// options with their defaults, then the named pipelines (for the default
// target) and their options. It needs no input.

// CHECK: Passes:
// CHECK: --verify-axes {{ *}}Check that maps and named-axis collectives are well formed and their axes bound.
// CHECK: --flatten-maps {{ *}}Inline nested maps into one SPMD program over the device mesh.
// CHECK-NEXT: {{^ *}}{split-entry=true} (defaults)
// CHECK: --predicate-divergent {{ *}}Run branches and loops whose predicate splits a collective's group on every device.
// CHECK: --lower-collectives {{ *}}Rewrite named-axis collectives into StableHLO collectives with replica groups.
// CHECK: --to-partitions {{ *}}Put a lowered program in partition form
// CHECK-NEXT: {{^ *}}{first-channel=1 replica-groups=named} (defaults)
// CHECK: --to-replicas {{ *}}Put a lowered program in replica form
// CHECK: Pipelines:
// CHECK: --pmapc-lower {{ *}}verify-axes,flatten-maps,predicate-divergent,lower-collectives,to-partitions{{$}}
// CHECK: --pmapc-to-stablehlo {{ *}}verify-axes,flatten-maps,{{.*}},combine-all-reduces,to-partitions,fold-reshapes,canonicalize{region-simplify=disabled},cse{{$}}
// CHECK: --simplify {{ *}}fold-reshapes,canonicalize{region-simplify=disabled},cse{{$}}
// CHECK: {target=partitions|replicas} (default partitions): the form the pipeline puts the program in, by to-partitions or to-replicas
// CHECK: {replica-groups=named|dense} (default named): in partition form, replica groups as mesh axes or as device ids
