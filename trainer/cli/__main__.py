"""``python -m bnserve.trainer.cli``: the ``trainer`` command."""

from bnserve.trainer.cli.parser import run

run()
