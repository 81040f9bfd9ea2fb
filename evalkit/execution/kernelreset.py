"""What a warm kernel runs between two notebooks (`evalkit.execution.kernels`): back to a fresh kernel's state.

Imported inside the kernel; standard library and IPython only. A fresh kernel differs from a used one in its user
namespace (and the In/Out history), its execution counter, its working directory and the warnings each
module has already shown once (a fresh kernel would show them again). Imported modules stay: that is the
point of a warm kernel.
"""

from __future__ import annotations

import gc
import os
import warnings

from IPython import get_ipython

_filters = list(warnings.filters)  # as the kernel started


def _no_collect(generation: int = 2) -> int:
    return 0


def reset(cwd: str) -> None:
    ip = get_ipython()
    collect, gc.collect = gc.collect, _no_collect  # reset's full collection costs ~50 ms a notebook and
    try:                                           # changes nothing a notebook shows
        ip.reset(new_session=False)  # user namespace, In/Out, the output cache
    finally:
        gc.collect = collect
    ip.execution_count = 1  # the next cell is In [1], as in a fresh kernel
    os.chdir(cwd)
    warnings.filters[:] = _filters
    warnings._filters_mutated()  # every module's "already shown once" registry is stale from here
