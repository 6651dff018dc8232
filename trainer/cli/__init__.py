"""``trainer`` command line: fit and publish, evaluate, predict (batch scoring), list, show, alias, delete, import, export.

One module per subcommand (``fit``, ``evaluate``, ``predict``, ``catalog``: list and show,
``aliases``: alias, unalias and delete, ``transfer``: import and export, ``db``), the parser
and ``main`` in ``parser``, the shared flags in ``flags`` and ``learning``. The subcommands
that train only build a ``TrainingSpec``; ``bnserve.trainer.plan`` does the rest.

Exit codes: 0 ok, 1 data or store error, 2 usage error. Our own errors print one line on
stderr, never a traceback. Bad input is rejected before anything is written.
"""

from bnserve.trainer.cli.parser import build_parser, main, run

__all__ = ["build_parser", "main", "run"]
