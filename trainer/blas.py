"""BLAS on one thread for the trainer's small products: its parallelism is processes
(``--jobs``), and OpenBLAS's threads, once woken, spin on the other cores after each call
(a 106 x 285 one-hot product on two threads cost twice its CPU, and slowed every count after
it). One controller for the process: making one reads the loaded libraries (0.7 ms a call
through ``threadpool_limits``, 0.2 ms through a kept one)."""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager
from typing import Any


@functools.cache
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController  # 20 ms of imports, on the paths that need it only

    return ThreadpoolController()


def one_blas_thread() -> AbstractContextManager[Any]:
    """A context in which BLAS calls of this process run on one thread."""
    return _controller().limit(limits=1, user_api="blas")
