"""BLAS on one thread for the trainer's small products: its parallelism is processes
(``--jobs``), and OpenBLAS's threads, once woken, spin on the other cores after each call
(a 106 x 285 one-hot product on two threads cost twice its CPU, and slowed every count after
it). A controller reads the loaded libraries when it is made (0.5 ms): one is kept while no
module is imported, since a BLAS loaded later (scipy's own, with L-BFGS-B) would escape it."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import Any

_kept: tuple[int, Any] | None = None  # (modules loaded when made, the controller)


def one_blas_thread() -> AbstractContextManager[Any]:
    """A context in which the BLAS calls of this process run on one thread."""
    global _kept
    if _kept is None or _kept[0] != len(sys.modules):
        from threadpoolctl import ThreadpoolController  # 20 ms of imports, on the paths that need it only

        controller = ThreadpoolController()
        _kept = (len(sys.modules), controller)
    return _kept[1].limit(limits=1, user_api="blas")
