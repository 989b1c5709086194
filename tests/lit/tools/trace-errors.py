# RUN: not pmapc trace %s:stpe --arg f32[2,4] 2>&1 | FileCheck %s --check-prefix=MISSING
# RUN: not pmapc trace %s:TABLE 2>&1 | FileCheck %s --check-prefix=NOT-FUNCTION
# RUN: not pmapc trace %s:step --arg f32[2,4] --static 1=foo 2>&1 | FileCheck %s --check-prefix=LITERAL
# RUN: not pmapc trace %s:step --arg f32[2,4] --static 1=[2] 2>&1 | FileCheck %s --check-prefix=UNHASHABLE
# RUN: not pmapc trace %s:step --arg f32[2,4] --static one=2 2>&1 | FileCheck %s --check-prefix=FORM
# RUN: not pmapc trace %s:step --arg f32[2,4] 2>&1 | FileCheck %s --check-prefix=NO-STATIC
# RUN: not pmapc trace %s:step --arg f32[2,4] --static 0=2 --static 1=3 2>&1 | FileCheck %s --check-prefix=MAPPED
# RUN: not pmapc trace %s:plain --arg f32[2,4] --static 3=2 2>&1 | FileCheck %s --check-prefix=GAP
# RUN: not pmapc trace %s:plain --arg f32[2,4] --arg f32[] 2>&1 | FileCheck %s --check-prefix=RAISES
# RUN: not pmapc trace %S/Inputs/psum_over_i.mlir:f 2>&1 | FileCheck %s --check-prefix=NOT-PYTHON
# RUN: echo "x = (" > %t.syntax.py
# RUN: not pmapc trace %t.syntax.py:f 2>&1 | FileCheck %s --check-prefix=SYNTAX
# RUN: echo "undefined_name" > %t.name.py
# RUN: not pmapc trace %t.name.py:f 2>&1 | FileCheck %s --check-prefix=IMPORT

# An error about the file or the function `pmapc trace` is given is one line at
# the user's file: at the function's `def` when the function is found, at the
# line that raised when the file's code raises, else at the file.

from functools import partial

import jax

import pmapc

TABLE = {"sum": 1}


# MISSING: {{.*}}trace-errors.py: error: no top-level function 'stpe' in this file; did you mean 'step' (line [[# @LINE + 14]])?
# MISSING-NOT: Traceback
# NOT-FUNCTION: {{.*}}trace-errors.py:[[# @LINE - 5]]:1: error: 'TABLE' is a dict, not a function; name a function that calls pmapc.pmap
# LITERAL: {{.*}}trace-errors.py:[[# @LINE + 11]]:1: error: bad --static '1=foo': 'foo' is not a Python literal; write a number, a quoted string
# UNHASHABLE: {{.*}}trace-errors.py:[[# @LINE + 10]]:1: error: bad --static '1=[2]': a static argument must be hashable, got a list; write a tuple
# FORM: {{.*}}trace-errors.py:[[# @LINE + 9]]:1: error: bad --static 'one=2'; write INDEX=VALUE, INDEX counted from 0
# NO-STATIC: {{.*}}trace-errors.py:[[# @LINE + 8]]:1: error: 'step' has static_broadcasted_argnums=(1,): give argument 1 a value with --static 1=VALUE
# MAPPED: {{.*}}trace-errors.py:[[# @LINE + 7]]:1: error: --static 0: argument 0 of 'step' is mapped, not static (its static_broadcasted_argnums are (1,)); give it as an --arg
# NOT-PYTHON: {{.*}}psum_over_i.mlir: error: Python cannot load this file as a module; name a .py file
# SYNTAX: {{.*}}.syntax.py:1:5: error: SyntaxError: '(' was never closed
# IMPORT: {{.*}}.name.py:1: error: NameError: name 'undefined_name' is not defined


@partial(pmapc.pmap, axis_name="data", static_broadcasted_argnums=1)
def step(x, scale):
    return jax.lax.psum(x * scale, "data")


# GAP: {{.*}}trace-errors.py:[[# @LINE + 1]]:1: error: --static 3: the call has 2 positional argument(s) (1 --arg, 1 --static), so argument 3 would leave a gap
def plain(x, count):
    # RAISES: {{.*}}trace-errors.py:[[# @LINE + 1]]: error: TypeError: Shapes must be 1D sequences of concrete values of integer type
    return step(x.reshape(count, -1), 2)
