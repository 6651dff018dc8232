"""``one_blas_thread``: the trainer's BLAS calls run on one thread, its parallelism being
processes, and so do those of a BLAS loaded after the first call (scipy's own, which
L-BFGS-B calls: kept out of a controller made before it, it spun a second core)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_blas_loaded_after_the_first_call_runs_on_one_thread_too():
    script = textwrap.dedent(
        """
        import sys
        import numpy
        from threadpoolctl import threadpool_info
        from bnserve.trainer.blas import one_blas_thread
        assert "scipy.linalg" not in sys.modules
        with one_blas_thread():
            pass
        import scipy.linalg  # scipy's BLAS, after the first call
        with one_blas_thread():
            inside = [(lib["filepath"], lib["num_threads"]) for lib in threadpool_info() if lib["user_api"] == "blas"]
        print(len({path for path, _ in inside}), max(n for _, n in inside))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={"OPENBLAS_NUM_THREADS": "2", "PATH": ""},
    )
    libraries, most_threads = map(int, done.stdout.split())
    assert libraries >= 2  # numpy's and scipy's, so the check sees the late one
    assert most_threads == 1
