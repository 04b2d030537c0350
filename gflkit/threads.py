"""How many CPU threads torch uses: ``--threads`` on the command line, ``GFLKIT_THREADS`` everywhere.

torch uses every core by default. When another process shares the cores (a background ``precompute``,
the test suite, a second notebook), that oversubscription made a small run about 100× slower on a
2-core machine than one thread did. :func:`limit_threads` sets torch's intra-op threads and exports
``GFLKIT_THREADS`` / ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` so that notebook kernels and other child
processes started afterwards use the same number.
"""
from __future__ import annotations

import os
import sys

ENV_THREADS = "GFLKIT_THREADS"


def limit_threads(threads: int | None = None) -> int | None:
    """Use ``threads`` CPU threads (else ``$GFLKIT_THREADS``; neither: leave torch's default, return None).

    Raises ValueError for a count below 1 or a ``GFLKIT_THREADS`` that is not an integer.
    """
    if threads is None:
        value = os.environ.get(ENV_THREADS, "").strip()
        if not value:
            return None
        try:
            threads = int(value)
        except ValueError:
            raise ValueError(f"{ENV_THREADS}={value!r} is not a number of threads; set it to e.g. 1") from None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer (e.g. 1 when another job shares the cores), "
                         f"got {threads!r}")
    for variable in (ENV_THREADS, "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(threads)
    if "torch" in sys.modules:  # otherwise torch reads OMP_NUM_THREADS when it is imported
        sys.modules["torch"].set_num_threads(threads)
    return threads
